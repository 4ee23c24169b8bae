"""Bad input through the CLI (`experiments/compare.py` in a subprocess): each case ends with exit status 2 and one
line on stderr, no traceback, and nothing overwritten. NaN/inf and failing reward functions at training step 3
(after the checkpoint of step 2) stop the run with a line naming the method and step (or the prompt and
completion), and leave that checkpoint and the metrics up to it intact.

The cases run in parallel, one process each, from one module fixture.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import yaml

from gcframe.tracking import checkpoint
from gcframe.tracking.log import read_jsonl
from tests.test_resume import COMPARE, TINY_CONFIG, run_cli

TINY = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "steps": 6, "eval_every": 0}}

# Runs compare.py with `patch` applied when training step 3 starts (after the checkpoint of step 2).
AT_STEP_3 = """
import runpy, sys
from gcframe.tasks import ArithmeticTask
from gcframe.trainer import Trainer
from methods.grpo import GRPO
_train_step = Trainer.train_step
def train_step(self, step):
    if step == 3:
        {patch}
    return _train_step(self, step)
Trainer.train_step = train_step
sys.argv[0] = {compare!r}
runpy.run_path({compare!r}, run_name="__main__")
"""
NO_PEFT = f"""
import runpy, sys
sys.modules["peft"] = None  # as if peft were not installed
sys.argv[0] = {str(COMPARE)!r}
runpy.run_path({str(COMPARE)!r}, run_name="__main__")
"""

# case -> (overrides of the tiny config, or the config file's text; extra CLI args; patch at step 3; words the
# error line must hold)
CASES = {
    "unknown method": ({}, ["--methods", "nope"], None, ["unknown method 'nope'", "grpo"]),
    "yaml syntax": ("train: [1, 2\n", [], None, ["not valid YAML"]),
    "yaml unreadable": (b"\xff\xfe\x00binary", [], None, ["not valid YAML"]),
    "yaml type": ({"train": {"steps": "ten"}}, [], None, ["train.steps must be an integer", "'ten'"]),
    "yaml type under --quick": ({"train": {"steps": "ten"}}, ["--quick", "--steps", "3"], None,
                                ["train.steps must be an integer", "'ten'"]),
    "yaml bool type": ({"model": {"bf16": "yes"}}, [], None, ["model.bf16 must be true or false", "'yes'"]),
    "empty --methods": ({}, ["--methods", ""], None, ["--methods is empty"]),
    "model dir without weights": ({}, ["--model", "{tmp}/noweights"], None, ["has config.json but no weights"]),
    "yaml not a mapping": ("- grpo\n- ppo\n", [], None, ["must be a YAML mapping", "got a list"]),
    "invalid value": ({"train": {"lr": -0.1}}, [], None, ["train.lr must be positive"]),
    "invalid method option": ({"methods": {"grpo": {"aggregation": "mean"}}}, [], None,
                              ["unknown aggregation 'mean'", "token-mean"]),
    "dataset columns": ({"task": {"name": "gsm8k", "path": "{tmp}/qa.jsonl", "n_demos": 2, "n_heldout": 2}}, [],
                        None, ["lacks column(s) answer"]),
    "model path": ({}, ["--model", "/no/such/model"], None, ["model '/no/such/model' not found"]),
    "existing folder": ({}, ["--out", "{tmp}/existing"], None, ["already exists", "--overwrite"]),
    "reward raises": ({}, [], "ArithmeticTask.verify = lambda self, c, a: 1 / 0",
                      ["verifier raised ZeroDivisionError", "prompt '", "completion '"]),
    "reward None": ({}, [], "ArithmeticTask.verify = lambda self, c, a: None",
                    ["verifier returned None", "prompt '", "completion '"]),
    "reward NaN": ({}, [], "ArithmeticTask.verify = lambda self, c, a: float('nan')",
                   ["verifier returned nan", "prompt '", "completion '"]),
    "loss NaN": ({}, [], "GRPO.coefficients = lambda self, batch, logp: logp.detach() * float('nan')",
                 ["method 'grpo' produced non-finite loss at step 3", "step-000002 intact"]),
    "logits inf": ({}, [], "self.ctx.policy.lm_head.weight.data.fill_(float('inf'))",
                   ["method 'grpo' produced non-finite logits at step 3", "step-000002 intact"]),
    "lora without peft": ({"model": {"lora_rank": 4}}, [], "no peft", ["pip install peft"]),
    # issue 26: what a new user hit
    "--out is a file": ({}, ["--out", "{tmp}/afile"], None, ["is a file, not a folder"]),
    "--out is a file, --overwrite": ({}, ["--out", "{tmp}/afile", "--overwrite"], None, ["is a file, not a folder"]),
    "--out under a file": ({}, ["--out", "{tmp}/afile/sub"], None, ["is a file"]),
    "reward file missing": ({"train": {"reward": "functions", "reward_funcs": ["my_rewards.py:correct"]}}, [], None,
                            ["not found", "my_rewards.py"]),
    "empty dataset": ({"task": {"name": "dataset", "path": "{tmp}/empty.jsonl", "n_demos": 2, "n_heldout": 2}}, [],
                      None, ["is empty"]),
    "lr as YAML text": ("train:\n  lr: 5e-5\n", [], None, ["train.lr must be a number", "write 5.0e-5"]),
}
AFTER_CHECKPOINT = {"reward raises", "reward None", "reward NaN", "loss NaN", "logits inf"}


def _run_case(tmp: Path, name: str):
    config, args, patch, _ = CASES[name]
    case = tmp / name.replace(" ", "_")
    case.mkdir()
    cfg_file = case / "config.yaml"
    if isinstance(config, (str, bytes)):
        cfg_file.write_bytes(config if isinstance(config, bytes) else config.encode())
    else:
        raw = {**TINY, **{k: {**TINY.get(k, {}), **v} for k, v in config.items()}}
        cfg_file.write_text(yaml.safe_dump(raw).replace("{tmp}", str(tmp)))
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    if "--out" not in args:
        args += ["--out", str(case / "out")]
    if "--methods" not in args:
        args += ["--methods", "grpo"]
    script = COMPARE
    if patch is not None:
        script = case / "run.py"
        script.write_text(NO_PEFT if patch == "no peft" else AT_STEP_3.format(patch=patch, compare=str(COMPARE)))
    return run_cli("--config", cfg_file, "--no-progress", *args, script=script, timeout=300)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from gcframe import pipeline
    from gcframe.config import from_dict
    from gcframe.trainer import make_accelerator

    tmp = tmp_path_factory.mktemp("bad")
    cfg, task = pipeline.prepare(from_dict(TINY))
    pipeline.sft_base(cfg, task, make_accelerator(), show_progress=False)  # cached once, before the parallel runs
    (tmp / "qa.jsonl").write_text("".join(json.dumps({"question": f"{i}+1?"}) + "\n" for i in range(8)))
    from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama, save_model_and_tokenizer

    tok = build_char_tokenizer()  # a model folder whose weights are missing: config.json and tokenizer only
    save_model_and_tokenizer(build_tiny_llama(tok, ModelConfig(hidden_size=16, num_layers=1, num_heads=2,
                                                               intermediate_size=32)), tok, tmp / "noweights")
    (tmp / "noweights" / "model.safetensors").unlink()
    (tmp / "existing").mkdir()
    (tmp / "existing" / "keep.txt").write_text("results of an earlier run")
    (tmp / "afile").write_text("a file the user keeps")
    (tmp / "empty.jsonl").write_text("")
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        done = dict(zip(CASES, pool.map(lambda n: _run_case(tmp, n), CASES)))
    return tmp, done


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_2(results, name):
    tmp, done = results
    r = done[name]
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for words in CASES[name][3]:
        assert words in lines[0]
    out = tmp / name.replace(" ", "_") / "out"
    if name in AFTER_CHECKPOINT:  # stopped at step 3: the checkpoint of step 2 and the rows up to it are kept
        run = out / "grpo" / "seed0"
        ckpt = checkpoint.latest(run)
        assert ckpt.name == "step-000002"
        assert torch.load(ckpt / "state.pt", weights_only=False)["step"] == 2
        assert max(row["step"] for row in read_jsonl(run / "metrics.jsonl")) == 2
    elif name == "existing folder":
        assert [p.name for p in (tmp / "existing").iterdir()] == ["keep.txt"]
        assert (tmp / "existing" / "keep.txt").read_text() == "results of an earlier run"
    elif name.startswith("--out"):
        assert (tmp / "afile").read_text() == "a file the user keeps"  # not replaced, not deleted
    elif name != "lora without peft":
        assert not out.exists()  # refused before anything was written
        assert r.stdout == "", r.stdout  # ... or printed as a result
