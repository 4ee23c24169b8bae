"""Coverage of the 95% intervals analysis.curves gives a method's A, B and C_mid, by simulation at the recipe's
evaluation points and seeds.

    python experiments/curves_coverage.py [--sims 200] [--seeds 3] [--steps 1000] [--points 12] [--eval-size 500]
                                          [--csv coverage.csv]     # also the table as CSV (a results/ folder's)

The model: every seed starts from one base, R₀ = 0.43 (the 600-demonstration base of issue 41), measured once with
binomial noise on eval_size problems (the step-0 evaluation every seed shares). Seed s follows the saturating curve
(analysis.curves.saturating) with A_s = A + N(0, sd_A²), ln B_s = ln B + N(0, sd_lnB²), ln C_mid,s = ln C_mid +
N(0, sd_lnC²), and is evaluated at the steps of train.eval_points = --points over --steps
(gcframe.trainer.eval_steps: evenly in log-steps), each evaluation a binomial accuracy on eval_size problems. The
truth an interval should cover: A, and B and C_mid (the geometric means over seeds, which the log-scale intervals
estimate). Three curves, from the shapes issue 41 measured on the tiny model:
    early bend   A 0.50, B 1.5, C_mid at step 30   (RFT: flat near 0.50 from step 150)
    mid          A 0.66, B 1.2, C_mid at step 150  (online RFT: 0.64 at step 600)
    late bend    A 0.70, B 1.0, C_mid at step 400  (GRPO: 0.64 at step 600, still rising)

The intervals, over the seeds of one simulated experiment:
    t       analysis.curves' own: a fit per seed (fit_run), Student's t over the seeds' A, ln B, ln C_mid
    boot    the bootstrap over seeds: seeds resampled with replacement, one curve fitted to the pooled points of the
            resample (fit_curve), the 2.5 and 97.5 percentiles over --boot resamples (3 seeds: 10 distinct resamples)
Both only in experiments where analysis.curves prints numbers (every seed 'ok' or 'still rising'; B not where a
seed's B is at its bound); `reported` is that share, `falls`
the share of runs wrongly flagged as falling late (the truth never falls), `rising` of runs still rising at the end;
`forecast` the share of runs the forecast (fitted on C ≤ C_last/2) predicts, `|err|` its median absolute error
against the last evaluation, `noise` the last evaluation's own median absolute miss of the true curve.
With --sims 200 a coverage of 0.95 is measured to ±0.015 (one binomial SD).
"""
from __future__ import annotations

import argparse
import itertools
import time
from types import SimpleNamespace

import numpy as np

from analysis.curves import FIT_WORDS, first_half, fit_curve, fit_run, noise_sd, saturating, seed_interval

R0 = 0.43
SEQ_PER_STEP = 128  # the default config's B·G (the scale of C does not change a coverage)
DESIGNS = [("early bend", 0.50, 1.5, 30), ("mid", 0.66, 1.2, 150), ("late bend", 0.70, 1.0, 400)]
"""(name, A, B, C_mid in steps)."""
SEED_SDS = [(0.0, 0.0, 0.0), (0.02, 0.15, 0.25)]
"""(sd_A, sd_lnB, sd_lnC) of the seeds: none (evaluation noise only), and seeds that differ (A by ±0.02, C_mid by
a factor ~1.3)."""
PARAMS = ("A", "B", "C_mid")


def eval_points(steps: int, points: int) -> np.ndarray:
    """Step 0 and the steps train.eval_points = points evaluates at (gcframe.trainer.eval_steps)."""
    from gcframe.trainer import eval_steps

    return np.array(sorted({0} | eval_steps(SimpleNamespace(steps=steps, eval_points=points, eval_every=0))), float)


def simulate(rng, truth, seed_sd, seeds: int, steps: np.ndarray, eval_size: int):
    """One experiment -> (measured R₀, [(c, r, the true R at the last step) per seed], step 0 included)."""
    _, a, b, c_mid = truth
    r0 = rng.binomial(eval_size, R0) / eval_size
    c = steps * SEQ_PER_STEP
    runs = []
    for _ in range(seeds):
        a_s = float(np.clip(a + rng.normal(0, seed_sd[0]), 0, 1))
        b_s = b * np.exp(rng.normal(0, seed_sd[1]))
        cm_s = c_mid * SEQ_PER_STEP * np.exp(rng.normal(0, seed_sd[2]))
        true = saturating(c, R0, a_s, b_s, cm_s)
        r = rng.binomial(eval_size, np.clip(true, 0, 1)) / eval_size
        r[0] = r0
        runs.append((c, r, float(true[-1])))
    return r0, runs


def forecast_error(c, r, r0: float, sigma: float) -> float:
    """analysis.curves' forecast: fitted on C ≤ C_last/2, R(C_last) minus the last evaluation (NaN: no fit)."""
    keep = first_half(c, "linear")
    h = fit_run(c[keep], r[keep], r0, sigma)
    return float(saturating(c[-1], r0, h["A"], h["B"], h["C_mid"])) - r[-1] if h["status"] in FIT_WORDS else np.nan


def bootstrap(rng, r0: float, runs, boot: int) -> dict:
    """Percentile intervals of A, B, C_mid from pooled fits over seeds resampled with replacement."""
    cache, draws = {}, []
    for _ in range(boot):
        key = tuple(sorted(rng.integers(0, len(runs), len(runs))))
        if key not in cache:
            c = np.concatenate([runs[i][0][1:] for i in key])
            r = np.concatenate([runs[i][1][1:] for i in key])
            order = np.argsort(c, kind="stable")
            cache[key] = fit_curve(c[order], r[order], r0)
        if cache[key] is not None:
            draws.append([cache[key][p] for p in PARAMS])
    if len(draws) < boot / 2:
        return {p: (np.nan, np.nan) for p in PARAMS}
    lo, hi = np.percentile(np.array(draws), [2.5, 97.5], axis=0)
    return {p: (lo[i], hi[i]) for i, p in enumerate(PARAMS)}


