"""What a finished run leaves: RUN/final, a Hugging Face folder that from_pretrained loads (LoRA: the adapter, and
MERGE.md's recipe merges it), no checkpoints unless train.keep_checkpoints; and train.report_to tensorboard, whose
scalars (read back with tensorboard's own event reader) are the rows of metrics.jsonl."""
from __future__ import annotations

import json
import math

import pytest
import torch

from gcframe import pipeline
from gcframe.config import from_dict
from gcframe.modeling import load_model_and_tokenizer
from gcframe.tracking.log import cache_root, read_jsonl
from tests.test_resume import TINY_CONFIG, run_cli, write_config


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """grpo, 4 steps, a checkpoint at step 2, TensorBoard on."""
    tmp = tmp_path_factory.mktemp("outputs")
    cfg = write_config(tmp / "tiny.yaml")
    r = run_cli("--config", cfg, "--methods", "grpo", "--report-to", "tensorboard", "--out", tmp / "out",
                timeout=300)  # progress bars on, but stderr is a pipe, not a terminal
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp / "out", r


def test_no_progress_bars_on_a_redirected_stderr(full_run):
    _, r = full_run
    assert "it/s" not in r.stderr and "\r" not in r.stderr and "%|" not in r.stderr, r.stderr[-2000:]
    assert "grpo seed 0: test accuracy" in r.stdout  # the result lines still come


def test_a_compare_folder_becomes_a_result_folder(full_run, tmp_path):
    """analysis.results.from_compare: what reproduce.py commits from a finished compare.py folder."""
    import pandas as pd

    from analysis import results

    out, _ = full_run
    results.from_compare(out, tmp_path / "res")
    got = sorted(p.name for p in (tmp_path / "res").iterdir())
    assert {"summary.csv", "table.csv", "change.csv", "why.csv", "matched.csv", "time.csv", "config.yaml", "env.json",
            "curves.png"} <= set(got), got
    summary = pd.read_csv(tmp_path / "res" / "summary.csv")
    assert summary[["method", "seed"]].values.tolist() == [["grpo", 0]]
    assert json.loads((tmp_path / "res" / "env.json").read_text())["command"]  # the command that made the runs
    # evals.csv: every evaluation row of metrics.jsonl, with the compute a curve refit reads (analysis.curves)
    evals = pd.read_csv(tmp_path / "res" / "evals.csv")
    logged = [r for r in read_jsonl(out / "grpo" / "seed0" / "metrics.jsonl") if "eval_accuracy" in r]
    assert evals["step"].tolist() == sorted({r["step"] for r in logged}) and len(evals) >= 2
    last = {r["step"]: r["eval_accuracy"] for r in logged}
    assert evals["accuracy"].tolist() == pytest.approx([last[s] for s in evals["step"]], abs=1e-6)
    import yaml

    cfg = yaml.safe_load((out / "grpo" / "seed0" / "config.yaml").read_text())["train"]
    per_step = cfg["prompts_per_step"] * cfg["group_size"]
    assert (evals["compute"] == evals["step"] * per_step).all()
    assert (evals["run_compute"] == cfg["steps"] * per_step).all()


