"""Reward functions of your own: plain Python callables in your own file, as TRL's `reward_funcs` users write them.

    train:
      reward: functions                                   # the reward every RL method trains on is ...
      reward_funcs: [my_rewards.py:correct, my_rewards.py:brief]     # FILE.py:NAME, each (prompt, completion, answer)
      reward_weights: [1.0, 0.1]                          # ... Σ_k w_k f_k(prompt, completion, answer); default w_k = 1
      step_reward_func: my_rewards.py:steps               # optional, process supervision (grpo_ps, reward: process):
                                                          # (prompt, completion, answer) -> [(end_char, reward), ...]

A step function returns one (end character index in the completion, exclusive; reward) pair per reasoning step, as
the task's own step verifier does (`gcframe.tasks.answers.step_rewards`); the reward lands on the step's last token.
The gold `correct` column (training accuracy, and the filter of rft / online_rft / dpo, whose data are defined by
correctness) stays the task's verifier. A reward is a finite number: a bool, int or float (or a NumPy or torch
scalar); text such as "1.0" is not one. Before anything is written (`attach`), every function is called on a few
demonstrations and on an empty completion, so a function that raises or returns something else is refused in
seconds with one line naming the function, the prompt and the completion; one that fails later, on a sampled
completion, stops the run the same way (compare.py then says what it kept and how to --resume).
"""
from __future__ import annotations

import numbers
from pathlib import Path

import torch

from gcframe.errors import UserError


def load_callable(spec: str, where: str):
    """"FILE.py:NAME" -> the callable NAME defined in FILE.py (imported once, as a plugin file)."""
    from gcframe.plugins import import_file

    if not isinstance(spec, str) or ":" not in spec:
        raise UserError(f"{where} entry {spec!r} must be 'FILE.py:NAME', e.g. my_rewards.py:correct")
    path, _, name = spec.rpartition(":")
    module = import_file(path, where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UserError(f"{where}: {path} defines no function '{name}': define def {name}(prompt, completion, "
                        "answer) -> float there")
    return fn


def absolute(spec: str) -> str:
    """"FILE.py:NAME" with FILE made absolute, so that OUT/config.yaml (and --resume) finds it from anywhere."""
    path, _, name = spec.rpartition(":")
    return f"{Path(path).expanduser().resolve()}:{name}" if path else spec


def _call(fn, spec: str, t: dict):
    try:
        return fn(t["prompt"], t["completion"], t["answer"])
    except Exception as e:  # noqa: BLE001 — the user's function: bad input, not a crash
        raise UserError(f"reward function {spec} raised {type(e).__name__}: {e} on prompt {t['prompt']!r} and "
                        f"completion {t['completion']!r}: fix the function") from None


def is_number(value) -> bool:
    """A bool, int or float (any numbers.Real: NumPy's scalars too) or a 0-d NumPy/torch array of a numeric dtype;
    never text, however numeric it reads ("1.0")."""
    if isinstance(value, numbers.Real):
        return True
    dtype = getattr(value, "dtype", None)
    return (dtype is not None and getattr(value, "ndim", None) == 0
            and str(dtype).removeprefix("torch.").startswith(("bool", "int", "uint", "float", "bfloat")))


def _reward(value, where: str, t: dict) -> float:
    """A user function's reward as a float: a finite number, else one line naming the function, prompt and
    completion."""
    from gcframe.rewards.scoring import _checked  # the verifiers' check: finite, else the prompt and completion

    if not is_number(value):
        raise UserError(f"{where} returned {value!r} (a {type(value).__name__}) for prompt {t['prompt']!r} and "
                        f"completion {t['completion']!r}: return a number (a float, int or bool), e.g. float(...)")
    return _checked(value, where, t)


class RewardFunctions:
    """Σ_k w_k f_k(prompt, completion, answer) over a batch's texts -> [N]."""

    def __init__(self, specs: list[str], weights: list[float]):
        if not specs:
            raise UserError("train.reward is functions but train.reward_funcs is empty: list your functions as "
                            "[FILE.py:NAME, ...]")
        if weights and len(weights) != len(specs):
            raise UserError(f"train.reward_weights has {len(weights)} weight(s) for {len(specs)} reward function(s): "
                            "give one weight per function, or none (1 each)")
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights):
            raise UserError(f"train.reward_weights must be numbers, got {weights!r}")
        self.specs, self.weights = list(specs), [float(w) for w in weights] or [1.0] * len(specs)
        self.funcs = [load_callable(s, "train.reward_funcs") for s in specs]

    def score(self, batch) -> torch.Tensor:
        out = []
        for t in batch.texts:
            out.append(sum(w * _reward(_call(f, s, t), f"reward function {s}", t)
                           for f, s, w in zip(self.funcs, self.specs, self.weights)))
        return torch.tensor(out, dtype=torch.float32)  # [N]


