"""compare.py's grid as commands: each unit of the grid as the command a Ray task runs (`compare_task`, for
gcframe.raygrid's Pool: an SFT base, a tuning trial at one seed, a run). The library runs commands; which script,
which claims and which modules to import first are this driver's.
"""
from __future__ import annotations

from pathlib import Path

from experiments.tune import TUNE_DIR, trial_label
from gcframe.raygrid import Task, unit_name

COMPARE = Path(__file__).resolve().parent / "compare.py"
PRELOAD = ("methods", "analysis.report", "analysis.findings", "experiments.compare")
"""The project's modules a unit imports, imported once by the fork server each unit is forked from (beside the
libraries': gcframe.forkserver.PRELOAD)."""


def _claim_of(out: Path, unit: tuple) -> Path | None:
    """The claim file a compare.py unit's run_cells takes. The driver is the only scheduler, so a claim found there
    when the unit starts was left by an earlier attempt that died (perhaps on another host, where its owner cannot
    be checked): it is removed."""
    kind = unit[0]
    if kind == "run":
        return out / unit[1] / f"seed{unit[2]}.claim"
    if kind == "trial":
        return out / TUNE_DIR / trial_label(unit[1], float(unit[2])) / f"seed{unit[3]}.claim"
    return None


def compare_task(out: Path, unit: tuple, threads: int) -> Task:
    """A unit of compare.py's grid (("base", seed), ("trial", label, lr, seed), ("run", label, seed)) as the command
    `compare.py --resume OUT --cells-only --unit UNIT`: the code `--workers` runs, on the same folder."""
    name = unit_name(unit)
    claim = _claim_of(out, unit)
    return Task(name, (str(COMPARE), "--resume", str(out), "--cells-only", "--threads", str(threads), "--no-progress",
                       "--unit", name), str(out / "config.yaml"), None if claim is None else str(claim), PRELOAD)
