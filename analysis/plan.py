"""The family-wise plan of a result: the test seeds each declared family needs to detect its `min_effect`, planned
before the runs from a committed result of the same design (or a pilot), and checked against the test's real size.

    python -m analysis.plan default                      # results/default/: print its plan, write plan.csv there
    python -m analysis.plan distillation --seeds 12      # the plan against 12 test seeds run

For each family and subgroup of the config's `families:` (analysis.families) that declares `min_effect`:

    m          the comparisons of the family found in the result; Holm's first level, α/m, is the one a separation
               must pass (Bonferroni's: the plan is conservative for the later steps)
    σ²_S, σ²_P, σ²_E   the medians over the family's pairs of their two-way components (analysis.paired), from every
               committed seed (planning, not a finding: the tuning seeds' outcomes are as informative of the
               components as the test seeds')
    power(S)   P(|T| > t_{1−α/(2m), ν}) with T noncentral t on the design's ν (analysis.paired.reference_df, the
               kept test's: at most S − 1) and noncentrality min_effect/SE(S), SE² = σ²_S/S + σ²_P/P + σ²_E/(S·P)
    planned    the fewest test seeds S ≥ 2 with power(S) ≥ 0.8; then the kept test's false-separation rate at α/m
               is simulated under the design's own components (analysis.outcome_model: both arms alike, and a stable
               arm beside a seed-variable one), and seeds are added while it exceeds twice α/m
    detectable the min_effect that the test seeds run detect with power 0.8 at α/m (NaN under 2 test seeds)

plan.csv: family, subgroup, m, level, min_effect, seeds planned (size checked), test seeds run, the detectable
difference and power at those, `decides` (seeds run ≥ seeds planned), the seeds power alone asks, the simulated size
at the planned seeds, the kept test's size under the skewed stress nulls near the seeds run (results/paired_size),
then the metric, the problems and the components.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402

POWER = 0.8
MAX_SEEDS = 60
SIMS = 20000
"""Experiments per simulated size: a rate of α/21 = 0.0024 is then measured to ±0.00035 (one binomial SD)."""
SIZE_FACTOR = 2.0
"""The plan adds seeds while the simulated false rate at α/m exceeds this multiple of α/m."""


def power(effect: float, comps: dict, S: int, P: int, level: float) -> float:
    """Power of the kept test at `level` (two-sided) for a true difference `effect` at S seeds × P problems."""
    from analysis.paired import components_variance, reference_df

    var, satt = components_variance(comps["var_seed"], comps["var_problem"], comps["var_resid"], S, P)
    df = reference_df(S, satt)
    ncp, t = effect / math.sqrt(max(var, 1e-12)), stats.t.ppf(1 - level / 2, df)
    # T = (Z + ncp)/√(X/ν), X ~ χ²_ν: P(|T| > t) = E_X[Φ(ncp − t·s) + Φ(−ncp − t·s)], s = √(X/ν), by the midpoint
    # rule over X's quantiles (scipy's noncentral t returns NaN far in its tails at ν = 1 or 2)
    s = np.sqrt(stats.chi2.ppf((np.arange(_NODES) + 0.5) / _NODES, df) / df)
    return float(np.mean(stats.norm.cdf(ncp - t * s) + stats.norm.cdf(-ncp - t * s)))


_NODES = 2000


def seeds_for_power(effect: float, comps: dict, P: int, level: float, start: int = 2) -> int | None:
    """The fewest seeds (from `start`, at most MAX_SEEDS) at which `power` reaches POWER; None if none does."""
    return next((S for S in range(max(start, 2), MAX_SEEDS + 1) if power(effect, comps, S, P, level) >= POWER),
                None)


def detectable(comps: dict, S: int, P: int, level: float) -> float:
    """The difference detected with power POWER at `level` by S seeds × P problems (NaN under 2 seeds)."""
    if S < 2:
        return math.nan
    f = lambda e: power(e, comps, S, P, level) - POWER  # noqa: E731
    return float(optimize.brentq(f, 1e-5, 2.0, xtol=1e-5)) if f(2.0) > 0 else math.inf


def simulated_size(comps: dict, accuracy: float, S: int, P: int, level: float, sims: int = SIMS,
                   seed: int = 0) -> float:
    """The kept test's false-separation rate at `level` under the design's own components: the larger of both arms
    alike and a stable arm beside one with the whole seed variance (analysis.outcome_model)."""
    from analysis.outcome_model import calibrate, match, seed_sd_of, two_arms
    from analysis.paired import reference_p

    try:  # a component truncated at 0 is floored: the binary model has no problem or residual variance of 0
        c, s_b, s_g = calibrate(max(comps["var_problem"], 1e-5), max(comps["var_resid"], 1e-4),
                                min(max(accuracy, 0.02), 0.98))
        tau = seed_sd_of(comps["var_seed"], (c, s_b, s_g))
    except (RuntimeError, ValueError, ZeroDivisionError):  # no binary model has these components: not simulated
        return math.nan
    spread, wide = math.hypot(s_b, s_g), tau * math.sqrt(2)
    gens = [{"s_b": s_b, "s_g": s_g, "c_a": c, "c_b": c, "tau_a": tau, "tau_b": tau},
            {"s_b": s_b, "s_g": s_g, "c_a": match(c, spread, math.hypot(spread, wide)), "c_b": c, "tau_a": wide,
             "tau_b": 0.0}]
    rng, rates = np.random.default_rng(seed), []
    for g in gens:
        false = 0
        for start in range(0, sims, 1000):
            false += int((reference_p(two_arms(rng, min(1000, sims - start), S, P, g)) < level).sum())
        rates.append(false / sims)
    return max(rates)


SIZE_TABLE = Path(__file__).resolve().parents[1] / "results" / "paired_size" / "size.csv"


def stress_size(S: int, m: int, table: Path = SIZE_TABLE) -> str:
    """The kept test's false-separation rate at α/m under the skewed near-ceiling stress nulls (the larger of the two)
    at the simulated seeds nearest S (results/paired_size, experiments/paired_size.py): '0.0140 at 10 seeds'."""
    if S < 2 or not table.is_file():
        return "–"
    t = pd.read_csv(table)
    t = t[(t["kind"] == "stress") & (t["test"] == "seed_df") & (t["m"] == min(m, int(t["m"].max())))]
    near = int(min(t["seeds"].unique(), key=lambda x: (abs(x - S), x)))
    return f"{t[t['seeds'] == near]['false rate'].max():.4f} at {near} seeds"


def family_members(f: dict, methods: list[str], base: str) -> list[tuple[str, str]]:
    """The (A, B) pairs of a checked family (analysis.families.check) among the methods that ran."""
    import itertools

    from analysis.families import BASE

    if "against" in f:
        other = base if f["against"] == BASE else f["against"]
        return [(m, other) for m in methods if m != other] if other in [*methods, base] else []
    if f["pairs"] == "all":
        return list(itertools.combinations(methods, 2))
    return [(a, b) for a, b in f["pairs"] if a in methods and b in methods]


def family_components(frame: pd.DataFrame, pairs: list, metric: str) -> dict:
    """The medians over `pairs` of their two-way components, the problems and the arms' mean accuracy."""
    from analysis.paired import outcome_tables, two_way

    rows = []
    for a, b in pairs:
        ya, yb, seeds, problems = outcome_tables(frame, a, b, metric)
        if len(seeds) < 2:
            raise UserError(f"{a} − {b} has {len(seeds)} seed in the result: the plan needs the components of at "
                            "least 2 seeds (run a pilot with 2 seeds, or grow the result)")
        tw = two_way(ya - yb)
        rows.append({"var_seed": tw["var_seed"], "var_problem": tw["var_problem"], "var_resid": tw["var_resid"],
                     "problems": len(problems), "accuracy": (ya.mean() + yb.mean()) / 2})
    t = pd.DataFrame(rows)
    return {k: float(t[k].median()) for k in ("var_seed", "var_problem", "var_resid", "accuracy")} | {
        "problems": int(t["problems"].min())}


