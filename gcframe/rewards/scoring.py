"""Rewards: the gold outcome verifier, the process (step) verifier, and a learned reward model.

`score(batch, task, source, reward_model)` fills, for N sequences:

    rewards      [N]     the scalar reward the method trains on
    correct      [N]     gold outcome correctness (always logged, whatever the training reward is)
    step_rewards [N, T]  process supervision only: each step's reward at that step's last token, 0 elsewhere
    step_mask    [N, T]  process supervision only: 1 at the last token of every graded step
"""
from __future__ import annotations

import math

import torch

from gcframe.batch import Batch
from gcframe.errors import UserError

REWARD_SOURCES = ("verifier", "reward_model", "process", "functions")


def _checked(value, where: str, text: dict) -> float:
    """A reward must be a finite number; anything else names the prompt and completion."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not math.isfinite(v):
        raise UserError(f"{where} returned {value!r} for prompt {text['prompt']!r} and completion "
                        f"{text['completion']!r}: a reward must be a finite number")
    return v


def outcome_rewards(batch: Batch, task) -> torch.Tensor:
    """1.0 where the final answer is correct, else 0.0 -> [N]."""
    out = []
    for t in batch.texts:
        try:
            ok = task.verify(t["completion"], t["answer"])
        except Exception as e:  # a user-supplied verifier that raises is bad input, not a crash
            raise UserError(f"the task verifier raised {type(e).__name__}: {e} on prompt {t['prompt']!r} and "
                            f"completion {t['completion']!r}: fix the verifier") from None
        out.append(_checked(ok, "the task verifier", t))
    return torch.tensor(out, dtype=torch.float32)


def process_rewards(batch: Batch, task, tok) -> tuple[torch.Tensor, torch.Tensor]:
    """Step verifier rewards placed at each step's last token -> (step_rewards [N, T], step_mask [N, T])."""
    N, T = batch.completion_ids.shape
    rewards, mask = torch.zeros(N, T), torch.zeros(N, T)
    user_steps = getattr(task, "step_reward_func", None)  # train.step_reward_func (gcframe.rewards.functions.attach)
    for i, t in enumerate(batch.texts):
        steps = user_steps(t) if user_steps else task.step_rewards(t["completion"], t["steps"])
        if not steps:
            continue
        offsets = tok(t["completion"], add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        for end_char, r in steps:
            # the token whose character span contains the step's last character
            tok_idx = next((k for k, (s, e) in enumerate(offsets) if s < end_char <= e), len(offsets) - 1)
            tok_idx = min(max(tok_idx, 0), T - 1)
            rewards[i, tok_idx] = _checked(r, "the step reward function" if user_steps else "the step verifier", t)
            mask[i, tok_idx] = 1.0
    return rewards, mask


def score(batch: Batch, task, tok, source: str = "verifier", reward_model=None) -> Batch:
    """Fill batch.data with rewards (see the module docstring). Returns the batch."""
    correct = outcome_rewards(batch, task)
    batch.data["correct"] = correct
    if source == "verifier":
        batch.data["rewards"] = correct.clone()
    elif source == "process":
        step_r, step_m = process_rewards(batch, task, tok)
        batch.data["step_rewards"], batch.data["step_mask"] = step_r, step_m
        # the outcome-level reward of a process-supervised sample: mean step score (for logging)
        batch.data["rewards"] = (step_r.sum(-1) / step_m.sum(-1).clamp(min=1))
    elif source == "functions":  # train.reward_funcs: Σ_k w_k f_k(prompt, completion, answer) (gcframe.rewards.functions)
        batch.data["rewards"] = task.reward_functions.score(batch)
    elif source == "reward_model":
        if reward_model is None:
            raise UserError("train.reward is 'reward_model' but no reward model was trained or given")
        r = reward_model.score(batch)
        if not torch.isfinite(r).all():
            i = int((~torch.isfinite(r)).nonzero()[0])
            _checked(float(r[i]), "the reward model", batch.texts[i])
        batch.data["rewards"] = r.float().cpu()
    else:
        raise UserError(f"unknown reward source '{source}': choose one of {', '.join(REWARD_SOURCES)}")
    return batch
