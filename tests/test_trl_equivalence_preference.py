"""TRL 1.16's own loss code, unmodified, against the engine's preference methods (issue 50, point 2b).

One set of per-token log-probs log π_θ [2P, T] (float64, requires_grad) and log π_ref feeds both sides. The engine
side is −aggregate(GC·log π) with the method's coefficients; the TRL side is the trainer's loss function called with
a stand-in `self` that carries only the attributes it reads, on the per-sequence sums or averages of the same
tensor. Gradients w.r.t. the per-token log-probs must agree to 1e-8 (relative), and so must the loss value the
method computes and logs in `coefficients` (the engine's own loss −aggregate(GC·log π) is a surrogate: its gradient,
not its value, is the method's).

The known factor: every method here aggregates with seq-mean-token-sum over the N sequences of its batch, while TRL
takes the mean over pairs (DPO, IPO, SimPO, ORPO: N = 2P sequences) or over examples (KTO: N = 2·examples, one
mismatched row per example). The engine's gradient is therefore exactly TRL's / 2, and the comparison multiplies the
engine side by 2 — a known constant, not a tolerance. The logged loss is the pair (example) mean, as TRL's.
"""
from __future__ import annotations

import os
from collections import defaultdict
from types import SimpleNamespace as NS

import pytest
import torch

from gcframe.batch import Batch
from gcframe.engine import weighted_mle_loss
from methods.base import Method

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # trl.experimental warns on import
trl = pytest.importorskip("trl")
assert trl.__version__ == "1.16.0", trl.__version__  # the pinned version (requirements/lock.txt) these stubs read

FACTOR = 2.0  # engine gradient = TRL's / 2: N = 2P sequences (or 2 rows per KTO example), TRL's mean over P
RTOL = 1e-8

CHOSEN_LENS, REJECTED_LENS, T = [3, 5, 2, 4], [4, 1, 5, 3], 5  # P = 4 pairs of different lengths


def _method(cls, **options):
    """A method object without a run context: coefficients() reads only its config."""
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(**options), ctx=None)
    return m


def _mask(lengths) -> torch.Tensor:
    return (torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.float64)  # [len(lengths), T]


def _pairs(seed: int = 0):
    """(batch [2P rows: o⁺_0, o⁻_0, o⁺_1, ...], logp [2P, T] leaf with grad, ref_logp [2P, T]) in float64."""
    g = torch.Generator().manual_seed(seed)
    lens = [n for pair in zip(CHOSEN_LENS, REJECTED_LENS) for n in pair]
    mask = _mask(lens)
    logp = (-(torch.rand(len(lens), T, generator=g, dtype=torch.float64) * 1.5 + 0.05) * mask).requires_grad_(True)
    ref = -(torch.rand(len(lens), T, generator=g, dtype=torch.float64) * 1.5 + 0.05) * mask
    P = len(CHOSEN_LENS)
    batch = Batch(torch.zeros(2 * P, 1, dtype=torch.long), torch.ones(2 * P, 1, dtype=torch.long),
                  torch.zeros(2 * P, T, dtype=torch.long), mask, torch.arange(P).repeat_interleave(2),
                  {"is_chosen": torch.tensor([1.0, 0.0], dtype=torch.float64).repeat(P), "ref_logp": ref})
    return batch, logp, ref


LOGGED = {"dpo": lambda s, c: s["dpo_loss"], "online_dpo": lambda s, c: s["dpo_loss"],
          "ipo": lambda s, c: s["ipo_loss"], "simpo": lambda s, c: s["simpo_loss"],
          "orpo": lambda s, c: s["orpo_sft_loss"] + c.lam * s["orpo_or_loss"], "kto": lambda s, c: s["kto_loss"]}
"""The method's loss value as its coefficients() records it (the pair or example mean)."""


def _engine(method, batch, logp):
    """(the logged loss, ∂/∂logp [N, T] of the engine's −aggregate(GC·log π), seq-mean-token-sum)."""
    loss = weighted_mle_loss(method.coefficients(batch, logp), logp, batch.completion_mask, method.cfg.aggregation)
    (grad,) = torch.autograd.grad(loss, logp)
    stats = method.pop_stats()
    method.last_stats = stats
    return LOGGED[method.name](stats, method.cfg), grad


