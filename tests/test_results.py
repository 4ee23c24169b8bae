"""Results are data: the README's and the docs' marked tables are rendered from results/<name>/*.csv, and a table
that differs from its CSV fails here (analysis.results)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis import results
from gcframe.errors import UserError
from gcframe import forkserver

ROOT = Path(__file__).resolve().parents[1]
ENV = {"commit": "abc1234def", "dirty": False, "python": "3.11.7", "cpu": "AMD EPYC", "threads": 1,
       "device": "cpu", "torch": {"version": "2.13.0+cpu", "cpu_capability": "AVX512"},
       "packages": {"transformers": "5.24.0"}}


def test_every_marked_table_in_the_readme_and_docs_matches_its_csv():
    problems = [p for p in results.check(ROOT) if "differs" in p or "not found" in p]
    assert problems == []


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "results" / "toy").mkdir(parents=True)
    (tmp_path / "results" / "toy" / "table.csv").write_text("method,accuracy\nsft,0.617 ± 0.010\ngrpo,0.685\n")
    (tmp_path / "results" / "toy" / "env.json").write_text(json.dumps(ENV))
    (tmp_path / "README.md").write_text("# x\n<!-- result: toy/table.csv -->\nstale\n<!-- /result -->\ntail\n")
    return tmp_path


def test_render_writes_the_csv_as_a_table_with_its_provenance(tree):
    assert results.render_all(tree) == [tree / "README.md"]
    text = (tree / "README.md").read_text()
    assert "| method | accuracy |\n|---|---|\n| sft | 0.617 ± 0.010 |\n| grpo | 0.685 |\n" in text
    assert "commit abc1234" in text and "torch 2.13.0+cpu (AVX512)" in text and text.endswith("tail\n")
    assert results.check(tree) == [] and results.render_all(tree) == []  # idempotent


@pytest.mark.parametrize("where", ["readme", "csv"])
def test_check_fails_when_a_table_and_its_csv_disagree(tree, where):
    results.render_all(tree)
    if where == "readme":  # someone edits a number by hand
        (tree / "README.md").write_text((tree / "README.md").read_text().replace("0.685", "0.700"))
    else:  # the result is re-made, the README not re-rendered
        (tree / "results" / "toy" / "table.csv").write_text("method,accuracy\nsft,0.600\ngrpo,0.685\n")
    assert any("differs from the CSV" in p for p in results.check(tree))


DAMAGE = {  # what happens to toy/table.csv after the README was rendered from it -> the words of the one line
    "cut at a line boundary": (b"method,accuracy\nsft,0.617 \xc2\xb1 0.010\n", ["lacks 1 of the 2 rows",
                                                                                  "--reshape"]),
    "a column dropped": (b"method\nsft\ngrpo\n", ["lacks column accuracy", "env.json unchanged"]),
    "deleted": (None, ["table.csv is gone, and the page shows its table"]),
    "cut inside a quoted cell": (b'method,accuracy\nsft,"0.617', ["is cut short or damaged (unexpected end of data)"]),
    "cut inside a row": (b"method,accuracy\nsft,0.617\ngrpo", ["row 3 has 1 cell, its header 2"]),
    "cut inside a cell": (b"method,accuracy\nsft,0.617\ngrpo,0.6", ["its last row has no line break"]),
    "binary": (bytes(range(256)), ["is not a text file"]),
    "empty": (b"", ["is empty"]),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_csv_never_reaches_the_readme(tree, damage):
    """Rendering refuses what --check refuses, in one line naming the file, before any page is written: a table
    would lose rows or columns its result (the same env.json) still has, its CSV is gone, or the CSV is not one
    pandas reads whole. Before, the first three re-rendered silently (a cut: rows deleted from the README; a deleted
    CSV: "nothing changed") and the last five were pandas tracebacks or a short row filled with ""."""
    results.render_all(tree)
    shown = (tree / "README.md").read_text()
    data, words = DAMAGE[damage]
    csv = tree / "results" / "toy" / "table.csv"
    csv.unlink() if data is None else csv.write_bytes(data)
    try:  # what --check refuses: a table that differs from its CSV, or (one line too) a CSV it cannot read
        refused = any("differs" in p or "not found" in p for p in results.check(tree))
    except UserError:
        refused = True
    assert refused
    with pytest.raises(UserError) as e:
        results.render_all(tree)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"README.md: {csv}") and all(w in line for w in words), line
    assert "git checkout -- " in line and line.endswith("no page was changed")
    assert (tree / "README.md").read_text() == shown  # nothing written


def test_a_result_made_again_may_change_its_shape_and_reshape_accepts_a_change_on_purpose(tree):
    """Rows lost from the same result are refused; the same rows lost from a result made again (another env.json,
    so another line under the table) are its new table; --reshape renders a change made on purpose."""
    results.render_all(tree)
    csv = tree / "results" / "toy" / "table.csv"
    csv.write_text("method,accuracy\nsft,0.617 ± 0.010\n")
    with pytest.raises(UserError, match="lacks 1 of the 2 rows"):
        results.render_all(tree)
    assert results.render_all(tree, reshape=True) == [tree / "README.md"]
    assert "| grpo |" not in (tree / "README.md").read_text()
    csv.write_text("method\nsft\n")  # a column fewer: refused again, then the result is made again elsewhere
    with pytest.raises(UserError, match="lacks column accuracy"):
        results.render_all(tree)
    (tree / "results" / "toy" / "env.json").write_text(json.dumps({**ENV, "commit": "fff0000"}))
    assert results.render_all(tree) == [tree / "README.md"]
    assert "| method |\n|---|\n| sft |\n" in (tree / "README.md").read_text()


def test_a_damaged_csv_is_one_line_and_exit_2_from_the_command(tmp_path):
    """`python -m analysis.results --results R` (the README of the checkout, read only here: R holds a damaged copy
    of a result the README shows, so the command refuses before writing)."""
    import shutil

    name = "default"
    copy = tmp_path / "results"
    shutil.copytree(ROOT / "results" / name, copy / name)
    csv = copy / name / "over_sft_filtered.csv"
    csv.write_bytes(csv.read_bytes()[:-10])  # cut inside its last row
    before = (ROOT / "README.md").read_bytes()
    r = subprocess.run([sys.executable, "-m", "analysis.results", "--results", str(copy)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert f"{csv} is cut short" in r.stderr
    assert (ROOT / "README.md").read_bytes() == before


def test_results_from_different_commits_are_named(tree):
    other = tree / "results" / "other"
    other.mkdir()
    (other / "table.csv").write_text("a\n1\n")
    (other / "env.json").write_text(json.dumps({**ENV, "commit": "fff0000"}))
    (tree / "README.md").write_text((tree / "README.md").read_text()
                                    + "<!-- result: other/table.csv -->\n<!-- /result -->\n")
    results.render_all(tree)
    assert results.check(tree) == ["results made at different commits: other fff0000, toy abc1234 (fine when the "
                                   "code between them does not change these results; say so where they are shown)"]


def test_processes_in_different_environments_are_refused_not_mixed():
    assert results._same_env([ENV, dict(ENV)]) == ENV
    with pytest.raises(UserError, match="different environments \\(torch differ\\)"):
        results._same_env([ENV, {**ENV, "torch": {"version": "2.14.1"}}])


def test_commits_count_as_one_environment_only_where_the_run_code_is_the_same(tmp_path):
    """A comparison resumed after a commit that changed its config file and a test (not gcframe/ or methods/) is one
    environment; after a commit that changed gcframe/, two. A throwaway repository with three commits."""
    from gcframe.tracking import env as envinfo

    def git(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@t"), git("config", "user.name", "t")
    commits = []
    for path, text in [("gcframe/engine.py", "a = 1\n"), ("experiments/configs/x.yaml", "methods: [a, b]\n"),
                       ("gcframe/engine.py", "a = 2\n")]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
        git("add", "-A"), git("commit", "-qm", path)
        commits.append(git("rev-parse", "HEAD").strip())
    assert envinfo.same_run_code(commits[0], commits[1], tmp_path)
    assert not envinfo.same_run_code(commits[1], commits[2], tmp_path)
    assert not envinfo.same_run_code(commits[0], "f" * 40, tmp_path)  # a commit git does not have: not the same
    # asked from inside the package (envinfo.ROOT is gcframe/), the paths are still the repository's
    assert not envinfo.same_run_code(commits[1], commits[2], tmp_path / "gcframe")
    assert envinfo.same_run_code(commits[0], commits[1], tmp_path / "gcframe")
    assert results._same_env([ENV, {**ENV, "commit": ENV["commit"]}]) == ENV
    with pytest.raises(UserError, match="different environments \\(commit differ\\)"):
        results._same_env([ENV, {**ENV, "commit": "f" * 40}])


def test_reproduce_names_the_known_results_for_an_unknown_one():
    p = forkserver.run([sys.executable, "experiments/reproduce.py", "defualt"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("error: unknown result(s) defualt: known results are default, default_scarce, "
                               "default_long, default_mid_curve, overoptimisation")


def test_a_compare_result_is_started_once_and_joined_by_resume(tmp_path, monkeypatch):
    """reproduce's compare recipes: the first process creates the folder, any other process (or the same command
    after a kill) resumes it, so compare.py's cell claims split the work; a finished folder is not run again."""
    import socket

    sys.path.insert(0, str(ROOT / "experiments"))
    import reproduce

    calls = []
    monkeypatch.setattr(reproduce, "run", lambda cmd: calls.append(cmd))
    recipe, out = reproduce.RECIPES["default"], tmp_path / "default"
    reproduce.compare_cells(recipe, [0, 1, 2], out, quick=False)
    assert calls[-1][0] == "experiments/compare.py"
    assert calls[-1][-4 - len(recipe.args):] == ["--seeds", "0,1,2", "--out", str(out), *recipe.args]
    assert not out.with_name("default.start.claim").exists()  # released once compare.py returned
    sweep = reproduce.RECIPES["smollm2_lr"]  # a recipe's own compare.py arguments (a sweep's --methods) are passed
    reproduce.compare_cells(sweep, [0], tmp_path / "smollm2_lr", quick=False)
    assert calls.pop()[-6:] == ["--seeds", "0", "--out", str(tmp_path / "smollm2_lr"), *sweep.args]
    labels = sweep.args[1].split(",")
    assert sweep.args[0] == "--methods" and set(labels) <= set(yaml.safe_load(
        (ROOT / "experiments" / "configs" / sweep.config).read_text())["methods"])  # each variant has its options

    out.mkdir()
    (out / "config.yaml").write_text("run: {}\n")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # another live process holds the start claim: this one joins with --resume
        out.with_name("default.start.claim").write_text(f"{socket.gethostname()}:{other.pid}")
        reproduce.compare_cells(recipe, [0, 1, 2], out, quick=False)
        assert calls[-1] == ["experiments/compare.py", "--resume", str(out)]
    finally:
        other.kill()
        other.wait()
    reproduce.compare_cells(recipe, [0, 1, 2], out, quick=False)  # its holder died (a kill): resumed
    assert calls[-1] == ["experiments/compare.py", "--resume", str(out)] and len(calls) == 3
    (out / "summary.csv").write_text("method,seed\n")  # the runs done, the scoring and the report still to come
    reproduce.compare_cells(recipe, [0, 1, 2], out, quick=False)
    assert len(calls) == 4  # resumed: not finished before its report
    _finish(reproduce, out)
    reproduce.compare_cells(recipe, [0, 1, 2], out, quick=False)
    assert len(calls) == 4  # finished: kept


