"""analysis.paired: paired differences of per-problem outcomes (seeds × problems), by hand and by simulation."""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from analysis.paired import (
    components_variance,
    describe,
    detectable_difference,
    paired_difference,
    pairwise,
    probability_of_improvement,
    t_interval,
    two_way,
    unpaired_difference,
)
from experiments.paired_coverage import simulate, truth
from gcframe.errors import UserError


def frame(tables: dict, metric: str = "greedy", problems=None) -> pd.DataFrame:
    """Rows (method, seed, problem, metric) from {method: S × P outcomes} (seeds 0.., problems p0..) or
    {(method, seed): outcomes by problem}."""
    rows = []
    for key, y in tables.items():
        if isinstance(key, tuple):
            (method, seed), y = key, dict(y)
            rows += [{"method": method, "seed": seed, "problem": p, metric: v} for p, v in y.items()]
            continue
        y = np.asarray(y, float)
        names = problems or [f"p{j}" for j in range(y.shape[1])]
        rows += [{"method": key, "seed": s, "problem": names[j], metric: y[s, j]}
                 for s in range(y.shape[0]) for j in range(y.shape[1])]
    return pd.DataFrame(rows)


def test_two_seeds_three_problems_by_hand():
    # y_A = [[1,1,1],[1,1,0]], y_B = [[0,0,1],[1,0,0]]  ->  d = [[1,1,0],[0,1,0]], D = 3/6 = 0.5
    # seed means 2/3, 1/3: MS_S = P·Σ(d̄_s − D)²/(S−1) = 3·(1/36 + 1/36)/1 = 1/6
    # problem means 1/2, 1, 0: MS_P = S·Σ(d̄_p − D)²/(P−1) = 2·(0 + 1/4 + 1/4)/2 = 1/2
    # residuals d − d̄_s − d̄_p + D: [[1/3, −1/6, −1/6], [−1/3, 1/6, 1/6]]: SS_E = 2/9 + 4/36 = 1/3,
    # MS_E = SS_E/((S−1)(P−1)) = (1/3)/2 = 1/6
    # Var(D) = (1/6 + 1/2 − 1/6)/6 = 1/12, SE = 0.288675
    # Satterthwaite's ν = (1/2)² / ((1/6)²/1 + (1/2)²/2 + (1/6)²/2) = 0.25/(12/72) = 1.5, but the interval's
    # reference never exceeds S − 1 = 1 df (analysis.paired.reference_df): min(1.5, 1) = 1, t_{0.975,1} = 12.7062
    # interval 0.5 ± 12.7062·0.288675 = 0.5 ± 3.66797 = [−3.16797, 4.16797]: not separated
    # seed means A 1, 2/3 and B 1/3, 1/3: A wins all 4 pairs, P(A>B) = 1
    df = frame({"grpo": [[1, 1, 1], [1, 1, 0]], "ppo": [[0, 0, 1], [1, 0, 0]]})
    r = paired_difference(df, "grpo", "ppo", "greedy")
    tw = two_way(np.array([[1, 1, 0], [0, 1, 0]]))
    assert (tw["ms_s"], tw["ms_p"], tw["ms_e"]) == pytest.approx((1 / 6, 1 / 2, 1 / 6), abs=1e-12)
    assert r["diff"] == pytest.approx(0.5) and r["se"] == pytest.approx(math.sqrt(1 / 12), abs=1e-12)
    assert r["df"] == 1.0 and components_variance(0.0, 1 / 6, 1 / 6, 2, 3)[1] == pytest.approx(1.5, abs=1e-12)
    assert (r["lo"], r["hi"]) == pytest.approx((-3.16797, 4.16797), abs=1e-4)
    assert r["separated"] is False and r["p_improve"] == 1.0
    assert (r["n_seeds"], r["n_problems"], r["levels"]) == (2, 3, "seeds × problems")
    # components: σ²_S = (MS_S − MS_E)/P = 0, σ²_P = (MS_P − MS_E)/S = 1/6, σ²_E = MS_E = 1/6
    assert (r["var_seed"], r["var_problem"], r["var_resid"]) == pytest.approx((0, 1 / 6, 1 / 6), abs=1e-12)


