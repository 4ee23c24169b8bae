"""Does an ordering change with training length? The step × method interaction, tested on the same problems and seeds
(experiments/configs/rft_vs_online.yaml: the test problems evaluated at several steps of the same runs).

    python -m analysis.interaction OUT [--early 200] [--against rft] [--out DIR]    # DIR/interaction.csv

For methods A and B, each seed s and test problem p, from the per-problem outcomes the runs logged while training
(RUN/problems.jsonl, greedy), at the early step e and the last step T:

    d[s, p] = (y_A,T − y_B,T) − (y_A,e − y_B,e)

and the interaction is mean d with the two-way (seeds × problems) interval of analysis.paired: separated when the
difference between A and B at T is not the one at e. Δ at e and Δ at T are given beside it, each with its own
interval. A "because" about why an ordering turns needs this test, not two folders read side by side.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402


def outcomes_at(out: Path) -> pd.DataFrame:
    """method, seed, step, problem, greedy: every evaluation's per-problem outcomes in OUT/<label>/seed<k>/."""
    rows = []
    for f in sorted(Path(out).glob("*/seed*/problems.jsonl")):
        label, seed = f.parent.parent.name, int(f.parent.name.removeprefix("seed"))
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows.append({"method": label, "seed": seed, "step": int(r["step"]), "problem": r["problem"],
                         "greedy": float(r["greedy_correct"])})
    if not rows:
        raise UserError(f"no per-problem outcomes under {out}: a compare.py folder whose runs logged problems.jsonl")
    return pd.DataFrame(rows).drop_duplicates(["method", "seed", "step", "problem"], keep="last")


def interaction(df: pd.DataFrame, a: str, b: str, early: int, late: int) -> dict:
    """Δ at `early`, Δ at `late` and their difference for A − B (module docstring), each with its 95% interval."""
    from analysis import paired

    frame = df[df["step"].isin([early, late])].assign(
        method=lambda x: x["method"] + "|" + x["step"].astype(str))
    for m in (a, b):
        for step in (early, late):
            if f"{m}|{step}" not in set(frame["method"]):
                steps = sorted(df[df["method"] == m]["step"].unique())
                raise UserError(f"{m} has no evaluation at step {step} (its steps: {', '.join(map(str, steps)) or 'none'})"
                                ": evaluate at both steps (train.eval_every)")
    ya_l, yb_l, seeds, problems = paired.outcome_tables(frame, f"{a}|{late}", f"{b}|{late}", "greedy")
    ya_e, yb_e, seeds_e, problems_e = paired.outcome_tables(frame, f"{a}|{early}", f"{b}|{early}", "greedy")
    if (seeds, problems) != (seeds_e, problems_e):
        raise UserError(f"{a} and {b} were evaluated on other problems or seeds at step {early} than at {late}: the "
                        "interaction pairs each problem with itself")
    out = {"a": a, "b": b, "early": early, "late": late, "seeds": len(seeds), "problems": len(problems)}
    for name, d in (("early", ya_e - yb_e), ("late", ya_l - yb_l), ("interaction", (ya_l - yb_l) - (ya_e - yb_e))):
        tw = paired.two_way(d)
        r = paired.t_interval(tw["diff"], tw["var"], tw["df"])
        out.update({f"Δ {name}": r["diff"], f"{name} lo": r["lo"], f"{name} hi": r["hi"],
                    f"{name} separated": r["separated"]})
    return out


STEP_OUTCOMES = "problems_by_step.csv.gz"
"""A result's per-problem outcomes at every evaluation of its runs (method, seed, step, problem, greedy): what
interaction.csv and by_step.csv are computed from."""


