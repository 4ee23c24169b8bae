"""What an off-policy grid shows (experiments/configs/off_policy.yaml, docs/concepts/off-policy.md):

    python -m analysis.off_policy OUT [--to DIR]        # DIR (default OUT/report): the tables and the figure below
    python -m analysis.off_policy --result results/off_policy [--to DIR]   # the tables again from a committed result

A committed result holds no run folder: --result re-makes the tables (not the figure) from its files, each label's
k, sampler precision and correction from its config.yaml, the outcomes from problems.csv.gz, and the mismatch each
run logged (below) from the committed tables themselves (the runs' metrics are not committed, and no test reads them).

Each run is placed by its own config (train.staleness k, train.sampler_dtype, train.correction), its loss by its
method, so labels are free. Accuracy is each run's last evaluation, greedy, per problem (RUN/problems.jsonl); every
Δ is the paired two-way interval over the seeds and problems both runs share (analysis.paired), and every family is
adjusted by Holm (analysis.families.holm). Beside each cell, the mismatch the run logged (gcframe.offpolicy): the
mean over its steps of KL(μ‖π_old) by k3, of the share of tokens with |log π_old/μ| > log 2 (mismatch_far_frac), of
the tokens the correction truncated or masked (correction_frac) and of the tokens the clip cut (clip_frac).

    staleness.csv     each loss at every k against itself at k = 0 (float32 sampler, no correction): Δ, its
                      interval, p, Holm p over the family of every such comparison, and the design's detectable
                      difference (analysis.paired.detectable_difference at 80% power, from the pair's own variance
                      components) at α and at α/m, Holm's first level in a family of m (DETECTABLE_FW)
    tolerance.csv     per loss: the largest k whose Δ is not separated family-wise from 0, with the detectable
                      differences there: a k not separated is undecided below them, neither "no change" nor a
                      tolerance (where they are large, what is missing is power)
    ranks.csv         the losses ranked by accuracy at each k (mean over seeds)
    corrections.csv   at the largest k, each correction against none, Holm over the family
    sampler.csv       a bfloat16 sampler against float32 at each k, and each correction on it against none: one
                      family, Holm over all its rows (the config's bf16_sampler family, 15 pairs in off_policy.yaml)
    staleness.png     accuracy against k per loss, and each correction at the largest k beside none
    claims.csv        the field's claims, each a planned contrast, Holm over the four the config declares
                      (its field_claims family; the config names each staleness claim by its two lagged arms, the
                      contrast is their difference in differences), and one contrast added after the grid's config,
                      reported outside the family with its own p (family column ADDED):
                      ScaleRL: CISPO tolerates staleness better than GRPO, and than DAPO: the difference in
                      differences (y_CISPO,K − y_CISPO,0) − (y_GRPO,K − y_GRPO,0) per seed and problem;
                      GSPO's sequence ratio is steadier off-policy than GRPO's token ratio: the same for GSPO − GRPO;
                      Yao et al. 2025: token TIS recovers a float32 sampler's accuracy under a bfloat16 one: GRPO with
                      a bfloat16 sampler and TIS against GRPO with a float32 sampler (separated below 0: it does not);
                      added after the grid's config, outside the family: asynchronous implementations that skip the
                      recomputation: without π_old recomputed the clip does not hold: GRPO with μ as π_old against
                      GRPO with π_old recomputed at the largest k, the tokens each clipped beside (clip_frac)
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

OUTCOMES = "problems.csv.gz"
"""A committed result's per-problem outcomes (analysis.results.OUTCOMES, named here: analysis.results imports this
module)."""

LOGGED = {"mismatch_kl_k3": "KL(μ‖π_old) k3", "mismatch_far_frac": "|log ρ| > log 2",
          "correction_frac": "corrected", "clip_frac": "clipped"}
"""The mismatch columns shown beside each cell: the run's mean over its training steps (absent: not logged)."""
ON_POLICY = ("float32", "none")
CLAIMS = [("cispo", "grpo"), ("cispo", "dapo"), ("gspo", "grpo")]
"""The difference-in-differences claims: (A, B) reads "A loses less from k = 0 to the largest k than B"."""
FAMILY, ADDED = "field_claims", "added after the grid's config: outside the family, p unadjusted"
"""claims.csv's family column: the config's declared family (Holm over its members alone), or the contrast the
analysis added after the grid's config was declared (μ as π_old against π_old recomputed), not adjusted with it."""
DETECTABLE_FW = "detectable at α/m"
"""The detectable difference at Holm's first level α/m of the row's family of m (80% power): the smallest level
Holm uses, so a difference of this size is separated family-wise with 80% power whatever the others' p."""
CLAIM_COLUMNS = ["claim", "family", "contrast", "Δ", "lo", "hi", "p", "separated", "detectable", "seeds", "problems",
                 "Holm p", "separated family-wise", DETECTABLE_FW]
