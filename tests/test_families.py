"""Families of comparisons and their family-wise verdicts (analysis.families): Holm's adjustment by hand, the config
section refused in one line when it is wrong, and every committed result's family-wise columns re-derived: the p-values
from its outcomes, Holm within each declared family, and the marks its summary tables show."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis import families
from analysis.paired import t_interval, two_way
from gcframe.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
WITH_FAMILIES = sorted(p.parent.name for p in RESULTS.glob("*/families.csv"))


def test_holm_by_hand():
    # p = 0.01, 0.04, 0.03, 0.005. Sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 -> 0.06
    # (never below the one before it: the step-down stops at the first comparison it keeps)
    adjusted = families.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert list(adjusted < 0.05) == [True, False, False, True]  # 0.04 < 0.05 alone, not in this family of 4
    assert families.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # 0.5·2 = 1, capped; 0.9 -> max(1, 0.9) = 1
    assert families.holm([0.02]) == pytest.approx([0.02])  # a family of one is the comparison itself


def test_the_p_value_is_the_intervals_test():
    # D = 0.1, SE = 0.05, ν = 4: t = 2, P(T_4 > 2) = 1/2 − 1/√2·... = 0.0581 (two-sided 0.1161); the 95% interval
    # 0.1 ± 2.776·0.05 = [−0.039, +0.239] contains 0: p > 0.05 and not separated
    r = t_interval(0.1, 0.0025, 4)
    assert r["p"] == pytest.approx(0.11612, abs=1e-5) and not r["separated"]
    rng = np.random.default_rng(0)
    for diff, se, df in zip(rng.normal(0, 0.1, 200), rng.uniform(0.01, 0.1, 200), rng.uniform(1.5, 40, 200)):
        r = t_interval(diff, se * se, df)
        assert r["separated"] == (r["p"] < 0.05)


def _table(rows):
    return pd.DataFrame(rows, columns=["a", "b", "metric", "subgroup", "diff", "p", "separated"])


def test_adjust_within_each_family_and_subgroup():
    pairs = _table([("x", "f", "greedy", "all", 0.10, 0.01, True), ("y", "f", "greedy", "all", 0.08, 0.04, True),
                    ("f", "z", "greedy", "all", 0.20, 0.005, True), ("x", "y", "greedy", "all", 0.02, 0.001, True),
                    ("x", "f", "greedy", "carry", 0.30, 0.04, True), ("x", "f", "pass1", "all", 0.1, 0.001, True)])
    spec = families.check({"over_f": {"against": "f", "subgroups": ["all", "carry"]}})
    p, _, rows = families.adjust(spec, pairs, pd.DataFrame(), "SFT base")
    # on all problems x − f, y − f and f − z are the family (greedy only): Holm of 0.01, 0.04, 0.005 is 0.02, 0.04,
    # 0.015; on the carries x − f alone keeps its 0.04; x − y and the pass@1 row belong to no family
    assert list(p["p_holm"][:3]) == pytest.approx([0.02, 0.04, 0.015]) and p["p_holm"][4] == pytest.approx(0.04)
    assert p["family"].tolist() == ["over_f"] * 3 + [None, "over_f", None]
    assert rows[0]["family-wise: above"] == "x, y" and rows[0]["family-wise: below"] == "z"  # f − z > 0: z below f
    assert (rows[0]["members"], rows[0]["separated family-wise (Holm)"], rows[1]["members"]) == (3, 3, 1)
    assert families.mark(True, p["fw_separated"][0]) == ", separated family-wise"
    assert families.mark(True, False) == ", separated per comparison" and families.mark(True, None) == ", separated"
    assert families.mark(False, False) == ""
    assert families.sentence(rows[0]).startswith("Family over_f (every method − f, greedy, on all problems; declared "
                                                 "before the runs), Holm at α 0.05: 3 of 3 separated family-wise")
    with pytest.raises(UserError, match="one family"):
        families.adjust(families.check({"a": {"against": "f"}, "b": {"pairs": [["x", "f"]]}}), pairs, pd.DataFrame(),
                        "SFT base")
    with pytest.raises(UserError, match="does not have"):
        families.adjust(families.check({"a": {"against": "f", "subgroups": ["odd"]}}), pairs, pd.DataFrame(), "b")


@pytest.mark.parametrize("spec, words", [
    ({"f": {"against": "x", "pairs": "all"}}, "exactly one of"), ({"f": {"pairs": [["x", "x"]]}}, "pairs must be"),
    ({"f": {"against": "x", "metric": "acc"}}, "metric must be"), ({"f": {"against": "x", "when": 1}}, "unknown"),
    ({"f": {"against": "x", "declared": ""}}, "declared must"), ({"f": {"against": "x", "subgroups": "all"}},
                                                                 "subgroups must"), (["x"], "must map")])
def test_a_bad_families_section_is_refused_in_one_line(spec, words):
    with pytest.raises(UserError, match=words) as e:
        families.check(spec)
    assert "\n" not in str(e.value)


def test_compare_keeps_the_families_out_of_the_run_config(tmp_path):
    from experiments.compare import build_config, parse_args

    cfg = tmp_path / "c.yaml"
    cfg.write_text("families:\n  mine: {against: sft_filtered, metric: pass@1}\n")
    args = parse_args(["--config", str(cfg), "--methods", "sft,sft_filtered"])
    build_config(args)  # `families` is no option of a run: from_dict would refuse it
    assert args.families == {"mine": {"against": "sft_filtered", "metric": "pass1", "subgroups": ["all"],
                                      "declared": "before the runs"}}


# -- the committed results ---------------------------------------------------------------------------------------
def test_every_result_with_paired_findings_declares_its_families_as_its_config_does():
    """Each result with pairs.csv has families (its config.yaml's, the same as the config its recipe names) and says
    when they were declared: after the runs where they were added to configs whose results existed, before the runs
    only where the config at the result's own commit (env.json) already declared them."""
    from experiments.reproduce import RECIPES

    made = sorted(p.parent.name for p in RESULTS.glob("*/pairs.csv"))
    assert made == WITH_FAMILIES
    for name in made:
        own = yaml.safe_load((RESULTS / name / "config.yaml").read_text())["families"]
        config = yaml.safe_load((ROOT / "experiments" / "configs" / RECIPES[name].config).read_text())["families"]
        assert own == config, name
        declared = {f["declared"] for f in families.check(own).values()}
        if declared == {"before the runs"}:
            import json
            import subprocess

            commit = json.loads((RESULTS / name / "env.json").read_text())["commit"]
            then = subprocess.run(["git", "show", f"{commit}:experiments/configs/{RECIPES[name].config}"], cwd=ROOT,
                                  capture_output=True, text=True)
            assert then.returncode == 0 and "\nfamilies:" in then.stdout, name  # declared in the config that ran
        else:
            assert declared == {"after the runs"}, name


def _pivots(frame: pd.DataFrame, metric: str, ids) -> dict:
    frame = frame[frame["problem"].isin(ids)].dropna(subset=[metric])
    return {m: g.pivot(index="seed", columns="problem", values=metric) for m, g in frame.groupby("method")}


@pytest.mark.parametrize("name", WITH_FAMILIES)
def test_the_family_wise_columns_are_holm_on_the_outcomes_p_values(name):
    """Every family row of pairs.csv and gains.csv: its p-value recomputed from problems.csv.gz (analysis.paired),
    its Holm p-value from those of its family and subgroup, its family-wise verdict; families.csv's counts; and the
    marks of over_<baseline>.csv and gains_greedy.csv (analysis.families.mark) from those rows."""
    from analysis.findings import problem_subgroups
    from analysis.redecide import Published, metric_column

    folder = RESULTS / name
    out = pd.read_csv(folder / "problems.csv.gz")
    from analysis.redecide import decided_on

    if decided_on(folder) is not None:  # the findings' seeds: the test seeds (analysis.seeds)
        out = out[out["seed"].isin(decided_on(folder))]
    groups = {"all": set(out["problem"])}
    frames = []
    for f, key in (("pairs.csv", "comparison"), ("gains.csv", None)):
        if (folder / f).is_file():
            t = pd.read_csv(folder / f, dtype=str, keep_default_na=False)
            t["a"], t["b"] = (t[key].str.split(" − ").str[i] for i in (0, 1)) if key else (t["method"], t["over"])
            frames.append((f, t.assign(subgroup=t.get("subgroup", "all"))))
    if any(set(t["subgroup"]) - {"all"} for _, t in frames):
        for p, g in problem_subgroups(Published(folder)).items():
            groups.setdefault(g, set()).add(p)
    summary = pd.read_csv(folder / "families.csv", dtype=str, keep_default_na=False)
    counted, pivots = [], {}
    for f, t in frames:
        fam = t[t["family"] != "–"]
        for (family, metric, sub), rows in fam.groupby(["family", "metric", "subgroup"], sort=False):
            col = metric_column(metric)
            piv = pivots.get((col, sub)) or pivots.setdefault((col, sub), _pivots(out, col, groups[sub]))
            p = []
            for _, r in rows.iterrows():
                ya, yb = piv[r["a"]], piv[r["b"]]
                seeds = sorted(set(ya.index) & set(yb.index))
                tw = two_way(ya.loc[seeds, ya.columns].to_numpy() - yb.loc[seeds, ya.columns].to_numpy())
                p.append(t_interval(tw["diff"], tw["var"], tw["df"])["p"])
            written = rows["p"].astype(float).to_numpy()
            assert np.allclose(written, p, rtol=5e-3, atol=1e-12), (name, f, family, sub)
            holm = families.holm(p)
            assert np.allclose(rows["Holm p"].astype(float), holm, rtol=5e-3, atol=1e-12), (name, f, family, sub)
            fw = (holm < families.ALPHA) & (rows["separated"] == "yes").to_numpy()
            assert list(rows["separated family-wise (Holm)"]) == ["yes" if x else "no" for x in fw]
            s = summary[(summary["family"] == family) & (summary["subgroup"] == sub)]
            assert len(s) == 1 and int(s["members"].iloc[0]) == len(rows)
            assert int(s["separated family-wise (Holm)"].iloc[0]) == int(fw.sum())
            assert int(s["separated per comparison"].iloc[0]) == int((rows["separated"] == "yes").sum())
            counted.append((family, sub))
    assert sorted(counted) == sorted(zip(summary["family"], summary["subgroup"]))
    # the summary tables' marks: a cell is family-wise where its row of pairs.csv / gains.csv is
    pairs = dict(frames).get("pairs.csv")
    for f in folder.glob("over_*.csv"):
        baseline = f.stem.removeprefix("over_")
        table = pd.read_csv(f, dtype=str, keep_default_na=False)
        g = pairs[pairs["metric"] == "greedy"]
        for _, row in table.iterrows():
            for sub in table.columns[1:]:
                r = g[(g["subgroup"] == sub) & (((g["a"] == row["method"]) & (g["b"] == baseline))
                                                | ((g["b"] == row["method"]) & (g["a"] == baseline)))].iloc[0]
                fw = {"yes": True, "no": False}.get(r["separated family-wise (Holm)"])
                assert row[sub].endswith(families.mark(r["separated"] == "yes", fw) or "]"), (f.name, row["method"])
    gains = dict(frames).get("gains.csv")
    if (folder / "gains_greedy.csv").is_file():
        table = pd.read_csv(folder / "gains_greedy.csv", dtype=str, keep_default_na=False)
        g = gains[gains["metric"] == "greedy"]
        for _, row in table.iterrows():
            for sub in table.columns[1:]:
                r = g[(g["subgroup"] == sub) & (g["method"] == row["method"])].iloc[0]
                fw = {"yes": True, "no": False}.get(r["separated family-wise (Holm)"])
                assert row[sub].endswith(families.mark(r["separated"] == "yes", fw) or "]"), (name, row["method"])


def test_a_forged_family_wise_verdict_is_caught(tmp_path, monkeypatch):
    """The check above can fail: one family-wise 'yes' of default_long's gains.csv (over the base) turned to 'no'."""
    import shutil

    name = "default_long"
    copy = tmp_path / name
    shutil.copytree(RESULTS / name, copy)
    t = pd.read_csv(copy / "gains.csv", dtype=str, keep_default_na=False)
    i = t.index[t["separated family-wise (Holm)"] == "yes"][0]
    t.loc[i, "separated family-wise (Holm)"] = "no"
    t.to_csv(copy / "gains.csv", index=False)
    monkeypatch.setattr(sys.modules[__name__], "RESULTS", tmp_path)
    with pytest.raises(AssertionError):
        test_the_family_wise_columns_are_holm_on_the_outcomes_p_values(name)

