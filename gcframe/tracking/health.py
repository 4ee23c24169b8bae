"""A starved run says so: when most completions are cut off at train.max_new_tokens, or most prompt groups reward
all their completions alike (zero variance: no advantage, nothing to learn), for several steps in a row, a policy
gradient has little or nothing to learn from. The trainer prints one line per kind when it happens
(`Trainer._check_health`), and the report repeats it (analysis.report) from the same rule over metrics.jsonl.

The measured columns: `truncated_frac` (share of sampled completions that hit max_new_tokens) and
`zero_var_groups` (share of prompt groups whose rewards are all equal), both logged every training step of a method
that samples groups; equal-reward groups warn only where the method's GC vanishes on them (`starved_groups`,
SILENT_GC): a method that learns from them (online RFT on an all-correct group) is not starved.
"""
from __future__ import annotations

WINDOW = 5
"""Consecutive training steps a fraction must stay at or above its threshold."""
THRESHOLDS = {"truncated_frac": 0.25, "zero_var_groups": 0.5}
SILENT_GC = 0.1
"""Equal-reward groups starve a method only where its GC vanishes on them: their mean |GC| per token at most this
share of the batch's (`zero_var_gc`, logged); the trainer then logs them as `starved_groups`. Online RFT learns from
an all-correct group (GC = 1[correct] = 1), a group baseline does not (Â = 0, only π_ref's KL term is left)."""


def _message(kind: str, lo: float, hi: float, first: int, last: int, max_new_tokens=None,
             accuracy: float | None = None) -> str:
    """The line for one kind; for equal-reward groups, `accuracy` (the mean accuracy of the stretch's own samples)
    says which way they are alike: mostly right (solved prompts: harder ones would teach) or mostly wrong."""
    steps = f"steps {first}-{last}"
    if kind == "truncated_frac":
        limit = f"train.max_new_tokens={max_new_tokens}" if max_new_tokens else "train.max_new_tokens"
        return (f"{lo:.0%}-{hi:.0%} of completions were cut off at {limit} in each of {steps}: a cut-off answer "
                "rarely scores, so there is little to learn; raise train.max_new_tokens")
    head = (f"{lo:.0%}-{hi:.0%} of prompt groups gave all their completions the same reward in each of {steps} "
            "(zero variance: no learning signal)")
    if accuracy is not None and accuracy >= 0.5:
        return (f"{head}, mostly all right (its samples {accuracy:.0%} correct): the prompts are solved; harder "
                "problems (or fewer steps) would still teach it")
    return f"{head}; raise train.temperature or train.group_size, or use easier problems (or a stronger base)"


def starvation(rows: list[dict], window: int = WINDOW, max_new_tokens=None) -> dict[str, str]:
    """{column: message} for each measured fraction that stayed at or above its threshold for `window` consecutive
    training rows (the first such stretch, extended while it lasts). Evaluation rows are skipped."""
    train = [r for r in rows if "loss" in r]
    found = {}
    for kind, threshold in THRESHOLDS.items():
        stretch: list[dict] = []
        for r in train + [{}]:  # a sentinel ends the last stretch
            v = r.get("starved_groups", r.get(kind)) if kind == "zero_var_groups" else r.get(kind)
            if v is not None and v >= threshold:
                stretch.append(r)
                continue
            if len(stretch) >= window:
                vals = [s[kind] for s in stretch]
                accs = [s["accuracy"] for s in stretch if "accuracy" in s]
                found[kind] = _message(kind, min(vals), max(vals), stretch[0]["step"], stretch[-1]["step"],
                                       max_new_tokens, sum(accs) / len(accs) if accs else None)
                break
            stretch = []
    return found
