"""The prose of the README and the result pages against the data it describes: every comparison a page states in its
own words (not rendered from results/) is checked here against the CSV behind it, so that the two cannot drift."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _csv(name: str) -> pd.DataFrame:
    path = RESULTS / name
    if not path.is_file():
        pytest.skip(f"{name} not made yet")
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _page(name: str) -> str:
    return (ROOT / "docs" / "results" / name).read_text()


def _arrow(cell: str) -> list[float]:
    """'0.410 → 0.439 (80) → 0.413' -> [0.41, 0.439, 0.413]: the numbers, steps in brackets dropped."""
    import re

    return [float(x) for x in re.sub(r"\([^)]*\)", "", cell).replace("–", " ").split("→")]


def test_overoptimisation_page():
    """'Without the anchor (β = 0) the proxy rises the most and the KL to π_ref grows the most; the gold accuracy of
    the policy's own samples peaks and then falls back, and its greedy held-out accuracy ends below the base. With
    β > 0 the policy stays near π_ref.'"""
    assert "Without the anchor (β = 0) the proxy rises the most" in _page("overoptimisation.md")
    t = _csv("overoptimisation/trajectory.csv").set_index("method")
    proxy = {m: _arrow(v)[-1] for m, v in t["proxy r_φ: start → end"].items()}
    kl = t["KL to π_ref at the end"].astype(float)
    assert max(proxy, key=proxy.get) == "grpo@beta0" and kl.idxmax() == "grpo@beta0"
    samples = _arrow(t.loc["grpo@beta0", t.columns[1]])  # its own samples: first → best → last
    assert samples[1] > samples[0] and samples[2] < samples[1]  # peaks, then falls back
    greedy = _arrow(t.loc["grpo@beta0", "gold greedy: start → best (step) → end"])
    assert greedy[2] < greedy[0]  # ends below the base
    assert all(kl[m] < kl["grpo@beta0"] for m in kl.index if m != "grpo@beta0")  # β > 0 stays nearer π_ref
    rm = _csv("overoptimisation/reward_model.csv")
    assert float(rm["held-out pairwise accuracy"].iloc[0]) >= 0.70
