"""MaxRL (Tajwar et al. 2026, "Maximum Likelihood Reinforcement Learning", arXiv:2602.02710): the group-centred
reward divided by the group's mean, not its std.

With a 0/1 checker, RL maximises the pass rate p_θ(q) while maximum likelihood maximises log p_θ(q), whose gradient
∇p/p weights a hard prompt (small p) up by 1/p. Log p = −Σ_k (1 − p)^k / k, and with G samples per prompt the
order-G truncation has an unbiased estimator: the score averaged over the correct samples alone,
(1/K) Σ_{i correct} ∇log π_θ(o_i), K of G correct. Subtracting the all-sample mean (1/G) Σ_i ∇log π_θ(o_i), a
control variate of mean 0, gives the advantage

    Â_i = (R_i − mean(R)) / mean(R)          (0 for a group without a success)

G = 1 is REINFORCE, G → ∞ exact maximum likelihood. The loss around it is GRPO's (the clipped ratio, the optional
KL term), as prime-rl's `max_rl` and SkyRL's `maxrl` advantage estimators plug into their policy losses. Rewards
should be non-negative (a 0/1 checker, the paper's setting).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import mean_scaled_advantages
from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.grpo import GRPO


@register("maxrl")
class MaxRL(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy; G is the
    truncation order of the maximum-likelihood objective."""

    @dataclass
    class Config(GRPO.Config):
        scale_by_std: bool = False
        """Not MaxRL's: its advantage divides by the group mean, never by the std (must stay false)."""
        beta: float = 0.0
        """β: weight of GRPO's KL term (0: none)."""

        def validate(self) -> None:
            super().validate()
            if self.scale_by_std or self.leave_one_out:
                raise UserError("MaxRL's advantage is (R − mean)/mean of the whole group: scale_by_std and "
                                "leave_one_out must stay false")

    def advantages(self, batch: Batch) -> torch.Tensor:
        """Â_{i,t} = (r_i − r̄) / r̄ broadcast over o_i's tokens -> [N, T], r̄ the group's mean; 0 where r̄ = 0."""
        adv = mean_scaled_advantages(batch.data["rewards"], batch.group_ids)  # [N]
        return adv.unsqueeze(1) * batch.completion_mask  # [N, T]

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_i · r_{i,t} · 1[clip inactive] − β c_{i,t},  Â_i = (R_i − R̄)/R̄   (Tajwar et al. 2026)

        On-policy (r = 1, β = 0) and 0/1 rewards with K of G correct, (1/G) Σ_i Â_i ∇log π_θ(o_i) = (1/K) Σ_{i correct}
        ∇log π_θ(o_i) − (1/G) Σ_i ∇log π_θ(o_i): the maximum-likelihood estimator with its control variate (exactly so
        under aggregation seq-mean-token-sum; the default, GRPO's seq-mean-token-mean, averages each completion's
        tokens instead of summing them). The clip and the KL part c are GRPO's (methods/grpo.py derives them).
        """
        return super().coefficients(batch, logp)
