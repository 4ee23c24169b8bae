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
    cell = lambda v: ("n/a" if v != v else f"{v:.4g}") if isinstance(v, float) else str(v)  # noqa: E731  NaN: n/a
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


def _num(v: float) -> str:
    return "0" if abs(v) < 1e-12 else f"{v:.4g}"


def variance_table(b: pd.DataFrame) -> pd.DataFrame:
    """Noise-to-signal Var / ‖E ĝ‖² without std scaling: within prompts at both policies and in total at the base,
    at G = 2 / 8 / 64 (the group mean and leave-one-out share a row: without std scaling they differ by the factor
    G / (G − 1), which the ratio does not see)."""
    b = b[~b["std_scaling"].astype(bool)]
    base, late = b["policy"].unique()[0], b["policy"].unique()[-1]
    labels = {**NAMES, "mean": "group mean (GRPO) = leave-one-out (RLOO)"}

    def cells(est, policy, col):
        e = b[(b["estimator"] == est) & (b["policy"] == policy)].set_index("G")[col]
        return " / ".join(_num(e.get(g, float("nan"))) for g in (2, 8, 64))

    rows = [{"estimator (no std scaling)": labels[est], f"within, {base} G=2 / 8 / 64": cells(est, base, "nsr_within"),
             f"within, {late} G=2 / 8 / 64": cells(est, late, "nsr_within"),
             f"total, {base} G=2 / 8 / 64": cells(est, base, "nsr")}
            for est in ("reinforce", "mean", "critic", "value", "best_constant")]
    return pd.DataFrame(rows)


def kl_value_table(kv: pd.DataFrame) -> pd.DataFrame:
    """Each KL estimator's value per token on the policy's own samples: bias, std and the share below 0."""
    def f(v):
        return "0" if abs(v) < 1e-12 else f"{v:+.2g}" if abs(v) < 1e-3 else f"{v:+.4f}"
    return pd.DataFrame([{"KL(π_θ‖π_ref) per token": f"{r.kl:.4f} ({r.policy})",
                          "k1 bias / std / P(<0)": f"{f(r.k1_bias)} / {r.k1_std:.3f} / {r.k1_neg:.2f}",
                          "k2 bias / std": f"{f(r.k2_bias)} / {r.k2_std:.3f}",
                          "k3 bias / std / P(<0)": f"{f(r.k3_bias)} / {r.k3_std:.3f} / {r.k3_neg:.2f}"}
                         for r in kv.itertuples()])


def kl_gradient_table(kg: pd.DataFrame) -> pd.DataFrame:
    """Relative error ‖E∇ − ∇target‖ / ‖∇target‖ of each KL term's expected gradient at every policy of the
    drift run (joined by ' / '); 0 means below 1e-12."""
    cols = {"per token, on-policy: vs ∇KL(π_θ‖π_ref)": ("on-policy", "token", "KL(θ‖ref)"),
            "per token, on-policy: vs ∇KL(π_ref‖π_θ)": ("on-policy", "token", "KL(ref‖θ)"),
            "per token, after μ = 4 updates: vs ∇KL(π_θ‖π_ref)": ("off", "token", "KL(θ‖ref)"),
            "sequence, on-policy: vs ∇KL_seq(π_θ‖π_ref)": ("on-policy", "sequence", "KL(θ‖ref) seq"),
            "sequence, after μ = 4 updates: vs ∇KL_seq(π_θ‖π_ref)": ("off", "sequence", "KL(θ‖ref) seq")}
    rows = []
    for est in ("k1", "k2", "k3", "k3_ratio", "k1_reward"):
        row = {"term in the loss": {"k3": "k3 (DeepSeekMath, the seed)", "k3_ratio": "k3_ratio = r·k3",
                                    "k1_reward": "k1 folded into the reward (PPO)"}.get(est, est)}
        for name, (setting, level, target) in cols.items():
            e = kg[(kg["estimator"] == est) & (kg["level"] == level) & (kg["target"] == target)
                   & kg["setting"].str.startswith(setting)].sort_values("step")
            row[name] = " / ".join("0" if v < 1e-12 else f"{v:.2g}" for v in e["rel_err"]) or "–"
        rows.append(row)
    return pd.DataFrame(rows)


def render(out: Path) -> Path:
    return write_report(out, load, {
        "estimators_baselines.png": lambda d, path: fig_baselines(d["baselines"], path),
        "estimators_std_kl.png": lambda d, path: fig_std_and_kl(d["std_weight"], d["kl_values"], path)}, summary,
        tables={"variance_table.csv": lambda d: variance_table(d["baselines"]),  # what results/estimators/ shows
                "kl_value_table.csv": lambda d: kl_value_table(d["kl_values"]),
                "kl_gradient_table.csv": lambda d: kl_gradient_table(d["kl_gradients"])})


@cli_entry
def main(argv=None) -> int:
    return report_cli(argv, render, "python -m analysis.estimators OUT (the --out folder of experiments/estimators.py)")


if __name__ == "__main__":
    sys.exit(main())
