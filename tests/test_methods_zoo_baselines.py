"""REINFORCE++, REINFORCE++ with baseline, ReMax and GPG: their advantage estimators on hand-made batches (arithmetic in
the comments), ReMax's greedy baseline against an independent argmax decoding of the live policy, and the branches
gcframe.verify exercises for them."""
import math
from types import SimpleNamespace

import pytest
import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods import get_method

W = 1 / math.sqrt(1 + 4e-8)  # whitening with var = 0.25: 0.5 · (0.25 + 1e-8)^(-1/2) = (1 + 4e-8)^(-1/2)


def make(rewards, mask, group_ids=None, **data) -> Batch:
    """A Batch whose completions have the given mask [N, T]; only the tensors the advantages read matter."""
    mask = torch.tensor(mask, dtype=torch.float64)
    N, T = mask.shape
    gids = torch.tensor(group_ids if group_ids is not None else range(N))
    r = torch.tensor(rewards, dtype=torch.float64)
    return Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long),
                 torch.full((N, T), 5), mask, gids, {"rewards": r, "correct": r.clone(), **data})


def method(name, **options):
    cls = get_method(name)
    return cls(cls.Config.from_dict(options, name), SimpleNamespace(all_sum=lambda t: t))  # one process


def logps(*rows):
    return torch.tensor(rows, dtype=torch.float64)


# -- REINFORCE++ ---------------------------------------------------------------------------------------------------
def test_reinforce_pp_returns_fold_the_kl_still_to_come_and_normalise_over_the_batch():
    # two prompts, one completion each (k = 1); o_0 has 2 tokens, o_1 one. r = [1.5, 1.0], β = 2,
    # k1 = log π_old − log π_ref: o_0 [0.25, 0.25], o_1 [−0.25]
    # eq. 4: o_0 t0: 1.5 − 2·(0.25 + 0.25) = 0.5,  t1: 1.5 − 2·0.25 = 1.0;  o_1 t0: 1.0 − 2·(−0.25) = 1.5
    # eq. 5 over the batch's 3 tokens [0.5, 1.0, 1.5]: mean 1, unbiased var (0.25 + 0 + 0.25)/2 = 0.25 ->
    #   [−0.5, 0, 0.5] / √(0.25 + 1e-8) = [−W, 0, W]
    old = logps([-1.0, -2.0], [-1.5, 0.0])
    ref = old - logps([0.25, 0.25], [-0.25, 0.0])
    b = make([1.5, 1.0], [[1, 1], [1, 0]], old_logp=old, ref_logp=ref)
    m = method("reinforce_pp", beta=2.0)
    m.prepare(b)
    assert torch.allclose(b.data["advantages"], logps([-W, 0.0], [W, 0.0]), atol=1e-12)
    stats = m.pop_stats()
    assert stats["return_mean"] == pytest.approx(1.0) and stats["kl_reward"] == pytest.approx(0.25 / 3)
    # on-policy (π_θ = π_old, no KL in the loss) GC is the normalised return itself
    assert torch.allclose(m.coefficients(b, old), logps([-W, 0.0], [W, 0.0]), atol=1e-12)


def test_reinforce_pp_clip_on_both_sides_and_the_k2_loss_term():
    # advantages given; ratios s = π_θ/π_old, ε = 0.2:
    #   o_0 (A = +1): s = [1.5, 1.1] -> t0 clipped (1.5 > 1.2): 0; t1 inside: 1·1.1
    #   o_1 (A = −1): s = [0.5, 0.9] -> t0 clipped (0.5 < 0.8): 0; t1 inside: −1·0.9
    # λ = 0.1, log π_θ − log π_ref = ln 2 everywhere -> k2 part of GC: −λ·log(π_θ/π_ref) = −0.1 ln 2
    logp = logps([-1.0, -1.0], [-1.0, -1.0])
    s = logps([1.5, 1.1], [0.5, 0.9])
    b = make([0.0, 0.0], [[1, 1], [1, 1]], old_logp=logp - s.log(), ref_logp=logp - math.log(2.0),
             advantages=logps([1.0, 1.0], [-1.0, -1.0]))
    m = method("reinforce_pp", kl_loss_coef=0.1)
    k2 = -0.1 * math.log(2.0)
    assert torch.allclose(m.coefficients(b, logp), logps([k2, 1.1 + k2], [k2, -0.9 + k2]), atol=1e-12)
    stats = m.pop_stats()
    assert stats["clip_low_frac"] == pytest.approx(0.25) and stats["clip_high_frac"] == pytest.approx(0.25)


