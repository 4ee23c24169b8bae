"""Coverage of the 95% interval for a paired difference of two methods, seeds × problems, by simulation.

    python experiments/paired_coverage.py                 # the seed-share table: about 10 minutes of one core
    python experiments/paired_coverage.py --intervals     # three intervals side by side (logistic outcomes)

The seed-share table (the default; written to results/paired_coverage/coverage.csv, which docs/concepts/statistics.md
shows, with components.csv beside it). Its regimes are today's designs: for each of SOURCES (results/default's and
results/smollm2_slip's greedy and pass@1 pairs) the medians over the result's pairs of the estimated σ²_P and σ²_E
and the methods' mean accuracy, computed from its committed problems.csv.gz (components.csv: those medians, the
pairs' seeds' shares of Var(D), and how often their seed component was truncated or the floor rule would fire).
Binary outcomes (`binary`): y_msp ~ Bernoulli(σ(c + β_p + γ_mp + u_ms)), the problem's difficulty β_p ~ N(0, s_β²)
shared by both methods, a method × problem interaction γ_mp ~ N(0, s_γ²) and a method × seed effect u_ms ~ N(0, τ²);
(c, s_β, s_γ) are solved so that at τ = 0 the paired differences d = y_A − y_B have the regime's σ²_P and σ²_E at
its accuracy (`calibrate`, by Gauss–Hermite quadrature), and τ so that the seeds' share of Var(D),
(σ²_S/S)/(σ²_S/S + σ²_P/P + σ²_E/(S·P)), is each of SHARES (`seed_sd_for`: the three components of the crossed model
of analysis/paired.py, computed exactly for this model by `components`). S = 2, 3, 5 seeds, P = 500 problems; A and
B are drawn alike, so the truth is 0. Per cell, `--sims` experiments (20,000: a coverage near 0.95 is measured to
±0.0015, one binomial SD) and the coverage of analysis.paired.two_way's interval, overall, where its seed component
was truncated at 0 (MS_S ≤ MS_E) and where the floor rule (the moment estimate floored at MS_E/(S·P) with
(S − 1)(P − 1) df whenever MS_S + MS_P < 2·MS_E: `dropping`) would fire; beside it the t-interval over the S
per-seed mean differences (S − 1 df), overall and where the floor rule would fire, and the floor rule's own coverage
there. Then verdicts.csv: every published verdict (results/*/pairs.csv and gains.csv) that the floor rule decides
differently, both intervals recomputed from the result's problems.csv.gz. 20,000 experiments a cell, 96 cells: about
10 minutes of one core.

The three intervals (--intervals). The model (logits; every draw independent): problem p has difficulty
β_p ~ N(0, 1.5²); method m has an effect δ_m (δ_B = 0, δ_A = the true difference in logits), a problem × method
interaction γ_mp ~ N(0, 0.5²) and, for each training seed s, an effect u_ms ~ N(0, seed_sd²). Method m's outcome on
problem p at seed s is y_msp ~ Bernoulli(σ(1 + β_p + δ_m + γ_mp + u_ms)) (σ the logistic function; accuracy ≈ 0.67).
Seed s of A and of B share the problems, so y_A − y_B pairs cell by cell. The truth is the population difference
E[σ(1 + δ_A + Z)] − E[σ(1 + Z)], Z ~ N(0, 1.5² + 0.5² + seed_sd²), by Gauss–Hermite quadrature.

The intervals, each from the S × P table of paired differences d:
  two-way      analysis.paired.two_way: crossed random effects, components truncated at 0, Satterthwaite's t
  pigeonhole   Owen's (2007) bootstrap: seeds and problems resampled independently (multinomial weights), the
               2.5 and 97.5 percentiles of the resampled means
  seed t       the t-interval over the S per-seed mean differences (S − 1 df)
For each design the table prints how often each interval covers the truth and how often it excludes 0
("separated": a false separation when the truth is 0, the power otherwise).
"""
from __future__ import annotations

