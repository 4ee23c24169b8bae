"""The map of a DeepSeekMath §5.2 sweep (experiments/sweep_5_2.py): where do the paper's orderings hold?

    python -m analysis.sweep OUT [--figure map.png] [--csv summary.csv]   # also copy the map and the table there

Reads only the sweep's files: OUT/sweep.yaml, OUT/<level>/<method>/seed<k>/metrics.jsonl (through analysis.report's
Runs), .../final_k.json and OUT/<level>/base_final_k.json. Cells still running are reported with what they logged;
a comparison uses the seeds both of its methods have. Writes OUT/sweep_report/{summary.csv, end_table.csv,
mechanism.csv, mechanism_table.csv, predictors.csv, summary.md, map.png}.

The claims (DeepSeekMath, Shao et al. 2024, arXiv:2402.03300; the seed chapter's "One Gradient, Many Methods"):
    online RFT > RFT          Fig. 5: data from the live policy beats data from the frozen SFT model
    GRPO > online RFT         Fig. 5: wrong samples pushed down, graded by how far below the group they are
    process >= outcome        §4.1.3 / Fig. 5: per-step rewards beat one reward at the end
    maj@K lift > pass@K lift  Fig. 7: RL sharpens the output distribution more than it adds capability

Greedy cells are decided by the paired test on per-problem outcomes (analysis.paired: the same held-out problems
and seeds for both methods, a 95% interval from the two-way seeds × problems variance); the power column is the
smallest true difference that design detects with probability 0.8 at two-sided α = 0.05 (`detectable_difference`).
Cells without per-problem outcomes (maj@K, pass@K from final_k.json; sweeps made before problems.jsonl existed) are a
paired difference by seed (same seed = same prompt order and sampling stream from the same SFT base) with a 95%
Student-t interval, mean ± t_{0.975,n−1}·s/√n, and the power column (t_{0.975,n−1} + t_{0.80,n−1})·s/√n (the
paired-t sample-size formula, e.g. Cohen 1988, ch. 2). A cell is marked where its interval excludes 0.
"""
from __future__ import annotations

import argparse
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
import yaml  # noqa: E402

from analysis.report import T975  # noqa: E402
from analysis.runs import Runs, markdown_table  # noqa: E402
from gcframe.tracking.log import read_jsonl  # noqa: E402
from gcframe.errors import UserError, cli_entry  # noqa: E402

T80 = [1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870, 0.868, 0.866,
       0.865, 0.863, 0.862, 0.861, 0.860, 0.859, 0.858, 0.858, 0.857, 0.856, 0.856, 0.855, 0.855, 0.854, 0.854]
"""One-sided Student-t quantiles t_{0.80, df} for df = 1..30 (0.842 beyond): the power-0.8 term."""
CLAIMS = [("online RFT > RFT", "online_rft", "rft"), ("GRPO > online RFT", "grpo", "online_rft"),
          ("process ≥ outcome", "grpo_ps", "grpo")]
"""(claim, a, b): the paired difference a − b should be > 0 (≥ 0 for process vs outcome supervision)."""
MECHANISM = ["gc_neg_mass", "gc_neg_frac", "zero_var_frac", "adv_std", "kl_ref", "reward_std", "accuracy"]
"""Training-row columns summarised per cell: share of |GC| mass that is negative, share of tokens with GC < 0,
fraction of groups with zero reward variance (GRPO), the advantages' spread (GRPO: their scale; process supervision
sums one normalised step reward per step left), k3 KL to π_ref of the batch, reward std, batch accuracy."""


