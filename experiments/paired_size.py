"""The real size of the paired tests at the levels Holm's method uses, and their power, by simulation.

    python experiments/paired_size.py                        # results/paired_size/: about 10 minutes of one core
    python experiments/paired_size.py --sims 2000 --out DIR  # a quick look

Holm's first level in a family of m comparisons is α/m (0.05/21 = 0.0024), so a test is only as good as its tail:
one that holds 5% but not 0.24% separates true zeros family-wise. Each candidate of analysis.seedtests (the interval,
the same interval on S − 1 df, a per-seed t, a sign-flip over seeds, a bootstrap-t) is run on the same simulated
experiments, and its false-separation rate is read at α/m for m = 1 … 25.

The generators (binary outcomes, P = 500 problems; experiments/paired_coverage.py's model: y ~ Bernoulli(σ(c_j + β_p
+ γ_jp + u_js)), β_p ~ N(0, s_β²) shared by both arms, γ_jp ~ N(0, s_γ²), u_js ~ N(0, τ_j²)):
    fitted <result>     each result's own fitted components: the medians over its pairs of σ̂²_P and σ̂²_E, its mean
                        accuracy (paired_coverage.calibrate) and the median seeds' share of Var(D) at its seeds (τ by
                        paired_coverage.seed_sd_for), both arms alike
    stable <result>     the same problems, one arm stable (τ = 0) and one with the whole seed variance (τ√2), its c
                        moved so that both arms' mean accuracies are equal: a lagged arm beside its on-policy twin
    stress τ            a skewed near-ceiling null: a stable arm at 0.89 and one at the same mean accuracy with a
                        logit-normal seed effect of SD τ (1.5, 2.5 logits): most of its seeds sit at 0.94–0.99, a few
                        collapse
The truth is 0 under each, exactly: the arms' mean accuracies over seeds, problems and interactions are equal
(analysis.outcome_model.match, by quadrature). Power: the fitted generators with arm A moved so that its mean is 0.10 above B's (below, where B is within 0.1
of the ceiling).

Writes size.csv (generator, S, test, m, level α/m, false-separation rate, its ratio to the level), power.csv
(generator, S, test, m, power at +0.10), generators.csv (each generator's parameters and components) and table.csv
(the statistics page's table: every rate at α/21 as a multiple of the level, and the power beside it).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import seedtests  # noqa: E402
from analysis.outcome_model import accuracy_c, calibrate, components, match, seed_sd_for, two_arms  # noqa: E402
from experiments.paired_coverage import RESULTS, observed  # noqa: E402

FITTED = ("default", "off_policy", "distillation", "new_losses")
SEEDS = (3, 5, 10, 20)
FAMILY = tuple(range(1, 26))
SHOWN = (1, 3, 5, 9, 15, 21, 25)
"""The family sizes whose rates the tables print (every m of FAMILY is in size.csv)."""
ALPHA, EFFECT, P = 0.05, 0.10, 500
STRESS = ((0.89, 1.5), (0.89, 2.5))
"""(mean accuracy, τ of the seed-variable arm) of the stress generators."""


def generators(results: Path = RESULTS) -> list[dict]:
    """Every null generator of the module docstring, and the fitted ones moved by EFFECT (`power`)."""
    out = []
    for name in FITTED:
        r = observed(name, "greedy", results)
        c, s_b, s_g = calibrate(r["σ²_P (median)"], r["σ²_E (median)"], r["accuracy"])
        tau = seed_sd_for(r["seeds' share (median)"], r["seeds"], r["problems"], (c, s_b, s_g))
        spread = math.hypot(s_b, s_g)
        base = {"s_b": s_b, "s_g": s_g, "accuracy": r["accuracy"], "share at the result's seeds":
                r["seeds' share (median)"], "result seeds": r["seeds"]}
        out.append({"generator": f"fitted {name}", "kind": "fitted", **base, "c_a": c, "c_b": c, "tau_a": tau,
                    "tau_b": tau})
        wide = tau * math.sqrt(2)
        out.append({"generator": f"stable {name}", "kind": "stable", **base, "tau_a": wide, "tau_b": 0.0,
                    "c_b": c, "c_a": match(c, spread, math.hypot(spread, wide))})
        shift = EFFECT if r["accuracy"] + EFFECT < 0.98 else -EFFECT  # near the ceiling: A below B instead
        out.append({"generator": f"fitted {name} {shift:+g}", "kind": "power", **base, "tau_a": tau, "tau_b": tau,
                    "c_b": c, "c_a": match(c, math.hypot(spread, tau), math.hypot(spread, tau), shift)})
    default = next(g for g in out if g["generator"] == "fitted default")
    for accuracy, tau in STRESS:
        spread = math.hypot(default["s_b"], default["s_g"])
        c_b = accuracy_c(accuracy, spread)
        out.append({"generator": f"stress τ {tau:g}", "kind": "stress", "s_b": default["s_b"], "s_g": default["s_g"],
                    "accuracy": accuracy, "tau_a": tau, "tau_b": 0.0, "c_b": float(c_b),
                    "c_a": match(float(c_b), spread, math.hypot(spread, tau))})
    return out


def cell(rng, sims: int, S: int, g: dict, chunk: int = 1000) -> dict[str, np.ndarray]:
    """{test: its `sims` p-values} under generator g at S seeds."""
    parts: dict[str, list] = {t: [] for t in seedtests.TESTS}
    for start in range(0, sims, chunk):
        d = two_arms(rng, min(chunk, sims - start), S, P, g)
        for name, p in seedtests.p_values(d, rng=rng).items():
            parts[name].append(p)
    return {name: np.concatenate(v) for name, v in parts.items()}


def summary(size: pd.DataFrame, power: pd.DataFrame, m: int = 21) -> pd.DataFrame:
    """table.csv, the statistics page's table: each generator and S, every test's false-separation rate at α/m as
    a multiple of α/m, and the power at +0.10 of the fitted generators (a row per generator, S)."""
    shown = size[size["m"] == m].pivot_table(index=["generator", "seeds"], columns="test", values="ratio to level",
                                             sort=False)
    out = shown[list(seedtests.TESTS)].round(2).reset_index()
    out.columns = ["generator", "seeds", *[f"{t}: rate / (α/{m})" for t in seedtests.TESTS]]
    p = power[power["m"] == m].pivot_table(index=["generator", "seeds"], columns="test", values="power", sort=False)
    p = p[["interval", "seed_df"]].round(3).reset_index()
    p["generator"] = p["generator"].str.replace(r" [+-]0\.1$", "", regex=True)
    p.columns = ["generator", "seeds", "interval: power at 0.1", "seed_df: power at 0.1"]
    return out.merge(p, on=["generator", "seeds"], how="left")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=20000, help="experiments per generator and S (default 20,000: a "
                    "rate of 0.0024 is then measured to ±0.00035, one binomial SD)")
    ap.add_argument("--out", type=Path, default=RESULTS / "paired_size", help="the folder to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--table", action="store_true", help="only re-make table.csv from the folder's size.csv and "
                    "power.csv")
    args = ap.parse_args(argv)
    if args.table:
        summary(pd.read_csv(args.out / "size.csv"), pd.read_csv(args.out / "power.csv")).to_csv(
            args.out / "table.csv", index=False)
        print(f"table written to {args.out / 'table.csv'}")
        return 0
    rng = np.random.default_rng(args.seed)
    gens = generators()
    size, power, start = [], [], time.time()
    for g in gens:
        for S in SEEDS:
            p = cell(rng, args.sims, S, g)
            for test, pv in p.items():
                for m in FAMILY:
                    level = ALPHA / m
                    rate = float((pv < level).mean())
                    row = {"generator": g["generator"], "kind": g["kind"], "seeds": S, "problems": P, "test": test,
                           "m": m, "level": level, "experiments": args.sims}
                    if g["kind"] == "power":
                        power.append(row | {"power": rate})
                    else:
                        size.append(row | {"false rate": rate, "ratio to level": rate / level})
            shown = {t: float((pv < ALPHA / 21).mean()) for t, pv in p.items()}
            print(f"{g['generator']:>24} S={S:>2}: at α/21 " + ", ".join(f"{t} {v:.4f}" for t, v in shown.items())
                  + f"  ({time.time() - start:.0f} s)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(size).to_csv(args.out / "size.csv", index=False)
    pd.DataFrame(power).to_csv(args.out / "power.csv", index=False)
    rows = []
    for g in gens:
        vs, vp, ve = components(g["c_b"], g["s_b"], g["s_g"], g["tau_b"]) if g["kind"] == "fitted" else (math.nan,) * 3
        rows.append({**{k: (round(v, 6) if isinstance(v, float) else v) for k, v in g.items()},
                     "σ²_S": vs, "σ²_P": vp, "σ²_E": ve})
    pd.DataFrame(rows).to_csv(args.out / "generators.csv", index=False)
    summary(pd.DataFrame(size), pd.DataFrame(power)).to_csv(args.out / "table.csv", index=False)
    print(f"size, power and generators written to {args.out} ({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