import argparse
import itertools
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special, stats

from analysis.outcome_model import binary, calibrate, components, seed_sd_for
from analysis.paired import (
    components_variance,
    mean_squares,
    t_interval,
    truncated_components,
    two_way,
)

SHARES = (0.0, 0.2, 0.45, 0.6, 0.7, 0.8, 0.85, 0.9)
"""The seeds' share of Var(D) in the seed-share table: up to 0.9, past the medians of today's designs (results/default's
greedy pairs 0.79, its pass@1 pairs 0.84: components.csv)."""
SOURCES = (("default", "greedy"), ("default", "pass1"), ("smollm2_slip", "greedy"), ("smollm2_slip", "pass1"))
"""(result, outcome column) whose pairs' median components make the seed-share table's regimes."""
SEEDS = (2, 3, 5)
RESULTS = Path(__file__).resolve().parents[1] / "results"
OUT = RESULTS / "paired_coverage" / "coverage.csv"

BASE, PROBLEM_SD, INTERACTION_SD = 1.0, 1.5, 0.5
SEED_SDS = (0.0, 0.2, 0.6)
"""Seed SDs (logits) of the designs. The logistic's mean slope here is ≈ 0.16, so a seed SD τ moves one method's
accuracy by about 0.16·τ and a pair's seed-mean difference by about √2·0.16·τ: 0.2 gives 0.044, near the median of
results/default's greedy pairs (√σ̂²_S 0.040; 0.014–0.136 from their 10th to 90th percentile), and 0.6 gives 0.13,
their 90th percentile, where the seeds dominate Var(D). (Each method's final accuracy spreads further across seeds,
by SD 0.10–0.16 in results/default, but most of that is its seed's base, shared by every method of the seed and gone
from a paired difference.)"""


def truth(effect: float, seed_sd: float) -> float:
    """E[σ(BASE + effect + Z)] − E[σ(BASE + Z)], Z ~ N(0, τ²): the difference every interval should cover."""
    x, w = np.polynomial.hermite_e.hermegauss(120)  # ∫ f(x) e^{−x²/2} dx ≈ Σ w f(x)
    tau = math.sqrt(PROBLEM_SD ** 2 + INTERACTION_SD ** 2 + seed_sd ** 2)
    mean = lambda m: float((w * special.expit(m + tau * x)).sum() / math.sqrt(2 * math.pi))
    return mean(BASE + effect) - mean(BASE)


def simulate(rng, n: int, S: int, P: int, effect: float, seed_sd: float):
    """n experiments: (y_A, y_B), each n × S × P of 0/1 outcomes (the model in the module docstring)."""
    beta = rng.normal(0, PROBLEM_SD, (n, 1, P))
    out = []
    for delta in (effect, 0.0):
        eta = BASE + beta + delta + rng.normal(0, INTERACTION_SD, (n, 1, P)) + rng.normal(0, seed_sd, (n, S, 1))
        out.append((rng.random((n, S, P)) < special.expit(eta)).astype(float))
    return out[0], out[1]


def pigeonhole(d, rng, boot: int) -> tuple[float, float]:
    """Owen's pigeonhole bootstrap percentile interval of d's mean: multinomial weights on seeds and on problems."""
    S, P = d.shape
    w = np.bincount((rng.integers(0, S, (boot, S)) + S * np.arange(boot)[:, None]).ravel(), minlength=boot * S)
    v = np.bincount((rng.integers(0, P, (boot, P)) + P * np.arange(boot)[:, None]).ravel(), minlength=boot * P)
    means = ((w.reshape(boot, S) @ d) * v.reshape(boot, P)).sum(axis=1) / (S * P)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def seed_t(d) -> tuple[float, float]:
    """The t-interval over the S per-seed mean differences."""
    x = d.mean(axis=1)
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean() - half), float(x.mean() + half)


def two_way_interval(d) -> tuple[float, float]:
    """analysis.paired's interval (what paired_difference reports) from the table of paired differences."""
    tw = two_way(d)
    r = t_interval(tw["diff"], tw["var"], tw["df"])
    return r["lo"], r["hi"]


