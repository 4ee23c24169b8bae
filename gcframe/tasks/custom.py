"""A user's own data: a local JSONL/JSON/CSV/Parquet file, a local dataset folder or any `datasets.load_dataset`
spec, with the column names mapped in the config.

    task:
      name: dataset
      path: data/qa.csv                 # or data/qa.jsonl, data/qa.parquet, a folder, "openai/gsm8k:main" (name:config)
      columns: {prompt: q, answer: a}   # which column holds what; optional: completion (the SFT demonstration,
                                        # default: the answer itself)

The prompt column is the question as the model should see it: in the plain format it is the prompt text as is
(e.g. "12+34="), in the chat format the user turn, rendered through the same PromptFormat as the built-in tasks.
A dataset with 'train' and 'test' splits takes its held-out rows from 'test'; one split is divided by a seeded
permutation (held-out rows first). Verifier: a numeric answer is compared with the completion's final number
(`answers.final_number`: after '####', in \\boxed{}, else the last number), any other answer with the stripped
completion; one outcome step for process supervision. Rewards of your own: train.reward_funcs (gcframe.rewards.functions).
"""
from __future__ import annotations

import csv
import os
import random

import datasets

from gcframe.errors import UserError
from gcframe.tasks.answers import final_number, normalize_number
from gcframe.tasks.config import TaskConfig
from gcframe.tasks.formats import PromptFormat

ROLES = ("prompt", "answer", "completion")
"""What a mapped column may hold (`task.columns` keys)."""
BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
"""Local file suffix -> the `datasets` builder that reads it."""


def check_json(path: str) -> None:
    """A JSONL (or JSON-lines .json) file whose lines all parse, else one line naming the file and the 1-based line
    of the first that does not (the `datasets` loader would log a 0-based "row" and then fail vaguely). A .json file
    holding one JSON document is checked as one, with its line and column."""
    import json

    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    if path.lower().endswith(".json"):
        try:
            json.loads(raw)
            return
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            first = next((ln for ln in lines if ln.strip()), b"")
            try:
                one_per_line = len([ln for ln in lines if ln.strip()]) > 1 and isinstance(json.loads(first), dict)
            except (json.JSONDecodeError, UnicodeDecodeError):
                one_per_line = False
            if not one_per_line:
                where = f"line {e.lineno}, column {e.colno}" if isinstance(e, json.JSONDecodeError) else "its bytes"
                raise UserError(f"task.path '{path}' is not valid JSON at {where} ({_reason(e)}): fix the file (one "
                                "JSON document, or one JSON object per line)") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UserError(f"task.path '{path}': line {n} is not valid JSON ({_reason(e)}): fix that line (one "
                            "JSON object per line)") from None


def _reason(e: Exception) -> str:
    return e.msg if hasattr(e, "msg") else f"not UTF-8 text: {e.reason}" if hasattr(e, "reason") else str(e)


