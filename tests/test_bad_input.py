"""Bad input through the CLI (`experiments/compare.py` in a subprocess): each case ends with exit status 2 and one
line on stderr, no traceback, and nothing overwritten. NaN/inf and failing reward functions at training step 3
(after the checkpoint of step 2) stop the run with a line naming the method and step (or the prompt and
completion), and leave that checkpoint and the metrics up to it intact.

The cases run from one module fixture, each in a process of its own (forked once compare.py's imports are done).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import torch
import yaml

from gcframe.tracking import checkpoint
from gcframe.tracking.log import read_jsonl
from gcframe import forkserver
from gcframe.errors import resume_command  # the command as the messages print it (paths quoted)
from tests.test_resume import COMPARE, ROOT, TINY_CONFIG, cli_env, run_cli

TINY = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "steps": 6, "eval_every": 0}}

# Runs the cases: compare.py's imports (torch, transformers, the methods) are paid once, then each case runs in a
# process forked from this one, with its own stdout, stderr and exit status. A case's `patch` is applied in its
# process when training step 3 starts (after the checkpoint of step 2); "no peft" hides peft from it.
DRIVER = """
import json, os, runpy, sys, traceback
compare, cases = sys.argv[1], json.load(open(sys.argv[2]))
main = runpy.run_path(compare, run_name="compare")["main"]
from gcframe.tasks import ArithmeticTask
from gcframe.trainer import Trainer
from methods.grpo import GRPO
for case in cases:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for name, fd in (("stdout", 1), ("stderr", 2)):
                os.dup2(os.open(case[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            if case["patch"] == "no peft":
                sys.modules["peft"] = None  # as if peft were not installed
            elif case["patch"]:
                _train_step = Trainer.train_step
                def train_step(self, step, patch=case["patch"]):
                    if step == 3:
                        exec(patch, {"self": self, "ArithmeticTask": ArithmeticTask, "GRPO": GRPO})
                    return _train_step(self, step)
                Trainer.train_step = train_step
            sys.argv = [compare, *case["args"]]
            code = main(case["args"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code or 0)
    with open(case["status"], "w") as f:
        f.write(str(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])))
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
    # issue 37: refused before stage 1, in one line that says where
    "reward function raises": ({"train": {"reward": "functions", "reward_funcs": ["{tmp}/rewards.py:boom"]}}, [],
                               None, ["rewards.py:boom raised KeyError", "nothing was written"]),
    "reward function NaN": ({"train": {"reward": "functions", "reward_funcs": ["{tmp}/rewards.py:nan"]}}, [], None,
                            ["rewards.py:nan returned nan", "nothing was written"]),
    "reward function text": ({"train": {"reward": "functions", "reward_funcs": ["{tmp}/rewards.py:text"]}}, [], None,
                             ["rewards.py:text returned '1.0' (a str)", "return a number"]),
    "duplicate seeds": ({}, ["--seeds", "0,0"], None, ["seed 0 is listed twice in --seeds 0,0"]),
    "--quick keeps group_size 1": ({"train": {"group_size": 1}}, ["--quick"], None,
                                   ["method 'grpo'", "train.group_size", "got 1"]),
    "jsonl bad line": ({"task": {"name": "dataset", "path": "{tmp}/bad.jsonl", "columns": {"prompt": "q", "answer": "a"},
                                 "n_demos": 4, "n_heldout": 4}}, [], None,
                       ["bad.jsonl': line 7 is not valid JSON", "fix that line"]),
    "columns mapped wrong": ({"task": {"name": "dataset", "path": "{tmp}/qa_ok.jsonl", "n_demos": 4, "n_heldout": 4,
                                       "columns": {"prompt": "question", "answer": "solution"}}}, [], None,
                             ["lacks column(s) question, solution (it has q, a)", "e.g. {prompt: q, answer: a}"]),
    "yaml syntax, where": ("train:\n  steps: [1, 2\n", [], None, ["not valid YAML at line 3, column 1",
                                                                 "flow sequence that starts at line 2, column 10"]),
    "--config is a folder": ({}, ["--config", "{tmp}/existing"], None, ["is a folder, not a file",
                                                                        "give the path of a YAML file"]),
    "hub name, HF_HUB_OFFLINE": ({}, ["--model", "gpt2"], None, ["model 'gpt2' is not a local folder or file",
                                                                  "offline (HF_HUB_OFFLINE=1)", ".gguf"]),
    "hub name, no network": ({}, ["--model", "gpt2"], None, ["model 'gpt2' is not a local folder or file",
                                                              "offline (http://127.0.0.1:9 cannot be reached)"]),
    # issue 62: no silent configuration
    "yaml duplicate key": ("train:\n  steps: 4\n  lr: 0.001\n  steps: 5000\n", [], None,
                           ["sets 'steps' twice in one mapping (lines 2 and 4)", "keep one"]),
    "reward_weights without functions": ({"train": {"reward_weights": [1.0, 0.5]}}, [], None,
                                         ["train.reward_weights is set but train.reward is 'verifier'",
                                          "train.reward: functions"]),
    "empty config file": ("# nothing yet\n", [], None, ["sets nothing", "built-in defaults (task.n_demos 500",
                                                      "not experiments/configs/default.yaml", "leave --config out"]),
    "--config ''": ({}, ["--config", ""], None, ["--config is empty", "leave --config out"]),
    # issue 62: mistakes in a user's method file: one line naming the method and what is wrong, no run folder left
    "method GC of shape [N]": ({}, ["--methods-from", "{tmp}/gc_per_sequence.py", "--methods", "gc_per_sequence"], None,
                               ["method 'gc_per_sequence': coefficients(batch, logp) returned GC of shape [8]",
                                "a float tensor of logp's shape [N, T] = [8, ", "g[:, None].expand_as(logp)",
                                "nothing was kept"]),
    "method GC a float": ({}, ["--methods-from", "{tmp}/gc_float.py", "--methods", "gc_float"], None,
                          ["method 'gc_float': coefficients(batch, logp) returned float 1.0, not a tensor",
                           "torch.full_like(logp, value)", "nothing was kept"]),
    "method without collect": ({}, ["--methods-from", "{tmp}/no_collect.py", "--methods", "no_collect"], None,
                               ["method 'no_collect' has no collect of its own: define collect(self, step)"]),
    "method coefficients(self, batch)": ({}, ["--methods-from", "{tmp}/two_args.py", "--methods", "two_args"], None,
                                         ["method 'two_args' defines coefficients(self, batch), but the engine calls "
                                          "coefficients(self, batch, logp)"]),
    # issue 62: tracebacks and leftovers
    "model holding pickled code": ({}, ["--model", "{tmp}/pickled_code"], None,
                                   ["pickled_code/pytorch_model.bin' cannot be loaded as plain tensors",
                                    "UnpicklingError", "gcframe never runs it", "safetensors"]),
    "num_heads not dividing hidden_size": ({"model": {"num_heads": 3}}, [], None,
                                           ["model.hidden_size 32 is not divisible by model.num_heads 3",
                                            "pick num_heads that divides it"]),
    # issue 62: messages that mislead
    "disk full at step 3": ({}, ["--out", "{tmp}/with space/out"], "import errno\nraise OSError(errno.ENOSPC, 'No space "
                            "left on device')", ["is full (", "while a file was written to '", "with space/out': free "
                            "space on it", "grpo seed 0's checkpoint of step 2", "--resume '", "with space/out'"]),
    "unknown section": ({"trian": {"steps": 4}}, [], None, ["unknown config section(s) trian: known sections are seed, "
                                                           "task, model, sft_base, train, reward_model, methods, and "
                                                           "compare.py's own run and tune"]),
    "--tune -1e-3,1e-4": ({}, ["--tune", "-1e-3,1e-4"], None, ["tune.lr must hold rates > 0, got -0.001"]),
    "lr 1.0e+300": ({"train": {"lr": 1.0e+300}}, [], None, ["method 'grpo' produced non-finite",
                                                            "a --resume reads its settings from ",
                                                            "out/config.yaml: change them there"]),
    "digits past the tiny model's context": ({"task": {"digits": 40}}, [], None,
                                             ["exceeds the tiny model's context of 32 tokens (model.max_positions)",
                                              "raise model.max_positions to at least"]),
    # issue 62: no runaway inputs: refused before anything is allocated, with the estimate
    "runaway prompts_per_step": ({"train": {"prompts_per_step": 1000000000}}, [], None,
                                 ["4,000,000,000 sequences", "needs about", "GiB", "this machine holds",
                                  "lower train.prompts_per_step"]),
}
ENV = {  # cases run with these environment changes (None: unset); the hub's cache is an empty folder of the test's
    "hub name, HF_HUB_OFFLINE": {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "{tmp}/hf_cache"},
    # no offline flag: the one-connection probe finds the endpoint closed (a local port nothing listens on)
    "hub name, no network": {"HF_HUB_OFFLINE": None, "TRANSFORMERS_OFFLINE": None, "HF_HUB_CACHE": "{tmp}/hf_cache",
                             "HF_ENDPOINT": "http://127.0.0.1:9", "HTTPS_PROXY": None, "https_proxy": None,
                             "ALL_PROXY": None, "all_proxy": None},
}
REWARDS = '''
calls = []


def boom(prompt, completion, answer):
    raise KeyError("label")


def nan(prompt, completion, answer):
    return float("nan")


def text(prompt, completion, answer):
    return "1.0"


def late(prompt, completion, answer):  # right on the demonstrations; raises on the 30th call (a sampled completion)
    calls.append(1)
    if len(calls) >= 30:
        raise ValueError(f"cannot score {completion!r}")
    return 1.0 if completion.strip() == answer else 0.0
'''
BAD_METHODS = {  # file -> (base class, body): a method with one mistake each (issue 62)
    "gc_per_sequence.py": ("SFT", "def coefficients(self, batch, logp):\n        return torch.ones(logp.shape[0])"),
    "gc_float.py": ("SFT", "def coefficients(self, batch, logp):\n        return 1.0"),
    "no_collect.py": ("Method", "def coefficients(self, batch, logp):\n        return torch.ones_like(logp)"),
    "two_args.py": ("SFT", "def coefficients(self, batch):\n        return torch.ones(1)"),
}
BAD_METHOD = """import torch
from methods import register
from methods.base import Method
from methods.sft import SFT


@register("{name}")
class Bad({base}):
    {body}
"""
AFTER_CHECKPOINT = {"reward raises", "reward None", "reward NaN", "loss NaN", "logits inf", "disk full at step 3"}


class CallsOnLoad:
    """Unpickled, it would call os.getpid (harmless): what a code-running pytorch_model.bin does with worse."""

    def __reduce__(self):
        import os

        return (os.getpid, ())


def _case_args(tmp: Path, name: str) -> list[str]:
    """The case's folder, its config file and the compare.py arguments that run it."""
    config, args, _, _ = CASES[name]
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
    return ["--config", str(cfg_file), "--no-progress", *args]


def _run_with_env(tmp: Path, name: str) -> subprocess.CompletedProcess:
    """A case that changes the environment compare.py is imported in: a process of its own."""
    env = cli_env()
    for k, v in ENV[name].items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v.replace("{tmp}", str(tmp))
    # a fresh interpreter: these variables are read while huggingface_hub is imported (gcframe/forkserver.py)
    return subprocess.run([sys.executable, str(COMPARE), *_case_args(tmp, name)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def _run_forked(tmp: Path, names: list[str]) -> dict[str, subprocess.CompletedProcess]:
    """The other cases, each in a process forked from one that has imported compare.py (DRIVER)."""
    cases = []
    for name in names:
        args = _case_args(tmp, name)
        io = tmp / name.replace(" ", "_")
        cases.append({"args": args, "patch": CASES[name][2], "stdout": str(io / "stdout.txt"),
                      "stderr": str(io / "stderr.txt"), "status": str(io / "status.txt")})
    (tmp / "cases.json").write_text(json.dumps(cases))
    (tmp / "driver.py").write_text(DRIVER)
    r = forkserver.run([sys.executable, str(tmp / "driver.py"), str(COMPARE), str(tmp / "cases.json")],
                       capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return {name: subprocess.CompletedProcess(c["args"], int(Path(c["status"]).read_text()),
                                              Path(c["stdout"]).read_text(), Path(c["stderr"]).read_text())
            for name, c in zip(names, cases)}


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
    shutil.copytree(tmp / "noweights", tmp / "pickled_code")  # weights whose unpickling would call a function
    torch.save({"w": CallsOnLoad()}, tmp / "pickled_code" / "pytorch_model.bin")
    (tmp / "existing").mkdir()
    (tmp / "existing" / "keep.txt").write_text("results of an earlier run")
    (tmp / "afile").write_text("a file the user keeps")
    (tmp / "empty.jsonl").write_text("")
    (tmp / "rewards.py").write_text(REWARDS)
    for file, (base, body) in BAD_METHODS.items():
        (tmp / file).write_text(BAD_METHOD.format(name=file.removesuffix(".py"), base=base, body=body))
    rows = [json.dumps({"q": f"{i}+1=", "a": str(i + 1)}) for i in range(12)]
    (tmp / "qa_ok.jsonl").write_text("\n".join(rows) + "\n")
    rows[6] = rows[6][:-1]  # line 7 (the library's "row 6") loses its closing brace
    (tmp / "bad.jsonl").write_text("\n".join(rows) + "\n")
    with ThreadPoolExecutor(len(ENV) + 1) as pool:
        with_env = {name: pool.submit(_run_with_env, tmp, name) for name in ENV}
        done = _run_forked(tmp, [name for name in CASES if name not in ENV])
        done.update({name: f.result() for name, f in with_env.items()})
    return tmp, done


def assert_one_line_refusal(r: subprocess.CompletedProcess, words) -> None:
    """Exit status 2, no traceback, one stderr line 'error: ...' holding each of `words`."""
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_2(results, name):
    tmp, done = results
    r = done[name]
    assert_one_line_refusal(r, CASES[name][3])
    out = tmp / name.replace(" ", "_") / "out"
    if name == "disk full at step 3":
        out = tmp / "with space" / "out"
    if name in AFTER_CHECKPOINT:  # stopped at step 3: the checkpoint of step 2 and the rows up to it are kept
        run = out / "grpo" / "seed0"
        ckpt = checkpoint.latest(run)
        assert ckpt.name == "step-000002"
        assert checkpoint.load_file(ckpt / "state.pt")["step"] == 2
        assert max(row["step"] for row in read_jsonl(run / "metrics.jsonl")) == 2
    elif name == "existing folder":
        assert [p.name for p in (tmp / "existing").iterdir()] == ["keep.txt"]
        assert (tmp / "existing" / "keep.txt").read_text() == "results of an earlier run"
    elif name.startswith("--out"):
        assert (tmp / "afile").read_text() == "a file the user keeps"  # not replaced, not deleted
    elif name == "lr 1.0e+300":  # stopped at step 1 with no checkpoint: the run starts over on --resume
        assert (out / "config.yaml").is_file() and checkpoint.latest(out / "grpo" / "seed0") is None
    elif name.startswith("method GC"):  # found at the run's first update: its folder and OUT are gone again
        assert not out.exists()
    elif name != "lora without peft":
        assert not out.exists()  # refused before anything was written
        assert r.stdout == "", r.stdout  # ... or printed as a result


def test_reward_function_failing_on_a_sample_leaves_a_resumable_folder(results):
    """A reward function right on the demonstrations (so the check before training passes) that raises on a sampled
    completion stops the run with one line saying what the folder keeps and how to continue; no claim file is left
    for --resume to wait on, and once the function is fixed --resume finishes the run."""
    tmp, _ = results
    case = tmp / "late_reward"
    case.mkdir()
    (case / "rewards.py").write_text(REWARDS)
    cfg = {**TINY, "train": {**TINY["train"], "reward": "functions", "reward_funcs": [f"{case}/rewards.py:late"]}}
    (case / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = case / "out"
    r = run_cli("--config", case / "config.yaml", "--methods", "grpo", "--no-progress", "--out", out, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"error: reward function {case}/rewards.py:late raised ValueError: cannot score")
    assert f"; kept in {out}: the finished runs" in lines[0]
    assert f"; once fixed (a --resume reads its settings from {out / 'config.yaml'}: change them there" in lines[0]
    assert lines[0].endswith(f", continue with: {resume_command(out)}")  # from any folder
    assert not list(out.rglob("*.claim"))  # nothing that a later --resume would wait on
    (case / "rewards.py").write_text(REWARDS.replace("len(calls) >= 30", "False"))  # the fix
    r = run_cli("--resume", out, "--no-progress", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "summary.csv").read_text().count("\n") == 2  # header + the one run


def test_a_hub_name_offline_fails_at_once_without_the_network(monkeypatch, tmp_path):
    """Not in the Hugging Face cache and no hub to fetch it from: refused after one connection attempt (here to a
    local port nothing listens on), not after the hub client's minute of retries; a cached name is never probed."""
    import time

    from huggingface_hub import constants

    from gcframe.errors import UserError
    from gcframe.modeling import loading

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # empty: nothing cached
    for k in ("TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    t0 = time.monotonic()
    with pytest.raises(UserError, match=r"model 'gpt2' is not a local folder or file .* offline \(http://127.0.0.1:9 "
                                        r"cannot be reached\): give a local Hugging Face model folder"):
        loading.resolve_model_path("gpt2")
    assert time.monotonic() - t0 < loading.HUB_PROBE_S + 2
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match=r"offline \(HF_HUB_OFFLINE=1\)"):
        loading.resolve_model_path("org/some-model")
    monkeypatch.setattr(loading, "hub_reachable", lambda *a: pytest.fail("a cached name was probed"))
    monkeypatch.setattr("huggingface_hub.try_to_load_from_cache", lambda repo, f: str(tmp_path / f))
    assert loading.resolve_model_path("gpt2") == "gpt2"  # cached: from_pretrained reads it offline
