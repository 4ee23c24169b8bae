"""Policy-gradient methods' GC on tiny hand-made batches, no model (arithmetic in the comments)."""
import math
from types import SimpleNamespace

import pytest
import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.modeling import build_char_tokenizer
from methods import get_method

H = 1 / math.sqrt(2)  # group-relative advantage of r = [1, 0]: (1 − .5)/std([1, 0]) = .5/√.5 = 1/√2


def make(rewards, T=2, group_ids=None, **data) -> Batch:
    """A Batch of N sequences with T unpadded completion tokens; only the tensors the GC reads matter."""
    N = len(rewards)
    gids = torch.tensor(group_ids if group_ids is not None else [0] * N)
    r = torch.tensor(rewards, dtype=torch.float32)
    return Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long),
                 torch.full((N, T), 5), torch.ones(N, T), gids,
                 {"rewards": r, "correct": r.clone(), **data})


def method(name, **options):
    cls = get_method(name)
    return cls(cls.Config.from_dict(options, name), SimpleNamespace())


def grpo_batch():
    # one group, r = [1, 0] -> Â = [+1/√2, −1/√2]. Ratios r = π_θ/π_old:
    #   seq 0 (Â > 0): [1.0, 1.5]  -> token 1 clipped (1.5 > 1 + .2)
    #   seq 1 (Â < 0): [0.5, 1.1]  -> token 0 clipped (.5 < 1 − .2); 1.1 is inside the band
    # ρ = π_ref/π_θ: 2 on seq 0, .5 on seq 1 -> k3's GC β(ρ − 1) = +.04 / −.02 at β = .04
    logp = torch.log(torch.tensor([[0.4, 0.3], [0.2, 0.5]]))
    ratio = torch.tensor([[1.0, 1.5], [0.5, 1.1]])
    rho = torch.tensor([[2.0, 2.0], [0.5, 0.5]])
    b = make([1.0, 0.0], old_logp=logp - ratio.log(), ref_logp=logp + rho.log())
    return b, logp


def test_grpo_gc_hand_computed_clip_bites_to_kl_term():
    m = method("grpo", kl_estimator="k3")  # the seed's k3 (DeepSeekMath)
    b, logp = grpo_batch()
    m.prepare(b)
    gc = m.coefficients(b, logp)
    expected = torch.tensor([[H * 1.0 + 0.04, 0.04],  # clipped: exactly the β(ρ − 1) term
                             [-0.02, -H * 1.1 - 0.02]])  # clipped: exactly the β(ρ − 1) term
    assert torch.allclose(gc, expected, atol=1e-6)
    stats = m.pop_stats()
    assert stats["clip_frac"] == pytest.approx(0.5)  # 2 of 4 tokens
    assert stats["zero_var_frac"] == 0.0
    assert stats["kl_k3"] == pytest.approx(float((2 - math.log(2) - 1 + 0.5 + math.log(2) - 1) / 2), abs=1e-6)


def test_grpo_asymmetric_clip_and_k2_k3_ratio():
    # ε_high = .6: seq 0's 1.5 < 1.6 is no longer clipped -> Â·r = 1.5/√2; seq 1's .5 < 1 − .2 still is
    # KL part of GC = −β·c, log ρ = +ln 2 on seq 0, −ln 2 on seq 1, β = .04:
    #   k2:       c = −log ρ     -> −β c = β log ρ   = +.04 ln 2 (seq 0), −.04 ln 2 (seq 1) on every token
    #   k3_ratio: c = −r log ρ   -> −β c = β r log ρ = .04·[1, 1.5] ln 2 (seq 0), −.04·[.5, 1.1] ln 2 (seq 1)
    L = math.log(2.0)
    expected = {"k2": [[H + 0.04 * L, 1.5 * H + 0.04 * L], [-0.04 * L, -1.1 * H - 0.04 * L]],
                "k3_ratio": [[H + 0.04 * L, 1.5 * H + 0.06 * L], [-0.02 * L, -1.1 * H - 0.044 * L]]}
    for kind, want in expected.items():
        m = method("grpo", clip_eps_high=0.6, kl_estimator=kind)
        b, logp = grpo_batch()
        m.prepare(b)
        assert torch.allclose(m.coefficients(b, logp), torch.tensor(want), atol=1e-6), kind
        assert m.pop_stats()["clip_frac"] == pytest.approx(0.25)


