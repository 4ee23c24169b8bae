"""What RL adds over SFT given the checker, against the annotator's slip rate (experiments/slip_sweep.py).

    python -m analysis.slip runs/slip_sweep [--out DIR]     # DIR/slip.csv, levels.csv, table.csv and slip.png
                                                            # (default: the sweep's folder)

At each level (a compare.py folder OUT/slip<rate>/) the SFT baseline is the better of `sft` and `sft_filtered` on the
validation problems (their last evaluation while training, mean over seeds): a choice, so it is made on validation.
Every other method's greedy gain over it is then the paired test on the test problems (analysis.paired: seeds ×
problems, each seed's runs from that seed's base), with its 95% interval and the difference the design detects
(α 0.05, power 0.8). levels.csv gives what the gains are measured from: each level's bases and every method's mean
test accuracy (greedy, pass@k), and how many demonstrations the checker accepted there; table.csv is the page's
table of both.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402

BASELINES = ("sft", "sft_filtered")


def level_rate(folder: Path) -> float:
    return float(folder.name.removeprefix("slip"))


def baseline(runs) -> tuple[str, float]:
    """(the SFT baseline with the best mean validation accuracy at the end of training, that accuracy); ties: the
    first of BASELINES."""
    if runs.eval_split() != "validation":
        raise UserError(f"{runs.out}: the runs evaluated on {runs.eval_split()} while training; the SFT baseline is "
                        "chosen on validation (train.eval_split: validation)")
    last = runs.final_eval()
    val = {m: float(last[last["method"] == m]["eval_accuracy"].mean()) for m in BASELINES if m in set(last["method"])}
    if not val:
        raise UserError(f"{runs.out} has neither {' nor '.join(BASELINES)}: the sweep compares RL with them")
    best = max(val.values())
    return next(m for m in BASELINES if val.get(m) == best), best


def level_rows(folder: Path) -> list[dict]:
    """One row per RL method of one level: its greedy gain over the level's SFT baseline on the test problems."""
    from analysis import paired
    from analysis.runs import Runs

    runs = Runs(folder)
    base, base_val = baseline(runs)
    frame = runs.outcomes()[0][0]  # greedy first: the re-scoring on the test problems
    rows = []
    for m in [m for m in runs.methods if m not in BASELINES]:
        r = paired.paired_difference(frame, m, base, "greedy")
        mde = paired.detectable_difference(r["var_seed"], r["var_problem"], r["var_resid"], r["n_seeds"],
                                           r["n_problems"])["mde"]
        rows.append({"slip": level_rate(folder), "method": m, "baseline": base, "baseline validation": base_val,
                     "gain": r["diff"], "lo": r["lo"], "hi": r["hi"], "separated": r["separated"],
                     "detectable": mde, "seeds": r["n_seeds"], "problems": r["n_problems"]})
    return rows


def finished_levels(out: Path) -> list[Path]:
    levels = sorted((p for p in Path(out).glob("slip*") if p.is_dir() and (p / "summary.csv").is_file()),
                    key=level_rate)
    if not levels:
        raise UserError(f"no finished level in {out}: a level is OUT/slip<rate>/ with its summary.csv "
                        "(python experiments/slip_sweep.py)")
    return levels


def table(out: Path) -> pd.DataFrame:
    return pd.DataFrame([r for f in finished_levels(out) for r in level_rows(f)])


def accuracy_rows(folder: Path) -> list[dict]:
    """One row per model of one level (each seed's base under the runs' base label, then every method): mean test
    greedy accuracy and pass@k over seeds × problems, and the demonstrations the checker accepted (sft_filtered's
    logged demos_accepted, the same for every seed: the level's demonstrations are one set)."""
    from analysis.runs import Runs

    runs = Runs(folder)
    frame = runs.outcomes()[0][0]
    base = runs.base_outcomes()
    if base is not None:
        frame = pd.concat([base, frame], ignore_index=True)
    accepted = runs.train[runs.train["method"] == "sft_filtered"].get("demos_accepted")
    n_ok = int(accepted.max()) if accepted is not None and accepted.notna().any() else None
    rows = []
    for m, g in frame.groupby("method", sort=False):
        rows.append({"slip": level_rate(folder), "method": m, "greedy": g["greedy"].mean(),
                     "passk": g["passk"].mean() if "passk" in g else float("nan"), "seeds": g["seed"].nunique(),
                     "problems": g["problem"].nunique(), "demos_accepted": n_ok})
    return rows


