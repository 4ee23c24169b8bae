"""SFT on the demonstrations the exact checker accepts: SFT given the information RL's reward has.

RL's rollouts are scored by the task's exact checker; plain SFT imitates the annotator's demonstrations, right or
wrong (task.demo_slip, task.demo_noise). This baseline runs the same checker over the demonstrations once, before
training, and imitates only those it accepts, so that a gain of RL over it is not the checker's information alone."""
from __future__ import annotations

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods.base import register
from methods.sft import SFT


def accepted_demos(task, label: str):
    """The task's demonstrations whose completion the task's checker accepts against the true answer
    (`task.verify(completion, answer)`, the outcome reward RL is scored by): a datasets.Dataset of `.demos`' columns,
    in their order. None accepted: one UserError line naming the options that decide it."""
    demos = task.demos
    keep = [i for i, (completion, answer) in enumerate(zip(demos["completion"], demos["answer"]))
            if task.verify(completion, answer)]
    if not keep:
        cfg = task.cfg
        raise UserError(f"method '{label}': the checker accepts none of the task's {len(demos)} demonstrations "
                        f"(task.demo_slip={getattr(cfg, 'demo_slip', 0.0)}, task.demo_noise={cfg.demo_noise}, "
                        f"task.n_demos={cfg.n_demos}), so there is nothing to imitate: lower task.demo_slip or "
                        "task.demo_noise, or raise task.n_demos")
    return demos.select(keep)


@register("sft_filtered")
class SFTFiltered(SFT):
    """Data: the task's demonstrations that the exact checker accepts (`accepted_demos`), filtered once before
    training; one step uses B·G of them (the equal budget), reshuffled when they run out. Every step logs
    `demos_accepted`, the size of the accepted set."""

    @classmethod
    def demo_set(cls, task):
        """The demonstrations this baseline imitates."""
        return accepted_demos(task, cls.name)

    @classmethod
    def check_model(cls, cfg, task, tok) -> None:
        cls.demo_set(task)  # none accepted: refused before any run starts (compare.py), before anything is written

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.demos = self.demo_set(ctx.task)  # as many as the checker accepts (sft_clean's set is of that size)

    def collect(self, step: int) -> Batch:
        t = self.ctx.cfg.train
        self.record(demos_accepted=len(self.demos))
        return self.ctx.demonstrations(t.prompts_per_step * t.group_size, self.demos)
