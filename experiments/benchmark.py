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
import os
import platform
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.errors import UserError, check_writable, cli_entry  # noqa: E402

from experiments.bench_common import (
    ALL_SIZES,
    LR,
    SIZES,
    build_base,
    clock,
    isolated,
    make_trainer,
    measure_method,
    median,
    ratio,
    run_config,
    setup_process,
    task_of,
)


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
                t_ce = clock(lambda: plain_ce_step(plain, opt, tr.tok, prev, tr.tcfg.grad_clip))
            t0 = time.perf_counter()
            _, batch = tr.train_step(step)
            t_eng = time.perf_counter() - t0
            if not step % 2:
                t_ce = clock(lambda: plain_ce_step(plain, opt, tr.tok, batch.texts, tr.tcfg.grad_clip))
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
    from methods import default_methods

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
            names = wanted or plan.methods[s] or default_methods()  # (a teacher's method: named only)
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
    if res["config"].get("quick"):  # a few steps at toy sizes: too short to time against the targets
        out.append("  --quick: a smoke run of every measurement, a few steps at toy sizes, too short and noisy to "
                   "hold the targets; the full run (results/benchmark, docs/results/performance.md) measures them")
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


TARGETS = {"limit": 1.15, "grpo_vs_ppo": 0.6, "engine_vs_ce": 1.05, "vs_trl": {"small": 0.5, "compute": 0.77}}


def write_csvs(res: dict, folder: Path) -> list[Path]:
    """steps.csv (a row per size and method: step time, its phases, tokens/s, peak RSS, step ÷ essential passes),
    memory.csv (where GRPO and PPO both ran: their peaks, the baseline and the two ratios, per size) and ratios.csv (a row per ratio: its target, its value per size, whether the value meets the target), the
    tables of the performance page (rendered by analysis.results)."""
    import pandas as pd

    phases = {"generate": "generate", "score": "score", "collect_other": "collect, other",
              "ref_old_logprobs_prepare": "ref/old log-probs + prepare", "policy_update": "policy update",
              "critic_update": "critic update"}
    rows = []
    for s, d in res["methods"].items():
        for m, v in d.items():
            ph, sampled, critic = v["phases_s"], bool(v["gen_tokens_per_s"]), bool(v["models"].get("critic"))
            absent = {"generate": not sampled, "score": not sampled, "critic_update": not critic,
                      "ref_old_logprobs_prepare": ph.get("ref_old_logprobs_prepare", 0) < 5e-4}  # no frozen model
            rows.append({"size": s, "method": m, "step (s)": _f(v["step_s"]),
                         **{label: "–" if absent.get(k) else _f(ph.get(k)) for k, label in phases.items()},
                         "gen. tok/s": _f(v["gen_tokens_per_s"], "{:.0f}") if v["gen_tokens_per_s"] else "–",
                         "peak RSS (MiB, above baseline)": f"{v['peak_rss_mb']:.0f} (+{v['peak_rss_increase_mb']:.0f})",
                         "step ÷ essential passes": _f(v.get("limit_ratio"), "{:.2f}")})
    r, sizes = res["ratios"], list(res["methods"])

    def line(name, target, values):  # values: {size: a ratio, or {method: ratio} shown as its range}
        def span(v):
            lo, hi = (min(v.values()), max(v.values())) if isinstance(v, dict) else (v, v)
            return lo, hi

        def limit(s):
            return target.get(s) if isinstance(target, dict) else target

        vals = {s: values.get(s) for s in sizes}
        shown = {s: "–" if v is None else "–".join(dict.fromkeys(f"{x:.2f}" for x in span(v)))
                 for s, v in vals.items()}
        met = [s for s in sizes if vals[s] is not None and limit(s) is not None and span(vals[s])[1] <= limit(s)]
        return {"ratio": name, "target": "–" if target is None else (
                    ", ".join(f"≤ {t} {s}" for s, t in target.items()) if isinstance(target, dict) else f"≤ {target}"),
                **shown, "met": ", ".join(met) if met else ("no" if target is not None else "–")}

    limit = {s: {m: v for m, v in d.items() if v is not None} or None for s, d in r.get("limit", {}).items()}
    gvp = r.get("grpo_vs_ppo", {})
    out = [line("step ÷ sum of essential passes (over the methods)", TARGETS["limit"], limit),
           line("GRPO ÷ PPO peak memory (RSS above baseline)", TARGETS["grpo_vs_ppo"],
                {s: gvp[s]["peak_memory"] for s in sizes if s in gvp}),
           line("GRPO ÷ PPO peak memory, total RSS", None, {s: gvp[s]["peak_rss_total"] for s in sizes if s in gvp}),
           line("GRPO ÷ PPO step time", None, {s: gvp[s]["step_time"] for s in sizes if s in gvp}),
           line("engine ÷ plain cross-entropy (SFT)", TARGETS["engine_vs_ce"], r.get("engine_vs_ce", {}))]
    for m in sorted({m for d in r.get("vs_trl", {}).values() for m in d}):
        out.append(line(f"project ÷ TRL, {m.upper()}", TARGETS["vs_trl"],
                        {s: r["vs_trl"][s].get(m) for s in sizes if s in r.get("vs_trl", {})}))
        out.append(line(f"project's essential passes ÷ TRL, {m.upper()} (the floor)", None,
                        {s: r["vs_trl_floor"][s].get(m) for s in sizes if s in r.get("vs_trl_floor", {})}))
    mem = []  # GRPO's and PPO's peaks side by side: what the memory ratio is made of
    pairs = [(s, s, d) for s, d in res["methods"].items() if {"grpo", "ppo"} <= set(d)]
    if res.get("micro_batch_memory"):  # the same pair with activations bounded (its baseline is its size's)
        mb = res["micro_batch_memory"]
        pairs.append((f"{mb['size']}, micro-batches of {mb['micro_batch_size']}", mb["size"], mb))
    for label, size, d in pairs:
        g, p = d["grpo"], d["ppo"]
        peak = {f"{m} peak RSS (MiB, above baseline)": f"{v['peak_rss_mb']:.0f} (+{v['peak_rss_increase_mb']:.0f})"
                for m, v in (("GRPO", g), ("PPO", p))}
        mem.append({"size": label, "baseline RSS (MiB)": _f(res["methods"][size]["grpo"]["rss_baseline_mb"], "{:.0f}"),
                    **peak, "GRPO ÷ PPO above baseline": _f(ratio(g["peak_rss_increase_mb"],
                                                                    p["peak_rss_increase_mb"]), "{:.2f}"),
                    "GRPO ÷ PPO total": _f(ratio(g["peak_rss_mb"], p["peak_rss_mb"]), "{:.2f}")})
    folder = Path(folder)
    paths = [folder / "steps.csv", folder / "ratios.csv"] + ([folder / "memory.csv"] if mem else [])
    pd.DataFrame(rows).to_csv(paths[0], index=False)
    pd.DataFrame(out).to_csv(paths[1], index=False)
    if mem:
        pd.DataFrame(mem).to_csv(paths[2], index=False)
    return paths


