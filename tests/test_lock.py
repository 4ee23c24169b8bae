"""The lock (requirements/lock.txt) and pyproject.toml agree: every dependency of the package and of its locked extras
is pinned, at a version that pyproject's range admits. The README's commands and .ci/run install with the lock as a
constraint, so a fresh machine gets the environment the committed results were made in (results/*/env.json)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"


def pins(text: str) -> dict[str, Version]:
    """{normalised name: version} of the lock's `name==version` lines."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
        if m:
            out[canonicalize_name(m.group(1))] = Version(m.group(2))
    return out


def locked_extras(text: str) -> set[str]:
    """The extras the lock was compiled with, read from pip-compile's header command."""
    return set(re.findall(r"--extra[= ]([\w-]+)", text))


def disagreements(project: dict, lock_text: str) -> list[str]:
    locked, extras = pins(lock_text), locked_extras(lock_text)
    reqs = list(project["dependencies"])
    for extra in sorted(extras):
        if extra not in project.get("optional-dependencies", {}):
            return [f"the lock was compiled with extra '{extra}', which pyproject does not define"]
        reqs += project["optional-dependencies"][extra]
    problems = []
    for r in map(Requirement, reqs):
        name = canonicalize_name(r.name)
        if name not in locked:
            problems.append(f"{r.name} is required by pyproject but not pinned in the lock")
        elif not r.specifier.contains(locked[name], prereleases=True):
            problems.append(f"{r.name}: the lock pins {locked[name]}, outside pyproject's '{r.specifier}'")
    return problems


def test_the_lock_pins_every_dependency_inside_pyprojects_ranges():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = LOCK.read_text()
    assert {"test"} <= locked_extras(lock), "the lock must cover the test extra that CI installs"
    assert pins(lock)["torch"].public == "2.13.0", "the lock's torch must be the CPU build the README installs"
    assert disagreements(project, lock) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda p: p["dependencies"].append("einops>=0.8"), "einops is required by pyproject but not pinned"),
    (lambda p: p["dependencies"].__setitem__(0, "torch>=2.14"), "torch: the lock pins 2.13.0+cpu, outside"),
])
def test_the_check_fails_when_pyproject_moves_away_from_the_lock(edit, expected):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    edit(project)
    assert any(expected in p for p in disagreements(project, LOCK.read_text()))
