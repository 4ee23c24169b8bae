"""Stage 1 of the seed's pipeline: the tiny model trained from scratch on the task's demonstrations (method `sft`),
until it has trained `sft_base.steps` steps, or until a stopping rule on its greedy accuracy fires:

    step -> train_step (method sft, the same engine as every method) -> θ̄ ← ema·θ̄ + (1 − ema)·θ (sft_base.ema)
         -> every eval_every steps: greedy accuracy of the base (θ̄, or θ) on the stage-1 problems
         -> patience: stop once `patience` evaluations in a row have not beaten the best; the base is the best one
            target_accuracy: stop at the first evaluation that reaches the target

The stage-1 problems are the validation set when the task has one (task.n_validation), so that where stage 1 stops
is a choice made on validation and every finding is scored on test problems no choice has seen; without a
validation set, the first train.eval_size test problems (the older default).

Why early stopping (patience): a practitioner's SFT model is *finished*, trained until its validation accuracy stops
improving; what RL adds to such a model is the seed's question (DeepSeekMath §4-5), where a base stopped mid-curve
leaves room that more SFT on the same demonstrations would also fill. Why a target: on the steep part of the
learning curve a step count does not define a base (results/base_stability); an accuracy does. Why the average:
Polyak averaging (θ̄) rises smoothly where the raw weights' accuracy jumps between evaluations.
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


def stage1_rows(task, n: int) -> tuple[list[dict], str]:
    """(the problems stage 1 decides on, their split's name): validation when the task has it, else test."""
    from gcframe.evaluate.problems import heldout_rows

    split = "validation" if len(getattr(task, "validation", ()) or ()) else "test"
    return heldout_rows(task, n, split), split


def train(trainer, task, show_progress: bool = True, label: str = "stage 1 (SFT base)") -> tuple:
    """Run stage 1 on `trainer` (a Trainer of method sft, `pipeline.stage1_config`) -> (the base: θ̄ or θ, info).

    info: steps trained, the stopping rule that fired, the base's accuracy on the stage-1 problems, their split and
    the curve (step, mean training loss since the last evaluation, accuracy). A target not reached within the steps
    raises UserError: the methods must not start from a base the config did not ask for."""
    s = trainer.cfg.sft_base
    model = trainer.acc.unwrap_model(trainer.policy)
    avg = copy.deepcopy(model).requires_grad_(False) if s.ema else None
    base = avg if avg is not None else model
    rows, split = stage1_rows(task, trainer.cfg.train.eval_size) if s.eval_every else ([], "none")
    curve, acc, loss_sum, n_loss, t0 = [], None, 0.0, 0, time.time()
    best = {"accuracy": -1.0, "step": 0, "state": None}
    bar = progress(range(s.steps), total=s.steps, desc=label, show=show_progress,
                   cap=bool(s.target_accuracy or s.patience))  # steps is a cap: no time-left estimate from it
    stopped, rule = None, None
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
            if acc > best["accuracy"]:  # strictly better: a tie keeps the earlier (fewer steps) base
                best = {"accuracy": acc, "step": done,
                        "state": {k: v.detach().clone() for k, v in base.state_dict().items()} if s.patience else None}
            if s.target_accuracy and acc >= s.target_accuracy:
                stopped, rule = done, "target"
            elif s.patience and (done - best["step"]) // s.eval_every >= s.patience:
                stopped, rule = done, "patience"
        post = {"loss": f"{row['loss']:.3f}"}
        if acc is not None:  # only a measured accuracy is shown, with the step it was measured at
            post["acc"] = f"{acc:.2f}@{curve[-1]['step']}"
        bar.set_postfix(post)
        if stopped:
            break
    bar.close()
    trainer.logger.close()
    if s.patience and best["state"] is not None:  # the finished model: the weights of the best evaluation
        base.load_state_dict(best["state"])
        acc = best["accuracy"]
    info = {"steps_trained": stopped or s.steps, "stopped_at_target": rule == "target", "stopped_by": rule,
            "best_step": best["step"] if s.patience else None, "accuracy": acc, "problems": len(rows),
            "split": split, "train_time_s": round(time.time() - t0, 1), "curve": curve}
    if s.target_accuracy and not stopped:
        raise UserError(f"stage 1 reached greedy accuracy {acc:.3f} on {len(rows)} {split} problems after "
                        f"{s.steps} steps, below sft_base.target_accuracy {s.target_accuracy}: raise sft_base.steps "
                        "or lower sft_base.target_accuracy (nothing was cached; no method was started)")
    return base, info
