"""Per-token estimators of KL(π_θ ‖ π_ref) from tokens sampled from π_θ (Schulman 2020, "Approximating KL").

With ρ = π_ref(o_t|·) / π_θ(o_t|·) for a sampled token (seed, "The k3 KL Estimator"):

    k1 = −log ρ               unbiased, but negative whenever π_ref > π_θ at the token
    k2 = ½ (log ρ)²           biased (≈ KL to second order), ≥ 0
    k3 = ρ − log ρ − 1        unbiased and ≥ 0 (log ρ ≤ ρ − 1), 0 iff ρ = 1

*As values* (what a KL metric reports) k1 and k3 are unbiased. *As loss terms* differentiated through log π_θ
only, what matters is the expected gradient, on-policy (o_t ~ π_θ), at one position (Σ_v is over the vocabulary;
checked exactly in tests/test_estimators.py, measured in experiments/estimators.py):

    ∇k1 = ∇log π_θ                 E[∇k1] = Σ_v ∇π_θ(v) = 0                      regularises nothing
    ∇k2 = −log ρ · ∇log π_θ        E[∇k2] = ∇KL(π_θ ‖ π_ref)                       the reverse KL (the seed's)
    ∇k3 = (1 − ρ) ∇log π_θ         E[∇k3] = −Σ_v π_ref ∇log π_θ = ∇KL(π_ref ‖ π_θ)  the FORWARD KL
    ∇(r·k3) = −r log ρ ∇log π_θ    E_{π_old}[∇(r·k3)] = ∇KL(π_θ ‖ π_ref)           reverse, also off-policy

where r = π_θ/π_old is the differentiable importance ratio (the "unbiased KL estimate" of the DeepSeek-V3.2
report, 2025; TRL's `use_bias_correction_kl`). With samples from π_old ≠ π_θ (μ > 1 inner epochs)
only r·k3 keeps its target: E_{π_old}[r·g] = E_{π_θ}[g]. k1 folded into the *reward* (PPO's placement) is a
different thing: there −β k1 is an advantage, and E[k1 ∇log π_θ] = ∇KL(π_θ‖π_ref) (`methods.ppo`).
"""
from __future__ import annotations

import torch

ESTIMATORS = ("k1", "k2", "k3", "k3_ratio")
LOSS_ESTIMATORS = ("k3_ratio", "k2", "k3")
"""The estimators that regularise something as a loss term (k1's expected gradient is 0); the first is the default."""
DIVERGENCE = {
    "k1": "nothing (E[∇k1] = 0; fold k1 into the reward instead, as PPO does)",
    "k2": "KL(π_θ‖π_ref) on-policy; biased once π_θ ≠ π_old (μ > 1)",
    "k3": "KL(π_ref‖π_θ), the forward KL (DeepSeekMath's k3 in the loss)",
    "k3_ratio": "KL(π_θ‖π_ref), on- and off-policy (k3 times the differentiable ratio π_θ/π_old)",
}
"""What the expected gradient of each estimator, as a loss term, is the gradient of."""


def log_ratio(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """log ρ = log π_ref − log π_θ [N, T]."""
    return ref_logp - logp


def k1(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    return -log_ratio(ref_logp, logp)


def k2(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    return 0.5 * log_ratio(ref_logp, logp) ** 2


def k3(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    log_rho = log_ratio(ref_logp, logp)
    return log_rho.exp() - log_rho - 1


def _need_ratio(kind: str, ratio):
    if ratio is None:
        raise ValueError(f"KL estimator '{kind}' needs the importance ratio r = π_θ/π_old")
    return ratio


def kl_estimate(ref_logp: torch.Tensor, logp: torch.Tensor, kind: str = "k3",
                ratio: torch.Tensor | None = None) -> torch.Tensor:
    """The estimator's value [N, T]; k3_ratio is r·k3 with r = π_θ/π_old [N, T] (an unbiased KL(π_θ‖π_ref) value
    from tokens sampled from π_old)."""
    if kind == "k3":
        return k3(ref_logp, logp)
    if kind == "k1":
        return k1(ref_logp, logp)
    if kind == "k2":
        return k2(ref_logp, logp)
    if kind == "k3_ratio":
        return _need_ratio(kind, ratio) * k3(ref_logp, logp)
    raise ValueError(f"unknown KL estimator '{kind}': choose one of {', '.join(ESTIMATORS)}")


def kl_grad_coefficient(ref_logp: torch.Tensor, logp: torch.Tensor, kind: str = "k3",
                        ratio: torch.Tensor | None = None) -> torch.Tensor:
    """c [N, T] such that ∇ KL̂ = c · ∇log π_θ (no grad):

        k1 -> 1        k2 -> −log ρ        k3 -> 1 − ρ        k3_ratio -> −r·log ρ  (∇(r·k3) = r(k3 + 1 − ρ)∇log π_θ)
    """
    with torch.no_grad():
        log_rho = log_ratio(ref_logp, logp)
        if kind == "k3":
            return 1 - log_rho.exp()
        if kind == "k1":
            return torch.ones_like(logp)
        if kind == "k2":
            return -log_rho
        if kind == "k3_ratio":
            return -_need_ratio(kind, ratio) * log_rho
    raise ValueError(f"unknown KL estimator '{kind}': choose one of {', '.join(ESTIMATORS)}")
