"""What an off-policy grid shows (experiments/configs/off_policy.yaml, docs/concepts/off-policy.md):

    python -m analysis.off_policy OUT [--to DIR]        # DIR (default OUT/report): the tables and the figure below

Each run is placed by its own config (train.staleness k, train.sampler_dtype, train.correction), its loss by its
method, so labels are free. Accuracy is each run's last evaluation, greedy, per problem (RUN/problems.jsonl); every
Δ is the paired two-way interval over the seeds and problems both runs share (analysis.paired), and every family is
adjusted by Holm (analysis.families.holm). Beside each cell, the mismatch the run logged (gcframe.offpolicy): the
mean over its steps of KL(μ‖π_old) by k3, of the share of tokens with |log π_old/μ| > log 2 (mismatch_far_frac), of
the tokens the correction truncated or masked (correction_frac) and of the tokens the clip cut (clip_frac).

    staleness.csv     each loss at every k against itself at k = 0 (float32 sampler, no correction): Δ, its
                      interval, p, Holm p over the family of every such comparison, and the design's detectable
                      difference (analysis.paired.detectable_difference at 80% power, from the pair's own variance
                      components)
    tolerance.csv     per loss: the largest k whose Δ is not separated family-wise from 0, with the detectable
                      difference there (a k not separated is "no change larger than this", not "no change")
    ranks.csv         the losses ranked by accuracy at each k (mean over seeds)
    corrections.csv   at the largest k, each correction against none, Holm over the family
    sampler.csv       a bfloat16 sampler against float32 at each k, and each correction on it against none
    staleness.png     accuracy against k per loss, and each correction at the largest k beside none
    claims.csv        the field's claims, each a planned contrast, Holm over the five:
                      ScaleRL: CISPO tolerates staleness better than GRPO, and than DAPO: the difference in
                      differences (y_CISPO,K − y_CISPO,0) − (y_GRPO,K − y_GRPO,0) per seed and problem;
                      GSPO's sequence ratio is steadier off-policy than GRPO's token ratio: the same for GSPO − GRPO;
                      Yao et al. 2025: token TIS recovers a float32 sampler's accuracy under a bfloat16 one: GRPO with
                      a bfloat16 sampler and TIS against GRPO with a float32 sampler (separated below 0: it does not);
                      asynchronous implementations that skip the recomputation: without π_old recomputed the clip does
                      not hold: GRPO with μ as π_old against GRPO with π_old recomputed at the largest k, the tokens
                      each clipped beside (clip_frac)
    overview.csv      the grid at a glance: a row per loss, a column per cell, the mean ± SD of the seeds' accuracies,
                      and the KL(μ‖π_old) each loss logged at the largest k
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402

LOGGED = {"mismatch_kl_k3": "KL(μ‖π_old) k3", "mismatch_far_frac": "|log ρ| > log 2",
          "correction_frac": "corrected", "clip_frac": "clipped"}
"""The mismatch columns shown beside each cell: the run's mean over its training steps (absent: not logged)."""
ON_POLICY = ("float32", "none")
CLAIMS = [("cispo", "grpo"), ("cispo", "dapo"), ("gspo", "grpo")]
"""The difference-in-differences claims: (A, B) reads "A loses less from k = 0 to the largest k than B"."""
CLAIM_COLUMNS = ["claim", "contrast", "Δ", "lo", "hi", "p", "separated", "detectable", "seeds", "problems",
                 "Holm p", "separated family-wise"]
"""claims.csv's header where the grid holds none of the claims' cells (written so, not as an empty file)."""


def cells(runs) -> pd.DataFrame:
    """One row per run: method (its label), seed, loss, k, dtype, correction and its logged means (LOGGED)."""
    rows = []
    for (label, seed), cfg in runs.configs.items():
        t = cfg.get("train") or {}
        rows.append({"method": label, "seed": seed, "loss": cfg.get("method", label.split("@")[0]),
                     "k": int(t.get("staleness") or 0), "dtype": t.get("sampler_dtype") or "float32",
                     "correction": t.get("correction") or "none"})
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise UserError("no runs with a config.yaml in this folder: give a compare.py folder of the off-policy grid")
    train = runs.train
    logged = [c for c in LOGGED if c in train]
    if logged:
        means = train.groupby(["method", "seed"])[logged].mean().reset_index()
        frame = frame.merge(means, on=["method", "seed"], how="left")
    return frame


def _label(frame: pd.DataFrame, loss: str, k: int, dtype: str = "float32", correction: str = "none") -> str | None:
    hit = frame[(frame["loss"] == loss) & (frame["k"] == k) & (frame["dtype"] == dtype)
                & (frame["correction"] == correction)]["method"].unique()
    return str(hit[0]) if len(hit) else None


