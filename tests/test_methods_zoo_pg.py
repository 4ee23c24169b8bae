"""Dr. GRPO, DAPO, GSPO, CISPO and SAPO: every branch was live in gcframe.verify's batch, hand-computed GC and
shaping on tiny batches (the arithmetic in the comments), their defaults, the train defaults a run gets, and their
bad options refused in one line."""
import math
from types import SimpleNamespace

import pytest
import torch

from gcframe import verify
from gcframe.batch import Batch
from gcframe.errors import UserError
from methods import get_method
from methods.dapo import overlong_penalty

ZOO = ["dr_grpo", "dapo", "gspo", "cispo", "sapo"]


@pytest.fixture(scope="module")
def rows():
    from accelerate import Accelerator

    from gcframe import pipeline

    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    return {name: verify.verify_method(name, cfg, task, base_dir, acc) for name in ZOO}


@pytest.mark.parametrize("name", ZOO)
def test_the_verify_row_matches_with_kl_on(rows, name):
    assert rows[name]["max_rel_diff"] <= verify.TOLERANCE and rows[name]["beta"] > 0


@pytest.mark.parametrize("name", ["dr_grpo", "dapo", "gspo", "cispo"])
def test_the_clip_bit_on_both_sides(rows, name):
    s = rows[name]["stats"]
    assert s["clip_low_frac"] > 0 and s["clip_high_frac"] > 0 and s["clip_frac"] < 1


def test_gspo_clipped_some_sequences_and_kept_others(rows):
    assert 0 < rows["gspo"]["stats"]["seq_clip_frac"] < 1


def test_sapo_gate_was_in_its_nonlinear_range(rows):
    s = rows["sapo"]["stats"]  # the weight 4p(1 − p) is 1 at r = 1: below ½ on some tokens, not on all
    assert 0 < s["gate_below_half_frac"] < 1 and s["gate_weight_min"] < 0.5


def test_dapo_penalised_some_completions_and_not_others(rows):
    assert 0 < rows["dapo"]["stats"]["overlong_frac"] < 1


# -- hand-computed cases ---------------------------------------------------------------------------------------------
def make(rewards, logp, old_logp, group_ids=None, mask=None) -> Batch:
    """A Batch whose GC-relevant tensors are given (rewards [N], log π and log π_old [N, T], mask [N, T])."""
    N, T = logp.shape
    mask = torch.ones(N, T, dtype=torch.float64) if mask is None else mask
    r = torch.tensor(rewards, dtype=torch.float64)
    return Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long), torch.full((N, T), 5),
                 mask, torch.tensor(group_ids if group_ids is not None else [0] * N),
                 {"rewards": r, "correct": r.clone(), "old_logp": old_logp})


def method(name, max_new_tokens=10, **options):
    cls = get_method(name)
    ctx = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(max_new_tokens=max_new_tokens)))
    return cls(cls.Config.from_dict(options, name), ctx)


def test_dapo_overlong_penalty_by_hand():
    # L_max = 10, L_cache = 4: no penalty up to 10 − 4 = 6 tokens, then ((10 − 4) − |y|)/4, −1 past L_max
    lengths = torch.tensor([5.0, 6.0, 7.0, 9.0, 10.0, 11.0])
    assert overlong_penalty(lengths, 10, 4).tolist() == [0.0, 0.0, -0.25, -0.75, -1.0, -1.0]
    assert overlong_penalty(lengths, 10, 0).tolist() == [0.0] * 6  # L_cache = 0: no shaping


def test_dapo_advantage_of_the_shaped_rewards_by_hand():
    # one group of 4, rewards [1, 1, 0, 0], lengths [6, 10, 6, 8], L_max = 10, L_cache = 4:
    #   R_length = [0, −1, 0, −0.5] -> shaped [1, 0, 0, −0.5], mean 0.125, centred [.875, −.125, −.125, −.625]
    #   unbiased std = √((.875² + .125² + .125² + .625²)/3) = √(1.1875/3)
    mask = torch.tensor([[1.0] * 6 + [0] * 4, [1.0] * 10, [1.0] * 6 + [0] * 4, [1.0] * 8 + [0] * 2],
                        dtype=torch.float64)
    zeros = torch.zeros(4, 10, dtype=torch.float64)
    m = method("dapo", overlong_cache=4)
    b = make([1.0, 1.0, 0.0, 0.0], zeros, zeros, mask=mask)
    m.prepare(b)
    std = math.sqrt(1.1875 / 3)
    assert b.data["advantages"][:, 0].tolist() == pytest.approx([0.875 / std, -0.125 / std, -0.125 / std,
                                                                 -0.625 / std], rel=1e-12)
    stats = m.pop_stats()
    assert stats["overlong_frac"] == 0.5 and stats["overlong_penalty"] == pytest.approx(-1.5 / 4)


