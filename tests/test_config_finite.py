"""Every number of a config is finite: YAML's .inf and .nan are refused when the config is read, naming the option,
before a base is trained (an infinite rate trained stage 1 for 43 s, then stopped on a non-finite loss); and a resumed
run's summary row keeps its initial accuracy."""
import math
import sys
from pathlib import Path

import pytest
import yaml

from gcframe.config import from_dict
from gcframe.errors import UserError
from gcframe import forkserver
from tests.test_resume import cli_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("raw, where", [
    ({"train": {"lr": math.inf}}, "train.lr is inf"),
    ({"train": {"lr": -math.inf}}, "train.lr is -inf"),
    ({"sft_base": {"lr": math.nan}}, "sft_base.lr is nan"),
    ({"methods": {"grpo": {"beta": math.inf}}}, "methods.grpo.beta is inf"),
    ({"methods": {"dpo": {"train": {"lr": math.inf}}}}, "methods.dpo.train.lr is inf"),
    ({"task": {"n_demos": 100}, "train": {"steps": 3, "eval_points": 2, "lr": 1e-4},
      "methods": {"dapo": {"clip_eps_high": math.nan}}}, "methods.dapo.clip_eps_high is nan"),
])
def test_a_non_finite_number_anywhere_is_refused_naming_it(raw, where):
    with pytest.raises(UserError, match=where + ": every number in a config must be finite"):
        from_dict(raw)


def test_compare_refuses_an_infinite_rate_before_anything_is_written(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"train": {"lr": ".inf"}}).replace("'.inf'", ".inf"))
    res = forkserver.run([sys.executable, str(ROOT / "experiments" / "compare.py"), "--config", str(tmp_path / "c.yaml"),
                          "--quick", "--methods", "sft", "--out", str(tmp_path / "out")], capture_output=True,
                         text=True, cwd=ROOT, env={**cli_env(), "GCFRAME_CACHE": str(tmp_path / "cache")})  # the
    # other command-line tests' environment: forked from their server, not one of its own (~7 s of a core)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert "train.lr is inf" in res.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_a_resumed_run_keeps_its_initial_accuracy_in_the_summary(tmp_path):
    """--resume's trainer no longer holds step 0 in memory (res initial_accuracy None); the row reads it from
    metrics.jsonl, as base_accuracy already was."""
    import json

    from experiments.compare import summary_row

    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval_accuracy": 0.296}) + "\n"
                                            + json.dumps({"step": 120, "eval_accuracy": 0.8}) + "\n")
    res = {"initial_accuracy": None, "final_accuracy": 0.8, "time_s": 1.0, "gen_tokens": 10, "steps": 120}
    row = summary_row("grpo", 0, tmp_path, res)
    assert row["initial_accuracy"] == row["base_accuracy"] == 0.296 and row["final_accuracy"] == 0.8


def test_a_step_count_beyond_the_cap_is_refused_unless_forced(tmp_path):
    """train.steps 10**20 (the user meant a large number, or typed one wrong) waited for ever at flat memory: above
    MAX_STEPS (1,000,000) it is refused when the config is read, in one line naming the cap and train.force_steps;
    with train.force_steps: true it is taken; the cap itself is allowed. Through compare.py: exit 2, nothing
    written."""
    from gcframe.config import MAX_STEPS

    with pytest.raises(UserError, match=r"train.steps 100,000,000,000,000,000,000 is above the cap of 1,000,000 .*"
                                        r"set train.force_steps: true"):
        from_dict({"train": {"steps": 10**20}})
    assert from_dict({"train": {"steps": 10**20, "force_steps": True}}).train.steps == 10**20
    assert from_dict({"train": {"steps": MAX_STEPS}}).train.steps == 1_000_000
    res = forkserver.run([sys.executable, str(ROOT / "experiments" / "compare.py"), "--quick", "--methods", "sft",
                          "--steps", str(10**20), "--out", str(tmp_path / "out")], capture_output=True,
                         text=True, cwd=ROOT, env={**cli_env(), "GCFRAME_CACHE": str(tmp_path / "cache")})
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert "is above the cap of 1,000,000" in res.stderr and not (tmp_path / "out").exists()
