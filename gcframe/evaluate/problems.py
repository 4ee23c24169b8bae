"""Per-problem outcomes: the unit of evidence of a comparison.

Every evaluation writes one row per held-out problem into the run folder, beside metrics.jsonl:

    RUN/problems.jsonl                       the evaluations made while training (a row per problem and step)
    RUN/rescored/<model>-n<N>-k<K>.jsonl     a finished run's model scored again (python -m gcframe.evaluate)

Every method and seed is scored on the same held-out problems, so two methods can be compared problem by problem
and seed by seed (analysis.paired), which removes the problems' own difficulty from the noise. A problem's id is a
digest of its prompt and gold answer: the same for every method, seed, process and evaluation size, and different
for a different task, so that comparing runs scored on different problems is refused rather than mispaired.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

FIELDS = {
    "step": "training steps the evaluated model had taken",
    "problem": "stable id of the problem: a digest of its prompt and gold answer",
    "index": "the problem's position in the task's held-out set",
    "greedy_correct": "1 if the greedy completion's answer is right",
    "greedy_answer": "the answer read from the greedy completion (null: none)",
    "completion_len": "tokens of the greedy completion, up to and including <eos>",
    "truncated": "1 if the greedy completion reached max_new_tokens without <eos>",
    "k": "samples drawn for the problem (absent: greedy only)",
    "k_correct": "how many of the k samples are right",
    "maj_answer": "the most frequent answer of the k samples (ties: the first seen; null: none)",
    "maj_correct": "1 if that majority answer is right",
}
"""The columns of a per-problem file (docs/concepts/runs.md shows them)."""

FILE = "problems.jsonl"
RESCORED = "rescored"


def problem_id(row: dict) -> str:
    """A 12-hex digest of the problem's prompt and gold answer (the same text -> the same id, anywhere)."""
    text = f"{row['prompt']}\x00{row['answer']}"
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def set_digest(ids) -> str:
    """A 6-hex name of a set of problem ids (order-free): how a refusal names the problem set a run was scored on."""
    return hashlib.blake2b("\n".join(sorted(set(ids))).encode(), digest_size=3).hexdigest()


SPLITS = {"test": "heldout", "validation": "validation"}  # train.eval_split -> the task's attribute


def heldout_rows(task, n: int, split: str = "test") -> list[dict]:
    """The first n problems of `split` (test: the held-out problems findings are scored on; validation: the
    problems choices are made on), each with its `index` in that set."""
    data = getattr(task, SPLITS[split], None)
    if data is None or not len(data):
        from gcframe.errors import UserError

        raise UserError(f"the task has no {split} problems: set task.n_validation (>= 100) to evaluate on "
                        "validation, or train.eval_split: test")
    rows = data.select(range(min(n, len(data))))
    return [{**rows[i], "index": i} for i in range(len(rows))]


def split_names(task) -> dict:
    """The three problem sets a run uses, named: sizes and the digest of their problem ids (`set_digest`), written
    into every run folder (splits in config.yaml) so that a reader sees which set decided what."""
    val = getattr(task, "validation", None)
    return {"train": {"demos": len(task.demos), "prompts": len(task.prompts)},
            "validation": {"problems": len(val) if val is not None else 0,
                           "digest": set_digest(map(problem_id, val)) if val is not None and len(val) else None},
            "test": {"problems": len(task.heldout), "digest": set_digest(map(problem_id, task.heldout))}}


def write_rows(path: Path, step: int, records: list[dict], append: bool = True) -> None:
    """Per-problem rows of one evaluation at `step`, sorted by held-out index. append=False writes a new file whole,
    through a temporary file renamed into place (a reader, or a resumed re-scoring, never sees half of it)."""
    lines = "".join(json.dumps({"step": step, **r}) + "\n"
                    for r in sorted(records, key=lambda r: (r.get("index") is None, r.get("index") or 0)))
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with open(path, "a") as f:
            f.write(lines)
        return
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(lines)
    os.replace(tmp, path)
