"""Dual-clip PPO (Ye et al. 2020, arXiv:1912.09729, eq. 5): PPO with a floor under the clipped surrogate for A < 0.

PPO's clip bounds how far a ratio may move in the direction its advantage pushes, but not the other way: a token
with A < 0 whose ratio r = π_θ/π_old has grown large (the policy made it much likelier since sampling) keeps the
unclipped term r·A, which grows without bound and can dominate a batch. Dual-clip PPO floors it at c·A, c > 1:

    L = E_t[ max( min(r_t A_t, clip(r_t, 1 − ε, 1 + ε) A_t), c A_t ) ]   for A_t < 0   (PPO's L^CLIP for A_t ≥ 0)

Everything else is methods/ppo.py: the critic, GAE, the KL folded into the reward, the whitened advantage. c = 3 is
the paper's value and verl's `clip_ratio_c` default (verl and SkyRL apply it to every clipped loss); the floor is
also an option of GRPO's family (`grpo.dual_clip`, TRL's `delta` when δ > 1 + ε_high).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from methods.base import register
from methods.ppo import PPO, PPOConfig


@register("dual_clip_ppo")
class DualClipPPO(PPO):
    """Data: PPO's, B·G on-policy samples, one completion per prompt; the critic V_ψ is the baseline."""

    @dataclass
    class Config(PPOConfig):
        dual_clip: float | None = 3.0
        """c: the floor c·A under the surrogate of a token with A < 0 (Ye et al. 2020, eq. 5; 3 is verl's
        clip_ratio_c default); > 1, and above 1 + clip_eps for it to act beyond PPO's own clip."""

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_t = A_t · r_t · 1[clip inactive] · 1[not (A_t < 0 and r_t > c)]   (Ye et al. 2020, eq. 5)

        Derivation: for A ≥ 0 the objective is PPO's, whose gradient is A·r·∇log π_θ unless r > 1 + ε (0 there).
        For A < 0, min(rA, clip(r)A) = A·max(r, 1 − ε), so it depends on r only for r > 1 − ε; max(·, cA) replaces
        it by the constant cA where rA < cA, i.e. r > c. So GC = A·r inside 1 − ε < r ≤ c and 0 elsewhere on A's
        side; the engine's aggregation (token-mean) is PPO's. The shared clip is gcframe.clipping.clip_inactive.
        """
        return super().coefficients(batch, logp)
