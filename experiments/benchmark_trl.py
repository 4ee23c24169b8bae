"""TRL side by side (`python experiments/benchmark.py --vs-trl`): GRPO, RLOO, DPO and SFT through this project and
through TRL's trainers on the identical model, tokenizer, data and settings.

Both sides load the same saved untrained tiny Llama and char tokenizer (no <bos>, which TRL never adds), train in
float32 with no gradient checkpointing (TRL's defaults are bf16 and checkpointing on), with the same β, ε, G,
completion length, loss normalisation, learning rate, grad clip and AdamW, and log every step. Data: the task's
RL prompts with its own verifier as the reward (GRPO, RLOO), the demonstrations (SFT), pairs built from the
demonstrations (DPO; bench_common.offline_rows). Step time = the interval between consecutive optimiser steps of
the trainer's own loop (TRL: `on_step_end` callbacks; project: `train_step` + the metrics row written, as `fit`
runs). Whole runs alternate (project, TRL, TRL, project, ...), each in a fresh process; the ratio is of the medians
of the runs' median step times. Each project run also times its essential passes alone
(bench_common.essential_passes): their sum over TRL's step is the floor, the ratio no framework could beat with the
same model calls.
"""
from __future__ import annotations

import contextlib
import io
import tempfile
import time

from experiments.bench_common import (
    ALL_SIZES,
    LR,
    isolated,
    measure_method,
    median,
    offline_rows,
    ratio,
    run_config,
    setup_process,
    task_of,
)

METHODS = ("grpo", "rloo", "dpo", "sft")

# The project's options that match the TRL configuration built in `trl_trainer`.
PROJECT_OPTS = {
    "grpo": {"grpo": {"beta": 0.04, "clip_eps": 0.2, "aggregation": "seq-mean-token-mean", "scale_by_std": True,
                      "kl_estimator": "k3"}},  # TRL: loss_type="grpo", scale_rewards="group", beta, epsilon
    "rloo": {"rloo": {"beta": 0.0, "aggregation": "seq-mean-token-sum"}},  # TRL RLOO: sequence log-prob, beta=0
    "dpo": {"dpo": {"beta": 0.1, "aggregation": "seq-mean-token-sum"}},  # TRL: loss_type=["sigmoid"], beta
    "sft": {"sft": {"aggregation": "token-mean"}},  # TRL: completion-only loss, mean over completion tokens
}


def trl_trainer(method: str, size_name: str, base_dir: str, out_dir: str, max_steps: int, callback):
    """The TRL trainer of `method`, configured like the project's run (see PROJECT_OPTS) -> (trainer, settings)."""
    import torch
    from datasets import Dataset

    from gcframe.modeling import load_model_and_tokenizer

    size = ALL_SIZES[size_name]
    n = size.prompts * size.group  # sequences per step, as in the project (B·G)
    task = task_of(run_config(size, 1), base_dir)  # chat prompts already rendered: TRL adds no <bos> to a string
    model, tok = load_model_and_tokenizer(base_dir)
    common = dict(output_dir=out_dir, use_cpu=not torch.cuda.is_available(), bf16=False, fp16=False,
                  gradient_checkpointing=False, learning_rate=LR, weight_decay=0.0, max_grad_norm=1.0,
                  lr_scheduler_type="constant", warmup_steps=0, max_steps=max_steps, logging_steps=1,
                  save_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0, seed=0,
                  gradient_accumulation_steps=1)

    def correct(prompts, completions, answer, **kw):  # the task's own verifier, as the project's reward
        return [float(task.verify(c, a)) for c, a in zip(completions, answer)]

    prompts = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in task.prompts])
    demos, pairs = offline_rows(task)
    if method == "grpo":
        from trl import GRPOConfig, GRPOTrainer

        settings = dict(per_device_train_batch_size=n, num_generations=size.group,
                        max_completion_length=size.new_tokens, beta=0.04, epsilon=0.2, loss_type="grpo",
                        scale_rewards="group", num_iterations=1, temperature=1.0, top_p=1.0, top_k=0)
        args = GRPOConfig(**common, **settings)
        tr = GRPOTrainer(model=model, reward_funcs=[correct], args=args, train_dataset=prompts,
                         processing_class=tok, callbacks=[callback])
    elif method == "rloo":
        from trl import RLOOConfig, RLOOTrainer

        settings = dict(per_device_train_batch_size=n, num_generations=size.group,
                        max_completion_length=size.new_tokens, beta=0.0, num_iterations=1,
                        normalize_advantages=False, temperature=1.0, top_p=1.0, top_k=0)
        args = RLOOConfig(**common, **settings)
        tr = RLOOTrainer(model=model, reward_funcs=[correct], args=args, train_dataset=prompts,
                         processing_class=tok, callbacks=[callback])
    elif method == "dpo":
        from trl import DPOConfig, DPOTrainer

        settings = dict(per_device_train_batch_size=n // 2, beta=0.1, loss_type=["sigmoid"],
                        precompute_ref_log_probs=False)
        data = Dataset.from_list([{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs])
        tr = DPOTrainer(model=model, args=DPOConfig(**common, **settings), train_dataset=data,
                        processing_class=tok, callbacks=[callback])
    elif method == "sft":
        from trl import SFTConfig, SFTTrainer

        settings = dict(per_device_train_batch_size=n, completion_only_loss=True, packing=False)
        data = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in demos])
        tr = SFTTrainer(model=model, args=SFTConfig(**common, **settings), train_dataset=data,
                        processing_class=tok, callbacks=[callback])
    else:
        raise ValueError(method)
    settings["optim"] = str(tr.args.optim)
    return tr, settings