def test_dapo_default_cache_is_a_fifth_of_l_max():
    assert method("dapo", max_new_tokens=20480).overlong_cache(20480) == 4096  # the paper's 4,096 of 20,480


def test_gspo_sequence_ratio_is_the_geometric_mean_and_clips_whole_sequences():
    # token ratios 2, 0.5, 4 and a padded 4th token: s = (2 · 0.5 · 4)^(1/3) = 4^(1/3) ≈ 1.587
    log_r = torch.log(torch.tensor([[2.0, 0.5, 4.0, 9.0]], dtype=torch.float64))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    s = get_method("gspo").sequence_ratio(log_r, mask)
    assert float(s) == pytest.approx(4 ** (1 / 3), rel=1e-14)
    # two sequences with those ratios, rewards [1, 0] -> Â = ±1/√2; s ≈ 1.587 > 1 + 4e-4: the Â > 0 sequence is
    # clipped whole (GC 0 on every token), the Â < 0 one is not (s < 1 − 3e-4 is false): GC = Â·s on its tokens
    logp = torch.zeros(2, 4, dtype=torch.float64)
    b = make([1.0, 0.0], logp, -log_r.repeat(2, 1), mask=mask.repeat(2, 1))
    m = method("gspo")
    m.prepare(b)
    gc = m.coefficients(b, logp)
    h = 1 / math.sqrt(2)
    assert gc[0].tolist() == [0.0] * 4
    assert gc[1, :3].tolist() == pytest.approx([-h * 4 ** (1 / 3)] * 3, rel=1e-14) and gc[1, 3] == 0
    assert m.pop_stats()["seq_clip_frac"] == 0.5


def close(gc: torch.Tensor, expected) -> bool:
    return torch.allclose(gc, torch.tensor(expected, dtype=gc.dtype), rtol=1e-13, atol=0)


def ratios_batch(ratios, rewards=(1.0, 0.0)):
    """One group with rewards [1, 0] (Â = ±1/√2) and token ratios π_θ/π_old `ratios` [2, T]."""
    r = torch.tensor(ratios, dtype=torch.float64)
    logp = torch.zeros_like(r)
    return make(list(rewards), logp, -r.log()), logp


def test_cispo_keeps_the_gradient_of_clipped_tokens():
    # ε_low = ε_high = 0.1: weights clipped to [0.9, 1.1] whatever Â's sign; GRPO would zero (Â > 0, r = 2) and
    # (Â < 0, r = 0.5), CISPO keeps them with the clipped weight: GC = clip(r)·Â
    b, logp = ratios_batch([[2.0, 1.05], [0.5, 3.0]])
    m = method("cispo", clip_eps=0.1, clip_eps_high=0.1)
    m.prepare(b)
    h = 1 / math.sqrt(2)
    assert close(m.coefficients(b, logp), [[1.1 * h, 1.05 * h], [-0.9 * h, -1.1 * h]])
    s = m.pop_stats()
    assert (s["clip_low_frac"], s["clip_high_frac"]) == (0.25, 0.5)


def test_cispo_defaults_clamp_only_from_above_at_five():
    # TRL's cispo: min(r, epsilon_high = 5): r = 6 -> 5, r = 0.01 stays 0.01 (no lower bound)
    b, logp = ratios_batch([[6.0, 1.0], [0.01, 1.0]])
    m = method("cispo")
    m.prepare(b)
    h = 1 / math.sqrt(2)
    assert m.coefficients(b, logp)[:, 0].tolist() == pytest.approx([5 * h, -0.01 * h], rel=1e-14)


def test_sapo_soft_gate_by_hand():
    # τ_pos = 2 on Â > 0, τ_neg = 3 on Â < 0. GC = Â · 4p(1 − p) · r, p = σ(τ(r − 1)):
    #   r = 1: p = ½, 4p(1 − p) = 1 -> GC = Â (GRPO's on-policy coefficient)
    #   r = 1.5, τ = 2: p = σ(1) = 0.7310586, 4p(1 − p) = 0.7864477 -> GC = Â · 1.1796716
    #   r = 0.5, τ = 3: p = σ(−1.5) = 0.1824255, 4p(1 − p) = 0.5965202 -> GC = Â · 0.2982601
    b, logp = ratios_batch([[1.0, 1.5], [1.0, 0.5]])
    m = method("sapo", tau_pos=2.0, tau_neg=3.0)
    m.prepare(b)
    h = 1 / math.sqrt(2)
    p1, p2 = 1 / (1 + math.exp(-1.0)), 1 / (1 + math.exp(1.5))
    expected = [[h, h * 4 * p1 * (1 - p1) * 1.5], [-h, -h * 4 * p2 * (1 - p2) * 0.5]]
    assert close(m.coefficients(b, logp), expected)
    assert 4 * p1 * (1 - p1) * 1.5 == pytest.approx(1.1796716, abs=1e-7)


