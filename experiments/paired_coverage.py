"""Coverage of three 95% intervals for a paired difference of two methods, seeds × problems, by simulation.

    python experiments/paired_coverage.py [--sims 400] [--boot 500] [--seed 0]      # about a minute on one core

The model (logits; every draw independent): problem p has difficulty β_p ~ N(0, 1.5²); method m has an effect
δ_m (δ_B = 0, δ_A = the true difference in logits), a problem × method interaction γ_mp ~ N(0, 0.5²) and, for each
training seed s, an effect u_ms ~ N(0, seed_sd²). Method m's outcome on problem p at seed s is
y_msp ~ Bernoulli(σ(1 + β_p + δ_m + γ_mp + u_ms)) (σ the logistic function; accuracy ≈ 0.67). Seed s of A and of
B share the problems, so y_A − y_B pairs cell by cell. The truth is the population difference
E[σ(1 + δ_A + Z)] − E[σ(1 + Z)], Z ~ N(0, 1.5² + 0.5² + seed_sd²), by Gauss–Hermite quadrature.

The intervals, each from the S × P table of paired differences d:
  two-way      analysis.paired.two_way: crossed random effects by ANOVA mean squares, Satterthwaite's t
  pigeonhole   Owen's (2007) bootstrap: seeds and problems resampled independently (multinomial weights), the
               2.5 and 97.5 percentiles of the resampled means
  seed t       the t-interval over the S per-seed mean differences (S − 1 df)
For each design the table prints how often each interval covers the truth and how often it excludes 0
("separated": a false separation when the truth is 0, the power otherwise). With --sims 400 a coverage of 0.95
is measured to ±0.011 (one binomial SD); analysis/paired.py's docstring quotes a run with --sims 1000.
"""
from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
from scipy import special, stats

from analysis.paired import t_interval, two_way

BASE, PROBLEM_SD, INTERACTION_SD = 1.0, 1.5, 0.5
SEED_SDS = (0.0, 0.1, 0.3)
"""Seed SDs (logits) of the designs. The logistic's mean slope here is ≈ 0.16, so 0.1 moves a seed's accuracy by about
0.016 (the final accuracies of results/default's seeds spread by SD 0.002–0.008 in all); 0.3, about 0.05, is a
stress case where the seeds dominate Var(D)."""


def truth(effect: float, seed_sd: float) -> float:
    """E[σ(BASE + effect + Z)] − E[σ(BASE + Z)], Z ~ N(0, τ²): the difference every interval should cover."""
    x, w = np.polynomial.hermite_e.hermegauss(120)  # ∫ f(x) e^{−x²/2} dx ≈ Σ w f(x)
    tau = math.sqrt(PROBLEM_SD ** 2 + INTERACTION_SD ** 2 + seed_sd ** 2)
    mean = lambda m: float((w * special.expit(m + tau * x)).sum() / math.sqrt(2 * math.pi))  # noqa: E731
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=400, help="simulated experiments per design")
    ap.add_argument("--boot", type=int, default=500, help="pigeonhole bootstrap resamples per experiment")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the whole simulation")
    args = ap.parse_args(argv)
    if args.sims < 1 or args.boot < 40:
        ap.error("--sims must be at least 1 and --boot at least 40 (a 2.5% percentile needs resamples beyond it)")
    rng, start = np.random.default_rng(args.seed), time.time()
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
