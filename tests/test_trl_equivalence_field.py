"""TRL 1.16's own loss code, unmodified, against issue 64's methods on the same float64 inputs: GMPO
(`trl.experimental.gmpo`), the dual clip (GRPO's `delta`, token and sequence level), Lite PPO (bnpo on the batch-std
advantage, whose std is TRL's `nanstd`), RPO (DPO with loss_type ["sigmoid", "sft"]), on-policy distillation (the
IW-OPD loss at γ = 0, TRL's sampled-token distillation loss) and GKD's `generalized_jsd_loss` at β = 1, whose gradient
on-policy distillation's GC estimates: exactly equal once averaged over the vocabulary. Nothing here skips.

The route is test_trl_equivalence_pg.py's and _preference.py's: each trainer's loss method called as a plain function
on a stand-in `self` that carries the attributes it reads, both sides differentiating the same leaf tensor.
"""
from __future__ import annotations

import os
from collections import defaultdict
from types import SimpleNamespace as NS

import pytest
import torch

from gcframe.batch import Batch
from gcframe.engine import Normaliser, weighted_mle_loss
from methods import get_method
from methods.base import Method
from tests.test_trl_equivalence_pg import G, N, T, TOL, StandIn, batch_of, data, engine_loss_and_grad, trl_loss_and_grad

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
import trl  # noqa: E402  (the `test` extra: without it this file fails, it does not skip)

assert trl.__version__ == "1.16.0", trl.__version__


def _close(engine, theirs, what: str):
    (value, grad), (t_value, t_grad) = engine, theirs
    assert t_grad.abs().max() > 1e-3, what  # a gradient worth comparing
    if value is not None:
        t_value = t_value.detach() if torch.is_tensor(t_value) else t_value
        assert abs(float(t_value) - float(value)) <= TOL * max(1.0, abs(float(value))), (what, t_value, value)
    assert float((t_grad - grad).abs().max()) <= TOL * float(t_grad.abs().max()), what


# -- the GRPO family: the dual clip as TRL's `delta`, Lite PPO as bnpo ---------------------------------------------
FIELD_CASES = {
    # TRL's two-sided clip clamps the unclipped ratio at δ before the min: for Â < 0 and r > δ > 1 + ε the objective
    # is δ·Â, dual-clip PPO's floor with c = δ (for Â > 0 the band's own edge 1 + ε < δ already bites)
    "grpo dual clip": (("grpo", {"beta": 0.1, "dual_clip": 1.5}), {"loss_type": "grpo", "beta": 0.1, "delta": 1.5}),
    "dapo dual clip": (("dapo", {"overlong_cache": 2, "dual_clip": 1.4}),
                       {"loss_type": "dapo", "epsilon_high": 0.28, "delta": 1.4}),
    "gspo dual clip": (("gspo", {"clip_eps": 0.05, "clip_eps_high": 0.03, "dual_clip": 1.05}),
                       {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 0.05,
                        "epsilon_high": 0.03, "delta": 1.05}),  # δ above 1 + ε_high, as TRL's δ must be
    # Lite PPO's loss is the token-level clipped surrogate (TRL's bnpo); its batch-std advantage is checked below
    "lite_ppo": (("lite_ppo", {}), {"loss_type": "bnpo", "scale_rewards": "batch"}),
    "lite_ppo β": (("lite_ppo", {"beta": 0.1}), {"loss_type": "bnpo", "scale_rewards": "batch", "beta": 0.1}),
}


@pytest.mark.parametrize("case", list(FIELD_CASES))
def test_trl_grpo_loss_matches_the_engine(case):
    (name, options), config = FIELD_CASES[case]
    d = data()
    value, grad, adv = engine_loss_and_grad(d, name, **options)
    _close((value, grad), trl_loss_and_grad(d, adv, **config), case)


def test_the_dual_clip_bites_on_these_data_and_changes_the_gradient():
    """Some Â < 0 token has r > 1.5 (and some Â < 0 sequence s > 1.05), and without the floor the gradient differs from
    TRL's with δ: the cases above can fail."""
    d = data()
    r = (d["logp"] - d["old"]).exp()
    _, _, adv = engine_loss_and_grad(d, "grpo", beta=0.1)
    assert bool(((adv.unsqueeze(1) < 0) & (r > 1.5) & (d["mask"] > 0)).any())
    s = get_method("gspo").sequence_ratio(d["logp"] - d["old"], d["mask"]).squeeze(1)  # GSPO's floor at 1.05
    assert bool(((adv < 0) & (s > 1.05)).any())
    _, grad_off, _ = engine_loss_and_grad(d, "grpo", beta=0.1)
    _, trl_grad = trl_loss_and_grad(d, adv, loss_type="grpo", beta=0.1, delta=1.5)
    assert float((trl_grad - grad_off).abs().max()) > 1e-3 * float(trl_grad.abs().max())


