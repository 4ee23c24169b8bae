"""DeepSeekMath §5.2 at CPU scale, swept over difficulty x training length x method x seed (issue 13).

    python experiments/sweep_5_2.py [--config experiments/configs/sweep_5_2.yaml] [--out runs/sweep_5_2]
                                    [--quick] [--levels hard,easy] [--seeds 3,4] [--no-progress]
                                    [--backend ray [--address ADDR]]
    python -m analysis.sweep runs/sweep_5_2           # the map (paired differences by seed, figure, CSV)

Resumable: run the same command again. A finished cell (its final_k.json written) is skipped; an interrupted
one continues from its latest checkpoint, as `compare.py --resume` does (each level's folder is a compare.py
output folder: `python experiments/compare.py --resume OUT/<level>` and `python -m analysis.report OUT/<level>`
work on it too).

Parallel: start the same command in two (or more) shells, one thread each (OMP_NUM_THREADS=1). The processes
split the cells between them: each claims the next cell nobody holds (gcframe.tracking.claims), one trains each missing
SFT base while the others wait for it, and a claim left by a killed process is taken over on the next run. With
`--backend ray` each level's base and each cell is a Ray task instead (gcframe/raygrid.py; docs/guides/grid-on-ray.md).

Output:
    OUT/sweep.yaml                               the resolved sweep (levels, methods, seeds, final_k)
    OUT/<level>/config.yaml                      the level's compare.py configuration
    OUT/<level>/base_final_k.json                pass@K / maj@K of the level's SFT base (K = 1, 2, 4, ..., final_k)
    OUT/<level>/<method>/seed<k>/metrics.jsonl   the run (greedy evaluation rows every train.eval_every steps)
    OUT/<level>/<method>/seed<k>/final_k.json    pass@K / maj@K / KL to π_ref of the trained policy
    OUT/<level>/summary.csv                      one row per method and seed (as compare.py writes it)
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.errors import UserError, cli_entry  # noqa: E402
from gcframe.tracking import threads  # noqa: E402
from gcframe.tracking import claims  # noqa: E402

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "sweep_5_2.yaml"
SWEEP_KEYS = {"base", "levels", "methods", "seeds", "train", "task", "final_k", "final_k_size", "quick"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1].lstrip("\n"))  # the first line is the description
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="sweep YAML (default: configs/sweep_5_2.yaml)")
    p.add_argument("--out", help="output folder (default: runs/sweep_5_2, or runs/sweep_5_2-quick with --quick)")
    p.add_argument("--quick", action="store_true", help="the config's quick section: plumbing only, minutes")
    p.add_argument("--levels", help="comma-separated level names to run (default: all, in the config's order)")
    p.add_argument("--seeds", help="comma-separated seeds to run (default: the config's); to run in parallel, "
                   "start the same command twice instead: the processes split the cells")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    threads.add_flag(p)
    from gcframe import raygrid

    raygrid.add_flags(p, "a level's SFT base, a cell = level x method x seed")
    return p.parse_args(argv)


# -- configuration ---------------------------------------------------------------------------------------------
def load_sweep(path: str | Path, quick: bool) -> dict:
    """The sweep section checked, with `quick` merged over it when asked."""
    from gcframe.config import load_yaml, merge

    sweep = load_yaml(path)
    unknown = sorted(set(sweep) - SWEEP_KEYS)
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(unknown)} in sweep config '{path}': known keys are "
                        f"{', '.join(sorted(SWEEP_KEYS))}")
    quick_part = sweep.pop("quick", None) or {}
    if quick:
        levels = quick_part.pop("levels", None)
        sweep = merge(sweep, quick_part)
        if levels:
            sweep["levels"] = levels  # replaced, not merged: the quick sweep has its own (fewer) levels
    for key in ("base", "levels", "methods", "seeds"):
        if not sweep.get(key):
            raise UserError(f"sweep config '{path}' needs a non-empty '{key}'")
    if not isinstance(sweep["levels"], dict) or not all(isinstance(v, dict) for v in sweep["levels"].values()):
        raise UserError(f"'levels' in '{path}' must map level names to config overrides like "
                        "{task: {operands: 5}, sft_base: {steps: 200}}")
    k = sweep.setdefault("final_k", 64)
    if not isinstance(k, int) or k < 1 or k & (k - 1):
        raise UserError(f"final_k must be a power of two >= 1 (K = 1, 2, 4, ..., final_k), got {k!r}")
    sweep.setdefault("final_k_size", 200)
    sweep["base"] = str((Path(path).parent / sweep["base"]).resolve())
    return sweep


def level_config(sweep: dict, level: str):
    """(RunConfig, methods, seeds) of one level: base config <- sweep task/train <- the level's overrides."""
    from gcframe.config import from_dict, load_yaml, merge

    raw = load_yaml(sweep["base"])
    raw.pop("run", None), raw.pop("tune", None)  # the sweep says which methods and seeds; compare.py's tuning
    raw = merge(raw, {k: sweep[k] for k in ("task", "train") if sweep.get(k)})
    raw = merge(raw, sweep["levels"][level])
    return from_dict(raw), list(sweep["methods"]), [int(s) for s in sweep["seeds"]]


