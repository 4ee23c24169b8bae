"""Compute–performance curves of a comparison: each run's accuracy against its training compute, fitted with the
saturating curve of ScaleRL (Khatri et al. 2025, "The Art of Scaling Reinforcement Learning Compute for LLMs",
eq. 1), and methods compared by the curve's ceiling and efficiency rather than at the step where the runs stopped.

    python -m analysis.curves RUN_FOLDER [--axis sequences|tokens|time] [--forecast-half linear|log] [--out DIR]

writes DIR (default RUN_FOLDER/report/, or RUN_FOLDER/report/curves_<axis>/ for tokens or time): curves.csv (a row
per method: A, B, C_mid, C_90 and their 95% intervals, or the word that says why there are none), curves_runs.csv
(a row per run), evals.csv (every evaluation of every run: method, seed, step, compute, accuracy, problems;
`run_fits` refits each run from it alone), orderings.csv, forecast.csv, curves.md (the tables) and curves.png (the
fitted curves over the measured points, all methods, log compute).

The curve, fitted per run (method, seed) with scipy.optimize.curve_fit on the evaluations after step 0:

    R(C) − R₀ = (A − R₀) / (1 + (C_mid / C)^B)

    R₀     the run's step-0 accuracy (the base it started from), measured, not fitted
    A      the ceiling: the accuracy the curve approaches as compute grows (bounds 0 ≤ A ≤ 1)
    B      the steepness (B > 0): how sharply the curve turns from its rise to its plateau in log compute
    C_mid  the compute at which half of the gain A − R₀ is reached (C_mid > 0: fitted as ln C_mid, between 1/100 of
           the first evaluation's compute and 100× the last); a smaller C_mid is a more efficient method
    C_90   derived, not fitted: the compute at which 90% of the gain A − R₀ is reached, where (C_mid/C)^B = 1/9, so
           C_90 = C_mid · 9^(1/B): how much a method needs to get near its own ceiling

Compute is counted in what a user pays for (--axis): `sequences` trained on, step × train.prompts_per_step ×
train.group_size from the run's config.yaml (equal per step for every method, the primary axis); generated `tokens`
(the evaluation rows' cumulative gen_tokens; methods that train on stored data generate none and have no curve on
this axis); training wall `time` (the evaluation rows' cumulative time_s, evaluations excluded).

The intervals (95%, over seeds): a fit per seed, then Student's t-interval over the seeds' estimates, on A and on
ln B and ln C_mid (B and C_mid are positive scale parameters, skewed across seeds; their interval is the
back-transformed one around the geometric mean). Not a bootstrap over seeds: with the 3 seeds a recipe affords, a
resample of seeds has 10 distinct values, and a percentile interval can never reach beyond the seeds' own extremes;
the chance that the truth lies between the smallest and the largest of 3 draws is 1 − 2·(1/2)³ = 0.75 for a
symmetric spread, so such an interval covers at most ~75%, far below 95%. The t-interval pays for 3 seeds with
t_{0.975,2} = 4.30. `python experiments/curves_coverage.py` measures both in simulation at the recipe's evaluation
points. Measured with 3 seeds and 500 problems per evaluation, over three curve shapes with and without seed-to-seed
spread (--sims 150 at 1000 steps and 12 log-spaced evaluations; --sims 100 at 2000 steps and 16): the t-interval
covers A in 0.83–0.95 of the experiments, C_mid in 0.90–0.96 and B in 0.76–0.93; the bootstrap covers A in
0.43–0.75, C_mid in 0.56–0.71 and B in 0.27–0.51. The t-interval falls short of 0.95 where the curve bends late
(C_mid at 40% of the steps): the seeds share one measured R₀, whose error is not in their spread, and the runs whose
A runs to its bound (no ceiling in the data) print no number, which leaves the lower estimates.

A method's A, B and C_mid are printed when every one of its runs has a fit ('ok' or 'still rising', the latter
named in the note); otherwise its A cell is a word, and the note says which runs and why:
    too few points         fewer than MIN_POINTS evaluations, counting step 0 (3 parameters need 3 after it)
    compute does not increase   its compute is not strictly increasing from one evaluation to the next
    never rises            its smoothed accuracy never climbs above R₀ by more than the evaluation noise
    falls after C=…        a finding, not a failed fit: the smoothed accuracy peaks and then drops by more than the
                           noise allows (over-optimisation); `collapses` when it ends at or below where it started
    did not converge       curve_fit found no optimum, or one with A or C_mid at a bound or B at its lower one
                           (B at its upper bound is a step between two evaluations: A and C_mid are printed, B not)
    still rising           (a fit, with a caution) C_mid lies beyond the last evaluation: the ceiling is an
                           extrapolation, not measured; the forecast and the orderings say so too
"Smoothed" is the mean of MA_WINDOW consecutive evaluations; the noise σ of one evaluation is the binomial
√(p(1−p)/n) of its n problems (train.eval_size, capped by the evaluated split's size in config.yaml; an upper bound
on the change between two evaluations of the same problems, so a fall flagged is a real one), else the spread of
successive differences. A fall is flagged where peak − end > max(Z_FALL·σ·√(2/w), FLOOR), a rise is missing where
max − R₀ ≤ max(Z_RISE·σ·√(1 + 1/w), FLOOR).

The §5.2 orderings (analysis.findings.CLAIMS) are restated on the curves, paired by seed (seed k of both methods
starts from the same base with the same prompt order), each decided by a 95% t-interval over the seeds both methods
fitted (analysis.sweep.paired) or said to be not separated:
    on A:                      A_a − A_b (which ceiling is higher)
    on compute to a level L:   C_a(L) / C_b(L), its log differenced per seed, with L the pair's R₀ plus half of the
                               lower of the two mean gains Ā − R₀ (a level both curves reach inside the data), and
                               C(L) = C_mid · ((A − R₀)/(L − R₀) − 1)^(−1/B) from the formula above.

The forecast check: each run is fitted again on every evaluation at or before half of its compute (`linear`:
C ≤ C_last/2, a run half as long, train.eval_points evaluating at the halfway step itself; `log`:
C ≤ √(C_first·C_last), half of the log range the evaluations span) and scored only after it: its R(C_last)
compared with the final evaluation; per method the mean error and mean absolute error over seeds,
and the mean absolute error over methods. The final evaluation is itself noisy: its binomial σ is printed beside.

Bad input (nothing written, one line, exit 2): no run of the folder can be fitted because of too few evaluations,
compute that does not increase, no step-0 evaluation or no rise; a forecast on a run with no evaluation after
half its compute; the line says which, for which runs.
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import OptimizeWarning, curve_fit  # noqa: E402

from analysis import paired as paired_test  # noqa: E402
from analysis.findings import CLAIMS  # noqa: E402
from analysis.runs import Runs, markdown_table  # noqa: E402
from analysis.sweep import paired  # noqa: E402
from gcframe.errors import UserError, cli_entry  # noqa: E402

AXES = {"sequences": "sequences trained on", "tokens": "generated tokens", "time": "training wall time (s)"}
MIN_POINTS = 4
MA_WINDOW = 3
Z_FALL, Z_RISE = 3.0, 1.5
FLOOR = 0.01
"""Smallest fall or rise (accuracy) ever flagged or accepted, whatever σ: rounding in an exact curve is not a fall."""
B_BOUNDS = (1e-2, 20.0)
C_SPAN = 100.0
"""ln C_mid is bounded to [C_first / C_SPAN, C_last · C_SPAN]."""
STARTS = (0.5, 1.5, 4.0)
"""Starting values of B; the fit with the smallest squared error is kept (the start of A is the highest accuracy,
of C_mid the compute where the curve first passes half of its rise)."""
BOUND_WORDS = {"A high": "A at its bound 1: no ceiling in the data", "C_mid high": f"C_mid at {C_SPAN:g}× the last "
               "evaluation: no bend in the data", "B low": f"B at its bound {B_BOUNDS[0]:g}: no bend in the data"}
FIT_WORDS = ("ok", "still rising")
"""Statuses with fitted numbers: a method's A, B and C_mid are printed when every run has one of these."""


