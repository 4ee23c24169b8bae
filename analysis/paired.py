"""Does method A beat method B? Paired differences of per-problem outcomes, seeds × problems.

Input: one row per (method, seed, problem) with 0/1 or fractional outcome columns (`greedy`, `majk`, `passk`,
`pass1`). Seed s of every method shares the SFT base, the prompt order and the held-out problems, so the outcomes
pair cell by cell: d[s,p] = y_A[s,p] − y_B[s,p], and D = mean over s, p of d[s,p] (Miller 2024, "Adding Error Bars to
Evals": paired differences remove the problems' own difficulty from the noise).

The interval. Seeds and problems are both samples (of training randomness, of a problem distribution), crossed:

    d[s,p] = μ + a_s + b_p + e_sp,   Var(D) = σ²_S/S + σ²_P/P + σ²_E/(S·P)

estimated by the method of moments from the two-way ANOVA mean squares without replication (Searle, Casella and
McCulloch 1992, "Variance Components", ch. 4): E[MS_S] = σ²_E + P·σ²_S, E[MS_P] = σ²_E + S·σ²_P,
E[MS_E] = σ²_E. Each component is estimated from its mean squares and truncated at 0 (a variance is never negative;
the truncated ANOVA estimator of the same chapter):

    σ̂²_S = max((MS_S − MS_E)/P, 0),   σ̂²_P = max((MS_P − MS_E)/S, 0),   σ̂²_E = MS_E
    Var(D) = σ̂²_S/S + σ̂²_P/P + σ̂²_E/(S·P) = (M_S + M_P − MS_E)/(S·P),   M_S = MS_E + P·σ̂²_S, M_P = MS_E + S·σ̂²_P

(M_S = max(MS_S, MS_E): a seed mean square below the residual one stands at the residual's level, never below it).
No component is ever dropped: where MS_S ≤ MS_E the seed term still contributes M_S = MS_E, known only to S − 1 df.

The reference distribution is t on ν = min(ν_Satterthwaite, S − 1) (`reference_df`): never more than the seed term's
own degrees of freedom, since the seeds are the units a new training run replicates and the variance is known no
better than its seed mean square. Satterthwaite's (1946) ν = (Σ c_i M_i)² / Σ (c_i M_i)²/df_i over (M_S, S − 1),
(M_P, P − 1), (−MS_E, (S − 1)(P − 1)) is larger wherever M_S is small (at P = 500 it is below S − 1 only by under
1%), and M_S is small by chance exactly where false separations come from: at the levels Holm's
method uses (α/m), the Satterthwaite interval separated true zeros at up to 2× the level under results' own fitted
components and far more under a skewed near-ceiling null, while S − 1 held the level under every fitted generator
(experiments/paired_size.py; results/paired_size, docs/concepts/statistics.md). `components_variance` computes Var and
Satterthwaite's ν from the components (the coverage study reports both), and `reference_df` gives the ν the interval,
its p-value and the detectable difference use. Var is floored at 1e-12 only when every d[s,p] is the same (identical outputs), so that
an interval always has a width and nothing divides by zero. `python experiments/paired_coverage.py` measures its
coverage as the seeds' share of Var(D) grows, overall and by which components were truncated
(docs/concepts/statistics.md gives the table).

One seed: σ²_S cannot be estimated. The interval is the paired-by-problem t-interval, Var = MS_P/P with P − 1 df, and
the result says `levels: "problems"`: it holds for that seed's training run, not for a new one.

Why not a percentile bootstrap. Resampling seeds: with 3 seeds there are 10 distinct resamples, and the interval
under-covers when seeds vary. Owen's (2007) pigeonhole bootstrap (seeds and problems resampled independently) counts
the residual σ²_E/(S·P) about 2.3 times at S = 3 (through the seed means, the problem means and the cells themselves:
(2 − 1/S)(2 − 1/P) − 1; "mildly conservative", Owen and Eckles 2012) but the seed component σ²_S/S only (S − 1)/S =
2/3 times (the plug-in variance of a mean of S values). Why not drop the seed term when its mean square is small
(the moment estimate floored at MS_E/(S·P) whenever MS_S + MS_P < 2·MS_E, with (S − 1)(P − 1) df): that rule
under-covers as the seeds' share of Var(D) grows, on exactly the experiments where it fires
(`experiments/paired_coverage.py` measures it beside this interval). The t-interval over the S seed means leaves out the
problems' σ²_P/P (the seed means share the problems), so it covers the difference on these problems, not on new ones:
it under-covers where the problems carry Var(D) and, where the seeds happened to agree, covers less than this interval
(the coverage table); `describe` names 2-seed comparisons.

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


def _satterthwaite(terms):
    """ν of Σ c_i·MS_i from (c_i·MS_i, df_i) pairs (floats or arrays alike); inf where the sum is 0."""
    num = sum(v for v, _ in terms) ** 2
    den = sum(v * v / df for v, df in terms)
    if np.ndim(den) == 0:
        return num / den if den > 0 else math.inf
    return np.divide(num, den, out=np.full(np.shape(den), np.inf), where=den > 0)


def mean_squares(d):
    """(D, MS_S, MS_P, MS_E) of S × P tables d[..., s, p] (S ≥ 2; any leading axes: one experiment or many)."""
    d = np.asarray(d, float)
    S, P = d.shape[-2:]
    D, rows, cols = d.mean(axis=(-2, -1)), d.mean(axis=-1), d.mean(axis=-2)
    ms_s = P * ((rows - D[..., None]) ** 2).sum(axis=-1) / (S - 1)
    ms_p = S * ((cols - D[..., None]) ** 2).sum(axis=-1) / (P - 1)
    resid = d - rows[..., :, None] - cols[..., None, :] + D[..., None, None]
    return D, ms_s, ms_p, (resid ** 2).sum(axis=(-2, -1)) / ((S - 1) * (P - 1))


def truncated_components(ms_s, ms_p, ms_e, S: int, P: int):
    """(σ̂²_S, σ̂²_P): each component from its mean squares, truncated at 0 (module docstring); σ̂²_E is MS_E."""
    return np.maximum((ms_s - ms_e) / P, 0.0), np.maximum((ms_p - ms_e) / S, 0.0)


def two_way(d) -> dict:
    """Mean, mean squares, Var(mean), ν and variance components of an S × P table (a row per seed, a column per
    problem): the interval of the module docstring."""
    d = np.asarray(d, float)
    S, P = d.shape
    if S == 1:  # the seed level is not seen: problems only
        D, cols = d.mean(), d.mean(axis=0)
        ms_p = S * ((cols - D) ** 2).sum() / (P - 1)
        var = max(ms_p / P, FLOOR)
        return dict(diff=D, var=var, df=P - 1.0, levels="problems", ms_s=math.nan, ms_p=ms_p, ms_e=math.nan,
                    var_seed=math.nan, var_problem=ms_p, var_resid=0.0, truncated="none")
    D, ms_s, ms_p, ms_e = (float(x) for x in mean_squares(d))
    sv, pv = (float(x) for x in truncated_components(ms_s, ms_p, ms_e, S, P))  # truncated at 0, never dropped
    var, satterthwaite = components_variance(sv, pv, ms_e, S, P)
    return dict(diff=D, var=max(var, FLOOR), df=reference_df(S, satterthwaite), levels="seeds × problems", ms_s=ms_s, ms_p=ms_p, ms_e=ms_e,
                var_seed=sv, var_problem=pv, var_resid=ms_e, truncated=truncated(ms_s, ms_p, ms_e))


def truncated(ms_s: float, ms_p: float, ms_e: float) -> str:
    """Which components `two_way` truncated at 0: "none", "seed", "problem" or "seed+problem" (the estimator's
    branches, whose coverage experiments/paired_coverage.py reports apart)."""
    cut = [name for name, ms in (("seed", ms_s), ("problem", ms_p)) if ms <= ms_e]
    return "+".join(cut) or "none"


def components_variance(var_seed, var_problem, var_resid, S: int, P: int):
    """Var(D) = σ²_S/S + σ²_P/P + σ²_E/(S·P) of an S × P design (S ≥ 2) and its Satterthwaite ν over the mean squares
    those components imply, M_S = σ²_E + P·σ²_S (S − 1 df), M_P = σ²_E + S·σ²_P (P − 1 df) and −σ²_E
    ((S − 1)(P − 1) df): Var·S·P = M_S + M_P − σ²_E (module docstring). The interval (`two_way`, components truncated
    at 0) and the detectable difference both use it; floats or arrays (many experiments at once) alike."""
    m_s, m_p = var_resid + P * var_seed, var_resid + S * var_problem
    var = var_seed / S + var_problem / P + var_resid / (S * P)
    return var, _satterthwaite([(m_s, S - 1), (m_p, P - 1), (-var_resid, (S - 1) * (P - 1))])


def reference_df(S: int, satterthwaite):
    """The ν of the kept test's t reference at S ≥ 2 seeds: Satterthwaite's, never above S − 1, the seed term's
    degrees of freedom (module docstring); `satterthwaite` is a float or an array of many experiments."""
    return np.minimum(satterthwaite, S - 1.0) if np.ndim(satterthwaite) else min(float(satterthwaite), S - 1.0)


def reference_p(d):
    """Two-sided p-values of the kept test for many S × P tables at once (n × S × P, S ≥ 2): t = D/SE on
    `reference_df`'s ν, as `two_way` and `t_interval` give them one table at a time."""
    d = np.asarray(d, float)
    S, P = d.shape[-2:]
    D, ms_s, ms_p, ms_e = mean_squares(d)
    sv, pv = truncated_components(ms_s, ms_p, ms_e, S, P)
    var, satterthwaite = components_variance(sv, pv, ms_e, S, P)
    return 2 * stats.t.sf(np.abs(D) / np.sqrt(np.maximum(var, FLOOR)), reference_df(S, satterthwaite))


