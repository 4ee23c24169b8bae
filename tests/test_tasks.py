import json

import pytest

from gcframe.errors import UserError
from gcframe.tasks import ArithmeticTask, GSM8KTask, TaskConfig, build_task, extract_answer


def small(**kw):
    """2 operands x 2 digits = 10,000 problems; small counts keep tests fast."""
    base = dict(n_demos=200, n_heldout=300, seed=0)
    base.update(kw)
    return ArithmeticTask(TaskConfig(**base))


def test_three_operand_format():
    task = small(operands=3, digits=2, n_demos=5, n_heldout=5)
    ops = [12, 34, 56]
    assert task.prompt(ops) == "12+34+56="
    assert task.steps(ops) == ["46", "102"]  # 12+34=46, 46+56=102
    assert task.completion(ops) == "46;102"
    no_steps = ArithmeticTask(TaskConfig(operands=3, show_steps=False, n_demos=5, n_heldout=5))
    assert no_steps.completion(ops) == "102"
    assert small().completion([12, 34]) == "46"  # 2 operands: the only partial sum is the answer
    # longest gold completion: 99+99=198, 198+99=297 -> "198;297" = 7 chars
    assert task.max_completion_chars == 7


def test_dataset_rows_are_consistent():
    task = small(operands=3, n_demos=20, n_heldout=20)
    for row in task.demos:
        ops = [int(x) for x in row["prompt"].rstrip("=").split("+")]
        assert len(ops) == 3 and all(0 <= x <= 99 for x in ops)
        assert row["steps"] == [str(ops[0] + ops[1]), str(sum(ops))]
        assert row["answer"] == str(sum(ops))
        assert row["completion"] == ";".join(row["steps"])
    assert set(task.heldout.column_names) == {"prompt", "answer", "steps"}
    assert set(task.prompts.column_names) == {"prompt", "answer", "steps"}
    assert set(task.demos.column_names) == {"prompt", "completion", "answer", "steps"}


def test_extract_answer():
    assert extract_answer("46;102") == "102"
    assert extract_answer("46") == "46"
    assert extract_answer(" 46 ; 102 ") == "102"
    assert extract_answer("") is None
    assert extract_answer("46;") is None
    assert extract_answer("   ") is None


def test_verify():
    task = small()
    assert task.verify("46;102", "102")
    assert task.verify("102 ", "102")  # whitespace stripped
    assert task.verify("46; 102\n", " 102")
    assert not task.verify("46;100", "102")
    assert not task.verify("", "102")
    assert not task.verify("102;", "102")  # last field is empty
    assert not task.verify("1020", "102")


def test_step_rewards():
    task = small()
    # "46" ends at 2 (correct), "100" ends at 6 but the true sum is 102
    assert task.step_rewards("46;100", ["46", "102"]) == [(2, 1.0), (6, 0.0)]
    assert task.step_rewards("46;102", ["46", "102"]) == [(2, 1.0), (6, 1.0)]
    # a third step beyond the two true ones scores 0; "46;102;7" -> ends 2, 6, 8
    assert task.step_rewards("46;102;7", ["46", "102"]) == [(2, 1.0), (6, 1.0), (8, 0.0)]
    assert task.step_rewards("45;102", ["46", "102"]) == [(2, 0.0), (6, 1.0)]
    assert task.step_rewards("", ["46", "102"]) == []


def test_heldout_disjoint():
    task = small()
    held = set(task.heldout["prompt"])
    assert len(held) == 300
    assert held.isdisjoint(task.prompts["prompt"])
    assert held.isdisjoint(task.demos["prompt"])
    assert len(set(task.demos["prompt"])) == 200  # distinct demo problems
    assert len(task.prompts) == 10_000 - 300  # every non-held-out problem is an RL prompt
    assert set(task.demos["prompt"]) <= set(task.prompts["prompt"])


