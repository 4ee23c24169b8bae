"""SAPO (Gao et al. 2025, arXiv:2511.20347, §3): GRPO with the hard clip replaced by a temperature-controlled soft gate.

Soft Adaptive Policy Optimization (Qwen).

GRPO's data and group advantage, with the hard clip replaced by a smooth gate of the token ratio r_{i,t}:

    J = E[ (1/G) Σ_i (1/|o_i|) Σ_t f_{i,t}(r_{i,t}) Â_{i,t} ],
    f_{i,t}(x) = σ(τ_{i,t} (x − 1)) · 4/τ_{i,t},   τ_{i,t} = τ_pos if Â_{i,t} > 0 else τ_neg

The gate's slope at r = 1 is 1 for every τ (σ' (0) = 1/4), so on-policy SAPO's gradient is GRPO's; away from r = 1
it falls off smoothly, faster for larger τ, instead of dropping to 0 at the clip's edge. τ_neg > τ_pos damps
negative-advantage tokens more (their gradient raises the logits of many unsampled tokens). The defaults τ_pos 1.0,
τ_neg 1.05 are the paper's and TRL's; TRL's loss_type "sapo" picks τ_pos for Â > 0 and τ_neg otherwise, as here,
and averages per sequence then over sequences (seq-mean-token-mean). No KL term by default (β = 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.grpo import GRPO, GroupConfig, masked_mean


@register("sapo")
class SAPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GroupConfig):
        tau_pos: float = 1.0
        """τ_pos: the gate's temperature on tokens with Â > 0 (SAPO and TRL: 1.0); larger = a narrower trust region."""
        tau_neg: float = 1.05
        """τ_neg: the gate's temperature on tokens with Â ≤ 0 (SAPO and TRL: 1.05, above τ_pos)."""
        beta: float = 0.0
        """β: weight of GRPO's KL term (0: none)."""

        def validate(self) -> None:
            super().validate()
            for key in ("tau_pos", "tau_neg"):
                if not getattr(self, key) > 0:
                    raise UserError(f"methods.sapo.{key} must be > 0 (a temperature: the gate's slope), "
                                    f"got {getattr(self, key)}")

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_{i,t} · 4 r_{i,t} · p_{i,t} (1 − p_{i,t}) − β c_{i,t},  p = σ(τ_{i,t} (r_{i,t} − 1))  (SAPO §3)

        Derivation: f(r) = σ(τ(r − 1))·4/τ, so df/dr = 4 σ'(τ(r − 1)) = 4 p(1 − p), and ∇r = r ∇log π_θ:
        ∇[f(r) Â] = Â · 4 p(1 − p) · r · ∇log π_θ. The soft weight w = 4p(1 − p) is 1 at r = 1 and falls towards 0
        as r leaves 1 (the gate's nonlinear range), never exactly 0. The KL part is GRPO's (methods/grpo.py).
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # r [N, T]
        pos, neg = torch.full_like(ratio, cfg.tau_pos), torch.full_like(ratio, cfg.tau_neg)  # in r's dtype
        tau = torch.where(adv > 0, pos, neg)  # τ_{i,t} [N, T]
        p = torch.sigmoid(tau * (ratio - 1))  # [N, T]
        weight = 4 * p * (1 - p)  # f'(r) [N, T]: the soft gate's weight, 1 at r = 1
        gc = adv * weight * ratio - self.kl_coefficient(batch, logp, ratio)  # [N, T]
        self.record(gate_weight_mean=masked_mean(weight, mask),
                    gate_weight_min=weight.masked_fill(mask == 0, 1.0).min(),
                    gate_below_half_frac=masked_mean((weight < 0.5).float(), mask), ratio_mean=masked_mean(ratio, mask))
        return gc
