"""TRL 1.16's own off-policy corrections, unmodified, against the engine's (gcframe.offpolicy.corrections): loss value
and gradient with respect to log π, float64, to 1e-8, on the zoo's TRL inputs (tests/test_trl_equivalence_pg.py)
with a behaviour policy μ beside them.

TRL computes its importance weight inside `GRPOTrainer._generate_and_score_completions`, a function that generates
first; the block that turns log π_old and the sampler's log-probs into `vllm_importance_sampling_ratio` (its four
`vllm_importance_sampling_mode`s, token or sequence, truncate or mask) is taken from that function's source as it is
installed and run as written (`trl_is_ratio`); the loss is then TRL's own `_compute_loss` with `use_vllm` on, which
multiplies its per-token loss by that ratio. DeepSeek-V3.2's off-policy sequence mask is TRL's
`off_policy_mask_threshold` through the same `_compute_loss` (its `get_off_policy_mask`), with the sampler's
log-probs as `sampling_per_token_logps`. β = 0: TRL weights the policy-gradient term only and adds the KL term after,
where the engine weights the whole GC (gcframe.offpolicy.corrections' docstring); without a KL term they agree.
"""
from __future__ import annotations

import inspect
import math
import textwrap
from types import SimpleNamespace

import pytest
import torch
import trl  # noqa: F401  (the `test` extra: without it this file fails, it does not skip)

from gcframe.engine import Normaliser, weighted_mle_loss
from gcframe.offpolicy.check import RHO
from gcframe.offpolicy.corrections import Correction, inputs
from gcframe.textbook.off_policy import corrected_grpo_loss, weights
from methods import get_method
from tests.test_trl_equivalence_pg import TOL, G, N, StandIn, T, batch_of, data


