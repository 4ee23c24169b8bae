"""Render the update atlas's files (experiments/atlas.py): OUT/report/summary.md, PNG figures and
OUT/atlas_table.csv (the headline measures per policy and method, as the docs show them).

    python -m analysis.atlas OUT

Reads OUT/atlas.csv, OUT/cosines.csv, OUT/critic_distance.csv, OUT/critic_length.csv and OUT/atlas.json only.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.estimators import markdown  # noqa: E402
from analysis.lab_report import load_files, report_cli, write_report  # noqa: E402
from gcframe.errors import cli_entry  # noqa: E402

DPI = 72
MEASURES = [("cosine_corr", "cos(E ĝ, g*)", False), ("sin_angle", "sin angle (bias, scale-free)", False),
            ("scale", "ḡ·g*/‖g*‖²", False), ("step_cosine", "cos(one step, g*)", False),
            ("snr", "SNR of one step", True), ("snr_per_ktok", "SNR per 1k tokens", True),
            ("snr_per_kgen", "SNR per 1k generated tokens", True), ("snr_per_s", "SNR per CPU second", True)]
"""(column, label, log-coloured): the heatmap's columns."""


NO_NOISE_SNR = 1e12
"""An SNR above this is float rounding over identical draws (e.g. 2.95e13 for RFT's fixed pool): shown as ∞."""
RESOLVED = 2.0
"""A method's mean step is resolved when n·SNR ≥ RESOLVED, i.e. ‖E ĝ‖² is at least twice the noise of the mean of
its n draws (tr/n). Below that, the noise-corrected cosines (to g* and between methods) divide by an estimate of
‖E ĝ‖ that is mostly noise, and are shown as n/a."""


def resolve(d: dict) -> dict:
    """Blank the noise-corrected cosines of unresolved methods (RESOLVED) in the atlas and cosine tables."""
    a, c = d["atlas"].copy(), d["cosines"].copy()
    bad = a["draws"] * a["snr"] < RESOLVED  # (NaN: identical draws, no noise: resolved)
    a.loc[bad, "cosine_corr"] = float("nan")
    unresolved = set(zip(a.loc[bad, "policy"], a.loc[bad, "method"]))
    pair = [(p, x) in unresolved or (p, y) in unresolved for p, x, y in zip(c["policy"], c["a"], c["b"])]
    c.loc[pd.Series(pair, index=c.index) & (c["a"] != c["b"]), "cosine_corr"] = float("nan")
    return {**d, "atlas": a, "cosines": c}


def load(out: Path) -> dict:
    return resolve(load_files(out, ("atlas", "cosines", "critic_distance", "critic_length"), "atlas.json",
                              "experiments/atlas.py"))


