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
