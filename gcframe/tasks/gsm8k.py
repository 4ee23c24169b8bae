"""GSM8K-format word problems: a JSONL with `question` and `answer` ending in '#### N', or a hub dataset.

Plain format: "Question: ...\nAnswer:" and the answer text after a space. Chat format: the question as a user turn
with an instruction to end with '#### N'; the completion is the assistant's turn. The verifier reads free text in
both (`answers.final_number`).
"""
from __future__ import annotations

import os
import random

import datasets

from gcframe.errors import UserError
from gcframe.tasks.answers import final_number, normalize_number
from gcframe.tasks.config import TaskConfig
from gcframe.tasks.formats import PromptFormat

CHAT_INSTRUCTION = "\nSolve it step by step and end your answer with '#### N', where N is the final number."


class GSM8KTask:
    """GSM8K-format word problems (JSONL with `question` and `answer` ending in '#### N').

    A local file is split into held-out/training rows by a seeded permutation; a hub dataset uses its
    test split for held-out rows and its train split for training. steps = [answer] (one outcome step).
    """

    REQUIRED = ("question", "answer")

    def __init__(self, cfg: TaskConfig, fmt: PromptFormat | None = None):
        cfg.validate()
        self.cfg, self.fmt = cfg, fmt or PromptFormat()
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
        self._build(train, test)

    def _build(self, train: list[dict], test: list[dict]) -> None:
        """heldout, prompts, demos (the first n_demos training rows, with demo_noise) from {question, answer} rows."""
        cfg = self.cfg
        self.heldout = datasets.Dataset.from_dict(self._columns(test))
        self.prompts = datasets.Dataset.from_dict(self._columns(train))
        demo_rows = self._columns(train[: cfg.n_demos], with_completion=True)
        noise_rng = random.Random(f"noise-{cfg.seed}")
        for i, answer in enumerate(demo_rows["answer"]):
            if noise_rng.random() < cfg.demo_noise:
                text = demo_rows["completion"][i]
                demo_rows["completion"][i] = text.rsplit("####", 1)[0] + "#### " + self._wrong(answer, noise_rng)
        self.demos = datasets.Dataset.from_dict(demo_rows)
        self.longest_completion = max((" " + r["answer"] for r in train), key=len)
        self.max_completion_chars = len(self.longest_completion)

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

    def _prompt(self, question: str) -> str:
        return self.fmt.render(f"Question: {question}\nAnswer:", question + CHAT_INSTRUCTION)

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
                out["completion"].append(("" if self.fmt.chat else " ") + r["answer"])
        return out

    @staticmethod
    def _wrong(answer: str, rng: random.Random) -> str:
        try:
            return str(int(answer) + rng.choice([-1, 1]) * rng.randint(1, max(10, abs(int(answer)))))
        except ValueError:
            return answer + "1"

    extract_answer = staticmethod(final_number)

    def verify(self, completion: str, answer: str) -> bool:
        """Outcome verifier: the number after the last '####', else the last number, equals the answer."""
        got = final_number(completion)
        return got is not None and got == normalize_number(answer)

    def step_rewards(self, completion: str, steps: list[str]) -> list[tuple[int, float]]:
        """One step: the whole completion, scored by the outcome verifier."""
        if not completion:
            return []
        return [(len(completion), 1.0 if self.verify(completion, steps[-1] if steps else "") else 0.0)]


