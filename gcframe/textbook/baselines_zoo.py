"""Methods that differ from the seed's in the advantage estimator or the data source: REINFORCE++ and REINFORCE++ with
baseline (Hu et al. 2025, arXiv:2501.03262 v9), ReMax (Li et al. 2023, arXiv:2310.10505) and GPG (Chu et al. 2025,
arXiv:2504.02546), each as its paper writes it. The advantages are recomputed here from the rewards, log π_old and
log π_ref with Python loops over sequences and tokens, not through gcframe.advantages."""
from __future__ import annotations

import torch

from gcframe.textbook.core import _mean_as_written, textbook
from gcframe.textbook.classic import _group_centred


def _tokens(mask_row: torch.Tensor) -> list[int]:
    """Positions of a completion's trained tokens."""
    return [t for t in range(mask_row.shape[0]) if mask_row[t] > 0]


def _kl_returns(batch, outcome: list[float], beta: float) -> torch.Tensor:
    """Hu et al. 2025 eq. 4: A_{i,t} = outcome_i − β Σ_{t' = t}^{|o|} log(π_old/π_ref)(o_{i,t'}), a loop from the last
    token back -> [N, T] (0 on padding)."""
    old, ref, mask = batch.data["old_logp"], batch.data.get("ref_logp"), batch.completion_mask
    out = torch.zeros_like(mask, dtype=old.dtype)
    for i in range(mask.shape[0]):
        to_come = 0.0
        for t in reversed(_tokens(mask[i])):
            if beta > 0:
                to_come = to_come + (old[i, t] - ref[i, t])
            out[i, t] = outcome[i] - beta * to_come
    return out


def _normalised_over_batch(A: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Hu et al. 2025 eq. 5 / eq. 7: (A − mean) / std over every token of the batch (the unbiased variance, ε = 1e-8
    under the square root as in verl's masked_whiten and OpenRLHF; the paper writes std + ε)."""
    values = [A[i, t] for i in range(A.shape[0]) for t in _tokens(mask[i])]
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)
    out = torch.zeros_like(A)
    for i in range(A.shape[0]):
        for t in _tokens(mask[i]):
            out[i, t] = (A[i, t] - mean) / torch.sqrt(var + 1e-8)
    return out


@textbook("reinforce_pp")
@textbook("reinforce_pp_baseline")
def _reinforce_pp(method, batch, logp):
    """Hu et al. 2025: −[eq. 1's min(s A^norm, clip(s, 1 − ε, 1 + ε) A^norm) − λ ½(log π_θ/π_ref)² (eq. 8)], with A^norm
    from eqs. 4–5, or eqs. 6–7 with the group mean subtracted first (the baseline variant)."""
    c = method.cfg
    rewards = batch.data["rewards"].tolist()
    if c.group_baseline:  # eq. 6: r − mean of the group's rewards (a group's own loop)
        for g in set(batch.group_ids.tolist()):
            rows = [i for i, h in enumerate(batch.group_ids.tolist()) if h == g]
            mean = sum(batch.data["rewards"][i].item() for i in rows) / len(rows)
            for i in rows:
                rewards[i] -= mean
    A = _normalised_over_batch(_kl_returns(batch, rewards, c.beta), batch.completion_mask)
    s = torch.exp(logp - batch.data["old_logp"])  # π_θ/π_old [N, T]
    surrogate = torch.min(s * A, torch.clamp(s, 1 - c.clip_eps, 1 + c.clip_eps) * A)
    if c.kl_loss_coef > 0:
        surrogate = surrogate - c.kl_loss_coef * 0.5 * (logp - batch.data["ref_logp"]) ** 2
    return -_mean_as_written(surrogate, batch.completion_mask, c.aggregation)


@textbook("remax")
def _remax(method, batch, logp):
    """Li et al. 2023, Algorithm 1: −(Σ_t log π(o_t)) · (r − r̂) per completion, averaged; r̂ the reward of the greedy
    completion of the same prompt. Written as −A·π_θ/π_old, whose gradient at π_θ = π_old is Algorithm 1's and which
    stays unbiased when a batch is reused; β > 0 subtracts the KL still to come (eq. 4 of Hu et al. 2025)."""
    greedy = batch.data["greedy_rewards"].tolist()
    outcome = [r - b for r, b in zip(batch.data["rewards"].tolist(), greedy)]
    A = _kl_returns(batch, outcome, method.cfg.beta)
    return -_mean_as_written(A * torch.exp(logp - batch.data["old_logp"]), batch.completion_mask,
                             method.cfg.aggregation)


@textbook("gpg")
def _gpg(method, batch, logp):
    """Chu et al. 2025 eq. 5 times eq. 7's α: α · (1/Σ_i |o_i|) Σ_i Σ_t −log π_θ(o_{i,t}) Â_i, Â = r − mean of the group
    (/ std with F_norm = std), α = B / (B − M), M the groups whose rewards are all equal."""
    c = method.cfg
    rewards, gids = batch.data["rewards"], batch.group_ids
    A = _group_centred(rewards, gids, scale_by_std=c.scale_by_std)  # [N], 0 on a group of equal rewards
    groups = set(gids.tolist())
    flat = {g for g in groups if len(set(rewards[gids == g].tolist())) == 1}
    alpha = len(groups) / (len(groups) - len(flat)) if c.rescale and len(flat) < len(groups) else 1.0
    return -alpha * _mean_as_written(A.unsqueeze(1) * logp, batch.completion_mask, c.aggregation)
