"""Plan seeds × problems before the runs: the difference a paired design detects, from a pilot's variance components.

    python -m analysis.power PILOT --a grpo --b sft [--target 0.08] [--seeds 2,3,4,5,6,8] [--problems 250,500,1000]
    python -m analysis.power PILOT --a grpo,rft,online_rft --b sft_filtered --out power.csv   # several gains at once
    python -m analysis.power PILOT --a grpo,rft --b base,sft --pilot-seeds 0,1   # over the model the runs start from, and sft

PILOT is a compare.py folder with at least 2 seeds (seed-to-seed variation cannot be estimated from one); its
finished runs are read, so the first seeds of a comparison still training are its pilot. The pair's
greedy outcomes give the components of the paired difference d[s, p] = y_A − y_B (analysis.paired: σ²_S seeds,
σ²_P problems, σ²_E the rest, each truncated at 0), and for S seeds and P problems

    Var(mean d) = σ²_S/S + σ²_P/P + σ²_E/(S·P),   detectable = (t_{0.975, ν} + t_{0.8, ν}) · √Var    (α 0.05, power 0.8)

with Satterthwaite's ν (analysis.paired.detectable_difference). The table gives every design of the grid, and the
cheapest one (fewest seeds, then fewest problems) whose detectable difference is at most --target, or says that none
of the grid reaches it and which component is in the way. With several methods in --a, each gain over B gets its
table (and with several in --b, over each of them), and the plan is the cheapest design that detects the target for
every one of them. --out writes every row
(a, b, the pilot's components and difference, seeds, problems, detectable) to a CSV. The plan and this arithmetic go
on the result's page before its table.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402


def components(frame: pd.DataFrame, a: str, b: str, metric: str = "greedy") -> dict:
    """The pilot's variance components of A − B (analysis.paired), refused with 1 seed."""
    from analysis import paired

    r = paired.paired_difference(frame, a, b, metric)
    if r["n_seeds"] < 2:
        raise UserError(f"the pilot has {r['n_seeds']} seed of {a} and {b}: seed-to-seed variation needs at least 2 "
                        "(run the pilot with --seeds 0,1)")
    return {k: r[k] for k in ("var_seed", "var_problem", "var_resid", "diff", "n_seeds", "n_problems")}


def with_base(out: Path, methods: list[str], pilot_seeds: list[int] | None = None) -> pd.DataFrame:
    """The pilot's frame for gains over the model the runs started from (--b base): each finished run's last
    evaluation as its method, and as "base" each seed's step-0 evaluation of the same problems (every run of a seed
    starts from that model; the first method's run gives it), so that A − base pairs problem by problem."""
    from analysis.runs import _outcome_frame, _sources, read_jsonl
    from gcframe.evaluate.problems import FILE

    _, sources = _sources(out, methods, finished=True)
    frames, based = [], set()
    for run, rows in sources.get("train", {}).items():
        seed = int(run.name[4:])
        if pilot_seeds is not None and seed not in pilot_seeds:
            continue
        frames.append(_outcome_frame(rows, run.parent.name, seed))
        if seed not in based:
            asked = {r["problem"] for r in rows}
            start = [r for r in read_jsonl(run / FILE) if r["step"] == 0 and r["problem"] in asked]
            frames.append(_outcome_frame(start, "base", seed))
            based.add(seed)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def pilot_frame(pilot: Path, methods: list[str], b: str, pilot_seeds: list[int] | None) -> pd.DataFrame:
    """The outcomes A − `b` is planned from: the pilot's finished runs (a pilot may still be training), of
    `pilot_seeds` only where given; with b = base, each seed's start as "base" (`with_base`)."""
    from analysis.runs import final_outcomes

    if b == "base":
        return with_base(pilot, methods, pilot_seeds)
    picks = final_outcomes(pilot, [*methods, b], finished=True)
    frame = picks[0][0] if picks else pd.DataFrame()
    return frame[frame["seed"].isin(pilot_seeds)] if pilot_seeds is not None and not frame.empty else frame


def grid(c: dict, seeds: list[int], problems: list[int]) -> pd.DataFrame:
    """The detectable difference of every S × P design from the components `c`."""
    from analysis.paired import detectable_difference

    return pd.DataFrame([{"seeds": S, "problems": P,
                          "detectable": detectable_difference(c["var_seed"], c["var_problem"], c["var_resid"], S,
                                                              P)["mde"]}
                         for S in seeds for P in problems])


def cheapest(table: pd.DataFrame, target: float) -> dict | None:
    """The design with the fewest seeds, then the fewest problems, that detects `target`; None if none does."""
    ok = table[table["detectable"] <= target].sort_values(["seeds", "problems"])
    return None if ok.empty else ok.iloc[0].to_dict()


