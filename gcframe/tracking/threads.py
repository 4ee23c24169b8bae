"""How many intra-op threads torch uses in a run: one rule, called by every entry point a user runs directly.

    threads = max(1, min(default, round((cores − others) / local_processes)))

cores: the CPUs this process may run on (`os.sched_getaffinity`); others: the load of the other processes, the larger
of the 1-minute load average and the runnable tasks counted now (`/proc/loadavg`, this process not counted), so a job
started a few seconds ago counts at once and one that ended a minute ago still counts for a while; default: torch's
own choice (its physical cores), which an idle machine keeps; local_processes: the processes of a multi-process
launch on this machine (LOCAL_WORLD_SIZE), which share the cores.

Why: torch's default is one thread per core whatever else runs. On a busy machine the threads of one parallel region
wait on each other behind the other jobs: on 2 cores beside a 2-thread experiment, a tiny model's SFT step took 4.7 s
at torch's 2 threads and 0.16 s at 1. Erring towards fewer threads costs at most the idle machine's 2-thread gain
(stage 1 plus 20 steps: 57 s against 85 s); erring towards more costs 12-30x, hence the larger of the two loads.

An explicit choice overrides the rule, first one given: `--threads N`, then OMP_NUM_THREADS, then the thread count a
resumed run folder was started with (its env.json: a run continued at another thread count sums in another order,
and its parts would no longer be one environment, `gcframe.tracking.env.differences`). The choice is printed in the
run's first lines and recorded in env.json (`threads_choice`).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass

from gcframe.errors import UserError

CHOSEN: "Choice | None" = None
"""This process's choice (set by `setup`), which `gcframe.tracking.env.collect` records."""


@dataclass(frozen=True)
class Choice:
    threads: int
    cores: int
    load: float  # the other processes' load when the choice was made
    source: str  # "auto", "--threads", "OMP_NUM_THREADS" or the env.json a resumed run's count was read from
    default: int  # torch's own choice

    def line(self) -> str:
        """The line a run prints first, e.g. 'threads: 1 of 2 cores (load 1.0); --threads or OMP_NUM_THREADS
        overrides'."""
        load = f"load {self.load:.1f}"
        if self.source == "auto":
            return f"threads: {self.threads} of {self.cores} cores ({load}); --threads or OMP_NUM_THREADS overrides"
        by = (f"set by {self.source}" if self.source in ("--threads", "OMP_NUM_THREADS", "--workers") else
              f"as {self.source} records: a resumed run keeps its count; --threads overrides")
        crowded = self.threads > 1 and self.threads + self.load > self.cores + 0.5  # (1 thread is the least)
        warn = f"; {load}: {self.threads} thread(s) oversubscribe the cores, expect slow steps" if crowded else ""
        return f"threads: {self.threads} of {self.cores} cores ({by}{warn})"

    def to_dict(self) -> dict:
        return asdict(self)


def cores_available() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's limit), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def runnable_now(samples: int = 5, gap_s: float = 0.02, path: str = "/proc/loadavg") -> float | None:
    """The mean number of runnable tasks other than this one over `samples` looks `gap_s` apart (the 4th field of
    /proc/loadavg, 'running/total', counts the reader itself). None where there is no /proc."""
    counts = []
    for i in range(samples):
        try:
            with open(path) as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        counts.append(max(running - 1, 0))
        if i + 1 < samples:
            time.sleep(gap_s)
    return sum(counts) / len(counts)


def other_load() -> float:
    """The other processes' load: max(1-minute load average, runnable tasks now); 0 where neither can be read."""
    try:
        minute = os.getloadavg()[0]
    except (AttributeError, OSError):
        minute = 0.0
    return max(minute, runnable_now() or 0.0)


def parse_env(value: str | None) -> int | None:
    """OMP_NUM_THREADS as a count (its first entry: OpenMP allows a list per nesting level); None when unset."""
    if value is None or not value.strip():
        return None
    first = value.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise UserError(f"OMP_NUM_THREADS={value!r} is not a positive integer: unset it, or set it to the threads "
                        "to use (e.g. OMP_NUM_THREADS=1)")
    return int(first)


def choose(cores: int, load: float, default: int, flag: int | None = None, env: str | None = None,
           recorded: tuple[int, str] | None = None, local_processes: int = 1, flag_name: str = "--threads") -> Choice:
    """The rule of the module docstring, on given numbers (so that it can be tested with any machine's).
    flag: --threads (or what flag_name says set it: --workers, one thread per process); env: OMP_NUM_THREADS's text;
    recorded: (threads, file) of a resumed run folder's env.json."""
    if flag is not None:
        if flag < 1:
            raise UserError(f"--threads {flag}: give at least 1 (or leave it out for the choice by load)")
        return Choice(flag, cores, load, flag_name, default)
    if (n := parse_env(env)) is not None:
        return Choice(n, cores, load, "OMP_NUM_THREADS", default)
    if recorded is not None and recorded[0]:
        return Choice(int(recorded[0]), cores, load, recorded[1], default)
    free = (cores - load) / max(local_processes, 1)
    return Choice(max(1, min(default, math.floor(free + 0.5))), cores, load, "auto", default)


def setup(flag: int | None = None, recorded_from=None, say=print, flag_name: str = "--threads") -> Choice:
    """Choose this process's thread count (`choose` on this machine), apply it to torch and print its line (rank 0
    of a multi-process launch only). recorded_from: a resumed run folder's env.json, whose thread count a resume
    keeps unless --threads or OMP_NUM_THREADS says otherwise."""
    global CHOSEN
    import torch

    recorded = None
    if recorded_from is not None and os.path.isfile(recorded_from):  # env.json (gcframe.tracking.env imports this)
        import json

        try:
            recorded = (json.loads(open(recorded_from).read()).get("threads"), str(recorded_from))
        except (OSError, ValueError):  # unreadable: the count is chosen anew
            recorded = None
    env = os.environ.get("OMP_NUM_THREADS")
    choice = choose(cores_available(), other_load(), torch.get_num_threads() if CHOSEN is None else CHOSEN.default,
                    flag, env, recorded, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1), flag_name)
    torch.set_num_threads(choice.threads)
    CHOSEN = choice
    if os.environ.get("RANK", "0") == "0" and say is not None:
        say(choice.line())
    return choice


def add_flag(parser) -> None:
    """The --threads option every entry point shares."""
    parser.add_argument("--threads", type=int, metavar="N", help="torch intra-op threads (default: the cores the "
                        "other processes leave free, at most torch's own choice; OMP_NUM_THREADS also sets it)")
