"""How much does the SFT base move under rounding alone? Stage 1 trained several times from the same config, with
held-out greedy accuracy measured along the way.

Each variant trains stage 1 as the pipeline does (`gcframe.stage1.train`: the config's steps, or its stopping rule
`sft_base.target_accuracy` on validation problems and its weight average `sft_base.ema`) from the config's initial
weights, changed only by what the variant names:

    ref           the weights as built (what the cache would hold)
    perturb-K     every weight + 1e-7 · N(0, 1), noise seed K: a change far below float32 training's own rounding
    float64       the whole of stage 1 in float64 (no float32 accumulation)

Run it at one thread and at two (`--threads`) to see the thread count's effect: BLAS sums in another order. The
spread of the base's held-out accuracy over these variants is what a user on another CPU can expect; the curve
shows whether the end point sits on a plateau or on a steep slope, and where a target stopped each variant.

    python experiments/base_stability.py --study --out runs/base_stability       # the committed study (STUDY);
                                                                                 # again: only what is missing
    python experiments/base_stability.py --out runs/stability                    # the default config's stage 1
    python experiments/base_stability.py --sft-steps 500 --schedule constant ...  # another stage 1
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gcframe.errors import UserError, cli_entry  # noqa: E402

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "mid_curve_base.yaml"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="config whose stage 1 is measured")
    p.add_argument("--variants", default="ref,perturb-1,perturb-2,perturb-3,float64",
                   help="comma-separated: ref, perturb-K (K = noise seed), float64")
    p.add_argument("--eps", type=float, default=1e-7, help="scale of the weight perturbation")
    p.add_argument("--sft-steps", type=int, help="override sft_base.steps")
    p.add_argument("--schedule", choices=("constant", "cosine"), help="override sft_base.lr_schedule")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (YAML syntax), e.g. task.n_demos=1000 or sft_base.lr=3.0e-4")
    p.add_argument("--eval-every", type=int, default=50, help="held-out evaluation every this many stage-1 steps")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--label", default="run", help="the setup's name in the CSV and the summary (e.g. \"default: "
                   "1000 demos\")")
    p.add_argument("--study", action="store_true", help="the committed study (results/base_stability): every setup "
                   "of STUDY, each with its variants and thread counts, into one --out (hours of CPU)")
    p.add_argument("--levers", action="store_true", help="the lever study (results/base_levers): the finished "
                   "base on 600 correct demonstrations (configs/scarce_demos.yaml) with fewer demonstrations or harder "
                   "problems (LEVERS), each base's pass@8 beside its greedy accuracy, into one --out")
    p.add_argument("--finished", action="store_true", help="the finished bases (results/base_stability_scarce, "
                   "results/base_stability_finished): FINISHED's setups, --only picks one, into one --out")
    p.add_argument("--k", type=int, default=0, help="also score each base's pass@k on the test problems (k samples "
                   "per problem; 0: greedy only)")
    p.add_argument("--quick", action="store_true", help="with --study, --levers or --finished: a 40-step smoke "
                   "version")
    p.add_argument("--only", help="with --study, --levers or --finished: only the setups whose label contains this "
                   "text (e.g. default)")
    p.add_argument("--out", default=str(ROOT / "runs" / "base_stability"), help="folder of curves.csv (rows are "
                   "appended, one file per setup; default runs/base_stability)")
    return p.parse_args(argv)


def train_variant(cfg, task, variant: str, eps: float, eval_every: int, k: int = 0) -> list[dict]:
    """Stage 1 (`gcframe.stage1.train`, as the pipeline runs it: its stopping rule and weight average included) from
    the variant's initial weights -> its curve: greedy accuracy on stage 1's problems every `eval_every` steps (the
    config's own with a stopping rule), the last row the base's held-out (test) accuracy at the step stage 1 ended,
    with k > 0 also its pass@k there (`passk`: k samples per test problem at the rollout temperature): the room RL
    has over the base's greedy answers."""
    import dataclasses

    import torch
    from accelerate import Accelerator

    from gcframe import stage1
    from gcframe.evaluate.problems import heldout_rows
    from gcframe.modeling import build_char_tokenizer, build_tiny_llama
    from gcframe.pipeline import stage1_config
    from gcframe.trainer import Trainer

    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, cfg.model, seed=cfg.task.seed)
    dtype = torch.float32
    if variant == "float64":
        model, dtype = model.double(), torch.float64
    elif variant.startswith("perturb-"):
        g = torch.Generator().manual_seed(int(variant.split("-", 1)[1]))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(eps * torch.randn(p.shape, generator=g, dtype=p.dtype))
    elif variant != "ref":
        raise UserError(f"unknown variant '{variant}': known are ref, perturb-K, float64")
    cfg = dataclasses.replace(cfg, sft_base=dataclasses.replace(
        cfg.sft_base, eval_every=cfg.sft_base.eval_every if cfg.sft_base.target_accuracy or cfg.sft_base.patience
        else eval_every))
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(stage1_config(cfg), "sft", Path(tmp) / "log", None, task, Accelerator(cpu=True),
                          policy=model, tok=tok, show_progress=False, dtype=dtype)
        base, info = stage1.train(trainer, task, show_progress=False)
        test = heldout_rows(task, cfg.train.eval_size)
        final = stage1.greedy_accuracy(base, trainer.ctx.generator, task, test)
        passk = None
        if k > 0:
            from gcframe.evaluate import evaluate
            from gcframe.modeling import evaluating

            with evaluating(base):
                passk = evaluate(base, trainer.ctx.generator, task, test, k=k)["passk_correct"] / len(test)
    rows = [{"step": r["step"], "eval_accuracy": r["accuracy"], "train_loss": r["loss"]} for r in info["curve"]]
    if not rows or rows[-1]["step"] != info["steps_trained"] or info.get("split") == "validation":
        # the base on the test problems: a stage 1 that decides on validation problems (its curve) and keeps its
        # best evaluation ends in a row of its own, the base's test accuracy at the step it stopped
        rows.append({"step": info["steps_trained"], "eval_accuracy": final, "train_loss": None})
    if passk is not None:
        rows[-1]["passk"] = passk
    return rows


