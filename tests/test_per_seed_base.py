"""Each seed its own base (sft_base.per_seed, issue 51 point 2): stage 1 of seed s is trained with seed s and cached
under its own key, so that two seeds get two bases and a seed's second run reuses its own; without the option every
seed shares one base, under the key it had before the option existed."""
from __future__ import annotations

import copy

import pytest
import torch

from gcframe import pipeline
from gcframe.config import from_dict
from gcframe.trainer import make_accelerator
from tests.test_resume import TINY_CONFIG


def _config(per_seed: bool, seed: int):
    raw = copy.deepcopy(TINY_CONFIG)
    raw["sft_base"] = {**raw["sft_base"], "steps": 20, "per_seed": per_seed}
    cfg = from_dict(raw)
    cfg.seed = seed
    return cfg


def _weights(d) -> torch.Tensor:
    from safetensors.torch import load_file

    return torch.cat([t.flatten().double() for _, t in sorted(load_file(str(d / "model.safetensors")).items())])


def test_two_seeds_get_two_bases_and_a_seed_reuses_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path / "cache"))
    acc = make_accelerator()
    cfg0, task = pipeline.prepare(_config(True, 0))
    cfg1, _ = pipeline.prepare(_config(True, 1))
    assert (pipeline.stage1_seed(cfg0), pipeline.stage1_seed(cfg1)) == (0, 1)
    assert pipeline.stage1_config(cfg1).seed == 1
    d0, info0 = pipeline.sft_base(cfg0, task, acc, show_progress=False)
    d1, info1 = pipeline.sft_base(cfg1, task, acc, show_progress=False)
    assert d0 != d1 and not torch.equal(_weights(d0), _weights(d1))  # another init and data order: another base
    shared, _ = pipeline.sft_base(pipeline.prepare(_config(False, 1))[0], task, acc, show_progress=False)
    assert shared not in (d0, d1) and torch.equal(_weights(shared), _weights(d0))  # seed 0's is the shared one (task
    # seed 0), under its own key

    def train_again(*args, **kwargs):
        raise AssertionError("a cached base was trained again")

    monkeypatch.setattr(pipeline, "_train_sft_base", train_again)
    again, _ = pipeline.sft_base(copy.deepcopy(cfg1), task, acc, show_progress=False)
    assert again == d1 and torch.equal(_weights(again), _weights(d1))


def test_one_shared_base_keeps_its_key_without_the_option():
    shared = [pipeline.base_key(pipeline.prepare(_config(False, s))[0]) for s in (0, 1, 2)]
    own = [pipeline.base_key(pipeline.prepare(_config(True, s))[0]) for s in (0, 1, 2)]
    assert len(set(shared)) == 1 and len(set(own)) == 3 and shared[0] not in own
    cfg = _config(False, 2)
    assert pipeline.stage1_seed(cfg) == cfg.task.seed == 0  # the shared base's stage 1 is the task's seed
    assert "per_seed" in cfg.to_dict()["sft_base"]  # the option is recorded in a run's config, not in a shared key
    from gcframe import verify  # the harness's base, keyed by the code before the option existed: a cached shared
    assert pipeline.base_key(pipeline.prepare(verify._verify_config())[0]) == "1a88192d4359"  # base stays found


@pytest.mark.parametrize("value", ["yes", 1])
def test_per_seed_must_be_a_boolean(value):
    from gcframe.errors import UserError

    raw = copy.deepcopy(TINY_CONFIG)
    raw["sft_base"] = {**raw["sft_base"], "per_seed": value}
    with pytest.raises(UserError, match="sft_base.per_seed must be true or false"):
        from_dict(raw)


def test_the_base_is_rescored_once_or_once_per_seed():
    from pathlib import Path

    from gcframe.evaluate.rescore import base_work

    out = Path("OUT")
    shared = [{"seed": 0, "sft_base": {"per_seed": False}}, {"seed": 1, "sft_base": {"per_seed": False}}]
    assert base_work(out, shared) == [(out, shared[0], "base", 0, None)]  # one model, the first run's seed
    own = [{"seed": s, "sft_base": {"per_seed": True}} for s in (1, 0, 1)]  # two methods' runs of seed 1
    assert [w[2] for w in base_work(out, own)] == ["base-seed0", "base-seed1"]
    assert [w[1]["seed"] for w in base_work(out, own)] == [0, 1]
    pretrained = [{"seed": s, "sft_base": {"per_seed": True}, "model": {"path": "m"}} for s in (0, 1)]
    assert [w[2] for w in base_work(out, pretrained)] == ["base"]  # no stage 1: one model whatever the option
