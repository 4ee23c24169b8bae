"""KL-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
arXiv:2505.22617, §4): a KL penalty to π_old on the tokens whose advantage and log-probability covary most.

Clip-Cov's sibling (methods/clip_cov.py, where the covariance is defined). Instead of detaching a random few of the
high-covariance tokens, KL-Cov penalises the top k of them by covariance with |log π_θ/π_old|, the per-token
estimate of KL(π_old ‖ π_θ), and leaves the policy-gradient term unclipped everywhere:

    J = E[ (1/Σ|o_i|) Σ_{i,t} ( r_{i,t} Â_{i,t} − β_kl I_{i,t} |log r_{i,t}| ) ],
    I: the k = max(⌊ρ · Σ|o_i|⌋, 1) tokens of largest Cov_{i,t}

(verl's and SkyRL's `kl_cov`: ρ = 2e-4, β_kl = 1, no ratio clip). As Clip-Cov's, the tokens are chosen once per
collected batch from log π_old over the whole batch, where verl chooses per micro-batch from the current log π (the
same on a batch's first pass).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.clip_cov import old_logp_for_selection, selection_count, token_covariance
from methods.grpo import GRPO, GroupConfig, masked_mean


@register("kl_cov")
class KLCov(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    stores = ("advantages", "cov_selected")

    @dataclass
    class Config(GroupConfig):
        aggregation: str = "token-mean"
        """verl's and SkyRL's kl_cov default: every token of the batch weighs the same."""
        beta: float = 0.0
        """β: weight of GRPO's KL term to π_ref (0: none, as the paper; KL-Cov's own penalty is to π_old)."""
        kl_cov_ratio: float = 2e-4
        """ρ: the share of the batch's tokens penalised, those of largest covariance (verl, SkyRL: 2e-4); >= 1 token."""
        kl_coef: float = 1.0
        """β_kl: weight of |log π_θ/π_old| on the selected tokens (verl's ppo_kl_coef, SkyRL: 1). >= 0."""

        def validate(self) -> None:
            super().validate()
            if not 0 < self.kl_cov_ratio <= 1:
                raise UserError(f"kl_cov_ratio must be in (0, 1], got {self.kl_cov_ratio}")
            if not self.kl_coef >= 0:
                raise UserError(f"kl_coef must be >= 0, got {self.kl_coef}")

    def prepare(self, batch: Batch) -> None:
        """GRPO's advantages, then the penalised tokens I [N, T] (`cov_selected`): the k of largest covariance."""
        super().prepare(batch)
        mask = batch.completion_mask
        cov = token_covariance(batch.data["advantages"], old_logp_for_selection(self, batch), mask,
                               getattr(self.ctx, "all_sum", None))  # [N, T]
        k = selection_count(self.cfg.kl_cov_ratio, mask)
        flat = torch.where(mask > 0, cov, torch.full_like(cov, -torch.inf)).flatten()
        chosen = torch.zeros_like(mask)
        chosen.view(-1)[flat.topk(k).indices] = 1.0
        batch.data["cov_selected"] = chosen * mask
        self.record(cov_selected_frac=masked_mean(chosen, mask))

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_{i,t} · r_{i,t} − β_kl · I_{i,t} · sign(log r_{i,t}) − β c_{i,t}   (Cui et al. 2025, §4, KL-Cov)

        with r = π_θ/π_old and I the tokens chosen in `prepare`. Derivation: ∇(r Â) = Â r ∇log π_θ (no clip), and
        ∇|log r| = sign(log r) ∇log π_θ (0 at r = 1, where |·| has no slope to follow). The KL part c is GRPO's.
        """
        mask, selected = batch.completion_mask, batch.data["cov_selected"]
        adv = batch.data["advantages"]  # [N, T]
        log_r = logp.detach() - self.old_logp(batch, logp)  # [N, T]
        ratio = log_r.exp()
        gc = adv * ratio - self.cfg.kl_coef * selected * torch.sign(log_r) - self.kl_coefficient(batch, logp, ratio)
        self.record(ratio_mean=masked_mean(ratio, mask),
                    kl_cov_penalty=masked_mean(selected * log_r.abs(), mask))
        return gc
