"""What the lab renderers share (analysis.estimators, analysis.atlas): OUT/report/ with PNG figures and summary.md,
and the command line `python -m analysis.<lab> OUT`."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

import pandas as pd

from gcframe.errors import UserError


def load_files(out: Path, tables: tuple[str, ...], info: str, script: str) -> dict:
    """OUT/<table>.csv for each of `tables` (all required) as DataFrames, and OUT/<info> as data["info"] ({} when
    absent)."""
    files = {k: out / f"{k}.csv" for k in tables}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise UserError(f"{out} lacks {', '.join(missing)}: run {script} --out {out} first")
    data = {k: pd.read_csv(f) for k, f in files.items()}
    data["info"] = json.loads((out / info).read_text()) if (out / info).is_file() else {}
    return data


def write_report(out: Path, load: Callable[[Path], dict], figures: dict[str, Callable[[dict, Path], None]],
                 summary: Callable[[dict], str],
                 tables: dict[str, Callable[[dict], pd.DataFrame]] | None = None) -> Path:
    """OUT/report/: each figure drawn as figures[name](data, OUT/report/name), each table written as
    OUT/report/name (a CSV of tables[name](data): what a results page renders), then summary.md; returns the
    folder."""
    out = Path(out)
    d = load(out)
    rep = out / "report"
    rep.mkdir(exist_ok=True)
    for name, draw in figures.items():
        draw(d, rep / name)
    for name, table in (tables or {}).items():
        table(d).to_csv(rep / name, index=False)
    (rep / "summary.md").write_text(summary(d))
    return rep


def report_cli(argv: list[str] | None, render: Callable[[Path], Path], usage: str) -> int:
    """One argument, the experiment's --out folder: render it and print the report folder."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        raise UserError(f"usage: {usage}")
    print(render(Path(args[0])))
    return 0