def t_interval(diff: float, var: float, df: float, level: float = 0.95) -> dict:
    """diff ± t_{(1+level)/2, df}·√var, its SE, whether it excludes 0 (`separated`) and the two-sided p-value of the
    same t statistic, p = 2·P(T_df > |diff|/SE) (separated ⟺ p < 1 − level; analysis.families adjusts it)."""
    se = math.sqrt(var)
    half = stats.t.ppf(0.5 + level / 2, df) * se
    p = float(2 * stats.t.sf(abs(diff) / se, df)) if se > 0 else float(diff == 0)  # no spread: 0 is excluded or not
    return dict(diff=diff, lo=diff - half, hi=diff + half, se=se, df=df,
                separated=bool(diff - half > 0 or diff + half < 0), p=p)


def outcome_tables(df: pd.DataFrame, a: str, b: str, metric: str):
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


def paired_difference(df: pd.DataFrame, a: str, b: str, metric: str, level: float = 0.95, tables=None) -> dict:
    """mean(y_A − y_B) over the seeds both have and their problems, its two-way interval (module docstring) and
    P(A > B). `levels` is "problems" with 1 seed: the interval then ignores seed-to-seed variation. `tables`: the
    pair's `outcome_tables`, where the caller has them already."""
    ya, yb, seeds, problems = tables or outcome_tables(df, a, b, metric)
    tw = two_way(ya - yb)
    out = dict(a=a, b=b, metric=metric, **t_interval(tw["diff"], tw["var"], tw["df"], level),
               p_improve=probability_of_improvement(ya.mean(axis=1), yb.mean(axis=1)),
               n_seeds=len(seeds), n_problems=len(problems), levels=tw["levels"])
    return out | {k: tw[k] for k in ("var_seed", "var_problem", "var_resid")}


