"""ipo, simpo, orpo, kto, online_dpo: hand-computed coefficients, their data sources (KTO's unpaired examples and
mismatched rows, online DPO's pairs from the live policy and the prompts it drops) and their options' errors. Their
gradients are checked against the papers in tests/test_verify.py and against TRL in
tests/test_trl_equivalence_preference.py."""
from __future__ import annotations

import math
from types import SimpleNamespace as NS

import pytest
import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.modeling import build_char_tokenizer
from gcframe.rewards.preferences import pair_batch
from methods import REGISTRY
from methods.base import Method


def _method(name, ctx=None, **options):
    cls = REGISTRY[name]
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(**options), ctx=ctx)
    return m


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


def _rows(n):
    return [{"prompt": f"{i}+1=", "chosen": str(i + 1), "rejected": "x" * (1 + i % 3), "answer": str(i + 1)}
            for i in range(n)]


def test_ipo_coefficient_by_hand(tok):
    batch = pair_batch(tok, _rows(1))  # o⁺ = "1"+eos, o⁻ = "x"+eos: two tokens each
    mask = batch.completion_mask
    logp = -1.0 * mask
    ref = logp.clone()
    ref[0] = -1.2 * mask[0]  # Δ⁺ = 2·0.2 = 0.4
    ref[1] = -0.7 * mask[1]  # Δ⁻ = 2·(−0.3) = −0.6   -> h = 1.0
    batch.data["ref_logp"] = ref
    gc = _method("ipo", tau=0.25).coefficients(batch, logp)  # 1/(2τ) = 2 -> u = h − 2 = −1 -> GC⁺ = −2u = +2
    assert torch.allclose(gc, torch.tensor([[2.0, 2.0], [-2.0, -2.0]]))  # (float32: 2 − 2.4e-7)
    # token_mean: h = 0.4/2 − (−0.6/2) = 0.5 -> u = −1.5 -> GC⁺ = −2u/|o⁺| = 3/2 = 1.5 per token
    gc = _method("ipo", tau=0.25, token_mean=True).coefficients(batch, logp)
    assert torch.allclose(gc, torch.tensor([[1.5, 1.5], [-1.5, -1.5]]))


def test_simpo_coefficient_by_hand(tok):
    batch = pair_batch(tok, _rows(3)[2:])  # o⁺ = "3"+eos (2 tokens), o⁻ = "xxx"+eos (4 tokens)
    mask = batch.completion_mask
    logp = torch.tensor([[-0.2, -0.4, 0, 0], [-1.0, -1.0, -1.0, -1.0]]) * mask
    # ā⁺ = −0.3, ā⁻ = −1.0; β = 2, γ = 1: z = 2·0.7 − 1 = 0.4; β·σ(−0.4) = 2·0.4013123 = 0.8026246
    w = 2 / (1 + math.exp(0.4))
    gc = _method("simpo", beta=2.0, gamma=1.0).coefficients(batch, logp)
    assert torch.allclose(gc, torch.tensor([[w / 2, w / 2, 0, 0], [-w / 4] * 4]))  # divided by |o⁺| = 2, |o⁻| = 4


def test_orpo_certain_completion_is_clamped_not_nan(tok):
    """ā = 0 (every token certain) has infinite odds: ā is clamped, the coefficients stay finite, and counted."""
    batch = pair_batch(tok, _rows(1))
    m = _method("orpo", lam=0.1)
    gc = m.coefficients(batch, torch.zeros_like(batch.completion_mask))
    assert torch.isfinite(gc).all() and m.pop_stats()["odds_clamped"] == 1.0


@pytest.mark.parametrize("name, options, match", [
    ("ipo", {"tau": 0.0}, "methods.ipo.tau must be > 0"),
    ("simpo", {"gamma": -0.5}, "methods.simpo.gamma must be >= 0"),
    ("simpo", {"beta": 0.0}, "methods.simpo.beta must be > 0"),
    ("orpo", {"lam": -1.0}, "methods.orpo.lam must be > 0"),
    ("kto", {"undesirable_weight": 0.0}, "methods.kto.undesirable_weight must be > 0"),
    ("kto", {"pairs": 0}, "methods.kto.pairs must be an integer >= 1"),
    ("online_dpo", {"group_size": 1}, "methods.online_dpo.group_size must be an integer >= 2"),
    ("online_dpo", {"beta": 0.0}, "methods.online_dpo.beta must be > 0"),
])
def test_bad_options_are_one_line(name, options, match):
    with pytest.raises(UserError, match=match) as e:
        REGISTRY[name].Config.from_dict(options, name)
    assert "\n" not in str(e.value)


