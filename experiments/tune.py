"""Each method at its own learning rate, chosen on the validation problems at an equal budget (`compare.py --tune`).

    python experiments/compare.py --tune                      # the config's tune section (configs/default.yaml)
    python experiments/compare.py --tune 1e-5,3e-5,1e-4,3e-4  # these rates

One rate does not fit eight methods: AdamW moves every weight by about lr per step whatever the gradient's scale, and
a rate that suits SFT's dense, low-variance gradient can wreck a policy-gradient method's. A table at one shared rate
reports that rate's fit to each method as much as the method. So every method gets the same tuning budget:

    for each method m, for each rate η in tune.lr:  train m at η for tune.steps steps, seed tune.seed
                                                    score its final model greedily on the validation problems
    η*(m) = argmax_η  validation accuracy           (ties: the smaller rate)

and the comparison then runs every method at its η*(m), for every seed, scored on the test problems. The trials go
to OUT/tune/<label>@lr<η>/seed<k> (a comparison folder of their own; two processes sharing OUT split them by claim
files), their scores to OUT/tune/tune.csv, and the report draws each method's sensitivity curve (validation accuracy
against rate) and its expected best validation accuracy against the number of trials (analysis.tuning; Dodge et al.
2019, "Show Your Work"). A trial that diverges (a non-finite loss) is a result, not a crash: it scores as the worst
of its method's trials and is marked `diverged`.
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
    """A tune section -> {lr: sorted rates, steps: int or None (train.steps), seed: int}; refused before anything
    trains: fewer than 2 rates, a rate <= 0, unknown keys."""
    unknown = set(spec) - {"lr", "steps", "seed"}
    if unknown:
        raise UserError(f"tune has unknown key(s) {', '.join(sorted(unknown))}: it takes lr (a list of rates), steps "
                        "and seed")
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
    steps, seed = spec.get("steps"), spec.get("seed", 0)
    for key, value, low in (("steps", steps, 1), ("seed", seed, 0)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
            raise UserError(f"tune.{key} must be an integer >= {low}, got {value!r}")
    return {"lr": rates, "steps": steps, "seed": seed}


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
             "eval_size": min(cfg.train.eval_size, cfg.task.n_validation)}
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
    tcfg = cfg
    for label in names:
        for lr in spec["lr"]:
            tcfg = trial_config(tcfg, label, lr, spec)
    trials = [(label, lr) for label in names for lr in spec["lr"]]
    acc.print(f"tuning: {len(spec['lr'])} rates ({', '.join(f'{r:g}' for r in spec['lr'])}) x {len(names)} "
              f"method(s), seed {spec['seed']}, scored on {min(cfg.train.eval_size, cfg.task.n_validation)} "
              f"validation problems -> {out / TUNE_DIR}")
    tdir = out / TUNE_DIR
    for label, lr in trials:
        if _result(tdir, tcfg, label, lr, spec) is None:
            _run_trial(tdir, tcfg, label, lr, spec, run_cells, ctx)
    results = _wait_for(tdir, tcfg, trials, spec)
    chosen = choose(results)
    if acc.is_main_process:
        import pandas as pd

        df = pd.DataFrame([{"method": label, "lr": lr, "val_accuracy": acc_, "status": status,
                            "chosen": chosen[label] == lr} for (label, lr), (acc_, status) in results.items()])
        df.to_csv(tdir / CSV, index=False)
    cfg = copy.deepcopy(cfg)
    for label in names:
        opts = dict(cfg.methods.get(label) or {})
        opts["train"] = {**(opts.get("train") or {}), "lr": chosen[label]}
        cfg.methods[label] = opts
        acc.print(f"{label:>12}: lr {chosen[label]:g} (validation accuracy "
                  f"{results[(label, chosen[label])][0]:.3f}; " + ", ".join(
                      f"{lr:g}: {'diverged' if results[(label, lr)][1] == 'diverged' else format(results[(label, lr)][0], '.3f')}"
                      for lr in spec["lr"]) + ")")
    return cfg


def _run_trial(tdir: Path, tcfg, label: str, lr: float, spec: dict, run_cells, ctx) -> None:
    """One trial; a trial whose loss turned non-finite is recorded as diverged (RUN/DIVERGED holds the message)."""
    tl = trial_label(label, lr)
    try:
        run_cells(tdir, tcfg, [tl], [spec["seed"]], wait_line=False, **ctx)
    except UserError as e:
        if "non-finite" not in str(e):
            raise
        run = tdir / tl / f"seed{spec['seed']}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "DIVERGED").write_text(str(e) + "\n")
        ctx["acc"].print(f"{tl} seed {spec['seed']}: diverged (recorded; it scores as its method's worst trial)")


def _result(tdir: Path, tcfg, label: str, lr: float, spec: dict) -> tuple[float, str] | None:
    """(validation accuracy, "ok" | "diverged") of a finished trial, or None while it is not finished."""
    from gcframe.config import label_options
    from gcframe.tracking import checkpoint

    tl = trial_label(label, lr)
    run = tdir / tl / f"seed{spec['seed']}"
    if (run / "DIVERGED").is_file():
        return float("nan"), "diverged"
    res = checkpoint.finished(run, label_options(tcfg.methods, tl)[2].get("steps", tcfg.train.steps))
    return None if res is None else (float(res["final_accuracy"]), "ok")


def _wait_for(tdir: Path, tcfg, trials: list, spec: dict, poll_s: float = 10.0) -> dict:
    """Every trial's result, waiting for those another process is running."""
    while True:
        results = {t: _result(tdir, tcfg, *t, spec) for t in trials}
        missing = [t for t, r in results.items() if r is None]
        if not missing:
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
