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


def test_rft_pool_progress_never_counts_past_its_target():
    """The pool's last rollout may keep more correct samples than the pool still needs (4107 of a 4096 target):
    the progress counts up to the target, so it never reads 4107/4096."""
    from types import SimpleNamespace

    import torch

    from methods.rft import RFT

    class Bar:
        def __init__(self, total):
            self.total, self.n = total, 0

        def update(self, n):
            self.n += n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    bars = []

    def progress(total, desc, unit):
        bars.append(Bar(total))
        return bars[-1]

    class Batch(SimpleNamespace):
        def __len__(self):
            return 8

    def rollout(b, g, model=None):  # B·G = 8 samples, 7 of them correct
        return Batch(texts=[{"prompt": "p", "completion": "c"}] * 8, completion_mask=torch.ones(8, 3),
                     data={"correct": torch.tensor([1.0] * 7 + [0.0])})

    train = SimpleNamespace(prompts_per_step=2, group_size=4, steps=2)  # target = min(pool_size, 2 · 2 · 4) = 16
    ctx = SimpleNamespace(cfg=SimpleNamespace(train=train), frozen=lambda name: None, progress=progress,
                          rollout=rollout)
    info = RFT(RFT.Config(), ctx).build_pool()
    # rollouts keep 7, 14, 21 correct samples: the third overshoots the target 16 by 5
    assert info["pool_size"] == 21 and info["pool_samples"] == 24
    assert bars[0].total == 16 and bars[0].n == 16  # 7 + 7 + min(7, 16 − 14) = 16, not 21
