"""Online rejection-sampling fine-tuning (DeepSeekMath §5.2.1 and Appendix A.1.3).

RFT's filter applied to samples of the LIVE policy instead of the frozen SFT model:

    J_OnRFT(θ) = E_{q ~ P_sft(Q), o ~ π_θ(O|q)} [ (1/|o|) Σ_t 1[o correct] · log π_θ(o_t | q, o_<t) ]
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from methods.base import Method, MethodConfig, register


@register("online_rft")
class OnlineRFT(Method):
    """Data: `ctx.rollout(B, G)`, G samples of each of B prompts from the current policy.

    Rejected samples stay in the batch with GC = 0 rather than being dropped: the batch keeps B·G sequences (the
    equal budget) and the normaliser counts every sample drawn. With the default seq-mean-token-mean the loss is
    then exactly DeepSeekMath's J_OnRFT, a sample mean over o ~ π_θ of (1/|o|) Σ_t 1[o correct] log π_θ, i.e. an
    unbiased estimate of the paper's gradient (REINFORCE on the 0/1 reward without a baseline). Normalising over
    the kept samples only would instead be SFT on them, with a step size that ignores the acceptance rate.
    """

    rollout_groups = True

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "seq-mean-token-mean"
        """DeepSeekMath's J_OnRFT: mean over ALL sampled sequences of (1/|o|) Σ_t (rejected ones contribute 0)."""

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        batch = self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G, data: correct [N]
        self.record(acceptance_rate=batch.data["correct"].mean())
        return batch

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC(q, o, t) = 1[o correct]  (DeepSeekMath §5.2.1, GC_OnRFT; the seed's table, row 2) -> [N, T]."""
        return batch.data["correct"].to(logp.dtype).unsqueeze(1).expand_as(logp)
