"""Advantage estimators and KL estimators, on hand-computed cases (arithmetic in the comments)."""
import math

import pytest
import torch

from gcframe.advantages import gae, group_advantages, group_baseline, process_advantages, whiten, zero_variance
from gcframe.kl import k1, k3, kl_estimate, kl_grad_coefficient


def test_group_advantages_hand_computed_and_zero_variance_group():
    # group 0: r = [1, 0, 0, 0]: mean 0.25, deviations [.75, -.25, -.25, -.25],
    #   unbiased var = (.5625 + 3·.0625)/3 = .25, std = .5 -> Â = [1.5, -.5, -.5, -.5]
    # group 1: r = [1, 1, 1, 1]: zero variance -> Â = 0 (never NaN)
    r = torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1])
    g = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    adv = group_advantages(r, g)
    assert torch.allclose(adv, torch.tensor([1.5, -0.5, -0.5, -0.5, 0, 0, 0, 0]))
    assert torch.isfinite(adv).all()
    assert zero_variance(r, g).tolist() == [False] * 4 + [True] * 4
    # without std scaling: the centred reward r − mean = [.75, -.25, -.25, -.25]
    assert torch.allclose(group_advantages(r, g, scale_by_std=False)[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]))


def test_leave_one_out_advantage():
    # r = [1, 0, 0, 0]: baseline of i = mean of the other three: [0, 1/3, 1/3, 1/3]
    # Â = [1, -1/3, -1/3, -1/3] = G/(G−1)·(r − mean) = 4/3·[.75, -.25, ...]; sums to 0
    r = torch.tensor([1.0, 0, 0, 0, 3, 1])
    g = torch.tensor([0, 0, 0, 0, 1, 1])
    assert torch.allclose(group_baseline(r, g, leave_one_out=True), torch.tensor([0, 1 / 3, 1 / 3, 1 / 3, 1, 3]))
    adv = group_advantages(r, g, scale_by_std=False, leave_one_out=True)
    # group 1 (G = 2): [3 − 1, 1 − 3] = [2, -2]
    assert torch.allclose(adv, torch.tensor([1, -1 / 3, -1 / 3, -1 / 3, 2, -2]))
    assert abs(float(adv[:4].sum())) < 1e-6 and abs(float(adv[4:].sum())) < 1e-6


def test_process_advantages_two_sequences():
    # one group of 2 sequences, T = 4. Step rewards at each step's last token:
    #   seq 0: 1 at t=1, 0 at t=3;   seq 1: 1 at t=2.       R = {1, 0, 1}
    # mean 2/3; unbiased var = ((1/3)² + (2/3)² + (1/3)²)/2 = 1/3, std = 1/√3
    # normalised: 1 -> (1/3)·√3 = 1/√3 ≈ .5774,  0 -> -(2/3)·√3 = -2/√3 ≈ -1.1547
    # Â_t = Σ of normalised rewards at or after t:
    #   seq 0: t0: 1/√3 − 2/√3 = -1/√3, t1: -1/√3, t2: -2/√3, t3: -2/√3
    #   seq 1: t0..t2: 1/√3, t3: 0
    s = 1 / math.sqrt(3)
    step_r = torch.tensor([[0.0, 1, 0, 0], [0, 0, 1, 0]])
    step_m = torch.tensor([[0.0, 1, 0, 1], [0, 0, 1, 0]])
    adv = process_advantages(step_r, step_m, torch.tensor([0, 0]))
    assert torch.allclose(adv, torch.tensor([[-s, -s, -2 * s, -2 * s], [s, s, s, 0]]), atol=1e-6)
    # all step rewards equal -> no signal: 0, never NaN
    flat = process_advantages(step_m.clone(), step_m, torch.tensor([0, 0]))
    assert torch.equal(flat, torch.zeros(2, 4))


