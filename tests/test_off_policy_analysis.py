"""analysis.off_policy: each loss against itself at k = 0, the tolerance read off the family-wise verdicts, the
difference in differences of the field's claims, checked on outcomes set by hand."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import off_policy

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = [0, 1, 2, 3]
# the greedy outcome of problems 0-3 at seeds 0 and 1
SET = {
    "grpo": ([1, 1, 1, 1], [1, 1, 1, 0]),
    "grpo@k16": ([1, 0, 1, 0], [0, 1, 1, 0]),
    "cispo": ([1, 1, 1, 1], [1, 1, 1, 0]),
    "cispo@k16": ([1, 1, 1, 1], [1, 1, 1, 0]),  # loses nothing
    "grpo@bf16_tis": ([1, 1, 1, 1], [1, 1, 1, 0]),
    "grpo@k16_naive": ([0, 0, 1, 0], [0, 0, 1, 0]),
}
PLACE = {"grpo": ("grpo", 0, "float32", "none"), "grpo@k16": ("grpo", 16, "float32", "none"),
         "cispo": ("cispo", 0, "float32", "none"), "cispo@k16": ("cispo", 16, "float32", "none"),
         "grpo@bf16_tis": ("grpo", 0, "bfloat16", "tis"), "grpo@k16_naive": ("grpo", 16, "float32", "naive")}


def _frames():
    outcomes = pd.DataFrame([{"method": m, "seed": s, "problem": p, "greedy": float(y[s][p])}
                             for m, y in SET.items() for s in (0, 1) for p in PROBLEMS])
    frame = pd.DataFrame([{"method": m, "seed": s, "loss": loss, "k": k, "dtype": d, "correction": c,
                           "mismatch_kl_k3": 0.01 * k, "clip_frac": 0.5 if c == "naive" else 0.1}
                          for m, (loss, k, d, c) in PLACE.items() for s in (0, 1)])
    return frame, outcomes


def test_each_loss_against_itself_at_k0():
    frame, outcomes = _frames()
    table = off_policy.staleness(frame, outcomes).set_index("loss")
    # grpo@k16 − grpo per (seed, problem): seed 0 (0, −1, 0, −1), seed 1 (−1, 0, 0, 0): −3/8
    assert table.loc["grpo", "Δ"] == pytest.approx(-0.375) and table.loc["cispo", "Δ"] == 0
    assert table.loc["grpo", "accuracy"] == pytest.approx((2 / 4 + 2 / 4) / 2)  # 0.5 on both seeds
    assert table.loc["grpo", "accuracy at k = 0"] == pytest.approx((4 / 4 + 3 / 4) / 2)
    assert table.loc["grpo", "KL(μ‖π_old) k3"] == pytest.approx(0.16)  # the runs' logged mean, 0.01 · 16
    # Holm over the two: the smaller p is multiplied by 2, the larger kept (at least the first)
    p = table["p"].sort_values()
    assert table["Holm p"].sort_values().tolist() == pytest.approx([min(1, 2 * p.iloc[0]), max(min(1, 2 * p.iloc[0]),
                                                                                              p.iloc[1])])


def test_tolerance_stops_at_the_first_k_separated():
    table = pd.DataFrame([{"loss": "a", "k": k, "separated family-wise": sep, "detectable": d}
                          for k, sep, d in [(1, False, 0.05), (4, True, 0.06), (16, False, 0.2)]]
                         + [{"loss": "b", "k": k, "separated family-wise": False, "detectable": 0.1 * k}
                            for k in (1, 4, 16)])
    tol = off_policy.tolerance(table).set_index("loss")
    largest, detectable, _, first = off_policy.TOLERANCE
    # a: k = 1 is not separated, k = 4 is; k = 16 not being separated does not count (it comes after a separation)
    assert tol.loc["a", largest] == 1 and tol.loc["a", first] == 4
    assert tol.loc["a", detectable] == 0.05
    assert tol.loc["b", largest] == 16 and pd.isna(tol.loc["b", first])
    # the column cannot read as a tolerance: a k not separated is undecided below its detectable differences
    assert "tolerated" not in largest.replace("not tolerated", "") and "undecided" in largest


def test_the_claims_are_differences_in_differences():
    frame, outcomes = _frames()
    rows = off_policy.claims(frame, outcomes).set_index("claim")
    # (cispo@k16 − cispo) − (grpo@k16 − grpo) = 0 − (−3/8) = +0.375: CISPO lost less
    did = rows.loc["cispo loses less than grpo from k = 0 to k = 16"]
    assert did["Δ"] == pytest.approx(0.375) and did["lo"] < 0.375 < did["hi"]
    assert did["contrast"] == "(cispo@k16 − cispo) − (grpo@k16 − grpo)"
    tis = rows.loc["token TIS recovers the float32 sampler's accuracy under a bfloat16 one (grpo)"]
    assert tis["Δ"] == 0 and not tis["separated family-wise"]  # set equal to grpo's outcomes
    naive = rows.loc["without recomputing π_old the clip does not hold: μ as π_old against π_old recomputed, k = 16 "
                     "(grpo)"]
    # grpo@k16_naive − grpo@k16: seed 0 (−1, 0, 0, 0), seed 1 (0, −1, 0, 0): −2/8
    assert naive["Δ"] == pytest.approx(-0.25) and (naive["clipped"], naive["clipped, π_old recomputed"]) == (0.5, 0.1)
    assert len(rows) == 3  # no dapo and no gspo here: their claims are left out, not made up


def test_holm_over_the_declared_claims_alone():
    """The config's field_claims family is the staleness claims and TIS on a bfloat16 sampler; μ as π_old against
    π_old recomputed was added after the grid's config: reported outside the family, its p not adjusted with it and
    the family's not with its."""
    from analysis.families import holm

    frame, outcomes = _frames()
    rows = off_policy.claims(frame, outcomes)
    declared = rows[rows["family"] == off_policy.FAMILY]
    added = rows[rows["family"] == off_policy.ADDED]
    assert len(declared) == 2 and len(added) == 1  # cispo − grpo and TIS here; the naive contrast apart
    assert declared["Holm p"].tolist() == pytest.approx(list(holm(declared["p"].tolist())))
    assert added["Holm p"].isna().all() and added["separated family-wise"].isna().all()
    assert added[off_policy.DETECTABLE_FW].isna().all() and declared[off_policy.DETECTABLE_FW].notna().all()
    assert "added after the grid's config" in off_policy.ADDED


