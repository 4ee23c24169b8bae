"""The seed's estimator claims as exact identities on a tiny enumerable policy, float64, to 1e-8.

The policy: K = 3 answers, logits = W x (W [3, 2] the parameters, x a fixed feature), reward r(o) = [1, 0, 1][o],
so p = π(0) + π(2). Every group o_1..o_G (K^G of them) is listed with its probability Π_i π(o_i), so E[ĝ] and
E‖ĝ‖² are sums: the brute-force definition, against which the lab's closed forms (gcframe.estimators) are checked.
"""
import itertools

import pytest
import torch

from gcframe import estimators as est
from gcframe.kl import kl_grad_coefficient

F64 = torch.float64
R = torch.tensor([1.0, 0.0, 1.0], dtype=F64)  # r(o) for the K = 3 answers
TOL = 1e-8


def policy(seed=0):
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(3, 2, generator=gen, dtype=F64, requires_grad=True)
    x = torch.tensor([0.7, -1.3], dtype=F64)
    return W, x


def scores(W, x):
    """π [K] and the score s(o) = ∇_W log π(o) of every answer [K, 6]."""
    logp = torch.log_softmax(W @ x, -1)
    S = torch.stack([torch.autograd.grad(logp[o], W, retain_graph=True)[0].reshape(-1) for o in range(3)])
    return logp.exp().detach(), S


def brute_force(W, x, G, adv_fn):
    """E[ĝ] and E‖ĝ‖² over all K^G groups, ĝ = (1/G) Σ_i A_i s(o_i), A = adv_fn(rewards [G], outcomes [G])."""
    pi, S = scores(W, x)
    mean, second = torch.zeros(S.shape[1], dtype=F64), 0.0
    for group in itertools.product(range(3), repeat=G):
        o = torch.tensor(group)
        prob = pi[o].prod()
        g = (adv_fn(R[o], o).unsqueeze(1) * S[o]).sum(0) / G
        mean, second = mean + prob * g, second + prob * float(g @ g)
    return mean, second


def g_star(W, x):
    """∇ E[r] = ∇ Σ_o π(o) r(o), by autograd of the definition."""
    return torch.autograd.grad((torch.softmax(W @ x, -1) * R).sum(), W)[0].reshape(-1)


def project(kind, scale, b=0.0):
    """The lab's advantages (the project's group_advantages for mean and loo) as adv_fn for one group."""
    return lambda r, o: est.advantages(kind, r, torch.zeros(len(r), dtype=torch.long), scale,
                                       torch.full_like(r, b))


@pytest.mark.parametrize("G", [2, 3, 4])
def test_group_mean_is_shrunk_by_one_minus_one_over_g_and_loo_is_unbiased(G):
    W, x = policy()
    gs = g_star(W, x)
    mean, _ = brute_force(W, x, G, project("mean", False))
    loo, _ = brute_force(W, x, G, project("loo", False))
    # E[(r_i − r̄) s_i] = E[r_i s_i] − (1/G) E[r_i s_i] − (1/G) Σ_{j≠i} E[r_j] E[s_i] = (1 − 1/G) g*  (E[s] = 0)
    assert (mean - (1 - 1 / G) * gs).norm() < TOL * gs.norm()
    assert (loo - gs).norm() < TOL * gs.norm()
    assert (mean - gs).norm() > 0.1 * gs.norm()  # the shrink is real: at G = 4 it is 1/4 of g*


@pytest.mark.parametrize("kind,scale,b", [("mean", False, 0.0), ("mean", True, 0.0), ("loo", True, 0.0),
                                          ("reinforce", False, 0.0), ("reinforce", True, 0.0),
                                          ("critic", False, 0.3), ("critic", True, 0.3)])