QUICK_STUDY = ["--sft-steps", "40", "--eval-every", "20", "--variants", "ref,perturb-1",
               "--set", "sft_base.target_accuracy=0.0"]
"""--study --quick: 40 steps, no target accuracy (a config's target is not reached in 40 steps, and stage 1 refuses a
base that missed it), so the smoke study finishes from an empty cache."""

_CONFIGS = Path(__file__).parent / "configs"
STUDY = [  # (label, arguments): a stage 1 stopped by a step count on the steep part of its curve, and the mid-curve
    # base (DEFAULT_CONFIG, configs/mid_curve_base.yaml: the default when the study was made; the labels keep "default")
    ("500 demos, 500 steps, constant lr", ["--set", "task.n_demos=500", "--sft-steps", "500", "--schedule", "constant",
                                           "--set", "sft_base.target_accuracy=0.0", "--set", "sft_base.ema=0.0",
                                           "--variants", "ref,perturb-1,perturb-2,perturb-3,float64"]),
    ("default: target accuracy, weight average", ["--variants", "ref,perturb-1,perturb-2,perturb-3,float64"]),
    ("default: target accuracy, weight average", ["--threads", "2", "--variants", "ref"]),
    *[(f"§5.2 map, {level} level: target {target}", [  # the sweep's levels (configs/sweep_5_2.yaml), the same rule
        "--config", str(_CONFIGS / "deepseekmath_5_2.yaml"), "--set", f"task.operands={ops}",
        "--set", "sft_base.steps=1000", "--set", f"sft_base.target_accuracy={target}", "--set", "sft_base.eval_every=1",
        "--set", "sft_base.ema=0.97", "--set", "train.eval_size=500", "--variants", "ref,perturb-1,perturb-2"])
      for level, ops, target in (("hard", 5, 0.20), ("medium", 4, 0.40), ("easy", 4, 0.70))],
]
"""--study: results/base_stability."""

FINISHED = [  # (label, arguments): finished bases, whose stage 1 keeps its best evaluation on validation problems
    ("finished base: early stopping on validation", [  # 600 correct demonstrations: results/base_stability_scarce
        "--config", str(_CONFIGS / "scarce_demos.yaml"), "--variants", "ref,perturb-1,perturb-2,perturb-3"]),
    ("finished base: early stopping on validation", [
        "--config", str(_CONFIGS / "scarce_demos.yaml"), "--threads", "2", "--variants", "ref"]),
    ("slipped demonstrations: best validation evaluation of the schedule", [  # the default's base (default.yaml):
        "--config", str(_CONFIGS / "default.yaml"), "--k", "8",           # results/base_stability_finished
        "--variants", "ref,perturb-1,perturb-2,perturb-3"]),
    ("slipped demonstrations: best validation evaluation of the schedule", [
        "--config", str(_CONFIGS / "default.yaml"), "--k", "8", "--threads", "2", "--variants", "ref"]),
]
"""--finished: each finished base under the same perturbations; --only picks one (reproduce.py runs each apart)."""


