"""The off-policy corrections: one per-token factor w_{i,t} on GC, computed from ρ_{i,t} = π_old(o_t)/μ(o_t).

Samples drawn from a behaviour policy μ (a lagging or lower-precision sampler, gcframe.offpolicy) estimate
expectations under μ, not under π_old. Importance sampling reweights each token by ρ = π_old/μ, and every
correction the libraries ship is that weight truncated, masked, or replaced by a mask:

    none       w = 1                                          (the mismatch ignored; the clip still sees π_old)
    tis        w = clamp(ρ_t, lower, C)                       token-level truncated IS
    seq_tis    w = clamp(Π_t ρ_t, lower, C)                   sequence-level truncated IS, on every token of o_i
    mis        w = ρ_t · 1[lower ≤ ρ_t ≤ upper]               token-level masked IS
    seq_mis    w = Π_t ρ_t · 1[lower ≤ Π_t ρ_t ≤ upper]       sequence-level masked IS
    icepop     w = ρ_t · 1[α ≤ ρ_t ≤ β]                       IcePop's token mask (mis's form, its own band)
    opsm       w = 1 − 1[Â_i < 0 and mean_t log(μ/π_θ)(o_{i,t}) > δ]   DeepSeek-V3.2's off-policy sequence mask
    decoupled  w = ρ_t · 1[ρ_t ≤ cap]                         AReaL's decoupled PPO (no cap by default: w = ρ_t)
    naive      w = 1, and μ used as π_old (nothing recomputed) what some asynchronous loops do

Bounds are inclusive (a ratio equal to a bound is kept), as in TRL, OpenRLHF and AReaL. The factor multiplies the
whole GC, the KL-to-π_ref term included: that term is an expectation over the sampled tokens too. TRL applies its
importance weight and its off-policy mask to the policy-gradient term only and adds the KL term after; with β = 0
(DAPO, CISPO, GSPO, SAPO by default) the two are the same (tests/test_trl_equivalence_offpolicy.py).

Every correction has the one signature `fn(x: Inputs, low, high) -> (w [N, T], cut [N, T] bool)`, `cut` marking
the tokens whose weight it truncated or zeroed; `gcframe.verify` checks each against its textbook form
(gcframe.textbook.off_policy) with every branch active. Each declares the batch columns it reads (`READS`): log π_old
and log μ are the engine's (`FILLED`), any other a method's prepare stores (opsm's advantages), and a method that
does not store it is refused in one line, before the run where the method declares what it stores (`Method.stores`,
`check_method`), else on its first batch (`Correction.factor`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from gcframe.errors import UserError
from gcframe.offpolicy import FAR, thresholds

FACTORS: dict[str, Callable] = {}
READS: dict[str, tuple[str, ...]] = {}
"""correction -> the batch.data columns it reads (beside the completion mask and log π_θ)."""
FILLED = ("old_logp", "mu_logp")
"""The columns the engine fills wherever a correction is on: log π_old (recomputed by the learner) and log μ
(recorded by the sampler; a batch without it is refused by the trainer)."""
FIELDS = {"old_logp": "old_logp", "mu_logp": "mu_logp", "advantages": "adv"}
"""A column's field of `Inputs`."""


def register(name: str, reads: tuple[str, ...] = FILLED):
    """Register a correction under `name`, with the batch columns it reads (by default log π_old and log μ)."""
    unknown = [c for c in reads if c not in FIELDS]
    if unknown:
        raise ValueError(f"correction '{name}' reads {unknown[0]}, which Inputs does not carry: add it to FIELDS")

    def deco(fn):
        FACTORS[name] = fn
        READS[name] = tuple(reads)
        return fn

    return deco


def method_columns(name: str) -> list[str]:
    """The columns correction `name` reads that a method must store (those the engine does not fill)."""
    return [c for c in READS[name] if c not in FILLED]


def refusal(name: str, column: str, label: str | None, stores: tuple[str, ...] | None = None) -> str:
    """The one line refusing correction `name` on method `label` (None: not known here), whose batch lacks
    `column`: what reads it, which methods store it, and the corrections (or none) that run without it."""
    from gcframe.registry import REGISTRY

    which = f"method '{label}'" if label else "the method"
    has = f" (its prepare stores {', '.join(stores) or 'nothing'})" if stores is not None else ""
    known = ", ".join(n for n, c in REGISTRY.items() if column in (getattr(c, "stores", None) or ()))
    others = ", ".join(n for n in FACTORS if not method_columns(n))
    where = label or "<label>"
    return (f"train.correction {name} reads batch.data['{column}'], which {which} does not store{has}: {name} "
            f"applies to methods that store it ({known}, and your own that set it in prepare and declare it in "
            f"stores); choose a correction that reads only π_old and μ ({others}) for {which} (methods: "
            f"{{{where}: {{train: {{correction: none}}}}}})")


def check_method(name: str, cls, label: str) -> None:
    """Before a run starts: refuse correction `name` on a method whose declared columns (`stores`, not None) lack
    one it reads. A method that declares nothing is checked on its first batch (`Correction.factor`)."""
    stores = getattr(cls, "stores", None)
    if name not in READS or stores is None:
        return
    missing = [c for c in method_columns(name) if c not in stores]
    if missing:
        raise UserError(refusal(name, missing[0], label, tuple(stores)))