# -- statistics --------------------------------------------------------------------------------------------------
def paired(a: pd.Series, b: pd.Series) -> dict:
    """Paired difference a − b over the seeds both have (Series indexed by seed) -> mean, 95% interval, power."""
    seeds = sorted(set(a.dropna().index) & set(b.dropna().index))
    d = np.array([a[s] - b[s] for s in seeds], dtype=float)
    n = len(d)
    out = {"n_seeds": n, "mean": float(d.mean()) if n else math.nan, "sd": math.nan, "ci_low": math.nan,
           "ci_high": math.nan, "significant": 0, "mde80": math.nan, "mde80_5seeds": math.nan}
    if n >= 2:
        sd = float(d.std(ddof=1))
        df = n - 1
        t975, t80 = (T975[df - 1], T80[df - 1]) if df <= 30 else (1.96, 0.842)
        half = t975 * sd / math.sqrt(n)
        out.update(sd=sd, ci_low=out["mean"] - half, ci_high=out["mean"] + half,
                   # identical differences (s = 0, e.g. pass@64 = 1 on every seed) are not a test: never marked
                   significant=(int(out["mean"] - half > 0) - int(out["mean"] + half < 0)) if sd > 0 else 0,
                   mde80=(t975 + t80) * sd / math.sqrt(n),
                   mde80_5seeds=(T975[3] + T80[3]) * sd / math.sqrt(5))  # the 5 seeds, at this s
    return out


def paired_problems(frame: pd.DataFrame, a: str, b: str) -> dict:
    """`paired`'s columns from the paired test on per-problem outcomes (analysis.paired), for methods a and b in
    `frame` (rows of method, seed, problem, greedy)."""
    from analysis.paired import detectable_difference, paired_difference

    r = paired_difference(frame, a, b, "greedy")
    design = [r["var_seed"], r["var_problem"], r["var_resid"]]
    mde = detectable_difference(*design, r["n_seeds"], r["n_problems"])["mde"]
    mde5 = detectable_difference(*design, 5, r["n_problems"])["mde"] if r["n_seeds"] > 1 else math.nan
    return {"n_seeds": r["n_seeds"], "n_problems": r["n_problems"], "mean": r["diff"], "sd": math.nan,
            "ci_low": r["lo"], "ci_high": r["hi"], "significant": (int(r["lo"] > 0) - int(r["hi"] < 0)),
            "mde80": mde, "mde80_5seeds": mde5, "p_improve": r["p_improve"]}


# -- loading -----------------------------------------------------------------------------------------------------
class Sweep:
    """Per level: the greedy evaluation rows and training rows of every run, its final_k.json files, its base."""

    def __init__(self, out: Path):
        self.out = Path(out)
        spec = self.out / "sweep.yaml"
        if not spec.is_file():
            raise UserError(f"'{out}' is not a sweep folder (no sweep.yaml): give the --out of experiments/sweep_5_2.py")
        self.spec = yaml.safe_load(spec.read_text())
        self.levels, self.eval, self.train, self.final, self.base = [], [], [], [], {}
        problems = []
        for level in self.spec["levels"]:
            d = self.out / level
            if not list(d.glob("*/seed*/metrics.jsonl")):
                continue  # not started yet
            runs = Runs(d)
            base = json.loads((d / "base_final_k.json").read_text()) if (d / "base_final_k.json").exists() else {}
            start = runs.start_eval()["eval_accuracy"]
            base["greedy"] = float(start.mean()) if len(start) else base.get("base_accuracy", math.nan)
            self.base[level] = base
            self.levels.append(level)
            self.eval.append(runs.eval.assign(level=level))
            self.train.append(runs.train.assign(level=level))
            for f in sorted(d.glob("*/seed*/problems.jsonl")):  # per-problem greedy outcomes of every evaluation
                rows = pd.DataFrame(read_jsonl(f))
                if len(rows):
                    problems.append(rows[["step", "problem", "greedy_correct"]].rename(
                        columns={"greedy_correct": "greedy"}).assign(
                        level=level, method=f.parent.parent.name, seed=int(f.parent.name.removeprefix("seed"))))
            for f in sorted(d.glob("*/seed*/final_k.json")):
                self.final.append({**json.loads(f.read_text()), "level": level, "method": f.parent.parent.name,
                                   "seed": int(f.parent.name.removeprefix("seed"))})
        if not self.levels:
            raise UserError(f"the sweep in '{out}' has no runs yet: wait for the first cell")
        self.eval, self.train = pd.concat(self.eval, ignore_index=True), pd.concat(self.train, ignore_index=True)
        self.final = pd.DataFrame(self.final)
        self.problems = pd.concat(problems, ignore_index=True) if problems else pd.DataFrame()
        self.k = int(self.spec.get("final_k", 64))
        self.ks = [2 ** i for i in range(int(math.log2(self.k)) + 1)]

    def label(self, level: str) -> str:
        return f"{level} (base {self.base[level]['greedy']:.2f})"

    def greedy(self, level: str, method: str, step: int) -> pd.Series:
        e = self.eval
        e = e[(e["level"] == level) & (e["method"] == method) & (e["step"] == step)]
        return e.set_index("seed")["eval_accuracy"]

    def greedy_test(self, level: str, a: str, b: str, step: int) -> dict:
        """The greedy cell of a − b at `step`: the paired test on per-problem outcomes where both methods' runs have
        them at that step, else the paired difference of per-seed accuracies."""
        pr = self.problems
        if len(pr):
            cell = pr[(pr["level"] == level) & (pr["step"] == step) & pr["method"].isin([a, b])]
            if set(cell["method"]) == {a, b}:
                return paired_problems(cell, a, b)
        return paired(self.greedy(level, a, step), self.greedy(level, b, step))

    def final_metric(self, level: str, method: str, col: str) -> pd.Series:
        f = self.final
        if f.empty or col not in f:
            return pd.Series(dtype=float)
        return f[(f["level"] == level) & (f["method"] == method)].set_index("seed")[col]


