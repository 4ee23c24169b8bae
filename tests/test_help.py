"""`--help` names the command a user types (`python -m gcframe.evaluate`, `python -m analysis.report`), not the file
argparse would take from sys.argv[0] (`__main__.py`, `report.py`)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["gcframe.evaluate", "gcframe.verify", "analysis.report", "analysis.findings", "analysis.matched",
           "analysis.results", "analysis.status", "analysis.sweep", "analysis.why"]

# Each module run as `python -m MODULE --help` runs it (runpy.run_module with alter_sys: sys.argv[0] is the module's
# file, __name__ "__main__", as -m sets them), all in one interpreter: the libraries are imported once, not nine times.
HELP_ALL = """
import contextlib, io, json, runpy, sys
out = {}
for module in sys.argv[1:]:
    buf, err = io.StringIO(), io.StringIO()
    sys.argv = ["-m", "--help"]
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code
    out[module] = {"code": code, "stdout": buf.getvalue(), "stderr": err.getvalue()}
print(json.dumps(out))
"""


def _printed_json(code: str, args: list[str]) -> dict:
    """`python -c CODE ARGS...` in a fresh interpreter (what a command imports is part of these tests) -> the JSON
    of its last line."""
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=3600)  # a safety net only
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def helps() -> dict:
    return _printed_json(HELP_ALL, MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_help_names_the_module_command(helps, module):
    r = helps[module]
    assert r["code"] == 0, r["stderr"]
    assert r["stdout"].startswith(f"usage: python -m {module} "), r["stdout"][:200]


SCRIPTS = ["experiments/compare.py", "experiments/reproduce.py", "experiments/sweep_5_2.py"]
HELP_SCRIPTS = """
import contextlib, io, json, runpy, sys
out = {}
for script in sys.argv[1:]:
    buf = io.StringIO()
    sys.argv = [script, "--help"]
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit:
            pass
    out[script] = buf.getvalue()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def script_helps() -> dict:
    return _printed_json(HELP_SCRIPTS, SCRIPTS)


@pytest.mark.parametrize("source", [*SCRIPTS, "gcframe/evaluate/rescore.py"])
def test_help_gives_the_description_once(helps, script_helps, source):
    """issue 62: --help printed the description twice (argparse's description, then the whole module docstring)."""
    import ast

    first = ast.get_docstring(ast.parse((ROOT / source).read_text())).splitlines()[0]
    text = script_helps[source] if source in script_helps else helps["gcframe.evaluate"]["stdout"]
    assert text.count(first) == 1, text[:600]
