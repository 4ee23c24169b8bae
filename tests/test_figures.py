"""The report's figures can be read: the learning curves' and the reward-vs-KL legend sits under the panels, off the
data (inside a panel it covered the runs' end points); the reward-vs-KL trajectory is a few block means with arrows
that say which way the run went, not a line through every noisy step. Figures drawn from synthetic run folders."""
from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import yaml

from analysis import report
from analysis.runs import Runs


def _write_run(out, method: str, seed: int, kl: bool = True, steps: int = 20, sampled: bool = True):
    d = out / method / f"seed{seed}"
    d.mkdir(parents=True)
    rows = [{"step": 0, "eval_accuracy": 0.5, "gen_tokens": 0, "time_s": 0.0, "eval_kl_ref": 0.0}]
    for s in range(steps):
        row = {"step": s, "loss": 0.1, "reward_mean": 0.5 + 0.2 * (s % 2), "gen_tokens": 100 * (s + 1) * sampled,
               "time_s": 1.0 * (s + 1)}  # the reward zig-zags step to step, as a batch mean does
        if kl:
            row["kl_ref"] = 0.001 * s
        rows.append(row)
    rows.append({"step": steps, "eval_accuracy": 0.6 + 0.01 * seed, "gen_tokens": 100 * steps * sampled,
                 "time_s": 1.0 * steps, "eval_kl_ref": 0.02})
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed, "train": {"eval_k": 4}}))


@pytest.fixture
def runs(tmp_path):
    out = tmp_path / "out"
    for method, kl in (("grpo", True), ("ppo", True), ("sft", False)):
        for seed in (0, 1):
            _write_run(out, method, seed, kl=kl)
    pd.DataFrame({"method": ["grpo", "grpo", "ppo", "ppo", "sft", "sft"], "seed": [0, 1] * 3}).to_csv(
        out / "summary.csv", index=False)
    return Runs(out)


@pytest.fixture
def drawn(monkeypatch):
    """The figures a report function draws, kept open (report._save closes them) and laid out as when saved."""
    figs = []

    def keep(fig, path):
        fig.tight_layout()
        fig.canvas.draw()
        figs.append(fig)
        return path

    monkeypatch.setattr(report, "_save", keep)
    yield figs
    for f in figs:
        plt.close(f)


def test_a_trajectory_is_the_mean_of_blocks_of_steps_over_seeds():
    # steps 0..9, two seeds; reward 0, 1, 0, 1, ... (seed 1: +0.2), kl = step / 100 (seed 1: +0.02).
    # Mean over seeds per step: reward 0.1, 1.1, 0.1, ...; kl = step/100 + 0.01.
    # Five blocks of two steps: reward (0.1 + 1.1) / 2 = 0.6 in every block; kl (0.01 + 0.02) / 2 = 0.015, then
    # 0.035, 0.055, 0.075, 0.095 — the zig-zag is gone and the run goes one way.
    rows = pd.DataFrame([{"step": s, "seed": seed, "reward_mean": s % 2 + 0.2 * seed, "kl_ref": s / 100 + 0.02 * seed}
                         for s in range(10) for seed in (0, 1)])
    pts = report.trajectory(rows, blocks=5)
    np.testing.assert_allclose(pts[:, 1], [0.6] * 5)
    np.testing.assert_allclose(pts[:, 0], [0.015, 0.035, 0.055, 0.075, 0.095])
    assert len(report.trajectory(rows.head(6), blocks=5)) == 3  # three steps: three blocks of one step


def _overlaps(fig, artist, ax) -> bool:
    r = fig.canvas.get_renderer()
    a, b = artist.get_window_extent(r), ax.get_window_extent(r)
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("draw", [report.fig_learning_curves, report.fig_reward_kl])
def test_the_legend_sits_under_the_panels_not_on_the_data(runs, drawn, tmp_path, draw):
    draw(runs, tmp_path / "fig.png")
    (fig,) = drawn
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert {"grpo", "ppo", "sft", runs.base_label} <= set(labels) and len(labels) == len(set(labels))
    assert not any(_overlaps(fig, legend, ax) for ax in fig.axes)


def test_the_trajectory_panel_marks_the_direction_with_arrows(runs, drawn, tmp_path):
    report.fig_reward_kl(runs, tmp_path / "fig.png")
    ax = drawn[0].axes[0]
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    # grpo and ppo log kl_ref (sft does not): 5 block means each, 4 arrows between them
    assert len(arrows) == 2 * (report.TRAJECTORY_BLOCKS - 1)
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"grpo", "ppo"}
    assert len(lines["grpo"].get_xdata()) == report.TRAJECTORY_BLOCKS


def test_the_saved_figure_includes_the_legend_under_the_panels(runs, tmp_path):
    path = report.fig_learning_curves(runs, tmp_path / "curves.png")
    height = plt.imread(path).shape[0]
    assert height > 3.8 * report.DPI  # the figure is 3.8 in tall: the legend below adds to it, not cut off


def test_no_empty_tokens_panel_where_no_run_samples(tmp_path, drawn):
    """An SFT stage alone generates no tokens: the learning curves have two panels (steps, wall time), not an empty
    third, and the summary's notes say why; with one sampling method beside it, the tokens panel is back."""
    out = tmp_path / "out"
    _write_run(out, "sft", 0, kl=False, sampled=False)
    runs = Runs(out)
    report.fig_learning_curves(runs, tmp_path / "curves.png")
    assert [ax.get_xlabel() for ax in drawn[0].axes] == ["training step", "training wall time (s)"]
    assert runs.notes == ["learning_curves.png: no generated-tokens panel: no run samples tokens while training "
                          "(offline data)"]
    _write_run(out, "grpo", 0)
    report.fig_learning_curves(Runs(out), tmp_path / "curves.png")
    assert drawn[1].axes[1].get_xlabel() == "generated tokens (policy samples)" and len(drawn[1].axes) == 3