def shown(pairs: list[dict]) -> pd.DataFrame:
    """interaction.csv: a row per pair, A − B at the early and the last step and their difference, each as
    '+0.068 [+0.049, +0.087]', and whether the difference is separated from 0 (the ordering changes with length)."""
    def iv(r, name):
        return f"{r[f'Δ {name}']:+.3f} [{r[f'{name} lo']:+.3f}, {r[f'{name} hi']:+.3f}]"

    return pd.DataFrame([{"a − b": f"{r['a']} − {r['b']}", f"at step {r['early']}": iv(r, "early"),
                          f"at step {r['late']}": iv(r, "late"), "change (interaction)": iv(r, "interaction"),
                          "changes with length": "yes" if r["interaction separated"] else "no",
                          "seeds": r["seeds"], "problems": r["problems"]} for r in pairs])


def by_step(df: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """A − B at every evaluated step after 0, for every pair of `methods` (in their order), each with its interval."""
    from analysis import paired

    at = {step: g for step, g in df[df["step"] > 0].groupby("step")}  # each evaluation's outcomes, split once
    rows = []
    for a, b in itertools.combinations(methods, 2):
        for step, g in at.items():
            if {a, b} <= set(g["method"]):
                r = paired.paired_difference(g, a, b, "greedy")
                rows.append({"a": a, "b": b, "step": step, "Δ": r["diff"], "lo": r["lo"], "hi": r["hi"],
                             "separated": r["separated"]})
    return pd.DataFrame(rows)


def tables(runs: Path, early: int = 200) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    """(interaction.csv: every pair of the runs' methods, step `early` against the last; by_step.csv: every pair at
    every step; the per-problem outcomes at every step, problems_by_step.csv.gz) when the runs evaluated the *test*
    problems at two or more steps after 0 (findings are made on test only), else None. analysis.results writes
    them."""
    import yaml

    made = yaml.safe_load((Path(runs) / "config.yaml").read_text())
    if (made.get("train") or {}).get("eval_split") != "test":
        return None
    try:
        df = outcomes_at(Path(runs))
    except UserError:
        return None
    steps = sorted(set(df["step"]) - {0})
    if len(steps) < 2:
        return None
    early = early if early in steps else steps[0]
    methods = [m for m in made.get("methods_run") or sorted(df["method"].unique()) if m in set(df["method"])]
    pairs = [interaction(df, a, b, early, steps[-1]) for a, b in itertools.combinations(methods, 2)]
    return shown(pairs), by_step(df, methods), df.sort_values(["method", "seed", "step", "problem"], kind="stable")


def from_outcomes(df: pd.DataFrame, methods: list[str], early: int = 200) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(interaction.csv, by_step.csv) from the per-problem outcomes at every step (problems_by_step.csv.gz's rows):
    what `tables` computes from a run folder, for a committed result (analysis.redecide)."""
    steps = sorted(set(df["step"]) - {0})
    early = early if early in steps else steps[0]
    methods = [m for m in methods if m in set(df["method"])]
    pairs = [interaction(df, a, b, early, steps[-1]) for a, b in itertools.combinations(methods, 2)]
    return shown(pairs), by_step(df, methods)


def table(out: Path, early: int, against: str) -> pd.DataFrame:
    df = outcomes_at(out)
    if against not in set(df["method"]):
        raise UserError(f"--against {against}: not among the runs ({', '.join(sorted(df['method'].unique()))})")
    late = int(df["step"].max())
    return pd.DataFrame([interaction(df, m, against, early, late) for m in sorted(df["method"].unique())
                         if m != against])


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.interaction", description=__doc__.split("\n")[0])
    p.add_argument("out", help="a compare.py folder whose runs evaluated the test problems at several steps")
    p.add_argument("--early", type=int, default=200, help="the early step (default 200)")
    p.add_argument("--against", default="rft", help="method B of every pair (default rft)")
    p.add_argument("--out-dir", help="where interaction.csv goes (default: OUT)")
    args = p.parse_args(argv)
    df = table(Path(args.out), args.early, args.against)
    dest = Path(args.out_dir or args.out)
    dest.mkdir(parents=True, exist_ok=True)
    df.to_csv(dest / "interaction.csv", index=False, float_format="%.4f")
    print(f"interaction: {len(df)} pairs against {args.against}, step {args.early} vs the last -> "
          f"{dest / 'interaction.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
