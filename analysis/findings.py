"""The findings of a comparison, decided by the paired test (analysis.paired) on per-problem outcomes, and written
as data: every sentence the report, the README or a result page states about which method beats which is rendered
from these tables.

    pairs.csv      every pair of methods × metric: Δ, 95% interval over seeds and problems, P(A > B), separated,
                   and how much pairing by problem narrowed the interval (paired SE / unpaired SE)
    findings.csv   DeepSeekMath §5.2's orderings, each decided by the paired test: holds, reversed, not separated
    gains.csv      each method against the model the runs started from, where it was re-scored on the same problems
                   (`python -m gcframe.evaluate OUT --base`): the same paired test, the base's outcomes in every seed
    design.csv     what the design can detect: seeds, problems, the minimum detectable difference (α 0.05, power
                   0.8) and the seeds or problems that would halve it
    findings.md    the sentences, from the three tables; headline.md their short form (greedy only)

    python -m analysis.findings OUT      # print the sentences of a compare.py folder
"""
from __future__ import annotations

import argparse
import numbers
import sys

import pandas as pd

from analysis import paired
from analysis.runs import Runs
from gcframe.errors import cli_entry

CLAIMS = [  # (method, compared with, what DeepSeekMath reports)
    ("online_rft", "rft", "§5.2.1, Fig. 5: online RFT beats RFT (samples of the live policy, not the SFT model)"),
    ("grpo", "online_rft", "§5.2.1, Fig. 5: GRPO beats online RFT (wrong samples pushed down, by how much)"),
    ("grpo_ps", "grpo", "§4.1.3 / Fig. 5: process supervision beats outcome supervision"),
]


def metric_name(metric: str, k) -> str:
    return {"greedy": "greedy", "majk": f"maj@{k}", "passk": f"pass@{k}", "pass1": "pass@1"}[metric]


def tests(runs: Runs) -> tuple[pd.DataFrame, list[str]]:
    """Every pair × metric through analysis.paired -> (rows, where each metric's outcomes come from)."""
    parts, sources = [], []
    for frame, metrics, source, k in runs.outcomes():
        if frame["method"].nunique() < 2:
            continue
        rows = paired.pairwise(frame, metrics=metrics, methods=[m for m in runs.methods if m in set(frame["method"])])
        if len(rows):
            parts.append(rows.assign(source=source, k=k))
            sources.append(f"{', '.join(metric_name(m, k) for m in metrics)}: {source}")
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), sources


def _interval(r) -> str:
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"


def pair_rows(runs: Runs, table: pd.DataFrame | None = None) -> list[dict]:
    table = tests(runs)[0] if table is None else table
    return [{"comparison": f"{r['a']} − {r['b']}", "metric": metric_name(r["metric"], r["k"]),
             "Δ [95% interval]": _interval(r), "P(A>B)": f"{r['p_improve']:.2f}",
             "separated": "yes" if r["separated"] else "no", "seeds": int(r["n_seeds"]),
             "problems": int(r["n_problems"]), "paired SE / unpaired SE": f"{r['se'] / r['unpaired_se']:.2f}"}
            for _, r in table.iterrows()]


def gain_table(runs: Runs) -> pd.DataFrame:
    """Each method − the base, per metric of the greedy re-scoring, through analysis.paired. The base is one model,
    so its outcomes stand in every seed: d[s,p] = y_m[s,p] − y_base[p], and the seed variance is the method's alone.
    Empty without a re-scored base."""
    base = runs.base_outcomes()
    if base is None:
        return pd.DataFrame()
    frame, metrics, _, k = runs.outcomes()[0]
    both = pd.concat([frame, base], ignore_index=True)
    rows = [paired.paired_difference(both, m, runs.base_label, metric) | {"k": k, "base_mean": base[metric].mean()}
            for m in runs.methods if m in set(frame["method"]) for metric in metrics if base[metric].notna().all()]
    return pd.DataFrame(rows)


def gain_rows(runs: Runs, gains: pd.DataFrame | None = None) -> list[dict]:
    gains = gain_table(runs) if gains is None else gains
    return [{"method": r["a"], "metric": metric_name(r["metric"], r["k"]), "over": r["b"],
             "gain [95% interval]": _interval(r), "P(A>B)": f"{r['p_improve']:.2f}",
             "separated": "yes" if r["separated"] else "no", "seeds": int(r["n_seeds"]),
             "problems": int(r["n_problems"])} for _, r in gains.iterrows()]


