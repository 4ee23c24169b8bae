"""Resume after a crash: a run killed with SIGKILL after a checkpoint and resumed with `compare.py --resume` logs
exactly the metrics of an uninterrupted run (timing columns aside); checkpoints and logs survive torn writes."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torch
import yaml

from gcframe.tracking import checkpoint
from gcframe.tracking.log import read_jsonl
from gcframe import forkserver
from gcframe.errors import resume_command  # the command as the messages print it (paths quoted)

ROOT = Path(__file__).resolve().parents[1]
COMPARE = ROOT / "experiments" / "compare.py"
TIMING = ("time", "peak_")  # time_s, time_collect, ..., peak_rss_mb: the columns a resume may change

# A config small enough for a test: one-digit sums, a 1-layer hidden-32 Llama, a short SFT base (cached).
TINY_CONFIG = {
    "task": {"digits": 1, "n_demos": 64, "n_heldout": 16},
    "model": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "max_positions": 32},
    "sft_base": {"steps": 60, "batch_size": 32, "lr": 0.01, "warmup_steps": 5},
    "train": {"steps": 4, "prompts_per_step": 2, "group_size": 4, "lr": 0.001, "eval_every": 2, "eval_size": 16,
              "eval_k": 2, "sample_every": 1, "log_samples": 2, "checkpoint_every": 2},
}


def write_config(path: Path, config: dict = TINY_CONFIG) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def cli_env() -> dict:
    # one thread per process: the CPU test machine is shared, and oversubscribed threads make steps 100x slower
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


SAFETY_S = 3600
"""A command's time limit in these tests: a safety net against a hung process, never what a test checks. On a
machine under load a command takes many times its idle time (a 20 s run took over 300 s at load 10)."""


def run_cli(*args: str, script: Path = COMPARE, timeout: float = SAFETY_S) -> subprocess.CompletedProcess:
    """`script` (compare.py) with `args` in a process of its own (one thread, cwd the repository), forked from one
    that has the libraries imported (gcframe/forkserver.py: the same run, ~4 s of one core less); `timeout` is raised to
    SAFETY_S where a caller gives less: no test here is about how long a command takes."""
    return forkserver.run([sys.executable, str(script), *map(str, args)], env=cli_env(), cwd=ROOT,
                          timeout=max(timeout, SAFETY_S))


# Runs compare.py, but seed 1's run hangs at step 3 (after the checkpoint of step 2) until the test kills it.
HANG = """
import runpy, sys, time
from gcframe.trainer import Trainer
_train_step = Trainer.train_step
def train_step(self, step):
    if self.cfg.seed == 1 and step == 3:
        print("hanging", flush=True)
        time.sleep(600)
    return _train_step(self, step)