def _finish(reproduce, folder: Path) -> None:
    """What a finished compare.py folder has last (reproduce.finished: its report)."""
    reproduce.finished(folder).parent.mkdir(parents=True, exist_ok=True)
    reproduce.finished(folder).write_text("# report\n")


def test_a_check_with_other_seeds_never_overwrites_the_committed_result(tmp_path, monkeypatch):
    """`reproduce.py default --check 0` (the README's check) writes beside results/, not into results/default/."""
    sys.path.insert(0, str(ROOT / "experiments"))
    import reproduce

    seen = {}
    monkeypatch.setattr(reproduce, "compare_cells", lambda recipe, seeds, runs, quick, backend: seen.update(runs=runs))
    monkeypatch.setattr(results, "from_compare", lambda runs, res, **kw: seen.update(results=res))
    monkeypatch.setattr(reproduce, "run", lambda cmd: seen.update(rescore=cmd))  # the test-set re-scoring
    monkeypatch.setattr(reproduce, "rescored", lambda runs, args: True)
    args = reproduce.parse_args(["default", "--check", "0", "--runs", str(tmp_path / "runs"),
                                 "--results", str(tmp_path / "results")])
    (tmp_path / "runs" / "default-seeds0").mkdir(parents=True)
    _finish(reproduce, tmp_path / "runs" / "default-seeds0")
    reproduce.reproduce("default", args)
    assert seen["runs"] == tmp_path / "runs" / "default-seeds0"
    assert seen["results"] == tmp_path / "runs" / "default-seeds0" / "results"


