"""`--help` names the command a user types (`python -m gcframe.evaluate`, `python -m analysis.report`), not the file
argparse would take from sys.argv[0] (`__main__.py`, `report.py`)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module", ["gcframe.evaluate", "gcframe.verify", "analysis.report", "analysis.findings",
                                    "analysis.matched", "analysis.results", "analysis.status", "analysis.sweep",
                                    "analysis.why"])
def test_help_names_the_module_command(module):
    r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: python -m {module} "), r.stdout[:200]


@pytest.mark.parametrize("command", [["experiments/compare.py"], ["experiments/reproduce.py"],
                                     ["experiments/sweep_5_2.py"], ["-m", "gcframe.evaluate"]])
def test_help_gives_the_description_once(command):
    """issue 62: --help printed the description twice (argparse's description and the module docstring after it)."""
    import ast

    source = ROOT / (command[0] if len(command) == 1 else "gcframe/evaluate/rescore.py")
    first = ast.get_docstring(ast.parse(source.read_text())).splitlines()[0]
    r = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(first) == 1, r.stdout[:600]
