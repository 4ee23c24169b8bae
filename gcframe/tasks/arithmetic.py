"""Multi-operand addition, the synthetic task of the tiny model (and a first task for chat models).

Plain format (character-level; one char = one token):
    prompt      "12+34+56="
    completion  "46;102"   (show_steps: partial sums separated by ';', the last field is the answer)
                "102"      (no show_steps, or operands=2 where the only partial sum is the answer)
Chat format: the question "What is 12+34+56? ..." as a user turn; the gold completion is the same text, and the
verifier reads free text (the last number, `#### N` or `\\boxed{N}`: `answers.final_number`).
The end-of-turn / EOS token is appended by the caller and is not part of the text.
"""
from __future__ import annotations

import functools
import operator
import random
from typing import ClassVar

import datasets

from gcframe.errors import UserError
from gcframe.tasks.answers import extract_field, final_number, step_rewards
from gcframe.tasks.config import TaskConfig
from gcframe.tasks.formats import PromptFormat

MAX_PROMPTS = 20_000  # RL prompt pool size cap when the training space is large
ENUMERATE_MAX = 1_000_000  # problem spaces up to this size are partitioned by a seeded permutation


class ArithmeticTask:
    """Multi-operand addition; deterministic given the config (seed included).

    `.heldout`, `.prompts`: columns prompt, answer, steps. `.demos`: prompt, completion, answer, steps.
    `steps` holds the fields of the gold completion: the true partial sums (the last is the answer),
    or just [answer] when show_steps is False, so that `step_rewards` matches the completion format.
    """

    def __init__(self, cfg: TaskConfig, fmt: PromptFormat | None = None):
        cfg.validate()
        self.cfg, self.fmt = cfg, fmt or PromptFormat()
        self.base = 10**cfg.digits
        space = self.base**cfg.operands
        n_train_avail = space - cfg.n_heldout
        if n_train_avail < cfg.n_demos:
            raise UserError(
                f"arithmetic with {cfg.operands} operands x {cfg.digits} digits has only {space} problems, "
                f"too few for n_heldout={cfg.n_heldout} plus n_demos={cfg.n_demos}; lower them or raise digits"
            )
        n_train = min(n_train_avail, max(MAX_PROMPTS, cfg.n_demos))
        indices = self._sample_indices(space, cfg.n_heldout, n_train, random.Random(f"split-{cfg.seed}"))
        heldout, train = indices[: cfg.n_heldout], indices[cfg.n_heldout :]

        self.heldout = self._dataset(heldout)
        self.heldout_operands = [self.operands_of(i) for i in heldout]  # in `.heldout`'s order (`subgroups`)
        self.prompts = self._dataset(train)
        self.train_indices = train  # the training problems in `.prompts`' order, demonstrations first (`exact_demos`)
        self.demos = self._demo_dataset(train[: cfg.n_demos], random.Random(f"noise-{cfg.seed}"),
                                        random.Random(f"slip-{cfg.seed}"))
        # Partial sums grow with every operand, so all-max operands give the longest gold completion.
        self.longest_completion = self.completion([self.base - 1] * cfg.operands)
        self.max_completion_chars = len(self.longest_completion)

    @staticmethod
    def _sample_indices(space: int, n_heldout: int, n_train: int, rng: random.Random) -> list[int]:
        """Distinct problem indices: the first n_heldout are held out, the rest are training problems."""
        k = n_heldout + n_train
        if space <= ENUMERATE_MAX:  # partition of the enumerated space by a seeded permutation
            return rng.sample(range(space), k)
        if k > space // 2:
            raise UserError(f"asked for {k} distinct problems out of {space}; lower n_heldout or n_demos")
        seen: set[int] = set()
        out: list[int] = []
        while len(out) < k:  # rejection: held-out and training keys are never repeated
            idx = rng.randrange(space)
            if idx not in seen:
                seen.add(idx)
                out.append(idx)
        return out

    def operands_of(self, index: int) -> list[int]:
        """Decode a problem index into its operands (base 10**digits, least significant first)."""
        return [(index // self.base**j) % self.base for j in range(self.cfg.operands)]

    @staticmethod
    def plain_prompt(operands: list[int]) -> str:
        return "+".join(str(x) for x in operands) + "="

    def question(self, operands: list[int]) -> str:
        """The chat format's user turn."""
        terms = "+".join(str(x) for x in operands)
        if self.cfg.show_steps and len(operands) > 2:
            return (f"What is {terms}? Add the numbers from left to right and write each running total, "
                    "separated by ';'. The last total is the answer.")
        return f"What is {terms}? Answer with the number only."

    def prompt(self, operands: list[int]) -> str:
        """The prompt text the model sees (`self.fmt`)."""
        return self.fmt.render(self.plain_prompt(operands), self.question(operands))

    def steps(self, operands: list[int], add=operator.add) -> list[str]:
        """Fields of the gold completion: partial sums after each added term (or just the answer); `add` is how one
        term is added to the running total (a slipping annotator's `slipped_sum` for task.demo_slip)."""
        sums, total = [], operands[0]
        for x in operands[1:]:
            total = add(total, x)
            sums.append(str(total))
        return sums if self.cfg.show_steps else sums[-1:]

    @staticmethod
    def carries(operands: list[int]) -> bool:
        """Whether adding the operands left to right, column by column, carries anywhere: 57+68 does (7+8 = 15),
        50+50 does in the tens (5+5 = 10), 12+34 and 45+54 do not; 12+34+56 does in 46+56 (6+6 = 12). The problems
        on which an annotator who drops carries (task.demo_slip) can be wrong."""
        total = operands[0]
        for x in operands[1:]:
            a, b = total, x
            while a or b:  # no carry so far, so a column carries when its two digits alone reach 10
                if a % 10 + b % 10 >= 10:
                    return True
                a, b = a // 10, b // 10
            total += x
        return False

    SUBGROUPS: ClassVar[dict[str, str]] = {"carry": "with a carry", "no_carry": "without a carry"}
    """The planned subgroups of the test problems (`subgroups`): name -> what the findings call them."""

    def subgroups(self) -> list[str]:
        """The planned subgroup of each test problem, in `.heldout`'s order: "carry" where `carries`, else
        "no_carry" (analysis.findings reports every paired result on both beside all problems)."""
        return ["carry" if self.carries(ops) else "no_carry" for ops in self.heldout_operands]

    def completion(self, operands: list[int]) -> str:
        return ";".join(self.steps(operands))

    def _rows(self, indices: list[int]) -> dict[str, list]:
        rows: dict[str, list] = {"prompt": [], "completion": [], "answer": [], "steps": []}
        for index in indices:
            ops = self.operands_of(index)
            steps = self.steps(ops)
            rows["prompt"].append(self.prompt(ops))
            rows["completion"].append(";".join(steps))
            rows["answer"].append(steps[-1])
            rows["steps"].append(steps)
        return rows

    def _dataset(self, indices: list[int]) -> datasets.Dataset:
        rows = self._rows(indices)
        del rows["completion"]
        return datasets.Dataset.from_dict(rows)

    @staticmethod
    def slipped_sum(a: int, b: int, slip: float, rng: random.Random) -> int:
        """a + b written column by column, each carry dropped with probability `slip` (task.demo_slip):
        57 + 68 -> 125 (no slip), 115 (the units' carry dropped), 25 (the tens' carry dropped) or 15 (both)."""
        out, carry, place = 0, 0, 1
        while a or b or carry:
            column = a % 10 + b % 10 + carry
            out += (column % 10) * place
            carry = column // 10
            if carry and (slip >= 1.0 or rng.random() < slip):  # the slip: the carry is not written on
                carry = 0
            a, b, place = a // 10, b // 10, place * 10
        return out

    def _demo_dataset(self, indices: list[int], rng: random.Random,
                      slip_rng: random.Random | None = None) -> datasets.Dataset:
        rows = self._rows(indices)
        if self.cfg.demo_slip:  # each addition from the previous written (slipped) total
            slip = functools.partial(self.slipped_sum, slip=self.cfg.demo_slip, rng=slip_rng)
            for i, index in enumerate(indices):
                rows["completion"][i] = ";".join(self.steps(self.operands_of(index), add=slip))
        max_sum = self.cfg.operands * (self.base - 1)
        for i, steps in enumerate(rows["steps"]):
            if rng.random() < self.cfg.demo_noise:
                # uniform over [0, max_sum] minus the true answer
                wrong = (int(steps[-1]) + rng.randint(1, max_sum)) % (max_sum + 1)
                rows["completion"][i] = ";".join(steps[:-1] + [str(wrong)])
        return datasets.Dataset.from_dict(rows)

    def exact_demos(self, n: int) -> datasets.Dataset:
        """n demonstrations written by an exact annotator (no task.demo_slip, no task.demo_noise), with their true
        partial sums, of training problems drawn as the demonstrations' are: first those no demonstration uses (the RL
        prompts after the demonstrations' problems; the validation problems are cut from the end of `.prompts`), then,
        where the training split has too few of them, the demonstrations' own problems. Never a validation or test
        problem. The clean counterpart of `.demos` for a baseline of equal count (sft_clean)."""
        n_demos = self.cfg.n_demos
        order = self.train_indices[n_demos:len(self.prompts)] + self.train_indices[:n_demos]
        if not 0 <= n <= len(order):
            raise UserError(f"asked for {n} exact demonstrations of the task's {len(order)} training problems; "
                            "lower task.n_validation or raise task.digits")
        return datasets.Dataset.from_dict(self._rows(order[:n]))

    def extract_answer(self, completion: str) -> str | None:
        """The answer a completion gives: its last ';' field (plain), the last number of free text (chat)."""
        return final_number(completion) if self.fmt.chat else extract_field(completion)

    def verify(self, completion: str, answer: str) -> bool:
        """Outcome verifier: the completion's answer (`extract_answer`) equals the gold answer (both stripped)."""
        return self.extract_answer(completion) == answer.strip()

    def step_rewards(self, completion: str, steps: list[str]) -> list[tuple[int, float]]:
        """Process verifier: (end char index, exclusive; 1.0 if correct else 0.0) for each ';' step present.

        Chat format (free text): one step (no show_steps) is the outcome verifier's reading of the whole completion,
        so that process and outcome rewards agree ("50+58 is 108." is right); several steps read each ';' field's
        last number."""
        if self.fmt.chat and len(steps) <= 1:
            return [(len(completion), float(self.verify(completion, steps[-1] if steps else "")))] if completion else []
        return step_rewards(completion, steps, read=final_number if self.fmt.chat else str.strip)


