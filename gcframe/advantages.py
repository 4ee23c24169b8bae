"""Advantage estimators, as plain functions of tensors. Shapes: N sequences, T completion tokens.

Group-relative advantage (seed, "The Group-Relative Advantage"; DeepSeekMath §4.1.2):

    Â_{i,t} = (r_i − mean(r)) / std(r)          for every token t of o_i

kept as its two parts: centring (the baseline; mean, or leave-one-out mean, which the seed's remark notes is
exactly unbiased) and scaling by the group std (a heuristic, optional). A zero-variance group has no signal:
its advantages are 0, never NaN.
"""
from __future__ import annotations

import torch


def group_baseline(rewards: torch.Tensor, group_ids: torch.Tensor, leave_one_out: bool = False) -> torch.Tensor:
    """b_i = mean of r over i's group [N]; leave-one-out: mean over the group without i, (Σ_g r − r_i)/(G − 1)."""
    _, inv, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=rewards.dtype, device=rewards.device).index_add_(0, inv, rewards)
    g = counts[inv].to(rewards.dtype)  # group size of each sequence [N]
    if leave_one_out:
        return (sums[inv] - rewards) / (g - 1).clamp(min=1)
    return sums[inv] / g


def group_std(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Unbiased std of r over i's group [N] (torch.std's convention; 0 for a group of one)."""
    _, inv, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    mean = group_baseline(rewards, group_ids)
    sq = torch.zeros(len(counts), dtype=rewards.dtype, device=rewards.device).index_add_(0, inv, (rewards - mean) ** 2)
    return (sq[inv] / (counts[inv] - 1).clamp(min=1).to(rewards.dtype)).sqrt()


def zero_variance(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """[N] bool: i's group has (numerically) identical rewards."""
    return group_std(rewards, group_ids) < eps


def group_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, scale_by_std: bool = True,
                     leave_one_out: bool = False, eps: float = 1e-6) -> torch.Tensor:
    """Outcome supervision: Â_i = (r_i − b_i) / std_g(r) [N] (one value per sequence, broadcast over tokens).

    Zero-variance groups get Â = 0 exactly.
    """
    adv = rewards - group_baseline(rewards, group_ids, leave_one_out)
    flat = zero_variance(rewards, group_ids, eps)
    if scale_by_std:
        adv = adv / group_std(rewards, group_ids).clamp(min=eps)
    return adv.masked_fill(flat, 0.0)


def batch_scaled_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, leave_one_out: bool = False,
                            all_sum=None, eps: float = 1e-6) -> torch.Tensor:
    """Group mean, batch std (Lite PPO; Liu et al. 2025, "Tricks or Traps?", arXiv:2508.08221, §4; TRL's
    scale_rewards="batch"): Â_i = (r_i − mean_group(r)) / std_batch(r) [N].

    The centring is the group's (a per-prompt baseline), the scale the unbiased std of every reward of the batch:
    rare signal (a group with one success) keeps its full size instead of being blown up by a small group std.
    `all_sum` (Context.all_sum) makes the std that of the global batch. A batch whose rewards are all equal gets 0."""
    adv = rewards - group_baseline(rewards, group_ids, leave_one_out)
    moments = torch.stack([torch.ones_like(rewards).sum(), rewards.sum(), (rewards * rewards).sum()])  # n, Σr, Σr²
    if all_sum is not None:
        moments = all_sum(moments)
    n, s1, s2 = moments[0], moments[1], moments[2]
    var = ((s2 - s1 * s1 / n.clamp(min=1)) / (n - 1).clamp(min=1)).clamp(min=0)  # unbiased, as torch.std
    std = var.sqrt()
    if std < eps:
        return torch.zeros_like(rewards)
    return adv.masked_fill(zero_variance(rewards, group_ids, eps), 0.0) / std


