"""GSPO (Zheng et al. 2025, arXiv:2507.18071, eqs. 5–7, 10): the sequence's geometric-mean ratio, clipped per sequence.

Group Sequence Policy Optimization.

GRPO's data and group advantage (eq. 6, Â_i = (R_i − mean(R)) / std(R)), with the importance ratio and its clip
moved from the token to the sequence: the geometric mean of the completion's token ratios (eq. 7),

    s_i = (π_θ(o_i | q) / π_old(o_i | q))^{1/|o_i|} = exp( (1/|o_i|) Σ_t log r_{i,t} ),

clipped per sequence with a small band (eq. 5; §5.1 runs 3e-4 below and 4e-4 above):

    J = E[ (1/G) Σ_i min(s_i Â_i, clip(s_i, 1 − ε_low, 1 + ε_high) Â_i) ].

A sequence is either kept whole or clipped whole. GSPO-token (§4.3) gives each token its own advantage Â_{i,t}
with the same s_i; its GC is the one below with Â_{i,t} in place of Â_i, so a per-token advantage (an override of
`advantages`) runs it. No KL term by default (TRL's GSPO setting, β = 0); β > 0 adds GRPO's per-token term.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from methods.base import register
from methods.grpo import GRPO, clip_inactive, clip_sides, masked_mean


@register("gspo")
class GSPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GRPO.Config):
        clip_eps: float = 3e-4
        """ε_low: the sequence ratio's band starts at 1 − ε_low (GSPO §5.1: 3e-4)."""
        clip_eps_high: float | None = 4e-4
        """ε_high: the band ends at 1 + ε_high (GSPO §5.1: 4e-4); None = ε_low."""
        beta: float = 0.0
        """β: weight of GRPO's per-token KL term (0: none, as GSPO trains; its ratio r is the token's)."""

    @staticmethod
    def sequence_ratio(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """s_i = exp(Σ_t m_{i,t} log r_{i,t} / |o_i|) [N, 1] (eq. 7); 1 for an empty completion."""
        m = mask.to(log_ratio.dtype)
        return ((log_ratio * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)).exp()

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_i · s_i · 1[s_i inside the band on Â_i's side] − β c_{i,t}   (GSPO eqs. 5, 7 and 10)

        with s_i the sequence's geometric-mean ratio (eq. 7) and aggregation seq-mean-token-mean. Derivation:
        ∇s_i = s_i ∇ (1/|o_i|) Σ_t log π_θ(o_{i,t}) (π_old is fixed), so ∇ min(s_i Â_i, clip(s_i) Â_i) =
        Â_i s_i 1[not clipped] (1/|o_i|) Σ_t ∇log π_θ(o_{i,t}) (eq. 10): every token of o_i carries the same
        coefficient, and the engine's (1/N) Σ_i (1/|o_i|) Σ_t is eq. 5's (1/G) Σ_i. The clip bites for Â_i > 0 and
        s_i > 1 + ε_high, or Â_i < 0 and s_i < 1 − ε_low (or s_i > c with dual_clip c, as TRL's `delta` on the
        sequence ratio). The KL part is GRPO's per token (r = π_θ/π_old).
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        log_ratio = logp.detach() - self.old_logp(batch, logp)  # log r [N, T]
        s = self.sequence_ratio(log_ratio, mask)  # [N, 1]
        eps_high = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
        keep = clip_inactive(adv, s, cfg.clip_eps, eps_high, cfg.dual_clip)  # [N, T] bool (s over the tokens)
        gc = adv * s * keep - self.kl_coefficient(batch, logp, log_ratio.exp())  # [N, T]
        seq_adv = adv.sum(-1, keepdim=True)  # [N, 1]: the sign of Â_i (0 for a flat group)
        live = mask.sum(-1) > 0  # [N]: sequences with tokens
        clipped = ~clip_inactive(seq_adv, s, cfg.clip_eps, eps_high, cfg.dual_clip).squeeze(1) & live  # [N]
        self.record(clip_frac=masked_mean((~keep).float(), mask), seq_ratio_mean=masked_mean(s.squeeze(1), live),
                    seq_clip_frac=clipped.float().sum() / live.sum().clamp(min=1),
                    **clip_sides(adv, s, cfg.clip_eps, eps_high, mask))
        return gc
