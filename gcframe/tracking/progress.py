"""Progress of a long phase (stage-1 training, a method's steps, evaluation, verify's runs): a tqdm bar when stderr
is a terminal, plain lines when it is not (a log file, a pipe, a notebook's captured stream), nothing when off.

    for step in progress(range(steps), desc="grpo", unit="step", show=show):
        ...

Plain lines go to stderr every `PLAIN_EVERY_S` seconds while a phase lasts, and once more when it ends:

    stage 1 (SFT base): 212/500 steps, 10 s
    stage 1 (SFT base): 437/500 steps, 20 s
    stage 1 (SFT base): 500/500 steps, 23 s (done)

A loop that ends before its total (a stopping rule, an error) closes with where it stopped, not "(done)":

    stage 1 (SFT base): stopped at 311 of at most 2000 steps, 20 s, loss=0.412, acc=0.41@310

`cap=True` says the total is only a cap that a stopping rule may never reach (stage 1's sft_base.steps with a
target accuracy or patience): the count is shown as "311 steps (at most 2000)" and a bar gives no estimate of the
remaining time, which the cap would make up.

A pseudo-terminal may report a size of 0 x 0 (one created without a window size, as some harnesses and
`pty.openpty` do): isatty() is true, yet tqdm draws nothing at all; such a terminal gets a bar 80 columns wide.
"""
from __future__ import annotations

import os
import sys
import threading
import time

PLAIN_EVERY_S = 10.0
"""Seconds between two plain progress lines of one phase; a phase shorter than this prints nothing."""


ENABLED = True
"""False after `--no-progress` (compare.py): no bars and no lines anywhere, whatever a caller asks for."""


def set_enabled(on: bool) -> None:
    global ENABLED
    ENABLED = on


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def terminal_columns(default: int = 80) -> int:
    try:
        cols = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, AttributeError, ValueError):
        cols = 0
    return cols or default


def say(line: str) -> None:
    """A line on stderr above any progress bar, never inside it: tqdm.write clears the bars, writes the line and draws
    them again (a warning printed while a bar is drawn would land in the middle of the bar's line)."""
    if "tqdm" in sys.modules:  # a bar may be drawn only once tqdm is imported
        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stderr)
        sys.stderr.flush()
        return
    print(line, file=sys.stderr, flush=True)


ESTIMATE_AFTER = 3
"""Steps after which a run says how long its remaining steps will take (`estimate_line`), timed over those steps:
a bar's estimate is drawn only on a terminal, and a step count typed wrong (train.steps: 100000000) shows at once."""


def duration(seconds: float) -> str:
    """A wait in the unit a reader takes in: '42 s', '17 min', '5.3 h', '12 days', '3.17e+12 years'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    if seconds < 2 * 365.25 * 86400:
        return f"{seconds / 86400:.0f} days"
    return f"{seconds / (365.25 * 86400):.3g} years"


def estimate_line(desc: str, per_step: float, measured: int, left: int) -> str:
    """The one line a run prints after its first `measured` steps: their mean time and what the `left` steps still
    to train take at that rate (evaluations not counted)."""
    return (f"{desc}: {per_step:.3g} s a step over its first {measured} steps, so the {left:,} steps left take about "
            f"{duration(per_step * left)} (evaluations add to that)")


class PlainProgress:
    """tqdm's interface (iterate, update, set_postfix, close) as plain lines on stderr: a line every `every`
    seconds while the phase lasts (from a timer thread, so one long step or one long generation is not silent
    either), and a closing line if any was printed. A phase shorter than `every` prints nothing."""

    def __init__(self, iterable=None, total=None, desc: str = "", initial: int = 0, unit: str = "step",
                 every: float | None = None, file=None, cap: bool = False):
        self.iterable, self.desc, self.unit, self.cap = iterable, desc, unit, cap
        self.every = PLAIN_EVERY_S if every is None else every
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable) + initial
        self.total, self.n, self.postfix, self.printed = total, initial, "", False
        self.file = file or sys.stderr
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._timer = threading.Thread(target=self._beat, daemon=True, name="gcframe-progress")
        self._timer.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            self._line(done=False)

    def _line(self, done: bool) -> None:
        with self._lock:
            early = done and self.total is not None and self.n < self.total
            if not self.unit:
                count = ""
            elif early:
                count = f"stopped at {self.n} of {'at most ' if self.cap else ''}{self.total} {self.unit}s, "
            elif self.cap and self.total is not None and self.n < self.total:
                count = f"{self.n} {self.unit}s (at most {self.total}), "
            else:
                count = f"{self.n}{'' if self.total is None else f'/{self.total}'} {self.unit}s, "
            post = f", {self.postfix}" if self.postfix else ""
            end = " (done)" if done and not early else ""
            print(f"{self.desc}: {count}{time.monotonic() - self.t0:.0f} s{post}{end}", file=self.file, flush=True)
            self.printed = True

    def __iter__(self):
        try:
            for x in self.iterable:
                yield x
                self.update(1)
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            if self.printed:
                self._line(done=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Off:
    def __init__(self, iterable=None):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *a, **k) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def progress(iterable=None, total=None, desc: str = "", initial: int = 0, unit: str = "step", show: bool = True,
             leave: bool = False, cap: bool = False):
    """A tqdm bar on a terminal, PlainProgress lines elsewhere, nothing with show=False (or after --no-progress).
    unit=None: a phase without countable steps (plain lines give its elapsed time only). cap=True: `total` is a
    cap a stopping rule may end the loop before (no estimate of the remaining time; see the module docstring)."""
    if not (show and ENABLED):
        return _Off(iterable)
    if stderr_is_terminal():
        from tqdm.auto import tqdm

        size = {} if terminal_columns(0) else {"ncols": 80, "nrows": 24}  # a 0 x 0 pty: tqdm would draw nothing
        if cap and total is not None:  # a count, not a bar towards the cap, and no time left estimated from it
            size["bar_format"] = ("{desc}: {n_fmt} " + (unit or "it") + "s (at most {total_fmt}) "
                                  "[{elapsed}, {rate_fmt}{postfix}]")
        return tqdm(iterable, total=total, desc=desc, initial=initial, unit=unit or "it", leave=leave, file=sys.stderr,
                    dynamic_ncols=not size.get("ncols"), **size)
    return PlainProgress(iterable, total=total, desc=desc, initial=initial, unit=unit, cap=cap)
