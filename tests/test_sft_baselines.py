"""SFT given the checker's information (issue 51, point 3): sft_filtered imitates the demonstrations the exact checker
accepts, sft_clean as many demonstrations written by an exact annotator; a set with none accepted is one line, exit
2, before anything is written."""
from __future__ import annotations

from types import SimpleNamespace

import datasets
import pytest
import yaml

from gcframe.errors import UserError
from gcframe.tasks import TaskConfig, build_task
from methods import REGISTRY
from methods.sft_filtered import accepted_demos
from tests.test_resume import TINY_CONFIG, run_cli


def _true_sum(prompt: str) -> int:
    return sum(int(x) for x in prompt.rstrip("=").split("+"))


def _stub_ctx(task):
    """What the two methods use of a Context: the task, train's B and G, and the demonstrations source."""
    train = SimpleNamespace(prompts_per_step=2, group_size=3)
    return SimpleNamespace(task=task, cfg=SimpleNamespace(train=train),
                           demonstrations=lambda n, demos: (n, demos))


def test_the_filter_keeps_exactly_the_demonstrations_with_the_true_sum():
    task = build_task(TaskConfig(n_demos=8, n_heldout=10))
    # by hand: 57+68 = 125 (7+8 = 15, carry 1; 5+6+1 = 12); the annotator's slips write 115 (the units' carry
    # dropped), 25 (the tens') or 15 (both); 12+34 = 46 has no carry; 90+10 = 100
    task.demos = datasets.Dataset.from_dict({
        "prompt": ["57+68=", "57+68=", "57+68=", "12+34=", "90+10=", "90+10="],
        "completion": ["125", "115", "25", "46", "100", "0"],
        "answer": ["125", "125", "125", "46", "100", "100"],
        "steps": [["125"], ["125"], ["125"], ["46"], ["100"], ["100"]]})
    kept = accepted_demos(task, "sft_filtered")
    assert kept["completion"] == ["125", "46", "100"] and kept["prompt"] == ["57+68=", "12+34=", "90+10="]


def test_sft_filtered_on_a_slipping_annotator_and_its_count():
    task = build_task(TaskConfig(n_demos=400, n_heldout=100, demo_slip=0.8, n_validation=100))
    method = REGISTRY["sft_filtered"](REGISTRY["sft_filtered"].Config(), _stub_ctx(task))
    right = [r for r in task.demos if int(r["completion"]) == _true_sum(r["prompt"])]
    assert 0 < len(right) < len(task.demos)  # slip 0.8: some demonstrations are wrong, some right
    assert method.demos["prompt"] == [r["prompt"] for r in right]  # exactly the right ones, in order
    n, demos = method.collect(0)
    assert n == 2 * 3 and demos is method.demos  # B·G drawn from the accepted set
    assert method.pop_stats() == {"demos_accepted": float(len(right))}  # the count, logged every step


def test_sft_clean_has_as_many_exact_demonstrations_of_new_training_problems():
    task = build_task(TaskConfig(n_demos=400, n_heldout=100, demo_slip=0.8, n_validation=100))
    n = len(accepted_demos(task, "sft_filtered"))
    method = REGISTRY["sft_clean"](REGISTRY["sft_clean"].Config(), _stub_ctx(task))
    demos = method.demos
    assert len(demos) == n
    assert all(int(c) == _true_sum(p) for p, c in zip(demos["prompt"], demos["completion"]))  # all clean
    assert demos["prompt"] == task.prompts["prompt"][400:400 + n]  # RL prompts: the training split
    assert not set(demos["prompt"]) & set(task.demos["prompt"])  # new problems: no demonstration's
    assert not set(demos["prompt"]) & (set(task.validation["prompt"]) | set(task.heldout["prompt"]))
    assert method.collect(0)[0] == 6 and method.pop_stats() == {"demos_accepted": float(n)}


def test_sft_clean_on_a_small_problem_space_fills_from_the_demonstrations_problems():
    # 1 digit, 2 operands: 100 problems; 16 test, 84 training of which 64 are demonstrations: 20 new problems, and
    # the checker accepts all 64 (no slip, no noise), so 20 new + the first 44 demonstration problems
    task = build_task(TaskConfig(digits=1, n_demos=64, n_heldout=16))
    demos = REGISTRY["sft_clean"].demo_set(task)
    assert demos["prompt"] == task.prompts["prompt"][64:84] + task.demos["prompt"][:44]
    assert all(int(c) == _true_sum(p) for p, c in zip(demos["prompt"], demos["completion"]))
    assert not set(demos["prompt"]) & set(task.heldout["prompt"])


def test_none_accepted_is_refused_in_process():
    task = build_task(TaskConfig(digits=1, n_demos=64, n_heldout=16, demo_noise=1.0))  # every answer replaced
    for name in ("sft_filtered", "sft_clean"):
        with pytest.raises(UserError, match=rf"method '{name}': the checker accepts none of the task's 64 "
                                            r"demonstrations \(task.demo_slip=0.0, task.demo_noise=1.0"):
            REGISTRY[name].check_model(None, task, None)


def test_none_accepted_is_one_line_exit_2_and_nothing_written(tmp_path):
    config = {**TINY_CONFIG, "task": {**TINY_CONFIG["task"], "demo_noise": 1.0}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    r = run_cli("--config", tmp_path / "c.yaml", "--methods", "sft,sft_filtered", "--out", out, "--no-progress")
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "method 'sft_filtered': the checker accepts none" in lines[0] and "task.n_demos=64" in lines[0]
    assert not out.exists() and r.stdout == ""


@pytest.mark.parametrize("slip", [-0.1, 1.5])
def test_a_slip_rate_outside_0_1_is_one_line_naming_the_option(slip):
    with pytest.raises(UserError) as e:
        TaskConfig(demo_slip=slip)
    assert str(e.value) == f"task.demo_slip must be in [0, 1], got {slip}; it is a probability"
