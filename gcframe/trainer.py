"""The training loop every method runs through (a method's data source uses `gcframe.context.Context`).

One step:  method.collect -> Batch (prompts -> sampler -> rewards)
           engine: ref/old log-probs once per batch (no grad) -> method.prepare (advantages)
           for μ epochs, for each minibatch (whole groups), for each micro-batch:
               logp = log π_θ(o_t|q,o_<t);  GC = method.coefficients(batch, logp)
               loss = -aggregate(GC.detach()·logp, mask, mode, global counts)  -> backward
           clip, AdamW step -> metrics -> run folder
The loop never asks which method it runs. This file holds the wiring, the step and the teardown; the step's logged
row and the run's evaluations are gcframe/train/'s (metrics.py, evaluation.py), as are the accelerator and AdamW.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from pathlib import Path

import torch

from gcframe import offpolicy, sharding
from gcframe.batch import Batch
from gcframe.config import RunConfig
from gcframe.context import Context
from gcframe.engine import Normaliser, check_gc, token_logprobs, weighted_mle_loss
from gcframe.errors import MethodError, UserError
from gcframe.evaluate.problems import split_names
from gcframe.modeling import count_parameters, evaluating, prepare_policy
from gcframe.offpolicy import corrections
from gcframe.tracking import checkpoint
from gcframe.tracking.log import RunLogger
from gcframe.tracking.memory import reset_peak, rss_mb
from gcframe.tracking import progress as progress_lines
from gcframe.tracking.progress import ESTIMATE_AFTER, estimate_line, progress, say
from gcframe.train import evaluation, metrics
from gcframe.train.accelerator import make_accelerator
from gcframe.train.evaluation import EvalSteps, eval_steps  # noqa: F401  (EvalSteps and Tally: re-exported)
from gcframe.train.metrics import Tally  # noqa: F401
from gcframe.train.optim import adamw, lr_factor
from gcframe.registry import get_method


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
        self._build_optimisers(policy, aux_lr=getattr(mcfg, "critic_lr", self.tcfg.lr))
        self._off_policy()

        self.logger = RunLogger(run_dir, enabled=self.acc.is_main_process)
        self.show_progress = self.ctx.show_progress = show_progress and self.acc.is_main_process
        self.label = label or f"{method_name} seed {cfg.seed}"  # how progress lines and messages name the run
        self.step0_evals = Path(step0_evals) if step0_evals else None  # shared step-0 evaluations (evaluate)
        self.mb_gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.gen_tokens = 0
        self.elapsed = 0.0
        self.starvation = metrics.Starvation(self.label, self.tcfg.max_new_tokens, self.acc.is_main_process)
        self.gc_checked = False  # the method's GC is checked (one line) before its first update
        self.step = 0  # the step running (where a Ctrl-C stopped it: compare.py's line)
        self.initial_accuracy = self.last_eval = None  # step 0's accuracy (None on a resumed run), the last row
        self.models_held = self._models_held(policy, reward_model)
        checkpoint.check_supported(self)

    def _build_optimisers(self, policy, aux_lr: float) -> None:
        """AdamW and the learning-rate schedule of the policy, AdamW of each auxiliary model (PPO's critic: sharded
        like the policy), prepared by accelerate (DDP) unless sharded; the method computes with the prepared ones."""
        opt = adamw([p for p in policy.parameters() if p.requires_grad], lr=self.tcfg.lr,
                    weight_decay=self.tcfg.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(self.tcfg.warmup_steps, self.tcfg.steps,
                                                                  self.tcfg.lr_schedule))
        self.aux = self.method.auxiliary_models()
        for m in self.aux.values() if self.sharded else ():  # PPO's critic: sharded like the policy
            sharding.shard(m, self.acc.device, self.acc.num_processes)
        aux_opts = [adamw(m.parameters(), lr=aux_lr) for m in self.aux.values()]
        # the scheduler stays unprepared: accelerate would step it once per process per step
        # FSDP2: nothing is prepared (accelerate would wrap the sharded modules in DDP on CPU)
        prepared = [policy, opt, *self.aux.values(), *aux_opts] if self.sharded else \
            self.acc.prepare(policy, opt, *self.aux.values(), *aux_opts)
        (self.policy, self.opt), self.sched = prepared[:2], sched
        k = len(self.aux)
        self.aux_models, self.aux_opts = list(prepared[2:2 + k]), list(prepared[2 + k:])
        self.ctx.policy = self.acc.unwrap_model(self.policy)
        self.method.use_auxiliary_models(dict(zip(self.aux, self.aux_models)))  # (possibly wrapped) modules

    def _off_policy(self) -> None:
        """Off-policy data (gcframe.offpolicy): a sampler μ that lags or runs in a lower precision, and the correction
        applied to GC; the Context generates with the sampler wherever a method samples from the live policy."""
        self.correction = corrections.Correction.of(self.tcfg)
        if offpolicy.dials_on(self.tcfg):
            from gcframe.offpolicy.sampler import Sampler

            self.ctx.sampler = Sampler(self.ctx.policy, self.tcfg.staleness, self.tcfg.sampler_dtype)
        self.pipe = None  # train.pipeline: the sampler in a process of its own, k batches ahead
        if self.tcfg.pipeline:
            from gcframe.offpolicy import pipeline

            pipeline.check(self)
            self.pipe = pipeline.Pipeline(self)

    def _models_held(self, policy, reward_model) -> dict[str, int]:
        """The models this run holds and their parameter counts (frozen ones are copies of the SFT base)."""
        held = {"policy": count_parameters(policy), **{n: count_parameters(m) for n, m in self.aux.items()}}
        if self.method.uses_reference:
            held["reference"] = count_parameters(self.ctx.reference)
        if isinstance(getattr(reward_model, "model", None), torch.nn.Module):  # r_φ (a stub may have none)
            held["reward_model"] = count_parameters(reward_model.model)
        return held

    # -- one optimiser step on one minibatch ---------------------------------------------------------------
    def _global_norm(self, mb: Batch) -> Normaliser:
        """Counts of the whole minibatch over all processes: the loss normaliser does not depend on the split."""
        m = mb.completion_mask
        counts = torch.tensor([m.shape[0], float(m.sum())], dtype=torch.float64, device=self.acc.device)
        n_seqs, n_tok = self.acc.reduce(counts, "sum").tolist()
        return Normaliser(n_seqs, n_tok, self.tcfg.max_new_tokens)

    def _update(self, mb: Batch, tally: metrics.Tally) -> dict:
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
                gc, weight, cut = self._coefficients(micro, logp)
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
            loss_sum += float(loss.detach())
            metrics.add_update(tally, micro, gc, logp, entropy, weight, cut)
        return self._optimiser_step(loss_sum)

    def _coefficients(self, micro: Batch, logp: torch.Tensor) -> tuple:
        """The method's GC [N, T] times the off-policy correction's factor -> (GC, the factor, the tokens it cut);
        the factor and cut are None without a correction. The method's GC is checked before its first update."""
        gc = self.method.coefficients(micro, logp)
        if not self.gc_checked:  # (one line: engine.check_gc)
            check_gc(gc, logp, self.method.name)
            self.gc_checked = True
        weight = cut = None
        if self.correction.is_factor:  # the off-policy correction: one factor on GC, from π_old/μ
            weight, cut = self.correction.factor(corrections.inputs(micro, logp))  # [N, T] each
            gc = gc * weight.to(gc.dtype)
        return gc, weight, cut

    def _optimiser_step(self, loss_sum: float) -> dict:
        """Clip the accumulated gradients, step the policy's and the auxiliary models' optimisers ->
        {loss, grad_norm}; non-finite gradients raise before any step, so the weights stay finite."""
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

    def train_step(self, step: int) -> tuple[dict, Batch]:
        """One step: a batch collected, its log-probs and the method's columns filled, train.epochs passes over its
        minibatches -> (the step's metrics row, the batch)."""
        self.ctx.timings.clear()
        t0 = time.perf_counter()
        if not self.policy.training:  # it trains; the passes that must not (sampling, π_old) use `evaluating`
            self.policy.train()
        batch = self._collect(step)
        t1 = time.perf_counter()
        mismatch = self._prepare(batch)
        t2 = time.perf_counter()
        updates, tally = [], metrics.Tally()
        for name, values in (mismatch or {}).items():  # once per batch: the global batch's means in batch_stats
            tally.add(name, values)
        for _ in range(self.tcfg.epochs):
            for mb in batch.split(self.tcfg.minibatches, self.mb_gen if self.tcfg.minibatches > 1 else None):
                updates.append(self._update(mb, tally))
        t3 = time.perf_counter()
        if self.tcfg.ref_refresh_every and (step + 1) % self.tcfg.ref_refresh_every == 0:
            self.ctx.refresh_reference()

        row = metrics.step_row(updates, self.method.pop_stats(), batch, tally, self.ctx, mismatch)
        if "truncated" in batch.data:  # tokens sampled by this step (the batch was generated, not read), and those
            dropped = sum(v for k, v in row.items() if k.endswith("dropped_tokens"))  # dynamic sampling, a method's
            self.gen_tokens += int(tally.total("completion_len") + dropped)  # it dropped (ds_, fill_dropped_tokens)
        self.elapsed += t3 - t0
        row.update(step=step, gen_tokens=self.gen_tokens, time_s=self.elapsed, time_collect=t1 - t0,
                   time_prepare=t2 - t1, time_update=t3 - t2, lr=self.sched.get_last_lr()[0],
                   **{f"time_{k}": v for k, v in self.ctx.timings.items()},  # generate, score | critic (in update)
                   **metrics.memory(self.rss_start_mb))
        return row, batch

    def _collect(self, step: int) -> Batch:
        """The step's batch, on the run's device: the method's, or the sampler process's (train.pipeline)."""
        if self.ctx.sampler is not None:  # μ for this step: θ_{max(0, step − k)}, in train.sampler_dtype
            live = self.ctx.sampler.advance(load=self.pipe is None)
        if self.pipe is not None:  # generated by the sampler process with the same weights, while we trained
            batch = self.pipe.batch(step, live)
        else:
            batch = self.method.collect(step)  # (FloatingPointError("logits") from the sampler)
        if not isinstance(batch, Batch):
            raise MethodError(f"method '{self.method.name}': collect(step) returned {type(batch).__name__}, not a "
                              "Batch: build it from the context (self.ctx.rollout, self.ctx.draw, ...; methods/base.py)")
        return batch.to(self.acc.device)

    def _prepare(self, batch: Batch) -> dict | None:
        """Once per batch, no grad: log π_ref, log π_old where it is read or measured, the method's `prepare`
        (advantages, values) -> the mismatch of π_old and μ per token (None where it is not measured)."""
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
        if metrics.grouped(batch, self.tcfg.group_size):  # which sequences sit in a group of equal rewards (the
            from gcframe.advantages import zero_variance  # starvation check's GC there)

            batch.data["zero_var"] = zero_variance(batch.data["rewards"].double(), batch.group_ids).double()
        return mismatch

    # -- evaluation ---------------------------------------------------------------------------------------------
    def evaluate(self, step: int, k: int = 0) -> dict:
        """Held-out greedy accuracy; with k > 0 also pass@1/pass@k/maj@k from k samples per problem, the k3 KL
        of those samples to the SFT base (π_ref unless refreshed) and, when trained on r_φ, their proxy reward.
        Every problem's outcome goes to RUN/problems.jsonl (gcframe.evaluate.problems). Its own random draws, and
        the step-0 evaluation shared through `step0_evals`: gcframe.train.evaluation.evaluate."""
        return evaluation.evaluate(self, step, k)

    # -- the loop -------------------------------------------------------------------------------------------------
    def fit(self, resume: bool = False) -> dict:
        """Train for train.steps steps; resume=True continues from the run folder's latest checkpoint."""
        with torch.autocast(self.acc.device.type, torch.bfloat16, enabled=self.cfg.model.bf16):
            return self._fit(resume)

    def _fit(self, resume: bool) -> dict:
        steps = self.tcfg.steps
        eval_at = eval_steps(self.tcfg)
        start, last_eval = checkpoint.restore(self) if resume else (0, None)
        if start and self.acc.is_main_process:
            print(f"{self.label}: resumed from its checkpoint of step {start} of {steps}", flush=True)
        if last_eval is None:  # a fresh start
            last_eval = self._start()
        bar = progress(range(start, steps), initial=start, total=steps, desc=self.label,
                       show=self.show_progress)  # a bar on a terminal, plain lines elsewhere
        if self.pipe is not None:
            self.pipe.open(start)
        try:
            self._loop(bar, last_eval, eval_at)
        finally:
            if self.pipe is not None:
                self.pipe.close()
        self.logger.close()
        self._release_from_accelerator()
        return {"initial_accuracy": self.initial_accuracy,
                "final_accuracy": self.last_eval["eval_accuracy"], "time_s": self.elapsed,
                "gen_tokens": self.gen_tokens, "steps": steps}

    def _start(self) -> dict:
        """A fresh run's config.yaml (the method's options in full, its Config's defaults included) and its step-0
        evaluation, logged -> that evaluation."""
        resolved = self.cfg.to_dict()
        resolved["methods"] = {**resolved.get("methods", {}), self.method.name: {
            **dataclasses.asdict(self.method.cfg), **(self.cfg.methods.get(self.method.name) or {})}}
        self.logger.write_config({"method": self.method.name, "models": self.models_held, **resolved,
                                  "splits": split_names(self.task)})
        last_eval = self.evaluate(0, self.tcfg.eval_k)
        self.logger.log(last_eval)
        self.initial_accuracy = last_eval["eval_accuracy"]
        return last_eval

    def _loop(self, bar, last_eval: dict, eval_at: set[int]) -> None:
        """Steps start..train.steps−1: train, log, evaluate (after the steps in `eval_at` and the last), checkpoint;
        the last evaluation in self.last_eval."""
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
            self.starvation.check(row)
            if self.tcfg.sample_every and step % self.tcfg.sample_every == 0:
                self.logger.samples(step, metrics.sample_rows(batch, self.tcfg.log_samples))
            done = step + 1
            if done - first == ESTIMATE_AFTER and done < steps and self.show_progress and progress_lines.ENABLED:
                say(estimate_line(self.label, (time.monotonic() - t0) / ESTIMATE_AFTER, ESTIMATE_AFTER, steps - done))
            if done in eval_at or done == steps:
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