# -- the claims, per cell ----------------------------------------------------------------------------------------
def claim_rows(sw: Sweep) -> pd.DataFrame:
    """One row per (level, claim, metric, step or K): the paired difference by seed."""
    rows = []
    steps = sorted(s for s in sw.eval["step"].unique() if s > 0)
    for level in sw.levels:
        head = {"level": level, "base_greedy": sw.base[level]["greedy"]}
        for claim, a, b in CLAIMS:
            for step in steps:
                rows.append({**head, "claim": claim, "metric": "greedy", "step": step, "K": 0,
                             **sw.greedy_test(level, a, b, step)})
            for metric in dict.fromkeys((f"maj@{sw.k}", f"pass@{sw.k}", "maj@8", "pass@8")):  # K = 8 and final_k
                if metric in sw.final:
                    rows.append({**head, "claim": claim, "metric": metric, "step": steps[-1] if steps else 0,
                                 "K": int(metric.split("@")[1]),
                                 **paired(sw.final_metric(level, a, metric), sw.final_metric(level, b, metric))})
        base = sw.base[level]
        for method in ("rft", "online_rft", "grpo", "grpo_ps"):
            for k in sw.ks[1:]:  # maj@1 = pass@1: the difference is 0 by construction
                if f"maj@{k}" not in sw.final or f"maj@{k}" not in base:
                    continue
                lift_maj = sw.final_metric(level, method, f"maj@{k}") - base[f"maj@{k}"]
                lift_pass = sw.final_metric(level, method, f"pass@{k}") - base[f"pass@{k}"]
                rows.append({**head, "claim": f"maj lift > pass lift ({method})", "metric": "Δmaj − Δpass",
                             "step": steps[-1] if steps else 0, "K": k,
                             **paired(lift_maj, lift_pass), "lift_maj": lift_maj.mean(),
                             "lift_pass": lift_pass.mean()})
    return pd.DataFrame(rows)


# -- the mechanism ---------------------------------------------------------------------------------------------
def mechanism_rows(sw: Sweep) -> pd.DataFrame:
    """Per (level, method, evaluation step s): the mean over seeds of each MECHANISM column over steps [0, s)."""
    tr = sw.train
    cols = [c for c in MECHANISM if c in tr]
    steps = sorted(s for s in sw.eval["step"].unique() if s > 0)
    rows = []
    for (level, method), g in tr.groupby(["level", "method"], sort=False):
        for s in steps:
            w = g[g["step"] < s]
            if w.empty:
                continue
            per_seed = w.groupby("seed")[cols].mean()
            rows.append({"level": level, "method": method, "step": s, "n_seeds": len(per_seed),
                         **per_seed.mean().to_dict()})
    out = pd.DataFrame(rows)
    if not sw.final.empty and "kl_ref" in sw.final and len(out):
        fin = sw.final.groupby(["level", "method"])["kl_ref"].mean().rename("eval_kl_ref_end").reset_index()
        out = out.merge(fin, on=["level", "method"], how="left")
    return out


