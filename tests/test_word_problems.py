"""The word-problem generator (gcframe/tasks/word_problems.py) and its free-text verifier: fast, no model."""
from __future__ import annotations

import random
import re

import pytest

from gcframe.errors import UserError
from gcframe.tasks import TaskConfig, WordProblemsTask, build_task, final_number
from gcframe.tasks.word_problems import make_problem, number_words


@pytest.mark.parametrize("n,words", [(0, "zero"), (7, "seven"), (13, "thirteen"), (40, "forty"),
                                     (42, "forty-two"), (100, "one hundred"), (305, "three hundred five"),
                                     (1999, "one thousand nine hundred ninety-nine")])
def test_number_words(n, words):
    assert number_words(n) == words


WORD_TO_INT = {number_words(n): n for n in range(1000)}


def replay(question: str) -> int:
    """Solve a generated question independently of the generator: read each sentence and apply it."""
    num = r"(\d+|[a-z]+(?:-[a-z]+)?(?: hundred(?: [a-z]+(?:-[a-z]+)?)?)?)"
    val = lambda t: int(t) if t.isdigit() else WORD_TO_INT[t]  # noqa: E731
    x = None
    for s in re.split(r"(?<=[.?])\s+", question):
        if m := re.match(rf"\w+ has {num} \w+\.$", s):
            x = val(m[1])
        elif m := re.match(rf"(?:\w+ (?:finds|buys) {num} more|A friend gives \w+ {num}) \w+\.$", s):
            x += val(m[1] or m[2])
        elif m := re.match(rf"\w+ (?:gives away|loses|sells) {num} (?:of the )?\w+\.$", s):
            x -= val(m[1])
        elif m := re.match(r"Then the number of \w+ \w+ has (doubles|triples|becomes four times as large)\.$", s):
            x *= {"doubles": 2, "triples": 3}.get(m[1], 4)
        elif m := re.match(rf"\w+ splits the \w+ equally into {num} \w+ and keeps only one of them\.$", s):
            assert x % val(m[1]) == 0
            x //= val(m[1])
        elif m := re.match(rf"\w+ buys {num} \w+ with {num} \w+ in each\.$", s):
            x += val(m[1]) * val(m[2])
        else:
            assert s.startswith("How many"), s
    return x


@pytest.mark.parametrize("quantities,digits", [(2, 1), (3, 2), (4, 2), (5, 3)])
def test_problems_are_solvable_and_answered_in_gsm8k_format(quantities, digits):
    rng = random.Random(1)
    ops_seen, worded = set(), 0
    for _ in range(200):
        p = make_problem(rng, quantities, digits)
        assert p["answer"].endswith(f"#### {p['value']}") and p["value"] >= 0
        assert replay(p["question"]) == p["value"]  # the question says what the worked answer computes
        assert final_number(p["answer"]) == str(p["value"])
        lines = p["answer"].splitlines()[1:-1]  # one line per operation ("k bags of n": two)
        n_ops = sum(2 if " * " in line and " + " in line else 1 for line in lines)
        assert n_ops == quantities - 1
        ops_seen |= {op for op in " + - * / ".split() if any(f" {op} " in line for line in lines)}
        worded += bool(re.search(r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|"
                                 r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)\b", p["question"]))
    assert ops_seen == {"+", "-", "*", "/"} or quantities == 2  # several operations across problems
    assert 50 < worded < 200  # numbers in words and in digits


def test_task_splits_disjoint_and_deterministic():
    cfg = TaskConfig(name="word_problems", operands=3, digits=2, n_demos=20, n_heldout=30)
    a, b = build_task(cfg), build_task(cfg)
    assert isinstance(a, WordProblemsTask) and a.fmt.name == "plain"
    assert a.heldout["prompt"] == b.heldout["prompt"] and a.demos["completion"] == b.demos["completion"]
    assert not set(a.heldout["prompt"]) & set(a.prompts["prompt"])
    assert len(a.heldout) == 30 and len(a.demos) == 20
    row = a.demos[0]
    assert row["prompt"].startswith("Question: ") and row["prompt"].endswith("\nAnswer:")
    assert row["completion"].startswith(" ") and row["completion"].endswith(f"#### {row['answer']}")
    other = build_task(TaskConfig(name="word_problems", operands=3, digits=2, n_demos=20, n_heldout=30, seed=1))
    assert other.heldout["prompt"] != a.heldout["prompt"]


def test_verifier_reads_free_text():
    task = build_task(TaskConfig(name="word_problems", operands=3, digits=1, n_demos=4, n_heldout=4))
    answer = task.heldout[0]["answer"]
    assert task.verify(task.demos[0]["completion"], task.demos[0]["answer"])  # its own demonstration is right
    assert task.verify(f"First 3 + 4 = 7, then ... #### {answer}", answer)  # '####' wins over later numbers
    assert task.verify(f"So she has {answer} apples.", answer)  # free text: the last number
    assert task.verify(f"The answer is \\boxed{{{answer}}}.", answer)
    assert not task.verify(f"#### {int(answer) + 1}", answer) and not task.verify("no idea", answer)
    assert task.step_rewards(f"... #### {answer}", [answer]) == [(len(f"... #### {answer}"), 1.0)]


def test_digits_out_of_range_is_refused():
    with pytest.raises(UserError, match="task.digits must be 1, 2 or 3"):
        build_task(TaskConfig(name="word_problems", digits=4, n_demos=4, n_heldout=4))
