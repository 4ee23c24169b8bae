"""Stage 1 (gcframe.stage1): a base defined by its held-out accuracy (sft_base.target_accuracy), the running average of
the weights (sft_base.ema), progress that shows what was measured, and a target never reached refused."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml
from accelerate import Accelerator

from gcframe.config import from_dict
from gcframe.errors import UserError
from gcframe.pipeline import prepare, sft_base
from gcframe import forkserver

ROOT = Path(__file__).resolve().parents[1]
TINY = {"task": {"operands": 2, "digits": 1, "n_demos": 60, "n_heldout": 40},
        "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64},
        "sft_base": {"steps": 400, "lr": 3.0e-3, "batch_size": 32, "warmup_steps": 10, "eval_every": 5, "ema": 0.9},
        "train": {"eval_size": 40}}


def _a_line_every_step(monkeypatch):
    """Plain progress lines after every step, from the loop instead of the timer: what each step would show, whatever
    the machine's speed (a 30-step tiny stage 1 can end before a timer beat, and then prints nothing)."""
    from gcframe.tracking import progress

    class EveryStep(progress.PlainProgress):
        def _beat(self) -> None:
            pass

        def update(self, n: int = 1) -> None:
            super().update(n)
            self._line(done=False)

    monkeypatch.setattr(progress, "PlainProgress", EveryStep)
    monkeypatch.setattr(progress, "ENABLED", True)


def _config(**sft):
    raw = yaml.safe_load(yaml.safe_dump(TINY))
    raw["sft_base"].update(sft)
    return prepare(from_dict(raw))


def test_stage1_stops_at_its_target_and_the_base_is_the_average(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path))
    _a_line_every_step(monkeypatch)
    cfg, task = _config(target_accuracy=0.3)
    d, info = sft_base(cfg, task, Accelerator(cpu=True))
    run = info["stage1"]
    curve = run["curve"]
    assert run["stopped_at_target"] and run["steps_trained"] == curve[-1]["step"] < 400
    assert curve[-1]["accuracy"] >= 0.3 > max(c["accuracy"] for c in curve[:-1])  # the first evaluation past it
    assert info["eval_accuracy"] == curve[-1]["accuracy"]  # the cached base is the model that met it: θ̄
    assert [c["step"] for c in curve] == list(range(5, run["steps_trained"] + 1, 5))
    assert (d / "config.json").is_file()
    lines = capsys.readouterr().err  # plain progress lines (stderr is not a terminal here)
    assert "loss=" in lines and f"acc={curve[-1]['accuracy']:.2f}@{curve[-1]['step']}" in lines


def test_progress_never_shows_an_accuracy_it_did_not_measure(tmp_path, monkeypatch, capsys):
    """Before the first evaluation the line has the training loss and no accuracy; after it, the accuracy and the
    step it was measured at."""
    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path))
    _a_line_every_step(monkeypatch)
    cfg, task = _config(steps=30, eval_every=20)
    sft_base(cfg, task, Accelerator(cpu=True))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("stage 1 (SFT base):")]
    assert len(lines) == 30 + 1 and all("loss=" in ln for ln in lines)  # one a step, and the closing line
    for ln in lines:
        n = int(ln.split(": ")[1].split("/")[0])
        assert ("acc=" in ln) == (n >= 20), ln
        assert "acc=0.00@" not in ln or "@20" in ln or "@30" in ln  # an accuracy always names its step


def test_a_target_never_reached_is_refused_and_nothing_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path))
    cfg, task = _config(steps=10, target_accuracy=0.9)
    with pytest.raises(UserError, match=r"stage 1 reached greedy accuracy 0\.\d{3} on 40 test problems after 10 "
                                        r"steps, below sft_base.target_accuracy 0.9: raise sft_base.steps or lower "
                                        r"sft_base.target_accuracy"):
        sft_base(cfg, task, Accelerator(cpu=True))
    assert not any((tmp_path / "sft_base").iterdir())  # no base, no half-written folder


def test_compare_stops_after_stage1_and_starts_no_method(tmp_path):
    raw = yaml.safe_load(yaml.safe_dump(TINY))
    raw["sft_base"].update(steps=10, target_accuracy=0.9)
    raw["train"].update(steps=2, prompts_per_step=2, group_size=2)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GCFRAME_CACHE": str(tmp_path / "cache")}
    res = forkserver.run([sys.executable, "experiments/compare.py", "--config", str(tmp_path / "c.yaml"), "--methods",
                          "sft", "--out", str(out), "--no-progress"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    err = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: stage 1 reached greedy accuracy")
    assert not (out / "sft").exists()  # no method started


def test_ema_and_target_are_checked():
    with pytest.raises(UserError, match="sft_base.ema must be in"):
        from_dict({"sft_base": {"ema": 1.0}})
    with pytest.raises(UserError, match="sft_base.target_accuracy must be in"):
        from_dict({"sft_base": {"target_accuracy": 1.5}})
    with pytest.raises(UserError, match="need evaluations: set sft_base.eval_every > 0"):
        from_dict({"sft_base": {"target_accuracy": 0.5, "eval_every": 0}})
    with pytest.raises(UserError, match="need evaluations"):
        from_dict({"sft_base": {"patience": 3, "eval_every": 0}})
    with pytest.raises(UserError, match="two stopping rules: set one of them to 0"):
        from_dict({"sft_base": {"patience": 3, "target_accuracy": 0.5}})


def test_early_stopping_on_validation_keeps_the_best_evaluation(tmp_path, monkeypatch):
    """sft_base.patience: stage 1 decides on the validation problems (task.n_validation), stops once `patience`
    evaluations in a row have not beaten the best, and the base is the best evaluation's weights: its accuracy on
    the validation problems, measured again, is the curve's maximum."""
    from gcframe.evaluate.problems import heldout_rows
    from gcframe.modeling import load_model_and_tokenizer
    from gcframe.stage1 import greedy_accuracy

    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path))
    raw = yaml.safe_load(yaml.safe_dump(TINY))
    raw["task"].update(digits=2, n_validation=100, n_demos=200)
    raw["sft_base"].update(steps=300, patience=3, eval_every=10)
    cfg, task = prepare(from_dict(raw))
    d, info = sft_base(cfg, task, Accelerator(cpu=True))
    run, curve = info["stage1"], info["stage1"]["curve"]
    assert run["split"] == "validation" and run["problems"] == 40  # train.eval_size of the 100 validation problems
    best = max(curve, key=lambda c: c["accuracy"])
    first_best = next(c for c in curve if c["accuracy"] == best["accuracy"])
    assert run["best_step"] == first_best["step"] and run["accuracy"] == best["accuracy"]
    if run["stopped_by"] == "patience":  # three evaluations after the best, none better
        assert run["steps_trained"] == first_best["step"] + 3 * 10
    model, tok = load_model_and_tokenizer(str(d))
    from gcframe.sampling import GenerationConfig, Generator

    gen = Generator(tok, GenerationConfig(cfg.train.max_new_tokens, cfg.train.temperature))
    assert greedy_accuracy(model, gen, task, heldout_rows(task, 40, "validation")) == pytest.approx(best["accuracy"])
