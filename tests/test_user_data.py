"""A user's own data (task name `dataset`: a local JSONL/CSV/Parquet file, columns mapped) and reward functions in
the user's own file (summed with weights; a step variant for process supervision), through the task API, the reward
code every method uses, and the CLI."""
from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
import torch
import yaml

from gcframe.errors import UserError
from gcframe.tasks import TaskConfig, build_task
from gcframe import forkserver
from tests.test_resume import COMPARE, TINY_CONFIG, cli_env

ROWS = [{"q": f"{a}+{b}=", "a": str(a + b), "sol": f"{a + b}"} for a in range(10) for b in range(10)]  # 100 rows

REWARDS = '''
def correct(prompt, completion, answer):
    return 1.0 if completion.strip() == answer else 0.0

def brief(prompt, completion, answer):
    return -len(completion) / 10

def steps(prompt, completion, answer):      # one step per character: 1 if it is a digit
    return [(i + 1, 1.0 if c.isdigit() else 0.0) for i, c in enumerate(completion)]

def nan(prompt, completion, answer):
    return float("nan")

def boom(prompt, completion, answer):
    raise KeyError("label")

def text(prompt, completion, answer):
    return "1.0"

def digits(prompt, completion, answer):       # fails on a completion with no digit in it (the empty one)
    return float(max(completion, key=str.isdigit).isdigit()) + 0 * int(completion[-1])

def typed(prompt, completion, answer):        # numbers of every kind a user may return: bool, int, NumPy, torch
    import numpy, torch
    return {"3": True, "12": numpy.float32(0.5), "": torch.tensor(0.25)}.get(completion, 2)

def steps_text(prompt, completion, answer):
    return [(1, "1.0")]
'''


