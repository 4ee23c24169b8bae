"""The Ray backend's cost against the local path: the same grid run with `--workers 2` and with `--backend ray`, on
this machine's cores, side by side in one run (issue 66, docs/guides/grid-on-ray.md).

    python experiments/benchmark_ray.py --out OUT                       # 8 default runs at seed 0, each backend twice
    python experiments/benchmark_ray.py --out OUT --methods sft,grpo --repeats 1 --steps 20    # the plumbing, quickly

Each repeat runs the local path, then the Ray backend, each into a fresh folder with the seed's SFT base cached
beforehand (its stage 1 is timed by neither). A command's wall time is the whole command, Ray's start included; Ray's
start is read from the line it prints. The overhead at the default's size extrapolates the measured per-unit cost
(wall time over the local path's, less Ray's start, divided by the units) to results/default's grid: its units
(tuning trials and runs) and its local wall time at the same per-unit cost.

Output: OUT/wall.csv (one row per command) and OUT/overhead.csv (the ratios); the runs' summaries must be equal
between the backends, else it stops (a faster backend with other results is no comparison).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from gcframe.errors import UserError, cli_entry  # noqa: E402

COMPARE = ROOT / "experiments" / "compare.py"
CONFIG = ROOT / "experiments" / "configs" / "default.yaml"
METHODS = "grpo,dapo,rloo,sft_filtered,rft,online_rft,cispo,gspo"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="a new folder for the runs and the two tables")
    p.add_argument("--methods", default=METHODS, help=f"the default config's methods to run (default {METHODS})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, help="train.steps (default: the config's 200)")
    p.add_argument("--repeats", type=int, default=2, help="local-then-Ray pairs (default 2)")
    return p.parse_args(argv)


def _run(cmd: list, log: Path) -> tuple[float, str]:
    t0 = time.monotonic()
    with open(log, "w") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    wall = time.monotonic() - t0
    text = log.read_text(errors="replace")
    if code != 0:
        raise UserError(f"{' '.join(cmd[1:3])} ... failed with exit status {code}: {text.strip().splitlines()[-1:]} "
                        f"(log: {log})")
    return wall, text


@cli_entry
def main(argv=None) -> int:
    import pandas as pd

    args = parse_args(argv)
    out = Path(args.out)
    if out.exists():
        raise UserError(f"--out {out} already exists: give a new folder")
    out.mkdir(parents=True)
    common = [sys.executable, str(COMPARE), "--config", str(CONFIG), "--seeds", str(args.seed), "--no-progress",
              *(["--steps", str(args.steps)] if args.steps else [])]
    print(f"the seed-{args.seed} SFT base, cached before anything is timed", flush=True)
    _run([*common, "--methods", "sft", "--steps", "1", "--out", str(out / "warmup")], out / "warmup.log")
    units = len(args.methods.split(","))
    rows, first = [], None  # first: the local path's first summary, which every other must equal
    for rep in range(args.repeats):
        for backend, flags in (("local", ["--workers", "2"]), ("ray", ["--backend", "ray", "--workers", "2"])):
            where = out / f"{backend}{rep}"
            wall, text = _run([*common, "--methods", args.methods, "--out", str(where), *flags],
                              out / f"{backend}{rep}.log")
            start = re.search(r"ray: a local Ray in ([\d.]+) s", text)
            rows.append({"backend": backend, "repeat": rep, "wall_s": round(wall, 1), "runs": units,
                         "ray_start_s": float(start.group(1)) if start else None})
            print(f"{backend} (repeat {rep}): {wall:.1f} s for {units} runs", flush=True)
            summary = pd.read_csv(where / "summary.csv").drop(columns=["time_s"], errors="ignore")
            first = summary if first is None else first
            if not summary.equals(first):
                raise UserError(f"{where}/summary.csv differs from {out}/local0/summary.csv: the backends must give "
                                "the same runs")
    wall = pd.DataFrame(rows)
    wall.to_csv(out / "wall.csv", index=False)
    local = wall[wall["backend"] == "local"]["wall_s"].mean()
    ray = wall[wall["backend"] == "ray"]["wall_s"].mean()
    start = wall["ray_start_s"].dropna().mean()
    per_unit = (ray - local - start) / units
    default = pd.read_csv(ROOT / "results" / "default" / "tune.csv")  # a row per tuning trial (method, rate, seed)
    runs = len(pd.read_csv(ROOT / "results" / "default" / "summary.csv"))
    default_units = len(default) + runs
    local_default = local / units * default_units  # the default's grid at this run's local cost per unit
    overhead = pd.DataFrame([{
        "runs": units, "local_s": round(local, 1), "ray_s": round(ray, 1), "ray_start_s": round(start, 1),
        "measured_overhead": round(ray / local - 1, 3), "per_unit_s": round(per_unit, 2),
        "default_units": default_units,
        "overhead_at_default_size": round((start + per_unit * default_units) / local_default, 3)}])
    overhead.to_csv(out / "overhead.csv", index=False)
    print(overhead.to_string(index=False))
    print(f"\nresults: {out}/wall.csv, {out}/overhead.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
