"""Online rejection-sampling fine-tuning (DeepSeekMath §5.2.1 and Appendix A.1.3).

RFT's filter applied to samples of the LIVE policy instead of the frozen SFT model:

    J_OnRFT(θ) = E_{q ~ P_sft(Q), o ~ π_θ(O|q)} [ (1/|o|) Σ_t 1[o correct] · log π_θ(o_t | q, o_<t) ]
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
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
    needs_old_logp = False  # no ratio π_θ/π_old in its GC

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "seq-mean-token-mean"
        """DeepSeekMath's J_OnRFT: mean over ALL sampled sequences of (1/|o|) Σ_t (rejected ones contribute 0)."""
        fill_correct: bool = False
        """An intervention, not DeepSeekMath's method: draw rollouts until B·G samples are correct (at most
        `max_rounds` rollouts of B·G) and train on those only, so that every step carries as many gradient-carrying
        samples as RFT's (whose pool holds only correct ones) and differs from RFT only in sampling the live policy.
        Every sample it draws counts in gen_tokens (fill_dropped_tokens: those it did not train on)."""
        max_rounds: int = 8
        """fill_correct: rollouts of B·G drawn per step at most; a step that reaches it trains on the correct
        samples it has (fill_shortfall logs how many were missing)."""
        fill_prompts: str = "fresh"
        """With fill_correct, where further rollouts come from: "fresh" (new prompts, the data order's next B) or
        "same" (G more samples of each of the step's B prompts: a fixed number of prompts per step, a control for
        how many prompts a step sees)."""

        def validate(self) -> None:
            super().validate()
            if self.fill_prompts not in ("fresh", "same"):
                raise UserError(f"methods.online_rft.fill_prompts must be 'fresh' or 'same', got {self.fill_prompts!r}")
            if self.max_rounds < 1:
                raise UserError(f"methods.online_rft.max_rounds must be >= 1, got {self.max_rounds}")

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        batch = self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G, data: correct [N]
        self.record(acceptance_rate=batch.data["correct"].mean())
        return self.filled(batch, t.prompts_per_step * t.group_size) if self.cfg.fill_correct else batch

    def filled(self, batch: Batch, n: int) -> Batch:
        """fill_correct: the first n correct samples of this and further rollouts -> a batch of correct samples only
        ([n'] rows, n' = n unless max_rounds ran out)."""
        from gcframe.batch import concat

        def correct(b: Batch) -> Batch:
            return b[torch.nonzero(b.data["correct"] > 0).squeeze(1)]

        def used(b: Batch) -> float:
            return float(b.completion_mask.sum())

        t, kept, drawn = self.ctx.cfg.train, [correct(batch)], used(batch)
        rounds = 1
        prompts = list({r["prompt"]: {"prompt": r["prompt"], "answer": r["answer"], "steps": r.get("steps", [])}
                        for r in batch.texts}.values())  # this step's B prompts, in order
        while sum(len(b) for b in kept) < n and rounds < self.cfg.max_rounds:
            more = self.ctx.complete(prompts, t.group_size) if self.cfg.fill_prompts == "same" else \
                self.ctx.rollout(t.prompts_per_step, t.group_size)
            kept.append(correct(more))
            drawn += used(more)
            rounds += 1
        kept = [b for b in kept if len(b)]
        got = concat(kept, self.ctx.tok.pad_token_id)[:n] if kept else batch  # none correct: the plain batch, GC = 0
        dropped = self.ctx.all_sum(torch.tensor([drawn - used(got)], device=self.ctx.device))  # generated, not
        self.record(fill_rounds=float(rounds), fill_shortfall=float(max(0, n - len(got)) if kept else n),  # trained
                    fill_dropped_tokens=float(dropped))  # on, every process's: counted in gen_tokens (not averaged)
        return got

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC(q, o, t) = 1[o correct]  (DeepSeekMath §5.2.1, GC_OnRFT; the seed's table, row 2) -> [N, T]."""
        return batch.data["correct"].to(logp.dtype).unsqueeze(1).expand_as(logp)
