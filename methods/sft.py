"""Supervised fine-tuning: imitate every demonstration equally."""
from __future__ import annotations

import torch

from gcframe.batch import Batch
from methods.base import Method, register


@register("sft")
class SFT(Method):
    """Data: the fixed, limited demonstrations. One step uses B·G of them (the equal budget)."""

    rollout_groups = False
    needs_old_logp = False  # no ratio π_θ/π_old in its GC
    samples_policy = False  # data fixed before the run: no staleness or sampler dtype

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        return self.ctx.demonstrations(t.prompts_per_step * t.group_size)

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC(q, o, t) = 1 on every demonstration token (seed, "One Gradient, Many Methods" table, row 1).

        With token-mean aggregation -aggregate(1·log π) is the masked cross-entropy of the demonstrations.
        """
        return torch.ones_like(logp)
