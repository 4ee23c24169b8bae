"""The Ray backend's cost against the local path: the same grid run with `--workers 2` and with `--backend ray`, on
this machine's cores, side by side in one run (issue 66, docs/guides/grid-on-ray.md), and that cost extrapolated to
the default's grid.

    python experiments/benchmark_ray.py --out OUT                          # grids of 4 and 12 runs, 30 steps each
    python experiments/benchmark_ray.py --out OUT --sizes 2,4 --steps 5    # the plumbing, quickly

A grid of n units is n runs of one method at its rate in the default config (`grpo@u0` ...: equal work, only their
number differs), under `--quick` at seed 0, its SFT base cached beforehand (timed by neither backend). Each size
runs with the local path, then with the Ray backend, each into a fresh folder. Of each command it records the wall time (the whole command,
Ray's start included; the start read from the line Ray's pool prints) and the CPU time of every process it started
(sampled every SAMPLE_S seconds over the process tree: the driver, local workers, Ray's daemons and workers, the
units forked in them; a process that ends between two samples loses at most SAMPLE_S of its time), split into Ray's
daemons (GCS, raylet, its agents) and the rest, the work.

A small grid's wall time says little of a large one's: with a few units, which process gets the last one decides
the wall time. The extrapolation therefore uses CPU time, where the grid's shape does not enter:
- the work's extra CPU of the Ray backend is fitted as a + b·n over the sizes: a fixed part (a fork server and a Ray
  worker per CPU importing the libraries) and a per-unit part (a unit's own set-up: the config, the task, the base);
- Ray's daemons' CPU is fitted as d0 + r·wall over the sizes: their own start, then r CPU-seconds per second;
- results/default's grid (its tuning trials and runs, U units) took W = the sum of their times over 2 processes on
  the local path; on the Ray backend it takes about (start + (a + b·U + d0 + r·W) / 2) / W more, the extra CPU
  spread over the 2 cores, which that grid keeps busy.

Output: OUT/wall.csv (one row per command), OUT/overhead.csv (the fit and the ratios); the runs' summaries must be
equal between the backends, else it stops (a faster backend with other results is no comparison).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from experiments.bench_common import new_out  # noqa: E402
from gcframe.errors import UserError, cli_entry  # noqa: E402

COMPARE = ROOT / "experiments" / "compare.py"
CONFIG = ROOT / "experiments" / "configs" / "default.yaml"
SAMPLE_S = 0.2
RAY_DAEMONS = ("gcs_server", "raylet", "dashboard", "log_monitor", "RuntimeEnvAgent", "monitor.py")
"""Words of a Ray daemon's command line (its processes other than the workers that run the units)."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="a new folder for the runs and the two tables")
    p.add_argument("--method", default="grpo", help="the method every unit runs (default grpo)")
    p.add_argument("--sizes", default="4,12", help="the grids' numbers of units, at least two (default 4,12)")
    p.add_argument("--steps", type=int, default=30, help="train.steps of every run (default 30)")
    args = p.parse_args(argv)
    try:
        args.sizes = sorted({int(s) for s in args.sizes.split(",")})
    except ValueError:
        raise UserError(f"--sizes {args.sizes}: give whole numbers of units, like 4,12") from None
    if len(args.sizes) < 2 or args.sizes[0] < 2:
        raise UserError(f"--sizes {','.join(map(str, args.sizes))}: give two or more sizes of at least 2 units (the "
                        "fit separates a fixed cost from a cost per unit; below 2 units a backend starts fewer "
                        "processes, and that would count as a cost per unit)")
    return args


class TreeCPU:
    """The CPU seconds of a process and all its descendants, sampled every SAMPLE_S seconds while it runs: each
    process's last reading, split into Ray's daemons and the rest."""

    def __init__(self, pid: int):
        import psutil

        self.psutil, self.root, self.last, self.done = psutil, psutil.Process(pid), {}, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.done.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except self.psutil.Error:
                procs = []
            for p in procs:
                try:
                    t = p.cpu_times()
                    key = (p.pid, p.create_time())
                    daemon = self.last[key][1] if key in self.last else \
                        any(w in " ".join(p.cmdline()) for w in RAY_DAEMONS)
                    self.last[key] = (t.user + t.system, daemon)
                except self.psutil.Error:  # ended meanwhile: its last reading stays
                    pass
            self.done.wait(SAMPLE_S)

    def stop(self) -> tuple[float, float]:
        """(work CPU s, Ray daemons' CPU s)."""
        self.done.set()
        self.thread.join()
        work = sum(s for s, d in self.last.values() if not d)
        return work, sum(s for s, d in self.last.values() if d)


def _run(cmd: list, log: Path) -> tuple[float, float, float, str]:
    """(wall s, work CPU s, Ray daemons' CPU s, log text) of a command."""
    t0 = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        cpu = TreeCPU(proc.pid)
        code = proc.wait()
    wall = time.monotonic() - t0
    work, daemons = cpu.stop()
    text = log.read_text(errors="replace")
    if code != 0:
        raise UserError(f"{' '.join(cmd[1:3])} ... failed with exit status {code}: {text.strip().splitlines()[-1:]} "
                        f"(log: {log})")
    return wall, work, daemons, text


