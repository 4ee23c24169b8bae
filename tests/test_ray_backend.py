"""compare.py --backend ray (gcframe/raygrid.py): the grid's units as Ray tasks give the local path's results folder;
without Ray, one line naming the install command; a node that cannot see the run folder fails in one line."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_resume import COMPARE, ROOT, cli_env, run_cli

# metrics.jsonl's, summary.csv's and tune.csv's clock and memory columns, never byte-stable; and eval_shared, whether
# a run's step-0 evaluation was another run's from the same base (the same numbers): which run evaluates first
# depends on the order runs start in, with --workers 2 as with Ray
UNSTABLE = ("time", "peak_rss", "critic_s", "eval_shared", "wall_s", "elapsed")
NOT_RESULTS = {"env.json", "env.resume.json"}  # the machine, the time and the command that made the folder


def _stable_jsonl(text: str) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(UNSTABLE)} for line in text.splitlines()]


def _stable_csv(text: str) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith(UNSTABLE)} for row in csv.DictReader(io.StringIO(text))]


def results_differences(a: Path, b: Path) -> list[str]:
    """The files of two comparison (or sweep) folders that differ: every file byte for byte, except metrics.jsonl,
    summary.csv, tune.csv and a sweep cell's final_k.json (compared without their UNSTABLE columns), the env*.json
    records, the Ray tasks' logs, the report (its tables and figures show the clock; its numbers come from the files
    compared here) and a sweep's checkpoints (a run's state, not its results: their clock and Python's `random`
    state, which no result reads, differ between one process running every cell and a process per cell)."""
    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name not in NOT_RESULTS
                and p.relative_to(root).parts[0] not in ("report", "sweep_report")
                and not {"checkpoints", "ray-logs"} & set(p.relative_to(root).parts)}

    fa, fb = files(a), files(b)
    diffs = [f"only in {a.name}: {f}" for f in sorted(fa - fb)] + [f"only in {b.name}: {f}" for f in sorted(fb - fa)]
    for f in sorted(fa & fb):
        ta, tb = (a / f).read_bytes(), (b / f).read_bytes()
        if f.endswith("metrics.jsonl"):
            same = _stable_jsonl(ta.decode()) == _stable_jsonl(tb.decode())
        elif f.endswith(("summary.csv", "tune/tune.csv")):
            same = _stable_csv(ta.decode()) == _stable_csv(tb.decode())
        elif f.endswith("final_k.json"):
            same = _stable_jsonl(ta.decode().replace("\n", "")) == _stable_jsonl(tb.decode().replace("\n", ""))
        else:
            same = ta == tb
        if not same:
            diffs.append(f)
    return diffs


def test_without_ray_one_line_names_the_install_command(tmp_path):
    """--backend ray where Ray cannot be imported: one line with the install command, exit 2, nothing written."""
    code = ("import sys, runpy; sys.modules['ray'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    out = tmp_path / "r"
    r = subprocess.run([sys.executable, "-c", code, str(COMPARE), "--quick", "--methods", "sft", "--backend", "ray",
                        "--out", str(out)], capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=600)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == ['error: --backend ray needs Ray, which is not installed: '
                                             'pip install ".[ray]"']
    assert not out.exists()


def test_address_without_the_ray_backend_is_refused(tmp_path):
    r = run_cli("--quick", "--methods", "sft", "--address", "auto", "--out", tmp_path / "r")
    assert r.returncode == 2 and "--address joins a Ray cluster: give it with --backend ray" in r.stderr
    assert not (tmp_path / "r").exists()


def test_a_node_that_cannot_see_the_run_folder_fails_in_one_line(tmp_path):
    """A unit's task on a node without the shared disk: one line naming the folder and the fix, not retried."""
    from experiments.compare_grid import compare_task
    from gcframe import raygrid

    with pytest.raises(raygrid.UnitFailed) as e:
        raygrid.run_unit(str(tmp_path / "elsewhere"), compare_task(tmp_path / "elsewhere", ("run", "sft", 0), 1))
    line = str(e.value)
    assert "\n" not in line and f"cannot see the run folder {tmp_path / 'elsewhere'}" in line
    assert f"({tmp_path / 'elsewhere' / 'config.yaml'} is not there)" in line
    assert "a filesystem every Ray node mounts at the same path" in line