def gain_line(runs: Runs, gains: pd.DataFrame, metric: str = "greedy") -> list[str]:
    """'Over the base model (0.412 greedy; 2 seeds × 200 problems): grpo +0.071 [+0.030, +0.112], separated; ...'"""
    g = gains[gains["metric"] == metric] if len(gains) else gains
    if g.empty:
        return []
    level = g["base_mean"].iloc[0]
    parts = [f"{r['a']} {r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}], "
             f"{'separated' if r['separated'] else 'not separated'}" for _, r in g.iterrows()]
    return [f"Over the {runs.base_label} ({level:.3f} {metric_name(metric, g['k'].iloc[0])}; {_design(g)}): "
            + "; ".join(parts) + "."]


def verdict(r) -> str:
    if not r["separated"]:
        return "not separated"
    return "holds" if r["diff"] > 0 else "reversed"


def claim_rows(runs: Runs, table: pd.DataFrame | None = None) -> list[dict]:
    """DeepSeekMath's orderings among the methods run, decided by the paired test, per metric."""
    table = tests(runs)[0] if table is None else table
    out = []
    for a, b, claim in CLAIMS:
        for _, r in table.iterrows():
            if {r["a"], r["b"]} == {a, b}:
                sign = 1 if r["a"] == a else -1  # the table's pair may be ordered b − a
                r = r.copy()
                r["diff"], r["lo"], r["hi"] = sign * r["diff"], *sorted((sign * r["lo"], sign * r["hi"]))
                out.append({"claim (DeepSeekMath)": claim, "comparison": f"{a} − {b}",
                            "metric": metric_name(r["metric"], r["k"]), "Δ [95% interval]": _interval(r),
                            "verdict": verdict(r), "seeds": int(r["n_seeds"]), "problems": int(r["n_problems"])})
    return out


