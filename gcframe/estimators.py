"""Exact moments of policy-gradient and KL estimators, built on the project's own advantage and KL code.

Used by experiments/estimators.py (the estimator lab) and tests/test_estimators.py. Everything here is exact:
sums over an enumerated outcome space, no sampling.

**Baselines (seed, "A Baseline You Can Sample", "One Honest Dependence").** A prompt q with a 0/1 reward and
success rate p; G completions o_1..o_G ~ π(·|q); scores s_i = ∇log π(o_i|q); an estimator

    ĝ_q = (1/G) Σ_i A_i s_i,     A = adv(r_1..r_G)   (gcframe.advantages.group_advantages & co.)

With u_a = Σ_o π(o) 1[r(o) = a] s(o) we have u_1 = g*_q = ∇E[r] and u_0 = −g*_q (Σ_o π s = 0). When A depends on
the rewards only (an action-independent baseline, any scaling), exchangeability gives, with d_a = Σ_o π(o)
1[r(o)=a] ‖s(o)‖² and the conditional moments of A over the Binomial(G, p) count of successes:

    E[ĝ_q]   = (E[A_1|r_1=1] − E[A_1|r_1=0]) · g*_q                                         (a pure rescale)
    E‖ĝ_q‖² = (1/G) Σ_a E[A_1²|r_1=a] d_a + (1 − 1/G) ‖g*_q‖² Σ_{a,b} ±E[A_1 A_2|r_1=a, r_2=b]   (+ if a = b)

**KL terms (gcframe.kl).** Per position, from full-vocabulary log-probs: the estimators' values (bias, std,
fraction negative against the exact KL) and their expected gradients as loss terms against ∇ of both KLs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gcframe.advantages import group_advantages, group_std, zero_variance, gae
from gcframe.kl import k1, k2, k3, kl_grad_coefficient

BASELINES = ("reinforce", "mean", "loo", "critic", "value", "best_constant")
"""reinforce: no baseline; mean: GRPO's group mean; loo: RLOO's leave-one-out mean; critic: a learned V_ψ(q);
value: the true V(q) = p_q; best_constant: the variance-minimising constant b*_q = d_1/(d_0 + d_1) per prompt."""


# -- advantages of one group, the project's code -------------------------------------------------------------------
def advantages(kind: str, rewards: torch.Tensor, group_ids: torch.Tensor, scale_by_std: bool,
               baseline: torch.Tensor | None = None) -> torch.Tensor:
    """Â [N] of estimator `kind` for rewards [N] in groups; `baseline` [N] for critic/value/best_constant.

    mean, loo: gcframe.advantages.group_advantages (GRPO, RLOO). The others: r − b, and with std scaling
    (r − b)/std_g(r) with the same group std (n − 1) and the same zero-variance rule (Â = 0) as GRPO.
    """
    if kind in ("mean", "loo"):
        return group_advantages(rewards, group_ids, scale_by_std, leave_one_out=kind == "loo")
    adv = rewards if kind == "reinforce" else rewards - baseline
    if scale_by_std:
        adv = (adv / group_std(rewards, group_ids).clamp(min=1e-6)).masked_fill(zero_variance(rewards, group_ids), 0)
    return adv


@dataclass
class Moments:
    """Conditional moments of A_1 (A_2) given the rewards r_1 (r_2) ∈ {0, 1} of one group, exact."""

    m1: torch.Tensor  # [2]: E[A_1 | r_1 = a], a = 0, 1
    m2: torch.Tensor  # [2]: E[A_1² | r_1 = a]
    cross: torch.Tensor  # [2, 2]: E[A_1 A_2 | r_1 = a, r_2 = b]

    @property
    def shrink(self) -> float:
        """α with E[ĝ_q] = α g*_q."""
        return float(self.m1[1] - self.m1[0])

    def second_moment(self, d: torch.Tensor, gnorm2: float, G: int) -> float:
        """E‖ĝ_q‖² from d [2] (d_a = Σ π 1[r=a] ‖s‖²) and ‖g*_q‖² (module docstring)."""
        sign = torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=self.cross.dtype)
        same = float((self.m2 * d).sum()) / G
        return same + (1 - 1 / G) * gnorm2 * float((sign * self.cross).sum()) if G > 1 else same


def binomial_pmf(G: int, p: float) -> torch.Tensor:
    """P(k successes of G) [G+1], float64, exact at p ∈ {0, 1}."""
    k = torch.arange(G + 1, dtype=torch.float64)
    logc = torch.lgamma(torch.tensor(G + 1.0, dtype=torch.float64)) - torch.lgamma(k + 1) - torch.lgamma(G - k + 1)
    if p <= 0 or p >= 1:
        return (k == (G if p >= 1 else 0)).to(torch.float64)
    return (logc + k * math.log(p) + (G - k) * math.log1p(-p)).exp()


def group_moments(kind: str, G: int, p: float, scale_by_std: bool, baseline: float = 0.0) -> Moments:
    """Moments of A over all reward patterns of a group of G with success rate p: by exchangeability one group
    per count k = 0..G (rewards [1]*k + [0]*(G−k)), weighted by Binomial(G, p), through `advantages`."""
    k = torch.arange(G + 1)
    r = (torch.arange(G).unsqueeze(0) < k.unsqueeze(1)).to(torch.float64)  # [G+1, G], row k: k successes first
    gids = k.unsqueeze(1).expand(G + 1, G).reshape(-1)
    b = torch.full((r.numel(),), float(baseline), dtype=torch.float64)
    A = advantages(kind, r.reshape(-1), gids, scale_by_std, b).view(G + 1, G)  # [G+1, G]
    a1 = A[:, 0].where(k >= 1, torch.zeros(())).to(torch.float64)  # A of a success (row k ≥ 1)
    a0 = A[:, -1].where(k < G, torch.zeros(())).to(torch.float64)  # A of a failure (row k < G)
    P, kf = binomial_pmf(G, p), k.to(torch.float64)
    n = {1: kf, 0: G - kf}  # positions with reward a in row k
    av = {1: a1, 0: a0}
    pa = {1: p, 0: 1 - p}
    m1, m2, cross = torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64)
    for a in (0, 1):
        if pa[a] <= 0:
            continue  # never happens: its u_a and d_a are 0
        m1[a] = (P * n[a] / G * av[a]).sum() / pa[a]  # E[A_1 1[r_1=a]] / P(r_1=a)
        m2[a] = (P * n[a] / G * av[a] ** 2).sum() / pa[a]
        for c in (0, 1):
            if G < 2 or pa[c] <= 0:
                continue
            pairs = n[a] * (n[c] - (1.0 if a == c else 0.0)) / (G * (G - 1))  # ordered pairs (i ≠ j) with (a, c)
            cross[a, c] = (P * pairs * av[a] * av[c]).sum() / (pa[a] * pa[c])
    return Moments(m1, m2, cross)


def batch_summary(alpha: torch.Tensor, second: torch.Tensor, gram: torch.Tensor, n_prompts: float) -> dict:
    """Bias, variance and MSE of ĝ = (1/B) Σ_b ĝ_{q_b}, B prompts drawn uniformly with replacement from Q.

    alpha [Q]: E[ĝ_q] = α_q g*_q; second [Q]: E‖ĝ_q‖²; gram [Q, Q]: g*_q · g*_q'. g* = mean_q g*_q,
    E[ĝ] = mean_q α_q g*_q, Var = (mean_q E‖ĝ_q‖² − ‖E ĝ‖²)/B, MSE = ‖E ĝ − g*‖² + Var. var_within is the part
    of Var that the sampling of completions adds, mean_q (E‖ĝ_q‖² − α_q² ‖g*_q‖²)/B (the rest is which prompts).
    nsr = Var/‖E ĝ‖², the noise-to-signal ratio, does not change when ĝ is multiplied by a constant (a learning
    rate), so it compares estimators of different lengths (std scaling, the group mean's 1 − 1/G).
    """
    Q = len(alpha)
    one = torch.full((Q,), 1.0 / Q, dtype=torch.float64)
    w = alpha.to(torch.float64) / Q
    g2, e2, eg = one @ gram @ one, w @ gram @ w, w @ gram @ one
    var = (second.mean() - e2) / n_prompts
    within = (second - alpha ** 2 * gram.diagonal()).mean() / n_prompts
    bias2 = (e2 - 2 * eg + g2).clamp(min=0)
    return {"rel_bias": float(bias2.sqrt() / g2.sqrt()), "cosine": float(eg / (e2.sqrt() * g2.sqrt()).clamp(min=1e-300)),
            "variance": float(var), "var_within": float(within), "nsr": float(var / e2), "nsr_within": float(within / e2),
            "mse": float(bias2 + var), "rel_mse": float((bias2 + var) / g2),
            "g_star_norm2": float(g2), "mean_norm2": float(e2)}


def effective_weight(G: int, p: float) -> float:
    """What std scaling does to a prompt of success rate p: α_{mean+std}(p) / α_mean = E-shrink with / without."""
    return group_moments("mean", G, p, True).shrink / group_moments("mean", G, p, False).shrink


# -- KL estimators at one position, from full-vocabulary log-probs ------------------------------------------------
def kl_value_stats(logp: torch.Tensor, ref_logp: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per position [...], tokens v ~ π_θ: exact KL(π_θ‖π_ref) and each estimator's mean, std, P(k < 0).

    logp, ref_logp [..., V] log-softmax of π_θ and π_ref.
    """
    p = logp.exp()
    out = {"kl": (p * (logp - ref_logp)).sum(-1)}
    for name, fn in (("k1", k1), ("k2", k2), ("k3", k3)):
        v = fn(ref_logp, logp)  # [..., V]: the estimator at every token
        mean = (p * v).sum(-1)
        out[f"{name}_mean"] = mean
        out[f"{name}_std"] = ((p * v ** 2).sum(-1) - mean ** 2).clamp(min=0).sqrt()
        out[f"{name}_neg"] = (p * (v < 0)).sum(-1)
    return out


def exact_kls(z: torch.Tensor, ref_logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(KL(π_θ‖π_ref), KL(π_ref‖π_θ)) summed over positions, π_θ = softmax(z) [..., V], differentiable in z."""
    lp = torch.log_softmax(z, -1)
    return (lp.exp() * (lp - ref_logp)).sum(), (ref_logp.exp() * (ref_logp - lp)).sum()


def loss_term_gradient(z: torch.Tensor, ref_logp: torch.Tensor, old_logp: torch.Tensor, kind: str) -> torch.Tensor:
    """E_{v~π_old}[∇_z KL̂(v)] per position: ∇_z Σ_v π_old(v) c(v) log π_θ(v), c = gcframe.kl.kl_grad_coefficient
    (what GRPO's GC multiplies by −β); z [..., V] logits of π_θ (a leaf). Returns [..., V]."""
    z = z.detach().requires_grad_(True)
    lp = torch.log_softmax(z, -1)
    c = kl_grad_coefficient(ref_logp, lp.detach(), kind, ratio=(lp.detach() - old_logp).exp())
    (g,) = torch.autograd.grad((old_logp.exp() * c * lp).sum(), z)
    return g


def two_token_gradients(z1: torch.Tensor, z2: torch.Tensor, ref1: torch.Tensor, ref2: torch.Tensor,
                        old1: torch.Tensor, old2: torch.Tensor) -> dict[str, torch.Tensor]:
    """Expected gradients over every two-token completion (o_1, o_2), in the space of the logits (z1 [V] at the
    first position, z2 [V, V] at the second given each o_1): targets and estimators, each a flat [V + V²] vector.

    Targets: ∇ of the sequence KLs (through the prefix too) and of the per-token reverse KL with the prefix
    distribution held fixed ("rev_tok"). Estimators: E_{o~π_old}[Σ_t c_t ∇log π_θ(o_t|o_<t)] for the per-token
    loss terms k1, k2, k3, k3_ratio, and k1 folded into the reward as PPO does (advantage = the return
    Σ_{t'≥t} k1_{t'} of log π_old − log π_ref by gcframe.advantages.gae with V = 0, γ = λ = 1, times the ratio r_t).
    """
    V = z1.shape[-1]
    z1, z2 = z1.detach().requires_grad_(True), z2.detach().requires_grad_(True)
    lp1, lp2 = torch.log_softmax(z1, -1), torch.log_softmax(z2, -1)  # [V], [V, V]
    seq = lp1.unsqueeze(1) + lp2  # log π_θ(o_1, o_2) [V, V]
    ref_seq, old_seq = ref1.unsqueeze(1) + ref2, old1.unsqueeze(1) + old2
    grad = lambda f: torch.cat([g.reshape(-1) for g in torch.autograd.grad(f, (z1, z2), retain_graph=True)])  # noqa: E731
    out = {"rev_seq": grad((seq.exp() * (seq - ref_seq)).sum()),
           "fwd_seq": grad((ref_seq.exp() * (ref_seq - seq)).sum())}
    p1 = lp1.exp().detach()
    out["rev_tok"] = grad((lp1.exp() * (lp1 - ref1)).sum() + (p1.unsqueeze(1) * lp2.exp() * (lp2 - ref2)).sum())
    # per-token loss terms on every completion: tokens [V², 2], weights π_old(o)
    logp = torch.stack([lp1.unsqueeze(1).expand(V, V), lp2], -1).reshape(V * V, 2)  # [V², 2] with grad
    ref = torch.stack([ref1.unsqueeze(1).expand(V, V), ref2], -1).reshape(V * V, 2)
    old = torch.stack([old1.unsqueeze(1).expand(V, V), old2], -1).reshape(V * V, 2)
    w = old_seq.exp().reshape(V * V, 1)  # π_old(o_1, o_2) [V², 1]
    ratio = (logp.detach() - old).exp()
    for kind in ("k1", "k2", "k3", "k3_ratio"):
        c = kl_grad_coefficient(ref, logp.detach(), kind, ratio)  # [V², 2]
        out[kind] = grad((w * c * logp).sum())
    ret, _ = gae(old - ref, torch.zeros_like(old), torch.ones_like(old), gamma=1.0, lam=1.0)  # Σ_{t'≥t} k1_{t'}
    out["k1_reward"] = grad((w * ret * ratio * logp).sum())
    return out


def compare(g: torch.Tensor, target: torch.Tensor) -> dict:
    """‖g − target‖/‖target‖ and cos(g, target)."""
    tn = target.norm().clamp(min=1e-300)
    return {"rel_err": float((g - target).norm() / tn), "cosine": float(g @ target / (g.norm().clamp(min=1e-300) * tn))}
