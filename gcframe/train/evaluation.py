"""A run's held-out evaluations (gcframe.trainer): when they happen (`eval_steps`), what they measure (`evaluate`:
greedy accuracy, pass@k/maj@k, the samples' KL to the SFT base and proxy reward, every problem's outcome), and the
step-0 evaluation shared by every method of a seed (`step0_eval_file`: a digest of the weights and settings)."""
from __future__ import annotations

import collections.abc
import functools
import hashlib
import os
import time
from pathlib import Path

import torch

from gcframe import sharding
from gcframe.batch import Batch
from gcframe.engine import token_logprobs
from gcframe.evaluate import COUNT_KEYS, eval_seed, rates
from gcframe.evaluate import evaluate as evaluate_problems
from gcframe.evaluate.problems import FILE as PROBLEMS_FILE
from gcframe.evaluate.problems import heldout_rows, write_rows
from gcframe.kl import k3
from gcframe.modeling import evaluating
from gcframe.tracking.progress import progress


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


def evaluate(tr, step: int, k: int = 0) -> dict:
    """Trainer `tr`'s policy after `step` steps on the held-out problems -> the metrics row (`Trainer.evaluate`).

    Evaluation is a measurement, not a step of training: it samples from its own generator, seeded by (seed,
    step, process) (`eval_seed`), and leaves the training generator as it found it, so changing eval_every,
    eval_size or eval_k leaves the training trajectory bit-identical (tests/test_evaluation.py). Within a seed,
    every method's evaluation at a step draws the same random numbers: common random numbers for the paired
    comparison of methods.

    Step 0 with `tr.step0_evals` (compare.py: OUT/step0_evals/): every method of a seed evaluates the same base,
    so a step-0 evaluation is done once and read back by any later run whose evaluation would be the same
    computation: the same weights (policy, anchor, r_φ), held-out rows, settings, thread count and seed."""
    t0 = time.perf_counter()
    acc = tr.acc
    rows = heldout_rows(tr.task, tr.tcfg.eval_size, tr.tcfg.eval_split)
    rows = rows[acc.process_index::acc.num_processes]
    shared = step0_eval_file(tr, rows, k) if step == 0 else None
    if shared is not None and shared.exists():
        saved = torch.load(shared, weights_only=True)  # numbers and lists: nothing in the file runs
        write_problems(tr, step, saved.get("records", []))
        return {"step": step, **saved["rates"], "gen_tokens": tr.gen_tokens, "time_s": tr.elapsed,
                "time_eval": 0.0, "eval_shared": 1}  # evaluated (and its time counted) by another run
    records: list[dict] = []
    res = _measure(tr, step, k, rows, records)
    t1 = time.perf_counter()
    records = write_problems(tr, step, records)
    if shared is not None:  # written whole, then renamed: a reader never sees half a file
        shared.parent.mkdir(parents=True, exist_ok=True)
        tmp = shared.with_suffix(f".tmp{os.getpid()}")
        torch.save({"rates": res, "records": records}, tmp)
        os.replace(tmp, shared)
    now = time.perf_counter()
    return {"step": step, **res, "gen_tokens": tr.gen_tokens, "time_s": tr.elapsed,
            "time_eval": now - t0,  # this evaluation's own seconds (not in time_s)
            "time_eval_problems": now - t1}  # of which gathering and writing the per-problem rows