def test_grpo_default_kl_is_k3_ratio_and_k1_is_refused():
    assert method("grpo").cfg.kl_estimator == "k3_ratio"
    with pytest.raises(UserError, match="k1.*regularises nothing") as e:
        method("grpo", kl_estimator="k1")
    assert "\n" not in str(e.value)  # one line
    with pytest.raises(UserError, match="k1"):
        method("grpo_ps", kl_estimator="k1")


def test_grpo_zero_variance_group_is_pure_kl_and_on_policy_ratio_is_one():
    # group 0: r = [1, 1] -> Â = 0; group 1: r = [1, 0] -> ±1/√2. No old_logp: on-policy, r = 1.
    # ρ = 1 (ref = θ) -> no KL term: GC = Â exactly, 0 on the flat group
    logp = torch.log(torch.full((4, 2), 0.3))
    b = make([1.0, 1.0, 1.0, 0.0], group_ids=[0, 0, 1, 1], ref_logp=logp.clone())
    m = method("grpo")
    m.prepare(b)
    gc = m.coefficients(b, logp)
    assert torch.allclose(gc, torch.tensor([[0.0, 0], [0, 0], [H, H], [-H, -H]]), atol=1e-6)
    stats = m.pop_stats()
    assert stats["zero_var_frac"] == 0.5 and stats["clip_frac"] == 0.0
    # an all-equal batch never produces NaN
    b = make([0.0, 0.0], ref_logp=torch.zeros(2, 2))
    m.prepare(b)
    assert torch.equal(m.coefficients(b, torch.zeros(2, 2)), torch.zeros(2, 2))


def test_grpo_leave_one_out_without_std():
    # r = [1, 0, 0]: Â = r_i − mean of the others = [1, −.5, −.5]; β = 0
    m = method("grpo", leave_one_out=True, scale_by_std=False, beta=0.0)
    b = make([1.0, 0.0, 0.0], T=1)
    m.prepare(b)
    assert torch.allclose(m.coefficients(b, torch.zeros(3, 1)), torch.tensor([[1.0], [-0.5], [-0.5]]))


def test_grpo_ps_uses_process_advantages():
    # the 2-sequence example of tests/test_advantages.py: Â = [[-s, -s, -2s, -2s], [s, s, s, 0]], s = 1/√3;
    # β = 0 and on-policy -> GC = Â
    s = 1 / math.sqrt(3)
    b = make([1.0, 1.0], T=4, step_rewards=torch.tensor([[0.0, 1, 0, 0], [0, 0, 1, 0]]),
             step_mask=torch.tensor([[0.0, 1, 0, 1], [0, 0, 1, 0]]))
    m = method("grpo_ps", beta=0.0)
    m.prepare(b)  # outcome rewards are equal, but the steps differ: a live group
    gc = m.coefficients(b, torch.zeros(2, 4))
    assert torch.allclose(gc, torch.tensor([[-s, -s, -2 * s, -2 * s], [s, s, s, 0]]), atol=1e-6)
    assert m.pop_stats()["zero_var_frac"] == 0.0


def test_online_rft_gc_is_zero_on_wrong_samples():
    m = method("online_rft")
    b = make([1.0, 0.0, 1.0], T=3)
    gc = m.coefficients(b, torch.zeros(3, 3))
    assert torch.equal(gc, torch.tensor([[1.0, 1, 1], [0, 0, 0], [1, 1, 1]]))
    assert m.cfg.aggregation == "seq-mean-token-mean"  # rejected samples count in the normaliser


def test_rloo_advantages_sum_to_zero_per_group():
    # group 0: r = [1, 0, 0, 1]: Â = r_i − mean_{j≠i} r_j = [1 − 1/3, 0 − 2/3, 0 − 2/3, 1 − 1/3]
    # group 1: r = [.5, .2]: Â = [.3, −.3]
    m = method("rloo")
    assert not m.uses_reference  # β = 0: no π_ref needed
    b = make([1.0, 0.0, 0.0, 1.0, 0.5, 0.2], group_ids=[0, 0, 0, 0, 1, 1])
    m.prepare(b)
    adv = b.data["advantages"]
    assert torch.allclose(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3, 0.3, -0.3]))
    assert abs(float(adv[:4].sum())) < 1e-6 and abs(float(adv[4:].sum())) < 1e-6
    gc = m.coefficients(b, torch.zeros(6, 2))  # on-policy: r = 1, GC = Â on every token
    assert torch.allclose(gc, adv.unsqueeze(1).expand(6, 2))
    # with β = .1 and ρ = 2: GC = Â − .1·(1 − 2) = Â + .1
    m = method("rloo", beta=0.1)
    assert m.uses_reference
    b.data["ref_logp"] = torch.full((6, 2), math.log(2.0))
    assert torch.allclose(m.coefficients(b, torch.zeros(6, 2)), adv.unsqueeze(1) + 0.1)


