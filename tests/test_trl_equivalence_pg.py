"""TRL 1.16's own GRPO loss code, unmodified, against the engine (issue 50, point 2b): loss value and gradient with
respect to log π, float64, to 1e-8, for loss_type grpo, bnpo, dr_grpo, dapo, cispo, sapo and
importance_sampling_level="sequence" (GSPO).

The route that leaves TRL's code untouched: `GRPOTrainer._compute_loss` is called as a plain function on a stand-in
`self` that carries the attributes it reads (set from a real `GRPOConfig` the way `GRPOTrainer.__init__` sets them)
and whose `_get_per_token_logps_and_entropies` returns the test's log π tensor (the model's forward pass is the one
part replaced: both sides then differentiate the same leaf). TRL computes advantages in
`_generate_and_score_completions`, as (r − mean)/(std + 1e-4); the engine's are exact (r − mean)/std, so TRL is given
the engine's advantages from `prepare`. The loss value is compared with the method's textbook loss
(gcframe.textbook), whose gradient gcframe.verify checks against the engine's.

Where TRL's settings name things differently: TRL's cispo clamps the weight at `epsilon_high` itself (the bound,
ScaleRL's ε_max), which is 1 + gcframe's clip_eps_high, and has no lower bound (gcframe: clip_eps = 1, a bound of
0); TRL's KL term is k3 times the token ratio (`use_bias_correction_kl`, the default) = gcframe's k3_ratio, and k3
without it; dr_grpo divides by `max_completion_length`, gcframe's L_max (the Normaliser's max_len); dapo and cispo
divide by `num_items_in_batch`, the batch's token count (token-mean). DAPO's overlong shaping is TRL's
`get_soft_overlong_punishment` reward, compared on its own below.
"""
from __future__ import annotations

import collections
from types import SimpleNamespace

import pytest
import torch
import trl  # noqa: F401  (the `test` extra: without it this file fails, it does not skip)

from gcframe.batch import Batch
from gcframe.engine import Normaliser, weighted_mle_loss
from gcframe.textbook import TEXTBOOK
from methods import get_method
from methods.dapo import overlong_penalty

N, G, T = 8, 4, 5  # two groups of four completions, at most T = L_max = 5 tokens
TOL = 1e-8


