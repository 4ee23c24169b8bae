"""Head to head: every method from one cached SFT base, on the same prompts, at an equal budget.

    python experiments/compare.py                         # the default comparison (all methods, 1 seed)
    python experiments/compare.py --quick --methods sft   # a smoke run
    python experiments/compare.py --config experiments/configs/deepseekmath_5_2.yaml --seeds 0,1,2

Output (OUT = --out, default runs/compare-<time>):
    OUT/config.yaml                       the resolved configuration
    OUT/<method>/seed<k>/metrics.jsonl    one JSON object per step (training rows and evaluation rows)
    OUT/<method>/seed<k>/samples.jsonl    prompts, completions and rewards a person can read
    OUT/summary.csv                       one row per method and seed, with final held-out accuracy
"""
from __future__ import annotations

import argparse
import copy
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.errors import UserError, cli_entry  # noqa: E402

QUICK = {  # a smoke configuration: tiny SFT base, few steps, small batches
    "task": {"n_heldout": 100},
    "sft_base": {"steps": 300, "batch_size": 64},
    "train": {"steps": 8, "prompts_per_step": 8, "group_size": 4, "eval_every": 0, "eval_size": 100,
              "sample_every": 4},
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--config", help="YAML file (experiments/configs/*.yaml); flags below override it")
    p.add_argument("--methods", help="comma-separated method names (default: every registered method)")
    p.add_argument("--steps", type=int, help="training steps per method")
    p.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2 (default: the config's seed)")
    p.add_argument("--out", help="output folder (default: runs/compare-<time>)")
    p.add_argument("--model", help="start from this Hugging Face causal-LM directory or hub name")
    p.add_argument("--quick", action="store_true", help="a smoke configuration that finishes in minutes")
    p.add_argument("--list-methods", action="store_true", help="print the registered method names and exit")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p.parse_args(argv)


def build_config(args):
    """Built-in defaults <- --config YAML <- --quick <- flags; validated before anything is written."""
    from gcframe.config import from_dict, load_yaml, merge

    raw = load_yaml(args.config) if args.config else {}
    if args.quick:
        raw = merge(raw, QUICK)
    if args.steps is not None:
        raw = merge(raw, {"train": {"steps": args.steps}})
    if args.model:
        raw = merge(raw, {"model": {"path": args.model}})
    cfg = from_dict(raw)
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [cfg.seed]
    except ValueError:
        raise UserError(f"--seeds must be comma-separated integers like 0,1,2, got '{args.seeds}'") from None
    return cfg, seeds


def method_names(args, cfg) -> list[str]:
    from methods import REGISTRY, get_method

    names = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else list(REGISTRY)
    if not names:
        raise UserError("--methods is empty: give method names such as sft,grpo (see --list-methods)")
    for name in names:
        cls = get_method(name)  # unknown name -> the known names
        cls.Config.from_dict(cfg.methods.get(name, {}), name)
        if cls.needs_groups and cfg.train.group_size < 2:
            raise UserError(f"method '{name}' needs train.group_size >= 2 (groups of completions per prompt), "
                            f"got {cfg.train.group_size}")
    for name in cfg.methods:
        get_method(name)
    return names


def prepare_out(args, accelerator) -> Path:
    out = Path(args.out or f"runs/compare-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise UserError(f"output folder '{out}' already exists: choose another --out or pass --overwrite")
    if accelerator.is_main_process:
        if out.exists() and args.overwrite:
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    return out


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list_methods:
        from methods import REGISTRY

        print("\n".join(REGISTRY))
        return 0
    cfg, seeds = build_config(args)
    names = method_names(args, cfg)

    from accelerate import Accelerator

    from gcframe import pipeline
    from gcframe.runlog import write_yaml
    from gcframe.trainer import Trainer

    cfg, task = pipeline.prepare(cfg)
    acc = Accelerator()
    out = prepare_out(args, acc)
    show = not args.no_progress
    if acc.is_main_process:
        write_yaml(out / "config.yaml", {"methods_run": names, "seeds": seeds, **cfg.to_dict()})
    base_dir, base_info = pipeline.sft_base(cfg, task, acc, show_progress=show)
    acc.print(f"SFT base: {base_dir} (held-out accuracy {base_info.get('eval_accuracy', float('nan')):.3f})")

    rows = []
    for name in names:
        for seed in seeds:
            run_cfg = copy.deepcopy(cfg)
            run_cfg.seed = seed
            trainer = Trainer(run_cfg, name, out / name / f"seed{seed}", base_dir, task, acc, show_progress=show)
            res = trainer.fit()
            rows.append({"method": name, "seed": seed, "base_accuracy": base_info.get("eval_accuracy"), **res})
            acc.print(f"{name:>12} seed {seed}: held-out accuracy {res['final_accuracy']:.3f} "
                      f"({res['steps']} steps, {res['time_s']:.0f} s)")
    if acc.is_main_process:
        import pandas as pd

        df = pd.DataFrame(rows)
        df.to_csv(out / "summary.csv", index=False)
        table = df.groupby("method", sort=False).agg(
            base=("base_accuracy", "first"), final_mean=("final_accuracy", "mean"),
            final_std=("final_accuracy", "std"), seeds=("seed", "count"), time_s=("time_s", "mean"))
        print("\n" + table.to_string(float_format=lambda v: f"{v:.3f}"))
        print(f"\nresults: {out}/summary.csv; runs: {out}/<method>/seed<k>/metrics.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
