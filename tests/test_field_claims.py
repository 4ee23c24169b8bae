"""analysis.field_claims: the run-level quantities, the seed-paired test and its verdicts, by hand; and the compact
greedy gains table a results page shows (analysis.findings.gain_summary)."""
import math

import pandas as pd
import pytest

from analysis.field_claims import CLAIMS, HIGHER_IS_BETTER, decide, run_quantities, seed_paired


def test_the_run_level_quantities_by_hand():
    # one run, 10 steps: validation accuracy 0.2 (step 0), 0.5 (2), 0.3 (5), 0.6 (8), 0.4 (10)
    evals = pd.DataFrame({"method": "a", "seed": 0, "step": [0, 2, 5, 8, 10],
                          "eval_accuracy": [0.2, 0.5, 0.3, 0.6, 0.4]})
    # wrong completions' lengths at steps 7, 8, 9 (the last fifth is steps >= 10 − 2 = 8): (4 + 6) / 2 = 5; step 9
    # had no wrong completion (NaN: not logged) and is left out
    train = pd.DataFrame({"method": "a", "seed": 0, "step": [7, 8, 9], "completion_len_wrong": [100.0, 4.0, math.nan]})
    train.loc[len(train)] = {"method": "a", "seed": 0, "step": 10, "completion_len_wrong": 6.0}
    q = run_quantities(train, evals, steps=10).iloc[0]
    assert q["val_half"] == 0.3  # the last evaluation at or before step 5
    assert q["drawdown"] == pytest.approx(0.2)  # falls: 0.5 -> 0.3 (0.2) and 0.6 -> 0.4 (0.2)
    assert q["len_wrong"] == pytest.approx(5.0)


def test_the_seed_paired_interval_by_hand():
    # d = 0.02, 0.04, 0.06: Δ 0.04, sd 0.02, SE 0.02/√3 = 0.011547; t_{0.975, 2} = 4.3027 -> ± 0.049683
    # detectable: (4.3027 + t_{0.8, 2} = 1.0607) · 0.011547 = 0.061933
    q = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2,
                      "val_half": [0.52, 0.54, 0.56, 0.50, 0.50, 0.50]})
    r = seed_paired(q, "a", "b", "val_half")
    assert r["diff"] == pytest.approx(0.04) and r["seeds"] == 3
    assert (r["lo"], r["hi"]) == pytest.approx((0.04 - 0.049683, 0.04 + 0.049683), abs=1e-5)
    assert r["mde"] == pytest.approx(0.061933, abs=1e-5)
    assert decide(r, True) == "not separated"
    q.loc[q["method"] == "b", "val_half"] = 0.40  # d = 0.12, 0.14, 0.16: the same spread, Δ 0.14 -> separated
    r = seed_paired(q, "a", "b", "val_half")
    assert decide(r, True) == "holds" and decide(r, False) == "reversed"  # lower-is-better: A's larger value loses


def test_a_seed_only_one_method_ran_is_not_paired():
    q = pd.DataFrame({"method": ["a", "a", "b"], "seed": [0, 1, 0], "drawdown": [0.1, 0.2, 0.3]})
    r = seed_paired(q, "a", "b", "drawdown")
    assert r["seeds"] == 1 and math.isnan(r["lo"])  # one pair: no interval, said undecided by rows()


def test_every_claim_names_registered_methods_a_known_quantity_and_its_source():
    from methods import REGISTRY

    for c in CLAIMS:
        assert {c.a, c.b} <= set(REGISTRY) and c.quantity in HIGHER_IS_BETTER
        assert "arXiv" in c.source or "2025" in c.source


def test_the_greedy_gains_one_row_per_method_and_subgroup_columns():
    from analysis.findings import gain_summary

    rows = pd.DataFrame([
        {"method": "sft", "metric": "greedy", "gain [95% interval]": "+0.002 [-0.024, +0.028]", "separated": "no",
         "subgroup": "all"},
        {"method": "sft", "metric": "pass@8", "gain [95% interval]": "+0.1 [+0.0, +0.2]", "separated": "yes",
         "subgroup": "all"},  # another metric: not in the greedy table
        {"method": "grpo", "metric": "greedy", "gain [95% interval]": "+0.521 [+0.475, +0.566]", "separated": "yes",
         "subgroup": "all"},
        {"method": "grpo", "metric": "greedy", "gain [95% interval]": "-0.050 [-0.080, -0.020]", "separated": "yes",
         "subgroup": "no_carry"}])
    t = gain_summary(rows)
    assert t.columns.tolist() == ["method", "all", "no_carry"]
    assert t.set_index("method").loc["grpo"].tolist() == ["+0.521 [+0.475, +0.566], separated",
                                                          "-0.050 [-0.080, -0.020], separated"]
    assert t.set_index("method").loc["sft", "all"] == "+0.002 [-0.024, +0.028]"  # not separated: no word
    assert pd.isna(t.set_index("method").loc["sft", "no_carry"])


def test_every_method_against_the_sft_baseline_turned_round_where_the_test_wrote_it_the_other_way():
    """over_sft_filtered.csv: a pair written `sft_filtered − grpo` (Δ −0.07 [−0.10, −0.04]) is shown as grpo's
    +0.070 [+0.040, +0.100] over it; rows ordered by the gain on all problems; other pairs and metrics left out."""
    from analysis.findings import versus_summary

    t = pd.DataFrame([
        {"a": "sft_filtered", "b": "grpo", "diff": -0.07, "lo": -0.10, "hi": -0.04, "separated": True,
         "metric": "greedy", "subgroup": "all"},
        {"a": "sft_filtered", "b": "grpo", "diff": 0.02, "lo": -0.01, "hi": 0.05, "separated": False,
         "metric": "greedy", "subgroup": "no_carry"},
        {"a": "ppo", "b": "sft_filtered", "diff": 0.11, "lo": 0.08, "hi": 0.14, "separated": True,
         "metric": "greedy", "subgroup": "all"},
        {"a": "ppo", "b": "grpo", "diff": 0.04, "lo": 0.01, "hi": 0.07, "separated": True,
         "metric": "greedy", "subgroup": "all"},  # neither is the baseline
        {"a": "ppo", "b": "sft_filtered", "diff": 0.2, "lo": 0.1, "hi": 0.3, "separated": True,
         "metric": "pass@8", "subgroup": "all"}])  # another metric
    v = versus_summary(t, "sft_filtered")
    assert v["method"].tolist() == ["ppo", "grpo"] and v.columns.tolist() == ["method", "all", "no_carry"]
    g = v.set_index("method")
    assert g.loc["grpo", "all"] == "+0.070 [+0.040, +0.100], separated"
    assert g.loc["grpo", "no_carry"] == "-0.020 [-0.050, +0.010]"  # not separated: no word
    assert g.loc["ppo", "all"] == "+0.110 [+0.080, +0.140], separated" and pd.isna(g.loc["ppo", "no_carry"])
