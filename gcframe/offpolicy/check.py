"""`gcframe.verify`'s rows for the off-policy corrections: the engine's gradient with the correction against the
gradient of the corrected objective as its source writes it (gcframe.textbook.off_policy), on constructed float64
inputs that take every branch of every correction, with no model (any CPU, milliseconds).

The inputs (`inputs`): 8 completions of two prompts (lengths 5, 3, 4, 1, 5, 2, 5, 4; 0/1 rewards mixed in each
group), log π_θ, π_old = π_θ/r and μ = π_old/ρ with the token ratios ρ = π_old/μ and r = π_θ/π_old set by hand:

    ρ per token    6 (above every cap), 3 and 2.5 and 4 and 2.1 (between 2 and 5), 0.3 and 0.45 and 0.2 (below 0.5),
                   the rest inside [0.5, 2]; per sequence Π_t ρ_t = 6, 0.3, 1.35, 3, 1.35, 0.88, 0.624, 3.98
    r per token    1.35 on an Â > 0 sequence and 0.67 on an Â < 0 one: GRPO's clip (ε = 0.2) bites on both sides
    opsm (δ 0.3)   sequence 1 (Â < 0, mean log(μ/π_θ) = 0.40) is dropped, 2 (Â < 0, −0.09) kept, 6 (Â > 0, 0.39) kept

Each row: the engine's −aggregate((w·GC).detach()·log π_θ) (methods/grpo.py's GC, β = 0.1, k3_ratio, times
gcframe.offpolicy.corrections' factor; for naive, GC computed with log μ stored as log π_old) differentiated with
respect to log π_θ, against the same derivative of `corrected_grpo_loss`; and the branches the textbook form took.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from gcframe.batch import Batch
from gcframe.engine import weighted_mle_loss
from gcframe.offpolicy.corrections import Correction, inputs as correction_inputs
from gcframe.textbook.off_policy import corrected_grpo_loss, weights

LENGTHS = (5, 3, 4, 1, 5, 2, 5, 4)
REWARDS = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0)  # two groups of four: Â > 0 on sequences 0, 3, 6
RHO = ((6, 1, 1, 1, 1), (0.3, 1, 1), (1.5, 0.9, 1, 1), (3,), (0.45, 1.2, 2.5, 1.1, 0.9), (0.8, 1.1),
       (0.2, 0.6, 1, 1.3, 4), (1.9, 1.05, 2.1, 0.95))
"""ρ = π_old/μ of each sequence's tokens."""
LOG_R = ((0.3, 0.3, 0, -0.1, 0.1), (0, 0.1, -0.1), (0.1, -0.1, 0.05, 0), (0.2,), (-0.4, -0.4, 0.1, 0, -0.05),
         (0.25, -0.3), (-0.3,) * 5, (0, 0.15, -0.25, 0.05))
"""log r = log π_θ − log π_old of each sequence's tokens."""

CHECKS = {  # row label: (correction, lower, upper) — thresholds that put tokens on every side
    "none": ("none", None, None), "tis": ("tis", None, 2.0), "tis lower": ("tis", 0.5, 2.0),
    "seq_tis": ("seq_tis", None, 2.0), "mis": ("mis", 0.5, 2.0), "seq_mis": ("seq_mis", 0.5, 2.0),
    "icepop": ("icepop", 0.5, 5.0), "opsm": ("opsm", None, 0.3), "decoupled": ("decoupled", None, None),
    "decoupled cap": ("decoupled", None, 5.0), "naive": ("naive", None, None),
}
BRANCHES = {  # row label: the textbook form's branches that must each be taken by some token
    "none": ["w = 1"], "tis": ["ρ > C: w = C", "w = ρ"],
    "tis lower": ["ρ > C: w = C", "ρ < lower: w = lower", "w = ρ"], "seq_tis": ["Π ρ > C: w = C", "w = Π ρ"],
    "mis": ["ρ < lower: w = 0", "ρ > upper: w = 0", "w = ρ"],
    "seq_mis": ["Π ρ < lower: w = 0", "Π ρ > upper: w = 0", "w = Π ρ"],
    "icepop": ["ρ < lower: w = 0", "ρ > upper: w = 0", "w = ρ"],
    "opsm": ["Â < 0, far: w = 0", "Â < 0, near: w = 1", "Â ≥ 0, far: w = 1"],
    "decoupled": ["w = ρ ≠ 1"], "decoupled cap": ["ρ > cap: w = 0", "w = ρ ≠ 1"], "naive": ["w = 1"],
}
N, G, T = len(LENGTHS), 4, max(LENGTHS)


