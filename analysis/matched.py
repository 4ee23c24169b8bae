"""Methods at equal compute: accuracy at a matched training wall time and at a matched number of generated tokens,
and the time and tokens each needs to reach a target accuracy (the seed's trade: a critic against G samples).

    python -m analysis.matched runs/smollm2_trade [--target 0.3]      # and where each method's time goes

Every run's greedy evaluations are points (time_s, gen_tokens, eval_accuracy); between two points the accuracy is
read by linear interpolation. The matched budget is the smallest that every run reached, so each run is read inside
its own curve, never extrapolated:

    T*  = min over runs of the training wall time at their last evaluation   (evaluation time excluded)
    N*  = the same for generated tokens, over the runs that sample (offline data generates none: '–')
    a*  = --target, else the base's accuracy + half of the best method's mean gain at the end (none when no method
          gained: every curve starts at the base, so the time "to reach" it would be 0 and mean nothing)

'time to a*' is where a run's curve first reaches a* (mean over the seeds that reach it; 'k/n seeds' says how many
did; 'at the start' where every seed that reached it was already there at its first evaluation). A run with only its
step-0 evaluation (just started, or stopped) reached no budget and is left out of T* and N*. Peak RSS is the largest
of the run's step rows (the process's peak while it trained) and, in brackets, what the run added to the process's
memory at its start (`peak_rss_run_mb`).
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from analysis.runs import Runs, fmt, markdown_table, spread
from gcframe.errors import cli_entry


def at(xs, ys, x: float) -> float:
    """y at x on the polyline through (xs, ys) (xs increasing); NaN outside [xs[0], xs[-1]]."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if len(xs) == 0 or x < xs[0] or x > xs[-1]:
        return math.nan
    return float(np.interp(x, xs, ys))


