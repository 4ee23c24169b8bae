"""The findings of a comparison, decided by the paired test (analysis.paired) on per-problem outcomes, and written
as data: every sentence the report, the README or a result page states about which method beats which is rendered
from these tables.

    pairs.csv      every pair of methods × metric: Δ, 95% interval over seeds and problems, P(A > B), separated,
                   and how much pairing by problem narrowed the interval (paired SE / unpaired SE)
    findings.csv   DeepSeekMath §5.2's orderings, each decided by the paired test: holds, reversed, not separated
    design.csv     what the design can detect: seeds, problems, the minimum detectable difference (α 0.05, power
                   0.8) and the seeds or problems that would halve it
    findings.md    the sentences, from the three tables

    python -m analysis.findings OUT      # print the sentences of a compare.py folder
"""
from __future__ import annotations

import argparse
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


def sentences(runs: Runs, table: pd.DataFrame | None = None) -> list[str]:
    """What the comparison found, one finding a line: the separated pairs (greedy first), the rest, the §5.2
    orderings, what the design can detect, and what pairing bought."""
    table = tests(runs)[0] if table is None else table
    if table.empty:
        return ["No two methods were scored on the same problems: nothing to compare."]
    lines = []
    for metric, g in table.groupby("metric", sort=False):
        name = metric_name(metric, g["k"].iloc[0])
        sep = g[g["separated"]]
        sep = sep.reindex(sep["diff"].abs().sort_values(ascending=False).index)
        head = (f"**{name}**: {_count(len(sep), 'pair')} of {len(g)} separated by the paired test "
                f"({int(g['n_seeds'].iloc[0])} seeds × {int(g['n_problems'].iloc[0])} problems, 95% interval "
                "excludes 0)")
        if len(sep):
            shown = []
            for _, r in sep.iterrows():
                a, b, diff, lo, hi = (r["a"], r["b"], r["diff"], r["lo"], r["hi"]) if r["diff"] > 0 else \
                    (r["b"], r["a"], -r["diff"], -r["hi"], -r["lo"])
                shown.append(f"{a} > {b} ({diff:+.3f} [{lo:+.3f}, {hi:+.3f}])")
            head += ": " + "; ".join(shown)
        lines.append(head + ".")
    for c in claim_rows(runs, table):
        lines.append(f"DeepSeekMath {c['claim (DeepSeekMath)'].split(':')[0]}, {c['comparison']} ({c['metric']}): "
                     f"{c['verdict']}, {c['Δ [95% interval]']}.")
    for d in design_rows(runs, table):
        lines.append(f"The design detects {d['metric']} differences of {d['detectable difference (median over pairs)']}"
                     f" (median over pairs, α 0.05, power 0.8); halving that takes {d['seeds to halve it']} seeds "
                     f"or {d['problems to halve it']} problems.")
    ratio = table["se"] / table["unpaired_se"]
    lines.append(f"Pairing by problem and seed gave standard errors {ratio.min():.2f}–{ratio.max():.2f} times the "
                 "unpaired ones (median " f"{ratio.median():.2f}).")
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
    lines = sentences(runs, table)
    (folder / f"{prefix}findings.md").write_text("".join(f"- {s}\n" for s in lines)
                                                 + f"\n<sub>Outcomes: {'; '.join(sources)}.</sub>\n")
    return lines


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the output folder of experiments/compare.py")
    args = p.parse_args(argv)
    print("\n".join(sentences(Runs(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
