"""Online DPO (Guo et al. 2024): DPO on pairs of the live policy's samples, judged by the task's reward

Guo et al. 2024, "Direct Language Model Alignment from Online AI Feedback", Algorithm 1 (TRL's OnlineDPOTrainer):
DPO's loss on pairs drawn from the LIVE policy at every step.

    per prompt q: o_1..o_G ~ π_θ(·|q) -> rewards -> o⁺ = a best sample, o⁻ = a worst one (if their rewards differ)
    L = −E [ log σ(β(Δ⁺ − Δ⁻)) ],    Δ = Σ_t log π_θ(o_t|q,o_<t)/π_ref(o_t|q,o_<t)

The paper's annotator is an LLM judging two samples; here it is train.reward (the checker: right beats wrong). With
G samples per prompt (group_size, default train.group_size), o⁺ is drawn at random among the samples of highest
reward and o⁻ among those of lowest reward. A prompt whose G rewards are all equal has no preference: it is dropped
and counted (TRL's trainer instead keeps such a tie, the first sample as o⁺). Every step generates B·G samples and
trains on the 2K of them in its K pairs; the tokens it generated but did not train on are `unpaired_dropped_tokens`
and count in gen_tokens, so the equal-compute view charges them. A step in which no prompt has a preference keeps
every sample with GC = 0 (no update). train.dynamic_sampling replaces the dropped prompts by fresh ones (their
groups are exactly the zero-variance ones). Coefficients and normaliser are DPO's (methods/dpo.py): the engine's
loss is the pair mean / 2, over the pairs found, so a step with fewer pairs has the same scale.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import Method, MethodConfig, register
from methods.dpo import DPO, check_positive


@dataclass
class OnlineDPOConfig(MethodConfig):
    aggregation: str = "seq-mean-token-sum"
    """seq-mean-token-sum: the engine loss is DPO's pair loss summed over the step's pairs / 2K (the pair mean / 2)."""
    beta: float = 0.1
    """β: strength of the implicit KL anchor to π_ref, as DPO's (Rafailov et al. eq. 7)."""
    group_size: int | None = None
    """G: samples per prompt among which a best and a worst are picked; None = train.group_size (the equal budget,
    B·G samples a step). 2 is the paper's and TRL's; more find a pair on more prompts at a higher generation cost."""

    method: ClassVar[str] = "online_dpo"

    def validate(self) -> None:
        super().validate()
        check_positive(self, "beta")
        g = self.group_size
        if g is not None and (not isinstance(g, int) or isinstance(g, bool) or g < 2):
            raise UserError(f"methods.online_dpo.group_size must be an integer >= 2 (a pair needs two samples), "
                            f"got {g!r}")


@register("online_dpo")
class OnlineDPO(Method):
    """Data: `ctx.rollout(B, G)` from the live policy; per prompt a best and a worst sample by reward, prompts with
    equal rewards dropped; reference π_ref = the SFT base."""

    Config = OnlineDPOConfig
    uses_reference = True
    needs_groups = True
    rollout_groups = True
    needs_old_logp = False  # no ratio π_θ/π_old in its GC
    pairwise: ClassVar[bool] = True
    """The batch `collect` returns is pairs (analysis/gc_view.py pairs its probe so)."""

    def __init__(self, cfg: OnlineDPOConfig, ctx):
        super().__init__(cfg, ctx)
        self.pick = torch.Generator().manual_seed(ctx.cfg.seed + 7919 * ctx.rank)  # not ctx.rng: processes differ

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        batch = self.ctx.rollout(t.prompts_per_step, self.cfg.group_size or t.group_size)  # N = B·G: rewards [N]
        r, rows = batch.data["rewards"], []
        for g in torch.unique(batch.group_ids).tolist():
            idx = torch.nonzero(batch.group_ids == g, as_tuple=True)[0]  # [G]
            if r[idx].max() > r[idx].min():  # a preference exists
                best, worst = idx[r[idx] == r[idx].max()], idx[r[idx] == r[idx].min()]
                rows += [best[torch.randint(len(best), (1,), generator=self.pick)],
                         worst[torch.randint(len(worst), (1,), generator=self.pick)]]
        kept = batch[torch.cat(rows)] if rows else batch  # [2K]: o⁺_0, o⁻_0, o⁺_1, ... (a pair shares its group id)
        kept.data["is_chosen"] = torch.tensor([1.0, 0.0]).repeat(len(rows) // 2) if rows else torch.zeros(len(batch))
        dropped = float(batch.completion_mask.sum() - kept.completion_mask.sum())  # generated, not in the batch
        total = self.ctx.all_sum(torch.tensor([dropped, len(rows) / 2, len(torch.unique(batch.group_ids))],
                                              dtype=torch.float64, device=self.ctx.device)).tolist()
        self.record(unpaired_dropped_tokens=total[0], paired_prompts=total[1], unpaired_prompts=total[2] - total[1])
        return kept

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = +β·σ(β(Δ⁻ − Δ⁺)) on every o⁺ token, −β·σ(β(Δ⁻ − Δ⁺)) on every o⁻ token: DPO's (Rafailov et al.
        2023, eq. 7; methods/dpo.py has the derivation) on the live policy's pairs; 0 on a step without a pair."""
        if not bool((batch.data["is_chosen"] > 0).any()):
            return torch.zeros_like(logp)  # no prompt had a preference: nothing to learn this step
        return DPO.coefficients(self, batch, logp)
