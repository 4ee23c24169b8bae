"""How compare.py's configuration is built: the built-in defaults <- a YAML file (or the run folder's own, with
--resume) <- --quick <- flags, each layer checked on its own; a run label's options and train overrides
(`name@variant`); the labels to run, each refused before anything runs if its method cannot run so.
"""
from __future__ import annotations

import copy
import dataclasses
import shlex
from pathlib import Path

from gcframe.errors import UserError

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "default.yaml"  # used when no --config is given

QUICK = {  # a smoke configuration: tiny SFT base, few steps, small batches
    "task": {"n_heldout": 100},  # only where the config leaves it unset: a user's data keeps its own sizes
    "sft_base": {"steps": 300, "batch_size": 64, "target_accuracy": 0.0, "patience": 0, "eval_every": 0},  # all
    # its steps, no stops
    "train": {"steps": 8, "prompts_per_step": 8, "group_size": 4, "eval_every": 0, "eval_points": 0,
              "eval_size": 100, "sample_every": 4},
    "reward_model": {"pairs": 64, "heldout_pairs": 16},  # DPO's pairs from a smoke base that is right on few samples
}
"""--quick's values. A size the config sets lower is kept (--quick shrinks, it never grows: a config's group_size 1
stays 1, and grpo refuses it as it would without --quick); eval_every and sample_every are --quick's whatever the
config says. A config value --quick replaced is named in one line before the run starts."""
QUICK_CADENCE = {"eval_every", "eval_points", "sample_every", "patience"}  # --quick's own, not a size: set, not capped
QUICK_FORCED = {"steps", "eval_every", "eval_points", "eval_size", "sample_every"}  # --quick's, even over a variant's own
QUICK_PRETRAINED_EVAL_SIZE = 32  # --quick on a pretrained model: a real model's evaluation takes minutes per 100
QUICK_STAGE1_TOKENS = 300 * 64 * 11
"""--quick's stage 1 on the tiny model, in demonstration tokens: steps x batch x the longest demonstration (every
sequence of a batch is padded to it). The default task's 300 steps of 64 demonstrations of at most 11 tokens; a
user's longer rows get fewer steps, so a smoke stage 1 takes about as long on any data (`quick_stage1`)."""


