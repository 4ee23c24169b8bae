"""The method API: a data source and a gradient coefficient, nothing else.

A method is a small class with one uniform signature (the engine calls every method the same way):

    collect(step)              -> Batch    where the data comes from (demonstrations, live samples, pairs, ...)
    prepare(batch)             -> None     once per collected batch, no grad: advantages, values, filters
    coefficients(batch, logp)  -> GC       [N, T] per-token gradient coefficient; its docstring is the formula

The engine owns everything else: log-probs, the loss -aggregate(GC·log π), optimisers, accumulation, processes,
metrics and the run folder. A method may own auxiliary trainable models (PPO's critic) by returning them from
`auxiliary_models()` and their loss from `auxiliary_loss(batch, norm)`; the engine builds and steps their
optimisers. Measurements a method wants logged go through `self.record(name=value)`.
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from gcframe.batch import Batch
from gcframe.engine import Normaliser, check_aggregation
from gcframe.errors import UserError
from gcframe.offpolicy import corrections
from gcframe.registry import REGISTRY, get_method, register  # noqa: F401  (gcframe's registry, re-exported)

if TYPE_CHECKING:
    from gcframe.context import Context


def default_methods(options: dict | None = None) -> list[str]:
    """The methods "every method" means when none are named (compare.py without --methods, the atlas, the
    benchmarks): every registered one, except a method that distils a teacher (`uses_teacher`) when `options` (a
    config's `methods:` mapping) gives it none: its teacher is an input no default can supply."""
    options = options or {}
    return [n for n, cls in REGISTRY.items()
            if not getattr(cls, "uses_teacher", False) or (options.get(n) or {}).get("teacher")]


@dataclass
class MethodConfig:
    """Hyperparameters every method has. Subclass it to add a method's own (one docstring per field)."""

    aggregation: str = "token-mean"
    """How per-token terms are normalised: token-mean, seq-mean-token-mean, seq-mean-token-sum,
    seq-mean-token-sum-norm (gcframe.engine)."""

    def validate(self) -> None:
        check_aggregation(self.aggregation)

    @classmethod
    def from_dict(cls, values: dict, method: str) -> "MethodConfig":
        """Options from `methods.<method>` in a config: names and types checked, then `validate()`. A refusal whose
        line does not name its section (a validate() that cannot know the label) gets it in front: methods.<method>:"""
        from gcframe.config import _section  # the same checks as every other config section

        try:
            return _section(cls, values or {}, f"methods.{method}")
        except UserError as e:
            if f"methods.{method}" in str(e) or f"methods.{method.split('@', 1)[0]}." in str(e):
                raise
            raise UserError(f"methods.{method}: {e}") from None


class Method:
    """Base class. Subclasses set `Config`, implement `collect` and `coefficients`, and `@register` a name."""

    name: ClassVar[str] = "base"
    description: ClassVar[str] = ""
    """One line for --list-methods (default: the first line of the method's module docstring)."""
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    uses_reference: ClassVar[bool] = False
    """True: the engine fills `batch.data["ref_logp"]` (log π_ref, `[N, T]`) under the frozen reference π_ref once per
    batch."""
    needs_groups: ClassVar[bool] = False
    """True: the method compares completions of one prompt and needs group_size >= 2."""
    needs_old_logp: ClassVar[bool] = True
    """False: the method's GC never reads log π_old (no ratio π_θ/π_old), so when a batch is reused (train.minibatches
    or train.epochs > 1) the engine skips the forward pass that stores it; gcframe.verify checks that its GC is the
    same without it."""
    train_defaults: ClassVar[dict] = {}
    """Train options the method runs with unless its config entry's own `train:` mapping sets them (DAPO:
    {"dynamic_sampling": True}). compare.py applies them to the run's config (experiments/compare_config.run_config),
    so the run folder's config.yaml shows them; the section-wide `train:` does not override them."""
    rollout_groups: ClassVar[bool | None] = None
    """Whether `collect` draws groups of G >= 2 completions per prompt from the live policy with ctx.rollout(B, G),
    the data source train.dynamic_sampling filters: True (grpo, rloo, online_rft), False (sft, rft, dpo, ppo: refused
    with dynamic sampling before a run starts), None (not declared: allowed, and ctx.rollout checks it)."""
    samples_policy: ClassVar[bool | None] = None
    """Whether `collect` samples the live policy (ctx.rollout or ctx.complete without `model`): the data source that
    train.staleness and train.sampler_dtype change (the Context generates with the lagging or lower-precision sampler
    there). False (sft and its variants, dpo and the other preference losses, kto, rft: demonstrations, a fixed
    preference set, the frozen base's samples) refuses either dial before a run starts, where it would be ignored and
    the run labelled by a dial it never had (analysis.off_policy filed such a run under its k); None (not declared:
    allowed)."""

    stores: ClassVar[tuple[str, ...] | None] = None
    """The batch.data columns `prepare` stores (advantages, values, a teacher's log-probs; the sampled batch's own,
    rewards and log μ, are the Context's). Declared, a train.correction that reads a column the method does not store
    (opsm reads the advantages) is refused before the run starts; None (not declared): on the run's first batch.
    gcframe.verify's rows check each declaration against what prepare stored."""

    def __init__(self, cfg: MethodConfig, ctx: "Context"):
        self.cfg = cfg
        self.ctx = ctx
        self.stats: dict[str, list[float]] = {}

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        """Before a run starts: the train options this method cannot run with (a one-line UserError)."""
        t = cfg.train
        if cls.needs_groups and t.group_size < 2:
            raise UserError(f"method '{label}' compares completions of one prompt: train.group_size must be >= 2, "
                            f"got {t.group_size}")
        if t.dynamic_sampling and (cls.rollout_groups is False or t.group_size < 2):
            known = ", ".join(n for n, c in REGISTRY.items() if c.rollout_groups)
            why = (f"'{label}' samples no groups of completions from the live policy" if cls.rollout_groups is False
                   else f"train.group_size is {t.group_size}")
            raise UserError(f"train.dynamic_sampling drops prompt groups without reward variance, but {why}: it "
                            f"applies to group methods ({known}, and your own that call ctx.rollout(B, G) with "
                            f"G >= 2); turn it off for '{label}' (methods: {{{label}: {{train: {{dynamic_sampling: "
                            "false}}})")
        if t.correction != "none" and not cls.needs_old_logp:  # gcframe.offpolicy: a factor from π_old/μ
            known = ", ".join(n for n, c in REGISTRY.items() if c.needs_old_logp)
            raise UserError(f"train.correction {t.correction} reweights a policy-gradient method's GC by π_old/μ, but "
                            f"'{label}' has no ratio π_θ/π_old (it reads no π_old): it applies to {known}, and your "
                            f"own with a ratio; set it to none for '{label}' (methods: {{{label}: {{train: "
                            "{correction: none}}})")
        corrections.check_method(t.correction, cls, label)  # a column the correction reads, not stored (opsm: Â)

        if t.pipeline and not cls.needs_old_logp:  # gcframe.offpolicy.pipeline: the live policy's samples, k ahead
            known = ", ".join(n for n, c in REGISTRY.items() if c.needs_old_logp)
            raise UserError(f"train.pipeline samples the live policy k steps ahead of the learner, but '{label}' has "
                            f"no ratio π_θ/π_old to train on such samples: it applies to {known}, and your own with "
                            f"a ratio; set it to false for '{label}' (methods: {{{label}: {{train: {{pipeline: "
                            "false}}})")

        dial = ("staleness", t.staleness, 0) if t.staleness else \
            ("sampler_dtype", t.sampler_dtype, "float32") if t.sampler_dtype != "float32" else None
        if dial and cls.samples_policy is False:  # gcframe.offpolicy.sampler: μ where a method samples the policy
            field, value, off = dial
            known = ", ".join(n for n, c in REGISTRY.items() if c.samples_policy is not False)
            raise UserError(f"train.{field} {value} changes the sampler of the live policy, but '{label}' never "
                            f"samples the policy it trains (its data do not come from it), so the dial would be "
                            f"ignored: it applies to {known}, and your own that sample it (ctx.rollout); set it to "
                            f"{off} for '{label}' (methods: {{{label}: {{train: {{{field}: {off}}}}}}})")

    @classmethod
    def check_model(cls, cfg, task, tok) -> None:
        """Before any run starts (compare.py, after the model's tokenizer is loaded and the task built): raise a
        UserError naming this method and the fix if it cannot run on the configured model. Default: nothing."""

    # -- the API (abstract: a marker gcframe.registry.check_api reads; Method is no ABC) -------------------
    @abstractmethod
    def collect(self, step: int) -> Batch:
        raise NotImplementedError

    def prepare(self, batch: Batch) -> None:
        """Once per collected batch, under no_grad. Default: nothing."""

    @abstractmethod
    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def auxiliary_models(self) -> dict[str, torch.nn.Module]:
        return {}

    def use_auxiliary_models(self, models: dict[str, torch.nn.Module]) -> None:
        """The engine's prepared modules of `auxiliary_models()` (under DDP, wrapped), by the same names, once before
        the first step: the method computes with these. Default: each replaces the attribute of its name (PPO's
        self.critic)."""
        for name, m in models.items():
            setattr(self, name, m)

    def auxiliary_loss(self, batch: Batch, norm: Normaliser) -> torch.Tensor | None:
        return None

    # -- helpers ---------------------------------------------------------------------------------------
    def record(self, **values: float | torch.Tensor) -> None:
        """Note measurements (averaged over the step's micro-batches by the engine)."""
        for k, v in values.items():
            self.stats.setdefault(k, []).append(float(v))

    def pop_stats(self) -> dict[str, float]:
        out = {k: sum(v) / len(v) for k, v in self.stats.items() if v}
        self.stats = {}
        return out

    @staticmethod
    def old_logp(batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """log π_old [N, T]: stored by the engine when the batch is reused (μ > 1 or several minibatches);
        otherwise the policy has not moved since sampling and π_old = π_θ (detached)."""
        old = batch.data.get("old_logp")
        return logp.detach() if old is None else old
