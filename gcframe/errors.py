"""User-facing errors: bad input becomes one line on stderr and exit status 2, never a traceback."""
from __future__ import annotations

import functools
import sys


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