def design(rng, sims: int, boot: int, S: int, P: int, seed_sd: float, effect: float) -> dict:
    """Coverage and separation rate of each interval over `sims` simulated experiments of one design."""
    ya, yb = simulate(rng, sims, S, P, effect, seed_sd)
    true = truth(effect, seed_sd)
    rows = {"two-way": [], "pigeonhole": [], "seed t": []}
    for d in ya - yb:
        rows["two-way"].append(two_way_interval(d))
        rows["pigeonhole"].append(pigeonhole(d, rng, boot))
        rows["seed t"].append(seed_t(d))
    out = {"S": S, "P": P, "seed_sd": seed_sd, "truth": true}
    for name, iv in rows.items():
        lo, hi = np.array(iv).T
        out[f"cover {name}"] = float(np.mean((lo <= true) & (true <= hi)))
        out[f"sep {name}"] = float(np.mean((lo > 0) | (hi < 0)))
    return out


def dropping(ms_s, ms_p, ms_e, S: int, P: int):
    """The rule that drops the seed term -> (where it fires, Var, ν): the moment estimate (MS_S + MS_P − MS_E)/(S·P)
    with Satterthwaite's ν over the mean squares, replaced by MS_E/(S·P) with (S − 1)(P − 1) df wherever
    MS_S + MS_P < 2·MS_E (it then ignores σ²_S and σ²_P, however large MS_S). Arrays or floats."""
    fires = ms_s + ms_p < 2 * ms_e
    var = np.where(fires, ms_e / (S * P), (ms_s + ms_p - ms_e) / (S * P))
    df = np.where(fires, (S - 1) * (P - 1), components_variance((ms_s - ms_e) / P, (ms_p - ms_e) / S, ms_e, S, P)[1])
    return fires, var, df


def published(results: Path = OUT.parents[1]) -> pd.DataFrame:
    """Every published interval on all problems (results/*/pairs.csv and gains.csv, recomputed from problems.csv.gz;
    planned subgroups' rows left out) whose verdict
    the dropping rule (`dropping`) decides differently from analysis.paired's interval: result, comparison, metric,
    both intervals and whether the seed term was dropped."""
    from analysis.paired import outcome_tables
    from analysis.redecide import metric_column

    rows = []
    for folder in sorted(f.parent for f in results.glob("*/pairs.csv")):
        out = pd.read_csv(folder / "problems.csv.gz")
        tables = [(pd.read_csv(folder / "pairs.csv", dtype=str), "comparison")]
        if (folder / "gains.csv").is_file():
            g = pd.read_csv(folder / "gains.csv", dtype=str)
            tables.append((g.assign(comparison=g["method"] + " − " + g["over"]), "comparison"))
        for table, col in tables:
            for _, r in table.iterrows():
                if isinstance(r.get("subgroup"), str) and r["subgroup"] != "all":
                    continue  # a planned subgroup's row (analysis.findings): its problems are a subset
                a, b = r[col].split(" − ")
                metric = metric_column(r["metric"])
                ya, yb, seeds, _ = outcome_tables(out.dropna(subset=[metric]), a, b, metric)
                if len(seeds) < 2:
                    continue
                d = ya - yb
                tw = two_way(d)
                fires, var, df = (float(x) for x in dropping(tw["ms_s"], tw["ms_p"], tw["ms_e"], *d.shape))
                now, before = t_interval(tw["diff"], tw["var"], tw["df"]), t_interval(tw["diff"], var, df)
                if now["separated"] != before["separated"]:
                    show = lambda x: f"{x['diff']:+.3f} [{x['lo']:+.3f}, {x['hi']:+.3f}], " + (
                        "separated" if x["separated"] else "not separated")
                    rows.append({"result": folder.name, "comparison": r[col], "metric": r["metric"],
                                 "dropping the seed term": show(before), "components truncated at 0": show(now),
                                 "seed term dropped": "yes" if fires else "no"})
    return pd.DataFrame(rows, columns=["result", "comparison", "metric", "dropping the seed term",
                                       "components truncated at 0", "seed term dropped"])


