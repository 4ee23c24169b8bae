"""On-policy distillation (Agarwal et al. 2024, GKD, arXiv:2306.13649, λ = 1 and the reverse KL; Gu et al. 2024,
MiniLLM; Lu and Thinking Machines 2025, "On-Policy Distillation"): the student's own samples, graded token by token
by a teacher.

The student samples; the teacher scores every sampled token; the per-token reward is how much likelier the teacher
finds the token than the student does:

    GC_t = log π_T(o_t | q, o_<t) − log π_θ(o_t | q, o_<t)

the negative single-sample estimate of the reverse KL(π_θ ‖ π_T) at position t. Its expectation over o_t ~ π_θ is
−∇KL(π_θ(·|s_t) ‖ π_T(·|s_t)): the gradient of GKD's on-policy reverse-KL loss at every visited position, estimated
from the one sampled token instead of summed over the vocabulary (tests/test_distillation.py checks the expectation
exactly against TRL's generalized_jsd_loss). A dense signal (every token is graded) that needs no checker.

`baseline: vopd` subtracts vOPD's control variate (Oh et al. 2026, "KL for a KL", arXiv:2605.07865): the value of
position t, the expected per-token reward −KL(π_θ(·|s_t) ‖ π_T(·|s_t)) over the vocabulary, which depends on the
state only, so it leaves the expected gradient unchanged and lowers its variance.

The teacher is any model folder that shares the student's tokenizer (`teacher`), loaded once, frozen; its forward
pass over the batch costs about what π_ref's does for GRPO. With one pass over each batch π_old = π_θ; when the
engine reuses a batch the coefficient carries the ratio r = π_θ/π_old, so that samples of π_old still estimate the
gradient at π_θ (E_{π_old}[r g] = E_{π_θ}[g]).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.modeling import evaluating
from gcframe.teacher import WithTeacher, teacher_columns
from methods.base import Method, MethodConfig, register
from methods.grpo import masked_mean


@register("opd")
class OPD(WithTeacher, Method):
    """Data: `ctx.rollout(B, G)`, G samples of each of B prompts from the live policy (B·G sequences, the equal
    budget; the checker's rewards are logged, never used), and in `prepare` the teacher's log-probability of every
    sampled token (`teacher_logp`), and with the vOPD baseline the per-position KL(π_old ‖ π_T) (`teacher_kl`)."""

    rollout_groups = True
    stores = ("teacher_logp", "teacher_kl")  # (teacher_kl with the vOPD baseline only): no advantages
    uses_teacher: ClassVar[bool] = True
    """A teacher folder is an option of this method (gcframe.verify makes one for it: a perturbed copy of the base)."""

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "token-mean"
        """Every sampled token weighs the same (TRL's distillation losses and Thinking Machines' recipe)."""
        teacher: str | None = None
        """The teacher: a Hugging Face model folder that shares the student's tokenizer (required)."""
        baseline: str = "none"
        """none: GC = log π_T − log π_θ; vopd: minus vOPD's baseline −KL(π_θ ‖ π_T) at the position (its value)."""

        def validate(self) -> None:
            super().validate()
            if self.baseline not in ("none", "vopd"):
                raise UserError(f"baseline must be 'none' or 'vopd' (vOPD's per-token −KL), got {self.baseline!r}")

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        return self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G

    def prepare(self, batch: Batch) -> None:
        """The teacher's columns, once per collected batch (no grad): log π_T(o_t) [N, T], and for vOPD the KL of the
        sampling policy π_old from the teacher at each position [N, T]."""
        vopd = self.cfg.baseline == "vopd"
        with evaluating(self.ctx.policy):  # π_old as the engine measures it: no dropout
            t_logp, kl = teacher_columns(self.teacher, batch, self.ctx.cfg.train.temperature,
                                         student=self.ctx.policy if vopd else None)
        batch.data["teacher_logp"] = t_logp
        if vopd:
            batch.data["teacher_kl"] = kl
            self.record(teacher_kl=masked_mean(kl, batch.completion_mask))

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_t = r_t · (log π_T(o_t) − log π_θ(o_t) − b_t),  b_t = 0 or −KL(π_old(·|s_t) ‖ π_T(·|s_t)) (vOPD)
        (Agarwal et al. 2024, eq. 2's on-policy reverse KL; Lu and Thinking Machines 2025; Oh et al. 2026)

        with r = π_θ/π_old (1 in one pass). Derivation: ∇KL(π_θ ‖ π_T) at a position is E_{o~π_θ}[(log π_θ(o) −
        log π_T(o)) ∇log π_θ(o)] (the +1 term of ∇(π log π) sums to Σ_o ∇π_θ(o) = 0), so −(log π_θ − log π_T) on the
        sampled token is its single-sample estimate, and a baseline b_t that depends on the position only has
        E[b_t ∇log π_θ] = 0. From samples of π_old the same expectation is E_{π_old}[r ·]. The engine's token-mean is
        TRL's normaliser (Σ over the batch's tokens / their count).
        """
        mask = batch.completion_mask
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # r [N, T]
        reward = batch.data["teacher_logp"] - logp.detach()  # log π_T − log π_θ [N, T]
        if self.cfg.baseline == "vopd":
            reward = reward + batch.data["teacher_kl"]  # − b_t, b_t = −KL
        self.record(reverse_kl=masked_mean(-(batch.data["teacher_logp"] - logp.detach()), mask),
                    ratio_mean=masked_mean(ratio, mask))
        return ratio * reward * mask
