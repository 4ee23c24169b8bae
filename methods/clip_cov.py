"""Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
arXiv:2505.22617, §4): detach the gradient of a few tokens whose advantage and log-probability covary most.

The paper shows that the policy's entropy falls, step by step, by the covariance between a token's log-probability
and its advantage: confident tokens that are rewarded drive the collapse. Clip-Cov takes a small random share of the
tokens whose centred covariance

    Cov_{i,t} = (Â_{i,t} − mean Â) · (log π(o_{i,t}) − mean log π)          (means over the batch's tokens)

lies in [ω_low, ω_high], and removes their gradient; every other token keeps PPO's clipped surrogate:

    J = E[ (1/Σ|o_i|) Σ_{i,t} (1 − I_{i,t}) min(r_{i,t} Â_{i,t}, clip(r_{i,t}, 1 − ε, 1 + ε) Â_{i,t}) + I_{i,t} sg(·) ],
    I: k = max(⌊ρ · Σ|o_i|⌋, 1) tokens drawn at random among those with ω_low < Cov < ω_high

(verl's and SkyRL's `clip_cov`: ρ = 2e-4, ω = [1, 5]). Here the tokens are chosen once per collected batch, in
`prepare`, from log π_old over the whole batch (every process's tokens for the means), with a seeded generator; verl
chooses per micro-batch from the current log π, which is the same on a batch's first pass but depends on how the
batch is split. verl also skips tokens its clip already zeroes when it draws; here a drawn token that the clip also
zeroes simply stays zero. methods/kl_cov.py is the paper's other method, on the same covariance.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch
from gcframe.engine import token_logprobs
from gcframe.errors import UserError
from gcframe.modeling import evaluating
from methods.base import register
from methods.grpo import GRPO, clip_inactive, clip_sides, masked_mean


def token_covariance(adv: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor, all_sum=None) -> torch.Tensor:
    """Cov_{i,t} = (Â_{i,t} − mean Â)(log π_{i,t} − mean log π) [N, T], the means over the masked tokens (of every
    process with `all_sum`, Context.all_sum); 0 on padding."""
    m = mask.to(logp.dtype)
    sums = torch.stack([m.sum(), (adv * m).sum(), (logp * m).sum()])
    if all_sum is not None:
        sums = all_sum(sums)
    n = sums[0].clamp(min=1)
    return (adv - sums[1] / n) * (logp - sums[2] / n) * m


def selection_count(ratio: float, mask: torch.Tensor) -> int:
    """k = max(⌊ratio · tokens⌋, 1): how many of this process's tokens a covariance method selects."""
    return max(int(ratio * float(mask.sum())), 1)


def old_logp_for_selection(method, batch: Batch) -> torch.Tensor:
    """log π_old [N, T], the log-probability the covariance is measured with: stored by the engine when the batch is
    reused, else computed here once (no grad) and stored, as PPO's prepare does."""
    if "old_logp" not in batch.data:
        with evaluating(method.ctx.policy):
            batch.data["old_logp"] = token_logprobs(method.ctx.policy, batch, method.ctx.cfg.train.temperature)
    return batch.data["old_logp"]


@register("clip_cov")
class ClipCov(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    stores = ("advantages", "cov_key", "cov_selected")

    @dataclass
    class Config(GRPO.Config):
        aggregation: str = "token-mean"
        """verl's and SkyRL's clip_cov default: every token of the batch weighs the same."""
        beta: float = 0.0
        """β: weight of GRPO's KL term (0: none, as the paper)."""
        clip_cov_ratio: float = 2e-4
        """ρ: the share of the batch's tokens whose gradient is detached (verl, SkyRL: 2e-4); at least one token."""
        clip_cov_lb: float = 1.0
        """ω_low: a token is a candidate when its covariance exceeds this (verl, SkyRL: 1)."""
        clip_cov_ub: float = 5.0
        """ω_high: ... and stays below this (verl, SkyRL: 5)."""

        def validate(self) -> None:
            super().validate()
            if not 0 < self.clip_cov_ratio <= 1:
                raise UserError(f"clip_cov_ratio must be in (0, 1], got {self.clip_cov_ratio}")
            if not self.clip_cov_lb < self.clip_cov_ub:
                raise UserError(f"clip_cov_lb must be below clip_cov_ub, got {self.clip_cov_lb}, {self.clip_cov_ub}")

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        seed = getattr(getattr(ctx, "cfg", None), "seed", 0)
        self.gen = torch.Generator().manual_seed(int(seed) + 7919)  # its own stream: the draw of the detached tokens

    def state_dict(self) -> dict:  # checkpointed: a resumed run draws the same tokens
        return {"cov_generator": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.gen.set_state(state["cov_generator"])

    def prepare(self, batch: Batch) -> None:
        """GRPO's advantages, then the detached tokens I [N, T] (`cov_selected`) and the random keys that drew them
        (`cov_key` [N, T], uniform: the k candidates with the smallest keys are a uniform draw of k of them)."""
        super().prepare(batch)
        cfg, mask = self.cfg, batch.completion_mask
        cov = token_covariance(batch.data["advantages"], old_logp_for_selection(self, batch), mask,
                               getattr(self.ctx, "all_sum", None))  # [N, T]
        key = torch.rand(mask.shape, generator=self.gen, dtype=torch.float64).to(mask.device)  # [N, T]
        candidate = (mask > 0) & (cov > cfg.clip_cov_lb) & (cov < cfg.clip_cov_ub)
        k = min(selection_count(cfg.clip_cov_ratio, mask), int(candidate.sum()))
        chosen = torch.zeros_like(mask)
        if k:
            flat = torch.where(candidate, key, torch.full_like(key, 2.0)).flatten()  # non-candidates last
            chosen.view(-1)[flat.topk(k, largest=False).indices] = 1.0
        batch.data["cov_key"], batch.data["cov_selected"] = key.to(mask.dtype), chosen
        self.record(cov_candidate_frac=masked_mean(candidate.float(), mask), cov_selected_frac=masked_mean(chosen, mask))

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = (1 − I_{i,t}) · Â_{i,t} · r_{i,t} · 1[clip inactive] − β c_{i,t}   (Cui et al. 2025, §4, Clip-Cov)

        with I the detached tokens drawn in `prepare`. Derivation: a detached token's surrogate sg(·) has gradient 0;
        every other token's is PPO's clipped surrogate, whose gradient is Â r ∇log π_θ where the clip is inactive
        (methods/grpo.py). The KL part c is GRPO's on every token (β = 0 by default: the paper has none).
        """
        cfg, mask = self.cfg, batch.completion_mask
        adv, detached = batch.data["advantages"], batch.data["cov_selected"]  # [N, T]
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # r [N, T]
        eps_high = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
        active = clip_inactive(adv, ratio, cfg.clip_eps, eps_high, cfg.dual_clip)  # [N, T] bool
        gc = adv * ratio * active * (1 - detached) - self.kl_coefficient(batch, logp, ratio)  # [N, T]
        self.record(clip_frac=masked_mean((~active).float(), mask), ratio_mean=masked_mean(ratio, mask),
                    **clip_sides(adv, ratio, cfg.clip_eps, eps_high, mask))
        return gc