"""claims.csv's header where the grid holds none of the claims' cells (written so, not as an empty file)."""
TOLERANCE = ("largest k not separated family-wise (undecided, not tolerated)", "detectable there",
             "detectable there at α/m", "first k separated family-wise")
"""tolerance.csv's columns: a k not separated is undecided below its detectable differences, not a tolerance."""


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
            "detectable": mde, "seeds": r["n_seeds"], "problems": r["n_problems"],
            "_components": (r["var_seed"], r["var_problem"], r["var_resid"])}


def _holm(rows: list[dict], family=None) -> list[dict]:
    """Holm over the rows of `family` (every row where None; the others are left unadjusted, their Holm columns
    empty), and each row's detectable difference at α/m of that family (DETECTABLE_FW)."""
    from analysis import paired
    from analysis.families import ALPHA, holm

    members = [r for r in rows if family is None or r.get("family") == family]
    if members:
        for r, adj in zip(members, holm([r["p"] for r in members])):
            r["Holm p"] = float(adj)
            r["separated family-wise"] = bool(adj < ALPHA)
    for r in rows:
        r.setdefault("Holm p", np.nan)
        r.setdefault("separated family-wise", None)
        components = r.pop("_components", None)
        r[DETECTABLE_FW] = (paired.detectable_difference(*components, r["seeds"], r["problems"],
                                                         alpha=ALPHA / len(members))["mde"]
                            if components is not None and r in members else np.nan)
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
    """Per loss: the largest k whose Δ to k = 0 is not separated family-wise (before the first that is), and its
    detectable differences (TOLERANCE's columns): undecided below them, not a tolerance."""
    rows = []
    for loss, g in table.groupby("loss"):
        g = g.sort_values("k")
        held = g[~g["separated family-wise"]]
        first_bad = g[g["separated family-wise"]]["k"].min() if g["separated family-wise"].any() else None
        ok = held[held["k"] < first_bad] if first_bad is not None else held
        top = ok.iloc[-1] if len(ok) else None
        at = {c: float(top[c]) if top is not None and c in top else np.nan for c in ("detectable", DETECTABLE_FW)}
        rows.append({"loss": loss, TOLERANCE[0]: int(top["k"]) if top is not None else 0,
                     TOLERANCE[1]: at["detectable"], TOLERANCE[2]: at[DETECTABLE_FW],
                     TOLERANCE[3]: int(first_bad) if first_bad is not None else None})
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
    return pd.DataFrame(_holm(_versus_none_rows(frame, outcomes, dtype, ks)))


def _versus_none_rows(frame: pd.DataFrame, outcomes: pd.DataFrame, dtype: str, ks) -> list[dict]:
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
    return rows