_SCARCE = str(_CONFIGS / "scarce_demos.yaml")
LEVERS = [  # (label, arguments): the finished base on 600 correct demonstrations (configs/scarce_demos.yaml)
    # with one lever moved, the base's greedy accuracy and pass@8 on the test problems, and under 1e-7 perturbations
    # where the base has room (a base that generalises past 0.8 has none, whatever its spread)
    ("fewer demonstrations: 400", ["--set", "task.n_demos=400", "--variants", "ref,perturb-1,perturb-2"]),
    ("fewer demonstrations: 450", ["--set", "task.n_demos=450", "--variants", "ref,perturb-1,perturb-2,perturb-3"]),
    ("harder problems: 3 digits, 500 demos", ["--set", "task.digits=3", "--set", "task.n_demos=500",
                                              "--variants", "ref"]),
    ("harder problems: 3 digits, 1000 demos", ["--set", "task.digits=3", "--set", "task.n_demos=1000",
                                               "--variants", "ref,perturb-1,perturb-2"]),
    ("harder problems: 4 digits, 2000 demos", ["--set", "task.digits=4", "--set", "task.n_demos=2000",
                                               "--set", "sft_base.steps=3000", "--set", "sft_base.patience=20",
                                               "--variants", "ref"]),
]
"""--levers: what was tried for a finished base that still leaves room and lands within ±0.03 under rounding
(docs/results/default.md). Fewer demonstrations leave the model on a memorising plateau whose height rounding moves;
harder problems are learnt past 0.8 once enough demonstrations teach the algorithm, and then leave no room."""


def _studies(args):
    """The setups --study, --levers or --finished runs: (label, arguments), --quick's smoke version, --only's
    filter."""
    if args.quick:
        return [("quick", QUICK_STUDY + (["--k", "2"] if args.levers else []))]
    every = [(label, ["--config", _SCARCE, "--k", "8", *extra]) for label, extra in LEVERS] if args.levers \
        else FINISHED if args.finished else STUDY
    chosen = [(label, extra) for label, extra in every if not args.only or args.only in label]
    if not chosen:
        which = "levers" if args.levers else "finished bases" if args.finished else "study"
        raise UserError(f"--only {args.only!r} matches no setup; the {which} has "
                        + "; ".join(dict.fromkeys(label for label, _ in every)))
    return chosen


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.study or args.levers or args.finished:
        for label, extra in _studies(args):
            main(["--config", args.config, "--out", args.out, "--label", label, *extra])
        return 0
    import pandas as pd
    import torch

    from gcframe.config import from_dict, load_yaml, merge
    from gcframe.pipeline import prepare
    from gcframe.tracking.env import short_commit, write_env

    torch.set_num_threads(args.threads)
    raw = load_yaml(args.config)
    for own in ("run", "tune", "families", "methods"):  # compare.py's sections, the methods' options: not stage 1's
        raw.pop(own, None)
    over = {k: v for k, v in (("steps", args.sft_steps), ("lr_schedule", args.schedule)) if v is not None}
    raw = merge(raw, {"sft_base": over})
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or key.count(".") != 1:
            raise UserError(f"--set {item!r}: write SECTION.KEY=VALUE, e.g. task.n_demos=1000")
        section, name = key.split(".")
        raw = merge(raw, {section: {name: yaml.safe_load(value)}})
    cfg, task = prepare(from_dict(raw))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^\w.-]+", "_", args.label).strip("_") or "run"  # a file name from "default: 1000 demos, ..."
    commit = None  # the environment is written when this setup first trains a variant: a kept one keeps its own
    csv = out / "curves.csv"
    for variant in args.variants.split(","):
        done = read_curves(csv) if csv.exists() else None
        if done is not None and ((done["setup"] == args.label) & (done["variant"] == variant)
                                 & (done["threads"] == args.threads)).any():
            print(f"{args.label} {variant} threads={args.threads}: in {csv} already, kept", flush=True)
            continue  # resumable: the same command again trains only what is missing
        if commit is None:
            commit = short_commit(write_env(out / f"env_{slug}_t{args.threads}.json"), missing="")
        t0 = time.time()
        rows = train_variant(cfg, task, variant, args.eps, args.eval_every, args.k)
        df = pd.DataFrame(rows).assign(setup=args.label, variant=variant, threads=args.threads,
                                       sft_steps=cfg.sft_base.steps, schedule=cfg.sft_base.lr_schedule,
                                       n_demos=len(task.demos), sft_lr=cfg.sft_base.lr, k=args.k,
                                       commit=commit,
                                       train_s=round(time.time() - t0, 1))
        pd.concat([read_curves(csv), df] if csv.exists() else [df]).to_csv(csv, index=False)
        last = rows[-1]
        print(f"{args.label} {variant} threads={args.threads}: held-out accuracy {last['eval_accuracy']:.3f} "
              f"after {last['step']} steps ({time.time() - t0:.0f} s); curve "
              + " ".join(f"{r['eval_accuracy']:.2f}" for r in rows), flush=True)
    summarise(out)
    print(f"curves in {csv}; summary in {out / 'stability.csv'}, figure {out / 'stability.png'}")
    return 0


