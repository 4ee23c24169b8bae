"""The training loop every method runs through (a method's data source uses `gcframe.context.Context`).

One step:  method.collect -> Batch (prompts -> sampler -> rewards)
           engine: ref/old log-probs once per batch (no grad) -> method.prepare (advantages)
           for μ epochs, for each minibatch (whole groups), for each micro-batch:
               logp = log π_θ(o_t|q,o_<t);  GC = method.coefficients(batch, logp)
               loss = -aggregate(GC.detach()·logp, mask, mode, global counts)  -> backward
           clip, AdamW step -> metrics -> run folder
The loop never asks which method it runs.
"""
from __future__ import annotations

import atexit
import collections.abc
import contextlib
import dataclasses
import hashlib
import math
import os
import sys
import time
from pathlib import Path

import torch
from accelerate import Accelerator

from gcframe import offpolicy, sharding
from gcframe.batch import Batch
from gcframe.config import RunConfig
from gcframe.context import Context
from gcframe.engine import Normaliser, check_gc, token_logprobs, weighted_mle_loss
from gcframe.errors import MethodError, UserError
from gcframe.evaluate import COUNT_KEYS, eval_seed, evaluate, rates
from gcframe.evaluate.problems import FILE as PROBLEMS_FILE
from gcframe.evaluate.problems import heldout_rows, split_names, write_rows
from gcframe.kl import k3
from gcframe.modeling import count_parameters, evaluating, prepare_policy
from gcframe.offpolicy import corrections
from gcframe.tracking import checkpoint, health
from gcframe.tracking.log import RunLogger
from gcframe.tracking.memory import peak_rss_mb, reset_peak, rss_mb
from gcframe.tracking import progress as progress_lines
from gcframe.tracking.progress import ESTIMATE_AFTER, estimate_line, progress, say
from gcframe.registry import get_method


def eval_steps(tcfg) -> set[int]:
    """The steps after which a run evaluates (besides step 0 and its last step): every eval_every steps, or with
    eval_points = n, round(steps^(j/n)) for j = 1..n, evenly spaced in log-steps, and the halfway step steps // 2,
    where a forecast from half the compute ends (analysis.curves; steps 1000, n 6: 3, 10, 32, 100, 316, 500, 1000;
    duplicates at small j merge)."""
    if tcfg.eval_points:
        n = tcfg.eval_points
        half = {tcfg.steps // 2} if tcfg.steps >= 2 else set()
        return {max(1, round(tcfg.steps ** (j / n))) for j in range(1, n + 1)} | half
    return EvalSteps(tcfg.eval_every, tcfg.steps) if tcfg.eval_every else set()


class EvalSteps(collections.abc.Set):
    """Every `every`-th step up to `steps`, as a rule: `done in` it is arithmetic, so nothing is allocated in
    proportion to train.steps (a set of them took gigabytes at steps 10^20). Iterating lists them, in order."""

    def __init__(self, every: int, steps: int):
        self.every, self.steps = every, steps

    def __contains__(self, step) -> bool:
        return isinstance(step, int) and 0 < step <= self.steps and step % self.every == 0

    def __iter__(self):
        return iter(range(self.every, self.steps + 1, self.every))

    def __len__(self) -> int:
        return self.steps // self.every

    @classmethod
    def _from_iterable(cls, it):  # what |, & and - of two Sets build: a plain set
        return set(it)


def make_accelerator() -> Accelerator:
    """The run's Accelerator. Without a GPU it must be told cpu=True, else a multi-process launch (torchrun,
    `accelerate launch --multi_gpu`) silently runs independent single processes instead of one gloo group.

    Under several processes the process group is destroyed at exit, while the interpreter is still whole: left to
    the interpreter's teardown, Gloo's worker threads can abort the process ("terminate called without an active
    exception", SIGABRT) after its work is done (pytorch/pytorch#190489). Destroying it ends those threads only if
    nothing else holds the group: torch.distributed.nn.functional's collectives take `group=group.WORLD` as a
    default argument, so that module, imported once the group exists (transformers imports it with its models),
    would hold the group until the teardown; imported here first, its defaults are None. FSDP2's device mesh holds
    it too: `sharding.release_meshes` lets go of it."""
    import torch.distributed.nn  # noqa: F401  (before the process group exists: see above)

    acc = Accelerator(cpu=not torch.cuda.is_available())
    if acc.num_processes > 1:
        atexit.register(_end_process_group, acc)
    return acc


def _end_process_group(acc: Accelerator) -> None:
    """At exit: destroy the process group, then drop the last references to it (sharded models left in reference
    cycles hold it too), so that Gloo's threads end now."""
    import gc

    acc.state.destroy_process_group()
    sharding.release_meshes()
    gc.collect()


def adamw(params, **kw) -> torch.optim.AdamW:
    """torch AdamW, fused into one kernel on CPU and CUDA: the same update as the per-tensor loop torch picks on CPU
    by default, 4-10x faster for the tiny models here (experiments/benchmark.py)."""
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") for p in params) or None
    return torch.optim.AdamW(params, fused=fused, **kw)


def lr_factor(warmup: int, steps: int, schedule: str):
    """The learning-rate multiplier of step s: linear warm-up over `warmup` steps, then constant or a cosine that
    reaches 0 after the last step (`steps`)."""
    def factor(s: int) -> float:
        if warmup and s < warmup:
            return (s + 1) / warmup
        if schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(s - warmup + 1, steps - warmup) / max(steps - warmup, 1)))
        return 1.0

    return factor