# -- pass@K and maj@K for every K up to final_k, from one set of samples -------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 − C(n−c, k)/C(n, k) (Chen et al. 2021, eq. 1)."""
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def maj_at_k(answers: list, correct: list[bool], k: int) -> float:
    """maj@k averaged over the n/k disjoint blocks of k samples: the block's most voted answer is right.

    Majority voting (self-consistency; DeepSeekMath §5.2.2 reports it beside pass@k); an empty answer gets no vote
    and a block without votes counts as wrong, as in gcframe.evaluate.
    """
    hits = []
    for b in range(0, len(answers) - k + 1, k):
        votes = Counter(a for a in answers[b:b + k] if a)
        if not votes:
            hits.append(0.0)
            continue
        top = votes.most_common(1)[0][0]
        hits.append(float(correct[b + answers[b:b + k].index(top)]))
    return sum(hits) / len(hits)


def k_curve(model, generator, task, rows: list[dict], k: int, on_samples=None, chunk: int = 64) -> dict:
    """{pass@K, maj@K for K = 1, 2, ..., k} (means over `rows`) from k samples per problem, plus any sums
    `on_samples(batch)` returns (the trainer's k3 KL to π_ref: kl_sum, kl_tokens)."""
    import torch

    from gcframe.modeling import evaluating

    ks = [2 ** i for i in range(int(math.log2(k)) + 1)]
    res, sums = Counter(), Counter()
    with torch.no_grad(), evaluating(model):
        for i in range(0, len(rows), chunk):
            part = rows[i:i + chunk]
            batch = generator.generate(model, [r["prompt"] for r in part], n=k)  # [len(part)·k] samples
            if on_samples is not None:
                sums.update(on_samples(batch))
            for j, r in enumerate(part):
                comps = [t["completion"] for t in batch.texts[j * k:(j + 1) * k]]
                ok = [bool(task.verify(c, r["answer"])) for c in comps]
                answers = [task.extract_answer(c) for c in comps]
                for kk in ks:
                    res[f"pass@{kk}"] += pass_at_k(k, sum(ok), kk)
                    res[f"maj@{kk}"] += maj_at_k(answers, ok, kk)
    out = {key: v / len(rows) for key, v in sorted(res.items(), key=lambda kv: (kv[0][:3], int(kv[0].split("@")[1])))}
    if sums.get("kl_tokens"):
        out["kl_ref"] = sums["kl_sum"] / sums["kl_tokens"]
    return {"k": k, "n_problems": len(rows), **out}


def heldout_rows(task, n: int) -> list[dict]:
    ds = task.heldout.select(range(min(n, len(task.heldout))))
    return [ds[i] for i in range(len(ds))]


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)  # atomic: a file that exists is complete


