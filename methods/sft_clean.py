"""SFT on as many clean demonstrations as the checker accepts of the annotator's: the baseline that asks whether
correct demonstrations of that count, written by an exact annotator, do what RL does."""
from __future__ import annotations

from gcframe.errors import UserError
from methods.base import register
from methods.sft_filtered import SFTFiltered, accepted_demos


@register("sft_clean")
class SFTClean(SFTFiltered):
    """Data: n demonstrations written by an exact annotator (no slip, no noise), n being how many of the task's
    demonstrations the checker accepts (sft_filtered's set). Arithmetic: the task's `exact_demos(n)`, training
    problems no demonstration uses (never a validation or test problem) with their true partial sums. A task
    without an annotator model of its own (gsm8k, word_problems, dataset): the first n demonstrations as the data
    holds them, when task.demo_noise adds no wrong answers. One step uses B·G of them (the equal budget). Every step
    logs `demos_accepted` (= n)."""

    @classmethod
    def demo_set(cls, task):
        n = len(accepted_demos(task, cls.name))
        if hasattr(task, "exact_demos"):
            return task.exact_demos(n)
        if task.cfg.demo_noise:
            raise UserError(f"method '{cls.name}': task {task.cfg.name!r} writes no exact demonstrations of its own "
                            f"and its demonstrations carry task.demo_noise={task.cfg.demo_noise}: set it to 0, or "
                            "run sft_filtered instead")
        return task.demos.select(range(n))
