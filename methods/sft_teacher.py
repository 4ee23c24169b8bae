"""Sequence-level knowledge distillation (Kim and Rush 2016, "Sequence-Level Knowledge Distillation", §3.2): SFT on
the teacher's own completions of the training prompts.

Word-level distillation matches the teacher's next-token distribution on given text; sequence-level distillation
trains on the sequences the teacher would produce instead, approximating its mode by beam search (here greedy
decoding, a beam of one):

    L_SEQ-KD = −E_q [ log π_θ(ŷ(q) | q) ],     ŷ(q) ≈ argmax_y π_T(y | q)

So the data source is new and the coefficient is SFT's: GC = 1 on every token of the teacher's completion. The
teacher completes each training prompt once, before the first step (as RFT's pool is built), and nothing is
filtered: the checker never sees the teacher's answers (their accuracy is logged as `pool_teacher_accuracy`). The
teacher is any model folder that shares the student's tokenizer (`teacher`), as for on-policy distillation
(methods/opd.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.sampling import make_batch
from gcframe.teacher import WithTeacher
from methods.base import MethodConfig, register
from methods.sft import SFT


@register("sft_teacher")
class SFTTeacher(WithTeacher, SFT):
    """Data: the teacher's greedy completion of each of up to `pool_size` training prompts (drawn in the seeded data
    order), built in the first `collect`; every step draws B·G of them (the equal budget), reshuffled when they run
    out. GC = 1 on their tokens."""

    uses_teacher: ClassVar[bool] = True
    """A teacher folder is an option of this method (gcframe.verify makes one for it: a perturbed copy of the base)."""

    @dataclass
    class Config(MethodConfig):
        teacher: str | None = None
        """The teacher: a Hugging Face model folder that shares the student's tokenizer (required)."""
        pool_size: int = 4096
        """Training prompts the teacher completes (fewer when steps·B·G draws need fewer, or the task has fewer)."""

        def validate(self) -> None:
            super().validate()
            if not isinstance(self.pool_size, int) or isinstance(self.pool_size, bool) or self.pool_size < 1:
                raise UserError(f"pool_size must be an integer >= 1, got {self.pool_size!r}")

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.pool: list[dict] | None = None  # the teacher's completions: prompt, completion, answer, steps

    def build_pool(self) -> dict[str, float]:
        """The teacher's greedy completions of the next `target` training prompts, B·G prompts at a time."""
        t = self.ctx.cfg.train
        per_call = t.prompts_per_step * t.group_size
        target = min(self.cfg.pool_size, t.steps * per_call, len(self.ctx.task.prompts))
        pool, correct, tokens = [], 0.0, 0.0
        with self.ctx.progress(target, "sft_teacher: the teacher's completions", "prompt") as bar:
            while len(pool) < target:
                rows = self.ctx.draw(self.ctx.task.prompts, min(per_call, target - len(pool)), "teacher_prompts")
                batch = self.ctx.complete(rows, 1, model=self.teacher, temperature=0.0)  # greedy: a beam of one
                pool += batch.texts
                correct += float(batch.data["correct"].sum())
                tokens += float(batch.completion_mask.sum())
                bar.update(len(batch))
        self.pool = pool
        return {"pool_size": len(pool), "pool_teacher_accuracy": correct / len(pool), "pool_gen_tokens": tokens,
                "pool_epochs": t.steps * per_call / len(pool)}

    def state_dict(self) -> dict:  # checkpointed: a resumed run reuses the same completions
        return {"pool": self.pool}

    def load_state_dict(self, state: dict) -> None:
        self.pool = state["pool"]

    def collect(self, step: int) -> Batch:
        if self.pool is None:
            self.record(**self.build_pool())  # logged in the first step's row
        t = self.ctx.cfg.train
        rows = self.ctx.draw(self.pool, t.prompts_per_step * t.group_size, "teacher_pool")  # B·G completions
        return make_batch(self.ctx.tok, [r["prompt"] for r in rows], [r["completion"] for r in rows],
                          texts=[dict(r) for r in rows])

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC(q, ŷ, t) = 1 on every token of the teacher's completion ŷ(q)   (Kim and Rush 2016, §3.2, eq. for
        L_SEQ-KD: the cross-entropy of the teacher's mode sequence; SFT's coefficient on the teacher's data)."""
        return torch.ones_like(logp)
