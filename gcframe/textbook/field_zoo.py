"""The field's remaining policy losses (issue 64), each as its paper writes it: Lite PPO, Kimi k1.5's quadratic
penalty, DPPO, GMPO, Clip-Cov, KL-Cov and MaxRL (dual-clip PPO's floor is in classic, beside PPO's loss). Advantages
are recomputed from the rewards per group with Python loops (classic._group_centred), masks, covariances and
geometric means written out token by token, and the engine's aggregation per sequence (`_mean_as_written`),
independently of the methods' GC code."""
from __future__ import annotations

import math

import torch

from gcframe.textbook.classic import _clipped_surrogate_with_kl, _group_centred, _kl_term
from gcframe.textbook.core import _mean_as_written, textbook


def _tokens(mask) -> list[tuple[int, int]]:
    """(i, t) of every trained token, row by row."""
    return [(i, t) for i in range(mask.shape[0]) for t in range(mask.shape[1]) if mask[i, t] > 0]


def _per_token(A, like) -> torch.Tensor:
    """A per-sequence advantage [N] on every token [N, T]."""
    return A.unsqueeze(1).expand_as(like)


@textbook("lite_ppo")
def _lite_ppo(method, batch, logp):
    """Liu et al. 2025 §4: PPO's clipped surrogate, token-level, on Â_i = (R_i − mean_group R) / std_batch R, the std
    torch.std of every reward of the batch (unbiased); flat groups 0."""
    c, r = method.cfg, batch.data["rewards"]
    A = _group_centred(r, batch.group_ids, c.leave_one_out)  # [N], 0 on a flat group
    if c.scale_by_std:
        sd = float(torch.std(r))
        A = A / sd if sd > 1e-6 else torch.zeros_like(A)
    return _clipped_surrogate_with_kl(method, batch, logp, _per_token(A, logp))


@textbook("maxrl")
def _maxrl(method, batch, logp):
    """Tajwar et al. 2026: GRPO's clipped surrogate on Â_i = (R_i − R̄)/R̄, R̄ the group's mean (0 if R̄ = 0)."""
    r, gids = batch.data["rewards"], batch.group_ids
    A = torch.zeros_like(r)
    for g in gids.unique():
        rows = (gids == g).nonzero().squeeze(1).tolist()
        mean = sum(float(r[i]) for i in rows) / len(rows)
        for i in rows:
            A[i] = (r[i] - mean) / mean if mean != 0 else 0.0
    return _clipped_surrogate_with_kl(method, batch, logp, _per_token(A, logp))


@textbook("kimi")
def _kimi(method, batch, logp):
    """Kimi k1.5 eq. 3 (÷ 2τ): (1/k) Σ_j (1/2τ)(r_j − r̄ − τ log π_θ(y_j)/π_old(y_j))², the sequence log-ratio summed
    over its tokens; level token: −[Â r_t − (τ/2)(log r_t)²] per token. β times GRPO's KL term."""
    c, mask = method.cfg, batch.completion_mask
    A = _group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std)  # [N]
    log_r = logp - batch.data["old_logp"]  # [N, T], with grad
    kl = c.beta * _mean_as_written(_kl_term(c.kl_estimator, logp, batch, log_r.exp()), mask, c.aggregation)
    if c.level == "token":
        J = _per_token(A, logp) * log_r.exp() - c.tau / 2 * log_r ** 2
        return -_mean_as_written(J, mask, c.aggregation) + kl
    total = 0.0
    for i in range(mask.shape[0]):
        ell = log_r[i][mask[i] > 0].sum()  # log π_θ(y|x) − log π_old(y|x)
        total = total + (A[i] - c.tau * ell) ** 2 / (2 * c.tau)
    return total / mask.shape[0] + kl


@textbook("dppo")
def _dppo(method, batch, logp):
    """DPPO eqs. 13–14: −Σ_t M_t r_t Â, M = 0 where Â > 0 and the token's probability rose past δ_high (TV: p_θ − p_old;
    KL: the Bernoulli KL with p_θ > p_old), or Â < 0 and it fell past δ_low; token by token. β times GRPO's KL."""
    c, mask = method.cfg, batch.completion_mask
    A = _group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std)  # [N]
    old = batch.data["old_logp"]
    M = torch.ones_like(logp)
    for i, t in _tokens(mask):
        q, p = math.exp(float(logp[i, t].detach())), math.exp(float(old[i, t]))  # π_θ(o_t), π_old(o_t)
        if c.divergence == "tv":
            up, down = q - p > c.delta_high, p - q > c.delta_low
        else:
            d = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
            up, down = q > p and d > c.delta_high, q < p and d > c.delta_low
        if (A[i] > 0 and up) or (A[i] < 0 and down):
            M[i, t] = 0.0
    r = torch.exp(logp - old)
    J = M * r * _per_token(A, logp) - c.beta * _kl_term(c.kl_estimator, logp, batch, r)
    return -_mean_as_written(J, mask, c.aggregation)


