"""Preference data, the Bradley–Terry reward model and DPO's gradient coefficient. CPU, tiny models, offline."""
from __future__ import annotations

import math
import random

import datasets
import pytest
import torch

from gcframe.config import RewardModelConfig
from gcframe.errors import UserError
from gcframe.modeling import ModelConfig, ScalarHeadModel, build_char_tokenizer, build_tiny_llama
from gcframe.rewards.model import RewardModel, bradley_terry_loss, train
from gcframe.rewards.preferences import PreferenceOptions, annotate, build, pair_batch
from methods.base import Method
from methods.dpo import DPO, DPOConfig

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run faster on one thread; on a loaded 2-core machine two threads make a step ~50x slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


def _rows(n: int) -> list[dict]:
    return [{"prompt": f"{i}+1=", "chosen": str(i + 1), "rejected": "x" * (1 + i % 3), "answer": str(i + 1),
             "flipped": False} for i in range(n)]


def _dpo(beta: float) -> DPO:
    """A DPO object without a run context: coefficients() needs only its config."""
    m = DPO.__new__(DPO)
    Method.__init__(m, DPOConfig(beta=beta), ctx=None)
    return m


# ----------------------------------------------------------------------------- DPO coefficients


def test_dpo_coefficient_signs_and_magnitude(tok):
    batch = pair_batch(tok, _rows(2))  # rows: o⁺_0, o⁻_0, o⁺_1, o⁻_1
    mask = batch.completion_mask  # lengths incl. <eos>: "1"+eos=2, "x"+eos=2, "2"+eos=2, "xx"+eos=3
    assert mask.sum(-1).tolist() == [2, 2, 2, 3]
    logp = torch.full(mask.shape, -1.0) * mask
    ref = logp.clone()
    # pair 0: Δ⁺ = 2·(−1.0 − (−1.2)) = +0.4 ; Δ⁻ = 2·(−1.0 − (−0.7)) = −0.6   -> Δ⁺ − Δ⁻ = 1.0
    ref[0] = -1.2 * mask[0]
    ref[1] = -0.7 * mask[1]
    # pair 1: Δ⁺ = 0 ; Δ⁻ = 3·(−1.0 − (−1.5)) = +1.5                         -> Δ⁺ − Δ⁻ = −1.5
    ref[3] = -1.5 * mask[3]
    batch.data["ref_logp"] = ref
    m = _dpo(beta=0.5)
    gc = m.coefficients(batch, logp)
    # pair 0: β·σ(β(Δ⁻ − Δ⁺)) = 0.5·σ(−0.5) = 0.5·0.3775407 = 0.1887703
    # pair 1: 0.5·σ(0.75) = 0.5·0.6791787 = 0.3395893
    w0, w1 = 0.5 / (1 + math.exp(0.5)), 0.5 / (1 + math.exp(-0.75))
    assert w0 == pytest.approx(0.1887703, abs=1e-6) and w1 == pytest.approx(0.3395893, abs=1e-6)
    expect = torch.tensor([[w0, w0, 0], [-w0, -w0, 0], [w1, w1, 0], [-w1, -w1, -w1]])
    assert torch.allclose(gc, expect, atol=1e-6)  # + on every o⁺ token, − on every o⁻ token, 0 on padding
    stats = m.pop_stats()
    assert stats["reward_margin"] == pytest.approx((0.5 * 1.0 + 0.5 * -1.5) / 2)  # β(Δ⁺ − Δ⁻) mean = −0.125
    assert stats["pair_accuracy"] == 0.5  # pair 0 margin > 0, pair 1 margin < 0
    assert stats["reward_chosen"] == pytest.approx(0.5 * (0.4 + 0.0) / 2)
    assert stats["reward_rejected"] == pytest.approx(0.5 * (-0.6 + 1.5) / 2)


def test_dpo_gc_is_the_gradient_of_the_pair_loss(tok):
    """∇ of −aggregate(GC·logp, seq-mean-token-sum) = ∇ of Σ_pairs −log σ(β(Δ⁺−Δ⁻)) / (2P) w.r.t. logp."""
    from gcframe.engine import weighted_mle_loss

    batch = pair_batch(tok, _rows(3))
    mask = batch.completion_mask
    g = torch.Generator().manual_seed(0)
    batch.data["ref_logp"] = -torch.rand(mask.shape, generator=g) * mask
    logp = (-torch.rand(mask.shape, generator=g) * mask).requires_grad_(True)
    m = _dpo(beta=0.3)
    engine = weighted_mle_loss(m.coefficients(batch, logp), logp, mask, "seq-mean-token-sum")
    (g_engine,) = torch.autograd.grad(engine, logp)
    delta = ((logp - batch.data["ref_logp"]) * mask).sum(-1)
    text = -torch.nn.functional.logsigmoid(0.3 * (delta[0::2] - delta[1::2])).sum() / len(batch)
    (g_text,) = torch.autograd.grad(text, logp)
    assert torch.allclose(g_engine * mask, g_text * mask, atol=1e-7)