@dataclass
class Inputs:
    """What a correction may read, each [N, T] (0 on padding) unless said otherwise."""

    old_logp: torch.Tensor  # log π_old, recomputed by the learner at the start of the step
    mu_logp: torch.Tensor  # log μ, recorded by the sampler
    logp: torch.Tensor  # log π_θ, detached (opsm's sequence KL is to the live policy)
    mask: torch.Tensor  # completion mask
    adv: torch.Tensor | None  # advantages, [N] or [N, T] (opsm reads the sign of each sequence's); None: not stored
    method: str | None = None  # the method whose batch it is (named where a correction is refused)

    @property
    def log_rho(self) -> torch.Tensor:
        """log ρ = log π_old − log μ [N, T], 0 on padding."""
        return (self.old_logp - self.mu_logp) * self.mask

    def seq_rho(self) -> torch.Tensor:
        """Π_t ρ_{i,t} = exp(Σ_t log ρ_{i,t}) [N, 1]: the sequence's likelihood ratio (TRL's sequence modes)."""
        return self.log_rho.sum(-1, keepdim=True).exp()


def _band(rho: torch.Tensor, low: float | None, high: float | None) -> torch.Tensor:
    """1[low ≤ ρ ≤ high] (bool), an absent bound open."""
    keep = torch.ones_like(rho, dtype=torch.bool)
    if low is not None:
        keep &= rho >= low
    if high is not None:
        keep &= rho <= high
    return keep


@register("none", reads=())
def _none(x: Inputs, low, high):
    """w = 1: π_old is recomputed and the method's clip is measured against it; the mismatch μ ≠ π_old is left."""
    return torch.ones_like(x.mask), torch.zeros_like(x.mask, dtype=torch.bool)


register("naive", reads=())(_none)  # w = 1 too: its difference is in the engine, which stores μ as π_old (replaces_old)


@register("tis")
def _tis(x: Inputs, low, high):
    """Token-level truncated importance sampling: w_t = min(ρ_t, C), or clamp(ρ_t, lower, C) with a lower bound.

    Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training" (TIS, w = min(ρ, C));
    TRL's vllm_importance_sampling_mode "token_truncate" (clip_min, clip_max); OpenRLHF's vllm_is_correction_type
    "tis"; verl's rollout_is "token"."""
    rho = x.log_rho.exp()
    w = rho.clamp(min=low, max=high)
    return w, w != rho


@register("seq_tis")
def _seq_tis(x: Inputs, low, high):
    """Sequence-level truncated importance sampling: w_{i,t} = clamp(Π_t ρ_{i,t}, lower, C) on every token of o_i.

    TRL's vllm_importance_sampling_mode "sequence_truncate" (the sum of the tokens' log-ratios, exponentiated);
    verl's rollout_is "sequence"."""
    rho = x.seq_rho()  # [N, 1]
    w = rho.clamp(min=low, max=high)
    return w.expand_as(x.mask), (w != rho).expand_as(x.mask)


@register("mis")
def _mis(x: Inputs, low, high):
    """Token-level masked importance sampling: w_t = ρ_t · 1[lower ≤ ρ_t ≤ upper] (a ratio outside drops its token).

    Yao et al. 2025 (MIS, the follow-up to TIS); TRL's vllm_importance_sampling_mode "token_mask"."""
    rho = x.log_rho.exp()
    keep = _band(rho, low, high)
    return torch.where(keep, rho, torch.zeros_like(rho)), ~keep


@register("seq_mis")
def _seq_mis(x: Inputs, low, high):
    """Sequence-level masked importance sampling: w_{i,t} = Π_t ρ_{i,t} · 1[lower ≤ Π_t ρ_{i,t} ≤ upper].

    TRL's vllm_importance_sampling_mode "sequence_mask" (its default); verl's rollout_is "sequence" with
    rollout_rs "sequence"."""
    rho = x.seq_rho()  # [N, 1]
    keep = _band(rho, low, high)
    w = torch.where(keep, rho, torch.zeros_like(rho))
    return w.expand_as(x.mask), (~keep).expand_as(x.mask)


@register("icepop")
def _icepop(x: Inputs, low, high):
    """IcePop: w_t = M(ρ_t) with M(k) = k for k in [α, β] and 0 outside, a two-sided token mask (Ling Team 2025,
    "Every Step Evolves: Scaling Reinforcement Learning for Trillion-Scale Thinking Model", the Ring-1T report;
    OpenRLHF's vllm_is_correction_type "icepop"; slime's icepop).

    mis's formula with IcePop's band [α, β] = [0.5, 5] by default."""
    return _mis(x, low, high)


