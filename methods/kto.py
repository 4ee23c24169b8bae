"""KTO (Ethayarajh et al. 2024, eq. 8): unpaired desirable and undesirable completions against a KL reference point

Ethayarajh et al. 2024, "KTO: Model Alignment as Prospect Theoretic Optimization": each completion is only labelled
desirable or undesirable and valued against a reference point z₀:

    L_KTO = E_{(q, o)} [ λ_o − v(q, o) ],    r = Δ = Σ_t log π_θ(o_t|q,o_<t)/π_ref(o_t|q,o_<t)
    v = λ_D·σ(β(r − z₀)) if o is desirable,  λ_U·σ(β(z₀ − r)) if undesirable,   z₀ = max(0, KL̂), not differentiated

KL̂ is the mean of Δ over mismatched pairs (q_i, o_{i−1}) of the batch, the paper's estimate of KL(π_θ‖π_ref)
(the text below eq. 8) and TRL 1.16's KTOTrainer (which cycles completions by one within the batch in the same way).

Data: the preference set of gcframe.rewards.preferences taken apart: a pair's chosen completion is a desirable
example and its rejected one an undesirable example, each drawn alone (two seeded shuffles, so a step rarely holds
both halves of a pair). A step draws n = B·G/4 desirable and n undesirable examples (both signs in every batch) and
beside each example i its mismatched row (q_i, o_{i−1}): 4n = B·G sequences, the equal budget. An example and its
mismatched row share a group id (micro-batches never split them); z₀ is estimated from the mismatched rows of what
one `coefficients` call sees: the whole minibatch, or each micro-batch under train.micro_batch_size (the paper's
and TRL's estimate is per micro-batch too).

Normaliser: with seq-mean-token-sum over N = 4n sequences the engine's loss is Σ_examples (λ_o − v) / (4n): the
example mean of L_KTO (TRL's nanmean over the 2n examples) divided by 2, as DPO's; the mismatched rows have GC 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.sampling import make_batch
from methods.base import Method, register
from methods.dpo import PreferenceConfig, check_positive, preference_set, seq_sum


@dataclass
class KTOConfig(PreferenceConfig):
    aggregation: str = "seq-mean-token-sum"
    """seq-mean-token-sum: the engine loss is L_KTO's example mean / 2 (the mismatched rows count in N)."""
    beta: float = 0.1
    """β: scale of the implied reward r = Δ in the value function (eq. 8; TRL's `beta`)."""
    desirable_weight: float = 1.0
    """λ_D: weight of the desirable examples (eq. 8; the paper keeps λ_D·n_D/(λ_U·n_U) in [1, 4/3])."""
    undesirable_weight: float = 1.0
    """λ_U: weight of the undesirable examples (eq. 8)."""

    method: ClassVar[str] = "kto"

    def validate(self) -> None:
        super().validate()
        check_positive(self, "beta", "desirable_weight", "undesirable_weight")


def reference_point(delta: torch.Tensor, mismatched: torch.Tensor) -> torch.Tensor:
    """z₀ = max(0, mean of Δ over the mismatched rows): Δ [N] (detached), mismatched [N] 1 on (q_i, o_{i−1})."""
    return ((delta * mismatched).sum() / mismatched.sum().clamp(min=1)).clamp(min=0.0)


