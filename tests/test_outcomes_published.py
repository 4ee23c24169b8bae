"""Every result with paired findings publishes the per-problem outcomes behind them (results/<name>/problems.csv.gz),
and every interval of its pairs.csv is recomputed from them with the documented formula (analysis.paired)."""
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.paired import paired_difference

RESULTS = Path(__file__).resolve().parents[1] / "results"
NO_OUTCOMES: dict[str, str] = {}  # results whose paired findings were computed before outcomes were published, and why
PAIRED = sorted(p.parent.name for p in RESULTS.glob("*/pairs.csv"))
COLUMN = {"greedy": "greedy", "maj": "majk", "pass": "passk", "pass@1": "pass1"}


def _column(metric: str) -> str:
    """pairs.csv's metric label -> the outcome column: greedy, maj@k, pass@k, pass@1."""
    return "pass1" if metric == "pass@1" else COLUMN[re.sub(r"@\d+$", "", metric)]


def test_the_list_of_results_without_outcomes_is_exact():
    """A result leaves NO_OUTCOMES when its outcomes land (this fails until the entry is removed), and every entry is
    a result with paired findings."""
    assert set(NO_OUTCOMES) <= set(PAIRED)
    for name in PAIRED:
        assert (RESULTS / name / "problems.csv.gz").exists() != (name in NO_OUTCOMES), name


@pytest.mark.parametrize("name", [n for n in PAIRED if n not in NO_OUTCOMES])
def test_every_published_interval_is_recomputed_from_the_outcomes(name):
    out = pd.read_csv(RESULTS / name / "problems.csv.gz")
    pairs = pd.read_csv(RESULTS / name / "pairs.csv", dtype=str)
    assert len(pairs) > 0
    for _, row in pairs.iterrows():
        a, b = row["comparison"].split(" − ")
        col = _column(row["metric"])  # over the rows where it is filled: greedy re-scored on more problems than
        r = paired_difference(out.dropna(subset=[col]), a, b, col)  # the last evaluation sampled (smollm2)
        assert f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]" == row["Δ [95% interval]"], (name, a, b,
                                                                                             row["metric"])
        assert str(r["n_seeds"]) == row["seeds"] and str(r["n_problems"]) == row["problems"]


@pytest.mark.parametrize("name", sorted(p.parent.name for p in RESULTS.glob("*/gains.csv")))
def test_every_gain_over_the_base_is_recomputed_from_the_outcomes(name):
    """gains.csv (each method − the base model) from the same file: the base is one model, written once per seed, so
    its outcomes stand in every seed (analysis.findings.gain_table)."""
    out = pd.read_csv(RESULTS / name / "problems.csv.gz")
    gains = pd.read_csv(RESULTS / name / "gains.csv", dtype=str)
    assert len(gains) > 0
    for _, row in gains.iterrows():
        col = _column(row["metric"])
        assert row["over"] in set(out["method"]), (name, row["over"])
        r = paired_difference(out.dropna(subset=[col]), row["method"], row["over"], col)
        assert f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]" == row["gain [95% interval]"], (name, row["method"])
        assert str(r["n_seeds"]) == row["seeds"] and str(r["n_problems"]) == row["problems"]