def build_config(args):
    """Built-in defaults <- --config YAML <- --quick <- flags; validated before anything is written."""
    from gcframe.config import from_dict, load_yaml, merge, resolve_paths

    if args.config is not None and not args.resume and not args.config.strip():
        raise UserError(f"--config is empty: give a YAML file, or leave --config out to run {DEFAULT_CONFIG.name}")
    raw = resumed_config(args) if args.resume else load_yaml(args.config or DEFAULT_CONFIG)
    if args.config and not args.resume and not raw:
        from gcframe.tasks import TaskConfig

        built_in = TaskConfig()
        raise UserError(f"config file '{args.config}' sets nothing: it would run gcframe's built-in defaults "
                        f"(task.n_demos {built_in.n_demos}, task.demo_slip {built_in.demo_slip}), not "
                        f"experiments/configs/{DEFAULT_CONFIG.name}; leave --config out to run that one, or write the "
                        "options you want into the file")
    if args.config and not args.resume:  # relative paths in a config file are read from the file's folder
        raw = resolve_paths(raw, Path(args.config).expanduser().resolve().parent)
    run = raw.pop("run", None) or {}
    raw.pop("splits", None)  # a resumed folder's record of its problem sets, not an option
    raw.pop("processes", None)  # and of how many processes started it (a resume may use another number)
    args.tune_spec = tune_spec(raw.pop("tune", None), args)
    from analysis.families import check as check_families

    args.families = check_families(raw.pop("families", None))  # the findings' families (analysis.families), kept in
    # OUT/config.yaml as declared: not an option of the runs
    args.rates_from = check_rates_from(raw.pop("rates_from", None))  # where untuned rates were chosen (analysis.seeds)
    if args.tune_spec and args.quick:  # a smoke tuning: each trial as short as --quick's runs
        args.tune_spec["steps"] = min(args.tune_spec["steps"] or QUICK["train"]["steps"], QUICK["train"]["steps"])
    from_dict(raw)  # every layer is checked on its own: a bad value must not hide behind --quick or --steps  # compare.py's own section: which methods and seeds to run
    if not isinstance(run, dict) or set(run) - {"methods", "seeds"}:
        raise UserError(f"config section 'run' must be a mapping with keys methods and/or seeds, got {run!r}")
    if args.methods is None and run.get("methods"):
        if not isinstance(run["methods"], list) or not all(isinstance(m, str) for m in run["methods"]):
            raise UserError(f"run.methods must be a list of method names, got {run['methods']!r}")
        args.methods = ",".join(run["methods"])
    seeds_from = "--seeds"
    if args.seeds is None and run.get("seeds") is not None:
        seeds = run["seeds"] if isinstance(run["seeds"], list) else [run["seeds"]]
        args.seeds, seeds_from = ",".join(str(s) for s in seeds), "run.seeds"
    forced = set()  # train options that --quick or a flag sets for every run, over a method's own `train:`
    args.quick_replaced = {}  # what --quick may replace of the user's config: shown in one line if it did
    if args.quick:
        quick = copy.deepcopy(QUICK)
        if args.model or (raw.get("model") or {}).get("path"):  # a pretrained model: evaluation kept proportionate
            quick["train"]["eval_size"] = QUICK_PRETRAINED_EVAL_SIZE
        flags = {k for k in ("steps", "eval_size", "eval_every") if getattr(args, k) is not None}
        quick, args.quick_replaced = quick_layer(raw, quick, user=bool(args.config), flags=flags)
        raw = merge(raw, quick)
        forced |= QUICK_FORCED  # a variant's 136 steps would make the smoke run a full one; its group size stays
    for flag in ("steps", "eval_size", "eval_every"):
        if getattr(args, flag) is not None:
            raw = merge(raw, {"train": {flag: getattr(args, flag)}})
            forced.add(flag)
    raw = without_label_train(raw, forced)
    if args.model:
        raw = merge(raw, {"model": {"path": args.model}})
    if args.report_to is not None:
        raw = merge(raw, {"train": {"report_to": args.report_to}})
    cfg = from_dict(raw)
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [cfg.seed]
    except ValueError:
        raise UserError(f"{seeds_from} must be comma-separated integers like 0,1,2, got '{args.seeds}'") from None
    if min(seeds) < 0:  # a run's folder is OUT/<method>/seed<k>, and the seed drives torch's generators
        raise UserError(f"{seeds_from} {args.seeds}: a seed must be a whole number >= 0, got {min(seeds)}")
    if len(set(seeds)) < len(seeds):  # the same run twice: duplicate summary rows and a spread of 0 from one run
        twice = sorted({s for s in seeds if seeds.count(s) > 1})
        raise UserError(f"seed {', '.join(map(str, twice))} is listed twice in {seeds_from} {args.seeds}: each seed "
                        "runs once")
    return cfg, seeds


def check_rates_from(section) -> dict | None:
    """`rates_from: {result: default, seeds: [0, 1]}`: the rates in methods.<label>.train.lr were tuned in another
    result on these seeds (its tune.seeds); those seeds are then tuning seeds here too (analysis.seeds). Kept in
    OUT/config.yaml, not an option of the runs; one line where it is malformed."""
    if section is None:
        return None
    seeds = section.get("seeds") if isinstance(section, dict) else None
    if not (isinstance(section, dict) and isinstance(section.get("result"), str) and set(section) == {"result", "seeds"}
            and isinstance(seeds, list) and seeds and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                          for x in seeds)):
        raise UserError(f"rates_from must be {{result: NAME, seeds: [0, 1]}} (the result whose tuning chose these "
                        f"rates and its tuning seeds), got {section!r}")
    return {"result": section["result"], "seeds": list(seeds)}


def tune_spec(section, args) -> dict | None:
    """The tuning to run (experiments/tune.py) -> {lr: [rates], steps, seed}, or None: --tune turns it on, with its
    RATES or the config's `tune:` section; a resumed folder's config.yaml holds the spec it was started with."""
    if getattr(args, "tune", None) is None and not (args.resume and section):
        return None
    from experiments.tune import check_spec

    spec = dict(section or {})
    if getattr(args, "tune", None):
        try:
            spec["lr"] = [float(x) for x in args.tune.split(",") if x.strip()]
        except ValueError:
            raise UserError(f"--tune takes comma-separated learning rates like 1e-5,3e-5,1e-4,3e-4, got "
                            f"'{args.tune}'") from None
    return check_spec(spec)