def sampler(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """The sampler's family: a bfloat16 (or float16) sampler against float32 at each k, no correction, and each
    correction on the lower-precision sampler against none on it, Holm over all these rows together (the config's
    bf16_sampler family declares them as one: in off_policy.yaml 14 pairs of the first kind and 1 of the second)."""
    rows = _sampler_rows(frame, outcomes)
    for dtype in sorted(set(frame["dtype"]) - {"float32"}):
        rows += _versus_none_rows(frame, outcomes, dtype, sorted(frame["k"].unique()))
    return pd.DataFrame(_holm(rows))


def _sampler_rows(frame: pd.DataFrame, outcomes: pd.DataFrame) -> list[dict]:
    rows = []
    for loss in sorted(frame["loss"].unique()):
        for dtype in sorted(set(frame["dtype"]) - {"float32"}):
            for k in sorted(frame[(frame["loss"] == loss) & (frame["dtype"] == dtype)]["k"].unique()):
                low, full = _label(frame, loss, int(k), dtype), _label(frame, loss, int(k))
                if low and full:
                    rows.append({"loss": loss, "k": int(k), "sampler": dtype, "accuracy": _accuracy(outcomes, low)[0],
                                 "accuracy, float32": _accuracy(outcomes, full)[0],
                                 **_compare(outcomes, low, full), **_logged(frame, low)})
    return rows


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
            "detectable": mde, "seeds": len(seeds), "problems": len(problems),
            "_components": (tw["var_seed"], tw["var_problem"], tw["var_resid"])}