def test_dpo_rejects_a_split_pair(tok):
    batch = pair_batch(tok, _rows(2))[torch.tensor([0, 1, 2])]  # pair 1 lost its rejected sequence
    batch.data["ref_logp"] = torch.zeros_like(batch.completion_mask)
    with pytest.raises(ValueError, match="one chosen and one rejected"):
        _dpo(0.1).coefficients(batch, torch.zeros_like(batch.completion_mask))


def test_dpo_config_validation():
    with pytest.raises(UserError, match="label_noise"):
        DPOConfig.from_dict({"label_noise": 1.5}, "dpo")
    with pytest.raises(UserError, match="beta"):
        DPOConfig.from_dict({"beta": 0.0}, "dpo")
    with pytest.raises(UserError, match="pairs"):
        DPOConfig.from_dict({"pairs": 0}, "dpo")
    assert DPOConfig.from_dict({"label_noise": 0.2}, "dpo").aggregation == "seq-mean-token-sum"


@pytest.mark.parametrize("shuffle", [False, True])
def test_pairs_never_split(tok, shuffle):
    batch = pair_batch(tok, _rows(7))  # 14 sequences
    gen = torch.Generator().manual_seed(3) if shuffle else None
    parts = batch.split(4, gen)
    assert sum(len(p) for p in parts) == 14 and len(parts) == 4
    seen = []
    for p in parts:
        for gid in p.group_ids.unique().tolist():
            rows = (p.group_ids == gid).nonzero().squeeze(1)
            assert len(rows) == 2 and sorted(p.data["is_chosen"][rows].tolist()) == [0.0, 1.0]
            seen.append(gid)
    assert sorted(seen) == list(range(7))


# ----------------------------------------------------------------------------- the annotator


def test_annotator_label_noise_rate():
    comps, ok = ["46", "45", "46", "7"], [True, False, True, False]
    assert annotate(comps, [True] * 4, random.Random(0), random.Random(0), 0.0) is None  # all right: no pair
    assert annotate(comps, [False] * 4, random.Random(0), random.Random(0), 0.0) is None  # all wrong: no pair

    def run(noise, n=4000):
        pick, rng = random.Random("p"), random.Random("n")
        return [annotate(comps, ok, pick, rng, noise) for _ in range(n)]

    clean, noisy = run(0.0), run(0.3)
    assert all(c == "46" and r in ("45", "7") and not f for c, r, f in clean)
    rate = sum(f for _, _, f in noisy) / len(noisy)
    assert abs(rate - 0.3) < 0.03  # binomial std sqrt(0.21/4000) = 0.007: 4σ
    for (c0, r0, _), (c1, r1, f1) in zip(clean, noisy):  # noise swaps labels, never changes which pair is shown
        assert (c1, r1) == ((r0, c0) if f1 else (c0, r0))


# ----------------------------------------------------------------------------- the reward model


def test_bradley_terry_gradient_by_hand():
    rw, rl = torch.tensor([1.0, 0.0], requires_grad=True), torch.tensor([0.5, 2.0], requires_grad=True)
    loss = bradley_terry_loss(rw, rl)
    # loss = ½[−log σ(0.5) − log σ(−2.0)] = ½[0.474077 + 2.126928] = 1.300503
    assert float(loss.detach()) == pytest.approx(1.300503, abs=1e-5)
    loss.backward()
    # ∂/∂r_w = −½σ(r_l − r_w): pair 0 −½σ(−0.5) = −0.188770; pair 1 −½σ(2.0) = −0.440399; ∂/∂r_l = the negative
    assert rw.grad.tolist() == pytest.approx([-0.188770, -0.440399], abs=1e-5)
    assert rl.grad.tolist() == pytest.approx([0.188770, 0.440399], abs=1e-5)


def test_reward_read_at_last_completion_token(tok):
    lm = build_tiny_llama(tok, TINY, seed=0)
    model = ScalarHeadModel.from_causal_lm(lm)
    torch.nn.init.normal_(model.head.weight, std=1.0)
    batch = pair_batch(tok, _rows(3))
    rm = RewardModel(model, tok)
    values = model(batch.input_ids, batch.attention_mask)  # [N, P+T]
    P, lengths = batch.prompt_ids.shape[1], batch.completion_mask.sum(-1).long()
    assert batch.completion_ids[torch.arange(6), lengths - 1].eq(tok.eos_token_id).all()  # the <eos>
    expect = values[torch.arange(6), P + lengths - 1]
    assert torch.allclose(rm.score(batch), expect, atol=1e-6)
    assert not rm.score(batch).requires_grad