def _table(rows) -> torch.Tensor:
    out = torch.zeros(N, T, dtype=torch.float64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
    return out


def inputs() -> dict[str, torch.Tensor]:
    """The constructed float64 tensors (see the module's docstring): mask, log π_θ, log π_old, log μ, log π_ref."""
    mask = (torch.arange(T) < torch.tensor(LENGTHS).unsqueeze(1)).to(torch.float64)  # [N, T]
    idx = torch.arange(N * T, dtype=torch.float64).view(N, T)
    logp = torch.log(0.15 + 0.7 * (torch.sin(idx) * 0.5 + 0.5)) * mask  # log π_θ in [log 0.15, log 0.85]
    old = (logp - _table(LOG_R)) * mask
    log_rho = torch.log(torch.where(mask > 0, _table(RHO), torch.ones_like(mask)))
    mu = (old - log_rho) * mask
    ref = (logp + 0.2 * torch.cos(idx)) * mask
    return {"mask": mask, "logp": logp, "old": old, "mu": mu, "ref": ref}


def check(label: str, d: dict | None = None) -> dict:
    """One row: {label, max_rel_diff, branches {name: tokens}, missing [branches not taken], clip_low, clip_high}."""
    from gcframe.registry import get_method

    grpo = get_method("grpo")  # the GC the corrections multiply: the registry's, its module never imported here
    d = d or inputs()
    name, low, high = CHECKS[label]
    corr = Correction(name, low, high)
    rewards = torch.tensor(REWARDS, dtype=torch.float64)
    old = d["mu"] if corr.replaces_old else d["old"]  # naive: μ stored as π_old, nothing recomputed
    batch = Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long), torch.full((N, T), 5),
                  d["mask"], torch.arange(N) // G, {"rewards": rewards, "correct": rewards.clone(), "old_logp": old,
                                                    "mu_logp": d["mu"], "ref_logp": d["ref"]})
    method = grpo(grpo.Config.from_dict({"beta": 0.1}, "grpo"), SimpleNamespace())
    method.prepare(batch)
    logp = d["logp"].clone().requires_grad_()
    gc = method.coefficients(batch, logp)  # [N, T]
    stats = method.pop_stats()
    if corr.is_factor:
        w_engine, _ = corr.factor(correction_inputs(batch, logp, d["old"]))
        gc = gc * w_engine
    (g_engine,) = torch.autograd.grad(weighted_mle_loss(gc, logp, d["mask"], method.cfg.aggregation), logp)
    seq_adv = (batch.data["advantages"] * d["mask"]).sum(-1)  # [N]: the sign of each sequence's Â
    w, seen = weights(name, d["old"], d["mu"], d["logp"], seq_adv, d["mask"], low, high)
    logp2 = d["logp"].clone().requires_grad_()
    (g_text,) = torch.autograd.grad(corrected_grpo_loss(method, batch, logp2, w, old), logp2)
    scale = g_text.abs().max().clamp(min=1e-300)
    return {"label": label, "max_rel_diff": float((g_engine - g_text).abs().max() / scale), "branches": seen,
            "missing": [b for b in BRANCHES[label] if not seen.get(b)],
            "clip_low": float(stats["clip_low_frac"]), "clip_high": float(stats["clip_high_frac"])}


def rows() -> list[dict]:
    return [check(label) for label in CHECKS]


def passed(row: dict, tolerance: float) -> bool:
    """Gradients equal, every branch of the correction taken, and GRPO's clip biting on both sides."""
    return (math.isfinite(row["max_rel_diff"]) and row["max_rel_diff"] <= tolerance and not row["missing"]
            and row["clip_low"] > 0 and row["clip_high"] > 0)