def _greedy(model, tok, prompt: str) -> str:
    ids = tok(tok.bos_token + prompt, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def test_final_model_loads_and_checkpoints_are_gone(full_run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = full_run[0] / "grpo" / "seed0"
    assert not (run / "checkpoints").exists()  # checkpoint_every 2 wrote step-000002; finishing removed it
    model = AutoModelForCausalLM.from_pretrained(run / "final")
    tok = AutoTokenizer.from_pretrained(run / "final")
    cfg, _ = pipeline.prepare(from_dict(TINY_CONFIG))
    base, _ = load_model_and_tokenizer(str(cache_root() / "sft_base" / pipeline.base_key(cfg)))  # the SFT base
    diffs = [float((p - q).abs().max()) for p, q in zip(model.state_dict().values(), base.state_dict().values())]
    assert max(diffs) > 0  # trained: not the SFT base
    assert len(_greedy(model, tok, "1+2=")) > 0


def test_final_model_is_the_final_policy(full_run):
    """Its greedy held-out accuracy, recomputed from RUN/final alone, is the run's last logged eval_accuracy."""
    from gcframe.evaluate import evaluate
    from gcframe.sampling import GenerationConfig, Generator

    out = full_run[0]
    cfg, task = pipeline.prepare(from_dict(TINY_CONFIG))
    model, tok = load_model_and_tokenizer(str(out / "grpo" / "seed0" / "final"))
    rows = [task.heldout[i] for i in range(min(cfg.train.eval_size, len(task.heldout)))]
    counts = evaluate(model.eval(), Generator(tok, GenerationConfig(cfg.train.max_new_tokens, cfg.train.temperature)),
                      task, rows)
    last = [r for r in read_jsonl(out / "grpo" / "seed0" / "metrics.jsonl") if "eval_accuracy" in r][-1]
    assert last["step"] == cfg.train.steps
    assert counts["greedy_correct"] / counts["n"] == last["eval_accuracy"]


def test_tensorboard_scalars_are_the_metrics_rows(full_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = full_run[0]
    acc = EventAccumulator(str(out / "tensorboard" / "grpo" / "seed0"))
    acc.Reload()
    rows = read_jsonl(out / "grpo" / "seed0" / "metrics.jsonl")
    for key in ("loss", "reward_mean", "eval_accuracy"):
        logged = {r["step"]: r[key] for r in rows if r.get(key) is not None}
        events = {e.step: e.value for e in acc.Scalars(key)}
        assert set(events) == set(logged) and logged, key  # loss: steps 0..3; eval_accuracy: steps 0, 2, 4
        assert all(math.isclose(events[s], v, rel_tol=1e-6, abs_tol=1e-7) for s, v in logged.items()), key


def test_lora_run_keeps_the_adapter_and_checkpoints_when_asked(tmp_path):
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = {**TINY_CONFIG, "model": {**TINY_CONFIG["model"], "lora_rank": 2},
              "train": {**TINY_CONFIG["train"], "keep_checkpoints": True, "lr": 0.01}}
    cfg = write_config(tmp_path / "lora.yaml", config)
    r = run_cli("--config", cfg, "--methods", "sft", "--out", tmp_path / "out", "--no-progress", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "out" / "sft" / "seed0"
    assert (run / "checkpoints" / "step-000002" / "state.pt").is_file()  # kept
    final = run / "final"
    assert (final / "adapter_config.json").is_file() and not (final / "model.safetensors").exists()
    note = (final / "MERGE.md").read_text()
    base_path = note.split("trained on top of the base model `")[1].split("`")[0]
    base = AutoModelForCausalLM.from_pretrained(base_path)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    merged = PeftModel.from_pretrained(base, final).merge_and_unload()  # MERGE.md's recipe
    after = merged.state_dict()
    assert set(after) == set(before)  # a plain model again: no lora_A / lora_B left
    assert max(float((after[k] - before[k]).abs().max()) for k in before) > 0  # the adapter changed weights
    assert torch.isfinite(torch.cat([v.flatten() for v in after.values()])).all()

    # the same folder as a model path (`--model OUT/sft/seed0/final`: the next run starts from this one) is merged
    # onto its base once and cached: the weights MERGE.md's recipe gives, a plain model, and the run's tokenizer
    from gcframe.modeling import resolve_model_path

    path = resolve_model_path(str(final))
    assert path != str(final) and resolve_model_path(str(final)) == path  # cached: the second call finds it
    model, tok = load_model_and_tokenizer(path)
    assert all(torch.equal(model.state_dict()[k], after[k]) for k in after) and set(model.state_dict()) == set(after)
    assert tok("1+2=")["input_ids"] == AutoTokenizer.from_pretrained(final)("1+2=")["input_ids"]


def test_an_adapter_folder_that_cannot_be_merged_is_one_line(tmp_path):
    from gcframe.errors import UserError
    from gcframe.modeling import resolve_model_path

    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 2}))
    with pytest.raises(UserError, match="names no base model .* merge it yourself"):
        resolve_model_path(str(tmp_path))
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path)}))
    with pytest.raises(UserError, match="no adapter_model.safetensors: give a folder that a run's final model"):
        resolve_model_path(str(tmp_path))


def test_report_to_names_are_checked_before_anything_runs(monkeypatch):
    import importlib.util

    from gcframe.errors import UserError
    from gcframe.tracking import trackers

    assert trackers.names("") == [] and trackers.names("none") == [] and trackers.names(" tensorboard ") == ["tensorboard"]
    with pytest.raises(UserError, match="unknown tracker 'tensorbord': choose from tensorboard, wandb, trackio"):
        trackers.names("tensorbord")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real(n, *a))
    with pytest.raises(UserError, match=r"needs the wandb package: pip install 'gcframe\[wandb\]'"):
        trackers.names("tensorboard,wandb")


def test_the_commit_is_dirty_for_changed_code_not_for_rendered_outputs(tmp_path):
    """A run's env.json says '+dirty' when code differs from the commit; results/, docs/ and Markdown that an earlier
    run rendered into the tree are outputs and leave it clean (a worktree that collected one result stays usable)."""
    import subprocess

    from gcframe.tracking.env import git_state

    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    for f in ("code.py", "results/x/table.csv", "docs/page.md", "README.md"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("a\n")
    git("init", "-q"), git("add", "."), git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    for f in ("results/x/table.csv", "docs/page.md", "README.md"):
        (tmp_path / f).write_text("b\n")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "code.py").write_text("b\n")
    assert git_state(tmp_path)["dirty"] is True
