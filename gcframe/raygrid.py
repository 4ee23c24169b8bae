"""A grid as Ray tasks (`--backend ray`): each unit of the grid is one Ray task that declares its resources
(num_cpus = its threads, num_gpus = 1 on a GPU) and runs that unit alone in a process of its own, with the code the
local path runs on the same folder, so a unit's results are the local path's. Each Ray worker forks its units from a
server that has imported torch and the project once (gcframe.forkserver), so a unit skips a fresh interpreter's ~6 s
of imports (it still sets its own run up: results/ray_overhead):

- compare.py: an SFT base, a tuning trial at one seed, a run (method x seed): `compare.py --resume OUT --cells-only
  --unit UNIT`, the code `--workers` runs (the driver's `task_of` makes each unit's Task: experiments/compare_grid.py).
  The driver (the compare.py the user started) writes OUT/config.yaml, submits each phase's units (the bases, then the
  tuning trials, then the runs), prints the grid's progress, and writes the summary, the scores and the report as the
  local path does;
- gcframe.evaluate: a model's re-scoring (`--unit RUN:MODEL`);
- experiments/sweep_5_2.py: a cell (level x method x seed); experiments/slip_sweep.py and reproduce.py pass the
  backend to the compare.py and gcframe.evaluate commands they run.

A unit that dies (its process killed, its node lost) is retried (`max_retries`) and resumes from its run's last
checkpoint in OUT; a unit that stops on bad input (exit status 2, a one-line error) is not retried, and its line
is reported once. Every node must see OUT (and the cache, GCFRAME_CACHE) at the same path: a shared filesystem.

Ray is an optional dependency (`pip install ".[ray]"`), imported only when a grid runs on it. This module runs
commands; what they are (a script, its claims, the modules its fork server imports first) is the driver's.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gcframe.errors import UserError

INSTALL = 'pip install ".[ray]"'
ROOT = Path(__file__).resolve().parents[1]  # the checkout: every node has it at the same path
MAX_RETRIES = 3  # a unit whose process or node dies runs again this many times, from its last checkpoint
ENV_PASSED = ("GCFRAME_CACHE", "HF_HOME", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
              "OMP_NUM_THREADS")


def add_flags(p, units: str, unit: bool = True) -> None:
    """--backend, --address and (unit: a command that runs its own units) the hidden --unit of a command whose grid
    can run as Ray tasks."""
    import argparse

    p.add_argument("--backend", choices=("local", "ray"), default="local", help=f"local (default): processes on this "
                   f"machine; ray: every unit ({units}) is a Ray task, on a local Ray or on --address "
                   f"({INSTALL}; docs/guides/grid-on-ray.md)")
    p.add_argument("--address", metavar="ADDR", help="with --backend ray: join this Ray cluster (auto, or "
                   "ray://host:port; default: start a local Ray on this machine)")
    if unit:
        p.add_argument("--unit", help=argparse.SUPPRESS)  # a Ray task: this one unit of the grid only


def check_flags(args) -> bool:
    """Whether this process drives a Ray grid: Ray is importable (else one line with the install command) and
    --address comes with --backend ray; before anything is written."""
    if getattr(args, "address", None) and args.backend != "ray":
        raise UserError("--address joins a Ray cluster: give it with --backend ray")
    if args.backend != "ray" or getattr(args, "unit", None):
        return False
    import_ray()
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        raise UserError("--backend ray runs each unit in a process of its own: launch it once, without accelerate "
                        "launch / torchrun")
    if getattr(args, "address", None):
        check_reachable(args.address)
    return True


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """A HOST:PORT or ray://HOST:PORT address answers a TCP connection within `timeout` seconds, else one line
    (ray.init would retry for minutes). `auto` is left to Ray, which fails at once when no cluster runs here."""
    where = address.removeprefix("ray://")
    if address == "auto" or ":" not in where:
        return
    host, _, port = where.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return
    except ValueError:
        raise UserError(f"--address {address}: give auto, HOST:PORT or ray://HOST:PORT") from None
    except OSError as e:
        raise UserError(f"--address {address}: no Ray cluster answers there ({e.strerror or e}); start one "
                        "(ray start --head) or give the address `ray status` prints on its head node") from None


def import_ray():
    """ray, or a UserError naming the install command (before anything is written)."""
    try:
        import ray
    except ImportError:
        raise UserError(f"--backend ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


class UnitFailed(Exception):
    """A unit that stopped on its own error (bad input, a folder a node cannot see): not retried."""


class UnitCrashed(Exception):
    """A unit whose process died (killed, out of memory, a signal): retried from its last checkpoint."""


def unit_name(unit: tuple) -> str:
    """("run", "grpo", 0) -> "run:grpo:0", the --unit argument and the log's name."""
    return ":".join(str(x) for x in unit)


