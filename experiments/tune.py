"""Each method at its own learning rate, chosen on the validation problems at an equal budget (`compare.py --tune`).

    python experiments/compare.py --tune                      # the config's tune section (configs/default.yaml)
    python experiments/compare.py --tune 1e-5,3e-5,1e-4,3e-4  # these rates

One rate does not fit eight methods: AdamW moves every weight by about lr per step whatever the gradient's scale, and
a rate that suits SFT's dense, low-variance gradient can wreck a policy-gradient method's. A table at one shared rate
reports that rate's fit to each method as much as the method. So every method gets the same tuning budget:

    for each method m, for each rate η in tune.lr:  train m at η for tune.steps steps, once per seed in tune.seeds
                                                    score its final model greedily on the validation problems
    v(m, η) = mean over tune.seeds of validation accuracy
    η*(m) = argmax_η v(m, η)                         (ties: the smaller rate)
    η* at the grid's edge (tune.extend):             one more rate beyond it, the grid's step on that side
                                                    (η_0²/η_1 or η_k²/η_{k−1}), same steps and seeds; choose again;
                                                    `extend: N` repeats this up to N times, until η* is interior

and the comparison then runs every method at its η*(m), for every seed, scored on the test problems. The trials go
to OUT/tune/<label>@lr<η>/seed<k> (a comparison folder of their own; two processes sharing OUT split them by claim
files), their scores and compute (generated tokens with RFT's pool and every dropped sample, wall time with PPO's
critic) to OUT/tune/tune.csv, one row per trial and seed, and the report draws each method's sensitivity curve (validation accuracy
against rate) and its expected best validation accuracy against the number of trials (analysis.tuning; Dodge et al.
2019, "Show Your Work"). A trial that diverges (a non-finite loss) is a result, not a crash: it scores as the worst
of its method's trials and is marked `diverged`. A control that must change one thing only runs at its parent's η*
instead of trials of its own: `methods: {rft@thinned: {gc_share: 0.6, rate_of: rft}}` (gcframe.config.rate_of).
"""
from __future__ import annotations

import copy
import math
import time
from pathlib import Path

from gcframe.errors import UserError

TUNE_DIR = "tune"
CSV = "tune.csv"
MIN_RATES = 2


