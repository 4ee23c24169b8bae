"""python -m gcframe.evaluate: a finished run's final model scored again on more problems, without retraining."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from experiments.bench_common import Size, make_trainer
from gcframe.evaluate.rescore import main
from gcframe.tracking import final_model
from gcframe.tracking.log import read_jsonl
from gcframe import forkserver

SIZE = Size("test", 32, 2, 4, 64, prompts=2, group=4, new_tokens=4)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def out(tmp_path_factory, tiny_base):
    """A compare.py-like folder: grpo and rloo, seed 0, 3 steps, evaluated on 8 of the task's 16 held-out problems."""
    root = tmp_path_factory.mktemp("rescore")
    for method in ("grpo", "rloo"):
        tr = make_trainer(method, SIZE, tiny_base, str(root / "out" / method / "seed0"), steps=3)
        tr.tcfg.eval_size, tr.tcfg.eval_k = 8, 2
        tr.fit()
        final_model.finish(tr)
    return root / "out"


def test_rescoring_on_more_problems_repeats_the_final_evaluation_on_the_ones_it_had(out, capsys):
    assert main([str(out), "--problems", "16", "--k", "2", "--no-progress"]) == 0
    for method in ("grpo", "rloo"):
        run = out / method / "seed0"
        trained = [r for r in read_jsonl(run / "problems.jsonl") if r["step"] == 3]
        again = read_jsonl(run / "rescored" / "final-n16-k2.jsonl")
        assert len(trained) == 8 and len(again) == 16 and all(r["step"] == 3 for r in again)
        greedy = ("problem", "index", "greedy_correct", "greedy_answer", "completion_len", "truncated")
        # the same model, greedy: the same answers on the 8 problems both evaluations scored
        assert [{k: r[k] for k in greedy} for r in again[:8]] == [{k: r[k] for k in greedy} for r in trained]
        assert all(r["k"] == 2 and 0 <= r["k_correct"] <= 2 for r in again)
    assert "re-scored 2 model(s) on 16 held-out problems" in capsys.readouterr().out
    stamp = (out / "grpo" / "seed0" / "rescored" / "final-n16-k2.jsonl").stat().st_mtime_ns
    assert main([str(out), "--problems", "16", "--k", "2", "--no-progress"]) == 0  # resumed: nothing left to do
    assert (out / "grpo" / "seed0" / "rescored" / "final-n16-k2.jsonl").stat().st_mtime_ns == stamp


def test_the_report_table_shows_the_rescored_accuracy(out):
    """The table keeps the last evaluation's accuracy (8 problems) and adds the final models' greedy accuracy on the
    re-scoring's 16, the same numbers as the per-problem file: grpo's mean of greedy_correct over its 16 rows."""
    from analysis.report import Runs, summary_rows

    assert main([str(out), "--problems", "16", "--k", "2", "--no-progress"]) == 0  # (kept if already scored)
    rows = {r["method"]: r for r in summary_rows(Runs(out))}
    for method in ("grpo", "rloo"):
        again = read_jsonl(out / method / "seed0" / "rescored" / "final-n16-k2.jsonl")
        expected = sum(r["greedy_correct"] for r in again) / 16
        assert rows[method]["accuracy, 16 problems"] == f"{expected:.3f} (1 seed, no interval)"
        trained = [r for r in read_jsonl(out / method / "seed0" / "problems.jsonl") if r["step"] == 3]
        assert rows[method]["accuracy"].startswith(f"{sum(r['greedy_correct'] for r in trained) / 8:.3f}")
    base = next(r for r in rows.values() if r["method"].endswith("(step 0)"))
    assert base["accuracy, 16 problems"] == "–"  # the base is not re-scored