def quick_layer(raw: dict, quick: dict, user: bool, flags: set) -> tuple[dict, dict]:
    """(the layer --quick merges over `raw`, {dotted key: the config's value} for every value of the user's config
    it may replace). task options only where the config leaves them unset (a user's data keeps its sizes); a size
    the config sets lower is kept; eval_every and sample_every are --quick's. `user`: raw is the user's --config
    (not configs/default.yaml); `flags`: train options a flag sets, which are the user's choice, not --quick's."""
    layer, replaced = {}, {}
    for section, opts in quick.items():
        given = raw.get(section) or {}
        for k, v in opts.items():
            if section == "task" and k in given:
                continue
            mine = given.get(k)
            layer.setdefault(section, {})[k] = v if mine is None or k in QUICK_CADENCE else min(mine, v)
            if user and mine is not None and not (section == "train" and k in flags):
                replaced[f"{section}.{k}"] = mine
    methods = raw.get("methods") if user and isinstance(raw.get("methods"), dict) else {}
    for label, opts in methods.items():  # a variant's own train options that --quick's hold over (QUICK_FORCED)
        own = (opts or {}).get("train") if isinstance(opts, dict) else None
        for k in QUICK_FORCED - flags if isinstance(own, dict) else ():
            if k in own:
                replaced[f"methods.{label}.train.{k}"] = own[k]
    return layer, replaced


