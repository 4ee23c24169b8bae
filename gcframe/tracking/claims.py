"""Claims on shared work, so that several processes can run the same command over one folder.

Two `sweep_5_2.py` processes sharing `--out` split its cells between them (each takes the next cell nobody holds),
and two runs that need the same missing SFT base train it once (the second waits for it). A claim is a small
file created atomically (`O_CREAT | O_EXCL`) that names its owner, `host:pid`. A claim whose owner is gone (a
process killed or crashed on this host) is taken over, so a resumed run never waits on a dead one. A claim made
on another host is always taken as live: on a shared filesystem, delete a stale one by hand.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path


_held: set[Path] = set()  # the claims this process took and has not released (`release_all` drops them)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True  # cannot tell from here: assume it is working
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def acquire(path: str | Path) -> bool:
    """Take the claim at `path`: True if this process now holds it (fresh, already ours, or taken over from a
    dead owner), False while another live process holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # a stale claim removed by us (or a racing process) is retried
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                owner = path.read_text().strip()
            except FileNotFoundError:
                continue  # released between our open and read
            if owner == _owner():
                _held.add(path)
                return True
            if not owner:  # being written right now by its creator
                time.sleep(0.05)
                continue
            if _alive(owner):
                return False
            path.unlink(missing_ok=True)  # its owner is gone: take it over
            continue
        with os.fdopen(fd, "w") as f:
            f.write(_owner())
        _held.add(path)
        return True
    return False


def release(path: str | Path) -> None:
    """Drop the claim if this process holds it."""
    path = Path(path)
    _held.discard(path)
    try:
        if path.read_text().strip() == _owner():
            path.unlink()
    except FileNotFoundError:
        pass


def holder(path: str | Path) -> str | None:
    """`host:pid` of the live process holding the claim, or None."""
    try:
        owner = Path(path).read_text().strip()
    except FileNotFoundError:
        return None
    return owner if owner and _alive(owner) else None


def release_all() -> None:
    """Drop every claim this process still holds (on Ctrl-C or SIGTERM: `clean_up`)."""
    for path in list(_held):
        release(path)


def clean_up(roots) -> list[Path]:
    """What an interrupted process (Ctrl-C, SIGTERM) must not leave: its claims, and the temporary files and
    folders it was writing under `roots` (named `*.tmp<pid>` with its own pid, up to 4 levels down: a cached base
    being trained, a converted model, a run's final model, a YAML file) -> what was removed."""
    import shutil

    release_all()
    gone, suffix = [], f".tmp{os.getpid()}"
    for root in roots:
        root = Path(root)
        for depth in range(4):
            for p in root.glob("/".join(["*"] * depth + [f"*{suffix}"])):
                if p.name.endswith(suffix):
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        p.unlink(missing_ok=True)
                    gone.append(p)
    return gone
