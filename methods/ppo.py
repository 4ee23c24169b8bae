"""PPO with a learned critic: the actor-critic baseline that GRPO replaces by a group mean (the seed chapter, "The
Second Model").

Data: B·G on-policy samples per step, one completion per prompt (no groups: the critic is the baseline).
Per-token reward (InstructGPT placement, Ouyang et al. 2022 eq. 2: the KL to π_ref is folded into the reward):

    r_t = −β (log π_old(o_t) − log π_ref(o_t))  +  1[t = |o|−1] · r(q, o)         [N, T]

Advantages by GAE(γ, λ) on the critic's values V_ψ(s_t), s_t = (q, o_<t); the critic (a copy of the SFT base with
a scalar head, the policy's size) regresses on the returns with a clipped value loss. The policy loss is the
clipped surrogate L^CLIP (Schulman et al. 2017, eq. 7) with no KL term in it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.advantages import gae, whiten
from gcframe.batch import Batch
from gcframe.engine import Normaliser, aggregate, token_logprobs
from gcframe.clipping import check_dual_clip, clip_inactive
from gcframe.errors import UserError
from gcframe.kl import k1, k3
from gcframe.modeling import ScalarHeadModel, evaluating, load_model_and_tokenizer
from methods.base import Method, MethodConfig, register


@dataclass
class PPOConfig(MethodConfig):
    gamma: float = 1.0
    """γ: discount over completion tokens (1 = undiscounted; the reward is terminal)."""
    lam: float = 0.95
    """λ: GAE trade-off between the critic's bootstrap (λ=0, low variance) and Monte Carlo returns (λ=1)."""
    clip_eps: float = 0.2
    """ε: the policy ratio π_θ/π_old is clipped to [1−ε, 1+ε] in the surrogate."""
    vf_clip: float = 0.2
    """ε_v: the new value may move at most ε_v from V_old before the clipped value loss takes over (0 = no clip)."""
    vf_coef: float = 0.5
    """Weight of the value loss. The critic has its own AdamW, so this mostly scales its grad-clip threshold."""
    beta: float = 0.05
    """β: weight of the per-token KL penalty −β·log(π_old/π_ref) folded into the reward."""
    critic_lr: float = 1e-3
    """AdamW learning rate of the critic (the engine builds and steps its optimiser). 1e-3, the SFT base's own
    rate: at 1e-4 the critic barely beats a constant in 100 steps (explained variance < 0.15)."""
    whiten: bool = True
    """Whiten the advantages over the batch's tokens (mean 0, std 1) before the policy update."""
    dual_clip: float | None = None
    """c of dual-clip PPO (Ye et al. 2020, §3.3): a token with A < 0 whose ratio passed c stops pushing (its surrogate
    is floored at c·A). None: off (PPO's plain clip); > 1. methods/dual_clip_ppo.py runs PPO with c = 3."""

    def validate(self) -> None:
        super().validate()
        check_dual_clip(self.dual_clip)
        for name in ("gamma", "lam"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UserError(f"methods.ppo.{name} must be in [0, 1], got {getattr(self, name)}")


@register("ppo")
class PPO(Method):
    Config = PPOConfig
    uses_reference = True
    rollout_groups = False  # one sample per prompt
    stores = ("advantages", "returns", "values_old")

    def __init__(self, cfg: PPOConfig, ctx):
        super().__init__(cfg, ctx)
        # V_ψ: the SFT base's backbone + a zero scalar head, all weights trained (seed: "roughly the policy's own
        # size"). Loaded from the base directory, so a LoRA-wrapped policy is no obstacle; the temporary LM is
        # dropped. Without a base directory (tests) the policy itself is the SFT base at this point.
        p = next(ctx.policy.parameters())
        base_dir = getattr(ctx, "base_dir", None)
        lm = load_model_and_tokenizer(str(base_dir), dtype=p.dtype)[0] if base_dir else ctx.policy
        self.critic = ScalarHeadModel.from_causal_lm(lm).to(device=p.device, dtype=p.dtype)

    @classmethod
    def check_model(cls, cfg, task, tok) -> None:
        """The critic must be buildable on this model: its backbone (`lm.base_model`) plus a scalar head, built here
        from the model's config with one layer (random weights, a fraction of a second) and run on a short sequence."""
        if not cfg.model.path:
            return  # the tiny Llama: its critic is tested
        from transformers import AutoConfig, AutoModelForCausalLM

        from gcframe.modeling import resolve_model_path

        path = resolve_model_path(cfg.model.path)
        try:
            config = AutoConfig.from_pretrained(path)
            if hasattr(config, "num_hidden_layers"):
                config.num_hidden_layers = 1  # the structure is what is checked, not the depth
            critic = ScalarHeadModel.from_causal_lm(AutoModelForCausalLM.from_config(config))
            with torch.no_grad():
                v = critic(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.long))
            if tuple(v.shape) != (1, 4):
                raise ValueError(f"values of shape {tuple(v.shape)} for a [1, 4] input")
        except Exception as e:  # any reason the critic cannot be made: the message names it
            raise UserError(f"method 'ppo' cannot build its critic (the model's backbone plus a scalar head) on "
                            f"{cfg.model.path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}; drop "
                            "ppo from --methods / run.methods, or use a model whose backbone gives hidden states "
                            "(a Llama-like causal LM)") from None

    def auxiliary_models(self) -> dict[str, torch.nn.Module]:
        return {"critic": self.critic}  # use_auxiliary_models: self.critic becomes the prepared (maybe DDP) module

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        return self.ctx.rollout(t.prompts_per_step * t.group_size, 1)

    def values(self, batch: Batch) -> torch.Tensor:
        """V_ψ(s_t) for every completion token t -> [N, T]: the critic's output at the position that predicts
        o_t, i.e. positions P−1 .. P+T−2 of the full sequence (the same alignment as token_logprobs)."""
        P, T = batch.prompt_ids.shape[1], batch.completion_ids.shape[1]
        v = self.critic(batch.input_ids, batch.attention_mask)  # [N, P+T]
        return v[:, P - 1:P + T - 1] * batch.completion_mask  # [N, T]

    @torch.no_grad()
    def prepare(self, batch: Batch) -> None:
        """Per-token rewards (KL folded in), V_old, GAE advantages and returns, once per collected batch."""
        c, d, mask = self.cfg, batch.data, batch.completion_mask  # mask [N, T]
        if "old_logp" not in d:
            # μ = 1 and one minibatch: the engine stores no π_old since π_θ has not moved. The KL reward needs
            # it now, so compute it (the forward the engine skipped) and store it; the ratio then uses it too.
            with evaluating(self.ctx.policy):
                d["old_logp"] = token_logprobs(self.ctx.policy, batch, self.ctx.cfg.train.temperature)
        kl = k1(d["ref_logp"], d["old_logp"]) * mask  # log π_old − log π_ref  [N, T]
        lengths = mask.sum(-1).long()  # |o_i| incl. <eos>  [N]
        last = torch.nn.functional.one_hot((lengths - 1).clamp(min=0), mask.shape[1]).to(mask.dtype)
        last = last * (lengths > 0).unsqueeze(-1)  # an empty completion gets no terminal reward slot
        rewards = -c.beta * kl + d["rewards"].to(mask.dtype).unsqueeze(-1) * last  # [N, T]
        values = self.values(batch)  # V_old(s_t)  [N, T]
        adv, returns = gae(rewards, values, mask, c.gamma, c.lam)  # [N, T] each
        n = mask.sum().clamp(min=1)
        self.record(adv_mean=(adv * mask).sum() / n, adv_abs=(adv.abs() * mask).sum() / n,
                    kl_reward=kl.sum() / n, value_mean=(values * mask).sum() / n)
        ev = explained_variance(values, returns, mask)
        if ev is not None:  # undefined when every return is equal (e.g. all rewards 0 and β = 0)
            self.record(explained_var=ev)
        d["advantages"] = whiten(adv, mask, all_sum=self.ctx.all_sum) if c.whiten else adv
        d["returns"], d["values_old"] = returns, values

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_t = A_t · r_t · 1[clip inactive],  r_t = π_θ(o_t)/π_old(o_t)   (Schulman et al. 2017, eq. 7).

        ∇ min(r A, clip(r, 1−ε, 1+ε) A) = A·r·∇log π_θ where the unclipped term is the min, and 0 where the
        clip bites: A > 0 and r > 1+ε, or A < 0 and r < 1−ε. With dual_clip c the objective of a token with A < 0
        is max(min(r A, clip(r) A), c A) (Ye et al. 2020, §3.3), constant, so GC = 0, where r > c as well. No KL
        term: it is in the reward (prepare).
        """
        adv, mask = batch.data["advantages"], batch.completion_mask  # [N, T]
        old = self.old_logp(batch, logp)  # [N, T]
        ratio = (logp.detach() - old).exp()  # r_t [N, T]
        c, eps = self.cfg.dual_clip, self.cfg.clip_eps
        bites = ~clip_inactive(adv, ratio, eps, eps, c)  # [N, T] bool
        n = mask.sum().clamp(min=1)
        self.record(clip_frac=(bites.float() * mask).sum() / n,
                    approx_kl_old=(k3(logp.detach(), old) * mask).sum() / n)  # k3 with ρ = r: KL(π_old‖π_θ)
        if c is not None:  # the tokens only the floor c·A stopped (A < 0, r > c)
            self.record(dual_clip_frac=(((adv < 0) & (ratio > c)).float() * mask).sum() / n)
        return adv * ratio * (~bites).to(adv.dtype) * mask

    def auxiliary_loss(self, batch: Batch, norm: Normaliser) -> torch.Tensor:
        """vf_coef · token-mean ½·max((V − R)², (clip(V, V_old ± ε_v) − R)²) (the clipped value loss of PPO2)."""
        d, mask, eps = batch.data, batch.completion_mask, self.cfg.vf_clip
        v = self.values(batch)  # V_ψ(s_t) with grad  [N, T]
        loss = (v - d["returns"]) ** 2  # [N, T]
        if eps > 0:
            v_clip = d["values_old"] + (v - d["values_old"]).clamp(-eps, eps)
            loss = torch.maximum(loss, (v_clip - d["returns"]) ** 2)
        self.record(value_loss=aggregate(0.5 * loss.detach(), mask, "token-mean"))  # this micro-batch's mean
        return self.cfg.vf_coef * aggregate(0.5 * loss, mask, "token-mean", norm)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """1 − Var(R − V) / Var(R) over the masked tokens (1: perfect critic, 0: no better than a constant);
    None when Var(R) = 0."""
    m = mask.bool()
    r, v = returns[m], values[m]
    if r.numel() < 2 or r.var() < 1e-12:
        return None
    return 1 - (r - v).var() / r.var()
