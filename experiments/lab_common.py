"""What the lab scripts share (experiments/estimators.py, experiments/atlas.py): the --out folder, and the end of a
run (its JSON record, then the report)."""
from __future__ import annotations

import argparse
import importlib
import json
import shutil
import time
from pathlib import Path

from gcframe.errors import UserError


def add_out_args(p: argparse.ArgumentParser, name: str) -> None:
    """--out and --overwrite, as fresh_out reads them."""
    p.add_argument("--out", default=None, help=f"output folder (default runs/{name}-<time>)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")


def fresh_out(out: str | None, name: str, overwrite: bool) -> Path:
    """--out, by default runs/<name>-<time>. A non-empty folder is refused unless `overwrite`; with it, an existing
    folder is removed first, so the run starts from an empty one."""
    from gcframe.tracking.log import check_cache

    path = Path(out or f"runs/{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    if path.exists() and any(path.iterdir()) and not overwrite:
        raise UserError(f"output folder '{path}' exists and is not empty: pass --overwrite or choose another --out")
    check_cache()  # before anything is removed or written
    if path.exists() and overwrite:
        shutil.rmtree(path)
    return path


def finish(out: Path, info_file: str, info: dict, renderer: str) -> dict:
    """Write OUT/<info_file> (JSON), then render the report with `renderer`'s render(OUT) (imported only here:
    matplotlib is slow to import); returns `info`."""
    (out / info_file).write_text(json.dumps(info, indent=1, default=str))
    importlib.import_module(renderer).render(out)
    return info
