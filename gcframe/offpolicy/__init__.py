"""Off-policy training on the one engine: three policies, two dials on the data source, one correction on GC.

    μ       the behaviour policy that sampled: its per-token log-probs are recorded where the samples are made
            (Batch.data["mu_logp"], gcframe.sampling), as the rewards are
    π_old   the proximal policy: the learner's weights at the start of the step, recomputed by the engine on the
            sampled tokens (Batch.data["old_logp"]); every ratio r = π_θ/π_old and every clip is measured against it
    π_θ     the live policy being trained

Two dials make μ differ from π_old (train.staleness, train.sampler_dtype; `sampler.Sampler`):

    staleness k       the sampler generates with the learner's weights from k steps ago: θ_{max(0, s−k)} at step s,
                      as a pipeline with k batches in flight does (PipelineRL, verl's one-step-off, AReaL)
    sampler_dtype     the sampler runs a bfloat16 or float16 copy while the learner stays float32: the mismatch an
                      inference engine (vLLM, SGLang) brings

and one correction turns the mismatch into a per-token factor w_{i,t} on GC, computed from ρ_{i,t} = π_old/μ of
the sampled token (`corrections`): the engine applies GC' = w·GC once, after the method's coefficients, so a
method file never sees it. This module holds what the configuration needs (names, defaults, domains) without
importing torch; the factors are in `corrections`, the sampler in `sampler`.
"""
from __future__ import annotations

import math

CORRECTIONS = ("none", "tis", "seq_tis", "mis", "seq_mis", "icepop", "opsm", "decoupled", "naive")
"""train.correction's values (gcframe.offpolicy.corrections has each one's formula and source)."""

DEFAULTS = {"tis": (None, 2.0), "seq_tis": (None, 2.0), "mis": (0.5, 2.0), "seq_mis": (0.5, 2.0),
            "icepop": (0.5, 5.0), "opsm": (None, 0.5), "decoupled": (None, None)}
"""(low, high) each correction uses when train.correction_low / correction_high are null: TIS's cap C = 2 (Yao et al.
2025), the masks' band [0.5, 2], IcePop's [0.5, 5] (Ring-1T; OpenRLHF's defaults), DeepSeek-V3.2's δ = 0.5 (the value
TRL's off_policy_mask_threshold documents), AReaL's decoupled loss without a cap (its behav_imp_weight_cap: None)."""

USES_LOW = {"tis", "seq_tis", "mis", "seq_mis", "icepop"}
"""The corrections that read a lower threshold; the others refuse one."""

SAMPLER_DTYPES = ("float32", "bfloat16", "float16")
"""train.sampler_dtype's values."""

FAR = 2.0
"""mismatch_far_frac counts the tokens with |log(π_old/μ)| > log FAR: one threshold for every run, whatever its
correction, so that the mismatch of two runs can be compared."""


METRICS = {
    "mismatch_kl_k1": "KL(μ‖π_old) by k1: the mean of log(μ/π_old) over the batch's tokens (samples of μ)",
    "mismatch_kl_k3": "KL(μ‖π_old) by k3: the mean of ρ − log ρ − 1, ρ = π_old/μ (non-negative, gcframe.kl)",
    "mismatch_ratio_mean": "the mean of ρ = π_old/μ over the tokens (1 on average when μ and π_old agree)",
    "mismatch_ratio_max": "the largest ρ of the batch (over every process)",
    "mismatch_far_frac": f"the fraction of tokens with |log ρ| > log {FAR:g}, one threshold for every run",
    "mismatch_band_frac": "the fraction of tokens whose ρ lies outside the correction's band (tis, seq_tis, mis, "
                          "seq_mis, icepop, decoupled with a cap)",
    "correction_weight_mean": "the mean of the correction's factor w over the tokens",
    "correction_frac": "the fraction of tokens whose factor the correction truncated or set to 0",
    "sampler_lag": "how many steps behind the learner this step's sampler was: min(step, train.staleness)",
}
"""What a step logs about off-policy data (metrics.jsonl): the mismatch whenever π_old is computed on sampled data (a
reused batch, or a dial on), the correction's columns when it is a factor, the lag when a sampler is kept."""


def thresholds(correction: str, low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """(low, high) the correction runs with: the given values, a null one replaced by the correction's default."""
    d_low, d_high = DEFAULTS.get(correction, (None, None))
    return (d_low if low is None else low), (d_high if high is None else high)


def dials_on(tcfg) -> bool:
    """Whether the data are off-policy by construction: a lagging or lower-precision sampler."""
    return tcfg.staleness > 0 or tcfg.sampler_dtype != "float32"


def check_train(tcfg) -> None:
    """train.staleness, sampler_dtype, correction and its thresholds, each refused in one line outside its domain
    (gcframe.errors.UserError); a sampler dtype is also run once on this machine (`sampler.check_dtype`)."""
    from gcframe.errors import UserError

    k = tcfg.staleness
    if k >= tcfg.steps:
        raise UserError(f"train.staleness ({k}) must be below train.steps ({tcfg.steps}): a sampler {k} steps behind "
                        f"would generate every batch of the run with the starting weights; lower it or train longer")
    if tcfg.pipeline and k < 1:
        raise UserError("train.pipeline generates k batches ahead of the learner, and train.staleness is 0: set "
                        "staleness >= 1 (with 0 the sampler would wait for every step's weights), or pipeline: false")
    if tcfg.sampler_dtype not in SAMPLER_DTYPES:
        raise UserError(f"train.sampler_dtype must be one of {', '.join(SAMPLER_DTYPES)}, got "
                        f"{tcfg.sampler_dtype!r}")
    if tcfg.sampler_dtype != "float32":
        from gcframe.offpolicy.sampler import check_dtype

        check_dtype(tcfg.sampler_dtype)
    name = tcfg.correction
    if name not in CORRECTIONS:
        raise UserError(f"train.correction must be one of {', '.join(CORRECTIONS)}, got {name!r} "
                        "(docs/concepts/off-policy.md)")
    for key in ("correction_low", "correction_high"):
        v = getattr(tcfg, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise UserError(f"train.{key} must be a finite number or null (the correction's default), got {v!r}")
    given_low, given_high = tcfg.correction_low, tcfg.correction_high
    if name in ("none", "naive") and (given_low is not None or given_high is not None):
        raise UserError(f"train.correction {name} has no thresholds: drop train.correction_low / correction_high")
    if name not in USES_LOW and given_low is not None:
        raise UserError(f"train.correction {name} has no lower threshold: drop train.correction_low (it reads "
                        "correction_high only)")
    low, high = thresholds(name, given_low, given_high)
    if name == "opsm":
        if high < 0:
            raise UserError(f"train.correction_high is opsm's δ, a bound on a sequence's mean log(μ/π_θ) (a KL "
                            f"estimate, >= 0): it must be >= 0, got {high}")
        return
    if name == "decoupled" and high is not None and not high > 1:
        raise UserError(f"train.correction_high is decoupled's cap on π_old/μ (AReaL's behav_imp_weight_cap): it must "
                        f"be > 1, got {high} (a cap at or below 1 drops every token the sampler under-weighted)")
    if high is not None and not high > 0:
        raise UserError(f"train.correction_high (C, the upper threshold on π_old/μ) must be > 0, got {high}")
    if low is not None and low < 0:
        raise UserError(f"train.correction_low (the lower threshold on π_old/μ, a ratio) must be >= 0, got {low}")
    if low is not None and high is not None and not low < high:
        raise UserError(f"train.correction_low ({low}) must be below train.correction_high ({high}): the band "
                        f"[lower, upper] of {name} would keep no ratio")