def design_rows(runs: Runs, table: pd.DataFrame | None = None) -> list[dict]:
    """Per metric: the smallest difference the design detects (α 0.05, power 0.8), the median over pairs, and what
    would halve it (the pair at that median)."""
    table = tests(runs)[0] if table is None else table
    out = []
    for metric, g in table.groupby("metric", sort=False):
        g = g.sort_values("mde").reset_index(drop=True)
        mid = g.iloc[(len(g) - 1) // 2]
        out.append({"metric": metric_name(metric, mid["k"]), "seeds": int(mid["n_seeds"]),
                    "problems": int(mid["n_problems"]),
                    "detectable difference (median over pairs)": f"{mid['mde']:.3f}",
                    "range over pairs": f"{g['mde'].min():.3f}–{g['mde'].max():.3f}",
                    "seeds to halve it": mid["seeds_to_halve"], "problems to halve it": mid["problems_to_halve"]})
    return out


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _design(g: pd.DataFrame) -> str:
    return f"{_count(int(g['n_seeds'].iloc[0]), 'seed')} × {int(g['n_problems'].iloc[0])} problems"


def ranking(runs: Runs, table: pd.DataFrame, metric: str) -> list[tuple[str, float]]:
    """Methods by their mean outcome on `metric` (the mean over seeds and problems the pairs were tested on)."""
    for frame, metrics, _, _ in runs.outcomes():
        if metric in metrics:
            means = frame.groupby("method", sort=False)[metric].mean()
            return sorted(((m, float(v)) for m, v in means.items()), key=lambda x: -x[1])
    return []


def _pairs_text(g: pd.DataFrame) -> str:
    """'a > b (+0.12 [+0.05, +0.19])' for each separated pair, the larger difference first."""
    out = []
    for _, r in g[g["separated"]].reindex(g["diff"].abs().sort_values(ascending=False).index).dropna(
            subset=["separated"]).iterrows():
        if not r["separated"]:
            continue
        a, b, diff, lo, hi = (r["a"], r["b"], r["diff"], r["lo"], r["hi"]) if r["diff"] > 0 else \
            (r["b"], r["a"], -r["diff"], -r["hi"], -r["lo"])
        out.append(f"{a} > {b} ({diff:+.3f} [{lo:+.3f}, {hi:+.3f}])")
    return "; ".join(out)


def claim_lines(runs: Runs, table: pd.DataFrame) -> list[str]:
    """One line per DeepSeekMath ordering: its verdict and interval on every metric."""
    by_claim: dict[tuple, list[str]] = {}
    for c in claim_rows(runs, table):
        key = (c["claim (DeepSeekMath)"], c["comparison"])
        by_claim.setdefault(key, []).append(f"{c['metric']} {c['verdict']} ({c['Δ [95% interval]']})")
    return [f"DeepSeekMath {claim.split(':')[0]}, {comp}: {'; '.join(parts)}."
            for (claim, comp), parts in by_claim.items()]


def sentences(runs: Runs, table: pd.DataFrame | None = None, gains: pd.DataFrame | None = None) -> list[str]:
    """What the comparison found, one finding a line: per metric the ranking, how many pairs are separated and which
    (greedy in full), the §5.2 orderings, what the design can detect, and what pairing bought."""
    table = tests(runs)[0] if table is None else table
    if table.empty:
        return ["No two methods were scored on the same problems: nothing to compare."]
    lines = []
    for metric, g in table.groupby("metric", sort=False):
        name = metric_name(metric, g["k"].iloc[0])
        ranked = ", ".join(f"{m} {v:.3f}" for m, v in ranking(runs, table, metric))
        sep = int(g["separated"].sum())
        line = f"**{name}** ({_design(g)}): {sep} of {_count(len(g), 'pair')} separated by the paired test"
        if metric == "greedy" and sep:
            line += f": {_pairs_text(g)}"
        lines.append(line + f". Means: {ranked}.")
    lines += claim_lines(runs, table)
    for d in design_rows(runs, table):
        halve = [f"{int(d[key])} {word}" for key, word in (("seeds to halve it", "seeds"),
                                                             ("problems to halve it", "problems"))
                 if isinstance(d[key], numbers.Integral)]
        halve = " or ".join(h for h in halve if h) or "neither more seeds nor more problems alone"
        lines.append(f"The design detects {d['metric']} differences of {d['detectable difference (median over pairs)']}"
                     f" (median over pairs; α 0.05, power 0.8); {halve} would halve that.")
    ratio = table["se"] / table["unpaired_se"]
    lines.append(f"Pairing by problem and seed gave standard errors {ratio.min():.2f}–{ratio.max():.2f} times the "
                 f"unpaired ones (median {ratio.median():.2f}).")
    return lines + gain_line(runs, gain_table(runs) if gains is None else gains)


def headline(runs: Runs, table: pd.DataFrame, gains: pd.DataFrame | None = None) -> list[str]:
    """The short form (the README's): greedy's ranking and separated pairs, the §5.2 orderings on greedy, the
    design's detectable greedy difference."""
    g = table[table["metric"] == "greedy"]
    if g.empty:
        return []
    lines = [f"Greedy accuracy ({_design(g)}): {int(g['separated'].sum())} of {_count(len(g), 'pair')} separated by "
             f"the paired test: {_pairs_text(g) or 'none'}."]
    lines += [c for c in claim_lines(runs, g)] + gain_line(runs, gain_table(runs) if gains is None else gains)
    d = next((d for d in design_rows(runs, g) if d["metric"] == "greedy"), None)
    if d:
        lines.append(f"Differences below {d['detectable difference (median over pairs)']} go undetected by this design "
                     "(median over pairs; α 0.05, power 0.8).")
    return lines


def write(runs: Runs, folder, prefix: str = "") -> list[str]:
    """pairs.csv, findings.csv, design.csv and findings.md into `folder` -> the sentences."""
    from pathlib import Path

    folder = Path(folder)
    table, sources = tests(runs)
    if table.empty:
        return []
    pd.DataFrame(pair_rows(runs, table)).to_csv(folder / f"{prefix}pairs.csv", index=False)
    claims = claim_rows(runs, table)
    if claims:
        pd.DataFrame(claims).to_csv(folder / f"{prefix}findings.csv", index=False)
    pd.DataFrame(design_rows(runs, table)).to_csv(folder / f"{prefix}design.csv", index=False)
    gains = gain_table(runs)  # once: it reads every per-problem file
    if len(gains):
        pd.DataFrame(gain_rows(runs, gains)).to_csv(folder / f"{prefix}gains.csv", index=False)
    lines = sentences(runs, table, gains)
    note = f"\n<sub>Outcomes: {'; '.join(sources)}.</sub>\n"
    (folder / f"{prefix}findings.md").write_text("".join(f"- {s}\n" for s in lines) + note)
    (folder / f"{prefix}headline.md").write_text("".join(f"- {s}\n" for s in headline(runs, table, gains)) + note)
    return lines


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.findings", description=__doc__.split("\n")[0])
    p.add_argument("out", help="the output folder of experiments/compare.py")
    args = p.parse_args(argv)
    print("\n".join(sentences(Runs(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