@textbook("gmpo")
def _gmpo(method, batch, logp):
    """Zhao et al. 2025 §3: −(1/G) Σ_i sgn(Â_i) |Π_t min(ρ_t Â_i, clip(ρ_t, e^{−ε_low}, e^{ε_high}) Â_i)|^{1/|o_i|}, the
    product written out over each completion's tokens; β times GRPO's per-token KL term."""
    c, mask = method.cfg, batch.completion_mask
    hi = c.clip_eps if c.clip_eps_high is None else c.clip_eps_high
    A = _group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std)  # [N]
    rho = torch.exp(logp - batch.data["old_logp"])  # [N, T], with grad
    terms = []
    for i in range(mask.shape[0]):
        kept = mask[i] > 0
        if float(A[i]) == 0 or not kept.any():
            terms.append(torch.zeros((), dtype=logp.dtype))
            continue
        prod = torch.ones((), dtype=logp.dtype)
        for x in rho[i][kept]:
            prod = prod * torch.min(x * A[i], torch.clamp(x, math.exp(-c.clip_eps), math.exp(hi)) * A[i])
        terms.append(torch.sign(A[i]) * prod.abs() ** (1.0 / int(kept.sum())))
    J = torch.stack(terms).unsqueeze(1).expand_as(logp)  # each sequence's term on each of its tokens
    return -_mean_as_written(J - c.beta * _kl_term(c.kl_estimator, logp, batch, rho), mask, c.aggregation)


def _covariances(batch, A_tok) -> dict:
    """Cui et al. 2025 §4: Cov_{i,t} = (Â_{i,t} − mean Â)(log π_old(o_{i,t}) − mean log π_old), means over the batch's
    tokens, one token at a time -> {(i, t): Cov}."""
    old, toks = batch.data["old_logp"], _tokens(batch.completion_mask)
    mean_a = sum(float(A_tok[i, t]) for i, t in toks) / len(toks)
    mean_l = sum(float(old[i, t]) for i, t in toks) / len(toks)
    return {(i, t): (float(A_tok[i, t]) - mean_a) * (float(old[i, t]) - mean_l) for i, t in toks}


@textbook("clip_cov")
def _clip_cov(method, batch, logp):
    """Cui et al. 2025 §4 (Clip-Cov): k = max(⌊ρ·tokens⌋, 1) tokens with ω_low < Cov < ω_high drawn at random (the
    k of smallest prepare's uniform keys `cov_key`) keep their clipped surrogate's value and lose its gradient;
    token-level mean; β times GRPO's KL term."""
    c, mask = method.cfg, batch.completion_mask
    hi = c.clip_eps if c.clip_eps_high is None else c.clip_eps_high
    A = _per_token(_group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std), logp)
    cov, key = _covariances(batch, A), batch.data["cov_key"]
    candidates = sorted((float(key[i, t]), (i, t)) for (i, t), v in cov.items() if c.clip_cov_lb < v < c.clip_cov_ub)
    k = max(int(c.clip_cov_ratio * len(cov)), 1)
    detached = {pos for _, pos in candidates[:k]}
    r = torch.exp(logp - batch.data["old_logp"])
    surrogate = torch.min(r * A, torch.clamp(r, 1 - c.clip_eps, 1 + hi) * A)
    if c.dual_clip is not None:
        surrogate = torch.where(A < 0, torch.max(surrogate, c.dual_clip * A), surrogate)
    keep = torch.tensor([[0.0 if (i, t) in detached else 1.0 for t in range(mask.shape[1])]
                         for i in range(mask.shape[0])], dtype=logp.dtype)
    surrogate = keep * surrogate + (1 - keep) * surrogate.detach()  # sg(·) on the drawn tokens
    return -_mean_as_written(surrogate - c.beta * _kl_term(c.kl_estimator, logp, batch, r), mask, c.aggregation)


@textbook("kl_cov")
def _kl_cov(method, batch, logp):
    """Cui et al. 2025 §4 (KL-Cov): −[r_t Â_t − β_kl 1[t among the k of largest Cov] |log r_t|], no clip, token-level
    mean; β times GRPO's KL term to π_ref."""
    c, mask = method.cfg, batch.completion_mask
    A = _per_token(_group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std), logp)
    cov = _covariances(batch, A)
    k = max(int(c.kl_cov_ratio * len(cov)), 1)
    top = {pos for pos, _ in sorted(cov.items(), key=lambda kv: -kv[1])[:k]}
    sel = torch.tensor([[1.0 if (i, t) in top else 0.0 for t in range(mask.shape[1])] for i in range(mask.shape[0])],
                       dtype=logp.dtype)
    log_r = logp - batch.data["old_logp"]
    J = log_r.exp() * A - c.kl_coef * sel * log_r.abs() - c.beta * _kl_term(c.kl_estimator, logp, batch, log_r.exp())
    return -_mean_as_written(J, mask, c.aggregation)