# -- one level, one cell ----------------------------------------------------------------------------------------
def prepare_level(sweep: dict, level: str, out: Path, acc, show: bool) -> dict:
    """The level's folder (compare.py layout), config, task, SFT base (cached) and the base's pass@K / maj@K."""
    import torch

    from gcframe import pipeline
    from gcframe.modeling import load_model_and_tokenizer
    from gcframe.sampling import GenerationConfig, Generator
    from gcframe.tracking.log import write_yaml

    cfg, methods, seeds = level_config(sweep, level)
    cfg, task = pipeline.prepare(cfg)
    lvl = out / level
    lvl.mkdir(parents=True, exist_ok=True)
    write_yaml(lvl / "config.yaml", {"methods_run": methods, "seeds": seeds, **cfg.to_dict()})
    base_dir, base_info = pipeline.sft_base(cfg, task, acc, show_progress=show)
    print(f"[{level}] SFT base {base_dir.name}: held-out greedy accuracy {base_info['eval_accuracy']:.3f}", flush=True)
    rows_k = heldout_rows(task, sweep["final_k_size"])
    claim = lvl / "base_final_k.claim"  # another process evaluating the base: it writes the file, we go on
    if not (lvl / "base_final_k.json").exists() and claims.acquire(claim):
        try:
            model, tok = load_model_and_tokenizer(str(base_dir))
            torch.manual_seed(10_000)
            gen = Generator(tok, GenerationConfig(cfg.train.max_new_tokens, cfg.train.temperature))
            curve = k_curve(model, gen, task, rows_k, sweep["final_k"])
            write_json(lvl / "base_final_k.json", {**curve, "kl_ref": 0.0,
                                                    "base_accuracy": base_info["eval_accuracy"], "base": base_dir.name})
        finally:
            claims.release(claim)
    return {"name": level, "dir": lvl, "cfg": cfg, "task": task, "base_dir": base_dir, "base_info": base_info,
            "rows_k": rows_k}


def cell_dir(level: dict, method: str, seed: int) -> Path:
    return level["dir"] / method / f"seed{seed}"


def run_cell(sweep: dict, level: dict, method: str, seed: int, acc, show: bool) -> dict | None:
    """Train one (level, method, seed) cell, or read it if finished -> its final_k.json; None while another
    process sharing the folder holds the cell's claim (it is training it)."""
    run_dir = cell_dir(level, method, seed)
    done, claim = run_dir / "final_k.json", run_dir.with_name(run_dir.name + ".claim")
    if not done.exists():
        if not claims.acquire(claim):
            return None
        try:
            if not done.exists():  # checked again under the claim: another process may have just finished it
                train_cell(sweep, level, method, seed, run_dir, acc, show)
        finally:
            claims.release(claim)
    return json.loads(done.read_text())


def train_cell(sweep: dict, level: dict, method: str, seed: int, run_dir: Path, acc, show: bool) -> None:
    """Train the cell (resuming from its latest checkpoint) and write its pass@K / maj@K to final_k.json."""
    import torch

    from experiments.compare import run_config
    from gcframe.tracking import checkpoint
    from gcframe.train.evaluation import sample_sums
    from gcframe.trainer import Trainer

    name, run_cfg = run_config(level["cfg"], method, seed)
    if checkpoint.finished(run_dir, run_cfg.train.steps, model=False) is not None:
        shutil.rmtree(run_dir)  # trained but killed before its final_k evaluation: the policy is gone
    t0 = time.time()
    trainer = Trainer(run_cfg, name, run_dir, level["base_dir"], level["task"], acc, show_progress=show)
    res = trainer.fit(resume=True)  # continues from the latest checkpoint, or starts over
    torch.manual_seed(10_000 + seed)
    curve = k_curve(acc.unwrap_model(trainer.policy), trainer.ctx.generator, level["task"], level["rows_k"],
                    sweep["final_k"], on_samples=lambda batch: sample_sums(trainer, batch))
    write_json(run_dir / "final_k.json", {**curve, **res, "wall_s": round(time.time() - t0, 1)})