def plan_rows(runs, spec: dict, seeds_run: int, sims: int = SIMS) -> list[dict]:
    """plan.csv's rows (module docstring) of the families of `spec` (analysis.families.check) that declare
    min_effect, from `runs` (analysis.redecide.Published or a Runs) over all its seeds; `seeds_run`: the test seeds
    the findings use."""
    from analysis.families import ALPHA
    from analysis.findings import ALL, subgroups

    views = {ALL: runs, **{v.name: v for v in subgroups(runs)}}
    out = []
    for name, f in spec.items():
        if f.get("min_effect") is None:
            continue
        for sub in f["subgroups"]:
            view = views.get(sub)
            if view is None:
                raise UserError(f"families.{name} plans subgroup {sub}, which this result does not have")
            frame = next((fr for fr, metrics, *_ in view.outcomes() if f["metric"] in metrics), None)
            if frame is None:
                raise UserError(f"families.{name}: the result has no {f['metric']} outcomes to plan from")
            base = view.base_outcomes()
            if base is not None and "against" in f and f["against"] == "base":
                frame = pd.concat([frame, base], ignore_index=True)
            pairs = family_members(f, [m for m in runs.methods if m in set(frame["method"])], runs.base_label)
            if not pairs:
                continue
            comps = family_components(frame, pairs, f["metric"])
            m, effect, P = len(pairs), float(f["min_effect"]), comps["problems"]
            level = ALPHA / m
            by_power = seeds_for_power(effect, comps, P, level)
            planned, size = by_power, math.nan
            while planned is not None and planned <= MAX_SEEDS:
                size = simulated_size(comps, comps["accuracy"], planned, P, level, sims)
                if math.isnan(size) or size <= SIZE_FACTOR * level:  # NaN: not simulated (plan.csv shows it)
                    break
                planned += 1
            if planned is not None and planned > MAX_SEEDS:
                planned = None
            out.append({"family": name, "subgroup": sub, "m": m, "level": level, "min_effect": effect,
                        "seeds planned": planned if planned is not None else f">{MAX_SEEDS}",
                        "test seeds run": seeds_run,
                        "detectable at seeds run": detectable(comps, seeds_run, P, level),
                        "power at seeds run": power(effect, comps, seeds_run, P, level) if seeds_run >= 2 else 0.0,
                        "decides": planned is not None and seeds_run >= planned,
                        "seeds planned (power)": by_power if by_power is not None else f">{MAX_SEEDS}",
                        "simulated size at planned": size, "size under stress at seeds run": stress_size(seeds_run, m),
                        "metric": f["metric"], "problems": P, "σ²_S": comps["var_seed"],
                        "σ²_P": comps["var_problem"], "σ²_E": comps["var_resid"]})
    return out


