"""The GRPO family as the field runs it today: Dr. GRPO, DAPO, GSPO, CISPO and SAPO, each loss as its paper writes it
(equation numbers in each docstring), independently of the methods' GC code: advantages recomputed from the
rewards per group (classic._group_centred, a Python loop), ratios and gates written out, and the engine's
aggregation written per sequence (`_mean_as_written`)."""
from __future__ import annotations

import torch

from gcframe.textbook.core import _mean_as_written, textbook
from gcframe.textbook.classic import _clipped_surrogate_with_kl, _group_centred, _kl_term


def _advantage(method, batch, rewards=None):
    """Â_i of the group, as the method's options ask (std scaling, leave-one-out), broadcast over tokens [N, T]."""
    c = method.cfg
    r = batch.data["rewards"] if rewards is None else rewards
    A = _group_centred(r, batch.group_ids, c.leave_one_out, c.scale_by_std)  # [N]
    return A.unsqueeze(1).expand_as(batch.completion_mask)


@textbook("dr_grpo")
def _dr_grpo(method, batch, logp):
    """Liu et al. 2025 §3.2 (Figure 1): GRPO's clipped surrogate with Â_i = R_i − mean(R) (no std) and the sum over a
    completion's tokens divided by the constant L_max, not by |o_i| (aggregation seq-mean-token-sum-norm)."""
    return _clipped_surrogate_with_kl(method, batch, logp, _advantage(method, batch))


def _overlong(length: int, max_len: int, cache: int) -> float:
    """DAPO eq. 13, case by case, for one completion of `length` tokens."""
    if cache == 0 or length <= max_len - cache:
        return 0.0
    if length <= max_len:
        return ((max_len - cache) - length) / cache
    return -1.0


@textbook("dapo")
def _dapo(method, batch, logp):
    """Yu et al. 2025 eq. 8: −(1/Σ_i |o_i|) Σ_i Σ_t min(r Â, clip(r, 1−ε_low, 1+ε_high) Â) (token-mean), with Â of
    eq. 9 on the rewards plus eq. 13's R_length (L_max = train.max_new_tokens)."""
    c, L = method.cfg, method.ctx.cfg.train.max_new_tokens
    cache = round(L / 5) if c.overlong_cache is None else c.overlong_cache
    lengths = [int(m.sum()) for m in batch.completion_mask]
    shaped = batch.data["rewards"] + torch.tensor([_overlong(n, L, cache) for n in lengths], dtype=logp.dtype)
    return _clipped_surrogate_with_kl(method, batch, logp, _advantage(method, batch, shaped))


@textbook("gspo")
def _gspo(method, batch, logp):
    """Zheng et al. 2025 eq. 5: −(1/G) Σ_i min(s_i Â_i, clip(s_i, 1−ε_low, 1+ε_high) Â_i), s_i of eq. 7 the geometric
    mean of the token ratios, Â_i of eq. 6; each sequence's term stands on each of its tokens, so the aggregation
    (seq-mean-token-mean: (1/N) Σ_i) returns it; β times the per-token KL term as GRPO's."""
    c, mask = method.cfg, batch.completion_mask
    hi = c.clip_eps if c.clip_eps_high is None else c.clip_eps_high
    A = _advantage(method, batch)[:, 0]  # [N]
    log_r = logp - batch.data["old_logp"]  # [N, T], with grad
    terms = []
    for i in range(len(mask)):  # a Python loop over the sequences
        kept = mask[i] > 0
        s = torch.exp(log_r[i][kept].mean()) if kept.any() else torch.ones((), dtype=logp.dtype)  # eq. 7
        term = torch.min(s * A[i], torch.clamp(s, 1 - c.clip_eps, 1 + hi) * A[i])
        if c.dual_clip is not None and A[i] < 0:  # dual-clip's floor on the sequence ratio (TRL's `delta`)
            term = torch.max(term, c.dual_clip * A[i])
        terms.append(term)
    J = torch.stack(terms).unsqueeze(1).expand_as(logp)  # [N, T]
    kl = _kl_term(c.kl_estimator, logp, batch, log_r.exp())
    return -_mean_as_written(J - c.beta * kl, mask, c.aggregation)


@textbook("cispo")
def _cispo(method, batch, logp):
    """MiniMax-M1 eq. 4: −(1/Σ_i |o_i|) Σ_i Σ_t sg(r̂_{i,t}) Â_{i,t} log π_θ(o_{i,t}), r̂ = clip(r, 1−ε_low, 1+ε_high)
    (eq. 5), sg = detach; β times GRPO's KL term."""
    c = method.cfg
    hi = c.clip_eps if c.clip_eps_high is None else c.clip_eps_high
    r = torch.exp(logp - batch.data["old_logp"])  # [N, T], with grad
    r_hat = torch.clamp(r.detach(), 1 - c.clip_eps, 1 + hi)  # eq. 5, stopped
    objective = r_hat * _advantage(method, batch) * logp - c.beta * _kl_term(c.kl_estimator, logp, batch, r)
    return -_mean_as_written(objective, batch.completion_mask, c.aggregation)


@textbook("sapo")
def _sapo(method, batch, logp):
    """Gao et al. 2025 §3: −(1/G) Σ_i (1/|o_i|) Σ_t f_{i,t}(r_{i,t}) Â_{i,t}, f(x) = σ(τ(x − 1))·4/τ with τ = τ_pos
    where Â > 0 and τ_neg elsewhere; β times GRPO's KL term."""
    c = method.cfg
    A = _advantage(method, batch)
    r = torch.exp(logp - batch.data["old_logp"])  # [N, T], with grad
    tau = torch.where(A > 0, torch.full_like(A, c.tau_pos), torch.full_like(A, c.tau_neg))
    gate = torch.sigmoid(tau * (r - 1)) * 4 / tau  # f_{i,t}(r_{i,t})
    objective = gate * A - c.beta * _kl_term(c.kl_estimator, logp, batch, r)
    return -_mean_as_written(objective, batch.completion_mask, c.aggregation)
