"""Score finished runs' models again, on any number of held-out problems, without retraining.

    python -m gcframe.evaluate OUT --problems 500 --k 8       # every run of a compare.py folder: final models
    python -m gcframe.evaluate OUT/grpo/seed0 --problems 500  # one run
    python -m gcframe.evaluate OUT --checkpoints              # also the checkpoints a run kept (train.keep_checkpoints)
    python -m gcframe.evaluate OUT --problems 200 --base      # also the model every run started from, once
    python -m gcframe.evaluate RUN --split validation --problems 500 --k 4   # a choice's problems (a stage's check)

Each model's per-problem outcomes go to RUN/rescored/<model>-n<N>-k<K>.jsonl (the columns of RUN/problems.jsonl,
`gcframe.evaluate.problems`), written whole when the model is done. Resumable: the same command again skips what is
written. With --base, the model the runs started from (the pretrained model, the SFT base of stage 1, or the model
given as --model) is scored once, to OUT/rescored/base-n<N>-k<K>.jsonl: the report then tests each method's gain
over it with the same paired test (`analysis.findings`, gains.csv); where the runs distil a teacher
(`methods.<name>.teacher`), it is scored too, to OUT/rescored/teacher-n<N>-k<K>.jsonl, the reference row of the
report's table. Parallel: start it in two shells (one thread
each): the processes split the models by claim files (RUN/rescored/<name>.claim), as compare.py splits its cells.
The evaluation draws from its own seeded generator (`eval_seed`: the run's seed and the model's step), so a model
scored twice gives the same rows, and every method of a seed draws the same random numbers. The report (`python -m
analysis.report OUT`) then pairs the methods on these problems (analysis.paired).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from gcframe.errors import UserError, check_writable, cli_entry
from gcframe.tracking import threads

REFERENCES = ("base", "teacher")  # the models scored beside the runs' final models (--base), not of any one run
RUN_KEYS = ("method", "models", "splits")  # what a run's config.yaml holds beside the RunConfig sections
SPLIT_CHOICES = ("test", "validation")


def scored_name(model: str, n: int, k: int, split: str = "test") -> str:
    """The file a model's re-scoring goes to under RUN/rescored/: <model>-n<N>-k<K>.jsonl on the test problems,
    <model>-validation-n<N>-k<K>.jsonl on validation (a name the findings' glob, <model>-n*, never matches)."""
    return f"{model}{'-validation' if split == 'validation' else ''}-n{n}-k{k}.jsonl"


def holds_greedy(run: Path, model: str, n: int, k: int, split: str = "test") -> bool:
    """A greedy-only scoring (k = 0) is held by any scoring of the same model on the same n problems: every scoring
    decodes greedily first (`score`), so e.g. final-n500-k4.jsonl already has final-n500-k0's greedy outcomes and the
    model is not scored again (compare.py's test scoring after a validation-curve comparison, then --k 4)."""
    from gcframe.evaluate.problems import RESCORED

    return k == 0 and any((run / RESCORED).glob(scored_name(model, n, "*", split)))  # type: ignore[arg-type]


def find_runs(path: Path) -> list[Path]:
    """The run folders under `path`: itself (a run: config.yaml and final/ or checkpoints/) or OUT/<label>/seed<k>."""
    if (path / "config.yaml").is_file() and ((path / "final").is_dir() or (path / "checkpoints").is_dir()):
        return [path]
    return sorted(p for p in path.glob("*/seed*") if p.is_dir() and p.name[4:].isdigit()
                  and (p / "config.yaml").is_file())


def run_config(run: Path) -> dict:
    from gcframe.config import load_yaml

    return {k: v for k, v in load_yaml(run / "config.yaml").items() if k not in RUN_KEYS}


def check_same_task(runs: list[Path], configs: list[dict], fix: str = "re-score each comparison folder on its "
                    "own") -> None:
    """Runs whose problems differ (another task, another prompt format or model) cannot be scored, or reported, as
    one set: one line naming two such runs and the first option that differs, then `fix`. A task option that a
    run's config.yaml lacks counts as its default."""
    import dataclasses

    from gcframe.tasks.config import TaskConfig

    default = dataclasses.asdict(TaskConfig())

    def problems(cfg: dict) -> dict:
        return {**{f"task.{k}": v for k, v in {**default, **(cfg.get("task") or {})}.items()},
                "model.path": (cfg.get("model") or {}).get("path")}

    first = problems(configs[0])
    for run, cfg in zip(runs[1:], configs[1:]):
        mine = problems(cfg)
        what = next((k for k in {**first, **mine} if mine.get(k) != first.get(k)), None)
        if what:
            raise UserError(f"{runs[0]} and {run} are runs of different tasks ({what.split('.')[0]} differs: {what} "
                            f"{first.get(what)!r} vs {mine.get(what)!r}): {fix}")


def models_of(run: Path, steps: int, checkpoints: bool) -> list[tuple[str, int, Path]]:
    """(name, step, path) of every model of a run to score: final/ and, with `checkpoints`, the kept checkpoints."""
    out = [("final", steps, run / "final")] if (run / "final").is_dir() else []
    if checkpoints:
        for ckpt in sorted((run / "checkpoints").glob("step-*")):
            if (ckpt / "state.pt").is_file() and not ckpt.name.endswith(".tmp"):
                out.append((ckpt.name, int(ckpt.name.split("-")[-1]), ckpt))
    return out


def load_final(path: Path):
    """(model, tokenizer) of a run's final/ folder: a full model, or a LoRA adapter merged onto its base in memory
    (nothing is written, unlike `--model RUN/final`, which caches the merged model)."""
    import json

    from gcframe.modeling import load_model_and_tokenizer
    from gcframe.modeling.loading import load_tokenizer

    if not (path / "adapter_config.json").is_file():
        return load_model_and_tokenizer(str(path))
    from peft import PeftModel

    from gcframe.modeling.adapters import quiet_peft

    base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    model, _ = load_model_and_tokenizer(base)
    with quiet_peft():
        model = PeftModel.from_pretrained(model, str(path)).merge_and_unload()
    return model, load_tokenizer(str(path))


def load_checkpoint(ckpt: Path, cfg, base_dir: str):
    """(model, tokenizer) of a resumable checkpoint: the run's base with the policy's saved weights."""
    from gcframe.modeling import load_model_and_tokenizer, prepare_policy
    from gcframe.tracking import checkpoint

    if (ckpt / "sharded").is_dir():
        raise UserError(f"{ckpt} holds FSDP2 shards: score it by resuming the run to its end, or keep full "
                        "checkpoints (train.shard: none)")
    model, tok = load_model_and_tokenizer(base_dir)
    model = prepare_policy(model, False, cfg.model.lora_rank)
    try:  # tensors and plain values only: a file in a run folder runs no code (gcframe.tracking.checkpoint)
        checkpoint.check(ckpt)
        state = checkpoint.load_file(ckpt / "state.pt")
    except checkpoint.Damaged as e:
        raise UserError(f"checkpoint {ckpt} is damaged ({e}): delete it, or score the final models only (without "
                        "--checkpoints)") from None
    model.load_state_dict(state["policy"])
    return model, tok


def score(model, tok, cfg, task, rows: list[dict], k: int, seed: int, step: int, show: bool, label: str) -> list:
    """Per-problem records of one model on `rows`, drawn from the evaluation's own generator (eval_seed)."""
    import torch

    from gcframe.evaluate.core import eval_seed, evaluate
    from gcframe.modeling import evaluating
    from gcframe.sampling import GenerationConfig, Generator
    from gcframe.tracking.progress import progress

    generator = Generator(tok, GenerationConfig(cfg.train.max_new_tokens, cfg.train.temperature))
    records: list[dict] = []
    with progress(total=len(rows), desc=label, unit="problem", show=show) as bar, evaluating(model), \
            torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(eval_seed(seed, step))
        evaluate(model, generator, task, rows, k=k, on_chunk=bar.update, records=records)
    return records


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m gcframe.evaluate", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1].lstrip("\n"))  # the first line is the description
    p.add_argument("path", help="a compare.py output folder, or one run folder (OUT/<method>/seed<k>)")
    p.add_argument("--problems", type=int, metavar="N", help="held-out problems to score (default: the runs' "
                   "train.eval_size); at most the task's task.n_heldout")
    p.add_argument("--k", type=int, default=0, help="samples per problem for pass@k and maj@k (default 0: greedy only)")
    p.add_argument("--checkpoints", action="store_true", help="also score the checkpoints runs kept")
    p.add_argument("--base", action="store_true", help="also score the model the runs started from (once, into "
                   "OUT/rescored/), for each method's gain over it, and the teacher distilling runs learn from, as "
                   "a reference")
    p.add_argument("--split", choices=SPLIT_CHOICES, default="test", help="the problems: test (the held-out ones "
                   "findings are made on; default) or validation (the ones choices are made on: <model>-validation-"
                   "n<N>-k<K>.jsonl, never read as a finding)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    threads.add_flag(p)
    from gcframe import raygrid

    raygrid.add_flags(p, "a model's scoring")
    return p.parse_args(argv)


@cli_entry
def main(argv=None) -> int:
    return run(parse_args(argv))


def run(args) -> int:
    """Score the models of `args.path` (parse_args' namespace); compare.py calls it to score a comparison whose runs
    were evaluated on validation problems on the test problems."""
    path = Path(args.path)
    if not path.is_dir():
        raise UserError(f"'{path}' is not a folder: give a compare.py output folder or a run folder")
    if args.problems is not None and args.problems < 1:
        raise UserError(f"--problems {args.problems}: give at least 1 held-out problem (or leave it out for the "
                        "runs' train.eval_size)")
    if args.k < 0:
        raise UserError(f"--k {args.k}: give 0 (greedy only) or more samples per problem")
    from gcframe import raygrid

    on_ray = raygrid.check_flags(args)  # before anything is written
    runs = find_runs(path)
    configs = [run_config(r) for r in runs]
    steps = [((c.get("train") or {}).get("steps") or 0) for c in configs]
    work = [(run, c, *m) for run, c, s in zip(runs, configs, steps) for m in models_of(run, s, args.checkpoints)]
    if not work:
        raise UserError(f"no final models under '{path}': expected {path}/<method>/seed<k>/final (a finished "
                        "compare.py run)" + ("" if args.checkpoints else " or, with --checkpoints, kept checkpoints"))
    check_same_task(runs, configs)
    from gcframe.evaluate.problems import RESCORED

    for run in dict.fromkeys([w[0] for w in work] + ([path] if args.base else [])):  # before any model is scored
        check_writable(run / RESCORED, f"the re-scoring writes {run / RESCORED}: make it writable, or copy the "
                       "folder and score the copy")
    if args.threads is not None or threads.CHOSEN is None:  # called from compare.py: its count stands, unsaid
        threads.setup(args.threads)  # torch's threads for this machine's load, printed first
    if args.base:  # the runs share their base (check_same_task): one model, scored at step 0 with the first seed;
        work += base_work(path, configs)  # or, with sft_base.per_seed, each seed's own base with that seed
        work += teacher_work(path, runs, configs)  # and the teacher the runs distil, as a reference
    if args.unit:  # a Ray task: this one model
        work = [w for w in work if unit_of(path, w) == args.unit]
        if not work:
            raise UserError(f"--unit {args.unit}: not a model of {path}")
    elif on_ray:
        return _on_ray(args, path, work, single=runs == [path])
    return _rescore(args, path, work, single=runs == [path])


def unit_of(path: Path, item: tuple) -> str:
    """A work item's name as a Ray unit: score:<run folder relative to path, "." for path itself>:<model>."""
    return f"score:{item[0].relative_to(path).as_posix()}:{item[2]}"


def _on_ray(args, path: Path, work: list, single: bool) -> int:
    """--backend ray: each model not yet scored is a Ray task (`--unit score:RUN:MODEL`); then the summary the local
    path prints, from the files the tasks wrote."""
    import shlex

    from gcframe import raygrid

    t0 = time.time()
    same = [a for a in ("--problems", "--k", "--split") if getattr(args, a[2:]) is not None]
    flags = [x for a in same for x in (a, str(getattr(args, a[2:])))] + \
        ["--checkpoints"] * args.checkpoints + ["--base"] * args.base
    from gcframe.config import from_dict

    threads_each = args.threads or 1
    n = args.problems or from_dict(work[0][1]).train.eval_size  # as the local path (_rescore) resolves it
    pending = [w for w in work if not is_scored(w[0], w[2], n, args.k, args.split)]
    needs = str(work[0][0].resolve() / "config.yaml")  # a run's: a node that sees it sees the folder
    tasks = [raygrid.Task(unit_of(path, w), ("-m", "gcframe.evaluate", str(path.resolve()), *flags, "--threads",
                                             str(threads_each), "--no-progress", "--unit", unit_of(path, w)), needs)
             for w in pending]
    if tasks:  # a rerun once everything is scored starts no Ray
        pool = raygrid.Pool(path, threads_each, args.address, None)
        try:
            resume = shlex.join(["python", "-m", "gcframe.evaluate", os.path.abspath(path), *flags, "--backend", "ray"])
            pool.run(tasks, "scoring", resume=resume)
        finally:
            pool.close()
    print(f"\nre-scored {len(tasks)} model(s) as Ray tasks in {time.time() - t0:.0f} s"
          + (f"; {len(work) - len(tasks)} already scored, kept" if len(work) > len(tasks) else "")
          + f"; per-problem rows in <run>/rescored/ (logs: {path}/ray-logs/)")
    if args.split == "test":
        print(next_step(path, single, n, args.k))
    return 0


def is_scored(run: Path, name: str, n: int, k: int, split: str) -> bool:
    """Whether a model's scoring on n problems with k samples is on disk: its own file, or a run's greedy
    evaluation that already holds it (holds_greedy)."""
    from gcframe.evaluate.problems import RESCORED

    return (run / RESCORED / scored_name(name, n, k, split)).is_file() or holds_greedy(run, name, n, k, split)


def next_step(path: Path, single: bool, n: int, k: int) -> str:
    """What to run once the models are scored: the report of the comparison folder (OUT, not a run folder, which it
    cannot read), after scoring its other runs on the same problems when one run was scored alone (the report pairs
    methods only on a re-scoring every run has)."""
    import shlex

    if not single:
        return f"the report pairs methods on them: python -m analysis.report {shlex.quote(os.path.abspath(path))}"
    if not (path.name.startswith("seed") and path.name[4:].isdigit()):
        return "the report reads a compare.py folder (OUT/<method>/seed<k>): score its runs together"
    out = path.parent.parent
    where = shlex.quote(os.path.abspath(out))  # pasted into any shell, from any folder
    return (f"the report pairs methods only on a re-scoring every run has: score the other runs of {out} too "
            f"(python -m gcframe.evaluate {where} --problems {n} --k {k}; this one is kept), then python -m "
            f"analysis.report {where}")


def _rescore(args, path: Path, work: list, single: bool = False) -> int:
    from gcframe import pipeline
    from gcframe.config import from_dict
    from gcframe.evaluate.problems import RESCORED, heldout_rows, write_rows
    from gcframe.tracking import claims

    cfg, task = pipeline.prepare(from_dict(work[0][1]))
    n = args.problems or cfg.train.eval_size
    split = args.split
    rows = heldout_rows(task, n, split)  # refused in one line where the task has no such problems
    if n > len(rows):
        option, which = ("task.n_heldout", "held-out") if split == "test" else ("task.n_validation", "validation")
        raise UserError(f"--problems {n} is more than the task's {len(rows)} {which} problems ({option}): ask for at "
                        f"most that many; more needs runs made with a larger {option} (a held-out problem must never "
                        "have been a training prompt)")
    show = not args.no_progress
    scored, kept, elsewhere, t_start = [], [], [], time.time()  # scored: by this process; kept: already written
    for run, raw, name, step, model_path in work:
        out = run / RESCORED / scored_name(name, n, args.k, split)
        label = name.replace("base", "base model", 1).replace("-seed", " seed ") if name.startswith(REFERENCES) \
            else f"{run.parent.name} {run.name} {name}"
        if is_scored(run, name, n, args.k, split):
            kept.append(label)
            continue
        claim = out.with_suffix(".claim")
        if not claims.acquire(claim):
            elsewhere.append(label)
            continue
        if out.is_file():  # another process wrote it and let go between the check above and this claim
            claims.release(claim)
            kept.append(label)
            continue
        try:
            run_cfg = from_dict(raw)
            if name == "final":
                model, tok = load_final(model_path)
            elif name.startswith(REFERENCES):  # the base (from the runs' config) or the teacher (its folder)
                from gcframe.modeling import load_model_and_tokenizer

                model, tok = load_model_and_tokenizer(base_of(run_cfg, task) if model_path is None else model_path)
            else:
                model, tok = load_checkpoint(model_path, run_cfg, base_of(run_cfg, task))
            t0 = time.time()
            records = score(model, tok, run_cfg, task, rows, args.k, run_cfg.seed, step, show, label)
            write_rows(out, step, records, append=False)
            scored.append(label)
            acc = sum(r["greedy_correct"] for r in records) / len(records)
            print(f"{label}: greedy {acc:.3f} on {n} problems ({time.time() - t0:.0f} s) -> {out}", flush=True)
        finally:
            claims.release(claim)
    print(f"\nre-scored {len(scored)} model(s) on {n} {'validation' if split == 'validation' else 'held-out'} "
          f"problems (k = {args.k}) in "
          f"{time.time() - t_start:.0f} s" + (f"; {len(kept)} already scored, kept" if kept else "")
          + f"; per-problem rows in <run>/{RESCORED}/{scored_name('*', n, args.k, split)}")
    if elsewhere:
        print(f"{len(elsewhere)} model(s) are being scored by another process: {', '.join(elsewhere)}")
    elif split == "test":  # validation scores feed a choice (experiments/reproduce.py's stage check), not a report
        print(next_step(path, single, n, args.k))
    return 0


def base_work(path: Path, configs: list[dict]) -> list[tuple]:
    """The base's work items for --base: one model scored with the first run's seed into base-n<N>-k<K>.jsonl, or,
    where the runs trained each seed's own base (sft_base.per_seed), each seed's into base-seed<s>-n<N>-k<K>.jsonl."""
    if not (configs[0].get("sft_base") or {}).get("per_seed") or (configs[0].get("model") or {}).get("path"):
        return [(path, configs[0], "base", 0, None)]
    by_seed = {int(c.get("seed", 0)): c for c in configs}
    return [(path, by_seed[s], f"base-seed{s}", 0, None) for s in sorted(by_seed)]


def teacher_work(path: Path, runs: list[Path], configs: list[dict]) -> list[tuple]:
    """--base's teacher items: the model the comparison's distilling methods learn from (`methods.<name>.teacher`,
    gcframe.teacher), scored like the base as a reference the students are read against: a model folder once into
    teacher-n<N>-k<K>.jsonl with the first run's seed; `clean_base`, a stage 1 per seed where the bases are, each
    seed's into teacher-seed<s>-n<N>-k<K>.jsonl. None where no run distils one; where the runs distil different
    teachers, none is the reference (said in one line)."""
    from gcframe.config import from_dict, load_yaml
    from gcframe.teacher import CLEAN_BASE, clean_base_dir

    by_seed, values = {}, set()
    for run, c in zip(runs, configs):
        value = ((c.get("methods") or {}).get(load_yaml(run / "config.yaml").get("method")) or {}).get("teacher")
        if value:
            values.add(value)
            by_seed.setdefault(int(c.get("seed", 0)), c)
    if len(values) > 1:
        print(f"the runs distil {len(values)} different teachers ({', '.join(sorted(values))}): none is scored as "
              "the reference (score each with its own comparison)")
        return []
    if not values:
        return []
    (value,) = values
    if value != CLEAN_BASE:
        first = min(by_seed)
        return [(path, by_seed[first], "teacher", 0, Path(value))]
    per_seed = bool((configs[0].get("sft_base") or {}).get("per_seed"))
    seeds = sorted(by_seed) if per_seed else [min(by_seed)]
    return [(path, by_seed[s], f"teacher-seed{s}" if per_seed else "teacher", 0,
             Path(clean_base_dir(from_dict(by_seed[s])))) for s in seeds]


def base_of(cfg, task) -> str:
    """The base a checkpoint's policy was trained from: the pretrained model, or the cached SFT base of stage 1."""
    from gcframe import pipeline
    from gcframe.modeling import resolve_model_path
    from gcframe.tracking.log import cache_root

    if cfg.model.path:
        return resolve_model_path(cfg.model.path)
    d = cache_root() / "sft_base" / pipeline.base_key(cfg)
    if not (d / "config.json").is_file():
        raise UserError(f"the SFT base of these runs is not in the cache ({d}): score final models only, or run "
                        "compare.py with the runs' config once to train it")
    return str(d)


if __name__ == "__main__":
    sys.exit(main())