def test_the_sampler_family_is_one_holm_over_all_its_rows():
    """bfloat16 against float32 per loss and TIS on the bfloat16 sampler against none on it: one family (the config's
    bf16_sampler), one Holm over the three rows, not the first two and the third apart."""
    from analysis.families import holm

    place = {"grpo": ("grpo", 0, "float32", "none"), "grpo@bf16": ("grpo", 0, "bfloat16", "none"),
             "grpo@bf16_tis": ("grpo", 0, "bfloat16", "tis"), "cispo": ("cispo", 0, "float32", "none"),
             "cispo@bf16": ("cispo", 0, "bfloat16", "none")}
    ys = {"grpo": ([1, 1, 1, 1], [1, 1, 1, 0]), "grpo@bf16": ([1, 0, 1, 1], [1, 1, 0, 0]),
          "grpo@bf16_tis": ([1, 1, 1, 1], [1, 1, 0, 0]), "cispo": ([1, 1, 0, 1], [1, 0, 1, 0]),
          "cispo@bf16": ([0, 1, 0, 1], [1, 0, 0, 0])}
    outcomes = pd.DataFrame([{"method": m, "seed": s, "problem": p, "greedy": float(y[s][p])}
                             for m, y in ys.items() for s in (0, 1) for p in PROBLEMS])
    frame = pd.DataFrame([{"method": m, "seed": s, "loss": loss, "k": k, "dtype": d, "correction": c}
                          for m, (loss, k, d, c) in place.items() for s in (0, 1)])
    table = off_policy.sampler(frame, outcomes)
    assert len(table) == 3 and table["correction"].fillna("none").tolist() == ["none", "none", "tis"]
    assert table["Holm p"].tolist() == pytest.approx(list(holm(table["p"].tolist())))


def test_a_committed_result_makes_its_tables_again(tmp_path):
    """--result re-makes results/off_policy's tables from its committed files (config.yaml, problems.csv.gz and the
    logged means its tables hold): every cell as committed."""
    result = ROOT / "results" / "off_policy"
    if not (result / "problems.csv.gz").is_file():
        pytest.skip("results/off_policy not committed")
    assert off_policy.main(["--result", str(result), "--to", str(tmp_path)]) == 0
    for name in ("staleness", "tolerance", "ranks", "corrections", "sampler", "claims", "overview"):
        made, kept = (pd.read_csv(d / f"{name}.csv", dtype=str, keep_default_na=False) for d in (tmp_path, result))
        pd.testing.assert_frame_equal(made, kept, obj=name)