def mean_scaled_advantages(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """MaxRL (Tajwar et al. 2026, arXiv:2602.02710): Â_i = (r_i − r̄) / r̄, r̄ the mean of i's group [N].

    With 0/1 rewards and K of G correct, r̄ = K/G, and (1/G) Σ_i Â_i ∇log π(o_i) = (1/K) Σ_{i correct} ∇log π(o_i)
    − (1/G) Σ_i ∇log π(o_i): the score averaged over the correct samples (an unbiased gradient of the truncated
    maximum-likelihood objective) minus a zero-mean control variate. A group with r̄ = 0 (no success) gets 0."""
    mean = group_baseline(rewards, group_ids)
    safe = torch.where(mean != 0, mean, torch.ones_like(mean))
    return torch.where(mean != 0, (rewards - mean) / safe, torch.zeros_like(rewards))


def process_advantages(step_rewards: torch.Tensor, step_mask: torch.Tensor, group_ids: torch.Tensor,
                       eps: float = 1e-6) -> torch.Tensor:
    """Process supervision (seed, "Process Supervision as a Refinement"; DeepSeekMath §4.1.3):

        r̃ = (r − mean(R)) / std(R)   over all step rewards R of the group,
        Â_{i,t} = Σ_{steps j ending at or after t} r̃_{i,j}

    step_rewards, step_mask [N, T]: step j's reward at its last token. Returns Â [N, T]. A group whose step
    rewards are all equal gets 0 (no signal), never NaN.
    """
    N, T = step_rewards.shape
    _, inv = torch.unique(group_ids, return_inverse=True)
    G = int(inv.max()) + 1 if N else 0
    m = step_mask.to(step_rewards.dtype)
    seg = inv.unsqueeze(1).expand(N, T).reshape(-1)  # group of every token slot
    cnt = torch.zeros(G, dtype=m.dtype, device=m.device).index_add_(0, seg, m.reshape(-1))
    tot = torch.zeros(G, dtype=m.dtype, device=m.device).index_add_(0, seg, (step_rewards * m).reshape(-1))
    mean = (tot / cnt.clamp(min=1))[inv].unsqueeze(1)  # [N, 1]
    sq = torch.zeros(G, dtype=m.dtype, device=m.device).index_add_(0, seg, (((step_rewards - mean) * m) ** 2).reshape(-1))
    std = (sq / (cnt - 1).clamp(min=1)).sqrt()[inv].unsqueeze(1)  # [N, 1]
    normed = torch.where(std > eps, (step_rewards - mean) / std.clamp(min=eps), torch.zeros_like(step_rewards)) * m
    # suffix sum over t: Â_t = Σ_{t' >= t} r̃_{t'}
    return normed.flip(-1).cumsum(-1).flip(-1)


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised Advantage Estimation (Schulman et al. 2016, eq. 16) over completion tokens.

        δ_t = r_t + γ V(s_{t+1}) − V(s_t)        (V = 0 after the last token)
        A_t = δ_t + γλ A_{t+1}                   returns R_t = A_t + V(s_t)

    rewards, values, mask [N, T] -> (advantages [N, T], returns [N, T]), 0 on padding.
    """
    N, T = rewards.shape
    values = values * mask
    adv = torch.zeros_like(rewards)
    last = torch.zeros(N, dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(T)):  # a loop over T (a few dozen tokens), vectorised over N
        next_v = values[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_v - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


def whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8,
           all_sum=None) -> torch.Tensor:
    """(x − mean) / std over the masked entries (PPO advantage whitening); 0 on padding.

    `all_sum` (e.g. Context.all_sum) adds a tensor over processes, so the moments are those of the global batch
    and a data-parallel run whitens exactly as one process would.
    """
    m = mask.to(x.dtype)
    moments = torch.stack([m.sum(), (x * m).sum(), (x * x * m).sum()])  # n, Σx, Σx²
    if all_sum is not None:
        moments = all_sum(moments)
    n, s1, s2 = moments[0].clamp(min=1), moments[1], moments[2]
    mean = s1 / n
    var = ((s2 - n * mean ** 2) / (n - 1).clamp(min=1)).clamp(min=0)  # unbiased
    out = (x - mean) * torch.rsqrt(var + eps) if shift_mean else x * torch.rsqrt(var + eps)
    return out * m


def kl_penalised_returns(rewards: torch.Tensor, kl: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """The return of an outcome reward with a per-token KL penalty folded into the reward, γ = 1 (REINFORCE++, Hu et al.
    2025, eq. 4; PPO's reward placement, InstructGPT eq. 2):

        G_{i,t} = r_i − β Σ_{t' ≥ t} kl_{i,t'}        kl = log π_old/π_ref at each sampled token (k1)

    rewards [N], kl and mask [N, T] -> [N, T], 0 on padding: the reward counts at every token, the KL still to come."""
    future = (kl * mask).flip(-1).cumsum(-1).flip(-1)  # Σ_{t' >= t} kl_{t'}  [N, T]
    return (rewards.unsqueeze(1) - beta * future) * mask
