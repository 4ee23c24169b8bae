"""Group Policy Gradient (Chu et al. 2025, arXiv:2504.02546): −(r − group mean)·log π, rescaled by B / (B − M)

"GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning", §2.2: the policy gradient itself, with
no surrogate, no ratio, no clip, no KL and no reference model; the advantage is the reward centred on its group's
mean, and the gradient is rescaled by the share of groups that carry a signal:

    J_GPG = E[ (1/Σ_i |o_i|) Σ_i Σ_t −log π_θ(o_{i,t} | q, o_{i,<t}) · Â_{i,t} ]      eq. 5 (minimised)
    Â_{i,t} = (r_i − mean({r_j}_{j=1..G})) / F_norm,   F_norm = 1                    §2.2
    ĝ = α g,   α = B / (B − M)                                                        eq. 7

B is the number of groups of the batch and M the number whose rewards are all equal (all right or all wrong: Â = 0,
so they add nothing to the sum but count in its normaliser); α rescales the gradient to the mean over the groups
that carry a signal. The paper's threshold β_th, which draws more groups until a share of them carries a signal,
is a data source and is not part of this file (train.dynamic_sampling is the project's: it drops such groups).

Conventions: B and M are counted over the global batch (every process), as in the authors' trainer
(AMAP-ML/GPG, open-r1/src/open_r1/gpg_trainer.py, `inverse_alpha` = valid groups / groups). verl's gpg advantage
(verl/trainer/ppo/core_algos.py) instead sets α = batch size / number of completions with a non-zero reward, which
for 0/1 rewards is B·G / #right, not B / (B − M). A batch without a group that carries a signal has GC = 0 and
α = 1 (logged as gpg_alpha).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import group_advantages, zero_variance
from gcframe.batch import Batch
from methods.base import Method, MethodConfig, register


@register("gpg")
class GPG(Method):
    """Data: `ctx.rollout(B, G)`, G completions of each of B prompts from the live policy."""

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "token-mean"
        """Eq. 5: 1/Σ_i |o_i|, the mean over every token of the batch."""
        scale_by_std: bool = False
        """F_norm = std of the group's rewards instead of 1 (the paper's Table 1 ablation; 1 is GPG's choice)."""
        rescale: bool = True
        """α = B / (B − M) (eq. 7, accurate gradient estimation); false: α = 1 (the paper's ablation without it)."""

    needs_groups = True
    rollout_groups = True
    needs_old_logp = False  # no ratio π_θ/π_old in its GC

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        return self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G, data: rewards [N]

    @torch.no_grad()
    def prepare(self, batch: Batch) -> None:
        rewards, gids = batch.data["rewards"], batch.group_ids
        adv = group_advantages(rewards, gids, scale_by_std=self.cfg.scale_by_std)  # Â_i [N], 0 on flat groups
        flat = zero_variance(rewards.double(), gids)  # [N] 1 where the sequence's group has equal rewards
        counts = torch.tensor([gids.unique().numel(), gids[flat].unique().numel()], dtype=torch.float64)
        counts = self.ctx.all_sum(counts.to(rewards.device))  # B groups, M of them flat: the global batch's
        B, M = float(counts[0]), float(counts[1])
        alpha = B / (B - M) if self.cfg.rescale and B > M else 1.0
        batch.data["advantages"] = alpha * adv  # α Â_i [N]
        self.record(gpg_alpha=alpha, zero_var_frac=M / max(B, 1.0))

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = α · Â_i = (B / (B − M)) · (r_i − mean_group(r))   (Chu et al. 2025, eqs. 5 and 7)

        The loss of eq. 5 is −Â log π itself (no ratio, no clip): ∇(−α Â log π_θ) = −α Â ∇log π_θ, which is the
        engine's −GC ∇log π_θ with GC = α Â. Also when the engine reuses a batch (μ > 1): the authors' trainer keeps
        −Â log π_θ there (its ratio lines are commented out), an estimate that is then off-policy.
        """
        return batch.data["advantages"].unsqueeze(1) * batch.completion_mask  # [N, 1] * [N, T]