def check_spec(spec: dict) -> dict:
    """A tune section -> {lr: sorted rates, steps: int or None (train.steps), seeds: [int], extend: bool}; refused
    before anything trains: fewer than 2 rates, a rate <= 0, no seed, unknown keys. `seed: k` is `seeds: [k]`."""
    unknown = set(spec) - {"lr", "steps", "seed", "seeds", "extend", "eval_size", "prior"}
    if unknown:
        raise UserError(f"tune has unknown key(s) {', '.join(sorted(unknown))}: it takes lr (a list of rates), steps, "
                        "seeds (a list), extend (true/false or a number), eval_size and prior (a trials file)")
    rates = spec.get("lr")
    if not isinstance(rates, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates):
        raise UserError(f"tune.lr must be a list of learning rates like [1e-5, 3e-5, 1e-4, 3e-4], got {rates!r}: "
                        "give them in the config's tune section or as --tune RATES")
    rates = sorted({float(r) for r in rates})
    if len(rates) < MIN_RATES:
        raise UserError(f"tune.lr has {len(rates)} distinct rate(s): tuning needs at least {MIN_RATES} to choose "
                        "between (4 spanning 30x is a fair budget)")
    if rates[0] <= 0 or not all(math.isfinite(r) for r in rates):
        raise UserError(f"tune.lr must hold rates > 0, got {rates[0]:g}: a learning rate is a positive step size")
    if "seed" in spec and "seeds" in spec:
        raise UserError("tune has both seed and seeds: give seeds, a list like [0, 1]")
    seeds = spec["seeds"] if "seeds" in spec else [spec.get("seed", 0)]
    steps = spec.get("steps")
    if not isinstance(seeds, list) or not seeds:
        raise UserError(f"tune.seeds must be a non-empty list of seeds like [0, 1], got {seeds!r}")
    eval_size = spec.get("eval_size")
    for key, value, low in (("steps", steps, 1), ("eval_size", eval_size, 1), *(("seeds", s, 0) for s in seeds)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
            raise UserError(f"tune.{key} must hold integers >= {low}, got {value!r}")
    if len(set(seeds)) < len(seeds):
        raise UserError(f"tune.seeds lists a seed twice ({seeds}): each trial runs once per seed")
    extend = spec.get("extend", True)
    if not isinstance(extend, int) or (not isinstance(extend, bool) and extend < 0):
        raise UserError(f"tune.extend must be true, false or a number of extensions >= 0 (each one more rate beyond "
                        f"an edge, until the best rate is interior), got {extend!r}")
    prior = spec.get("prior")
    if prior is not None and not isinstance(prior, str):
        raise UserError(f"tune.prior must be the path of a trials file (tune_trials.csv), got {prior!r}")
    return {"lr": rates, "steps": steps, "seeds": seeds, "extend": extend, "eval_size": eval_size, "prior": prior}


def trial_problems(cfg, spec: dict) -> int:
    """The validation problems a trial is scored on: tune.eval_size (the runs' own evaluations may use fewer, so
    that a curve of many evaluations stays cheap), else train.eval_size; at most task.n_validation."""
    return min(spec.get("eval_size") or cfg.train.eval_size, cfg.task.n_validation)


def extensions(spec: dict) -> int:
    """How many times a best rate at the grid's edge is extended: true is once, false never, N up to N times."""
    return int(spec["extend"])


def edge_rates(chosen: dict, rates) -> dict:
    """{label: the one rate beyond the grid's edge} for every label whose chosen rate is the smallest or largest it
    has tried: the grid's own step on that side, e.g. [1.5e-5, 5e-5, 1.5e-4, 5e-4] at 5e-4 -> 5e-4 · (5e-4/1.5e-4)
    = 1.67e-3, at 1.5e-5 -> 1.5e-5 · (1.5e-5/5e-5) = 4.5e-6. `rates`: one grid for every label, or {label: the
    rates it has tried} (after an extension the tried grid is wider on that side)."""
    extra = {}
    for label, lr in chosen.items():
        tried = sorted(rates[label] if isinstance(rates, dict) else rates)
        if lr == tried[0]:
            extra[label] = tried[0] * tried[0] / tried[1]
        elif lr == tried[-1]:
            extra[label] = tried[-1] * tried[-1] / tried[-2]
    return extra


def followers(cfg, names: list[str]) -> dict:
    """{label: parent} of the labels that take a tuned parent's rate (`rate_of`), each parent among `names` and tuned
    itself, else one line (compare.py checks it before a base is trained)."""
    from gcframe.config import rate_of

    follow = {label: rate_of(cfg.methods, label) for label in names if rate_of(cfg.methods, label)}
    for label, parent in follow.items():
        if parent not in names or parent in follow:
            raise UserError(f"methods.{label}.rate_of is {parent}, which this comparison does not tune: run "
                            f"{parent} too (--methods), or remove rate_of to tune {label} on its own")
    return follow


def trial_label(label: str, lr: float) -> str:
    return f"{label}@lr{lr:g}"


def trial_config(cfg, label: str, lr: float, spec: dict):
    """cfg with a variant `<label>@lr<η>` that runs `label` at rate η for tune.steps steps, evaluated on validation
    at its start and end only (greedy: the score a choice is made on)."""
    from gcframe.config import label_options

    if not cfg.task.n_validation:
        raise UserError("--tune chooses rates on validation problems: set task.n_validation (>= 100) in the config")
    cfg = copy.deepcopy(cfg)
    _, opts, train = label_options(cfg.methods, label)
    train = {**train, "lr": lr, "eval_split": "validation", "eval_every": 0, "eval_points": 0, "eval_k": 0,
             "eval_size": trial_problems(cfg, spec)}
    if spec["steps"]:
        train["steps"] = spec["steps"]
    cfg.methods[trial_label(label, lr)] = {**opts, "train": train}
    return cfg


def tune(cfg, names: list[str], out: Path, run_cells, **ctx):
    """Run every method's trials (OUT/tune/), write tune.csv, and return cfg with each label's chosen rate in
    methods.<label>.train.lr. With two processes sharing OUT, each runs the trials it claims and waits for the
    other's before choosing (both choose the same)."""
    spec = ctx["args"].tune_spec
    acc = ctx["acc"]
    seeds = spec["seeds"]
    follow = followers(cfg, names)
    own = [label for label in names if label not in follow]
    acc.print(f"tuning: {len(spec['lr'])} rates ({', '.join(f'{r:g}' for r in spec['lr'])}) x {len(own)} "
              f"method(s), seed(s) {', '.join(map(str, seeds))}, scored on "
              f"{trial_problems(cfg, spec)} validation problems -> {out / TUNE_DIR}" +
              "".join(f"; {label} at {parent}'s rate" for label, parent in follow.items()))
    spec = {**spec, "prior_rows": prior_trials(cfg, spec, acc.print)}
    trials = [(label, lr) for label in own for lr in spec["lr"]]
    tcfg, results = _trials(cfg, trials, out / TUNE_DIR, spec, run_cells, ctx)
    chosen = choose(results)
    for _ in range(extensions(spec)):  # a best rate at the edge: one more rate on that side, the same steps and seeds
        tried = {label: [lr for (lab, lr) in results if lab == label] for label in chosen}
        extra = edge_rates(chosen, tried)
        if not extra:
            break
        acc.print("tuning: best at the edge of the rates tried, one more rate each: " + ", ".join(
            f"{label} {lr:g}" for label, lr in extra.items()))
        tcfg, more = _trials(tcfg, list(extra.items()), out / TUNE_DIR, spec, run_cells, ctx)
        results.update(more)
        chosen = choose(results)
    if acc.is_main_process:
        _write_csv(out / TUNE_DIR, tcfg, results, chosen, spec)
    cfg = copy.deepcopy(cfg)
    for label in names:
        parent = follow.get(label, label)
        opts = dict(cfg.methods.get(label) or {})
        opts["train"] = {**(opts.get("train") or {}), "lr": chosen[parent]}
        cfg.methods[label] = opts
        if label in follow:
            acc.print(f"{label:>12}: lr {chosen[parent]:g} ({parent}'s)")
            continue
        tried = sorted(lr for (lab, lr) in results if lab == label)
        acc.print(f"{label:>12}: lr {chosen[label]:g} (validation accuracy "
                  f"{results[(label, chosen[label])][0]:.3f}; " + ", ".join(
                      f"{lr:g}: {'diverged' if results[(label, lr)][1] == 'diverged' else format(results[(label, lr)][0], '.3f')}"
                      for lr in tried) + ")")
    return cfg


def _trials(cfg, trials: list, tdir: Path, spec: dict, run_cells, ctx) -> tuple:
    """(cfg with a variant per trial, {(label, lr): (mean validation accuracy over tune.seeds, status)}): runs the
    trials not yet finished, one cell (trial, seed) at a time, and waits for those another process runs."""
    for label, lr in trials:
        cfg = trial_config(cfg, label, lr, spec)
    cells = [(label, lr, seed) for label, lr in trials for seed in spec["seeds"]]
    pool = getattr(ctx["args"], "pool", None)  # compare.py --backend ray: each trial at each seed a Ray task
    if pool is not None:
        pool.note_trials(trials)  # each task rebuilds this cfg: every trial so far, in this order (run_unit)
        pool.run([("trial", *cell) for cell in cells if _result(tdir, cfg, *cell, spec=spec) is None], "tuning trial")
    for cell in cells:
        if _result(tdir, cfg, *cell, spec=spec) is None:
            _run_trial(tdir, cfg, *cell, run_cells, ctx)
    per_seed = _wait_for(tdir, cfg, cells, spec)
    results = {}
    for label, lr in trials:
        got = [per_seed[(label, lr, s)] for s in spec["seeds"]]
        diverged = any(status == "diverged" for _, status in got)
        results[(label, lr)] = (float("nan") if diverged else sum(a for a, _ in got) / len(got),
                                "diverged" if diverged else "ok")
    return cfg, results


def _write_csv(tdir: Path, tcfg, results: dict, chosen: dict, spec: dict) -> None:
    """OUT/tune/tune.csv: one row per trial and seed, its validation accuracy and compute; `chosen` marks the rows
    of each label's chosen rate, `mean_val_accuracy` is what the choice was made on."""
    import pandas as pd

    rows = []
    for (label, lr), (mean, status) in results.items():
        for seed in spec["seeds"]:
            acc_, st = _result(tdir, tcfg, label, lr, seed, spec=spec)
            run = tdir / trial_label(label, lr) / f"seed{seed}"
            prior = spec.get("prior_rows", {}).get((label, lr, seed))
            rows.append({"method": label, "lr": lr, "seed": seed, "val_accuracy": acc_, "status": st,
                         "mean_val_accuracy": mean, "chosen": chosen[label] == lr,
                         "edge": lr < spec["lr"][0] or lr > spec["lr"][-1],
                         **(compute(run) if run.is_dir() or prior is None else
                            {k: prior[k] for k in ("gen_tokens", "dropped_tokens", "pool_tokens", "time_s", "critic_s")})})
    pd.DataFrame(rows).to_csv(tdir / CSV, index=False)


def compute(run: Path) -> dict:
    """What a trial cost, from its metrics.jsonl: generated tokens (gen_tokens counts every sampled token, those
    dropped by dynamic sampling, @filled's extra draws and ReMax's greedy rollouts included; RFT's pool, sampled
    from the base before step 1, is added), of which dropped (generated, never trained on), RFT's pool alone, and
    wall time (s; PPO's critic updates included, and also given alone)."""
    from gcframe.tracking.log import read_jsonl

    path = run / "metrics.jsonl"
    rows = [r for r in (read_jsonl(path) if path.is_file() else []) if "loss" in r]
    if not rows:
        return {"gen_tokens": 0, "dropped_tokens": 0, "pool_tokens": 0, "time_s": 0.0, "critic_s": 0.0}
    pool = sum(r.get("pool_gen_tokens", 0.0) for r in rows)
    dropped = sum(v for r in rows for k, v in r.items() if k.endswith("dropped_tokens"))
    return {"gen_tokens": int(rows[-1]["gen_tokens"] + pool), "dropped_tokens": int(dropped), "pool_tokens": int(pool),
            "time_s": round(rows[-1]["time_s"], 3), "critic_s": round(sum(r.get("time_critic", 0.0) for r in rows), 3)}


# -- trials that outlive a session --------------------------------------------------------------------------------
# A tuning longer than a session keeps what it finished: `python experiments/tune.py --finished OUT --to FILE` writes
# every finished trial of OUT/tune/ with the fingerprint of the base they started from (its model.path files), and
# `tune.prior: FILE` in the config makes a later run count those trials as done where its base has the same
# fingerprint (the same stage made again on the same kind of machine); a different base re-runs them all.

PRIOR_COLUMNS = ["method", "lr", "seed", "steps", "val_accuracy", "status", "base", "gen_tokens", "dropped_tokens",
                 "pool_tokens", "time_s", "critic_s"]


def base_digest(model_path) -> str:
    """sha256 (12 hex digits) over the names and bytes of the weight files (*.safetensors, *.bin) under model.path,
    the base every trial starts from (not its README or adapter config, which name the folders of the machine that
    made it); "" without a model folder (the tiny model's stage-1 base: prior trials are not used for it)."""
    import hashlib

    folder = Path(model_path) if model_path and not str(model_path).startswith("package:") else None
    if folder is None or not folder.is_dir():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".safetensors", ".bin")):
        h.update(str(f.relative_to(folder)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def finished_trials(out: Path, steps: int) -> "pd.DataFrame":
    """Every finished trial of OUT/tune/ as PRIOR_COLUMNS rows (a diverged one as status `diverged`)."""
    import pandas as pd
    import yaml

    from gcframe.tracking import checkpoint

    tdir = Path(out) / TUNE_DIR
    model = (yaml.safe_load((Path(out) / "config.yaml").read_text()).get("model") or {}).get("path")
    base, rows = base_digest(model), []
    for run in sorted(tdir.glob("*@lr*/seed*")):
        label, lr = run.parent.name.rsplit("@lr", 1)
        diverged = (run / "DIVERGED").is_file()
        res = None if diverged else checkpoint.finished(run, steps)
        if res is None and not diverged:
            continue
        rows.append({"method": label, "lr": float(lr), "seed": int(run.name[4:]), "steps": steps,
                     "val_accuracy": float("nan") if diverged else float(res["final_accuracy"]),
                     "status": "diverged" if diverged else "ok", "base": base, **compute(run)})
    return pd.DataFrame(rows, columns=PRIOR_COLUMNS)


def prior_trials(cfg, spec: dict, say=print) -> dict:
    """{(label, lr, seed): row} of tune.prior's trials that this tuning would run itself (same steps) from the same
    base; {} without tune.prior or when the file is not there yet."""
    import pandas as pd

    if not spec.get("prior"):
        return {}
    path = Path(spec["prior"])
    path = path if path.is_absolute() else Path(__file__).resolve().parents[1] / path
    if not path.is_file():
        say(f"tuning: no prior trials yet ({spec['prior']} is not there): every trial runs here")
        return {}
    df = pd.read_csv(path)
    base, steps = base_digest(cfg.model.path), spec["steps"] or cfg.train.steps
    same = df[(df["base"].astype(str) == base) & (df["steps"] == steps)] if base else df.iloc[:0]
    say(f"tuning: {len(same)} of {len(df)} prior trials in {spec['prior']} count as done" +
        ("" if len(same) == len(df) else f" (the others started from another base than this one, {base or 'none'}, "
         "or ran another number of steps: they run again)"))
    return {(r.method, float(r.lr), int(r.seed)): r._asdict() for r in same.itertuples(index=False)}


def _run_trial(tdir: Path, tcfg, label: str, lr: float, seed: int, run_cells, ctx) -> None:
    """One trial at one seed; one whose loss turned non-finite is recorded as diverged (RUN/DIVERGED holds why)."""
    tl = trial_label(label, lr)
    try:
        run_cells(tdir, tcfg, [tl], [seed], wait_line=False, **ctx)
    except UserError as e:
        if "non-finite" not in str(e):
            raise
        run = tdir / tl / f"seed{seed}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "DIVERGED").write_text(str(e) + "\n")
        ctx["acc"].print(f"{tl} seed {seed}: diverged (recorded; it scores as its method's worst trial)")


def run_unit(cfg, out: Path, label: str, lr: float, seed: int, run_cells, ctx) -> None:
    """One trial at one seed in this process: a Ray task of compare.py --backend ray (`--unit trial:...`)."""
    spec = ctx["args"].tune_spec
    if not spec:
        raise UserError(f"--unit trial:{label}:{lr:g}:{seed}: {out} was not started with --tune")
    import json

    noted = out / "ray-logs" / "trials.json"  # the driver's trials so far, in its order: the same cfg, config.yaml
    tcfg = cfg
    for lab, rate in (json.loads(noted.read_text()) if noted.is_file() else [(label, lr)]):
        tcfg = trial_config(tcfg, lab, float(rate), spec)
    _run_trial(out / TUNE_DIR, tcfg, label, lr, seed, run_cells, ctx)


def _result(tdir: Path, tcfg, label: str, lr: float, seed: int, spec: dict | None = None) -> tuple[float, str] | None:
    """(validation accuracy, "ok" | "diverged") of a finished trial (in its folder, else among the prior trials from
    the same base), or None while it is not finished."""
    from gcframe.config import label_options
    from gcframe.tracking import checkpoint

    tl = trial_label(label, lr)
    run = tdir / tl / f"seed{seed}"
    if (run / "DIVERGED").is_file():
        return float("nan"), "diverged"
    res = checkpoint.finished(run, label_options(tcfg.methods, tl)[2].get("steps", tcfg.train.steps))
    prior = (spec or {}).get("prior_rows", {}).get((label, lr, seed))
    if res is None and prior is not None:
        return float(prior["val_accuracy"]), prior["status"]
    return None if res is None else (float(res["final_accuracy"]), "ok")


def _wait_for(tdir: Path, tcfg, cells: list, spec: dict, poll_s: float = 10.0) -> dict:
    """Every cell's result, waiting for those another process is running."""
    while True:
        results = {c: _result(tdir, tcfg, *c, spec=spec) for c in cells}
        if all(r is not None for r in results.values()):
            return results
        time.sleep(poll_s)


def choose(results: dict) -> dict:
    """{label: the rate with the best validation accuracy}; a diverged trial is worse than any finished one; ties go
    to the smaller rate (the more conservative step)."""
    best: dict = {}
    for (label, lr), (acc, status) in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        score = -1.0 if status == "diverged" else acc
        if label not in best or score > best[label][1]:
            best[label] = (lr, score)
    return {label: lr for label, (lr, _) in best.items()}


def main(argv=None) -> int:
    """python experiments/tune.py --finished OUT --to FILE: the finished trials of OUT/tune/ into FILE (tune.prior)."""
    import argparse

    p = argparse.ArgumentParser(description="Write the finished tuning trials of a comparison folder to a file that "
                                            "a later run reads as tune.prior.")
    p.add_argument("--finished", required=True, metavar="OUT", help="a compare.py --tune folder")
    p.add_argument("--to", required=True, metavar="FILE", help="the trials file (CSV) to write")
    args = p.parse_args(argv)
    import yaml

    conf = Path(args.finished) / "config.yaml"
    if not conf.is_file():
        raise UserError(f"{conf} is not there: give a folder made by compare.py --tune")
    raw = yaml.safe_load(conf.read_text()) or {}
    spec = raw.get("tune") or {}
    if not spec:
        raise UserError(f"{conf} has no tune section: give a folder made by compare.py --tune")
    steps = spec.get("steps") or raw["train"]["steps"]
    df = finished_trials(Path(args.finished), steps)
    df.to_csv(args.to, index=False)
    print(f"{len(df)} finished trial(s) of {args.finished}/tune written to {args.to}")
    return 0


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gcframe.errors import cli_entry

    sys.exit(cli_entry(main)())