def test_a_pipeline_recipe_chains_its_stages_and_rescores(tmp_path, monkeypatch):
    """word_problems_pipeline: the SFT stage runs first (its own folder), its final model is the comparison's
    --model, the finished comparison is re-scored, and both stages are collected into one result."""
    sys.path.insert(0, str(ROOT / "experiments"))
    import reproduce

    cells, cmds, collected = [], [], []
    write_base = False

    def compare_cells(recipe, seeds, runs, quick, backend):
        assert not backend  # the local backend: nothing added to its compare.py commands
        cells.append((recipe.config, seeds, runs, list(recipe.args)))
        runs.mkdir(parents=True, exist_ok=True)
        _finish(reproduce, runs)

    def run(cmd):
        cmds.append(cmd)
        for seed in (0, 1):  # what the re-scoring writes
            run_dir = tmp_path / "runs" / "word_problems_pipeline" / "grpo" / f"seed{seed}"
            (run_dir / "final").mkdir(parents=True, exist_ok=True)
            (run_dir / "rescored").mkdir(exist_ok=True)
            (run_dir / "rescored" / "final-n200-k0.jsonl").write_text("")
        if write_base:  # --base: the SFT model the runs started from, once
            (tmp_path / "runs" / "word_problems_pipeline" / "rescored" / "base-n200-k0.jsonl").write_text("")

    monkeypatch.setattr(reproduce, "compare_cells", compare_cells)
    monkeypatch.setattr(reproduce, "run", run)
    monkeypatch.setattr(results, "from_compare",
                        lambda runs, res, prefix="", **kw: collected.append((runs.name, prefix)))
    args = reproduce.parse_args(["word_problems_pipeline", "--runs", str(tmp_path / "runs"),
                                 "--results", str(tmp_path / "results")])
    reproduce.reproduce("word_problems_pipeline", args)
    assert collected == []  # the finals are re-scored but the base is not: another process is still on it
    (tmp_path / "runs" / "word_problems_pipeline" / "rescored").mkdir()
    write_base = True
    reproduce.reproduce("word_problems_pipeline", args)
    stage, main = cells[:2]
    assert stage[0] == "word_problems_sft.yaml" and stage[1] == [0] and stage[3] == ["--methods", "sft"]
    assert stage[2] == tmp_path / "runs" / "word_problems_pipeline-sft"
    assert main[0] == "word_problems_pipeline.yaml" and main[1] == [0, 1]
    assert main[3][-2:] == ["--model", str(stage[2] / "sft" / "seed0" / "final")]
    assert cmds[-1] == ["-m", "gcframe.evaluate", str(main[2]), "--problems", "200", "--base"]
    assert collected == [("word_problems_pipeline", ""), ("word_problems_pipeline-sft", "sft_stage_")]


