"""experiments/sweep_5_2.py and analysis/sweep.py: the estimators by hand, and a tiny --quick sweep end to end."""
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.sweep import paired
from experiments.sweep_5_2 import maj_at_k, pass_at_k
from gcframe import forkserver

ROOT = Path(__file__).resolve().parents[1]


def test_pass_at_k_by_hand():
    # n = 4 samples, c = 1 correct: pass@1 = 1/4; pass@2 = 1 − C(3,2)/C(4,2) = 1 − 3/6 = 0.5; pass@4 = 1
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(4, 0, 4) == 0.0


def test_maj_at_k_by_hand():
    answers = ["7", "7", "3", "3", "3", "5", None, "9"]
    correct = [True, True, False, False, False, False, False, False]  # the answer is 7
    # k = 1: mean correct = 2/8; k = 2: blocks (7,7) right, (3,3) wrong, (3,5) wrong, (None,9) wrong -> 1/4
    assert maj_at_k(answers, correct, 1) == pytest.approx(0.25)
    assert maj_at_k(answers, correct, 2) == pytest.approx(0.25)
    # k = 4: (7,7,3,3) ties 2-2 and the first-seen answer 7 wins (as gcframe.evaluate) -> right; (3,5,None,9) -> 3
    assert maj_at_k(answers, correct, 4) == pytest.approx(0.5)
    # k = 8: votes 7:2, 3:3, 5:1, 9:1 -> 3, wrong
    assert maj_at_k(answers, correct, 8) == 0.0
    assert maj_at_k([None, None], [False, False], 2) == 0.0  # no votes: wrong


def test_paired_interval_by_hand():
    a = pd.Series({0: 0.5, 1: 0.6, 2: 0.7})
    b = pd.Series({0: 0.4, 1: 0.4, 2: 0.4, 3: 0.9})  # seed 3 has no partner: left out
    r = paired(a, b)
    # d = (0.1, 0.2, 0.3): mean 0.2, s = 0.1, half-width t_{0.975,2} · s/√3 = 4.303 · 0.1 / 1.732 = 0.2484
    assert r["n_seeds"] == 3 and r["mean"] == pytest.approx(0.2)
    assert r["ci_low"] == pytest.approx(0.2 - 0.24844, abs=1e-4) and r["significant"] == 0  # the interval holds 0
    # power 0.8: (4.303 + 1.061) · 0.1 / √3 = 0.3097
    assert r["mde80"] == pytest.approx(0.30969, abs=1e-4)
    assert r["mde80_5seeds"] == pytest.approx((2.776 + 0.941) * 0.1 / 5 ** 0.5, abs=1e-4)  # 0.1662 at 5 seeds
    r = paired(pd.Series({0: 0.5, 1: 0.52, 2: 0.51}), pd.Series({0: 0.4, 1: 0.4, 2: 0.4}))
    assert r["significant"] == 1  # d = (0.10, 0.12, 0.11): half-width 4.303 · 0.01/√3 = 0.025 < 0.11
    assert paired(pd.Series({0: 0.4}), pd.Series({0: 0.5}))["significant"] == 0  # one seed: no interval
    same = paired(pd.Series({0: 1.0, 1: 1.0}), pd.Series({0: 0.96, 1: 0.96}))  # d = (0.04, 0.04): s = 0
    assert same["mean"] == pytest.approx(0.04) and same["significant"] == 0  # a zero-width interval is no test
    assert math.isnan(paired(pd.Series({0: 0.4}), pd.Series({0: 0.5}))["ci_low"])