class Tally:
    """Per-item statistics of one step (n, Σx, Σx² per name), summed over micro-batches and then over processes in
    one all-reduce: the logged means and stds are those of the global batch, however it is split."""

    def __init__(self):
        self.sums: dict[str, torch.Tensor] = {}

    def add(self, name: str, values: torch.Tensor) -> None:
        x = values.detach().flatten().double().cpu()
        s = torch.stack([torch.tensor(float(x.numel()), dtype=torch.float64), x.sum(), (x * x).sum()])
        self.sums[name] = self.sums[name] + s if name in self.sums else s

    def all_sum(self, ctx: Context) -> "Tally":
        """Σ over processes (`Context.all_sum`); every process adds the same names, sorted into the same order."""
        if ctx.world > 1 and self.sums:
            names = sorted(self.sums)
            total = ctx.all_sum(torch.stack([self.sums[k] for k in names]).to(ctx.device)).cpu()
            self.sums = dict(zip(names, total))
        return self

    def count(self, name: str) -> float:
        return float(self.sums[name][0])

    def total(self, name: str) -> float:
        return float(self.sums[name][1])

    def mean(self, name: str) -> float:
        n, total, _ = self.sums[name].tolist()
        return total / n if n else 0.0

    def std(self, name: str) -> float:
        """The sample standard deviation (n − 1), as torch.std."""
        n, total, squares = self.sums[name].tolist()
        return math.sqrt(max(squares - total * total / n, 0.0) / (n - 1)) if n > 1 else 0.0


