"""Kimi k1.5's policy mirror descent (Kimi Team 2025, arXiv:2501.12599, §2.3.2, eqs. 3–4): a quadratic penalty on
the log-ratio to π_old in place of a clip.

Each iteration solves a KL-regularised problem relative to the sampling policy π_old; its optimum satisfies
r(x, y) − τ log Z = τ log(π*/π_old), so the report regresses one onto the other with a squared loss (eq. 3),
τ log Z estimated by the mean reward r̄ of the k samples of the prompt:

    L(θ) = E_x E_{y ~ π_old} [ (r(x, y) − r̄ − τ log(π_θ(y|x) / π_old(y|x)))² ]

Its gradient (eq. 4, divided by 2τ) is a policy gradient with a group-mean baseline plus the gradient of a
quadratic penalty −(τ/2)(log π_θ/π_old)²: nothing is clipped; a sequence whose probability moved far from π_old is
pulled back in proportion to how far. No KL to π_ref, no std scaling.

`level: token` applies the same penalty per token, −(τ/2)(log r_{i,t})² beside the ratio-weighted advantage
Â r_{i,t}: the form prime-rl's default loss and ART run (Kimi K2.5's; their kl_tau is τ/2), there with a trust-region
mask, here without one (methods/dppo.py has the mask).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.grpo import GRPO, GroupConfig, masked_mean


@register("kimi")
class Kimi(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: k = G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GroupConfig):
        aggregation: str = "seq-mean-token-sum"
        """Eq. 3's mean over the k samples of a sequence-level loss: (1/N) Σ_i Σ_t (log π(y|x) is a sum over tokens)."""
        scale_by_std: bool = False
        """Eq. 3 centres the reward on r̄ (τ log Z) and does not divide by the std."""
        beta: float = 0.0
        """β: weight of GRPO's KL term to π_ref (0: none, as the report; the penalty is to π_old)."""
        tau: float = 0.1
        """τ: the mirror-descent step's KL weight, the penalty −(τ/2)(log π_θ/π_old)² (the report gives no value;
        prime-rl's token-level kl_tau 1e-3 is τ/2 = 1e-3). > 0."""
        level: str = "sequence"
        """sequence: eq. 3, one log-ratio per completion, Σ_t log r_{i,t}; token: the penalty on each token's log r_{i,t}
        beside Â r_{i,t} (prime-rl, ART)."""

        def validate(self) -> None:
            super().validate()
            if not self.tau > 0:
                raise UserError(f"tau (τ, the quadratic penalty's weight) must be > 0, got {self.tau}")
            if self.level not in ("sequence", "token"):
                raise UserError(f"level must be 'sequence' (Kimi k1.5's eq. 3) or 'token', got {self.level!r}")
            if self.level == "sequence" and self.aggregation != "seq-mean-token-sum":
                raise UserError(f"level 'sequence' is eq. 3's mean over the samples of one loss per completion: its "
                                f"aggregation is seq-mean-token-sum, got {self.aggregation!r} (level 'token' takes any)")

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_i − τ ℓ_i  (level sequence),  Â_i r_{i,t} − τ log r_{i,t}  (level token);  minus β c_{i,t}

        with Â_i = r_i − r̄ (the group mean, eq. 3's τ log Z), ℓ_i = Σ_t log(π_θ/π_old)(o_{i,t}) and
        r_{i,t} = π_θ/π_old. Derivation (Kimi k1.5 eqs. 3–4): ∇(1/2τ)(Â − τℓ)² = −(Â − τℓ)∇ℓ and ∇ℓ = Σ_t ∇log π_θ, so
        every token of o_i carries Â − τℓ and the engine's (1/N) Σ_i Σ_t (seq-mean-token-sum) is eq. 3's mean over the
        samples. Per token: ∇[Â r − (τ/2)(log r)²] = (Â r − τ log r)∇log π_θ. On-policy (π_θ = π_old) both are Â.
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        log_r = (logp.detach() - self.old_logp(batch, logp)) * mask  # log r [N, T]
        if cfg.level == "sequence":
            ell = log_r.sum(-1, keepdim=True)  # ℓ_i [N, 1]
            gc = (adv - cfg.tau * ell) * mask  # [N, T]
            self.record(seq_log_ratio_abs=masked_mean(ell.squeeze(1).abs(), (mask.sum(-1) > 0).to(mask.dtype)))
        else:
            gc = adv * log_r.exp() - cfg.tau * log_r  # [N, T]
        self.record(log_ratio_sq=masked_mean(log_r ** 2, mask))
        return gc - self.kl_coefficient(batch, logp, log_r.exp())
