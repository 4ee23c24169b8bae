"""Verifiers' reading of a completion: pure functions of text.

    extract_field     the character model's format: the last ';'-separated field ("46;102" -> "102")
    final_number      free text (chat models, GSM8K): the number after the last '####', else in the last
                      \\boxed{...}, else the last number in the text ("37 + 48 = 85." -> "85")
    step_rewards      process supervision: each ';'-separated field scored against the true step at its position
"""
from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def extract_field(completion: str) -> str | None:
    """The final answer of an arithmetic completion: its last ';'-separated field, stripped; None if empty."""
    answer = completion.rsplit(";", 1)[-1].strip()
    return answer or None


def normalize_number(text: str) -> str:
    """"1,004" -> "1004", "$12.50" -> "12.5", "7.0" -> "7"; text that is no number is returned stripped."""
    text = text.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() else str(value)


def final_number(completion: str) -> str | None:
    """The answer a free-text completion gives: the number after the last '####', else the last number inside the
    last \\boxed{...}, else the last number of the text; normalised (`normalize_number`); None if there is none."""
    if "####" in completion:
        match = _NUMBER.search(completion.rsplit("####", 1)[1])
        if match:
            return normalize_number(match.group())
    boxed = _BOXED.findall(completion)
    if boxed:
        numbers = _NUMBER.findall(boxed[-1])
        if numbers:
            return normalize_number(numbers[-1])
    numbers = _NUMBER.findall(completion)
    return normalize_number(numbers[-1]) if numbers else None


def step_rewards(completion: str, steps: list[str], read=str.strip) -> list[tuple[int, float]]:
    """Score each ';'-separated field of `completion` against the true step at the same position: `read(field)`
    (the stripped field; `final_number` for free text, "so 46;" -> "46") must equal the stripped step.

    Returns (end_char_index_exclusive, reward) per field present; fields beyond len(steps) score 0.
    The end index is at least 1 so that `end - 1` is always a valid character index.
    """
    if not completion:
        return []
    rewards, start = [], 0
    for i, field in enumerate(completion.split(";")):
        end = start + len(field)
        ok = i < len(steps) and read(field) == steps[i].strip()
        rewards.append((max(end, 1), 1.0 if ok else 0.0))
        start = end + 1  # skip the ';'
    return rewards
