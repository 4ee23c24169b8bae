"""Stage 1 of the seed's pipeline: the tiny model trained from scratch on the task's demonstrations (method `sft`),
until it has trained `sft_base.steps` steps or, with `sft_base.target_accuracy`, until its greedy accuracy on the
held-out problems reaches the target.

    step -> train_step (method sft, the same engine as every method) -> θ̄ ← ema·θ̄ + (1 − ema)·θ (sft_base.ema)
         -> every eval_every steps: greedy accuracy of the base (θ̄, or θ) on the held-out problems -> stop at target

Why a target: on the steep part of the learning curve, a step count does not define a base: 1e-7 perturbations of
the initial weights spread the accuracy at a fixed step from 0.42 to 0.74 (results/base_stability). An accuracy
does, and a base mid-curve leaves room for RL (its greedy accuracy well below its pass@k). Why the average: the raw
weights' greedy accuracy jumps by ±0.1 between evaluations 10 steps apart there, so the first evaluation past a
target overshoots it by as much; Polyak averaging (θ̄) rises smoothly.

The accuracy is measured on the held-out problems every method is then scored on (train.eval_size of them), so that
the base lands at its target where its accuracy is reported. Every method starts from this one base: choosing its
stopping point on those problems favours none of them. (Stopped on other problems, RL prompts that are not
demonstrations, the base landed within those two sets' sampling difference of its target: 0.39-0.43 for 0.40.)
"""
from __future__ import annotations

import copy
import time

import torch

from gcframe.errors import UserError
from gcframe.tracking.progress import progress


@torch.no_grad()
def greedy_accuracy(model, generator, task, rows: list[dict]) -> float:
    from gcframe.evaluate import evaluate
    from gcframe.modeling import evaluating

    with evaluating(model):
        return evaluate(model, generator, task, rows)["greedy_correct"] / max(len(rows), 1)


def average_into(avg: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """θ̄ ← decay·θ̄ + (1 − decay)·θ, parameter by parameter."""
    with torch.no_grad():
        for a, p in zip(avg.parameters(), model.parameters()):
            a.lerp_(p.detach(), 1.0 - decay)


def train(trainer, task, show_progress: bool = True, label: str = "stage 1 (SFT base)") -> tuple:
    """Run stage 1 on `trainer` (a Trainer of method sft, `pipeline.stage1_config`) -> (the base: θ̄ or θ, info).

    info: steps trained, whether it stopped at the target, the base's last held-out accuracy and the curve (step,
    mean training loss since the last evaluation, held-out accuracy). A target not reached within the steps raises
    UserError: the methods must not start from a base the config did not ask for."""
    s = trainer.cfg.sft_base
    model = trainer.acc.unwrap_model(trainer.policy)
    avg = copy.deepcopy(model).requires_grad_(False) if s.ema else None
    base = avg if avg is not None else model
    from gcframe.evaluate.problems import heldout_rows

    rows = heldout_rows(task, trainer.cfg.train.eval_size) if s.eval_every else []
    curve, acc, loss_sum, n_loss, t0 = [], None, 0.0, 0, time.time()
    bar = progress(range(s.steps), total=s.steps, desc=label, show=show_progress)
    stopped = None
    for step in bar:
        row, _ = trainer.train_step(step)
        trainer.logger.log(row)
        if avg is not None:
            average_into(avg, model, s.ema)
        loss_sum, n_loss, done = loss_sum + row["loss"], n_loss + 1, step + 1
        if s.eval_every and (done % s.eval_every == 0 or done == s.steps):
            acc = greedy_accuracy(base, trainer.ctx.generator, task, rows)
            curve.append({"step": done, "loss": loss_sum / n_loss, "accuracy": acc})
            loss_sum, n_loss = 0.0, 0
            if s.target_accuracy and acc >= s.target_accuracy:
                stopped = done
        post = {"loss": f"{row['loss']:.3f}"}
        if acc is not None:  # only a measured accuracy is shown, with the step it was measured at
            post["acc"] = f"{acc:.2f}@{curve[-1]['step']}"
        bar.set_postfix(post)
        if stopped:
            break
    bar.close()
    trainer.logger.close()
    info = {"steps_trained": stopped or s.steps, "stopped_at_target": bool(stopped), "accuracy": acc,
            "problems": len(rows), "train_time_s": round(time.time() - t0, 1), "curve": curve}
    if s.target_accuracy and not stopped:
        raise UserError(f"stage 1 reached greedy accuracy {acc:.3f} on {len(rows)} held-out problems after "
                        f"{s.steps} steps, below sft_base.target_accuracy {s.target_accuracy}: raise sft_base.steps "
                        "or lower sft_base.target_accuracy (nothing was cached; no method was started)")
    return base, info
