"""A test run never writes into the user's cache: tests/conftest.py gives the session a temporary GCFRAME_CACHE,
inherited by both xdist workers and by every command a test starts, and removes it at the end."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gcframe.tracking.log import cache_root

ROOT = Path(__file__).resolve().parents[1]
WHERE = "GCFRAME_TEST_ISOLATION_OUT"  # a file the nested run below names its cache in


def test_a_test_writes_into_the_sessions_cache():
    """What a base, a preference set or a converted model does: write under cache_root(), here and in a command."""
    root = cache_root()
    probe = root / "sft_base" / f"probe-{os.getpid()}"
    probe.mkdir(parents=True, exist_ok=True)
    try:
        child = subprocess.run([sys.executable, "-c", "from gcframe.tracking.log import cache_root; "
                                "print(cache_root())"], capture_output=True, text=True, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert child.stdout.strip() == str(root), child.stderr
        if os.environ.get(WHERE):
            Path(os.environ[WHERE]).write_text(str(root))
    finally:
        probe.rmdir()  # a kept cache (GCFRAME_TEST_CACHE) collects no probes


@pytest.mark.slow  # many processes: `pytest -m slow` (pyproject.toml)
def test_a_test_run_leaves_the_users_cache_untouched(tmp_path):
    """The README's test command (pyproject's addopts: two workers) on the test above, with a user cache set and a
    home folder of its own: both stay empty, and the session's temporary cache is gone afterwards."""
    user, home, where = tmp_path / "user-cache", tmp_path / "home", tmp_path / "where.txt"
    user.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GCFRAME_TEST_"))}
    env.update(GCFRAME_CACHE=str(user), HOME=str(home), OMP_NUM_THREADS="1", **{WHERE: str(where)})
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                        f"{Path(__file__).relative_to(ROOT)}::test_a_test_writes_into_the_sessions_cache"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    used = Path(where.read_text())
    assert used != user and user not in used.parents and home not in used.parents
    assert list(user.iterdir()) == [] and list(home.iterdir()) == []  # not even an empty sft_base/
    assert not used.exists()  # removed with the session