Trainer.train_step = train_step
sys.argv[0] = {compare!r}
runpy.run_path({compare!r}, run_name="__main__")
"""


def until_printed(proc: subprocess.Popen, word: str, times: int, err: Path, timeout: float = SAFETY_S) -> None:
    """Read `proc`'s stdout (a binary pipe) until `word` has been printed `times` times, or fail the test with the
    tail of its stderr (written to `err`) when it ends first or `timeout` seconds pass. Two ranks print at once, and
    their text and newlines can interleave ("hanginghanging"): the word is counted, not whole lines."""
    fd, seen, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout
    while seen.count(word.encode()) < times:
        left = deadline - time.monotonic()
        chunk = os.read(fd, 4096) if left > 0 and select.select([fd], [], [], left)[0] else None
        if not chunk:  # end of output (the run ended) or the time is up
            why = "ended" if chunk == b"" else f"was still running after {timeout:.0f} s"
            pytest.fail(f"the run {why} before printing {word!r} {times} time(s); stdout: {seen.decode()[-1000:]!r}; "
                        f"stderr: {err.read_text()[-3000:] if err.exists() else ''}")
        seen += chunk


def gone(key: str, value: str, timeout: float = 60) -> bool:
    """Whether every process marked key=value has exited within `timeout` s. A process killed with SIGKILL keeps its
    environment readable until the kernel has torn it down, which takes a while on a busy machine."""
    deadline = time.monotonic() + timeout
    while marked(key, value):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def marked(key: str, value: str) -> list[int]:
    """Pids of the processes whose environment holds key=value (/proc/<pid>/environ; Linux), this one aside."""
    needle = f"{key}={value}".encode()
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if needle in (d / "environ").read_bytes().split(b"\0"):
                    pids.append(int(d.name))
            except OSError:  # gone, or not ours
                pass
    return pids


def kill_marked(key: str, value: str) -> None:
    """SIGKILL every process started with key=value in its environment: torchrun's workers too, which run in
    sessions of their own, out of reach of a kill of the launcher's process group."""
    for pid in marked(key, value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def rows_without_timing(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in read_jsonl(path)]


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    cfg = write_config(tmp_path / "tiny.yaml")
    args = ["--config", cfg, "--methods", "grpo", "--seeds", "0,1", "--no-progress"]
    full = run_cli(*args, "--out", tmp_path / "full")  # also trains (or finds) the cached SFT base
    assert full.returncode == 0, full.stderr

    hang = tmp_path / "hang.py"
    hang.write_text(HANG.format(compare=str(COMPARE)))
    killed, err = tmp_path / "killed", tmp_path / "hang.err"
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, str(hang), *map(str, args), "--out", str(killed)],
                                stdout=subprocess.PIPE, stderr=stderr, env=cli_env(), cwd=ROOT)
    try:
        until_printed(proc, "hanging", 1, err)  # written after step 2's rows: nothing is mid-write
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    run1 = killed / "grpo" / "seed1"
    assert checkpoint.latest(run1).name == "step-000002"
    assert max(r["step"] for r in read_jsonl(run1 / "metrics.jsonl")) == 2  # step 2's row: after the checkpoint
    with open(run1 / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "loss": 0.1')  # a torn last line, as a crash mid-write leaves it
    seed0_before = (killed / "grpo" / "seed0" / "metrics.jsonl").read_bytes()

    resumed = run_cli("--resume", killed, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert (killed / "grpo" / "seed0" / "metrics.jsonl").read_bytes() == seed0_before  # finished: skipped
    for seed in (0, 1):
        run, ref = killed / "grpo" / f"seed{seed}", tmp_path / "full" / "grpo" / f"seed{seed}"
        assert rows_without_timing(run / "metrics.jsonl") == rows_without_timing(ref / "metrics.jsonl")
        assert read_jsonl(run / "samples.jsonl") == read_jsonl(ref / "samples.jsonl")
    assert (killed / "summary.csv").read_text().count("\n") == 3  # header + two runs
    from safetensors.torch import load_file  # the resumed run's final model is the uninterrupted run's, bit for bit

    resumed_w = load_file(killed / "grpo" / "seed1" / "final" / "model.safetensors")
    full_w = load_file(tmp_path / "full" / "grpo" / "seed1" / "final" / "model.safetensors")
    assert resumed_w.keys() == full_w.keys() and all(torch.equal(resumed_w[k], full_w[k]) for k in full_w)
    assert not (killed / "grpo" / "seed1" / "checkpoints").exists()  # finished: pruned


# Runs compare.py, but grpo's run hangs at step 3 (after the checkpoint of step 2), holding a temporary folder in the
# cache as a base being written would, until the test stops it with SIGTERM.
HANG_WRITING = """
import os, runpy, sys, time
from gcframe.tracking.log import cache_root
from gcframe.trainer import Trainer
_train_step = Trainer.train_step
def train_step(self, step):
    if step == 3 and self.method.name == "grpo":  # not stage 1's (sft) step 3
        os.makedirs(cache_root() / "sft_base" / f"being-written.tmp{{os.getpid()}}")
        print("hanging", flush=True)
        time.sleep(600)
    return _train_step(self, step)
Trainer.train_step = train_step
sys.argv[0] = {compare!r}
runpy.run_path({compare!r}, run_name="__main__")
"""


def test_sigterm_says_what_it_kept_and_leaves_no_claim_or_temporary(tmp_path):
    """issue 62: SIGTERM (from `timeout`) printed nothing and left dpo/seed0.claim in the run folder and *.claim and
    *.tmp<pid> folders in the cache. Now: one line like Ctrl-C's, exit 143, its claims and temporaries gone, and
    --resume finishes the run."""
    cfg = write_config(tmp_path / "tiny.yaml")
    hang, out, err = tmp_path / "hang.py", tmp_path / "out", tmp_path / "hang.err"
    hang.write_text(HANG_WRITING.format(compare=str(COMPARE)))
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, str(hang), "--config", str(cfg), "--methods", "grpo", "--seeds", "0",
                                 "--no-progress", "--out", str(out)], stdout=subprocess.PIPE, stderr=stderr,
                                env=cli_env(), cwd=ROOT)
    try:
        until_printed(proc, "hanging", 1, err)
        assert list(out.glob("*/*.claim")) and list(Path(os.environ["GCFRAME_CACHE"]).glob(f"*/*.tmp{proc.pid}"))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    line = err.read_text().strip()
    assert line.count("\n") == 0 and "Traceback" not in line, line
    assert line.startswith("terminated (SIGTERM): grpo seed 0 stopped after 3 of 4 steps; kept: the finished runs, "
                           "its last checkpoint") and f"continue with: {resume_command(out)}" in line
    assert list(out.rglob("*.claim")) == [] and list(Path(os.environ["GCFRAME_CACHE"]).rglob(f"*.tmp{proc.pid}")) == []
    resumed = run_cli("--resume", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert checkpoint.finished(out / "grpo" / "seed0", 4) is not None


def test_clean_up_takes_only_this_process_s_claims_and_temporaries(tmp_path):
    from gcframe.tracking import claims

    mine, theirs = tmp_path / "a" / f"x.tmp{os.getpid()}", tmp_path / "a" / "x.tmp1"
    deep = tmp_path / "r" / "grpo" / "seed0" / f"final.tmp{os.getpid()}"
    for d in (mine, theirs, deep):
        d.mkdir(parents=True)
    (tmp_path / f"config.yaml.tmp{os.getpid()}").write_text("half")
    claim, other = tmp_path / "r" / "grpo" / "seed0.claim", tmp_path / "r" / "rft" / "seed0.claim"
    assert claims.acquire(claim)
    other.parent.mkdir(parents=True)
    other.write_text("elsewhere:1")  # another host's: never taken
    gone = claims.clean_up([tmp_path])
    assert sorted(p.name for p in gone) == sorted([mine.name, deep.name, f"config.yaml.tmp{os.getpid()}"])
    assert theirs.is_dir() and not mine.exists() and not deep.exists() and not claim.exists() and other.exists()


def test_resume_refuses_other_flags_and_non_runs(tmp_path):
    r = run_cli("--resume", tmp_path, "--quick")
    assert r.returncode == 2 and "drop --quick" in r.stderr
    r = run_cli("--resume", tmp_path)
    assert r.returncode == 2 and "not a compare.py output folder" in r.stderr


def test_latest_ignores_a_checkpoint_torn_mid_write(tmp_path):
    for name in ("step-000002", "step-000004.tmp"):  # a crash while step 4 was written
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert checkpoint.latest(tmp_path).name == "step-000002"
    assert checkpoint.latest(tmp_path / "elsewhere") is None


def test_truncate_logs_keeps_rows_up_to_the_checkpoint(tmp_path):
    rows = [{"step": 0, "eval_accuracy": 0.1}, {"step": 0}, {"step": 1}, {"step": 2, "eval_accuracy": 0.2},
            {"step": 2}, {"step": 3}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "lo')
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(4)))
    checkpoint.truncate_logs(tmp_path, 2)  # 2 steps done: train rows 0, 1 and eval rows 0, 2 were logged by then
    assert read_jsonl(tmp_path / "metrics.jsonl") == rows[:4]
    assert read_jsonl(tmp_path / "samples.jsonl") == [{"step": 0}, {"step": 1}]
    checkpoint.truncate_logs(tmp_path, None)
    assert (tmp_path / "metrics.jsonl").read_text() == ""