def test_reinforce_pp_baseline_subtracts_the_group_mean_then_normalises_over_the_batch():
    # groups {o_0, o_1} with r = [1, 0] and {o_2, o_3} with r = [1, 1] (no variance); o_0 has 2 tokens, the rest one
    # eq. 6: [1 − 0.5, 0 − 0.5, 1 − 1, 1 − 1] = [0.5, −0.5, 0, 0], o_0's 0.5 on both its tokens
    # eq. 7 over 5 tokens [0.5, 0.5, −0.5, 0, 0]: mean 0.1, deviations [0.4, 0.4, −0.6, −0.1, −0.1],
    #   Σ squares 0.16 + 0.16 + 0.36 + 0.01 + 0.01 = 0.70, unbiased var 0.70/4 = 0.175 -> /√0.175:
    #   [0.956183, 0.956183, −1.434274, −0.239046, −0.239046]: the flat group is not 0 after the batch normalisation
    b = make([1.0, 0.0, 1.0, 1.0], [[1, 1], [1, 0], [1, 0], [1, 0]], group_ids=[0, 0, 1, 1])
    m = method("reinforce_pp_baseline")
    assert m.cfg.grouped and m.cfg.group_baseline and m.cfg.beta == 0 and m.cfg.kl_loss_coef > 0
    m.prepare(b)
    sd = math.sqrt(0.175 + 1e-8)
    want = logps([0.4 / sd, 0.4 / sd], [-0.6 / sd, 0.0], [-0.1 / sd, 0.0], [-0.1 / sd, 0.0])
    assert torch.allclose(b.data["advantages"], want, atol=1e-12)
    assert float(b.data["advantages"][2, 0]) == pytest.approx(-0.239046, abs=1e-6)
    assert m.pop_stats()["zero_var_frac"] == pytest.approx(0.5)  # 2 of 4 sequences sit in the flat group


def test_reinforce_pp_group_baseline_needs_groups():
    with pytest.raises(UserError, match="grouped: true") as e:
        method("reinforce_pp", group_baseline=True)
    assert "\n" not in str(e.value)


def test_the_grouped_data_source_is_checked_before_a_run():
    from gcframe.config import from_dict

    cfg = from_dict({"train": {"dynamic_sampling": True}})
    for name in ("reinforce_pp", "remax"):  # one completion per prompt: no group for dynamic sampling to filter
        with pytest.raises(UserError, match="grouped: false") as e:
            get_method(name).check_run(cfg, name)
        assert "\n" not in str(e.value)
    get_method("reinforce_pp_baseline").check_run(cfg, "reinforce_pp_baseline")  # grouped by default
    cfg = from_dict({"train": {"group_size": 1}, "methods": {"remax": {"grouped": True}}})
    with pytest.raises(UserError, match="group_size must be >= 2"):
        get_method("remax").check_run(cfg, "remax")
    get_method("reinforce_pp").check_run(cfg, "reinforce_pp")  # one completion of each of B·G prompts: G = 1 is fine


