"""The head-to-head report of a compare.py run, from its logged files only.

    python -m analysis.report OUT          # writes OUT/report/summary.md and OUT/report/*.png

Reads OUT/summary.csv (method order, SFT-base accuracy), OUT/<method>/seed<k>/metrics.jsonl (training rows and
evaluation rows; a torn last line is skipped), OUT/<method>/seed<k>/config.yaml and OUT/gc_view.json. A run that
is still going (or crashed) is reported with what it logged.

Figures: learning curves (held-out greedy accuracy against step, generated tokens and training wall time; one
line per method, the band is the range over seeds), reward against KL to π_ref, time and memory per method, the
GC view (analysis.gc_view) and, when some runs trained on the learned reward model r_φ, proxy reward, gold
accuracy and KL over training (reward over-optimisation).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.runs import RESCORED_SOURCE, TEACHER, Runs, fmt, markdown_table, partial_rescorings, spread  # noqa: E402
from analysis.savefig import save_figure  # noqa: E402,F401  (the figures written whole; re-exported)
from gcframe.errors import UserError, check_writable, cli_entry, disk_full, disk_full_line  # noqa: E402

DPI = 100
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
"""Two-sided 95% Student-t quantiles t_{0.975, df} for df = 1..30 (1.96 beyond)."""


# -- the summary table -------------------------------------------------------------------------------------------
def mean_ci(values, signed: bool = False) -> str:
    """'mean ± half-width of the 95% t-interval over seeds', or 'mean (1 seed, no interval)': one value has no
    spread to make an interval from."""
    v = [x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return "–"
    m = float(np.mean(v))
    head = f"{m:+.3f}" if signed else f"{m:.3f}"
    if len(v) == 1:
        return f"{head} (1 seed, no interval)"
    t = T975[len(v) - 2] if len(v) - 1 <= len(T975) else 1.96
    return f"{head} ± {t * float(np.std(v, ddof=1)) / math.sqrt(len(v)):.3f}"


def _mean(df: pd.DataFrame, col: str, fmt: str = "{:.3f}") -> str:
    """`spread` of a column over the rows (one per seed)."""
    return spread(df[col].tolist() if col in df else [], fmt)


def rescored_sampled(runs: Runs) -> tuple[int, dict, dict] | None:
    """maj@k, pass@k and pass@1 of the final models on the test re-scoring (k samples per problem) -> (k, {metric:
    {method: [mean per seed]}}, {metric: the base's value, formatted}); None where the re-scoring drew no samples."""
    picks = runs.outcomes()
    if not picks or not picks[0][2].startswith(RESCORED_SOURCE) or "majk" not in picks[0][0]:
        return None
    f = picks[0][0]
    per = {c: {m: g.groupby("seed")[c].mean().tolist() for m, g in f.groupby("method")} for c in ("majk", "passk",
                                                                                                   "pass1")}
    base = runs.base_outcomes()
    base_v = {c: (f"{base[c].mean():.3f}" if base is not None and c in base else "–") for c in per}
    return picks[0][3], per, base_v


def rescored_accuracy(runs: Runs) -> tuple[int, dict[str, list[float]]] | None:
    """Greedy accuracy of every final model on the problems of its re-scoring (`python -m gcframe.evaluate`, the
    largest set every run was scored on) -> (problems, {method: [accuracy per seed]}); None without one."""
    picks = runs.outcomes()
    if not picks or not picks[0][2].startswith(RESCORED_SOURCE):
        return None
    f = picks[0][0]
    per = f.groupby(["method", "seed"])["greedy"].mean()
    return int(f["problem"].nunique()), {m: per[m].tolist() for m in per.index.get_level_values(0).unique()}


def summary_rows(runs: Runs) -> list[dict]:
    """The report's table: a row for the base (step 0), then one per method: the last evaluation's accuracy (and
    sampled metrics), the final models' greedy accuracy on a re-scoring's problems where every run has one, train
    time, peak memory and generated tokens, each a mean over seeds with its spread."""
    k = runs.k
    fin, train = runs.final_eval(), runs.train
    rescored = rescored_accuracy(runs)
    validation = runs.eval_split() == "validation"  # the runs' curves on validation, their findings on test
    acc_col = "validation accuracy" if validation else "accuracy"
    wide = (f"{'test ' if validation else ''}accuracy, {rescored[0]} problems" if rescored else
            None)  # the final models on the re-scoring's problems
    test = rescored_sampled(runs) if validation else None  # maj@k, pass@k, pass@1 of the test re-scoring

    def sampled(df: pd.DataFrame, kl: str, method: str | None = None) -> dict:
        """The columns of the sampled evaluation (k samples per problem); none when the runs drew none (eval_k 0).
        Runs evaluated on validation take them from the test re-scoring where it drew k samples."""
        if test is not None:
            kt, per, base = test
            own = {c: (spread(per[c].get(method, [])) if method else base[c]) for c in ("majk", "passk", "pass1")}
            return {f"maj@{kt}": own["majk"], f"pass@{kt}": own["passk"], "pass@1": own["pass1"], "KL to ref": kl}
        return {f"maj@{k}": _mean(df, "eval_majk"), f"pass@{k}": _mean(df, "eval_passk"),
                "pass@1": _mean(df, "eval_pass1"), "KL to ref": kl} if k else {}

    last = train.sort_values("step").groupby(["method", "seed"]).tail(1) if len(train) else train
    out = []
    start = runs.start_eval()
    if len(start):  # every run of a seed evaluates the same base with the same draws: one row per seed
        base = start.groupby("seed").mean(numeric_only=True)
        again = runs.base_outcomes() if wide else None  # the base re-scored (gcframe.evaluate --base): one model
        base_wide = f"{again['greedy'].mean():.3f}" if again is not None else "–"  # the same rows in every seed
        out.append({"method": f"{runs.base_label} (step 0)", "seeds": str(len(base)),
                    acc_col: _mean(base, "eval_accuracy"), **({wide: base_wide} if wide else {}),
                    **sampled(base, "0"),
                    "train time (s)": "–",
                    "peak RSS (MB; +run)": "–", "generated tokens": "–"})
    teacher = runs.teacher_outcomes() if wide else None  # the teacher re-scored (--base), where runs distil one
    if teacher is not None:
        one, per_seed = teacher.attrs.get("one_model", False), teacher.groupby("seed")

        def cell(col: str) -> str:  # one model: its value; a teacher per seed (clean_base): mean ± SD over seeds
            return f"{teacher[col].mean():.3f}" if one else mean_ci(per_seed[col].mean().tolist())

        out.append({"method": f"{TEACHER} (reference)", "seeds": "1" if one else str(per_seed.ngroups),
                    acc_col: "–", wide: cell("greedy"),
                    **({f"maj@{test[0]}": cell("majk"), f"pass@{test[0]}": cell("passk"), "pass@1": cell("pass1"),
                        "KL to ref": "–"} if test is not None and "majk" in teacher else {}),
                    "train time (s)": "–", "peak RSS (MB; +run)": "–", "generated tokens": "–"})
    for m in runs.methods:
        f, t = fin[fin["method"] == m], last[last["method"] == m] if len(last) else last
        peak = train[train["method"] == m]["peak_rss_mb"] if "peak_rss_mb" in train else pd.Series(dtype=float)
        own = train[train["method"] == m]["peak_rss_run_mb"] if "peak_rss_run_mb" in train else pd.Series(dtype=float)
        steps = f["step"].unique()
        tokens = _mean(t, "gen_tokens", "{:,.0f}")
        pool = train[train["method"] == m]["pool_gen_tokens"] if "pool_gen_tokens" in train else pd.Series(dtype=float)
        if pool.notna().any():  # RFT's offline pool, sampled from the frozen base before training
            tokens += f" + {pool.groupby(train['seed']).sum().mean():,.0f} pool"
        ends = ", ".join(str(int(s)) for s in sorted(steps))  # runs still going end at different steps
        out.append({"method": m + ("" if len(steps) <= 1 else f" (steps {ends})"), "seeds": str(len(f)),
                    acc_col: mean_ci(f["eval_accuracy"].tolist()),
                    **({wide: mean_ci(rescored[1].get(m, []))} if wide else {}),
                    **sampled(f, _mean(f, "eval_kl_ref", "{:.4f}"), m),
                    "train time (s)": _mean(t, "time_s", "{:.0f}"),
                    "peak RSS (MB; +run)": (f"{peak.max():.0f}" if len(peak) else "–")
                    + (f" (+{own.max():.0f})" if own.notna().any() else ""),
                    "generated tokens": tokens})
    if "eval_proxy_reward" in runs.eval:  # runs trained on r_φ: its mean score of the held-out samples
        for row, df in zip(out, ([start] if len(start) else []) + [fin[fin["method"] == m] for m in runs.methods]):
            row["proxy r_φ"] = _mean(df, "eval_proxy_reward")
    return out


def late_gain(ev: pd.DataFrame, frac: float = 2 / 3) -> tuple[list[float], int, int]:
    """Per seed, greedy accuracy at the end minus at the last evaluation at or before `frac` of the run's steps: how
    much the curve still rose over its last third -> (gains, from step, to step). Paired by seed (same prompts, same
    held-out problems), so the interval over seeds says whether a curve has flattened."""
    gains, first, last = [], None, None
    for _, run in ev.sort_values("step").groupby("seed"):
        end = run["step"].iloc[-1]
        before = run[(run["step"] <= frac * end) & (run["step"] > 0)]
        if end == 0 or before.empty:
            continue
        gains.append(float(run["eval_accuracy"].iloc[-1] - before["eval_accuracy"].iloc[-1]))
        first, last = int(before["step"].iloc[-1]), int(end)
    return gains, first, last


def delta_rows(runs: Runs) -> list[dict]:
    """Change of every held-out metric from the SFT base (step 0) to the end, per method (mean over seeds ± the
    half-width of its 95% t-interval, paired by seed), and the greedy gain late in the run (`late_gain`)."""
    start, fin, k = runs.start_eval(), runs.final_eval(), runs.k
    cols = {"eval_accuracy": "Δ greedy"} | ({"eval_pass1": "Δ pass@1", "eval_majk": f"Δ maj@{k}",
                                             "eval_passk": f"Δ pass@{k}"} if k else {})  # eval_k 0: greedy only
    out = []
    for m in runs.methods:
        s, f = start[start["method"] == m], fin[fin["method"] == m]
        row = {"method": m}
        for col, name in cols.items():  # paired by seed: each seed's end minus its own step 0
            ok = col in s and col in f and s[col].notna().any() and f[col].notna().any()
            d = (f.set_index("seed")[col] - s.groupby("seed")[col].mean()).dropna() if ok else []
            row[name] = spread(list(d), "{:+.3f}") if len(d) else "–"
        gains, a, b = late_gain(runs.eval[runs.eval["method"] == m])
        row["Δ greedy, late"] = f"{mean_ci(gains, signed=True)} (steps {a}→{b})" if gains else "–"
        out.append(row)
    return out


# -- figures -----------------------------------------------------------------------------------------------------
def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    save_figure(fig, path, dpi=DPI, bbox_inches="tight" if fig.legends else None)  # a legend under the panels too
    plt.close(fig)
    return path


def _room_below(ax, frac: float = 0.15) -> None:
    """Lower the panel's floor so that the "not shown: ..." note in its bottom-left corner (Runs.omitted) lies
    under the data, not on it."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - frac * (hi - lo), hi)


def _legend_below(fig, axes) -> None:
    """One legend for the whole figure, under its panels, where no data is (a legend inside a panel sat on the runs'
    end points): every panel's entries, each label once, the panels' own legends removed."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if entries:
        fig.legend(list(entries.values()), list(entries), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(len(entries), 9), fontsize=8, frameon=False)


def _on_grid(ev: pd.DataFrame, x: str, y: str, n: int = 40) -> pd.DataFrame:
    """Each run's y interpolated onto one grid of x per method, so seeds that logged at different x (tokens,
    seconds) can be averaged; the grid ends where the method's shortest run ends (the figure marks every end)."""
    parts = []
    for method, g in ev.dropna(subset=[x, y]).groupby("method", sort=False):
        hi = g.groupby("seed")[x].max().min()
        if not hi > 0:
            continue  # e.g. SFT generates no tokens
        grid = np.linspace(0, hi, n)
        for seed, r in g.groupby("seed"):
            r = r.sort_values(x)
            parts.append(pd.DataFrame({x: grid, y: np.interp(grid, r[x], r[y]), "method": method, "seed": seed}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[x, y, "method", "seed"])


def fig_learning_curves(runs: Runs, path: Path) -> Path:
    """Accuracy against steps, generated tokens and wall time; without the tokens panel where no run samples any
    (an SFT stage alone): an empty panel would say nothing, and summary.md says why it is missing."""
    ev = runs.eval
    tokens = _on_grid(ev, "gen_tokens", "eval_accuracy")
    panels = [("step", "training step", ev), ("gen_tokens", "generated tokens (policy samples)", tokens),
              ("time_s", "training wall time (s)", _on_grid(ev, "time_s", "eval_accuracy"))]
    if tokens.empty:
        panels.pop(1)
        runs.notes.append("learning_curves.png: no generated-tokens panel: no run samples tokens while training "
                          "(offline data)")
    fig, axes = plt.subplots(1, len(panels), figsize=(14 * len(panels) / 3, 3.8))
    for ax, (x, label, data) in zip(axes, panels):
        if len(data):
            sns.lineplot(data=data, x=x, y="eval_accuracy", hue="method", palette=runs.palette, ax=ax,
                         hue_order=[m for m in runs.methods if m in set(data["method"])], errorbar=("pi", 100),
                         marker="o" if x == "step" else None, legend=ax is axes[0])
        noted = x == "gen_tokens" and runs.omitted(ax, "learning_curves.png, generated-tokens panel", data["method"],
                                                   "they sample no tokens while training: offline data")
        if x != "step":  # the end of every run (seeds end at different x)
            ends = runs.final_eval().dropna(subset=[x])
            ends = ends[ends[x] > 0]
            ax.scatter(ends[x], ends["eval_accuracy"], c=[runs.palette[m] for m in ends["method"]], s=12, zorder=3)
        base = runs.start_eval()["eval_accuracy"]
        if len(base):
            ax.axhline(base.mean(), color="grey", ls=":", lw=1, label=runs.base_label if ax is axes[0] else None)
        ax.set_xlabel(label)
        ax.set_ylabel("held-out accuracy (greedy)")
        if x != "step":  # tokens and seconds in thousands: 75k, 100k, not 75000100000 run together
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_compact))
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
        if noted:
            _room_below(ax)
    _legend_below(fig, axes)
    fig.suptitle("Learning curves (line: mean over seeds; band: range over seeds; dots: the end of each run)",
                 fontsize=10)
    return _save(fig, path)


def _compact(v: float, _pos=None) -> str:
    """A tick label: 1,500,000 -> 1.5M, 75,000 -> 75k, 250 -> 250."""
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


TRAJECTORY_BLOCKS = 5
"""The reward-vs-KL trajectory is drawn through this many means of consecutive steps: the per-step training reward
is a mean over one batch and zig-zags too much to follow, step to step or over ten blocks."""


def trajectory(rows: pd.DataFrame, blocks: int = TRAJECTORY_BLOCKS) -> np.ndarray:
    """[n, 2] points (kl_ref, reward_mean) of one method's run(s): the mean over seeds at each step, then the mean of
    each of `blocks` runs of consecutive steps (fewer when there are fewer steps), in step order."""
    per_step = rows.groupby("step")[["kl_ref", "reward_mean"]].mean().sort_index()
    parts = np.array_split(np.arange(len(per_step)), min(blocks, len(per_step)))
    return np.array([per_step.iloc[idx].mean().to_numpy() for idx in parts])


def fig_reward_kl(runs: Runs, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    tr = runs.train
    ax = axes[0]
    if {"kl_ref", "reward_mean"} <= set(tr):  # r_φ-trained runs have their own figure (another reward scale)
        keep = [runs.reward_source(m, s) != "reward_model" for m, s in zip(tr["method"], tr["seed"])]
        d = tr[keep].dropna(subset=["kl_ref", "reward_mean"])
        for m, g in d.groupby("method", sort=False):
            pts = trajectory(g)
            c = runs.palette[m]
            ax.plot(pts[:, 0], pts[:, 1], "-", color=c, lw=1.5, label=m)
            for a, b in zip(pts[:-1], pts[1:]):  # the direction of travel, an arrowhead on each block's mean
                ax.annotate("", xy=b, xytext=a, arrowprops=dict(arrowstyle="-|>", color=c, lw=1.5, shrinkA=0,
                                                                shrinkB=0, mutation_scale=11))
            ax.plot(*pts[0], "o", ms=5, mfc="white", mec=c, zorder=3)  # start
            ax.plot(*pts[-1], "o", ms=7, color=c, zorder=3)  # end
        rm = sorted({m for m, s in zip(tr["method"], tr["seed"]) if runs.reward_source(m, s) == "reward_model"})
        if runs.omitted(ax, "reward_vs_kl.png, training panel", list(d["method"]) + rm,
                        "no kl_ref on their training batches: it needs on-policy samples and π_ref (β > 0)"):
            _room_below(ax)
        if rm:
            runs.omitted(ax, "reward_vs_kl.png, training panel", [m for m in runs.methods if m not in rm],
                         "trained on r_φ, another reward scale: see overoptimisation.png")
    ax.set(xlabel="KL to π_ref (k3, per token, on the training batch)", ylabel="training reward (mean)",
           title=f"Training trajectory (means of {TRAJECTORY_BLOCKS} blocks of steps over seeds; ○ start, ● end)")
    ax = axes[1]
    fin = runs.final_eval()
    if "eval_kl_ref" in fin and fin["eval_kl_ref"].notna().any():
        sns.scatterplot(data=fin, x="eval_kl_ref", y="eval_accuracy", hue="method", palette=runs.palette, ax=ax,
                        hue_order=[m for m in runs.methods if m in set(fin["method"])], s=50)
    shown = fin.dropna(subset=["eval_kl_ref"])["method"] if "eval_kl_ref" in fin else []
    noted = runs.omitted(ax, "reward_vs_kl.png, end-of-training panel", shown,
                         "no held-out KL: train.eval_k = 0 or the run has not finished")
    base = runs.start_eval()["eval_accuracy"]
    if len(base):
        ax.plot([0], [base.mean()], "k*", ms=10, label=runs.base_label)
    if noted:
        _room_below(ax)
    ax.set(xlabel="KL to π_ref (k3, per token, held-out samples)", ylabel="held-out accuracy (greedy)",
           title="End of training (one dot per seed)")
    ax.title.set_fontsize(10)
    axes[0].title.set_fontsize(10)
    _legend_below(fig, axes)
    return _save(fig, path)


def fig_cost(runs: Runs, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    tr = runs.train
    phases = [c for c in ("time_collect", "time_prepare", "time_update") if c in tr]
    if phases:
        per_run = tr.groupby(["method", "seed"], sort=False)[phases + [c for c in ["time_generate"] if c in tr]].sum()
        per_method = per_run.groupby("method", sort=False).mean()
        per_method = per_method.reindex([m for m in runs.methods if m in per_method.index])
        if "time_generate" in per_method:  # sampling is part of collect: split it out
            per_method.insert(0, "generate", per_method.pop("time_generate"))
            per_method["time_collect"] -= per_method["generate"]
            per_method = per_method.rename(columns={"time_collect": "collect (other)"})
        per_method.columns = [c.removeprefix("time_") for c in per_method.columns]
        per_method.plot.barh(stacked=True, ax=axes[0], color=sns.color_palette("Set2", per_method.shape[1]))
        axes[0].invert_yaxis()
        axes[0].legend(fontsize=7, ncol=per_method.shape[1], loc="lower center", bbox_to_anchor=(0.5, 1.0),
                       frameon=False)
    axes[0].set(xlabel="training time per run (s, mean over seeds; excludes evaluation)", ylabel="")
    col = next((c for c in ("peak_rss_run_mb", "peak_rss_mb") if c in tr and tr[c].notna().any()), None)
    if col:
        peak = tr.groupby(["method", "seed"], sort=False)[col].max().reset_index()
        sns.barplot(data=peak, y="method", x=col, hue="method", palette=runs.palette, ax=axes[1],
                    order=[m for m in runs.methods if m in set(peak["method"])], errorbar=None, legend=False)
    own = "peak RSS above the run's start (MB): its models, optimiser\nstate, training and evaluation activations"
    axes[1].set(xlabel=own if col == "peak_rss_run_mb" else "peak RSS during the run (MB)", ylabel="")
    return _save(fig, path)


def _gc_matrix(rows: list) -> np.ndarray:
    width = max((len(r) for r in rows if r is not None), default=1)
    mat = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        if r is not None:
            mat[i, :len(r)] = [np.nan if v is None else v for v in r]
    return mat


def gc_scales(methods: dict, shared: bool = True) -> dict[str, float]:
    """The colour limit ±v of each method's GC panel: one v for all (the largest |GC| of any method), so panels
    compare side by side, or (shared=False) each panel's own largest |GC|; 1 where a panel has no value."""
    own = {}
    for name, entry in methods.items():
        mat = _gc_matrix(entry["gc"])
        own[name] = float(np.nanmax(np.abs(mat))) if np.isfinite(mat).any() else 0.0
    top = max(own.values(), default=0.0)
    return {name: (top if shared else v) or 1.0 for name, v in own.items()}


def _short(text: str, n: int) -> str:
    """One line of at most n characters, an ellipsis where it was cut."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 1].rstrip() + "…"


def gc_row_label(p: dict, question_chars: int = 34, completion_chars: int = 18) -> str:
    """A GC-view row: the user turn's content (not the chat template around it) and the completion, each cut with
    an ellipsis: "What is 11 plus 1? → 12  r=1"; an arithmetic prompt that ends in '=' reads on: "12+34=46"."""
    question = p.get("question")
    if not question:  # gc_view.json before `question` was recorded: the user turn of a chat prompt, by its markers
        m = re.search(r"user(?:<\|end_header_id\|>)?\s*\n(.*?)(?:<\|im_end\|>|<\|eot_id\|>|</s>|\n<\||$)", p["prompt"], re.S)
        question = m.group(1) if m and "<|" in p["prompt"] else p["prompt"]
    question = _short(question, question_chars)
    sep = "" if question.endswith("=") else " → "
    return f"{question}{sep}{_short(p['completion'], completion_chars)}  r={p['reward']:g}"


def fig_gc_view(runs: Runs, path: Path, shared_scale: bool = True, off_policy: bool = False) -> Path | None:
    """The GC heatmaps, one panel per method: on-policy (θ = θ_old) or, with off_policy, at the view's moved θ'
    (gc_view.json's off_policy part; absent in a gc_view.json written before it: no figure)."""
    import textwrap

    gc = runs.gc
    view = (gc or {}).get("off_policy") if off_policy else gc
    if not gc or not view or not view.get("methods"):
        return None
    scales = gc_scales(view["methods"], shared_scale)
    probe, methods = gc["probe"], view["methods"]
    width = max(len(p["tokens"]) for p in probe)
    chars = np.array([[_short(t, 3) for t in p["tokens"]] + [""] * (width - len(p["tokens"])) for p in probe])
    labels = [gc_row_label(p) for p in probe]
    n = len(methods)
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    label_in = 0.055 * max(len(lb) for lb in labels)  # the first column's row labels, in inches at 6 pt
    panel_w = max(2.6, 0.16 * width + 1.0)  # the cells and the colour bar
    fig_w = panel_w * ncols + label_in
    fig, axes = plt.subplots(nrows, ncols, figsize=(fig_w, (0.2 * len(probe) + 0.7) * nrows + 0.9),
                             squeeze=False, layout="constrained")
    for ax, (name, entry) in zip(axes.flat, methods.items()):
        mat = _gc_matrix(entry["gc"])
        mat = np.pad(mat, ((0, 0), (0, width - mat.shape[1])), constant_values=np.nan)
        vmax = scales[name]
        # vmin = -vmax centres the colours at 0 (seaborn's center= would recolour through the deprecated set_bad)
        sns.heatmap(mat, ax=ax, cmap="RdBu_r", vmin=-vmax, vmax=vmax, annot=chars, fmt="",
                    annot_kws={"fontsize": 6}, cbar_kws={"shrink": 0.8}, linewidths=0.2, linecolor="white",
                    yticklabels=labels if ax in axes[:, 0] else False, xticklabels=False)
        ax.set_title(name, fontsize=9)
        ax.tick_params(axis="y", labelsize=6)
        if ax.collections and ax.collections[0].colorbar is not None:
            ax.collections[0].colorbar.ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    scale = (f"one colour scale for all panels, ±{max(scales.values()):.2g}" if shared_scale
             else "each panel its own colour scale")
    where = ("after the policy moved off π_old by a fixed seeded perturbation (ratios ≠ 1: clips and gates act; "
             "prepare at the base)" if off_policy else "at the base model (step 0)")
    title = (f"GC per token on one probe set {where} (red > 0 raises log π, blue < 0 lowers it; "
             f"• = <eos>; blank: not in the method's data; {scale})")
    fig.suptitle(textwrap.fill(title, max(40, int(fig_w * 14))), fontsize=9)  # wrapped to the figure: never clipped
    save_figure(fig, path, dpi=DPI, bbox_inches="tight", pad_inches=0.15)  # row labels and colour-bar ticks whole
    plt.close(fig)
    return path


def overoptimisation_rows(runs: Runs, window: int = 10) -> list[dict]:
    """Per method trained on r_φ (means over seeds): the gold greedy accuracy on held-out problems at the start, at its
    best evaluation and at the end; the gold accuracy of its own training samples over `window`-step blocks (first,
    best, last); the proxy r_φ of its held-out samples and its KL to π_ref at the end. Over-optimisation is the proxy
    rising while gold rises and then falls."""
    keys = {k for k in runs.configs if runs.reward_source(*k) == "reward_model"}
    rows = []
    for m in [m for m in runs.methods if any(k[0] == m for k in keys)]:
        ev = runs.eval[runs.eval["method"] == m].groupby("step")[["eval_accuracy"]].mean()["eval_accuracy"]
        tr = runs.train[runs.train["method"] == m]
        blocks = tr.assign(block=tr["step"] // window).groupby("block")["accuracy"].mean() if "accuracy" in tr else None
        fin, start = runs.final_eval(), runs.start_eval()
        fin, start = fin[fin["method"] == m], start[start["method"] == m]

        def at(df, col):
            return df[col].mean() if col in df and df[col].notna().any() else math.nan

        best = int(ev.idxmax())
        rows.append({
            "method": m,
            "gold greedy: start → best (step) → end": f"{ev.iloc[0]:.3f} → {ev.max():.3f} ({best}) → {ev.iloc[-1]:.3f}",
            f"gold of its samples, {window}-step means: first → best (steps) → last":
                "–" if blocks is None else f"{blocks.iloc[0]:.3f} → {blocks.max():.3f} "
                f"({int(blocks.idxmax()) * window}–{int(blocks.idxmax()) * window + window - 1}) → {blocks.iloc[-1]:.3f}",
            "proxy r_φ: start → end": f"{fmt(at(start, 'eval_proxy_reward'), '{:.3f}')} → "
                                      f"{fmt(at(fin, 'eval_proxy_reward'), '{:.3f}')}",
            "KL to π_ref at the end": fmt(at(fin, "eval_kl_ref"), "{:.3f}"),
        })
    return rows


def fig_overoptimisation(runs: Runs, path: Path) -> Path | None:
    keys = {k for k in runs.configs if runs.reward_source(*k) == "reward_model"}
    if not keys:
        return None
    tr = runs.train[[k in keys for k in zip(runs.train["method"], runs.train["seed"])]]
    ev = runs.eval[[k in keys for k in zip(runs.eval["method"], runs.eval["seed"])]]
    panels = [("reward_mean", "eval_proxy_reward", "proxy reward r_φ (mean)"),
              ("accuracy", "eval_accuracy", "gold accuracy"), ("kl_ref", "eval_kl_ref", "KL to π_ref (k3/token)")]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for ax, (col, ecol, label) in zip(axes, panels):
        if col in tr and tr[col].notna().any():
            d = tr.dropna(subset=[col]).sort_values("step").copy()
            w = max(1, d["step"].nunique() // 15)
            d[col] = d.groupby(["method", "seed"])[col].transform(lambda s: s.rolling(w, min_periods=1).mean())
            sns.lineplot(data=d, x="step", y=col, hue="method", palette=runs.palette, ax=ax, errorbar=("pi", 100),
                         hue_order=[m for m in runs.methods if m in set(d["method"])], legend=ax is axes[0])
        if ecol in ev and ev[ecol].notna().any():
            sns.scatterplot(data=ev.dropna(subset=[ecol]), x="step", y=ecol, hue="method", palette=runs.palette,
                            ax=ax, marker="D", s=30, legend=False)
        ax.set(xlabel="training step", ylabel=label)
    fig.suptitle("Training on the learned reward model r_φ (lines: training batches, sampled, smoothed, range over "
                 "seeds; diamonds: held-out, greedy accuracy)", fontsize=10)
    return _save(fig, path)


def pair_matrix(runs: Runs, table: pd.DataFrame, metric: str = "greedy") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paired differences of one metric as a methods × methods matrix -> (diff, separated): cell [a, b] is the
    paired mean difference a − b (analysis.paired; [b, a] its negative) and whether its interval excludes 0; methods
    in the order of their means, best first (the order the findings' groups are cut from); the diagonal NaN."""
    from analysis import findings as fnd

    g = table[table["metric"] == metric]
    seen = set(g["a"]) | set(g["b"])
    order = [m for m, _ in fnd.ranking(runs, table, metric) if m in seen]
    diff = pd.DataFrame(np.nan, index=order, columns=order)
    sep = pd.DataFrame(False, index=order, columns=order)
    for _, r in g.iterrows():
        diff.loc[r["a"], r["b"]], diff.loc[r["b"], r["a"]] = r["diff"], -r["diff"]
        sep.loc[r["a"], r["b"]] = sep.loc[r["b"], r["a"]] = bool(r["separated"])
    return diff, sep


def fig_pairs(runs: Runs, table: pd.DataFrame, path: Path, metric: str = "greedy") -> Path | None:
    """pairs.png: `pair_matrix` as a heatmap (green: the row's method scores higher, pink: lower), every cell
    annotated with its difference, separated pairs outlined, and dashed lines between the groups the test
    orders (analysis.findings.ordered_groups). None without pairs of `metric`."""
    from matplotlib.patches import Rectangle

    from analysis import findings as fnd

    if table.empty or not (table["metric"] == metric).any():
        return None
    diff, sep = pair_matrix(runs, table, metric)
    n = len(diff)
    vmax = float(np.nanmax(np.abs(diff.to_numpy()))) if n > 1 else 1.0
    fig, ax = plt.subplots(figsize=(0.75 * n + 3.0, 0.6 * n + 2.0))
    text = diff.map(lambda v: "" if pd.isna(v) else f"{v:+.3f}")
    sns.heatmap(diff, ax=ax, cmap="PiYG", vmin=-(vmax or 1.0), vmax=vmax or 1.0, annot=text, fmt="",
                annot_kws={"fontsize": 7}, linewidths=0.5, linecolor="white",
                cbar_kws={"label": f"{fnd.metric_name(metric, table['k'].iloc[0])}: row − column"})
    for (i, a), (j, b) in ((x, y) for x in enumerate(diff.index) for y in enumerate(diff.columns)):
        if sep.loc[a, b]:
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, edgecolor="black", lw=1.8))
    groups, _ = fnd.ordered_groups(list(diff.index), table[table["metric"] == metric])
    cut = 0
    for grp in groups[:-1]:  # the groups are runs of the mean order: a cut lies between two of them
        cut += len(grp)
        ax.axhline(cut, color="black", ls="--", lw=1)
        ax.axvline(cut, color="black", ls="--", lw=1)
    ax.set(xlabel="", ylabel="", facecolor="0.92")  # the diagonal (a method against itself) grey
    ax.tick_params(axis="both", labelsize=8)
    ax.tick_params(axis="y", rotation=0)
    g = table[table["metric"] == metric]
    title = (f"Paired {fnd.metric_name(metric, g['k'].iloc[0])} differences, row − column "
             f"({fnd.design_size(g)}); outlined: separated (95% interval excludes 0); dashed: between the "
             "groups the test orders")
    if fnd.one_seed(g):
        title += f"; 1 seed: {fnd.SCOPE}"
    import textwrap

    ax.set_title(textwrap.fill(title, max(50, int((0.75 * n + 3.0) * 12))), fontsize=9)
    return _save(fig, path)


def threads_text(out: Path) -> tuple[str | None, str]:
    """What each part of a folder ran with, from every env*.json its processes wrote (OUT/env.json at the start,
    OUT/env.resume.json at a --resume, OUT/<method>/seed<k>/env.json and env.resume.json per run) -> (the range,
    e.g. "1–2", or None where every part ran with one count; a sentence naming the parts, '' then)."""
    from gcframe.tracking import env as envinfo

    def threads(f: Path):
        return envinfo.load(f).get("threads")

    top = {f.name: threads(f) for f in sorted(out.glob("env*.json"))}
    per_run: dict[str, list] = {}
    for f in sorted(out.glob("*/seed*/env*.json")):  # env.json sorts before env.resume.json
        per_run.setdefault(f"{f.parent.parent.name} seed {f.parent.name[4:]}", []).append(threads(f))
    counts = {t for t in [*top.values(), *(t for ts in per_run.values() for t in ts)] if t is not None}
    if len(counts) <= 1:
        return None, ""
    by_history: dict[tuple, list[str]] = {}
    for run, ts in per_run.items():
        by_history.setdefault(tuple(ts), []).append(run)
    runs_text = "; ".join(
        (" then ".join(map(str, h)) + (" (resumed)" if len(h) > 1 else "")) + ": "
        + (", ".join(names) if len(names) <= 3 else f"{len(names)} runs") for h, names in by_history.items())
    top_text = ", ".join(f"{t} in {name}" for name, t in top.items())
    return f"{min(counts)}–{max(counts)}", (f"Threads differ between the parts of this folder: the comparison's "
                                            f"processes {top_text}; per run, {runs_text}.")


# -- the report ----------------------------------------------------------------------------------------------------
def _gc_table(runs: Runs) -> str:
    """Mean GC over each probe completion's tokens, per method (the numbers behind the GC heatmap)."""
    gc = runs.gc
    rows = []
    for i, p in enumerate(gc["probe"]):
        row = {"probe": f"`{p['prompt']}{p['completion']}`", "reward": f"{p['reward']:g}"}
        for name, entry in gc["methods"].items():
            v = [x for x in (entry["gc"][i] or []) if x is not None]
            row[name] = f"{np.mean(v):+.3f}" if v else "–"
        rows.append(row)
    return markdown_table(rows)


def gc_off_rows(runs: Runs) -> list[dict]:
    """Per method, the off-policy view's summary: tokens zeroed and what its clip or gate recorded."""
    rows = []
    for name, entry in runs.gc["off_policy"]["methods"].items():
        stats = entry.get("stats") or {}
        shown = {k: v for k, v in stats.items() if "clip" in k or "gate" in k}
        rows.append({"method": name, "zeroed": f"{entry['zeroed_frac']:.3f}",
                     "clip / gate (the method's own record)": ", ".join(f"{k} {v:.3f}" for k, v in shown.items())
                     or "–"})
    return rows


def _gc_off_table(runs: Runs) -> str:
    return markdown_table(gc_off_rows(runs))


def smoke_of(out: Path) -> str | None:
    """What a compare.py --quick folder says it is (OUT/config.yaml's `smoke`), or None."""
    import yaml

    cfg = out / "config.yaml"
    try:
        return (yaml.safe_load(cfg.read_text()) or {}).get("smoke") if cfg.is_file() else None
    except yaml.YAMLError:
        return None


def write_report(out: str | Path, gc_shared_scale: bool = True) -> Path:
    """Write OUT/report/summary.md and the PNGs; returns the path of summary.md. gc_shared_scale: one colour scale
    for every method's GC panel (False: each its own)."""
    runs = Runs(Path(out))  # refuses damaged run folders before anything is written
    k = runs.k
    from gcframe.tracking import env as envinfo
    from gcframe.tracking.health import starvation

    n_seeds = runs.final_eval().groupby("method")["seed"].nunique()  # an interval needs 2 seeds (mean_ci)
    most, fewest = int(n_seeds.max()) if len(n_seeds) else 0, int(n_seeds.min()) if len(n_seeds) else 0
    interval = ("greedy accuracy (1 seed per method, so no interval); " if most <= 1 else
                "greedy accuracy with its 95% t-interval over seeds"
                + (" (none for a method run with 1 seed)" if fewest == 1 else "") + "; ")

    env = envinfo.load(runs.out / "env.json")
    # runs not finished, and re-scorings the paired test leaves out because not every run has them
    about = runs.run_notes + [f"Left out: {line}" for line in partial_rescorings(runs.out, runs.methods)]
    span, threads_detail = threads_text(runs.out)
    smoke = smoke_of(runs.out)
    md = [f"# Head to head: {runs.out.name}\n",
          *([f"**This is {smoke}.**\n"] if smoke else []),
          f"Environment: {envinfo.describe({**env, 'threads': span} if env and span else env)}"
          + (f". {threads_detail}" if threads_detail else "") + "\n",
          f"Runs: {runs.n_runs} ({', '.join(runs.methods)}). Held-out metrics at the end of training: "
          + interval
          + (f"pass@1, maj@{k} and pass@{k} from {k} samples per problem; KL to π_ref is the per-token k3 mean "
             "over the policy's own held-out samples. " if k else "no sampled evaluation (train.eval_k 0). ")
          + "Train time "
          "excludes evaluation; generated tokens count only tokens the run sampled itself. Peak RSS is the "
          "process's during the run, and in brackets the run's own growth above what the process held when it "
          "started (its models, optimiser state, and the activations of training and evaluation).\n",
          *[f"- {note}" for note in about], *([""] if about else []),
          markdown_table(summary_rows(runs)),
          f"\n## Change from the {runs.base_label}\n",
          (f"DeepSeekMath §5.2.2 (Fig. 7) finds that RL raises maj@K but not pass@K: it makes the output "
           f"distribution more robust rather than adding capability. Compare the Δ maj@{k} and Δ pass@{k} "
           "columns (mean over seeds, end of training minus step 0).\n" if k
           else "Greedy accuracy, mean over seeds, end of training minus step 0.\n")
          + "Δ greedy, late: what greedy accuracy still gained from the last evaluation at or before two thirds of "
          "the steps to the end (the steps in brackets), paired by seed, "
          + ("± its 95% t-interval" if most > 1 else "with 1 seed and so no interval") + ": a curve has "
          "flattened when that is near 0.\n",
          markdown_table(delta_rows(runs))]
    from analysis import findings as fnd

    table, sources = fnd.tests(runs)
    if len(table):
        claims = fnd.claim_rows(runs, table)
        one = fnd.one_seed(table)
        md += ["\n## Which method wins: the paired test\n",
               "Every method is scored on the same held-out problems, seed s of every method from the same base and "
               "prompt order: each difference is paired problem by problem and seed by seed, with a 95% interval "
               + ("from the problems' variance (`analysis/paired.py`); a pair is separated when its interval "
                  f"excludes 0. **One seed: {fnd.SCOPE}.** The variance between training runs is not measured, so a "
                  "pair separated here need not separate with another seed, and P(A > B), 0 or 1 over one seed, is "
                  "left out. " if one else
                  "from the two-way (seeds × problems) variance and P(A > B) over seeds (`analysis/paired.py`); a "
                  "pair is separated when its interval excludes 0. ")
               + "The sentences give the groups of methods the test orders: the methods by their means, cut wherever "
               "every method above the cut is separated above every method below it; pairs.png draws every pair "
               f"(`analysis.findings.ordered_groups`). Outcomes: {'; '.join(sources)}.\n",
               *[f"- {line}" for line in fnd.sentences(runs, table)], "",
               markdown_table(fnd.pair_rows(runs, table)),
               "\nWhat this design can detect (α 0.05, power 0.8):\n", markdown_table(fnd.design_rows(runs, table))]
        if claims:
            md += ["\nDeepSeekMath §5.2's orderings, decided by the paired test"
                   + (f" (1 seed: {fnd.SCOPE})" if one else "") + ":\n", markdown_table(claims)]
    from analysis.matched import matched_rows, time_rows
    from analysis.why import why_rows

    matched, budget = matched_rows(runs)
    reached = ("no run got past step 0" if math.isnan(budget["T*"]) else f"{budget['T*']:.0f} s")
    target = ("no method gained on the base, so there is no target accuracy to time" if math.isnan(budget["a*"])
              else f"then the time and tokens to reach {budget['a*']:.3f} (the base's accuracy plus half the best "
              "mean gain)")
    md += ["\n## At equal compute\n", f"Accuracy at the training wall time every run reached ({reached}) "
           "and at the generated tokens every sampling run reached, read off each run's curve between its "
           f"evaluations; {target}; and the peak memory while training (`analysis/matched.py`).\n",
           markdown_table(matched),
           "\nWhere the time goes (seconds per training step by phase; evaluations in total per run):\n",
           markdown_table(time_rows(runs))]

    md += ["\n## What the logs show\n", "Per method, from its step rows (first → last steps, mean over seeds): "
           "where a winner's signal came from and where a loser's went (`analysis/why.py` says what each column "
           "is).\n", markdown_table(why_rows(runs))]
    rm_file = runs.out / "reward_model.json"
    if rm_file.exists():
        rm = json.loads(rm_file.read_text())
        md.append(f"\nReward model r_φ: held-out pairwise accuracy {rm.get('heldout_accuracy', float('nan')):.3f} "
                  f"({(rm.get('preferences') or {}).get('train_pairs', '?')} training pairs). Runs trained on it "
                  "report gold accuracy above and the proxy reward in the over-optimisation figure.\n")
    if runs.gc and runs.gc.get("methods"):
        md += ["\n## GC view\n", "Mean GC over each probe completion's tokens (the heatmap shows every token). "
               f"{runs.gc.get('note', '')}\n", _gc_table(runs)]
    for label, err in (runs.gc or {}).get("errors", {}).items():
        md.append(f"- GC view of {label} failed: {err}\n")
    off = (runs.gc or {}).get("off_policy") or {}
    if off.get("methods"):
        ratios = [v for row in off.get("ratio") or [] for v in row or []]
        span = f" (ratios on the probe {min(ratios):.3f}–{max(ratios):.3f})" if ratios else ""
        md += ["\n### GC view off-policy\n", f"{off.get('note', '')}{span}\n", _gc_off_table(runs)]
    elif off.get("note") and (runs.gc or {}).get("methods"):  # not computed (a sharded policy): say why
        md.append(f"- Off-policy GC view: {off['note']}\n")
    for label, err in off.get("errors", {}).items():
        md.append(f"- Off-policy GC view of {label} failed: {err}\n")
    starved = []
    for (method, seed), cfg in runs.configs.items():
        rows = runs.train[(runs.train["method"] == method) & (runs.train["seed"] == seed)]
        found = starvation(rows.sort_values("step").to_dict("records"),
                           max_new_tokens=(cfg.get("train") or {}).get("max_new_tokens"))
        starved += [f"- **{method} seed {seed}**: {message}" for message in found.values()]
    if starved:  # the trainer printed these as the run went (gcframe.tracking.health)
        md += ["\n## Starved runs\n", "Runs whose completions were mostly cut off, or whose groups mostly had no "
               "reward variance, for several steps in a row: little or nothing to learn from.\n", *starved, ""]
    rep = runs.out / "report"  # written only now: every refusal above leaves it as it was
    check_writable(rep, f"the report writes {rep}: make it writable, or copy the folder and report the copy",
                   below=True)  # before any figure: none is left half-written
    rep.mkdir(exist_ok=True)
    try:
        return _write_files(runs, rep, md, table, gc_shared_scale)
    except OSError as e:  # cli_entry's own line would name the working directory: a figure's error has no file name
        if not disk_full(e):
            raise
        raise UserError(f"{disk_full_line(rep, 'the report')}, then run python -m analysis.report "
                        f"{shlex.quote(os.path.abspath(runs.out))} again (the files written before it are whole: "
                        "each is written to a temporary file and renamed)") from None


def _write_files(runs: Runs, rep: Path, md: list[str], table: pd.DataFrame, gc_shared_scale: bool) -> Path:
    """The figures and summary.md of `write_report` into `rep`, each whole or not at all (`save_figure`)."""
    figs = {"learning_curves.png": fig_learning_curves(runs, rep / "learning_curves.png"),
            "reward_vs_kl.png": fig_reward_kl(runs, rep / "reward_vs_kl.png"),
            "cost.png": fig_cost(runs, rep / "cost.png"),
            "pairs.png": fig_pairs(runs, table, rep / "pairs.png"),
            "gc_view.png": fig_gc_view(runs, rep / "gc_view.png", gc_shared_scale),
            "gc_view_off_policy.png": fig_gc_view(runs, rep / "gc_view_off_policy.png", gc_shared_scale, True),
            "overoptimisation.png": fig_overoptimisation(runs, rep / "overoptimisation.png")}
    if (runs.out / "tune" / "tune.csv").is_file():  # compare.py --tune: the tuning section and its figure
        from analysis import tuning

        md.append("\n" + tuning.write(runs.out, rep).read_text())  # report/tuning.md, tuning.png
    md.append("\n## Figures\n")
    md += [f"- {note}" for note in dict.fromkeys(runs.notes)] + ([""] if runs.notes else [])
    for name, p in figs.items():
        if p is not None:
            md.append(f"![{name[:-4]}]({name})\n")
    path = rep / "summary.md"
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text("\n".join(md))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.report", description=__doc__.split("\n")[0])
    p.add_argument("out", help="the output folder of experiments/compare.py")
    p.add_argument("--gc-own-scale", action="store_true", help="give each method's GC panel its own colour scale "
                   "(default: one scale for all, so that panels compare side by side)")
    args = p.parse_args(argv)
    print(f"report: {write_report(args.out, gc_shared_scale=not args.gc_own_scale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
