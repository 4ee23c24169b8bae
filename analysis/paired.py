"""Does method A beat method B? Paired differences of per-problem outcomes, seeds × problems.

Input: one row per (method, seed, problem) with 0/1 or fractional outcome columns (`greedy`, `majk`, `passk`,
`pass1`). Seed s of every method shares the SFT base, the prompt order and the held-out problems, so the outcomes
pair cell by cell: d[s,p] = y_A[s,p] − y_B[s,p], and D = mean over s, p of d[s,p] (Miller 2024, "Adding Error Bars to
Evals": paired differences remove the problems' own difficulty from the noise).

The interval. Seeds and problems are both samples (of training randomness, of a problem distribution), crossed:

    d[s,p] = μ + a_s + b_p + e_sp,   Var(D) = σ²_S/S + σ²_P/P + σ²_E/(S·P)

estimated by the method of moments from the two-way ANOVA mean squares without replication (Searle, Casella and
McCulloch 1992, "Variance Components", ch. 4): E[MS_S] = σ²_E + P·σ²_S, E[MS_P] = σ²_E + S·σ²_P, E[MS_E] = σ²_E, so
Var(D) = (MS_S + MS_P − MS_E)/(S·P), unbiased. Its degrees of freedom are Satterthwaite's (1946) for a sum of mean
squares, ν = (Σ c_i MS_i)² / Σ (c_i MS_i)²/df_i, and the interval is D ± t_{0.975,ν}·SE: where the seeds dominate, ν
nears S − 1 and the interval is as wide as the seeds warrant. The estimate is floored at MS_E/(S·P), the variance the
model has when σ²_S = σ²_P = 0 (variances, never below 0; the moment estimate falls below it by chance when both are
small), with (S−1)(P−1) df; and at 1e-12 when every d[s,p] is the same (identical outputs), so that an interval
always has a width and nothing divides by zero.

One seed: σ²_S cannot be estimated. The interval is the paired-by-problem t-interval, Var = MS_P/P with P − 1 df, and
the result says `levels: "problems"`: it holds for that seed's training run, not for a new one.

Why not a percentile bootstrap. Resampling seeds: with 3 seeds there are 10 distinct resamples, and the interval
under-covers when seeds vary. Owen's (2007) pigeonhole bootstrap (seeds and problems resampled independently) counts
the residual σ²_E/(S·P) about 2.3 times at S = 3 (through the seed means, the problem means and the cells themselves:
(2 − 1/S)(2 − 1/P) − 1; "mildly conservative", Owen and Eckles 2012) but the seed component σ²_S/S only (S − 1)/S =
2/3 times (the plug-in variance of a mean of S values). `python experiments/paired_coverage.py --sims 1000` measures
them (logistic problem difficulty, a problem × method interaction, per-seed method effects; 95% intervals). At S = 3,
P = 400 the pigeonhole bootstrap covers 0.99–1.00 when seed effects are 0 and 0.88 when their SD is 0.3 logits; this
interval 0.95–0.96 and 0.92–0.94. The t-interval over the S seed means covers 0.95 in both but separates a true
+0.031 less often (0.21 against 0.27, no seed effects). Where seeds dominate Var(D), ν (from S − 1 seed df) is itself
noisy and this interval under-covers somewhat: 0.92–0.94 at S = 3 and 0.85–0.88 at S = 2 (seed SD 0.3, P = 400);
`describe` names 2-seed comparisons.

P(A > B): the probability of improvement of Agarwal et al. 2021 ("Deep RL at the edge of the statistical precipice",
rliable): P(X_A > X_B) over the paired seeds' scores (the mean over problems per seed), ties ½, U/(n_A·n_B) of the
Mann–Whitney U. The minimum detectable difference at α = 0.05 two-sided and power 0.8 is (t_{0.975,ν} +
t_{0.80,ν})·SE (Cohen 1988; Miller 2024, on power).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from gcframe.errors import UserError
from gcframe.evaluate.problems import set_digest

METRICS = ("greedy", "majk", "passk", "pass1")
RESCORE = "re-score both on one set (python -m gcframe.evaluate OUT --problems N)"
"""How to fix a pairing of runs scored on different problems (the end of the refusal's line)."""
FLOOR = 1e-12


def _satterthwaite(terms) -> float:
    """ν of Σ c_i·MS_i from (c_i·MS_i, df_i) pairs; inf when the sum is 0."""
    num = sum(v for v, _ in terms) ** 2
    den = sum(v * v / df for v, df in terms)
    return num / den if den > 0 else math.inf


def two_way(d) -> dict:
    """Mean, mean squares, Var(mean), ν and variance components of an S × P table (a row per seed, a column per
    problem): the interval of the module docstring."""
    d = np.asarray(d, float)
    S, P = d.shape
    D, rows, cols = d.mean(), d.mean(axis=1), d.mean(axis=0)
    ms_p = S * ((cols - D) ** 2).sum() / (P - 1)
    if S == 1:  # the seed level is not seen: problems only
        var = max(ms_p / P, FLOOR)
        return dict(diff=D, var=var, df=P - 1.0, levels="problems", ms_s=math.nan, ms_p=ms_p, ms_e=math.nan,
                    var_seed=math.nan, var_problem=ms_p, var_resid=0.0)
    ms_s = P * ((rows - D) ** 2).sum() / (S - 1)
    ms_e = ((d - rows[:, None] - cols[None, :] + D) ** 2).sum() / ((S - 1) * (P - 1))
    var = (ms_s + ms_p - ms_e) / (S * P)
    if var > ms_e / (S * P):
        df = _satterthwaite([(ms_s, S - 1), (ms_p, P - 1), (-ms_e, (S - 1) * (P - 1))])
    else:
        var, df = max(ms_e / (S * P), FLOOR), float((S - 1) * (P - 1))
    return dict(diff=D, var=var, df=df, levels="seeds × problems", ms_s=ms_s, ms_p=ms_p, ms_e=ms_e,
                var_seed=max((ms_s - ms_e) / P, 0.0), var_problem=max((ms_p - ms_e) / S, 0.0), var_resid=ms_e)


def t_interval(diff: float, var: float, df: float, level: float = 0.95) -> dict:
    """diff ± t_{(1+level)/2, df}·√var, its SE and whether it excludes 0 (`separated`)."""
    se = math.sqrt(var)
    half = stats.t.ppf(0.5 + level / 2, df) * se
    return dict(diff=diff, lo=diff - half, hi=diff + half, se=se, df=df,
                separated=bool(diff - half > 0 or diff + half < 0))


def _tables(df: pd.DataFrame, a: str, b: str, metric: str):
    """(y_A, y_B, seeds, problems): S × P tables on the seeds both methods have, refused in one line when the runs
    were scored on different problems, a row repeats, or a value is missing."""
    if a == b:
        raise UserError(f"a comparison needs two methods, got {a} twice")
    missing = [c for c in ("method", "seed", "problem", metric) if c not in df]
    if missing:
        raise UserError(f"per-problem outcomes lack the column(s) {', '.join(missing)}: one row per (method, seed, "
                        f"problem) with a {metric} column")
    runs = {}
    for m in (a, b):
        own = df[df["method"] == m]
        if own.empty:
            known = ", ".join(map(str, df["method"].unique()))
            raise UserError(f"no per-problem outcomes for method '{m}' (methods: {known})")
        runs[m] = {s: g for s, g in own.groupby("seed")}
    seeds = sorted(set(runs[a]) & set(runs[b]))
    if not seeds:
        raise UserError(f"{a} has seeds {', '.join(map(str, sorted(runs[a])))} and {b} seeds "
                        f"{', '.join(map(str, sorted(runs[b])))}: no seed in common to pair; train both with one seed")
    sets = {(m, s): frozenset(runs[m][s]["problem"]) for s in seeds for m in (a, b)}
    ref = (a, seeds[0])
    pairs = [((a, s), (b, s)) for s in seeds] + [(ref, (a, s)) for s in seeds[1:]]  # a vs b, then seed vs seed
    for one, two in pairs:
        if sets[one] != sets[two]:
            (n1, d1), (n2, d2) = ((len(sets[k]), set_digest(map(str, sets[k]))) for k in (one, two))
            raise UserError(f"{one[0]} seed {one[1]} was evaluated on {n1} problems (set {d1}) but {two[0]} seed "
                            f"{two[1]} on {n2} (set {d2}): {RESCORE}")
    problems = sorted(sets[ref], key=str)
    out = []
    for m in (a, b):
        rows = pd.concat([runs[m][s] for s in seeds])
        dup = rows[rows.duplicated(["seed", "problem"])]
        if len(dup):
            raise UserError(f"{m} seed {dup['seed'].iloc[0]} has more than one row for problem "
                            f"'{dup['problem'].iloc[0]}': one row per (method, seed, problem)")
        y = rows.pivot(index="seed", columns="problem", values=metric).reindex(index=seeds, columns=problems)
        if y.isna().to_numpy().any():
            raise UserError(f"{m} has no {metric} value for {int(y.isna().to_numpy().sum())} (seed, problem) cells: "
                            f"score every problem, or leave {metric} out")
        out.append(y.to_numpy(float))
    if len(problems) < 2:
        raise UserError(f"{a} and {b} share {len(problems)} problem: an interval needs at least 2")
    return out[0], out[1], seeds, problems


def probability_of_improvement(xa, xb) -> float:
    """P(X_A > X_B) + ½·P(X_A = X_B) over every pair of seed-level scores: U_A/(n_A·n_B) (Agarwal et al. 2021)."""
    return float(stats.mannwhitneyu(xa, xb, alternative="two-sided").statistic) / (len(xa) * len(xb))


def paired_difference(df: pd.DataFrame, a: str, b: str, metric: str, level: float = 0.95) -> dict:
    """mean(y_A − y_B) over the seeds both have and their problems, its two-way interval (module docstring) and
    P(A > B). `levels` is "problems" with 1 seed: the interval then ignores seed-to-seed variation."""
    ya, yb, seeds, problems = _tables(df, a, b, metric)
    tw = two_way(ya - yb)
    out = dict(a=a, b=b, metric=metric, **t_interval(tw["diff"], tw["var"], tw["df"], level),
               p_improve=probability_of_improvement(ya.mean(axis=1), yb.mean(axis=1)),
               n_seeds=len(seeds), n_problems=len(problems), levels=tw["levels"])
    return out | {k: tw[k] for k in ("var_seed", "var_problem", "var_resid")}


def unpaired_difference(df: pd.DataFrame, a: str, b: str, metric: str, level: float = 0.95) -> dict:
    """The same difference with A and B taken as independent: each mean's own two-way variance, added, ν by
    Satterthwaite over both. What pairing buys is the ratio of the paired to this half-width."""
    ya, yb, seeds, problems = _tables(df, a, b, metric)
    ta, tb = two_way(ya), two_way(yb)
    df_ = _satterthwaite([(ta["var"], ta["df"]), (tb["var"], tb["df"])])
    return dict(a=a, b=b, metric=metric, **t_interval(ta["diff"] - tb["diff"], ta["var"] + tb["var"], df_, level),
                n_seeds=len(seeds), n_problems=len(problems), levels=ta["levels"])


def detectable_difference(var_seed: float, var_problem: float, var_resid: float, n_seeds: int, n_problems: int,
                          alpha: float = 0.05, power: float = 0.8) -> dict:
    """Minimum detectable difference of an S × P paired design from its variance components, and the problems (S
    fixed) or seeds (P fixed) that would halve its SE: Var(S', P) = Var(S, P)/4 solved for S' or P'.

    More problems cannot remove σ²_S/S (nor more seeds σ²_P/P): "not reachable" when that alone is a quarter or
    more. ν is Satterthwaite's with the expected mean squares of these components. The halving solves for the SE
    alone: the t factor, which falls as ν grows (steeply with more seeds when there are few), usually takes the MDE
    further. With 1 seed var_seed is NaN and var_problem the per-cell variance MS_P (problems only).
    """
    S, P = n_seeds, n_problems
    one = math.isnan(var_seed)
    sv, pv, ev = (0.0 if one else var_seed), var_problem, var_resid
    var = sv / S + pv / P + ev / (S * P)
    if one:
        df = P - 1.0
    else:
        df = _satterthwaite([(ev + P * sv, S - 1), (ev + S * pv, P - 1), (-ev, (S - 1) * (P - 1))])
    q = stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)  # normal quantiles at df = inf
    goal = var / 4  # Var(S', P) = sv/S' + pv/P + ev/(S'·P) and Var(S, P') likewise, solved for S' and P'
    room_p, room_s = goal - sv / S, goal - pv / P
    problems = math.ceil((pv + ev / S) / room_p - 1e-9) if room_p > 0 else "not reachable"
    seeds = math.ceil((sv + ev / P) / room_s - 1e-9) if room_s > 0 else "not reachable"
    if one:
        seeds = "unknown (1 seed)"
    return dict(mde=q * math.sqrt(var), se=math.sqrt(var), df=df, problems_to_halve=problems, seeds_to_halve=seeds)


