"""compare.py --backend ray on a Ray cluster of two nodes on this machine (a head and a second node joined with
`ray start --address`, one CPU each): a unit whose process is killed mid-run is retried and resumes from its run's
last checkpoint; a driver killed mid-grid is resumed by the same command, which redoes nothing that finished; both
end with the uninterrupted local path's results. Slow (about 6 minutes at load 4 on 2 cores)."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.test_ray_backend import results_differences
from tests.test_resume import COMPARE, ROOT, TINY_CONFIG, cli_env, run_cli

pytestmark = pytest.mark.slow
RUN = {"steps": 1200, "checkpoint_every": 100, "eval_every": 300, "sample_every": 100}  # ~25 s a run, idle


def _env() -> dict:
    return {**cli_env(), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}  # a cluster on localhost


@pytest.fixture(scope="module")
def cluster():
    """The address of a head node and a second node, each a `ray start --block` process of this test's own (stopped
    at the end: `ray stop` would stop every Ray on the machine)."""
    pytest.importorskip("ray", reason='the ray extra: pip install ".[ray]"')
    ray_cli = str(Path(sys.executable).with_name("ray"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 characters
    address = f"127.0.0.1:{port}"
    nodes = [subprocess.Popen([ray_cli, "start", "--head", "--port", str(port), "--num-cpus", "1", "--block",
                               "--include-dashboard", "false", "--temp-dir", temp], env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        _wait_for_nodes(address, 1)
        nodes.append(subprocess.Popen([ray_cli, "start", "--address", address, "--num-cpus", "1", "--block"],
                                      env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        _wait_for_nodes(address, 2)
        yield address
    finally:
        for p in reversed(nodes):
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _wait_for_nodes(address: str, n: int) -> None:
    code = f"import ray; ray.init(address='{address}', log_to_driver=False); print(len(ray.nodes()))"
    for _ in range(60):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
        if r.returncode == 0 and int(r.stdout.split()[-1]) >= n:
            return
        time.sleep(2)
    raise AssertionError(f"the Ray cluster at {address} did not reach {n} node(s): {r.stderr[-2000:]}")


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The tiny config with 1,200-step runs (a checkpoint every 100), and its uninterrupted local results."""
    d = tmp_path_factory.mktemp("grid")
    cfg = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], **RUN}}
    (d / "long.yaml").write_text(yaml.safe_dump(cfg))
    local = run_cli("--config", d / "long.yaml", "--methods", "sft,grpo", "--seeds", "0", "--workers", "2",
                    "--no-progress", "--out", d / "local")
    assert local.returncode == 0, local.stderr[-3000:]
    (d / "local" / "worker2.log").unlink(missing_ok=True)  # the local path's second process's log
    return d


def _driver(grid: Path, out: Path, address: str, *extra: str) -> subprocess.Popen:
    args = ["--resume", out] if extra == ("--resume",) else ["--config", grid / "long.yaml", "--methods", "sft,grpo",
                                                           "--seeds", "0", "--out", out]
    return subprocess.Popen([sys.executable, str(COMPARE), *map(str, args), "--no-progress", "--backend", "ray",
                             "--address", address], env=_env(), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_for(path_glob: tuple[Path, str], proc: subprocess.Popen, limit: float = 1800) -> None:
    root, pattern = path_glob
    t0 = time.monotonic()
    while not list(root.glob(pattern)):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() - t0 < limit, f"no {root}/{pattern} after {limit} s"
        time.sleep(0.2)


def _unit_pids(out: Path, pattern: str = "*") -> list[int]:
    """The live unit processes of OUT's logs (each attempt writes its pid there: gcframe.raygrid forks units from a
    server, so their command lines are the server's)."""
    pids = [int(m) for log in (out / "ray-logs").glob(f"{pattern}.log")
            for m in re.findall(r"^\[pid (\d+)\]$", log.read_text(errors="replace"), re.M)]
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except ProcessLookupError:
            pass
    return alive


@pytest.fixture
def stopped():
    """The drivers a test starts, killed if it fails midway (their units then stop with them)."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_killed_unit_is_retried_and_resumes_from_its_checkpoint(cluster, grid, stopped):
    out = grid / "killed_unit"
    driver = _driver(grid, out, cluster)
    stopped.append(driver)
    _wait_for((out, "grpo/seed0/checkpoints/step-000[2-9]*"), driver)  # grpo is past step 200
    pids = _unit_pids(out, "run_grpo_0")
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    log, _ = driver.communicate(timeout=3600)
    assert driver.returncode == 0, log[-3000:]
    assert "ray: run: 2/2 done, 0 running or queued, 0 failed" in log and "2 node(s)" in log
    attempts = (out / "ray-logs" / "run_grpo_0.log").read_text()
    assert attempts.count("--unit run:grpo:0") == 2  # the killed attempt and its retry
    assert "grpo seed 0: resumed from its checkpoint of step" in attempts.split("--unit run:grpo:0")[-1]
    assert results_differences(grid / "local", out) == []


def test_a_killed_driver_is_resumed_by_the_same_command_and_redoes_nothing_finished(cluster, grid, stopped):
    out = grid / "killed_driver"
    driver = _driver(grid, out, cluster)
    stopped.append(driver)
    _wait_for((out, "*/seed0/final"), driver)  # one run finished
    _wait_for((out, "*/seed0/checkpoints/step-000[2-9]*"), driver)  # and the other past step 200
    finished = [p.parent for p in out.glob("*/seed0/final")]
    kept = {p: (p / "metrics.jsonl").read_bytes() for p in finished}
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    for _ in range(120):  # Ray ends a dead driver's tasks: their units stop (SIGTERM), keeping their checkpoints
        if not _unit_pids(out, "run_*"):
            break
        time.sleep(1)
    again = _driver(grid, out, cluster, "--resume")
    stopped.append(again)
    log, _ = again.communicate(timeout=3600)
    assert again.returncode == 0, log[-3000:]
    assert f"ray: {2 - len(finished)} run task(s) submitted" in log
    assert all((p / "metrics.jsonl").read_bytes() == kept[p] for p in finished)  # not run again
    assert results_differences(grid / "local", out) == []