def claims(frame: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    top = int(frame["k"].max())
    for a, b in CLAIMS:
        labels = [_label(frame, a, top), _label(frame, a, 0), _label(frame, b, top), _label(frame, b, 0)]
        if all(labels) and top > 0:
            rows.append({"claim": f"{a} loses less than {b} from k = 0 to k = {top}", "family": FAMILY,
                         "contrast": f"({labels[0]} − {labels[1]}) − ({labels[2]} − {labels[3]})",
                         **did(outcomes, (labels[0], labels[1]), (labels[2], labels[3]))})
    tis, on = _label(frame, "grpo", 0, "bfloat16", "tis"), _label(frame, "grpo", 0)
    if tis and on:
        rows.append({"claim": "token TIS recovers the float32 sampler's accuracy under a bfloat16 one (grpo)",
                     "family": FAMILY, "contrast": f"{tis} − {on}", **_compare(outcomes, tis, on)})
    naive, kept = _label(frame, "grpo", top, correction="naive"), _label(frame, "grpo", top)
    if naive and kept and top > 0:  # the clip around μ instead of π_old: what the clip cut, beside the accuracies
        rows.append({"claim": f"without recomputing π_old the clip does not hold: μ as π_old against π_old "
                              f"recomputed, k = {top} (grpo)", "family": ADDED, "contrast": f"{naive} − {kept}",
                     **_compare(outcomes, naive, kept), "clipped": _logged(frame, naive)["clipped"],
                     "clipped, π_old recomputed": _logged(frame, kept)["clipped"]})
    return pd.DataFrame(_holm(rows, family=FAMILY))


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
    written = save(tables(frame, outcomes), to, prefix)
    if len(frame["k"].unique()) > 1:
        written.append(figure(frame, outcomes, to / f"{prefix}staleness.png"))
    return written


def tables(frame: pd.DataFrame, outcomes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The seven tables of the module docstring, by name, from `cells`' frame and the per-problem outcomes."""
    top = int(frame["k"].max())
    out = {"staleness": staleness(frame, outcomes)}
    out["tolerance"] = tolerance(out["staleness"]) if len(out["staleness"]) else pd.DataFrame()
    out["ranks"] = ranks(frame, outcomes)
    out["corrections"] = versus_none(frame, outcomes, "float32", [top])
    out["sampler"] = sampler(frame, outcomes)
    out["claims"] = claims(frame, outcomes)
    out["overview"] = overview(frame, outcomes)
    if out["claims"].empty:  # no claim could be made here: its header, not an empty file no reader can parse
        out["claims"] = pd.DataFrame(columns=CLAIM_COLUMNS)
    return out


def save(made: dict[str, pd.DataFrame], to: Path, prefix: str = "") -> list[Path]:
    to.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in made.items():
        if not len(table.columns):  # a table of cells the grid lacks (tolerance without staleness): not written
            continue
        path = to / f"{prefix}{name}.csv"
        table.to_csv(path, index=False, float_format="%.4g")
        written.append(path)
    return written


def committed(result: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(`cells`' frame, the outcomes) of a committed result (results/<name>/, no run folder): each label placed by its
    config.yaml (the grid's train section under the label's own), its seeds and outcomes from problems.csv.gz, its
    logged mismatch means from the committed staleness, corrections and sampler tables (empty where none holds the
    cell: a k = 0 arm's, which no table shows)."""
    import yaml

    missing = [f for f in ("config.yaml", OUTCOMES) if not (result / f).is_file()]
    if missing:
        raise UserError(f"{result} lacks {' and '.join(missing)}: give a committed result of the off-policy grid "
                        "(results/off_policy)")
    cfg = yaml.safe_load((result / "config.yaml").read_text()) or {}
    outcomes = pd.read_csv(result / OUTCOMES)
    methods = cfg.get("methods") or {}
    logged = _committed_logged(result)
    rows = []
    for label, seed in outcomes[["method", "seed"]].drop_duplicates().itertuples(index=False):
        own = methods.get(label) or {}
        t = {**(cfg.get("train") or {}), **(own.get("train") or {})}
        loss = own.get("method", str(label).split("@")[0])
        place = (loss, int(t.get("staleness") or 0), t.get("sampler_dtype") or "float32",
                 t.get("correction") or "none")
        rows.append({"method": label, "seed": int(seed), "loss": place[0], "k": place[1], "dtype": place[2],
                     "correction": place[3], **logged.get(place, {})})
    frame = pd.DataFrame(rows)
    for c in LOGGED:
        if c not in frame:
            frame[c] = np.nan
    if not ((frame["k"] > 0) | (frame["dtype"] != "float32") | (frame["correction"] != "none")).any():
        raise UserError(f"{result} holds no off-policy arm (no label of its config.yaml sets train.staleness, "
                        "sampler_dtype or correction), so there is nothing to compare and nothing was written")
    return frame, outcomes


def _committed_logged(result: Path) -> dict[tuple, dict]:
    """(loss, k, dtype, correction) -> the mismatch means a committed result's tables show for that cell."""
    names = {v: k for k, v in LOGGED.items()}
    out = {}
    for name in ("staleness", "corrections", "sampler"):
        path = result / f"{name}.csv"
        if not path.is_file():
            continue
        for r in pd.read_csv(path).to_dict("records"):
            corr = r.get("correction")
            place = (r["loss"], int(r["k"]), r.get("sampler") if isinstance(r.get("sampler"), str) else "float32",
                     corr if isinstance(corr, str) else "none")
            out[place] = {names[c]: r[c] for c in names if c in r}
    return out


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
    from analysis.savefig import save_figure

    save_figure(fig, path, dpi=100)  # atomic: a full disk leaves the figure before, never half of one
    plt.close(fig)
    return path


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.off_policy", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, nargs="?", help="a compare.py folder of the off-policy grid")
    p.add_argument("--result", type=Path, help="a committed result instead (results/off_policy): its tables re-made "
                   "from its files (module docstring), into the result itself unless --to names another folder")
    p.add_argument("--to", type=Path, help="where the tables go (default: OUT/report, or the --result folder)")
    args = p.parse_args(argv)
    if (args.out is None) == (args.result is None):
        raise UserError("give a compare.py folder of the off-policy grid or --result results/<name>, one of the two")
    if args.result is not None:
        if not args.result.is_dir():
            raise UserError(f"--result {args.result} is not a folder: give a committed result (results/off_policy)")
        _to_folder(args.to or args.result)
        paths = save(tables(*committed(args.result)), args.to or args.result)
        print(f"wrote {', '.join(p.name for p in paths)} into {paths[0].parent}")
        return 0
    if not args.out.is_dir():
        raise UserError(f"{args.out} is not a folder: give the --out of a compare.py run of the off-policy grid")
    to = args.to or args.out / "report"
    _to_folder(to)
    paths = write(args.out, to)
    print(f"wrote {', '.join(p.name for p in paths)} into {paths[0].parent}")
    return 0


def _to_folder(to: Path) -> None:
    there = next((q for q in (to, *to.absolute().parents) if q.exists()), None)  # the folder, or the nearest above
    if there is not None and not there.is_dir():
        raise UserError(f"--to {to}: {there} is a file, not a folder: give a folder (created where missing) for the "
                        "tables")


if __name__ == "__main__":
    sys.exit(main())
