"""ReMax (Li et al. 2023, arXiv:2310.10505): REINFORCE with the reward of the policy's greedy completion as baseline

The baseline is the reward of the greedy completion of the same prompt under the current policy, so neither a critic
nor a group is needed (ICML 2024):

    ∇J ≈ (1/N) Σ_i Σ_t ∇log π_θ(o_{i,t} | q_i, o_{i,<t}) · (r(q_i, o_i) − r(q_i, ô_i))     ô_i = argmax decoding of q_i

(Algorithm 1: `rew = rm(prompt, seq) − rm(prompt, seq_max)`, `loss = −(logp.sum(dim=−1) · rew).mean()`). The greedy
completion is a change of the data source: it costs one generation per prompt and is not trained on. Its tokens
are logged as `greedy_dropped_tokens` and counted in `gen_tokens` (generated, not trained on), so a budget
comparison charges ReMax for them. With the default one completion per prompt that is about twice the sampled tokens
of a method without it (the greedy completion's length is its own); with `grouped: true` one greedy completion per
G samples.

`beta > 0` folds a k1 KL penalty into the reward as REINFORCE++'s eq. 4 does (the KL still to come is subtracted at
every token). The authors' repository (liziniu/ReMax, step3_rlhf_finetuning/remax_trainer.py) adds each token's
own penalty only (not the sum over the tokens still to come) and clips the reward to ±5; verl's remax subtracts the
greedy reward from the return of its per-token rewards, as here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import kl_penalised_returns
from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.kl import k1
from methods.base import Method, MethodConfig, register
from methods.grpo import masked_mean
from methods.reinforce_pp import check_grouped, sampling_logp


@register("remax")
class ReMax(Method):
    """Data: `ctx.rollout(B·G, 1)`, one sampled completion of each of B·G prompts from the live policy, and one greedy
    completion (temperature 0) of each of the same prompts from the same policy (`ctx.complete(rows, 1,
    temperature=0)`), scored like the samples: its reward is `batch.data["greedy_rewards"]` [N], its text
    `texts[i]["greedy"]`. With `grouped: true`, `ctx.rollout(B, G)` and one greedy completion per prompt."""

    @dataclass
    class Config(MethodConfig):
        aggregation: str = "seq-mean-token-sum"
        """Algorithm 1: −(Σ_t log π(o_t) · (r − r̂)) averaged over completions: the whole completion is the unit."""
        beta: float = 0.0
        """β: a k1 penalty log(π_old/π_ref) folded into every token's reward, the KL still to come subtracted from
        the advantage (REINFORCE++ eq. 4). 0 = Algorithm 1 (no KL, no reference model held)."""
        grouped: bool = False
        """Draw G completions of each of B prompts (ctx.rollout(B, G)) and one greedy completion of each of the B
        prompts, instead of one sample and one greedy completion of each of B·G prompts (the paper's setting)."""

        def validate(self) -> None:
            super().validate()
            if self.beta < 0:
                raise UserError(f"beta must be >= 0, got {self.beta}")

    stores = ("advantages",)

    def __init__(self, cfg: Config, ctx):
        super().__init__(cfg, ctx)
        self.uses_reference = cfg.beta > 0  # log π_ref only when the KL penalty is on

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        """Also: `grouped` needs groups. (train.temperature > 0, so that a sample can differ from the greedy rollout,
        is every run's check: gcframe.config refuses a temperature <= 0.)"""
        super().check_run(cfg, label)
        check_grouped(cfg, label, cls.Config.grouped)

    def collect(self, step: int) -> Batch:
        t, ctx = self.ctx.cfg.train, self.ctx
        batch = ctx.rollout(t.prompts_per_step, t.group_size) if self.cfg.grouped else \
            ctx.rollout(t.prompts_per_step * t.group_size, 1)  # N sampled completions, data: rewards [N]
        self.greedy_baseline(batch)
        return batch

    def greedy_baseline(self, batch: Batch) -> None:
        """One greedy completion of each prompt of `batch` by the live policy, scored: batch.data["greedy_rewards"]
        [N] (r̂ of each sequence's prompt) and texts[i]["greedy"]; its tokens are logged as greedy_dropped_tokens."""
        ctx, rewards = self.ctx, batch.data["rewards"]
        _, inv = torch.unique(batch.group_ids, return_inverse=True)  # prompt index u of each sequence [N]
        first = [int((inv == u).nonzero()[0]) for u in range(int(inv.max()) + 1)]  # one sequence per prompt [U]
        rows = [{"prompt": batch.texts[i]["prompt"], "answer": batch.texts[i]["answer"],
                 "steps": batch.texts[i].get("steps", [])} for i in first]
        greedy = ctx.complete(rows, 1, temperature=0.0)  # ô_u = argmax decoding of prompt u by π_θ  [U]
        batch.data["greedy_rewards"] = greedy.data["rewards"].to(rewards.device, rewards.dtype)[inv]  # r̂_i [N]
        for text, u in zip(batch.texts, inv.tolist()):
            text["greedy"] = greedy.texts[u]["completion"]
        tokens = ctx.all_sum(greedy.completion_mask.sum().reshape(1).to(ctx.device))  # this step's, every process
        self.record(greedy_dropped_tokens=float(tokens), greedy_reward=greedy.data["rewards"].mean())

    @torch.no_grad()
    def prepare(self, batch: Batch) -> None:
        d, mask = batch.data, batch.completion_mask  # mask [N, T]
        if "greedy_rewards" not in d:  # a batch this method did not collect (the GC view's probe): r̂ of its prompts
            self.greedy_baseline(batch)
        adv = d["rewards"] - d["greedy_rewards"]  # r_i − r̂_i  [N]
        kl = k1(d["ref_logp"], sampling_logp(self, batch)) if self.cfg.beta > 0 else torch.zeros_like(mask)
        d["advantages"] = kl_penalised_returns(adv, kl, mask, self.cfg.beta)  # [N, T]
        self.record(tie_frac=(adv == 0).double().mean(), adv_abs_mean=adv.abs().mean(),
                    kl_reward=masked_mean(kl, mask))

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = (r_i − r̂_i − β Σ_{t' ≥ t} log(π_old/π_ref)_{i,t'}) · π_θ/π_old   (Li et al. 2023, Algorithm 1)

        r̂_i is the reward of the greedy completion of o_i's prompt. Algorithm 1 is plain REINFORCE: −A·log π has
        gradient −A ∇log π, and the engine's −GC·log π the same with GC = A. The ratio π_θ/π_old is 1 on-policy
        (μ = 1, the paper's setting); when the engine reuses a batch it is the importance weight that keeps the
        estimate unbiased, ∇(A π_θ/π_old) = A (π_θ/π_old) ∇log π_θ (no clip, as RLOO). A tie r_i = r̂_i gives 0.
        """
        ratio = (logp.detach() - self.old_logp(batch, logp)).exp()  # [N, T]
        return batch.data["advantages"] * ratio * batch.completion_mask
