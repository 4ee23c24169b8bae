"""DAPO (Yu et al. 2025, arXiv:2503.14476, eq. 8): clip-higher, token-level loss, dynamic sampling, overlong shaping.

Decoupled Clip and Dynamic sAmpling Policy Optimization (§3).

GRPO's group advantage (eq. 9, std scaling kept) under four changes, each in the one place it belongs:

- clip-higher (§3.1): an asymmetric band [1 − ε_low, 1 + ε_high], ε_low 0.2 and ε_high 0.28: the coefficient.
- token-level loss (§3.3): every token of the batch weighs the same, 1/Σ_i |o_i| (aggregation token-mean): the
  normaliser.
- dynamic sampling (§3.2): groups whose rewards are all equal are replaced by fresh prompts' groups
  (train.dynamic_sampling, on by default for this method through `train_defaults`): the data source.
- overlong reward shaping (§3.4, eq. 13): a length penalty R_length added to the reward before the advantage:

      R_length(y) = 0                                 |y| ≤ L_max − L_cache
                  = ((L_max − L_cache) − |y|) / L_cache   L_max − L_cache < |y| ≤ L_max
                  = −1                                L_max < |y|

  with L_max = train.max_new_tokens (a completion cut there is truncated) and L_cache `overlong_cache`.

No KL term (§2.3): β = 0. Dynamic sampling filters on the verifier's reward, before the shaping, as the paper's
constraint 0 < |{o_i correct}| < G does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gcframe.advantages import group_advantages
from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.grpo import GRPO


def overlong_penalty(lengths: torch.Tensor, max_len: int, cache: int) -> torch.Tensor:
    """R_length [N] of DAPO eq. 13 for completion lengths [N] (tokens), L_max = max_len, L_cache = cache (0: none)."""
    if cache <= 0:
        return torch.zeros_like(lengths)
    soft = ((max_len - cache) - lengths) / cache  # in (−1, 0] inside the cache
    return torch.where(lengths <= max_len - cache, torch.zeros_like(lengths),
                       torch.where(lengths <= max_len, soft, -torch.ones_like(lengths)))


@register("dapo")
class DAPO(GRPO):
    """Data: `ctx.rollout(B, G)` with dynamic sampling on (train.dynamic_sampling, DAPO §3.2): groups without a reward
    difference are replaced by groups of fresh prompts until B groups carry one (up to train.max_prompts_per_step)."""

    train_defaults: ClassVar[dict] = {"dynamic_sampling": True}

    @dataclass
    class Config(GRPO.Config):
        aggregation: str = "token-mean"
        """DAPO's token-level loss (§3.3, eq. 12): Σ_{i,t} x_{i,t} / Σ_i |o_i| over the whole batch."""
        clip_eps_high: float | None = 0.28
        """ε_high of clip-higher (§3.1; §4.1 runs ε_low = clip_eps = 0.2, ε_high = 0.28)."""
        beta: float = 0.0
        """β: the KL term's weight; DAPO removes it (§2.3). β > 0 adds GRPO's KL term."""
        overlong_cache: int | None = None
        """L_cache of the overlong penalty (eq. 13), in tokens: completions longer than train.max_new_tokens −
        L_cache lose up to 1 reward. None: a fifth of train.max_new_tokens, rounded (the paper's 4,096 of 20,480);
        0: no shaping."""

        def validate(self) -> None:
            super().validate()
            if self.clip_eps_high is not None and self.clip_eps_high < self.clip_eps:  # §3.1: clip-higher
                raise UserError(f"methods.dapo.clip_eps_high (ε_high, {self.clip_eps_high}) is below clip_eps (ε_low, "
                                f"{self.clip_eps}): DAPO's clip-higher raises the upper edge, ε_high >= ε_low; swap "
                                "them, or use grpo for a band that is wider below")
            if self.overlong_cache is not None and self.overlong_cache < 0:
                raise UserError(f"methods.dapo.overlong_cache must be >= 0 tokens (0: no shaping, null: a fifth of "
                                f"train.max_new_tokens), got {self.overlong_cache}")

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        """Also refuses an overlong cache longer than train.max_new_tokens (known once the task derived it)."""
        super().check_run(cfg, label)
        own = {k: v for k, v in (cfg.methods.get(cls.name) or {}).items() if k != "train"}
        cache, L = cls.Config.from_dict(own, label).overlong_cache, cfg.train.max_new_tokens
        if L and cache is not None and cache > L:
            raise UserError(f"methods.{label}.overlong_cache ({cache}) exceeds train.max_new_tokens ({L}): the "
                            "penalty would reach completions of any length; lower it (0: no shaping)")

    def overlong_cache(self, max_len: int) -> int:
        """L_cache in tokens: the option, or a fifth of L_max when it is None."""
        return round(max_len / 5) if self.cfg.overlong_cache is None else self.cfg.overlong_cache

    def advantages(self, batch: Batch) -> torch.Tensor:
        """Â_{i,t} = (R_i − mean(R)) / std(R) of the shaped rewards R_i = r_i + R_length(o_i) (eqs. 9 and 13) ->
        [N, T]; a group whose shaped rewards are all equal gets 0."""
        mask = batch.completion_mask
        L = self.ctx.cfg.train.max_new_tokens  # L_max
        penalty = overlong_penalty(mask.sum(-1), L, self.overlong_cache(L))  # [N]
        self.record(overlong_frac=(penalty < 0).to(mask.dtype).mean(), overlong_penalty=penalty.mean())
        adv = group_advantages(batch.data["rewards"] + penalty, batch.group_ids, self.cfg.scale_by_std,
                               self.cfg.leave_one_out)  # [N]
        return adv.unsqueeze(1) * mask  # [N, T]

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC_{i,t} = Â_{i,t} · r_{i,t} · 1[r inside the band on Â's side] − β c_{i,t}   (DAPO eq. 8)

        The clipped surrogate of eq. 8 with the band [1 − ε_low, 1 + ε_high]: its gradient is Â r ∇log π_θ where
        min(rÂ, clip(r)Â) still depends on r and 0 where the clip bites (Â > 0 and r > 1 + ε_high, or Â < 0 and
        r < 1 − ε_low), as GRPO's (methods/grpo.py, where c, the KL term's coefficient, is derived; β = 0 by
        default). Eq. 8's 1/Σ_i |o_i| is the engine's token-mean aggregation, not part of GC.
        """
        return super().coefficients(batch, logp)