# -- ReMax ---------------------------------------------------------------------------------------------------------
def test_remax_advantage_is_the_reward_minus_the_greedy_reward():
    # r = [1, 0, 1], greedy rewards r̂ = [1, 1, 0] -> r − r̂ = [0, −1, 1]: a tie gives 0 (tie_frac 1/3)
    # β = 0.5 and k1 = 0.2 on both tokens of o_1: t0: −1 − 0.5·0.4 = −1.2, t1: −1 − 0.5·0.2 = −1.1; o_0, o_2 k1 = 0
    old = logps([-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0])
    ref = old - logps([0.0, 0.0], [0.2, 0.2], [0.0, 0.0])
    b = make([1.0, 0.0, 1.0], [[1, 1]] * 3, old_logp=old, ref_logp=ref,
             greedy_rewards=torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    m = method("remax", beta=0.5)
    m.prepare(b)
    want = logps([0.0, 0.0], [-1.2, -1.1], [1.0, 1.0])
    assert torch.allclose(b.data["advantages"], want, atol=1e-12)
    assert m.pop_stats()["tie_frac"] == pytest.approx(1 / 3)
    # plain REINFORCE: GC = A on-policy; a reused batch weighs it by π_θ/π_old without a clip (2 stays 2)
    assert torch.allclose(m.coefficients(b, old), want, atol=1e-12)
    assert torch.allclose(m.coefficients(b, old + math.log(2.0)), 2 * want, atol=1e-12)


# -- GPG -----------------------------------------------------------------------------------------------------------
def test_gpg_centres_on_the_group_mean_and_rescales_by_the_groups_with_signal():
    # 4 groups of 2: r = [1, 0 | 0, 0 | 0, 0 | 0, 1]; two groups flat: B = 4, M = 2 -> α = 4 / (4 − 2) = 2
    # Â = r − group mean = [0.5, −0.5 | 0, 0 | 0, 0 | −0.5, 0.5] -> GC = α Â = [1, −1, 0, 0, 0, 0, −1, 1] per token
    # (verl's gpg advantage would take α = 8 completions / 2 non-zero rewards = 4 here)
    b = make([1, 0, 0, 0, 0, 0, 0, 1], [[1, 1]] * 8, group_ids=[0, 0, 1, 1, 2, 2, 3, 3])
    m = method("gpg")
    m.prepare(b)
    gc = m.coefficients(b, torch.zeros(8, 2, dtype=torch.float64))
    assert torch.allclose(gc[:, 0], torch.tensor([1, -1, 0, 0, 0, 0, -1, 1], dtype=torch.float64), atol=1e-12)
    assert torch.equal(gc[:, 0], gc[:, 1])
    assert m.pop_stats() == {"gpg_alpha": 2.0, "zero_var_frac": 0.5}
    # rescale: false (the paper's α = 1 ablation): GC = Â = [0.5, −0.5, ...]
    m = method("gpg", rescale=False)
    m.prepare(b)
    assert float(b.data["advantages"][0]) == pytest.approx(0.5)
    # F_norm = std: group [1, 0] has std √0.5, Â = ±0.5/√0.5 = ±1/√2, GC = 2·(±1/√2) = ±√2
    m = method("gpg", scale_by_std=True)
    m.prepare(b)
    assert float(b.data["advantages"][0]) == pytest.approx(math.sqrt(2)) and float(b.data["advantages"][3]) == 0


def test_gpg_batch_without_signal_is_zero_not_nan():
    # every group flat: B = M = 2, α would be 2/0; GC is 0 anyway, α is logged as 1
    b = make([1, 1, 0, 0], [[1, 1]] * 4, group_ids=[0, 0, 1, 1])
    m = method("gpg")
    m.prepare(b)
    gc = m.coefficients(b, torch.zeros(4, 2, dtype=torch.float64))
    assert torch.isfinite(gc).all() and float(gc.abs().sum()) == 0
    assert m.pop_stats() == {"gpg_alpha": 1.0, "zero_var_frac": 1.0}


# -- ReMax's data source, on the tiny model of gcframe.verify --------------------------------------------------------
@pytest.fixture(scope="module")
def remax_trainer(tmp_path_factory):
    from accelerate import Accelerator

    from gcframe import pipeline, verify
    from gcframe.trainer import Trainer

    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    return Trainer(cfg, "remax", tmp_path_factory.mktemp("remax"), base_dir, task, acc, show_progress=False)


def argmax_decode(model, tok, prompt: str, max_new: int) -> tuple[str, int]:
    """Greedy decoding by hand: the whole sequence through the model at every step, no cache, no padding ->
    (completion text, number of tokens incl. <eos>)."""
    from gcframe.sampling import encode_prompt

    ids = encode_prompt(tok, prompt)
    new = []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax())
            new.append(nxt)
            if nxt == tok.eos_token_id:
                break
    text = tok.decode([t for t in new if t != tok.eos_token_id], skip_special_tokens=True)
    return text, len(new)