# -- the curve ---------------------------------------------------------------------------------------------------
def saturating(c, r0: float, a: float, b: float, c_mid: float):
    """R(C) = R₀ + (A − R₀) / (1 + (C_mid/C)^B); R(0) = R₀."""
    c = np.asarray(c, float)
    with np.errstate(divide="ignore"):
        z = np.clip(b * (math.log(c_mid) - np.log(c)), -700, 700)  # ln (C_mid/C)^B
    return r0 + (a - r0) / (1.0 + np.exp(z))


def level_compute(r0: float, a: float, b: float, c_mid: float, level: float) -> float:
    """The compute at which R(C) = level: C_mid · ((A − R₀)/(level − R₀) − 1)^(−1/B); NaN where the curve never
    gets there (level ≥ A for a rising curve)."""
    if not (min(r0, a) < level < max(r0, a)):
        return math.nan
    return c_mid * ((a - r0) / (level - r0) - 1.0) ** (-1.0 / b)


def fit_curve(c, r, r0: float) -> dict | None:
    """Least squares of the curve through (c, r), c > 0, with R₀ fixed -> {A, B, C_mid, rmse, at_bound} or None
    where curve_fit finds no optimum from any start. at_bound names the parameters at a bound ('B high')."""
    c, r = np.asarray(c, float), np.asarray(r, float)
    scale = float(c[-1])
    x = c / scale  # conditioned: the last evaluation at 1
    lo_c, hi_c = math.log(x[0] / C_SPAN), math.log(C_SPAN)
    lower, upper = (0.0, B_BOUNDS[0], lo_c), (1.0, B_BOUNDS[1], hi_c)

    def model(xx, a, b, lc):
        return saturating(xx, r0, a, b, math.exp(lc))

    a0 = float(np.clip(r.max(), 1e-3, 1 - 1e-3))
    half = r0 + 0.5 * (a0 - r0)
    passed = np.nonzero(r >= half)[0] if a0 >= r0 else np.nonzero(r <= half)[0]
    lc0 = float(np.clip(math.log(x[passed[0]] if len(passed) else x[-1]), lo_c + 1e-6, hi_c - 1e-6))
    best = None
    for b0 in STARTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                p, _ = curve_fit(model, x, r, p0=(a0, b0, lc0), bounds=(lower, upper), maxfev=4000)
        except (RuntimeError, ValueError):
            continue
        sse = float(((model(x, *p) - r) ** 2).sum())
        if best is None or sse < best[1]:
            best = (p, sse)
    if best is None:
        return None
    (a, b, lc), sse = best
    tol = 1e-6
    at_bound = [f"{name} {'low' if v - lo <= hi - v else 'high'}" for name, v, lo, hi in
                (("A", a, 0.0, 1.0), ("B", b, *B_BOUNDS), ("C_mid", lc, lo_c, hi_c))
                if min(v - lo, hi - v) <= tol * max(1.0, abs(hi - lo))]
    return {"A": float(a), "B": float(b), "C_mid": float(math.exp(lc) * scale), "rmse": math.sqrt(sse / len(x)),
            "at_bound": at_bound}