def test_compare_rows_says_column_by_column_what_a_regenerated_result_repeats(tmp_path):
    """`reproduce.py default --seeds 0` against the committed 3-seed summary: rows matched by method and seed, numbers
    equal to the committed file's 4 decimals, time the only column that differs (the user saw no comparison)."""
    committed, new = tmp_path / "committed.csv", tmp_path / "new.csv"
    committed.write_text("method,seed,final_accuracy,time_s,steps\n"
                         "grpo,0,0.4167,233.1,100\ngrpo,1,0.4000,240.2,100\nrft,0,0.3000,120.0,100\n")
    # 0.41666667 agrees with 0.4167 to 4 decimals (|Δ| 3.3e-5 <= 5e-5); sft seed 0 has no committed row
    new.write_text("method,seed,final_accuracy,time_s,steps,extra\n"
                   "grpo,0,0.41666667,241.7,100,x\nrft,0,0.3,120.0,100,y\nsft,0,0.2,50.0,100,z\n")
    assert results.compare_rows(new, committed).splitlines() == [
        f"{new} against the committed {committed}: 2 of 3 rows matched by method, seed (3 committed rows)",
        "  CPU: this run unknown, the committed rows unknown",  # no env.json beside either file
        "  equal in every matched row: final_accuracy, steps",
        "  differ: time_s in 1 of 2 rows (committed → new: grpo seed 0: 233.1 → 241.7)",
        "  not in the committed file: sft seed 0",
        "  only in the new file: extra"]
    # each file's env.json names its CPU, and another family is said to round differently
    (tmp_path / "env.json").write_text('{"cpu": "AMD EPYC"}')
    assert "  CPU: this run AMD EPYC, the committed rows AMD EPYC" in results.compare_rows(new, committed).splitlines()
    (tmp_path / "theirs").mkdir()
    theirs = tmp_path / "theirs" / "committed.csv"
    theirs.write_text(committed.read_text())
    (tmp_path / "theirs" / "env.json").write_text('{"cpu": "Intel(R) Xeon(R) Processor"}')
    assert ("  CPU: this run AMD EPYC, the committed rows Intel(R) Xeon(R) Processor (another CPU family rounds in "
            "another order: expect differences)") in results.compare_rows(new, theirs).splitlines()
    # a value off at the committed precision differs
    new.write_text("method,seed,final_accuracy\ngrpo,0,0.4168\n")
    assert "  differ: final_accuracy in 1 of 1 rows (committed → new: grpo seed 0: 0.4167 → 0.4168)" in \
        results.compare_rows(new, committed).splitlines()


