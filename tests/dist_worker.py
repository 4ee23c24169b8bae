"""Worker of tests/test_distributed.py: two training steps per configuration, in one process or several.

    torchrun --standalone --nproc_per_node 2 tests/dist_worker.py BASE_DIR OUT.pt

Completions come from `FixedSampler`, a deterministic stand-in for the sampler (a function of the prompt), so one
process and two see the same global batch. Everything else is the real code: Context.draw's per-process prompt
shards, the verifier's rewards, group advantages, the global loss normaliser (Trainer._global_norm), DDP's
gradient averaging and the backward scale, clipping, AdamW and the warm-up schedule. Float64, so that the
parameters of 1 and 2 processes agree to rounding. The `fsdp/*` configurations shard the models with FSDP2
(`train.shard: fsdp2`, gcframe.sharding); in one process that option does nothing, so 1 process is the reference.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.config import from_dict  # noqa: E402
from gcframe.engine import AGGREGATIONS  # noqa: E402
from gcframe.sampling import make_batch  # noqa: E402

TRAIN = {"steps": 2, "prompts_per_step": 4, "group_size": 4, "lr": 0.01, "warmup_steps": 3, "max_new_tokens": 8,
         "eval_size": 4, "eval_k": 0, "checkpoint_every": 0, "sample_every": 0}
# name -> (method, method options, train overrides)
CONFIGS = {
    **{f"grpo/{mode}": ("grpo", {"aggregation": mode}, {}) for mode in AGGREGATIONS},
    "grpo/micro-batches": ("grpo", {}, {"micro_batch_size": 2}),  # gradient accumulation under no_sync
    "sft": ("sft", {}, {}),
    "ppo": ("ppo", {}, {}),  # whitening included: its moments are all-reduced
    **{f"fsdp/{m}": (m, {}, {"shard": "fsdp2"}) for m in ("sft", "grpo", "ppo", "dpo")},
    "fsdp/grpo/micro-batches": ("grpo", {}, {"shard": "fsdp2", "micro_batch_size": 2}),
    "fsdp/grpo/ref-refresh": ("grpo", {"beta": 0.5}, {"shard": "fsdp2", "ref_refresh_every": 1}),  # π_ref <- π_θ
}
FSDP = [name for name in CONFIGS if name.startswith("fsdp/")]
TASK = {"digits": 1, "n_demos": 32, "n_heldout": 8}


class FixedSampler:
    """`Generator.generate` with completions fixed by the prompt: of each group of n, every 4th is the right sum,
    the others wrong sums of different lengths, so groups have reward variance and the aggregations differ."""

    def __init__(self, tok):
        self.tok = tok

    def generate(self, model, prompts: list[str], n: int = 1, **_):
        comps = []
        for p in prompts:
            total = sum(int(x) for x in p.rstrip("=").split("+"))
            comps += [[str(total), str(total + 1), f"{total}0", f"1;{total + 2}"][j % 4] for j in range(n)]
        batch = make_batch(self.tok, [p for p in prompts for _ in range(n)], comps,
                           group_ids=[i // n for i in range(len(comps))])
        batch.data["truncated"] = torch.zeros(len(comps))
        return batch


def demo_pairs(task) -> list[dict]:
    """DPO's preference pairs from the demonstrations (chosen: the gold completion, rejected: its last digit + 1),
    instead of sampling the base (which would need a trained one)."""
    return [{"prompt": r["prompt"], "chosen": r["completion"], "answer": r["answer"], "flipped": False,
             "rejected": r["completion"][:-1] + str((int(r["completion"][-1]) + 1) % 10)} for r in task.demos]


def run(base_dir: str, accelerator, work_dir: str) -> dict[str, dict]:
    """Two steps of every configuration -> {name: {params, initial, shards, loss, grad_norm, rows, bytes, grads}}
    (grads: {"policy" / "aux<i>": [each optimiser step's gradients, flattened]}), and for
    two of them the per-problem rows of an evaluation after the steps (`problems`)."""
    from unittest import mock

    import methods.dpo as dpo
    from gcframe import engine

    # One process would compute a group's prompt once (engine._prefix_shared_logits), a path DDP never takes; its
    # gradient differs from the plain forward's by ~1e-8 (relative) even in float64, which Adam magnifies for
    # parameters with tiny gradients. The plain forward on both sides isolates what is tested: the split.
    pairs = lambda cfg, task, *a, **k: ({"train": demo_pairs(task), "heldout": []}, {})  # noqa: E731
    with mock.patch.object(engine, "shared_prompts", lambda batch: None), \
            mock.patch.object(dpo, "load_or_build", pairs):
        return {name: _two_steps(name, base_dir, accelerator, work_dir) for name in CONFIGS}


def flat(model) -> torch.Tensor:
    """Every parameter, flattened into one vector (sharded ones gathered: collective)."""
    from torch.distributed.tensor import DTensor

    return torch.cat([(p.full_tensor() if isinstance(p, DTensor) else p).detach().flatten()
                      for p in model.parameters()])


def flat_grads(opt) -> torch.Tensor:
    """Every gradient an optimiser is about to apply, flattened into one vector (sharded ones gathered: collective;
    a parameter without one counts as zeros)."""
    from torch.distributed.tensor import DTensor

    full = lambda t: t.full_tensor() if isinstance(t, DTensor) else t  # noqa: E731
    return torch.cat([(full(p.grad) if p.grad is not None else torch.zeros_like(full(p.detach()))).flatten()
                      for g in opt.param_groups for p in g["params"]])


def generation_gathers(trainer, max_new_tokens: int, through_generator: bool) -> int:
    """All-gathers FSDP2 runs while the sharded policy samples 4 prompts x 2 (greedy): through the project's
    Generator (which gathers the weights once), or through Hugging Face `generate` called on the module directly."""
    from unittest import mock

    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as group

    from gcframe.batch import pad_left
    from gcframe.sampling import GenerationConfig, Generator, encode_prompts

    calls, inner, tok = [], group.foreach_all_gather, trainer.tok

    def counted(*a, **k):
        calls.append(1)
        return inner(*a, **k)

    prompts = [r["prompt"] for r in trainer.task.prompts.select(range(4))]
    with mock.patch.object(group, "foreach_all_gather", counted), torch.no_grad():
        if through_generator:
            batch = Generator(tok, GenerationConfig(max_new_tokens, 0.0)).generate(trainer.policy, prompts, n=2)
            assert batch.completion_ids.shape[1] <= max_new_tokens
        else:
            ids, mask = pad_left(encode_prompts(tok, prompts), tok.pad_token_id)
            trainer.policy.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                    do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    return len(calls)


def _two_steps(name: str, base_dir: str, accelerator, work_dir: str) -> dict:
    from accelerate.utils import gather_object

    from gcframe.tasks import build_task
    from gcframe.trainer import Trainer

    method, options, train = CONFIGS[name]
    cfg = from_dict({"task": TASK, "train": {**TRAIN, **train}, "methods": {method: options}})
    trainer = Trainer(cfg, method, Path(work_dir) / name, base_dir, build_task(cfg.task), accelerator,
                      dtype=torch.float64, show_progress=False)
    trainer.ctx.generator = FixedSampler(trainer.tok)
    policy = accelerator.unwrap_model(trainer.policy)
    initial = flat(policy).clone()
    losses, norms, shards, rows = [], [], [], []
    # each step's gradients of the policy and of the auxiliary models (PPO's critic), as their optimisers are about
    # to apply them (after clipping)
    grads = {"policy": [], **{f"aux{i}": [] for i in range(len(trainer.aux_opts))}}
    inner = [getattr(o, "optimizer", o) for o in (trainer.opt, *trainer.aux_opts)]  # the torch ones accelerate wraps
    hooks = [o.register_step_pre_hook(lambda o, a, k, key=key: grads[key].append(flat_grads(o)))
             for key, o in zip(grads, inner)]
    for step in range(cfg.train.steps):
        row, batch = trainer.train_step(step)
        rows.append(row)
        losses.append(row["loss"])
        norms.append(row["grad_norm"])  # Adam hides a gradient's scale; the norm does not
        shards.append((accelerator.process_index, [t["prompt"] for t in batch.texts], batch.group_ids.tolist()))
    for h in hooks:
        h.remove()
    from gcframe import sharding

    out = {"params": flat(policy), "initial": initial,
           "shards": gather_object([shards]), "loss": losses, "grad_norm": norms,  # shards[rank][step]
           "grads": grads,
           "rows": rows, "bytes": [sharding.local_bytes(m, o) for m, o in
                                   [(trainer.policy, trainer.opt), *zip(trainer.aux_models, trainer.aux_opts)]]}
    if name in ("grpo/token-mean", "fsdp/grpo"):  # an evaluation: each process scores its share of the problems
        from gcframe.tracking.log import read_jsonl

        trainer.evaluate(cfg.train.steps, k=2)
        if accelerator.is_main_process:
            out["problems"] = read_jsonl(Path(work_dir) / name / "problems.jsonl")
    if name in FSDP and accelerator.num_processes > 1:
        from torch.distributed.fsdp import FSDPModule

        from gcframe.modeling import load_model_and_tokenizer

        trainer.save_model(Path(work_dir) / name / "model")  # gathered into one Hugging Face folder
        if accelerator.is_main_process:
            saved, _ = load_model_and_tokenizer(str(Path(work_dir) / name / "model"), dtype=torch.float64)
            out["saved"] = flat(saved)
        if name == "fsdp/grpo":  # a rollout: plain HF generate, then the Generator (ranks stop at different lengths)
            out["gathers_per_step"] = generation_gathers(trainer, 6, through_generator=False)
            out["gathers_once"] = generation_gathers(trainer, 6 if accelerator.process_index else 2,
                                                     through_generator=True)
            out["fsdp_units"] = sum(isinstance(m, FSDPModule) for m in policy.modules())
    return out


if __name__ == "__main__":
    from gcframe.trainer import make_accelerator

    base, dest = sys.argv[1], sys.argv[2]
    acc = make_accelerator()
    assert acc.num_processes > 1, "launch with torchrun --nproc_per_node 2"
    with tempfile.TemporaryDirectory() as work:
        result = run(base, acc, work)
    if acc.is_main_process:
        torch.save(result, dest)
    acc.wait_for_everyone()
    acc.end_training()  # the process group destroyed before exit (make_accelerator's atexit does it for the rest)
