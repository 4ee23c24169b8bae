"""docs/concepts/landscape.md, the table of methods and options beside TRL's and verl's: every name its gcframe column
marks present is a registered method with a textbook loss, a method's option or a train option, and every registered
method is in the table."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from gcframe.config import TrainConfig
from gcframe.verify import TEXTBOOK
from methods import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "concepts" / "landscape.md"
TOOLS = {"python -m gcframe.verify": ROOT / "gcframe" / "verify.py",
         "experiments/compare.py --tune": ROOT / "experiments" / "tune.py"}


def gcframe_cells() -> list[tuple[str, str]]:
    """(the row's first cell, its gcframe cell) for every table row of the page."""
    rows = []
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and cells[0] not in ("what", "---"):
            rows.append((cells[0], cells[3]))
    return rows


def builtin_methods() -> list[str]:
    """The methods this package registers (not a plugin's)."""
    return [n for n, cls in REGISTRY.items() if cls.__module__.startswith("methods.")]


def test_the_page_has_the_tables():
    assert len(gcframe_cells()) >= 30  # four tables; a parsing slip that finds no rows must fail here


@pytest.mark.parametrize("what,cell", [c for c in gcframe_cells() if c[1] != "—"])
def test_every_name_marked_present_exists(what, cell):
    names = re.findall(r"`([^`]+)`", cell)
    assert names, f"row '{what}': the gcframe cell {cell!r} names nothing in backticks"
    for name in names:
        if name in TOOLS:
            assert TOOLS[name].exists(), name
        elif name.startswith("train."):
            assert name[6:] in {f.name for f in dataclasses.fields(TrainConfig)}, f"row '{what}': no {name}"
        elif "." in name:
            method, option = name.split(".", 1)
            assert method in REGISTRY, f"row '{what}': no method {method}"
            fields = {f.name for f in dataclasses.fields(REGISTRY[method].Config)}
            assert option in fields, f"row '{what}': {method} has no option {option} (it has {sorted(fields)})"
        else:
            assert name in REGISTRY, f"row '{what}': '{name}' is not a registered method"
            assert name in TEXTBOOK, f"row '{what}': '{name}' has no textbook loss for gcframe.verify"


def test_every_registered_method_is_in_the_table():
    present = {n for _, cell in gcframe_cells() for n in re.findall(r"`([^`.\s]+)`", cell)}
    missing = [n for n in builtin_methods() if n not in present]
    assert not missing, f"registered but absent from docs/concepts/landscape.md: {missing}"
