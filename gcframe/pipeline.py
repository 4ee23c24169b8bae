"""The three-stage pipeline of the seed: SFT model -> (reward model, initial policy, frozen reference) -> RL.

Stage 1 trains the tiny model from scratch on the task's limited demonstrations, through the same engine and
the `sft` method, and caches it by a hash of everything it depends on, so that every later run (every method,
every seed) starts from the identical SFT base.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from gcframe.config import RUNTIME_MODEL_OPTIONS, RunConfig, TrainConfig
from gcframe import sizing
from gcframe.errors import UserError, disk_full, disk_full_line
from gcframe.tasks import build_task
from gcframe.tracking import claims, progress
from gcframe.tracking.log import cache_root, publish_dir


def resolve(cfg: RunConfig, task, tok=None) -> RunConfig:
    """Fill the values derived from the task (max_new_tokens: the longest gold completion in tokens + 4, + 12 for a
    chat model, which may phrase its answer; characters for the tiny model's character tokenizer)."""
    cfg = copy.deepcopy(cfg)
    if not cfg.train.max_new_tokens:
        if tok is None:
            cfg.train.max_new_tokens = task.max_completion_chars + 4
        else:
            n = len(tok(task.longest_completion, add_special_tokens=False)["input_ids"])
            cfg.train.max_new_tokens = n + (12 if task.fmt.chat else 4)
    return cfg


def longest_prompt(task, tok) -> int:
    """Tokens of the longest prompt among the held-out problems, the first 2,000 training prompts and the
    demonstrations."""
    from gcframe.sampling import encode_prompts

    texts = list(dict.fromkeys(list(task.heldout["prompt"]) + task.prompts[:2000]["prompt"] + list(task.demos["prompt"])))
    return max(len(ids) for ids in encode_prompts(tok, texts))


def check_context(cfg: RunConfig, task, tok, context: int | None, longest: int | None = None) -> None:
    """Every prompt plus max_new_tokens must fit the model's context (max_position_embeddings)."""
    if not context:
        return
    longest = longest_prompt(task, tok) if longest is None else longest
    if longest + cfg.train.max_new_tokens > context:
        if not cfg.model.path:  # the tiny model is built with the context its config names
            raise UserError(f"a prompt of {longest} tokens plus train.max_new_tokens={cfg.train.max_new_tokens} "
                            f"exceeds the tiny model's context of {context} tokens (model.max_positions): raise "
                            f"model.max_positions to at least {longest + cfg.train.max_new_tokens}")
        raise UserError(f"a prompt of {longest} tokens plus train.max_new_tokens={cfg.train.max_new_tokens} exceeds "
                        f"the model's context of {context} tokens: shorten the prompts (task.system_prompt, "
                        "task size) or lower train.max_new_tokens")


def stage1_seed(cfg: RunConfig) -> int:
    """The seed of stage 1 (model init, data order): the run's own with sft_base.per_seed, else task.seed."""
    return cfg.seed if cfg.sft_base.per_seed else cfg.task.seed


def base_key(cfg: RunConfig) -> str:
    model = {k: v for k, v in cfg.to_dict()["model"].items() if k not in RUNTIME_MODEL_OPTIONS}
    sft = {k: v for k, v in cfg.to_dict()["sft_base"].items() if k != "per_seed"}  # one shared base: the key as
    if cfg.sft_base.per_seed:  # before the option existed; a base per seed: its seed is part of the key
        sft["seed"] = stage1_seed(cfg)
    blob = json.dumps({"task": cfg.to_dict()["task"], "model": model, "sft_base": sft, "version": 1}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def sft_base(cfg: RunConfig, task, accelerator, show_progress: bool = True) -> tuple[Path, dict]:
    """Directory of the SFT base (trained and cached on first use) and its info (held-out accuracy, time)."""
    if cfg.model.path:  # a pretrained model is its own base: no stage 1
        from gcframe.modeling import resolve_model_path

        return Path(resolve_model_path(cfg.model.path)), {"source": cfg.model.path, "pretrained": True}
    d = cache_root() / "sft_base" / base_key(cfg)
    info_file = d / "base_info.json"
    lock = d.with_name(d.name + ".claim")
    # one process trains a missing base; others (a second sweep process) wait for it instead of training it too
    while not info_file.exists() and accelerator.num_processes == 1 and not claims.acquire(lock):
        time.sleep(2)
    if info_file.exists():
        claims.release(lock)
        # every process reads base_info.json before any writes it (_evaluated_for adds to it): they must agree on
        # whether to evaluate, a collective, or the ones that would not leave the others waiting forever
        accelerator.wait_for_everyone()
        info = json.loads(info_file.read_text())
        accelerator.wait_for_everyone()
        return d, _evaluated_for(cfg, task, accelerator, d, info, show_progress)
    try:
        return _train_sft_base(cfg, task, accelerator, d, show_progress)
    finally:
        claims.release(lock)


def base_cached(cfg: RunConfig) -> bool:
    """Whether this config's SFT base is trained (a pretrained model is its own): nothing to train for it."""
    return bool(cfg.model.path) or (cache_root() / "sft_base" / base_key(cfg) / "base_info.json").is_file()


def base_claimed_elsewhere(cfg: RunConfig) -> bool:
    """Whether this config's SFT base is missing and another live process is training it (its claim file): a second
    process building several bases (sft_base.per_seed) then trains another one meanwhile instead of waiting."""
    if cfg.model.path:
        return False
    d = cache_root() / "sft_base" / base_key(cfg)
    return not (d / "base_info.json").exists() and claims.holder(d.with_name(d.name + ".claim")) is not None


def eval_key(cfg: RunConfig, task) -> str:
    """What the base's held-out greedy accuracy depends on beyond the cache key (task, model, stage 1): how many
    held-out problems are evaluated and how many tokens each completion may take."""
    return f"eval_size={min(cfg.train.eval_size, len(task.heldout))},max_new_tokens={cfg.train.max_new_tokens}"


def _evaluated_for(cfg: RunConfig, task, accelerator, d: Path, info: dict, show_progress: bool) -> dict:
    """`info` of a cached base with `eval_accuracy` measured under this run's evaluation settings: a figure the
    base was given by whichever run trained or first evaluated it (gcframe.verify evaluates 8 problems) must not be
    reported by a run that evaluates 100. Measured once per setting and kept in base_info.json's `evaluations`."""
    key = eval_key(cfg, task)
    evaluations = dict(info.get("evaluations") or {})
    if key not in evaluations:
        import tempfile

        import torch

        from gcframe.trainer import Trainer

        with tempfile.TemporaryDirectory() as tmp, torch.random.fork_rng(devices=[]):  # the runs' RNG untouched
            trainer = Trainer(stage1_config(cfg), "sft", Path(tmp) / "log", d, task, accelerator,
                              show_progress=show_progress, label="SFT base")
            evaluations[key] = trainer.evaluate(0)["eval_accuracy"]
            del trainer
        if accelerator.is_main_process:
            fresh = json.loads((d / "base_info.json").read_text())  # another process may have added its own
            fresh["evaluations"] = {**(fresh.get("evaluations") or {}), key: evaluations[key]}
            tmp_file = d / f"base_info.json.tmp{os.getpid()}"
            tmp_file.write_text(json.dumps(fresh, indent=1))
            os.replace(tmp_file, d / "base_info.json")
    return {**info, "evaluations": evaluations, "eval_accuracy": evaluations[key], "eval_key": key}


def stage1_config(cfg: RunConfig, eval_every: int = 0) -> RunConfig:
    """The run config of stage 1: method `sft` on the demonstrations with the `sft_base` section's optimiser."""
    s = cfg.sft_base
    stage1 = copy.deepcopy(cfg)
    stage1.train = TrainConfig(steps=s.steps, lr=s.lr, prompts_per_step=s.batch_size, group_size=1,
                               warmup_steps=s.warmup_steps, lr_schedule=s.lr_schedule,
                               max_new_tokens=cfg.train.max_new_tokens, eval_every=eval_every,
                               eval_size=cfg.train.eval_size, eval_k=0, sample_every=0,
                               checkpoint_every=0)  # not resumable: its folder is per process (pid)
    stage1.seed = stage1_seed(cfg)
    stage1.model = dataclasses.replace(cfg.model, bf16=False, gradient_checkpointing=False, lora_rank=0)
    return stage1


def _train_sft_base(cfg: RunConfig, task, accelerator, d: Path, show_progress: bool) -> tuple[Path, dict]:
    """Stage 1 (gcframe.stage1): the tiny model trained from scratch on the demonstrations (method `sft`), evaluated
    on the held-out problems, published at `d`. A base that missed its target accuracy is not published."""
    from gcframe import stage1
    from gcframe.evaluate import evaluate
    from gcframe.evaluate.problems import heldout_rows
    from gcframe.modeling import build_char_tokenizer, build_tiny_llama, evaluating, save_model_and_tokenizer
    from gcframe.trainer import Trainer

    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, cfg.model, seed=stage1_seed(cfg))
    s = cfg.sft_base
    tmp = d.with_name(d.name + f".tmp{os.getpid()}")
    if show_progress and accelerator.is_main_process and progress.ENABLED:  # minutes, once per task and model
        until = f", or until held-out accuracy {s.target_accuracy:g}" if s.target_accuracy else ""
        print(f"training the SFT base (stage 1: up to {s.steps} steps{until}, on {len(task.demos)} demonstrations), "
              f"cached in {d} for later runs", file=sys.stderr, flush=True)
    t0 = time.time()
    trainer = Trainer(stage1_config(cfg), "sft", tmp / "log", None, task, accelerator, policy=model, tok=tok,
                      show_progress=show_progress, label="stage 1 (SFT base)")
    try:
        base, run = stage1.train(trainer, task, show_progress and accelerator.is_main_process)
    except UserError:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    rows = heldout_rows(task, cfg.train.eval_size)
    with evaluating(base):
        acc = evaluate(base, trainer.ctx.generator, task, rows)["greedy_correct"] / len(rows)
    info = {"eval_accuracy": acc, "train_time_s": round(time.time() - t0, 1), "steps": run["steps_trained"],
            "n_demos": len(task.demos), "key": base_key(cfg), "evaluations": {eval_key(cfg, task): acc},
            "eval_key": eval_key(cfg, task), "stage1": run}
    if accelerator.is_main_process:
        try:
            save_model_and_tokenizer(base, tok, tmp)
            (tmp / "base_info.json").write_text(json.dumps(info, indent=1))
        except Exception as e:  # noqa: BLE001: a half-written base never reaches the cache
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            if disk_full(e):  # safetensors' SafetensorError is no OSError: one line, and the next run trains it again
                raise UserError(disk_full_line(d, "the SFT base") + ", then run the command again (the base is "
                                "trained again; a compare.py run continues with --resume OUT)") from None
            raise
        publish_dir(tmp, d)
    accelerator.wait_for_everyone()
    return d, info


def prepare(cfg: RunConfig):
    """(resolved config, task) before anything is written: the model path is checked (a GGUF converted), its
    tokenizer decides the prompt format, and the longest prompt must fit the model's context."""
    from gcframe.modeling import build_char_tokenizer, context_length, load_tokenizer, resolve_model_path

    if cfg.model.path:
        path = resolve_model_path(cfg.model.path)
        tok, context = load_tokenizer(path), context_length(path)
    else:
        tok, context = None, cfg.model.max_positions
    task = build_task(cfg.task, tok)
    cfg = resolve(cfg, task, tok)
    longest = longest_prompt(task, tok or build_char_tokenizer())
    check_context(cfg, task, tok or build_char_tokenizer(), context, longest)
    sizing.check(cfg, sizing.dims_of(cfg, tok), longest)  # sizes this machine cannot hold, before any is allocated
    return cfg, task
