"""CISPO (MiniMax-M1 2025, arXiv:2506.13585, eqs. 4–5): a clipped, stopped importance weight, no gradient zeroed.

Clipped IS-weight Policy Optimization (MiniMax-M1 report, §3.1).

REINFORCE with a clipped, stopped-gradient importance weight (eq. 4), on GRPO's group advantage:

    J = E[ (1/Σ_i |o_i|) Σ_i Σ_t sg(r̂_{i,t}) Â_{i,t} log π_θ(o_{i,t} | q, o_{i,<t}) ],
    r̂_{i,t} = clip(r_{i,t}, 1 − ε_low, 1 + ε_high)                                     (eq. 5)

PPO's and GRPO's clip zeroes a token's gradient once its ratio leaves the band on the advantage's side; CISPO
clips the weight instead and keeps every token's gradient (the low-probability "fork" tokens among them). The paper
sets no lower bound in practice (ε_low large); TRL's loss_type "cispo" clamps only from above, at its
epsilon_high = 1 + ε_high (5.0 recommended, ScaleRL's ε_max). The defaults match TRL's: ε_high = 4 and
ε_low = clip_eps = 1, a lower bound of 0 that no ratio reaches; a smaller clip_eps adds the paper's lower bound.
No KL term by default (β = 0); β > 0 adds GRPO's.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.grpo import GRPO, masked_mean


@register("cispo")
class CISPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GRPO.Config):
        aggregation: str = "token-mean"
        """Eq. 4's 1/Σ_i |o_i|: every token of the batch weighs the same (TRL normalises cispo by the token count)."""
        clip_eps: float = 1.0
        """ε_low: the weight's lower bound is 1 − ε_low; 1 (a bound of 0, never reached) = none, as M1 and TRL run."""
        clip_eps_high: float | None = 4.0
        """ε_high: the weight's upper bound is 1 + ε_high (TRL's epsilon_high for cispo is this bound: 5.0)."""
        beta: float = 0.0
        """β: weight of GRPO's KL term (0: none, as M1's eq. 4)."""

        def validate(self) -> None:
            super().validate()
            if self.dual_clip is not None:
                raise UserError("dual_clip floors GRPO's clipped surrogate, which CISPO does not have (its weight is "
                                "clipped, never zeroed): leave it unset (null)")

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = clip(r_{i,t}, 1 − ε_low, 1 + ε_high) · Â_{i,t} − β c_{i,t}   (MiniMax-M1 eqs. 4–5)

        with r = π_θ/π_old. Derivation: eq. 4 is already a weighted log-likelihood, sg(r̂)·Â·log π_θ, so its gradient
        is r̂ Â ∇log π_θ: GC is the stopped weight times the advantage, nonzero on every token, clipped or not (unlike
        GRPO's 1[clip inactive]); the weight is clipped whatever the sign of Â. Eq. 4's 1/Σ_i |o_i| is the engine's
        token-mean aggregation. The KL part is GRPO's (methods/grpo.py).
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # r [N, T]
        low, high = 1 - cfg.clip_eps, 1 + (cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high)
        weight = ratio.clamp(min=low, max=high)  # r̂ [N, T]
        gc = weight * adv - self.kl_coefficient(batch, logp, ratio)  # [N, T]
        below, above = (ratio < low).float(), (ratio > high).float()  # where the weight was clipped
        self.record(clip_frac=masked_mean(below + above, mask), clip_low_frac=masked_mean(below, mask),
                    clip_high_frac=masked_mean(above, mask), ratio_mean=masked_mean(ratio, mask),
                    weight_mean=masked_mean(weight, mask))
        return gc