def _real_table(res: dict) -> str:
    from experiments.benchmark_real import table as real_table

    m = res["machine"]
    return (real_table(res["real"]) + f"\nmachine: {m.get('cpu') or m['platform']}, {m['cpu_count']} cores, "
            f"{res['config']['threads'] or m['torch_threads']} intra-op threads per process, load average "
            f"{m['load_avg_start'][0]:.1f} -> {m['load_avg_end'][0]:.1f}; wall {res['wall_s']:.0f} s")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1].lstrip("\n"))  # the first line is the description
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


def out_file(out: Path) -> Path:
    """--out's JSON file, its folder made now (results/new/bench.json creates results/new); an existing folder, or
    a path ending in /, gets bench.json inside it. Refused in one line where the folder cannot be made."""
    if out.is_dir() or str(out).endswith(("/", os.sep)):
        out = out / "bench.json"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--out {out}: its folder {out.parent} cannot be made ({e.strerror or type(e).__name__}): "
                        "choose another path") from None
    check_writable(out.parent, "choose another --out")
    return out


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.vs_trl and args.no_trl:
        raise UserError("--vs-trl and --no-trl contradict each other: give one of them")
    unknown = sorted(set(args.sizes.split(",")) - set(SIZES) - {"real"}) if args.sizes else []
    if unknown:
        raise UserError(f"--sizes: unknown size(s) {', '.join(unknown)}: choose from small, compute, real")
    if args.out:  # fail now, not after minutes of measuring
        args.out = str(out_file(Path(args.out)))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    import gcframe.trainer
    import methods

    task_of(run_config(SIZES["small"], 1))  # the same task for every size (only the batch shape differs)

    args.trl, skipped = False, "--no-trl"
    if not args.no_trl:
        try:
            import trl

            args.trl = True
        except ImportError:
            if args.vs_trl:
                raise UserError("--vs-trl needs TRL: pip install -e '.[trl]' (or pip install trl)")
            skipped = "TRL is not installed: pip install -e '.[trl]'"
    if args.out:  # the environment the numbers were measured in, beside them (results/benchmark/env.json)
        from gcframe.tracking.env import write_env

        write_env(Path(args.out).resolve().parent / "env.json")
    res = run(args)
    if not args.trl:
        res["config"]["trl_skipped"] = skipped
    print(table(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))
        csvs = write_csvs(res, Path(args.out).parent) if res["methods"] else []
        print(f"\nJSON: {args.out}" + "".join(f"; {p}" for p in csvs))
    return 0


if __name__ == "__main__":
    warnings.filterwarnings("ignore")  # transformers' deprecation notices, in the measured children too
    sys.exit(main())
