"""Planned subgroups (issue 51, point 4): the arithmetic task says from the problem itself whether its sum carries,
and every paired result of an arithmetic task is reported on all test problems, then on those with a carry and those
without (analysis.findings: pairs.csv and gains.csv rows per subgroup)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from analysis import findings
from gcframe.tasks import TaskConfig, build_task
from gcframe.tasks.arithmetic import ArithmeticTask


@pytest.mark.parametrize("operands, carries", [
    ([57, 68], True),    # units 7+8 = 15
    ([50, 50], True),    # tens 5+5 = 10, units 0+0
    ([5, 5], True),      # 5+5 = 10
    ([99, 1], True),     # 9+1 = 10
    ([12, 34], False),   # 2+4 = 6, 1+3 = 4
    ([45, 54], False),   # 5+4 = 9, 4+5 = 9
    ([0, 0], False),
    ([90, 9], False),    # 0+9 = 9, 9+0 = 9
    ([12, 34, 56], True),   # 12+34 = 46 does not carry; 46+56 does (6+6 = 12)
    ([10, 20, 30], False),  # 10+20 = 30, 30+30 = 60
    ([55, 40, 5], True),    # 55+40 = 95, then 95+5: 5+5 = 10
])
def test_carries_by_hand(operands, carries):
    assert ArithmeticTask.carries(operands) is carries


def _independent(prompt: str) -> bool:
    """A 2-operand sum carries iff its digit sum is less than its operands' (each carry turns 10 into 1)."""
    a, b = (int(x) for x in prompt.rstrip("=").split("+"))
    digits = lambda n: sum(map(int, str(n)))
    return digits(a + b) < digits(a) + digits(b)


def test_the_subgroups_follow_the_test_problems():
    task = build_task(TaskConfig(n_demos=100, n_heldout=500, n_validation=100))
    groups = task.subgroups()
    assert len(groups) == len(task.heldout) == 500
    assert groups == ["carry" if _independent(p) else "no_carry" for p in task.heldout["prompt"]]
    # 2 digits: a sum carries unless both columns stay below 10, 55·55 of the 10,000 problems not: 0.3025
    assert 0.25 < groups.count("no_carry") / 500 < 0.36


def test_the_subgroup_view_keeps_its_problems():
    frame = pd.DataFrame({"method": ["a", "b"] * 3, "seed": 0, "problem": ["p1", "p1", "p2", "p2", "p3", "p3"],
                          "greedy": [1, 0, 1, 1, 0, 0]})
    runs = SimpleNamespace(outcomes=lambda: [(frame, ["greedy"], "final", 0)], base_outcomes=lambda: None,
                           methods=["a", "b"])
    view = findings.Subgroup(runs, "carry", {"p1", "p3"}, "with a carry")
    kept = view.outcomes()[0][0]
    assert sorted(set(kept["problem"])) == ["p1", "p3"] and len(kept) == 4 and view.methods == ["a", "b"]
    assert view.base_outcomes() is None


@pytest.mark.slow  # about a minute: 300 pairs x 4 metrics x 3 subgroups re-decided
def test_redecide_reports_a_subgroup_row_as_its_own(tmp_path):
    """analysis.redecide keys a verdict by its subgroup too: a changed no_carry row is reported as that row, and
    re-deciding the committed results/default rewrites its files byte for byte."""
    import shutil
    from pathlib import Path

    from analysis.redecide import redecide

    src = Path(__file__).resolve().parents[1] / "results" / "default"
    copy = tmp_path / "default"
    shutil.copytree(src, copy)
    gains = pd.read_csv(copy / "gains.csv", dtype=str, keep_default_na=False)
    row = (gains["method"] == "rft") & (gains["metric"] == "greedy") & (gains["subgroup"] == "no_carry")
    assert row.sum() == 1 and gains.loc[row, "separated"].item() == "no"
    gains.loc[row, "separated"] = "yes"  # as if an earlier interval had separated it
    gains.to_csv(copy / "gains.csv", index=False)
    changed = redecide(copy)
    assert [(c["comparison"], c["metric"]) for c in changed] == [("rft − SFT base (no_carry)", "greedy")]
    for name in ("pairs.csv", "gains.csv", "findings.md", "headline.md"):
        assert (copy / name).read_bytes() == (src / name).read_bytes(), name


def _chat_runs(frame: pd.DataFrame | None, n_heldout: int = 50, source: str = "final models re-scored on 50"):
    """Runs of a chat model (its prompts a chat template's, the model a folder that is not here) with `frame` as
    their greedy outcomes."""
    cfg = {"task": {"n_demos": 100, "n_heldout": n_heldout, "n_validation": 100, "prompt_format": "chat"},
           "model": {"path": "runs/nowhere/sft/seed0/final"}, "train": {"eval_split": "validation"}}
    return SimpleNamespace(configs={("result", 0): cfg},
                           outcomes=lambda: [] if frame is None else [(frame, ["greedy"], source, 0)])


def test_a_chat_results_subgroups_come_from_its_problems_index():
    # no tokenizer and no model: the model folder does not exist, and the task's plain problems name the operands
    task = build_task(TaskConfig(n_demos=100, n_heldout=50, n_validation=100))
    frame = pd.DataFrame({"method": "a", "seed": 0, "problem": ["id7", "id0", "id49"], "index": [7, 0, 49],
                          "greedy": [1, 0, 1]})
    groups = findings.problem_subgroups(_chat_runs(frame))
    prompts = task.heldout["prompt"]
    assert groups == {p: "carry" if _independent(prompts[i]) else "no_carry"
                      for p, i in (("id7", 7), ("id0", 0), ("id49", 49))}


@pytest.mark.parametrize("frame, source, says", [
    (pd.DataFrame({"method": "a", "seed": 0, "problem": ["x"], "greedy": [1]}), "final models re-scored", "no `index`"),
    (pd.DataFrame({"method": "a", "seed": 0, "problem": ["x"], "index": [50], "greedy": [1]}), "final models re-scored",
     "outside the task's 50 test problems"),
    (pd.DataFrame({"method": "a", "seed": 0, "problem": ["x", "y"], "index": [3, 3], "greedy": [1, 0]}),
     "final models re-scored", "one place for two problems"),
])
def test_a_subgroup_that_cannot_be_built_is_refused_naming_why(frame, source, says):
    from gcframe.errors import UserError

    with pytest.raises(UserError) as e:
        findings.problem_subgroups(_chat_runs(frame, source=source))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_plain_result_names_its_problems_by_their_prompt():
    task = build_task(TaskConfig(n_demos=100, n_heldout=50, n_validation=100))
    from gcframe.evaluate.problems import problem_id

    runs = SimpleNamespace(configs={("result", 0): {"task": {"n_demos": 100, "n_heldout": 50, "n_validation": 100}}})
    groups = findings.problem_subgroups(runs)  # no outcomes needed: the id is the plain prompt's digest
    assert groups == {problem_id(r): "carry" if _independent(r["prompt"]) else "no_carry" for r in task.heldout}


def test_a_chat_result_scored_on_validation_problems_has_no_test_subgroups_and_says_so():
    frame = pd.DataFrame({"method": "a", "seed": 0, "problem": ["x"], "index": [3], "greedy": [1]})
    runs = _chat_runs(frame, source="the last evaluation of each run, 100 held-out problems")  # eval_split validation
    runs.notes = []
    assert findings.problem_subgroups(runs) == {} and runs.notes == [
        "no planned subgroups: the runs' outcomes are of their validation problems"]