def shortfall(rows: list[dict]) -> list[str]:
    """'over_sft_filtered (all) needs 11 test seeds' for each planned family the seeds run do not decide."""
    return [f"{r['family']} ({r['subgroup']}) needs {r['seeds planned']} test seeds" for r in rows if not r["decides"]]


def text(rows: list[dict]) -> str:
    """The plan as the terminal and a page show it: a line per family and subgroup."""
    lines = []
    for r in rows:
        lines.append(f"{r['family']} ({r['subgroup']}, m = {r['m']}, α/m = {r['level']:.4f}): min_effect "
                     f"{r['min_effect']:g} needs {r['seeds planned']} test seeds (power alone "
                     f"{r['seeds planned (power)']}; simulated size there {r['simulated size at planned']:.4f}); "
                     f"{r['test seeds run']} run detect {r['detectable at seeds run']:.3f}"
                     + ("" if r["decides"] else " — not yet decisive"))
    return "\n".join(lines)


@cli_entry
def main(argv=None) -> int:
    from analysis import families
    from analysis.redecide import RESULTS, Published

    p = argparse.ArgumentParser(prog="python -m analysis.plan", description=__doc__.split("\n")[0])
    p.add_argument("name", help="a committed result (results/<name>/) whose config declares families with min_effect")
    p.add_argument("--seeds", type=int, help="the test seeds run (default: the result's own, seeds.csv)")
    p.add_argument("--sims", type=int, default=SIMS, help=f"experiments per simulated size (default {SIMS})")
    args = p.parse_args(argv)
    folder = RESULTS / args.name
    runs = Published(folder)
    import yaml

    cfg = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    spec = families.check(cfg.get("families"))
    if not any(f.get("min_effect") is not None for f in spec.values()):
        raise UserError(f"{folder}/config.yaml declares no family with min_effect: add min_effect: 0.1 (the smallest "
                        "difference the family must detect) to its families")
    from analysis.seeds import roles

    seeds_run = args.seeds if args.seeds is not None else len(roles(folder, cfg)["test"])
    rows = plan_rows(runs, spec, seeds_run, args.sims)
    print(text(rows))
    pd.DataFrame(rows).to_csv(folder / "plan.csv", index=False, float_format="%.5g")
    print(f"plan written to {folder / 'plan.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