def record(level: dict, method: str, seed: int, res: dict, trained_here: bool = True) -> None:
    """Rewrite the level's summary.csv (compare.py's columns) from every finished cell on disk (so processes
    sharing the folder do not overwrite each other's rows) and print one line."""
    import pandas as pd

    rows = []
    for f in sorted(level["dir"].glob("*/seed*/final_k.json")):
        r = json.loads(f.read_text())
        rows.append({"method": f.parent.parent.name, "seed": int(f.parent.name[4:]),
                     "base_accuracy": level["base_info"]["eval_accuracy"], "final_accuracy": r["final_accuracy"],
                     "steps": r["steps"], "time_s": r["time_s"], "gen_tokens": r["gen_tokens"]})
    pd.DataFrame(rows).to_csv(level["dir"] / "summary.csv", index=False)
    k = res["k"]
    print(f"[{level['name']}] {method:>10} seed {seed}: greedy {res['final_accuracy']:.3f}, maj@{k} "
          f"{res[f'maj@{k}']:.3f}, pass@{k} {res[f'pass@{k}']:.3f} "
          f"({res.get('wall_s', 0):.0f} s{'' if trained_here else ', finished before or by another process'})",
          flush=True)


def same_sweep(spec: dict) -> dict:
    """What must match to continue a sweep: everything, with the base config by file name (a checkout moved)."""
    return {**spec, "base": Path(spec.get("base", "")).name}


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    sweep = load_sweep(args.config, args.quick)
    levels = list(sweep["levels"])
    if args.levels:
        asked = [s.strip() for s in args.levels.split(",") if s.strip()]
        bad = [s for s in asked if s not in levels]
        if bad or not asked:
            raise UserError(f"--levels {args.levels}: unknown level(s) {', '.join(bad) or '(none given)'}; "
                            f"the config has {', '.join(levels)}")
        levels = asked
    seeds = [int(x) for x in sweep["seeds"]]
    if args.seeds:
        try:
            asked_seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
        except ValueError:
            asked_seeds = []
        if not asked_seeds or not set(asked_seeds) <= set(seeds):
            raise UserError(f"--seeds {args.seeds}: give a comma-separated subset of the config's seeds "
                            f"{','.join(map(str, seeds))}")
        seeds = asked_seeds
    from gcframe import raygrid

    on_ray = raygrid.check_flags(args)  # Ray installed, --address with --backend ray
    if args.no_progress:
        import datasets

        datasets.disable_progress_bars()
    for level in levels:  # every level's config is validated before anything runs
        from experiments.compare import method_names

        cfg, methods, _ = level_config(sweep, level)
        method_names(argparse.Namespace(methods=",".join(methods)), cfg)

    from gcframe.tracking.log import write_yaml
    from gcframe.trainer import make_accelerator

    out = Path(args.out or ("runs/sweep_5_2-quick" if args.quick else "runs/sweep_5_2"))
    threads.setup(args.threads, out / "env.json")  # a sweep continued keeps the count OUT/env.json records
    from gcframe.tracking.log import check_cache

    check_cache()  # before OUT is made
    out.mkdir(parents=True, exist_ok=True)
    old = out / "sweep.yaml"
    if old.exists():
        import yaml

        if same_sweep(yaml.safe_load(old.read_text())) != same_sweep(json.loads(json.dumps(sweep))):
            raise UserError(f"'{out}' holds a sweep with another configuration ({old}): give another --out, or "
                            "delete the folder to start over")
    write_yaml(old, sweep)
    acc = make_accelerator()
    if acc.num_processes > 1:
        raise UserError("the sweep runs in one process (cells are small): start it without accelerate/torchrun")
    check_env(out)
    t0, show = time.time(), not args.no_progress
    if args.unit:  # a Ray task: one level's base, or one cell
        return run_unit(sweep, args.unit, out, acc)
    if on_ray:
        on_ray_tasks(args, sweep, levels, seeds, out)
    prepared = [prepare_level(sweep, level, out, acc, show) for level in levels]
    elsewhere = []  # cells another live process is training
    for seed in seeds:  # seeds outermost: a sweep cut short still covers every level and method
        for level in prepared:
            for method in sweep["methods"]:
                was_done = (cell_dir(level, method, seed) / "final_k.json").exists()
                res = run_cell(sweep, level, method, seed, acc, show)
                if res is None:
                    elsewhere.append(cell_dir(level, method, seed))
                else:
                    record(level, method, seed, res, trained_here=not was_done)
    elsewhere = [c for c in elsewhere if not (c / "final_k.json").exists()]  # still running elsewhere
    if elsewhere:
        names = ", ".join(str(c.relative_to(out)) for c in elsewhere[:3]) + (", ..." if len(elsewhere) > 3 else "")
        print(f"this process's share done in {time.time() - t0:.0f} s; {len(elsewhere)} cell(s) are still being "
              f"trained by another process ({names}): when it ends, python -m analysis.sweep {out}", flush=True)
    else:
        from analysis.sweep import write

        print(f"sweep done in {time.time() - t0:.0f} s; the map: {write(out)}", flush=True)
    return 0