def design(rng, sims: int, boot: int, seeds: int, steps: int, points: int, eval_size: int, truth, seed_sd) -> dict:
    """Coverage of both intervals over `sims` experiments of one design, and the shares of flags."""
    at = eval_points(steps, points)
    true = {"A": truth[1], "B": truth[2], "C_mid": truth[3] * SEQ_PER_STEP}
    cover = {f"{p} {k}": [] for p in PARAMS for k in ("t", "boot")}
    width, statuses, reported, errors, floor = {"t": [], "boot": []}, [], 0, [], []
    for _ in range(sims):
        r0, runs = simulate(rng, truth, seed_sd, seeds, at, eval_size)
        fits = [fit_run(c, r, r0, noise_sd(r[1:], eval_size)) for c, r, _ in runs]
        statuses += [f["status"] for f in fits]
        errors += [forecast_error(c, r, r0, noise_sd(r[1:], eval_size)) for c, r, _ in runs]
        floor += [r[-1] - last for _, r, last in runs]  # the last evaluation's own miss of the truth
        if not all(f["status"] in FIT_WORDS for f in fits):
            continue
        reported += 1
        bs = bootstrap(rng, r0, runs, boot)
        for p in PARAMS if not any(f["B_high"] for f in fits) else ("A", "C_mid"):  # B not printed: a step
            _, lo, hi = seed_interval([f[p] for f in fits], log=p != "A")
            cover[f"{p} t"].append(lo <= true[p] <= hi)
            cover[f"{p} boot"].append(bs[p][0] <= true[p] <= bs[p][1])
            if p == "A":
                width["t"].append(hi - lo)
                width["boot"].append(bs[p][1] - bs[p][0])
    out = {"design": truth[0], "seed_sd": seed_sd, "reported": reported / sims,
           "falls": float(np.mean([s in ("falls", "collapses") for s in statuses])),
           "rising": float(np.mean([s == "still rising" for s in statuses])),
           "forecast": float(np.mean(~np.isnan(errors))),
           "forecast |error|": float(np.median(np.abs(e))) if len(e := np.array(errors)[~np.isnan(errors)]) else np.nan,
           "noise |error|": float(np.median(np.abs(floor)))}
    for p in PARAMS:
        for k in ("t", "boot"):
            out[f"cover {p} {k}"] = float(np.mean(cover[f"{p} {k}"])) if cover[f"{p} {k}"] else float("nan")
    for k in ("t", "boot"):
        out[f"width A {k}"] = float(np.nanmedian(width[k])) if width[k] else float("nan")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=200, help="simulated experiments per design")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples per experiment")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per method (the recipe's)")
    ap.add_argument("--steps", type=int, default=1000, help="training steps (train.steps)")
    ap.add_argument("--points", type=int, default=12, help="evaluations spaced evenly in log-steps (train.eval_points)")
    ap.add_argument("--eval-size", type=int, default=500, help="problems per evaluation (the validation set's)")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the whole simulation")
    ap.add_argument("--csv", help="also write the table here (a row per design)")
    args = ap.parse_args(argv)
    if args.sims < 1 or args.boot < 40 or args.seeds < 2 or args.points < 3:
        ap.error("--sims must be >= 1, --boot >= 40 (a 2.5% percentile needs resamples beyond it), --seeds >= 2 "
                 "(an interval over seeds) and --points >= 3 (three parameters)")
    rng, start = np.random.default_rng(args.seed), time.time()
    print(f"{args.sims} experiments per design, {args.seeds} seeds, {args.steps} steps, evaluations at "
          f"{', '.join(str(int(s)) for s in eval_points(args.steps, args.points))}, {args.eval_size} problems; "
          "coverage of the truth by the t-interval (analysis.curves) | by the bootstrap over seeds")
    cols = [f"cover {p} {k}" for k in ("t", "boot") for p in PARAMS]
    print(f"{'design':>10} {'seed sd':>15} {'reported':>8} | " + " ".join(f"{c[6:]:>9}" for c in cols)
          + f" | {'width A t':>9} {'boot':>6} | {'falls':>5} {'rising':>6} | {'forecast':>8} {'|err|':>6} {'noise':>6}")
    rows = []
    for truth, sd in itertools.product(DESIGNS, SEED_SDS):
        r = design(rng, args.sims, args.boot, args.seeds, args.steps, args.points, args.eval_size, truth, sd)
        rows.append({"steps": args.steps, "points": args.points, "seeds": args.seeds, "eval_size": args.eval_size,
                     "sims": args.sims, **r, "seed_sd": "/".join(f"{x:g}" for x in sd)})
        print(f"{truth[0]:>10} {str(sd):>15} {r['reported']:>8.2f} | " + " ".join(f"{r[c]:>9.3f}" for c in cols)
              + f" | {r['width A t']:>9.3f} {r['width A boot']:>6.3f} | {r['falls']:>5.3f} {r['rising']:>6.3f}"
              + f" | {r['forecast']:>8.2f} {r['forecast |error|']:>6.3f} {r['noise |error|']:>6.3f}",
              flush=True)
    print(f"{time.time() - start:.0f} s")
    if args.csv:
        import pandas as pd

        pd.DataFrame(rows).to_csv(args.csv, index=False, float_format="%.4f")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