def test_the_base_is_scored_once_and_each_method_tested_against_it(out, tiny_base, tmp_path):
    """--base scores the model the runs started from (here their model.path, as with compare.py --model) once, into
    OUT/rescored/: on the problems the runs' own step-0 evaluation scored, it gives that evaluation's answers. Each
    method's gain over it is the paired test on the two per-problem files; checked by hand on set outcomes."""
    import json
    import shutil

    from scipy import stats

    from analysis import findings
    from analysis.report import Runs, summary_rows

    copy = tmp_path / "out"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("rescored"))
    for method in ("grpo", "rloo"):  # runs started from a given model
        cfg_file = copy / method / "seed0" / "config.yaml"
        cfg = yaml.safe_load(cfg_file.read_text())
        cfg["model"]["path"] = tiny_base
        cfg_file.write_text(yaml.safe_dump(cfg))
    assert main([str(copy), "--problems", "16", "--k", "2", "--base", "--no-progress"]) == 0
    base_file = copy / "rescored" / "base-n16-k2.jsonl"
    base = read_jsonl(base_file)
    assert len(base) == 16 and all(r["step"] == 0 for r in base)
    greedy = ("problem", "greedy_correct", "greedy_answer", "completion_len")
    start = [r for r in read_jsonl(copy / "grpo" / "seed0" / "problems.jsonl") if r["step"] == 0]
    assert len(start) == 8 and [{k: r[k] for k in greedy} for r in base[:8]] == [{k: r[k] for k in greedy}
                                                                                 for r in start]

    def set_greedy(path, n_right):  # the first n_right problems right, the rest wrong
        rows = read_jsonl(path)
        path.write_text("".join(json.dumps({**r, "greedy_correct": i < n_right}) + "\n" for i, r in enumerate(rows)))

    set_greedy(base_file, 4)  # base 4/16 = 0.250
    set_greedy(copy / "grpo" / "seed0" / "rescored" / "final-n16-k2.jsonl", 6)  # 6/16: gain +0.125
    set_greedy(copy / "rloo" / "seed0" / "rescored" / "final-n16-k2.jsonl", 2)  # 2/16: gain −0.125
    runs = Runs(copy)
    gains = findings.gain_table(runs).set_index(["a", "metric"])
    # grpo − base: d_p = 1 on problems 4, 5, else 0; D = 2/16 = 0.125. One seed: Var(D) = MS_P/P with
    # MS_P = (2·0.875² + 14·0.125²)/15 = 1.75/15, so SE = sqrt(1.75/15/16) = 0.08539, ν = 15, t = 2.1314:
    # 0.125 ± 0.1820 = [−0.0570, +0.3070], not separated.
    half = stats.t.ppf(0.975, 15) * (1.75 / 15 / 16) ** 0.5
    grpo = gains.loc[("grpo", "greedy")]
    assert abs(grpo["diff"] - 0.125) < 1e-12 and abs(grpo["hi"] - grpo["lo"] - 2 * half) < 1e-9
    assert grpo["b"] == runs.base_label and grpo["levels"] == "problems" and not grpo["separated"]
    assert abs(gains.loc[("rloo", "greedy"), "diff"] + 0.125) < 1e-12
    assert {m for _, m in gains.index} == {"greedy", "majk", "passk", "pass1"}  # the base was sampled too (k = 2)
    rows = {r["method"]: r for r in summary_rows(runs)}
    assert rows[f"{runs.base_label} (step 0)"]["accuracy, 16 problems"] == "0.250"
    findings.write(runs, tmp_path)
    written = (tmp_path / "gains.csv").read_text()
    assert written.startswith("method,metric,over,gain [95% interval]") and written.count("\ngrpo,") == 4 * 3
    subgroups = pd.read_csv(tmp_path / "gains.csv")["subgroup"].value_counts().to_dict()
    assert subgroups == {"all": 8, "carry": 8, "no_carry": 8}  # 2 methods × 4 metrics on all 16 problems, then on
    # each planned subgroup of them (analysis.findings.subgroups)
    assert (f"Over the {runs.base_label} (0.250 greedy; 1 seed × 16 problems: each interval covers this run's "
            "problems, not a new training run): grpo +0.125 [-0.057, +0.307], not separated; rloo -0.125"
            ) in (tmp_path / "findings.md").read_text()
    assert "P(A>B)" not in written  # one seed: 0 or 1 always, left out


