"""GRPO with process supervision (the seed chapter, "Process Supervision as a Refinement"; DeepSeekMath §4.1.3).

Everything is GRPO's (clip, KL, ratio, aggregation); only the advantage changes: a reward at the end of every
reasoning step instead of one at the end of the output.
"""
from __future__ import annotations

import torch

from gcframe.advantages import process_advantages
from gcframe.batch import Batch
from gcframe.rewards import process_rewards
from methods.base import register
from methods.grpo import GRPO


@register("grpo_ps")
class GRPOProcess(GRPO):
    """Data: GRPO's groups, plus step rewards from the task's step verifier (whatever `train.reward` is)."""

    def collect(self, step: int) -> Batch:
        batch = super().collect(step)
        if "step_rewards" not in batch.data:  # train.reward != "process": ask the step verifier ourselves
            batch.data["step_rewards"], batch.data["step_mask"] = process_rewards(batch, self.ctx.task, self.ctx.tok)
        return batch

    def advantages(self, batch: Batch) -> torch.Tensor:
        """Â_{i,t} = Σ_{steps j ending at or after t} r̃_{i,j},  r̃ = (r − mean(R)) / std(R) over the group's step
        rewards R (DeepSeekMath §4.1.3) -> [N, T]; a group whose step rewards are all equal gets 0."""
        adv = process_advantages(batch.data["step_rewards"], batch.data["step_mask"], batch.group_ids)  # [N, T]
        return adv * batch.completion_mask
