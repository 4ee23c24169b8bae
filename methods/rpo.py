"""RPO, DPO plus the NLL of the chosen completion (Pang et al. 2024, "Iterative Reasoning Preference Optimization",
arXiv:2404.19733, §2, eq. 1).

DPO alone can lower the likelihood of the chosen completion as long as the rejected one falls faster; on reasoning
tasks that loses accuracy. Pang et al. add the chosen completion's length-normalised negative log-likelihood:

    L_RPO = −log σ(β(Δ⁺ − Δ⁻)) − α · log π_θ(o⁺|q) / |o⁺|,     Δ = Σ_t log π_θ(o_t)/π_ref(o_t)

α = 1 in the paper. TRL runs it as DPOConfig(loss_type=["sigmoid", "sft"], loss_weights=[1, α]), whose "sft" term is
the mean over all the batch's chosen tokens (the eq. 1 form when the chosen completions have one length; else the
longer ones weigh more), NeMo-RL and OpenRLHF as DPO with an NLL coefficient. Data, reference and normaliser are
DPO's (methods/dpo.py): P = B·G/2 pairs, engine loss = the pair mean / 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.dpo import DPO, DPOConfig, pair_index, per_row, seq_sum, sides


@dataclass
class RPOConfig(DPOConfig):
    alpha: float = 1.0
    """α: weight of the chosen completion's length-normalised NLL (Pang et al. 2024: 1); 0 is DPO."""

    method: ClassVar[str] = "rpo"

    def validate(self) -> None:
        super().validate()
        if not self.alpha >= 0:
            raise UserError(f"methods.rpo.alpha must be >= 0, got {self.alpha}")


@register("rpo")
class RPO(DPO):
    """Offline pairs from the SFT base's preference set; reference π_ref = the SFT base (as dpo)."""

    Config = RPOConfig

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = +β·σ(β(Δ⁻ − Δ⁺)) + α/|o⁺| on every o⁺ token, −β·σ(β(Δ⁻ − Δ⁺)) on every o⁻ token   (Pang et al. 2024,
        eq. 1)

        Derivation: the DPO part is DPO's (methods/dpo.py); ∂(−α log π_θ(o⁺|q)/|o⁺|)/∂log π_θ(o⁺_t) = −α/|o⁺| on each
        token of o⁺, so the NLL adds α/|o⁺| to the chosen tokens' coefficient. Under DPO's seq-mean-token-sum over the
        2P sequences the engine's loss is the pair mean of eq. 1 divided by 2, as DPO's.
        """
        mask = batch.completion_mask  # [N, T]
        pair, chosen = pair_index(batch)  # [N], [N]
        d_pos, d_neg = sides(seq_sum(logp.detach() - batch.data["ref_logp"], mask), pair, chosen)  # Δ⁺, Δ⁻ [P]
        lengths = mask.sum(-1).to(logp.dtype).clamp(min=1.0)  # |o_i| [N]
        a_pos, _ = sides(seq_sum(logp.detach(), mask) / lengths, pair, chosen)  # log π_θ(o⁺|q)/|o⁺| [P]
        z = self.cfg.beta * (d_pos - d_neg)  # [P]
        w = self.cfg.beta * torch.sigmoid(-z)  # [P]
        self.record(dpo_loss=-F.logsigmoid(z).mean(), nll_loss=-a_pos.mean(), reward_margin=z.mean(),
                    pair_accuracy=(z > 0).float().mean(), rpo_loss=(-F.logsigmoid(z) - self.cfg.alpha * a_pos).mean())
        return (per_row(w, -w, pair, chosen) + self.cfg.alpha * chosen / lengths).unsqueeze(-1) * mask  # [N, T]