def test_a_unit_forks_from_a_server_that_imported_the_drivers_modules(tmp_path):
    """A Ray task's body without Ray (`run_unit`): the unit is forked from a server that imported the libraries and
    the modules its driver names (`Task.preload`: compare.py's, experiments/compare_grid.py), and a unit of another
    driver gets a server of its own; the library names none of them."""
    from experiments.compare_grid import PRELOAD
    from gcframe import raygrid

    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nprint('preloaded' if 'analysis.report' in sys.modules else 'fresh')\n")
    (tmp_path / "config.yaml").write_text("{}")
    try:
        for preload, want in ((PRELOAD, "preloaded"), ((), "fresh")):
            task = raygrid.Task(f"probe:{want}", (str(probe),), str(tmp_path / "config.yaml"), None, preload)
            assert raygrid.run_unit(str(tmp_path), task) == task.name
            log = (tmp_path / "ray-logs" / f"probe_{want}.log").read_text()
            assert want in log.splitlines()[1:], log
    finally:
        if raygrid._server is not None:
            raygrid._server.stop()


def test_an_address_nothing_answers_at_is_one_line_before_anything_is_written():
    """--address HOST:PORT (or ray://HOST:PORT) where no cluster listens: one line within seconds (ray.init would
    retry for minutes, after OUT was made); a malformed port is named; `auto` is Ray's to resolve."""
    import socket

    from gcframe import raygrid
    from gcframe.errors import UserError

    with socket.socket() as s:  # a port nothing listens on: bound here, never listened on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            t0 = time.monotonic()
            with pytest.raises(UserError, match=f"--address {address}: no Ray cluster answers there") as e:
                raygrid.check_reachable(address)
            assert "\n" not in str(e.value) and "ray start --head" in str(e.value) and time.monotonic() - t0 < 30
    with pytest.raises(UserError, match="give auto, HOST:PORT or ray://HOST:PORT"):
        raygrid.check_reachable("127.0.0.1:http")
    assert raygrid.check_reachable("auto") is None


@pytest.mark.slow
def test_the_ray_backend_gives_the_local_paths_results(tmp_path):
    """The same tiny comparison with --tune (an SFT base, 2 methods x 2 rates x 2 tuning seeds of trials and the
    edge rates, 2 runs) on the local path and as Ray tasks on an embedded local Ray: the same files, every
    per-problem outcome, config, metric and table byte for byte (less the UNSTABLE columns). Slow: 11-14 minutes
    at load 9 on 2 cores, the two comparisons one after the other; each Ray task is a process that imports torch
    and prepares the task before it trains, and Ray takes 15-20 s to start."""
    pytest.importorskip("ray", reason='the ray extra: pip install ".[ray]"')
    common = ["--quick", "--methods", "sft,grpo", "--steps", "3", "--tune", "1e-4,1e-3", "--no-progress"]
    t0 = time.monotonic()
    local = run_cli(*common, "--workers", "1", "--out", tmp_path / "local")
    t_local = time.monotonic() - t0
    assert local.returncode == 0, local.stderr[-3000:]
    t0 = time.monotonic()
    ray = run_cli(*common, "--backend", "ray", "--workers", "2", "--out", tmp_path / "ray")
    t_ray = time.monotonic() - t0
    assert ray.returncode == 0, ray.stderr[-3000:] + ray.stdout[-3000:]
    print(f"local {t_local:.0f} s, ray {t_ray:.0f} s")
    assert "ray: a local Ray in" in ray.stdout and "ray: 8 tuning trial task(s) submitted" in ray.stdout
    assert "ray: tuning trial: 8/8 done, 0 running or queued, 0 failed" in ray.stdout  # 2 methods x 2 rates x 2 seeds
    assert "ray: run: 2/2 done, 0 running or queued, 0 failed" in ray.stdout
    assert results_differences(tmp_path / "local", tmp_path / "ray") == []


