"""Held-out evaluation (`evaluate`, `rates`), per-problem outcomes (`problems`), and re-scoring a finished run's
models on any number of held-out problems:

    python -m gcframe.evaluate OUT --problems 500 --k 8      # gcframe/evaluate/rescore.py
"""
from gcframe.evaluate.core import COUNT_KEYS, eval_seed, evaluate, majority, rates
from gcframe.evaluate.problems import FIELDS, problem_id

__all__ = ["COUNT_KEYS", "FIELDS", "eval_seed", "evaluate", "majority", "problem_id", "rates"]
