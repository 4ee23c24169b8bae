"""Every result with paired findings publishes the per-problem outcomes behind them (results/<name>/problems.csv.gz),
and the intervals of its pairs.csv (all of them, or a fixed sample of SAMPLE in the largest) are recomputed from them
with the documented formula (analysis.paired), a planned
subgroup's row (its `subgroup` column: carry / no_carry) from the outcomes of that subgroup's problems."""
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.paired import paired_difference

RESULTS = Path(__file__).resolve().parents[1] / "results"
PAIRED = sorted(p.parent.name for p in RESULTS.glob("*/pairs.csv"))
COLUMN = {"greedy": "greedy", "maj": "majk", "pass": "passk", "pass@1": "pass1"}


def _column(metric: str) -> str:
    """pairs.csv's metric label -> the outcome column: greedy, maj@k, pass@k, pass@1."""
    return "pass1" if metric == "pass@1" else COLUMN[re.sub(r"@\d+$", "", metric)]


def _pairs(out: pd.DataFrame):
    """-> a function (a, b, column) -> the rows of methods a and b where that column is filled (greedy may be re-scored
    on more problems than the last evaluation sampled, as on smollm2): each method's rows split out once, not found
    again for every pair."""
    split: dict = {}

    def rows(a: str, b: str, col: str) -> pd.DataFrame:
        if col not in split:
            split[col] = dict(iter(out.dropna(subset=[col]).groupby("method", sort=False)))
        return pd.concat([split[col][a], split[col][b]])
    return rows


def _recomputed(rows, a: str, b: str, metric: str) -> tuple[str, str, str]:
    """a − b on `metric` by the paired test (`rows`: a `_pairs` function) -> (the interval as published, seeds,
    problems)."""
    col = _column(metric)
    r = paired_difference(rows(a, b, col), a, b, col)
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]", str(r["n_seeds"]), str(r["n_problems"])


def _subgroup(name: str, out: pd.DataFrame, table: pd.DataFrame):
    """-> a function (subgroup name -> a `_pairs` function on the outcomes of its problems); the task built from the
    result's config.yaml says which test problem is in which (analysis.findings.problem_subgroups)."""
    if "subgroup" not in table or (table["subgroup"] == "all").all():
        every = _pairs(out)
        return lambda group: every
    from types import SimpleNamespace

    import yaml

    from analysis.findings import problem_subgroups

    cfg = yaml.safe_load((RESULTS / name / "config.yaml").read_text())
    groups = problem_subgroups(SimpleNamespace(configs={("result", 0): cfg}))
    assert set(out["problem"]) <= set(groups), name
    by = {"all": _pairs(out), **{g: _pairs(f) for g, f in out.groupby(out["problem"].map(groups))}}
    return lambda group: by[group]


def test_every_result_with_paired_findings_publishes_its_outcomes():
    for name in PAIRED:
        assert (RESULTS / name / "problems.csv.gz").exists(), name


SAMPLE = 400
"""Rows recomputed of a pairs.csv longer than this: a fixed random sample of them (the default's 25 methods give 3,600
rows; tests/test_subgroups.py, marked slow, re-decides every one of them through analysis.findings and compares the
bytes)."""


@pytest.mark.parametrize("name", PAIRED)
def test_every_published_interval_is_recomputed_from_the_outcomes(name):
    out = pd.read_csv(RESULTS / name / "problems.csv.gz")
    pairs = pd.read_csv(RESULTS / name / "pairs.csv", dtype=str)
    assert len(pairs) > 0
    if len(pairs) > SAMPLE:
        pairs = pairs.sample(n=SAMPLE, random_state=0)
    on = _subgroup(name, out, pairs)
    for _, row in pairs.iterrows():
        a, b = row["comparison"].split(" − ")
        group = row.get("subgroup", "all")
        assert _recomputed(on(group), a, b, row["metric"]) == \
            (row["Δ [95% interval]"], row["seeds"], row["problems"]), (name, a, b, row["metric"], group)


@pytest.mark.parametrize("name", sorted(p.parent.name for p in RESULTS.glob("*/gains.csv")))
def test_every_gain_over_the_base_is_recomputed_from_the_outcomes(name):
    """gains.csv (each method − the base model) from the same file: the base is one model, written once per seed, so
    its outcomes stand in every seed (analysis.findings.gain_table)."""
    out = pd.read_csv(RESULTS / name / "problems.csv.gz")
    gains = pd.read_csv(RESULTS / name / "gains.csv", dtype=str)
    assert len(gains) > 0
    on, methods = _subgroup(name, out, gains), set(out["method"])
    for _, row in gains.iterrows():
        assert row["over"] in methods, (name, row["over"])
        group = row.get("subgroup", "all")
        assert _recomputed(on(group), row["method"], row["over"], row["metric"]) == \
            (row["gain [95% interval]"], row["seeds"], row["problems"]), (name, row["method"], row["metric"], group)
