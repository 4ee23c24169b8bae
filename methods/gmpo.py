"""GMPO, geometric-mean policy optimisation (Zhao et al. 2025, arXiv:2507.20673, §3): the geometric mean of the
clipped token ratios, not their arithmetic mean.

GRPO averages the tokens' clipped surrogates r_{i,t} Â_i over a completion (an arithmetic mean), so one token with
an outlying ratio moves the whole sum. GMPO takes their geometric mean, which an outlier moves far less, and clips
each token's ratio in log space with a wider band (the paper: (e^{−0.4}, e^{0.4})):

    J = E[ (1/G) Σ_i sgn(Â_i) · | Π_t min(r_{i,t} Â_i, clip(r_{i,t}, e^{−ε_low}, e^{ε_high}) Â_i) |^{1/|o_i|} ]
      = E[ (1/G) Σ_i Â_i · exp( (1/|o_i|) Σ_t log r̃_{i,t} ) ]

with log r̃ = min(log r, clip(log r, −ε_low, ε_high)) where Â > 0 and the max where Â < 0 (the clip bites on the
side the advantage pushes, as PPO's). GRPO's data and group advantage; TRL's `trl.experimental.gmpo` and verl's
`geo_mean` loss; no KL term by default (TRL's optional one, β > 0, is a per-token k3 averaged per sequence: set
`kl_estimator: k3`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.clipping import check_clip_eps
from methods.base import register
from methods.grpo import GRPO, GroupConfig, masked_mean


def clipped_log_ratio(log_r: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float):
    """(log r̃ [N, T], kept [N, T] bool): the sign-aware clip in log space, and where log r̃ still depends on log r."""
    clamped = log_r.clamp(min=-eps_low, max=eps_high)
    out = torch.where(adv > 0, torch.minimum(log_r, clamped), torch.maximum(log_r, clamped))
    bites = ((adv > 0) & (log_r > eps_high)) | ((adv < 0) & (log_r < -eps_low))
    return out, ~bites


@register("gmpo")
class GMPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GroupConfig):
        clip_eps: float = 0.4
        """ε_low in log space: a token's ratio is clipped below at e^{−ε_low} (GMPO and TRL: 0.4)."""
        clip_eps_high: float | None = None
        """ε_high in log space: the ratio is clipped above at e^{ε_high}; None = ε_low."""
        beta: float = 0.0
        """β: weight of GRPO's per-token KL term (0: none, as GMPO)."""

        def validate(self) -> None:
            super().validate()
            check_clip_eps(self.clip_eps, self.clip_eps_high)

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_i · g_i · 1[token t's clip inactive] − β c_{i,t},  g_i = exp((1/|o_i|) Σ_t log r̃_{i,t})  (GMPO,
        Zhao et al. 2025, §3)

        Derivation: J_i = Â_i g_i, and ∇g_i = g_i (1/|o_i|) Σ_t ∇log r̃_{i,t}, where ∇log r̃ = ∇log π_θ on a token whose
        clip is inactive and 0 where it bites (Â > 0 and log r > ε_high, or Â < 0 and log r < −ε_low). So every kept
        token of o_i carries Â_i g_i, and the engine's (1/N) Σ_i (1/|o_i|) Σ_t (seq-mean-token-mean) is the objective's
        (1/G) Σ_i with the 1/|o_i| of the geometric mean. The KL part is GRPO's per token.
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        log_r = (logp.detach() - self.old_logp(batch, logp)) * mask  # log r [N, T]
        eps_high = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
        clipped, kept = clipped_log_ratio(log_r, adv, cfg.clip_eps, eps_high)  # [N, T]
        m = mask.to(log_r.dtype)
        g = ((clipped * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)).exp()  # g_i [N, 1]
        gc = adv * g * kept - self.kl_coefficient(batch, logp, log_r.exp())  # [N, T]
        self.record(clip_frac=masked_mean((~kept).float(), mask),
                    clip_low_frac=masked_mean(((adv < 0) & (log_r < -cfg.clip_eps)).float(), mask),
                    clip_high_frac=masked_mean(((adv > 0) & (log_r > eps_high)).float(), mask),
                    geo_ratio_mean=masked_mean(g.squeeze(1), (mask.sum(-1) > 0).to(mask.dtype)))
        return gc
