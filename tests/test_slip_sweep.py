"""experiments/slip_sweep.py and analysis/slip.py: a level's config, a bad level refused before anything is written,
and the SFT baseline chosen on validation."""
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.slip import baseline
from experiments.slip_sweep import level_config, load_sweep
from gcframe.errors import UserError
from gcframe import forkserver

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "experiments" / "configs" / "slip_sweep.yaml"


def test_a_level_is_the_default_with_its_slip_rate_and_a_base_per_seed():
    spec = load_sweep(SWEEP, quick=False)
    cfg = level_config(spec, 0.4)
    default = yaml.safe_load((ROOT / "experiments" / "configs" / "default.yaml").read_text())
    assert cfg["task"] == {**default["task"], "demo_slip": 0.4}  # only the slip rate changes in the task
    assert cfg["sft_base"] == {**default["sft_base"], "per_seed": True}
    assert set(cfg["methods"]) <= set(spec["methods"]) and "dpo" not in cfg["methods"]
    for m in cfg["methods"]:  # each method at the default's tuned rate
        assert cfg["methods"][m] == default["methods"][m]
    assert "run" not in cfg and "tune" not in cfg
    assert load_sweep(SWEEP, quick=True)["levels"] == [0.0, 0.8]


def _bad(tmp_path, levels) -> Path:
    bad = tmp_path / "sweep.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load(SWEEP.read_text()), "base": str(SWEEP.parent / "default.yaml"),
                                   "levels": levels}))
    return bad


def test_a_slip_rate_outside_zero_one_is_one_line_and_nothing_is_written(tmp_path):
    res = forkserver.run([sys.executable, str(ROOT / "experiments" / "slip_sweep.py"), "--config",
                          str(_bad(tmp_path, [0.0, 1.2])), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "levels in" in res.stderr and "slip rates in [0, 1]" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("levels", [[-0.1], [], "0.4", [True]])
def test_every_bad_level_list_is_refused_by_the_same_check(tmp_path, levels):  # the CLI case above, in-process
    with pytest.raises(UserError, match=r"must be a list of slip rates in \[0, 1\]"):
        load_sweep(_bad(tmp_path, levels), quick=False)


class FakeRuns:
    def __init__(self, rows, split="validation"):
        self.out, self.split, self.rows = Path("sweep/slip0.4"), split, pd.DataFrame(rows)

    def eval_split(self):
        return self.split

    def final_eval(self):
        return self.rows


def test_the_sft_baseline_is_the_better_on_validation():
    # sft 0.30, 0.34 (mean 0.32) against sft_filtered 0.36, 0.40 (mean 0.38): sft_filtered
    rows = [{"method": "sft", "eval_accuracy": 0.30}, {"method": "sft", "eval_accuracy": 0.34},
            {"method": "sft_filtered", "eval_accuracy": 0.36}, {"method": "sft_filtered", "eval_accuracy": 0.40},
            {"method": "grpo", "eval_accuracy": 0.9}]  # not a baseline, however good
    assert baseline(FakeRuns(rows)) == ("sft_filtered", pytest.approx(0.38))
    assert baseline(FakeRuns(rows[:2]))[0] == "sft"  # only one baseline ran
    with pytest.raises(UserError, match="chosen on validation"):
        baseline(FakeRuns(rows, split="test"))
    with pytest.raises(UserError, match="has neither sft nor sft_filtered"):
        baseline(FakeRuns(rows[4:]))


class FakeLevel:
    """A level's runs as analysis.slip.accuracy_rows reads them: per-problem outcomes, each seed's base, training rows."""

    def __init__(self, out):
        def rows(method, greedy):  # seeds 0, 1 x problems p0, p1, in that order
            return [{"method": method, "seed": s, "problem": f"p{p}", "greedy": g, "passk": 1.0}
                    for (s, p), g in zip([(0, 0), (0, 1), (1, 0), (1, 1)], greedy)]

        self.frame = pd.DataFrame(rows("sft", [1, 0, 1, 1]) + rows("grpo", [1, 1, 1, 1]))
        self.base = pd.DataFrame(rows("SFT base", [0, 0, 1, 0]))
        self.train = pd.DataFrame([{"method": "sft_filtered", "demos_accepted": 7.0}, {"method": "sft", "loss": 1.0}])

    def outcomes(self):
        return [(self.frame, ["greedy", "passk"], "rescored", 4)]

    def base_outcomes(self):
        return self.base


def test_a_levels_accuracies_are_means_over_seeds_and_problems(monkeypatch):
    import analysis.runs
    from analysis.slip import accuracy_rows

    monkeypatch.setattr(analysis.runs, "Runs", FakeLevel)
    rows = {r["method"]: r for r in accuracy_rows(Path("sweep/slip0.4"))}
    assert list(rows) == ["SFT base", "sft", "grpo"]  # the bases first, then the methods
    # base: (0 + 0 + 1 + 0) / 4 = 0.25; sft: (1 + 0 + 1 + 1) / 4 = 0.75; grpo: 4 / 4 = 1
    assert [rows[m]["greedy"] for m in rows] == [0.25, 0.75, 1.0]
    assert all(r["slip"] == 0.4 and r["seeds"] == 2 and r["problems"] == 2 for r in rows.values())
    assert all(r["demos_accepted"] == 7 for r in rows.values())  # sft_filtered's logged count, the level's


def test_the_pages_table_has_a_row_per_level_with_the_baselines_and_each_gain():
    from analysis.slip import shown_table

    gains = pd.DataFrame([{"slip": 0.4, "method": "grpo", "baseline": "sft_filtered", "gain": 0.05, "lo": 0.01,
                           "hi": 0.09, "separated": True},
                          {"slip": 0.4, "method": "ppo", "baseline": "sft_filtered", "gain": 0.02, "lo": -0.01,
                           "hi": 0.05, "separated": False}])
    acc = pd.DataFrame([{"slip": 0.4, "method": m, "greedy": g, "demos_accepted": 2345.0}
                        for m, g in (("SFT base", 0.5), ("sft", 0.52), ("sft_filtered", 0.61), ("grpo", 0.66),
                                     ("ppo", 0.63))])
    row = shown_table(gains, acc).iloc[0].to_dict()
    assert row == {"slip": "0.4", "demonstrations accepted": "2,345", "SFT base": "0.500", "sft": "0.520",
                   "sft_filtered": "0.610", "baseline (validation)": "sft_filtered",
                   "grpo − baseline": "+0.050 [+0.010, +0.090]*", "ppo − baseline": "+0.020 [-0.010, +0.050]"}