@register("kto")
class KTO(Method):
    """Desirable and undesirable completions drawn alone from the preference set, with mismatched rows for z₀;
    reference π_ref = the SFT base."""

    Config = KTOConfig
    uses_reference = True
    rollout_groups = False
    needs_old_logp = False  # no ratio π_θ/π_old in its GC
    samples_policy = False  # data fixed before the run: no staleness or sampler dtype
    unpaired: ClassVar[bool] = True
    """Examples stand alone, flagged data["desirable"], with data["mismatched"] rows for z₀ (analysis/gc_view.py)."""

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        """Also, before the SFT base or the preference set is built: a step must hold a labelled desirable and a
        labelled undesirable example, each with its mismatched row (B·G >= 4)."""
        super().check_run(cfg, label)
        t = cfg.train
        if t.prompts_per_step * t.group_size < 4:
            raise UserError(f"method '{label}' needs a desirable and an undesirable example, each with its mismatched "
                            f"row, per step: train.prompts_per_step · train.group_size must be >= 4, got "
                            f"{t.prompts_per_step} · {t.group_size}")

    def __init__(self, cfg: KTOConfig, ctx):
        super().__init__(cfg, ctx)
        train, self.pref_info = preference_set(cfg, ctx)
        self.examples = {side: [{"prompt": r["prompt"], "completion": r[side], "answer": r["answer"]} for r in train]
                         for side in ("chosen", "rejected")}  # desirable, undesirable
        t = ctx.cfg.train
        self.n = t.prompts_per_step * t.group_size // 4  # n per sign: 2n examples + 2n mismatched rows = B·G (>= 1)

    def collect(self, step: int) -> Batch:
        good = self.ctx.draw(self.examples["chosen"], self.n, "chosen")  # this process's share of the n
        rows = good + self.ctx.draw(self.examples["rejected"], self.n, "rejected")
        prompts, completions, texts = [], [], []
        for i, r in enumerate(rows):  # example i, then (q_i, o_{i−1}): the completions cycled by one, as TRL
            other = rows[i - 1]["completion"]
            prompts += [r["prompt"], r["prompt"]]
            completions += [r["completion"], other]
            texts += [{**r, "side": "desirable" if i < len(good) else "undesirable"},
                      {"prompt": r["prompt"], "completion": other, "answer": r["answer"], "side": "mismatched"}]
        batch = make_batch(self.ctx.tok, prompts, completions, torch.arange(len(rows)).repeat_interleave(2).tolist(),
                           texts)  # [4n]: example and mismatched row share a group id
        is_desirable = (torch.arange(len(rows)) < len(good)).float()  # [2n]: the drawn desirable ones first
        batch.data["desirable"] = torch.stack([is_desirable, torch.zeros_like(is_desirable)], 1).flatten()  # [4n]
        batch.data["mismatched"] = torch.tensor([0.0, 1.0]).repeat(len(rows))  # [4n]
        return batch

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = λ_D·β·s(1 − s) with s = σ(β(r − z₀)) on every token of a desirable o, −λ_U·β·s(1 − s) with
        s = σ(β(z₀ − r)) on an undesirable one, 0 on the mismatched rows (Ethayarajh et al. 2024, eq. 8).
        Derivation: z₀ is a constant of the step (the paper does not backpropagate through it), σ' = σ(1 − σ), so
        ∂(λ_D − λ_D σ(β(r − z₀)))/∂r = −λ_D β s(1 − s) and ∂(λ_U − λ_U σ(β(z₀ − r)))/∂r = +λ_U β s(1 − s);
        ∂r/∂log π_θ(o_t) = 1 on every token, so −GC is that derivative, constant over a sequence.
        """
        c, mask = self.cfg, batch.completion_mask  # [N, T]
        mismatched, desirable = batch.data["mismatched"], batch.data["desirable"]  # [N], [N]
        undesirable = (1 - mismatched) * (1 - desirable)  # [N]
        r = seq_sum(logp.detach() - batch.data["ref_logp"], mask)  # Δ_i [N]
        z0 = reference_point(r, mismatched)  # scalar
        s = torch.sigmoid(c.beta * torch.where(desirable > 0, r - z0, z0 - r))  # [N]
        slope = c.beta * s * (1 - s)  # [N]
        gc = c.desirable_weight * desirable * slope - c.undesirable_weight * undesirable * slope  # [N]
        lam = c.desirable_weight * desirable + c.undesirable_weight * undesirable
        examples = (1 - mismatched).sum().clamp(min=1)
        self.record(kto_loss=((lam * (1 - s)) * (1 - mismatched)).sum() / examples, kto_z0=z0,
                    reward_desirable=(r * desirable).sum() / desirable.sum().clamp(min=1),
                    reward_undesirable=(r * undesirable).sum() / undesirable.sum().clamp(min=1))
        return gc.unsqueeze(-1) * mask  # [N, T]
