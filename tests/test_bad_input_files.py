"""Bad input that lives in files and folders, through the CLIs: a data row without its answer or with a prompt seen
before, `--seeds -1`, a damaged checkpoint at `--resume`, a read-only output or run folder (compare, evaluate,
report) and run folders of different tasks in one report. Each ends with exit status 2 and one line on stderr, no
traceback, and leaves every file as it was. Also: a checkpoint file that holds code is refused without running it,
and a final model's weights get the permissions of the files beside them.

A read-only folder is made with chmod; the commands run through `READ_ONLY`, which makes os.access honour the
permission bits as it does for a user who is not root (root may write anywhere, and these tests may run as root).
"""
from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gcframe.errors import UserError
from gcframe.tasks import TaskConfig, build_task
from gcframe.tracking import checkpoint
from gcframe import forkserver
from tests.test_resume import COMPARE, ROOT, TINY_CONFIG, cli_env

TINY = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "steps": 3, "eval_every": 0, "checkpoint_every": 2,
                                 "keep_checkpoints": True}}
ROWS = [{"q": f"{i}+1=", "a": str(i + 1)} for i in range(24)]

READ_ONLY = """
import os, runpy, stat, sys
_access = os.access
def access(path, mode, *args, **kwargs):  # as for a user who is not root: the permission bits bind
    if mode & os.W_OK and os.path.exists(path) and not os.stat(path).st_mode & stat.S_IWUSR:
        return False
    return _access(path, mode, *args, **kwargs)
os.access = access
if sys.argv[1] == "-m":
    sys.argv = sys.argv[2:]
    sys.modules.pop(sys.argv[0], None)  # imported already where this runs forked (gcframe/forkserver.py)
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run(tmp: Path, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python READ_ONLY ARGS...` (a script path, or -m MODULE) from the repository root (`env`: added variables)."""
    wrapper = tmp / "read_only.py"
    wrapper.write_text(READ_ONLY)
    return forkserver.run([sys.executable, str(wrapper), *map(str, args)], capture_output=True, text=True,
                          env={**cli_env(), **(env or {})}, cwd=ROOT, timeout=300)


def one_line(r: subprocess.CompletedProcess, *words: str) -> str:
    """The single `error:` line of a refused command (exit status 2, no traceback), holding every word."""
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def snapshot(folder: Path) -> dict:
    """Every file under `folder` with its bytes and mode, every folder with its mode."""
    return {p: (p.read_bytes() if p.is_file() else None, p.stat().st_mode) for p in sorted(folder.rglob("*"))}


def read_only(*paths: Path) -> None:
    for p in paths:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def writable(root: Path) -> None:
    """Undo read_only under `root` (pytest must be able to remove it)."""
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    """A finished compare.py folder: grpo seed 0, 3 steps, its checkpoint of step 2 kept, and its report."""
    tmp = tmp_path_factory.mktemp("files")
    (tmp / "config.yaml").write_text(yaml.safe_dump(TINY))
    r = run(tmp, COMPARE, "--config", tmp / "config.yaml", "--methods", "grpo", "--no-progress", "--out",
            tmp / "out")
    assert r.returncode == 0, r.stderr[-2000:]
    return tmp / "out"


def copy(done: Path, dest: Path, unfinished: bool = False) -> Path:
    """A copy of the finished folder; `unfinished`: as if killed after its checkpoint of step 2 (the rows of step 3
    and the final model gone), so --resume continues it."""
    shutil.copytree(done, dest)
    if unfinished:
        run_dir = dest / "grpo" / "seed0"
        rows = [ln for ln in (run_dir / "metrics.jsonl").read_text().splitlines(True) if json.loads(ln)["step"] < 3]
        (run_dir / "metrics.jsonl").write_text("".join(rows))
        shutil.rmtree(run_dir / "final")
    return dest


# -- a user's data -------------------------------------------------------------------------------------------------
def data_config(tmp: Path, rows: list[dict], blank_line_at: int | None = None) -> Path:
    """A tiny config on a JSONL file of `rows` (with a blank line inserted before index `blank_line_at`)."""
    lines = [json.dumps(r) for r in rows]
    if blank_line_at is not None:
        lines.insert(blank_line_at, "")
    (tmp / "qa.jsonl").write_text("\n".join(lines) + "\n")
    cfg = {**TINY, "task": {"name": "dataset", "path": str(tmp / "qa.jsonl"), "columns": {"prompt": "q", "answer": "a"},
                            "n_demos": 8, "n_heldout": 4}}
    (tmp / "config.yaml").write_text(yaml.safe_dump(cfg))
    return tmp / "config.yaml"