def test_a_damaged_line_in_the_middle_of_a_log_is_refused_never_cut(tmp_path):
    """A line of garbage after row 2 of metrics.jsonl (the issue: a resume then kept rows 0-1 and dropped every row
    after the bad line without a word): --resume's check and the cut itself refuse in one line naming the file and
    the line, and nothing is cut; a reader refuses it too, naming the file (a JSONDecodeError traceback before)."""
    from gcframe.errors import UserError

    rows = [{"step": 0, "eval_accuracy": 0.1}, {"step": 0}, {"step": 1}, {"step": 2, "eval_accuracy": 0.2},
            {"step": 2}, {"step": 3}, {"step": 4, "eval_accuracy": 0.3}]
    lines = [json.dumps(r) + "\n" for r in rows]
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(lines[:2]) + "garbage{\n" + "".join(lines[2:]))
    before = metrics.read_bytes()
    ckpt = tmp_path / "checkpoints" / "step-000004"
    ckpt.mkdir(parents=True)
    torch.save({}, ckpt / "state.pt")  # a readable checkpoint of step 4
    torch.save({}, ckpt / "rng-rank0.pt")
    for check in (lambda: checkpoint.check_resumable(tmp_path), lambda: checkpoint.truncate_logs(tmp_path, 4),
                  lambda: read_jsonl(metrics)):
        with pytest.raises(UserError, match=rf"'{metrics}' line 3 is not a JSON row \('garbage{{'\) and more rows "
                                            r"follow it: .*delete that one line \(the rows after it are kept\)"):
            check()
        assert metrics.read_bytes() == before
    metrics.write_text("".join(lines[:2]) + "[1, 2]\n" + "".join(lines[2:]))  # JSON, but no row
    with pytest.raises(UserError, match="line 3 is not a JSON row"):
        checkpoint.truncate_logs(tmp_path, 4)
    metrics.write_text("".join(lines) + '{"step": 4, "lo')  # a torn last line stays a crash's: cut, no refusal
    checkpoint.check_resumable(tmp_path)
    assert read_jsonl(metrics) == rows