@dataclass(frozen=True)
class Task:
    """One unit of a grid as a command: what a Ray task runs in a process of its own, from the repository root."""

    name: str  # the unit's name in the progress lines and its log's: "run:grpo:0", "score:grpo/seed0:final"
    argv: tuple[str, ...]  # the command after `python`: a script or `-m module`, and its arguments
    needs: str  # a file every node must see (the folder's config.yaml): a node without the shared disk fails fast
    claim: str | None = None  # a claim file the unit takes: one found when it starts was left by a dead attempt
    preload: tuple[str, ...] = ()  # the command's own modules its fork server imports first, beside the libraries


_server = None  # this Ray worker's fork server (gcframe.forkserver): the libraries imported once, each unit forked


def _forked(cmd: list, log_path: Path, preload: tuple = ()) -> int:
    """Run `cmd` as a process of its own, forked from this worker's server (started on the worker's first unit, tied
    to the worker: a killed worker takes its server and the running unit with it, which then stops as on Ctrl-C, its
    claims removed and its last checkpoint kept); its streams appended to the log, its pid written there. Its exit
    status."""
    global _server
    from gcframe import forkserver

    if _server is not None and _server.preload != forkserver.PRELOAD + tuple(preload):  # another command's
        _server.stop()
        _server = None
    if _server is None or _server.proc.poll() is not None:
        _server = forkserver.Server(dict(os.environ), tied=True, preload=preload)
    if not _server.ok:  # a server that could not fork safely: a fresh interpreter, as subprocess.run starts one
        with open(log_path, "a") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(ROOT),
                                    preexec_fn=forkserver.die_with_parent)
            log.write(f"[pid {proc.pid}]\n")
            log.flush()
            return proc.wait()
    pid = _server.spawn(cmd, ROOT, dict(os.environ), log_path, log_path, append=True)
    with open(log_path, "a") as log:
        log.write(f"[pid {pid}]\n")
    return _server.wait()


def run_unit(out: str, task: Task) -> str:
    """The body of a unit's Ray task: `python ARGV` in a process of its own (forked from the worker's server, which
    has imported the libraries once), from the repository root, logging to OUT/ray-logs/<unit>.log. Returns the
    unit's name."""
    host = socket.gethostname()
    if not Path(task.needs).is_file():
        raise UnitFailed(f"node {host} cannot see the run folder {out} ({task.needs} is not there): put the run folder "
                         "(and GCFRAME_CACHE) on a filesystem every Ray node mounts at the same path (NFS, a shared "
                         "volume), or run on one machine")
    if not ROOT.joinpath("gcframe", "raygrid.py").is_file():
        raise UnitFailed(f"node {host} has no {ROOT}: install the same checkout of gcframe at the same path on every "
                         "Ray node")
    if task.claim is not None:
        Path(task.claim).unlink(missing_ok=True)
    logs = Path(out) / "ray-logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / f"{task.name.replace(':', '_').replace('/', '_')}.log"
    cmd = [sys.executable, *task.argv]
    with open(log_path, "a") as log:
        log.write(f"[{time.strftime('%H:%M:%S')} on {host}] {' '.join(cmd)}\n")
    code = _forked(cmd, log_path, task.preload)
    if code == 0:
        return task.name
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {code}"
    if code == 2:  # a UserError: the same input fails the same way on any node
        raise UnitFailed(f"{task.name}: {last.removeprefix('error: ')} (log: {log_path})")
    raise UnitCrashed(f"{task.name}: exit status {code} on {host} (log: {log_path})")