def predictor_rows(claims: pd.DataFrame, mech: pd.DataFrame) -> pd.DataFrame:
    """Spearman rank correlation, over (level, step) cells, of the GRPO − online RFT greedy gap with each mechanism
    statistic (of the GRPO runs, and the base's greedy accuracy): which one tracks where GRPO pulls ahead."""
    gap = claims[(claims["claim"] == "GRPO > online RFT") & (claims["metric"] == "greedy")]
    gap = gap[["level", "step", "mean", "base_greedy"]].rename(columns={"mean": "gap"})
    feats = mech[mech["method"] == "grpo"].drop(columns=["method", "n_seeds", "eval_kl_ref_end"], errors="ignore")
    onl = mech[mech["method"] == "online_rft"][["level", "step", "reward_std"]].rename(
        columns={"reward_std": "online_rft_reward_std"})
    df = gap.merge(feats, on=["level", "step"]).merge(onl, on=["level", "step"], how="left")
    rows = []
    for col in [c for c in df.columns if c not in ("level", "step", "gap")]:
        x = df[["gap", col]].dropna()
        # Spearman ρ = the Pearson r of the ranks
        rho = x["gap"].rank().corr(x[col].rank()) if len(x) >= 3 and x[col].nunique() > 1 else math.nan
        rows.append({"statistic": col if col in ("base_greedy", "online_rft_reward_std") else f"grpo {col}",
                     "spearman_rho": rho, "cells": len(x)})
    return pd.DataFrame(rows).sort_values("spearman_rho", key=lambda s: -s.abs(), na_position="last")


# -- the figure --------------------------------------------------------------------------------------------------
def _heat(ax, sub: pd.DataFrame, col: str, sw: Sweep, title: str, xlabel: str) -> None:
    """Mean paired difference over level (rows) × `col` (columns); '*' marks an interval that excludes 0."""
    if sub.empty:
        ax.set_axis_off()
        ax.set_title(title + " (no runs)")
        return
    mean = sub.pivot(index="level", columns=col, values="mean").reindex([lv for lv in sw.levels if lv in set(sub.level)])
    sig = sub.pivot(index="level", columns=col, values="significant").reindex(mean.index)
    annot = mean.map(lambda v: "" if pd.isna(v) else f"{v:+.2f}") + sig.map(lambda s: "*" if s else "")
    lim = max(float(np.nanmax(np.abs(mean.to_numpy()))) if mean.notna().any().any() else 0.0, 0.02)
    sns.heatmap(mean, ax=ax, cmap="RdBu", vmin=-lim, vmax=lim, annot=annot, fmt="",
                annot_kws={"fontsize": 8}, cbar_kws={"label": "mean paired Δ"})
    ax.set_yticklabels([sw.label(lv) for lv in mean.index], rotation=0)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("")


