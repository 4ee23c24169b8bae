"""A compare.py output folder as DataFrames (`Runs`), and the markdown table (and cell format) every analysis
prints.

    runs = Runs("runs/compare")      # runs.train, runs.eval, runs.configs, runs.gc, runs.methods, runs.summary

The report (`analysis.report`), what the logs show (`analysis.why`), equal compute (`analysis.matched`) and the §5.2
map (`analysis.sweep`) all read a run folder through this one class.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
import yaml
from scipy import stats

from gcframe.errors import UserError
from gcframe.tracking.log import read_jsonl


# -- loading ---------------------------------------------------------------------------------------------------
class Runs:
    """Everything the report reads: training rows, evaluation rows, per-run configs, the GC view."""

    def __init__(self, out: Path):
        self.out = Path(out)
        files = sorted(f for f in self.out.glob("*/seed*/metrics.jsonl") if f.parent.name[4:].isdigit())
        if not files:
            raise UserError(f"no runs under '{out}': expected {out}/<method>/seed<k>/metrics.jsonl "
                            "(the output folder of experiments/compare.py)")
        rows, self.configs = [], {}
        for f in files:
            method, seed = f.parent.parent.name, int(f.parent.name.removeprefix("seed"))
            rows += [{**r, "method": method, "seed": seed} for r in read_jsonl(f)]
            cfg_file = f.parent / "config.yaml"
            self.configs[(method, seed)] = yaml.safe_load(cfg_file.read_text()) if cfg_file.exists() else {}
        df = pd.DataFrame(rows)
        if df.empty:
            raise UserError(f"the runs under '{out}' have logged nothing yet: wait for the first step")
        is_eval = df["eval_accuracy"].notna() if "eval_accuracy" in df else pd.Series(False, index=df.index)
        # a resumed run may log a step twice: keep the latest row
        self.eval = df[is_eval].drop_duplicates(["method", "seed", "step"], keep="last").dropna(axis=1, how="all")
        self.train = df[~is_eval].drop_duplicates(["method", "seed", "step"], keep="last").dropna(axis=1, how="all")
        summary = self.out / "summary.csv"
        self.summary = pd.read_csv(summary) if summary.exists() else pd.DataFrame()
        order = list(dict.fromkeys(self.summary["method"])) if "method" in self.summary else []
        self.methods = [m for m in order if m in set(df["method"])] + sorted(set(df["method"]) - set(order))
        self.n_runs = df.groupby(["method", "seed"]).ngroups
        self.palette = palette(self.methods)
        gc_file = self.out / "gc_view.json"
        self.gc = json.loads(gc_file.read_text()) if gc_file.exists() else None
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
        `python -m gcframe.evaluate`), else the last evaluation of RUN/problems.jsonl."""
        return final_outcomes(self.out, self.methods)

    def base_outcomes(self) -> pd.DataFrame | None:
        """The base's per-problem outcomes on the problems and samples of the greedy re-scoring (`outcomes()[0]`),
        under the method name `base_label`, repeated for each seed of the runs: one model, where every run started
        (`python -m gcframe.evaluate OUT --base` writes OUT/rescored/base-n<N>-k<K>.jsonl). None without one."""
        from gcframe.evaluate.problems import RESCORED

        picks = self.outcomes()
        if not picks or not picks[0][2].startswith(RESCORED_SOURCE):
            return None
        frame, _, _, k = picks[0]
        f = self.out / RESCORED / f"base-n{frame['problem'].nunique()}-k{k}.jsonl"
        if not f.is_file():
            return None
        rows = read_jsonl(f)
        return pd.concat([_outcome_frame(rows, self.base_label, int(s)) for s in sorted(frame["seed"].unique())],
                         ignore_index=True)

    def reward_source(self, method: str, seed: int) -> str:
        return ((self.configs.get((method, seed)) or {}).get("train") or {}).get("reward", "verifier")



SAMPLED = ["majk", "passk", "pass1"]
RESCORED_SOURCE = "final models re-scored"  # how final_outcomes describes a re-scoring (analysis.report reads it)


def _outcome_frame(rows: list[dict], method: str, seed: int) -> pd.DataFrame:
    """Per-problem rows -> method, seed, problem, greedy (0/1) and, where k samples were drawn, majk, passk, pass1."""
    df = pd.DataFrame(rows)
    out = df[["problem"]].assign(method=method, seed=seed, greedy=df["greedy_correct"].astype(float))
    if "k_correct" in df and df["k_correct"].notna().all():
        out = out.assign(majk=df["maj_correct"].astype(float), passk=(df["k_correct"] > 0).astype(float),
                         pass1=df["k_correct"] / df["k"], k=df["k"].astype(int))
    return out


def final_outcomes(out: Path, methods: list[str] | None = None) -> list[tuple]:
    """`Runs.outcomes` of a compare.py folder (see there)."""
    from gcframe.evaluate.problems import FILE, RESCORED

    runs = sorted(p for p in Path(out).glob("*/seed*") if p.is_dir() and p.name[4:].isdigit())
    runs = [r for r in runs if (methods is None or r.parent.name in methods) and (r / FILE).is_file()]
    if not runs:
        return []
    sources = {}  # (n, k) or "train" -> {run: rows}
    for r in runs:
        for f in (r / RESCORED).glob("final-n*-k*.jsonl"):
            n, k = (int(x[1:]) for x in f.stem.split("-")[-2:])
            sources.setdefault((n, k), {})[r] = f
        rows = read_jsonl(r / FILE)
        last = max((x["step"] for x in rows), default=0)
        if last:  # a run that has evaluated only its base has nothing to compare yet
            sources.setdefault("train", {})[r] = [x for x in rows if x["step"] == last]
    common = {key: v for key, v in sources.items() if len(v) == len(runs)}

    def frame(key) -> pd.DataFrame:
        return pd.concat([_outcome_frame(read_jsonl(v) if key != "train" else v, r.parent.name, int(r.name[4:]))
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