def test_heldout_disjoint_large_space():
    # 4 operands x 3 digits = 10**12 problems: sampled, capped prompt pool
    task = ArithmeticTask(TaskConfig(operands=4, digits=3, n_demos=50, n_heldout=200))
    assert len(task.prompts) == 20_000
    held = set(task.heldout["prompt"])
    assert len(held) == 200
    assert held.isdisjoint(task.prompts["prompt"]) and held.isdisjoint(task.demos["prompt"])


def test_determinism_by_seed():
    a, b, c = small(seed=1, demo_noise=0.5), small(seed=1, demo_noise=0.5), small(seed=2, demo_noise=0.5)
    assert a.heldout.to_dict() == b.heldout.to_dict()
    assert a.prompts.to_dict() == b.prompts.to_dict()
    assert a.demos.to_dict() == b.demos.to_dict()
    assert a.heldout["prompt"] != c.heldout["prompt"]
    assert a.demos["prompt"] != c.demos["prompt"]


def test_demo_noise():
    noisy = ArithmeticTask(TaskConfig(n_demos=500, n_heldout=100, demo_noise=0.3))
    wrong = [not noisy.verify(r["completion"], r["answer"]) for r in noisy.demos]
    assert 0.2 <= sum(wrong) / len(wrong) <= 0.4
    for r in noisy.demos:  # the answer column is always the true sum
        assert r["answer"] == str(sum(int(x) for x in r["prompt"].rstrip("=").split("+")))
    clean = ArithmeticTask(TaskConfig(n_demos=500, n_heldout=100, demo_noise=0.0))
    assert all(clean.verify(r["completion"], r["answer"]) for r in clean.demos)
    # noise only changes the final field; with 3 operands the first partial sum stays right
    steps3 = ArithmeticTask(TaskConfig(operands=3, n_demos=100, n_heldout=10, demo_noise=1.0))
    for r in steps3.demos:
        assert not steps3.verify(r["completion"], r["answer"])
        assert steps3.step_rewards(r["completion"], r["steps"])[0][1] == 1.0


def test_slipped_sum_drops_carries_column_by_column():
    """57 + 68: units 7 + 8 = 15 (write 5, carry 1), tens 5 + 6 + 1 = 12 (write 2, carry 1), hundreds 1 -> 125.
    Dropping the units' carry gives tens 5 + 6 = 11 -> 115; dropping the tens' carry ends the sum at 25; both: 15."""
    import random

    from gcframe.tasks.arithmetic import ArithmeticTask as A

    assert A.slipped_sum(57, 68, 0.0, random.Random(0)) == 125 and A.slipped_sum(57, 68, 1.0, random.Random(0)) == 15
    assert A.slipped_sum(12, 34, 1.0, random.Random(0)) == 46  # no carry: nothing to slip
    draws = [A.slipped_sum(57, 68, 0.7, random.Random(i)) for i in range(4000)]
    share = {v: draws.count(v) / len(draws) for v in (125, 115, 25, 15)}
    assert sum(share.values()) == 1.0
    # each of the two carries kept with probability 0.3: 0.09 right, 0.21 each with one slip, 0.49 with both
    for v, p in ((125, 0.09), (115, 0.21), (25, 0.21), (15, 0.49)):
        assert abs(share[v] - p) < 0.03, (v, share[v])


