"""analysis.curves on synthetic run folders: metrics.jsonl rows drawn from a known saturating curve (plus noise), a
curve that falls late, too few evaluations; and experiments/curves_coverage.py on a handful of simulations."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis import curves

B, G = 4, 8  # sequences per step: prompts_per_step × group_size = 32
STEPS, POINTS = 1000, 12
EVAL_STEPS = sorted({0, STEPS // 2} | {max(1, round(STEPS ** (j / POINTS))) for j in range(1, POINTS + 1)})
"""train.eval_points = 12 over 1000 steps (gcframe.trainer.eval_steps): 0, 2, 3, 6, 10, 18, 32, 56, 100, 178, 316,
500 (the halfway step), 562, 1000."""
R0 = 0.40


def truth(step, a=0.70, b=1.5, c_mid_steps=100):
    """The known curve on the sequences axis: C = 32·step, C_mid = 32·c_mid_steps."""
    return curves.saturating(np.asarray(step, float) * B * G, R0, a, b, c_mid_steps * B * G)


def write_run(out: Path, method: str, seed: int, accs, steps=EVAL_STEPS, eval_size: int = 500,
              tokens_per_step: int = 100):
    """A run folder: one evaluation row per step (accuracy, cumulative gen_tokens and time_s) between training rows,
    and the config.yaml fields the fit reads."""
    d = out / method / f"seed{seed}"
    d.mkdir(parents=True)
    rows = []
    for st, acc in zip(steps, accs):
        if st:
            rows.append({"step": st - 1, "loss": 0.1, "gen_tokens": tokens_per_step * st, "time_s": 0.5 * st})
        rows.append({"step": st, "eval_accuracy": float(acc), "gen_tokens": tokens_per_step * st, "time_s": 0.5 * st})
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed, "train": {
        "prompts_per_step": B, "group_size": G, "eval_size": eval_size, "eval_split": "validation"},
        "splits": {"validation": {"problems": eval_size}}}))


def noisy(rng, p, n=500):
    """Binomial accuracy on n problems (the evaluation noise of a 500-problem validation set, σ ≈ 0.02)."""
    return rng.binomial(n, np.clip(p, 0, 1)) / n


@pytest.fixture
def folder(tmp_path):
    """grpo: A 0.70, online_rft: A 0.60 (same B, C_mid), 3 seeds each, binomial noise on 500 problems; rft rises to
    0.62 by step 100 and falls to 0.45 at step 1000 (a late fall)."""
    rng = np.random.default_rng(0)
    out = tmp_path / "runs"
    for seed in range(3):
        for method, a in (("grpo", 0.70), ("online_rft", 0.60)):
            accs = noisy(rng, truth(EVAL_STEPS, a=a))
            accs[0] = R0
            write_run(out, method, seed, accs)
        fall = [R0 if s == 0 else (float(truth(s, a=0.65, b=2.0, c_mid_steps=20)) if s <= 100
                                   else 0.62 - 0.17 * math.log(s / 100) / math.log(10)) for s in EVAL_STEPS]
        write_run(out, "rft", seed, fall)
    return out


def test_the_curve_and_its_inverse_by_hand():
    # R(C_mid) = R0 + (A − R0)/2: 0.4 + 0.3/2 = 0.55; at C = 3·C_mid with B = 1: 0.4 + 0.3/(1 + 1/3) = 0.625
    assert curves.saturating(3200.0, 0.4, 0.7, 1.0, 3200.0) == pytest.approx(0.55)
    assert curves.saturating(9600.0, 0.4, 0.7, 1.0, 3200.0) == pytest.approx(0.625)
    assert curves.saturating(0.0, 0.4, 0.7, 1.0, 3200.0) == pytest.approx(0.4)  # C = 0: the start
    # back: (A − R0)/(L − R0) − 1 = 0.3/0.225 − 1 = 1/3 -> C = C_mid · (1/3)^(−1) = 9600
    assert curves.level_compute(0.4, 0.7, 1.0, 3200.0, 0.625) == pytest.approx(9600.0)
    assert math.isnan(curves.level_compute(0.4, 0.7, 1.0, 3200.0, 0.71))  # above the ceiling: never


def test_c90_is_where_the_curve_makes_nine_tenths_of_its_gain():
    # exact points of R0 = 0.4, A = 0.7, B = 2, C_mid = 3200: C_90 = 3200 · 9^(1/2) = 9600, where
    # R = 0.4 + 0.3/(1 + (1/3)^2) = 0.4 + 0.27 = 0.67 = R0 + 0.9 (A − R0)
    c = np.array([0.0, 400.0, 800.0, 1600.0, 3200.0, 6400.0, 12800.0, 25600.0])
    r = curves.saturating(c, 0.4, 0.7, 2.0, 3200.0)
    run = curves.fit_run(c, r, 0.4, 0.005)
    assert run["status"] == "ok" and run["C_90"] == pytest.approx(9600.0, rel=1e-3)
    assert curves.saturating(run["C_90"], 0.4, 0.7, 2.0, 3200.0) == pytest.approx(0.67, abs=1e-4)
    # over seeds: the geometric mean of the seeds' C_90 (9600 and 2 · 9600 -> 9600 · √2 = 13,576)
    fits = pd.DataFrame([{**run, "method": "m", "seed": 0, "R0": 0.4},
                         {**run, "method": "m", "seed": 1, "R0": 0.4, "C_mid": 6400.0, "C_90": 2 * run["C_90"]}])
    row = curves.method_table(fits).iloc[0]
    assert row["C_90"] == pytest.approx(9600.0 * math.sqrt(2), rel=1e-3)
    assert row["C_90_lo"] < row["C_90"] < row["C_90_hi"]


def test_a_known_ceiling_is_recovered_and_the_falling_curve_is_marked(folder):
    rep = curves.write(folder)
    table = pd.read_csv(rep / "curves.csv").set_index("method")
    # 3 seeds × 12 noisy points (σ ≈ 0.02 each): one seed's A has SD 0.026 around the truth (200 draws of this
    # curve: mean 0.704), the mean of 3 about 0.015; within 0.05 of the truth (this draw: 0.745 and 0.596)
    assert table.loc["grpo", "A"] == pytest.approx(0.70, abs=0.05)
    assert table.loc["online_rft", "A"] == pytest.approx(0.60, abs=0.05)
    assert table.loc["grpo", "A_lo"] < table.loc["grpo", "A"] < table.loc["grpo", "A_hi"]
    assert table.loc["grpo", "C_mid"] == pytest.approx(3200, rel=0.5)  # C_mid = 100 steps × 32 sequences
    # the fall is a finding with its compute, never a ceiling
    assert table.loc["rft", "status"] == "falls" and math.isnan(table.loc["rft", "A"])
    assert "falls after C=" in table.loc["rft", "note"]
    md = (rep / "curves.md").read_text()
    rft_row = next(line for line in md.splitlines() if line.startswith("| rft |"))
    assert "falls after C=" in rft_row
    assert (rep / "curves.png").stat().st_size > 10_000


def test_the_orderings_are_decided_by_intervals(folder):
    rep = curves.write(folder)
    o = pd.read_csv(rep / "orderings.csv")
    on_a = o[(o["a"] == "grpo") & (o["b"] == "online_rft") & (o["on"] == "A")].iloc[0]
    # the truth 0.70 − 0.60; one method's mean of 3 seeds has SD ~0.015, the difference ~0.021: within 3 SDs
    assert on_a["decision"] == "holds" and on_a["estimate"] == pytest.approx(0.10, abs=0.065)
    # online RFT vs RFT: RFT falls late, so there is no ceiling to compare
    onl = o[(o["a"] == "online_rft") & (o["b"] == "rft")]
    assert onl["decision"].str.startswith("not decided").all()


def test_the_forecast_of_an_exact_curve_is_exact(tmp_path):
    out = tmp_path / "runs"
    for seed in range(2):
        write_run(out, "grpo", seed, truth(EVAL_STEPS))
    rep = curves.write(out)
    fc = pd.read_csv(rep / "forecast.csv").set_index("method")
    # first half: the evaluations up to step 500 (C ≤ 32 000/2), 12 points including step 0 and step 500 itself,
    # fitted exactly
    assert abs(fc.loc["grpo", "mean_abs_error"]) < 1e-3
    assert abs(fc.loc["mean over methods", "mean_abs_error"]) < 1e-3
    table = pd.read_csv(rep / "curves.csv").set_index("method")
    assert table.loc["grpo", "A"] == pytest.approx(0.70, abs=1e-3)
    assert table.loc["grpo", "B"] == pytest.approx(1.5, rel=1e-2)


def test_the_log_half_forecasts_from_fewer_points(tmp_path):
    out = tmp_path / "runs"
    write_run(out, "grpo", 0, truth(EVAL_STEPS))
    rows = curves.forecast_rows(curves.curve_points(curves.Runs(out), "sequences"),
                                curves.run_fits(curves.curve_points(curves.Runs(out), "sequences"), ["grpo"]),
                                "log")
    # √(2·1000) ≈ 44.7 steps: the evaluations 0, 2, 3, 6, 10, 18, 32 (7 points)
    assert rows.iloc[0]["half_points"] == 7


def test_too_few_points_are_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "runs"
    for seed in range(2):
        write_run(out, "grpo", seed, [R0, 0.5, 0.6], steps=[0, 50, 100])
    write_run(out, "rft", 0, [R0], steps=[0])  # just started: its step-0 evaluation only
    with pytest.raises(SystemExit) as e:
        curves.main([str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "too few points" in err and "grpo/seed0" in err
    assert not (out / "report").exists()  # no fit written


def test_a_curve_that_never_rises_is_refused(tmp_path, capsys):
    out = tmp_path / "runs"
    rng = np.random.default_rng(1)
    write_run(out, "grpo", 0, np.r_[R0, noisy(rng, np.full(len(EVAL_STEPS) - 1, R0))])
    with pytest.raises(SystemExit) as e:
        curves.main([str(out)])
    assert e.value.code == 2 and "never rises" in capsys.readouterr().err


def test_a_method_without_generated_tokens_has_no_token_axis(tmp_path, capsys):
    out = tmp_path / "runs"
    write_run(out, "sft", 0, truth(EVAL_STEPS), tokens_per_step=0)
    with pytest.raises(SystemExit) as e:
        curves.main([str(out), "--axis", "tokens"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "compute does not increase" in err and "--axis sequences" in err
    assert curves.main([str(out), "--axis", "time", "--out", str(tmp_path / "t")]) == 0  # its time does increase
    write_run(out, "grpo", 0, truth(EVAL_STEPS))  # beside a method that samples: sft is a word, grpo a curve
    seq = curves.write(out)  # the sequences axis first, then the tokens axis beside it, not over it
    tok = curves.write(out, axis="tokens")
    assert (seq, tok) == (out / "report", out / "report" / "curves_tokens")
    assert pd.read_csv(seq / "evals.csv")["axis"].eq("sequences").all() and (seq / "curves.png").is_file()
    table = pd.read_csv(tok / "curves.csv").set_index("method")
    assert table.loc["sft", "status"] == "compute does not increase"
    assert table.loc["grpo", "A"] == pytest.approx(0.70, abs=1e-3)  # 100 tokens per step: the same curve, rescaled


def test_a_half_finished_run_is_a_word_beside_the_others(tmp_path):
    out = tmp_path / "runs"
    write_run(out, "grpo", 0, truth(EVAL_STEPS))
    write_run(out, "grpo", 1, truth(EVAL_STEPS[:3]), steps=EVAL_STEPS[:3])  # still running: 3 evaluations
    table = pd.read_csv(curves.write(out) / "curves.csv").set_index("method")
    assert table.loc["grpo", "status"] == "too few points" and math.isnan(table.loc["grpo", "A"])


def test_a_curve_still_rising_at_the_end_says_its_ceiling_is_extrapolated(tmp_path):
    out = tmp_path / "runs"
    write_run(out, "grpo", 0, truth(EVAL_STEPS, c_mid_steps=1500))  # half its gain at 1.5× the last step
    rep = curves.write(out)
    table = pd.read_csv(rep / "curves.csv").set_index("method")
    assert table.loc["grpo", "status"] == "still rising" and "A extrapolated" in table.loc["grpo", "note"]
    assert table.loc["grpo", "A"] == pytest.approx(0.70, abs=1e-3)  # exact points: the extrapolation is exact too
    assert "still rising" in (rep / "curves.md").read_text()


def test_the_coverage_simulation_runs_and_reports_shares():
    from experiments import curves_coverage

    rng = np.random.default_rng(0)
    r = curves_coverage.design(rng, sims=2, boot=8, seeds=3, steps=STEPS, points=POINTS, eval_size=500,
                               truth=curves_coverage.DESIGNS[0], seed_sd=curves_coverage.SEED_SDS[0])
    for key in ("reported", "cover A t", "cover A boot", "cover C_mid t", "falls"):
        assert 0.0 <= r[key] <= 1.0
    assert r["reported"] > 0  # a bent curve with 12 evaluations fits in most experiments


def test_help_names_the_module_command(capsys):
    with pytest.raises(SystemExit) as e:
        curves.main(["--help"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("usage: python -m analysis.curves ")


def test_the_forecast_fits_every_evaluation_at_or_before_half_and_scores_after_it(tmp_path):
    from gcframe.config import TrainConfig
    from gcframe.trainer import eval_steps

    # the grid evaluates at the halfway step: 1000 steps, 10 log points -> 2, 4, 8, 16, 32, 63, 126, 251, 500, 501, 1000
    grid = sorted(eval_steps(TrainConfig(steps=1000, eval_points=10)))
    assert grid == [2, 4, 8, 16, 32, 63, 126, 251, 500, 501, 1000]
    # 128 sequences a step: step 500 is 64,000 = C_last/2 exactly and is fitted; step 501 (64,128) is not
    c = np.array([0] + grid, float) * 128
    keep = curves.first_half(c, "linear")
    assert c[keep][-1] == 64000 and keep.sum() == 10 and (~keep).sum() == 2
    out = tmp_path / "runs"
    write_run(out, "grpo", 0, truth(EVAL_STEPS))
    fc = curves.forecast_rows(pts := curves.curve_points(curves.Runs(out), "sequences"),
                              curves.run_fits(pts, ["grpo"]), "linear")
    assert fc.iloc[0]["half_points"] == 12 and fc.iloc[0]["after_points"] == 2  # 562 and 1000 are scored


def test_a_forecast_with_no_evaluation_after_half_is_refused_naming_the_option(tmp_path, capsys):
    out = tmp_path / "runs"
    write_run(out, "grpo", 0, truth(EVAL_STEPS))
    # a run of train.steps 1000 stopped at step 316: 8 evaluations, all at or before half its compute (step 500)
    stopped = [s for s in EVAL_STEPS if s <= 316]
    write_run(out, "grpo", 1, truth(stopped), steps=stopped)
    cfg = out / "grpo" / "seed1" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("train:", "train:\n  steps: 1000", 1))
    with pytest.raises(SystemExit) as e:
        curves.main([str(out), "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2, err
    assert err.count("\n") == 0 and "no evaluation after half the compute in grpo/seed1" in err, err
    assert "--forecast-half" in err and "train.eval_points" in err
    assert not (tmp_path / "rep").exists()


def test_a_run_refits_from_its_published_evaluation_rows(tmp_path):
    """evals.csv (every evaluation of every run, written beside the fits) holds all a refit needs: the fits from
    it alone equal curves_runs.csv's columns, the per-run table a result publishes."""
    out = tmp_path / "runs"
    rng = np.random.default_rng(4)
    for seed in range(2):
        accs = noisy(rng, truth(EVAL_STEPS))
        accs[0] = R0
        write_run(out, "grpo", seed, accs)
    rep = curves.write(out)
    evals = pd.read_csv(rep / "evals.csv")
    assert set(evals.columns) >= {"method", "seed", "step", "compute", "accuracy", "problems"}
    assert len(evals) == 2 * len(EVAL_STEPS)
    refit = curves.run_fits(evals, ["grpo"]).reset_index(drop=True)
    runs = pd.read_csv(rep / "curves_runs.csv")
    cols = ["method", "seed", "n_points", "R0", "c_last", "r_last", "sigma", "status", "A", "B", "C_mid", "rmse"]
    for col in cols:
        got, want = refit[col], runs[col]
        if want.dtype.kind in "fi":
            assert np.allclose(got.astype(float), want, rtol=1e-5, equal_nan=True), col  # written to 6 digits
        else:
            assert (got.astype(str) == want.astype(str)).all(), col


def test_an_empty_orderings_table_keeps_its_header():
    """issue 62: three committed *orderings.csv files were a bare newline, which pandas cannot read. With no claim
    decided (none of its pairs ran) the table keeps its columns, and every committed one reads as a table."""
    import io

    from analysis.curves import ORDERING_COLUMNS, ordering_rows

    empty = ordering_rows(pd.DataFrame(), pd.DataFrame({"method": ["sft"]}), ["sft"])
    buf = io.StringIO()
    empty.to_csv(buf, index=False)
    assert list(pd.read_csv(io.StringIO(buf.getvalue())).columns) == ORDERING_COLUMNS
    for f in sorted((Path(__file__).resolve().parents[1] / "results").glob("*/*orderings.csv")):
        assert len(pd.read_csv(f).columns) > 1, f
