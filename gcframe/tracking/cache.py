"""Where gcframe caches what runs share, in a module that imports nothing of gcframe (gcframe.errors cleans the
cache up after Ctrl-C or SIGTERM, and gcframe.tracking.log, which reports through gcframe.errors, names it too)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where gcframe caches what runs share (SFT bases, converted GGUF models, preference sets, reward models):
    $GCFRAME_CACHE, else ~/.cache/gcframe."""
    return Path(os.environ.get("GCFRAME_CACHE", Path.home() / ".cache" / "gcframe"))