def _measure(tr, step: int, k: int, rows: list[dict], records: list[dict]) -> dict:
    """This process's share of the held-out rows evaluated (their outcomes appended to `records`) -> the rates of
    every process's counts."""
    acc = tr.acc
    model = acc.unwrap_model(tr.policy)
    # sharded models are gathered once for the whole evaluation: no collective per forward, so processes with
    # different numbers of held-out rows (or completions ending at different steps) cannot wait on each other
    anchor = None
    if tr.sharded and k and tr.tcfg.temperature > 0 and not tr.tcfg.ref_refresh_every:
        anchor = tr.ctx.reference  # sample_sums' KL anchor, loaded (and sharded) before the gather
    bar = progress(total=len(rows) * acc.num_processes, desc=f"{tr.label}: evaluation at step {step}",
                   unit="problem", show=tr.show_progress)
    cuda = [acc.device] if acc.device.type == "cuda" else []
    with bar, evaluating(model), sharding.gathered(model, anchor), torch.random.fork_rng(devices=cuda):
        torch.manual_seed(eval_seed(tr.cfg.seed, step, acc.process_index))
        counts = evaluate_problems(model, tr.ctx.generator, tr.task, rows, k=k,
                                   on_samples=functools.partial(sample_sums, tr),
                                   on_chunk=lambda n: bar.update(n * acc.num_processes), records=records)
    t = acc.reduce(torch.tensor([float(counts.get(c, 0)) for c in COUNT_KEYS], device=acc.device), "sum")
    return rates(dict(zip(COUNT_KEYS, t.tolist())), k)


def write_problems(tr, step: int, records: list[dict]) -> list[dict]:
    """Every process's per-problem rows gathered on the main process and appended to RUN/problems.jsonl ->
    the gathered rows (collective: every process calls it)."""
    if tr.acc.num_processes > 1:
        from accelerate.utils import gather_object

        records = gather_object(records)
    if tr.acc.is_main_process and tr.logger.enabled:
        write_rows(tr.logger.dir / PROBLEMS_FILE, step, records)
    return records


def step0_eval_file(tr, rows: list[dict], k: int) -> Path | None:
    """OUT/step0_evals/<digest>.pt: the digest of everything the step-0 evaluation's numbers depend on, its
    seed included; None where it is not shared (no folder given, several processes, or an accelerator, whose
    kernels need not repeat bit for bit)."""
    acc, t = tr.acc, tr.tcfg
    if tr.step0_evals is None or acc.num_processes > 1 or acc.device.type != "cpu":
        return None
    h = hashlib.blake2b(digest_size=16)
    settings = (k, t.temperature, t.max_new_tokens, t.ref_refresh_every, t.reward, torch.get_num_threads(),
                torch.__version__, str(acc.device), repr(tr.cfg.task), repr(tr.cfg.model),
                [(r["prompt"], r["answer"]) for r in rows])
    h.update(repr(settings).encode())
    h.update(str(eval_seed(tr.cfg.seed, 0, 0)).encode())  # the evaluation's own random draws
    models = [acc.unwrap_model(tr.policy)]
    if k and t.temperature > 0:  # the KL anchor: π_ref, or the SFT base once π_ref is refreshed
        models.append(_anchor(tr))
    if t.reward == "reward_model" and tr.ctx.reward_model is not None:
        models.append(tr.ctx.reward_model.model)
    for m in models:
        for name, w in m.state_dict().items():
            h.update(name.encode())
            h.update(w.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return tr.step0_evals / f"{h.hexdigest()}.pt"


def _anchor(tr) -> torch.nn.Module:
    """The held-out samples' KL anchor: π_ref, or the SFT base once π_ref is refreshed."""
    return tr.ctx.frozen("base") if tr.tcfg.ref_refresh_every else tr.ctx.reference


def sample_sums(tr, batch: Batch) -> dict:
    """Sums over held-out samples of the policy: k3 KL to the SFT base per token, and r_φ per sequence."""
    out = {}
    batch = batch.to(tr.acc.device)
    temp, mask = tr.tcfg.temperature, batch.completion_mask
    if temp > 0:
        anchor = _anchor(tr)  # (π_ref loads on first use: before the policy's pass)
        logp = token_logprobs(tr.acc.unwrap_model(tr.policy), batch, temp)
        out.update(kl_sum=float((k3(token_logprobs(anchor, batch, temp), logp) * mask).sum()),
                   kl_tokens=float(mask.sum()))
    if tr.tcfg.reward == "reward_model" and tr.ctx.reward_model is not None:
        out.update(proxy_sum=float(tr.ctx.reward_model.score(batch).sum()), proxy_n=float(len(batch)))
    return out
