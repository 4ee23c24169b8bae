"""A real sampler/learner pipeline against synchronous training, on the same two cores, side by side in one run
(train.pipeline, gcframe/offpolicy/pipeline.py, docs/concepts/off-policy.md).

    python experiments/benchmark_pipeline.py --out OUT                      # GRPO, 60 steps, k = 1 and 4, 2 repeats
    python experiments/benchmark_pipeline.py --out OUT --steps 5 --repeats 1 --quick   # the plumbing, quickly

Each arm is one compare.py run of one method at its rate in the default config, from the same cached SFT base
(seed 0), into a folder of its own:

    sync-1t        on-policy, one process, one thread (one core idle)
    sync-2t        on-policy, one process, two threads (both cores, intra-op parallel)
    dial-k         train.staleness k simulated in one process, one thread: the samples of k steps ago
    pipeline-k     the same k with train.pipeline: a sampler process and a learner process, one thread each

Of each it records the training seconds per step (the run's time_s over its steps: evaluations are not in it), what
the learner waited for its batch each step (time_collect) and what the sampler spent generating it. A pipelined
run must log the dial's rows exactly (every column but the wall-clock ones), else it stops: a faster pipeline with
other samples would be no comparison. The arms run in turn, the repeats interleaved, so that a change in the
machine's load falls on every arm alike.

Output: OUT/steps.csv (one row per run), OUT/pipeline.csv (each arm's median over repeats and its ratio to
sync-1t), OUT/env.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from experiments.bench_common import new_out  # noqa: E402
from gcframe.errors import UserError, cli_entry  # noqa: E402

COMPARE = ROOT / "experiments" / "compare.py"
CONFIG = ROOT / "experiments" / "configs" / "default.yaml"
WALL_CLOCK = ("time", "peak_")
"""Columns of metrics.jsonl that measure the machine, not the run: left out where the rows must be equal."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="a new folder for the runs and the tables")
    p.add_argument("--method", default="grpo", help="the method every arm runs, one with a ratio (default grpo)")
    p.add_argument("--steps", type=int, default=60, help="train.steps of every run (default 60)")
    p.add_argument("--staleness", default="1,4", help="the ks, each simulated and pipelined (default 1,4)")
    p.add_argument("--repeats", type=int, default=2, help="runs of every arm, interleaved (default 2)")
    p.add_argument("--quick", action="store_true", help="compare.py --quick (a smaller model and base)")
    args = p.parse_args(argv)
    try:
        args.staleness = sorted({int(s) for s in args.staleness.split(",")})
    except ValueError:
        raise UserError(f"--staleness {args.staleness!r}: give whole numbers >= 1, e.g. 1,4") from None
    if not args.staleness or min(args.staleness) < 1:
        raise UserError("--staleness: every k must be >= 1 (a pipeline with 0 batches in flight waits every step)")
    if args.steps <= max(args.staleness):
        raise UserError(f"--steps {args.steps} must be above the largest k ({max(args.staleness)})")
    if args.repeats < 1:
        raise UserError(f"--repeats {args.repeats}: give at least 1")
    return args


def arms(ks: list[int]) -> list[tuple[str, int, dict]]:
    """(name, threads, train options) of every arm."""
    out = [("sync-1t", 1, {}), ("sync-2t", 2, {})]
    for k in ks:
        out += [(f"dial-{k}", 1, {"staleness": k}), (f"pipeline-{k}", 1, {"staleness": k, "pipeline": True})]
    return out


def arm_config(out: Path, name: str, steps: int, train: dict) -> Path:
    """The default config with few cheap evaluations (on 100 test problems, greedy, at the start and the end; they
    are not in time_s) and this arm's train options."""
    import yaml

    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["train"].update({"steps": steps, "eval_split": "test", "eval_size": 100, "eval_k": 0, "eval_points": 0,
                         "eval_every": 0, "sample_every": 0, "checkpoint_every": 0, **train})
    cfg.pop("tune", None)
    path = out / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def run_arm(out: Path, args, name: str, threads: int, train: dict, repeat: int) -> dict:
    """One compare.py run of the arm -> its row of steps.csv (and the run folder's metrics rows, for the check)."""
    where = out / "runs" / f"{name}-r{repeat}"
    cmd = [sys.executable, str(COMPARE), "--config", str(arm_config(out, name, args.steps, train)), "--methods",
           args.method, "--seeds", "0", "--no-progress", "--out", str(where), *(["--quick"] if args.quick else [])]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / f"{name}-r{repeat}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise UserError(f"arm {name} failed (exit {done.returncode}): see {out}/logs/{name}-r{repeat}.log")
    rows = [json.loads(line) for line in (where / args.method / "seed0" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "loss" in r]
    median = sorted(r["time_collect"] for r in steps)[len(steps) // 2]
    gen = [r.get("time_sampler_generate", r.get("time_generate", 0.0)) for r in steps]
    return {"arm": name, "repeat": repeat, "threads": threads, "steps": len(steps),
            "s_per_step": round(steps[-1]["time_s"] / len(steps), 4), "wait_median_s": round(median, 4),
            "generate_s_per_step": round(sum(gen) / len(gen), 4), "command_wall_s": round(wall, 1),
            "rows": [{k: v for k, v in r.items() if not k.startswith(WALL_CLOCK)} for r in rows]}


@cli_entry
def main(argv=None) -> int:
    import pandas as pd

    args = parse_args(argv)
    out = new_out(args.out)  # and its env.json: the machine, its load, the versions
    plan = arms(args.staleness)
    rows, dial_rows = [], {}
    for repeat in range(args.repeats):
        for name, threads, train in plan:
            print(f"repeat {repeat + 1}/{args.repeats}: {name} ({args.steps} steps, {threads} thread(s))", flush=True)
            row = run_arm(out, args, name, threads, train, repeat)
            logged = row.pop("rows")
            if name.startswith("dial-"):
                dial_rows[name.removeprefix("dial-")] = logged
            elif name.startswith("pipeline-") and logged != dial_rows[name.removeprefix("pipeline-")]:
                raise UserError(f"{name}'s logged rows differ from dial-{name.removeprefix('pipeline-')}'s: the "
                                "pipeline must generate the dial's own batches")
            rows.append(row)
            print(f"  {row['s_per_step']:.3f} s a step; the learner waited {row['wait_median_s']:.3f} s (median)",
                  flush=True)
    steps = pd.DataFrame(rows)
    steps.to_csv(out / "steps.csv", index=False)
    table = steps.groupby("arm", sort=False).agg(threads=("threads", "first"), runs=("repeat", "count"),
                                                 s_per_step=("s_per_step", "median"),
                                                 wait_median_s=("wait_median_s", "median"),
                                                 generate_s_per_step=("generate_s_per_step", "median")).reset_index()
    table = table.round({"s_per_step": 4, "wait_median_s": 4, "generate_s_per_step": 4})
    base = float(table.loc[table["arm"] == "sync-1t", "s_per_step"].iloc[0])
    table["vs_sync_1t"] = (table["s_per_step"] / base).round(3)
    table["same_rows_as_dial"] = ["yes" if a.startswith("pipeline-") else "–" for a in table["arm"]]
    table.to_csv(out / "pipeline.csv", index=False)
    print("\n" + table.to_string(index=False))
    print(f"\nresults: {out}/pipeline.csv, {out}/steps.csv (runs: {out}/runs/, logs: {out}/logs/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