@pytest.mark.parametrize("G", [2, 4])
def test_closed_forms_equal_the_brute_force_sums(kind, scale, b, G):
    """gcframe.estimators.group_moments (Binomial over the count of successes) = the K^G enumeration."""
    W, x = policy(1)
    pi, S = scores(W, x)
    gs = g_star(W, x)
    p = float((pi * R).sum())
    mean, second = brute_force(W, x, G, project(kind, scale, b))
    m = est.group_moments(kind, G, p, scale, baseline=b)
    norms = (S ** 2).sum(1)  # ‖s(o)‖² [K]
    d = torch.stack([(pi * (1 - R) * norms).sum(), (pi * R * norms).sum()])  # d_0, d_1
    assert (mean - m.shrink * gs).norm() < TOL * gs.norm()
    assert abs(second - m.second_moment(d, float(gs @ gs), G)) < TOL * second


def test_an_action_dependent_baseline_breaks_unbiasedness():
    # b(o) = 0.5·1[o = 1] depends on the answer scored: E[(r − b(o)) s(o)] = g* − 0.5 π(1) s(1) ≠ g*
    W, x = policy()
    gs = g_star(W, x)
    good, _ = brute_force(W, x, 2, lambda r, o: r - 0.5)  # a constant: unbiased
    bad, _ = brute_force(W, x, 2, lambda r, o: r - 0.5 * (o == 1).to(r.dtype))
    assert (good - gs).norm() < TOL * gs.norm()
    assert (bad - gs).norm() > 1e-2 * gs.norm()


def test_std_scaling_effective_weight():
    # G = 2: a mixed group is {1, 0}: Â = ±.5/std([1, 0]) = ±.5/√.5 = ±1/√2 whatever p is, and Â = 0 otherwise, so
    # E[A_1|r_1=1] = (1−p)/√2, E[A_1|r_1=0] = −p/√2: shrink 1/√2 against the unscaled 1 − 1/2 -> weight √2, flat in p
    for p in (0.1, 0.5, 0.9):
        assert est.effective_weight(2, p) == pytest.approx(2 ** 0.5, abs=TOL)
    # large G: 1/std -> 1/√(p(1−p)) (n − 1 convention: ≈ √((G−1)/G)/√(p(1−p))); it grows towards p = 0 or 1
    w = [est.effective_weight(64, p) for p in (0.5, 0.9)]
    assert w[0] == pytest.approx(2.0, rel=0.02) and w[1] == pytest.approx(1 / (0.9 * 0.1) ** 0.5, rel=0.05)


def random_dists(V=7, seed=0, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.log_softmax(torch.randn(V, generator=gen, dtype=F64) * scale, -1) for _ in range(3)]  # θ, ref, old


def test_k1_and_k3_values_are_unbiased_k3_non_negative_k2_biased():
    lp, ref, _ = random_dists()
    s = est.kl_value_stats(lp, ref)
    kl = float((lp.exp() * (lp - ref)).sum())  # Σ_v π_θ log(π_θ/π_ref)
    assert abs(float(s["k1_mean"]) - kl) < TOL and abs(float(s["k3_mean"]) - kl) < TOL
    assert float(s["k3_neg"]) == 0.0 and float(s["k1_neg"]) > 0.1  # k1 < 0 wherever π_ref > π_θ
    assert abs(float(s["k2_mean"]) - kl) > 1e-3  # the check can fail: k2 is biased