def read_curves(csv: Path):
    """curves.csv with its commit column as text: a short hash such as 109e306 would otherwise parse as 1.09e308."""
    import pandas as pd

    return pd.read_csv(csv, dtype={"commit": str})


def headline(last) -> str:
    """One sentence per setup, from the final rows of every variant (the README's and the results page's): where the
    base landed over every float32 variant and thread count, and in float64."""
    lines = []
    for setup, g in last.groupby("setup", sort=False):
        f32 = g[g["variant"] != "float64"]
        lo, hi = f32["eval_accuracy"].min(), f32["eval_accuracy"].max()
        n_var, threads = f32["variant"].nunique(), sorted(f32["threads"].unique())
        f64 = g[g["variant"] == "float64"]["eval_accuracy"]
        at = f"at {' and '.join(map(str, threads))} thread(s)"
        text = (f"{setup}: held-out greedy accuracy {lo:.3f}–{hi:.3f} over {n_var} float32 variants (the weights as "
                f"built and 1e-7 perturbations) {at}, a spread of {hi - lo:.3f}" if len(f32) > 1 else
                f"{setup}: held-out greedy accuracy {lo:.3f}, one float32 run {at} (no spread measured)")
        lines.append(f"- {text}" + (f"; {f64.iloc[0]:.3f} in float64." if len(f64) else "."))
    return "\n".join(lines) + "\n"


def _room(g) -> dict:
    """A setup's pass@k beside its greedy accuracy, where its variants were sampled (--k): the weights as built, and
    pass@k − greedy, the problems a base gets wrong greedily but right in one of k samples (RL's room)."""
    if "passk" not in g or g["passk"].isna().all():
        return {}
    k = int(g["k"].dropna().iloc[0])
    ref = g.set_index("variant").loc["ref"] if "ref" in set(g["variant"]) else g.iloc[0]
    return {f"pass@{k} by variant": ", ".join(f"{v} {a:.3f}" for v, a in g.set_index("variant")["passk"].items()
                                                if a == a),
            f"pass@{k} − greedy (ref)": f"{ref['passk'] - ref['eval_accuracy']:+.3f}"}


def summarise(out: Path) -> None:
    """headline.md (a sentence per setup), stability.csv (per setup and thread count: the final held-out accuracy of
    every variant, the spread of the
    float32 ones (rounding), float64 apart) and
    stability.png (held-out accuracy along stage 1, one panel per setup)."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd
    import seaborn as sns

    df = read_curves(out / "curves.csv")
    last = df.sort_values("step", kind="stable").groupby(["setup", "threads", "variant"], sort=False).tail(1)
    order = list(dict.fromkeys(df["setup"]))  # setups in the order they were run, then 1 thread before 2
    last = last.assign(_o=last["setup"].map(order.index)).sort_values(["_o", "threads"], kind="stable")
    rows = []
    for (setup, threads), g in last.groupby(["setup", "threads"], sort=False):
        every = g.set_index("variant")["eval_accuracy"]
        acc = every.drop("float64", errors="ignore")  # rounding moves float32; float64 is another arithmetic
        rows.append({"setup": setup, "threads": threads, "stage-1 steps": int(g["sft_steps"].iloc[0]),
                     "lr schedule": g["schedule"].iloc[0], "demos": int(g["n_demos"].iloc[0]) if "n_demos" in g
                     and g["n_demos"].notna().all() else "",
                     "final held-out accuracy by variant": ", ".join(f"{v} {a:.3f}" for v, a in every.items()),
                     "stage 1 ended at step": ", ".join(f"{v} {int(st)}" for v, st in
                                                        g.set_index("variant")["step"].items()),
                     "float32 min": f"{acc.min():.3f}", "float32 max": f"{acc.max():.3f}",
                     "float32 spread": f"{acc.max() - acc.min():.3f}" if len(acc) > 1 else "–",  # one run: none
                     "float64": f"{every['float64']:.3f}" if "float64" in every else "–",
                     **_room(g),
                     "commit": ", ".join(sorted(set(g["commit"].dropna().astype(str)))) if "commit" in g else ""})
    pd.DataFrame(rows).to_csv(out / "stability.csv", index=False)
    (out / "headline.md").write_text(headline(last))
    grid = sns.relplot(df.assign(run=df["variant"] + " · " + df["threads"].astype(str) + " thr"), x="step",
                       y="eval_accuracy", hue="run", col="setup", kind="line", marker="o", markersize=3,
                       height=2.8, aspect=1.2, facet_kws={"sharex": False})
    grid.set_axis_labels("stage-1 step", "greedy accuracy")  # on stage 1's problems; the last point: held-out
    grid.set_titles("{col_name}", size=9)
    grid.savefig(out / "stability.png", dpi=90)


if __name__ == "__main__":
    sys.exit(main())