def test_a_log_missing_the_rows_of_its_checkpoint_is_refused(tmp_path):
    """A metrics.jsonl without the training rows of steps the checkpoint has done (rows deleted): a resume would
    log from the checkpoint on, leaving a gap; refused, naming the missing steps and the fix, and nothing cut."""
    from gcframe.errors import UserError

    rows = [{"step": 0, "eval_accuracy": 0.1}, {"step": 0}, {"step": 3}, {"step": 4, "eval_accuracy": 0.3}]
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = metrics.read_bytes()
    with pytest.raises(UserError, match=r"has no training rows? of steps 1, 2 although the run's checkpoint is of "
                                        r"step 4: .*delete .*checkpoints to train the run over from step 0"):
        checkpoint.truncate_logs(tmp_path, 4)
    assert metrics.read_bytes() == before
    checkpoint.truncate_logs(tmp_path, 1)  # the rows of a checkpoint of step 1 are whole
    assert read_jsonl(metrics) == rows[:2]


# checkpoint.save under a file-size limit (`ulimit -f`), with a stand-in trainer whose state is 400 kB of tensors
WRITE_LIMITED = """
import resource, sys
from types import SimpleNamespace
import torch
from gcframe.errors import UserError
from gcframe.tracking import checkpoint
resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, resource.RLIM_INFINITY))
acc = SimpleNamespace(is_main_process=True, process_index=0, wait_for_everyone=lambda: None)
trainer = SimpleNamespace(acc=acc, logger=SimpleNamespace(dir=sys.argv[1]), sharded=False)
checkpoint._train_state = lambda trainer, step, last_eval: {"policy": torch.zeros(100_000)}
try:
    checkpoint.save(trainer, 2, {})
except UserError as e:
    print(e)
"""


