"""The §5.2.1 controls on RFT and online RFT's fill: RFT thinned (gc_share), RFT's pool sampled afresh
(regenerate_every), and @filled drawing more samples of the step's own prompts (fill_prompts: same)."""
from types import SimpleNamespace

import pytest
import torch

from gcframe.errors import UserError
from gcframe.modeling import build_char_tokenizer
from gcframe.sampling import make_batch
from methods import get_method

TOK = build_char_tokenizer()


def ctx(**more):
    train = SimpleNamespace(prompts_per_step=2, group_size=4, steps=10)
    return SimpleNamespace(cfg=SimpleNamespace(train=train), tok=TOK, all_sum=lambda t: t, device="cpu",
                           draw=lambda pool, n, name: pool[:n], **more)


def rft(**options):
    cls = get_method("rft")
    m = cls(cls.Config.from_dict(options, "rft"), ctx())
    m.pool = [{"prompt": f"{i}+1=", "completion": str(i + 1), "answer": str(i + 1)} for i in range(8)]
    return m


def test_rft_thinned_carries_gc_on_its_share_of_the_step_only():
    m = rft(gc_share=0.25)
    b = m.collect(1)  # B·G = 8 pool samples: round(0.25 · 8) = 2 carry GC = 1, 6 carry 0 and count in the normaliser
    gc = m.coefficients(b, torch.zeros(b.completion_mask.shape))
    per_row = (gc * b.completion_mask).sum(-1) / b.completion_mask.sum(-1)
    assert per_row.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    full = rft()  # the default: every pooled sample carries GC = 1, as DeepSeekMath's RFT
    b2 = full.collect(1)
    assert (full.coefficients(b2, torch.zeros(b2.completion_mask.shape)).sum(-1) > 0).all()


def test_rft_pool_is_sampled_afresh_every_regenerate_every_steps():
    m = rft(regenerate_every=5)
    built = []

    def build_pool():
        built.append(len(built))
        m.pool = [{"prompt": "9+9=", "completion": "18", "answer": "18"}] * 8
        return {"pool_size": 8}

    m.build_pool = build_pool
    for step in range(12):
        m.collect(step)
    assert len(built) == 2  # at steps 5 and 10 (the pool given at step 0 stands in for the first build)
    assert rft().cfg.regenerate_every == 0


def test_a_pool_sampled_afresh_at_another_size_is_drawn_from_in_full():
    """The real draw (Context.draw): a regenerated pool of another size (its last rollout's overshoot differs) starts
    a new shuffle of itself; the old pool's order would index past a smaller pool's end."""
    from gcframe.context import Context

    state = type("Ctx", (), {})()  # only what Context.draw reads
    state.rng, state._orders, state.rank, state.world = torch.Generator().manual_seed(0), {}, 0, 1
    m = rft(regenerate_every=2)
    m.ctx.draw = lambda pool, n, name: Context.draw(state, pool, n, name)
    sizes = iter([5, 9, 3])  # the pools built at steps 2, 4 and 6, each another size than the one before

    def build_pool():
        n = next(sizes)
        m.pool = [{"prompt": f"{i}+0=", "completion": str(i), "answer": str(i)} for i in range(n)]
        return {"pool_size": n}

    m.build_pool = build_pool
    for step in range(7):
        b = m.collect(step)  # B·G = 8 rows a step
        drawn = {t["prompt"] for t in b.texts}
        assert len(b) == 8 and drawn <= {r["prompt"] for r in m.pool}  # every row from the pool of this step
    assert len(state._orders["rft_pool"][0]) == 3  # the last pool's own shuffle


@pytest.mark.parametrize("options, msg", [({"gc_share": 0.0}, "gc_share must be in"),
                                          ({"gc_share": 1.5}, "gc_share must be in"),
                                          ({"regenerate_every": -1}, "regenerate_every must be >= 0")])
def test_rft_controls_out_of_their_domain_are_refused(options, msg):
    with pytest.raises(UserError, match=msg):
        get_method("rft").Config.from_dict(options, "rft")


def test_filled_with_the_same_prompts_samples_the_steps_own_prompts_again():
    asked = []

    def batch(prompts, correct):
        rows = [{"prompt": p, "answer": "2", "steps": []} for p in prompts]
        b = make_batch(TOK, prompts, ["2"] * len(prompts), list(range(len(prompts))), rows)
        b.data["correct"] = torch.tensor(correct, dtype=torch.float32)
        return b

    def complete(rows, n):  # the step's prompts, G more samples each: all correct
        asked.append([r["prompt"] for r in rows])
        return batch([r["prompt"] for r in rows for _ in range(n)], [1.0] * (len(rows) * n))

    def rollout(b, g):
        raise AssertionError("fill_prompts: same draws no new prompts")

    cls = get_method("online_rft")
    m = cls(cls.Config.from_dict({"fill_correct": True, "fill_prompts": "same"}, "online_rft"),
            ctx(complete=complete, rollout=rollout))
    first = batch(["1+1=", "1+1=", "1+1=", "1+1=", "0+2=", "0+2=", "0+2=", "0+2="], [1, 0, 0, 0, 0, 0, 0, 0])
    got = m.filled(first, 8)
    assert asked == [["1+1=", "0+2="]]  # one more round, of the step's two prompts in order
    assert len(got) == 8 and {t["prompt"] for t in got.texts} == {"1+1=", "0+2="}
    with pytest.raises(UserError, match="fill_prompts must be 'fresh' or 'same'"):
        cls.Config.from_dict({"fill_prompts": "other"}, "online_rft")