def test_a_data_row_without_its_answer_is_refused_before_stage_1(tmp_path):
    rows = [dict(r) for r in ROWS]
    del rows[6]["a"]
    # rows 0-1 are lines 1-2, line 3 is blank, so row 6 (the 7th) is line 8
    cfg = data_config(tmp_path, rows, blank_line_at=2)
    r = run(tmp_path, COMPARE, "--config", cfg, "--methods", "grpo", "--no-progress", "--out", tmp_path / "out")
    one_line(r, f"{tmp_path / 'qa.jsonl'}: line 8 has no answer (its 'a' field is missing)", "give every row")
    assert not (tmp_path / "out").exists()


def test_a_prompt_seen_before_is_refused_naming_both_lines(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[9] = dict(rows[3])  # line 10 repeats line 4
    cfg = data_config(tmp_path, rows)
    r = run(tmp_path, COMPARE, "--config", cfg, "--methods", "grpo", "--no-progress", "--out", tmp_path / "out")
    one_line(r, f"{tmp_path / 'qa.jsonl'}: line 4 and line 10 have the same prompt '3+1='", "keep one of them")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("suffix, where", [(".csv", "line 8"), (".parquet", "row 6")])
def test_other_files_name_the_line_or_row(tmp_path, suffix, where):
    """A CSV row is named by the line it starts on: the header is line 1, rows 0-3 are lines 2-5, row 4's quoted
    prompt spans lines 6-7, so row 5, whose answer is missing, starts on line 8. A Parquet file has no lines: row 5
    is the 6th row."""
    import re

    import pandas as pd

    rows = [dict(r) for r in ROWS]
    rows[4]["q"] = "4\n+1="
    rows[5]["a"] = None
    path = tmp_path / f"qa{suffix}"
    if suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(UserError, match="^" + re.escape(f"{path}: {where} has no answer (its 'a' field is missing)")):
        build_task(TaskConfig(name="dataset", path=str(path), columns={"prompt": "q", "answer": "a"}, n_demos=4,
                              n_heldout=4))


def test_a_negative_seed_is_refused_before_training(tmp_path):
    r = run(tmp_path, COMPARE, "--seeds", "-1", "--methods", "grpo", "--no-progress", "--out", tmp_path / "out")
    one_line(r, "--seeds -1: a seed must be a whole number >= 0, got -1")
    assert not (tmp_path / "out").exists()


# -- checkpoints ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage, why", [("state.pt cut short", "state.pt: not a complete checkpoint file"),
                                         ("rng-rank0.pt deleted", "rng-rank0.pt is missing")])
