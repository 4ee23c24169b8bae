"""User-facing errors: bad input becomes one line on stderr and exit status 2, never a traceback."""
from __future__ import annotations

import argparse
import errno
import functools
import os
import shutil
import sys
from pathlib import Path


class UserError(Exception):
    """Bad input from the user. The message says what is wrong and how to fix it, in one line."""


class MethodError(UserError):
    """A method's code breaks the method API (a GC of the wrong shape, a float, a missing `collect`): the user's
    method file is what to fix. compare.py removes the run folder it had started (nothing of it is worth keeping)."""


def _one_line(parser: argparse.ArgumentParser, message: str) -> None:
    """argparse's refusal as every other one: `error: <message>` and where the usage is, exit 2 (argparse prints its
    whole usage block first)."""
    print(f"error: {message} ({parser.prog} --help shows every option)", file=sys.stderr)
    sys.exit(2)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, `kill`, a scheduler) as an interrupt: what Ctrl-C cleans up and keeps, SIGTERM does too."""


def _terminate(signum, frame):
    raise Terminated()


def on_sigterm() -> None:
    """SIGTERM raises Terminated in the main thread (where nothing else handles it), so that a command stopped by
    `timeout` or `kill` releases its claims, removes its temporary files and says what it kept, as on Ctrl-C."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _terminate):
        signal.signal(signal.SIGTERM, _terminate)


def interrupted(e: KeyboardInterrupt, roots=()) -> tuple[str, int]:
    """After Ctrl-C or SIGTERM: the process's claims and own temporary files (under the cache and `roots`) are
    removed (gcframe.tracking.claims.clean_up) -> (how it was stopped, the exit status: 130, or 143 for SIGTERM)."""
    from gcframe.tracking import claims
    from gcframe.tracking.cache import cache_root

    claims.clean_up([cache_root(), *roots])
    return ("terminated (SIGTERM)", 143) if isinstance(e, Terminated) else ("interrupted", 130)


def cli_entry(main):
    """Decorate a CLI `main`: a UserError prints `error: <message>` and exits 2; Ctrl-C exits 130 and SIGTERM 143,
    without a traceback and without leaving claims or temporary files; an argument argparse refuses (`--steps ten`)
    is one line too."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        argparse.ArgumentParser.error = _one_line  # the parsers this command builds refuse in one line
        on_sigterm()
        try:
            return main(*args, **kwargs)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt as e:  # Ctrl-C where the command has nothing more specific to say: no traceback
            how, status = interrupted(e)
            print(how, file=sys.stderr)
            sys.exit(status)
        except BrokenPipeError:  # `... --list-methods | head`: the reader has all it wanted; no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would fail again
            sys.exit(1)
        except OSError as e:  # a write the disk had no room for, where no caller said more: one line, no traceback
            if not disk_full(e):
                raise
            print(f"error: {disk_full_line(e.filename or '.', 'a file')}, then run the command again (a compare.py "
                  "run continues with --resume OUT)", file=sys.stderr)
            sys.exit(2)

    return wrapper


def resume_command(out, *more: str) -> str:
    """`python <checkout>/experiments/compare.py --resume OUT [more]`, the command that continues a comparison, with
    its paths absolute and shell-quoted: pasted into any shell, from any folder, it runs (the script's path relative
    to the checkout ran only from there, and a space in a path split it)."""
    import shlex

    script = Path(__file__).resolve().parents[1] / "experiments" / "compare.py"
    return shlex.join(["python", str(script), "--resume", os.path.abspath(out), *more])


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


def disk_full(e: BaseException) -> bool:
    """Whether a failed write failed for want of room: an OSError ENOSPC (or EDQUOT, a quota), or safetensors'
    SafetensorError, which is no OSError and carries the OS error only in its text ("... No space left on device
    (os error 28)")."""
    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    return any(s in str(e) for s in (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT)))


def disk_full_line(path, what: str) -> str:
    """The refusal of a write that found its disk full: the disk (the mount point holding `path`) and the room left
    on it, what was being written where, and the fix."""
    path = Path(path).absolute()
    disk = next((p for p in (path, *path.parents) if p.exists() and os.path.ismount(p)), Path("/"))
    try:
        free = f"{shutil.disk_usage(disk).free / 2**20:.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return f"the disk at {disk} is full ({free}) while {what} was written to '{path}': free space on it"
