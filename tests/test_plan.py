"""The family-wise plan (analysis.plan), the seeds' roles (analysis.seeds) and a result grown by seeds
(experiments/grow.py, reproduce.py NAME --seeds A-B): the arithmetic, the refusals and the merge."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from analysis import plan
from analysis.families import check
from gcframe.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
sys.path.insert(0, str(ROOT / "experiments"))


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "0.1", True])
def test_a_min_effect_outside_zero_one_is_refused(bad):
    with pytest.raises(UserError, match=r"families.f.min_effect must be a difference in accuracy in \(0, 1\]"):
        check({"f": {"against": "sft", "min_effect": bad}})
    assert check({"f": {"against": "sft", "min_effect": 1}})["f"]["min_effect"] == 1.0


def test_power_is_the_level_at_no_effect_and_matches_the_noncentral_t():
    # σ²_S = 1e-3, σ²_P = 4e-3, σ²_E = 0.1, S = 5, P = 500: Var = 2e-4 + 8e-6 + 4e-5 = 2.48e-4, SE = 0.015748;
    # ν = min(Satterthwaite's, S − 1) = 4 (Satterthwaite's: M_S = 0.1 + 500·1e-3 = 0.6 on 4 df dominates, ν ≈ 4.3)
    c = {"var_seed": 1e-3, "var_problem": 4e-3, "var_resid": 0.1}
    level = 0.05 / 9
    # a true zero: the test's size (to the midpoint rule's 0.3% over 2,000 quantiles of χ²_ν)
    assert plan.power(0.0, c, 5, 500, level) == pytest.approx(level, rel=3e-3)
    ncp, t = 0.06 / math.sqrt(2.48e-4), stats.t.ppf(1 - level / 2, 4)
    want = stats.nct.sf(t, 4, ncp) + stats.nct.cdf(-t, 4, ncp)  # scipy's noncentral t, where it is finite
    assert plan.power(0.06, c, 5, 500, level) == pytest.approx(want, abs=1e-4)
    # the planned seeds are the first S with power >= 0.8, and the detectable difference inverts the power
    S = plan.seeds_for_power(0.06, c, 500, level)
    assert plan.power(0.06, c, S, 500, level) >= 0.8 > plan.power(0.06, c, S - 1, 500, level)
    assert plan.power(plan.detectable(c, 7, 500, level), c, 7, 500, level) == pytest.approx(0.8, abs=1e-3)
    assert math.isnan(plan.detectable(c, 1, 500, level))


def test_the_simulated_size_of_the_kept_test_holds_under_fitted_components():
    # results/default's median components: the kept test at α/5 and 10 seeds separates a true zero at about the
    # level (results/paired_size: 0.54x under both arms alike); 4,000 experiments: binomial SD 0.0022 around 0.01
    c = {"var_seed": 0.0035, "var_problem": 0.0148, "var_resid": 0.144}
    size = plan.simulated_size(c, 0.74, 10, 500, 0.01, sims=4000)
    assert 0.0 <= size <= 2 * 0.01


def _copy(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / "results" / name
    shutil.copytree(RESULTS / name, dest, ignore=shutil.ignore_patterns("*.png"))
    return dest


def test_the_default_plan_needs_more_test_seeds_than_it_has(tmp_path):
    from analysis.redecide import Published
    from analysis.seeds import roles

    folder = _copy(tmp_path, "default")
    r = roles(folder)
    assert (r["tuning"], r["test"]) == ([0, 1], [2, 3, 4])
    spec = check(yaml.safe_load((folder / "config.yaml").read_text())["families"])
    rows = plan.plan_rows(Published(folder), spec, len(r["test"]), sims=2000)
    assert [(x["family"], x["subgroup"], x["m"]) for x in rows] == [
        ("over_sft_filtered", s, 24) for s in ("all", "carry", "no_carry")]
    for x in rows:  # 3 test seeds cannot decide 0.1 at α/24; the plan's seeds do (power >= 0.8)
        assert not x["decides"] and x["seeds planned"] > 3 and x["level"] == pytest.approx(0.05 / 24)
        comps = {"var_seed": x["σ²_S"], "var_problem": x["σ²_P"], "var_resid": x["σ²_E"]}
        assert plan.power(0.1, comps, x["seeds planned (power)"], x["problems"], x["level"]) >= 0.8
        assert x["detectable at seeds run"] > 0.1
    assert plan.shortfall(rows)[0].startswith("over_sft_filtered (all) needs ")


def test_parse_seeds():
    import grow

    assert grow.parse_seeds("5-8") == [5, 6, 7, 8] and grow.parse_seeds("3, 9,4") == [3, 9, 4]
    assert grow.parse_seeds("10,9-10".replace("9-10", "8")) == [10, 8]
    for bad in ("8-5", "x", "1-", "-1", "3,3"):
        with pytest.raises(UserError):
            grow.parse_seeds(bad)


@pytest.mark.parametrize("edit, pick, says", [
    (None, lambda done: [0, max(done) + 1], "chose distillation's rates"),
    (None, lambda done: [max(done), max(done) + 1], "of distillation are committed already"),
    (lambda c: c["task"].update(digits=3), lambda done: [max(done) + 1], "task.digits"),
    (lambda c: c["model"].update(path="package:no_such_model_package/x"), lambda done: [max(done) + 1],
     "is not installed here"),
])
def test_growing_is_refused_before_anything_runs(tmp_path, edit, pick, says):
    import grow
    from reproduce import RECIPES

    from analysis.seeds import committed

    folder = _copy(tmp_path, "distillation")
    if edit:
        cfg = yaml.safe_load((folder / "config.yaml").read_text())
        edit(cfg)
        (folder / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with pytest.raises(UserError, match=says):
        grow.check("distillation", RECIPES["distillation"], pick(committed(folder)), tmp_path / "results",
                   ROOT / "experiments" / "configs")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_the_cli_refuses_a_tuning_seed_in_one_line():
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "reproduce.py"), "new_losses", "--seeds", "1-3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "tune.seeds [0, 1]" in r.stderr


def test_a_seed_is_merged_once_whatever_the_number_of_merges(tmp_path, monkeypatch):
    """merge: the seed's rows join problems.csv.gz, summary.csv and evals.csv, any rows of that seed already there
    replaced, and seeds.csv gains the seed as a test seed with its machine and commit."""
    import grow

    from analysis import results as collect

    from analysis.seeds import committed

    folder = _copy(tmp_path, "new_losses")
    new_seed = max(committed(folder)) + 1  # a seed the result does not have
    seed_out = tmp_path / "runs" / f"seed{new_seed}"
    (seed_out / "report").mkdir(parents=True)
    (seed_out / "report" / "summary.md").write_text("done\n")
    old = {n: pd.read_csv(folder / n) for n in ("problems.csv.gz", "summary.csv", "evals.csv")}
    env = {"cpu": "Some CPU", "cores": 2, "platform": "Linux", "commit": "abcdef1234567890", "dirty": False}

    def made(runs, res, **kw):  # seed 2's rows relabelled as the new seed: what its compare folder would give
        res.mkdir(parents=True, exist_ok=True)
        for n, t in old.items():
            t = t[t["seed"] == 2].assign(seed=new_seed)
            (collect.write_csv_gz(t, res / n) if n.endswith(".gz") else t.to_csv(res / n, index=False))
        (res / "env.json").write_text(__import__("json").dumps(env))

    monkeypatch.setattr(collect, "from_compare", made)
    for _ in range(2):
        grow.merge(seed_out, folder, new_seed, None)
    for n, t in old.items():
        new = pd.read_csv(folder / n)
        assert len(new) == len(t) + (t["seed"] == 2).sum(), n  # once, not twice
        assert np.array_equal(new[new["seed"] == new_seed].drop(columns="seed").to_numpy(),
                              t[t["seed"] == 2].drop(columns="seed").to_numpy()), n
    seeds = pd.read_csv(folder / "seeds.csv")
    row = seeds[seeds["seed"] == new_seed].iloc[0]
    assert (row["role"], row["cpu"], row["commit"]) == ("test", "Some CPU", "abcdef123456")
    assert list(seeds["seed"]) == sorted(seeds["seed"]) and (seeds["seed"] == new_seed).sum() == 1
