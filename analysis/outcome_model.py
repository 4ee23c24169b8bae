"""The binary-outcome model of a paired experiment, seeds × problems, that the coverage and size studies simulate
and the planner (analysis.plan) checks a design's real size under.

Arm j's outcome on problem p at training seed s is y_jsp ~ Bernoulli(σ(c_j + β_p + γ_jp + u_js)): the problem's
difficulty β_p ~ N(0, s_β²) shared by both arms, an arm × problem interaction γ_jp ~ N(0, s_γ²) and an arm × seed
effect u_js ~ N(0, τ_j²). With both arms alike (c, τ) the paired differences d = y_A − y_B have the crossed
components of analysis.paired exactly (`components`, by quadrature); `calibrate` solves (c, s_β, s_γ) for a result's
σ²_P, σ²_E and accuracy, `seed_sd_for` τ for a seeds' share of Var(D), and `match` moves one arm's c so that the two
arms' mean accuracies differ by a given amount (0: a true null) when their seed SDs differ.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

_T = np.linspace(-8.0, 8.0, 641)
_PHI = np.exp(-_T ** 2 / 2) / np.exp(-_T ** 2 / 2).sum()  # E[F(Z)], Z ~ N(0, 1), ≈ Σ _PHI·F(_T): the trapezoid rule,
# whose error falls exponentially for the smooth logistic here, however steep (s_β up to 15: still under 1e-9)


def _mean(c, sd, power: int = 1):
    """E[σ(c + sd·Z)^power], Z ~ N(0, 1), for every c of an array (sd a number)."""
    return special.expit(np.asarray(c, float)[..., None] + sd * _T) ** power @ _PHI


def components(c: float, s_b: float, s_g: float, tau: float) -> tuple[float, float, float]:
    """(σ²_S, σ²_P, σ²_E) of d = y_A − y_B under `binary`'s model, exactly (quadrature): d = a_s + b_p + e_sp with
    a_s = f(u_A,s) − f(u_B,s), f(u) = E σ(c + β + γ + u) over the problems, so σ²_S = 2·Var f(u);
    b_p = g(β_p + γ_A,p) − g(β_p + γ_B,p), g(z) = E σ(c + z + u) over the seeds, so σ²_P = 2·E[g(β + γ)²] − 2·E[h(β)²]
    with h(β) = E σ(c + β + γ + u) (the mean over γ of g); and σ²_E the rest of Var(d) = E[π_A + π_B − 2·π_A·π_B],
    where given β the two methods' π are independent: E[π_A·π_B] = E[h(β)²]."""
    f = _mean(c + tau * _T, math.hypot(s_b, s_g))  # f(u) at each node of u
    var_seed = 2 * float(_PHI @ f ** 2 - (_PHI @ f) ** 2)
    hh = float(_PHI @ _mean(c + s_b * _T, math.hypot(s_g, tau)) ** 2)  # E[h(β)²]
    var_problem = 2 * float(_PHI @ _mean(c + math.hypot(s_b, s_g) * _T, tau) ** 2) - 2 * hh
    total = 2 * float(_mean(c, math.sqrt(s_b ** 2 + s_g ** 2 + tau ** 2))) - 2 * hh
    return var_seed, var_problem, total - var_seed - var_problem


def calibrate(var_problem: float, var_resid: float, accuracy: float) -> tuple[float, float, float]:
    """(c, s_β, s_γ) of `binary`'s model whose paired differences have these σ²_P and σ²_E at τ = 0 and whose
    methods score `accuracy` on average."""

    def gap(v):
        c, s_b, s_g = v[0], math.exp(v[1]), math.exp(v[2])
        _, vp, ve = components(c, s_b, s_g, 0.0)
        return [math.log(vp / var_problem), math.log(ve / var_resid), float(_mean(c, math.hypot(s_b, s_g))) - accuracy]

    v, info, ok, msg = optimize.fsolve(gap, [0.0, math.log(2.5), math.log(0.5)], full_output=True)
    if ok != 1 or max(abs(x) for x in info["fvec"]) > 1e-6:
        raise RuntimeError(f"no binary model has σ²_P {var_problem:.4f} and σ²_E {var_resid:.4f} at accuracy "
                           f"{accuracy:.3f}: {msg}")
    return float(v[0]), math.exp(v[1]), math.exp(v[2])


def seed_sd_for(share: float, S: int, P: int, params) -> float:
    """τ at which the seeds' share of Var(D) at S seeds × P problems is `share` (`components`)."""

    def at(tau):
        vs, vp, ve = components(*params, tau=tau)
        return vs / S / (vs / S + vp / P + ve / (S * P)) - share

    return 0.0 if share == 0 else float(optimize.brentq(at, 1e-4, 20.0, xtol=1e-6))


def binary(rng, n: int, S: int, P: int, params, tau: float):
    """n experiments' tables of paired differences d = y_A − y_B (n × S × P) of 0/1 outcomes (module docstring).
    params: (c, s_β, s_γ)."""
    c, s_b, s_g = params
    beta = rng.normal(0, s_b, (n, 1, P))

    def outcomes():
        eta = c + beta + rng.normal(0, s_g, (n, 1, P)) + rng.normal(0, tau, (n, S, 1))
        return (rng.random((n, S, P)) < special.expit(eta)).astype(float)

    return outcomes() - outcomes()


def match(c_ref: float, sd_ref: float, sd: float, shift: float = 0.0) -> float:
    """c whose mean accuracy E σ(c + N(0, sd²)) is the reference arm's E σ(c_ref + N(0, sd_ref²)) plus `shift`."""
    goal = float(_mean(c_ref, sd_ref)) + shift
    return float(optimize.brentq(lambda c: float(_mean(c, sd)) - goal, -40.0, 40.0, xtol=1e-10))


def accuracy_c(accuracy: float, sd: float) -> float:
    """c whose mean accuracy E σ(c + N(0, sd²)) is `accuracy`."""
    return float(optimize.brentq(lambda c: float(_mean(c, sd)) - accuracy, -40.0, 40.0, xtol=1e-10))


def two_arms(rng, n: int, S: int, P: int, g: dict) -> np.ndarray:
    """n experiments' n × S × P tables d = y_A − y_B, each arm its own c and τ: g holds s_b, s_g, c_a, c_b, tau_a,
    tau_b."""
    beta = rng.normal(0, g["s_b"], (n, 1, P))

    def arm(c, tau):
        eta = c + beta + rng.normal(0, g["s_g"], (n, 1, P)) + rng.normal(0, tau, (n, S, 1))
        return (rng.random((n, S, P)) < special.expit(eta)).astype(np.float32)

    return (arm(g["c_a"], g["tau_a"]) - arm(g["c_b"], g["tau_b"])).astype(float)


def seed_sd_of(var_seed: float, params) -> float:
    """τ at which both arms alike give the paired differences the seed component σ²_S = `var_seed` (`components`)."""
    if var_seed <= 0:
        return 0.0
    return float(optimize.brentq(lambda tau: components(*params, tau=tau)[0] - var_seed, 1e-6, 20.0, xtol=1e-8))