def test_reproduce_list_puts_every_description_in_one_column():
    """`reproduce.py --list`: a name longer than the others (word_problems_pipeline, 22 characters) does not push its
    description out of the column: every description and command starts at the longest name's width + 2."""
    p = forkserver.run([sys.executable, "experiments/reproduce.py", "--list"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    width = max(len(line.split(" ", 1)[0]) for line in lines[::2]) + 2
    assert width >= len("word_problems_pipeline") + 2
    assert all(len(line) > width and line[width - 1] == " " and line[width] != " " for line in lines), p.stdout


def _stage(tmp_path, evals):
    """A finished stage folder whose sft/seed0/metrics.jsonl holds these (step, greedy, pass@k) evaluations."""
    run = tmp_path / "stage" / "sft" / "seed0"
    run.mkdir(parents=True)
    rows = [{"step": s, "eval_accuracy": g, **({"eval_passk": k} if k is not None else {})} for s, g, k in evals]
    rows.insert(1, {"step": 0, "loss": 1.0})  # a training row between evaluations is skipped
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "stage", {"config": "smollm2_slip_sft.yaml", "method": "sft", "seed": 0}


def test_a_stage_inside_its_band_with_room_is_accepted(tmp_path):
    from experiments.reproduce import check_stage

    stage, b = _stage(tmp_path, [(0, 0.11, 0.21), (96, 0.23, None), (192, 0.31, 0.45)])
    check_stage(stage, {**b, "band": (0.2, 0.6), "room": 0.10})  # 0.31 in [0.2, 0.6]; 0.45 − 0.31 = 0.14 >= 0.10


@pytest.mark.parametrize("evals,what", [
    ([(0, 0.11, 0.21), (192, 0.65, 0.80)], "0.650 greedy (step 192"),      # above the band: no room for the methods
    ([(0, 0.11, 0.21), (192, 0.15, 0.40)], "0.150 greedy (step 192"),      # below it
    ([(0, 0.11, 0.21), (192, 0.31, 0.38)], "pass@k 0.380 (step 192, "),  # 0.38 − 0.31 = 0.07 < 0.10
])
def test_a_stage_outside_its_band_stops_the_recipe_naming_what_it_reached(tmp_path, evals, what):
    from experiments.reproduce import check_stage

    stage, b = _stage(tmp_path, evals)
    with pytest.raises(UserError, match="train.steps or train.lr in experiments/configs/smollm2_slip_sft.yaml") as e:
        check_stage(stage, {**b, "band": (0.2, 0.6), "room": 0.1})
    assert what in str(e.value) and "\n" not in str(e.value)


def test_a_stage_is_checked_on_its_validation_rescoring_when_the_recipe_asks(tmp_path):
    """base_run["check"] = (N, k): the stage is judged on its final model's scores on N validation problems (the
    re-scoring's file, <run>/rescored/final-validation-n<N>-k<k>.jsonl), not on its last evaluation's 100."""
    from experiments.reproduce import check_stage

    stage, b = _stage(tmp_path, [(0, 0.11, 0.21), (192, 0.46, 0.55)])  # last evaluation: room 0.09, refused alone
    # 10 problems: greedy right on 4, some sample right on 6 -> greedy 0.4, pass@4 0.6, room 0.2
    rows = [{"greedy_correct": int(i < 4), "k_correct": int(i < 6), "k": 4} for i in range(10)]
    scored = stage / "sft" / "seed0" / "rescored" / "final-validation-n10-k4.jsonl"
    scored.parent.mkdir()
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    check_stage(stage, {**b, "band": (0.2, 0.6), "room": 0.1, "check": (10, 4)})  # 0.2 >= 0.1: accepted
    with pytest.raises(UserError) as e:
        check_stage(stage, {**b, "band": (0.2, 0.6), "room": 0.25, "check": (10, 4)})  # 0.2 < 0.25
    assert "0.400 greedy and pass@k 0.600 (10 validation problems" in str(e.value) and "\n" not in str(e.value)


def test_base_curve_has_every_seeds_own_base(tmp_path, monkeypatch):
    """With sft_base.per_seed each seed's run starts from its own base: base_curve.csv holds every seed's stage 1,
    found under its own cache key, with a `seed` column; a seed whose base is not cached is left out."""
    from gcframe import pipeline
    from gcframe.config import from_dict

    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path / "cache"))
    made = {"seed": 0, "seeds": [0, 1, 2], "sft_base": {"per_seed": True, "steps": 50}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(made))
    for seed, best in ((0, 25), (1, 50)):  # seed 2's base is not cached
        key = pipeline.base_key(from_dict({"seed": seed, "sft_base": made["sft_base"], "methods": {}}))
        d = tmp_path / "cache" / "sft_base" / key
        d.mkdir(parents=True)
        curve = [{"step": 25, "loss": 1.0, "accuracy": 0.2 + seed / 10}, {"step": 50, "loss": 0.5, "accuracy": 0.3}]
        (d / "base_info.json").write_text(json.dumps({"stage1": {"curve": curve, "split": "validation",
                                                                 "steps_trained": 50, "best_step": best}}))
    results.write_base_curve(tmp_path, tmp_path / "base_curve.csv")
    import pandas as pd

    out = pd.read_csv(tmp_path / "base_curve.csv")
    assert out["seed"].tolist() == [0, 0, 1, 1] and out["kept_step"].tolist() == [25, 25, 50, 50]
    assert out["accuracy"].tolist() == [0.2, 0.3, 0.3, 0.3] and (out["split"] == "validation").all()


