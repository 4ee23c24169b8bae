"""Evaluation is a measurement, not a step of training: it draws from its own generator, so how often and how much is
evaluated never changes the trained model; and every evaluation keeps each problem's outcome (problems.jsonl)."""
from __future__ import annotations

import pytest
import torch

from experiments.bench_common import Size, make_trainer
from gcframe.evaluate import problem_id
from gcframe.tracking.log import read_jsonl

SIZE = Size("test", 32, 2, 4, 64, prompts=2, group=4, new_tokens=4)


@pytest.fixture(scope="module")
def base(tiny_base):
    return tiny_base


def _train(base, run_dir, method, **train):
    tr = make_trainer(method, SIZE, base, str(run_dir), steps=4)
    for key, value in train.items():
        setattr(tr.tcfg, key, value)
    tr.fit()
    rows = read_jsonl(run_dir / "metrics.jsonl")
    numbers = [{k: v for k, v in r.items() if not k.startswith(("time", "peak_"))} for r in rows if "loss" in r]
    return numbers, {k: v.detach().clone() for k, v in tr.acc.unwrap_model(tr.policy).state_dict().items()}


@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_evaluation_settings_leave_the_training_trajectory_bit_identical(base, tmp_path, method):
    """Evaluating every step with 4 samples per problem on 16 problems, or only at the start and end, greedily, on 4:
    the same training rows (losses, rewards, GC statistics, KL) and the same final weights, bit for bit."""
    often, w_often = _train(base, tmp_path / "often", method, eval_every=1, eval_size=16, eval_k=4)
    rarely, w_rarely = _train(base, tmp_path / "rarely", method, eval_every=0, eval_size=4, eval_k=0)
    assert len(often) == len(rarely) == 4
    assert often == rarely
    assert all(torch.equal(w_often[k], w_rarely[k]) for k in w_often)


def test_every_evaluation_writes_each_problems_outcome(base, tmp_path):
    """problems.jsonl: a row per problem and evaluation, ids shared by every method, sums equal to the logged
    rates."""
    _train(base, tmp_path / "a", "grpo", eval_every=2, eval_size=6, eval_k=3)
    _train(base, tmp_path / "b", "online_rft", eval_every=0, eval_size=6, eval_k=3)
    rows = {name: read_jsonl(tmp_path / name / "problems.jsonl") for name in ("a", "b")}
    assert sorted({r["step"] for r in rows["a"]}) == [0, 2, 4] and len(rows["a"]) == 3 * 6
    assert sorted({r["step"] for r in rows["b"]}) == [0, 4] and len(rows["b"]) == 2 * 6
    ids = [[r["problem"] for r in rows[n] if r["step"] == 4] for n in ("a", "b")]
    assert ids[0] == ids[1] and len(set(ids[0])) == 6  # the same problems, in held-out order, for both methods
    tr = make_trainer("grpo", SIZE, base, str(tmp_path / "ids"), steps=1)
    first = tr.task.heldout[0]
    assert ids[0][0] == problem_id(first) and rows["a"][0]["index"] == 0
    evals = {r["step"]: r for r in read_jsonl(tmp_path / "a" / "metrics.jsonl") if "eval_accuracy" in r}
    for step in (0, 4):  # the per-problem rows add up to the logged rates
        mine = [r for r in rows["a"] if r["step"] == step]
        assert sum(r["greedy_correct"] for r in mine) / 6 == pytest.approx(evals[step]["eval_accuracy"])
        assert sum(r["maj_correct"] for r in mine) / 6 == pytest.approx(evals[step]["eval_majk"])
        assert sum(r["k_correct"] > 0 for r in mine) / 6 == pytest.approx(evals[step]["eval_passk"])
        assert sum(r["k_correct"] for r in mine) / (6 * 3) == pytest.approx(evals[step]["eval_pass1"])
        assert all(r["k"] == 3 and 1 <= r["completion_len"] <= SIZE.new_tokens for r in mine)
        assert all(r["truncated"] == (r["completion_len"] == SIZE.new_tokens and r["truncated"]) for r in mine)
    mid = [r for r in rows["a"] if r["step"] == 2]
    assert all("k" not in r for r in mid)  # a greedy-only evaluation has no sampled columns
    assert evals[4]["time_eval_problems"] < evals[4]["time_eval"]
