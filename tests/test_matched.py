"""analysis.matched: accuracy at a matched wall time and token count, and the cost to reach a target, by hand."""
from __future__ import annotations

import json
import math

import pytest

from analysis.matched import at, first_reach, matched_rows
from analysis.runs import Runs


def test_interpolation_by_hand():
    assert at([0, 10, 20], [0.2, 0.4, 0.8], 15) == pytest.approx(0.6, abs=1e-12)  # halfway between 0.4 and 0.8
    assert math.isnan(at([0, 10], [0.2, 0.4], 11))  # beyond the curve: not extrapolated
    assert first_reach([0, 10, 20], [0.2, 0.4, 0.8], 0.5) == pytest.approx(12.5, abs=1e-12)  # 10 + 10 * (0.5 - 0.4) / (0.8 - 0.4)
    assert first_reach([0, 10], [0.6, 0.7], 0.5) == 0  # already there at the start
    assert math.isnan(first_reach([0, 10], [0.2, 0.4], 0.5))


def _run(folder, method, seed, evals, rows):
    d = folder / method / f"seed{seed}"
    d.mkdir(parents=True)
    lines = [{"step": s, "eval_accuracy": a, "time_s": t, "gen_tokens": n} for s, a, t, n in evals]
    lines += [{"step": s, "n_seqs": q, "peak_rss_mb": r[0], **({"peak_rss_run_mb": r[1]} if len(r) > 1 else {})}
              for s, q, *r in rows]
    (d / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_matched_budgets_by_hand(tmp_path):
    # ppo: slow per step, few tokens; grpo: fast, many tokens; sft: no tokens. Base 0.2 everywhere.
    _run(tmp_path, "ppo", 0, [(0, 0.2, 0, 0), (4, 0.6, 400, 1000)], [(0, 32, 9000, 2000), (3, 32, 9500, 2600)])
    _run(tmp_path, "grpo", 0, [(0, 0.2, 0, 0), (4, 0.3, 100, 2000), (8, 0.5, 200, 4000)], [(0, 32, 3000)])
    _run(tmp_path, "sft", 0, [(0, 0.2, 0, 0), (4, 0.25, 50, 0)], [(0, 32, 2000)])
    rows, budget = matched_rows(Runs(tmp_path))
    # T* = min(400, 200, 50) = 50 s; N* = min(1000, 4000) = 1000 tokens (sft samples none);
    # a* = 0.2 + (0.6 - 0.2) / 2 = 0.4 (ppo's gain is the best)
    assert budget["T*"] == 50 and budget["N*"] == 1000 and abs(budget["a*"] - 0.4) < 1e-12
    got = {r["method"]: r for r in rows}
    assert got["ppo"]["accuracy at 50 s"] == "0.250"  # 0.2 + 0.4 * 50 / 400
    assert got["grpo"]["accuracy at 50 s"] == "0.250"  # 0.2 + 0.1 * 50 / 100
    assert got["ppo"]["accuracy at 1,000 tokens"] == "0.600" and got["grpo"]["accuracy at 1,000 tokens"] == "0.250"
    assert got["sft"]["accuracy at 1,000 tokens"] == "–" and got["sft"]["s to 0.400"] == "not reached"
    assert got["ppo"]["s to 0.400"] == "200"  # 0.2 -> 0.6 over 400 s: 0.4 at 200 s
    assert got["grpo"]["s to 0.400"] == "150" and got["grpo"]["tokens to 0.400"] == "3,000"  # halfway 0.3 -> 0.5
    assert got["ppo"]["tokens to 0.400"] == "500" and got["ppo"]["peak RSS (MB; +run)"] == "9500 (+2600)"
    assert got["grpo"]["peak RSS (MB; +run)"] == "3000"  # a log without the run's own growth


def test_no_method_gained_has_no_target_to_time(tmp_path):
    # base 0.2; ppo ends at 0.2, grpo at 0.1: the best gain is 0, so a* = 0.2 + 0 / 2 would be the base itself,
    # which every curve "reaches" at 0 s. No target, no time: the cells say why.
    _run(tmp_path, "ppo", 0, [(0, 0.2, 0, 0), (4, 0.2, 400, 1000)], [(0, 32, 9000)])
    _run(tmp_path, "grpo", 0, [(0, 0.2, 0, 0), (4, 0.1, 100, 2000)], [(0, 32, 3000)])
    rows, budget = matched_rows(Runs(tmp_path))
    assert math.isnan(budget["a*"])
    for r in rows:
        assert r["s to a target"] == r["tokens to a target"] == "– (no method gained)"
        assert not any(k.startswith("s to 0") for k in r)
    from analysis.matched import budget_line

    assert budget_line(budget) == "T* = 100 s, N* = 1,000 tokens, a* = – (no method gained on the base)"


def test_a_target_reached_at_the_start_is_not_a_time_of_0(tmp_path):
    # --target 0.1 below the base 0.2: every curve is there at its step-0 evaluation
    _run(tmp_path, "grpo", 0, [(0, 0.2, 0, 0), (4, 0.3, 100, 2000)], [(0, 32, 3000)])
    _run(tmp_path, "grpo", 1, [(0, 0.2, 0, 0), (4, 0.4, 120, 2400)], [(0, 32, 3000)])
    (row,), budget = matched_rows(Runs(tmp_path), target=0.1)
    assert row["s to 0.100"] == "at the start" and row["tokens to 0.100"] == "at the start"
    # --target 0.35: seed 1 only, 0.2 -> 0.4 over 120 s, so 0.35 at 120 · 0.15 / 0.2 = 90 s (2,400 · 0.75 = 1,800)
    (row,), _ = matched_rows(Runs(tmp_path), target=0.35)
    assert row["s to 0.350"] == "90 (1/2 seeds)" and row["tokens to 0.350"] == "1,800 (1/2 seeds)"


def test_a_run_with_only_its_step_0_evaluation_sets_no_budget(tmp_path):
    # sft stopped before its first step: T* and N* come from the runs that trained (min(400, 100) = 100 s)
    _run(tmp_path, "ppo", 0, [(0, 0.2, 0, 0), (4, 0.6, 400, 1000)], [(0, 32, 9000)])
    _run(tmp_path, "grpo", 0, [(0, 0.2, 0, 0), (4, 0.3, 100, 2000)], [(0, 32, 3000)])
    _run(tmp_path, "sft", 0, [(0, 0.2, 0, 0)], [])
    rows, budget = matched_rows(Runs(tmp_path))
    assert budget["T*"] == 100 and budget["N*"] == 1000
    assert {r["method"]: r["accuracy at 100 s"] for r in rows}["sft"] == "–"  # not read beyond its curve


def test_time_rows_by_hand(tmp_path):
    d = tmp_path / "ppo" / "seed0"
    d.mkdir(parents=True)
    rows = [{"step": 0, "eval_accuracy": 0.2, "time_s": 0, "time_eval": 30.0},
            {"step": 2, "eval_accuracy": 0.3, "time_s": 20, "time_eval": 10.0},
            # step 0 samples (6 s of a 7 s collect), step 1 reads a pool (no generate row): 3 s per step on average
            {"step": 0, "time_collect": 7.0, "time_generate": 6.0, "time_prepare": 1.0, "time_update": 2.0,
             "time_critic": 1.5},
            {"step": 1, "time_collect": 1.0, "time_prepare": 1.0, "time_update": 4.0, "time_critic": 0.5}]
    (d / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    from analysis.matched import time_rows

    (row,) = time_rows(Runs(tmp_path))
    # per step: collect (7 + 1) / 2 = 4, prepare 1, update 3 -> 8 s; generate (6 + 0) / 2 = 3, other 4 - 3 = 1
    assert row["s / step"] == "8.0" and row["generate"] == "3.0" and row["collect (other)"] == "1.0"
    assert row["update"] == "3.0" and row["of which critic"] == "1.0" and row["evaluations (s / run)"] == "40"


def test_seconds_read_as_a_person_reads_them():
    from analysis.matched import _sec

    assert [_sec(x) for x in (41.26, 6.44, 0.4213, 0.0011, math.nan)] == ["41.3", "6.4", "0.42", "0", "–"]