def plan(frame: pd.DataFrame, methods: list[str], b: str, seeds: list[int], problems: list[int]) -> pd.DataFrame:
    """Every design's detectable difference for each gain A − B, A in `methods`, with the pilot's components."""
    tables = []
    for a in methods:
        c = components(frame, a, b)
        tables.append(grid(c, seeds, problems).assign(
            a=a, b=b, pilot_diff=c["diff"], pilot_seeds=c["n_seeds"], pilot_problems=c["n_problems"],
            var_seed=c["var_seed"], var_problem=c["var_problem"], var_resid=c["var_resid"]))
    return pd.concat(tables, ignore_index=True)


def worst_case(every: pd.DataFrame) -> pd.DataFrame:
    """Per design, the largest detectable difference over the gains: a plan must detect the target for each."""
    return every.groupby(["seeds", "problems"], as_index=False)["detectable"].max()


@cli_entry
def main(argv=None) -> int:
    from analysis.runs import markdown_table

    p = argparse.ArgumentParser(prog="python -m analysis.power", description=__doc__.split("\n")[0])
    p.add_argument("pilot", help="a compare.py folder with >= 2 seeds")
    p.add_argument("--a", required=True, help="method A of the planned comparison (e.g. grpo), or several: grpo,rft")
    p.add_argument("--b", required=True, help="method B (e.g. sft), or base: the model every run started from (each "
                   "seed's step-0 evaluation of the runs' last problems); several, comma-separated, are each planned")
    p.add_argument("--pilot-seeds", help="read only these seeds of the pilot, comma-separated (e.g. 0,1: the first "
                   "two seeds of a comparison that has since finished)")
    p.add_argument("--target", type=float, default=0.08, help="the difference to detect (default 0.08)")
    p.add_argument("--seeds", default="2,3,4,5,6,8")
    p.add_argument("--problems", default="250,500,1000,2000")
    p.add_argument("--out", help="write every design's row to this CSV file")
    args = p.parse_args(argv)
    try:
        seeds = [int(x) for x in args.seeds.split(",")]
        problems = [int(x) for x in args.problems.split(",")]
    except ValueError:
        raise UserError("--seeds and --problems take comma-separated integers like 3,5,8 and 500,1000") from None
    if not (0 < args.target < 1) or min(seeds) < 2 or min(problems) < 2:
        raise UserError(f"--target must lie in (0, 1), seeds and problems be >= 2; got {args.target}, {args.seeds}, "
                        f"{args.problems}")
    methods = [x.strip() for x in args.a.split(",") if x.strip()]
    try:
        pilot_seeds = [int(x) for x in args.pilot_seeds.split(",")] if args.pilot_seeds else None
    except ValueError:
        raise UserError(f"--pilot-seeds takes comma-separated integers like 0,1; got {args.pilot_seeds}") from None
    tables = []
    for b in [x.strip() for x in args.b.split(",") if x.strip()]:  # each baseline's gains, planned together
        against = [a for a in methods if a != b]  # --a sft,grpo --b base,sft: sft − sft is no gain
        frame = pilot_frame(Path(args.pilot), against, b, pilot_seeds)
        if frame.empty:
            raise UserError(f"{args.pilot} has no finished run of {', '.join(methods)} or {b} with per-problem "
                            "outcomes" + (f" among seeds {args.pilot_seeds}" if pilot_seeds else "") + ": give a "
                            "compare.py folder whose runs of those methods have finished")
        tables.append(plan(frame, against, b, seeds, problems))
    every = pd.concat(tables, ignore_index=True)
    for (a, b), table in every.groupby(["a", "b"], sort=False):
        r = table.iloc[0]
        print(f"pilot {args.pilot}: {a} − {b} = {r['pilot_diff']:+.3f} ({r['pilot_seeds']} seeds × {r['pilot_problems']} "
              f"problems); σ²_S {r['var_seed']:.5f}, σ²_P {r['var_problem']:.5f}, σ²_E {r['var_resid']:.5f}")
        print(markdown_table([{"seeds": int(x["seeds"]), "problems": int(x["problems"]),
                               "detectable": f"{x['detectable']:.3f}"} for x in table.to_dict("records")]))
    best = cheapest(worst_case(every), args.target)
    which = " for every gain" if len(every.groupby(["a", "b"])) > 1 else ""
    if best is None:
        c = every.loc[every["detectable"].idxmax()]
        print(f"no design of the grid detects {args.target}{which}: for {c['a']} − {c['b']}, σ²_S/S alone is "
              f"{c['var_seed'] / max(seeds):.5f} at {max(seeds)} seeds and σ²_P/P "
              f"{c['var_problem'] / max(problems):.5f} at {max(problems)} problems")
    else:
        print(f"plan: {best['seeds']:.0f} seeds × {best['problems']:.0f} problems detect {best['detectable']:.3f} "
              f"<= {args.target}{' (the largest over the gains)' if which else ''}")
    if args.out:
        cols = ["a", "b", "pilot_seeds", "pilot_problems", "pilot_diff", "var_seed", "var_problem", "var_resid",
                "seeds", "problems", "detectable"]
        every[cols].to_csv(args.out, index=False)
        print(f"table: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
