"""FSDP2 (train.shard: fsdp2) against DDP on 2 processes: per-process memory and decode time, side by side.

    torchrun --standalone --nproc_per_node 2 experiments/benchmark_fsdp.py --out fsdp.json   # compute size
    python experiments/benchmark.py --shard ...                                               # launches this

For each method (GRPO; PPO, whose critic is a second trained model) one DDP trainer and one FSDP2 trainer of the
same untrained base live in the same processes, and their steps alternate (DDP first, then FSDP first, ...), so
both see the same load.

    memory    bytes one process holds of the trained models' parameters, gradients and AdamW state (exp_avg,
              exp_avg_sq, step), summed from the local tensors (`gcframe.sharding.local_bytes`: a DTensor counts
              its own shard): parameters and AdamW state after a step, gradients after a backward of the step's
              batch; π_ref (frozen: parameters only) reported beside them
    decode    the step's `time_generate` (KV-cache decoding, FSDP2's one all-gather per rollout included),
              median over the timed steps
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

METHODS = ("grpo", "ppo")


def memory(tr, batch) -> dict[str, int]:
    """This process's bytes of the trained models (policy, critic): params, grads (after a backward of `batch`),
    AdamW state; and π_ref's parameters."""
    from gcframe import sharding
    from gcframe.engine import token_logprobs

    pairs = [(tr.policy, tr.opt), *zip(tr.aux_models, tr.aux_opts)]
    loss = -token_logprobs(tr.policy, batch).sum()  # any loss: every trained parameter gets a gradient
    for name, m in zip(tr.aux, tr.aux_models):
        loss = loss + m(batch.input_ids, batch.attention_mask).sum()
    loss.backward()
    parts = [sharding.local_bytes(m, o) for m, o in pairs]
    for _, o in pairs:
        o.zero_grad(set_to_none=True)
    out = {k: sum(p[k] for p in parts) for k in ("params", "grads", "optimizer")}
    out["trained_total"] = out["params"] + out["grads"] + out["optimizer"]
    ref = tr.ctx._frozen.get("reference")
    out["reference_params"] = sharding.local_bytes(ref)["params"] if ref is not None else 0
    return out


def measure(method: str, size_name: str, base: str, warmup: int, rounds: int) -> dict:
    """DDP and FSDP2 trainers of one method, steps alternated -> memory and medians of each."""
    from experiments.bench_common import SIZES, make_trainer, median, ratio

    size = SIZES[size_name]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        trs = {mode: make_trainer(method, size, base, f"{tmp}/{mode}", warmup + rounds, None, {"shard": mode})
               for mode in ("none", "fsdp2")}
        rows = {mode: [] for mode in trs}
        for step in range(warmup + rounds):
            order = list(trs) if step % 2 == 0 else list(trs)[::-1]
            for mode in order:
                t0 = time.perf_counter()
                row, batch = trs[mode].train_step(step)
                row["step_s"] = time.perf_counter() - t0
                if step >= warmup:
                    rows[mode].append(row)
                if step == warmup - 1 or (warmup == 0 and step == 0):
                    out.setdefault(mode, {})["memory_bytes"] = memory(trs[mode], batch)
        for mode, tr in trs.items():
            out[mode].update(sharded=tr.sharded, generate_s=median([r["time_generate"] for r in rows[mode]]),
                             step_s=median([r["step_s"] for r in rows[mode]]),
                             generate_s_all=[r["time_generate"] for r in rows[mode]])
            tr.logger.close()
    d, f = out["none"], out["fsdp2"]
    held = {mode: v["memory_bytes"]["trained_total"] + v["memory_bytes"]["reference_params"] for mode, v in out.items()}
    out["ratios"] = {"memory_trained": ratio(f["memory_bytes"]["trained_total"], d["memory_bytes"]["trained_total"]),
                     "memory_with_reference": ratio(held["fsdp2"], held["none"]),
                     "generate": ratio(f["generate_s"], d["generate_s"]), "step": ratio(f["step_s"], d["step_s"])}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="compute", help="small or compute (experiments/bench_common.py SIZES)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per trainer")
    p.add_argument("--rounds", type=int, default=3, help="timed steps per trainer (alternated)")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--out", help="write the results as JSON here (process 0)")
    args = p.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist

    from experiments.bench_common import SIZES, build_base
    from gcframe.trainer import make_accelerator

    torch.set_num_threads(1)
    acc = make_accelerator()
    if acc.num_processes < 2:
        print("launch with torchrun --standalone --nproc_per_node 2 (one process shards nothing)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = [f"{tmp}/base"]
        if acc.is_main_process:
            params = build_base(SIZES[args.size], base[0])
        dist.broadcast_object_list(base, src=0)  # process 0's folder (one machine)
        acc.wait_for_everyone()
        res = {"size": args.size, "processes": acc.num_processes, "warmup": args.warmup, "rounds": args.rounds,
               "load_avg_start": os.getloadavg(), "methods": {}}
        for m in args.methods.split(","):
            res["methods"][m] = measure(m, args.size, base[0], args.warmup, args.rounds)
        acc.wait_for_everyone()
    res.update(load_avg_end=os.getloadavg(), wall_s=time.perf_counter() - t0)
    if acc.is_main_process:
        res["params"] = params
        for m, v in res["methods"].items():
            r, mem = v["ratios"], (v["none"]["memory_bytes"], v["fsdp2"]["memory_bytes"])
            print(f"{args.size} {m}: FSDP2 / DDP per-process params+grads+AdamW {r['memory_trained']:.3f} "
                  f"({mem[1]['trained_total'] / 2**20:.1f} vs {mem[0]['trained_total'] / 2**20:.1f} MiB; with π_ref "
                  f"{r['memory_with_reference']:.3f}), "
                  f"decode {r['generate']:.2f} ({v['fsdp2']['generate_s']:.3f} vs {v['none']['generate_s']:.3f} s), "
                  f"step {r['step']:.2f}")
        if args.out:
            Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