@pytest.mark.parametrize("on_policy", [True, False])
def test_loss_term_gradients_at_one_position(on_policy):
    lp, ref, old = random_dists(seed=3)
    old = lp if on_policy else old  # off-policy: tokens sampled from π_old ≠ π_θ (μ > 1)
    z = lp.clone().requires_grad_(True)
    rev, fwd = est.exact_kls(z, ref)
    g_rev, g_fwd = torch.autograd.grad(rev, z, retain_graph=True)[0], torch.autograd.grad(fwd, z)[0]
    g = {k: est.loss_term_gradient(lp, ref, old, k) for k in ("k1", "k2", "k3", "k3_ratio")}
    assert (g["k3_ratio"] - g_rev).norm() < TOL * g_rev.norm()  # r·k3 -> reverse KL, on- and off-policy
    assert (g["k3"] - g_rev).norm() > 0.05 * g_rev.norm()  # k3 is not the reverse KL's gradient
    if on_policy:
        assert g["k1"].norm() < TOL  # E[∇log π_θ] = 0
        assert (g["k2"] - g_rev).norm() < TOL * g_rev.norm()  # k2 -> reverse KL
        assert (g["k3"] - g_fwd).norm() < TOL * g_fwd.norm()  # k3 -> FORWARD KL: E[(1−ρ)∇log π] = −Σ π_ref ∇log π
    else:
        assert (g["k2"] - g_rev).norm() > 0.05 * g_rev.norm()  # k2 loses its target off-policy
        assert g["k1"].norm() > 0.05  # and k1 is no longer zero-mean: E_old[∇log π_θ] ≠ 0


def test_two_token_sequences_prefix_and_k1_in_the_reward():
    V, gen = 5, torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(V, generator=gen, dtype=F64), torch.randn(V, V, generator=gen, dtype=F64)
    ref1 = torch.log_softmax(torch.randn(V, generator=gen, dtype=F64), -1)
    ref2 = torch.log_softmax(torch.randn(V, V, generator=gen, dtype=F64), -1)
    lp1, lp2 = torch.log_softmax(z1, -1), torch.log_softmax(z2, -1)
    g = est.two_token_gradients(z1, z2, ref1, ref2, lp1, lp2)  # on-policy: π_old = π_θ
    rev, tok = g["rev_seq"], g["rev_tok"]
    assert (g["k1_reward"] - rev).norm() < TOL * rev.norm()  # −β k1 in the reward, summed forward: ∇KL of the sequence
    assert (g["k2"] - tok).norm() < TOL * tok.norm() and (g["k3_ratio"] - tok).norm() < TOL * tok.norm()
    assert (tok - rev).norm() > 0.05 * rev.norm()  # per-token terms miss the gradient through the prefix
    assert (g["k3"] - g["fwd_seq"]).norm() > 0  # (k3's target is the forward KL per token, not of the sequence)
    assert g["k1"].norm() < TOL


def test_kl_grad_coefficients_by_hand():
    # ρ = 2 (log ρ = ln 2), r = 1.5: k2 -> −ln 2, k3 -> 1 − 2 = −1, k3_ratio -> −1.5 ln 2, k1 -> 1
    import math
    logp, ref, r = torch.tensor([0.0], dtype=F64), torch.tensor([math.log(2.0)], dtype=F64), torch.tensor([1.5], dtype=F64)
    want = {"k1": 1.0, "k2": -math.log(2), "k3": -1.0, "k3_ratio": -1.5 * math.log(2)}
    for kind, v in want.items():
        assert float(kl_grad_coefficient(ref, logp, kind, r)) == pytest.approx(v, abs=1e-12)


# -- the lab's own functions on a tiny random Llama (plumbing; the identities above are the claims) ----------------
@pytest.fixture(scope="module")
def tiny():
    from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama

    tok = build_char_tokenizer("0123456789+=;")  # V = 4 special + 13 = 17
    models = [build_tiny_llama(tok, ModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32),
                               seed=s).double().eval() for s in (0, 1, 2)]  # π_θ, π_ref, π_old
    return tok, models


