"""analysis.status on a synthetic comparison in progress: every cell state, the steps a variant overrides, the
estimate's arithmetic, and a folder that is not a comparison."""
from __future__ import annotations

import json

import pytest
import yaml

from analysis import status
from gcframe.tracking import claims


def _write(out, label, seed, rows):
    d = out / label / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


@pytest.fixture
def out(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump({
        "methods_run": ["grpo", "grpo@long"], "seeds": [0, 1], "train": {"steps": 4},
        "methods": {"grpo": {"beta": 0.04}, "grpo@long": {"train": {"steps": 8}}}}))
    ev = {"eval_accuracy": 0.5, "time_eval": 2.0, "gen_tokens": 0}
    # finished: 4 steps, time_s 8 at the end, two evaluations of 2 s -> 12 s over 4 steps = 3 s/step
    trained = [{"step": s, "loss": 0.1, "time_s": 2.0 * (s + 1)} for s in range(4)]
    done = _write(out, "grpo", 0, [{"step": 0, **ev, "time_s": 0.0}, *trained, {"step": 4, **ev, "time_s": 8.0}])
    (done / "final").mkdir()  # its final model: a run is finished once that is written
    # running (this process holds its claim): 2 steps, 4 s + 2 s of evaluation -> 3 s/step, 2 steps left
    running = _write(out, "grpo", 1, [{"step": 0, **ev, "time_s": 0.0}, {"step": 0, "loss": 0.1, "time_s": 2.0},
                                      {"step": 1, "loss": 0.1, "time_s": 4.0}])
    assert claims.acquire(running.with_name("seed1.claim"))
    # interrupted (no live claim): 1 of its 8 steps in 5 s -> 5 s/step, 7 left; grpo@long seed 1 has not started
    _write(out, "grpo@long", 0, [{"step": 0, "loss": 0.1, "time_s": 5.0}])
    yield out
    claims.release(running.with_name("seed1.claim"))


def test_cell_states_steps_and_the_estimate(out):
    rows = status.cells(out)
    got = [(r["label"], r["seed"], r["state"], r["done"], r["steps"]) for r in rows]
    assert got == [("grpo", 0, "finished", 4, 4), ("grpo", 1, "running", 2, 4),
                   ("grpo@long", 0, "interrupted", 1, 8), ("grpo@long", 1, "waiting", 0, 8)]
    # left: grpo seed 1 2 × 3 s + grpo@long seed 0 7 × 5 s + seed 1 8 × 5 s = 6 + 35 + 40 = 81 s, one process
    assert status.estimate(rows) == (pytest.approx(81.0), 1)


def test_the_command_prints_the_cells_and_what_is_left(out, capsys):
    assert status.main([str(out)]) == 0
    text = capsys.readouterr().out
    assert "| grpo@long seed 0 | interrupted | 1/8 | 5.0 |" in text
    assert "1 finished, 1 running, 1 interrupted, 1 waiting of 4 cells." in text
    assert "About 1 min of wall time left with 1 process(es)." in text


def test_a_folder_that_is_not_a_comparison_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        status.main([str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "no config.yaml there" in err and err.count("\n") == 1
