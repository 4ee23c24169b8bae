"""A compare.py output folder as DataFrames (`Runs`), and the markdown table (and cell format) every analysis
prints.

    runs = Runs("runs/compare")      # runs.train, runs.eval, runs.configs, runs.gc, runs.methods, runs.summary

The report (`analysis.report`), what the logs show (`analysis.why`), equal compute (`analysis.matched`) and the §5.2
map (`analysis.sweep`) all read a run folder through this one class.
"""
from __future__ import annotations

import json
import math
import os
import shlex
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
import yaml
from scipy import stats

from gcframe.errors import UserError, resume_command
from gcframe.evaluate.rescore import check_same_task
from gcframe.tracking.log import read_jsonl


TEACHER = "teacher"
"""The teacher's name in problems.csv.gz (the table's row: "teacher (reference)"): the model the distilling methods
learn from, scored as a reference, not a method trained here."""


# -- loading ---------------------------------------------------------------------------------------------------
class Runs:
    """Everything the report reads: training rows, evaluation rows, per-run configs, the GC view."""

    def __init__(self, out: Path):
        self.out = Path(out)
        files = sorted(f for f in self.out.glob("*/seed*/metrics.jsonl") if f.parent.name[4:].isdigit())
        # a run folder without metrics.jsonl (the logger creates it with the folder): damaged, never dropped silently
        damaged = [f"{d}: metrics.jsonl is missing (without its rows the run would leave the report)"
                   for d in sorted(self.out.glob("*/seed*")) if d.is_dir() and d.name[4:].isdigit()
                   and not (d / "metrics.jsonl").is_file()]
        if not files and not damaged:
            raise UserError(f"no runs under '{out}': expected {out}/<method>/seed<k>/metrics.jsonl "
                            "(the output folder of experiments/compare.py)")
        rows, self.configs = [], {}
        self.run_notes: list[str] = []  # runs still going or stopped, each with where it got to (the report says)
        from gcframe.evaluate.problems import FILE

        with_problems = any((f.parent / FILE).is_file() for f in files)  # then every run that evaluated has one
        for f in files:
            method, seed = f.parent.parent.name, int(f.parent.name.removeprefix("seed"))
            own = read_jsonl(f)
            rows += [{**r, "method": method, "seed": seed} for r in own]
            cfg_file = f.parent / "config.yaml"
            self.configs[(method, seed)] = yaml.safe_load(cfg_file.read_text()) if cfg_file.exists() else {}
            what, note = check_run(f.parent, own, self.configs[(method, seed)], with_problems)
            if what:
                damaged.append(f"{f.parent}: {what}")
            if note:
                self.run_notes.append(f"{method} seed {seed}: {note}")
        if damaged:
            raise UserError(damaged_line(damaged, self.out))
        listed = yaml.safe_load((self.out / "config.yaml").read_text()) if (self.out / "config.yaml").is_file() else {}
        for label in (listed or {}).get("methods_run") or []:  # compare.py's runs: one without a folder is named
            for seed in listed.get("seeds") or []:
                if not (self.out / label / f"seed{seed}").is_dir():
                    self.run_notes.append(f"{label} seed {seed}: not started (no run folder; compare.py --resume "
                                          "trains it)")
        df = pd.DataFrame(rows)
        if df.empty:
            raise UserError(f"the runs under '{out}' have logged nothing yet: wait for the first step")
        is_eval = df["eval_accuracy"].notna() if "eval_accuracy" in df else pd.Series(False, index=df.index)
        # a resumed run may log a step twice: keep the latest row
        self.eval = df[is_eval].drop_duplicates(["method", "seed", "step"], keep="last").dropna(axis=1, how="all")
        self.train = df[~is_eval].drop_duplicates(["method", "seed", "step"], keep="last").dropna(axis=1, how="all")
        summary = self.out / "summary.csv"
        try:
            self.summary = pd.read_csv(summary) if summary.exists() else pd.DataFrame()
        except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):  # binary, empty, torn
            raise UserError(f"'{summary}' is damaged (binary, empty or cut: not a CSV pandas can read): delete it, "
                            f"and compare.py writes it again from the run folders: {resume_command(self.out)}") \
                from None
        order = list(dict.fromkeys(self.summary["method"])) if "method" in self.summary else []
        self.methods = [m for m in order if m in set(df["method"])] + sorted(set(df["method"]) - set(order))
        self.n_runs = df.groupby(["method", "seed"]).ngroups
        check_same_task([f.parent for f in files], list(self.configs.values()), "a report compares the runs of one "
                        "task: report each task's runs from a folder of their own")
        self.palette = palette(self.methods)
        gc_file = self.out / "gc_view.json"
        self.gc = json.loads(gc_file.read_text()) if gc_file.exists() else None
        self._outcomes = None  # outcomes(), read on first use
        self.notes: list[str] = []  # what a figure leaves out and why (drawn in the figure, listed in summary.md)
        any_cfg = next(iter(self.configs.values()), {}) or {}
        self.k = (any_cfg.get("train") or {}).get("eval_k", "k")
        pretrained = bool((any_cfg.get("model") or {}).get("path"))  # a loaded model is its own base: no stage 1
        self.base_label = "base model" if pretrained else "SFT base"

    def omitted(self, ax, figure: str, shown, reason: str) -> list[str]:
        """Say in the panel (and in summary.md) which methods it does not show, and why."""
        missing = [m for m in self.methods if m not in set(shown)]
        if missing:
            ax.text(0.01, 0.01, f"not shown: {', '.join(missing)}\n({reason})", transform=ax.transAxes, fontsize=6,
                    va="bottom", ha="left", color="dimgrey")
            self.notes.append(f"{figure}: not shown: {', '.join(missing)} ({reason})")
        return missing

    def final_eval(self) -> pd.DataFrame:
        """The last evaluation row of every run (the end of training, or as far as it got)."""
        return self.eval.sort_values("step").groupby(["method", "seed"], sort=False).tail(1)

    def start_eval(self) -> pd.DataFrame:
        """The step-0 evaluation rows: the SFT base, evaluated by every run with that run's seed."""
        return self.eval[self.eval["step"] == 0]

    def outcomes(self) -> list[tuple[pd.DataFrame, list[str], str, int]]:
        """Per-problem outcomes of every run's final model, for the paired comparison (analysis.paired) -> a list of
        (rows of method, seed, problem and metric columns; those metrics; where they come from; k, the samples per
        problem behind maj@k and pass@k). Greedy and sampled
        metrics each from the largest set every run was scored on: a re-scoring (RUN/rescored/final-n<N>-k<K>.jsonl,
        `python -m gcframe.evaluate`), else the last evaluation of RUN/problems.jsonl. Read once."""
        if self._outcomes is None:
            self._outcomes = final_outcomes(self.out, self.methods)
        return self._outcomes

    def base_outcomes(self) -> pd.DataFrame | None:
        """The base's per-problem outcomes on the problems and samples of the greedy re-scoring (`outcomes()[0]`),
        under the method name `base_label`, repeated for each seed of the runs: one model, where every run started
        (`python -m gcframe.evaluate OUT --base` writes OUT/rescored/base-n<N>-k<K>.jsonl); or, with sft_base.per_seed,
        each seed's own base (base-seed<s>-n<N>-k<K>.jsonl). None without one."""
        return self._reference("base", self.base_label)

    def teacher_outcomes(self) -> pd.DataFrame | None:
        """The teacher's per-problem outcomes, as `base_outcomes` reads the base's, under the method name TEACHER:
        the model the distilling runs learn from, scored by `python -m gcframe.evaluate OUT --base` into
        OUT/rescored/teacher-n<N>-k<K>.jsonl (or each seed's, teacher-seed<s>-...). None without one."""
        return self._reference("teacher", TEACHER)

    def _reference(self, name: str, label: str) -> pd.DataFrame | None:
        """A model scored beside the runs (OUT/rescored/<name>[-seed<s>]-n<N>-k<K>.jsonl) on the greedy re-scoring's
        problems and samples, under the method name `label`, one frame per seed of the runs."""
        from gcframe.evaluate.problems import RESCORED

        picks = self.outcomes()
        if not picks or not picks[0][2].startswith(RESCORED_SOURCE):
            return None
        frame, _, _, k = picks[0]
        seeds = sorted(int(s) for s in frame["seed"].unique())
        n = frame["problem"].nunique()
        own = {s: self.out / RESCORED / f"{name}-seed{s}-n{n}-k{k}.jsonl" for s in seeds}  # one per seed
        if all(f.is_file() for f in own.values()):
            return pd.concat([_outcome_frame(rescored_rows(own[s]), label, s) for s in seeds], ignore_index=True)
        f = self.out / RESCORED / f"{name}-n{n}-k{k}.jsonl"
        if not f.is_file():
            return None
        rows = rescored_rows(f)
        one = pd.concat([_outcome_frame(rows, label, s) for s in seeds], ignore_index=True)
        one.attrs["one_model"] = True  # the same rows under every seed: one value, no spread over seeds
        return one

    def eval_split(self) -> str:
        """Which problems the runs' evaluations while training used (train.eval_split): "test" or "validation"."""
        return ((next(iter(self.configs.values()), {}) or {}).get("train") or {}).get("eval_split", "test")

    def reward_source(self, method: str, seed: int) -> str:
        return ((self.configs.get((method, seed)) or {}).get("train") or {}).get("reward", "verifier")



