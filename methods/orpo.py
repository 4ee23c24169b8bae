"""ORPO (Hong et al. 2024, eq. 6-7): SFT on the chosen completion plus an odds-ratio penalty, no reference model

Hong et al. 2024, "ORPO: Monolithic Preference Optimization without Reference Model":

    L_ORPO = E_{(q, o⁺, o⁻)} [ L_SFT + λ·L_OR ],    L_SFT = −ā⁺,    L_OR = −log σ( log odds(o⁺) − log odds(o⁻) )
    odds(o) = P/(1 − P),  P = exp(ā),  ā = (1/|o|) Σ_t log π_θ(o_t|q,o_<t)   (the length-normalised likelihood, eq. 4)

TRL: trl.experimental.orpo's ORPOTrainer.odds_ratio_loss is −L_OR (its `beta` is λ); its SFT term differs: a token
mean over every chosen token of the batch (prompt tokens included), where eq. 6 takes each completion's mean ā⁺.
Data and normaliser as DPO (methods/dpo.py): P = B·G/2 pairs, engine loss = the pair mean / 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from gcframe.batch import Batch
from methods.base import register
from methods.dpo import PreferenceConfig, PreferencePairs, check_positive, pair_index, per_row, seq_sum, sides

MAX_MEAN_LOGP = -1e-6
"""ā is clamped to at most this: at ā = 0 (every token certain) the odds P/(1 − P) are infinite; counted in
`odds_clamped`."""


@dataclass
class ORPOConfig(PreferenceConfig):
    lam: float = 0.1
    """λ: weight of the odds-ratio term L_OR against the SFT term (eq. 6; the paper uses 0.1, TRL's `beta`)."""

    method: ClassVar[str] = "orpo"

    def validate(self) -> None:
        super().validate()
        check_positive(self, "lam")


def log_odds(a: torch.Tensor) -> torch.Tensor:
    """log(P/(1 − P)) for P = exp(a), a < 0: a − log(1 − eᵃ) = a − log(−expm1(a))."""
    return a - torch.log(-torch.expm1(a))


@register("orpo")
class ORPO(PreferencePairs):
    """Offline pairs from the SFT base's preference set (as dpo); no reference model."""

    Config = ORPOConfig

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = 1/|o⁺| + λ·σ(−L)/(|o⁺|(1 − e^{ā⁺})) on every o⁺ token, −λ·σ(−L)/(|o⁻|(1 − e^{ā⁻})) on every o⁻
        token, L = log odds(o⁺) − log odds(o⁻) (Hong et al. 2024, eq. 6-7). Derivation: ∂(−ā⁺)/∂ā⁺ = −1;
        ∂(−log σ(L))/∂L = −σ(−L); ∂ log odds/∂ā = 1 + eᵃ/(1 − eᵃ) = 1/(1 − eᵃ); ∂ā/∂log π_θ(o_t) = 1/|o|.
        """
        mask = batch.completion_mask  # [N, T]
        pair, chosen = pair_index(batch)  # [N], [N]
        inv_len = 1.0 / mask.sum(-1).to(logp.dtype).clamp(min=1.0)  # 1/|o_i| [N], in logp's dtype
        mean = seq_sum(logp.detach(), mask) * inv_len  # ā_i [N]
        a = mean.clamp(max=MAX_MEAN_LOGP)
        L_pos, L_neg = sides(log_odds(a), pair, chosen)  # log odds(o⁺), log odds(o⁻) [P]
        L = L_pos - L_neg  # [P]
        w = self.cfg.lam * torch.sigmoid(-L)  # λ·σ(−L) [P]
        slope = -1.0 / torch.expm1(a)  # ∂ log odds/∂ā = 1/(1 − eᵃ) [N]
        self.record(orpo_sft_loss=-sides(mean, pair, chosen)[0].mean(), orpo_or_loss=-F.logsigmoid(L).mean(),
                    log_odds_ratio=L.mean(), pair_accuracy=(L > 0).float().mean(),
                    odds_clamped=(mean > MAX_MEAN_LOGP).float().mean())
        gc = chosen + per_row(w, -w, pair, chosen) * slope  # SFT's 1 on o⁺; the odds-ratio term ±λσ(−L)·slope [N]
        return (gc * inv_len).unsqueeze(-1) * mask  # [N, T]