def fig_heatmap(df: pd.DataFrame, path: Path) -> None:
    """Method × measure per policy; SNR columns coloured by log10 (rank within a column), cells show the value."""
    pols = list(dict.fromkeys(df["policy"]))
    fig, axes = plt.subplots(1, len(pols), figsize=(8.5 * len(pols), 0.55 * df["method"].nunique() + 2), squeeze=False)
    for ax, pol in zip(axes[0], pols):
        sub = df[df["policy"] == pol].set_index("method")
        vals = sub[[c for c, _, _ in MEASURES]]
        colour = pd.DataFrame({c: (np.log10(vals[c].clip(lower=1e-12)) if log else vals[c]) for c, _, log in MEASURES})
        colour = (colour - colour.min()) / (colour.max() - colour.min()).replace(0, 1)  # each column on [0, 1]
        if MEASURES[1][0] in colour:  # a smaller bias is better: flip it so that bright (viridis yellow) means good everywhere
            colour[MEASURES[1][0]] = 1 - colour[MEASURES[1][0]]
        annot = vals.map(lambda v: "n/a" if not math.isfinite(v) else f"{v:.3g}")
        sns.heatmap(colour, annot=annot, fmt="", cmap="viridis", cbar=False, ax=ax, annot_kws={"fontsize": 8})
        ax.set_xticklabels([lab for _, lab, _ in MEASURES], rotation=35, ha="right", fontsize=8)
        ax.set(title=f"{pol}: each method's step against g* = ∇E[r]", xlabel="", ylabel="")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def fig_cosines(df: pd.DataFrame, path: Path) -> None:
    """The matrix of cosines between mean updates (noise-corrected norms), one panel per policy."""
    pols = list(dict.fromkeys(df["policy"]))
    fig, axes = plt.subplots(1, len(pols), figsize=(6.5 * len(pols), 5.5), squeeze=False)
    for ax, pol in zip(axes[0], pols):
        sub = df[df["policy"] == pol]
        order = list(dict.fromkeys(sub["a"]))
        mat = sub.pivot(index="a", columns="b", values="cosine_corr").loc[order, order].clip(-1, 1)
        sns.heatmap(mat, annot=True, fmt=".2f", cmap="RdBu_r", vmin=-1, vmax=1, ax=ax, annot_kws={"fontsize": 7},
                    cbar=ax is axes[0, -1])
        ax.set(title=f"{pol}: cos between mean updates", xlabel="", ylabel="")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def fig_critic(dist: pd.DataFrame, length: pd.DataFrame, path: Path) -> None:
    """Squared error against the distance to the end; explained variance against the completion's length."""
    last = dist["step"].max()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    d = dist.assign(step=dist["step"].astype(str))
    sns.lineplot(data=d, x="distance", y="mse", hue="step", style="estimator", marker="o", ax=axes[0])
    axes[0].set(title="(V − R)² against tokens to the end |o| − 1 − t", xlabel="distance to the last token")
    big = length[length["sequences"] >= 8].assign(step=length["step"].astype(str))
    sns.lineplot(data=big, x="length", y="ev", hue="step", style="estimator", marker="o", ax=axes[1])
    axes[1].set(title="explained variance over a completion's tokens, by |o|", xlabel="completion length |o|")
    sns.lineplot(data=big[big["step"] == str(last)], x="length", y="mse_first", hue="estimator", marker="o", ax=axes[2])
    axes[2].set(title=f"step {last}: (V(prompt) − r)² at the first token, by |o|", xlabel="completion length |o|")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def summary(d: dict) -> str:
    info = d["info"]
    a = d["atlas"]
    lines = ["# Update atlas", "", f"settings: quick={info.get('quick')}, spec={json.dumps(info.get('spec'))}, "
             f"step={json.dumps(info.get('step'))}", f"times (s): {info.get('time_s')}", ""]
    for pol, meta in info.get("policies", {}).items():
        lines.append(f"- {pol}: E[r] over the prompt set {meta['p_mean']:.4f}; g* from {meta['leaves']} listed "
                     f"completions, pruned mass per prompt ≤ {meta['pruned_mass_mean']:.2e} (max {meta['pruned_mass_max']:.2e})")
    cols = ["policy", "method", "aggregation", "draws", "cosine", "cosine_corr", "sin_angle", "scale", "rel_bias",
            "step_cosine", "snr", "snr_per_ktok", "snr_per_kgen", "snr_per_s", "tokens", "gen_tokens", "cpu_s"]
    shown = a[cols].copy()
    for col in [c for c in cols if c.startswith("snr")]:  # identical draws (RFT's fixed pool): no noise, SNR ∞
        shown[col] = [("∞ (identical draws)" if v > NO_NOISE_SNR else v) if isinstance(v, float) else v
                      for v in shown[col]]
    lines += ["", "## Each method's step against g*", "", "n/a: a measure that does not apply (an offline method's "
              "generated tokens) or a corrected cosine where the draws' noise outweighs their mean (not resolved); ∞: draws that are all the same step, so there is no noise to divide by.", "",
              markdown(shown)]
    c = d["cosines"]
    for pol in dict.fromkeys(c["policy"]):
        mat = c[c["policy"] == pol].pivot(index="a", columns="b", values="cosine_corr")
        order = list(dict.fromkeys(c[c["policy"] == pol]["a"]))
        lines += ["", f"## Cosines between mean updates, {pol} (noise-corrected)", "",
                  markdown(mat.loc[order, order].reset_index().rename(columns={"a": ""}))]
    dist, length = d["critic_distance"], d["critic_length"]
    last = dist["step"].max()
    piv = dist[dist["step"] == last].pivot(index="distance", columns="estimator", values="mse").reset_index()
    lines += ["", f"## The critic along the sequence (PPO step {last})", "", markdown(piv), "",
              markdown(length[length["step"] == last][["estimator", "length", "sequences", "accuracy", "ev",
                                                        "ev_first", "mse", "mse_first"]])]
    return "\n".join(lines) + "\n"


TABLE = [("cosine_corr", "cos(mean step, ∇E[r])"), ("scale", "scale"), ("rel_bias", "relative bias"),
         ("step_cosine", "cos(one step, ∇E[r])"), ("snr", "SNR of one step"), ("snr_per_ktok", "SNR per 1k tokens"),
         ("snr_per_kgen", "SNR per 1k generated tokens"), ("snr_per_s", "SNR per CPU second")]
"""(column of atlas.csv, its name in atlas_table.csv): the headline measures."""


def table(a: pd.DataFrame) -> pd.DataFrame:
    """atlas_table.csv: one row per policy and method, the headline measures as strings (3 decimals, 3 significant
    digits from 10⁴ up; n/a where a measure does not apply, e.g. the generated tokens of an offline method)."""
    def fmt(v) -> str:
        v = float(v)
        return "n/a" if not math.isfinite(v) else f"{v:.3f}" if abs(v) < 1e4 else f"{v:.3g}"

    t = pd.DataFrame({"policy": a["policy"], "method": a["method"],
                      "normaliser": a["aggregation"].fillna("").astype(str)})
    for col, name in TABLE:
        t[name] = a[col].map(fmt)
    return t


def render(out: Path) -> Path:
    out = Path(out)
    rep = write_report(out, load, {
        "atlas_heatmap.png": lambda d, path: fig_heatmap(d["atlas"], path),
        "atlas_cosines.png": lambda d, path: fig_cosines(d["cosines"], path),
        "atlas_critic.png": lambda d, path: fig_critic(d["critic_distance"], d["critic_length"], path)}, summary)
    table(load(out)["atlas"]).to_csv(out / "atlas_table.csv", index=False)
    return rep


@cli_entry
def main(argv=None) -> int:
    return report_cli(argv, render, "python -m analysis.atlas OUT (the --out folder of experiments/atlas.py)")


if __name__ == "__main__":
    sys.exit(main())
