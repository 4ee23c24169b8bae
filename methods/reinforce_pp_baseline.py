"""REINFORCE++ with baseline (Hu et al. 2025, §3.2): group mean subtracted, then normalised over the batch; k2 KL loss

REINFORCE++ (methods/reinforce_pp.py, version 9 of arXiv:2501.03262) with G completions per prompt, the group mean
reward subtracted before the normalisation over the batch, and the KL to π_ref as a k2 term in the loss instead of in
the reward:

    A'_{i,t}     = r_i − mean_group(r)                                   eq. 6
    A^norm_{i,t} = (A'_{i,t} − mean_batch(A')) / std_batch(A')           eq. 7 (over every token of the batch)
    L            = L_PPO(A^norm) − λ E[½ (log π_θ/π_ref)²]               eq. 8

Only the defaults differ from reinforce_pp (grouped, group_baseline, beta 0, kl_loss_coef > 0), so the run folder's
config.yaml shows every setting. A group of equal rewards has A' = 0, but after the batch normalisation its tokens
carry −mean_batch(A')/std_batch(A'), as in the paper's eq. 7 and verl. verl's reinforce_plus_plus_baseline
(verl/trainer/ppo/core_algos.py) subtracts the group mean from the sum of its per-token rewards (the KL penalties
included when folded in) and broadcasts it; here with beta > 0 the KL part is eq. 4's return, the KL still to come.
"""
from __future__ import annotations

from dataclasses import dataclass

from methods.base import register
from methods.reinforce_pp import ReinforcePP


@register("reinforce_pp_baseline")
class ReinforcePPBaseline(ReinforcePP):
    """Data: `ctx.rollout(B, G)`, G completions of each of B prompts from the live policy."""

    needs_groups = True
    rollout_groups = True

    @dataclass
    class Config(ReinforcePP.Config):
        beta: float = 0.0
        """β of eq. 4: a k1 penalty folded into the reward, as in reinforce_pp. 0: the paper's baseline variant keeps
        the reward clean and puts the KL in the loss (kl_loss_coef)."""
        kl_loss_coef: float = 0.04
        """λ of eq. 8: weight of the k2 term ½(log π_θ/π_ref)² in the loss (grpo's default β)."""
        group_baseline: bool = True
        """Eq. 6: subtract the mean reward of the completion's group before the batch normalisation."""
        grouped: bool = True
        """G completions of each of B prompts (ctx.rollout(B, G)): the group the baseline is the mean of."""
