"""Dr. GRPO (Liu et al. 2025, arXiv:2503.20783, §3.2): GRPO without std scaling and 1/|o_i|, a constant normaliser.

"GRPO Done Right", from "Understanding R1-Zero-Like Training".

GRPO's objective with its two normalisations removed (the terms the paper's Figure 1 marks in red): no 1/|o_i|
per completion, which rewards long wrong answers (their per-token penalty shrinks with length), and no division by
the group's reward std, which weights too-easy and too-hard questions up. What remains is the unbiased policy
gradient with a group-mean baseline, normalised by a constant:

    J = E[ (1/G) Σ_i (1/L_max) Σ_t min(r_{i,t} Â_i, clip(r_{i,t}, 1−ε, 1+ε) Â_i) ],   Â_i = R_i − mean(R)

L_max is train.max_new_tokens (TRL's loss_type "dr_grpo" divides by max_completion_length, the same constant).
The paper's recipe (its repository's training section, as TRL's paper index records it) runs without a KL term:
β = 0. Only the options differ from GRPO, so Dr. GRPO is GRPO with other defaults, and its run folder's
config.yaml lists them.
"""
from __future__ import annotations

from dataclasses import dataclass

from methods.base import register
from methods.grpo import GRPO


@register("dr_grpo")
class DrGRPO(GRPO):
    """Data: GRPO's, `ctx.rollout(B, G)`: G completions of each of B prompts from π_old = the live policy."""

    @dataclass
    class Config(GRPO.Config):
        aggregation: str = "seq-mean-token-sum-norm"
        """(1/N) Σ_i Σ_t x_{i,t} / L_max with L_max = train.max_new_tokens: a constant in place of GRPO's 1/|o_i|."""
        scale_by_std: bool = False
        """Dr. GRPO centres the reward on the group mean and does not divide by the group's std."""
        beta: float = 0.0
        """β: the KL(π_θ ‖ π_ref) term's weight (0: none, the paper's recipe; any β > 0 adds GRPO's KL term)."""
