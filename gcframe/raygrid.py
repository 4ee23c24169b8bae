"""compare.py's grid as Ray tasks (`compare.py --backend ray`): each unit of the grid (an SFT base, a tuning trial at
one seed, a run = method x seed) is one Ray task that declares its resources (num_cpus = its threads, num_gpus = 1
on a GPU) and runs that unit alone in a process of its own, `compare.py --resume OUT --cells-only --unit UNIT`: the
code `--workers` runs, on the same folder, so a unit's results are the local path's. The driver (the compare.py the
user started) writes OUT/config.yaml, submits each phase's units (the bases, then the tuning trials, then the
runs), prints the grid's progress, and writes the summary, the scores and the report as the local path does.

A unit that dies (its process killed, its node lost) is retried (`max_retries`) and resumes from its run's last
checkpoint in OUT; a unit that stops on bad input (exit status 2, a one-line error) is not retried, and its line
is reported once. Every node must see OUT (and the cache, GCFRAME_CACHE) at the same path: a shared filesystem.

Ray is an optional dependency (`pip install ".[ray]"`); nothing else in gcframe imports this module.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from gcframe.errors import UserError

INSTALL = 'pip install ".[ray]"'
COMPARE = Path(__file__).resolve().parents[1] / "experiments" / "compare.py"
MAX_RETRIES = 3  # a unit whose process or node dies runs again this many times, from its last checkpoint
ENV_PASSED = ("GCFRAME_CACHE", "HF_HOME", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
              "OMP_NUM_THREADS")


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


def _claim_of(out: Path, unit: tuple) -> Path | None:
    """The claim file a unit's run_cells takes. The driver is the only scheduler, so a claim found there when the
    unit starts was left by an earlier attempt that died (perhaps on another host, where its owner cannot be
    checked): it is removed."""
    kind = unit[0]
    if kind == "run":
        return out / unit[1] / f"seed{unit[2]}.claim"
    if kind == "trial":
        from experiments.tune import TUNE_DIR, trial_label

        return out / TUNE_DIR / trial_label(unit[1], float(unit[2])) / f"seed{unit[3]}.claim"
    return None


def _die_with_parent() -> None:
    """Linux: the unit's process gets SIGTERM when its Ray worker dies, even by SIGKILL (prctl PR_SET_PDEATHSIG): it
    stops like Ctrl-C (its claims removed, its last checkpoint kept) and the retried task resumes from there."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        pass


def run_unit(out: str, compare: str, unit: tuple, threads: int) -> str:
    """The body of a unit's Ray task: `compare.py --resume OUT --cells-only --unit UNIT` in a process of its own,
    logging to OUT/ray-logs/<unit>.log. Returns the unit's name."""
    out_p, host = Path(out), socket.gethostname()
    if not (out_p / "config.yaml").is_file():
        raise UnitFailed(f"node {host} cannot see the run folder {out} ({out}/config.yaml is not there): put --out "
                         "(and GCFRAME_CACHE) on a filesystem every Ray node mounts at the same path (NFS, a shared "
                         "volume), or run on one machine")
    if not Path(compare).is_file():
        raise UnitFailed(f"node {host} has no {compare}: install the same checkout of gcframe at the same path on "
                         "every Ray node")
    name = unit_name(unit)
    try:
        claim = _claim_of(out_p, unit)
    except ImportError:
        claim = None
    if claim is not None:
        claim.unlink(missing_ok=True)
    logs = out_p / "ray-logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / f"{name.replace(':', '_').replace('/', '_')}.log"
    cmd = [sys.executable, compare, "--resume", out, "--cells-only", "--threads", str(threads), "--no-progress",
           "--unit", name]
    with open(log_path, "a") as log:
        log.write(f"[{time.strftime('%H:%M:%S')} on {host}] {' '.join(cmd)}\n")
        log.flush()
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               cwd=str(Path(compare).parents[1]), preexec_fn=_die_with_parent)
    if code == 0:
        return name
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {code}"
    if code == 2:  # a UserError: the same input fails the same way on any node
        raise UnitFailed(f"{name}: {last.removeprefix('error: ')} (log: {log_path})")
    raise UnitCrashed(f"{name}: exit status {code} on {host} (log: {log_path})")


class Pool:
    """A Ray session (embedded, or joined at `address`) that runs a phase's units and shows their progress."""

    def __init__(self, out: Path, threads: int, address: str | None, cpus: int | None, say=print):
        ray = import_ray()
        self.ray, self.out, self.threads, self.say = ray, Path(out).resolve(), threads, say
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

    def run(self, units: list[tuple], what: str) -> None:
        """Run every unit (one task each) and wait for them; progress lines as tasks finish; a UserError naming the
        first failure once every other unit has finished (what they wrote is kept for --resume)."""
        if not units:
            return
        ray = self.ray
        pending = {self.task.remote(str(self.out), str(COMPARE), tuple(u), self.threads): u for u in units}
        done, failed, n = 0, [], len(units)
        self.say(f"ray: {n} {what} task(s) submitted")
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=None)
            for ref in ready:
                unit = pending.pop(ref)
                try:
                    ray.get(ref)
                    done += 1
                except Exception as e:  # noqa: BLE001 (a RayTaskError wrapping UnitFailed/UnitCrashed, a lost node)
                    cause = getattr(e, "cause", None) or e
                    failed.append(str(cause).strip().splitlines()[-1] if str(cause).strip() else unit_name(unit))
            self.say(f"ray: {what}: {done}/{n} done, {len(pending)} running or queued, {len(failed)} failed")
        if failed:
            more = f" (and {len(failed) - 1} more failed task(s))" if len(failed) > 1 else ""
            raise UserError(f"{failed[0]}{more}; the finished units are kept in {self.out}; once fixed, continue "
                            f"with: python experiments/compare.py --resume {self.out} --backend ray")

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()