def test_likelihood_reward_is_the_head_plus_the_completions_log_likelihood(tok, tmp_path):
    """reward_model.likelihood: r_φ = v_φ(h_eos) + Σ_t log π_φ(o_t|q, o_<t). With the head at 0 (as initialised) it
    is the SFT model's own log-likelihood of the completion, the engine's token_logprobs summed; saved and loaded,
    the same scores."""
    from gcframe.engine import token_logprobs

    lm = build_tiny_llama(tok, TINY, seed=0).eval()
    batch = pair_batch(tok, _rows(3))
    rm = RewardModel(ScalarHeadModel.from_causal_lm(lm, with_lm_head=True), tok)
    with torch.no_grad():
        expect = (token_logprobs(lm, batch, 1.0) * batch.completion_mask).sum(-1)  # [N]
    torch.testing.assert_close(rm.score(batch), expect, rtol=1e-5, atol=1e-5)
    torch.nn.init.normal_(rm.model.head.weight, std=1.0)  # then the head's value at <eos> is added on
    head_only = RewardModel(rm.model, tok)
    head_only.model = ScalarHeadModel(rm.model.backbone, TINY.hidden_size)
    head_only.model.head.load_state_dict(rm.model.head.state_dict())
    torch.testing.assert_close(rm.score(batch), expect + head_only.score(batch), rtol=1e-5, atol=1e-5)
    rm.model.save(str(tmp_path / "rm"))
    loaded = RewardModel(ScalarHeadModel.load(str(tmp_path / "rm")), tok)
    assert loaded.model.lm_head is not None and torch.equal(loaded.score(batch), rm.score(batch))


class _FirstCharTask:
    """A stand-in task: a completion is 'correct' if it starts with a lowercase letter (a random tiny model
    samples one about a quarter of the time, so most prompts give a pair)."""

    def __init__(self, n: int = 300):
        self.prompts = datasets.Dataset.from_dict({"prompt": [f"{i}=" for i in range(n)], "answer": ["a"] * n})

    @staticmethod
    def verify(completion: str, answer: str) -> bool:
        return completion[:1].islower()


def test_reward_model_learns_above_chance(tok):
    lm = build_tiny_llama(tok, TINY, seed=0).eval()
    task = _FirstCharTask()
    opts = PreferenceOptions(pairs=96, heldout_pairs=48, samples_per_prompt=4, label_noise=0.0, seed=0)
    sets, info = build(lm, tok, task, opts, max_new_tokens=3)
    assert (len(sets["train"]), len(sets["heldout"])) == (96, 48)
    assert set(sets["train"]["prompt"]).isdisjoint(sets["heldout"]["prompt"])  # held-out prompts are new
    assert all(task.verify(r["chosen"], "") and not task.verify(r["rejected"], "") for r in sets["train"])
    small, _ = build(lm, tok, task, PreferenceOptions(8, 4, 4, 0.0, seed=0), max_new_tokens=3)
    assert small["train"].to_list() == sets["train"].select(range(8)).to_list()  # deterministic by seed

    torch.manual_seed(0)
    rm = RewardModel(ScalarHeadModel.from_causal_lm(lm), tok)
    assert rm.pairwise(sets["heldout"])["accuracy"] == 0.5  # zero head: every pair a tie
    train(rm, sets["train"], RewardModelConfig(steps=30, lr=3e-3, batch_size=24), seed=0)
    res = rm.pairwise(sets["heldout"])
    assert res["accuracy"] >= 0.7, res  # chance is 0.5 ± 0.07 (1σ on 48 pairs)
    assert res["loss"] < math.log(2)  # below the BT loss at chance


def test_kl_ref_is_logged_only_for_samples_of_the_policy():
    """k3 estimates KL(π_θ‖π_ref) only on tokens sampled from π_θ: GRPO's rows carry kl_ref, DPO's offline pairs
    do not (their KL is eval_kl_ref, measured on the policy's own samples)."""
    import tempfile

    from experiments.bench_common import Size, build_base, make_trainer

    size = Size("test", 32, 2, 4, 64, prompts=2, group=2, new_tokens=4)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        build_base(size, f"{tmp}/base")
        for method in ("grpo", "dpo"):
            tr = make_trainer(method, size, f"{tmp}/base", f"{tmp}/{method}", steps=1)
            rows[method], _ = tr.train_step(0)
            tr.logger.close()
    assert rows["grpo"]["kl_ref"] >= 0.0
    assert "kl_ref" not in rows["dpo"] and "reward_margin" in rows["dpo"]


def test_gc_mass_on_right_and_wrong_completions_is_logged():
    """gc_right_mass / gc_wrong_mass = ΣGC over the tokens of right (wrong) completions / Σ|GC|. Online RFT's GC is
    1 on an accepted completion's tokens and 0 elsewhere: right 1, wrong 0, whatever the split (half the rows
    are marked right here, so that both sets are non-empty)."""
    import tempfile

    from experiments.bench_common import Size, build_base, make_trainer

    size = Size("test", 32, 2, 4, 64, prompts=2, group=2, new_tokens=4)
    with tempfile.TemporaryDirectory() as tmp:
        build_base(size, f"{tmp}/base")
        tr = make_trainer("online_rft", size, f"{tmp}/base", f"{tmp}/rft", steps=1)
        collect = tr.method.collect

        def half_right(step):
            batch = collect(step)
            batch.data["correct"] = (torch.arange(len(batch)) % 2).float()  # rows 1, 3: right
            return batch

        tr.method.collect = half_right
        row, _ = tr.train_step(0)
        tr.logger.close()
    assert row["gc_right_mass"] == pytest.approx(1.0) and row["gc_wrong_mass"] == 0.0