def test_dr_grpo_is_grpo_without_std_and_length_normalisation():
    c = get_method("dr_grpo").Config()
    assert (c.aggregation, c.scale_by_std, c.beta) == ("seq-mean-token-sum-norm", False, 0.0)
    # rewards [1, 0, 0, 0]: Â = r − mean = [.75, −.25, −.25, −.25], no division by the std
    b, logp = ratios_batch([[1.0], [1.0], [1.0], [1.0]], rewards=(1.0, 0.0, 0.0, 0.0))
    m = method("dr_grpo")
    m.prepare(b)
    assert m.coefficients(b, logp)[:, 0].tolist() == [0.75, -0.25, -0.25, -0.25]


def test_the_papers_defaults():
    d, g, ci, s = (get_method(n).Config() for n in ("dapo", "gspo", "cispo", "sapo"))
    assert (d.clip_eps, d.clip_eps_high, d.beta, d.aggregation) == (0.2, 0.28, 0.0, "token-mean")  # DAPO §4.1
    assert (g.clip_eps, g.clip_eps_high, g.beta, g.aggregation) == (3e-4, 4e-4, 0.0, "seq-mean-token-mean")
    assert (1 - ci.clip_eps, 1 + ci.clip_eps_high, ci.aggregation) == (0.0, 5.0, "token-mean")  # TRL's cispo
    assert (s.tau_pos, s.tau_neg, s.aggregation) == (1.0, 1.05, "seq-mean-token-mean")  # SAPO and TRL
    assert not hasattr(s, "clip_eps")  # SAPO has a gate, no clip


def test_dapo_runs_with_dynamic_sampling_unless_its_own_train_turns_it_off():
    from experiments.compare_config import run_config
    from gcframe.config import from_dict

    cfg = from_dict({"train": {"group_size": 4}})
    assert run_config(cfg, "dapo", 0)[1].train.dynamic_sampling is True
    assert run_config(cfg, "grpo", 0)[1].train.dynamic_sampling is False
    off = from_dict({"train": {"group_size": 4}, "methods": {"dapo": {"train": {"dynamic_sampling": False}}}})
    assert run_config(off, "dapo", 0)[1].train.dynamic_sampling is False


@pytest.mark.parametrize("name, options, words", [
    ("sapo", {"tau_pos": 0.0}, "methods.sapo.tau_pos must be > 0"),
    ("sapo", {"tau_neg": -1.0}, "methods.sapo.tau_neg must be > 0"),
    ("dapo", {"overlong_cache": -1}, "overlong_cache must be >= 0"),
    ("gspo", {"clip_eps": 0.0}, "clip_eps and clip_eps_high must be > 0"),
    ("cispo", {"clip_eps_high": -1.0}, "clip_eps and clip_eps_high must be > 0"),
])
def test_bad_options_are_one_line(name, options, words):
    with pytest.raises(UserError, match=words) as e:
        get_method(name).Config.from_dict(options, name)
    assert "\n" not in str(e.value)


def test_dapo_refuses_a_cache_longer_than_the_completions():
    from gcframe.config import from_dict

    cfg = from_dict({"train": {"group_size": 4, "max_new_tokens": 8}, "methods": {"dapo": {"overlong_cache": 9}}})
    with pytest.raises(UserError, match=r"overlong_cache \(9\) exceeds train.max_new_tokens \(8\)"):
        get_method("dapo").check_run(cfg, "dapo")
    get_method("dapo").check_run(from_dict({"train": {"group_size": 4, "max_new_tokens": 8}}), "dapo")  # 8/5 -> 2


@pytest.mark.parametrize("name", ["gspo", "cispo", "sapo", "dapo", "dr_grpo"])
def test_on_policy_every_gc_is_the_advantage(name):
    """One pass over a batch (train.epochs = minibatches = 1): π_old = π_θ, every ratio is 1, no clip or gate acts,
    and at β = 0 GC = Â: these methods then differ from GRPO only in advantage and normaliser."""
    logp = torch.log(torch.tensor([[0.3, 0.6], [0.2, 0.9]], dtype=torch.float64))
    b = make([1.0, 0.0], logp, logp.clone())
    del b.data["old_logp"]  # what the engine stores when it does not reuse the batch
    m = method(name)
    m.prepare(b)
    assert torch.equal(m.coefficients(b, logp), b.data["advantages"])
