"""What a method may use to build its batches (`Context`): prompts, demonstrations, the sampler, rewards, frozen models.

It sits below both the trainer (which builds it) and the methods (which receive it), so neither imports the other.
"""
from __future__ import annotations

import contextlib
import time

import torch
from accelerate import Accelerator

from gcframe import sharding
from gcframe.batch import Batch
from gcframe.config import RunConfig
from gcframe.errors import UserError
from gcframe.modeling import AdapterDisabled, evaluating
from gcframe.rewards import score
from gcframe.sampling import GenerationConfig, Generator, make_batch
from gcframe.tracking.progress import progress


class Context:
    """What a method may use to build its batches: prompts, demonstrations, the sampler, rewards, frozen models.

    Frozen models are loaded lazily from the SFT base directory, so a run holds only what its method needs.
    """

    def __init__(self, cfg: RunConfig, task, tok, policy, base_dir, accelerator: Accelerator,
                 dtype: torch.dtype = torch.float32):
        self.cfg, self.task, self.tok, self.base_dir, self.acc = cfg, task, tok, base_dir, accelerator
        self.dtype = dtype  # of the frozen copies (float64 in gcframe.verify)
        self.policy = policy  # the model being trained (unwrapped)
        self.rank, self.world = accelerator.process_index, accelerator.num_processes
        self.generator = Generator(tok, GenerationConfig(cfg.train.max_new_tokens, cfg.train.temperature))
        self.rng = torch.Generator().manual_seed(cfg.seed)
        self._orders: dict[str, tuple[torch.Tensor, int]] = {}
        self._frozen: dict[str, torch.nn.Module] = {}
        self.reward_model = None  # set by the pipeline when train.reward == "reward_model"
        self.sampler = None  # μ when it is not the live policy (train.staleness, sampler_dtype): set by the Trainer
        self.timings: dict[str, float] = {}  # seconds per phase of the current step; the Trainer logs time_<name>
        self.sharded = sharding.enabled(cfg.train.shard, self.world)  # FSDP2: π_ref is sharded like the policy
        self.show_progress = False  # set by the Trainer: whether this run shows progress (main process, not quiet)
        self.stats: dict[str, float] = {}  # the data source's own measurements this step (dynamic sampling)

    @contextlib.contextmanager
    def timed(self, name: str):
        """Add the wall time of the block to `self.timings[name]`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0

    def progress(self, total: int, desc: str, unit: str):
        """A bar (terminal) or plain lines (elsewhere) for a long phase of a method, e.g. RFT's pool: shown as the
        run shows its own progress (gcframe.tracking.progress)."""
        return progress(total=total, desc=desc, unit=unit, show=self.show_progress)

    @property
    def device(self):
        return self.acc.device

    def all_sum(self, t: torch.Tensor) -> torch.Tensor:
        """Σ of a tensor over processes (itself in a single process): for statistics of the global batch."""
        return self.acc.reduce(t.clone(), "sum") if self.world > 1 else t

    # -- data order: the same seeded order on every process; each process takes its own shard ----------------
    def draw(self, dataset, n: int, name: str) -> list[dict]:
        """The next n rows of a seeded endless shuffle of `dataset` (global), this process's 1/world share. A dataset
        whose length changed under the same name (RFT's pool sampled afresh) starts a new shuffle of itself."""
        if n % self.world:
            raise UserError(f"{n} sequences per step cannot be split over {self.world} processes: "
                            "make prompts_per_step a multiple of the number of processes")
        order, pos = self._orders.get(name, (torch.empty(0, dtype=torch.long), 0))
        idx = []
        while len(idx) < n:
            if pos >= len(order) or len(order) != len(dataset):
                order, pos = torch.randperm(len(dataset), generator=self.rng), 0
            take = min(n - len(idx), len(order) - pos)
            idx += order[pos:pos + take].tolist()
            pos += take
        self._orders[name] = (order, pos)
        mine = idx[self.rank * n // self.world:(self.rank + 1) * n // self.world]
        if isinstance(dataset, list):
            return [dataset[i] for i in mine]
        cols = dataset[mine]  # one read of a datasets.Dataset: {column: [values]}
        return [dict(zip(cols, values)) for values in zip(*cols.values())]

    # -- data sources ------------------------------------------------------------------------------------
    def demonstrations(self, n: int, demos=None) -> Batch:
        """n (global) demonstrations from the limited SFT set (`demos`: a method's own set of the same columns, e.g.
        the ones the checker accepts), GC-ready."""
        rows = self.draw(self.task.demos if demos is None else demos, n, "demos")
        return make_batch(self.tok, [r["prompt"] for r in rows], [r["completion"] for r in rows],
                          texts=[dict(r) for r in rows])

    def rollout(self, n_prompts: int, group_size: int, model=None) -> Batch:
        """prompts -> sampler -> rewards: `group_size` completions of each of n_prompts (global) prompts. From the
        live policy with train.dynamic_sampling, groups without a reward difference are replaced (`dynamic_rollout`)."""
        if model is None and self.cfg.train.dynamic_sampling:
            return self.dynamic_rollout(n_prompts, group_size)
        return self._rollout(n_prompts, group_size, model)

    def _rollout(self, n_prompts: int, group_size: int, model=None) -> Batch:
        return self.complete(self.draw(self.task.prompts, n_prompts, "prompts"), group_size, model)

    def complete(self, rows: list[dict], n: int, model=None, temperature: float | None = None) -> Batch:
        """n completions of each row's prompt (rows: prompt, answer, optional steps), generated and scored: drawn at
        train.temperature, or greedy at temperature 0 (ReMax's baseline, methods/remax.py). From the live policy
        unless `model` is given, through the sampler (gcframe.offpolicy.sampler: the policy of k steps ago, in
        train.sampler_dtype) where one is set; group_ids = the row index. Sampled batches carry log μ of every
        token (data["mu_logp"])."""
        model = model or (self.sampler.model if self.sampler is not None else self.policy)
        with self.timed("generate"), evaluating(model):  # (FSDP2: the Generator gathers the weights once)
            batch = self.generator.generate(model, [r["prompt"] for r in rows], n=n, temperature=temperature)
        with self.timed("score"):
            for t, gid in zip(batch.texts, batch.group_ids.tolist()):
                t.update(answer=rows[gid]["answer"], steps=rows[gid].get("steps", []))
            return score(batch, self.task, self.tok, self.cfg.train.reward, self.reward_model)

    def dynamic_rollout(self, n_prompts: int, group_size: int) -> Batch:
        """DAPO's dynamic sampling (Yu et al. 2025, §3.2) as a data source: rollouts of n_prompts more prompts until
        n_prompts groups carry a reward difference (their rewards not all equal), or train.max_prompts_per_step
        prompts were drawn (default 4·n_prompts). The first n_prompts such groups, in the order drawn, form the
        batch; the others are dropped. At the cap, dropped groups fill the batch up to n_prompts groups, the first
        drawn first: what the plain method would have trained on (for a group baseline their GC is 0). Nothing is
        recomputed: every kept group is as sampled and scored, so its GC is the plain method's on it.

        Several processes: each keeps its own share, and all draw and generate in every round (the data order and
        the sharded generation stay in step) until no process needs more. Global counts go to `pop_stats`."""
        from gcframe.advantages import zero_variance
        from gcframe.batch import concat

        if group_size < 2:
            raise UserError(f"train.dynamic_sampling needs groups of completions (train.group_size >= 2); this "
                            f"method's rollout drew {group_size} per prompt: turn dynamic_sampling off for it")
        cap = self.cfg.train.max_prompts_per_step or 4 * n_prompts
        need = n_prompts // self.world  # this process's groups
        kept, spare, drawn = [], [], 0
        while True:
            take = min(n_prompts, (cap - drawn) // self.world * self.world)
            batch = self._rollout(take, group_size)
            drawn += take
            flat = zero_variance(batch.data["rewards"].double(), batch.group_ids)  # [N] 1 where the group is flat
            for g in torch.unique(batch.group_ids).tolist():
                rows = torch.nonzero(batch.group_ids == g, as_tuple=True)[0]
                group = (batch[rows], bool(flat[rows[0]]))
                (kept if not group[1] and len(kept) < need else spare).append(group)
            short = self.all_sum(torch.tensor([float(need - len(kept))], device=self.device))
            if float(short) <= 0 or cap - drawn < self.world:
                break
        filled = [g for g in spare][:need - len(kept)]  # at the cap: the first-drawn dropped groups
        unused = spare[len(filled):]
        out = concat([b for b, _ in kept + filled], self.tok.pad_token_id)
        local = torch.tensor([float(sum(f for _, f in kept + spare)), float(len(kept) + len(spare)),
                              float(len(unused)), float(sum(b.completion_mask.sum() for b, _ in unused)),
                              float(len(filled) > 0)], dtype=torch.float64, device=self.device)
        zero, groups, dropped, tokens, capped = self.all_sum(local).tolist()
        self.stats.update(ds_prompts_drawn=float(drawn), ds_groups_dropped=dropped, ds_dropped_tokens=tokens,
                          ds_zero_var_drawn=zero / max(groups, 1.0), ds_capped=float(capped > 0))
        return out

    def pop_stats(self) -> dict[str, float]:
        """What the data source measured this step (dynamic sampling's counts), for the step's metrics row."""
        out, self.stats = self.stats, {}
        return out

    # -- frozen models --------------------------------------------------------------------------------------
    def frozen(self, name: str = "reference") -> torch.nn.Module:
        """A frozen copy of the SFT base (eval mode, no grad): 'reference' is π_ref, 'base' samples offline data."""
        if name not in self._frozen and self.cfg.model.lora_rank:  # the base is the policy, adapter off
            self._frozen[name] = AdapterDisabled(self.policy)
        if name not in self._frozen:
            from gcframe.modeling import load_model_and_tokenizer

            model, _ = load_model_and_tokenizer(str(self.base_dir), dtype=self.dtype)
            model.to(self.device).eval().requires_grad_(False)
            if self.sharded and name == "reference":  # "base" samples on the main process alone: replicated
                sharding.shard(model, self.device, self.world)
            self._frozen[name] = model
        return self._frozen[name]

    @property
    def reference(self) -> torch.nn.Module:
        return self.frozen("reference")

    def refresh_reference(self) -> None:
        """π_ref <- π_θ (the seed's 'Refreshing the Anchor')."""
        self.reference.load_state_dict(self.policy.state_dict())
