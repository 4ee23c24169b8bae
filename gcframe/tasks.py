"""Tasks: problem generators/loaders with SFT demonstrations, RL prompts, a held-out split and verifiers.

Arithmetic format (character-level; one char = one token):
    prompt      "12+34+56="
    completion  "46;102"   (show_steps: partial sums separated by ';', the last field is the answer)
                "102"      (no show_steps, or operands=2 where the only partial sum is the answer)
The EOS token is appended by the caller and is not part of the text.
"""
from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass

import datasets

from gcframe.errors import UserError

KNOWN_TASKS = ("arithmetic", "gsm8k")
MAX_PROMPTS = 20_000  # RL prompt pool size cap when the training space is large
ENUMERATE_MAX = 1_000_000  # problem spaces up to this size are partitioned by a seeded permutation


@dataclass
class TaskConfig:
    """Which task to build and how."""

    name: str = "arithmetic"
    """Task name: "arithmetic" (synthetic multi-operand addition) or "gsm8k"."""
    operands: int = 2
    """Arithmetic: number of terms to add (>= 2)."""
    digits: int = 2
    """Arithmetic: max digits per operand; operands are uniform in [0, 10**digits - 1]."""
    show_steps: bool = True
    """Arithmetic: completions show all partial sums ("46;102") instead of only the answer ("102")."""
    n_demos: int = 500
    """Number of distinct training problems with SFT demonstrations (limited on purpose)."""
    demo_noise: float = 0.0
    """Probability that a demonstration's final answer is replaced by a random wrong number."""
    n_heldout: int = 500
    """Number of held-out evaluation problems, disjoint from every demo and RL prompt."""
    seed: int = 0
    """Seed for the train/held-out split, demo selection and demo noise."""
    path: str | None = None
    """GSM8K: a local JSONL file with `question`/`answer` fields, or a hub dataset name (default "openai/gsm8k")."""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise UserError on out-of-range fields."""
        for field in ("operands", "digits", "n_demos", "n_heldout", "seed"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise UserError(f"task.{field} must be an integer, got {value!r}; pass a whole number")
        for field, low in (("operands", 2), ("digits", 1), ("n_demos", 1), ("n_heldout", 1)):
            if getattr(self, field) < low:
                raise UserError(f"task.{field} must be >= {low}, got {getattr(self, field)}; raise it")
        if not 0.0 <= self.demo_noise <= 1.0:
            raise UserError(f"task.demo_noise must be in [0, 1], got {self.demo_noise}; it is a fraction")


def extract_answer(completion: str) -> str | None:
    """The final answer of an arithmetic completion: its last ';'-separated field, stripped; None if empty."""
    answer = completion.rsplit(";", 1)[-1].strip()
    return answer or None


def _step_rewards(completion: str, steps: list[str]) -> list[tuple[int, float]]:
    """Score each ';'-separated field of `completion` against the true step at the same position.

    Returns (end_char_index_exclusive, reward) per field present; fields beyond len(steps) score 0.
    The end index is at least 1 so that `end - 1` is always a valid character index.
    """
    if not completion:
        return []
    rewards, start = [], 0
    for i, field in enumerate(completion.split(";")):
        end = start + len(field)
        ok = i < len(steps) and field.strip() == steps[i].strip()
        rewards.append((max(end, 1), 1.0 if ok else 0.0))
        start = end + 1  # skip the ';'
    return rewards


class ArithmeticTask:
    """Multi-operand addition; deterministic given the config (seed included).

    `.heldout`, `.prompts`: columns prompt, answer, steps. `.demos`: prompt, completion, answer, steps.
    `steps` holds the fields of the gold completion: the true partial sums (the last is the answer),
    or just [answer] when show_steps is False, so that `step_rewards` matches the completion format.
    """

    def __init__(self, cfg: TaskConfig):
        cfg.validate()
        self.cfg = cfg
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
        self.prompts = self._dataset(train)
        self.demos = self._demo_dataset(train[: cfg.n_demos], random.Random(f"noise-{cfg.seed}"))
        # Partial sums grow with every operand, so all-max operands give the longest gold completion.
        self.max_completion_chars = len(self.completion([self.base - 1] * cfg.operands))
        self.max_prompt_chars = len(self.prompt([self.base - 1] * cfg.operands))

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
    def prompt(operands: list[int]) -> str:
        return "+".join(str(x) for x in operands) + "="

    def steps(self, operands: list[int]) -> list[str]:
        """Fields of the gold completion: partial sums after each added term (or just the answer)."""
        sums, total = [], operands[0]
        for x in operands[1:]:
            total += x
            sums.append(str(total))
        return sums if self.cfg.show_steps else sums[-1:]

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

    def _demo_dataset(self, indices: list[int], rng: random.Random) -> datasets.Dataset:
        rows = self._rows(indices)
        max_sum = self.cfg.operands * (self.base - 1)
        for i, steps in enumerate(rows["steps"]):
            if rng.random() < self.cfg.demo_noise:
                # uniform over [0, max_sum] minus the true answer
                wrong = (int(steps[-1]) + rng.randint(1, max_sum)) % (max_sum + 1)
                rows["completion"][i] = ";".join(steps[:-1] + [str(wrong)])
        return datasets.Dataset.from_dict(rows)

    extract_answer = staticmethod(extract_answer)

    def verify(self, completion: str, answer: str) -> bool:
        """Outcome verifier: the completion's final field equals the answer (both stripped)."""
        return extract_answer(completion) == answer.strip()

    def step_rewards(self, completion: str, steps: list[str]) -> list[tuple[int, float]]:
        """Process verifier: (end char index, exclusive; 1.0 if correct else 0.0) for each ';' step present."""
        return _step_rewards(completion, steps)


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _normalize_number(text: str) -> str:
    text = text.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() else str(value)


