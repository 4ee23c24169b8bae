"""The seed's table (DeepSeekMath §5.2.1 / the seed's "One Gradient, Many Methods"): sft, rft, online_rft, ppo, grpo,
grpo_ps, rloo, dpo, each as its paper writes it."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gcframe.textbook.core import _mean_as_written, textbook


@textbook("sft")
def _sft(method, batch, logp):
    """Masked cross-entropy of the demonstrations, computed by torch's own cross_entropy on the logits."""
    model = method.ctx.policy
    ids, attn = batch.input_ids, batch.attention_mask
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits  # [N, P+T, V]
    P = batch.prompt_ids.shape[1]
    labels = batch.completion_ids.masked_fill(batch.completion_mask == 0, -100)  # [N, T]
    ce = F.cross_entropy(logits[:, P - 1:-1].reshape(-1, logits.shape[-1]), labels.reshape(-1),
                         ignore_index=-100, reduction="none").view_as(labels)  # [N, T]
    return _mean_as_written(ce, batch.completion_mask, method.cfg.aggregation)


textbook("sft_filtered")(_sft)  # the same cross-entropy on the checker-accepted demonstrations
textbook("sft_clean")(_sft)  # ... and on as many exact ones


def _dual_clipped(surrogate, A, c):
    """Ye et al. 2020, eq. 5 (dual-clip PPO): max(surrogate, c·A) where A < 0, the surrogate elsewhere; c None: off."""
    if c is None:
        return surrogate
    return torch.where(A < 0, torch.max(surrogate, c * A), surrogate)


@textbook("ppo")
@textbook("dual_clip_ppo")
def _ppo(method, batch, logp):
    """Schulman et al. 2017 eq. 7: −L^CLIP = −min(r·A, clip(r, 1−ε, 1+ε)·A), no KL term (it is in the reward); with
    dual_clip c, Ye et al. 2020 eq. 5: −max(L^CLIP, c·A) on the tokens with A < 0."""
    A, eps = batch.data["advantages"], method.cfg.clip_eps  # A [N, T] from prepare (GAE on the critic)
    r = torch.exp(logp - batch.data["old_logp"])  # π_θ/π_old [N, T]
    surrogate = _dual_clipped(torch.min(r * A, torch.clamp(r, 1 - eps, 1 + eps) * A), A, method.cfg.dual_clip)
    return -_mean_as_written(surrogate, batch.completion_mask, method.cfg.aggregation)


def _kept_cross_entropy(method, batch, logp):
    """DeepSeekMath A.1.2 / A.1.3 (RFT, online RFT): cross-entropy of the correct samples, 1[o correct]·(−log π);
    rejected samples add 0 but stay in the normaliser."""
    kept = batch.data["correct"].to(logp.dtype).unsqueeze(1)  # [N, 1]
    return _mean_as_written(-logp * kept, batch.completion_mask, method.cfg.aggregation)


textbook("rft")(_kept_cross_entropy)
textbook("online_rft")(_kept_cross_entropy)


def _group_centred(rewards, group_ids, leave_one_out=False, scale_by_std=False):
    """Per group, a Python loop: r_i − mean(r) (or the mean of the others), optionally / torch.std(r); 0 if flat."""
    out = torch.zeros_like(rewards)
    for g in group_ids.unique():
        idx = (group_ids == g).nonzero().squeeze(1)
        r = rewards[idx]
        if r.max() - r.min() < 1e-12:
            continue  # zero variance: no signal
        b = (r.sum() - r) / (len(r) - 1) if leave_one_out else r.mean()
        out[idx] = (r - b) / (r.std() if scale_by_std else 1.0)
    return out


def _kl_term(kind, logp, batch, r):
    """The per-token KL term as written (Schulman 2020; DeepSeek-V3.2's r·k3), differentiated through log π_θ."""
    log_rho = batch.data["ref_logp"] - logp  # log π_ref/π_θ [N, T]
    k3 = log_rho.exp() - log_rho - 1
    return {"k3": k3, "k2": 0.5 * log_rho ** 2, "k3_ratio": r * k3}[kind]  # r = π_θ/π_old, with grad


def _clipped_surrogate_with_kl(method, batch, logp, A):
    """DeepSeekMath eq. 3 / the seed's J_GRPO: −[min(r·Â, clip(r, 1−ε, 1+ε_high)·Â) − β·KL̂], KL̂ = k3, k2 or r·k3;
    with dual_clip c the surrogate of a token with Â < 0 floored at c·Â (Ye et al. 2020, eq. 5)."""
    c = method.cfg
    hi = c.clip_eps if c.clip_eps_high is None else c.clip_eps_high
    r = torch.exp(logp - batch.data["old_logp"])  # π_θ/π_old [N, T]
    surrogate = _dual_clipped(torch.min(r * A, torch.clamp(r, 1 - c.clip_eps, 1 + hi) * A), A, c.dual_clip)
    kl = _kl_term(c.kl_estimator, logp, batch, r)
    return -_mean_as_written(surrogate - c.beta * kl, batch.completion_mask, c.aggregation)


@textbook("grpo")
def _grpo(method, batch, logp):
    """Â recomputed here from the rewards (the seed's group-relative advantage), broadcast to every token."""
    c = method.cfg
    A = _group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std).unsqueeze(1)
    return _clipped_surrogate_with_kl(method, batch, logp, A.expand_as(logp))


@textbook("grpo_ps")
def _grpo_ps(method, batch, logp):
    """The same surrogate on the process-supervision advantages of prepare (tests/test_advantages.py checks them)."""
    return _clipped_surrogate_with_kl(method, batch, logp, batch.data["advantages"])


@textbook("rloo")
def _rloo(method, batch, logp):
    """Ahmadian et al. 2024: −(r_i − mean_{j≠i} r_j)·π_θ/π_old (= REINFORCE on-policy) + β·k3."""
    A = _group_centred(batch.data["rewards"], batch.group_ids, leave_one_out=True).unsqueeze(1)  # [N, 1]
    log_rho = batch.data["ref_logp"] - logp
    k3 = log_rho.exp() - log_rho - 1
    surrogate = A * torch.exp(logp - batch.data["old_logp"]) - method.cfg.beta * k3
    return -_mean_as_written(surrogate, batch.completion_mask, method.cfg.aggregation)


@textbook("dpo")
def _dpo(method, batch, logp):
    """Rafailov et al. 2023 eq. 7: −log σ(β(Δ⁺ − Δ⁻)), Δ = Σ_t log π_θ/π_ref, summed over pairs (a Python loop)
    and divided by the number of SEQUENCES 2P (the engine's seq-mean-token-sum normaliser: pair-mean / 2)."""
    beta, total = method.cfg.beta, 0.0
    delta = ((logp - batch.data["ref_logp"]) * batch.completion_mask).sum(-1)  # [N]
    for g in batch.group_ids.unique():
        rows = (batch.group_ids == g).nonzero().squeeze(1).tolist()
        (w,) = [i for i in rows if batch.data["is_chosen"][i] == 1]
        (l,) = [i for i in rows if batch.data["is_chosen"][i] == 0]
        total = total - F.logsigmoid(beta * (delta[w] - delta[l]))
    return total / len(batch)