def test_lite_ppo_batch_std_is_trls_nanstd():
    """TRL's scale_rewards="batch": (r − group mean) / (nanstd(all rewards) + 1e-4); gcframe divides by the std
    itself. Two groups of four: rewards [1, 0, 0, 1 | 0, 0, 1, 0], mean 3/8, unbiased variance
    (3·(5/8)² + 5·(3/8)²)/7 = (75/64 + 45/64)/7 = 120/448, std = √(120/448) ≈ 0.5175492."""
    from trl.trainer.utils import nanstd

    d = data()
    _, _, adv = engine_loss_and_grad(d, "lite_ppo")
    r, exact = d["rewards"], (120 / 448) ** 0.5
    # TRL's Bessel factor count/(count − 1) is an integer division, a float32 8/7: its std is 2e-8 off in float64
    assert float(nanstd(r)) == pytest.approx(exact, rel=1e-7)
    centred = r - r.view(-1, G).mean(1).repeat_interleave(G)  # [.5, −.5, −.5, .5 | −.25, −.25, .75, −.25]
    assert torch.allclose(adv, centred / exact, rtol=1e-14, atol=0)
    assert torch.allclose(adv, centred / (float(nanstd(r)) + 1e-4), rtol=3e-4)  # TRL's ε: 2e-4 relative


# -- GMPO: trl.experimental.gmpo's GMPOTrainer._compute_loss ---------------------------------------------------------
def _trl_gmpo(d: dict, advantages: torch.Tensor, **config):
    from trl.experimental.gmpo import GMPOConfig, GMPOTrainer

    args = GMPOConfig(output_dir="/tmp/trl-equivalence", per_device_train_batch_size=N, num_generations=G,
                      max_completion_length=T, report_to=[], use_cpu=True, **config)
    logp = d["logp"].clone().requires_grad_()
    inputs = {"prompt_ids": torch.ones(N, 1, dtype=torch.long), "prompt_mask": torch.ones(N, 1, dtype=torch.long),
              "completion_ids": torch.full((N, T), 5), "completion_mask": d["mask"], "advantages": advantages,
              "old_per_token_logps": d["old"], "ref_per_token_logps": d["ref"]}
    loss = GMPOTrainer._compute_loss(StandIn(args, logp), None, inputs)
    return loss, torch.autograd.grad(loss, logp)[0]


@pytest.mark.parametrize("options, config", [
    ({}, {}),  # GMPO's defaults, both: (e^{−0.4}, e^{0.4}), no KL
    ({"clip_eps": 0.1, "clip_eps_high": 0.3}, {"epsilon": 0.1, "epsilon_high": 0.3}),
    ({"clip_eps": 0.2, "beta": 0.1, "kl_estimator": "k3"}, {"epsilon": 0.2, "beta": 0.1}),  # TRL's k3, per sequence
])
def test_gmpo_equals_trl_experimental_gmpo(options, config):
    d = data()
    value, grad, adv = engine_loss_and_grad(d, "gmpo", **options)
    _close((value, grad), _trl_gmpo(d, adv, **config), f"gmpo {options}")


def test_gmpo_data_clip_on_both_sides():
    """The log-space band (−0.1, 0.3) bites on these data for Â > 0 and for Â < 0, and spares other tokens."""
    d = data()
    log_r = (d["logp"] - d["old"])[d["mask"] > 0]
    _, _, adv = engine_loss_and_grad(d, "gmpo")
    a = adv.unsqueeze(1).expand_as(d["mask"])[d["mask"] > 0]
    assert bool(((a > 0) & (log_r > 0.3)).any()) and bool(((a < 0) & (log_r < -0.1)).any())
    assert bool(((log_r > -0.1) & (log_r < 0.3)).any())


# -- RPO: DPOTrainer._compute_loss with loss_type ["sigmoid", "sft"] -------------------------------------------------
P_CHOSEN, P_REJECTED = [4, 4, 4, 4], [2, 5, 3, 1]  # TRL's sft term is the mean over the batch's chosen tokens: the
# eq.-1 mean of per-completion means exactly when the chosen completions share one length (their own lengths differ)


def _rpo_pairs(chosen_lens, seed: int = 5):
    g = torch.Generator().manual_seed(seed)
    lens = [n for pair in zip(chosen_lens, P_REJECTED) for n in pair]
    mask = (torch.arange(T).unsqueeze(0) < torch.tensor(lens).unsqueeze(1)).to(torch.float64)
    logp = (-(torch.rand(len(lens), T, generator=g, dtype=torch.float64) * 1.5 + 0.05) * mask).requires_grad_(True)
    ref = -(torch.rand(len(lens), T, generator=g, dtype=torch.float64) * 1.5 + 0.05) * mask
    P = len(chosen_lens)
    batch = Batch(torch.zeros(2 * P, 1, dtype=torch.long), torch.ones(2 * P, 1, dtype=torch.long),
                  torch.zeros(2 * P, T, dtype=torch.long), mask, torch.arange(P).repeat_interleave(2),
                  {"is_chosen": torch.tensor([1.0, 0.0], dtype=torch.float64).repeat(P), "ref_logp": ref})
    return batch, logp, ref