def test_a_checkpoint_the_file_size_limit_stops_is_one_line_and_leaves_no_half_written_folder(tmp_path):
    """issue 62: `ulimit -f 100` during a checkpoint save gave a 45-line traceback and exit 1: now one UserError line
    (compare.py adds what is kept and the --resume line), and no step-000002.tmp left."""
    (tmp_path / "limited.py").write_text(WRITE_LIMITED)
    r = forkserver.run([sys.executable, str(tmp_path / "limited.py"), str(tmp_path / "run")], capture_output=True,
                       text=True, env=cli_env(), cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.strip() == (f"checkpoint {tmp_path / 'run' / 'checkpoints' / 'step-000002'} could not be written: a "
                                "file is larger than this process may write (a file-size limit, ulimit -f): raise the "
                                "limit (ulimit -f unlimited), or set train.checkpoint_every: 0")
    assert list((tmp_path / "run" / "checkpoints").iterdir()) == []


def test_finished_reads_the_final_evaluation_row(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 4, "eval_accuracy": 0.5, "time_s": 1.0,
                                                        "gen_tokens": 9}) + "\n")
    assert checkpoint.finished(tmp_path, 4) is None  # the last row alone: no final model yet
    assert checkpoint.finished(tmp_path, 4, model=False) is not None
    (tmp_path / "final").mkdir()
    assert checkpoint.finished(tmp_path, 4) == {"final_accuracy": 0.5, "time_s": 1.0, "gen_tokens": 9, "steps": 4}
    assert checkpoint.finished(tmp_path, 8) is None


# Runs compare.py on a disk that fills up as the final model is written: safetensors fails as it does on a full tmpfs
# (`mount -t tmpfs -o size=400k`: SafetensorError, which is no OSError, with the OS error in its text).
DISK_FULL = """
import runpy, sys
import transformers.modeling_utils as mu
from safetensors import SafetensorError
save = mu.safe_save_file
def full(tensors, filename, **k):
    if "/final.tmp" in str(filename):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    return save(tensors, filename, **k)
mu.safe_save_file = full
sys.argv[0] = {compare!r}
runpy.run_path({compare!r}, run_name="__main__")
"""


