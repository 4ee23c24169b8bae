"""experiments/base_stability.py: stage 1 trained per variant, the final accuracy's spread per setup, and the
commit each row was made at."""
from pathlib import Path

import pandas as pd
import pytest

from experiments import base_stability


def test_variants_are_trained_and_their_spread_summarised(tmp_path):
    rc = base_stability.main(["--out", str(tmp_path), "--label", "tiny", "--sft-steps", "4", "--eval-every", "2",
                              "--variants", "ref,perturb-1", "--set", "task.n_demos=64", "--set", "train.eval_size=16",
                              "--set", "sft_base.target_accuracy=0.0"])  # a step count, not the default's target
    assert rc == 0
    curves = pd.read_csv(tmp_path / "curves.csv", dtype={"commit": str}, keep_default_na=False)  # "" outside git
    assert sorted(curves["step"].unique()) == [2, 4] and set(curves["variant"]) == {"ref", "perturb-1"}
    assert curves["commit"].nunique() == 1
    row = pd.read_csv(tmp_path / "stability.csv", dtype=str, keep_default_na=False).iloc[0]
    final = curves[curves["step"] == 4].set_index("variant")["eval_accuracy"]
    assert row["float32 spread"] == f"{final.max() - final.min():.3f}" and row["commit"] == curves["commit"].iloc[0]
    assert row["float64"] == "–"  # not trained here
    assert (tmp_path / "stability.png").exists() and (tmp_path / "env_tiny_t1.json").exists()
    line = (tmp_path / "headline.md").read_text()
    assert line.startswith(f"- tiny: held-out greedy accuracy {final.min():.3f}–{final.max():.3f} over 2 float32 ")
    assert f"a spread of {final.max() - final.min():.3f}." in line


def test_an_unknown_study_setup_is_named(capsys):
    with pytest.raises(SystemExit) as e:
        base_stability.main(["--study", "--only", "nope", "--out", "unused"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--only 'nope' matches no setup" in err and "default: target accuracy, weight average" in err


def test_pass_at_k_stands_beside_greedy_accuracy(tmp_path):
    """--k 4: each variant's base is also sampled 4 times per test problem; the summary gives pass@4 by variant and
    the room pass@4 − greedy of the weights as built, from the same rows as curves.csv. Without --label the setup is
    "run" (an empty one was read back as NaN, and the summary failed after every variant had trained)."""
    rc = base_stability.main(["--out", str(tmp_path), "--sft-steps", "4", "--eval-every", "2",
                              "--variants", "ref,perturb-1", "--set", "task.n_demos=64", "--set", "train.eval_size=16",
                              "--set", "sft_base.target_accuracy=0.0", "--k", "4"])
    assert rc == 0
    curves = pd.read_csv(tmp_path / "curves.csv", dtype={"commit": str})
    last = curves[curves["step"] == 4].set_index("variant")
    assert (last["k"] == 4).all() and last["passk"].between(0, 1).all()
    assert curves[curves["step"] == 2]["passk"].isna().all()  # only the base (stage 1's end) is sampled
    row = pd.read_csv(tmp_path / "stability.csv", dtype=str, keep_default_na=False).iloc[0]
    assert row["pass@4 by variant"] == ", ".join(f"{v} {last.loc[v, 'passk']:.3f}" for v in ("ref", "perturb-1"))
    assert row["pass@4 − greedy (ref)"] == f"{last.loc['ref', 'passk'] - last.loc['ref', 'eval_accuracy']:+.3f}"
    assert row["setup"] == "run" and (tmp_path / "headline.md").read_text().startswith("- run: held-out greedy")


def test_the_levers_name_their_setups(capsys):
    """--levers runs LEVERS on the default's finished base; an --only that matches none lists them."""
    with pytest.raises(SystemExit) as e:
        base_stability.main(["--levers", "--only", "nope", "--out", "unused"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "the levers has fewer demonstrations: 400;" in err and "harder problems: 4 digits, 2000 demos" in err


def test_the_study_and_the_finished_bases_are_apart():
    """reproduce.py base_stability runs --study, whose setups are results/base_stability's (the finished bases have
    recipes and result folders of their own: --finished --only ...), so that re-making it adds no setup."""
    committed = set(pd.read_csv(Path(__file__).resolve().parents[1] / "results" / "base_stability" / "stability.csv")
                    ["setup"])
    study = base_stability._studies(base_stability.parse_args(["--study", "--out", "x"]))
    assert {label for label, _ in study} == committed
    slipped = base_stability._studies(base_stability.parse_args(["--finished", "--only", "slipped", "--out", "x"]))
    assert len(slipped) == 2 and all(extra[1].endswith("default.yaml") for _, extra in slipped)
    with pytest.raises(SystemExit) as e:  # the error names the finished bases' setups
        base_stability.main(["--finished", "--only", "nope", "--out", "unused"])
    assert e.value.code == 2
