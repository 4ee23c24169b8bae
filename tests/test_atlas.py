"""The update atlas's claims as exact identities: each method's MEAN step, through its own prepare/coefficients and
the engine's loss, against its closed form on an enumerable policy, float64, to 1e-8.

The policy: two prompts q (features x_q), completions of at most two tokens over {0, 1, <eos>} (K = 7 of them:
[<eos>], [a, b] for a ∈ {0, 1}, b ∈ {0, 1, <eos>}; lengths 1 and 2), log-linear: π(o_1|q) = softmax(A1 x_q),
π(o_2|q, o_1) = softmax(A2[o_1] x_q). Every group o_1..o_G (K^G of them) of a prompt drawn uniformly is listed with its
probability Π π(o_i|q), so E[ĝ] = Σ_groups P(group) · (−∇ loss(group)) is the definition, summed (one backward).

Closed forms (s(o) = ∇log π(o|q) = Σ_t ∇log π(o_t|q, o_<t), E_o[s] = 0, p_q = P(correct|q), all averaged over q):

    seq-mean-token-sum (1/N Σ_i Σ_t):   online RFT = g* = ∇ P(correct);   RLOO = g*;   GRPO without std = (1 − 1/G) g*
    seq-mean-token-mean (1/N Σ_i 1/|o_i| Σ_t, GRPO's and online RFT's default): with s̃ = s/|o| and E[s̃] = ∇E[1/|o|]
        online RFT = E[r s̃] = ∇E[r/|o|]            (the expected reward PER TOKEN: short correct answers favoured)
        RLOO       = E[(r − b) s̃] = ∇E[r/|o|] − p ∇E[1/|o|]            (b ⟂ o_i but E[s̃] ≠ 0: the baseline no
        GRPO       = (1 − 1/G) (∇E[r/|o|] − p ∇E[1/|o|])                 longer cancels; p held fixed in ∇)
    token-mean (Σ_i Σ_t / Σ_i |o_i|): a ratio that couples a group's lengths, no closed form in general; with every
        |o| = L it is the seq-mean-token-sum form divided by L (tested), with mixed lengths parallel to neither g* nor
        ∇E[r/|o|] (tested). For G = 1 it equals seq-mean-token-mean.
    SFT: the gradient of the demonstrations' log-likelihood (seq-mean-token-sum over one drawn demonstration: of the
        mean sequence log-likelihood; token-mean over all of them: of the log-likelihood per token), not g*.

The engine computes its normaliser weights in the loss's dtype (float64 here), so 1/7 is as exact as 1/4.
"""
import itertools
import math

import pytest
import torch

from gcframe.batch import Batch
from gcframe.engine import weighted_mle_loss
from methods.base import MethodConfig
from methods.grpo import GRPO
from methods.online_rft import OnlineRFT
from methods.rloo import RLOO
from methods.sft import SFT

F64, EOS, TOL = torch.float64, 2, 1e-8
COMPLETIONS = [(EOS,), (0, 0), (0, 1), (0, EOS), (1, 0), (1, 1), (1, EOS)]
IDS = torch.tensor([list(c) + [0] * (2 - len(c)) for c in COMPLETIONS])  # [K, 2], padded with 0
MASK = torch.tensor([[1.0] * len(c) + [0.0] * (2 - len(c)) for c in COMPLETIONS], dtype=F64)  # [K, 2]
LEN = MASK.sum(-1)  # |o| [K]
REWARD = torch.tensor([[0, 1, 0, 1, 0, 0, 1], [1, 0, 0, 0, 1, 1, 0]], dtype=F64)  # r(q, o) [Q = 2, K]
X = torch.tensor([[0.7, -1.3], [1.1, 0.4]], dtype=F64)  # x_q


class Toy:
    """The enumerable policy. equal=True: <eos> first has probability 0, so every completion has |o| = 2."""

    def __init__(self, seed=0, equal=False):
        gen = torch.Generator().manual_seed(seed)
        self.A1 = torch.randn(3, 2, generator=gen, dtype=F64, requires_grad=True)
        self.A2 = torch.randn(2, 3, 2, generator=gen, dtype=F64, requires_grad=True)
        self.equal = equal

    @property
    def params(self):
        return [self.A1, self.A2]

    def logp(self, q):
        """log π(o_t|q, o_<t) of every completion [K, 2] (0 on padding), differentiable."""
        z1 = self.A1 @ X[q]
        if self.equal:
            z1 = z1.masked_fill(torch.arange(3) == EOS, -math.inf)
        l1, l2 = torch.log_softmax(z1, -1), torch.log_softmax(self.A2 @ X[q], -1)  # [3], [2, 3]
        rows = [torch.stack([l1[c[0]], l2[c[0], c[1]] if len(c) > 1 else l1.new_zeros(())]) for c in COMPLETIONS]
        return torch.stack(rows) * MASK  # [K, 2]

    def pi(self, q):
        return self.logp(q).sum(-1).exp()  # π(o|q) [K], differentiable

    def grad(self, f):
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(f, self.params, retain_graph=True)])


