"""Tasks: problem generators/loaders with SFT demonstrations, RL prompts, a held-out split and verifiers.

    config.py      TaskConfig (which task, its sizes, prompt_format, system_prompt)
    formats.py     how a prompt is shown to a model: plain text or the tokenizer's chat template
    answers.py     verifiers' reading of text: the last ';' field, free-text final numbers, step rewards
    arithmetic.py  multi-operand addition (synthetic)
    gsm8k.py       GSM8K-format word problems (a local JSONL or a hub dataset)
    word_problems.py  GSM8K-format multi-step word problems from the project's own generator
    custom.py      a user's own data (task.name: dataset): a local file or load_dataset spec, columns mapped

A task exposes `.prompts`, `.validation` and `.heldout` (columns prompt, answer, steps), `.demos` (+ completion),
`verify`, `extract_answer` and `step_rewards`; every prompt is already rendered in the task's format. The three
problem sets: training (`.demos` and the RL `.prompts`), validation (every choice is made on it; `task.n_validation`,
carved from the end of the training prompts by `split_validation`) and test (`.heldout`, every finding is scored on
it); `split_validation` refuses sets that share a problem.
"""
from __future__ import annotations

import importlib

from gcframe.errors import UserError
from gcframe.tasks.answers import extract_field, final_number, normalize_number, step_rewards
from gcframe.tasks.config import PROMPT_FORMATS, TaskConfig
from gcframe.tasks.formats import PromptFormat, resolve_format

TASKS = {"arithmetic": "ArithmeticTask", "gsm8k": "GSM8KTask", "word_problems": "WordProblemsTask",
         "dataset": "DatasetTask"}  # task.name -> class
KNOWN_TASKS = tuple(TASKS)
_TASK_CLASSES = {"ArithmeticTask": "arithmetic", "GSM8KTask": "gsm8k", "WordProblemsTask": "word_problems",
                 "DatasetTask": "custom"}  # class -> module;
# imported on first use (PEP 562): they import `datasets`, which reading a config does not need


def __getattr__(name: str):
    if name not in _TASK_CLASSES:
        raise AttributeError(f"module 'gcframe.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gcframe.tasks.{_TASK_CLASSES[name]}"), name)


extract_answer = extract_field  # the plain arithmetic format's reader (name kept for callers of the first wave)


def build_task(cfg: TaskConfig, tok=None):
    """Build the task named by cfg.name, its prompts in cfg.prompt_format for tokenizer `tok` (None: the tiny
    model's character tokenizer, which has no chat template, so "auto" is plain)."""
    fmt = resolve_format(cfg.prompt_format, cfg.system_prompt, tok)
    if cfg.name not in TASKS:
        raise UserError(f"unknown task {cfg.name!r}; known tasks: {', '.join(KNOWN_TASKS)}")
    return split_validation(__getattr__(TASKS[cfg.name])(cfg, fmt), cfg.n_validation)


def split_validation(task, n: int):
    """`task.validation`: the last n training prompts, removed from the RL prompts (`task.prompts`); an empty set
    when n is 0. Refused when they would include a demonstration, or when any two of the three sets share a problem
    (the same prompt text): a choice made on a test problem, or a finding scored on a training one, is not what the
    split promises."""
    import datasets

    prompts = task.prompts
    demo_prompts = set(task.demos["prompt"])
    if n and len(prompts) - n < len(task.demos):
        raise UserError(f"task.n_validation={n} leaves fewer training prompts ({len(prompts) - n}) than "
                        f"demonstrations ({len(task.demos)}): lower task.n_validation or task.n_demos")
    task.validation = prompts.select(range(len(prompts) - n, len(prompts))) if n else \
        datasets.Dataset.from_dict({c: [] for c in prompts.column_names})
    task.prompts = prompts.select(range(len(prompts) - n)) if n else prompts
    val, test = set(task.validation["prompt"]), set(task.heldout["prompt"])
    for a, b, (name_a, name_b) in ((val, test, ("validation", "test")), (val, demo_prompts, ("validation", "demonstration")),
                                   (demo_prompts, test, ("demonstration", "test"))):
        shared = a & b
        if shared:
            raise UserError(f"the {name_a} and {name_b} problems share {len(shared)} prompt(s), e.g. "
                            f"{sorted(shared)[0]!r}: a task's three problem sets must be disjoint; remove the "
                            "duplicates from the data (or lower task.n_validation)")
    return task


__all__ = ["ArithmeticTask", "DatasetTask", "GSM8KTask", "KNOWN_TASKS", "PROMPT_FORMATS", "PromptFormat", "TaskConfig",
           "WordProblemsTask",
           "build_task", "extract_answer", "extract_field", "final_number", "normalize_number", "resolve_format",
           "step_rewards"]
