"""Where a comparison in progress stands: which method × seed cells are finished, running (at which step),
interrupted or waiting, and about how much wall time the rest needs.

    python -m analysis.status OUT          # OUT: a compare.py (or reproduce.py) run folder, while it runs or after

Reads only what the processes write (OUT/config.yaml, each cell's metrics.jsonl and claim file), so it can be run
from another shell at any time. The estimate: a cell's seconds are its method's measured seconds per step (training
and evaluation, from the cells that have logged steps; else every cell's mean) times its steps left, and the cells
left are shared by the processes now running.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.runs import markdown_table
from gcframe.errors import UserError, cli_entry, resume_command
from gcframe.tracking import checkpoint, claims
from gcframe.tracking.log import read_jsonl


def _steps(raw: dict, label: str) -> int:
    """The label's train.steps, as compare.py's run_config resolves it (a `train:` among its options wins)."""
    from gcframe.config import label_options

    train = label_options(raw.get("methods") or {}, label)[2]
    return int(train.get("steps", (raw.get("train") or {}).get("steps", 0)))


def cells(out: Path) -> list[dict]:
    """One row per method × seed cell: label, seed, state, steps done and planned, seconds spent (train + eval)."""
    from gcframe.config import load_yaml

    if not (out / "config.yaml").is_file():
        raise UserError(f"{out}: no config.yaml there, so it is not a compare.py output folder (or it has not "
                        "started yet)")
    raw = load_yaml(out / "config.yaml")
    rows = []
    for label in raw.get("methods_run") or []:
        for seed in raw.get("seeds") or [raw.get("seed", 0)]:
            run_dir, steps = out / label / f"seed{seed}", _steps(raw, label)
            logged = read_jsonl(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").exists() else []
            trained = [r for r in logged if "eval_accuracy" not in r and "step" in r]
            done = max((r["step"] + 1 for r in trained), default=0)
            spent = max((r.get("time_s", 0.0) for r in logged), default=0.0) + sum(
                r.get("time_eval", 0.0) for r in logged if "eval_accuracy" in r)
            if checkpoint.finished(run_dir, steps) is not None:
                state = "finished"
            elif claims.holder(run_dir.with_name(run_dir.name + ".claim")):
                state = "running"
            else:
                state = "interrupted" if logged else "waiting"
            rows.append({"label": label, "seed": seed, "state": state, "done": done, "steps": steps, "spent": spent})
    return rows


def estimate(rows: list[dict]) -> tuple[float, int]:
    """(wall seconds the unfinished cells still need, processes running them now)."""
    rate = {}  # seconds per step, per method, from the cells that have logged steps
    for r in rows:
        if r["done"]:
            rate.setdefault(r["label"], []).append(r["spent"] / r["done"])
    overall = [v for vs in rate.values() for v in vs]
    fallback = sum(overall) / len(overall) if overall else 0.0
    left = sum((r["steps"] - r["done"]) * (sum(rate[r["label"]]) / len(rate[r["label"]]) if r["label"] in rate
                                           else fallback) for r in rows if r["state"] != "finished")
    running = sum(r["state"] == "running" for r in rows)
    return left / max(running, 1), running


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.status", description=__doc__.split("\n")[0])
    p.add_argument("out", help="the run folder (compare.py --out, or runs/reproduce/<name>)")
    args = p.parse_args(argv)
    out = Path(args.out)
    rows = cells(out)
    print(markdown_table([{"cell": f"{r['label']} seed {r['seed']}", "state": r["state"],
                           "steps": f"{r['done']}/{r['steps']}", "s/step": f"{r['spent'] / r['done']:.1f}"
                           if r["done"] else "–"} for r in rows]))
    n = {s: sum(r["state"] == s for r in rows) for s in ("finished", "running", "interrupted", "waiting")}
    print(", ".join(f"{v} {k}" for k, v in n.items() if v) + f" of {len(rows)} cells.")
    if n["finished"] == len(rows):
        return 0
    left, running = estimate(rows)
    unmeasured = sorted({r["label"] for r in rows} - {r["label"] for r in rows if r["done"]})
    print(f"About {left / 60:.0f} min of wall time left with {max(running, 1)} process(es)"
          + (f" ({', '.join(unmeasured)} not started: taken at the others' mean s/step)" if unmeasured else "") + ".")
    if not running:
        print(f"No process is running: continue with `{resume_command(out)}` (one per shell).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