def test_both_components_truncated_at_zero_keep_the_seed_term_and_its_seed_df():
    # d = [[1,0,0],[0,0,1]]: seed means 1/3, 1/3 -> MS_S = 0; problem means 1/2, 0, 1/2 -> MS_P = 2·(1/6)/2 = 1/6;
    # residuals ±1/2 at the four corners -> MS_E = 1/2. σ²_S = max((0 − 1/2)/3, 0) = 0, σ²_P = max((1/6 − 1/2)/2, 0)
    # = 0: Var = MS_E/(S·P) = 1/12. The truncated mean squares M_S = M_P = MS_E = 1/2 keep their df:
    # Satterthwaite's ν = (1/2 + 1/2 − 1/2)² / ((1/2)²/1 + (1/2)²/2 + (1/2)²/2) = (1/4)/(1/2) = 0.5, below S − 1 = 1:
    # the interval keeps 0.5
    r = paired_difference(frame({"a": [[1, 0, 0], [0, 0, 1]], "b": np.zeros((2, 3))}), "a", "b", "greedy")
    assert r["se"] == pytest.approx(math.sqrt(1 / 12), abs=1e-12) and r["df"] == pytest.approx(0.5, abs=1e-12)
    assert components_variance(0.0, 0.0, 1 / 2, 2, 3)[1] == pytest.approx(0.5, abs=1e-12)
    assert (r["var_seed"], r["var_problem"], r["var_resid"]) == pytest.approx((0, 0, 1 / 2), abs=1e-12)
    assert two_way(np.array([[1, 0, 0], [0, 0, 1]]))["truncated"] == "seed+problem"


def test_a_seed_term_the_mean_squares_show_is_kept_where_the_old_floor_dropped_it():
    # d = [[−1,−1,−1,0],[0,0,1,−1]], S = 2, P = 4. Seed means −3/4, 0; D = −3/8:
    #   MS_S = P·Σ(d̄_s − D)²/(S−1) = 4·(9/64 + 9/64) = 9/8
    # problem means −1/2, −1/2, 0, −1/2 (deviations −1/8, −1/8, 3/8, −1/8): MS_P = 2·(12/64)/3 = 1/8
    # residuals d − d̄_s − d̄_p + D: row 1 (−1/8, −1/8, −5/8, 7/8), row 2 their negatives:
    #   SS_E = 2·(1 + 1 + 25 + 49)/64 = 19/8, MS_E = (19/8)/3 = 19/24
    # MS_S + MS_P = 5/4 < 2·MS_E = 19/12: the rule that floors at MS_E/(S·P) fires and drops the seed term
    #   (Var = 19/192, SE 0.3146, 3 df: −0.375 ± 3.1824·0.3146 = [−1.376, +0.626]), although MS_S > MS_E.
    # Truncated components: σ²_S = (9/8 − 19/24)/4 = 1/12, σ²_P = max((1/8 − 19/24)/2, 0) = 0, σ²_E = 19/24
    #   Var = (1/12)/2 + 0 + (19/24)/8 = 8/192 + 19/192 = 9/64, SE = 3/8
    #   M_S = 19/24 + 4·(1/12) = 9/8 (1 df), M_P = 19/24 (3 df), −MS_E (3 df):
    #   Satterthwaite's ν = (9/8)² / ((9/8)² + (19/24)²/3 + (19/24)²/3) = (2187/1728)/(2909/1728) = 2187/2909 = 0.75180,
    #   below S − 1 = 1, so kept: t_{0.975, 0.75180} = 28.5153: −0.375 ± 28.5153·0.375 = [−11.068, +10.318]
    d = np.array([[-1, -1, -1, 0], [0, 0, 1, -1]])
    tw = two_way(d)
    assert (tw["ms_s"], tw["ms_p"], tw["ms_e"]) == pytest.approx((9 / 8, 1 / 8, 19 / 24), abs=1e-12)
    assert tw["ms_s"] + tw["ms_p"] < 2 * tw["ms_e"]  # where the seed term used to be dropped
    assert (tw["var_seed"], tw["var_problem"], tw["var_resid"]) == pytest.approx((1 / 12, 0, 19 / 24), abs=1e-12)
    assert tw["var"] == pytest.approx(9 / 64, abs=1e-12) and tw["df"] == pytest.approx(2187 / 2909, abs=1e-12)
    assert components_variance(1 / 12, 0.0, 19 / 24, 2, 4)[1] == pytest.approx(2187 / 2909, abs=1e-12)
    assert tw["truncated"] == "problem"
    r = t_interval(tw["diff"], tw["var"], tw["df"])
    assert (r["lo"], r["hi"]) == pytest.approx((-11.068, 10.318), abs=1e-3) and not r["separated"]