def data(seed: int = 0) -> dict:
    """float64 log π, log π_old, log π_ref [N, T] (0 on padding), a mask with lengths 1..5, 0/1 rewards mixed in
    each group; ratios π_θ/π_old spread over about [0.4, 2.5] so that every clip and gate bites."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 3, 4, 1, 5, 2, 5, 4])
    mask = (torch.arange(T) < lengths.unsqueeze(1)).to(torch.float64)
    logp = torch.log(torch.rand(N, T, generator=g, dtype=torch.float64) * 0.9 + 0.05) * mask
    old = (logp - torch.empty(N, T, dtype=torch.float64).uniform_(-0.9, 0.9, generator=g)) * mask
    ref = (logp + torch.empty(N, T, dtype=torch.float64).uniform_(-0.5, 0.5, generator=g)) * mask
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    return {"mask": mask, "logp": logp, "old": old, "ref": ref, "rewards": rewards}


def batch_of(d: dict) -> Batch:
    r = d["rewards"]
    return Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long), torch.full((N, T), 5),
                 d["mask"], torch.arange(N) // G, {"rewards": r, "correct": r.clone(), "old_logp": d["old"],
                                                   "ref_logp": d["ref"]})


class StandIn:
    """The attributes GRPOTrainer._compute_loss reads, set from a GRPOConfig as GRPOTrainer.__init__ sets them."""

    def __init__(self, args, logp: torch.Tensor):
        self.args, self._logp = args, logp
        self.epsilon_low = args.epsilon
        self.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
        self.beta, self.loss_type = args.beta, args.loss_type
        self.importance_sampling_level = args.importance_sampling_level
        self.off_policy_mask_threshold = args.off_policy_mask_threshold
        self.top_entropy_quantile = args.top_entropy_quantile
        self.max_completion_length = args.max_completion_length
        self.use_vllm = args.use_vllm
        self.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
        self.entropy_coef, self.use_adaptive_entropy = args.entropy_coef, args.use_adaptive_entropy
        self._entropy_bonus_enabled = self.entropy_coef != 0.0 or self.use_adaptive_entropy
        self.aux_loss_enabled = False
        self.current_gradient_accumulation_steps = 1
        self.model = SimpleNamespace(training=True)
        self.accelerator = SimpleNamespace(num_processes=1, gather=lambda x: x, gather_for_metrics=lambda x: x,
                                           reduce=lambda x, reduction="sum": x)
        self._metrics = collections.defaultdict(lambda: collections.defaultdict(list))

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, **kwargs):
        return self._logp, torch.zeros_like(self._logp), None  # log π [N, T], entropies, aux loss


def trl_loss_and_grad(d: dict, advantages: torch.Tensor, **config):
    from trl import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    args = GRPOConfig(output_dir="/tmp/trl-equivalence", per_device_train_batch_size=N, num_generations=G,
                      max_completion_length=T, report_to=[], use_cpu=True, **config)
    logp = d["logp"].clone().requires_grad_()
    inputs = {"prompt_ids": torch.ones(N, 1, dtype=torch.long), "prompt_mask": torch.ones(N, 1, dtype=torch.long),
              "completion_ids": torch.full((N, T), 5), "completion_mask": d["mask"], "advantages": advantages,
              "old_per_token_logps": d["old"], "ref_per_token_logps": d["ref"],
              "num_items_in_batch": d["mask"].sum()}
    loss = GRPOTrainer._compute_loss(StandIn(args, logp), None, inputs)
    return loss, torch.autograd.grad(loss, logp)[0]


def engine_loss_and_grad(d: dict, name: str, **options):
    """(textbook loss, ∇ of the engine's −aggregate(GC·log π) w.r.t. log π, the advantages [N] TRL is given)."""
    cls = get_method(name)
    m = cls(cls.Config.from_dict(options, name), SimpleNamespace(cfg=SimpleNamespace(
        train=SimpleNamespace(max_new_tokens=T))))
    b = batch_of(d)
    m.prepare(b)
    logp = d["logp"].clone().requires_grad_()
    gc = m.coefficients(b, logp)
    norm = Normaliser(float(N), float(d["mask"].sum()), T)  # L_max = T = TRL's max_completion_length
    grad = torch.autograd.grad(weighted_mle_loss(gc, logp, d["mask"], m.cfg.aggregation, norm), logp)[0]
    value = TEXTBOOK[name](m, b, d["logp"].clone())
    return value, grad, b.data["advantages"][:, 0].clone()


CASES = {
    # label: (gcframe method and options, TRL GRPOConfig settings)
    "grpo": (("grpo", {"beta": 0.1, "kl_estimator": "k3_ratio"}), {"loss_type": "grpo", "beta": 0.1}),
    "grpo k3": (("grpo", {"beta": 0.1, "kl_estimator": "k3"}),
                {"loss_type": "grpo", "beta": 0.1, "use_bias_correction_kl": False}),
    "bnpo": (("grpo", {"beta": 0.1, "aggregation": "token-mean", "clip_eps_high": 0.28}),
             {"loss_type": "bnpo", "beta": 0.1, "epsilon_high": 0.28}),
    "dr_grpo": (("dr_grpo", {"beta": 0.1}), {"loss_type": "dr_grpo", "beta": 0.1, "scale_rewards": "none"}),
    "dapo": (("dapo", {"overlong_cache": 2}), {"loss_type": "dapo", "epsilon_high": 0.28}),
    "dapo β": (("dapo", {"beta": 0.1, "overlong_cache": 2}), {"loss_type": "dapo", "beta": 0.1, "epsilon_high": 0.28}),
    "cispo": (("cispo", {"clip_eps_high": 0.3}), {"loss_type": "cispo", "epsilon_high": 1.3}),
    "cispo β": (("cispo", {"beta": 0.1, "clip_eps_high": 0.3}),
                {"loss_type": "cispo", "beta": 0.1, "epsilon_high": 1.3}),
    "sapo": (("sapo", {"tau_pos": 8.0, "tau_neg": 10.0}),
             {"loss_type": "sapo", "sapo_temperature_pos": 8.0, "sapo_temperature_neg": 10.0}),
    # TRL's defaults: its torch.where(Â > 0, τ_pos, τ_neg) of two Python floats is a float32 tensor, so it runs
    # τ_neg = 1.05 as float32's 1.0499999523…; gcframe is given that value (its own τ stays in log π's dtype)
    "sapo defaults β": (("sapo", {"beta": 0.1, "tau_neg": float(torch.tensor(1.05, dtype=torch.float32))}),
                        {"loss_type": "sapo", "beta": 0.1}),
    "gspo": (("gspo", {"clip_eps": 0.05, "clip_eps_high": 0.08}),
             {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 0.05, "epsilon_high": 0.08}),
    "gspo β": (("gspo", {"beta": 0.1, "kl_estimator": "k3"}),
               {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4,
                "beta": 0.1, "use_bias_correction_kl": False}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trl_loss_and_gradient_match_the_engine(case):
    (name, options), config = CASES[case]
    d = data()
    value, grad, adv = engine_loss_and_grad(d, name, **options)
    trl_value, trl_grad = trl_loss_and_grad(d, adv, **config)
    assert grad.abs().max() > 1e-3  # a gradient worth comparing
    trl_value, value = float(trl_value.detach()), float(value)
    assert abs(trl_value - value) <= TOL * max(1.0, abs(value)), (trl_value, value)
    assert (trl_grad - grad).abs().max() <= TOL * grad.abs().max(), float((trl_grad - grad).abs().max())


def test_the_data_make_the_branches_bite():
    """The cases above are not all on-policy: ratios on both sides of every band, GSPO's sequences on both sides."""
    d = data()
    r = (d["logp"] - d["old"]).exp()[d["mask"] > 0]
    assert r.min() < 0.7 and r.max() > 1.4
    s = get_method("gspo").sequence_ratio(d["logp"] - d["old"], d["mask"]).squeeze(1)
    assert (s < 1 - 0.05).any() and (s > 1 + 0.08).any() and ((s > 0.95) & (s < 1.08)).any()


def test_a_wrong_normaliser_is_caught():
    """The comparison can fail: GRPO's seq-mean-token-mean against TRL's bnpo (token-mean) differs."""
    d = data()
    _, grad, adv = engine_loss_and_grad(d, "grpo", beta=0.1)
    _, trl_grad = trl_loss_and_grad(d, adv, loss_type="bnpo", beta=0.1)
    assert (trl_grad - grad).abs().max() > 1e-3 * grad.abs().max()


def test_dapo_overlong_shaping_equals_trls_soft_overlong_punishment():
    from trl.rewards import get_soft_overlong_punishment

    lengths = list(range(25))
    theirs = get_soft_overlong_punishment(max_completion_len=20, soft_punish_cache=6)([[1] * n for n in lengths])
    ours = overlong_penalty(torch.tensor(lengths, dtype=torch.float64), 20, 6).tolist()
    assert ours == pytest.approx(theirs, abs=1e-15) and min(ours) == -1.0 and ours[14] == 0.0 and ours[15] < 0