def levels_table(out: Path) -> pd.DataFrame:
    return pd.DataFrame([r for f in finished_levels(out) for r in accuracy_rows(f)])


def shown_table(gains: pd.DataFrame, acc: pd.DataFrame) -> pd.DataFrame:
    """The page's table, one row per level: the demonstrations the checker accepted, the mean test greedy accuracy of
    the bases and both SFT baselines, which baseline validation chose, and each RL method's gain over it with its 95%
    interval (separated ones marked *)."""
    rows = []
    for slip, g in gains.groupby("slip", sort=True):
        level = acc[acc["slip"] == slip]
        a, accepted = level.set_index("method")["greedy"], level["demos_accepted"].dropna()
        row = {"slip": f"{slip:g}", "demonstrations accepted": f"{int(accepted.iloc[0]):,}" if len(accepted) else "–"}
        for m in [m for m in a.index if m not in set(gains["method"])]:  # the bases and the SFT baselines
            row[m] = f"{a[m]:.3f}"
        row["baseline (validation)"] = g["baseline"].iloc[0]
        for _, r in g.iterrows():
            row[f"{r['method']} − baseline"] = f"{r['gain']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]" + \
                ("*" if r["separated"] else "")
        rows.append(row)
    return pd.DataFrame(rows)


def figure(df: pd.DataFrame, path: Path, acc: pd.DataFrame | None = None) -> Path:
    """Gain over the better SFT baseline against the slip rate, one line per method, 95% intervals as bars; with
    `acc` (levels_table), a panel on its left with every model's mean test accuracy at each level."""
    from analysis.runs import palette

    colors = palette(list(dict.fromkeys([*(acc["method"] if acc is not None else []), *df["method"]])))
    if acc is not None:
        fig, (left, ax) = plt.subplots(1, 2, figsize=(11, 4))
        for m, g in acc.groupby("method", sort=False):
            left.plot(g["slip"], g["greedy"], marker="o", color=colors[m], label=m,
                      ls="--" if m not in set(df["method"]) else "-")
        left.set(xlabel="annotator's slip rate (task.demo_slip)", ylabel="test greedy accuracy (mean over seeds)",
                 xticks=sorted(acc["slip"].unique()), ylim=(0, 1))
        left.legend(fontsize=8)
        left.set_title("every model at each level (dashed: the bases and SFT baselines)", fontsize=9)
    else:
        fig, ax = plt.subplots(figsize=(6.5, 4))
    methods = list(dict.fromkeys(df["method"]))
    width = 0.012 * (len(methods) - 1)
    for i, (m, g) in enumerate(df.groupby("method", sort=False)):
        x = g["slip"] + (i - (len(methods) - 1) / 2) * 0.012  # side by side at each level
        ax.errorbar(x, g["gain"], yerr=[g["gain"] - g["lo"], g["hi"] - g["gain"]], marker="o", capsize=3,
                    color=colors[m], label=m)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel="annotator's slip rate (task.demo_slip)", ylabel="greedy gain over the better SFT baseline (test)",
           xticks=sorted(df["slip"].unique()), xlim=(df["slip"].min() - 0.05 - width, df["slip"].max() + 0.05 + width))
    ax.legend(fontsize=8)
    ax.set_title("what RL adds over SFT given the checker (95% intervals, seeds × problems)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(sweep: Path, dest: Path) -> pd.DataFrame:
    """DEST/slip.csv and DEST/slip.png from the sweep's finished levels -> the table."""
    df = table(Path(sweep))
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    df.to_csv(dest / "slip.csv", index=False, float_format="%.4f")
    acc = levels_table(Path(sweep))
    acc.to_csv(dest / "levels.csv", index=False, float_format="%.4f")
    shown_table(df, acc).to_csv(dest / "table.csv", index=False)
    figure(df, dest / "slip.png", acc)
    return df


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.slip", description=__doc__.split("\n")[0])
    p.add_argument("sweep", help="the slip sweep's folder (experiments/slip_sweep.py --out)")
    p.add_argument("--out", help="where slip.csv, levels.csv, table.csv and slip.png go (default: the sweep's folder)")
    args = p.parse_args(argv)
    out = Path(args.out or args.sweep)
    df = write(Path(args.sweep), out)
    print(f"slip sweep: {len(df)} gains at {df['slip'].nunique()} levels -> {out / 'slip.csv'}, "
          f"{out / 'levels.csv'}, {out / 'table.csv'}, {out / 'slip.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