def test_a_full_disk_at_the_final_model_is_one_line_and_resume_finishes_the_run(tmp_path):
    """The final model cannot be written: one line naming the disk, exit 2, no final.tmp<pid> left; the run is not
    finished though metrics.jsonl has its last row, and --resume trains it again from its checkpoint and writes it."""
    cfg = write_config(tmp_path / "tiny.yaml")
    full, out = tmp_path / "full.py", tmp_path / "out"
    full.write_text(DISK_FULL.format(compare=str(COMPARE)))
    failed = run_cli("--config", cfg, "--methods", "sft", "--seeds", "0", "--no-progress", "--out", out, script=full)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr, \
        failed.stderr
    assert "error: the disk at / is full (" in failed.stderr and "while the final model was written to" in \
        failed.stderr and f"continue with: {resume_command(out)}" in failed.stderr
    run = out / "sft" / "seed0"
    assert sorted(p.name for p in run.glob("final*")) == []  # neither final/ nor final.tmp<pid>
    assert checkpoint.finished(run, 4, model=False) is not None  # its last evaluation row was logged ...
    assert checkpoint.finished(run, 4) is None  # ... yet it is not finished
    assert checkpoint.latest(run).name == "step-000002"  # kept for the resume
    logged = rows_without_timing(run / "metrics.jsonl")

    resumed = run_cli("--resume", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert (run / "final" / "model.safetensors").is_file() and not (run / "checkpoints").exists()
    assert rows_without_timing(run / "metrics.jsonl") == logged  # steps 2-3 trained again, the same rows
    assert (out / "summary.csv").read_text().count("\n") == 2  # header + the run


def torchrun(script: Path, *args: str) -> list[str]:
    """The command line of `script` under 2 CPU processes (torchrun, gloo)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
            *map(str, args)]


@pytest.mark.slow  # many processes: `pytest -m slow` (pyproject.toml)
def test_fsdp_sigkill_then_resume_equals_uninterrupted(tmp_path):
    """The same under train.shard: fsdp2 with 2 processes: sharded checkpoints (torch.distributed.checkpoint, one
    file per process) of PPO's policy, critic and optimisers; kill -9 of the whole process group after one."""
    config = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "shard": "fsdp2"}}
    cfg = write_config(tmp_path / "tiny.yaml", config)
    args = ["--config", cfg, "--methods", "ppo", "--seeds", "1", "--no-progress"]
    full = subprocess.run(torchrun(COMPARE, *args, "--out", tmp_path / "full"), capture_output=True, text=True,
                          env=cli_env(), cwd=ROOT, timeout=SAFETY_S)
    assert full.returncode == 0, full.stderr[-3000:]
    assert "returned a view tensor" not in full.stderr  # FSDP2's warning that PPO's critic might skip its all-gather
    import json

    import yaml  # the launch's process count is recorded with its config and its environment
    assert yaml.safe_load((tmp_path / "full" / "config.yaml").read_text())["processes"] == 2
    assert json.loads((tmp_path / "full" / "env.json").read_text())["processes"] == 2

    hang = tmp_path / "hang.py"
    hang.write_text(HANG.format(compare=str(COMPARE)))
    killed, err = tmp_path / "killed", tmp_path / "hang.err"
    mark = f"fsdp-hang-{os.getpid()}-{id(tmp_path)}"  # every process of this launch carries it, workers included
    with open(err, "w") as stderr:
        proc = subprocess.Popen(torchrun(hang, *args, "--out", killed), stdout=subprocess.PIPE, stderr=stderr,
                                env={**cli_env(), "GCFRAME_TEST_RUN": mark}, cwd=ROOT, start_new_session=True)
    try:
        # both ranks: rank 1 reaches step 3 while rank 0 may still be writing step 2's rows (only the main process
        # logs); once both hang, nothing is mid-write and the kill below finds the same state every time
        until_printed(proc, "hanging", 2, err)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher: kill -9, no clean-up
        kill_marked("GCFRAME_TEST_RUN", mark)  # and both workers, wherever torchrun put them
        proc.wait(30)
        proc.stdout.close()
    assert gone("GCFRAME_TEST_RUN", mark), "a worker of the killed launch is still alive 60 s after SIGKILL"
    run, ref = killed / "ppo" / "seed1", tmp_path / "full" / "ppo" / "seed1"
    ckpt = checkpoint.latest(run)
    assert ckpt.name == "step-000002"
    shards = sorted(p.name for p in (ckpt / "sharded").glob("*.distcp"))
    state = torch.load(ckpt / "state.pt", weights_only=False)
    assert len(shards) == 2 and not state.keys() & {"policy", "optimizer"}  # one file per process, nothing gathered

    resumed = subprocess.run(torchrun(COMPARE, "--resume", killed, "--no-progress"), capture_output=True, text=True,
                             env=cli_env(), cwd=ROOT, timeout=SAFETY_S)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert rows_without_timing(run / "metrics.jsonl") == rows_without_timing(ref / "metrics.jsonl")
    assert read_jsonl(run / "samples.jsonl") == read_jsonl(ref / "samples.jsonl")
    # the final policy, gathered from the shards into one Hugging Face folder, is the uninterrupted run's
    from gcframe.modeling import load_model_and_tokenizer

    (resumed_model, _), (full_model, _) = (load_model_and_tokenizer(str(d / "final")) for d in (run, ref))
    for (name, a), (_, b) in zip(resumed_model.state_dict().items(), full_model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


# Runs compare.py, but its first run waits until the second process (--workers 2) is up: on an idle machine the first
# would otherwise train both 4-step runs before the second has imported torch (the second then has nothing to do).
AFTER_WORKER = """
import runpy, sys, time
from pathlib import Path
from gcframe.trainer import Trainer
_fit = Trainer.fit
log = Path(sys.argv[sys.argv.index("--out") + 1]) / "worker2.log"
def fit(self, *a, **k):
    t0 = time.monotonic()
    while "threads:" not in (log.read_text() if log.is_file() else "") and time.monotonic() - t0 < 600:
        time.sleep(0.2)
    return _fit(self, *a, **k)
Trainer.fit = fit
sys.argv[0] = {compare!r}
runpy.run_path({compare!r}, run_name="__main__")
"""


def test_two_workers_split_the_runs_and_the_first_writes_the_report(tmp_path):
    """--workers 2: a second process (compare.py --resume OUT --cells-only) takes the runs the first has not claimed;
    every run is trained once, the first process writes the summary, the scores and the report, and both record one
    thread (the same environment, so analysis.results accepts the folder). The first process's first run waits for
    the second to start (AFTER_WORKER), so that the second always has a run to take."""
    out, wrapper = tmp_path / "w", tmp_path / "after_worker.py"
    wrapper.write_text(AFTER_WORKER.format(compare=str(COMPARE)))
    r = run_cli("--config", write_config(tmp_path / "tiny.yaml"), "--methods", "sft,grpo", "--workers", "2",
                "--out", out, script=wrapper)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 processes train the runs side by side" in r.stdout
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("method,") and [x.split(",")[0] for x in rows[1:]] == ["sft", "grpo"]
    log = (out / "worker2.log").read_text()
    assert "threads: 1 of" in log and "seed 0: test accuracy" in log  # the worker ran and saw runs finish
    for m in ("sft", "grpo"):  # each run trained once: one training row per step, none twice
        steps = [row["step"] for row in read_jsonl(out / m / "seed0" / "metrics.jsonl") if "loss" in row]
        assert steps == list(range(4)), (m, steps)
    assert "report" not in log and "still running" not in r.stdout + log and (out / "report" / "summary.md").is_file()
    envs = [json.loads((out / f).read_text()) for f in ("env.json", "env.resume.json")]
    assert [e["threads"] for e in envs] == [1, 1]


def test_workers_by_default_only_where_a_second_process_helps(monkeypatch, tmp_path):
    """plan_workers: 2 for the tiny model on an idle 2-core CPU; 1 when the threads are fixed (--threads,
    OMP_NUM_THREADS), for a pretrained model, for one run, or when the machine is busy; --workers N as given, at
    most one per run, and at least 1."""
    from types import SimpleNamespace

    from experiments import compare
    from gcframe.errors import UserError
    from gcframe.tracking import threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(threads, "cores_available", lambda: 2)
    unset = {"workers": None, "cells_only": False, "threads": None, "resume": None}
    args = lambda **kw: SimpleNamespace(**{**unset, **kw})  # noqa: E731
    tiny, real = SimpleNamespace(model=SimpleNamespace(path=None)), SimpleNamespace(model=SimpleNamespace(path="x"))
    monkeypatch.setattr(threads, "other_load", lambda: 0.1)
    assert compare.plan_workers(args(), tiny, 9) == 2
    assert compare.plan_workers(args(threads=2), tiny, 9) == 1 and compare.plan_workers(args(), real, 9) == 1
    assert compare.plan_workers(args(), tiny, 1) == 1 and compare.plan_workers(args(cells_only=True), tiny, 9) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert compare.plan_workers(args(), tiny, 9) == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads, "other_load", lambda: 1.2)  # 2 − 1.2 = 0.8 cores free: one process
    assert compare.plan_workers(args(), tiny, 9) == 1
    assert compare.plan_workers(args(workers=3), tiny, 9) == 3 and compare.plan_workers(args(workers=3), tiny, 2) == 2
    with pytest.raises(UserError, match="--workers 0: give at least 1"):
        compare.plan_workers(args(workers=0), tiny, 9)
    monkeypatch.setattr(threads, "other_load", lambda: 0.1)
    for started, expected in ((2, 1), (1, 2)):  # a resumed folder keeps its threads: one started at 2 stays one process
        (tmp_path / "env.json").write_text(json.dumps({"threads": started}))
        assert compare.plan_workers(args(resume=str(tmp_path)), tiny, 9) == expected
