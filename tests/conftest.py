"""Session settings. Under pytest-xdist (`-n 2`, the default of pyproject's addopts), each worker process gets one
intra-op thread: two workers on two cores with two threads each would oversubscribe them, and a tiny model's step
slows 10-100x when its OpenMP threads wait on each other. Subprocesses the tests start get OMP_NUM_THREADS=1
themselves (tests/test_resume.cli_env).

Tests never write into the user's cache: the session sets GCFRAME_CACHE to a temporary folder of its own before any
worker starts (the workers and every command a test starts inherit it), so every SFT base, preference set and
converted model the tests need is made in it, shared by both workers, and removed when the session ends; a test may
still point GCFRAME_CACHE elsewhere for itself. GCFRAME_TEST_CACHE=DIR keeps the session's cache in DIR instead, for
faster reruns while developing (tests/test_isolation.py checks the user's cache is untouched).

Tests leave nothing running: every process a test starts inherits GCFRAME_TEST_SESSION (this pytest process's own
mark), and when the session ends any process still carrying it (a torchrun worker outside its launcher's process
group, say) is killed and the session fails, naming it."""
from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

MARK = "GCFRAME_TEST_SESSION"
os.environ[MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # per pytest process: xdist workers set their own

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)

from gcframe import forkserver  # noqa: E402  (the tests' command-line runs fork from its servers)

forkserver.also_import("methods", "analysis.report", "analysis.findings", "experiments.compare")  # what they import


def pytest_configure(config):
    """In the controlling process (xdist's, or the only one with -n 0), before any worker starts: the session's
    cache. A worker (config.workerinput) inherits it through its environment."""
    if hasattr(config, "workerinput"):
        return
    own = os.environ.get("GCFRAME_TEST_CACHE")
    config._gcframe_temp_cache = None if own else tempfile.mkdtemp(prefix="gcframe-test-cache-")
    os.environ["GCFRAME_CACHE"] = own or config._gcframe_temp_cache


def pytest_collection_finish(session):
    """Every test module is imported: what exists now lives for the whole session (the libraries, the tests' own
    tables), so the cyclic collector leaves it out from here on (gc.freeze). A full collection (each Trainer runs one
    before it measures its own peak memory, gcframe.tracking.memory) then walks only what the tests made since: the
    verification of every method (tests/test_verify.py) takes half the time."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    """The controlling process, after every worker has finished: the temporary cache goes."""
    temp = getattr(config, "_gcframe_temp_cache", None)
    if temp:
        shutil.rmtree(temp, ignore_errors=True)


def _leftovers() -> list[tuple[int, str]]:
    needle = f"{MARK}={os.environ[MARK]}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if needle in (d / "environ").read_bytes().split(b"\0"):
                found.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]))
        except OSError:
            pass
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind():
    """Fails the session when a process a test started is still running at its end (and kills it)."""
    yield
    forkserver = sys.modules.get("gcframe.forkserver")
    if forkserver is not None:  # its servers carry this session's mark: stopped here, not found left running
        forkserver.stop_all()
    if not Path("/proc/self/environ").exists():
        return  # not Linux: nothing to look in
    deadline = time.monotonic() + 10  # processes that are exiting get a moment
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _leftovers()
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, "tests left processes running (killed now): " + "; ".join(f"{p}: {c}" for p, c in left)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> str:
    """An untrained 32-wide, 2-layer Llama and the char tokenizer, saved as a base folder (experiments.bench_common):
    what a test needs to run a method's steps, fast, without training a base."""
    from experiments.bench_common import Size, build_base

    path = tmp_path_factory.mktemp("tiny_base")
    build_base(Size("test", 32, 2, 4, 64, prompts=2, group=4, new_tokens=4), str(path))
    return str(path)