def _trl_rpo(beta: float, alpha: float, logp, ref, mask):
    from trl.trainer.dpo_trainer import DPOTrainer

    order = torch.cat([torch.arange(0, len(mask), 2), torch.arange(1, len(mask), 2)])  # chosen rows, rejected rows
    lp, m, n = (logp * mask)[order], mask[order], len(order)
    ref_sums = (ref * mask).sum(-1)[order]
    inputs = {"input_ids": torch.ones(n, T + 1, dtype=torch.long), "attention_mask": torch.ones(n, T + 1),
              "completion_mask": torch.cat([torch.zeros(n, 1), m], 1).long(),
              "ref_chosen_logps": ref_sums[: n // 2], "ref_rejected_logps": ref_sums[n // 2:]}

    def model(**kw):
        return NS(log_probs=lp, entropy=torch.zeros(n, T), mean_logits=torch.zeros(n, T),
                  is_top1=torch.zeros(n, T, dtype=torch.bool))

    acc = NS(device=torch.device("cpu"), gather_for_metrics=lambda x: x, gather=lambda x: x)
    stub = NS(model=NS(training=True), accelerator=acc, aux_loss_enabled=False, ld_alpha=None,
              precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=["sigmoid", "sft"],
              loss_weights=[1.0, alpha], beta=beta, use_weighting=False,
              _metrics=defaultdict(lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1)
    return DPOTrainer._compute_loss(stub, model, inputs, return_outputs=False)


def _rpo_engine(beta, alpha, batch, logp):
    cls = get_method("rpo")
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(beta=beta, alpha=alpha), ctx=None)
    loss = weighted_mle_loss(m.coefficients(batch, logp), logp, batch.completion_mask, m.cfg.aggregation)
    (grad,) = torch.autograd.grad(loss, logp)
    return m.pop_stats()["rpo_loss"], 2.0 * grad  # seq-mean-token-sum over 2P sequences: TRL's pair mean / 2


@pytest.mark.parametrize("beta, alpha", [(0.1, 1.0), (0.5, 0.3)])
def test_rpo_equals_trl_dpo_sigmoid_plus_sft(beta, alpha):
    batch, logp, ref = _rpo_pairs(P_CHOSEN)
    theirs = _trl_rpo(beta, alpha, logp, ref, batch.completion_mask)
    (t_grad,) = torch.autograd.grad(theirs, logp)
    _close(_rpo_engine(beta, alpha, batch, logp), (theirs.detach(), t_grad), f"rpo β={beta} α={alpha}")


def test_rpo_eq_1_and_trls_sft_term_differ_when_chosen_lengths_differ():
    """Eq. 1 normalises each chosen completion by its own length, TRL's "sft" by the batch's chosen tokens: with
    chosen lengths [3, 5, 2, 4] the two gradients differ (the comparison above can fail)."""
    batch, logp, ref = _rpo_pairs([3, 5, 2, 4])
    theirs = _trl_rpo(0.1, 1.0, logp, ref, batch.completion_mask)
    (t_grad,) = torch.autograd.grad(theirs, logp)
    _, grad = _rpo_engine(0.1, 1.0, batch, logp)
    assert float((t_grad - grad).abs().max()) > 1e-3 * float(t_grad.abs().max())


# -- on-policy distillation: IW-OPD at γ = 0, and GKD's generalized JSD at β = 1 -------------------------------------
V = 7


def _opd_method(**options):
    cls = get_method("opd")
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(**options), ctx=None)
    return m


def _logits(seed: int, scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, T, V, generator=g, dtype=torch.float64) * scale


def test_opd_equals_trl_iw_opd_at_gamma_0():
    """IWOPDTrainer._compute_iw_opd_loss: −Σ log π_θ(o_t) · sg(log π_T(o_t) − log π_θ(o_t)) / tokens with the
    importance weights 1 + γ(·) at γ = 0 (TRL's sampled-token on-policy distillation); gradient w.r.t. the student's
    logits, through the engine's −aggregate(GC·log π) on one side and TRL's code on the other."""
    from trl.experimental.iw_opd.iw_opd_trainer import IWOPDTrainer

    d, logits = data(), _logits(1).requires_grad_()
    tokens = torch.randint(0, V, (N, T), generator=torch.Generator().manual_seed(2))
    labels = tokens.masked_fill(d["mask"] == 0, -100)
    t_logp = torch.log_softmax(_logits(3), -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1) * d["mask"]
    stub = NS(temperature=1.0, iw_opd_gamma=0.0, iw_opd_epsilon=1e-8, model=NS(training=True),
              _metrics=defaultdict(lambda: defaultdict(list)))
    theirs = IWOPDTrainer._compute_iw_opd_loss(stub, logits, tokens, labels, t_logp)
    (t_grad,) = torch.autograd.grad(theirs, logits)
    logp = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1) * d["mask"]
    b = Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long), tokens, d["mask"],
              torch.arange(N) // G, {"teacher_logp": t_logp})
    m = _opd_method(teacher="unused")
    loss = weighted_mle_loss(m.coefficients(b, logp), logp, d["mask"], m.cfg.aggregation)
    (grad,) = torch.autograd.grad(loss, logits)
    _close((None, grad), (theirs.detach(), t_grad), "opd vs iw_opd γ=0")


