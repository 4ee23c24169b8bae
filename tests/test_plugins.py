"""A method kept outside the package (the complete `my_methods.py` of docs/guides/adding-a-method.md, run from a folder outside the
repository): --list-methods, compare.py, the report and gcframe.verify pick it up with no edit to gcframe; a wrong GC
in such a file is caught by its own textbook loss; an installed package's entry point registers its method too."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gcframe import forkserver
from tests.test_resume import COMPARE, ROOT, TINY_CONFIG


def readme_method_file() -> str:
    """The first Python block of the guide "Adding a method" (docs/guides/adding-a-method.md): the complete file."""
    text = (ROOT / "docs" / "guides" / "adding-a-method.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_readmes_short_method_is_the_guides_without_its_textbook_loss():
    """The README shows the method class only; it must stay the guide's class (same name, same coefficient)."""
    text = (ROOT / "README.md").read_text()
    short = re.search(r"```python\n(.*?)```", text[text.index("## Adding a method"):], re.S).group(1)
    full = readme_method_file()
    for line in ('@register("reinforce")', 'description = "REINFORCE with a batch-mean baseline (Williams 1992)"',
                 'return batch.data["advantages"].unsqueeze(1).expand_as(logp)'):
        assert line in short and line in full, line


def run(*args, cwd: Path, pythonpath: str = str(ROOT), timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
    return forkserver.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("user")  # outside the repository
    assert ROOT not in d.parents
    (d / "my_methods.py").write_text(readme_method_file())
    return d


def test_list_methods_shows_the_user_method(user_dir):
    r = run(COMPARE, "--methods-from", "my_methods.py", "--list-methods", cwd=user_dir)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert lines["reinforce"].strip() == "REINFORCE with a batch-mean baseline (Williams 1992)"
    assert list(lines)[:2] == ["sft", "rft"] and "grpo" in lines


def test_verify_proves_the_user_method(user_dir):
    r = run("-m", "gcframe.verify", "--methods-from", "my_methods.py", "--methods", "reinforce", cwd=user_dir,
            timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("reinforce"))
    assert float(row.split()[1]) <= 1e-10  # max rel diff of engine vs textbook gradient (verify.TOLERANCE)


def test_verify_catches_a_wrong_user_gc(user_dir):
    """The same file with GC = 2·(r − b): its own textbook loss no longer matches, verify exits 1."""
    wrong = readme_method_file().replace('@register("reinforce")', '@register("reinforce_x2")').replace(
        '@textbook("reinforce")', '@textbook("reinforce_x2")').replace(
        'return batch.data["advantages"].unsqueeze(1)', 'return 2 * batch.data["advantages"].unsqueeze(1)')
    assert wrong.count("reinforce_x2") == 2 and "return 2 *" in wrong
    (user_dir / "wrong_methods.py").write_text(wrong)
    r = run("-m", "gcframe.verify", "--methods-from", "wrong_methods.py", "--methods", "reinforce_x2",
            cwd=user_dir, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout


def test_compare_and_report_run_the_user_method(user_dir):
    cfg = user_dir / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY_CONFIG))
    out = user_dir / "out"
    r = run(COMPARE, "--config", cfg, "--methods-from", "my_methods.py", "--methods", "sft,reinforce",
            "--out", out, "--no-progress", cwd=user_dir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert list(pd.read_csv(out / "summary.csv")["method"]) == ["sft", "reinforce"]
    rows = [yaml.safe_load(line) for line in (out / "reinforce" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert any("adv_abs_mean" in row for row in rows)  # the method's own record() reached the log
    assert "reinforce" in (out / "report" / "summary.md").read_text()
    assert yaml.safe_load((out / "config.yaml").read_text())["methods_from"] == [str(user_dir / "my_methods.py")]


@pytest.mark.parametrize("content, words", [
    (None, "not found: give the path of your .py file"),
    ("def broken(:\n", "failed to import (SyntaxError"),
    ("import torch\n", "registers no method"),
])
def test_a_bad_method_file_is_one_line(tmp_path, content, words):
    if content is not None:
        (tmp_path / "m.py").write_text(content)
    r = run(COMPARE, "--methods-from", "m.py", "--list-methods", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr


def test_an_entry_point_registers_a_method(user_dir, tmp_path):
    """An installed package: a dist-info with a `gcframe.methods` entry point on the path is enough."""
    site = tmp_path / "site"
    (site / "my_pkg").mkdir(parents=True)
    (site / "my_pkg" / "__init__.py").write_text("")
    (site / "my_pkg" / "reinforce.py").write_text(readme_method_file())
    info = site / "my_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gcframe.methods]\nreinforce = my_pkg.reinforce\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    # a fresh interpreter, as a user's: an environment used once would start a fork server of its own (its imports
    # cost more than this command's)
    r = subprocess.run([sys.executable, str(COMPARE), "--list-methods"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert any(line.split()[0] == "reinforce" for line in r.stdout.splitlines())


def test_list_descriptions_are_whole_and_wrap_at_words(monkeypatch, capsys):
    """issue 62: --list-methods and reproduce.py --list cut descriptions: at a docstring's line break, and (a terminal
    cutting long lines) mid-word. A description is its docstring's whole first paragraph; on a terminal it wraps at
    spaces under its column."""
    import io
    import shutil
    import sys

    from gcframe.plugins import describe, listing
    from methods import REGISTRY

    assert describe(REGISTRY["sft_clean"]).endswith("do what RL does")  # its first paragraph spans two lines
    rows = [(name, describe(cls)) for name, cls in REGISTRY.items()]
    assert listing(rows).splitlines() == [f"{n:<{max(len(m) for m, _ in rows) + 2}}{d}" for n, d in rows]  # a pipe

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=None: shutil.os.terminal_size((72, 24)))
    text = listing(rows)
    assert max(map(len, text.splitlines())) <= 72
    width = max(len(n) for n, _ in rows) + 2
    words = [w for line in text.splitlines() for w in line[width:].split()]
    assert words == [w for _, d in rows for w in d.split()]  # every word whole, in order