def test_a_model_another_process_holds_is_left_to_it(out, capsys):
    claim = out / "rloo" / "seed0" / "rescored" / "final-n4-k0.claim"
    claim.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import socket

        claim.write_text(f"{socket.gethostname()}:{holder.pid}")
        assert main([str(out), "--problems", "4", "--no-progress"]) == 0
        assert (out / "grpo" / "seed0" / "rescored" / "final-n4-k0.jsonl").is_file()
        assert not (out / "rloo" / "seed0" / "rescored" / "final-n4-k0.jsonl").exists()
        assert "being scored by another process: rloo seed0 final" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()


def _cli(*args, cwd=ROOT):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return forkserver.run([sys.executable, "-m", "gcframe.evaluate", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env)


def _files(folder: Path) -> set:
    return {p for p in folder.rglob("*")}


@pytest.mark.parametrize("case", ["no final models", "different tasks", "too many problems"])
def test_bad_input_is_one_line_and_writes_nothing(out, tmp_path, case):
    if case == "no final models":
        target = tmp_path / "empty"
        (target / "grpo" / "seed0").mkdir(parents=True)
        (target / "grpo" / "seed0" / "config.yaml").write_text("seed: 0\n")
        args, expect = [target], "no final models under"
    elif case == "different tasks":
        target = tmp_path / "mixed"
        import shutil

        shutil.copytree(out, target, ignore=shutil.ignore_patterns("rescored"))
        cfg_file = target / "rloo" / "seed0" / "config.yaml"
        cfg = yaml.safe_load(cfg_file.read_text())
        cfg["task"]["digits"] = 3
        cfg_file.write_text(yaml.safe_dump(cfg))
        args, expect = [target], "runs of different tasks (task differs: task.digits 2 vs 3)"
    else:
        target = out
        args, expect = [target, "--problems", "17"], "more than the task's 16 held-out problems"
    before = _files(target)
    res = _cli(*args)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and expect in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and _files(target) == before


def test_validation_scores_go_to_their_own_file_on_the_validation_problems(out, tmp_path):
    """--split validation scores the validation problems (the ones a choice is made on, e.g. reproduce.py's stage
    check) into <model>-validation-n<N>-k<K>.jsonl, a name the findings' final-n* never reads; a task without
    validation problems is one line, exit 2, nothing written."""
    import shutil

    from gcframe import pipeline
    from gcframe.config import from_dict
    from gcframe.evaluate.problems import heldout_rows, problem_id
    from gcframe.evaluate.rescore import run_config

    run = tmp_path / "run"
    shutil.copytree(out / "rloo" / "seed0", run, ignore=shutil.ignore_patterns("rescored"))
    before = _files(run)
    res = _cli(run, "--split", "validation", "--problems", "8")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "has no validation problems" in res.stderr
    assert "Traceback" not in res.stderr and _files(run) == before
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["task"]["n_validation"] = 100
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main([str(run), "--split", "validation", "--problems", "8", "--k", "2", "--no-progress"]) == 0
    rows = read_jsonl(run / "rescored" / "final-validation-n8-k2.jsonl")
    _, task = pipeline.prepare(from_dict(run_config(run)))
    validation = [problem_id(r) for r in heldout_rows(task, 8, "validation")]
    assert [r["problem"] for r in rows] == validation and all(r["k"] == 2 for r in rows)
    assert not set(validation) & {problem_id(r) for r in heldout_rows(task, 16)}  # none of the test problems
    assert not list((run / "rescored").glob("final-n*"))  # nothing a finding would read


@pytest.mark.parametrize("flag, value, expect, other", [("--problems", "0", "--problems 0: give at least 1", "--k"),
                                                        ("--k", "-1", "--k -1: give 0 (greedy only)", "--problems")])
def test_a_bad_count_names_its_own_flag_only(tmp_path, flag, value, expect, other):
    res = _cli(tmp_path, flag, value)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and expect in res.stderr, res.stderr
    assert other not in res.stderr



def _copy(out: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(out, to, ignore=shutil.ignore_patterns("rescored", "report"))
    return to


def test_only_what_this_process_scored_is_counted(out, tmp_path, capsys, monkeypatch):
    """grpo's file was written before this process started (kept, not "re-scored 1 model(s) in 0 s"); rloo's is
    written by another process between this one's look and its claim (it then holds a free claim to a finished
    model): kept too, never scored twice and never counted by both processes (the user saw a count one too high)."""
    import gcframe.evaluate.rescore as rescore
    from gcframe.tracking import claims

    copy = _copy(out, tmp_path / "out")
    done = copy / "grpo" / "seed0" / "rescored" / "final-n6-k0.jsonl"
    done.parent.mkdir()
    done.write_text("{}\n")
    real = claims.acquire

    def acquire(claim):  # the other process finishes rloo and lets go just before this one claims it
        if "rloo" in str(claim):
            claim.parent.mkdir(exist_ok=True)
            claim.with_suffix(".jsonl").write_text("{}\n")
        return real(claim)

    def no_model(*a, **k):
        raise AssertionError("a model whose file exists was scored again")

    monkeypatch.setattr(claims, "acquire", acquire)
    monkeypatch.setattr(rescore, "load_final", no_model)
    assert main([str(copy), "--problems", "6", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "re-scored 0 model(s) on 6 held-out problems (k = 0) in 0 s; 2 already scored, kept" in printed
    assert not list(copy.rglob("*.claim"))  # the claim taken on a finished model is let go


def test_one_run_scored_alone_points_to_the_comparison_and_its_other_runs(out, tmp_path, capsys):
    """After scoring OUT/grpo/seed0 alone, the suggestion is the report of OUT (a run folder is not a comparison:
    the user's `python -m analysis.report RUN/grpo/seed0` failed), after scoring the other runs on the same
    problems; the report then names the re-scoring that rloo lacks."""
    from analysis.report import write_report

    copy = _copy(out, tmp_path / "out")
    assert main([str(copy / "grpo" / "seed0"), "--problems", "5", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip().splitlines()[-1] == (
        f"the report pairs methods only on a re-scoring every run has: score the other runs of {copy} too (python -m "
        f"gcframe.evaluate {copy} --problems 5 --k 0; this one is kept), then python -m analysis.report {copy}")
    md = write_report(copy).read_text()
    assert (f"the re-scoring on 5 problems (k = 0) is left out: 1 of 2 runs have it, not rloo seed 0; score them with "
            f"python -m gcframe.evaluate {copy} --problems 5 --k 0") in md


def test_a_greedy_scoring_is_held_by_a_scoring_with_samples(out, tmp_path, capsys):
    """Every scoring decodes greedily first, so a k = 0 scoring of a model that has a k = 2 one on the same problems
    is kept, not run again (compare.py's test scoring after a validation-curve comparison, then --k 4); a k = 2 on
    other problems, or a k = 1 request, does not hold it; reproduce.py counts the greedy re-scoring as done."""
    import shutil

    from experiments.reproduce import rescored

    copy = tmp_path / "out"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("rescored"))
    assert main([str(copy), "--problems", "8", "--k", "2", "--no-progress"]) == 0
    assert not rescored(copy, ["--problems", "16"])  # k2 on 8 problems does not hold a greedy scoring on 16
    capsys.readouterr()
    assert main([str(copy), "--problems", "8", "--no-progress"]) == 0  # greedy on the same 8: held, kept
    assert "re-scored 0 model(s)" in capsys.readouterr().out
    assert not list(copy.glob("*/seed0/rescored/final-n8-k0.jsonl"))
    assert rescored(copy, ["--problems", "8"]) and rescored(copy, ["--problems", "8", "--k", "2"])
    assert not rescored(copy, ["--problems", "8", "--k", "1"])
    assert main([str(copy), "--problems", "8", "--k", "1", "--no-progress"]) == 0  # samples: not held
    assert len(list(copy.glob("*/seed0/rescored/final-n8-k1.jsonl"))) == 2