def quick_stage1(cfg, task) -> None:
    """--quick's stage 1 on the tiny model, sized to QUICK_STAGE1_TOKENS: a batch no larger than the demonstrations
    (a batch of 64 out of 30 would show each one twice per step), and steps x batch x the longest demonstration in
    tokens within the budget. The default task keeps its 300 steps of 64; rows twice as long get half the steps."""
    from gcframe.modeling import build_char_tokenizer
    from gcframe.sampling import encode_completions, encode_prompts

    tok = build_char_tokenizer()
    prompts, completions = list(task.demos["prompt"]), list(task.demos["completion"])
    longest = max(len(p) + len(c) for p, c in zip(encode_prompts(tok, prompts), encode_completions(tok, completions)))
    s = cfg.sft_base
    s.batch_size = max(1, min(s.batch_size, len(prompts)))
    s.steps = max(1, min(s.steps, QUICK_STAGE1_TOKENS // (s.batch_size * longest)))


def quick_line(replaced: dict, cfg, names: list[str]) -> str | None:
    """The one line that names the user's config values --quick replaced (None if it replaced none)."""
    if not replaced:
        return None
    now = {}
    for key in replaced:
        parts = key.split(".")
        if parts[0] == "methods":
            label = ".".join(parts[1:-2])
            if label not in names:
                continue
            now[key] = getattr(run_config(cfg, label, cfg.seed)[1].train, parts[-1])
        else:
            now[key] = getattr(getattr(cfg, parts[0]), parts[1])
    changed = [f"{k} {replaced[k]} -> {v}" for k, v in now.items() if v != replaced[k]]
    return (f"--quick (a smoke run) replaced your config's {', '.join(changed)}; drop --quick to run with your "
            "values") if changed else None


def smoke_line(cfg) -> str:
    """What a --quick run is, for its summary and its report (OUT/config.yaml keeps it as `smoke`): its numbers show
    that every part runs end to end, never how the methods compare."""
    stage1 = "" if cfg.model.path else f"a {cfg.sft_base.steps}-step SFT base, "
    return (f"a smoke run (--quick: {stage1}{cfg.train.steps} steps per method, {cfg.train.eval_size} held-out "
            "problems): it shows that every part runs end to end; its accuracies do not compare the methods (a base "
            "this short may score 0.000, and so may every method from it); run without --quick for numbers")


def without_label_train(raw: dict, keys: set) -> dict:
    """raw with `keys` dropped from every method's and variant's own `train:` mapping, so that the section's value
    (set by --quick or a flag) holds for every run."""
    methods = raw.get("methods")
    if not keys or not isinstance(methods, dict):
        return raw
    out = {}
    for label, opts in methods.items():
        if isinstance(opts, dict) and isinstance(opts.get("train"), dict):
            opts = {**opts, "train": {k: v for k, v in opts["train"].items() if k not in keys}}
        out[label] = opts
    return {**raw, "methods": out}


def resumed_config(args) -> dict:
    """The configuration a --resume'd comparison was started with (OUT/config.yaml); sets methods, seeds, out."""
    from gcframe.config import load_yaml

    given = [f"--{k.replace('_', '-')}" for k in ("config", "methods", "steps", "seeds", "out", "model", "quick",
                                                   "overwrite", "eval_size", "eval_every", "tune")
             if getattr(args, k) not in (None, False)]
    if given:
        raise UserError(f"--resume takes the configuration from {args.resume}/config.yaml: drop {', '.join(given)}")
    if not (Path(args.resume) / "config.yaml").is_file():
        raise UserError(f"--resume {args.resume}: no config.yaml there, so it is not a compare.py output folder")
    raw = load_yaml(Path(args.resume) / "config.yaml")
    args.methods = ",".join(raw.pop("methods_run", []))
    args.smoke = raw.pop("smoke", None)  # a --quick folder stays one: its summary says so again
    saved = raw.pop("methods_from", None) or None  # the user's method files, imported again
    args.seeds = ",".join(str(s) for s in raw.pop("seeds", []))
    args.out = args.resume
    args.methods_from_moved = False
    if args.methods_from:  # their new place (already imported by _main): the run's methods must be among theirs
        from methods import REGISTRY

        missing = sorted({label.split("@", 1)[0] for label in args.methods.split(",") if label} - set(REGISTRY))
        if missing:
            raise UserError(f"--methods-from {', '.join(args.methods_from)} does not define {', '.join(missing)}, "
                            f"which the run in {args.resume} ran: give the file(s) that define them")
        args.methods_from_moved = args.methods_from != saved  # OUT/config.yaml then names the new place
    elif saved:
        gone = [p for p in saved if not Path(p).is_file()]
        if gone:
            raise UserError(f"--resume {args.resume}: its method file {gone[0]} is gone: give its new place with "
                            f"--resume {shlex.quote(str(args.resume))} --methods-from NEW_PATH.py")
        from gcframe import plugins

        args.methods_from = saved
        plugins.load(args.methods_from)
    return raw


def run_config(cfg, label: str, seed: int):
    """(method name, RunConfig) of one run: `name@variant` runs `name` with methods[label] over methods[name]. A
    `train:` mapping among a method's or a variant's options overrides the train section for that label alone (a
    per-method lr, a variant's group_size); a variant's overrides its method's, and both the method's own
    `train_defaults` (DAPO's dynamic sampling)."""
    from gcframe.config import _section, label_options
    from methods import REGISTRY

    name, opts, train = label_options(cfg.methods, label)
    train = {**getattr(REGISTRY.get(name), "train_defaults", {}), **train}
    run_cfg = copy.deepcopy(cfg)
    run_cfg.seed = seed
    run_cfg.methods[name] = opts
    if train:
        run_cfg.train = _section(type(cfg.train), {**dataclasses.asdict(cfg.train), **train}, f"methods.{label}.train")
    return name, run_cfg


def method_names(args, cfg) -> list[str]:
    """The labels to run (method names or name@variant), each checked against its method's Config."""
    from methods import default_methods, get_method

    if args.methods is None:  # every method, a teacher's only with its teacher (methods.default_methods)
        names = default_methods(cfg.methods)
    else:  # given, even as "": an empty list is refused below rather than read as "every method"
        names = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not names:
        raise UserError("--methods is empty: give method names such as sft,grpo (see --list-methods)")
    for label in names:
        if "@" in label and label not in cfg.methods:
            raise UserError(f"variant '{label}' has no options: add `methods: {{{label}: {{...}}}}` to the config")
        name, run_cfg = run_config(cfg, label, cfg.seed)
        cls = get_method(name)  # unknown name -> the known names
        cls.Config.from_dict(run_cfg.methods.get(name, {}), label)
        cls.check_run(run_cfg, label)  # train options it cannot run with (groups, dynamic sampling)
    for key in cfg.methods:
        get_method(key.split("@", 1)[0])
    if len(set(names)) < len(names):
        raise UserError(f"a method is listed twice in {','.join(names)}: each label runs once")
    return names