def test_gae_three_tokens():
    # r = [0, 0, 1], V = [.5, .6, .7], γ = 1, λ = .5, V after the last token = 0
    # δ2 = 1 − .7 = .3;  δ1 = 0 + .7 − .6 = .1;  δ0 = 0 + .6 − .5 = .1
    # A2 = .3;  A1 = .1 + .5·.3 = .25;  A0 = .1 + .5·.25 = .225;  R = A + V = [.725, .85, 1.0]
    r, v, m = torch.tensor([[0.0, 0, 1]]), torch.tensor([[0.5, 0.6, 0.7]]), torch.ones(1, 3)
    adv, ret = gae(r, v, m, gamma=1.0, lam=0.5)
    assert torch.allclose(adv, torch.tensor([[0.225, 0.25, 0.3]]))
    assert torch.allclose(ret, torch.tensor([[0.725, 0.85, 1.0]]))
    # γ = .5, λ = 1 (Monte-Carlo return − V): A0 = .25·1 − .5 = -.25, A1 = .5·1 − .6 = -.1, A2 = 1 − .7 = .3
    adv, _ = gae(r, v, m, gamma=0.5, lam=1.0)
    assert torch.allclose(adv, torch.tensor([[-0.25, -0.1, 0.3]]))
    # a padded 4th token contributes nothing and gets 0
    adv, ret = gae(torch.tensor([[0.0, 0, 1, 5]]), torch.tensor([[0.5, 0.6, 0.7, 9]]),
                   torch.tensor([[1.0, 1, 1, 0]]), gamma=1.0, lam=0.5)
    assert torch.allclose(adv, torch.tensor([[0.225, 0.25, 0.3, 0]])) and ret[0, 3] == 0


def test_whiten():
    # masked x = [1, 2, 3]: mean 2, unbiased var 1 -> [-1, 0, 1]; the padded 100 -> 0
    x, m = torch.tensor([1.0, 2, 3, 100]), torch.tensor([1.0, 1, 1, 0])
    assert torch.allclose(whiten(x, m), torch.tensor([-1.0, 0, 1, 0]), atol=1e-6)
    assert torch.allclose(whiten(x, m, shift_mean=False), torch.tensor([1.0, 2, 3, 0]), atol=1e-6)


def test_k3_non_negative_and_zero_iff_equal():
    gen = torch.Generator().manual_seed(0)
    logp = -torch.rand(10_000, generator=gen, dtype=torch.float64) * 5
    ref = logp + torch.randn(10_000, generator=gen, dtype=torch.float64) * 2
    assert (k3(ref, logp) >= 0).all()
    assert torch.equal(k3(logp, logp), torch.zeros_like(logp))
    # k1 = −log ρ is negative wherever π_ref > π_θ
    assert (k1(ref, logp) < 0).any() and (k1(ref, logp)[ref > logp] < 0).all()
    # gradient coefficients: ∇k3 = (1 − ρ)∇log π_θ; ∇k1 = ∇log π_θ
    assert torch.allclose(kl_grad_coefficient(ref, logp, "k3"), 1 - (ref - logp).exp())
    assert torch.equal(kl_grad_coefficient(ref, logp, "k1"), torch.ones_like(logp))
    with pytest.raises(ValueError):
        kl_estimate(ref, logp, "k5")
    with pytest.raises(ValueError, match="ratio"):  # r·k3 needs r = π_θ/π_old
        kl_grad_coefficient(ref, logp, "k3_ratio")


def test_k3_monte_carlo_matches_exact_kl():
    # π_θ = p, π_ref = q over 4 tokens; KL(p‖q) = Σ p log(p/q) ≈ 0.2442, KL(q‖p) ≈ 0.3112 (differs by .067)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    q = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=torch.float64)
    exact = float((p * (p / q).log()).sum())
    reverse = float((q * (q / p).log()).sum())
    tol = 0.01
    assert abs(exact - reverse) > 5 * tol  # the check below can tell the right KL from the wrong one
    gen = torch.Generator().manual_seed(0)
    o = torch.multinomial(p, 100_000, replacement=True, generator=gen)  # tokens sampled from π_θ
    est3 = k3(q.log()[o], p.log()[o])  # [S]
    est1 = k1(q.log()[o], p.log()[o])
    # standard errors at 100k samples: k3 ≈ .0016, k1 ≈ .0019; tol = .01 is ~5 of them
    assert abs(float(est3.mean()) - exact) < tol
    assert abs(float(est1.mean()) - exact) < tol
    assert (est3 >= 0).all() and (est1 < 0).any()  # k1 reports negative penalties on tokens where q > p
    assert float(est3.std()) < float(est1.std())  # the control variate ρ − 1 lowers the variance here