def trl_run(method: str, size_name: str, base_dir: str, warmup: int, steps: int, threads: int) -> dict:
    """Runs in a fresh process: a TRL run of warmup + steps optimiser steps -> timed step intervals."""
    import datasets
    from transformers import TrainerCallback

    setup_process(threads)
    datasets.disable_progress_bars()

    class Clock(TrainerCallback):
        def __init__(self):
            self.t = []

        def on_train_begin(self, args, state, control, **kw):
            self.t.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            self.t.append(time.perf_counter())

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        tr, settings = trl_trainer(method, size_name, base_dir, tmp, warmup + steps, clock)
        with contextlib.redirect_stdout(io.StringIO()):  # TRL prints every step's log line; keep the cost, not the text
            tr.train()
    times = [b - a for a, b in zip(clock.t, clock.t[1:])][warmup:]
    return {"step_s": median(times), "step_s_all": times, "settings": settings}


def project_run(method: str, size_name: str, base_dir: str, warmup: int, steps: int, threads: int) -> dict:
    """Runs in a fresh process: the project's run, and its essential passes timed alone (one round)."""
    out = measure_method(method, size_name, base_dir, {"warmup": warmup, "steps": steps, "limit_rounds": 1},
                         threads, PROJECT_OPTS[method])
    return {"step_s": out["step_s"], "step_s_all": out["step_s_all"], "essential_sum_s": out["essential_sum_s"],
            "settings": PROJECT_OPTS[method]}


def compare_with_trl(sizes, bases, plan, threads: int, say, t_start: float) -> dict:
    """{size: {method: {ratio, floor, project_step_s, trl_step_s, rounds, settings} or {error}}}.

    floor = the project's essential passes alone / TRL's step: the ratio a framework with no overhead at all would
    reach with these model calls (generation, frozen forwards, forward+backward+AdamW), a bound on `ratio`."""
    out = {}
    for s in sizes:
        out[s] = {}
        for m in METHODS:
            say(f"[{time.perf_counter() - t_start:5.0f}s] {s:>7} {m} vs TRL")
            out[s][m] = compare_one(m, s, bases[s], plan.trl_rounds, plan.warmup[s], plan.trl_steps[s], threads)
    return out


def compare_one(m: str, s: str, base: str, n_rounds: int, warmup: int, steps: int, threads: int) -> dict:
    """`n_rounds` alternated (project, TRL) run pairs of method m at size s, each of warmup + 1 untimed and `steps`
    timed steps -> {ratio, floor, project_step_s, trl_step_s, project_essential_sum_s, rounds, settings} or
    {ratio: None, error}."""
    rounds, proj, trl, passes = [], [], [], []
    try:
        for r in range(n_rounds):  # alternate which side runs first
            order = ("project", "trl") if r % 2 == 0 else ("trl", "project")
            got = {}
            for side in order:
                fn = project_run if side == "project" else trl_run
                got[side] = isolated(fn, m, s, base, warmup + 1, steps, threads)
            proj.append(got["project"]["step_s"])
            trl.append(got["trl"]["step_s"])
            passes.append(got["project"]["essential_sum_s"])
            rounds.append({"project_step_s": proj[-1], "trl_step_s": trl[-1], "ratio": ratio(proj[-1], trl[-1]),
                           "project_essential_sum_s": passes[-1], "order": order,
                           "project_s_all": got["project"].get("step_s_all"),
                           "trl_s_all": got["trl"].get("step_s_all")})
        return {"ratio": ratio(median(proj), median(trl)), "floor": ratio(median(passes), median(trl)),
                "project_step_s": median(proj), "trl_step_s": median(trl), "project_essential_sum_s": median(passes),
                "rounds": rounds, "settings": {"project": got["project"]["settings"], "trl": got["trl"]["settings"]}}
    except RuntimeError as e:  # report exactly what failed; never a made-up number
        return {"ratio": None, "error": str(e)[-3000:], "rounds": rounds}