# -- one run -----------------------------------------------------------------------------------------------------
def noise_sd(r, n_problems: int | None) -> float:
    """σ of one evaluation: binomial √(p(1−p)/n) at the run's mean accuracy over n problems; without n, the robust
    spread of the successive differences over the later half of the evaluations (1.4826·median|Δ|/√2)."""
    r = np.asarray(r, float)
    if not len(r):  # only the step-0 evaluation: nothing to fit, and no noise to size
        return math.nan
    if n_problems:
        p = float(np.clip(r.mean(), 0.02, 0.98))
        return math.sqrt(p * (1 - p) / n_problems)
    d = np.diff(r[len(r) // 2:])
    return float(1.4826 * np.median(np.abs(d)) / math.sqrt(2)) if len(d) else 0.0


def _fmt_c(c: float) -> str:
    return f"{c:.3g}"


def shape(c, r, r0: float, sigma: float) -> tuple[str, str, float]:
    """(status, words, compute at the peak) from the evaluations after step 0: 'never rises', 'falls'/'collapses'
    (a late fall: a finding), or 'ok' (the saturating curve applies)."""
    c, r = np.asarray(c, float), np.asarray(r, float)
    w = min(MA_WINDOW, len(r))
    smooth = np.convolve(r, np.ones(w) / w, mode="valid")
    peak = int(np.argmax(smooth))
    if smooth[peak] - r0 <= max(Z_RISE * sigma * math.sqrt(1 + 1 / w), FLOOR):
        return "never rises", f"never rises (best {smooth[peak]:.3f} from {r0:.3f})", math.nan
    drop = smooth[peak] - smooth[-1]
    if peak < len(smooth) - 1 and drop > max(Z_FALL * sigma * math.sqrt(2 / w), FLOOR):
        at = peak + int(np.argmax(r[peak:peak + w]))  # the highest evaluation of the peak's window
        if smooth[-1] <= r0:
            return "collapses", (f"collapses after C={_fmt_c(c[at])} ({smooth[peak]:.3f} → {smooth[-1]:.3f}, "
                                 f"below its start {r0:.3f})"), float(c[at])
        return "falls", f"falls after C={_fmt_c(c[at])} ({smooth[peak]:.3f} → {smooth[-1]:.3f})", float(c[at])
    return "ok", "", math.nan


def check_points(c, r, r0) -> tuple[str, str] | None:
    """The input checks of one run's evaluations (c, r include step 0 when it was evaluated) -> (status, words) of
    the first that fails, else None."""
    c = np.asarray(c, float)
    if r0 is None or (isinstance(r0, float) and math.isnan(r0)):
        return "no start", "no step-0 evaluation (R₀ unknown)"
    if len(c) < MIN_POINTS:
        return "too few points", f"too few points ({len(c)} evaluations, {MIN_POINTS} needed)"
    if not (np.diff(c) > 0).all():
        flat = "stays at 0" if not c[-1] else "does not increase between evaluations"
        return "compute does not increase", f"compute does not increase (it {flat})"
    return None


def fit_run(c, r, r0: float, sigma: float) -> dict:
    """One run's evaluations (c, r, step 0 included) -> status, words and, where fitted, A, B, C_mid, C_90, rmse."""
    c, r = np.asarray(c, float), np.asarray(r, float)
    out = {"status": "", "note": "", "A": math.nan, "B": math.nan, "C_mid": math.nan, "C_90": math.nan,
           "rmse": math.nan, "c_peak": math.nan, "B_high": False}
    bad = check_points(c, r, r0)
    if bad:
        return {**out, "status": bad[0], "note": bad[1]}
    post = c > 0
    status, note, c_peak = shape(c[post], r[post], r0, sigma)
    out.update(status=status, note=note, c_peak=c_peak)
    if status != "ok":
        return out
    f = fit_curve(c[post], r[post], r0)
    if f is None:
        return {**out, "status": "did not converge", "note": "did not converge (curve_fit found no optimum)"}
    stuck = [x for x in f["at_bound"] if x != "B high"]
    if stuck:
        return {**out, "status": "did not converge", "note": "did not converge (" + ", ".join(
            BOUND_WORDS.get(x, f"{x.split()[0]} at its {'lower' if x.endswith('low') else 'upper'} bound")
            for x in stuck) + ")"}
    out.update({k: f[k] for k in ("A", "B", "C_mid", "rmse")}, B_high="B high" in f["at_bound"])
    out["C_90"] = f["C_mid"] * 9.0 ** (1.0 / f["B"])  # R − R₀ = 0.9 (A − R₀) where (C_mid/C)^B = 1/9
    if f["C_mid"] > c[-1]:
        out.update(status="still rising", note=f"still rising: C_mid {_fmt_c(f['C_mid'])} beyond the last "
                                               f"evaluation {_fmt_c(c[-1])}, the ceiling extrapolated")
    elif out["B_high"]:  # a step: A and C_mid are measured, B only bounded below
        out["note"] = f"sharp: B at its bound {B_BOUNDS[1]:g}, the bend lies between two evaluations"
    return out


# -- the points of a folder --------------------------------------------------------------------------------------
def _problems(cfg: dict) -> int | None:
    """Problems per evaluation: train.eval_size, capped by the size of the split it reads (config.yaml's splits)."""
    t = cfg.get("train") or {}
    n = t.get("eval_size")
    split = ((cfg.get("splits") or {}).get(t.get("eval_split", "test")) or {}).get("problems")
    return int(min(n, split)) if n and split else (int(n) if n else None)


def curve_points(runs: Runs, axis: str) -> pd.DataFrame:
    """Every evaluation of every run: method, seed, step, compute (on `axis`), accuracy, problems (those evaluated:
    the evaluation noise σ). Published as a curve result's evals.csv, from which `run_fits` refits every run."""
    from gcframe.config import TrainConfig

    if axis not in AXES:
        raise UserError(f"--axis must be one of {', '.join(AXES)}, got '{axis}'")
    ev = runs.eval.sort_values(["method", "seed", "step"])
    if axis == "sequences":
        d = TrainConfig()

        def per_step(m, s):
            t = (runs.configs.get((m, s)) or {}).get("train") or {}
            return t.get("prompts_per_step", d.prompts_per_step) * t.get("group_size", d.group_size)

        compute = [st * per_step(m, s) for m, s, st in zip(ev["method"], ev["seed"], ev["step"])]
        total = [((runs.configs.get((m, s)) or {}).get("train") or {}).get("steps", np.nan) * per_step(m, s)
                 for m, s in zip(ev["method"], ev["seed"])]  # the run's compute when it finishes
    else:
        col = {"tokens": "gen_tokens", "time": "time_s"}[axis]
        compute = ev[col] if col in ev else np.nan
        total = np.nan  # known only once the run has finished: its last evaluation's
    problems = [_problems(runs.configs.get((m, s)) or {}) for m, s in zip(ev["method"], ev["seed"])]
    return pd.DataFrame({"method": ev["method"].to_numpy(), "seed": ev["seed"].to_numpy(),
                         "step": ev["step"].to_numpy(), "compute": np.asarray(compute, float),
                         "accuracy": ev["eval_accuracy"].to_numpy(float),
                         "problems": pd.array(problems, dtype="Int64"),
                         "run_compute": np.broadcast_to(np.asarray(total, float), len(ev)).copy()})


def _r0(g: pd.DataFrame):
    start = g[g["step"] == 0]["accuracy"]
    return float(start.iloc[0]) if len(start) else None


def run_fits(points: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """A row per run: n_points, R₀, the last compute and accuracy, σ, and fit_run's status, words and parameters,
    from `curve_points`' rows (a run folder's, or a result's published evals.csv)."""
    rows = []
    for (m, s), g in points.groupby(["method", "seed"], sort=False):
        c, r, r0 = g["compute"].to_numpy(float), g["accuracy"].to_numpy(float), _r0(g)
        n = g["problems"].dropna() if "problems" in g else pd.Series(dtype=float)
        sigma = noise_sd(r[g["step"].to_numpy() > 0], int(n.iloc[0]) if len(n) else None)
        rows.append({"method": m, "seed": int(s), "n_points": len(g), "R0": r0, "c_last": float(c[-1]),
                     "r_last": float(r[-1]), "sigma": sigma, **fit_run(c, r, r0, sigma)})
    df = pd.DataFrame(rows)
    return df.sort_values("method", key=lambda x: x.map({m: i for i, m in enumerate(methods)}), kind="stable")


INPUT_FAULTS = ("no start", "too few points", "compute does not increase", "never rises")


def refuse_if_unfittable(fits: pd.DataFrame, folder: Path, axis: str) -> None:
    """No run of the folder can be fitted: one line saying which check failed, for which runs."""
    if (~fits["status"].isin(INPUT_FAULTS)).any():
        return
    by = {}
    for _, r in fits.iterrows():
        by.setdefault(r["status"], []).append(f"{r['method']}/seed{r['seed']}")
    hint = {"too few points": "evaluate more often (train.eval_points or train.eval_every) or train longer",
            "compute does not increase": f"no method here has a {AXES[axis]} axis: use --axis sequences" if
            axis == "tokens" else "check the run folders (a run resumed into another?)",
            "never rises": "no method here gains over its start: there is no curve to fit",
            "no start": "the runs have no step-0 evaluation: re-run them with the current trainer"}
    parts = [f"{st}: {', '.join(v[:4])}{' …' if len(v) > 4 else ''}" for st, v in by.items()]
    raise UserError(f"no run in '{folder}' can be fitted ({'; '.join(parts)}): {hint[next(iter(by))]}")


# -- per method ----------------------------------------------------------------------------------------------------
def seed_interval(values, log: bool = False) -> tuple[float, float, float]:
    """(estimate, low, high): the mean over seeds ± t_{0.975,n−1}·s/√n (analysis.paired.t_interval); log=True on
    ln values, back-transformed (the geometric mean). One seed: no interval (NaN)."""
    v = np.asarray(values, float)
    v = np.log(v) if log else v
    n, m = len(v), float(v.mean()) if len(v) else math.nan
    lo = hi = math.nan
    if n >= 2:
        iv = paired_test.t_interval(m, float(v.var(ddof=1)) / n, n - 1)
        lo, hi = iv["lo"], iv["hi"]
    return (math.exp(m), math.exp(lo), math.exp(hi)) if log else (m, lo, hi)


def method_table(fits: pd.DataFrame) -> pd.DataFrame:
    """A row per method: R₀, A, B, C_mid, C_90 with 95% intervals over seeds where every run fits ('ok'), else NaN and
    the words of the runs that do not."""
    rows = []
    for m, g in fits.groupby("method", sort=False):
        fitted = g["status"].isin(FIT_WORDS)
        row = {"method": m, "seeds": len(g), "fitted": int(fitted.sum()),
               "R0": float(g["R0"].mean()) if g["R0"].notna().any() else math.nan}
        sharp = g["B_high"].astype(bool) & fitted
        for p, log in (("A", False), ("B", True), ("C_mid", True), ("C_90", True)):
            est = (seed_interval(g[p], log) if fitted.all() and not (p in ("B", "C_90") and sharp.any())
                   else (math.nan,) * 3)  # a step's B is a bound, so is its C_90
            row.update({p: est[0], f"{p}_lo": est[1], f"{p}_hi": est[2]})
        if not fitted.all():
            row.update(status=_method_status(g[~fitted]), note=_seed_words(g[~fitted]))
        else:
            rising = g["status"] == "still rising"
            row["status"] = "still rising" if rising.any() else "ok"
            row["note"] = "; ".join(
                ([f"still rising in {_seeds(g[rising])} (C_mid beyond the last evaluation): A extrapolated"]
                 if rising.any() else [])
                + ([f"B at its bound {B_BOUNDS[1]:g} in {_seeds(g[sharp])}: a step between two evaluations, B not "
                    "measured"] if sharp.any() else []))
        rows.append(row)
    return pd.DataFrame(rows)


def _seeds(g: pd.DataFrame) -> str:
    return f"seed{'s' if len(g) > 1 else ''} {', '.join(map(str, g['seed']))}"


def _seed_words(bad: pd.DataFrame) -> str:
    """The runs that do not fit, grouped: 'falls after C=3.2e+03 (seeds 0, 2); too few points (seed 1)'."""
    words = {}
    for _, r in bad.iterrows():
        w = (f"{r['status']} after C={_fmt_c(r['c_peak'])}" if r["status"] in ("falls", "collapses")
             else r["note"] if r["status"] == "did not converge" else r["status"])
        words.setdefault(w, []).append(str(r["seed"]))
    return "; ".join(f"{w} (seed{'s' if len(v) > 1 else ''} {', '.join(v)})" for w, v in words.items())


def _method_status(bad: pd.DataFrame) -> str:
    """The word of a method whose runs do not all fit, from those runs: a late fall first, else the most common."""
    bad = bad["status"]
    for first in ("collapses", "falls"):
        if (bad == first).any():
            return first
    return bad.value_counts().index[0]


# -- the orderings -------------------------------------------------------------------------------------------------
def resolve(name: str, methods: list[str]) -> str | None:
    """A claim's method in the folder: the same name, else the one method whose name before '@' is it."""
    if name in methods:
        return name
    hits = [m for m in methods if m.split("@")[0] == name]
    return hits[0] if len(hits) == 1 else None


def _decide(r: dict, less_is_better: bool = False) -> str:
    if r["n_seeds"] < 2 or math.isnan(r["ci_low"]):
        return f"no interval ({r['n_seeds']} seed{'s' if r['n_seeds'] != 1 else ''} in common)"
    sign = -r["significant"] if less_is_better else r["significant"]
    return {1: "holds", -1: "reversed", 0: "not separated"}[sign]


def _log(x: float) -> float:
    return math.log(x) if x > 0 else math.nan


def ordering_rows(fits: pd.DataFrame, table: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """The §5.2 orderings (analysis.findings.CLAIMS) on A and on compute to a common level, paired by seed."""
    rows = []
    by = table.set_index("method")
    for a_name, b_name, claim in CLAIMS:
        a, b = resolve(a_name, methods), resolve(b_name, methods)
        if a is None or b is None:
            continue
        head = {"claim": claim, "a": a, "b": b}
        unfit = [f"{m}: {by.loc[m, 'status']}" for m in (a, b) if by.loc[m, "status"] not in FIT_WORDS]
        if unfit:
            word = "not decided (" + "; ".join(unfit) + ")"
            rows += [{**head, "on": "A", "decision": word}, {**head, "on": "compute to level", "decision": word}]
            continue
        fa, fb = (fits[fits["method"] == m].set_index("seed") for m in (a, b))
        extra = [m for m in (a, b) if by.loc[m, "status"] == "still rising"]
        caution = f" ({' and '.join(extra)} still rising: extrapolated)" if extra else ""
        d = paired(fa["A"], fb["A"])
        rows.append({**head, "on": "A", "estimate": d["mean"], "lo": d["ci_low"], "hi": d["ci_high"],
                     "n_seeds": d["n_seeds"], "decision": _decide(d) + caution})
        r0 = max(by.loc[a, "R0"], by.loc[b, "R0"])
        level = r0 + 0.5 * (min(by.loc[a, "A"], by.loc[b, "A"]) - r0)
        logc = [pd.Series({s: _log(level_compute(x["R0"], x["A"], x["B"], x["C_mid"], level))
                           for s, x in f.iterrows()}) for f in (fa, fb)]
        missing = [f"{m} seed {s}" for m, lc in zip((a, b), logc) for s, v in lc.items() if math.isnan(v)]
        d = paired(logc[0], logc[1])
        rows.append({**head, "on": "compute to level", "level": level, "estimate": math.exp(d["mean"]),
                     "lo": math.exp(d["ci_low"]), "hi": math.exp(d["ci_high"]), "n_seeds": d["n_seeds"],
                     "decision": _decide(d, less_is_better=True)
                     + (f" (level not reached by {', '.join(missing)})" if missing else "")})
    return pd.DataFrame(rows, columns=ORDERING_COLUMNS)  # no claim decided (none of its pairs ran): the header alone


ORDERING_COLUMNS = ["claim", "a", "b", "on", "estimate", "lo", "hi", "n_seeds", "decision", "level"]
"""orderings.csv's columns: an empty table keeps them, so that every reader (pandas too) reads it as a table."""


# -- the forecast --------------------------------------------------------------------------------------------------
def first_half(c, half: str, total: float | None = None) -> np.ndarray:
    """Which evaluations (step 0 included) lie at or before half of a run's compute: linear, C ≤ C_last/2 (the
    trainer's train.eval_points grid evaluates at the halfway step, so one sits exactly there); log,
    C ≤ √(C_first·C_last) with C_first the first evaluation after step 0. C_last is the run's compute when it
    finishes (`total`, train.steps' worth on the sequences axis), else its last evaluation's. The forecast is fitted
    on these and scored only on the others."""
    c = np.asarray(c, float)
    last = total if total is not None and np.isfinite(total) else c[-1]
    if half == "linear":
        return c <= last / 2 * (1 + 1e-12)  # C_last/2 itself counts as at half, whatever the rounding
    first = c[c > 0][0]
    return c <= math.sqrt(first * last) * (1 + 1e-12)


def _run_compute(g: pd.DataFrame) -> float | None:
    """The run's compute when it finishes (curve_points' run_compute), None where not known."""
    return float(g["run_compute"].iloc[0]) if "run_compute" in g and len(g) else None


def refuse_if_nothing_after_half(points: pd.DataFrame, fits: pd.DataFrame, half: str) -> None:
    """A forecast needs an evaluation after the fitted half to be scored on: a run with none is refused in one line
    naming the option (UserError, nothing written)."""
    bad = []
    for _, f in fits.iterrows():
        if f["status"] in INPUT_FAULTS:
            continue
        g = points[(points["method"] == f["method"]) & (points["seed"] == f["seed"])]
        if first_half(g["compute"].to_numpy(float), half, _run_compute(g)).all():
            bad.append(f"{f['method']}/seed{f['seed']} (last evaluation at step {int(g['step'].iloc[-1])})")
    if bad:
        raise UserError(f"no evaluation after half the compute in {', '.join(bad)}: the forecast (--forecast-half "
                        f"{half}) has nothing to score; finish the run (compare.py --resume) or evaluate after half "
                        "its train.steps (train.eval_points)")


def forecast_rows(points: pd.DataFrame, fits: pd.DataFrame, half: str) -> pd.DataFrame:
    """Per run: the curve fitted on the first half of its compute, its R(C_last) against the last evaluation."""
    rows = []
    for _, f in fits.iterrows():
        if f["status"] in INPUT_FAULTS:
            continue
        g = points[(points["method"] == f["method"]) & (points["seed"] == f["seed"])]
        c, r = g["compute"].to_numpy(float), g["accuracy"].to_numpy(float)
        keep = first_half(c, half, _run_compute(g))  # fitted on these; scored on the last one, after them
        h = fit_run(c[keep], r[keep], f["R0"], f["sigma"])
        row = {"method": f["method"], "seed": f["seed"], "half_points": int(keep.sum()),
               "after_points": int((~keep).sum()),
               "c_half": float(c[keep][-1]), "c_last": float(c[-1]), "observed": float(r[-1]),
               "sigma": f["sigma"], "status": h["status"], "note": h["note"]}
        if h["status"] in FIT_WORDS:
            pred = float(saturating(c[-1], f["R0"], h["A"], h["B"], h["C_mid"]))
            row.update(predicted=pred, error=pred - r[-1])
        if f["status"] in FIT_WORDS:  # the full curve's own miss at the last point: the noise floor
            row["full_fit_error"] = float(saturating(c[-1], f["R0"], f["A"], f["B"], f["C_mid"])) - r[-1]
        rows.append(row)
    return pd.DataFrame(rows)


def forecast_table(fc: pd.DataFrame) -> pd.DataFrame:
    """Per method: seeds forecast, mean error and mean |error|, mean σ of the last evaluation; a last row, the mean
    over methods."""
    rows = []
    if fc.empty:
        return pd.DataFrame()
    for m, g in fc.groupby("method", sort=False):
        e = g["error"].dropna() if "error" in g else pd.Series(dtype=float)
        rows.append({"method": m, "seeds": len(g), "forecast": len(e),
                     "mean_error": float(e.mean()) if len(e) else math.nan,
                     "mean_abs_error": float(e.abs().mean()) if len(e) else math.nan,
                     "sigma_last": float(g["sigma"].mean()),
                     "note": "; ".join(f"seed {r['seed']}, first half: {r['note']}" for _, r in g.iterrows()
                                       if r["status"] not in FIT_WORDS)})  # the half fit's word, not the run's
    out = pd.DataFrame(rows)
    mae = out["mean_abs_error"].dropna()
    total = {"method": "mean over methods", "seeds": int(out["seeds"].sum()), "forecast": int(out["forecast"].sum()),
             "mean_error": float(out["mean_error"].dropna().mean()) if len(mae) else math.nan,
             "mean_abs_error": float(mae.mean()) if len(mae) else math.nan,
             "sigma_last": float(out["sigma_last"].mean()), "note": f"{len(mae)} of {len(out)} methods"}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)


# -- the figure and the tables -------------------------------------------------------------------------------------
def _iv(est, lo, hi, spec: str) -> str:
    if est is None or (isinstance(est, float) and math.isnan(est)):
        return "–"
    head = format(est, spec)
    return head if math.isnan(lo) else f"{head} [{format(lo, spec)}, {format(hi, spec)}]"


def draw(points: pd.DataFrame, fits: pd.DataFrame, table: pd.DataFrame, runs: Runs, axis: str, ylabel: str,
         path: Path) -> Path:
    """Measured points (markers) and each run's fitted curve (line) per method, compute on a log axis; the start
    R₀ as a dotted line (step 0 has no place on a log axis); runs without a fit joined by a thin dotted line."""
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    by = table.set_index("method")
    for m in [m for m in runs.methods if m in set(points["method"])]:
        colour = runs.palette[m]
        t = by.loc[m]
        label = (f"{m}: A {_iv(t['A'], t['A_lo'], t['A_hi'], '.3f')}{' (still rising)' * (t['status'] != 'ok')}"
                 if t["status"] in FIT_WORDS else f"{m}: {t['status']}")
        for i, (_, f) in enumerate(fits[fits["method"] == m].iterrows()):
            g = points[(points["method"] == m) & (points["seed"] == f["seed"]) & (points["compute"] > 0)]
            ax.scatter(g["compute"], g["accuracy"], s=14, color=colour, alpha=0.55, label=label if i == 0 else None)
            if f["status"] in FIT_WORDS:
                grid = np.geomspace(g["compute"].min(), g["compute"].max(), 200)
                ax.plot(grid, saturating(grid, f["R0"], f["A"], f["B"], f["C_mid"]), color=colour, lw=1.3,
                        ls="-" if f["status"] == "ok" else "--")
            else:
                ax.plot(g["compute"], g["accuracy"], color=colour, lw=0.7, ls=":")
    r0 = fits["R0"].dropna()
    if len(r0):
        ax.axhline(float(r0.mean()), color="grey", lw=0.8, ls=":", label=f"start (step 0): {r0.mean():.3f}")
    ax.set_xscale("log")
    ax.set_xlabel(f"{AXES[axis]} (log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title("R(C) − R₀ = (A − R₀) / (1 + (C_mid/C)^B), fitted per run (dashed: still rising)", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def shown(half: str, table: pd.DataFrame, orders: pd.DataFrame, fc: pd.DataFrame,
          fits: pd.DataFrame) -> dict[str, tuple[str, list[dict]]]:
    """The tables a person reads, formatted: {name: (heading, rows)} for per_method, orderings, forecast, per_run
    (curves.md shows them; results/ keeps them as CSVs the pages render)."""
    out: dict[str, tuple[str, list[dict]]] = {}
    rows = []
    for _, t in table.iterrows():
        fitted = t["status"] in FIT_WORDS
        rows.append({"method": t["method"], "seeds fitted": f"{t['fitted']}/{t['seeds']}", "R₀": f"{t['R0']:.3f}",
                     "A": _iv(t["A"], t["A_lo"], t["A_hi"], ".3f") if fitted else t["status"],
                     "B": _iv(t["B"], t["B_lo"], t["B_hi"], ".2f") if fitted else "–",
                     "C_mid": _iv(t["C_mid"], t["C_mid_lo"], t["C_mid_hi"], ".3g") if fitted else "–",
                     "C_90": _iv(t["C_90"], t["C_90_lo"], t["C_90_hi"], ".3g")
                     if fitted and pd.notna(t["C_90"]) else "–", "note": t["note"]})
    out["per_method"] = ("Per method", rows)
    if len(orders):
        rows = []
        for _, o in orders.iterrows():
            if o["on"] == "A":
                est = "–" if pd.isna(o.get("estimate")) else _iv(o["estimate"], o["lo"], o["hi"], "+.3f")
                what = "A_a − A_b"
            else:
                est = "–" if pd.isna(o.get("estimate")) else _iv(o["estimate"], o["lo"], o["hi"], ".2f")
                what = "C_a / C_b to reach " + ("–" if pd.isna(o.get("level")) else f"{o['level']:.3f}")
            rows.append({"claim (DeepSeekMath)": o["claim"], "a − b": f"{o['a']} − {o['b']}", "on": what,
                         "estimate [95%]": est, "decision": o["decision"]})
        out["orderings"] = ("The §5.2 orderings on the curves (paired by seed)", rows)
    if len(fc):
        split = "C ≤ C_last/2" if half == "linear" else "C ≤ √(C_first·C_last)"
        rows = [{"method": r["method"], "seeds forecast": f"{r['forecast']}/{r['seeds']}",
                 "mean error": "–" if pd.isna(r["mean_error"]) else f"{r['mean_error']:+.3f}",
                 "mean |error|": "–" if pd.isna(r["mean_abs_error"]) else f"{r['mean_abs_error']:.3f}",
                 "σ of the last evaluation": f"{r['sigma_last']:.3f}", "note": r["note"]} for _, r in fc.iterrows()]
        out["forecast"] = (f"Forecast: fitted on the first half of the compute ({half}: {split}), predicting the "
                           "last evaluation", rows)
    rows = [{"method": r["method"], "seed": r["seed"], "points": r["n_points"], "status": r["status"],
             "A": "–" if pd.isna(r["A"]) else f"{r['A']:.3f}", "B": "–" if pd.isna(r["B"]) else f"{r['B']:.2f}",
             "C_mid": "–" if pd.isna(r["C_mid"]) else f"{r['C_mid']:.3g}",
             "rmse": "–" if pd.isna(r["rmse"]) else f"{r['rmse']:.3f}", "σ": f"{r['sigma']:.3f}",
             "note": r["note"]} for _, r in fits.iterrows()]
    out["per_run"] = ("Per run", rows)
    return out


def markdown(folder: Path, axis: str, half: str, table: pd.DataFrame, orders: pd.DataFrame, fc: pd.DataFrame,
             fits: pd.DataFrame) -> str:
    md = [f"# Compute–performance curves: {folder.name}\n",
          f"R(C) − R₀ = (A − R₀) / (1 + (C_mid/C)^B) fitted per run (scipy curve_fit), C = {AXES[axis]}; A, B, "
          "C_mid: mean over seeds [95% t-interval over seeds; B and C_mid on the log scale]. A word where a method's "
          "runs do not all fit, its runs in the note (`python -m analysis.curves --help` says what each means).\n"]
    for heading, rows in shown(half, table, orders, fc, fits).values():
        md += [f"## {heading}\n", markdown_table(rows)]
    return "\n".join(md)


def write(folder: str | Path, axis: str = "sequences", out: str | Path | None = None,
          half: str = "linear") -> Path:
    """Fit every run of a compare.py folder and write the tables and the figure into `out` (default folder/report,
    or folder/report/curves_<axis> for another axis than sequences); refused (UserError, nothing written) when no run
    can be fitted."""
    if half not in ("linear", "log"):
        raise UserError(f"--forecast-half must be linear or log, got '{half}'")
    folder = Path(folder)
    runs = Runs(folder)
    points = curve_points(runs, axis)
    fits = run_fits(points, runs.methods)
    refuse_if_unfittable(fits, folder, axis)
    refuse_if_nothing_after_half(points, fits, half)
    table = method_table(fits)
    orders = ordering_rows(fits, table, list(table["method"]))
    fc = forecast_rows(points, fits, half)
    ftab = forecast_table(fc)
    dest = Path(out) if out else folder / "report" / ("" if axis == "sequences" else f"curves_{axis}")  # another
    # axis beside the sequences one, never over it
    dest.mkdir(parents=True, exist_ok=True)
    table.to_csv(dest / "curves.csv", index=False, float_format="%.6g")
    points.assign(axis=axis).to_csv(dest / "evals.csv", index=False, float_format="%.6g")  # every run refits from it
    fits.assign(axis=axis).to_csv(dest / "curves_runs.csv", index=False, float_format="%.6g")
    orders.to_csv(dest / "orderings.csv", index=False, float_format="%.6g")
    ftab.to_csv(dest / "forecast.csv", index=False, float_format="%.6g")
    split = (next(iter(runs.configs.values()), {}) or {}).get("train", {}).get("eval_split", "test")
    ylabel = "validation accuracy (greedy)" if split == "validation" else "held-out accuracy (greedy)"
    draw(points, fits, table, runs, axis, ylabel, dest / "curves.png")
    (dest / "curves.md").write_text(markdown(folder, axis, half, table, orders, ftab, fits))
    for name, (_, rows) in shown(half, table, orders, ftab, fits).items():  # the tables as shown, for the pages
        if rows:
            pd.DataFrame(rows).to_csv(dest / f"curves_{name}.csv", index=False)
    return dest


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.curves",
                                description="Fit each run's accuracy against its training compute with ScaleRL's "
                                "saturating curve; compare methods by ceiling A and efficiency B, C_mid.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__[__doc__.index("A method's A, B"):__doc__.index('"Smoothed"')])
    p.add_argument("folder", help="the output folder of experiments/compare.py (its runs evaluated at several steps)")
    p.add_argument("--axis", choices=list(AXES), default="sequences", help="the compute axis (default sequences)")
    p.add_argument("--forecast-half", choices=["linear", "log"], default="linear",
                   help="the forecast's first half: linear (C ≤ C_last/2, default) or log (C ≤ √(C_first·C_last))")
    p.add_argument("--out", help="where to write (default FOLDER/report)")
    args = p.parse_args(argv)
    print(f"curves: {write(args.folder, args.axis, args.out, args.forecast_half)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
