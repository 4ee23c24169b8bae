"""Render the estimator lab's files (experiments/estimators.py): OUT/report/summary.md and PNG figures.

    python -m analysis.estimators OUT

Reads OUT/baselines.csv, OUT/std_weight.csv, OUT/kl_values.csv, OUT/kl_gradients.csv and OUT/lab.json only.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.lab_report import load_files, report_cli, write_report  # noqa: E402
from gcframe.errors import cli_entry  # noqa: E402

DPI = 72
NAMES = {"reinforce": "REINFORCE (no baseline)", "mean": "group mean (GRPO)", "loo": "leave-one-out (RLOO)",
         "critic": "learned critic V_ψ (PPO)", "value": "true value p_q", "best_constant": "best constant b*_q"}


def load(out: Path) -> dict:
    return load_files(out, ("baselines", "std_weight", "kl_values", "kl_gradients"), "lab.json",
                      "experiments/estimators.py")


def fig_baselines(df: pd.DataFrame, path: Path) -> None:
    """Relative bias, cosine, relative variance and relative MSE against G, one line per estimator."""
    df = df.assign(estimator=df["estimator"].map(NAMES), scaling=df["std_scaling"].map({False: "r − b",
                                                                                    True: "(r − b)/std"}),
                   rel_var=df["variance"] / df["g_star_norm2"])
    cols = [("rel_bias", "‖E ĝ − g*‖ / ‖g*‖"), ("cosine", "cos(E ĝ, g*)"), ("nsr", "Var / ‖E ĝ‖²"),
            ("nsr_within", "Var within prompts / ‖E ĝ‖²"), ("rel_mse", "MSE / ‖g*‖²")]
    policies = list(dict.fromkeys(df["policy"]))
    fig, axes = plt.subplots(len(policies), 5, figsize=(21, 3.6 * len(policies)), squeeze=False)
    for i, pol in enumerate(policies):
        sub = df[df["policy"] == pol]
        for j, (col, title) in enumerate(cols):
            ax = axes[i, j]
            sns.lineplot(data=sub, x="G", y=col, hue="estimator", style="scaling", marker="o", ax=ax,
                         legend=(i == 0 and j == 4))
            ax.set_xscale("log", base=2)
            if col in ("nsr", "nsr_within", "rel_mse"):
                ax.set_yscale("log")
            ax.set_title(f"{pol}: {title}", fontsize=9)
    if axes[0, 4].get_legend():
        sns.move_legend(axes[0, 4], "upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.suptitle(f"Gradient estimators at equal N = B·G = {int(df['N'].iloc[0])} (exact: first answer token enumerated)")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def fig_std_and_kl(weights: pd.DataFrame, kl: pd.DataFrame, path: Path) -> None:
    """Left: std scaling's effective weight against p; middle/right: the KL estimators' values against KL."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    sns.lineplot(data=weights.assign(G=weights["G"].astype(str)), x="p", y="weight", hue="G", ax=axes[0])
    ref = weights[weights["G"] == weights["G"].max()]
    axes[0].plot(ref["p"], ref["one_over_std"], "k--", label="1/√(p(1−p))")
    axes[0].set(yscale="log", title="std scaling: weight of a prompt vs its success rate p\n"
                "(E-shrink with std / without; sample std, n − 1)", ylabel="effective weight")
    axes[0].legend(fontsize=8)
    long = pd.concat([kl.assign(estimator=k, bias=kl[f"{k}_bias"], std=kl[f"{k}_std"], neg=kl[f"{k}_neg"])
                      for k in ("k1", "k2", "k3")])
    sns.lineplot(data=long, x="kl", y="bias", hue="estimator", marker="o", ax=axes[1])
    axes[1].set(title="mean bias E[k] − KL per token (exact per position)", xlabel="KL(π_θ‖π_ref) per token")
    sns.lineplot(data=long, x="kl", y="std", hue="estimator", style="estimator", marker="o", ax=axes[2])
    axes[2].set(title="std of the estimator per token", xlabel="KL(π_θ‖π_ref) per token")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def markdown(df: pd.DataFrame) -> str:
    """A pipe table (pandas' to_markdown needs tabulate, which is not a dependency)."""
    cell = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    rows = [list(df.columns), ["---"] * len(df.columns)] + [[cell(v) for v in r] for r in df.itertuples(index=False)]
    return "\n".join("| " + " | ".join(map(str, r)) + " |" for r in rows)


def summary(d: dict) -> str:
    b = d["baselines"]
    lines = ["# Estimator lab", "", f"settings: {json.dumps({k: d['info'].get(k) for k in ('quick', 'prompts', 'N')})}",
             f"times (s): {d['info'].get('time_s')}", ""]
    for pol, meta in ((k, v) for k, v in d["info"].items() if isinstance(v, dict) and "p_mean" in v):
        lines.append(f"- {pol}: success rate of the first answer token p mean {meta['p_mean']:.3f} "
                     f"(min {meta['p_min']:.3f}, max {meta['p_max']:.3f}); critic |V_ψ − p| {meta['critic_abs_err']:.3f}")
    lines += ["", "## Baselines (exact)", ""]
    t = b.assign(rel_var=b["variance"] / b["g_star_norm2"])[
        ["policy", "estimator", "std_scaling", "G", "B", "rel_bias", "cosine", "rel_var", "nsr", "nsr_within", "rel_mse"]]
    lines.append(markdown(t))
    lines += ["", "## KL estimators as values", "", markdown(d["kl_values"])]
    lines += ["", "## KL estimators as loss terms (expected gradients)", "",
              markdown(d["kl_gradients"])]
    return "\n".join(lines) + "\n"


def render(out: Path) -> Path:
    return write_report(out, load, {
        "estimators_baselines.png": lambda d, path: fig_baselines(d["baselines"], path),
        "estimators_std_kl.png": lambda d, path: fig_std_and_kl(d["std_weight"], d["kl_values"], path)}, summary)


@cli_entry
def main(argv=None) -> int:
    return report_cli(argv, render, "python -m analysis.estimators OUT (the --out folder of experiments/estimators.py)")


if __name__ == "__main__":
    sys.exit(main())