def first_reach(xs, ys, target: float) -> float:
    """The smallest x where the polyline through (xs, ys) reaches y ≥ target; NaN if it never does."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    for i, y in enumerate(ys):
        if y >= target:
            if i == 0:
                return float(xs[0])
            x0, x1, y0 = xs[i - 1], xs[i], ys[i - 1]
            return float(x0 + (x1 - x0) * (target - y0) / (y - y0))
    return math.nan


def matched_rows(runs, target: float | None = None) -> tuple[list[dict], dict]:
    """One row per method of an `analysis.runs.Runs`, and the budgets used: {'T*', 'N*', 'a*'}."""
    ev = runs.eval.sort_values("step")
    curves = {key: g for key, g in ev.groupby(["method", "seed"], sort=False)}
    trained = [g for g in curves.values() if g["step"].iloc[-1] > 0]  # a run with a step-0 evaluation only: none
    T = min((float(g["time_s"].iloc[-1]) for g in trained), default=math.nan)
    sampling = [g for g in trained if "gen_tokens" in g and g["gen_tokens"].iloc[-1] > 0]
    N = min(float(g["gen_tokens"].iloc[-1]) for g in sampling) if sampling else math.nan
    start = runs.start_eval()["eval_accuracy"].mean()
    ends = runs.final_eval().groupby("method")["eval_accuracy"].mean()
    gain = float((ends - start).max()) if len(ends) else math.nan
    a = target if target is not None else (start + gain / 2 if gain > 0 else math.nan)  # nan: no method gained
    rows = []
    for m in runs.methods:
        mine = [g for (method, _), g in curves.items() if method == m]
        tr = runs.train[runs.train["method"] == m]
        acc_T = [at(g["time_s"], g["eval_accuracy"], T) for g in mine]
        samples = any("gen_tokens" in g and g["gen_tokens"].iloc[-1] > 0 for g in mine)
        acc_N = [at(g["gen_tokens"], g["eval_accuracy"], N) for g in mine] if samples else [math.nan]
        t_a = [first_reach(g["time_s"], g["eval_accuracy"], a) for g in mine]
        n_a = [first_reach(g["gen_tokens"], g["eval_accuracy"], a) for g in mine] if samples else [math.nan]
        per_step = tr.groupby("seed")["n_seqs"].mean().mean() if "n_seqs" in tr else math.nan
        no_target = math.isnan(a)
        rows.append({
            "method": m,
            "samples / step": fmt(per_step, "{:.0f}"),
            "accuracy at the end": _mean(runs.final_eval().query("method == @m")["eval_accuracy"].tolist(), "{:.3f}"),
            f"accuracy at {T:.0f} s" if not math.isnan(T) else "accuracy at T s": _mean(acc_T, "{:.3f}"),
            f"accuracy at {N:,.0f} tokens" if not math.isnan(N) else "accuracy at N tokens": _mean(acc_N, "{:.3f}"),
            "s to a target" if no_target else f"s to {a:.3f}": _to_target(mine, a, t_a, "{:.0f}"),
            "tokens to a target" if no_target else f"tokens to {a:.3f}":
                _to_target(mine, a, n_a, "{:,.0f}") if samples else "–",
            "peak RSS (MB; +run)": fmt(_max(tr, "peak_rss_mb"), "{:.0f}")
            + ("" if math.isnan(_max(tr, "peak_rss_run_mb")) else f" (+{_max(tr, 'peak_rss_run_mb'):.0f})"),
        })
    return rows, {"T*": T, "N*": N, "a*": a}


def _mean(xs: list[float], spec: str) -> str:
    """The mean over seeds of the numbers in xs that are not NaN ± its 95% t half-width, '–' where none is."""
    return spread(xs, spec)


def _to_target(curves, a: float, hits: list[float], spec: str) -> str:
    """The cell 'time (or tokens) to a*' of one method: '–' without a target (no method gained), the mean over the
    seeds that reached it, 'k/n seeds' where only some did, 'at the start' where every seed that did was already
    there at its first evaluation (a 0 would read as free progress)."""
    if math.isnan(a):
        return "– (no method gained)"
    reached = [(h, g) for h, g in zip(hits, curves) if not math.isnan(h)]
    if not reached:
        return "not reached"
    early = all(g["eval_accuracy"].iloc[0] >= a for _, g in reached)
    cell = "at the start" if early else fmt(float(np.mean([h for h, _ in reached])), spec)
    return cell + (f" ({len(reached)}/{len(hits)} seeds)" if len(reached) < len(hits) else "")


def _max(rows, col: str) -> float:  # rows: a DataFrame
    return rows[col].max() if col in rows and rows[col].notna().any() else math.nan


def _sec(x: float) -> str:
    """Seconds as a person reads them: 41.3, 6.4, 0.42, 0 (a phase under 5 ms)."""
    if math.isnan(x):
        return "–"
    return "0" if abs(x) < 0.005 else f"{x:.2f}" if abs(x) < 1 else f"{x:.1f}"


def time_rows(runs) -> list[dict]:
    """Where a run's time goes, per method (means over seeds): seconds per training step split into generation,
    the rest of collecting (scoring, reading data), prepare (π_ref's and π_old's log-probs, PPO's values) and
    the update (of which the critic's own forward and backward), and the run's evaluations in total."""
    rows = []
    for m in runs.methods:
        tr = runs.train[runs.train["method"] == m]
        ev = runs.eval[runs.eval["method"] == m]

        def per_step(col):  # a step that did not log a phase spent nothing in it (rft samples its pool once)
            return tr[col].fillna(0).mean() if col in tr and tr[col].notna().any() else math.nan

        gen = per_step("time_generate")
        collect = per_step("time_collect")
        evals = ev.groupby("seed")["time_eval"].sum().mean() if "time_eval" in ev else math.nan
        rows.append({"method": m, "s / step": _sec(collect + per_step("time_prepare") + per_step("time_update")),
                     "generate": _sec(gen),
                     "collect (other)": _sec(collect - (0 if math.isnan(gen) else gen)),
                     "prepare": _sec(per_step("time_prepare")),
                     "update": _sec(per_step("time_update")),
                     "of which critic": _sec(per_step("time_critic")),
                     "evaluations (s / run)": fmt(evals, "{:.0f}")})
    return rows


def budget_line(budget: dict) -> str:
    """T*, N* and a* in one line, each '–' with its reason where there is none."""
    T, N, a = budget["T*"], budget["N*"], budget["a*"]
    return ("T* = " + ("– (no run got past step 0)" if math.isnan(T) else f"{T:.0f} s")
            + ", N* = " + ("– (no run samples)" if math.isnan(N) else f"{N:,.0f} tokens")
            + ", a* = " + ("– (no method gained on the base)" if math.isnan(a) else f"{a:.3f}"))


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.matched", description=__doc__.split("\n")[0])
    p.add_argument("out", help="a compare.py output folder")
    p.add_argument("--target", type=float, help="the accuracy a* (default: base + half the best mean gain)")
    args = p.parse_args(argv)
    runs = Runs(args.out)
    rows, budget = matched_rows(runs, args.target)
    print(markdown_table(rows))
    print(f"\n{budget_line(budget)}\n")
    print(markdown_table(time_rows(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
