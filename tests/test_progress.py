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


def test_a_run_says_how_long_its_steps_take_after_its_first_three():
    """The line is made from the steps' mean time, not timed here: 0.25 s a step · 999,997 steps left = 249,999 s
    = 2.9 days -> "3 days"; 1e20 steps at 0.1 s = 1e19 s / 31,557,600 s a year = 3.17e+11 years."""
    assert progress.estimate_line("grpo seed 0", 0.25, 3, 999_997) == (
        "grpo seed 0: 0.25 s a step over its first 3 steps, so the 999,997 steps left take about 3 days "
        "(evaluations add to that)")
    assert progress.duration(0.1 * 10**20) == "3.17e+11 years"
    # 119 s stays in seconds; 7,100 s = 118 min; 7,300 s = 2.0 h; 172,000 s = 47.8 h
    assert [progress.duration(s) for s in (119, 7_100, 7_300, 172_000)] == ["119 s", "118 min", "2.0 h", "47.8 h"]


def test_a_training_run_prints_its_estimate_once(tiny_base, tmp_path, capsys, monkeypatch):
    """Trainer.fit: one estimate line after its first 3 steps (of 5: 2 left), none for a run of 3 steps (nothing
    left to estimate) or with progress off."""
    from experiments.bench_common import Size, make_trainer

    monkeypatch.setattr("gcframe.tracking.progress.ENABLED", True)  # a command run earlier in this process (e.g.
    # with --no-progress) may have switched the progress lines off for the process

    size = Size("test", 32, 2, 4, 64, prompts=2, group=4, new_tokens=4)
    for steps, show, lines in ((5, True, 1), (3, True, 0), (5, False, 0)):
        tr = make_trainer("sft", size, tiny_base, str(tmp_path / f"run{steps}{show}"), steps=steps,
                          train_opts={"eval_k": 0, "checkpoint_every": 0})
        tr.show_progress = show
        capsys.readouterr()
        tr.fit()
        said = [ln for ln in capsys.readouterr().err.splitlines() if "s a step over its first" in ln]
        assert len(said) == lines, said
        if lines:
            assert said[0].startswith(f"{tr.label}: ") and ", so the 2 steps left take about " in said[0]