def gsm8k_extract(completion: str) -> str | None:
    """The number after the last '####' in the completion, else the last number in it; None if none."""
    if "####" in completion:
        match = _NUMBER.search(completion.rsplit("####", 1)[1])
        if match:
            return _normalize_number(match.group())
    numbers = _NUMBER.findall(completion)
    return _normalize_number(numbers[-1]) if numbers else None


class GSM8KTask:
    """GSM8K-format word problems (JSONL with `question` and `answer` ending in '#### N').

    A local file is split into held-out/training rows by a seeded permutation; a hub dataset uses its
    test split for held-out rows and its train split for training. steps = [answer] (one outcome step).
    """

    REQUIRED = ("question", "answer")

    def __init__(self, cfg: TaskConfig):
        cfg.validate()
        self.cfg = cfg
        rng = random.Random(f"split-{cfg.seed}")
        source = cfg.path or "openai/gsm8k"
        local = os.path.exists(source) or source.endswith((".json", ".jsonl"))
        train, test = self._load_local(source) if local else self._load_hub(source)
        train = rng.sample(train, len(train))
        if test is None:  # one local file: carve the held-out rows out of it
            test, train = train[: cfg.n_heldout], train[cfg.n_heldout :]
        else:
            test = rng.sample(test, min(cfg.n_heldout, len(test)))
        if len(test) < cfg.n_heldout or len(train) < cfg.n_demos:
            raise UserError(
                f"{source} has too few rows for n_heldout={cfg.n_heldout} held-out plus n_demos={cfg.n_demos} "
                f"training problems; lower them or use a larger file"
            )

        self.heldout = datasets.Dataset.from_dict(self._columns(test))
        self.prompts = datasets.Dataset.from_dict(self._columns(train))
        demo_rows = self._columns(train[: cfg.n_demos], with_completion=True)
        noise_rng = random.Random(f"noise-{cfg.seed}")
        for i, answer in enumerate(demo_rows["answer"]):
            if noise_rng.random() < cfg.demo_noise:
                text = demo_rows["completion"][i]
                demo_rows["completion"][i] = text.rsplit("####", 1)[0] + "#### " + self._wrong(answer, noise_rng)
        self.demos = datasets.Dataset.from_dict(demo_rows)
        self.max_completion_chars = max(len(" " + r["answer"]) for r in train)
        self.max_prompt_chars = max(len(self._prompt(r["question"])) for r in train + test)

    def _rows(self, ds: datasets.Dataset, where: str) -> list[dict]:
        missing = [c for c in self.REQUIRED if c not in ds.column_names]
        if missing:
            raise UserError(f"{where} lacks column(s) {', '.join(missing)}; each row needs 'question' and 'answer'")
        return [{"question": q, "answer": a} for q, a in zip(ds["question"], ds["answer"])]

    def _load_local(self, path: str) -> tuple[list[dict], None]:
        if not os.path.isfile(path):
            raise UserError(f"GSM8K file not found: {path}; pass task.path pointing to a JSONL file")
        try:
            ds = datasets.load_dataset("json", data_files=path, split="train")
        except Exception as e:  # malformed JSON and the like
            raise UserError(f"could not read {path} as JSONL ({type(e).__name__}); fix the file format") from e
        return self._rows(ds, path), None

    def _load_hub(self, name: str) -> tuple[list[dict], list[dict]]:
        try:
            dd = datasets.load_dataset(name, "main") if name.endswith("gsm8k") else datasets.load_dataset(name)
        except Exception as e:
            raise UserError(
                f"could not load hub dataset {name!r} ({type(e).__name__}); set task.path to a local JSONL"
            ) from e
        if "train" not in dd or "test" not in dd:
            raise UserError(f"hub dataset {name!r} needs 'train' and 'test' splits; set task.path to a local JSONL")
        return self._rows(dd["train"], f"{name} train"), self._rows(dd["test"], f"{name} test")

    @staticmethod
    def _prompt(question: str) -> str:
        return f"Question: {question}\nAnswer:"

    def _columns(self, rows: list[dict], with_completion: bool = False) -> dict[str, list]:
        out: dict[str, list] = {"prompt": [], "answer": [], "steps": []}
        if with_completion:
            out["completion"] = []
        for r in rows:
            if "####" not in r["answer"]:
                raise UserError(f"GSM8K answer {r['answer'][:60]!r} lacks '#### N'; every answer must end in '#### N'")
            answer = r["answer"].rsplit("####", 1)[1].strip().replace(",", "")
            out["prompt"].append(self._prompt(r["question"]))
            out["answer"].append(answer)
            out["steps"].append([answer])
            if with_completion:
                out["completion"].append(" " + r["answer"])
        return out

    @staticmethod
    def _wrong(answer: str, rng: random.Random) -> str:
        try:
            return str(int(answer) + rng.choice([-1, 1]) * rng.randint(1, max(10, abs(int(answer)))))
        except ValueError:
            return answer + "1"

    extract_answer = staticmethod(gsm8k_extract)

    def verify(self, completion: str, answer: str) -> bool:
        """Outcome verifier: the number after the last '####', else the last number, equals the answer."""
        got = gsm8k_extract(completion)
        return got is not None and got == _normalize_number(answer)

    def step_rewards(self, completion: str, steps: list[str]) -> list[tuple[int, float]]:
        """One step: the whole completion, scored by the outcome verifier."""
        if not completion:
            return []
        return [(len(completion), 1.0 if self.verify(completion, steps[-1] if steps else "") else 0.0)]


def build_task(cfg: TaskConfig) -> ArithmeticTask | GSM8KTask:
    """Build the task named by cfg.name."""
    if cfg.name == "arithmetic":
        return ArithmeticTask(cfg)
    if cfg.name == "gsm8k":
        return GSM8KTask(cfg)
    raise UserError(f"unknown task {cfg.name!r}; known tasks: {', '.join(KNOWN_TASKS)}")