def test_remax_baseline_is_the_greedy_completion_of_the_same_prompt_under_the_live_policy(remax_trainer):
    from gcframe.verify import _perturb

    tr = remax_trainer
    policy, task, tok = tr.ctx.policy, tr.task, tr.tok
    base = tr.ctx.frozen("base")  # the SFT base, not trained
    _perturb(policy, torch.Generator().manual_seed(3), 0.5)  # the live policy now decodes differently from the base
    policy.eval()
    batch = tr.method.collect(0)
    max_new = tr.cfg.train.max_new_tokens
    tokens, differs = 0, 0
    for i, t in enumerate(batch.texts):
        text, n = argmax_decode(policy, tok, t["prompt"], max_new)
        assert t["greedy"] == text  # the baseline's completion is the argmax decoding of this row's own prompt
        assert float(batch.data["greedy_rewards"][i]) == float(task.verify(text, t["answer"]))
        tokens += n  # one greedy completion per prompt, and every prompt has one row here (grouped: false)
        differs += argmax_decode(base, tok, t["prompt"], max_new)[0] != text
    assert differs > 0  # so the match above is with the live policy's decoding, not the base's
    assert tr.method.pop_stats()["greedy_dropped_tokens"] == tokens


def test_remax_greedy_tokens_count_in_gen_tokens(remax_trainer):
    """gen_tokens charges the step for the sampled completions and for the greedy ones it does not train on."""
    before = remax_trainer.gen_tokens
    row, batch = remax_trainer.train_step(1)
    assert row["greedy_dropped_tokens"] > 0
    assert row["gen_tokens"] - before == batch.completion_mask.sum() + row["greedy_dropped_tokens"]


# -- what gcframe.verify's rows exercise ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rows():
    from accelerate import Accelerator

    from gcframe import pipeline, verify

    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    names = ["reinforce_pp", "reinforce_pp@grouped", "reinforce_pp_baseline", "remax", "remax@grouped", "gpg",
             "gpg@std"]
    return {n: verify.verify_method(n, cfg, task, base_dir, acc) for n in names}


def test_verify_rows_run_every_branch(rows):
    from gcframe import verify

    for name, r in rows.items():
        assert r["max_rel_diff"] <= verify.TOLERANCE, name
    for name in ("reinforce_pp", "reinforce_pp@grouped", "reinforce_pp_baseline"):  # the clip bites on both sides
        assert rows[name]["stats"]["clip_low_frac"] > 0 and rows[name]["stats"]["clip_high_frac"] > 0, name
    for name in ("reinforce_pp", "reinforce_pp_baseline", "remax", "remax@grouped"):  # a live KL in the reward
        assert rows[name]["beta"] > 0 and rows[name]["stats"]["kl_reward"] != 0, name
    assert verify._verify_config().methods["reinforce_pp_baseline"]["kl_loss_coef"] > 0  # and in the loss
    for name in ("reinforce_pp_baseline", "gpg", "gpg@std"):  # a group of equal rewards among groups with signal
        assert 0 < rows[name]["stats"]["zero_var_frac"] < 1, name
    assert rows["gpg"]["stats"]["gpg_alpha"] > 1 and rows["gpg@std"]["stats"]["gpg_alpha"] > 1
    assert 0 < rows["remax"]["stats"]["tie_frac"] < 1  # some completions beat (or lose to) their greedy one