def default_grid() -> tuple[int, float]:
    """(units, local wall s) of results/default's grid: its tuning trials and runs, their times summed over the 2
    processes that ran them."""
    import pandas as pd

    trials = pd.read_csv(ROOT / "results" / "default" / "tune.csv")
    runs = pd.read_csv(ROOT / "results" / "default" / "summary.csv")
    return len(trials) + len(runs), (trials["time_s"].sum() + runs["time_s"].sum()) / 2


def grid_config(out: Path, method: str, n: int) -> Path:
    """OUT/grid.yaml: the default config with n variants of `method` at its own rate (`method@u0`: {train: {lr}}),
    each a run of the same work."""
    from experiments.compare_config import run_config
    from gcframe.config import from_dict, load_yaml
    from gcframe.tracking.log import write_yaml
    from methods import REGISTRY

    raw = load_yaml(CONFIG)
    if method not in REGISTRY:
        raise UserError(f"--method {method}: not a method of this project (python experiments/compare.py "
                        "--list-methods)")
    engine = {k: v for k, v in raw.items() if k not in ("run", "tune", "families")}  # compare.py's own sections
    lr = run_config(from_dict(engine), method, 0)[1].train.lr
    raw["methods"] = {**raw.get("methods", {}), **{f"{method}@u{i}": {"train": {"lr": lr}} for i in range(n)}}
    write_yaml(out / "grid.yaml", raw)
    return out / "grid.yaml"


@cli_entry
def main(argv=None) -> int:
    import numpy as np
    import pandas as pd

    args = parse_args(argv)
    out = new_out(args.out)  # and its env.json: the machine, its load, the versions
    config = grid_config(out, args.method, args.sizes[-1])
    common = [sys.executable, str(COMPARE), "--config", str(config), "--quick", "--seeds", "0", "--no-progress"]
    print("the --quick SFT base of seed 0, cached before anything is timed", flush=True)
    _run([*common, "--methods", "sft", "--steps", "1", "--out", str(out / "warmup")], out / "warmup.log")
    rows = []
    for n in args.sizes:
        labels = ",".join(f"{args.method}@u{i}" for i in range(n))
        first = None  # the local path's summary, which the Ray backend's must equal
        for backend, flags in (("local", ["--workers", "2"]), ("ray", ["--backend", "ray", "--workers", "2"])):
            where = out / f"{backend}-{n}"
            wall, work, daemons, text = _run([*common, "--methods", labels, "--steps", str(args.steps), "--out",
                                              str(where), *flags], out / f"{backend}-{n}.log")
            start = re.search(r"ray: a local Ray in ([\d.]+) s", text)
            rows.append({"backend": backend, "units": n, "wall_s": round(wall, 1), "work_cpu_s": round(work, 1),
                         "ray_daemons_cpu_s": round(daemons, 1),
                         "ray_start_s": float(start.group(1)) if start else None})
            print(f"{backend}, {n} units: {wall:.1f} s wall, {work:.1f} CPU-s of work, {daemons:.1f} of Ray's daemons",
                  flush=True)
            summary = pd.read_csv(where / "summary.csv").drop(columns=["time_s"], errors="ignore")
            first = summary if first is None else first
            if not summary.equals(first):
                raise UserError(f"{where}/summary.csv differs from {out}/local-{n}/summary.csv: the backends must "
                                "give the same runs")
    wall = pd.DataFrame(rows)
    wall.to_csv(out / "wall.csv", index=False)
    local, ray = (wall[wall["backend"] == b].set_index("units") for b in ("local", "ray"))
    extra = ray["work_cpu_s"] - local["work_cpu_s"]  # the Ray backend's extra work CPU at each size
    b, a = np.polyfit(extra.index.to_numpy(float), extra.to_numpy(float), 1)
    r, d0 = np.polyfit(ray["wall_s"].to_numpy(float), ray["ray_daemons_cpu_s"].to_numpy(float), 1)  # d0: their start
    start = float(ray["ray_start_s"].mean())
    units, w = default_grid()
    largest = args.sizes[-1]
    overhead = pd.DataFrame([{
        "sizes": ",".join(map(str, args.sizes)), "steps": args.steps, "ray_start_s": round(start, 1),
        "measured_wall_overhead": round(ray.loc[largest, "wall_s"] / local.loc[largest, "wall_s"] - 1, 3),
        "measured_cpu_overhead": round((ray.loc[largest, ["work_cpu_s", "ray_daemons_cpu_s"]].sum())
                                       / local.loc[largest, "work_cpu_s"] - 1, 3),
        "fixed_cpu_s": round(a, 1), "per_unit_cpu_s": round(b, 2), "daemons_start_cpu_s": round(d0, 1),
        "daemons_cpu_per_s": round(r, 4), "default_units": units, "default_local_wall_s": round(w),
        "overhead_at_default_size": round((start + (a + b * units + d0 + r * w) / 2) / w, 3)}])
    overhead.to_csv(out / "overhead.csv", index=False)
    print(overhead.T.to_string(header=False))
    print(f"\nresults: {out}/wall.csv, {out}/overhead.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