def _logged(frame: pd.DataFrame, label: str) -> dict:
    own = frame[frame["method"] == label]
    return {name: float(own[c].mean()) if c in own and own[c].notna().any() else np.nan
            for c, name in LOGGED.items()}


def _compare(outcomes: pd.DataFrame, a: str, b: str) -> dict:
    """A − B on the runs' shared seeds and problems: Δ, interval, p and the 80%-power detectable difference."""
    from analysis import paired

    r = paired.paired_difference(outcomes, a, b, "greedy")
    mde = paired.detectable_difference(r["var_seed"], r["var_problem"], r["var_resid"], r["n_seeds"],
                                       r["n_problems"])["mde"]
    return {"Δ": r["diff"], "lo": r["lo"], "hi": r["hi"], "p": r["p"], "separated": r["separated"],
            "detectable": mde, "seeds": r["n_seeds"], "problems": r["n_problems"]}


def _holm(rows: list[dict]) -> list[dict]:
    from analysis.families import ALPHA, holm

    if rows:
        for r, adj in zip(rows, holm([r["p"] for r in rows])):
            r["Holm p"] = float(adj)
            r["separated family-wise"] = bool(adj < ALPHA)
    return rows


def _accuracy(outcomes: pd.DataFrame, label: str) -> tuple[float, float]:
    per_seed = outcomes[outcomes["method"] == label].groupby("seed")["greedy"].mean()
    return float(per_seed.mean()), float(per_seed.std(ddof=1)) if len(per_seed) > 1 else np.nan


