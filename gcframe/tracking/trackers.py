"""Experiment trackers: the rows of metrics.jsonl, also sent to TensorBoard, trackio, W&B or MLflow.

    train.report_to: tensorboard            # or --report-to tensorboard,wandb ; "" (the default) sends nothing

Through accelerate's tracking API (`Accelerator.log_with`, `init_trackers`, `log`), one tracker run per method and
seed, named `<label>/seed<k>`: TensorBoard writes OUT/tensorboard/<label>/seed<k>/ (`tensorboard --logdir
OUT/tensorboard`); W&B, trackio and MLflow log into project / experiment "gcframe" (MLflow: ./mlruns unless
MLFLOW_TRACKING_URI says otherwise). Each is an optional extra: `pip install 'gcframe[tensorboard]'`, `[wandb]`,
`[trackio]`, `[mlflow]`. metrics.jsonl stays the source of truth; a tracker gets the same numbers, every row at its
`step` (training rows and evaluation rows share the step axis: an evaluation row's keys start with eval_).
"""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from gcframe.errors import UserError

TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio", "mlflow": "mlflow"}
"""report_to name -> the package it needs."""
PROJECT = "gcframe"


def names(report_to: str) -> list[str]:
    """The tracker names in a comma-separated `report_to` ("" / "none": none), each checked and installed."""
    out = [n.strip() for n in (report_to or "").split(",") if n.strip() and n.strip() != "none"]
    for n in out:
        if n not in TRACKERS:
            raise UserError(f"train.report_to: unknown tracker '{n}': choose from {', '.join(TRACKERS)} "
                            "(comma-separated), or leave it empty")
        if importlib.util.find_spec(TRACKERS[n]) is None:
            raise UserError(f"train.report_to includes {n}, which needs the {TRACKERS[n]} package: "
                            f"pip install 'gcframe[{n}]'")
    return out


def _flat(d: dict, prefix: str = "") -> dict:
    """A nested config as flat key -> bool/int/float/str (what every tracker's hyperparameter table takes)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "/"))
        elif isinstance(v, (bool, int, float, str)):
            out[key] = v
        else:
            out[key] = str(v)
    return out


class Tracker:
    """A RunLogger sink: `log(row)` sends a metrics row to the accelerator's trackers, `close()` finishes them."""

    def __init__(self, accelerator, trackers: list[str], out: str | Path, run_name: str, config: dict):
        from accelerate.tracking import TensorBoardTracker, filter_trackers

        self.acc = accelerator
        # TensorBoard's run folder is its project name under the logging dir: build it with the run's own name
        log_with = [TensorBoardTracker(run_name, Path(out) / "tensorboard") if t == "tensorboard" else t
                    for t in trackers]
        accelerator.log_with = filter_trackers(log_with, Path(out) / "tensorboard")
        accelerator.trackers = []
        per_run = {"wandb": {"name": run_name, "group": Path(out).name}, "mlflow": {"run_name": run_name},
                   "trackio": {"name": run_name}}
        accelerator.init_trackers(PROJECT, config=_flat(config),
                                  init_kwargs={k: v for k, v in per_run.items() if k in trackers})

    def log(self, row: dict) -> None:
        values = {k: float(v) for k, v in row.items() if k != "step" and isinstance(v, (int, float))
                  and not isinstance(v, bool) and math.isfinite(v)}
        self.acc.log(values, step=int(row["step"]))

    def close(self) -> None:
        for t in self.acc.trackers:
            t.finish()
        self.acc.trackers, self.acc.log_with = [], []
