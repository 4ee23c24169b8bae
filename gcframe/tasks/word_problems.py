"""Multi-step word problems in GSM8K format, from the project's own generator (no download, no file).

A problem follows one quantity through several operations, told as a short story with numbers in words and digits:

    question  "Mia has 23 shells. She finds seven more shells. She buys 3 bags with 4 shells in each. Then the
               number of shells she has doubles. How many shells does Mia have now?"
    answer    "Mia starts with 23 shells.\\nShe finds 7 more: 23 + 7 = 30.\\nThe 3 bags hold 3 * 4 = 12 shells, so
               she has 30 + 12 = 42.\\nDoubled: 42 * 2 = 84.\\n#### 84"

The operations: add, subtract, multiply (doubles, triples, four times as many), divide (equal groups, one kept) and
"k containers with n in each" (a multiply and an add). task.operands is the number of quantities in a problem
(operands - 1 operations; the start counts as one quantity, a container sentence as two), task.digits bounds the
start and the added/subtracted numbers (< 10**digits). Every number of the question is written in words with
probability 1/2 (each on its own), so the model must read "seven" as 7.

The rows are GSM8K's ({question, answer ending in '#### N'}), so everything after generation is GSM8KTask's: the
prompt (chat: the question and "end your answer with '#### N'"), the demonstrations (the worked answer, the chat
format's assistant turn) and the free-text verifier (`answers.final_number`: the number after the last '####', else
the last number of the text).
"""
from __future__ import annotations

import random

from gcframe.errors import UserError
from gcframe.tasks.config import TaskConfig
from gcframe.tasks.formats import PromptFormat
from gcframe.tasks.gsm8k import GSM8KTask

MAX_PROMPTS = 20_000  # training problems generated (the RL prompt pool; demonstrations are its first n_demos)
NAMES = [("Mia", "She"), ("Leo", "He"), ("Ava", "She"), ("Sam", "He"), ("Zoe", "She"), ("Ben", "He"), ("Ivy", "She"),
         ("Tom", "He"), ("Nora", "She"), ("Omar", "He"), ("Lily", "She"), ("Raj", "He")]
ITEMS = ["apples", "marbles", "stickers", "books", "cookies", "pencils", "cards", "shells", "coins", "eggs",
         "stamps", "beads"]
CONTAINERS = ["bags", "boxes", "packs", "jars", "baskets"]
_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
TIMES = {2: "doubles", 3: "triples", 4: "becomes four times as large"}


def number_words(n: int) -> str:
    """0 <= n < 10000 in English words: 7 -> "seven", 42 -> "forty-two", 305 -> "three hundred five"."""
    if not 0 <= n < 10_000:
        raise ValueError(f"number_words covers 0..9999, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    if n < 1000:
        return _ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + number_words(n % 100))
    return number_words(n // 1000) + " thousand" + ("" if n % 1000 == 0 else " " + number_words(n % 1000))


def make_problem(rng: random.Random, quantities: int, digits: int) -> dict:
    """One problem with `quantities` numbers (quantities - 1 operations) -> {question, answer ('... #### N'), value}."""
    name, pron = rng.choice(NAMES)
    items = rng.choice(ITEMS)
    top = 10**digits - 1
    say = lambda n: number_words(n) if rng.random() < 0.5 else str(n)  # noqa: E731 (each number on its own)
    x = rng.randint(2, top)
    question = [f"{name} has {say(x)} {items}."]
    answer = [f"{name} starts with {x} {items}."]
    left = quantities - 1
    while left > 0:
        ops = ["add", "sub", "mul"] + (["div"] if any(x % k == 0 for k in range(2, 6)) else []) \
            + (["groups"] if left >= 2 else [])
        op = rng.choice(ops)
        if op == "sub" and x < 2:
            op = "add"
        if op == "add":
            n = rng.randint(1, top)
            question.append(rng.choice([f"{pron} finds {say(n)} more {items}.", f"{pron} buys {say(n)} more {items}.",
                                        f"A friend gives {name} {say(n)} {items}."]))
            answer.append(f"{pron} gets {n} more: {x} + {n} = {x + n}.")
            x += n
        elif op == "sub":
            n = rng.randint(1, min(top, x - 1))
            question.append(rng.choice([f"{pron} gives away {say(n)} {items}.", f"{pron} loses {say(n)} {items}.",
                                        f"{pron} sells {say(n)} of the {items}."]))
            answer.append(f"{pron} gives up {n}: {x} - {n} = {x - n}.")
            x -= n
        elif op == "mul":
            k = rng.choice([2, 3] if x > 200 else [2, 3, 4])
            question.append(f"Then the number of {items} {pron.lower()} has {TIMES[k]}.")
            answer.append(f"{k} times as many: {x} * {k} = {x * k}.")
            x *= k
        elif op == "div":
            k = rng.choice([k for k in range(2, 6) if x % k == 0])
            box = rng.choice(CONTAINERS)
            question.append(f"{pron} splits the {items} equally into {say(k)} {box} and keeps only one of them.")
            answer.append(f"One of {k} equal {box}: {x} / {k} = {x // k}.")
            x //= k
        else:  # groups: k containers of n each, then added (two quantities, two operations)
            k, n = rng.randint(2, 6), rng.randint(2, min(top, 12))
            box = rng.choice(CONTAINERS)
            question.append(f"{pron} buys {say(k)} {box} with {say(n)} {items} in each.")
            answer.append(f"The {k} {box} hold {k} * {n} = {k * n} {items}, so {pron.lower()} has "
                          f"{x} + {k * n} = {x + k * n}.")
            x += k * n
            left -= 1
        left -= 1
    question.append(f"How many {items} does {name} have now?")
    answer.append(f"#### {x}")
    return {"question": " ".join(question), "answer": "\n".join(answer), "value": x}


class WordProblemsTask(GSM8KTask):
    """GSM8K-format word problems from `make_problem`; held-out and training problems are disjoint questions,
    both deterministic given task.seed. Prompts, demonstrations and the verifier are GSM8KTask's."""

    def __init__(self, cfg: TaskConfig, fmt: PromptFormat | None = None):
        cfg.validate()
        self.cfg, self.fmt = cfg, fmt or PromptFormat()
        if cfg.digits > 3:
            raise UserError(f"word_problems: task.digits must be 1, 2 or 3 (numbers are also written in words), "
                            f"got {cfg.digits}")
        rng = random.Random(f"word-problems-{cfg.seed}-{cfg.operands}-{cfg.digits}")
        n_train = max(MAX_PROMPTS, cfg.n_demos)
        seen: set[str] = set()
        rows: list[dict] = []
        tries = 0
        while len(rows) < cfg.n_heldout + n_train and tries < 4 * (cfg.n_heldout + n_train):
            tries += 1
            p = make_problem(rng, cfg.operands, cfg.digits)
            if p["question"] not in seen:  # held-out and training questions never repeat
                seen.add(p["question"])
                rows.append({"question": p["question"], "answer": p["answer"]})
        if len(rows) < cfg.n_heldout + cfg.n_demos:
            raise UserError(f"word_problems with operands={cfg.operands}, digits={cfg.digits} gave only {len(rows)} "
                            f"distinct problems: lower n_heldout/n_demos or raise digits")
        self._build(rows[cfg.n_heldout:], rows[:cfg.n_heldout])