def draw(sw: Sweep, claims: pd.DataFrame, preds: pd.DataFrame, mech: pd.DataFrame, path: Path) -> Path:
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    for ax, (claim, a, b) in zip(axes[0], CLAIMS):
        sub = claims[(claims["claim"] == claim) & (claims["metric"] == "greedy")]
        _heat(ax, sub, "step", sw, f"{claim}: greedy acc. {a} − {b}", "training step")
    for ax, method in zip(axes[1][:2], ("grpo", "online_rft")):
        sub = claims[claims["claim"] == f"maj lift > pass lift ({method})"]
        _heat(ax, sub, "K", sw, f"RL lifts maj@K more than pass@K ({method}): Δmaj − Δpass", "K (end of training)")
    ax = axes[1][2]
    best = preds.dropna().iloc[0]["statistic"] if len(preds.dropna()) else None
    gap = claims[(claims["claim"] == "GRPO > online RFT") & (claims["metric"] == "greedy")]
    if best is not None:
        col = best.removeprefix("grpo ")
        src = mech[mech["method"] == ("online_rft" if best == "online_rft_reward_std" else "grpo")]
        src = src.rename(columns={"reward_std": "online_rft_reward_std"}) if best == "online_rft_reward_std" else src
        df = gap.merge(src[["level", "step", col]], on=["level", "step"]) if col != "base_greedy" else gap.assign(
            base_greedy=gap["base_greedy"])
        sns.scatterplot(df, x=col, y="mean", hue="level", size="step", sizes=(15, 90), ax=ax)
        ax.errorbar(df[col], df["mean"], yerr=[df["mean"] - df["ci_low"], df["ci_high"] - df["mean"]], fmt="none",
                    ecolor="grey", alpha=0.4)
        ax.axhline(0, color="k", lw=0.8)
        span = float(df["mean"].abs().max()) if len(df) else 0.1
        ax.set_ylim(-2 * span - 0.02, 2 * span + 0.02)  # the intervals of few seeds may run off the axes
        ax.legend(fontsize=7, ncol=2)
        rho = float(preds.dropna().iloc[0]["spearman_rho"])
        ax.set_title(f"GRPO − online RFT vs {best}\n(Spearman ρ = {rho:+.2f} over level × step)", fontsize=10)
        ax.set_xlabel(f"{best} (mean over the steps before)")
        ax.set_ylabel("greedy acc. GRPO − online RFT")
    else:
        ax.set_axis_off()
    n = int(claims["n_seeds"].max()) if len(claims) else 0
    fig.suptitle(f"DeepSeekMath §5.2 at CPU scale: paired differences (greedy: by problem and seed; sampled: by "
                 f"seed; up to {n} seeds); * = the 95% interval excludes 0", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# -- the report --------------------------------------------------------------------------------------------------
def _fmt(r) -> str:
    if not r["n_seeds"]:
        return "–"
    if pd.isna(r["ci_low"]):
        return f"{r['mean']:+.3f} (n={r['n_seeds']})"
    return f"{r['mean']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]{' *' if r['significant'] else ''}"


def markdown(sw: Sweep, claims: pd.DataFrame, mech: pd.DataFrame, preds: pd.DataFrame) -> str:
    md = [f"# DeepSeekMath §5.2 sweep: {sw.out}\n", "Paired difference by seed, mean [95% t-interval] (* excludes "
          "0); MDE = smallest difference detected with power 0.8.\n"]
    for claim, _, _ in CLAIMS:
        sub = claims[(claims["claim"] == claim) & (claims["metric"] == "greedy") & (claims["n_seeds"] > 0)]
        if not len(sub):  # a sweep without one of the claim's methods (e.g. the G = 16 follow-up)
            continue
        rows = [{"level": sw.label(lv), **{f"step {int(r['step'])}": _fmt(r) for _, r in g.iterrows()},
                 "MDE (end)": f"{g.iloc[-1]['mde80']:.3f}", "MDE at 5 seeds": f"{g.iloc[-1]['mde80_5seeds']:.3f}"} for lv, g in sub.groupby("level", sort=False)]
        md += [f"## {claim} (greedy accuracy)\n", markdown_table(rows)]
    end = claims[claims["metric"].str.contains("@")]
    if len(end):
        rows = [{"level": sw.label(r["level"]), "claim": r["claim"], "metric": r["metric"], "Δ": _fmt(r),
                 "MDE": f"{r['mde80']:.3f}"} for _, r in end.iterrows()]
        md += ["## End of training, sampled metrics\n", markdown_table(rows)]
    lift = claims[claims["metric"] == "Δmaj − Δpass"]
    if len(lift):
        rows = [{"level": sw.label(lv), "method": m,
                 **{f"K={int(r['K'])}": f"{r['lift_maj']:+.2f}/{r['lift_pass']:+.2f} {_fmt(r)}" for _, r in g.iterrows()}}
                for (lv, m), g in lift.groupby(["level", "claim"], sort=False) for m in [m[len('maj lift > pass lift ('):-1]]]
        md += ["## RL lifts maj@K more than pass@K (Δmaj/Δpass from the base, then the paired Δmaj − Δpass)\n",
               markdown_table(rows)]
    if len(mech):
        last = mech[mech["step"] == mech["step"].max()]
        last = last.drop(columns=["step"])
        md += ["## Mechanism (means over all training steps and seeds)\n",
               markdown_table([{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()}
                               for r in last.to_dict("records")])]
    if len(preds):
        md += ["## What tracks the GRPO − online RFT gap (Spearman ρ over level × step cells)\n",
               markdown_table([{k: (f"{v:+.2f}" if isinstance(v, float) else v) for k, v in r.items()}
                               for r in preds.to_dict("records")])]
    return "\n".join(md)


def end_table(sw: Sweep, claims: pd.DataFrame) -> pd.DataFrame:
    """The map's headline (results/sweep_5_2/end_table.csv): per claim, per level, the paired greedy difference at the
    last evaluation step (seeds × problems), mean [95% interval], bold where it excludes 0, and in brackets the
    smallest difference the design detects (power 0.8)."""
    g = claims[(claims["metric"] == "greedy") & (claims["n_seeds"] > 0)]
    if not len(g):
        return pd.DataFrame()
    g = g[g["step"] == g["step"].max()]
    rows = []
    for claim, _, _ in CLAIMS:
        sub = g[g["claim"] == claim]
        if not len(sub):
            continue
        row = {"claim (DeepSeekMath)": claim, "step": int(sub["step"].iloc[0])}
        for _, r in sub.iterrows():
            cell = "–" if pd.isna(r["ci_low"]) else f"{r['mean']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"
            cell = f"**{cell}**" if r["significant"] else cell
            row[sw.label(r["level"])] = f"{cell} ({r['mde80']:.2f})"
        rows.append(row)
    return pd.DataFrame(rows)


def mechanism_table(sw: Sweep, mech: pd.DataFrame) -> pd.DataFrame:
    """The map's mechanism, one row per level (results/sweep_5_2/mechanism_table.csv): over all training steps and
    seeds, GRPO's and GRPO-PS's share of GC mass pushing down, GRPO's zero-variance groups and reward std; and each
    method's KL to π_ref at the end (the final evaluation's, else the last training window's)."""
    if not len(mech):
        return pd.DataFrame()
    last = mech[mech["step"] == mech["step"].max()].set_index(["level", "method"])
    methods = [m for m in ("rft", "online_rft", "grpo", "grpo_ps") if m in last.index.get_level_values("method")]

    def get(level, method, col):
        v = last[col].get((level, method)) if col in last else None
        return "–" if v is None or pd.isna(v) else f"{v:.2f}"

    kl = "eval_kl_ref_end" if "eval_kl_ref_end" in last else "kl_ref"
    rows = []
    for level in dict.fromkeys(last.index.get_level_values("level")):
        rows.append({"level": sw.label(level),
                     "GRPO GC down": get(level, "grpo", "gc_neg_mass"),
                     "GRPO-PS GC down": get(level, "grpo_ps", "gc_neg_mass"),
                     "GRPO zero-variance groups": get(level, "grpo", "zero_var_frac"),
                     "GRPO reward std": get(level, "grpo", "reward_std"),
                     f"KL to π_ref at the end ({' / '.join(methods)})":
                         " / ".join(get(level, m, kl) for m in methods)})
    return pd.DataFrame(rows)


def write(out: Path, figure: Path | None = None, csv: Path | None = None) -> Path:
    sw = Sweep(out)
    claims, mech = claim_rows(sw), mechanism_rows(sw)
    preds = predictor_rows(claims, mech) if len(mech) and len(claims) else pd.DataFrame()
    rep = Path(out) / "sweep_report"
    rep.mkdir(exist_ok=True)
    claims.to_csv(rep / "summary.csv", index=False, float_format="%.4f")
    end_table(sw, claims).to_csv(rep / "end_table.csv", index=False)
    mech.to_csv(rep / "mechanism.csv", index=False, float_format="%.4f")
    mechanism_table(sw, mech).to_csv(rep / "mechanism_table.csv", index=False)
    preds.to_csv(rep / "predictors.csv", index=False, float_format="%.4f")
    draw(sw, claims, preds, mech, rep / "map.png")
    (rep / "summary.md").write_text(markdown(sw, claims, mech, preds))
    for src, dst in ((rep / "map.png", figure), (rep / "summary.csv", csv)):
        if dst is not None:
            Path(dst).parent.mkdir(parents=True, exist_ok=True)
            Path(dst).write_bytes(src.read_bytes())
    return rep


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.sweep", description=__doc__.split("\n")[0])
    p.add_argument("out", help="the output folder of experiments/sweep_5_2.py")
    p.add_argument("--figure", help="also copy the map (PNG) here")
    p.add_argument("--csv", help="also copy the summary table (CSV) here")
    args = p.parse_args(argv)
    print(f"sweep report: {write(Path(args.out), args.figure, args.csv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