def test_probability_of_improvement_by_hand_count():
    # seed means (4 problems): A 2/4, 3/4, 2/4 and B 2/4, 1/4, 1/4. Pairs A_i > B_j: A=0.5 beats 0.25 twice and
    # ties 0.5 (½): 2.5; A=0.75 beats all three: 3; A=0.5 again: 2.5. P(A>B) = 8/9
    a = [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0]]
    b = [[1, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert paired_difference(frame({"a": a, "b": b}), "a", "b", "greedy")["p_improve"] == pytest.approx(8 / 9)
    assert paired_difference(frame({"a": a, "b": b}), "b", "a", "greedy")["p_improve"] == pytest.approx(1 / 9)
    assert probability_of_improvement([0.5, 0.5], [0.5, 0.5]) == 0.5  # all ties


def test_runs_on_different_problem_sets_are_refused_naming_both_sets():
    df = frame({("grpo", 0): {f"p{i}": 1 for i in range(5)}, ("ppo", 0): {f"p{i}": 0 for i in range(4)}})
    with pytest.raises(UserError) as e:
        paired_difference(df, "grpo", "ppo", "greedy")
    msg = str(e.value)
    m = re.fullmatch(r"grpo seed 0 was evaluated on 5 problems \(set ([0-9a-f]{6})\) but ppo seed 0 on 4 "
                     r"\(set ([0-9a-f]{6})\): re-score both on one set "
                     r"\(python -m gcframe.evaluate OUT --problems N\)", msg)
    assert m and m.group(1) != m.group(2), msg
    # same size, other ids: the digests tell them apart
    other = frame({("grpo", 0): {"p0": 1, "p1": 0}, ("ppo", 0): {"p0": 1, "p9": 0}})
    with pytest.raises(UserError, match=r"on 2 problems \(set [0-9a-f]{6}\) but ppo seed 0 on 2 \(set"):
        paired_difference(other, "grpo", "ppo", "greedy")
    # a and b agree per seed, but seed 1 was scored on other problems than seed 0
    seeds = frame({(m, s): {f"p{i + s}": 1 for i in range(3)} for m in ("grpo", "ppo") for s in (0, 1)})
    with pytest.raises(UserError, match=r"^grpo seed 0 was evaluated on 3 problems .* but grpo seed 1 on 3 "):
        paired_difference(seeds, "grpo", "ppo", "greedy")


def test_pairs_only_common_seeds_and_refuses_bad_input_in_one_line():
    df = pd.concat([frame({"grpo": np.ones((3, 4))}), frame({"ppo": np.zeros((2, 4))})])
    assert paired_difference(df, "grpo", "ppo", "greedy")["n_seeds"] == 2  # seed 2 of grpo has no partner
    apart = frame({("grpo", 0): {"p0": 1, "p1": 1}, ("ppo", 1): {"p0": 0, "p1": 1}})
    cases = [(apart, "greedy", "grpo has seeds 0 and ppo seeds 1: no seed in common"),
             (pd.concat([df, df.iloc[:1]]), "greedy", "grpo seed 0 has more than one row for problem 'p0'"),
             (df, "majk", "lack the column(s) majk"),
             (df.assign(greedy=df["greedy"].where(df.index != 1)), "greedy", "grpo has no greedy value for 1")]
    for data, metric, text in cases:
        with pytest.raises(UserError, match=re.escape(text)) as e:
            paired_difference(data, "grpo", "ppo", metric)
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="no per-problem outcomes for method 'dpo'"):
        paired_difference(df, "grpo", "dpo", "greedy")


def test_one_seed_is_the_paired_t_interval_over_problems():
    # d = [1, 0, 0, 1] over 4 problems: D = 0.5, MS_P = Σ(d − 0.5)²/3 = 1/3, Var = MS_P/P = 1/12, 3 df;
    # half-width t_{0.975,3}·√(1/12) = 3.18245·0.288675 = 0.91869
    df = pd.concat([frame({"grpo": [[1, 1, 0, 1]]}), frame({"ppo": [[0, 1, 0, 0], [1, 1, 1, 1]]})])
    r = paired_difference(df, "grpo", "ppo", "greedy")
    assert (r["levels"], r["n_seeds"], r["df"]) == ("problems", 1, 3)
    assert (r["lo"], r["hi"]) == pytest.approx((0.5 - 0.91869, 0.5 + 0.91869), abs=1e-4)
    row = pairwise(df).iloc[0]
    # one seed: no P(A>B) (one score per method: always 0, ½ or 1), and the interval's reach said
    assert describe(row).endswith("not separated, 1 seed: the interval covers this run's problems, not a new "
                                  "training run") and "P(A>B)" not in describe(row)
    assert row["problems_to_halve"] == 16 and row["seeds_to_halve"] == "unknown (1 seed)"  # Var = MS_P/P': 4 × P


def test_detectable_difference_from_known_components():
    # σ²_S = 1e-4, σ²_P = 4e-3, σ²_E = 4e-2, S = 3, P = 400:
    # Var = 1e-4/3 + 4e-3/400 + 4e-2/1200 = 3.3333e-5 + 1e-5 + 3.3333e-5 = 7.6667e-5, SE = 0.0087560
    # expected mean squares MS_S = 0.04 + 400·1e-4 = 0.08, MS_P = 0.04 + 3·4e-3 = 0.052, MS_E = 0.04:
    # Satterthwaite's ν = 0.092² / (0.08²/2 + 0.052²/399 + 0.04²/798) = 0.008464/0.0032088 = 2.6378; the design's
    # ν is the kept test's, min(2.6378, S − 1) = 2: MDE = (t_{0.975,2} + t_{0.80,2})·SE = (4.30265 + 1.06066)·0.0087560 = 0.046961
    r = detectable_difference(1e-4, 4e-3, 4e-2, 3, 400)
    assert r["se"] == pytest.approx(0.0087560, abs=1e-6) and r["df"] == 2.0
    assert components_variance(1e-4, 4e-3, 4e-2, 3, 400)[1] == pytest.approx(2.6378, abs=1e-3)
    assert r["mde"] == pytest.approx(0.046961, abs=1e-5)
    # halving: Var/4 = 1.9167e-5. More problems leave σ²_S/S = 3.33e-5 > Var/4: not reachable. More seeds:
    # (σ²_S + σ²_E/P)/(Var/4 − σ²_P/P) = (1e-4 + 1e-4)/(1.9167e-5 − 1e-5) = 21.8 -> 22 seeds
    assert r["problems_to_halve"] == "not reachable" and r["seeds_to_halve"] == 22
    # σ²_S = 0, σ²_P = 0.01, σ²_E = 0.04, S = 3, P = 100: Var = 1e-4 + 0.04/300 = 2.3333e-4; with no seed
    # component four times the problems quarter it: (0.01 + 0.04/3)/(2.3333e-4/4) = 400; more seeds leave
    # σ²_P/P = 1e-4 > Var/4
    r = detectable_difference(0.0, 0.01, 0.04, 3, 100)
    assert r["problems_to_halve"] == 400 and r["seeds_to_halve"] == "not reachable"
    assert r["df"] == 2.0  # S − 1, where Satterthwaite's is 0.07² / (0.04²/2 + 0.07²/99 + 0.04²/198) = 5.7138
    assert components_variance(0.0, 0.01, 0.04, 3, 100)[1] == pytest.approx(5.7138, abs=1e-3)


def _coverage(n: int, effect: float, seed_sd: float, rng) -> tuple[float, float, float]:
    """(coverage of the truth, rate of excluding 0, mean share of σ²_S/S in Var(D)) over n experiments, S=3, P=400."""
    ya, yb = simulate(rng, n, 3, 400, effect, seed_sd)
    true, cover, sep, share = truth(effect, seed_sd), 0, 0, 0.0
    for d in ya - yb:
        tw = two_way(d)
        r = t_interval(tw["diff"], tw["var"], tw["df"])
        cover += r["lo"] <= true <= r["hi"]
        sep += r["separated"]
        share += tw["var_seed"] / 3 / tw["var"]
    return cover / n, sep / n, share / n


def test_the_interval_covers_a_known_difference():
    # experiments/paired_coverage.py's model: logistic problem difficulty, problem × method interaction, per-seed
    # method effects (SD 0.1 logits: a quarter of Var(D)); truth by quadrature (+0.031 for 0.2 logits)
    cover, sep, share = _coverage(2000, 0.2, 0.1, np.random.default_rng(0))
    assert 0.15 < share < 0.4  # the seeds matter here: an interval that ignores them covers less
    # no component dropped, ν = S − 1 = 2: it over-covers here and separates the true +0.031 rarely (0.0115 at
    # this seed), though more often than a true 0 (0.0005 at its seed: test_no_difference_is_rarely_separated)
    assert 0.93 <= cover and sep > 0.005
    # seeds dominating (SD 0.3: ~60% of Var(D)) with 3 seeds: still at least 0.93
    cover, _, share = _coverage(1000, 0.2, 0.3, np.random.default_rng(1))
    assert share > 0.5 and 0.93 <= cover


def test_no_difference_is_rarely_separated():
    cover, sep, _ = _coverage(4000, 0.0, 0.1, np.random.default_rng(2))
    assert sep <= 0.05 and cover == pytest.approx(1 - sep)  # the truth is 0: covering it is not separating


def test_pairwise_rows_describe_and_unpaired_ratio():
    rng = np.random.default_rng(3)
    ya, yb = simulate(rng, 1, 3, 200, 0.5, 0.05)
    _, yc = simulate(rng, 1, 3, 200, 0.0, 0.05)
    df = frame({"grpo": ya[0], "online_rft": yb[0], "sft": yc[0]})
    df["passk"] = df["greedy"]
    df.loc[df["method"] == "sft", "passk"] = np.nan  # sft scored greedy only: no passk pairs with it
    rows = pairwise(df, methods=["grpo", "online_rft", "sft"])
    assert [(r.a, r.b, r.metric) for r in rows.itertuples()] == [
        ("grpo", "online_rft", "greedy"), ("grpo", "online_rft", "passk"), ("grpo", "sft", "greedy"),
        ("online_rft", "sft", "greedy")]
    r = rows.iloc[0]
    u = unpaired_difference(df, "grpo", "online_rft", "greedy")
    ta, tb = two_way(ya[0]), two_way(yb[0])
    assert u["diff"] == pytest.approx(r["diff"]) and u["se"] ** 2 == pytest.approx(ta["var"] + tb["var"])
    # the methods share each problem's difficulty (SD 1.5 logits): pairing removes it from the SE (the half-widths
    # also carry each interval's t quantile, whose ν the paired one draws mostly from 2 seed df)
    assert r["se"] < 0.8 * u["se"]
    assert r["narrowing"] == pytest.approx((r["hi"] - r["lo"]) / (u["hi"] - u["lo"]))
    design = detectable_difference(r["var_seed"], r["var_problem"], r["var_resid"], 3, 200)
    assert r["mde"] == design["mde"] and r["seeds_to_halve"] == design["seeds_to_halve"]
    assert re.fullmatch(r"grpo − online_rft, greedy: [+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\], P\(A>B\) "
                        r"\d\.\d\d, (separated|not separated)", describe(r)), describe(r)
    two = pairwise(frame({"grpo": [[1, 1, 1], [1, 1, 0]], "ppo": [[0, 0, 1], [1, 0, 0]]})).iloc[0]
    assert describe(two) == "grpo − ppo, greedy: +0.500 [-3.168, +4.168], P(A>B) 1.00, not separated, 2 seeds"


def test_the_dropping_rule_and_the_vectorised_interval_agree_with_two_way():
    from analysis.paired import components_variance, mean_squares, reference_df, truncated_components
    from experiments.paired_coverage import dropping

    # the hand case above: MS_S + MS_P = 5/4 < 19/12 fires; Var = MS_E/(S·P) = (19/24)/8 = 19/192 on (S−1)(P−1) = 3 df
    fires, var, df = dropping(9 / 8, 1 / 8, 19 / 24, 2, 4)
    assert bool(fires) and float(var) == pytest.approx(19 / 192, abs=1e-12) and float(df) == 3
    # many tables at once (experiments/paired_coverage.py) give each table's two_way Var and ν
    d = np.random.default_rng(5).normal(0, 1, (6, 3, 40)) + np.random.default_rng(6).normal(0, 0.3, (6, 3, 1))
    D, ms_s, ms_p, ms_e = mean_squares(d)
    var, df = components_variance(*truncated_components(ms_s, ms_p, ms_e, 3, 40), ms_e, 3, 40)
    for i in range(6):
        tw = two_way(d[i])
        assert (tw["diff"], tw["var"], tw["df"]) == pytest.approx((D[i], var[i], reference_df(3, df[i])), rel=1e-12)


def test_the_committed_coverage_table_covers_the_design():
    """results/paired_coverage/coverage.csv (python experiments/reproduce.py paired_coverage), shown on
    docs/concepts/statistics.md: binary outcomes at the median components of results/default's and smollm2_slip's
    greedy and pass@1 pairs (components.csv, from their committed outcomes), shares 0–0.9 at S = 2, 3, 5 and P = 500,
    20,000 experiments a cell; and the numbers the page reads from it."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "results" / "paired_coverage"
    c = pd.read_csv(folder / "coverage.csv", na_values="–")
    comp = pd.read_csv(folder / "components.csv").set_index(["result", "metric"])
    share = "seeds' share of Var(D)"
    assert sorted(c["seeds"].unique()) == [2, 3, 5] and set(c["problems"]) == {500}
    assert sorted(c[share].unique()) == pytest.approx([0, 0.2, 0.45, 0.6, 0.7, 0.8, 0.85, 0.9])
    assert (c["experiments"] >= 20000).all() and c["regime"].nunique() == 4
    # the regimes are today's designs: the default's greedy medians σ²_P 0.015, σ²_E 0.144, seeds' share 0.79
    g = comp.loc[("default", "greedy")]
    assert (round(g["σ²_P (median)"], 3), round(g["σ²_E (median)"], 3), round(g["seeds' share (median)"], 2)) == \
        (0.015, 0.144, 0.79)
    assert round(comp.loc[("default", "pass@1"), "seeds' share (median)"], 2) == 0.84
    assert [round(comp.loc[("default", m), "floor rule fires (share)"], 3) for m in ("greedy", "pass@1")] == [0.02, 0.007]
    at = lambda regime, S: c[(c["regime"] == regime) & (c["seeds"] == S)]
    # "at the default's components the interval covers at least 0.94 overall with 3 and 5 seeds"
    default = c[c["regime"].str.startswith("default") & (c["seeds"] >= 3)]
    assert round(default["coverage"].min(), 3) == 0.940
    # "in SmolLM2's greedy regime at 3 seeds it covers 0.924–0.937 once the seeds carry 0.6 or more"
    s3 = at("smollm2_slip greedy", 3)
    high = s3[s3[share] >= 0.6]["coverage"]
    assert (round(high.min(), 3), round(high.max(), 3)) == (0.924, 0.937)
    # "... and the per-seed t-interval 0.931–0.946 there" (the wider of the two covers at least as often as either)
    t = s3[s3[share] >= 0.6]["per-seed t: coverage"]
    assert (round(t.min(), 3), round(t.max(), 3)) == (0.931, 0.946)
    # "where the floor rule would fire, at the default's greedy components with 5 seeds and shares 0.7–0.9: 0.487–0.776"
    d5 = at("default greedy", 5)
    fired = d5[d5[share] >= 0.7]["coverage where it fires"]
    assert (round(fired.min(), 3), round(fired.max(), 3)) == (0.487, 0.776)
    assert [round(x, 3) for x in d5[d5[share] >= 0.7]["floor rule fires (share)"]] == [0.021, 0.010, 0.005, 0.002]
    assert round(default["coverage"].max(), 3) == 0.998  # "more where the problems carry most of Var(D) (up to 0.998)"
    s2 = at("smollm2_slip greedy", 2)
    assert round(s2[s2[share] == 0.9]["coverage"].iloc[0], 3) == 0.899  # two seeds: "0.899 at a share of 0.9"
    # the per-seed t-interval covers less than the interval where the floor rule fires, in every cell where it fires
    # in at least 200 experiments (1% of 20,000)
    many = c[c["floor rule fires (share)"] * c["experiments"] >= 200]
    assert len(many) > 40 and (many["per-seed t: coverage where it fires"] < many["coverage where it fires"]).all()