def test_a_second_process_waits_while_another_holds_a_claim_and_not_after(tmp_path):
    """reproduce.wait_for: True once the awaited file exists while a live process holds a claim in the folder (the
    first process training the stage); False after two polls with no live claim (nobody left to write it)."""
    import socket
    import subprocess
    import threading

    sys.path.insert(0, str(ROOT / "experiments"))
    import reproduce

    done = tmp_path / "summary.csv"
    assert reproduce.wait_for(tmp_path, done, "nothing", poll_s=0.01) is False  # no claim, no file
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "sft").mkdir()
        (tmp_path / "sft" / "seed0.claim").write_text(f"{socket.gethostname()}:{worker.pid}")
        threading.Timer(0.3, lambda: done.write_text("method,seed\n")).start()
        assert reproduce.wait_for(tmp_path, done, "the stage", poll_s=0.05) is True
    finally:
        worker.kill()
        worker.wait()
    done.unlink()
    assert reproduce.wait_for(tmp_path, done, "the stage", poll_s=0.01) is False  # its owner is gone: a dead claim


def test_every_published_curve_fit_publishes_the_evaluations_it_was_fitted_on():
    """A result with compute-performance fits (<prefix>curves_per_run.csv) holds every evaluation of every run beside
    them (<prefix>evals.csv), so a reader refits any run (analysis.curves.run_fits; a claim test does it for
    default_long)."""
    fits = sorted((ROOT / "results").rglob("*curves_per_run.csv"))
    assert len(fits) >= 4
    for f in fits:
        prefix = f.name.removesuffix("curves_per_run.csv")
        evals = f.with_name(f"{prefix}evals.csv")
        assert evals.is_file(), f"{f.relative_to(ROOT)} has no {evals.name} beside it"
        runs = pd.read_csv(f)[["method", "seed"]].astype(str)
        have = pd.read_csv(evals)[["method", "seed"]].astype(str).drop_duplicates()
        assert set(map(tuple, runs.values)) <= set(map(tuple, have.values)), f
