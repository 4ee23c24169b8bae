"""Group Relative Policy Optimization (the seed chapter, Algorithm 1; DeepSeekMath §4.1, eq. 3).

G completions per prompt from π_old; the group mean replaces the critic's baseline; the clipped PPO surrogate;
a KL to the frozen reference π_ref inside the loss (not folded into the reward):

    J = E[ (1/G) Σ_i (1/|o_i|) Σ_t  min(r_{i,t} Â_{i,t}, clip(r_{i,t}, 1−ε, 1+ε) Â_{i,t}) − β KL̂_{i,t} ]

KL̂ is `kl_estimator`. DeepSeekMath's k3 differentiated as a loss term regularises the forward KL(π_ref‖π_θ), not
the KL(π_θ‖π_ref) the objective writes (gcframe.kl; measured in experiments/estimators.py); the default k3_ratio
= r·k3 regularises KL(π_θ‖π_ref), also after μ > 1 updates.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import group_advantages
from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.clipping import check_clip_eps, check_dual_clip, clip_inactive  # noqa: F401 (clip_inactive: re-exported)
from gcframe.kl import LOSS_ESTIMATORS, kl_estimate, kl_grad_coefficient
from methods.base import Method, MethodConfig, register


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over mask == 1 (0 for an empty mask)."""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1)


def flat_group_frac(adv: torch.Tensor, group_ids: torch.Tensor) -> float:
    """Fraction of groups whose advantages are all 0: zero reward variance, no learning signal."""
    _, inv = torch.unique(group_ids, return_inverse=True)
    live = torch.zeros(int(inv.max()) + 1, device=adv.device).index_add_(0, inv, (adv != 0).any(-1).float())
    return float((live == 0).float().mean())


def clip_sides(adv: torch.Tensor, ratio: torch.Tensor, eps_low: float, eps_high: float, mask: torch.Tensor) -> dict:
    """Where the clip bites, by side, as fractions of the tokens: clip_low_frac (Â < 0, r < 1−ε_low) and
    clip_high_frac (Â > 0, r > 1+ε_high); `ratio` may be [N, 1] (one per sequence, GSPO)."""
    low = ((adv < 0) & (ratio < 1 - eps_low)).float().expand_as(mask)  # [N, T]
    high = ((adv > 0) & (ratio > 1 + eps_high)).float().expand_as(mask)
    return {"clip_low_frac": masked_mean(low, mask), "clip_high_frac": masked_mean(high, mask)}


@dataclass
class GroupConfig(MethodConfig):
    """The options of every GRPO-family method: the group advantage and the KL term (the clip is GRPO's own)."""

    aggregation: str = "seq-mean-token-mean"
    """The seed's objective: mean over sequences of each sequence's token mean (1/G Σ_i 1/|o_i| Σ_t)."""
    scale_by_std: bool = True
    """Divide the centred reward by the group std (the seed: a heuristic, not part of the baseline)."""
    leave_one_out: bool = False
    """Centre on the mean of the other G−1 rewards (exactly unbiased, the seed's remark) instead of all G."""
    beta: float = 0.04
    """β: weight of the KL(π_θ ‖ π_ref) term in the loss (DeepSeekMath uses 0.04)."""
    kl_estimator: str = "k3_ratio"
    """Per-token KL term in the loss (ρ = π_ref/π_θ, r = π_θ/π_old) and the divergence its gradient regularises:
    k3_ratio = r·(ρ − log ρ − 1) -> KL(π_θ‖π_ref), on- and off-policy (the default, chosen by
    experiments/estimators.py); k2 = ½(log ρ)² -> KL(π_θ‖π_ref) on-policy only; k3 = ρ − log ρ − 1 (what
    DeepSeekMath ran, the seed's) -> KL(π_ref‖π_θ), the forward KL. k1 = −log ρ is refused: E[∇k1] = 0."""

    def validate(self) -> None:
        super().validate()
        if self.beta < 0:
            raise UserError(f"beta must be >= 0, got {self.beta}")
        if self.kl_estimator == "k1":
            raise UserError("kl_estimator 'k1' in the loss has an expected gradient of 0 (E[∇log π_θ] = 0), so it "
                            "regularises nothing: use k3_ratio (KL(π_θ‖π_ref)), k2, or k3 (DeepSeekMath's)")
        if self.kl_estimator not in LOSS_ESTIMATORS:
            raise UserError(f"kl_estimator must be one of {', '.join(LOSS_ESTIMATORS)}, "
                            f"got '{self.kl_estimator}'")