def step_function(spec: str):
    """The step reward function of `spec` as the task's step_rewards sees texts: t -> [(end_char, reward), ...]."""
    fn = load_callable(spec, "train.step_reward_func")

    def steps(t: dict) -> list[tuple[int, float]]:
        out = _call(fn, spec, t)
        try:
            pairs = [(int(end), r) for end, r in out]
        except (TypeError, ValueError):
            raise UserError(f"step reward function {spec} returned {out!r} for completion {t['completion']!r}: return "
                            "a list of (end character index, reward) pairs, one per step") from None
        return [(end, _reward(r, f"step reward function {spec}", t)) for end, r in pairs]

    return steps


def attach(task, train_cfg) -> None:
    """Load the functions train_cfg names (before anything is written) and hand them to the task: the task's
    `reward_functions` (train.reward: functions) and `step_reward_func` (process supervision) are what
    gcframe.rewards calls. File paths in train_cfg become absolute."""
    if train_cfg.reward_funcs and train_cfg.reward != "functions":
        raise UserError(f"train.reward_funcs is set but train.reward is '{train_cfg.reward}': set train.reward: "
                        "functions to train on them")
    if train_cfg.reward == "functions":
        train_cfg.reward_funcs = [absolute(s) if isinstance(s, str) else s for s in train_cfg.reward_funcs]
        task.reward_functions = RewardFunctions(train_cfg.reward_funcs, train_cfg.reward_weights)
    if train_cfg.step_reward_func:
        train_cfg.step_reward_func = absolute(train_cfg.step_reward_func)
        task.step_reward_func = step_function(train_cfg.step_reward_func)
    if train_cfg.reward == "functions" or train_cfg.step_reward_func:
        try_on_demos(task)


DEMOS_TRIED = 3
"""Demonstrations each reward function is called on before anything is written (`try_on_demos`)."""


class _Texts:
    def __init__(self, texts: list[dict]):
        self.texts = texts


def try_on_demos(task) -> None:
    """Call the user's reward functions on the first DEMOS_TRIED demonstrations and on an empty completion (a
    policy may stop at once) before stage 1 and before anything is written: a function that raises, or returns
    text, None or NaN, is refused now, in seconds, rather than after stage 1 and a first method."""
    rows = [task.demos[i] for i in range(min(DEMOS_TRIED, len(task.demos)))]
    texts = [{"prompt": r["prompt"], "completion": r["completion"], "answer": r["answer"],
              "steps": r.get("steps") or [r["answer"]]} for r in rows]
    texts += [{**texts[0], "completion": ""}] if texts else []
    try:
        if getattr(task, "reward_functions", None) is not None:
            task.reward_functions.score(_Texts(texts))
        if getattr(task, "step_reward_func", None) is not None:
            for t in texts:
                task.step_reward_func(t)
    except UserError as e:
        raise UserError(f"{e} (tried on {len(rows)} demonstrations and an empty completion before training: "
                        "nothing was written)") from None
