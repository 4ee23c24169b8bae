"""TaskConfig: which task to build, and how its prompts are shown to the model."""
from __future__ import annotations

from dataclasses import dataclass

from gcframe.errors import UserError

PROMPT_FORMATS = ("auto", "chat", "plain")
MIN_VALIDATION = 100  # task.n_validation: the smallest validation set that can rank choices


@dataclass
class TaskConfig:
    """Which task to build and how."""

    name: str = "arithmetic"
    """Task name: "arithmetic" (synthetic multi-operand addition), "gsm8k", "word_problems" (generated multi-step
    word problems in GSM8K format: operands = quantities per problem, digits bounds them), or "dataset" (your own
    data: task.path and task.columns, gcframe/tasks/custom.py)."""
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
    demo_slip: float = 0.0
    """Arithmetic: probability that a demonstration drops each carry of its additions (an annotator's systematic
    slip: "57+68=" -> "115" or "25" instead of "125"). Above 0.5 the demonstrations' most common answer to a problem
    with a carry is wrong, so imitation alone cannot learn it; problems without a carry are always right, and the
    checker that scores RL's rollouts is exact."""
    n_heldout: int = 500
    """Number of held-out test problems, disjoint from every demo, RL prompt and validation problem: every finding
    is scored on them."""
    n_validation: int = 0
    """Number of validation problems, carved from the end of the training prompts (never a demonstration, an RL
    prompt or a test problem): every choice (where stage 1 stops, a method's rate, a checkpoint) is made on them
    (docs/concepts/statistics.md). 0: no validation set; stage 1 then stops on the test problems. At least 100 when
    set, so that choices can be ranked."""
    seed: int = 0
    """Seed for the train/held-out split, demo selection and demo noise."""
    path: str | None = None
    """GSM8K: a local JSONL file with `question`/`answer` fields, or a hub dataset name (default "openai/gsm8k").
    dataset: a local .jsonl/.json/.csv/.parquet file, a dataset folder, or a load_dataset name ("name:config")."""
    columns: dict | None = None
    """dataset: which column holds what, e.g. {prompt: q, answer: a, completion: solution} (completion, the SFT
    demonstration, defaults to the answer); unmapped roles use the column of the same name."""

    prompt_format: str = "auto"
    """How a prompt is shown to the model: "plain" (the task's text as is, after <bos>: "12+34="), "chat" (a
    question rendered through the tokenizer's chat template as one user turn, the completion is the assistant's
    turn), or "auto" (chat when the tokenizer has a chat template, else plain)."""
    system_prompt: str | None = None
    """Chat format: the system message; None keeps the template's own default (SmolLM2's "You are a helpful AI
    assistant named SmolLM ..."), "" sends an empty one."""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise UserError on out-of-range fields."""
        for field in ("operands", "digits", "n_demos", "n_heldout", "n_validation", "seed"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise UserError(f"task.{field} must be an integer, got {value!r}; pass a whole number")
        for field, low in (("operands", 2), ("digits", 1), ("n_demos", 1), ("n_heldout", 1)):
            if getattr(self, field) < low:
                raise UserError(f"task.{field} must be >= {low}, got {getattr(self, field)}; raise it")
        if 0 < self.n_validation < MIN_VALIDATION or self.n_validation < 0:
            raise UserError(f"task.n_validation must be 0 (no validation set) or >= {MIN_VALIDATION}, got "
                            f"{self.n_validation}: a smaller set cannot rank choices (an accuracy near 0.5 on 100 "
                            "problems already has a standard error of 0.05); raise it")
        for field in ("demo_noise", "demo_slip"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                raise UserError(f"task.{field} must be in [0, 1], got {getattr(self, field)}; it is a probability")
        if self.prompt_format not in PROMPT_FORMATS:
            raise UserError(f"task.prompt_format must be one of {', '.join(PROMPT_FORMATS)}, got "
                            f"{self.prompt_format!r}")