def test_demo_slip_spoils_only_demonstrations_with_a_carry():
    task = ArithmeticTask(TaskConfig(n_demos=500, n_heldout=100, demo_slip=1.0))
    for r in task.demos:
        a, b = (int(x) for x in r["prompt"].rstrip("=").split("+"))
        carries = any((a // 10**j % 10) + (b // 10**j % 10) + (1 if j and (a % 10**j + b % 10**j) >= 10**j else 0)
                      >= 10 for j in range(2))
        assert task.verify(r["completion"], r["answer"]) == (not carries), r  # slip 1: every carry dropped
        assert r["answer"] == str(a + b)  # the answer column (the checker's) stays the true sum
    clean = ArithmeticTask(TaskConfig(n_demos=500, n_heldout=100))
    assert clean.demos.to_dict() == ArithmeticTask(TaskConfig(n_demos=500, n_heldout=100, demo_slip=0.0)).demos \
        .to_dict()
    three = ArithmeticTask(TaskConfig(operands=3, n_demos=50, n_heldout=10, demo_slip=1.0))
    for r in three.demos:  # each partial sum is added on from the previous written one
        first, second = (int(x) for x in r["completion"].split(";"))
        a, b, c = (int(x) for x in r["prompt"].rstrip("=").split("+"))
        assert first == ArithmeticTask.slipped_sum(a, b, 1.0, None) and second == ArithmeticTask.slipped_sum(
            first, c, 1.0, None)


@pytest.mark.parametrize(
    "kw",
    [dict(operands=1), dict(digits=0), dict(demo_noise=1.5), dict(demo_slip=1.5), dict(demo_slip=-0.1), dict(demo_noise=-0.1), dict(n_demos=0), dict(n_heldout=0)],
)
def test_config_validation(kw):
    with pytest.raises(UserError):
        TaskConfig(**kw)


def test_too_many_problems_requested():
    with pytest.raises(UserError):  # 1 digit x 2 operands = 100 problems < 60 + 50
        ArithmeticTask(TaskConfig(digits=1, n_demos=50, n_heldout=60))


def test_unknown_task():
    with pytest.raises(UserError, match="arithmetic"):
        build_task(TaskConfig(name="chess"))


def _write_gsm8k(path, n=10):
    with open(path, "w") as f:
        for i in range(n):
            # i apples + 1000 apples -> answer i + 1000, written with a thousands comma
            q = f"Tom has {i} apples and buys 1000 more. How many?"
            a = f"He has {i}+1000=<<{i}+1000={i + 1000}>>{i + 1000} apples.\n#### {i + 1000:,}"
            f.write(json.dumps({"question": q, "answer": a}) + "\n")


def test_gsm8k_local(tmp_path):
    path = tmp_path / "gsm.jsonl"
    _write_gsm8k(path)
    task = build_task(TaskConfig(name="gsm8k", path=str(path), n_demos=4, n_heldout=3))
    assert isinstance(task, GSM8KTask)
    assert len(task.heldout) == 3 and len(task.prompts) == 7 and len(task.demos) == 4
    assert set(task.heldout["prompt"]).isdisjoint(task.prompts["prompt"])
    row = task.demos[0]
    assert row["prompt"].startswith("Question: Tom has ") and row["prompt"].endswith("\nAnswer:")
    assert row["completion"].startswith(" He has ")
    assert row["answer"] == str(int(row["prompt"].split()[3]) + 1000)  # comma removed: "1,003" -> "1003"
    assert row["steps"] == [row["answer"]]
    assert task.verify(row["completion"], row["answer"])
    assert task.verify("so 1,005 #### 1,004", "1004")  # number after the last ####
    assert task.verify("The total is 1004 apples.", "1004")  # else the last number
    assert not task.verify("#### 1005", "1004")
    assert not task.verify("", "1004")
    assert task.step_rewards("#### 1004", ["1004"]) == [(9, 1.0)]
    assert task.step_rewards("", ["1004"]) == []


def test_gsm8k_noise(tmp_path):
    path = tmp_path / "gsm.jsonl"
    _write_gsm8k(path, n=40)
    task = GSM8KTask(TaskConfig(name="gsm8k", path=str(path), n_demos=30, n_heldout=5, demo_noise=1.0))
    assert not any(task.verify(r["completion"], r["answer"]) for r in task.demos)


def test_gsm8k_missing_column(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "q", "solution": "#### 1"}) + "\n")
    with pytest.raises(UserError, match=r"bad\.jsonl lacks column\(s\) answer"):
        build_task(TaskConfig(name="gsm8k", path=str(path), n_demos=1, n_heldout=1))


def test_gsm8k_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        build_task(TaskConfig(name="gsm8k", path=str(tmp_path / "nope.jsonl")))
