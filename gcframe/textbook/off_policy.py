"""The off-policy corrections as their sources write them, for `gcframe.verify` (gcframe.offpolicy.check).

Each weight is computed here token by token in plain Python floats from the three policies' log-probs (ρ = π_old/μ
per token, Π_t ρ_t per sequence), independently of gcframe.offpolicy.corrections' tensor code, and reports which of
its branches each token took, so that a check can demand that every branch was taken. The corrected objective is
GRPO's clipped surrogate with its KL term (DeepSeekMath eq. 3), every token's term multiplied by its weight:

    J = (1/N) Σ_i (1/|o_i|) Σ_t w_{i,t} [ min(r Â, clip(r, 1 − ε, 1 + ε) Â) − β r·k3 ],   r = π_θ/π_old

and for `naive` the same with μ in place of π_old and w = 1.
"""
from __future__ import annotations

import math

import torch

from gcframe.textbook.classic import _group_centred, _kl_term
from gcframe.textbook.core import _mean_as_written


def _tokens(mask):
    """(i, [t, ...]) of every sequence's completion tokens."""
    return [(i, [t for t in range(mask.shape[1]) if mask[i, t] > 0]) for i in range(mask.shape[0])]


def weights(name: str, old, mu, logp, seq_adv, mask, low, high) -> tuple[torch.Tensor, dict[str, int]]:
    """(w [N, T] float64, {branch: tokens that took it}) of correction `name` as its source writes it."""
    w = torch.zeros(mask.shape, dtype=torch.float64)
    seen: dict[str, int] = {}

    def took(branch: str, n: int = 1):
        seen[branch] = seen.get(branch, 0) + n

    for i, ts in _tokens(mask):
        rho = [math.exp(float(old[i, t]) - float(mu[i, t])) for t in ts]  # π_old/μ per token
        seq = math.exp(sum(float(old[i, t]) - float(mu[i, t]) for t in ts))  # Π_t ρ_t
        for j, t in enumerate(ts):
            r = rho[j]
            if name in ("none", "naive"):  # no factor
                w[i, t] = 1.0
                took("w = 1")
            elif name == "tis":  # Yao et al. 2025: min(ρ, C); TRL token_truncate: clamp(ρ, C_min, C_max)
                if r > high:
                    w[i, t] = high
                    took("ρ > C: w = C")
                elif low is not None and r < low:
                    w[i, t] = low
                    took("ρ < lower: w = lower")
                else:
                    w[i, t] = r
                    took("w = ρ")
            elif name == "seq_tis":  # TRL sequence_truncate: clamp(Π_t ρ_t, C_min, C_max) on every token
                w[i, t] = high if seq > high else (low if low is not None and seq < low else seq)
                took("Π ρ > C: w = C" if seq > high else "w = Π ρ")
            elif name in ("mis", "icepop"):  # TRL token_mask; IcePop's M(ρ) = ρ on [α, β], else 0
                inside = low <= r <= high
                w[i, t] = r if inside else 0.0
                took("w = ρ" if inside else ("ρ < lower: w = 0" if r < low else "ρ > upper: w = 0"))
            elif name == "seq_mis":  # TRL sequence_mask: Π_t ρ_t if inside [C_min, C_max], else 0
                inside = low <= seq <= high
                w[i, t] = seq if inside else 0.0
                took("w = Π ρ" if inside else ("Π ρ < lower: w = 0" if seq < low else "Π ρ > upper: w = 0"))
            elif name == "opsm":  # DeepSeek-V3.2 eq. 9: drop Â_i < 0 and mean_t log(μ/π_θ) > δ
                kl = sum(float(mu[i, s]) - float(logp[i, s]) for s in ts) / len(ts)
                drop = float(seq_adv[i]) < 0 and kl > high
                w[i, t] = 0.0 if drop else 1.0
                took("Â < 0, far: w = 0" if drop else ("Â < 0, near: w = 1" if float(seq_adv[i]) < 0
                                                       else ("Â ≥ 0, far: w = 1" if kl > high else "Â ≥ 0: w = 1")))
            elif name == "decoupled":  # AReaL: the behaviour weight π_prox/π_behav, tokens above the cap dropped
                if high is not None and r > high:
                    w[i, t] = 0.0
                    took("ρ > cap: w = 0")
                else:
                    w[i, t] = r
                    took("w = ρ ≠ 1" if abs(r - 1) > 1e-12 else "w = 1")
            else:
                raise ValueError(f"no textbook form of the correction '{name}'")
    return w, seen


def corrected_grpo_loss(method, batch, logp: torch.Tensor, w: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """−(1/N) Σ_i (1/|o_i|) Σ_t w [min(r Â, clip(r) Â) − β KL̂], r = exp(log π_θ − `old`), Â recomputed from the
    rewards (the seed's group-relative advantage); the clip and the KL term are GRPO's (gcframe.textbook.classic)."""
    c = method.cfg
    A = _group_centred(batch.data["rewards"], batch.group_ids, c.leave_one_out, c.scale_by_std).unsqueeze(1)
    A = A.expand_as(logp)
    hi = c.clip_eps if c.clip_eps_high is None else c.clip_eps_high
    r = torch.exp(logp - old)  # π_θ/π_old (μ for naive) [N, T]
    surrogate = torch.min(r * A, torch.clamp(r, 1 - c.clip_eps, 1 + hi) * A)
    kl = _kl_term(c.kl_estimator, logp, batch, r)
    return -_mean_as_written(w * (surrogate - c.beta * kl), batch.completion_mask, c.aggregation)
