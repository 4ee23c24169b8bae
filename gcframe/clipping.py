"""The clip of the importance ratio r = π_θ/π_old, shared by every method with a clipped surrogate (PPO, the GRPO
family and the losses built on them): where it bites, and dual-clip PPO's floor (Ye et al. 2020, §3.3)."""
from __future__ import annotations

import torch

from gcframe.errors import UserError


def clip_inactive(adv: torch.Tensor, ratio: torch.Tensor, eps_low: float, eps_high: float,
                  dual_clip: float | None = None) -> torch.Tensor:
    """[N, T] bool: the clipped surrogate min(rÂ, clip(r)Â) still depends on r (its gradient is Â·r, not 0).

    The clip bites only on the side the advantage pushes towards: Â > 0 and r > 1+ε_high, or Â < 0 and r < 1−ε_low.
    With `dual_clip` c > 1 (dual-clip PPO, Ye et al. 2020, §3.3) the surrogate of a token with Â < 0 is also floored
    at c·Â, max(min(rÂ, clip(r)Â), cÂ): it stops depending on r once r > c.
    """
    bites = ((adv > 0) & (ratio > 1 + eps_high)) | ((adv < 0) & (ratio < 1 - eps_low))
    if dual_clip is not None:
        bites = bites | ((adv < 0) & (ratio > dual_clip))
    return ~bites


def check_clip_eps(eps: float, eps_high: float | None) -> None:
    """The clip band's ε (and ε_high, None: ε on both sides) must be > 0; the one bad value is named."""
    if not eps > 0 or (eps_high is not None and not eps_high > 0):
        which = f"clip_eps {eps}" if not eps > 0 else f"clip_eps_high {eps_high}"
        raise UserError(f"clip_eps and clip_eps_high must be > 0, got {which}: the ratio's clip band "
                        "[1 − ε, 1 + ε] needs ε > 0 (e.g. 0.2; clip_eps_high null: clip_eps on both sides)")


def check_dual_clip(c: float | None) -> None:
    """Dual-clip PPO's c must be > 1 (a floor c·Â below the surrogate's value at r = 1); None is off. The caller's
    config section names the method (MethodConfig.from_dict puts methods.<label>: in front)."""
    if c is not None and not c > 1:
        raise UserError(f"dual_clip (dual-clip PPO's c) must be > 1, got {c}: the floor c·Â on a "
                        "token with Â < 0 must lie beyond the ratio 1 (Ye et al. 2020 use 3); null turns it off")