# -- KTO's data source ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("world", [1, 2])
def test_kto_batch_holds_both_signs_and_mismatched_rows(tok, world):
    rows = _rows(6)
    draws = {"chosen": [], "rejected": []}

    def draw(data, n, name):  # under 2 processes, ctx.draw hands each its half: process 0's is shown
        draws[name].append(n)
        return data[:n // world]

    ctx = NS(tok=tok, draw=draw)
    m = _method("kto", ctx=ctx)
    m.examples = {side: [{"prompt": r["prompt"], "completion": r[side], "answer": r["answer"]} for r in rows]
                  for side in ("chosen", "rejected")}
    m.n = 2  # B·G = 8: 2 desirable + 2 undesirable examples, 4 mismatched rows
    batch = m.collect(0)
    assert draws == {"chosen": [2], "rejected": [2]}
    if world == 2:  # one desirable ("1") and one undesirable ("x") example, each with its mismatched row
        assert batch.data["desirable"].tolist() == [1, 0, 0, 0] and batch.data["mismatched"].tolist() == [0, 1] * 2
        assert [t["completion"] for t in batch.texts] == ["1", "x", "x", "1"]
        return
    assert batch.data["mismatched"].tolist() == [0, 1] * 4
    assert batch.data["desirable"].tolist() == [1, 0, 1, 0, 0, 0, 0, 0]
    assert batch.group_ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    comp = [t["completion"] for t in batch.texts]
    prompts = [t["prompt"] for t in batch.texts]
    # examples: "1", "2" (desirable), "x", "xx" (undesirable); row 2i+1 is (q_i, o_{i−1}), cycled as TRL's
    assert comp == ["1", "xx", "2", "1", "x", "2", "xx", "x"]
    assert prompts[0::2] == prompts[1::2]


def test_kto_gc_is_zero_on_mismatched_rows_and_signed_on_examples(tok):
    batch = Batch(torch.zeros(4, 1, dtype=torch.long), torch.ones(4, 1, dtype=torch.long),
                  torch.zeros(4, 2, dtype=torch.long), torch.ones(4, 2), torch.tensor([0, 0, 1, 1]),
                  {"desirable": torch.tensor([1.0, 0, 0, 0]), "mismatched": torch.tensor([0.0, 1, 0, 1]),
                   "ref_logp": torch.zeros(4, 2)})
    logp = torch.tensor([[0.1, 0.1], [0.3, 0.3], [0.2, 0.2], [0.1, 0.1]])  # Δ = 0.2, 0.6, 0.4, 0.2
    m = _method("kto", beta=1.0, desirable_weight=1.0, undesirable_weight=2.0)
    gc = m.coefficients(batch, logp)
    # z₀ = max(0, (0.6 + 0.2)/2) = 0.4; desirable: s = σ(0.2 − 0.4) = σ(−0.2); undesirable: s = σ(0.4 − 0.4) = 0.5
    s = 1 / (1 + math.exp(0.2))
    assert m.pop_stats()["kto_z0"] == pytest.approx(0.4)
    assert torch.allclose(gc, torch.tensor([[s * (1 - s)] * 2, [0.0, 0.0], [-2 * 0.25] * 2, [0.0, 0.0]]))


# -- online DPO's data source ------------------------------------------------------------------------------------------
def _rollout(tok, rewards):
    """A rollout batch of len(rewards) groups of 4, completion lengths 2, 3, 2, 3 (+ <eos>) per group."""
    comps = [c for _ in rewards for c in ("ab", "abc", "cd", "cde")]
    batch = pair_batch(tok, [{"prompt": "q", "chosen": c, "rejected": c, "answer": "0"} for c in comps])[0::2]
    batch.group_ids = torch.arange(len(rewards)).repeat_interleave(4)
    batch.data = {"rewards": torch.tensor([r for g in rewards for r in g], dtype=torch.float32)}
    return batch


def test_online_dpo_pairs_a_best_and_a_worst_and_drops_ties(tok):
    rollout = _rollout(tok, [[1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]])  # only the first prompt has a preference
    cfg = NS(train=NS(prompts_per_step=3, group_size=4), seed=0)
    ctx = NS(cfg=cfg, rank=0, rollout=lambda B, G: rollout, all_sum=lambda t: t, device="cpu")
    m = _method("online_dpo", ctx=ctx)
    m.pick = torch.Generator().manual_seed(0)
    batch = m.collect(0)
    assert len(batch) == 2 and batch.group_ids.tolist() == [0, 0]
    assert batch.data["rewards"].tolist() == [1.0, 0.0] and batch.data["is_chosen"].tolist() == [1.0, 0.0]
    stats = m.pop_stats()
    assert stats["paired_prompts"] == 1 and stats["unpaired_prompts"] == 2
    # 12 samples of 3, 4, 3, 4 tokens (with <eos>) = 42 tokens generated; the pair trains on 3 + 3, 3 + 4 or 4 + 4 ...
    assert stats["unpaired_dropped_tokens"] == 42 - float(batch.completion_mask.sum())


def test_online_dpo_without_any_preference_trains_on_nothing(tok):
    rollout = _rollout(tok, [[1, 1, 1, 1], [0, 0, 0, 0]])
    cfg = NS(train=NS(prompts_per_step=2, group_size=4), seed=0)
    ctx = NS(cfg=cfg, rank=0, rollout=lambda B, G: rollout, all_sum=lambda t: t, device="cpu")
    m = _method("online_dpo", ctx=ctx)
    m.pick = torch.Generator().manual_seed(0)
    batch = m.collect(0)
    stats = m.pop_stats()  # every sample goes to the engine (its tokens count in gen_tokens there), none dropped ...
    assert len(batch) == 8 and stats["unpaired_dropped_tokens"] == 0.0 and stats["unpaired_prompts"] == 2
    batch.data["ref_logp"] = torch.zeros_like(batch.completion_mask)
    gc = m.coefficients(batch, -torch.rand(batch.completion_mask.shape))
    assert torch.equal(gc, torch.zeros_like(gc))  # ... with GC = 0: no update
