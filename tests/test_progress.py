"""gcframe.tracking.progress: a loop that stops before its total says where it stopped, not "(done)"; a total that is
only a cap (stage 1's steps under a stopping rule) gives no estimate of the remaining time."""
import io
import sys

from gcframe.tracking import progress
from gcframe.tracking.progress import PlainProgress


def closed(n: int, total: int, cap: bool, postfix: str = "") -> str:
    """The closing line of a phase that counted n of total (its timer lines suppressed: every = an hour)."""
    out = io.StringIO()
    bar = PlainProgress(total=total, desc="stage 1 (SFT base)", every=3600, file=out, cap=cap)
    bar.update(n)
    if postfix:
        bar.set_postfix(acc=postfix)
    bar.printed = True  # as after a phase longer than `every`: the closing line is printed
    bar.close()
    return out.getvalue().strip()


def test_a_loop_stopped_early_says_where():
    line = closed(311, 2000, cap=True, postfix="0.41@310")
    assert line.startswith("stage 1 (SFT base): stopped at 311 of at most 2000 steps, ") and "(done)" not in line
    assert line.endswith(", acc=0.41@310")
    assert closed(40, 100, cap=False).startswith("stage 1 (SFT base): stopped at 40 of 100 steps, ")  # an error
    done = closed(2000, 2000, cap=True)
    assert done.startswith("stage 1 (SFT base): 2000/2000 steps, ") and done.endswith("(done)")


def test_a_running_capped_count_is_not_a_fraction_of_the_cap():
    out = io.StringIO()
    bar = PlainProgress(total=2000, desc="stage 1 (SFT base)", every=3600, file=out, cap=True)
    bar.update(212)
    bar._line(done=False)
    bar.close()
    assert out.getvalue().splitlines()[0].startswith("stage 1 (SFT base): 212 steps (at most 2000), ")


def test_a_capped_bar_on_a_terminal_has_no_time_left(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    fake = Terminal()
    monkeypatch.setattr(sys, "stderr", fake)
    monkeypatch.setattr(progress, "ENABLED", True)
    monkeypatch.setattr(progress, "terminal_columns", lambda default=80: 100)
    for name, cap in (("capped", True), ("plain", False)):
        bar = progress.progress(total=2000, desc=name, cap=cap, leave=True)
        bar.update(311)
        bar.refresh()
        bar.close()
    text = fake.getvalue()
    capped = [s for s in text.replace("\r", "\n").splitlines() if s.startswith("capped")][-1]
    plain = [s for s in text.replace("\r", "\n").splitlines() if s.startswith("plain")][-1]
    assert "311 steps (at most 2000)" in capped and "<" not in capped, capped  # tqdm writes time left as <mm:ss
    assert "311/2000" in plain and "<" in plain, plain  # an ordinary bar keeps tqdm's estimate


def test_a_warning_is_written_above_the_bar_not_into_it(monkeypatch):
    """issue 62: the starvation warning was printed into the tqdm bar's line. progress.say (the trainer's warnings)
    clears the bar, writes its own line and draws the bar again."""
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    fake = Terminal()
    monkeypatch.setattr(sys, "stderr", fake)
    monkeypatch.setattr(progress, "ENABLED", True)
    monkeypatch.setattr(progress, "terminal_columns", lambda default=80: 100)
    bar = progress.progress(total=8, desc="grpo seed 0")
    bar.update(3)
    bar.refresh()
    progress.say("warning: grpo seed 0: most groups gave all their completions the same reward")
    bar.update(1)
    bar.close()
    line = next(s for s in fake.getvalue().split("\n") if "warning: grpo seed 0" in s)
    shown = line.split("\r")[-1]  # what a terminal shows of that line: the text after its last carriage return
    assert shown.startswith("warning: grpo seed 0:") and shown.endswith("the same reward"), repr(line)