def test_configs_reject_bad_options():
    with pytest.raises(UserError, match="kl_estimator must be one of k3_ratio, k2, k3"):
        method("grpo", kl_estimator="k5")
    with pytest.raises(UserError, match="clip_eps"):
        method("grpo", clip_eps=0.0)
    with pytest.raises(UserError, match="beta"):
        method("rloo", beta=-1.0)
    with pytest.raises(UserError, match="pool_size"):
        method("rft", pool_size=0)


class FakeContext:
    """Just what RFT's pool building uses: a sampler whose correctness alternates, a seeded order, a tokenizer."""

    def __init__(self, steps=3, B=2, G=2):
        self.cfg = SimpleNamespace(train=SimpleNamespace(steps=steps, prompts_per_step=B, group_size=G))
        self.tok = build_char_tokenizer()
        self.calls, self.frozen_names = 0, []

    def frozen(self, name):
        self.frozen_names.append(name)
        return "base-model"

    def rollout(self, n_prompts, group_size, model=None):
        assert model == "base-model"  # offline: samples of the frozen SFT base, never the policy
        self.calls += 1
        n = n_prompts * group_size
        texts = [{"prompt": "1+2=", "completion": "3" if i % 2 == 0 else "4", "answer": "3"} for i in range(n)]
        b = make([1.0 if i % 2 == 0 else 0.0 for i in range(n)])
        b.texts = texts
        return b

    def draw(self, pool, n, name):
        return [pool[i % len(pool)] for i in range(n)]

    def progress(self, total, desc, unit):
        from gcframe.tracking.progress import progress

        return progress(total=total, desc=desc, unit=unit, show=False)


def test_rft_pool_is_built_once_and_capped():
    # B·G = 4 per step, 3 steps -> 12 draws needed; pool_size 6 < 12 -> target 6 accepted samples.
    # Each rollout: 4 samples, 2 correct -> kept 2, 4, 6 after 1, 2, 3 rollouts: stop at 12 drawn, 50% accepted
    ctx = FakeContext()
    m = get_method("rft")(get_method("rft").Config(pool_size=6), ctx)
    b = m.collect(0)
    assert len(b) == 4 and ctx.frozen_names == ["base"]
    stats = m.pop_stats()
    assert stats["pool_size"] == 6 and stats["pool_samples"] == 12 and stats["pool_acceptance"] == 0.5
    assert [t["completion"] for t in b.texts] == ["3"] * 4  # only correct samples
    assert torch.equal(m.coefficients(b, torch.zeros_like(b.completion_mask)), torch.ones_like(b.completion_mask))
    m.collect(1)
    assert ctx.calls == 3 and "pool_size" not in m.pop_stats()  # reused, not rebuilt
    resumed = get_method("rft")(get_method("rft").Config(pool_size=6), ctx)  # from a checkpoint: no resampling
    resumed.load_state_dict(m.state_dict())
    assert len(resumed.collect(2)) == 4 and ctx.calls == 3
    # the sampling cap: max_pool_samples = 4 stops after one rollout (2 kept) whatever the target
    ctx = FakeContext()
    m = get_method("rft")(get_method("rft").Config(pool_size=100, max_pool_samples=4), ctx)
    m.collect(0)
    assert ctx.calls == 1 and m.pop_stats()["pool_size"] == 2


def test_rft_with_no_correct_sample_is_a_user_error():
    ctx = FakeContext()
    ctx.rollout = lambda n, g, model=None: make([0.0] * (n * g))
    m = get_method("rft")(get_method("rft").Config(max_pool_samples=8), ctx)
    with pytest.raises(UserError, match="none of 8 samples"):
        m.collect(0)