def staleness(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for loss in sorted(frame["loss"].unique()):
        base = _label(frame, loss, 0)
        for k in sorted(frame[(frame["loss"] == loss) & (frame["k"] > 0)]["k"].unique()):
            label = _label(frame, loss, int(k))
            if base and label:
                mean, sd = _accuracy(outcomes, label)
                rows.append({"loss": loss, "k": int(k), "accuracy": mean, "sd": sd,
                             "accuracy at k = 0": _accuracy(outcomes, base)[0],
                             **_compare(outcomes, label, base), **_logged(frame, label)})
    return pd.DataFrame(_holm(rows))


def tolerance(table: pd.DataFrame) -> pd.DataFrame:
    """Per loss: the largest k whose Δ to k = 0 is not separated family-wise, and its detectable difference."""
    rows = []
    for loss, g in table.groupby("loss"):
        g = g.sort_values("k")
        held = g[~g["separated family-wise"]]
        first_bad = g[g["separated family-wise"]]["k"].min() if g["separated family-wise"].any() else None
        ok = held[held["k"] < first_bad] if first_bad is not None else held
        top = ok.iloc[-1] if len(ok) else None
        rows.append({"loss": loss, "largest k not separated from k = 0": int(top["k"]) if top is not None else 0,
                     "detectable there": float(top["detectable"]) if top is not None else np.nan,
                     "first k separated": int(first_bad) if first_bad is not None else None})
    return pd.DataFrame(rows)


def ranks(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for k in sorted(frame["k"].unique()):
        accs = {loss: _accuracy(outcomes, lab)[0] for loss in sorted(frame["loss"].unique())
                if (lab := _label(frame, loss, int(k)))}
        for rank, (loss, acc) in enumerate(sorted(accs.items(), key=lambda x: -x[1]), 1):
            rows.append({"k": int(k), "rank": rank, "loss": loss, "accuracy": acc})
    return pd.DataFrame(rows)


def versus_none(frame: pd.DataFrame, outcomes: pd.DataFrame, dtype: str, ks) -> pd.DataFrame:
    """Each correction against none at the same k and sampler dtype, Holm over the family."""
    rows = []
    for loss in sorted(frame["loss"].unique()):
        for k in ks:
            none = _label(frame, loss, k, dtype)
            for corr in sorted(frame[(frame["loss"] == loss) & (frame["k"] == k) & (frame["dtype"] == dtype)
                                     & (frame["correction"] != "none")]["correction"].unique()):
                label = _label(frame, loss, k, dtype, corr)
                if none and label:
                    rows.append({"loss": loss, "k": k, "sampler": dtype, "correction": corr,
                                 "accuracy": _accuracy(outcomes, label)[0],
                                 "accuracy, none": _accuracy(outcomes, none)[0],
                                 **_compare(outcomes, label, none), **_logged(frame, label)})
    return pd.DataFrame(_holm(rows))


def sampler(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """A bfloat16 (or float16) sampler against float32 at each k, no correction; Holm over the family."""
    rows = []
    for loss in sorted(frame["loss"].unique()):
        for dtype in sorted(set(frame["dtype"]) - {"float32"}):
            for k in sorted(frame[(frame["loss"] == loss) & (frame["dtype"] == dtype)]["k"].unique()):
                low, full = _label(frame, loss, int(k), dtype), _label(frame, loss, int(k))
                if low and full:
                    rows.append({"loss": loss, "k": int(k), "sampler": dtype, "accuracy": _accuracy(outcomes, low)[0],
                                 "accuracy, float32": _accuracy(outcomes, full)[0],
                                 **_compare(outcomes, low, full), **_logged(frame, low)})
    return pd.DataFrame(_holm(rows))


def did(outcomes: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]) -> dict:
    """(y_A1 − y_A0) − (y_B1 − y_B0) per seed and problem, with the two-way interval of analysis.paired: A = (A1, A0)
    and B = (B1, B0) are labels; the four runs must share their seeds and problems."""
    from analysis import paired

    ya1, ya0, seeds, problems = paired.outcome_tables(outcomes, *a, "greedy")
    yb1, yb0, seeds_b, problems_b = paired.outcome_tables(outcomes, *b, "greedy")
    if (seeds, problems) != (seeds_b, problems_b):
        raise UserError(f"{a} and {b} were not evaluated on the same seeds and problems: the difference in "
                        "differences pairs all four runs problem by problem")
    tw = paired.two_way((ya1 - ya0) - (yb1 - yb0))
    r = paired.t_interval(tw["diff"], tw["var"], tw["df"])
    mde = paired.detectable_difference(tw["var_seed"], tw["var_problem"], tw["var_resid"], len(seeds),
                                       len(problems))["mde"]
    return {"Δ": r["diff"], "lo": r["lo"], "hi": r["hi"], "p": r["p"], "separated": r["separated"],
            "detectable": mde, "seeds": len(seeds), "problems": len(problems)}


def claims(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    top = int(frame["k"].max())
    for a, b in CLAIMS:
        labels = [_label(frame, a, top), _label(frame, a, 0), _label(frame, b, top), _label(frame, b, 0)]
        if all(labels) and top > 0:
            rows.append({"claim": f"{a} loses less than {b} from k = 0 to k = {top}",
                         "contrast": f"({labels[0]} − {labels[1]}) − ({labels[2]} − {labels[3]})",
                         **did(outcomes, (labels[0], labels[1]), (labels[2], labels[3]))})
    tis, on = _label(frame, "grpo", 0, "bfloat16", "tis"), _label(frame, "grpo", 0)
    if tis and on:
        rows.append({"claim": "token TIS recovers the float32 sampler's accuracy under a bfloat16 one (grpo)",
                     "contrast": f"{tis} − {on}", **_compare(outcomes, tis, on)})
    naive, kept = _label(frame, "grpo", top, correction="naive"), _label(frame, "grpo", top)
    if naive and kept and top > 0:  # the clip around μ instead of π_old: what the clip cut, beside the accuracies
        rows.append({"claim": f"without recomputing π_old the clip does not hold: μ as π_old against π_old "
                              f"recomputed, k = {top} (grpo)", "contrast": f"{naive} − {kept}",
                     **_compare(outcomes, naive, kept), "clipped": _logged(frame, naive)["clipped"],
                     "clipped, π_old recomputed": _logged(frame, kept)["clipped"]})
    return pd.DataFrame(_holm(rows))


def overview(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """The grid at a glance: a row per loss, a column per cell (k, the sampler's precision, the correction), each the
    greedy test accuracy as mean ± SD over the seeds; the KL(μ‖π_old) each loss logged at the largest k beside."""
    cols = sorted({(int(k), d, c) for k, d, c in frame[["k", "dtype", "correction"]].itertuples(index=False)},
                  key=lambda x: (x[1] != "float32", x[2] != "none", x[2], x[0]))  # float32 by k, corrections, low
    top = int(frame["k"].max())
    rows = []
    for loss in sorted(frame["loss"].unique()):
        row = {"loss": loss}
        for k, dtype, corr in cols:
            name = f"k = {k}" + ("" if dtype == "float32" else f", {dtype}") + ("" if corr == "none" else f", {corr}")
            label = _label(frame, loss, int(k), dtype, corr)
            mean, sd = _accuracy(outcomes, label) if label else (np.nan, np.nan)
            row[name] = "–" if not label else f"{mean:.3f} ± {sd:.3f}" if not np.isnan(sd) else f"{mean:.3f}"
        at_top = _label(frame, loss, top)
        row[f"KL(μ‖π_old) k3 at k = {top}"] = _logged(frame, at_top)["KL(μ‖π_old) k3"] if at_top else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def varied(runs) -> bool:
    """Whether any run's sampler lagged, ran at another precision or was corrected: the grid has off-policy cells."""
    return any((t := cfg.get("train") or {}).get("staleness") or (t.get("sampler_dtype") or "float32") != "float32"
               or (t.get("correction") or "none") != "none" for cfg in runs.configs.values())


def write(out: Path, to: Path, prefix: str = "", runs=None) -> list[Path]:
    """The seven tables (module docstring) of the grid in `out` (`runs`: its analysis.runs.Runs, where the caller has
    it), into `to`, each name after `prefix`."""
    from analysis.runs import Runs, final_outcomes

    runs = runs or Runs(out)
    if not varied(runs):  # else seven empty tables (and a report/ folder) for a grid that is not one
        raise UserError(f"{out} holds no off-policy run (no run sets train.staleness, sampler_dtype or correction), so "
                        "there is nothing to compare and nothing was written: give the folder of an off-policy grid "
                        "(experiments/configs/off_policy.yaml)")
    picks = final_outcomes(out, finished=True)
    if not picks:
        raise UserError(f"no finished run with per-problem outcomes under {out}: finish the grid, or resume it")
    outcomes = picks[0][0]
    frame = cells(runs)
    frame = frame[frame["method"].isin(outcomes["method"].unique())]
    top = int(frame["k"].max())
    tables = {"staleness": staleness(frame, outcomes)}
    tables["tolerance"] = tolerance(tables["staleness"]) if len(tables["staleness"]) else pd.DataFrame()
    tables["ranks"] = ranks(frame, outcomes)
    tables["corrections"] = versus_none(frame, outcomes, "float32", [top])
    tables["sampler"] = pd.concat([sampler(frame, outcomes),
                                   *(versus_none(frame, outcomes, d, sorted(frame["k"].unique()))
                                     for d in sorted(set(frame["dtype"]) - {"float32"}))], ignore_index=True)
    tables["claims"] = claims(frame, outcomes)
    tables["overview"] = overview(frame, outcomes)
    if tables["claims"].empty:  # no claim could be made here: its header, not an empty file no reader can parse
        tables["claims"] = pd.DataFrame(columns=CLAIM_COLUMNS)
    to.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in tables.items():
        if not len(table.columns):  # a table of cells the grid lacks (tolerance without staleness): not written
            continue
        path = to / f"{prefix}{name}.csv"
        table.to_csv(path, index=False, float_format="%.4g")
        written.append(path)
    if len(frame["k"].unique()) > 1:
        written.append(figure(frame, outcomes, to / f"{prefix}staleness.png"))
    return written


def figure(frame: pd.DataFrame, outcomes: pd.DataFrame, path: Path) -> Path:
    """Accuracy against k, one line per loss (float32 sampler, no correction; each point the mean over seeds, the
    bar their SD), and at the largest k each correction beside none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    acc = outcomes.groupby(["method", "seed"])["greedy"].mean().rename("accuracy").reset_index()
    data = frame.drop_duplicates(["method", "seed"]).merge(acc, on=["method", "seed"])
    ks = sorted(data["k"].unique())
    plain = data[(data["dtype"] == "float32") & (data["correction"] == "none")]
    top = data[(data["k"] == ks[-1]) & (data["dtype"] == "float32")]
    dodge = 0.3 if data["loss"].nunique() > 1 else False  # seaborn divides by the number of losses less one
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    sns.pointplot(plain, x="k", y="accuracy", hue="loss", order=ks, errorbar="sd", dodge=dodge, ax=axes[0])
    axes[0].set(xlabel="staleness k (optimiser steps the sampler lags)", ylabel="greedy accuracy, test",
                title="each loss as its sampler lags")
    sns.pointplot(top, x="correction", y="accuracy", hue="loss", errorbar="sd", dodge=dodge, ax=axes[1],
                  linestyle="none",  # categories, not an order: no line between them
                  order=sorted(top["correction"].unique(), key=lambda c: (c != "none", c)), legend=False)
    axes[1].set(xlabel=f"correction at k = {ks[-1]}", ylabel="", title="what each correction recovers")
    fig.tight_layout()
    from analysis.report import save_figure

    save_figure(fig, path, dpi=100)  # atomic: a full disk leaves the figure before, never half of one
    plt.close(fig)
    return path


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.off_policy", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="a compare.py folder of the off-policy grid")
    p.add_argument("--to", type=Path, help="where the tables go (default: OUT/report)")
    args = p.parse_args(argv)
    if not args.out.is_dir():
        raise UserError(f"{args.out} is not a folder: give the --out of a compare.py run of the off-policy grid")
    to = args.to or args.out / "report"
    there = next((q for q in (to, *to.absolute().parents) if q.exists()), None)  # the folder, or the nearest above
    if there is not None and not there.is_dir():
        raise UserError(f"--to {to}: {there} is a file, not a folder: give a folder (created where missing) for the "
                        "tables")
    paths = write(args.out, to)
    print(f"wrote {', '.join(p.name for p in paths)} into {paths[0].parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