def _trl_grad(loss, logp):
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


def _assert_match(engine, trl_side):
    """The logged loss equals TRL's and the engine's gradient × FACTOR equals TRL's, to RTOL of TRL's scale; the
    gradient is not trivial."""
    (le, ge), (lt, gt) = engine, trl_side
    assert gt.abs().max() > 1e-3  # a non-trivial gradient on the per-token log-probs
    assert abs(float(le) - float(lt)) <= RTOL * max(1.0, abs(float(lt))), (float(le), float(lt))
    assert float((FACTOR * ge - gt).abs().max()) <= RTOL * float(gt.abs().max())


def _sums(x, mask):
    return (x * mask).sum(-1)  # [N]


def _means(x, mask):
    return (x * mask).sum(-1) / mask.sum(-1)  # [N]


# -- DPO's and IPO's loss: DPOTrainer._compute_loss -------------------------------------------------------------------
class _Accelerator:
    device = torch.device("cpu")

    @staticmethod
    def gather_for_metrics(x):
        return x

    gather = gather_for_metrics


def _dpo_trainer_loss(loss_type: str, beta: float, logp, ref, mask):
    """TRL's DPOTrainer._compute_loss on a stand-in model whose `log_probs` are our per-token log-probs. TRL's batch
    is [chosen..., rejected...]; its completion_mask covers input_ids (T + 1 positions: one prompt token, then the
    completion), and the model's log_probs the T shifted positions. The reference log-probs come precomputed."""
    from trl.trainer.dpo_trainer import DPOTrainer

    order = torch.cat([torch.arange(0, len(mask), 2), torch.arange(1, len(mask), 2)])  # chosen rows, rejected rows
    lp, m = (logp * mask)[order], mask[order]
    n = len(order)
    ref_sums = _sums(ref, mask)[order]
    inputs = {"input_ids": torch.ones(n, T + 1, dtype=torch.long), "attention_mask": torch.ones(n, T + 1),
              "completion_mask": torch.cat([torch.zeros(n, 1), m], 1).long(),
              "ref_chosen_logps": ref_sums[: n // 2], "ref_rejected_logps": ref_sums[n // 2:]}

    def model(**kw):
        return NS(log_probs=lp, entropy=torch.zeros(n, T), mean_logits=torch.zeros(n, T),
                  is_top1=torch.zeros(n, T, dtype=torch.bool))

    stub = NS(model=NS(training=True), accelerator=_Accelerator(), aux_loss_enabled=False, ld_alpha=None,
              precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=[loss_type], loss_weights=[1.0],
              beta=beta, use_weighting=False, _metrics=defaultdict(lambda: defaultdict(list)),
              _total_train_tokens=0, _tp_size=1)
    return DPOTrainer._compute_loss(stub, model, inputs, return_outputs=False)


@pytest.mark.parametrize("name", ["dpo", "online_dpo"])  # online DPO's loss is DPO's (TRL's OnlineDPOTrainer too)
@pytest.mark.parametrize("beta", [0.1, 0.7])
def test_dpo_equals_trl_sigmoid(name, beta):
    from methods import REGISTRY

    batch, logp, ref = _pairs()
    _assert_match(_engine(_method(REGISTRY[name], beta=beta), batch, logp),
                  _trl_grad(_dpo_trainer_loss("sigmoid", beta, logp, ref, batch.completion_mask), logp))


@pytest.mark.parametrize("tau", [0.1, 2.0])
def test_ipo_token_mean_equals_trl_ipo(tau):
    """TRL 1.16's ipo divides each sequence's log-ratio by its length: methods.ipo's token_mean option."""
    from methods.ipo import IPO

    batch, logp, ref = _pairs(1)
    _assert_match(_engine(_method(IPO, tau=tau, token_mean=True), batch, logp),
                  _trl_grad(_dpo_trainer_loss("ipo", tau, logp, ref, batch.completion_mask), logp))


def test_ipo_default_is_eq_17_not_trls_form():
    """The default (eq. 17's sums) is not TRL's averaged form: the comparison sees the difference."""
    from methods.ipo import IPO

    batch, logp, ref = _pairs(1)
    le, _ = _engine(_method(IPO, tau=0.1), batch, logp)
    lt = _dpo_trainer_loss("ipo", 0.1, logp, ref, batch.completion_mask).detach()
    assert abs(float(le) - float(lt)) > 1e-2


# -- SimPO: CPOTrainer.cpo_loss(loss_type="simpo") -------------------------------------------------------------------
@pytest.mark.parametrize("beta, gamma", [(2.0, 1.0), (0.5, 0.3)])
def test_simpo_equals_trl_cpo_simpo(beta, gamma):
    from trl.experimental.cpo.cpo_trainer import CPOTrainer

    from methods.simpo import SimPO

    batch, logp, _ = _pairs(2)
    a = _means(logp, batch.completion_mask)  # ā [2P], TRL's get_batch_logps(average_log_prob=True)
    stub = NS(alpha=0.0, loss_type="simpo", simpo_gamma=gamma, beta=beta, label_smoothing=0.0,
              accelerator=_Accelerator())
    losses, _, _ = CPOTrainer.cpo_loss(stub, a[0::2], a[1::2])
    _assert_match(_engine(_method(SimPO, beta=beta, gamma=gamma), batch, logp), _trl_grad(losses.mean(), logp))


# -- ORPO: ORPOTrainer.odds_ratio_loss -------------------------------------------------------------------------------
class _KeepsFloat64(torch.Tensor):
    """odds_ratio_loss begins with `.float()` (float32); this float64 tensor's `.float()` is itself, so TRL's code runs
    unmodified in float64 (its autograd graph is the plain tensor's)."""

    def float(self, *args, **kwargs):
        return self


@pytest.mark.parametrize("lam", [0.1, 1.0])
def test_orpo_equals_trl_odds_ratio_loss(lam):
    """ORPO = L_SFT − mean(odds_ratio_loss): TRL's odds-ratio term exactly; the SFT term as eq. 6 writes it, the
    mean over pairs of −ā⁺ (TRL's trainer takes a token mean over the batch's chosen tokens instead)."""
    from trl.experimental.orpo.orpo_trainer import ORPOTrainer

    from methods.orpo import ORPO

    batch, logp, _ = _pairs(3)
    a = _means(logp, batch.completion_mask).as_subclass(_KeepsFloat64)  # ā [2P]
    losses, *_ = ORPOTrainer.odds_ratio_loss(NS(beta=lam, accelerator=_Accelerator()), a[0::2], a[1::2])
    assert losses.dtype == torch.float64
    sft = -_means(logp, batch.completion_mask)[0::2].mean()
    trl_side = _trl_grad((sft - losses.mean()).as_subclass(torch.Tensor), logp)
    _assert_match(_engine(_method(ORPO, lam=lam), batch, logp), trl_side)


# -- KTO: KTOTrainer._compute_loss (KL estimate from the mismatched completions included) -------------------------
def _kto_batch(seed: int = 4):
    """Four examples (desirable, undesirable, desirable, undesirable), each followed by its mismatched row, as
    methods.kto builds them; the mismatched rows' log-ratios are shifted up so that z₀ > 0."""
    g = torch.Generator().manual_seed(seed)
    lens = [3, 4, 5, 2, 2, 5, 4, 3]  # example 0, mismatched 0, example 1, ...
    mask = _mask(lens)
    ref = -(torch.rand(8, T, generator=g, dtype=torch.float64) * 1.5 + 0.05) * mask
    logp = ref + (torch.rand(8, T, generator=g, dtype=torch.float64) - 0.4) * mask  # Δ mostly > 0
    logp = logp.requires_grad_(True)
    desirable = torch.tensor([1.0, 0, 0, 0, 1, 0, 0, 0], dtype=torch.float64)
    mismatched = torch.tensor([0.0, 1.0], dtype=torch.float64).repeat(4)
    batch = Batch(torch.zeros(8, 1, dtype=torch.long), torch.ones(8, 1, dtype=torch.long),
                  torch.zeros(8, T, dtype=torch.long), mask, torch.arange(4).repeat_interleave(2),
                  {"desirable": desirable, "mismatched": mismatched, "ref_logp": ref})
    return batch, logp, ref


def _kto_trainer_loss(beta, w_d, w_u, logp, ref, batch):
    from trl.trainer.kto_trainer import KTOTrainer

    mask, d = batch.completion_mask, batch.data
    ex, mm = torch.arange(0, 8, 2), torch.arange(1, 8, 2)
    n = len(ex)
    lp = logp * mask
    inputs = {"input_ids": torch.ones(n, T + 1, dtype=torch.long), "attention_mask": torch.ones(n, T + 1),
              "completion_mask": torch.cat([torch.zeros(n, 1), mask[ex]], 1).long(),
              "label": d["desirable"][ex].bool(),
              "KL_input_ids": torch.full((n, T + 1), 2, dtype=torch.long), "KL_attention_mask": torch.ones(n, T + 1),
              "KL_completion_mask": torch.cat([torch.zeros(n, 1), mask[mm]], 1).long(),
              "ref_logps": _sums(ref, mask)[ex], "ref_KL_logps": _sums(ref, mask)[mm]}

    def model(input_ids, **kw):  # the examples (input_ids 1) or the mismatched KL rows (input_ids 2)
        rows = ex if int(input_ids[0, 0]) == 1 else mm
        return NS(log_probs=lp[rows], entropy=torch.zeros(n, T), mean_logits=torch.zeros(n, T))

    stub = NS(model=NS(training=True), accelerator=_Accelerator(), calculate_KL=True, aux_loss_enabled=False,
              precompute_ref_logps=True, loss_type="kto", beta=beta, desirable_weight=w_d, undesirable_weight=w_u,
              _metrics=defaultdict(lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1)
    stub._compute_kl_logps = lambda m, b: KTOTrainer._compute_kl_logps(stub, m, b)
    loss = KTOTrainer._compute_loss(stub, model, inputs, return_outputs=False)
    return loss, stub._metrics["train"]["kl"][-1]


@pytest.mark.parametrize("beta, w_d, w_u", [(0.1, 1.0, 1.0), (0.5, 1.0, 1.5), (2.0, 1.33, 1.0)])
def test_kto_equals_trl_kto(beta, w_d, w_u):
    from methods.kto import KTO

    batch, logp, ref = _kto_batch()
    m = _method(KTO, beta=beta, desirable_weight=w_d, undesirable_weight=w_u)
    engine = _engine(m, batch, logp)
    loss, kl = _kto_trainer_loss(beta, w_d, w_u, logp, ref, batch)
    z0 = m.last_stats["kto_z0"]
    assert z0 > 0.05 and z0 == pytest.approx(kl, rel=1e-12)  # the clamp is not what makes them agree
    _assert_match(engine, _trl_grad(loss, logp))
    assert float(engine[1][1::2].abs().max()) == 0.0  # the mismatched rows carry no gradient (z₀ is detached)


def test_kto_reference_point_is_clamped_at_zero_like_trl():
    """Mismatched rows with a negative mean log-ratio: z₀ = max(0, ·) = 0 on both sides."""
    from methods.kto import KTO

    batch, logp, ref = _kto_batch(5)
    with torch.no_grad():
        logp[1::2] = (ref[1::2] - 0.3) * 1.0  # Δ = −0.3·|o| < 0 on every mismatched row (mask zeros stay zero)
        logp[1::2] *= batch.completion_mask[1::2]
    m = _method(KTO, beta=0.5)
    engine = _engine(m, batch, logp)
    loss, kl = _kto_trainer_loss(0.5, 1.0, 1.0, logp, ref, batch)
    assert m.last_stats["kto_z0"] == 0.0 == kl
    _assert_match(engine, _trl_grad(loss, logp))


def test_a_wrong_normaliser_is_caught():
    """The comparison can fail: DPO's loss aggregated per pair instead of per sequence is off by the factor 2."""
    from methods.dpo import DPO

    batch, logp, ref = _pairs()
    le, ge = _engine(_method(DPO, beta=0.1), batch, logp)
    with pytest.raises(AssertionError):
        _assert_match((le, ge / FACTOR), _trl_grad(_dpo_trainer_loss("sigmoid", 0.1, logp, ref,
                                                                               batch.completion_mask), logp))
