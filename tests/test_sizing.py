"""No runaway inputs (issue 62): sizes are checked against what the machine can hold before anything is allocated
(gcframe.sizing), and nothing is allocated in proportion to train.steps (gcframe.trainer.EvalSteps)."""
from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from gcframe import sizing
from gcframe.config import TrainConfig, from_dict, load_yaml
from gcframe.errors import UserError
from gcframe.trainer import EvalSteps, eval_steps

CONFIGS = Path(__file__).resolve().parents[1] / "experiments" / "configs"


def test_the_evaluation_steps_of_10_to_the_20_steps_allocate_nothing():
    """train.steps 10^20 built a set of 4·10^18 steps (10.9 GB RSS in 3 minutes before the issue); a rule now."""
    tracemalloc.start()
    t0 = time.perf_counter()
    at = eval_steps(TrainConfig(steps=10 ** 20, eval_every=25))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 1 and peak < 2 ** 20
    assert isinstance(at, EvalSteps) and 25 in at and 10 ** 20 in at and 26 not in at and 0 not in at
    assert 10 ** 20 + 25 not in at and len(at) == 4 * 10 ** 18
    small = eval_steps(TrainConfig(steps=100, eval_every=20))  # a small one reads as the set it stands for
    assert small == {20, 40, 60, 80, 100} and sorted({0} | small) == [0, 20, 40, 60, 80, 100]


def _tiny(**train) -> object:
    return from_dict({"model": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64,
                                "max_positions": 32}, "train": train})


def test_a_step_this_machine_cannot_hold_is_refused_with_the_estimate(monkeypatch):
    cfg = _tiny(prompts_per_step=1_000_000_000, group_size=4, max_new_tokens=8)
    with pytest.raises(UserError, match=r"^a forward and backward pass over 4,000,000,000 sequences of up to 16 tokens "
                                        r"\(train.prompts_per_step 1000000000 × train.group_size 4 / train.minibatches 1\)"
                                        r" needs about [\d,.]+ GiB \(gcframe.sizing's estimate, a floor; .*\), but this "
                                        r"machine holds [\d,.]+ GiB of memory: lower train.prompts_per_step"):
        sizing.check(cfg, sizing.dims_of(cfg, None), prompt_tokens=8)
    micro = _tiny(prompts_per_step=1_000_000_000, group_size=4, micro_batch_size=8)  # the update fits: sampling not
    with pytest.raises(UserError, match=r"^sampling 4,000,000,000 sequences .* lower train.prompts_per_step or "
                                        r"train.group_size"):
        sizing.check(micro, sizing.dims_of(micro, None), prompt_tokens=8)
    monkeypatch.setattr(sizing, "machine_bytes", lambda: (2 ** 20, "GPU memory"))  # a 1 MiB device
    with pytest.raises(UserError, match=r"this machine holds 1 MiB of GPU memory"):
        sizing.check(_tiny(), sizing.dims_of(_tiny(), None), prompt_tokens=8, where="grpo: ")
    with pytest.raises(UserError, match=r"^grpo: "):
        sizing.check(_tiny(), sizing.dims_of(_tiny(), None), prompt_tokens=8, where="grpo: ")
    monkeypatch.setattr(sizing, "machine_bytes", lambda: None)  # not known: no refusal
    sizing.check(cfg, sizing.dims_of(cfg, None), prompt_tokens=8)


def test_stage_1_is_sized_too():
    cfg = from_dict({"sft_base": {"batch_size": 10 ** 9}})
    with pytest.raises(UserError, match=r"stage 1's pass over sft_base.batch_size 1000000000 demonstrations .* "
                                        r"lower sft_base.batch_size"):
        sizing.check(cfg, sizing.dims_of(cfg, None), prompt_tokens=8)


@pytest.mark.parametrize("path", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_every_committed_tiny_model_config_fits_in_4_gib(monkeypatch, path):
    """The estimate refuses runaways, never the committed designs: each tiny-model config fits in a 4 GiB machine."""
    raw = load_yaml(CONFIGS / path)
    if "train" not in raw or "base" in raw or (raw.get("model") or {}).get("path"):
        pytest.skip("not a compare.py config of the tiny model (a sweep's spec, or a pretrained model)")
    from dataclasses import fields

    from gcframe.config import RunConfig

    cfg = from_dict({k: v for k, v in raw.items() if k in {f.name for f in fields(RunConfig)}})
    monkeypatch.setattr(sizing, "machine_bytes", lambda: (4 * 2 ** 30, "memory"))
    sizing.check(cfg, sizing.dims_of(cfg, None), prompt_tokens=cfg.model.max_positions)
