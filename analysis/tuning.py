"""What a comparison's tuning found (`compare.py --tune`, OUT/tune/tune.csv): each method's sensitivity to its
learning rate, the rate chosen, and its expected best validation accuracy against the number of trials.

    python -m analysis.tuning OUT        # OUT/report/tuning.md, tuning.png (analysis.report calls it too)

Expected best validation accuracy after n trials (Dodge et al. 2019, "Show Your Work", eq. 1): with the N trials'
scores sorted, v_(1) <= ... <= v_(N), and n trials drawn at random (with replacement) from them,

    E[max of n] = Σ_i v_(i) · [ (i/N)^n − ((i−1)/N)^n ]

(the probability that the best of n draws is the i-th smallest score). It rises from the mean of the trials (n = 1)
to their best (n → ∞): a method whose curve is flat needs little tuning; one that climbs steeply was only as good
as its best rate. A diverged trial scores 0 here, as a user who tried that rate would have got.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402

TUNE_CSV = Path("tune") / "tune.csv"


def expected_max(scores: list[float], n: int) -> float:
    """Dodge et al. 2019, eq. 1: E[max of n draws with replacement from `scores`]. E.g. scores 0.2, 0.4, n = 2:
    0.2·(1/2)² + 0.4·(1 − (1/2)²) = 0.05 + 0.3 = 0.35."""
    v = sorted(scores)
    N = len(v)
    return sum(x * ((i / N) ** n - ((i - 1) / N) ** n) for i, x in enumerate(v, start=1))


COMPUTE = ["gen_tokens", "dropped_tokens", "pool_tokens", "time_s", "critic_s"]


def read(out: Path) -> pd.DataFrame:
    """One row per (method, rate): validation accuracy averaged over the tuning seeds (what the choice was made on;
    a rate with a diverged seed is diverged), `seeds`, and the mean compute of one trial (experiments/tune.compute).
    Folders tuned on one seed before tune.csv had a seed column read the same."""
    f = Path(out) / TUNE_CSV
    if not f.is_file():
        raise UserError(f"no tuning in {out}: {f} is missing (run compare.py with --tune)")
    df = pd.read_csv(f)
    if "seed" not in df:
        df["seed"] = 0
    have = [c for c in COMPUTE if c in df]
    g = df.groupby(["method", "lr"], sort=False)
    agg = g.agg(val_accuracy=("val_accuracy", "mean"), seeds=("seed", "nunique"), chosen=("chosen", "any"),
                diverged=("status", lambda s: (s == "diverged").any()), **{c: (c, "mean") for c in have})
    agg = agg.reset_index()
    agg["status"] = agg.pop("diverged").map({True: "diverged", False: "ok"})
    agg["edge"] = agg["lr"].isin(df[df["edge"]]["lr"]) if "edge" in df else False
    agg["score"] = agg["val_accuracy"].where(agg["status"] == "ok", 0.0)
    return agg


def tables(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per method: the chosen rate, every rate's validation accuracy (mean over the tuning seeds), and the
    chosen trial's compute; expected best against n)."""
    chosen = df[df["chosen"]].set_index("method")
    rows, curve = [], []
    rates = sorted(df["lr"].unique())  # the grid and every extension past its edges, in one order for every row
    for m, g in df.groupby("method", sort=False):
        got = {r["lr"]: ("diverged" if r["status"] == "diverged" else f"{r['val_accuracy']:.3f}")
               for _, r in g.iterrows()}
        trials = {f"lr {lr:.3g}": got.get(lr, "–") for lr in rates}  # "–": a rate this method did not need
        c = chosen.loc[m]
        cost = {}
        if "gen_tokens" in df:  # one trial at the chosen rate: what it generated (dropped, pool) and its wall time
            cost = {"generated tokens": f"{c['gen_tokens']:,.0f}", "of which dropped": f"{c['dropped_tokens']:,.0f}",
                    "pool": f"{c['pool_tokens']:,.0f}", "time (s)": f"{c['time_s']:.0f}",
                    "critic (s)": f"{c['critic_s']:.0f}"}
        rows.append({"method": m, "chosen lr": f"{c['lr']:.3g}", **trials,
                     "expected best, 1 trial": f"{expected_max(list(g['score']), 1):.3f}",
                     "seeds per trial": int(g["seeds"].max()), **cost})
        for n in range(1, len(g) + 1):
            curve.append({"method": m, "trials": n, "expected best": expected_max(list(g["score"]), n)})
    return pd.DataFrame(rows), pd.DataFrame(curve)


def figure(df: pd.DataFrame, curve: pd.DataFrame, path: Path) -> Path:
    """Left: validation accuracy against rate (log x), the chosen rate ringed; right: expected best against trials."""
    from analysis.runs import palette

    colors = palette(list(dict.fromkeys(df["method"])))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    sns.lineplot(data=df, x="lr", y="score", hue="method", palette=colors, marker="o", ax=ax1)
    for _, r in df[df["chosen"]].iterrows():
        ax1.scatter([r["lr"]], [r["score"]], s=140, facecolors="none", edgecolors=colors[r["method"]], linewidths=1.5)
    ax1.set(xscale="log", xlabel="learning rate (mean over the tuning seeds)", ylabel="validation greedy accuracy",
            title="sensitivity (ringed: chosen)")
    rates = sorted(df["lr"].unique())
    ax1.minorticks_off()
    ax1.set_xticks(rates, [f"{r:.3g}" for r in rates])
    ax1.get_legend().remove()  # one legend for both panels, beside them: it never covers a rate's points
    fig.legend(*ax1.get_legend_handles_labels(), fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5),
               ncol=1 if df["method"].nunique() <= 14 else 2, frameon=False)
    sns.lineplot(data=curve, x="trials", y="expected best", hue="method", palette=colors, marker="o", ax=ax2,
                 legend=False)
    ax2.set(xlabel="trials (rates drawn at random from the grid)", ylabel="expected best validation accuracy",
            title="expected best after n trials (Dodge et al. 2019)")
    ax2.set_xticks(sorted(curve["trials"].unique()))
    fig.tight_layout()
    from analysis.savefig import save_figure

    save_figure(fig, path, dpi=110, bbox_inches="tight")  # atomic: never a truncated PNG
    plt.close(fig)
    return path


def write(out: Path, report_dir: Path | None = None) -> Path:
    """OUT/report/tuning.md and tuning.png -> the markdown file."""
    from analysis.runs import markdown_table

    df = read(out)
    table, curve = tables(df)
    report_dir = Path(report_dir or Path(out) / "report")
    report_dir.mkdir(parents=True, exist_ok=True)
    figure(df, curve, report_dir / "tuning.png")
    seeds = int(df["seeds"].max()) if len(df) else 0
    md = ("## Tuning: each method's rate, chosen on validation\n\n"
          f"Every rate of the grid per method ({seeds} seed(s) each; a best rate at the grid's edge adds one rate "
          "beyond it), validation accuracy averaged over the seeds; the chosen rate is the best (ties: the smaller "
          "rate); the expected best of one trial is their mean. The compute columns are one trial's at the chosen "
          "rate. Every finding is scored on the test problems at these rates.\n\n" + markdown_table(table.to_dict("records"))
          + "\n![sensitivity and expected best validation accuracy](tuning.png)\n")
    (report_dir / "tuning.md").write_text(md)
    return report_dir / "tuning.md"


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.tuning", description=__doc__.split("\n")[0])
    p.add_argument("out", help="a compare.py folder made with --tune")
    args = p.parse_args(argv)
    print(f"tuning: {write(Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