def observed(result: str, metric: str, results: Path = RESULTS) -> dict:
    """The components of a committed result's pairs, from its problems.csv.gz: over every pair of its methods (the
    model it started from left out) on `metric`, the medians of σ̂²_P, σ̂²_E and the seeds' share of Var(D)
    (σ̂²_S/S over two_way's Var), how often the seed component was truncated at 0 and the floor rule would fire, and
    the methods' mean accuracy (the calibration's)."""
    frame = pd.read_csv(results / result / "problems.csv.gz").dropna(subset=[metric])
    frame = frame[~frame["method"].isin(["SFT base", "base model"])]
    tables = {m: g.pivot(index="seed", columns="problem", values=metric).to_numpy(float)
              for m, g in frame.groupby("method", sort=False)}
    d = np.stack([tables[a] - tables[b] for a, b in itertools.combinations(tables, 2)])
    S, P = d.shape[1:]
    D, ms_s, ms_p, ms_e = mean_squares(d)
    sv, pv = truncated_components(ms_s, ms_p, ms_e, S, P)
    var = components_variance(sv, pv, ms_e, S, P)[0]
    return {"result": result, "metric": {"pass1": "pass@1"}.get(metric, metric), "pairs": len(d), "seeds": S,
            "problems": P, "accuracy": float(frame[metric].mean()), "σ²_P (median)": float(np.median(pv)),
            "σ²_E (median)": float(np.median(ms_e)), "seeds' share (median)": float(np.median(sv / S / var)),
            "seed component truncated (share)": float((ms_s <= ms_e).mean()),
            "floor rule fires (share)": float(dropping(ms_s, ms_p, ms_e, S, P)[0].mean())}


def share_cell(rng, sims: int, S: int, P: int, share: float, regime: dict, chunk: int = 2000) -> dict:
    """One cell of the seed-share table: `sims` experiments of `binary` at this seeds' share, every interval computed
    for a chunk of them at once (analysis.paired's functions on arrays). `regime`: a row of `observed`."""
    params = regime["params"]
    tau = seed_sd_for(share, S, P, params)
    parts = []
    for start in range(0, sims, chunk):
        d = binary(rng, min(chunk, sims - start), S, P, params, tau)
        D, ms_s, ms_p, ms_e = mean_squares(d)
        sv, pv = truncated_components(ms_s, ms_p, ms_e, S, P)
        var, df = components_variance(sv, pv, ms_e, S, P)
        fires, old_var, old_df = dropping(ms_s, ms_p, ms_e, S, P)
        seed_half = stats.t.ppf(0.975, S - 1) * np.sqrt(ms_s / (S * P))  # the t-interval over the S seed means
        parts.append(pd.DataFrame({  # the truth is 0
            "cover": np.abs(D) <= stats.t.ppf(0.975, df) * np.sqrt(var), "seed_t": np.abs(D) <= seed_half,
            "old": np.abs(D) <= stats.t.ppf(0.975, old_df) * np.sqrt(old_var), "cut": ms_s <= ms_e, "fires": fires,
            "df": df, "sp": pv, "se": ms_e}))
    x = pd.concat(parts, ignore_index=True)

    def rate(col, where) -> float:
        return float(x.loc[where, col].mean()) if where.any() else math.nan

    vs, vp, ve = components(*params, tau=tau)
    return {"regime": regime["name"], "σ²_P": vp, "σ²_E": ve, "seeds": S, "problems": P,
            "seeds' share of Var(D)": share, "experiments": sims, "coverage": float(x["cover"].mean()),
            "per-seed t: coverage": float(x["seed_t"].mean()),
            "seed component truncated (share)": float(x["cut"].mean()), "coverage, truncated": rate("cover", x["cut"]),
            "floor rule fires (share)": float(x["fires"].mean()), "coverage where it fires": rate("cover", x["fires"]),
            "per-seed t: coverage where it fires": rate("seed_t", x["fires"]),
            "floor rule: coverage where it fires": rate("old", x["fires"]), "median ν": float(x["df"].median())}


