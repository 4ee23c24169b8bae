"""Rejection-sampling fine-tuning, offline (DeepSeekMath §5.2.1 and Appendix A.1.2; Yuan et al. 2023).

Sample completions ONCE from the frozen SFT model, keep the correct ones, fine-tune on them:

    J_RFT(θ) = E_{q ~ P_sft(Q), o ~ π_sft(O|q)} [ (1/|o|) Σ_t 1[o correct] · log π_θ(o_t | q, o_<t) ]
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.sampling import make_batch
from methods.base import Method, MethodConfig, register


@register("rft")
class RFT(Method):
    """Data: a pool of correct samples of the frozen SFT base (`ctx.frozen("base")`), built lazily in the first
    `collect`; every step draws B·G of them (the equal budget), cycling through the pool in reshuffled epochs."""

    rollout_groups = False  # its pool samples the frozen base
    needs_old_logp = False  # no ratio π_θ/π_old in its GC
    samples_policy = False  # the frozen base's samples: no staleness or sampler dtype

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "seq-mean-token-mean"
        """DeepSeekMath's J_RFT: mean over sequences of (1/|o|) Σ_t (every kept sample weighs the same)."""
        pool_size: int = 4096
        """Correct samples to collect (fewer when steps·B·G draws need fewer); the run reuses them in epochs."""
        max_pool_samples: int = 16384
        """Cap on the samples drawn from the base while building the pool (bounds its cost at low acceptance)."""
        regenerate_every: int = 0
        """A control, not DeepSeekMath's method: every this many steps the pool is sampled afresh from the frozen base
        (0: built once), so that a long run does not reuse the same samples many times over."""
        gc_share: float = 1.0
        """A control, not DeepSeekMath's method: the share of each step's B·G pool samples that carry GC = 1; the rest
        carry GC = 0 and still count in the normaliser, as online RFT's rejected samples do. At online RFT's
        acceptance rate this is RFT thinned to online RFT's number of gradient-carrying samples per step."""

        def validate(self) -> None:
            super().validate()
            if self.pool_size < 1 or self.max_pool_samples < 1:
                raise UserError(f"pool_size and max_pool_samples must be >= 1, got {self.pool_size}, "
                                f"{self.max_pool_samples}")
            if self.regenerate_every < 0:
                raise UserError(f"methods.rft.regenerate_every must be >= 0 (0: the pool is built once), got "
                                f"{self.regenerate_every}")
            if not 0 < self.gc_share <= 1:
                raise UserError(f"methods.rft.gc_share must be in (0, 1] (the share of a step's samples with GC = 1), "
                                f"got {self.gc_share}")

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.pool: list[dict] | None = None  # texts of the kept samples: prompt, completion, answer, steps

    def build_pool(self) -> dict[str, float]:
        """Sample the base in rollouts of B prompts × G completions until `target` correct samples or the cap."""
        t = self.ctx.cfg.train
        per_call = t.prompts_per_step * t.group_size
        target = min(self.cfg.pool_size, t.steps * per_call)
        base = self.ctx.frozen("base")
        pool, drawn, tokens = [], 0, 0.0
        with self.ctx.progress(target, "rft: the base's correct samples", "sample") as bar:  # minutes on a real model
            while len(pool) < target and drawn < self.cfg.max_pool_samples:
                batch = self.ctx.rollout(t.prompts_per_step, t.group_size, model=base)
                kept = [text for text, ok in zip(batch.texts, batch.data["correct"].tolist()) if ok > 0]
                bar.update(min(len(kept), target - len(pool)))  # the last rollout may overshoot: counted up to target
                pool += kept
                drawn += len(batch)
                tokens += float(batch.completion_mask.sum())
        if not pool:
            raise UserError(f"rft: none of {drawn} samples of the SFT base was correct, so there is nothing to "
                            "fine-tune on: train a stronger base (sft_base.steps) or raise "
                            "methods.rft.max_pool_samples")
        self.pool = pool
        return {"pool_size": len(pool), "pool_acceptance": len(pool) / drawn, "pool_samples": drawn,
                "pool_gen_tokens": tokens, "pool_epochs": t.steps * per_call / len(pool)}

    def state_dict(self) -> dict:  # checkpointed (gcframe.tracking.checkpoint): a resumed run reuses the same pool
        return {"pool": self.pool}

    def load_state_dict(self, state: dict) -> None:
        self.pool = state["pool"]

    def collect(self, step: int) -> Batch:
        if self.cfg.regenerate_every and step and step % self.cfg.regenerate_every == 0:
            self.pool = None  # sampled afresh from the frozen base (the rollouts' random state has moved on)
        if self.pool is None:
            self.record(**self.build_pool())  # logged in the row of each step that (re)built it
        t = self.ctx.cfg.train
        rows = self.ctx.draw(self.pool, t.prompts_per_step * t.group_size, "rft_pool")  # B·G kept samples
        batch = make_batch(self.ctx.tok, [r["prompt"] for r in rows], [r["completion"] for r in rows],
                           texts=[dict(r) for r in rows])
        batch.data["correct"] = torch.ones(len(batch))  # [N]: the pool holds only accepted samples
        carry = torch.zeros(len(batch))  # [N]: gc_share of them, the first of the (shuffled) draw, carry GC = 1
        carry[:round(self.cfg.gc_share * len(batch))] = 1.0
        batch.data["carries"] = carry
        return batch

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC(q, o, t) = 1[o correct]  (DeepSeekMath §5.2.1, GC_RFT; the seed's table, row 2) -> [N, T].

        Every pooled sample passed the filter, so GC = 1 on its tokens: SFT on the base's own correct outputs. With
        gc_share < 1 (a control) only that share of the step's samples carries it: GC = 1[o correct]·carries.
        """
        keep = batch.data["correct"] * batch.data.get("carries", torch.ones_like(batch.data["correct"]))
        return keep.to(logp.dtype).unsqueeze(1).expand_as(logp)
