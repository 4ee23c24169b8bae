"""IPO (Azar et al. 2023, eq. 17): DPO's pairs and reference, a squared loss on the log-ratio margin

Azar et al. 2023, "A General Theoretical Paradigm to Understand Learning from Human Preferences": the margin is
regressed onto a fixed target instead of being pushed to infinity:

    L_IPO = E_{(q, o⁺, o⁻)} [ (h − 1/(2τ))² ],    h = Δ⁺ − Δ⁻,    Δ = Σ_t log π_θ(o_t|q,o_<t)/π_ref(o_t|q,o_<t)

`token_mean: true` divides each Δ by its completion's length |o| first, as TRL's DPOTrainer(loss_type="ipo") does
(its comment: the paper's results were run with that normalisation); the default is eq. 17 as printed (sums).
Data and normaliser as DPO (methods/dpo.py): P = B·G/2 pairs, engine loss = the pair mean / 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gcframe.batch import Batch
from methods.base import register
from methods.dpo import PreferenceConfig, PreferencePairs, check_positive, pair_index, per_row, seq_sum, sides


@dataclass
class IPOConfig(PreferenceConfig):
    tau: float = 0.1
    """τ: the regularisation of eq. 17; the log-ratio margin h is regressed onto 1/(2τ) (TRL's `beta`)."""
    token_mean: bool = False
    """Average each sequence's log-ratio over its tokens, Δ/|o| (TRL 1.16's ipo); false: eq. 17's sums."""

    method: ClassVar[str] = "ipo"

    def validate(self) -> None:
        super().validate()
        check_positive(self, "tau")


@register("ipo")
class IPO(PreferencePairs):
    """Offline pairs from the SFT base's preference set (as dpo); reference π_ref = the SFT base."""

    Config = IPOConfig
    uses_reference = True

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = −2(h − 1/(2τ))·c⁺ on every o⁺ token, +2(h − 1/(2τ))·c⁻ on every o⁻ token (Azar et al. 2023,
        eq. 17), with c = 1, or 1/|o| under token_mean. Derivation: ∂(h − 1/(2τ))²/∂Δ± = ±2(h − 1/(2τ))·c±, and
        ∂Δ/∂log π_θ(o_t) = 1 on each token, so −GC is that derivative, constant over a sequence. Unlike DPO's σ the
        weight changes sign: a pair whose margin passed 1/(2τ) is pulled back.
        """
        mask = batch.completion_mask  # [N, T]
        pair, chosen = pair_index(batch)  # [N], [N]
        lengths = mask.sum(-1).to(logp.dtype).clamp(min=1.0)  # |o_i| [N], in logp's dtype (float64 under verify)
        c = 1.0 / lengths if self.cfg.token_mean else torch.ones_like(lengths)  # c_i [N]
        h_pos, h_neg = sides(seq_sum(logp.detach() - batch.data["ref_logp"], mask) * c, pair, chosen)  # [P]
        u = h_pos - h_neg - 1.0 / (2 * self.cfg.tau)  # h − 1/(2τ) [P]
        self.record(ipo_loss=(u ** 2).mean(), margin=(h_pos - h_neg).mean(),
                    pair_accuracy=(h_pos > h_neg).float().mean())
        return (per_row(-2 * u, 2 * u, pair, chosen) * c).unsqueeze(-1) * mask  # [N, T]