def regimes(results: Path = RESULTS) -> pd.DataFrame:
    """components.csv: `observed` for each of SOURCES, with the calibrated model (`calibrate`) of its medians."""
    rows = []
    for result, metric in SOURCES:
        r = observed(result, metric, results)
        c, s_b, s_g = calibrate(r["σ²_P (median)"], r["σ²_E (median)"], r["accuracy"])
        rows.append(r | {"c": c, "s_β": s_b, "s_γ": s_g})
    return pd.DataFrame(rows)


def share_table(rng, sims: int, regimes_: pd.DataFrame, P: int = 500) -> pd.DataFrame:
    """The seed-share table: each regime × S = 2, 3, 5 × SHARES (`share_cell`)."""
    cells = []
    for _, r in regimes_.iterrows():
        regime = {"name": f"{r['result']} {r['metric']}", "params": (r["c"], r["s_β"], r["s_γ"])}
        for S in SEEDS:
            for share in SHARES:
                cells.append(share_cell(rng, sims, S, P, share, regime))
                print(" ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in cells[-1].items()
                               if k in ("regime", "seeds", "seeds' share of Var(D)", "coverage",
                                        "coverage where it fires")), flush=True)
    return pd.DataFrame(cells)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=None,
                    help="simulated experiments per cell (default 20000 for the seed-share table, 400 with --intervals)")
    ap.add_argument("--intervals", action="store_true",
                    help="compare three intervals on logistic outcomes instead of the seed-share table")
    ap.add_argument("--out", type=Path, default=OUT, help="where the seed-share table is written (a CSV)")
    ap.add_argument("--boot", type=int, default=500, help="pigeonhole bootstrap resamples per experiment")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the whole simulation")
    args = ap.parse_args(argv)
    sims = args.sims or (400 if args.intervals else 20000)
    if sims < 1 or args.boot < 40:
        ap.error("--sims must be at least 1 and --boot at least 40 (a 2.5% percentile needs resamples beyond it)")
    rng, start = np.random.default_rng(args.seed), time.time()
    if not args.intervals:
        made = regimes()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        made.to_csv(args.out.with_name("components.csv"), index=False, float_format="%.4g")
        table = share_table(rng, sims, made)
        table.to_csv(args.out, index=False, float_format="%.3f", na_rep="–")  # –: no experiment in that branch
        verdicts = published()
        verdicts.to_csv(args.out.with_name("verdicts.csv"), index=False)
        print(f"{len(verdicts)} published verdicts differ between the two rules")
        print(f"{args.out}, {args.out.with_name('components.csv')}, {args.out.with_name('verdicts.csv')} "
              f"({time.time() - start:.0f} s)")
        return 0
    args.sims = sims
    names = ("two-way", "pigeonhole", "seed t")
    print(f"{args.sims} experiments per design, {args.boot} bootstrap resamples; "
          "coverage of the truth | rate of excluding 0 (false separation when the truth is 0)")
    print(f"{'S':>2} {'P':>4} {'seed SD':>7} {'truth':>7} | " + " ".join(f"{n:>10}" for n in names)
          + " | " + " ".join(f"{n:>10}" for n in names))
    for S, P, sd, effect in itertools.product((2, 3, 5), (48, 400), SEED_SDS, (0.0, 0.2)):
        r = design(rng, args.sims, args.boot, S, P, sd, effect)
        print(f"{S:>2} {P:>4} {sd:>7.1f} {r['truth']:>+7.3f} | "
              + " ".join(f"{r['cover ' + n]:>10.3f}" for n in names) + " | "
              + " ".join(f"{r['sep ' + n]:>10.3f}" for n in names), flush=True)
    print(f"{time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
