"""Resumable checkpoints: everything the next training step depends on, written every `train.checkpoint_every` steps.

    RUN/checkpoints/step-000050/state.pt          (main process) policy, auxiliary models (PPO's critic), their
                                                  optimisers, the LR scheduler, π_ref when it is refreshed, the
                                                  method's own state (if it has `state_dict`), the data order
                                                  (Context._orders and its generator), the minibatch-shuffle
                                                  generator, step, gen_tokens, elapsed time, the last evaluation,
                                                  the sampler's weight snapshots (train.staleness)
    RUN/checkpoints/step-000050/rng-rank{r}.pt    (every process) torch, CUDA, python and numpy RNG states

With these restored, a resumed run on CPU logs exactly the metrics of an uninterrupted run (timing columns aside).

Trust: a checkpoint is read with `torch.load(weights_only=True)`, which builds tensors and plain values (numbers,
strings, lists, tuples, dicts) and, with `NUMPY_RNG` admitted, the numeric array of numpy's RNG state, and refuses
anything else, so a file in a run folder cannot run code when it is read. Before that every `.pt` file's zip CRC-32
checksums are checked: a file cut short, overwritten or not a checkpoint at all is damaged (`check`). `restore`
resumes from the newest checkpoint that passes, naming any newer damaged one; when none does, it refuses in one line
that names the checkpoint and the folder to delete (the run then starts over).

Crash safety: a checkpoint is written into `step-NNNNNN.tmp/` and renamed to `step-NNNNNN/` only when complete (a
rename is atomic), then older checkpoints are deleted. `latest` ignores `*.tmp`, so a crash at any moment leaves
the last complete checkpoint as the latest. Resuming truncates metrics.jsonl, samples.jsonl and problems.jsonl to the rows logged
up to the checkpoint's step, so no row is duplicated (a torn last line goes with them).

    RUN/checkpoints/step-000050/sharded/          (train.shard: fsdp2) the models, optimisers and a refreshed π_ref
                                                  as torch.distributed.checkpoint shards: every process writes its
                                                  own (`gcframe.sharding.save_checkpoint`); state.pt holds the rest

One process or DDP: full state dicts in state.pt. accelerate's own FSDP plugin or DeepSpeed: set checkpoint_every: 0.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import torch
from accelerate.utils import DistributedType

from gcframe.errors import UserError
from gcframe.tracking.log import damaged_row

SUBDIR = "checkpoints"
NUMPY_RNG = [np.ndarray.__reduce__(np.zeros(1, np.uint32))[0], np.ndarray, np.dtype, type(np.dtype(np.uint32))]
"""What torch.load(weights_only=True) must admit beyond tensors and plain values: a uint32 numpy array (numpy's
RNG state, `_rng_state`); arrays of Python objects stay refused."""


class Damaged(Exception):
    """A checkpoint file that cannot be read as one; the message says which file and why."""


def complete(run_dir: str | Path) -> list[Path]:
    """A run's complete checkpoint folders, oldest first (`*.tmp`: a write that never finished)."""
    root = Path(run_dir) / SUBDIR
    return sorted(p for p in root.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp")) if root.is_dir() else []


def latest(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder of a run, or None."""
    done = complete(run_dir)
    return done[-1] if done else None


def load_file(path: Path):
    """A checkpoint file's contents, read with weights_only=True (tensors, plain values and `NUMPY_RNG`: nothing
    in it runs code); Damaged naming the file when it is missing or cannot be read so."""
    try:
        with torch.serialization.safe_globals(NUMPY_RNG):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001: anything torch.load raises means the file is not a checkpoint we wrote
        raise Damaged(f"{path.name}: {_reason(e)}") from None


def _reason(e: Exception) -> str:
    """The line of torch.load's error that says what is wrong (not its advice on weights_only)."""
    boiler = ("Weights only load failed", "(1)", "(2)", "Please file an issue", "Check the documentation")
    lines = [ln.split("WeightsUnpickler error:")[-1].strip() for ln in str(e).splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(boiler)]
    return f"{type(e).__name__}: {lines[0].split('. ')[0][:120]}" if lines else type(e).__name__


def check(ckpt: Path) -> None:
    """Raise Damaged unless state.pt and rng-rank0.pt are there and every .pt file of `ckpt` is a zip archive whose
    members match their CRC-32 checksums (`zipfile.ZipFile.testzip`; torch.save writes a zip archive)."""
    if not (ckpt / "state.pt").is_file():
        raise Damaged("state.pt is missing")
    if not (ckpt / "rng-rank0.pt").is_file():  # every process writes its own; the first is always there
        raise Damaged("rng-rank0.pt is missing")
    for f in sorted(ckpt.glob("*.pt")):
        try:
            with zipfile.ZipFile(f) as z:
                bad = z.testzip()
        except (OSError, zipfile.BadZipFile, EOFError) as e:
            raise Damaged(f"{f.name}: not a complete checkpoint file ({e})") from None
        if bad is not None:
            raise Damaged(f"{f.name}: {bad} does not match its checksum")


def newest_good(run_dir: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """(the newest checkpoint that passes `check`, or None; the newer ones that do not, each with why)."""
    bad = []
    for ckpt in reversed(complete(run_dir)):
        try:
            check(ckpt)
            return ckpt, bad
        except Damaged as e:
            bad.append((ckpt, str(e)))
    return None, bad


def damaged_line(run_dir: str | Path, bad: list[tuple[Path, str]]) -> str:
    """The refusal when no checkpoint of a run can be read: the newest, why, and what to delete."""
    ckpt, why = bad[0]
    return (f"checkpoint {ckpt} is damaged ({why}) and the run keeps no earlier one: delete {ckpt} and resume "
            f"again to train {Path(run_dir).parent.name} seed {Path(run_dir).name[4:]} over from step 0")


def check_resumable(run_dir: str | Path) -> None:
    """UserError (`damaged_line`) when a run has checkpoints and none of them can be read; before a --resume
    writes anything."""
    ckpt, bad = newest_good(run_dir)
    if ckpt is None and bad:
        raise UserError(damaged_line(run_dir, bad))
    if ckpt is not None:
        truncate_logs(run_dir, int(ckpt.name.split("-")[-1]), dry_run=True)  # a damaged or cut log: refused here


def finished(run_dir: str | Path, steps: int, model: bool = True) -> dict | None:
    """The result of a finished run (`Trainer.fit`'s summary), or None. Finished: it logged its final evaluation
    and (`model`) its final model is on disk (RUN/final, which `final_model.save` renames into place when complete):
    a run whose final model could not be written (a full disk) is not finished, and --resume completes it.
    `model=False` for runs that keep no final model (experiments/sweep_5_2.py's cells)."""
    from gcframe.tracking.log import read_jsonl

    if model and not (Path(run_dir) / "final").is_dir():  # final_model.FINAL (that module imports this one)
        return None
    path = Path(run_dir) / "metrics.jsonl"
    rows = read_jsonl(path) if path.exists() else []
    final = [r for r in rows if "eval_accuracy" in r and r.get("step") == steps]
    if not final:
        return None
    r = final[-1]
    return {"final_accuracy": r["eval_accuracy"], "time_s": r["time_s"], "gen_tokens": r["gen_tokens"], "steps": steps}


def check_supported(trainer) -> None:
    """Checkpoints hold full state dicts or (train.shard: fsdp2) the project's own DCP shards; models sharded by
    accelerate's FSDP plugin or DeepSpeed are neither."""
    sharded = trainer.acc.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)
    if sharded and trainer.tcfg.checkpoint_every:
        raise UserError(f"train.checkpoint_every is {trainer.tcfg.checkpoint_every} but resumable checkpoints "
                        "support one process, DDP or train.shard: fsdp2 only: set train.checkpoint_every: 0 under "
                        "accelerate's FSDP plugin or DeepSpeed")


# -- save ------------------------------------------------------------------------------------------------------
def save(trainer, step: int, last_eval: dict) -> Path:
    """Write the checkpoint after `step` completed steps (every process must call it)."""
    acc = trainer.acc
    final = Path(trainer.logger.dir) / SUBDIR / f"step-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)  # left by a crash mid-write
        tmp.mkdir(parents=True)
    acc.wait_for_everyone()
    try:
        if trainer.sharded:  # collective: every process writes its shards
            from gcframe import sharding

            sharding.save_checkpoint(trainer, tmp / "sharded")
        _write(_rng_state(), tmp / f"rng-rank{acc.process_index}.pt")
        if acc.is_main_process:
            _write(_train_state(trainer, step, last_eval), tmp / "state.pt")
    except (OSError, RuntimeError) as e:  # torch.save wraps a failed write in a RuntimeError
        shutil.rmtree(tmp, ignore_errors=True)  # a half-written checkpoint is never kept
        raise UserError(write_failed_line(final, e)) from None
    acc.wait_for_everyone()
    if acc.is_main_process:
        os.replace(tmp, final)  # atomic: the new checkpoint appears complete or not at all
        for old in final.parent.glob("step-*"):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()
    return final


def write_failed_line(final: Path, e: BaseException) -> str:
    """Why checkpoint `final` could not be written, from the OS error behind torch's (a full disk, a file-size
    limit), and what to do; the caller adds what is kept and the --resume line."""
    import errno

    from gcframe.errors import disk_full, disk_full_line

    os_error = next((x for x in _chain(e) if isinstance(x, OSError) and x.errno), None)
    if os_error is not None and disk_full(os_error):
        return f"{disk_full_line(final, 'checkpoint ' + final.name)}"
    if os_error is not None and os_error.errno == errno.EFBIG:
        return (f"checkpoint {final} could not be written: a file is larger than this process may write (a file-size "
                "limit, ulimit -f): raise the limit (ulimit -f unlimited), or set train.checkpoint_every: 0")
    why = f"{os_error.strerror}" if os_error is not None else str(e).strip().splitlines()[0][:160]
    return f"checkpoint {final} could not be written ({why}): fix the folder, or set train.checkpoint_every: 0"


def _chain(e: BaseException):
    """e and the exceptions it was raised from or during, innermost last."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _write(obj, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())  # on disk before the rename makes it the latest


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _train_state(trainer, step: int, last_eval: dict) -> dict:
    acc, ctx = trainer.acc, trainer.ctx
    state = {
        "step": step, "world": acc.num_processes, "gen_tokens": trainer.gen_tokens, "elapsed": trainer.elapsed,
        "last_eval": last_eval, "scheduler": trainer.sched.state_dict(),
        "orders": ctx._orders, "data_rng": ctx.rng.get_state(), "minibatch_rng": trainer.mb_gen.get_state(),
    }
    if not trainer.sharded:  # (sharded: in sharded/, written by every process)
        state.update(policy=acc.get_state_dict(trainer.policy), optimizer=trainer.opt.state_dict(),
                     aux_models=[acc.get_state_dict(m) for m in trainer.aux_models],
                     aux_optimizers=[o.state_dict() for o in trainer.aux_opts])
    if trainer.tcfg.ref_refresh_every and "reference" in ctx._frozen and not trainer.sharded:
        state["reference"] = ctx.reference.state_dict()
    if hasattr(trainer.method, "state_dict"):
        state["method"] = trainer.method.state_dict()
    if getattr(ctx, "sampler", None) is not None:  # train.staleness: the ring of the sampler's weight snapshots
        state["sampler"] = ctx.sampler.state_dict()
    return state


# -- restore ---------------------------------------------------------------------------------------------------
def restore(trainer) -> tuple[int, dict | None]:
    """Load the latest checkpoint of the trainer's run folder into it -> (next step, last evaluation row).

    Without a checkpoint the run starts over: (0, None), and rows a killed run logged are dropped.
    """
    acc, ctx = trainer.acc, trainer.ctx
    run_dir = Path(trainer.logger.dir)
    ckpt, bad = newest_good(run_dir)
    if bad and ckpt is None:
        raise UserError(damaged_line(run_dir, bad))
    for old, why in bad:  # every process sees the same files: all take the same older checkpoint
        acc.print(f"warning: checkpoint {old} is damaged ({why}): {trainer.label} resumes from {ckpt} instead",
                  file=sys.stderr)
    if ckpt is None:
        if acc.is_main_process:
            truncate_logs(run_dir, None)
        acc.wait_for_everyone()
        return 0, None
    try:
        state = load_file(ckpt / "state.pt")
        rng = load_file(ckpt / f"rng-rank{acc.process_index}.pt")
    except Damaged as e:
        raise UserError(damaged_line(run_dir, [(ckpt, str(e))])) from None
    if state["world"] != acc.num_processes:
        raise UserError(f"checkpoint {ckpt} was written by {state['world']} processes: resume it with "
                        f"{state['world']} (got {acc.num_processes})")

    if trainer.sharded != (ckpt / "sharded").is_dir():
        raise UserError(f"checkpoint {ckpt} was written with train.shard: {'none' if trainer.sharded else 'fsdp2'}: "
                        "resume it with the same setting")
    if trainer.sharded:
        from gcframe import sharding

        sharding.load_checkpoint(trainer, ckpt / "sharded")
    else:
        acc.unwrap_model(trainer.policy).load_state_dict(state["policy"])
        trainer.opt.load_state_dict(state["optimizer"])
        for m, sd in zip(trainer.aux_models, state["aux_models"]):
            acc.unwrap_model(m).load_state_dict(sd)
        for o, sd in zip(trainer.aux_opts, state["aux_optimizers"]):
            o.load_state_dict(sd)
    trainer.sched.load_state_dict(state["scheduler"])
    if "reference" in state:
        ctx.reference.load_state_dict(state["reference"])
    if "method" in state:
        trainer.method.load_state_dict(state["method"])
    if "sampler" in state and getattr(ctx, "sampler", None) is not None:
        ctx.sampler.load_state_dict(state["sampler"])
    ctx._orders = state["orders"]
    ctx.rng.set_state(state["data_rng"])
    trainer.mb_gen.set_state(state["minibatch_rng"])
    trainer.gen_tokens, trainer.elapsed = state["gen_tokens"], state["elapsed"]
    torch.set_rng_state(rng["torch"])  # last: nothing above may draw from the restored streams
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])

    if acc.is_main_process:
        truncate_logs(run_dir, state["step"])
    acc.wait_for_everyone()
    return state["step"], state["last_eval"]


def truncate_logs(run_dir: str | Path, step: int | None, dry_run: bool = False) -> None:
    """Cut metrics.jsonl, samples.jsonl and problems.jsonl back to what was logged when `step` steps had completed
    (None: empty).

    metrics.jsonl keeps training rows of steps < `step` and evaluation rows of steps <= `step`; samples.jsonl
    keeps rows of steps < `step`; problems.jsonl (per-problem outcomes of evaluations) rows of steps <= `step`.
    Rows are in step order, so the kept rows are a prefix; the file is cut in place (the run logger's append-mode
    handle stays valid) at the first row to drop, or at a torn last line (a crash mid-write).

    Nothing is dropped silently: a line that is not a JSON row with a step, followed by more lines (the file was
    damaged after it was written: cutting there would delete every row after it), and metrics.jsonl without a
    training row of each of the `step` steps (rows were deleted: the resumed run's log would have a gap), are
    refused in one line (UserError) naming the file and line, before anything is cut. `dry_run`: check only (a
    --resume checks every run before it writes anything, `check_resumable`).
    """
    run_dir = Path(run_dir)

    def metrics_row(row: dict) -> bool:
        return (step is not None and row["step"] <= step) if "eval_accuracy" in row else samples_row(row)

    def samples_row(row: dict) -> bool:
        return step is not None and row["step"] < step

    cuts = [(run_dir / "metrics.jsonl", metrics_row), (run_dir / "samples.jsonl", samples_row),
            (run_dir / "problems.jsonl", lambda row: step is not None and row["step"] <= step)]  # evaluations
    offsets = [(path, _cut_offset(path, keep)) for path, keep in cuts if path.exists()]
    metrics = run_dir / "metrics.jsonl"
    if step and metrics.exists():
        with open(metrics, "rb") as f:
            trained = [json.loads(line)["step"] for line in f.read(dict(offsets)[metrics]).splitlines()
                       if b'"eval_accuracy"' not in line]
        if trained != list(range(step)):
            missing = sorted(set(range(step)) - set(trained))
            what = (f"has no training row of step{'s' if len(missing) > 1 else ''} "
                    f"{_steps(missing)}" if missing else f"holds its training rows out of order ({_steps(trained)})")
            raise UserError(f"'{metrics}' {what} although the run's checkpoint is of step {step}: rows were deleted "
                            f"or moved, and the resumed run's log would not be whole; restore the file, or delete "
                            f"{run_dir / SUBDIR} to train the run over from step 0")
    if not dry_run:
        for path, offset in offsets:
            os.truncate(path, offset)


def _steps(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:5])) + (f", ... ({len(steps)} in all)" if len(steps) > 5 else "")


def _cut_offset(path: Path, keep) -> int:
    """Where to cut `path`: the byte offset of its first row `keep` refuses, or of a torn last line. UserError at a
    damaged line with lines after it."""
    offset = 0
    with open(path, "rb") as f:
        lines = f.readlines()
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
            ok = keep(row)
        except (ValueError, TypeError, KeyError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            if any(rest.strip() for rest in lines[i + 1:]):
                raise UserError(damaged_row(path, i + 1, line)) from None
            break  # a torn last line: a crash mid-write
        if not ok or not line.endswith(b"\n"):
            break
        offset += len(line)
    return offset