def test_lab_prompt_statistics_match_per_sample_engine_gradients(tiny):
    """The lab's J_v − m shortcut for ∇log π(v|q) = autograd of gcframe.engine.token_logprobs, row by row."""
    from experiments import estimators as lab
    from gcframe.engine import token_logprobs

    tok, (model, _, _) = tiny
    s = lab.prompt_statistics(model, tok, "12+3=", "15")
    V = len(tok)
    logp = token_logprobs(model, lab.token_batch(tok, "12+3=", torch.arange(V)))[:, 0]
    params = list(model.parameters())
    d, gs = torch.zeros(2, dtype=F64), 0
    for v in range(V):
        g = torch.cat([x.reshape(-1) for x in torch.autograd.grad(logp[v], params, retain_graph=True)])
        d[int(s["r"][v])] += float(logp[v].detach().exp()) * float(g @ g)
        gs = gs + float(logp[v].detach().exp()) * float(s["r"][v]) * g
    assert 0 < s["p"] < 1 and int(s["r"].sum()) == 1  # reward: the first character "1"
    # two float64 forward paths (one prompt row vs V rows) agree to ~1e-8 relative here, not to 1e-15
    assert (s["d"] - d).abs().max() < 1e-6 * d.max(), (s["d"] - d)
    assert (s["g_star"] - gs).norm() < 1e-6 * gs.norm(), ((s["g_star"] - gs).norm(), gs.norm())
    rows = lab.baseline_rows("tiny", [s, s], torch.tensor([0.5, 0.5], dtype=F64), dict(groups=(2, 4), n=8))
    by = {(r["estimator"], r["std_scaling"], r["G"]): r for r in rows}
    assert by[("mean", False, 4)]["rel_bias"] == pytest.approx(0.25, abs=1e-9)  # 1 − (1 − 1/4)
    assert by[("loo", False, 2)]["rel_bias"] < 1e-9 and by[("critic", False, 2)]["rel_bias"] < 1e-9


def test_lab_kl_rows_and_render(tiny, tmp_path):
    import pandas as pd

    from analysis.estimators import render
    from experiments import estimators as lab
    from gcframe.sampling import GenerationConfig

    tok, (theta, ref, old) = tiny
    grads = lab.kl_gradient_rows("tiny", 1, theta, theta, ref, tok, ["1+2="], "on-policy")
    grads += lab.kl_gradient_rows("tiny", 1, theta, old, ref, tok, ["1+2="], "off-policy")
    g = pd.DataFrame(grads).set_index(["setting", "level", "estimator", "target"])["rel_err"]
    assert g["on-policy", "token", "k3", "KL(ref‖θ)"] < 1e-8 and g["on-policy", "token", "k2", "KL(θ‖ref)"] < 1e-8
    assert g["on-policy", "sequence", "k1_reward", "KL(θ‖ref) seq"] < 1e-8
    assert g["off-policy", "token", "k3_ratio", "KL(θ‖ref)"] < 1e-8 and g["off-policy", "token", "k3", "KL(ref‖θ)"] > 1e-3
    values = lab.kl_value_rows("tiny", 1, theta, ref, tok, ["1+2=", "3+4="], dict(kl_samples=2), GenerationConfig(4, 1.0))
    assert abs(values["k3_bias"]) < 1e-12 and values["k3_neg"] == 0 and values["k1_neg"] > 0 and values["kl"] > 0
    bl = lab.baseline_rows("tiny", [lab.prompt_statistics(theta, tok, "1+2=", "3")], torch.tensor([0.3], dtype=F64),
                           dict(groups=(2, 4), n=8))
    pd.DataFrame(bl).to_csv(tmp_path / "baselines.csv", index=False)
    pd.DataFrame(lab.std_weight_rows()).to_csv(tmp_path / "std_weight.csv", index=False)
    pd.DataFrame([values, {**values, "kl": 2 * values["kl"]}]).to_csv(tmp_path / "kl_values.csv", index=False)
    pd.DataFrame(grads).to_csv(tmp_path / "kl_gradients.csv", index=False)
    rep = render(tmp_path)
    assert (rep / "estimators_baselines.png").stat().st_size > 1000 and "k3_ratio" in (rep / "summary.md").read_text()


def test_lab_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    from analysis import estimators as report
    from experiments import estimators as lab

    (tmp_path / "keep.txt").write_text("x")
    for main, argv in ((lab.main, ["--out", str(tmp_path)]), (report.main, [str(tmp_path)])):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert (tmp_path / "keep.txt").read_text() == "x"  # nothing overwritten
