"""gcframe/forkserver.py: a command forked from the server that has the libraries imported gives what a fresh
interpreter gives (arguments, working folder, environment, sys.path[0], both streams, the exit status of a clean exit,
of sys.exit(code) and of an uncaught exception with its traceback), so the tests that use it check the commands a
user runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gcframe import forkserver

SCRIPT = """
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0], "mine": os.environ.get("MINE"),
                  "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
how = sys.argv[1]
if how == "exit3":
    sys.exit(3)
if how == "message":
    sys.exit("error: a one-line message")
if how == "raise":
    raise ValueError("boom")
"""


@pytest.mark.parametrize("how", ["clean", "exit3", "message", "raise"])
def test_a_forked_run_is_a_fresh_run(tmp_path, how):
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    work = tmp_path / "work"
    work.mkdir()
    cmd = [sys.executable, str(script), how, "a b"]
    env = {**os.environ, "MINE": f"value-{how}"}  # a variable no library reads at import: the same server
    fresh = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env, timeout=300)
    forked = forkserver.run(cmd, capture_output=True, text=True, cwd=work, env=env, timeout=300)
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)
    # a traceback names the same lines; the fresh interpreter's frames and the server's runpy frames differ above them
    assert forked.stderr.splitlines()[-2:] == fresh.stderr.splitlines()[-2:]
    assert {"clean": 0, "exit3": 3, "message": 1, "raise": 1}[how] == fresh.returncode
    assert f'"mine": "value-{how}"' in fresh.stdout and f'"path0": "{tmp_path}"' in fresh.stdout


def test_a_module_run_is_a_fresh_module_run(tmp_path):
    """`python -m MODULE`, with the module already imported in the server: run afresh as __main__, no warning."""
    cmd = [sys.executable, "-m", "gcframe.verify", "no_such_method"]
    root = Path(__file__).resolve().parents[1]
    fresh = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=300)
    forked = forkserver.run(cmd, capture_output=True, text=True, cwd=root, timeout=300)
    assert fresh.returncode == 2 and (forked.returncode, forked.stdout, forked.stderr) == \
        (fresh.returncode, fresh.stdout, fresh.stderr)