def _one_position(student: torch.Tensor, teacher: torch.Tensor, baseline: str):
    """Σ_v π_θ(v) ∇_z[−GC(v) log π_θ(v)]: the engine's OPD step on each vocabulary token as the sampled one, averaged
    exactly under π_θ; z the student's logits at one position [V]."""
    z = student.clone().requires_grad_()
    log_p, log_q = torch.log_softmax(z, -1), torch.log_softmax(teacher, -1)
    kl = float((log_p.exp() * (log_p - log_q)).sum().detach())  # vOPD's column at this position
    m, total = _opd_method(teacher="unused", baseline=baseline), torch.zeros(V, dtype=torch.float64)
    for v in range(V):
        mask = torch.ones(1, 1, dtype=torch.float64)
        b = Batch(torch.ones(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long), torch.tensor([[v]]), mask,
                  torch.zeros(1, dtype=torch.long), {"teacher_logp": log_q[v].view(1, 1).detach(),
                                                     "teacher_kl": torch.tensor([[kl]], dtype=torch.float64)})
        logp = log_p[v].view(1, 1)
        loss = weighted_mle_loss(m.coefficients(b, logp), logp, mask, "token-mean", Normaliser(1.0, 1.0, 1))
        (g,) = torch.autograd.grad(loss, z, retain_graph=True)
        total += log_p[v].exp().detach() * g
    return total


@pytest.mark.parametrize("baseline", ["none", "vopd"])
def test_opd_gc_averaged_over_the_vocabulary_is_gkd_reverse_kl_gradient(baseline):
    """GKDTrainer.generalized_jsd_loss at β = 1 is KL(π_θ ‖ π_T) per position; OPD's GC on the sampled token, averaged
    exactly over o_t ~ π_θ, has its gradient (E[∇log π] = 0 removes the +1 term; vOPD's baseline has mean 0)."""
    from trl.experimental.gkd.gkd_trainer import GKDTrainer

    s, t = _logits(4)[0, :3], _logits(5)[0, :3]  # three positions
    for j in range(3):
        z = s[j].clone().requires_grad_()
        loss = GKDTrainer.generalized_jsd_loss(z.view(1, 1, V), t[j].view(1, 1, V), beta=1.0, reduction="sum")
        (theirs,) = torch.autograd.grad(loss, z)
        ours = _one_position(s[j], t[j], baseline)
        assert theirs.abs().max() > 1e-3
        assert float((ours - theirs).abs().max()) <= 1e-12 * float(theirs.abs().max()), (j, ours, theirs)


def test_vopd_kl_column_is_trls_reverse_kl():
    """gcframe.teacher.teacher_columns' KL(π_S ‖ π_T) per position equals GKD's generalized_jsd_loss at β = 1 with
    reduction "none" summed over the vocabulary; its log π_T(o_t) is the teacher's log-softmax at the token."""
    from trl.experimental.gkd.gkd_trainer import GKDTrainer

    from gcframe.teacher import teacher_columns

    d = data()
    s_logits, t_logits = _logits(6), _logits(7)
    tokens = torch.randint(0, V, (N, T), generator=torch.Generator().manual_seed(8))
    b = Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long), tokens, d["mask"],
              torch.arange(N) // G)

    def model_of(logits):  # position P−1+t predicts o_t: one prompt position, then T completion positions
        return lambda **kw: NS(logits=torch.cat([logits, torch.zeros(N, 1, V, dtype=logits.dtype)], 1))

    taken, kl = teacher_columns(model_of(t_logits), b, student=model_of(s_logits))
    theirs = GKDTrainer.generalized_jsd_loss(s_logits, t_logits, beta=1.0, reduction="none").sum(-1) * d["mask"]
    assert torch.allclose(kl, theirs, rtol=1e-12, atol=1e-15) and float(kl.max()) > 0.1
    expected = torch.log_softmax(t_logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1) * d["mask"]
    assert torch.equal(taken, expected)