def test_a_result_that_is_not_one_is_one_line(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    err = _one_line(["--result", str(tmp_path / "r"), "--to", str(tmp_path / "t")], capsys)
    assert "lacks config.yaml and problems.csv.gz" in err and not (tmp_path / "t").exists()
    err = _one_line(["--result", str(tmp_path / "none")], capsys)
    assert "is not a folder" in err
    err = _one_line([str(tmp_path), "--result", str(tmp_path / "r")], capsys)
    assert "one of the two" in err


def test_the_overview_is_a_row_per_loss_and_a_column_per_cell():
    frame, outcomes = _frames()
    table = off_policy.overview(frame, outcomes).set_index("loss")
    assert list(table.columns) == ["k = 0", "k = 16", "k = 16, naive", "k = 0, bfloat16, tis",
                                   "KL(μ‖π_old) k3 at k = 16"]
    # grpo at k = 0: seed 0 4/4, seed 1 3/4: mean 0.875, SD |1 − 0.75| / √2 = 0.177
    assert table.loc["grpo", "k = 0"] == "0.875 ± 0.177" and table.loc["cispo", "k = 16, naive"] == "–"
    assert table.loc["grpo", "KL(μ‖π_old) k3 at k = 16"] == pytest.approx(0.16)


def test_a_folder_that_is_not_there_is_one_line():
    r = subprocess.run([sys.executable, "-m", "analysis.off_policy", str(ROOT / "no-such-folder")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is not a folder" in r.stderr


def test_the_figure_draws_one_loss_and_many(tmp_path):
    """One loss (seaborn's dodge divides by the number of losses less one) and two: a PNG each."""
    frame, outcomes = _frames()
    for name, keep in (("one", frame["loss"] == "grpo"), ("two", frame["loss"].notna())):
        path = off_policy.figure(frame[keep], outcomes, tmp_path / f"{name}.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _grid(out: Path, lagged: bool = True) -> Path:
    """grpo and grpo@k4 at seeds 0 and 1, finished (tests/test_report.py's run folders), grpo@k4's sampler 4 steps
    behind where `lagged` (else both on-policy: no off-policy cell at all)."""
    import yaml

    from tests.test_report import _finished_run

    for label, correct in (("grpo", [1, 1, 0, 0]), ("grpo@k4", [1, 0, 0, 0])):
        for seed in (0, 1):
            _finished_run(out, label, seed, correct)
            cfg_file = out / label / f"seed{seed}" / "config.yaml"
            cfg = yaml.safe_load(cfg_file.read_text())
            cfg["train"]["staleness"] = 4 if lagged and "@" in label else 0
            cfg_file.write_text(yaml.safe_dump(cfg))
    return out


def _one_line(argv, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        off_policy.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    return err


def test_a_folder_without_off_policy_runs_is_one_line_and_writes_nothing(tmp_path, capsys):
    """Before: exit 0 and seven empty tables in OUT/report/."""
    out = _grid(tmp_path / "out", lagged=False)
    err = _one_line([str(out)], capsys)
    assert "holds no off-policy run" in err and "nothing was written" in err
    assert not (out / "report").exists()


def test_a_grid_without_the_claims_cells_writes_claims_with_its_header(tmp_path):
    """grpo against itself at k = 4, and none of the claims' cells (no cispo, gspo, dapo, TIS or naive run): claims.csv
    is its header, which pandas reads as no rows (before: an empty file, pandas' EmptyDataError on reading it)."""
    written = off_policy.write(_grid(tmp_path / "out"), tmp_path / "tables")
    claims = pd.read_csv(tmp_path / "tables" / "claims.csv")
    assert claims.empty and list(claims.columns) == off_policy.CLAIM_COLUMNS
    staleness = pd.read_csv(tmp_path / "tables" / "staleness.csv")
    # grpo@k4 − grpo on every seed: problems (1, 0, 0, 0) − (1, 1, 0, 0) -> mean −1/4
    assert staleness["Δ"].tolist() == pytest.approx([-0.25])
    assert all(pd.read_csv(p) is not None for p in written if p.suffix == ".csv")  # every table written reads


def test_a_binary_summary_and_a_file_as_to_are_one_line_each(tmp_path, capsys):
    out = _grid(tmp_path / "out")
    there = tmp_path / "tables.csv"
    there.write_text("kept\n")
    err = _one_line([str(out), "--to", str(there)], capsys)  # before: FileExistsError from mkdir
    assert f"--to {there}: {there} is a file, not a folder" in err and there.read_text() == "kept\n"
    (out / "summary.csv").write_bytes(bytes(range(256)))  # before: UnicodeDecodeError from pandas
    err = _one_line([str(out)], capsys)
    assert f"'{out / 'summary.csv'}' is damaged (binary, empty or cut" in err and "--resume" in err
    assert not (out / "report").exists()


def test_the_outcomes_file_is_named_once():
    """analysis.off_policy names the committed outcomes file itself (analysis.results imports it): the same name."""
    from analysis import off_policy, results

    assert off_policy.OUTCOMES == results.OUTCOMES