def load_splits(path: str) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(training rows, held-out rows or None) of a local file / folder / load_dataset spec."""
    suffix = os.path.splitext(path)[1].lower()
    if os.path.isfile(path):
        if suffix not in BUILDERS:
            raise UserError(f"task.path '{path}' is a {suffix or 'suffix-less'} file: give a .jsonl, .json, .csv or "
                            ".parquet file, a dataset folder or a datasets.load_dataset name")
        args, kwargs = (BUILDERS[suffix],), {"data_files": path}
        if BUILDERS[suffix] == "json":
            check_json(path)
    elif suffix in BUILDERS:
        raise UserError(f"task.path '{path}' not found: give the path of your data file")
    else:  # a folder or a hub spec "name" / "name:config"
        name, _, config = path.partition(":") if not os.path.isdir(path) else (path, "", "")
        args, kwargs = ((name, config) if config else (name,)), {}
    empty = f"task.path '{path}' is empty: it holds no rows; give a file with one row per example"
    try:
        data = datasets.load_dataset(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 — malformed files, unknown names, no network
        if os.path.isfile(path) and (isinstance(e, StopIteration) or "corresponds to no data" in str(e)):
            raise UserError(empty) from None  # an empty JSONL raises StopIteration, a header-only CSV this
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"could not load task.path '{path}' ({type(e).__name__}: {first}): give a readable local "
                        "file or a dataset name datasets.load_dataset knows") from None
    if not any(len(split) for split in data.values()):
        raise UserError(empty)
    if "train" in data and "test" in data:
        return data["train"], data["test"]
    return data[next(iter(data))], None


def blank(value) -> bool:
    """A cell with nothing in it: missing (None, or NaN where a CSV column is numeric) or only whitespace."""
    return value is None or (isinstance(value, float) and value != value) or not str(value).strip()


def places(path: str, n: int) -> list[str]:
    """Where each of the n rows of a local file is, as an editor shows it: 'line N' (1-based) of a JSONL or CSV file
    (blank lines skipped, a quoted CSV field may span lines: a row is named by its first line), else 'row N'
    (1-based: a Parquet file, a JSON array whose rows are not one per line, a dataset folder or name)."""
    suffix = os.path.splitext(path)[1].lower()
    starts: list[int] = []
    if os.path.isfile(path) and suffix in (".jsonl", ".json", ".csv"):
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            if suffix == ".csv":
                reader = csv.reader(f)
                next(reader, None)  # the header
                line = reader.line_num + 1
                for record in reader:
                    if record:
                        starts.append(line)
                    line = reader.line_num + 1
            else:
                starts = [i for i, text in enumerate(f, 1) if text.strip()]
    if len(starts) == n:
        return [f"line {i}" for i in starts]
    return [f"row {i}" for i in range(1, n + 1)]


class DatasetTask:
    """Rows of a user's dataset, columns mapped by `task.columns`; `.prompts`, `.heldout` (prompt, answer, steps),
    `.demos` (+ completion), `verify`, `extract_answer`, `step_rewards` like every task."""

    def __init__(self, cfg: TaskConfig, fmt: PromptFormat | None = None):
        cfg.validate()
        self.cfg, self.fmt = cfg, fmt or PromptFormat()
        if not cfg.path:
            raise UserError("task.name is dataset but task.path is empty: give a data file or a dataset name")
        self.columns = self._columns(cfg.columns)
        train, test = load_splits(cfg.path)
        rng = random.Random(f"split-{cfg.seed}")
        seen: dict[str, tuple[str, str]] = {}  # prompt -> (file or split, place) where it first appears
        train = self._rows(train, cfg.path, seen)
        train = rng.sample(train, len(train))
        if test is None:
            test, train = train[: cfg.n_heldout], train[cfg.n_heldout:]
        else:
            test = self._rows(test, f"{cfg.path} (test split)", seen)
            test = rng.sample(test, min(cfg.n_heldout, len(test)))
        if len(test) < cfg.n_heldout or len(train) < cfg.n_demos:
            raise UserError(f"{cfg.path} has too few rows for task.n_heldout={cfg.n_heldout} held-out plus "
                            f"task.n_demos={cfg.n_demos} training rows: lower them or use more data")
        self.heldout = datasets.Dataset.from_list([self._example(r) for r in test])
        self.prompts = datasets.Dataset.from_list([self._example(r) for r in train])
        self.demos = datasets.Dataset.from_list([self._example(r, with_completion=True) for r in train[: cfg.n_demos]])
        self.longest_completion = max((r["completion"] for r in train), key=len)
        self.max_completion_chars = len(self.longest_completion)

    @staticmethod
    def _columns(mapping) -> dict[str, str]:
        if mapping is None:
            mapping = {}
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise UserError(f"task.columns must map roles to column names, e.g. {{prompt: q, answer: a}}, got "
                            f"{mapping!r}")
        unknown = sorted(set(mapping) - set(ROLES))
        if unknown:
            raise UserError(f"task.columns: unknown role(s) {', '.join(unknown)}: the roles are {', '.join(ROLES)}")
        return {"prompt": "prompt", "answer": "answer", **mapping}

    def _rows(self, ds: datasets.Dataset, where: str, seen: dict) -> list[dict]:
        """{question, answer, completion} per row, from the mapped columns. A row with a missing or empty cell, or
        a prompt already in `seen` (this file's or split's earlier rows, or another split's), is refused with one
        line naming the file and the row's 1-based line (`places`)."""
        c = self.columns
        need = [c["prompt"], c["answer"]] + ([c["completion"]] if "completion" in c else [])
        have = ds.column_names
        missing = [col for col in need if col not in have]
        if missing:  # the example maps the file's own columns, never the names that just failed
            free = [col for col in have if col not in need]
            pick = {role: c[role] if c[role] in have else free.pop(0) if free else None
                    for role in ("prompt", "answer", "completion") if role in c}
            if pick.get("completion", "") is None:  # no column left for it: the answer is the demonstration
                pick.pop("completion")
            how = ("map yours with task.columns, e.g. {" + ", ".join(f"{r}: {col}" for r, col in pick.items()) + "}"
                   + (" (no completion: the answer is the demonstration)" if "completion" in c
                      and "completion" not in pick else "")
                   if None not in pick.values() else "give a file with a prompt column and an answer column")
            raise UserError(f"{where} lacks column(s) {', '.join(missing)} (it has {', '.join(have)}): {how}")
        roles = ("prompt", "answer", "completion") if "completion" in c else ("prompt", "answer")
        values = [ds[c[role]] for role in roles]
        at = places(self.cfg.path, len(ds)) if where == self.cfg.path else [f"row {i}" for i in range(1, len(ds) + 1)]
        for i, row in enumerate(zip(*values)):
            empty = next((role for role, v in zip(roles, row) if blank(v)), None)
            if empty:
                how = "empty" if isinstance(row[roles.index(empty)], str) else "missing"
                raise UserError(f"{where}: {at[i]} has no {empty} (its '{c[empty]}' field is {how}): give every row "
                                f"its {empty}, or remove that row")
            q = str(row[0])
            if q in seen:
                other = seen[q][1] + ("" if seen[q][0] == where else f" of {seen[q][0]}")
                raise UserError(f"{where}: {other} and {at[i]} have the same prompt {q[:60]!r}: keep one of them "
                                "(each problem once, so that none is trained on twice or both trained on and held "
                                "out)")
            seen[q] = (where, at[i])
        return [{"question": str(q), "answer": str(a).strip(), "completion": str(o)}
                for q, a, o in zip(values[0], values[1], values[-1])]

    def _example(self, row: dict, with_completion: bool = False) -> dict:
        out = {"prompt": self.fmt.render(row["question"], row["question"]), "answer": row["answer"],
               "steps": [row["answer"]]}
        if with_completion:
            out["completion"] = row["completion"]
        return out

    def extract_answer(self, completion: str) -> str | None:
        return final_number(completion)

    def verify(self, completion: str, answer: str) -> bool:
        """A numeric answer: the completion's final number equals it; other answers: the stripped texts are equal."""
        gold = normalize_number(answer)
        if final_number(gold) == gold:  # the answer is a number
            return final_number(completion) == gold
        return completion.strip() == answer.strip()

    def step_rewards(self, completion: str, steps: list[str]) -> list[tuple[int, float]]:
        """One step: the whole completion, scored by the outcome verifier."""
        if not completion:
            return []
        return [(len(completion), 1.0 if self.verify(completion, steps[-1] if steps else "") else 0.0)]
