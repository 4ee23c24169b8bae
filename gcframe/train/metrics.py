"""A training step's logged row (gcframe.trainer): the update's per-token statistics summed over micro-batches and
then over processes in one all-reduce (`Tally`), the global batch's statistics (`batch_stats`), a method's own
measurements averaged over the processes that made them, the starvation warnings, and the logged samples."""
from __future__ import annotations

import math

import torch

from gcframe.batch import Batch
from gcframe.context import Context
from gcframe.kl import k3
from gcframe.tracking import health
from gcframe.tracking.memory import peak_rss_mb
from gcframe.tracking.progress import say


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


def add_update(tally: Tally, micro: Batch, gc: torch.Tensor, logp: torch.Tensor, entropy: torch.Tensor,
               weight: torch.Tensor | None, cut: torch.Tensor | None) -> None:
    """One micro-batch's update, per token: GC's sign and mass, where right and wrong completions and equal-reward
    groups put it, the entropy, the off-policy correction's weights and cuts, and the k3 KL to π_ref."""
    mask = micro.completion_mask.bool()
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


def grouped(batch: Batch, group_size: int) -> bool:
    """Sampled groups of a prompt (PPO's one sample per prompt, a pool or demonstrations: no groups)."""
    return ("rewards" in batch.data and "truncated" in batch.data and group_size > 1
            and len(batch.group_ids.unique()) < len(batch))


def step_row(updates: list[dict], method_stats: dict, batch: Batch, tally: Tally, ctx: Context,
             mismatch: dict | None) -> dict:
    """The step's measurements: the minibatches' mean loss and grad_norm, the method's own (`Method.record`), the
    global batch's statistics, the data source's counts, the largest π_old/μ and the sampler's lag."""
    row = {k: sum(u[k] for u in updates) / len(updates) for k in updates[0]}  # loss, grad_norm: global
    row.update(method_stats)  # the method's own measurements: means over processes
    row = mean_over_processes(row, ctx.acc)
    row.update(batch_stats(batch, tally, ctx))  # the global batch's statistics
    row.update(ctx.pop_stats())  # the data source's global counts (dynamic sampling)
    if mismatch is not None:  # the largest π_old/μ of the global batch
        ratio = mismatch["mismatch_ratio"]
        row["mismatch_ratio_max"] = global_max(float(ratio.max()) if ratio.numel() else 0.0, ctx.acc)
    if ctx.sampler is not None:
        row["sampler_lag"] = ctx.sampler.lag  # steps the sampler's weights were behind the learner's
    return row


def memory(rss_start_mb: float) -> dict:
    """The process's peak memory so far, and its growth over the run's start."""
    # growth >= 0: the kernel's per-CPU RSS counters lag by a few pages (-0.1 MB on no growth)
    out = {"peak_rss_mb": (peak := peak_rss_mb()), "peak_rss_run_mb": max(0.0, peak - rss_start_mb)}
    if torch.cuda.is_available():
        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def global_max(x: float, acc) -> float:
    """The largest of a value over processes (itself in one process)."""
    if acc.num_processes == 1:
        return x
    t = torch.tensor([x], dtype=torch.float64, device=acc.device)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return float(t)


def batch_stats(batch: Batch, tally: Tally, ctx: Context) -> dict:
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
    if "zero_var" in d:  # per sequence; groups are equal-sized, so the mean is the share of groups
        tally.add("zero_var_groups", d["zero_var"])
    tally.all_sum(ctx)
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
    out.update({shown: tally.mean(key) for key, shown in OFF_POLICY.items() if key in tally.sums})
    if "zero_var" in d:
        out.update(_starved(tally))
    return out


OFF_POLICY = {"mismatch_kl_k1": "mismatch_kl_k1", "mismatch_kl_k3": "mismatch_kl_k3",  # gcframe.offpolicy:
              "mismatch_ratio": "mismatch_ratio_mean", "mismatch_far": "mismatch_far_frac",  # KL(μ‖π_old),
              "mismatch_band": "mismatch_band_frac", "correction_weight": "correction_weight_mean",  # π_old/μ,
              "correction_cut": "correction_frac"}  # the correction's weights, the tokens it cut
"""Tally name -> logged column of the off-policy measurements."""


def _starved(tally: Tally) -> dict:
    """The share of equal-reward groups, and whether the method's GC vanishes on them: mean |GC| per token there
    over the mean on all tokens, ~0 where it vanishes (a group baseline: only π_ref's KL term is left), ~1 or more
    where it learns from them (online RFT's 1[correct] on an all-correct group); starved_groups counts them only
    where it vanishes."""
    out = {"zero_var_groups": tally.mean("zero_var_groups")}
    zv = tally.mean("gc_abs_zero_var") if tally.count("gc_abs_zero_var") else 0.0
    out["zero_var_gc"] = zv / max(tally.mean("gc_abs"), 1e-30)
    out["starved_groups"] = out["zero_var_groups"] if out["zero_var_gc"] <= health.SILENT_GC else 0.0
    return out


def mean_over_processes(row: dict, acc) -> dict:
    """Each value averaged over the processes that measured it: a method may record a value on some processes
    only (PPO's explained variance is undefined where every return is equal), and one all-reduce of
    different lengths would mismatch."""
    if acc.num_processes == 1:
        return row
    from accelerate.utils import gather_object

    keys = sorted(set().union(*gather_object([sorted(row)])))  # the union of every process's names
    vals = torch.tensor([[float(row.get(k, 0.0)), float(k in row)] for k in keys], dtype=torch.float64,
                        device=acc.device)  # [K, 2]: value, measured here
    total = acc.reduce(vals, "sum").tolist()
    return {k: v / n for k, (v, n) in zip(keys, total) if n}


class Starvation:
    """One line per kind when the last steps were starved (gcframe.tracking.health): most completions cut off, or
    most groups without reward variance; said once a run, by the main process, above the run's bar."""

    def __init__(self, label: str, max_new_tokens: int, main: bool):
        self.label, self.max_new_tokens, self.main = label, max_new_tokens, main
        self.recent: list[dict] = []  # the last health.WINDOW training rows
        self.warned: set[str] = set()  # the kinds warned about

    def check(self, row: dict) -> None:
        self.recent = (self.recent + [row])[-health.WINDOW:]
        for kind, message in health.starvation(self.recent, max_new_tokens=self.max_new_tokens).items():
            if kind not in self.warned and self.main:
                self.warned.add(kind)
                say(f"warning: {self.label}: {message}")  # above the run's bar, not into it


def sample_rows(batch: Batch, n: int) -> list[dict]:
    """The first n completions of a step's batch as samples.jsonl rows (prompt, completion, answer, reward)."""
    out = []
    for i in range(min(n, len(batch))):
        t = batch.texts[i] if batch.texts else {}
        r = {"prompt": t.get("prompt"), "completion": t.get("completion"), "answer": t.get("answer")}
        if "rewards" in batch.data:
            r["reward"] = float(batch.data["rewards"][i])
        out.append(r)
    return out