def mean_update(method, toy: Toy, G: int) -> torch.Tensor:
    """E[ĝ] = Σ_q (1/Q) Σ_groups P(group|q) (−∇ loss), loss = the engine's weighted_mle_loss of the method's GC."""
    total = 0.0
    for q in range(len(X)):
        lp = toy.logp(q)  # [K, 2]
        pi = lp.detach().sum(-1).exp()
        for group in itertools.product(range(len(COMPLETIONS)), repeat=G):
            idx = torch.tensor(group)
            prob = pi[idx].prod()
            if prob == 0:
                continue
            r = REWARD[q, idx]
            batch = Batch(torch.zeros(G, 1, dtype=torch.long), torch.ones(G, 1, dtype=torch.long), IDS[idx], MASK[idx],
                          torch.zeros(G, dtype=torch.long), {"rewards": r, "correct": r})
            with torch.no_grad():
                method.prepare(batch)
            gc = method.coefficients(batch, lp[idx])  # [G, 2]
            total = total - prob * weighted_mle_loss(gc, lp[idx], batch.completion_mask, method.cfg.aggregation) / len(X)
    return toy.grad(total)


def targets(toy: Toy) -> dict[str, torch.Tensor]:
    """The closed forms' pieces by autograd of their definitions, averaged over the prompts."""
    Q = len(X)
    p = [float((toy.pi(q) * REWARD[q]).sum()) for q in range(Q)]
    return {"g*": toy.grad(sum((toy.pi(q) * REWARD[q]).sum() for q in range(Q)) / Q),  # ∇ P(correct)
            "r/|o|": toy.grad(sum((toy.pi(q) * REWARD[q] / LEN).sum() for q in range(Q)) / Q),  # ∇E[r/|o|]
            "p/|o|": toy.grad(sum(p[q] * (toy.pi(q) / LEN).sum() for q in range(Q)) / Q)}  # p ∇E[1/|o|], p fixed


def rel_err(a, b) -> float:
    return float((a - b).norm() / b.norm())


def cos(a, b) -> float:
    return float(a @ b / (a.norm() * b.norm()))


def online_rft(agg):
    return OnlineRFT(OnlineRFT.Config(aggregation=agg), None)


def rloo(agg):
    return RLOO(RLOO.Config(aggregation=agg), None)


def grpo(agg, std=False):
    return GRPO(GRPO.Config(aggregation=agg, scale_by_std=std, beta=0.0), None)