def unpaired_difference(df: pd.DataFrame, a: str, b: str, metric: str, level: float = 0.95, tables=None) -> dict:
    """The same difference with A and B taken as independent: each mean's own two-way variance, added, ν by
    Satterthwaite over both. What pairing buys is the ratio of the paired to this half-width."""
    ya, yb, seeds, problems = tables or outcome_tables(df, a, b, metric)
    ta, tb = two_way(ya), two_way(yb)
    df_ = _satterthwaite([(ta["var"], ta["df"]), (tb["var"], tb["df"])])
    return dict(a=a, b=b, metric=metric, **t_interval(ta["diff"] - tb["diff"], ta["var"] + tb["var"], df_, level),
                n_seeds=len(seeds), n_problems=len(problems), levels=ta["levels"])


def detectable_difference(var_seed: float, var_problem: float, var_resid: float, n_seeds: int, n_problems: int,
                          alpha: float = 0.05, power: float = 0.8) -> dict:
    """Minimum detectable difference of an S × P paired design from its variance components, and the problems (S
    fixed) or seeds (P fixed) that would halve its SE: Var(S', P) = Var(S, P)/4 solved for S' or P'.

    More problems cannot remove σ²_S/S (nor more seeds σ²_P/P): "not reachable" when that alone is a quarter or
    more. ν is the kept test's (`reference_df`: at most S − 1). The halving solves for the SE
    alone: the t factor, which falls as ν grows (steeply with more seeds when there are few), usually takes the MDE
    further. With 1 seed var_seed is NaN and var_problem the per-cell variance MS_P (problems only).
    """
    S, P = n_seeds, n_problems
    one = math.isnan(var_seed)
    sv, pv, ev = (0.0 if one else var_seed), var_problem, var_resid
    var = sv / S + pv / P + ev / (S * P)
    df = P - 1.0 if one else reference_df(S, components_variance(sv, pv, ev, S, P)[1])
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
    unscored = {(m, metric) for m, g in df.groupby("method") for metric in metrics if g[metric].isna().all()}
    for (a, b), metric in itertools.product(itertools.combinations(methods, 2), metrics):
        if (a, metric) in unscored or (b, metric) in unscored:
            continue  # a method scored without this metric (e.g. no samples: greedy only)
        t = outcome_tables(df, a, b, metric)  # once for the paired and the unpaired difference
        r = paired_difference(df, a, b, metric, tables=t)
        u = unpaired_difference(df, a, b, metric, tables=t)
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
