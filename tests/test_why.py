"""analysis.why: the per-method table of what the logs show, checked on hand-made rows."""
from __future__ import annotations

import json

import pytest

from analysis.runs import Runs
from analysis.why import probe_gc_shares, why_rows


def _run(folder, method, rows, evals):
    d = folder / method / "seed0"
    d.mkdir(parents=True)
    lines = [json.dumps({"step": s, **e}) for s, e in evals] + [json.dumps({"step": s, **r}) for s, r in rows]
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_columns_by_hand(tmp_path):
    # grpo: 6 steps; sampled accuracy 0.1, 0.2, 0.3 (first 3: mean 0.2) and 0.5, 0.6, 0.7 (last 3: mean 0.6)
    rows = [(s, {"accuracy": a, "zero_var_groups": z, "truncated_frac": 0.5, "entropy": 1.0, "kl_ref": 0.01 * s,
                 "gc_right_mass": 0.7, "gc_wrong_mass": -0.3, "gc_neg_mass": 0.3})
            for s, a, z in zip(range(6), (0.1, 0.2, 0.3, 0.5, 0.6, 0.7), (1, 1, 0, 0, 0, 0))]
    _run(tmp_path, "grpo", rows, [(0, {"eval_accuracy": 0.25}), (6, {"eval_accuracy": 0.5})])
    _run(tmp_path, "sft", [(s, {"entropy": 2.0}) for s in range(6)],
         [(0, {"eval_accuracy": 0.25}), (6, {"eval_accuracy": 0.125, "eval_kl_ref": 1.5})])
    _run(tmp_path, "ppo", [(s, {"zero_var_groups": 1.0, "value_loss": 0.1}) for s in range(2)],
         [(0, {"eval_accuracy": 0.25}), (2, {"eval_accuracy": 0.25})])
    gc = {"probe": [{"reward": 1.0}, {"reward": 0.0}, {"reward": 0.0}],
          "methods": {"grpo": {"gc": [[2.0, 2.0], [-1.0, -1.0], [-1.0, -1.0]]},  # Σ|GC| 8: right +4/8, wrong −4/8
                      "sft": {"gc": [[1.0], None, [1.0]]}}}  # a row it does not weight (None) is left out
    (tmp_path / "gc_view.json").write_text(json.dumps(gc))
    got = {r["method"]: r for r in why_rows(Runs(tmp_path))}
    g = got["grpo"]
    assert g["Δ accuracy"] == "+0.250" and g["sampled acc"] == "0.20 → 0.60"
    assert g["zero-var groups"] == "0.33"  # (1 + 1 + 0 + 0 + 0 + 0) / 6
    assert g["truncated"] == "0.50 → 0.50" and g["KL to ref"] == "0.040"  # no eval KL: k3 of the last 3 steps,
    # (0.03 + 0.04 + 0.05) / 3
    assert g["GC down"] == "0.30" and g["GC right / wrong"] == "+0.70 / -0.30" and g["probe GC r / w"] == "+0.50 / -0.50"
    assert got["ppo"]["zero-var groups"] == "–"  # one sample per prompt and a critic: there are no groups
    s = got["sft"]
    assert s["Δ accuracy"] == "-0.125" and s["KL to ref"] == "1.500"  # the evaluation's KL when there is one
    assert s["sampled acc"] == "–" and s["truncated"] == "–" and s["GC right / wrong"] == "–" and s["GC down"] == "–"
    assert s["probe GC r / w"] == "+0.50 / +0.50"


def test_probe_shares_without_a_gc_view():
    assert probe_gc_shares(None) == {}
    assert probe_gc_shares({"probe": [{"reward": 1}], "methods": {"x": {"gc": [[0.0]]}}}) == {}  # no mass
    assert probe_gc_shares({"probe": [{"reward": 1}, {"reward": 0}], "methods": {"x": {"gc": [[3.0], [-1.0]]}}}) \
        == {"x": (pytest.approx(0.75), pytest.approx(-0.25))}


def test_dynamic_sampling_columns(tmp_path):
    # grpo@ds: 4 steps drawing 8, 8, 12, 16 prompts (mean 11.0); zero-variance share of the drawn groups 0.5, 0.5,
    # 0.25, 0.75 (mean 0.50), of the trained ones 0 throughout; grpo alone draws B and logs no ds_ columns
    ds = [(s, {"zero_var_groups": 0.0, "ds_zero_var_drawn": z, "ds_prompts_drawn": n})
          for s, z, n in zip(range(4), (0.5, 0.5, 0.25, 0.75), (8, 8, 12, 16))]
    _run(tmp_path, "grpo@ds", ds, [(0, {"eval_accuracy": 0.25}), (4, {"eval_accuracy": 0.5})])
    _run(tmp_path, "grpo", [(s, {"zero_var_groups": 0.5}) for s in range(4)],
         [(0, {"eval_accuracy": 0.25}), (4, {"eval_accuracy": 0.25})])
    got = {r["method"]: r for r in why_rows(Runs(tmp_path))}
    assert got["grpo@ds"]["zero-var groups"] == "0.50 (0.00 trained)" and got["grpo@ds"]["prompts / step"] == "11.0"
    assert got["grpo"]["zero-var groups"] == "0.50" and got["grpo"]["prompts / step"] == "–"
