"""REINFORCE++ (Hu et al. 2025, arXiv:2501.03262): PPO's clip, no critic, KL-penalised returns normalised over the batch

Version 9 of the paper, §3.1. The advantage is the return of the outcome reward with the KL to π_ref folded into the
per-token reward, normalised over the whole batch instead of per prompt:

    A_{i,t}      = r_i − β Σ_{t' ≥ t} log(π_old/π_ref)(o_{i,t'})              eq. 4 (k1 per token, γ = 1)
    A^norm_{i,t} = (A_{i,t} − mean_batch(A)) / std_batch(A)                   eq. 5 (over every token of the batch)
    J            = E[ (1/|o|) Σ_t min(s_t A^norm_t, clip(s_t, 1 − ε, 1 + ε) A^norm_t) ]   eq. 1, s_t = π_θ/π_old

Algorithm 1 draws one completion per prompt (k = 1, here B·G prompts: the sequences every method gets per step);
`grouped: true` draws G per prompt of B prompts (the paper's §4.2) with the same global normalisation. The variant
with a group baseline (eqs. 6 to 8) is `reinforce_pp_baseline` (methods/reinforce_pp_baseline.py).

Conventions: the batch statistics are those of the global batch over processes (gcframe.advantages.whiten), and ε
sits under the square root, (A − mean)·(var + 1e-8)^(−1/2) with the unbiased variance, as in verl's masked_whiten and
OpenRLHF (the paper writes std + ε). verl's reinforce_plus_plus (verl/trainer/ppo/core_algos.py) computes the same
returns from its per-token rewards (KL folded in with use_kl_in_reward) and whitens them the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import group_baseline, kl_penalised_returns, whiten, zero_variance
from gcframe.batch import Batch
from gcframe.engine import token_logprobs
from gcframe.errors import UserError
from gcframe.kl import k1, kl_grad_coefficient
from gcframe.modeling import evaluating
from methods.base import Method, MethodConfig, register
from methods.grpo import clip_inactive, clip_sides, masked_mean


def sampling_logp(method: Method, batch: Batch) -> torch.Tensor:
    """log π_old [N, T] of the sampled tokens: the engine's when it reuses the batch (μ > 1); at μ = 1 it stores none
    (π_θ has not moved), so the forward it skipped is run now and stored, and the ratio then uses it too (as PPO)."""
    if "old_logp" not in batch.data:
        with evaluating(method.ctx.policy):
            batch.data["old_logp"] = token_logprobs(method.ctx.policy, batch, method.ctx.cfg.train.temperature)
    return batch.data["old_logp"]


def check_grouped(cfg, label: str, default: bool) -> None:
    """Before a run, for a method whose `grouped` option chooses its data source: G >= 2 completions per prompt when
    grouped, and train.dynamic_sampling (which filters groups) only then (a one-line UserError)."""
    from gcframe.config import label_options

    name, options, _ = label_options(cfg.methods, label)
    if options.get("grouped", default) and cfg.train.group_size < 2:
        raise UserError(f"method '{label}' with grouped: true draws train.group_size completions per prompt: "
                        f"train.group_size must be >= 2, got {cfg.train.group_size}")
    if not options.get("grouped", default) and cfg.train.dynamic_sampling:
        raise UserError(f"train.dynamic_sampling drops prompt groups without reward variance, but '{label}' draws one "
                        f"completion per prompt (grouped: false): set methods.{name}.grouped: true or turn "
                        f"dynamic_sampling off for it (methods: {{{label}: {{train: {{dynamic_sampling: false}}}}}})")


@register("reinforce_pp")
class ReinforcePP(Method):
    """Data: `ctx.rollout(B·G, 1)`, one completion of each of B·G prompts from the live policy (Algorithm 1, k = 1);
    with `grouped: true`, `ctx.rollout(B, G)`."""

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "seq-mean-token-mean"
        """Eq. 1: the mean over completions of each completion's token mean (1/|o|) Σ_t."""
        clip_eps: float = 0.2
        """ε: the ratio s = π_θ/π_old is clipped to [1 − ε, 1 + ε] in the surrogate (eq. 1)."""
        beta: float = 0.01
        """β of eq. 4: the k1 penalty log(π_old/π_ref) folded into every token's reward (its sum over the tokens still
        to come is subtracted from the return). 0 = no KL in the reward."""
        kl_loss_coef: float = 0.0
        """λ of eq. 8: weight of a k2 KL term ½(log π_θ/π_ref)² in the loss (the baseline variant's placement; its
        gradient is that of KL(π_θ‖π_ref) on-policy). 0 = none."""
        group_baseline: bool = False
        """Eq. 6: subtract the mean reward of the completion's group before the batch normalisation (REINFORCE++ with
        baseline); needs grouped: true."""
        grouped: bool = False
        """Draw G completions of each of B prompts (ctx.rollout(B, G)) instead of one of each of B·G prompts."""

        def validate(self) -> None:
            super().validate()
            if not self.clip_eps > 0:
                raise UserError(f"clip_eps must be > 0, got {self.clip_eps}")
            if self.beta < 0 or self.kl_loss_coef < 0:
                raise UserError(f"beta and kl_loss_coef must be >= 0, got {self.beta}, {self.kl_loss_coef}")
            if self.group_baseline and not self.grouped:
                raise UserError("group_baseline subtracts the mean reward of a prompt's group, but grouped is false "
                                "(one completion per prompt, every advantage would be 0): set grouped: true")

    stores = ("advantages",)

    def __init__(self, cfg: Config, ctx):
        super().__init__(cfg, ctx)
        self.uses_reference = cfg.beta > 0 or cfg.kl_loss_coef > 0  # log π_ref only where a KL term needs it

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        super().check_run(cfg, label)
        check_grouped(cfg, label, cls.Config.grouped)

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        if self.cfg.grouped:
            return self.ctx.rollout(t.prompts_per_step, t.group_size)  # N = B·G, data: rewards [N]
        return self.ctx.rollout(t.prompts_per_step * t.group_size, 1)  # N = B·G prompts, one completion each

    @torch.no_grad()
    def prepare(self, batch: Batch) -> None:
        """Eqs. 4 and 5 (eqs. 6 and 7 with group_baseline): the returns, then one normalisation over the batch."""
        c, d, mask = self.cfg, batch.data, batch.completion_mask  # mask [N, T]
        rewards = d["rewards"]  # r_i [N]
        if c.group_baseline:  # eq. 6: A' = r − mean_group(r), 0 on every completion of a group of equal rewards
            rewards = rewards - group_baseline(rewards, batch.group_ids)
            self.record(zero_var_frac=zero_variance(d["rewards"].double(), batch.group_ids).double().mean())
        kl = k1(d["ref_logp"], sampling_logp(self, batch)) if c.beta > 0 else torch.zeros_like(mask)  # [N, T]
        returns = kl_penalised_returns(rewards, kl, mask, c.beta)  # eq. 4: r − β Σ_{t'>=t} kl  [N, T]
        d["advantages"] = whiten(returns, mask, all_sum=self.ctx.all_sum)  # eq. 5 / 7: over the global batch
        self.record(return_mean=masked_mean(returns, mask), kl_reward=masked_mean(kl, mask))

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = A^norm_{i,t} · s_{i,t} · 1[clip inactive] + λ · log(π_ref/π_θ)_{i,t}   (Hu et al. 2025, eqs. 1, 8)

        with s = π_θ/π_old and A^norm the batch-normalised return of eqs. 4–5 (fixed for the batch: the KL in it is
        that of π_old, no gradient). Derivation: ∇min(s A, clip(s, 1−ε, 1+ε) A) = A s ∇log π_θ where the unclipped
        term is the min and 0 where the clip bites (A > 0 and s > 1+ε, or A < 0 and s < 1−ε), since ∇s = s ∇log π_θ;
        eq. 8's k2 term ½(log π_θ/π_ref)² has gradient log(π_θ/π_ref) ∇log π_θ, so −λ·k2 adds λ log(π_ref/π_θ).
        """
        c, mask = self.cfg, batch.completion_mask
        adv = batch.data["advantages"]  # [N, T]
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # s = π_θ/π_old [N, T]
        active = clip_inactive(adv, ratio, c.clip_eps, c.clip_eps)  # [N, T] bool
        gc = adv * ratio * active  # [N, T]
        if c.kl_loss_coef > 0:  # k2's coefficient is −log ρ, ρ = π_ref/π_θ (gcframe.kl)
            gc = gc - c.kl_loss_coef * kl_grad_coefficient(batch.data["ref_logp"], logp, "k2")
        self.record(clip_frac=masked_mean((~active).float(), mask),
                    **clip_sides(adv, ratio, c.clip_eps, c.clip_eps, mask))  # clip_low_frac, clip_high_frac
        return gc * mask