def pairwise(df: pd.DataFrame, metrics=None, methods=None) -> pd.DataFrame:
    """Every unordered pair of methods (in the order given or first seen) × every metric both were scored on: the
    paired result, `narrowing` = its half-width over the unpaired one (under 1: pairing narrowed the interval; each
    half-width carries its own t quantile, and the paired ν, drawn mostly from S − 1 seed df, is often the smaller),
    and the design's MDE and halving answers (`detectable_difference`)."""
    methods = list(methods) if methods is not None else list(dict.fromkeys(df["method"]))
    metrics = [m for m in (metrics or METRICS) if m in df]
    if not metrics:
        raise UserError(f"per-problem outcomes have none of the metric columns {', '.join(METRICS)}")
    rows = []
    for (a, b), metric in itertools.product(itertools.combinations(methods, 2), metrics):
        if any(df.loc[df["method"] == m, metric].isna().all() for m in (a, b)):
            continue  # a method scored without this metric (e.g. no samples: greedy only)
        r = paired_difference(df, a, b, metric)
        u = unpaired_difference(df, a, b, metric)
        half, uhalf = (r["hi"] - r["lo"]) / 2, (u["hi"] - u["lo"]) / 2
        mde = detectable_difference(r["var_seed"], r["var_problem"], r["var_resid"], r["n_seeds"], r["n_problems"])
        rows.append(r | {"unpaired_half": uhalf, "unpaired_se": u["se"],
                         "narrowing": half / uhalf if uhalf > 0 else math.nan}
                    | {k: mde[k] for k in ("mde", "problems_to_halve", "seeds_to_halve")})
    return pd.DataFrame(rows)


def describe(row) -> str:
    """'grpo − online_rft, greedy: +0.042 [+0.011, +0.073], P(A>B) 0.78, separated' (and the seed count when it is
    under 3: '2 seeds'). One seed: no P(A>B) (over one score per method it is 0, ½ or 1), and what the interval
    covers: '..., separated, 1 seed: the interval covers this run's problems, not a new training run'."""
    n = int(row["n_seeds"])
    text = (f"{row['a']} − {row['b']}, {row['metric']}: {row['diff']:+.3f} [{row['lo']:+.3f}, {row['hi']:+.3f}], "
            + ("" if n == 1 else f"P(A>B) {row['p_improve']:.2f}, ")
            + ("separated" if row["separated"] else "not separated"))
    return text + (", 1 seed: the interval covers this run's problems, not a new training run" if n == 1
                   else f", {n} seeds" if n == 2 else "")
