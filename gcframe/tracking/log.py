"""The run folder: config.yaml, metrics.jsonl (append-only, flushed every row) and samples.jsonl.

Only the main process writes. Readers (`read_jsonl`) tolerate a torn last line, as a crash leaves it.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import yaml

from gcframe.tracking.cache import cache_root  # noqa: F401  (callers name it from here too)


def check_cache() -> None:
    """Refuse, before a command writes anything, a cache it could not write in (runs claim, train and record their
    SFT base there even when it is cached): one line naming the read-only folder and the fix."""
    from gcframe.errors import check_writable

    check_writable(cache_root(), f"gcframe caches SFT bases, converted models and reward models in {cache_root()}: "
                   "make it writable, or set GCFRAME_CACHE to a folder you can write")


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class RunLogger:
    def __init__(self, run_dir: str | Path, enabled: bool = True):
        self.dir = Path(run_dir)
        self.enabled = enabled
        self.sinks: list = []  # more receivers of every metrics row, e.g. gcframe.tracking.trackers.Tracker (report_to)
        if enabled:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._metrics = open(self.dir / "metrics.jsonl", "a")
            self._samples = open(self.dir / "samples.jsonl", "a")

    def write_config(self, cfg: dict) -> None:
        if self.enabled:
            write_yaml(self.dir / "config.yaml", cfg)

    def log(self, row: dict) -> None:
        if self.enabled:
            self._metrics.write(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n")
            self._metrics.flush()
            for sink in self.sinks:
                sink.log(row)

    def samples(self, step: int, rows: list[dict]) -> None:
        if self.enabled:
            for r in rows:
                self._samples.write(json.dumps({"step": step, **r}) + "\n")
            self._samples.flush()

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
        self.sinks = []
        if self.enabled:
            self._metrics.close()
            self._samples.close()


def write_yaml(path: Path, data: dict) -> None:
    """Write YAML atomically (a temporary file of this process, then rename: processes sharing a folder never
    move each other's half-written file)."""
    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    os.replace(tmp, path)


def read_jsonl(path: str | Path) -> list[dict]:
    """Rows of a JSONL file; a torn (unparsable) last line is skipped. A line that is not a JSON row with more lines
    after it (the file was damaged after it was written) is refused in one line (UserError) that names the file and
    the line: the rows after it are never dropped silently."""
    rows = []
    lines = Path(path).read_bytes().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            row = None
        if not isinstance(row, dict):
            if not any(rest.strip() for rest in lines[i + 1:]):
                break
            from gcframe.errors import UserError

            raise UserError(damaged_row(Path(path), i + 1, line))
        rows.append(row)
    return rows


def damaged_row(path: Path, number: int, line: bytes) -> str:
    """The refusal of a log line that is not a JSON row, with more rows after it."""
    shown = line.strip()[:40].decode("utf-8", "replace")
    return (f"'{path}' line {number} is not a JSON row ({shown!r}) and more rows follow it: the file was damaged "
            "after it was written; restore it, or delete that one line (the rows after it are kept), then run the "
            "command again")


def publish_dir(tmp: Path, final: Path) -> None:
    """Rename a fully written temporary folder into place (atomic: a crash never leaves a half-written one). If
    another process published the same folder first, keep theirs and drop ours."""
    try:
        os.replace(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
