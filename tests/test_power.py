"""analysis.power: the detectable difference of each seeds × problems design from a pilot's variance components."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.power import cheapest, components, grid
from gcframe.errors import UserError


def test_the_detectable_difference_by_hand_and_the_cheapest_design():
    # σ²_S = 0.0004, σ²_P = 0.1, σ²_E = 0.1; S = 4, P = 500: Var = 0.0004/4 + 0.1/500 + 0.1/2000 = 0.00035
    c = {"var_seed": 0.0004, "var_problem": 0.1, "var_resid": 0.1}
    t = grid(c, [2, 4, 8], [250, 500])
    row = t[(t["seeds"] == 4) & (t["problems"] == 500)].iloc[0]
    # the design's ν is the kept test's, min(Satterthwaite's, S − 1) = 3 (analysis.paired.reference_df):
    # (t_{0.975,3} + t_{0.8,3})·√0.00035 = (3.18245 + 0.97847)·0.018708 = 0.077844
    want = (stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)) * np.sqrt(0.00035)
    assert want == pytest.approx(0.077844, abs=1e-5)
    assert row["detectable"] == pytest.approx(want, rel=1e-9)
    for _, g in t.groupby("seeds"):  # more problems, or more seeds, detect less
        assert g.sort_values("problems")["detectable"].is_monotonic_decreasing
    for _, g in t.groupby("problems"):
        assert g.sort_values("seeds")["detectable"].is_monotonic_decreasing
    best = cheapest(t, float(row["detectable"]) + 1e-9)
    assert best["seeds"] <= 4  # the target that design meets is met by it or a cheaper one
    assert cheapest(t, 1e-6) is None  # σ²_S/S alone is above any tiny target


def test_a_one_seed_pilot_cannot_plan_seeds():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame([{"method": m, "seed": 0, "problem": p, "greedy": float(rng.random() < 0.5)}
                          for m in ("a", "b") for p in range(20)])
    with pytest.raises(UserError, match="needs at least 2"):
        components(frame, "a", "b")


def test_several_gains_are_planned_together_and_the_plan_detects_every_one():
    """plan() gives each A − B its grid from its own components; worst_case() keeps, per design, the largest
    detectable difference, so the cheapest design meets the target for every gain, the hardest one included."""
    from analysis.power import plan, worst_case

    rng = np.random.default_rng(1)
    rows = []
    for seed in range(3):
        shift = {"quiet": 0.0, "loud": 0.3 * (seed - 1)}  # "loud" moves with the seed: a large σ²_S
        for p in range(200):
            b = float(rng.random() < 0.5)
            rows += [{"method": "b", "seed": seed, "problem": p, "greedy": b},
                     {"method": "quiet", "seed": seed, "problem": p, "greedy": b if rng.random() < 0.9 else 1 - b},
                     {"method": "loud", "seed": seed, "problem": p,
                      "greedy": float(rng.random() < 0.5 + shift["loud"])}]
    frame = pd.DataFrame(rows)
    every = plan(frame, ["quiet", "loud"], "b", [2, 4, 8], [200, 800])
    assert set(every["a"]) == {"quiet", "loud"} and len(every) == 2 * 3 * 2
    for a in ("quiet", "loud"):  # each method's rows are its own components' grid
        own = every[every["a"] == a]
        assert list(own["detectable"]) == list(grid(components(frame, a, "b"), [2, 4, 8], [200, 800])["detectable"])
    worst = worst_case(every).set_index(["seeds", "problems"])["detectable"]
    loud = every[every["a"] == "loud"].set_index(["seeds", "problems"])["detectable"]
    quiet = every[every["a"] == "quiet"].set_index(["seeds", "problems"])["detectable"]
    assert (loud > quiet).all()  # the seed-driven gain is the harder one to detect at every design ...
    assert (worst == loud).all()  # ... so it sets the plan
    target = float(quiet[(4, 800)]) + 1e-9  # met by "quiet" at 4 × 800 (or cheaper); "loud" needs more or never
    best = cheapest(worst_case(every), target)
    assert best is None or (loud[(best["seeds"], best["problems"])] <= target
                            and (best["seeds"], best["problems"]) > (4, 800))


def test_a_pilot_still_training_is_read_from_its_finished_runs(tmp_path, capsys):
    """The first seeds of a comparison whose later seeds are still training: those runs (a problems.jsonl with only
    step 0, no RUN/final) would leave no outcome that every run has; the pilot reads the finished runs only."""
    import json

    from analysis.power import main
    from analysis.runs import final_outcomes

    rng = np.random.default_rng(2)
    for method in ("a", "b"):
        for seed in (0, 1, 2):
            run = tmp_path / method / f"seed{seed}"
            run.mkdir(parents=True)
            steps = (0, 32) if seed < 2 else (0,)  # seed 2 has evaluated only its start
            rows = [{"step": s, "problem": f"p{i}", "greedy_correct": int(rng.random() < (0.6 if method == "a" else
                                                                                            0.4))}
                    for s in steps for i in range(50)]
            (run / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            if seed < 2:
                (run / "final").mkdir()
    assert final_outcomes(tmp_path) == []  # every run's common outcomes: none while seed 2 trains
    frame = final_outcomes(tmp_path, finished=True)[0][0]
    assert sorted(frame["seed"].unique()) == [0, 1] and len(frame) == 2 * 2 * 50
    assert main([str(tmp_path), "--a", "a", "--b", "b", "--seeds", "2,3", "--problems", "50"]) == 0
    out = capsys.readouterr().out
    assert "pilot " in out and "a − b = " in out and "(2 seeds × 50 problems)" in out
    with pytest.raises(SystemExit) as e:  # no finished run of the methods asked for: one line
        main([str(tmp_path), "--a", "c", "--b", "d"])
    assert e.value.code == 2
    assert "has no finished run of c or d" in capsys.readouterr().err


def test_gains_over_the_base_pair_each_run_with_its_seeds_start(tmp_path, capsys):
    """--b base: the base's outcomes are each seed's step-0 evaluation, on the problems of the runs' last one, so
    A − base pairs problem by problem; --pilot-seeds keeps the first seeds of a comparison that has finished."""
    import json

    from analysis.power import main, with_base

    for method in ("a", "c"):
        for seed in (0, 1, 2):
            run = tmp_path / method / f"seed{seed}"
            run.mkdir(parents=True)
            # step 0: the base gets problems 0-9 right (the same model for every run); the end: a gets 0-14 right
            rows = [{"step": 0, "problem": f"p{i}", "greedy_correct": int(i < 10)} for i in range(40)]
            rows += [{"step": 32, "problem": f"p{i}", "greedy_correct": int(i < 15 + seed)} for i in range(40)]
            (run / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            (run / "final").mkdir()
    frame = with_base(tmp_path, ["a"], pilot_seeds=[0, 1])
    base = frame[frame["method"] == "base"]
    assert sorted(base["seed"].unique()) == [0, 1] and len(base) == 2 * 40 and base["greedy"].sum() == 2 * 10
    a = frame[frame["method"] == "a"].groupby("seed")["greedy"].mean()
    assert list(a) == [15 / 40, 16 / 40]  # seed 0: 15 of 40, seed 1: 16 of 40; seed 2 left out
    assert main([str(tmp_path), "--a", "a", "--b", "base", "--pilot-seeds", "0,1", "--seeds", "2,3",
                 "--problems", "40"]) == 0
    out = capsys.readouterr().out
    assert "a − base = +0.138" in out  # (5/40 + 6/40) / 2 = 0.1375
    assert main([str(tmp_path), "--a", "a,c", "--b", "base,c", "--pilot-seeds", "0,1", "--seeds", "2",
                 "--problems", "40", "--out", str(tmp_path / "p.csv")]) == 0
    out = capsys.readouterr().out
    assert "a − base" in out and "c − base" in out and "a − c" in out and "c − c" not in out  # no gain over itself
    assert len(pd.read_csv(tmp_path / "p.csv")) == 3  # three pairs x one design
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path), "--a", "a", "--b", "base", "--pilot-seeds", "7"])
    assert e.value.code == 2 and "among seeds 7" in capsys.readouterr().err
