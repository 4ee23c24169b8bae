"""DPPO, divergence proximal policy optimisation (arXiv:2602.04879, eqs. 13–14): PPO's trust region measured by how
far a token's probability moved, not by its ratio.

PPO's ratio clip treats a rare token and a common one alike: a token at π_old = 0.001 may move to 0.003 (r = 3,
clipped, though the distribution barely changed) while one at 0.5 may move to 0.7 (r = 1.4, clipped at ε = 0.2 only
just). DPPO masks a token when the policy's divergence from π_old at that token passes a threshold on the side the
advantage pushes, and keeps the plain ratio-weighted advantage elsewhere:

    J = E[ Σ_t M_{i,t} r_{i,t} Â_i ],
    Binary-TV (eq. 13):  M = 0 where Â > 0 and π_θ(o_t) − π_old(o_t) > δ_high, or Â < 0 and π_old − π_θ > δ_low
    Binary-KL (eq. 14):  M = 0 where Â > 0, π_θ > π_old and D > δ_high, or Â < 0, π_θ < π_old and D > δ_low,
                         D = p log(p/q) + (1 − p) log((1 − p)/(1 − q)), p = π_old(o_t), q = π_θ(o_t)

(probabilities of the sampled token, the Bernoulli divergence of "this token or another"). The mask is detached.
GRPO's data and group advantage; δ_low = δ_high = 0.2 are SkyRL's and prime-rl's defaults (prime-rl's default loss
adds Kimi's quadratic penalty, methods/kimi.py). The paper's Top-K variants are not here: its §G.2 finds them no
better than the binary ones, and SkyRL ships the binary ones only.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.grpo import GRPO, GroupConfig, masked_mean


def dppo_mask(adv: torch.Tensor, logp: torch.Tensor, old_logp: torch.Tensor, delta_low: float, delta_high: float,
              divergence: str = "tv") -> tuple[torch.Tensor, torch.Tensor]:
    """(masked high [N, T] bool: Â > 0 and the token moved up past δ_high; masked low: Â < 0 and down past δ_low), by
    the total-variation (probability difference) or the Bernoulli-KL divergence of π_θ(o_t) from π_old(o_t)."""
    q, p = logp.exp(), old_logp.exp()  # π_θ(o_t), π_old(o_t)
    if divergence == "tv":
        high, low = (q - p) > delta_high, (p - q) > delta_low
    else:
        d = p * (old_logp - logp) + (1 - p) * (torch.log1p(-p.clamp(max=1 - 1e-12)) -
                                                torch.log1p(-q.clamp(max=1 - 1e-12)))
        high, low = (q > p) & (d > delta_high), (q < p) & (d > delta_low)
    return (adv > 0) & high, (adv < 0) & low


@register("dppo")
class DPPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GroupConfig):
        delta_low: float = 0.2
        """δ_low: a token with Â < 0 is masked once its probability fell by more than this (TV) or its Bernoulli KL
        passed it (KL) (SkyRL, prime-rl: 0.2). >= 0."""
        delta_high: float = 0.2
        """δ_high: a token with Â > 0 is masked once its probability rose by more than this (or its KL passed it)."""
        divergence: str = "tv"
        """tv: Binary-TV (eq. 13), the probability difference; kl: Binary-KL (eq. 14), the Bernoulli KL."""
        beta: float = 0.0
        """β: weight of GRPO's KL term to π_ref (0: none)."""

        def validate(self) -> None:
            super().validate()
            if not (self.delta_low >= 0 and self.delta_high >= 0):
                raise UserError(f"delta_low and delta_high must be >= 0, got {self.delta_low}, {self.delta_high}")
            if self.divergence not in ("tv", "kl"):
                raise UserError(f"divergence must be 'tv' (Binary-TV) or 'kl' (Binary-KL), got {self.divergence!r}")

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = M_{i,t} · Â_i · r_{i,t} − β c_{i,t}   (DPPO eqs. 13–14)

        with r = π_θ/π_old and M the detached Binary-TV or Binary-KL mask (0 where the token moved past δ on Â's
        side). Derivation: M is a constant, so ∇(M r Â) = M Â r ∇log π_θ. Unlike PPO's clip, the test is on the
        probabilities, so a rare token may move further in ratio than a common one. The KL part is GRPO's.
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv, old = batch.data["advantages"], self.old_logp(batch, logp)  # [N, T]
        ratio = (logp.detach() - old).exp()  # r [N, T]
        high, low = dppo_mask(adv, logp.detach(), old, cfg.delta_low, cfg.delta_high, cfg.divergence)  # [N, T]
        keep = ~(high | low)
        gc = adv * ratio * keep - self.kl_coefficient(batch, logp, ratio)  # [N, T]
        self.record(mask_frac=masked_mean((~keep).float(), mask), mask_high_frac=masked_mean(high.float(), mask),
                    mask_low_frac=masked_mean(low.float(), mask), ratio_mean=masked_mean(ratio, mask))
        return gc