@register("opsm", reads=("mu_logp", "advantages"))
def _opsm(x: Inputs, low, high):
    """DeepSeek-V3.2's off-policy sequence masking (DeepSeek-AI 2025, arXiv:2512.02556, eq. 9):

        w_{i,t} = 0 if Â_i < 0 and (1/|o_i|) Σ_t log(μ(o_{i,t}) / π_θ(o_{i,t})) > δ, else 1

    with δ = `high`: a sequence with a negative advantage that the live policy has moved far from (its mean
    log-ratio to the sampler's log-probs, a KL(μ‖π_θ) estimate) is dropped. Â_i is the sequence's advantage (for
    per-token advantages, the sign of their sum over o_i). TRL's off_policy_mask_threshold (GRPOTrainer
    .get_off_policy_mask)."""
    m = x.mask
    seq_kl = ((x.mu_logp - x.logp) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)  # [N, 1]
    adv = x.adv.unsqueeze(1) if x.adv.dim() == 1 else (x.adv * m).sum(-1, keepdim=True)  # [N, 1]
    drop = ((adv < 0) & (seq_kl > high)).expand_as(m)
    return (~drop).to(m.dtype), drop


@register("decoupled")
def _decoupled(x: Inputs, low, high):
    """AReaL's decoupled PPO objective (Fu et al. 2025, "AReaL: A Large-Scale Asynchronous Reinforcement Learning System
    for Language Reasoning", arXiv:2505.24298, §5): the clip against the proximal π_old, the behaviour weight π_old/μ
    outside it,

        J = E_μ[ (π_old/μ) · min(r Â, clip(r, 1 − ε, 1 + ε) Â) ],   r = π_θ/π_old   ->   w_t = ρ_t

    and with a cap (AReaL's behav_imp_weight_cap) the tokens whose weight exceeds it dropped: w_t = ρ_t·1[ρ_t ≤ cap].
    """
    rho = x.log_rho.exp()
    keep = _band(rho, None, high)
    return torch.where(keep, rho, torch.zeros_like(rho)), ~keep


@dataclass(frozen=True)
class Correction:
    """train.correction with its thresholds (`gcframe.offpolicy.thresholds`)."""

    name: str
    low: float | None
    high: float | None

    @staticmethod
    def of(tcfg) -> "Correction":
        return Correction(tcfg.correction, *thresholds(tcfg.correction, tcfg.correction_low, tcfg.correction_high))

    @property
    def replaces_old(self) -> bool:
        """naive: μ stands in for π_old (log π_old := log μ), nothing recomputed."""
        return self.name == "naive"

    @property
    def is_factor(self) -> bool:
        """Whether it changes GC by a factor (none and naive do not)."""
        return self.name not in ("none", "naive")

    def factor(self, x: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
        """(w [N, T] with 0 on padding, cut [N, T] bool on the completion's tokens), no grad. A column it reads that
        the batch lacks is one line (`refusal`), on the first batch: before, opsm read no advantages as 0 and never
        masked."""
        missing = [c for c in method_columns(self.name) if getattr(x, FIELDS[c]) is None]
        if missing:
            raise UserError(refusal(self.name, missing[0], x.method))
        with torch.no_grad():
            w, cut = FACTORS[self.name](x, self.low, self.high)
            return w * x.mask, cut & (x.mask > 0)

    def band(self) -> tuple[float | None, float | None] | None:
        """The band on the token ratio ρ that mismatch_band_frac counts outside of (None: not a band on ρ)."""
        if self.name in ("tis", "seq_tis", "mis", "seq_mis", "icepop") or (self.name == "decoupled" and self.high):
            return self.low, self.high
        return None


def inputs(batch, logp: torch.Tensor, old_logp: torch.Tensor | None = None, method: str | None = None) -> Inputs:
    """The correction's inputs from a batch: log π_old (the batch's, unless given), log μ, log π_θ (detached), the
    advantages where the method stored them (None where not: a correction that reads them refuses the batch)."""
    d = batch.data
    return Inputs(d["old_logp"] if old_logp is None else old_logp, d["mu_logp"], logp.detach(),
                  batch.completion_mask, d.get("advantages"), method)


def mismatch(old_logp: torch.Tensor, mu_logp: torch.Tensor, mask: torch.Tensor,
             correction: Correction | None = None) -> dict[str, torch.Tensor]:
    """Per-token measurements of μ against π_old on the completion tokens (1-D tensors, one value a token):

        mismatch_kl_k1     log(μ/π_old)                   mean: KL(μ‖π_old) by k1 (the tokens are samples of μ)
        mismatch_kl_k3     ρ − log ρ − 1, ρ = π_old/μ     mean: KL(μ‖π_old) by k3 (gcframe.kl, non-negative)
        mismatch_ratio     ρ                              mean and max of π_old/μ
        mismatch_far       1[|log ρ| > log FAR]           the same threshold for every run
        mismatch_band      1[ρ outside the correction's band]   (only for a correction with a band on ρ)
    """
    keep = mask > 0
    log_rho = (old_logp - mu_logp).double()[keep]
    rho = log_rho.exp()
    out = {"mismatch_kl_k1": -log_rho, "mismatch_kl_k3": rho - log_rho - 1, "mismatch_ratio": rho,
           "mismatch_far": (log_rho.abs() > math.log(FAR)).double()}
    band = correction.band() if correction is not None else None
    if band is not None:
        out["mismatch_band"] = (~_band(rho, *band)).double()
    return out
