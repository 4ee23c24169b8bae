"""REINFORCE Leave-One-Out (Ahmadian et al. 2024, "Back to Basics", arXiv:2402.14740: the RLOO estimator).

The worked example of adding a method: a Config, a data source (`collect`), a GC (`coefficients`), built only
from the public API (`methods.base`) and the shared functions (`gcframe.advantages`, `gcframe.kl`). G samples
per prompt; each is baselined by the mean reward of the other G − 1, which is exactly unbiased (the seed's
"One Honest Dependence" remark) and needs neither a critic nor std scaling nor a clip:

    ∇J = (1/G) Σ_i [ r_i − (1/(G−1)) Σ_{j≠i} r_j ] ∇log π_θ(o_i | q)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import group_advantages
from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.kl import kl_grad_coefficient
from methods.base import Method, MethodConfig, register


@register("rloo")
class RLOO(Method):
    """Data: `ctx.rollout(B, G)`, G completions of each of B prompts from the live policy."""

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "seq-mean-token-sum"
        """The paper's unit is the whole completion: ∇log π(o|q) = Σ_t ∇log π(o_t|q, o_<t), averaged over o."""
        beta: float = 0.0
        """β: weight of a k3 KL(π_θ ‖ π_ref) term in the loss, as in GRPO (0 = none, no reference model held).
        The paper instead folds −β log(π_θ/π_ref) into the reward; here the reward stays clean, as in the seed."""

        def validate(self) -> None:
            super().validate()
            if self.beta < 0:
                raise UserError(f"beta must be >= 0, got {self.beta}")

    needs_groups = True
    rollout_groups = True
    stores = ("advantages",)

    def __init__(self, cfg: Config, ctx):
        super().__init__(cfg, ctx)
        self.uses_reference = cfg.beta > 0  # the engine computes log π_ref only when the KL term is on

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        return self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G, data: rewards [N]

    def prepare(self, batch: Batch) -> None:
        adv = group_advantages(batch.data["rewards"], batch.group_ids, scale_by_std=False, leave_one_out=True)
        batch.data["advantages"] = adv  # [N]: r_i − mean_{j≠i} r_j, sums to 0 within every group
        self.record(adv_abs_mean=adv.abs().mean())

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_i · r_{i,t} − β (1 − ρ_{i,t})   (Ahmadian et al. 2024, RLOO; the k3 term as in GRPO)

        r = π_θ/π_old is 1 on-policy (μ = 1, the paper's setting); when the engine reuses a batch it is the
        importance weight that keeps the estimate unbiased (no clip). ρ = π_ref/π_θ.
        """
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # [N, T]
        gc = batch.data["advantages"].unsqueeze(1) * ratio  # [N, 1] * [N, T]
        if self.cfg.beta > 0:
            gc = gc - self.cfg.beta * kl_grad_coefficient(batch.data["ref_logp"], logp, "k3")
        return gc
