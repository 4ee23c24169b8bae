"""User-facing errors: bad input becomes one line on stderr and exit status 2, never a traceback."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path


class UserError(Exception):
    """Bad input from the user. The message says what is wrong and how to fix it, in one line."""


def cli_entry(main):
    """Decorate a CLI `main`: a UserError prints `error: <message>` and exits 2; Ctrl-C exits 130 without a
    traceback."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:  # Ctrl-C where the command has nothing more specific to say: no traceback
            print("interrupted", file=sys.stderr)
            sys.exit(130)

    return wrapper


def check_writable(folder, fix: str, below: bool = False) -> None:
    """Refuse, before anything is written, a folder this process cannot write in: `folder` itself where it exists,
    else the nearest existing folder above it (where it would be created); with `below`, also every folder and file
    under it (what --overwrite deletes, --resume appends to, a report rewrites). One line names the first read-only
    one, then `fix`. os.access answers for the permission bits and for a read-only filesystem alike."""
    folder = Path(folder)
    top = next((p for p in (folder, *folder.absolute().parents) if p.exists()), None)
    paths = [top] if top is not None else []
    if below and top == folder and folder.is_dir():
        paths += [Path(d) / name for d, dirs, files in os.walk(folder) for name in (*dirs, *files)]
    for p in paths:
        if not p.is_symlink() and not os.access(p, os.W_OK | (os.X_OK if p.is_dir() else 0)):
            raise UserError(f"'{p}' is read-only (no write permission, or a read-only filesystem): {fix}")