@pytest.mark.slow
def test_the_sweep_and_the_rescoring_on_ray_give_the_local_paths_results(tmp_path):
    """sweep_5_2.py --quick on one level and seed (a level's base and 4 cells as Ray tasks), then gcframe.evaluate
    --checkpoints --base on its level folder (a checkpoint of each cell and the base: 5 scorings as Ray tasks): the same files as the local path, byte for byte (less the
    UNSTABLE columns); scoring again on Ray starts nothing. Slow: about 5 minutes at load 4 on 2 cores."""
    pytest.importorskip("ray", reason='the ray extra: pip install ".[ray]"')
    sweep = ROOT / "experiments" / "sweep_5_2.py"
    common = ["--quick", "--levels", "harder", "--seeds", "0", "--no-progress"]
    score = ["-m", "gcframe.evaluate", "--problems", "16", "--checkpoints", "--base", "--no-progress"]
    for name, backend in (("local", []), ("ray", ["--backend", "ray"])):
        cells = run_cli(*common, *backend, "--out", tmp_path / name, script=sweep)
        assert cells.returncode == 0, cells.stderr[-3000:] + cells.stdout[-3000:]
        r = subprocess.run([sys.executable, *score[:2], str(tmp_path / name / "harder"), *score[2:], *backend],
                           capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=3600)
        assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    assert "ray: level base: 1/1 done, 0 running or queued, 0 failed" in cells.stdout
    assert "ray: cell: 4/4 done, 0 running or queued, 0 failed" in cells.stdout  # rft, online_rft, grpo, grpo_ps
    assert "ray: scoring: 5/5 done, 0 running or queued, 0 failed" in r.stdout  # 4 cells and the base
    assert len(list((tmp_path / "ray").glob("harder/*/seed0/rescored/step-000002-n16-k0.jsonl"))) == 4
    assert results_differences(tmp_path / "local", tmp_path / "ray") == []
    again = subprocess.run([sys.executable, *score[:2], str(tmp_path / "ray" / "harder"), *score[2:], "--backend",
                            "ray"], capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=3600)
    assert again.returncode == 0 and "re-scored 0 model(s) as Ray tasks" in again.stdout
    assert "ray: a local Ray" not in again.stdout


def test_reproduce_passes_the_backend_to_every_compare_command(monkeypatch, tmp_path):
    """reproduce.py --backend ray --address A: the comparison's first command and its resumption both train their
    cells on Ray (what runs is recorded here, nothing trains); without --backend ray, --address is refused."""
    from experiments import reproduce
    from gcframe import raygrid
    from gcframe.errors import UserError

    monkeypatch.setattr(raygrid, "import_ray", lambda: None)  # Ray need not be installed: nothing starts it here
    commands = []
    monkeypatch.setattr(reproduce, "run", lambda cmd: commands.append(cmd))
    args = reproduce.parse_args(["default", "--backend", "ray", "--address", "auto"])
    out = tmp_path / "default"
    reproduce.compare_cells(reproduce.RECIPES["default"], [0], out, False, reproduce.backend_args(args))
    out.mkdir()
    (out / "config.yaml").write_text("{}")  # started: the same command now resumes it
    reproduce.compare_cells(reproduce.RECIPES["default"], [0], out, False, reproduce.backend_args(args))
    assert [c[1] for c in commands] == ["--config", "--resume"]
    assert all(c[-4:] == ["--backend", "ray", "--address", "auto"] for c in commands)
    assert reproduce.backend_args(reproduce.parse_args(["default"])) == []
    with pytest.raises(UserError, match="--address joins a Ray cluster: give it with --backend ray"):
        reproduce.parse_args(["default", "--address", "auto"])


def test_the_slip_sweep_passes_the_backend_to_its_cells_and_its_scoring(monkeypatch, tmp_path):
    """slip_sweep.py --quick --backend ray --address A: each level's compare.py cells and its gcframe.evaluate
    command run on Ray (recorded here; nothing trains or scores)."""
    from experiments import reproduce, slip_sweep
    from gcframe import raygrid

    monkeypatch.setattr(raygrid, "import_ray", lambda: None)
    cells, scorings = [], []

    def compare_cells(recipe, seeds, out, quick, backend=()):
        cells.append(list(backend))
        reproduce.finished(out).parent.mkdir(parents=True)
        reproduce.finished(out).write_text("# report\n")  # finished: the level's scoring comes next

    monkeypatch.setattr(reproduce, "compare_cells", compare_cells)
    monkeypatch.setattr(reproduce, "rescored", lambda folder, flags: False)
    monkeypatch.setattr(slip_sweep.subprocess, "call", lambda cmd, cwd=None: scorings.append(cmd) or 0)
    assert slip_sweep.main(["--quick", "--out", str(tmp_path / "s"), "--backend", "ray", "--address", "auto"]) == 0
    ray = ["--backend", "ray", "--address", "auto"]
    assert cells and all(c == ray for c in cells)
    assert len(scorings) == len(cells) and all(c[1:3] == ["-m", "gcframe.evaluate"] and c[-4:] == ray
                                               for c in scorings)