def write_data(path, rows=ROWS):
    df = pd.DataFrame(rows)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        df.to_parquet(path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def dataset_cfg(path, **kw) -> TaskConfig:
    return TaskConfig(**{"name": "dataset", "path": str(path), "columns": {"prompt": "q", "answer": "a"},
                         "n_demos": 20, "n_heldout": 10, **kw})


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_dataset_task_maps_columns(tmp_path, suffix):
    task = build_task(dataset_cfg(write_data(tmp_path / f"qa{suffix}")))
    assert len(task.heldout) == 10 and len(task.prompts) == 90 and len(task.demos) == 20
    by_prompt = {r["q"]: r["a"] for r in ROWS}
    for row in list(task.heldout) + list(task.demos):
        assert by_prompt[row["prompt"]] == row["answer"]  # plain format: the prompt column as is
    assert set(task.heldout["prompt"]).isdisjoint(task.prompts["prompt"])  # held-out rows never trained on
    assert task.demos[0]["completion"] == task.demos[0]["answer"]  # no completion column: the answer
    assert task.verify("12", "12") and task.verify("#### 12", "12") and not task.verify("13", "12")
    assert task.step_rewards("12", ["12"]) == [(2, 1.0)]


def test_dataset_task_in_the_chat_format(tmp_path):
    from gcframe.modeling import configure_tokenizer
    from tests.chat_models import build_chat_tokenizer

    tok = configure_tokenizer(build_chat_tokenizer())
    task = build_task(dataset_cfg(write_data(tmp_path / "qa.jsonl"), system_prompt=""), tok)
    prompt = task.heldout[0]["prompt"]
    assert prompt.startswith("<|im_start|>system\n<|im_end|>\n<|im_start|>user\n")  # the same PromptFormat
    assert prompt.endswith("=<|im_end|>\n<|im_start|>assistant\n")


def test_dataset_task_completion_column(tmp_path):
    rows = [{**r, "sol": f"the sum is {r['a']}"} for r in ROWS]
    task = build_task(dataset_cfg(write_data(tmp_path / "qa.jsonl", rows),
                                  columns={"prompt": "q", "answer": "a", "completion": "sol"}))
    assert task.demos[0]["completion"] == f"the sum is {task.demos[0]['answer']}"
    assert task.verify(task.demos[0]["completion"], task.demos[0]["answer"])  # the final number is the answer


@pytest.mark.parametrize("kw, words", [
    ({"columns": {"prompt": "question", "answer": "a"}},  # the example maps the file's own columns
     "lacks column(s) question (it has q, a, sol): map yours with task.columns, e.g. {prompt: q, answer: a}"),
    ({"columns": {"prompt": "question", "answer": "solution"}},
     "lacks column(s) question, solution (it has q, a, sol): map yours with task.columns, e.g. {prompt: q, answer: a}"),
    ({"path": "{tmp}/bad.jsonl"}, "task.path '{tmp}/bad.jsonl': line 7 is not valid JSON (Expecting ',' delimiter)"),
    ({"path": "{tmp}/bad.json"}, "task.path '{tmp}/bad.json' is not valid JSON at line 3, column 15"),
    ({"columns": {"prompt": "q", "label": "a"}}, "unknown role(s) label"),
    ({"path": "/no/such/qa.csv"}, "not found"),
    ({"path": "{tmp}/qa.txt"}, "give a .jsonl, .json, .csv or .parquet file"),
    ({"n_heldout": 95}, "too few rows"),
])
def test_dataset_task_bad_input(tmp_path, kw, words):
    write_data(tmp_path / "qa.jsonl")
    (tmp_path / "qa.txt").write_text("1+1=,2\n")
    lines = [json.dumps(r) for r in ROWS]
    lines[6] = lines[6][:-1]  # line 7 (1-based) loses its closing brace; datasets would log "row 6"
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    # one JSON document, its third line missing a comma after its "q" value: ' {"q": "1+2=" ' is 14 characters, so
    # the parser stops at column 15, where "a" starts
    (tmp_path / "bad.json").write_text('[\n {"q": "1+1=", "a": "2"},\n {"q": "1+2=" "a": "3"}\n]\n')
    kw = {k: v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for k, v in kw.items()}
    with pytest.raises(UserError) as e:
        build_task(dataset_cfg(kw.pop("path", tmp_path / "qa.jsonl"), **kw))
    assert words.replace("{tmp}", str(tmp_path)) in str(e.value) and "\n" not in str(e.value)


# -- reward functions -----------------------------------------------------------------------------------------------
class _Texts:
    def __init__(self, texts):
        self.texts = texts


@pytest.fixture
def rewards_file(tmp_path):
    (tmp_path / "my_rewards.py").write_text(REWARDS)
    return tmp_path / "my_rewards.py"


def test_reward_functions_are_summed_with_weights(rewards_file):
    from gcframe.rewards.functions import RewardFunctions

    f = RewardFunctions([f"{rewards_file}:correct", f"{rewards_file}:brief"], [1.0, 0.5])
    batch = _Texts([{"prompt": "1+2=", "completion": "3", "answer": "3"},
                    {"prompt": "1+2=", "completion": "12", "answer": "3"}])
    # row 0: 1·1 + 0.5·(−1/10) = 0.95;  row 1: 1·0 + 0.5·(−2/10) = −0.1
    assert torch.allclose(f.score(batch), torch.tensor([0.95, -0.1]))


@pytest.mark.parametrize("spec, weights, words", [
    ("{f}:nan", [], "reward function {f}:nan returned nan for prompt '1+2=' and completion '3'"),
    ("{f}:boom", [], "reward function {f}:boom raised KeyError: 'label' on prompt '1+2='"),
    ("{f}:text", [], "reward function {f}:text returned '1.0' (a str) for prompt '1+2=' and completion '3': return "
                     "a number"),
    ("{f}:nope", [], "defines no function 'nope'"),
    ("{f}", [], "must be 'FILE.py:NAME'"),
    ("{f}:correct", [1.0, 2.0], "2 weight(s) for 1 reward function(s)"),
    ("/no/such.py:correct", [], "'/no/such.py' not found"),  # a missing file is "not found" (issue 26)
])
def test_reward_function_errors_are_one_line(rewards_file, spec, weights, words):
    from gcframe.rewards.functions import RewardFunctions

    spec, words = spec.replace("{f}", str(rewards_file)), words.replace("{f}", str(rewards_file))
    with pytest.raises(UserError) as e:
        RewardFunctions([spec], weights).score(_Texts([{"prompt": "1+2=", "completion": "3", "answer": "3"}]))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_reward_functions_accept_numbers_of_every_kind(rewards_file):
    from gcframe.rewards.functions import RewardFunctions

    f = RewardFunctions([f"{rewards_file}:typed"], [2.0])
    batch = _Texts([{"prompt": "1+2=", "completion": c, "answer": "3"} for c in ("3", "12", "", "x")])
    # 2 · True = 2;  2 · float32(0.5) = 1;  2 · tensor(0.25) = 0.5;  2 · 2 = 4
    assert f.score(batch).tolist() == [2.0, 1.0, 0.5, 4.0]


@pytest.mark.parametrize("spec, step, words", [
    ("{f}:boom", False, "reward function {f}:boom raised KeyError: 'label' on prompt '"),
    ("{f}:digits", False, "reward function {f}:digits raised ValueError: max() arg is an empty sequence on prompt "),
    ("{f}:nan", False, "reward function {f}:nan returned nan for prompt '"),
    ("{f}:steps_text", True, "step reward function {f}:steps_text returned '1.0' (a str) for prompt '"),
])
def test_reward_functions_are_tried_before_anything_runs(tmp_path, rewards_file, spec, step, words):
    """attach (compare.py, before stage 1 and before anything is written) calls every function on a few
    demonstrations and on an empty completion: a broken function is refused there, in one line."""
    from gcframe.config import TrainConfig
    from gcframe.rewards.functions import attach

    task = build_task(dataset_cfg(write_data(tmp_path / "qa.jsonl")))
    spec, words = spec.replace("{f}", str(rewards_file)), words.replace("{f}", str(rewards_file))
    train = (TrainConfig(reward="process", step_reward_func=spec) if step else
             TrainConfig(reward="functions", reward_funcs=[spec]))
    with pytest.raises(UserError) as e:
        attach(task, train)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
    assert str(e.value).endswith("(tried on 3 demonstrations and an empty completion before training: nothing was "
                                 "written)")
    attach(task, TrainConfig(reward="functions", reward_funcs=[f"{rewards_file}:correct"],
                             step_reward_func=f"{rewards_file}:steps"))  # working functions pass


def test_step_reward_function_places_rewards_on_step_tokens(rewards_file):
    from gcframe.modeling import build_char_tokenizer
    from gcframe.rewards import process_rewards
    from gcframe.rewards.functions import step_function
    from gcframe.sampling import make_batch

    tok = build_char_tokenizer()
    texts = [{"prompt": "1+2=", "completion": "3;x", "answer": "3", "steps": ["3"]}]
    batch = make_batch(tok, ["1+2="], ["3;x"], texts=texts)
    task = type("Task", (), {"step_reward_func": staticmethod(step_function(f"{rewards_file}:steps"))})()
    r, m = process_rewards(batch, task, tok)
    # one char = one token: '3' -> 1, ';' -> 0, 'x' -> 0, each at its own token; <eos> ungraded
    assert r[0, :3].tolist() == [1.0, 0.0, 0.0] and m[0, :3].tolist() == [1.0, 1.0, 1.0] and m[0, 3:].sum() == 0


def test_cli_trains_on_user_data_and_rewards(tmp_path, rewards_file):
    """grpo on Σ w·f (and grpo_ps on the step function), on a CSV with its own column names: every sampled reward in
    samples.jsonl is 1·correct + 0.5·brief of its own text."""
    write_data(tmp_path / "qa.csv")
    config = {**TINY_CONFIG, "task": {"name": "dataset", "path": str(tmp_path / "qa.csv"),
                                      "columns": {"prompt": "q", "answer": "a"}, "n_demos": 64, "n_heldout": 16},
              "train": {**TINY_CONFIG["train"], "reward": "functions", "reward_weights": [1.0, 0.5],
                        "reward_funcs": ["my_rewards.py:correct", "my_rewards.py:brief"],
                        "step_reward_func": "my_rewards.py:steps"}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config))
    r = forkserver.run([sys.executable, str(COMPARE), "--config", "cfg.yaml", "--methods", "grpo,grpo_ps", "--out",
                        "out", "--no-progress"], capture_output=True, text=True, env=cli_env(), cwd=tmp_path,
                       timeout=400)  # relative paths, from the user's own folder
    assert r.returncode == 0, r.stderr[-3000:]
    samples = [json.loads(x) for x in (tmp_path / "out" / "grpo" / "seed0" / "samples.jsonl").read_text().splitlines()]
    assert samples
    for s in samples:
        c = s["completion"]
        want = (1.0 if c.strip() == s["answer"] else 0.0) + 0.5 * (-len(c) / 10)
        assert abs(s["reward"] - want) < 1e-6, s
    saved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())["train"]
    assert saved["reward_funcs"] == [f"{rewards_file}:correct", f"{rewards_file}:brief"]  # absolute, for --resume
    ps = [json.loads(x) for x in (tmp_path / "out" / "grpo_ps" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in row for row in ps)
