"""Every entry point's --quick finishes from an empty cache (issue 44: `atlas.py --quick` trained a 300-step base
towards the default config's target accuracy 0.40, reached 0.128, and was refused after 8 minutes).

A quick stage 1 runs its steps and stops: no target accuracy it could miss, no patience, no evaluations. That is
checked on each entry point's quick configuration; the lab scripts whose --quick is not run elsewhere in the suite
(compare.py's is: tests/test_compare.py, from an empty cache; the sweep's: tests/test_sweep.py) run end to end here
from an empty GCFRAME_CACHE, with their --quick sizes shrunk further (a tiny override keeps the stage-1 rule under
test: only the step counts and draws shrink)."""
from __future__ import annotations

import pytest


def stops_at_its_steps(s) -> bool:
    """A stage-1 section that can only end at its step count: no stopping rule, so nothing to miss."""
    return s.target_accuracy == 0 and getattr(s, "patience", 0) == 0 and s.steps >= 1


def test_every_quick_stage1_runs_its_steps_and_stops():
    from experiments import atlas, atlas_critic, estimators, sweep_5_2
    from experiments.compare import build_config, parse_args

    compare_cfg, _ = build_config(parse_args(["--quick"]))
    atlas_cfg, _ = atlas.load_config(atlas.QUICK)
    critic_cfg, _ = atlas_critic.critic_config(atlas.QUICK, atlas.load_config)
    estimators_cfg, _ = estimators.load_config(estimators.QUICK)
    sweep = sweep_5_2.load_sweep(sweep_5_2.DEFAULT_CONFIG, quick=True)
    levels = [sweep_5_2.level_config(sweep, level)[0] for level in sweep["levels"]]
    for name, cfg in [("compare.py", compare_cfg), ("atlas.py", atlas_cfg), ("atlas_critic.py", critic_cfg),
                      ("estimators.py", estimators_cfg), *[(f"sweep_5_2.py {lv}", c) for lv, c in
                                                            zip(sweep["levels"], levels)]]:
        assert stops_at_its_steps(cfg.sft_base), f"{name} --quick: {cfg.sft_base}"
    assert (atlas_cfg.sft_base.steps, critic_cfg.sft_base.steps) == (300, 300)
    assert "stage1" not in atlas.FULL  # the full atlas keeps its config's stage 1, as its committed results had it


def test_base_stability_quick_study_sets_no_target():
    from experiments.base_stability import QUICK_STUDY, parse_args

    args = parse_args([*QUICK_STUDY, "--out", "unused"])
    assert "sft_base.target_accuracy=0.0" in args.set and args.sft_steps == 40


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("GCFRAME_CACHE", str(cache))
    return cache


def test_atlas_quick_finishes_from_an_empty_cache(tmp_path, empty_cache, monkeypatch):
    """atlas.py --quick with its sizes shrunk (a 40-step base, a 10-step critic base, 4 prompts, 2 draws, 1 GRPO
    step, 2 critic steps): its stage-1 rule is --quick's own, the config's target (0.40, out of their reach) replaced.
    Bases that weak are what the claim needs (stage 1 stops at its steps, whatever it reached; 28 s of one core where
    200 and 30 steps took 54 s)."""
    from experiments import atlas

    tiny = {**atlas.QUICK, "prompts": 4, "draws": 2, "rl_steps": 1, "eps": 1e-3, "aux_warmup": 1, "rft_pool": 8,
            "critic_steps": 2, "critic_every": 1, "critic_prompts": 2, "critic_group": 2, "sft_steps": 40,
            "critic_sft_steps": 10}
    monkeypatch.setattr(atlas, "QUICK", tiny)
    out = tmp_path / "atlas"
    assert atlas.main(["--quick", "--methods", "sft,grpo", "--out", str(out)]) == 0
    assert (out / "atlas.csv").is_file() and (out / "critic_distance.csv").is_file()
    assert len(list((empty_cache / "sft_base").iterdir())) >= 2  # both bases trained here, from nothing


def test_base_stability_quick_study_finishes_from_an_empty_cache(tmp_path, empty_cache, monkeypatch):
    """base_stability.py --study --quick on the default config (target accuracy 0.40), shrunk to 4 steps on 64
    demonstrations: without the quick study's own target (0) stage 1 would refuse the base that missed 0.40."""
    from experiments import base_stability

    tiny = replaced(replaced(replaced(base_stability.QUICK_STUDY, "--sft-steps", "4"), "--eval-every", "2"),
                    "--variants", "ref") + ["--set", "task.n_demos=64", "--set", "train.eval_size=8"]
    monkeypatch.setattr(base_stability, "QUICK_STUDY", tiny)
    assert base_stability.main(["--study", "--quick", "--out", str(tmp_path / "bs")]) == 0
    assert (tmp_path / "bs" / "curves.csv").is_file()


def test_the_quick_study_without_its_target_would_fail(tmp_path, empty_cache):
    """The same 4-step stage 1 with a target left in place is refused: what the quick study's override prevents (so
    the test above can fail)."""
    from experiments import base_stability
    from gcframe.errors import UserError

    args = ["--sft-steps", "4", "--eval-every", "2", "--variants", "ref", "--set", "task.n_demos=64",
            "--set", "train.eval_size=8", "--set", "sft_base.target_accuracy=0.9", "--set", "sft_base.eval_every=2",
            "--out", str(tmp_path / "bs")]
    with pytest.raises(UserError, match="below sft_base.target_accuracy 0.9"):
        base_stability.main.__wrapped__(args)  # (cli_entry's wrapper would exit 2)


def replaced(argv: list[str], flag: str, value: str) -> list[str]:
    """argv with the value after `flag` replaced."""
    i = argv.index(flag)
    return [*argv[:i + 1], value, *argv[i + 2:]]
