"""Lite PPO (Liu et al. 2025, "Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning", arXiv:2508.08221, §4):
group mean, batch std, token-level loss, and nothing else.

The paper tests the field's tricks one at a time on critic-free PPO and keeps two: the advantage centred on the
group's mean but scaled by the standard deviation of the whole batch's rewards (a group with one success among
many failures keeps a moderate advantage instead of the large one a tiny group std gives it), and a token-level
normaliser (every token of the batch weighs the same, DAPO's §3.3). The loss is PPO's clipped surrogate with a
symmetric band, no KL term:

    J = E[ (1/Σ_i |o_i|) Σ_i Σ_t min(r_{i,t} Â_i, clip(r_{i,t}, 1 − ε, 1 + ε) Â_i) ],
    Â_i = (R_i − mean_group(R)) / std_batch(R)

TRL runs it as scale_rewards="batch" with a token-level loss_type (bnpo, dapo); ROLL and AReaL as options. The
batch std is over the global batch (every process's rewards). Only the advantage and the defaults differ from
GRPO (methods/grpo.py): the clip, the optional KL term and the dual clip are GRPO's.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import batch_scaled_advantages, group_advantages
from gcframe.batch import Batch
from methods.base import register
from methods.grpo import GRPO


@register("lite_ppo")
class LitePPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GRPO.Config):
        aggregation: str = "token-mean"
        """The token-level loss (§4): Σ_{i,t} x_{i,t} / Σ_i |o_i| over the whole batch."""
        scale_by_std: bool = True
        """Divide the group-centred reward by the std of the batch's rewards (§4); false: centred only."""
        beta: float = 0.0
        """β: weight of GRPO's KL term (0: none, as Lite PPO)."""

    def advantages(self, batch: Batch) -> torch.Tensor:
        """Â_{i,t} = (r_i − mean_group(r)) / std_batch(r) broadcast over o_i's tokens -> [N, T] (0 for a flat group, and
        for a batch whose rewards are all equal)."""
        r, gids, loo = batch.data["rewards"], batch.group_ids, self.cfg.leave_one_out
        all_sum = getattr(self.ctx, "all_sum", None)  # the global batch's std under several processes
        adv = batch_scaled_advantages(r, gids, loo, all_sum) if self.cfg.scale_by_std else \
            group_advantages(r, gids, scale_by_std=False, leave_one_out=loo)  # [N]
        return adv.unsqueeze(1) * batch.completion_mask  # [N, T]

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_i · r_{i,t} · 1[clip inactive] − β c_{i,t}   (Liu et al. 2025, §4; PPO's clip, eq. 7 of
        Schulman et al. 2017)

        with Â_i = (R_i − mean_group R) / std_batch R. The clipped surrogate's gradient is Â r ∇log π_θ where the clip
        is inactive and 0 where it bites (methods/grpo.py derives it, and the KL part c, β = 0 by default); the
        token-level 1/Σ_i |o_i| is the engine's token-mean aggregation, not part of GC.
        """
        return super().coefficients(batch, logp)