def sweep(*args):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return forkserver.run([sys.executable, "experiments/sweep_5_2.py", *args, "--no-progress"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The --quick path of a sweep config shrunk further: one level, 4 methods x 2 seeds x 2 steps, on a 2-layer
    hidden-64 Llama (its SFT base: 2 s, greedy accuracy ~0.2, so that groups carry reward variance)."""
    d = tmp_path_factory.mktemp("sweep")
    cfg = yaml.safe_load((ROOT / "experiments/configs/sweep_5_2.yaml").read_text())
    base = yaml.safe_load((ROOT / "experiments/configs" / cfg["base"]).read_text())
    base["model"] = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 128, "max_positions": 64}
    base["sft_base"] = {**base["sft_base"], "lr": 3.0e-3, "warmup_steps": 5}
    (d / "base.yaml").write_text(yaml.safe_dump(base))
    cfg["base"] = str(d / "base.yaml")
    cfg["quick"] = {"levels": {"tiny": {"task": {"operands": 3}, "sft_base": {"steps": 60}}}, "seeds": [0, 1],
                    "task": {"n_heldout": 100},
                    "train": {"steps": 2, "prompts_per_step": 2, "group_size": 2, "eval_every": 1, "eval_size": 20,
                              "sample_every": 1, "checkpoint_every": 1},
                    "final_k": 4, "final_k_size": 8}
    (d / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    out = d / "out"
    res = sweep("--config", str(d / "cfg.yaml"), "--quick", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    return d, out


def test_quick_sweep_layout_and_map(tiny):
    d, out = tiny
    lvl = out / "tiny"
    for m in ("rft", "online_rft", "grpo", "grpo_ps"):
        for s in (0, 1):
            fk = json.loads((lvl / m / f"seed{s}" / "final_k.json").read_text())
            assert fk["k"] == 4 and fk["n_problems"] == 8 and fk["steps"] == 2
            assert fk["maj@1"] == pytest.approx(fk["pass@1"])  # one vote is one sample
            assert fk["pass@1"] <= fk["pass@2"] <= fk["pass@4"] and fk["kl_ref"] >= 0
    assert set(json.loads((lvl / "base_final_k.json").read_text())) >= {"pass@4", "maj@4"}
    assert len(pd.read_csv(lvl / "summary.csv")) == 8
    end = pd.read_csv(out / "sweep_report" / "end_table.csv")  # the process that finished the sweep drew the map
    assert list(end["claim (DeepSeekMath)"]) == ["online RFT > RFT", "GRPO > online RFT", "process ≥ outcome"]
    assert (end["step"] == 2).all() and len(end.columns) == 3  # claim, step, the one level
    from analysis.sweep import write

    rep = write(out, figure=d / "fig.png", csv=d / "sum.csv")
    claims = pd.read_csv(d / "sum.csv")
    greedy = claims[claims["metric"] == "greedy"]
    assert set(greedy["claim"]) == {"online RFT > RFT", "GRPO > online RFT", "process ≥ outcome"}
    assert sorted(greedy["step"].unique()) == [1, 2] and (greedy["n_seeds"] == 2).all()
    lift = claims[claims["metric"] == "Δmaj − Δpass"]
    assert sorted(lift["K"].unique()) == [2, 4]
    table = pd.read_csv(rep / "mechanism_table.csv", dtype=str).iloc[0]
    assert table["GRPO GC down"] != "–" and len(table.iloc[-1].split(" / ")) == 4  # rft / online_rft / grpo / grpo_ps
    mech = pd.read_csv(rep / "mechanism.csv")
    assert (mech.loc[mech["method"] == "rft", "gc_neg_mass"] == 0).all()  # RFT never pushes a sample down
    assert {"zero_var_frac", "kl_ref", "reward_std"} <= set(mech.columns)
    assert (d / "fig.png").stat().st_size > 10_000 and "GRPO > online RFT" in (rep / "summary.md").read_text()


def test_rerun_skips_finished_and_resumes_interrupted(tiny):
    d, out = tiny
    run = out / "tiny" / "grpo" / "seed1"
    keep = (out / "tiny" / "rft" / "seed0" / "metrics.jsonl").read_bytes()
    # pretend the cell was killed after its step-1 checkpoint: drop the final rows and its final_k.json
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["step"] < 2))
    (run / "final_k.json").unlink()
    res = sweep("--config", str(d / "cfg.yaml"), "--quick", "--seeds", "1", "--out", str(out))  # seed 1's share
    assert res.returncode == 0, res.stderr[-3000:]
    assert "seed 0" not in res.stdout and "grpo seed 1" in res.stdout
    assert len(pd.read_csv(out / "tiny" / "summary.csv")) == 8  # rebuilt from every finished cell, not seed 1's 4
    assert (out / "tiny" / "rft" / "seed0" / "metrics.jsonl").read_bytes() == keep  # finished: not rerun
    again = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], "loss" in r) for r in again] == [(r["step"], "loss" in r) for r in rows]  # no duplicate
    assert (run / "final_k.json").is_file()


def test_bad_input_one_line_exit_2(tiny):
    d, out = tiny
    for args, needle in ((["--levels", "nope"], "unknown level"), (["--seeds", "7"], "subset of the config's seeds"),
                         (["--seeds", "a,b"], "subset of the config's seeds"), ([], "another configuration")):
        res = sweep("--config", str(d / "cfg.yaml"), *(["--quick"] if args else []), *args, "--out", str(out))
        assert res.returncode == 2 and needle in res.stderr, res.stderr[-2000:]
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    env = (out / "env.json").read_text()
    try:  # a process from other code joining the sweep: refused, nothing written
        (out / "env.json").write_text(json.dumps({**json.loads(env), "commit": "0" * 40}))
        before = (out / "tiny" / "summary.csv").read_bytes()
        res = sweep("--config", str(d / "cfg.yaml"), "--quick", "--out", str(out))
        assert res.returncode == 2 and "was started in another environment (commit differ" in res.stderr, res.stderr
        assert (out / "tiny" / "summary.csv").read_bytes() == before
    finally:
        (out / "env.json").write_text(env)
    res = forkserver.run([sys.executable, "-m", "analysis.sweep", str(d)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and "not a sweep folder" in res.stderr


def test_processes_sharing_out_split_cells_by_claim(tiny):
    d, out = tiny
    cell = out / "tiny" / "online_rft" / "seed0"
    (cell / "final_k.json").unlink()  # unfinished, and another live process holds its claim
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (cell.parent / "seed0.claim").write_text(f"{socket.gethostname()}:{other.pid}")
        res = sweep("--config", str(d / "cfg.yaml"), "--quick", "--seeds", "0", "--out", str(out))
        assert res.returncode == 0, res.stderr[-3000:]
        assert "1 cell(s) are still being trained by another process (tiny/online_rft/seed0)" in res.stdout
        assert not (cell / "final_k.json").exists()  # left to its holder
    finally:
        other.kill()
        other.wait()
    res = sweep("--config", str(d / "cfg.yaml"), "--quick", "--seeds", "0", "--out", str(out))  # the holder died
    assert res.returncode == 0, res.stderr[-3000:]
    assert "online_rft seed 0" in res.stdout and "sweep done" in res.stdout
    assert (cell / "final_k.json").is_file() and not (cell.parent / "seed0.claim").exists()
