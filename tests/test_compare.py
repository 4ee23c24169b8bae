"""experiments/compare.py end to end: the quick SFT run writes the documented layout."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=ROOT):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "experiments/compare.py", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_reading_a_config_imports_no_heavy_library():
    """A bad config or argument is reported before torch, transformers and datasets load (seconds each)."""
    code = ("import sys; from gcframe.config import from_dict, load_yaml; "
            "raw = load_yaml('experiments/configs/default.yaml'); raw.pop('run', None); from_dict(raw); "
            "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"


def test_list_methods_prints_registered_names():
    res = run("--list-methods")
    assert res.returncode == 0
    rows = [line.split(None, 1) for line in res.stdout.splitlines()]
    names = [r[0] for r in rows]
    assert names[0] == "sft" and len(names) == len(set(names))
    described = dict(rows)  # a one-line description per method, from its module docstring
    assert described["sft"] == "Supervised fine-tuning: imitate every demonstration equally"
    assert described["rloo"].startswith("REINFORCE Leave-One-Out (Ahmadian et al. 2024")


@pytest.fixture(scope="module")
def quick_sft(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "out"
    res = run("--methods", "sft", "--quick", "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr[-2000:]
    return out, res


def test_quick_sft_layout(quick_sft):
    out, _ = quick_sft
    assert (out / "config.yaml").is_file()
    run_dir = out / "sft" / "seed0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval_accuracy" in r]
    assert len(train) == 8  # --quick: 8 steps
    assert all({"step", "loss", "gen_tokens", "time_s"} <= set(r) for r in train)
    assert all(0.0 <= r["eval_accuracy"] <= 1.0 for r in evals) and evals[-1]["step"] == 8
    times = [r["time_s"] for r in train]
    assert times == sorted(times)  # cumulative wall time
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and {"prompt", "completion"} <= set(samples[0])
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["method"]) == ["sft"] and 0.0 <= summary["final_accuracy"][0] <= 1.0


def test_existing_out_is_not_overwritten(quick_sft):
    out, _ = quick_sft
    before = (out / "summary.csv").read_bytes()
    res = run("--methods", "sft", "--quick", "--out", str(out))
    assert res.returncode == 2
    assert "--overwrite" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert (out / "summary.csv").read_bytes() == before


@pytest.mark.parametrize("args, needle", [
    (["--methods", "nope"], "known methods are sft"),
    (["--steps", "0"], "train.steps must be positive"),
    (["--seeds", "a,b"], "--seeds"),
    (["--model", "/no/such/model"], "not found"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    res = run(*args, "--quick", "--out", str(tmp_path / "o"))
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