@register("grpo")
class GRPO(Method):
    """Data: `ctx.rollout(B, G)`, G completions of each of B prompts sampled from π_old = the live policy."""

    @dataclass
    class Config(GroupConfig):
        clip_eps: float = 0.2
        """ε: the ratio's clip band [1−ε, 1+ε] (the lower edge when clip_eps_high is set)."""
        clip_eps_high: float | None = None
        """Upper edge ε_high of an asymmetric band [1−ε, 1+ε_high] (DAPO's clip-higher); None = symmetric."""
        dual_clip: float | None = None
        """c of dual-clip PPO (Ye et al. 2020, §3.3; TRL's `delta` when it exceeds 1 + ε_high, verl's clip_ratio_c):
        a token with Â < 0 whose ratio passed c stops pushing (its surrogate is floored at c·Â). None: off; > 1."""

        def validate(self) -> None:
            super().validate()
            check_clip_eps(self.clip_eps, self.clip_eps_high)
            check_dual_clip(self.dual_clip)

    uses_reference = True
    needs_groups = True
    rollout_groups = True
    stores = ("advantages",)

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        return self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G, data: rewards [N], correct [N]

    def advantages(self, batch: Batch) -> torch.Tensor:
        """Outcome supervision: Â_{i,t} = (r_i − mean(r)) / std(r) broadcast to every token of o_i -> [N, T]."""
        adv = group_advantages(batch.data["rewards"], batch.group_ids, self.cfg.scale_by_std,
                               self.cfg.leave_one_out)  # [N], 0 for zero-variance groups
        return adv.unsqueeze(1) * batch.completion_mask  # [N, T]

    def prepare(self, batch: Batch) -> None:
        adv = self.advantages(batch)  # [N, T], fixed for the μ epochs over this batch
        batch.data["advantages"] = adv
        mask = batch.completion_mask
        self.record(zero_var_frac=flat_group_frac(adv, batch.group_ids), adv_mean=masked_mean(adv, mask),
                    adv_std=masked_mean((adv - masked_mean(adv, mask)) ** 2, mask).sqrt())

    def kl_coefficient(self, batch: Batch, logp: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor | float:
        """β · c_{i,t} [N, T], c the KL term's gradient coefficient (gcframe.kl; r = `ratio` = π_θ/π_old per token),
        or 0 when β = 0; records kl_k3 to π_ref whenever the engine filled ref_logp = log π_ref (uses_reference)."""
        if "ref_logp" in batch.data:
            self.record(kl_k3=masked_mean(kl_estimate(batch.data["ref_logp"], logp.detach(), "k3"),
                                          batch.completion_mask))
        if self.cfg.beta == 0:
            return 0.0
        return self.cfg.beta * kl_grad_coefficient(batch.data["ref_logp"], logp, self.cfg.kl_estimator, ratio)

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_{i,t} · r_{i,t} · 1[clip inactive] − β · c_{i,t}   (DeepSeekMath eq. 3 / §5.2.1)

        with r = π_θ/π_old and c the KL term's gradient coefficient (gcframe.kl, ρ = π_ref/π_θ): c = −r·log ρ for
        k3_ratio, −log ρ for k2, 1 − ρ for k3 (the KL part is then β(ρ − 1)). Derivation: ∇ of
        −[min(rÂ, clip(r)Â) − β KL̂] is −[Â r 1[not clipped] − β c] ∇log π_θ, since ∇r = r ∇log π_θ,
        ∇k3 = (1 − ρ)∇log π_θ, ∇k2 = −log ρ ∇log π_θ and ∇(r·k3) = r(k3 + 1 − ρ)∇log π_θ = −r log ρ ∇log π_θ.
        With dual_clip c (Ye et al. 2020, §3.3) the surrogate of a token with Â < 0 is max(min(rÂ, clip(r)Â), cÂ),
        constant once r > c: 1[clip inactive] is 0 there too.
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # r = π_θ/π_old [N, T]
        eps_high = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
        active = clip_inactive(adv, ratio, cfg.clip_eps, eps_high, cfg.dual_clip)  # [N, T] bool
        gc = adv * ratio * active - self.kl_coefficient(batch, logp, ratio)  # [N, T]
        self.record(clip_frac=masked_mean((~active).float(), mask), ratio_mean=masked_mean(ratio, mask),
                    **clip_sides(adv, ratio, cfg.clip_eps, eps_high, mask))
        if cfg.dual_clip is not None:  # the tokens only the floor c·Â stopped (Â < 0, r > c)
            self.record(dual_clip_frac=masked_mean(((adv < 0) & (ratio > cfg.dual_clip)).float(), mask))
        return gc