class Pool:
    """A Ray session (embedded, or joined at `address`) that runs a phase's units and shows their progress. A unit is
    a Task, or a driver's own unit that `task_of(out, unit, threads)` makes a Task of (compare.py's tuples:
    experiments/compare_grid.py); `resume` is the command a failure line says continues the grid."""

    def __init__(self, out: Path, threads: int, address: str | None, cpus: int | None, say=print, task_of=None,
                 resume: str | None = None):
        ray = import_ray()
        self.ray, self.out, self.threads, self.say = ray, Path(out).resolve(), threads, say
        self.task_of, self.resume = task_of, resume
        env = {k: os.environ[k] for k in ENV_PASSED if k in os.environ}
        env.setdefault("OMP_NUM_THREADS", str(threads))
        t0 = time.monotonic()
        kw = dict(runtime_env={"env_vars": env}, log_to_driver=False, configure_logging=False)
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                ray.init(num_cpus=cpus or len(os.sched_getaffinity(0)), include_dashboard=False, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise UserError(f"--backend ray: could not start or join {where}: {str(e).splitlines()[0]}") from None
        res = ray.cluster_resources()
        self.gpus = 1 if res.get("GPU", 0) >= 1 else 0
        say(f"ray: {'joined ' + address if address else 'a local Ray'} in {time.monotonic() - t0:.1f} s "
            f"({res.get('CPU', 0):g} CPUs, {res.get('GPU', 0):g} GPUs, {len(ray.nodes())} node(s)); each unit of the "
            f"grid is a task with {threads} CPU(s){' and 1 GPU' if self.gpus else ''} (logs: {self.out}/ray-logs/)")
        self.task = ray.remote(run_unit).options(
            num_cpus=threads, num_gpus=self.gpus, max_retries=MAX_RETRIES, retry_exceptions=[UnitCrashed])

    def note_trials(self, trials: list[tuple]) -> None:
        """The tuning trials (label, rate) so far, in the driver's order, for the trial tasks to build the same
        config (OUT/ray-logs/trials.json; each trial's config.yaml lists every trial variant, as on the local path)."""
        import json

        self.trials = [*getattr(self, "trials", []), *([label, lr] for label, lr in trials)]
        logs = self.out / "ray-logs"
        logs.mkdir(exist_ok=True)
        tmp = logs / f"trials.json.tmp{os.getpid()}"
        tmp.write_text(json.dumps(self.trials))
        tmp.replace(logs / "trials.json")

    def run(self, units: list, what: str, resume: str | None = None) -> None:
        """Run every unit (a Task, or a unit `task_of` makes one of) as a Ray task and wait for them; progress lines
        as tasks finish; a UserError naming the first failure once every other unit has finished (what they wrote is
        kept: `resume` is the command that continues, by default the Pool's)."""
        if not units:
            return
        ray = self.ray
        tasks = [u if isinstance(u, Task) else self.task_of(self.out, tuple(u), self.threads) for u in units]
        pending = {self.task.remote(str(self.out), t): t.name for t in tasks}
        done, failed, n = 0, [], len(units)
        self.say(f"ray: {n} {what} task(s) submitted")
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=None)
            for ref in ready:
                name = pending.pop(ref)
                try:
                    ray.get(ref)
                    done += 1
                except Exception as e:  # noqa: BLE001 (a RayTaskError wrapping UnitFailed/UnitCrashed, a lost node)
                    cause = getattr(e, "cause", None) or e
                    failed.append(str(cause).strip().splitlines()[-1] if str(cause).strip() else name)
            self.say(f"ray: {what}: {done}/{n} done, {len(pending)} running or queued, {len(failed)} failed")
        if failed:
            more = f" (and {len(failed) - 1} more failed task(s))" if len(failed) > 1 else ""
            resume = resume or self.resume or "the same command again"
            raise UserError(f"{failed[0]}{more}; the finished units are kept in {self.out}; once fixed, continue "
                            f"with: {resume}")

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()
