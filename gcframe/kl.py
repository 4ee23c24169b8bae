"""Per-token estimators of KL(π_θ ‖ π_ref) from tokens sampled from π_θ (Schulman 2020, "Approximating KL").

With ρ = π_ref(o_t|·) / π_θ(o_t|·) for a sampled token (seed, "The k3 KL Estimator"):

    k1 = −log ρ               unbiased, but negative whenever π_ref > π_θ at the token
    k3 = ρ − log ρ − 1        unbiased and ≥ 0 (log ρ ≤ ρ − 1), 0 iff ρ = 1

Gradients with respect to θ (used to write the GC of a KL term):
    ∇k1 = ∇log π_θ            ∇k3 = (1 − ρ) ∇log π_θ
"""
from __future__ import annotations

import torch

ESTIMATORS = ("k1", "k3")


def log_ratio(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """log ρ = log π_ref − log π_θ [N, T]."""
    return ref_logp - logp


def k1(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    return -log_ratio(ref_logp, logp)


def k3(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    log_rho = log_ratio(ref_logp, logp)
    return log_rho.exp() - log_rho - 1


def kl_estimate(ref_logp: torch.Tensor, logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    if kind == "k3":
        return k3(ref_logp, logp)
    if kind == "k1":
        return k1(ref_logp, logp)
    raise ValueError(f"unknown KL estimator '{kind}': choose one of {', '.join(ESTIMATORS)}")


def kl_grad_coefficient(ref_logp: torch.Tensor, logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """c such that ∇ KL̂ = c · ∇log π_θ: k3 -> 1 − ρ, k1 -> 1 (no grad)."""
    with torch.no_grad():
        if kind == "k3":
            return 1 - log_ratio(ref_logp, logp).exp()
        if kind == "k1":
            return torch.ones_like(logp)
    raise ValueError(f"unknown KL estimator '{kind}': choose one of {', '.join(ESTIMATORS)}")
