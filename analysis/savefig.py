"""A figure written as the tables are: whole or not at all (analysis.report, analysis.tuning, analysis.off_policy)."""
from __future__ import annotations

import os
from pathlib import Path


def save_figure(fig, path: Path, **kwargs) -> Path:
    """fig.savefig(path) atomically, as the tables are written: into a temporary file of this process (`*.tmp<pid>`,
    which Ctrl-C removes), renamed into place once whole, so that a full disk or a kill leaves the figure that was
    there (or none), never a truncated PNG."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or None, **kwargs)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