CASES = {  # name: (method factory, G, closed form from targets(), what it says)
    "online_rft seq-sum": (lambda: online_rft("seq-mean-token-sum"), 2, lambda t, G: t["g*"]),
    "rloo seq-sum": (lambda: rloo("seq-mean-token-sum"), 2, lambda t, G: t["g*"]),
    "grpo no-std seq-sum G=2": (lambda: grpo("seq-mean-token-sum"), 2, lambda t, G: (1 - 1 / G) * t["g*"]),
    "grpo no-std seq-sum G=4": (lambda: grpo("seq-mean-token-sum"), 4, lambda t, G: (1 - 1 / G) * t["g*"]),
    "online_rft seq-mean": (lambda: online_rft("seq-mean-token-mean"), 2, lambda t, G: t["r/|o|"]),
    "rloo seq-mean": (lambda: rloo("seq-mean-token-mean"), 2, lambda t, G: t["r/|o|"] - t["p/|o|"]),
    "grpo no-std seq-mean": (lambda: grpo("seq-mean-token-mean"), 2,
                             lambda t, G: (1 - 1 / G) * (t["r/|o|"] - t["p/|o|"])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_mean_update_equals_its_closed_form(name):
    make, G, form = CASES[name]
    toy = Toy(seed=1)
    want = form(targets(toy), G)
    assert rel_err(mean_update(make(), toy, G), want) < TOL


def test_the_length_normaliser_moves_the_mean_off_g_star():
    # the closed forms above differ: ∇E[r/|o|] is not a multiple of g* when lengths vary (else the tests say little)
    t = targets(Toy(seed=1))
    assert cos(t["r/|o|"], t["g*"]) < 0.99 and cos(t["r/|o|"] - t["p/|o|"], t["g*"]) < 0.99


def test_token_mean_equal_lengths_is_seq_sum_over_L_and_mixed_lengths_neither():
    toy, G = Toy(seed=2, equal=True), 2  # every |o| = 2: Σ_i |o_i| = 2G, so token-mean = seq-mean-token-sum / 2
    t = targets(toy)
    assert rel_err(mean_update(online_rft("token-mean"), toy, G), t["g*"] / 2) < TOL
    assert rel_err(mean_update(grpo("token-mean"), toy, G), (1 - 1 / G) * t["g*"] / 2) < TOL
    toy = Toy(seed=1)
    t, g = targets(toy), mean_update(online_rft("token-mean"), toy, 2)
    assert cos(g, t["g*"]) < 0.999 and cos(g, t["r/|o|"]) < 0.999  # a ratio of sums: neither closed form


DEMOS = [(0, 1), (0, 3), (1, 0), (1, 5)]  # (prompt, completion index): lengths 2, 2, 1, 2 (4 rows: 1/4 is exact)


def demo_batch(rows):
    q = torch.tensor([r[0] for r in rows])
    k = torch.tensor([r[1] for r in rows])
    return q, k, Batch(torch.zeros(len(rows), 1, dtype=torch.long), torch.ones(len(rows), 1, dtype=torch.long),
                       IDS[k], MASK[k], torch.arange(len(rows)))


def sft_updates(toy: Toy, agg: str):
    """(E over one demonstration drawn uniformly, the step on all of them) of SFT's update, through its GC."""
    sft = SFT(MethodConfig(aggregation=agg), None)
    logps = lambda: torch.stack([toy.logp(q) for q in range(len(X))])  # [Q, K, 2]  # noqa: E731
    lp, one = logps(), 0.0
    for row in DEMOS:
        q, k, b = demo_batch([row])
        one = one - weighted_mle_loss(sft.coefficients(b, lp[q, k]), lp[q, k], b.completion_mask, agg) / len(DEMOS)
    q, k, b = demo_batch(DEMOS)
    lp = logps()
    return toy.grad(one), toy.grad(-weighted_mle_loss(sft.coefficients(b, lp[q, k]), lp[q, k], b.completion_mask, agg))


def test_sft_is_the_demonstrations_log_likelihood_gradient_not_g_star():
    toy = Toy(seed=3)
    seq_ll = sum(toy.logp(q)[k].sum() for q, k in DEMOS)  # Σ_d log π(o_d|q_d)
    one, full = sft_updates(toy, "seq-mean-token-sum")
    assert rel_err(one, toy.grad(seq_ll / len(DEMOS))) < TOL and rel_err(full, toy.grad(seq_ll / len(DEMOS))) < TOL
    _, per_token = sft_updates(toy, "token-mean")  # Σ_d |o_d| = 7 -> the log-likelihood per token
    assert rel_err(per_token, toy.grad(seq_ll / float(LEN[[k for _, k in DEMOS]].sum()))) < TOL  # 1/7, float64
    assert abs(cos(one, targets(toy)["g*"])) < 0.99  # unrelated to g*: the demonstrations decide its direction


class Coin:
    """One token, two answers, logits z (the parameters) = [0, 0]; r = [1, 0]: hand-computable."""

    def __init__(self):
        self.z = torch.zeros(2, dtype=F64, requires_grad=True)


def test_hand_computed_coin_grpo_and_rloo_g2():
    # π = (½, ½), s_a = ∇_z log π_a = e_a − π: s_0 = (½, −½), s_1 = (−½, ½); g* = ∇π_0 = π_0 s_0 = (¼, −¼).
    # G = 2, seq-mean-token-sum: groups (0,0), (1,1) have equal rewards -> Â = 0. Groups (0,1), (1,0), each P = ¼:
    #   GRPO (no std): Â = r − r̄ = (+½, −½) -> ĝ = ½(½ s_0 − ½ s_1) = ¼(1, −1) = (¼, −¼); E = 2·¼·(¼, −¼) = (⅛, −⅛)
    #                  = (1 − 1/2) g*.
    #   RLOO:          Â = r_i − r_j = (+1, −1)   -> ĝ = ½(s_0 − s_1) = (½, −½);        E = 2·¼·(½, −½) = (¼, −¼) = g*.
    coin = Coin()
    ids, mask = torch.tensor([[0], [1]]), torch.ones(2, 1, dtype=F64)
    reward = torch.tensor([1.0, 0.0], dtype=F64)

    def mean(method):
        lp = torch.log_softmax(coin.z, -1).unsqueeze(1)  # [2 answers, 1 token]
        total = 0.0
        for group in itertools.product(range(2), repeat=2):
            idx = torch.tensor(group)
            b = Batch(torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.long), ids[idx], mask[idx],
                      torch.zeros(2, dtype=torch.long), {"rewards": reward[idx], "correct": reward[idx]})
            method.prepare(b)
            total = total - 0.25 * weighted_mle_loss(method.coefficients(b, lp[idx]), lp[idx], mask[idx],
                                                     method.cfg.aggregation)
        return torch.autograd.grad(total, coin.z)[0]

    assert torch.allclose(mean(grpo("seq-mean-token-sum")), torch.tensor([0.125, -0.125], dtype=F64), atol=1e-12)
    assert torch.allclose(mean(rloo("seq-mean-token-sum")), torch.tensor([0.25, -0.25], dtype=F64), atol=1e-12)
    assert torch.allclose(mean(online_rft("seq-mean-token-sum")), torch.tensor([0.25, -0.25], dtype=F64), atol=1e-12)


# -- mutations: a deliberately wrong GC must fail the same checks -------------------------------------------------
class PositionWeighted(OnlineRFT):
    def coefficients(self, batch, logp):  # GC = 1[correct] · (1 + t): a per-token weight that the paper does not have
        return super().coefficients(batch, logp) * (1 + torch.arange(logp.shape[1], dtype=logp.dtype))


class ActionBaseline(OnlineRFT):
    def coefficients(self, batch, logp):  # GC = 1[correct] − 0.3·1[o_1 = 0]: a baseline that depends on the action
        return super().coefficients(batch, logp) - 0.3 * (batch.completion_ids[:, :1] == 0).to(logp.dtype)


class FullMeanRLOO(RLOO):
    def prepare(self, batch):  # the group mean including o_i itself instead of the leave-one-out mean
        super().prepare(batch)
        r, G = batch.data["rewards"], len(batch)
        batch.data["advantages"] = r - r.mean() if G > 1 else 0 * r


class StdGRPO(GRPO):
    def prepare(self, batch):  # std scaling left on where the closed form says off
        self.cfg.scale_by_std = True
        super().prepare(batch)


MUTANTS = {  # name: (mutant, the CASES entry whose check it must fail)
    "online_rft GC·(1+t)": (lambda: PositionWeighted(OnlineRFT.Config(aggregation="seq-mean-token-sum"), None),
                            "online_rft seq-sum"),
    "online_rft action-dependent baseline": (
        lambda: ActionBaseline(OnlineRFT.Config(aggregation="seq-mean-token-sum"), None), "online_rft seq-sum"),
    "rloo with the full group mean": (lambda: FullMeanRLOO(RLOO.Config(aggregation="seq-mean-token-sum"), None),
                                      "rloo seq-sum"),
    "grpo with std scaling": (lambda: StdGRPO(GRPO.Config(aggregation="seq-mean-token-sum", scale_by_std=False,
                                                          beta=0.0), None), "grpo no-std seq-sum G=2"),
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_a_mutated_gc_fails_the_closed_form(name):
    make, case = MUTANTS[name]
    _, G, form = CASES[case]
    toy = Toy(seed=1)
    assert rel_err(mean_update(make(), toy, G), form(targets(toy), G)) > 1e-3


# -- the experiment's own measures, on known vectors (plumbing) ----------------------------------------------------
def test_measures_from_streaming_moments():
    from experiments import atlas

    gen = torch.Generator().manual_seed(0)
    gs = torch.tensor([1.0, 0.0, 0.0], dtype=F64)
    # ĝ = (0.5, 0, 0) + noise of covariance I·σ² per coordinate: E‖ĝ − Eĝ‖² = 3σ², SNR = 0.25/(3σ²)
    sigma, n = 0.1, 20000
    draws = torch.tensor([0.5, 0.0, 0.0], dtype=F64) + sigma * torch.randn(n, 3, generator=gen, dtype=F64)
    mom = {"sum": draws.sum(0), "sum2": float((draws ** 2).sum()), "n": n, "step_cos": 0.0, "tokens": 100.0,
           "gen": 0.0, "cpu_s": 2.0}
    row, mean, noise = atlas.measures(mom, gs)
    assert row["snr"] == pytest.approx(0.25 / (3 * sigma ** 2), rel=0.03)
    assert row["scale"] == pytest.approx(0.5, abs=3e-3) and row["rel_bias"] == pytest.approx(0.5, abs=3e-3)
    assert row["cosine_corr"] == pytest.approx(1.0, abs=1e-3) and math.isnan(row["snr_per_kgen"])
    assert row["snr_per_s"] == pytest.approx(row["snr"] / 2)
    rows = atlas.cosine_rows("p", {"a": (mean, noise), "b": (-mean, noise)}, gs)
    by = {(r["a"], r["b"]): r["cosine"] for r in rows}
    assert by[("a", "b")] == pytest.approx(-1.0) and by[("g*", "a")] > 0.99
