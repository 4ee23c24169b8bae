"""gcframe.tracking.claims: a claim held by a live process blocks others, one left by a dead process is taken over."""
import os
import socket
import subprocess
import sys

from gcframe.tracking import claims


def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_live_claim_blocks_and_dead_claim_is_taken_over(tmp_path):
    path = tmp_path / "cell.claim"
    other = sleeper()
    try:
        path.write_text(f"{socket.gethostname()}:{other.pid}")  # as if the other process had claimed it
        assert not claims.acquire(path) and claims.holder(path) == f"{socket.gethostname()}:{other.pid}"
        claims.release(path)  # not ours: left alone
        assert path.exists()
    finally:
        other.kill()
        other.wait()
    assert claims.holder(path) is None
    assert claims.acquire(path)  # its owner is gone: ours now
    assert path.read_text().endswith(f":{os.getpid()}") and claims.acquire(path)  # re-entrant
    claims.release(path)
    assert not path.exists()
    assert claims.acquire(path) and claims.acquire(tmp_path / "new" / "x.claim")  # fresh claims are free
    claims.release(path)


def test_claim_from_another_host_counts_as_live(tmp_path):
    path = tmp_path / "base.claim"
    path.write_text("some-other-host:1")
    assert not claims.acquire(path) and claims.holder(path) == "some-other-host:1"
