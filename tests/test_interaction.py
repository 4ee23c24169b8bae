"""analysis.interaction: the step × method interaction on per-problem outcomes logged at two steps of the same runs."""
import json

import pytest

from analysis.interaction import interaction, outcomes_at, table
from gcframe.errors import UserError

# greedy outcomes on problems p0..p3, the same in seeds 0 and 1:
#   rft        step 200 [1, 1, 0, 0]   step 1000 [1, 1, 0, 0]
#   online_rft step 200 [1, 0, 0, 0]   step 1000 [1, 1, 1, 0]
# Δ at 200 = mean(0, −1, 0, 0) = −0.25; Δ at 1000 = mean(0, 0, 1, 0) = +0.25; d = [0, 1, 1, 0] -> interaction +0.5
OUTCOMES = {"rft": {200: [1, 1, 0, 0], 1000: [1, 1, 0, 0]}, "online_rft": {200: [1, 0, 0, 0], 1000: [1, 1, 1, 0]}}


def write(tmp_path, outcomes=OUTCOMES):
    for m, by_step in outcomes.items():
        for seed in (0, 1):
            run = tmp_path / m / f"seed{seed}"
            run.mkdir(parents=True)
            rows = [{"step": step, "problem": f"p{i}", "greedy_correct": y}
                    for step, ys in by_step.items() for i, y in enumerate(ys)]
            (run / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_the_interaction_by_hand(tmp_path):
    r = interaction(outcomes_at(write(tmp_path)), "online_rft", "rft", 200, 1000)
    assert (r["Δ early"], r["Δ late"], r["Δ interaction"]) == pytest.approx((-0.25, 0.25, 0.5))
    assert (r["seeds"], r["problems"]) == (2, 4)
    # four problems only (d = [0, 1, 1, 0] in both seeds): the interval is wide and holds 0 and +0.5
    assert r["interaction lo"] < 0 < 0.5 < r["interaction hi"] and not r["interaction separated"]
    t = table(tmp_path, 200, "rft")
    assert t["a"].tolist() == ["online_rft"] and t["late"].tolist() == [1000]


def test_a_method_without_the_early_step_is_one_line(tmp_path):
    write(tmp_path, {"rft": {1000: [1, 1, 0, 0]}, "online_rft": {200: [1, 0, 0, 0], 1000: [1, 1, 1, 0]}})
    with pytest.raises(UserError, match=r"rft has no evaluation at step 200 \(its steps: 1000\)"):
        interaction(outcomes_at(tmp_path), "online_rft", "rft", 200, 1000)
    with pytest.raises(UserError, match="--against ppo: not among the runs"):
        table(tmp_path, 200, "ppo")


def test_a_result_writes_every_pair_at_every_step_from_test_evaluations_only(tmp_path):
    import gzip

    import pandas as pd
    import yaml

    from analysis.results import write_interaction as write_result

    runs = write(tmp_path / "runs")
    (runs / "config.yaml").write_text(yaml.safe_dump({"methods_run": ["rft", "online_rft"],
                                                      "train": {"eval_split": "test"}}))
    res = tmp_path / "res"
    res.mkdir()
    assert write_result(runs, res)
    inter = pd.read_csv(res / "interaction.csv")
    # the pair in methods_run's order: rft − online_rft = −(online_rft − rft): +0.25 at 200, −0.25 at 1000, −0.5
    assert inter["a − b"].tolist() == ["rft − online_rft"] and inter["changes with length"].tolist() == ["no"]
    assert [inter.loc[0, c].split(" [")[0] for c in ("at step 200", "at step 1000", "change (interaction)")] == \
        ["+0.250", "-0.250", "-0.500"]
    steps = pd.read_csv(res / "by_step.csv")
    assert steps["step"].tolist() == [200, 1000] and steps["Δ"].tolist() == [0.25, -0.25]
    with gzip.open(res / "problems_by_step.csv.gz", "rt") as f:
        rows = pd.read_csv(f)
    assert len(rows) == 2 * 2 * 2 * 4 and rows["greedy"].sum() == 2 * (2 + 2 + 1 + 3)  # methods × seeds × steps × 4
    # validation evaluations choose; they make no finding: nothing is written for them
    (runs / "config.yaml").write_text(yaml.safe_dump({"train": {"eval_split": "validation"}}))
    other = tmp_path / "other"
    other.mkdir()
    assert not write_result(runs, other) and not list(other.iterdir())
