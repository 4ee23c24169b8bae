"""gcframe.tracking.threads: the thread count for a machine's load, on made-up machines (cores, load, torch's
default), the overrides in their order, and what a run prints and records."""
import json

import pytest

from gcframe.errors import UserError
from gcframe.tracking import threads
from gcframe.tracking.threads import choose


@pytest.mark.parametrize("cores, load, default, want", [
    (2, 0.0, 2, 2),    # idle: torch's own choice, floor(2 - 0 + 0.5) = 2
    (2, 0.4, 2, 2),    # floor(1.6 + 0.5) = 2
    (2, 1.0, 2, 1),    # the case, one busy process beside: floor(1 + 0.5) = 1
    (2, 1.5, 2, 1),    # floor(0.5 + 0.5) = 1
    (2, 2.0, 2, 1),    # a 2-thread experiment beside: floor(0 + 0.5) = 0, at least 1
    (2, 7.5, 2, 1),    # far over: still 1
    (16, 3.4, 16, 13),  # floor(12.6 + 0.5) = 13
    (16, 0.0, 8, 8),   # hyperthreads: torch's default (its physical cores) is never exceeded
    (1, 0.0, 1, 1),
])
def test_auto_leaves_the_other_processes_their_cores(cores, load, default, want):
    c = choose(cores, load, default)
    assert (c.threads, c.source) == (want, "auto")


def test_processes_of_one_launch_share_the_free_cores():
    assert choose(16, 0.0, 16, local_processes=4).threads == 4  # 16 / 4
    assert choose(16, 7.0, 16, local_processes=4).threads == 2  # (16 - 7) / 4 = 2.25 -> floor(2.75) = 2
    assert choose(2, 0.0, 2, local_processes=4).threads == 1  # 0.5 -> floor(1.0) = 1, and never below 1


def test_flag_then_environment_then_the_resumed_folder_then_auto():
    rec = (2, "runs/x/env.json")
    assert (choose(2, 2.0, 2, flag=2, env="1", recorded=rec).threads,) == (2,)
    assert choose(2, 2.0, 2, flag=2, env="1", recorded=rec).source == "--threads"
    assert (choose(2, 2.0, 2, env="3", recorded=rec).threads, choose(2, 2.0, 2, env="3").source) == (3, "OMP_NUM_THREADS")
    assert choose(2, 2.0, 2, env="4,2").threads == 4  # OpenMP's per-level list: the outer level's count
    assert (choose(2, 2.0, 2, env="", recorded=rec).threads, choose(2, 2.0, 2, recorded=rec).source) == (2, rec[1])
    assert choose(2, 2.0, 2, recorded=(None, "runs/x/env.json")).source == "auto"  # a folder that recorded none


@pytest.mark.parametrize("kwargs, needle", [
    ({"flag": 0}, "--threads 0: give at least 1"),
    ({"env": "zero"}, "OMP_NUM_THREADS='zero' is not a positive integer"),
    ({"env": "0"}, "OMP_NUM_THREADS='0' is not a positive integer"),
])
def test_bad_counts_are_one_line(kwargs, needle):
    with pytest.raises(UserError, match="^" + needle.replace("(", r"\(")):
        choose(2, 0.0, 2, **kwargs)


def test_the_line_says_how_many_of_how_many_and_what_overrides():
    assert choose(2, 1.0, 2).line() == "threads: 1 of 2 cores (load 1.0); --threads or OMP_NUM_THREADS overrides"
    assert choose(2, 0.0, 2, flag=2).line() == "threads: 2 of 2 cores (set by --threads)"
    # an explicit count beside a busy process: 2 + 1.0 > 2 + 0.5, so the line warns
    assert choose(2, 1.0, 2, env="2").line() == ("threads: 2 of 2 cores (set by OMP_NUM_THREADS; load 1.0: 2 "
                                                 "thread(s) oversubscribe the cores, expect slow steps)")
    assert choose(2, 10.8, 2, env="1").line() == "threads: 1 of 2 cores (set by OMP_NUM_THREADS)"  # none fewer
    assert "as runs/x/env.json records: a resumed run keeps its count" in choose(
        2, 0.0, 2, recorded=(1, "runs/x/env.json")).line()


def test_other_load_is_the_larger_of_the_minute_and_now(monkeypatch, tmp_path):
    """A job started seconds ago shows in the tasks runnable now before the 1-minute average; one that ended a
    minute ago still shows in the average."""
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.10 0.20 0.30 3/120 999\n")  # 3 runnable, this reader among them: 2 others
    assert threads.runnable_now(samples=2, gap_s=0, path=str(loadavg)) == 2.0
    assert threads.runnable_now(path=str(tmp_path / "none")) is None  # no /proc: the average alone
    monkeypatch.setattr(threads, "runnable_now", lambda: 2.0)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.1, 0.2, 0.3))
    assert threads.other_load() == 2.0
    monkeypatch.setattr(threads, "runnable_now", lambda: 0.0)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1.7, 0.2, 0.3))
    assert threads.other_load() == 1.7


def test_setup_applies_prints_and_env_json_records_it(monkeypatch, tmp_path):
    import torch

    from gcframe.tracking import env

    before, chosen = torch.get_num_threads(), threads.CHOSEN
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "other_load", lambda: 1.0)
    monkeypatch.setattr(threads, "cores_available", lambda: 2)
    said = []
    try:
        threads.CHOSEN = threads.Choice(2, 2, 0.0, "auto", 2)  # torch's default on this made-up machine: 2
        c = threads.setup(None, say=said.append)
        assert (c.threads, torch.get_num_threads()) == (1, 1)
        assert said == ["threads: 1 of 2 cores (load 1.0); --threads or OMP_NUM_THREADS overrides"]
        recorded = env.write_env(tmp_path / "env.json")
        assert json.loads((tmp_path / "env.json").read_text())["threads_choice"] == {
            "threads": 1, "cores": 2, "load": 1.0, "source": "auto", "default": 2} == recorded["threads_choice"]
        assert recorded["threads"] == 1
        # a resume of that folder keeps its 1 thread on an idle machine; --threads overrides it
        monkeypatch.setattr(threads, "other_load", lambda: 0.0)
        assert threads.setup(None, tmp_path / "env.json", say=None).threads == 1
        assert threads.setup(2, tmp_path / "env.json", say=None).threads == 2
    finally:
        threads.CHOSEN = chosen
        torch.set_num_threads(before)


def test_bench_threads_table_puts_the_ratios_side_by_side():
    """experiments/bench_threads.py's table on made-up medians (the issue's numbers: idle 57 s at 2 threads,
    85 s at 1; busy 62 s at 1 thread, 736 s at torch's 2)."""
    from experiments.bench_threads import table

    rows = [{"condition": c, "setting": s, "wall_s": w, "threads": t} for c, s, w, t in
            [("idle", "auto", 57.0, 2), ("idle", "default", 57.0, 2), ("busy", "auto", 62.0, 1),
             ("busy", "default", 736.0, 2)]]
    text, summary = table(rows, 2)
    r = summary["ratios"]
    assert r["idle auto / default"] == 1.0 and r["busy auto / default"] == 62 / 736  # 0.084
    assert round(r["auto busy / idle"], 3) == round(62 / 57, 3) == 1.088 and summary["auto_threads"]["busy"] == [1]
    assert text.splitlines()[-1] == "must hold: idle auto / default <= 1.05: yes; auto busy / idle <= 1.5: yes"
    assert text.splitlines()[2].split()[:4] == ["busy", "62.0", "s", "(1)"]
