"""The statistics page's section on the test's size at Holm's levels, against results/paired_size/table.csv."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "results" / "paired_size" / "table.csv"
PAGE = ROOT / "docs" / "concepts" / "statistics.md"


def _rate(test: str) -> str:
    return f"{test}: rate / (α/21)"


def test_the_kept_test_and_why_as_the_page_states_them():
    t = pd.read_csv(TABLE)
    text = " ".join(PAGE.read_text().split())
    own = t[t["generator"].str.startswith(("fitted", "stable"))]
    stress = t[t["generator"].str.startswith("stress")]
    # under every fitted and stable generator: the kept test's worst rate, Satterthwaite's
    assert f"within a factor {own[_rate('seed_df')].max():.2f}" in text
    assert f"$\\nu$ reaches {own[_rate('interval')].max():.2f}" in text
    at20 = own[own["seeds"] == 20]
    assert (f"the bootstrap-t reaches {at20[_rate('bootstrap_t')].max():.2f}, the sign-flip "
            f"{at20[_rate('sign_flip')].max():.2f} and the per-seed t {at20[_rate('seed_t')].max():.2f}") in text
    # the per-seed tests exceed twice the level somewhere at 20 seeds; the kept test nowhere
    assert (own[_rate("seed_df")] <= 2).all() and (at20[[_rate(x) for x in ("seed_t", "sign_flip")]].max() > 2).all()
    s10 = stress[stress["seeds"] == 10]
    assert (f"{s10[_rate('seed_df')].min():.1f}–{s10[_rate('seed_df')].max():.1f} at 10 seeds against "
            f"Satterthwaite's {s10[_rate('interval')].min():.1f}–{s10[_rate('interval')].max():.1f} "
            f"({stress[stress['seeds'] == 3][_rate('interval')].max():.0f} at 3 seeds)") in text
    d = t[t["generator"] == "fitted default"].set_index("seeds")
    assert (f"({d.loc[10, 'seed_df: power at 0.1']:.3f} against {d.loc[10, 'interval: power at 0.1']:.3f} at the "
            "default's components)") in text
    assert f"({d.loc[5, 'seed_df: power at 0.1']:.3f} against {d.loc[5, 'interval: power at 0.1']:.3f} at 5 seeds)" in text