def test_a_damaged_checkpoint_is_named_and_nothing_is_written(done, tmp_path, damage, why):
    """Refused before anything is written (a deleted rng-rank0.pt was called damaged and, in the same line, a kept
    checkpoint, and env.resume.json was written first)."""
    out = copy(done, tmp_path / "out", unfinished=True)
    ckpt = out / "grpo" / "seed0" / "checkpoints" / "step-000002"
    if damage == "state.pt cut short":  # as a full disk leaves it
        state = (ckpt / "state.pt").read_bytes()
        (ckpt / "state.pt").write_bytes(state[: len(state) // 2])
    else:
        (ckpt / "rng-rank0.pt").unlink()
    before = snapshot(out)
    r = run(tmp_path, COMPARE, "--resume", out, "--no-progress")
    one_line(r, f"checkpoint {ckpt} is damaged ({why}", f"delete {ckpt} and resume again to train grpo seed 0 over "
             "from step 0")
    assert "kept" not in r.stderr and snapshot(out) == before


def test_a_damaged_newer_checkpoint_falls_back_to_the_older_one(done, tmp_path):
    """A newer checkpoint whose bytes were overwritten (its zip checksums no longer match) beside a good one: the
    run resumes from the good one, says so in one warning, and ends with the metrics of the uninterrupted run."""
    out = copy(done, tmp_path / "out", unfinished=True)
    good = out / "grpo" / "seed0" / "checkpoints" / "step-000002"
    bad = shutil.copytree(good, good.with_name("step-000003"))
    data = bytearray((bad / "state.pt").read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"A" * 64
    (bad / "state.pt").write_bytes(bytes(data))
    r = run(tmp_path, COMPARE, "--resume", out, "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"warning: checkpoint {bad} is damaged (state.pt: " in r.stderr
    assert f"does not match its checksum): grpo seed 0 resumes from {good} instead" in r.stderr
    timing = ("time", "peak_")
    rows = [[{k: v for k, v in json.loads(ln).items() if not k.startswith(timing)} for ln in
             (d / "grpo" / "seed0" / "metrics.jsonl").read_text().splitlines()] for d in (done, out)]
    assert rows[0] == rows[1]


def test_a_checkpoint_that_holds_code_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    ckpt = tmp_path / "checkpoints" / "step-000002"
    ckpt.mkdir(parents=True)
    torch.save({"step": 2, "extra": Payload()}, ckpt / "state.pt")
    torch.save({"torch": torch.get_rng_state()}, ckpt / "rng-rank0.pt")
    checkpoint.check(ckpt)  # a well-formed archive ...
    with pytest.raises(checkpoint.Damaged, match="state.pt: UnpicklingError: Unsupported global: GLOBAL getattr"):
        checkpoint.load_file(ckpt / "state.pt")  # ... whose pickle is not run
    assert not marker.exists()
    assert checkpoint.load_file(ckpt / "rng-rank0.pt")["torch"].dtype == torch.uint8


def test_final_weights_have_the_permissions_of_the_files_beside_them(done):
    final = done / "grpo" / "seed0" / "final"
    mode = (final / "config.json").stat().st_mode & 0o777
    assert (final / "model.safetensors").stat().st_mode & 0o777 == mode  # not safetensors' own 0600


# -- read-only folders ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["compare --out in a read-only folder", "compare --overwrite", "compare --resume",
                                  "evaluate", "report"])
def test_a_read_only_folder_is_one_line_and_nothing_changes(done, tmp_path, case):
    out = copy(done, tmp_path / "out", unfinished=case == "compare --resume")
    run_dir = out / "grpo" / "seed0"
    if case == "compare --out in a read-only folder":
        locked, args = [out], [COMPARE, "--config", tmp_path / "c.yaml", "--methods", "grpo", "--out", out / "new"]
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(TINY))
        words = [f"'{out}' is read-only", "choose another --out"]
    elif case == "compare --overwrite":  # rmtree would delete what it could and stop at the read-only folder
        locked, args = [run_dir], [COMPARE, "--config", tmp_path / "c.yaml", "--methods", "grpo", "--out", out,
                                   "--overwrite"]
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(TINY))
        words = [f"'{run_dir}' is read-only", "choose another --out, or make it writable"]
    elif case == "compare --resume":
        locked, args = [run_dir / "metrics.jsonl"], [COMPARE, "--resume", out]
        words = [f"'{run_dir / 'metrics.jsonl'}' is read-only", "make it writable to continue the comparison"]
    elif case == "evaluate":
        locked, args = [run_dir], ["-m", "gcframe.evaluate", out, "--problems", "4"]
        words = [f"'{run_dir}' is read-only", f"the re-scoring writes {run_dir / 'rescored'}"]
    else:
        locked, args = [out / "report"], ["-m", "analysis.report", out]
        words = [f"'{out / 'report'}' is read-only", f"the report writes {out / 'report'}"]
    read_only(*locked)
    before = snapshot(out)
    try:
        r = run(tmp_path, *args, "--no-progress") if case != "report" else run(tmp_path, *args)
        one_line(r, *words)
        assert snapshot(out) == before
    finally:
        writable(out)


@pytest.mark.parametrize("command", ["compare", "atlas"])
def test_a_read_only_cache_is_refused_before_anything_is_written(tmp_path, command):
    """GCFRAME_CACHE read-only (runs claim and record their SFT base there): one line naming it, and --out is not
    made, so the same command runs once the cache is fixed (a half-made --out would be refused as existing)."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    cache.mkdir()
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(TINY))
    args = ([COMPARE, "--config", tmp_path / "c.yaml", "--methods", "grpo", "--no-progress"] if command == "compare"
            else [ROOT / "experiments" / "atlas.py", "--quick"])
    read_only(cache)
    try:
        r = run(tmp_path, *args, "--out", out, env={"GCFRAME_CACHE": str(cache)})
        one_line(r, f"'{cache}' is read-only", "set GCFRAME_CACHE to a folder you can write")
        assert not out.exists() and not any(cache.iterdir())
    finally:
        writable(cache)


def test_run_folders_of_different_tasks_are_refused_before_the_report_is_written(done, tmp_path):
    out = copy(done, tmp_path / "out")
    shutil.rmtree(out / "report")
    other = shutil.copytree(out / "grpo" / "seed0", out / "grpo" / "seed1")  # a run of 2-digit sums beside it
    cfg = yaml.safe_load((other / "config.yaml").read_text())
    cfg["seed"], cfg["task"]["digits"] = 1, 2
    (other / "config.yaml").write_text(yaml.safe_dump(cfg))
    before = snapshot(out)
    r = run(tmp_path, "-m", "analysis.report", out)
    one_line(r, f"{out / 'grpo' / 'seed0'} and {other} are runs of different tasks (task differs: task.digits 1 vs 2)",
             "report each task's runs from a folder of their own")
    assert snapshot(out) == before and not (out / "report").exists()
