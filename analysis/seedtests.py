"""Tests of a paired difference D = mean d[s, p] that its interval could be built on, as p-values of many experiments
at once: the candidates `experiments/paired_size.py` sizes at the levels Holm's method uses (α/m), and the test
analysis.paired keeps.

Every test takes d, an n × S × P array of paired differences (n experiments, S seeds, P problems; a single S × P
table works too), and returns n two-sided p-values for H0: E[d] = 0. Holm's first level in a family of m
comparisons is α/m, so a test whose p-values are too small in the tail (p < 0.05/21 = 0.0024) separates true zeros
family-wise even when it holds its 5% level.

    interval     analysis.paired.two_way: t = D/SE, SE² = σ̂²_S/S + σ̂²_P/P + σ̂²_E/(S·P) (components truncated at 0),
                 ν Satterthwaite's over the mean squares. Where MS_S falls below MS_E by chance, M_S = MS_E is small
                 and ν jumps towards P's df although σ²_S may be large.
    seed_df      the same SE on ν = S − 1: the seeds are the units a new training run replicates, so the t reference
                 never claims more df than the seed term has (what the interval can be once σ²_S could be real);
                 analysis.paired keeps min(Satterthwaite's ν, S − 1), which at P = 500 differs from it by under 1% in ν
    seed_t       the t test over the S per-seed mean differences x_s = mean_p d[s, p], S − 1 df (omits σ²_P/P: it
                 covers these problems, not new ones)
    sign_flip    the randomisation test over seeds: |mean x_s| against its values under every sign vector ±1^S (exact
                 to S = 12, else 4,096 random ones); exact under a null symmetric in the seeds, smallest p 2/2^S
    bootstrap_t  the bootstrap-t over seeds (Efron and Tibshirani 1993, §12.5): t* = (x̄* − x̄)/(sd*/√S) over 999
                 resamples of the seeds, p = P(|t*| ≥ |t|) (a resample with sd* = 0 counts as beyond every t)
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy import stats

from analysis.paired import FLOOR, components_variance, mean_squares, truncated_components

TESTS = ("interval", "seed_df", "seed_t", "sign_flip", "bootstrap_t")
EXACT_FLIPS = 12
"""Up to this many seeds the sign-flip test enumerates all 2^S sign vectors; beyond, RANDOM_FLIPS of them."""
RANDOM_FLIPS = 4096
BOOT = 999


def _tables(d) -> np.ndarray:
    d = np.asarray(d, float)
    return d[None] if d.ndim == 2 else d


def two_way_t(d, cap_df: bool = False):
    """(t, ν) of analysis.paired's interval for each experiment; cap_df: ν = S − 1 (`seed_df`)."""
    d = _tables(d)
    S, P = d.shape[-2:]
    D, ms_s, ms_p, ms_e = mean_squares(d)
    sv, pv = truncated_components(ms_s, ms_p, ms_e, S, P)
    var, df = components_variance(sv, pv, ms_e, S, P)
    t = D / np.sqrt(np.maximum(var, FLOOR))
    return t, (np.full_like(t, S - 1.0) if cap_df else df)


def interval(d, rng=None) -> np.ndarray:
    t, df = two_way_t(d)
    return 2 * stats.t.sf(np.abs(t), df)


def seed_df(d, rng=None) -> np.ndarray:
    t, df = two_way_t(d, cap_df=True)
    return 2 * stats.t.sf(np.abs(t), df)


def seed_t(d, rng=None) -> np.ndarray:
    x = _tables(d).mean(axis=-1)  # n × S per-seed mean differences
    S = x.shape[-1]
    se = np.maximum(x.std(axis=-1, ddof=1), np.sqrt(FLOOR)) / np.sqrt(S)
    return 2 * stats.t.sf(np.abs(x.mean(axis=-1)) / se, S - 1)


def flips(S: int, rng=None) -> np.ndarray:
    """The sign vectors of the sign-flip test: all 2^S (S ≤ EXACT_FLIPS), else the identity and RANDOM_FLIPS − 1
    random ones."""
    if S <= EXACT_FLIPS:
        return np.array(list(itertools.product((1.0, -1.0), repeat=S)))
    rng = rng if rng is not None else np.random.default_rng(0)
    return np.vstack([np.ones(S), rng.choice((1.0, -1.0), (RANDOM_FLIPS - 1, S))])


def sign_flip(d, rng=None) -> np.ndarray:
    x = _tables(d).mean(axis=-1)
    F = flips(x.shape[-1], rng)  # K × S
    observed = np.abs(x.mean(axis=-1))  # n
    null = np.abs(x @ F.T) / x.shape[-1]  # n × K
    return (null >= observed[:, None] - 1e-12).mean(axis=-1)


def bootstrap_t(d, rng=None, boot: int = BOOT) -> np.ndarray:
    rng = rng if rng is not None else np.random.default_rng(0)
    x = _tables(d).mean(axis=-1)
    n, S = x.shape
    m, sd = x.mean(axis=-1), x.std(axis=-1, ddof=1)
    t = np.abs(m) / np.maximum(sd / np.sqrt(S), np.sqrt(FLOOR))
    idx = rng.integers(0, S, (boot, S))
    xs = x[:, idx]  # n × B × S
    ms, sds = xs.mean(axis=-1), xs.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ts = np.where(sds > 0, np.abs(ms - m[:, None]) / (sds / np.sqrt(S)), np.inf)
    return ((ts >= t[:, None]).sum(axis=-1) + 1) / (boot + 1)


def p_values(d, tests=TESTS, rng=None) -> dict[str, np.ndarray]:
    """{test: its n p-values} for the experiments d (n × S × P)."""
    fns = {"interval": interval, "seed_df": seed_df, "seed_t": seed_t, "sign_flip": sign_flip,
           "bootstrap_t": bootstrap_t}
    return {name: fns[name](d, rng) for name in tests}
