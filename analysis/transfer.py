"""Does an ordering found on one result hold on another? Pair by pair, from the two results' paired tests.

    python -m analysis.transfer results/default results/smollm2_slip [--metric greedy] [--subgroup all] [--out F.csv]

For every comparison A − B that both results' pairs.csv decide (the same metric, all problems, and each planned
subgroup both have), one row: the difference and its 95% interval in each, whether each separates it, and what
became of the first result's verdict in the second:

    holds        both separated, the same sign
    reversed     both separated, opposite signs
    unconfirmed  separated in the first, not in the second (the second's interval covers 0)
    new          not separated in the first, separated in the second
    neither      separated in neither

A pair written B − A in one result is turned round (its Δ and interval negated) to match the first's order.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402

INTERVAL = re.compile(r"^\s*([+-]?\d*\.?\d+) \[([+-]?\d*\.?\d+), ([+-]?\d*\.?\d+)\]")


def pairs(folder: Path, metric: str) -> pd.DataFrame:
    """folder/pairs.csv's rows of `metric`: a, b, subgroup, diff, lo, hi, separated."""
    path = Path(folder) / "pairs.csv"
    if not path.is_file():
        raise UserError(f"{path} not found: give a result folder with a paired test (results/<name>/)")
    frame = pd.read_csv(path)
    frame = frame[frame["metric"] == metric]
    if frame.empty:
        raise UserError(f"{path} has no {metric!r} rows: choose --metric among "
                        f"{', '.join(sorted(pd.read_csv(path)['metric'].unique()))}")
    rows = []
    for _, r in frame.iterrows():
        a, b = r["comparison"].split(" − ")
        diff, lo, hi = (float(x) for x in INTERVAL.match(r["Δ [95% interval]"]).groups())
        rows.append({"a": a, "b": b, "subgroup": r.get("subgroup", "all"), "diff": diff, "lo": lo, "hi": hi,
                     "separated": r["separated"] == "yes"})
    return pd.DataFrame(rows)


def outcome(first: bool, second: bool, same_sign: bool) -> str:
    if first and second:
        return "holds" if same_sign else "reversed"
    return {(True, False): "unconfirmed", (False, True): "new"}.get((first, second), "neither")


def transfer(first: Path, second: Path, metric: str = "greedy") -> pd.DataFrame:
    """One row per pair both results decide (in the first result's order and orientation)."""
    one, two = pairs(first, metric), pairs(second, metric)
    index = {(r.a, r.b, r.subgroup): r for r in two.itertuples(index=False)}
    rows = []
    for r in one.itertuples(index=False):
        s, sign = index.get((r.a, r.b, r.subgroup)), 1
        if s is None:
            s, sign = index.get((r.b, r.a, r.subgroup)), -1  # written B − A in the second: turned round
        if s is None:
            continue
        diff, lo, hi = sign * s.diff, *sorted((sign * s.lo, sign * s.hi))
        rows.append({"comparison": f"{r.a} − {r.b}", "subgroup": r.subgroup,
                     Path(first).name: f"{r.diff:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}]",
                     f"{Path(first).name} separated": "yes" if r.separated else "no",
                     Path(second).name: f"{diff:+.3f} [{lo:+.3f}, {hi:+.3f}]",
                     f"{Path(second).name} separated": "yes" if s.separated else "no",
                     "outcome": outcome(r.separated, s.separated, (r.diff > 0) == (diff > 0))})
    if not rows:
        raise UserError(f"{first} and {second} decide no pair in common for {metric!r}: compare results that share "
                        "method labels")
    return pd.DataFrame(rows)


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first", help="the result whose ordering is checked (e.g. results/default)")
    p.add_argument("second", help="the result it is checked on (e.g. results/smollm2_slip)")
    p.add_argument("--metric", default="greedy", help="pairs.csv's metric (default greedy)")
    p.add_argument("--subgroup", help="keep one subgroup's rows (all, carry, no_carry, ...)")
    p.add_argument("--out", help="write the table to this CSV file as well")
    args = p.parse_args(argv)
    table = transfer(Path(args.first), Path(args.second), args.metric)
    if args.subgroup:
        if args.subgroup not in set(table["subgroup"]):
            raise UserError(f"--subgroup {args.subgroup}: the pairs in common are in "
                            f"{', '.join(table['subgroup'].unique())}; choose one of those")
        table = table[table["subgroup"] == args.subgroup]
    print(table.to_string(index=False))
    counts = table[table["subgroup"] == "all"]["outcome"].value_counts()
    print("all problems: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    if args.out:
        table.to_csv(args.out, index=False)
        print(f"table: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