class Trainer:
    """Runs one method from the SFT base for cfg.train.steps steps, logging into `run_dir`."""

    def __init__(self, cfg: RunConfig, method_name: str, run_dir, base_dir, task, accelerator=None,
                 policy=None, tok=None, reward_model=None, show_progress: bool = True,
                 dtype: torch.dtype = torch.float32, label: str | None = None, step0_evals=None):
        from gcframe.modeling import load_model_and_tokenizer

        self.cfg, self.tcfg = cfg, cfg.train
        reset_peak()  # the rows' peak_rss_mb is this run's own, though compare.py runs every method in one process
        self.rss_start_mb = rss_mb()  # held before this run: peak_rss_run_mb is the run's own growth
        self.acc = accelerator or make_accelerator()
        torch.manual_seed(cfg.seed + self.acc.process_index)  # each process samples its own completions
        if policy is None:
            policy, tok = load_model_and_tokenizer(str(base_dir), dtype=dtype)
        self.tok, self.task = tok, task
        method_cls = get_method(method_name)
        own = {k: v for k, v in (cfg.methods.get(method_name) or {}).items() if k != "train"}  # a method's own
        mcfg = method_cls.Config.from_dict(own, method_name)  # train: mapping is compare.py's run_config's to apply
        method_cls.check_run(cfg, method_name)
        policy = prepare_policy(policy, cfg.model.gradient_checkpointing, cfg.model.lora_rank)
        policy.to(self.acc.device)
        self.sharded = sharding.enabled(self.tcfg.shard, self.acc.num_processes)
        if self.sharded:  # before the optimiser exists: it must hold the sharded parameters
            sharding.shard(policy, self.acc.device, self.acc.num_processes)
        self.ctx = Context(cfg, task, tok, policy, base_dir, self.acc, dtype)
        self.ctx.reward_model = reward_model
        self.method = method_cls(mcfg, self.ctx)
        self.aggregation = mcfg.aggregation

        opt = adamw([p for p in policy.parameters() if p.requires_grad], lr=self.tcfg.lr,
                    weight_decay=self.tcfg.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(self.tcfg.warmup_steps, self.tcfg.steps,
                                                                  self.tcfg.lr_schedule))
        self.aux = self.method.auxiliary_models()
        for m in self.aux.values() if self.sharded else ():  # PPO's critic: sharded like the policy
            sharding.shard(m, self.acc.device, self.acc.num_processes)
        aux_opts = [adamw(m.parameters(), lr=getattr(mcfg, "critic_lr", self.tcfg.lr))
                    for m in self.aux.values()]
        # the scheduler stays unprepared: accelerate would step it once per process per step
        # FSDP2: nothing is prepared (accelerate would wrap the sharded modules in DDP on CPU)
        prepared = [policy, opt, *self.aux.values(), *aux_opts] if self.sharded else \
            self.acc.prepare(policy, opt, *self.aux.values(), *aux_opts)
        (self.policy, self.opt), self.sched = prepared[:2], sched
        k = len(self.aux)
        self.aux_models, self.aux_opts = list(prepared[2:2 + k]), list(prepared[2 + k:])
        self.method.ctx.policy = self.acc.unwrap_model(self.policy)
        for name, m in zip(self.aux, self.aux_models):  # the method computes with the (possibly wrapped) model
            setattr(self.method, name, m)
        # off-policy data (gcframe.offpolicy): a sampler μ that lags or runs in a lower precision, and the correction
        # applied to GC; the Context generates with the sampler wherever a method samples from the live policy
        self.correction = corrections.Correction.of(self.tcfg)
        if offpolicy.dials_on(self.tcfg):
            from gcframe.offpolicy.sampler import Sampler

            self.ctx.sampler = Sampler(self.method.ctx.policy, self.tcfg.staleness, self.tcfg.sampler_dtype)
        self.pipe = None  # train.pipeline: the sampler in a process of its own, k batches ahead
        if self.tcfg.pipeline:
            from gcframe.offpolicy import pipeline

            pipeline.check(self)
            self.pipe = pipeline.Pipeline(self)

        self.logger = RunLogger(run_dir, enabled=self.acc.is_main_process)
        self.show_progress = self.ctx.show_progress = show_progress and self.acc.is_main_process
        self.label = label or f"{method_name} seed {cfg.seed}"  # how progress lines and messages name the run
        self.step0_evals = Path(step0_evals) if step0_evals else None  # shared step-0 evaluations (evaluate)
        self.mb_gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.gen_tokens = 0
        self.elapsed = 0.0
        self.recent: list[dict] = []  # the last health.WINDOW training rows, and the starvation kinds warned about
        self.warned: set[str] = set()
        # the models this run holds and their parameter counts (frozen ones are copies of the SFT base)
        self.models_held = {"policy": count_parameters(policy), **{n: count_parameters(m) for n, m in self.aux.items()}}
        if self.method.uses_reference:
            self.models_held["reference"] = count_parameters(self.ctx.reference)
        if isinstance(getattr(reward_model, "model", None), torch.nn.Module):  # r_φ (a stub may have none)
            self.models_held["reward_model"] = count_parameters(reward_model.model)
        checkpoint.check_supported(self)

    # -- one optimiser step on one minibatch ---------------------------------------------------------------
    def _global_norm(self, mb: Batch) -> Normaliser:
        """Counts of the whole minibatch over all processes: the loss normaliser does not depend on the split."""
        m = mb.completion_mask
        counts = torch.tensor([m.shape[0], float(m.sum())], dtype=torch.float64, device=self.acc.device)
        n_seqs, n_tok = self.acc.reduce(counts, "sum").tolist()
        return Normaliser(n_seqs, n_tok, self.tcfg.max_new_tokens)

    def _update(self, mb: Batch, tally: Tally) -> dict:
        """One optimiser step on one minibatch -> {loss, grad_norm}; per-token statistics go to `tally`."""
        norm = self._global_norm(mb)
        mbs = self.tcfg.micro_batch_size
        micros = mb.split(math.ceil(len(mb) / mbs)) if mbs else [mb]
        models = [self.policy, *self.aux_models]
        loss_sum = 0.0
        for j, micro in enumerate(micros):
            last = j == len(micros) - 1
            with contextlib.ExitStack() as stack:
                if not last and not self.sharded:  # accumulate locally; DDP all-reduces on the last one only
                    for m in models:  # (FSDP2 reduce-scatters every micro-batch: its gradients stay sharded)
                        stack.enter_context(self.acc.no_sync(m))
                logp, entropy = token_logprobs(self.policy, micro, self.tcfg.temperature, with_entropy=True)
                gc = self.method.coefficients(micro, logp)
                if not getattr(self, "_gc_checked", False):  # the method's GC before its first update (one line)
                    check_gc(gc, logp, self.method.name)
                    self._gc_checked = True
                weight = None
                if self.correction.is_factor:  # the off-policy correction: one factor on GC, from π_old/μ
                    weight, cut = self.correction.factor(corrections.inputs(micro, logp))  # [N, T] each
                    gc = gc * weight.to(gc.dtype)
                loss = weighted_mle_loss(gc, logp, micro.completion_mask, self.aggregation, norm)
                if not torch.isfinite(loss):
                    raise FloatingPointError("loss")
                # DDP averages gradients over processes; the normaliser already counts them all -> scale back.
                self.acc.backward(loss * self.acc.num_processes)
                with self.ctx.timed("critic"):  # auxiliary models (PPO's critic): a separate graph, own backward
                    aux = self.method.auxiliary_loss(micro, norm)
                    if aux is not None:
                        if not torch.isfinite(aux):
                            raise FloatingPointError("loss")
                        self.acc.backward(aux * self.acc.num_processes)
            mask = micro.completion_mask.bool()
            loss_sum += float(loss.detach())
            g = gc.detach()[mask]
            tally.add("gc", g)
            tally.add("gc_pos", (g > 0).double())
            tally.add("gc_neg", (g < 0).double())
            tally.add("gc_neg_mass", (-g).clamp(min=0))  # Σ max(−GC, 0): mass pushing sampled tokens down
            tally.add("gc_abs", g.abs())
            if "correct" in micro.data:  # signed GC on the tokens of right and of wrong completions
                right = micro.data["correct"].bool().unsqueeze(1).expand_as(mask)  # [N] -> [N, T]
                tally.add("gc_right", gc.detach()[mask & right])
                tally.add("gc_wrong", gc.detach()[mask & ~right])
            if "zero_var" in micro.data:  # |GC| on the tokens of equal-reward groups: does the method learn there?
                silent = mask & micro.data["zero_var"].bool().unsqueeze(1).expand_as(mask)  # [N, T]
                tally.add("gc_abs_zero_var", gc.detach().abs()[silent])
            tally.add("entropy", entropy[mask])
            if weight is not None:  # the correction's weights and the tokens it truncated or dropped
                tally.add("correction_weight", weight[mask])
                tally.add("correction_cut", cut[mask].double())
            if "ref_logp" in micro.data and "truncated" in micro.data:  # tokens sampled from π_θ, where the k3 mean
                tally.add("kl_ref", k3(micro.data["ref_logp"], logp.detach())[mask])  # estimates KL(π_θ‖π_ref)
        clip = sharding.clip_grad_norm_ if self.sharded else self.acc.clip_grad_norm_
        grad_norm = clip(self.policy.parameters(), self.tcfg.grad_clip or float("inf"))
        norms = [grad_norm] + [clip(m.parameters(), self.tcfg.grad_clip or float("inf")) for m in self.aux_models]
        if not all(math.isfinite(float(n)) for n in norms):  # norms of all-reduced gradients: every process agrees
            raise FloatingPointError("gradients")  # before any optimiser step: the weights stay finite
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        with self.ctx.timed("critic"):
            for o in self.aux_opts:
                o.step()
                o.zero_grad(set_to_none=True)
        # this process's loss is its share of the global sum; the row is averaged over processes -> scale by W
        return {"loss": loss_sum * self.acc.num_processes, "grad_norm": float(grad_norm)}

    def train_step(self, step: int) -> dict:
        self.ctx.timings.clear()
        t0 = time.perf_counter()
        if not self.policy.training:  # it trains; the passes that must not (sampling, π_old) use `evaluating`
            self.policy.train()
        if self.ctx.sampler is not None:  # μ for this step: θ_{max(0, step − k)}, in train.sampler_dtype
            live = self.ctx.sampler.advance(load=self.pipe is None)
        if self.pipe is not None:  # generated by the sampler process with the same weights, while we trained
            batch = self.pipe.batch(step, live)
        else:
            batch = self.method.collect(step)  # (FloatingPointError("logits") from the sampler)
        if not isinstance(batch, Batch):
            raise MethodError(f"method '{self.method.name}': collect(step) returned {type(batch).__name__}, not a "
                              "Batch: build it from the context (self.ctx.rollout, self.ctx.draw, ...; methods/base.py)")
        batch = batch.to(self.acc.device)
        t1 = time.perf_counter()
        reuse = (self.tcfg.epochs > 1 or self.tcfg.minibatches > 1) and self.method.needs_old_logp  # π_old read
        off = offpolicy.dials_on(self.tcfg)  # μ ≠ π_old by construction: π_old is recomputed, never assumed
        recompute = self.method.needs_old_logp and (reuse or off or self.correction.name != "none")
        measure = "mu_logp" in batch.data and (recompute or off)  # KL(μ‖π_old) and π_old/μ, logged
        if self.correction.name != "none" and "mu_logp" not in batch.data:
            raise UserError(f"train.correction {self.correction.name} needs the sampler's log-probs of the batch "
                            f"(Batch.data['mu_logp']), but method '{self.method.name}' built its batch elsewhere than "
                            "ctx.rollout / ctx.complete: set train.correction: none for it")
        mismatch = None
        with torch.no_grad():
            if self.method.uses_reference:
                batch.data["ref_logp"] = token_logprobs(self.ctx.reference, batch, self.tcfg.temperature)
                sharding.release(self.ctx.reference)  # FSDP2: π_ref back to its shard alone
            if recompute or measure:  # π_old: the learner's weights at the start of the step, on the sampled tokens
                with evaluating(self.policy):
                    old = token_logprobs(self.policy, batch, self.tcfg.temperature)
                if recompute:  # naive: μ stands in for π_old, as a loop that does not recompute it
                    batch.data["old_logp"] = batch.data["mu_logp"] if self.correction.replaces_old else old
                if measure:
                    mismatch = corrections.mismatch(old, batch.data["mu_logp"], batch.completion_mask,
                                                    self.correction)
            self.method.prepare(batch)
        bad = sorted(k for k, v in batch.data.items() if v.is_floating_point() and not torch.isfinite(v).all())
        if bad:  # rewards, log-probs of π_ref/π_old (logits), advantages, values
            raise FloatingPointError(", ".join(bad))
        if self._grouped(batch):  # which sequences sit in a group of equal rewards (the starvation check's GC there)
            from gcframe.advantages import zero_variance

            batch.data["zero_var"] = zero_variance(batch.data["rewards"].double(), batch.group_ids).double()
        t2 = time.perf_counter()
        updates, tally = [], Tally()
        for name, values in (mismatch or {}).items():  # once per batch: the global batch's means in _batch_stats
            tally.add(name, values)
        for _ in range(self.tcfg.epochs):
            for mb in batch.split(self.tcfg.minibatches, self.mb_gen if self.tcfg.minibatches > 1 else None):
                updates.append(self._update(mb, tally))
        t3 = time.perf_counter()
        if self.tcfg.ref_refresh_every and (step + 1) % self.tcfg.ref_refresh_every == 0:
            self.ctx.refresh_reference()

        row = {k: sum(u[k] for u in updates) / len(updates) for k in updates[0]}  # loss, grad_norm: global
        row.update(self.method.pop_stats())  # the method's own measurements: means over processes
        row = self._mean_over_processes(row)
        row.update(self._batch_stats(batch, tally))  # the global batch's statistics
        row.update(self.ctx.pop_stats())  # the data source's global counts (dynamic sampling)
        if mismatch is not None:  # the largest π_old/μ of the global batch
            ratio = mismatch["mismatch_ratio"]
            row["mismatch_ratio_max"] = self._global_max(float(ratio.max()) if ratio.numel() else 0.0)
        if self.ctx.sampler is not None:
            row["sampler_lag"] = self.ctx.sampler.lag  # steps the sampler's weights were behind the learner's
        if "truncated" in batch.data:  # tokens sampled by this step (the batch was generated, not read), and those
            dropped = sum(v for k, v in row.items() if k.endswith("dropped_tokens"))  # dynamic sampling, a method's
            self.gen_tokens += int(tally.total("completion_len") + dropped)  # it dropped (ds_, fill_dropped_tokens)
        self.elapsed += t3 - t0
        row.update(step=step, gen_tokens=self.gen_tokens, time_s=self.elapsed, time_collect=t1 - t0,
                   time_prepare=t2 - t1, time_update=t3 - t2, lr=self.sched.get_last_lr()[0],
                   **{f"time_{k}": v for k, v in self.ctx.timings.items()},  # generate, score | critic (in update)
                   # growth >= 0: the kernel's per-CPU RSS counters lag by a few pages (-0.1 MB on no growth)
                   peak_rss_mb=(peak := peak_rss_mb()), peak_rss_run_mb=max(0.0, peak - self.rss_start_mb))
        if torch.cuda.is_available():
            row["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
        return row, batch

    def _global_max(self, x: float) -> float:
        """The largest of a value over processes (itself in one process)."""
        if self.acc.num_processes == 1:
            return x
        t = torch.tensor([x], dtype=torch.float64, device=self.acc.device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return float(t)

    def _batch_stats(self, batch: Batch, tally: Tally) -> dict:
        """Statistics of the global batch and of the update's tokens (`tally`), one all-reduce for all of them."""
        d = batch.data
        tally.add("completion_len", batch.completion_mask.sum(-1))
        for key in ("rewards", "correct", "truncated"):
            if key in d:
                tally.add(key, d[key])
        if "correct" in d:  # the length of right and of wrong completions (Dr. GRPO, Liu et al. 2025: 1/|o| lets wrong
            n = batch.completion_mask.sum(-1)  # ones grow longer); either may be empty in a step
            tally.add("len_right", n[d["correct"] > 0])
            tally.add("len_wrong", n[d["correct"] <= 0])
        grouped = "zero_var" in d
        if grouped:  # per sequence; groups are equal-sized, so the mean is the share of groups
            tally.add("zero_var_groups", d["zero_var"])
        tally.all_sum(self.ctx)
        out = {"completion_len": tally.mean("completion_len"), "n_seqs": tally.count("completion_len"),
               "gc_mean": tally.mean("gc"), "gc_std": tally.std("gc"), "gc_pos_frac": tally.mean("gc_pos"),
               "gc_neg_frac": tally.mean("gc_neg"), "entropy": tally.mean("entropy"),
               # share of the |GC| mass that is negative, Σ max(−GC, 0) / Σ |GC| (0 for RFT: it never pushes down)
               "gc_neg_mass": tally.total("gc_neg_mass") / max(tally.total("gc_abs"), 1e-30)}
        if "kl_ref" in tally.sums:
            out["kl_ref"] = tally.mean("kl_ref")
        if "rewards" in d:
            out.update(reward_mean=tally.mean("rewards"), reward_std=tally.std("rewards"))
        if "correct" in d:
            out["accuracy"] = tally.mean("correct")
            for key in ("len_right", "len_wrong"):  # logged only in steps that had such completions: never a 0 or
                if tally.count(key):  # NaN standing for "none"
                    out[f"completion_{key}"] = tally.mean(key)
        if "gc_right" in tally.sums:  # ΣGC over right (wrong) completions' tokens / Σ|GC|: where the update's
            mass = max(tally.total("gc_abs"), 1e-30)  # weight goes; RFT: right 1, wrong 0; a zero-mean
            out.update(gc_right_mass=tally.total("gc_right") / mass,  # advantage: right > 0 > wrong
                       gc_wrong_mass=tally.total("gc_wrong") / mass)
        if "truncated" in d:
            out["truncated_frac"] = tally.mean("truncated")
        names = {"mismatch_kl_k1": "mismatch_kl_k1", "mismatch_kl_k3": "mismatch_kl_k3",  # gcframe.offpolicy:
                 "mismatch_ratio": "mismatch_ratio_mean", "mismatch_far": "mismatch_far_frac",  # KL(μ‖π_old),
                 "mismatch_band": "mismatch_band_frac", "correction_weight": "correction_weight_mean",  # π_old/μ,
                 "correction_cut": "correction_frac"}  # the correction's weights, the tokens it cut
        out.update({shown: tally.mean(key) for key, shown in names.items() if key in tally.sums})
        if grouped:
            out["zero_var_groups"] = tally.mean("zero_var_groups")
            # mean |GC| per token on equal-reward groups over the mean on all tokens: ~0 where the method's GC
            # vanishes there (a group baseline: only π_ref's KL term is left), ~1 or more where it learns from them
            # (online RFT's 1[correct] on an all-correct group); starved_groups counts them only where it vanishes
            zv = tally.mean("gc_abs_zero_var") if tally.count("gc_abs_zero_var") else 0.0
            out["zero_var_gc"] = zv / max(tally.mean("gc_abs"), 1e-30)
            out["starved_groups"] = out["zero_var_groups"] if out["zero_var_gc"] <= health.SILENT_GC else 0.0
        return out

    def _grouped(self, batch: Batch) -> bool:
        """Sampled groups of a prompt (PPO's one sample per prompt, a pool or demonstrations: no groups)."""
        return ("rewards" in batch.data and "truncated" in batch.data and self.tcfg.group_size > 1
                and len(batch.group_ids.unique()) < len(batch))

    def _check_health(self, row: dict) -> None:
        """One line per kind when the last steps were starved (gcframe.tracking.health): most completions cut off, or
        most groups without reward variance."""
        self.recent = (self.recent + [row])[-health.WINDOW:]
        for kind, message in health.starvation(self.recent, max_new_tokens=self.tcfg.max_new_tokens).items():
            if kind not in self.warned and self.acc.is_main_process:
                self.warned.add(kind)
                say(f"warning: {self.label}: {message}")  # above the run's bar, not into it

    def _mean_over_processes(self, row: dict) -> dict:
        """Each value averaged over the processes that measured it: a method may record a value on some processes
        only (PPO's explained variance is undefined where every return is equal), and one all-reduce of
        different lengths would mismatch."""
        if self.acc.num_processes == 1:
            return row
        from accelerate.utils import gather_object

        keys = sorted(set().union(*gather_object([sorted(row)])))  # the union of every process's names
        vals = torch.tensor([[float(row.get(k, 0.0)), float(k in row)] for k in keys], dtype=torch.float64,
                            device=self.acc.device)  # [K, 2]: value, measured here
        total = self.acc.reduce(vals, "sum").tolist()
        return {k: v / n for k, (v, n) in zip(keys, total) if n}

    # -- evaluation ---------------------------------------------------------------------------------------------
    def evaluate(self, step: int, k: int = 0) -> dict:
        """Held-out greedy accuracy; with k > 0 also pass@1/pass@k/maj@k from k samples per problem, the k3 KL
        of those samples to the SFT base (π_ref unless refreshed) and, when trained on r_φ, their proxy reward.
        Every problem's outcome goes to RUN/problems.jsonl (gcframe.evaluate.problems).

        Evaluation is a measurement, not a step of training: it samples from its own generator, seeded by (seed,
        step, process) (`eval_seed`), and leaves the training generator as it found it, so changing eval_every,
        eval_size or eval_k leaves the training trajectory bit-identical (tests/test_evaluation.py). Within a seed,
        every method's evaluation at a step draws the same random numbers: common random numbers for the paired
        comparison of methods.

        Step 0 with `step0_evals` (compare.py: OUT/step0_evals/): every method of a seed evaluates the same base,
        so a step-0 evaluation is done once and read back by any later run whose evaluation would be the same
        computation: the same weights (policy, anchor, r_φ), held-out rows, settings, thread count and seed."""
        t0 = time.perf_counter()
        rows = heldout_rows(self.task, self.tcfg.eval_size, self.tcfg.eval_split)
        rows = rows[self.acc.process_index::self.acc.num_processes]
        shared = self._step0_eval_file(rows, k) if step == 0 else None
        if shared is not None and shared.exists():
            saved = torch.load(shared, weights_only=True)  # numbers and lists: nothing in the file runs
            self._write_problems(step, saved.get("records", []))
            return {"step": step, **saved["rates"], "gen_tokens": self.gen_tokens, "time_s": self.elapsed,
                    "time_eval": 0.0, "eval_shared": 1}  # evaluated (and its time counted) by another run
        model = self.acc.unwrap_model(self.policy)
        # sharded models are gathered once for the whole evaluation: no collective per forward, so processes with
        # different numbers of held-out rows (or completions ending at different steps) cannot wait on each other
        anchor = None
        if self.sharded and k and self.tcfg.temperature > 0 and not self.tcfg.ref_refresh_every:
            anchor = self.ctx.reference  # _sample_sums' KL anchor, loaded (and sharded) before the gather
        bar = progress(total=len(rows) * self.acc.num_processes, desc=f"{self.label}: evaluation at step {step}",
                       unit="problem", show=self.show_progress)
        records: list[dict] = []
        cuda = [self.acc.device] if self.acc.device.type == "cuda" else []
        with bar, evaluating(model), sharding.gathered(model, anchor), torch.random.fork_rng(devices=cuda):
            torch.manual_seed(eval_seed(self.cfg.seed, step, self.acc.process_index))
            counts = evaluate(model, self.ctx.generator, self.task, rows, k=k, on_samples=self._sample_sums,
                              on_chunk=lambda n: bar.update(n * self.acc.num_processes), records=records)
        t = self.acc.reduce(torch.tensor([float(counts.get(c, 0)) for c in COUNT_KEYS], device=self.acc.device), "sum")
        res = rates(dict(zip(COUNT_KEYS, t.tolist())), k)
        t1 = time.perf_counter()
        records = self._write_problems(step, records)
        if shared is not None:  # written whole, then renamed: a reader never sees half a file
            shared.parent.mkdir(parents=True, exist_ok=True)
            tmp = shared.with_suffix(f".tmp{os.getpid()}")
            torch.save({"rates": res, "records": records}, tmp)
            os.replace(tmp, shared)
        now = time.perf_counter()
        return {"step": step, **res, "gen_tokens": self.gen_tokens, "time_s": self.elapsed,
                "time_eval": now - t0,  # this evaluation's own seconds (not in time_s)
                "time_eval_problems": now - t1}  # of which gathering and writing the per-problem rows

    def _write_problems(self, step: int, records: list[dict]) -> list[dict]:
        """Every process's per-problem rows gathered on the main process and appended to RUN/problems.jsonl ->
        the gathered rows (collective: every process calls it)."""
        if self.acc.num_processes > 1:
            from accelerate.utils import gather_object

            records = gather_object(records)
        if self.acc.is_main_process and self.logger.enabled:
            write_rows(self.logger.dir / PROBLEMS_FILE, step, records)
        return records

    def _step0_eval_file(self, rows: list[dict], k: int) -> Path | None:
        """OUT/step0_evals/<digest>.pt: the digest of everything the step-0 evaluation's numbers depend on, its
        seed included; None where it is not shared (no folder given, several processes, or an accelerator, whose
        kernels need not repeat bit for bit)."""
        if self.step0_evals is None or self.acc.num_processes > 1 or self.acc.device.type != "cpu":
            return None
        h = hashlib.blake2b(digest_size=16)
        settings = (k, self.tcfg.temperature, self.tcfg.max_new_tokens, self.tcfg.ref_refresh_every,
                    self.tcfg.reward, torch.get_num_threads(), torch.__version__, str(self.acc.device),
                    repr(self.cfg.task), repr(self.cfg.model), [(r["prompt"], r["answer"]) for r in rows])
        h.update(repr(settings).encode())
        h.update(str(eval_seed(self.cfg.seed, 0, 0)).encode())  # the evaluation's own random draws
        models = [self.acc.unwrap_model(self.policy)]
        if k and self.tcfg.temperature > 0:  # the KL anchor: π_ref, or the SFT base once π_ref is refreshed
            models.append(self.ctx.frozen("base") if self.tcfg.ref_refresh_every else self.ctx.reference)
        if self.tcfg.reward == "reward_model" and self.ctx.reward_model is not None:
            models.append(self.ctx.reward_model.model)
        for m in models:
            for name, t in m.state_dict().items():
                h.update(name.encode())
                h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
        return self.step0_evals / f"{h.hexdigest()}.pt"

    def _sample_sums(self, batch: Batch) -> dict:
        """Sums over held-out samples of the policy: k3 KL to the SFT base per token, and r_φ per sequence."""
        out = {}
        batch = batch.to(self.acc.device)
        temp, mask = self.tcfg.temperature, batch.completion_mask
        if temp > 0:
            anchor = self.ctx.frozen("base") if self.tcfg.ref_refresh_every else self.ctx.reference
            logp = token_logprobs(self.acc.unwrap_model(self.policy), batch, temp)
            out.update(kl_sum=float((k3(token_logprobs(anchor, batch, temp), logp) * mask).sum()),
                       kl_tokens=float(mask.sum()))
        if self.tcfg.reward == "reward_model" and self.ctx.reward_model is not None:
            out.update(proxy_sum=float(self.ctx.reward_model.score(batch).sum()), proxy_n=float(len(batch)))
        return out

    # -- the loop -------------------------------------------------------------------------------------------------
    def fit(self, resume: bool = False) -> dict:
        """Train for train.steps steps; resume=True continues from the run folder's latest checkpoint."""
        with torch.autocast(self.acc.device.type, torch.bfloat16, enabled=self.cfg.model.bf16):
            return self._fit(resume)

    def _fit(self, resume: bool) -> dict:
        steps = self.tcfg.steps
        self.eval_at = eval_steps(self.tcfg)
        start, last_eval = checkpoint.restore(self) if resume else (0, None)
        if start and self.acc.is_main_process:
            print(f"{self.label}: resumed from its checkpoint of step {start} of {steps}", flush=True)
        if last_eval is None:  # a fresh start
            resolved = self.cfg.to_dict()  # the method's options in full, its Config's defaults included
            resolved["methods"] = {**resolved.get("methods", {}), self.method.name: {
                **dataclasses.asdict(self.method.cfg), **(self.cfg.methods.get(self.method.name) or {})}}
            self.logger.write_config({"method": self.method.name, "models": self.models_held, **resolved,
                                      "splits": split_names(self.task)})
            last_eval = self.evaluate(0, self.tcfg.eval_k)
            self.logger.log(last_eval)
            self.initial_accuracy = last_eval["eval_accuracy"]
        bar = progress(range(start, steps), initial=start, total=steps, desc=self.label,
                       show=self.show_progress)  # a bar on a terminal, plain lines elsewhere
        if self.pipe is not None:
            self.pipe.open(start)
        try:
            self._loop(bar, last_eval)
        finally:
            if self.pipe is not None:
                self.pipe.close()
        self.logger.close()
        self._release_from_accelerator()
        return {"initial_accuracy": getattr(self, "initial_accuracy", None),
                "final_accuracy": self.last_eval["eval_accuracy"], "time_s": self.elapsed,
                "gen_tokens": self.gen_tokens, "steps": steps}

    def _loop(self, bar, last_eval: dict) -> None:
        """Steps start..train.steps−1: train, log, evaluate, checkpoint; the last evaluation in self.last_eval."""
        steps = self.tcfg.steps
        self.last_eval = last_eval
        t0, first = time.monotonic(), None
        for step in bar:
            self.step = step  # where a Ctrl-C stopped it (compare.py's line)
            first = step if first is None else first
            try:
                row, batch = self.train_step(step)
            except FloatingPointError as e:  # nothing of this step was logged or applied
                ckpt = checkpoint.latest(self.logger.dir)
                kept = f"last checkpoint {ckpt} intact" if ckpt else "no checkpoint yet"
                raise UserError(f"method '{self.method.name}' produced non-finite {e} at step {step}: "
                                f"lower the learning rate or check the rewards ({kept})") from None
            self.logger.log(row)
            self._check_health(row)
            if self.tcfg.sample_every and step % self.tcfg.sample_every == 0:
                self.logger.samples(step, self._sample_rows(batch))
            done = step + 1
            if done - first == ESTIMATE_AFTER and done < steps and self.show_progress and progress_lines.ENABLED:
                say(estimate_line(self.label, (time.monotonic() - t0) / ESTIMATE_AFTER, ESTIMATE_AFTER, steps - done))
            if done in self.eval_at or done == steps:
                last_eval = self.evaluate(done, self.tcfg.eval_k if done == steps else 0)
                self.logger.log(last_eval)
            if self.tcfg.checkpoint_every and done % self.tcfg.checkpoint_every == 0 and done < steps:
                checkpoint.save(self, done, last_eval)
            post = {"acc": f"{last_eval['eval_accuracy']:.2f}"}
            if "reward_mean" in row:
                post["reward"] = f"{row['reward_mean']:.2f}"
            bar.set_postfix(post)
            self.last_eval = last_eval

    def _release_from_accelerator(self) -> None:
        """accelerate keeps every object it prepared (Accelerator._models, _optimizers) for as long as the
        accelerator lives; compare.py and the sweep share one accelerator across all their runs, so without this
        each finished run's models and AdamW state stayed in memory (one SmolLM2 copy, ~0.5 GB, per run). The
        trainer keeps its own references: saving the final model after fit still works."""
        mine = {id(o) for o in (self.policy, self.opt, *self.aux_models, *self.aux_opts)}
        for name in ("_models", "_optimizers", "_schedulers", "_dataloaders"):
            held = getattr(self.acc, name, None)
            if isinstance(held, list):
                held[:] = [o for o in held if id(o) not in mine]

    def save_model(self, path) -> Path:
        """The policy as one Hugging Face folder (`final_model.save`: model or LoRA adapter + tokenizer), written by
        the main process; under FSDP2 its shards are gathered first (collective: every process calls this)."""
        from gcframe.tracking import final_model

        policy = self.acc.unwrap_model(self.policy)
        full = sharding.full_state_dict(policy) if self.sharded else None
        if self.acc.is_main_process:
            path = final_model.save(policy, self.tok, path, self.ctx.base_dir, state_dict=full)
        self.acc.wait_for_everyone()
        return Path(path)

    def _sample_rows(self, batch: Batch) -> list[dict]:
        out = []
        for i in range(min(self.tcfg.log_samples, len(batch))):
            t = batch.texts[i] if batch.texts else {}
            r = {"prompt": t.get("prompt"), "completion": t.get("completion"), "answer": t.get("answer")}
            if "rewards" in batch.data:
                r["reward"] = float(batch.data["rewards"][i])
            out.append(r)
        return out
