"""Why a method wins or loses: what its training logs show, one row per method, beside its result.

    python -m analysis.why runs/smollm2_all          # prints the table; report.py and reproduce.py write why.csv

The columns read the step rows of every seed (the first and the last `EDGE` logged steps, averaged over seeds):

    Δ accuracy       greedy held-out accuracy at the end minus at step 0 (mean over seeds)
    sampled acc      the share of right completions among the step's samples, first → last steps
    zero-var groups  share of groups whose G rewards are all equal (no signal for a group baseline), mean; with
                     dynamic sampling, the share among the groups drawn, and in brackets among those trained on
    rollouts / step  online RFT with fill_correct (a run that logs fill_rounds): rollouts of B·G drawn per step to
                     fill its batch with correct samples, mean
    prompts / step   with dynamic sampling (a run that logs ds_prompts_drawn): prompts drawn per step, mean
    truncated        share of completions cut at max_new_tokens, first → last
    entropy          mean per-token entropy of the policy on the step's completions, first → last
    KL to ref        KL(π_θ‖π_ref) at the end (eval_kl_ref on fresh samples, else the last steps' k3 mean)
    GC down          the share of the update's |GC| mass that pushes sampled tokens down, Σmax(−GC, 0) / Σ|GC|,
                     mean over steps (0 for RFT and SFT: they only imitate)
    GC right / wrong ΣGC over the tokens of right (wrong) completions / Σ|GC|, mean over steps (logged from
                     the step's `correct` flags; RFT: 1 / 0, a zero-mean advantage: > 0 / < 0)
    probe GC r / w   the same shares on the GC view's probes at the base (gc_view.json): the weights each method
                     puts on a fixed set of right and wrong completions before any training

A column a method does not log (DPO's pairs have no sampled accuracy; SFT's demonstrations no truncation) is '–'.
"""
from __future__ import annotations

import argparse
import math
import sys

import pandas as pd

from analysis.runs import Runs, fmt, markdown_table
from gcframe.errors import cli_entry

EDGE = 3
"""Steps averaged at each end of a run for the 'first → last' columns."""


def _ends(train: pd.DataFrame, col: str) -> tuple[float, float]:
    if col not in train or train[col].isna().all():
        return math.nan, math.nan
    rows = train.dropna(subset=[col]).sort_values("step")
    first = rows.groupby("seed").head(EDGE)[col].mean()
    last = rows.groupby("seed").tail(EDGE)[col].mean()
    return first, last


def _arrow(pair: tuple[float, float], spec: str = "{:.2f}") -> str:
    a, b = pair
    return "–" if math.isnan(a) else f"{fmt(a, spec)} → {fmt(b, spec)}"


def probe_gc_shares(gc_view: dict | None) -> dict[str, tuple[float, float]]:
    """Per method: (ΣGC on right probe tokens, ΣGC on wrong ones) / Σ|GC| over the probes it weights."""
    out = {}
    if not gc_view:
        return out
    right = [p.get("reward", 0) > 0 for p in gc_view["probe"]]
    for name, m in gc_view.get("methods", {}).items():
        rows = [(r, g) for r, g in zip(right, m.get("gc") or []) if g is not None]
        mass = sum(abs(x) for _, g in rows for x in g if x is not None)
        if mass > 0:
            out[name] = (sum(x for r, g in rows if r for x in g if x is not None) / mass,
                         sum(x for r, g in rows if not r for x in g if x is not None) / mass)
    return out


def _mean(rows: pd.DataFrame, col: str) -> float:
    return rows[col].mean() if col in rows else math.nan


def why_rows(runs) -> list[dict]:
    """One row per method of an `analysis.runs.Runs`: what its logs show (see the module docstring)."""
    probe = probe_gc_shares(runs.gc)
    start = runs.start_eval().groupby("method")["eval_accuracy"].mean()
    final = runs.final_eval()
    end = final.groupby("method")["eval_accuracy"].mean()
    rows = []
    dynamic = "ds_prompts_drawn" in runs.train and runs.train["ds_prompts_drawn"].notna().any()
    filled = "fill_rounds" in runs.train and runs.train["fill_rounds"].notna().any()  # online_rft fill_correct
    for m in runs.methods:
        tr = runs.train[runs.train["method"] == m]
        ds = "ds_zero_var_drawn" in tr and tr["ds_zero_var_drawn"].notna().any()
        fin = final[final["method"] == m]
        kl = fin["eval_kl_ref"].mean() if "eval_kl_ref" in fin and fin["eval_kl_ref"].notna().any() \
            else _ends(tr, "kl_ref")[1]
        right, wrong = _mean(tr, "gc_right_mass"), _mean(tr, "gc_wrong_mass")
        pr, pw = probe.get(m, (math.nan, math.nan))
        rows.append({
            "method": m,
            "Δ accuracy": fmt(end.get(m, math.nan) - start.get(m, math.nan), "{:+.3f}"),
            "sampled acc": _arrow(_ends(tr, "accuracy")),
            # a learned critic's baseline needs no group (PPO samples one completion per prompt): no such share
            "zero-var groups": "–" if "value_loss" in tr and tr["value_loss"].notna().any()
            else f"{fmt(_mean(tr, 'ds_zero_var_drawn'))} ({fmt(_mean(tr, 'zero_var_groups'))} trained)" if ds
            else fmt(_mean(tr, "zero_var_groups")),
            **({"prompts / step": fmt(_mean(tr, "ds_prompts_drawn"), "{:.1f}") if ds else "–"} if dynamic else {}),
            **({"rollouts / step": fmt(_mean(tr, "fill_rounds"), "{:.2f}") if "fill_rounds" in tr
                and tr["fill_rounds"].notna().any() else "–"} if filled else {}),
            "truncated": _arrow(_ends(tr, "truncated_frac")),
            "entropy": _arrow(_ends(tr, "entropy")),
            "KL to ref": fmt(kl, "{:.3f}"),
            "GC down": fmt(_mean(tr, "gc_neg_mass")),
            "GC right / wrong": "–" if math.isnan(right) else f"{right:+.2f} / {wrong:+.2f}",
            "probe GC r / w": "–" if math.isnan(pr) else f"{pr:+.2f} / {pw:+.2f}",
        })
    return rows


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.why", description=__doc__.split("\n")[0])
    p.add_argument("out", help="a compare.py output folder")
    args = p.parse_args(argv)
    print(markdown_table(why_rows(Runs(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