# -- damaged run folders ---------------------------------------------------------------------------------------
def cut_line(path: Path) -> bool:
    """Whether the file's last line is cut (not a whole JSON object): a crash mid-write, or a copy cut short. Only
    the file's tail is read."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 65536))
        tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    if not tail.strip():
        return False
    try:
        json.loads(tail)
    except ValueError:
        return True
    return False


def check_run(run: Path, rows: list[dict], cfg: dict, problems_expected: bool) -> tuple[str | None, str | None]:
    """What is wrong with one run folder, and what the report should say about it -> (damage, note).

    Damage (the report refuses: it would put numbers of different steps side by side): a finished run (final/
    exists, or its last evaluation is of its config's train.steps) whose metrics.jsonl ends in a cut line; a run
    with final/ whose last evaluation in metrics.jsonl is not of train.steps; problems.jsonl's last evaluation of
    another step than metrics.jsonl's, or with fewer rows than its others (cut); problems.jsonl missing where the
    other runs of the folder have theirs. Note: a run that has not finished (still going, or stopped: --resume
    continues it), with the step it got to, and a cut last line that was skipped."""
    from gcframe.evaluate.problems import FILE

    steps = (cfg.get("train") or {}).get("steps")
    evals = sorted({r["step"] for r in rows if "eval_accuracy" in r})
    last = evals[-1] if evals else None
    has_final = (run / "final").is_dir()
    finished = has_final or (steps is not None and last == steps)
    cut = cut_line(run / "metrics.jsonl")
    if finished and cut:
        return "metrics.jsonl ends in a cut line although the run finished (the file was cut)", None
    if has_final and steps is not None and last != steps:
        return (f"metrics.jsonl's last evaluation is of step {last} but the run finished {steps} steps (final/ "
                "exists): the file was cut"), None
    problems = run / FILE
    if problems.is_file():
        counts = Counter(r["step"] for r in read_jsonl(problems))
        plast = max(counts, default=None)
        if plast != last:
            return (f"{FILE}'s last evaluation is of step {plast} but metrics.jsonl's of step {last}: one of them "
                    "was cut"), None
        if plast is not None and (counts[plast] < max(counts.values()) or (finished and cut_line(problems))):
            return (f"{FILE} holds {counts[plast]} rows for the evaluation of step {plast} and "
                    f"{max(counts.values())} for another: the file was cut"), None
    elif problems_expected and evals:
        return f"{FILE} is missing (the other runs have theirs): without it the run leaves the paired test", None
    notes = []
    if not finished and steps is not None:
        notes.append(f"not finished: its last evaluation is of step {last} of {steps} (still running, or stopped: "
                     "compare.py --resume continues it)")
    if cut:
        notes.append("its cut last line of metrics.jsonl is skipped (a run still writing, or stopped mid-line)")
    return None, "; ".join(notes) or None


def damaged_line(damaged: list[str], out: Path) -> str:
    """The one line that refuses a folder with damaged runs: each run and what is wrong, and the fix."""
    n = len(damaged)
    return (f"{n} damaged run folder{'s' if n > 1 else ''}: {'; '.join(damaged)}; restore the file"
            f"{'s' if n > 1 else ''} from a copy, or delete {'those run folders' if n > 1 else 'the run folder'} "
            f"and train {'them' if n > 1 else 'it'} again with {resume_command(out)}")


SAMPLED = ["majk", "passk", "pass1"]
RESCORED_SOURCE = "final models re-scored"  # how final_outcomes describes a re-scoring (analysis.report reads it)


def _outcome_frame(rows: list[dict], method: str, seed: int) -> pd.DataFrame:
    """Per-problem rows -> method, seed, problem, greedy (0/1), index (where every row records its place among the
    task's problems: analysis.findings names a chat prompt's problem by it) and, where k samples were drawn, majk,
    passk, pass1."""
    df = pd.DataFrame(rows)
    out = df[["problem"]].assign(method=method, seed=seed, greedy=df["greedy_correct"].astype(float))
    if "index" in df and df["index"].notna().all():  # the problem's place among the task's problems (`problems`)
        out = out.assign(index=df["index"].astype(int))
    if "k_correct" in df and df["k_correct"].notna().all():
        out = out.assign(majk=df["maj_correct"].astype(float), passk=(df["k_correct"] > 0).astype(float),
                         pass1=df["k_correct"] / df["k"], k=df["k"].astype(int))
    return out


def _sources(out: Path, methods: list[str] | None, train: bool = True,
             finished: bool = False) -> tuple[list[Path], dict]:
    """The runs of a compare.py folder that have per-problem outcomes, and where each has them -> (runs,
    {(n, k) of a re-scoring RUN/rescored/final-n<N>-k<K>.jsonl, or "train" (the last evaluation of
    RUN/problems.jsonl, read only when `train`): {run: file or rows}}). `finished`: only runs whose final model is
    written (RUN/final), so that a comparison still training gives its finished runs (a pilot's)."""
    from gcframe.evaluate.problems import FILE, RESCORED

    runs = sorted(p for p in Path(out).glob("*/seed*") if p.is_dir() and p.name[4:].isdigit())
    runs = [r for r in runs if (methods is None or r.parent.name in methods) and (r / FILE).is_file()
            and (not finished or (r / "final").is_dir())]
    sources = {}  # (n, k) or "train" -> {run: rows}
    for r in runs:
        for f in (r / RESCORED).glob("final-n*-k*.jsonl"):
            n, k = (int(x[1:]) for x in f.stem.split("-")[-2:])
            sources.setdefault((n, k), {})[r] = f
        if not train:
            continue
        rows = read_jsonl(r / FILE)
        last = max((x["step"] for x in rows), default=0)
        if last:  # a run that has evaluated only its base has nothing to compare yet
            sources.setdefault("train", {})[r] = [x for x in rows if x["step"] == last]
    return runs, sources


def rescored_rows(f: Path) -> list[dict]:
    """The rows of a re-scoring (`python -m gcframe.evaluate`: RUN/rescored/final-n<N>-k<K>.jsonl, or the base's or
    a teacher's in OUT/rescored/), refused in one line naming the file where they are fewer than the N problems its
    name says: `gcframe.evaluate` writes all N at once (a temporary file renamed), so a shorter file was torn or cut
    after (read_jsonl skips a torn last line), and the paired test would report it as a model scored on other
    problems than the rest."""
    rows = read_jsonl(f)
    n, k = (int(x[1:]) for x in f.stem.split("-")[-2:])
    held = len({r.get("problem") for r in rows})
    if held < n:
        reference = not f.name.startswith("final-")  # the base's or a teacher's, beside the runs
        out = f.parent.parent if reference else f.parent.parent.parent.parent
        again = shlex.join(["python", "-m", "gcframe.evaluate", os.path.abspath(out), "--problems", str(n), "--k",
                            str(k), *(["--base"] if reference else [])])
        raise UserError(f"'{f}' is damaged: it holds {held} of the {n} problems its name says (torn or cut after it "
                        f"was written); delete it and score it again ({again}: what is scored is kept), or restore it "
                        "from a copy")
    return rows


def partial_rescorings(out: Path, methods: list[str] | None = None) -> list[str]:
    """The re-scorings (`python -m gcframe.evaluate`) that not every run has, which the paired test cannot use:
    one line each, naming the runs without it and the command that scores them (the ones done are kept)."""
    runs, sources = _sources(out, methods, train=False)
    out_lines = []
    for (n, k), have in sorted(sources.items(), reverse=True):
        missing = [r for r in runs if r not in have]
        if not missing:
            continue
        names = ", ".join(f"{r.parent.name} seed {r.name[4:]}" for r in missing)
        out_lines.append(f"the re-scoring on {n} problems (k = {k}) is left out: {len(have)} of {len(runs)} runs "
                         f"have it, not {names}; score them with python -m gcframe.evaluate "
                         f"{shlex.quote(os.path.abspath(out))} --problems {n} --k {k}")
    return out_lines


def final_outcomes(out: Path, methods: list[str] | None = None, finished: bool = False) -> list[tuple]:
    """`Runs.outcomes` of a compare.py folder (see there); `finished`: of its finished runs only (`_sources`)."""
    runs, sources = _sources(out, methods, finished=finished)
    if not runs:
        return []
    common = {key: v for key, v in sources.items() if len(v) == len(runs)}

    def frame(key) -> pd.DataFrame:
        return pd.concat([_outcome_frame(rescored_rows(v) if key != "train" else v, r.parent.name, int(r.name[4:]))
                          for r, v in common[key].items()], ignore_index=True)

    def described(key, n) -> str:
        if key == "train":
            return f"the last evaluation of each run, {n} held-out problems"
        return f"{RESCORED_SOURCE} on {key[0]} held-out problems" + (f", {key[1]} samples each" if key[1] else "")

    rescored = sorted((k for k in common if k != "train"), reverse=True)
    picks = []
    greedy_key = rescored[0] if rescored else ("train" if "train" in common else None)
    if greedy_key is not None:
        f = frame(greedy_key)
        picks.append((f, ["greedy"] + [m for m in SAMPLED if m in f], described(greedy_key, f["problem"].nunique()),
                      int(f["k"].max()) if "k" in f else 0))
    sampled = [k for k in rescored if k[1]] + (["train"] if "train" in common else [])
    if picks and not [m for m in SAMPLED if m in picks[0][0]]:  # greedy-only re-scoring: sampled metrics elsewhere
        for key in sampled:
            f = frame(key)
            if all(m in f for m in SAMPLED):
                picks.append((f, SAMPLED, described(key, f["problem"].nunique()), int(f["k"].max())))
                break
    return picks


def palette(methods: list[str]) -> dict:
    """A distinct colour per method: tab10 up to 10, tab20 up to 20 (a sweep's variants), then evenly spaced hues
    (tab10 itself repeats from the 11th on)."""
    n = max(len(methods), 1)
    name = "tab10" if n <= 10 else "tab20" if n <= 20 else "husl"
    return dict(zip(methods, sns.color_palette(name, n)))


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(no runs)\n"
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def fmt(x, spec: str = "{:.2f}") -> str:
    """A number for a table cell, '–' where there is none (None or NaN)."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else spec.format(x)


def spread(values, spec: str = "{:.3f}") -> str:
    """'mean ± half-width of its 95% t-interval' over the values (seeds); one value, or values all equal (greedy
    accuracy of one base, no tokens generated): the value alone (a table's seeds column says how many); none: '–'."""
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return "–"
    head = spec.format(float(np.mean(v)))
    if len(v) < 2 or math.isclose(max(v), min(v), rel_tol=1e-9, abs_tol=1e-12):
        return head
    t = float(stats.t.ppf(0.975, len(v) - 1))
    return f"{head} ± {spec.format(t * float(np.std(v, ddof=1)) / math.sqrt(len(v))).lstrip('+')}"