def offpolicy_data() -> dict:
    """The zoo's TRL inputs (log π, log π_old, log π_ref, lengths 5, 3, 4, 1, 5, 2, 5, 4, rewards mixed in each
    group) and log μ = log π_old − log ρ with ρ = π_old/μ set per token (gcframe.offpolicy.check.RHO: 6 above every
    cap, 0.2-0.45 below 0.5, sequences' Π ρ = 6, 0.3, 1.35, 3, 1.35, 0.88, 0.624, 3.98)."""
    d = data()
    rho = torch.ones(N, T, dtype=torch.float64)
    for i, row in enumerate(RHO):
        rho[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
    d["mu"] = (d["old"] - rho.log()) * d["mask"]
    return d


def trl_is_ratio(mode: str, clip_min, clip_max, d: dict) -> torch.Tensor:
    """`vllm_importance_sampling_ratio` as TRL computes it: the `if self.use_vllm and
    self.vllm_importance_sampling_correction:` block of GRPOTrainer._generate_and_score_completions, cut from the
    installed source and executed unchanged on log π_old and log μ."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    lines = inspect.getsource(GRPOTrainer._generate_and_score_completions).splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.strip() == "if self.use_vllm and self.vllm_importance_sampling_correction:"
                 and "tool_mask" in lines[i + 1])
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(j for j in range(start + 1, len(lines))
               if lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) <= indent)
    block = textwrap.dedent("\n".join(lines[start:end]))
    assert "vllm_importance_sampling_ratio = torch.exp(logps_diff)" in block  # the block that computes it
    self = SimpleNamespace(use_vllm=True, vllm_importance_sampling_correction=True,
                           vllm_importance_sampling_mode=mode, vllm_importance_sampling_clip_min=clip_min,
                           vllm_importance_sampling_clip_max=clip_max)
    scope = {"self": self, "completion_mask": d["mask"], "tool_mask": None, "old_per_token_logps": d["old"],
             "sampling_per_token_logps": d["mu"], "torch": torch, "math": math}
    exec(compile(block, "trl/trainer/grpo_trainer.py", "exec"), scope)  # noqa: S102 (TRL's own code, unchanged)
    return scope["vllm_importance_sampling_ratio"]


def trl_loss_and_grad(d: dict, advantages: torch.Tensor, ratio: torch.Tensor | None = None, **config):
    from trl import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    args = GRPOConfig(output_dir="/tmp/trl-equivalence", per_device_train_batch_size=N, num_generations=G,
                      max_completion_length=T, report_to=[], use_cpu=True, **config)
    logp = d["logp"].clone().requires_grad_()
    self = StandIn(args, logp)
    self.use_vllm = ratio is not None  # the importance weight is applied where TRL samples with vLLM
    self.get_off_policy_mask = GRPOTrainer.get_off_policy_mask  # a staticmethod: TRL's own mask
    inputs_ = {"prompt_ids": torch.ones(N, 1, dtype=torch.long), "prompt_mask": torch.ones(N, 1, dtype=torch.long),
               "completion_ids": torch.full((N, T), 5), "completion_mask": d["mask"], "advantages": advantages,
               "old_per_token_logps": d["old"], "ref_per_token_logps": d["ref"], "sampling_per_token_logps": d["mu"],
               "num_items_in_batch": d["mask"].sum()}
    if ratio is not None:
        inputs_["importance_sampling_ratio"] = ratio
    loss = GRPOTrainer._compute_loss(self, None, inputs_)
    return loss, torch.autograd.grad(loss, logp)[0]


def engine_loss_and_grad(d: dict, name: str, correction: Correction, **options):
    """(the corrected objective's value as written, ∇ of −aggregate(w·GC·log π) w.r.t. log π, TRL's advantages [N],
    the tokens the correction cut)."""
    cls = get_method(name)
    m = cls(cls.Config.from_dict(options, name), SimpleNamespace(cfg=SimpleNamespace(
        train=SimpleNamespace(max_new_tokens=T))))
    b = batch_of(d)
    b.data["mu_logp"] = d["mu"]
    m.prepare(b)
    logp = d["logp"].clone().requires_grad_()
    w, cut = correction.factor(inputs(b, logp))
    gc = m.coefficients(b, logp) * w
    norm = Normaliser(float(N), float(d["mask"].sum()), T)
    grad = torch.autograd.grad(weighted_mle_loss(gc, logp, d["mask"], m.cfg.aggregation, norm), logp)[0]
    value = None
    if name == "grpo":  # the textbook weight (plain Python per token) inside GRPO's surrogate
        seq_adv = (b.data["advantages"] * d["mask"]).sum(-1)
        w_text, _ = weights(correction.name, d["old"], d["mu"], d["logp"], seq_adv, d["mask"], correction.low,
                            correction.high)
        value = corrected_grpo_loss(m, b, d["logp"].clone(), w_text, d["old"])
    return value, grad, b.data["advantages"][:, 0].clone(), cut


CASES = {
    # label: (gcframe method and options, gcframe correction, TRL: vllm_importance_sampling_mode, clip_min, clip_max,
    # or None for DeepSeek-V3.2's mask and its off_policy_mask_threshold δ, and further GRPOConfig settings)
    "token_truncate": (("grpo", {"beta": 0.0}), ("tis", None, 2.0), ("token_truncate", None, 2.0), {}),
    "token_truncate, C_min": (("grpo", {"beta": 0.0}), ("tis", 0.5, 2.0), ("token_truncate", 0.5, 2.0), {}),
    "token_mask": (("grpo", {"beta": 0.0}), ("mis", 0.5, 2.0), ("token_mask", 0.5, 2.0), {}),
    "token_mask, C_max only": (("grpo", {"beta": 0.0}), ("mis", 0.0, 2.5), ("token_mask", None, 2.5), {}),
    "sequence_truncate": (("grpo", {"beta": 0.0}), ("seq_tis", None, 2.0), ("sequence_truncate", None, 2.0), {}),
    "sequence_mask": (("grpo", {"beta": 0.0}), ("seq_mis", 0.5, 2.0), ("sequence_mask", 0.5, 2.0), {}),
    "sequence_mask, C_max only": (("grpo", {"beta": 0.0}), ("seq_mis", 0.0, 2.5), ("sequence_mask", None, 2.5), {}),
    "cispo, token_truncate": (("cispo", {"clip_eps_high": 0.3}), ("tis", None, 2.0), ("token_truncate", None, 2.0),
                              {"loss_type": "cispo", "epsilon_high": 1.3}),
    "off_policy_mask_threshold": (("grpo", {"beta": 0.0}), ("opsm", None, 0.005), None,
                                  {"off_policy_mask_threshold": 0.005}),
    "dapo, off_policy_mask_threshold": (("dapo", {"overlong_cache": 2}), ("opsm", None, 0.005), None,
                                        {"loss_type": "dapo", "epsilon_high": 0.28,
                                         "off_policy_mask_threshold": 0.005}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trl_corrections_match_the_engine(case):
    (name, options), spec, mode, config = CASES[case]
    d = offpolicy_data()
    value, grad, adv, cut = engine_loss_and_grad(d, name, Correction(*spec), **options)
    ratio = trl_is_ratio(*mode, d) if mode else None
    trl_value, trl_grad = trl_loss_and_grad(d, adv, ratio, **{"loss_type": "grpo", **config})
    live = cut[d["mask"] > 0]
    assert live.any() and not live.all()  # the correction cut some tokens and kept others
    assert grad.abs().max() > 1e-3
    assert (trl_grad - grad).abs().max() <= TOL * grad.abs().max(), float((trl_grad - grad).abs().max())
    if value is not None:
        trl_value, value = float(trl_value.detach()), float(value)
        assert abs(trl_value - value) <= TOL * max(1.0, abs(value)), (trl_value, value)


def test_opsm_drops_a_negative_far_sequence_and_keeps_a_positive_one():
    """δ = 0.005 on these inputs: the mask's three branches are each taken (Â < 0 and far: dropped; Â < 0 and near,
    Â ≥ 0 and far: kept), so the TRL cases above compare every branch."""
    d = offpolicy_data()
    m = d["mask"]
    seq_kl = ((d["mu"] - d["logp"]) * m).sum(-1) / m.sum(-1)  # mean log(μ/π_θ) per sequence
    _, _, adv, cut = engine_loss_and_grad(d, "grpo", Correction("opsm", None, 0.005), beta=0.0)
    dropped = cut.any(-1)
    assert bool((dropped == ((adv < 0) & (seq_kl > 0.005))).all())
    assert dropped.any() and ((adv < 0) & (seq_kl <= 0.005)).any() and ((adv >= 0) & (seq_kl > 0.005)).any()


def test_a_kl_term_is_where_trl_and_the_engine_differ():
    """With β > 0 TRL leaves the KL term unweighted and the engine weights it: the comparison can fail, and does."""
    d = offpolicy_data()
    _, grad, adv, _ = engine_loss_and_grad(d, "grpo", Correction("tis", None, 2.0), beta=0.1, kl_estimator="k3_ratio")
    _, trl_grad = trl_loss_and_grad(d, adv, trl_is_ratio("token_truncate", None, 2.0, d), loss_type="grpo", beta=0.1)
    assert (trl_grad - grad).abs().max() > 1e-4 * grad.abs().max()