def run_unit(sweep: dict, unit: str, out: Path, acc) -> int:
    """`--unit level:L` (the level's base and its pass@K / maj@K) or `--unit cell:L:METHOD:SEED` (one cell)."""
    kind, level, *cell = unit.split(":")
    if kind not in ("level", "cell") or level not in sweep["levels"] or len(cell) != (2 if kind == "cell" else 0):
        raise UserError(f"--unit {unit}: give level:LEVEL or cell:LEVEL:METHOD:SEED of this sweep")
    prepared = prepare_level(sweep, level, out, acc, show=False)
    if kind == "cell":
        run_cell(sweep, prepared, cell[0], int(cell[1]), acc, show=False)
    return 0


def on_ray_tasks(args, sweep: dict, levels: list[str], seeds: list[int], out: Path) -> None:
    """--backend ray: the levels' bases, then every unfinished cell, as Ray tasks (gcframe.raygrid) running this
    script with `--unit`; the driver then reads the cells from disk, prints their lines and writes the map."""
    import shlex

    from experiments.compare_grid import PRELOAD
    from gcframe import raygrid

    threads_each = args.threads or 1
    same = [str(Path(__file__).resolve()), "--config", str(Path(args.config).resolve()), "--out", str(out.resolve()),
            *(["--quick"] if args.quick else []), "--threads", str(threads_each), "--no-progress"]
    needs = str((out / "sweep.yaml").resolve())

    def task(unit: str, claim: Path | None = None) -> raygrid.Task:
        return raygrid.Task(unit, (*same, "--unit", unit), needs, None if claim is None else str(claim.resolve()),
                            PRELOAD)

    cells = [(level, m, s) for s in seeds for level in levels for m in sweep["methods"]
             if not (out / level / m / f"seed{s}" / "final_k.json").exists()]
    again = ["--config", args.config, "--out", str(out), *(["--quick"] if args.quick else []),
             *(["--levels", args.levels] if args.levels else []), *(["--seeds", args.seeds] if args.seeds else []),
             "--backend", "ray", *(["--address", args.address] if args.address else [])]
    resume = " ".join(shlex.quote(a) for a in ["python", "experiments/sweep_5_2.py", *again])
    pool = raygrid.Pool(out, threads_each, args.address, None)
    try:
        pool.run([task(f"level:{level}", out / level / "base_final_k.claim") for level in levels
                  if not (out / level / "base_final_k.json").exists()], "level base", resume=resume)
        pool.run([task(f"cell:{level}:{m}:{s}", out / level / m / f"seed{s}.claim") for level, m, s in cells],
                 "cell", resume=resume)
    finally:
        pool.close()


def check_env(out: Path) -> None:
    """OUT/env.json records the environment the sweep's cells are made in; a process joining or resuming the sweep
    from other code or another machine is refused, so that one map never mixes two."""
    from gcframe.tracking import env as envinfo

    now, path = envinfo.collect(), out / "env.json"
    made = envinfo.load(path)
    if not made:
        path.write_text(json.dumps(now, indent=1) + "\n")
        return
    differ = envinfo.differences(made, now)
    if differ:
        raise UserError(f"'{out}' was started in another environment ({', '.join(differ)} differ: "
                        f"{envinfo.describe(made)}): continue it there, or give another --out")


if __name__ == "__main__":
    sys.exit(main())
