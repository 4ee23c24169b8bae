"""SimPO (Meng et al. 2024, eq. 6): DPO's pairs, no reference model, a length-normalised reward and a target margin

Meng et al. 2024, "SimPO: Simple Preference Optimization with a Reference-Free Reward": the implicit reward is the
length-normalised log-likelihood and the Bradley–Terry margin must exceed a target γ:

    L_SimPO = −E_{(q, o⁺, o⁻)} [ log σ( β/|o⁺| · log π_θ(o⁺|q) − β/|o⁻| · log π_θ(o⁻|q) − γ ) ]

TRL ships the same loss as CPOTrainer.cpo_loss with loss_type="simpo" (trl.experimental.cpo; its `simpo_gamma` is γ);
its trainer adds cpo_alpha times the chosen completion's NLL (default 1.0, "CPO-SimPO"): eq. 6 is cpo_alpha = 0.
Data and normaliser as DPO (methods/dpo.py): P = B·G/2 pairs, engine loss = the pair mean / 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.dpo import PreferenceConfig, PreferencePairs, check_positive, pair_index, per_row, seq_sum, sides


@dataclass
class SimPOConfig(PreferenceConfig):
    beta: float = 2.0
    """β: scale of the implicit reward β/|o|·log π_θ(o|q) (the paper's range is 2.0-2.5)."""
    gamma: float = 1.0
    """γ: target reward margin (the paper tunes γ/β around 0.5); 0 drops it."""

    method: ClassVar[str] = "simpo"

    def validate(self) -> None:
        super().validate()
        check_positive(self, "beta")
        if not self.gamma >= 0:
            raise UserError(f"methods.simpo.gamma must be >= 0, got {self.gamma}")


@register("simpo")
class SimPO(PreferencePairs):
    """Offline pairs from the SFT base's preference set (as dpo); no reference model."""

    Config = SimPOConfig

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = +β·σ(−z)/|o⁺| on every o⁺ token, −β·σ(−z)/|o⁻| on every o⁻ token, z = β(ā⁺ − ā⁻) − γ with
        ā = (1/|o|) Σ_t log π_θ(o_t|q,o_<t) (Meng et al. 2024, eq. 6). Derivation: ∂(−log σ(z))/∂ā± = ∓β·σ(−z) and
        ∂ā/∂log π_θ(o_t) = 1/|o| on each token of o: a shorter completion's tokens carry more weight each.
        """
        mask = batch.completion_mask  # [N, T]
        pair, chosen = pair_index(batch)  # [N], [N]
        inv_len = 1.0 / mask.sum(-1).to(logp.dtype).clamp(min=1.0)  # 1/|o_i| [N], in logp's dtype
        a_pos, a_neg = sides(seq_sum(logp.detach(), mask) * inv_len, pair, chosen)  # ā⁺, ā⁻ [P]
        z = self.cfg.beta * (a_pos - a_neg) - self.cfg.gamma  # [P]
        w = self.cfg.beta * torch.sigmoid(-z)  # [P]
        self.record(simpo_loss=-F.logsigmoid(z).mean(), reward_margin=(z + self.cfg.gamma).mean(),
                    pair_accuracy=(a_pos > a_neg).float().mean())
        return (per_row(w, -w, pair, chosen) * inv_len).unsqueeze(-1) * mask  # [N, T]
