"""A method's option outside its domain, or a run whose data the method cannot get, through the CLI
(`experiments/compare.py` in a subprocess, as tests/test_bad_input.py): exit status 2, one line on stderr naming the
option, no traceback, nothing written, before anything trains (no SFT base is built: the refusals come from the
method's Config.validate and check_run, which compare.py runs before stage 1).

One bad option per method of the GRPO family, the REINFORCE++/ReMax/GPG family and the preference family, and the
issue's examples: ε_high < ε_low (DAPO), a negative margin γ (SimPO), KTO's desirable weight ≤ 0, a SAPO temperature
≤ 0, KTO without a labelled desirable and undesirable example per step, ReMax with sampling that cannot differ from
its greedy rollout (train.temperature 0). The issue's examples run as the user runs them (CLI); the other cases go
through the same checks in-process (`from_dict`, then compare_config.method_names: each method's Config and
check_run), which is what compare.py runs before it writes anything.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from gcframe.errors import UserError
from tests.test_bad_input import assert_one_line_refusal
from tests.test_resume import TINY_CONFIG, run_cli

# case -> (method, its options, train overrides, words the error line must hold)
CASES = {
    "dapo eps_high < eps_low": ("dapo", {"clip_eps": 0.2, "clip_eps_high": 0.1}, {},
                                ["methods.dapo.clip_eps_high", "0.1", "below clip_eps", "0.2"]),
    "dapo overlong cache": ("dapo", {"overlong_cache": 9}, {"max_new_tokens": 4},
                            ["methods.dapo.overlong_cache (9) exceeds train.max_new_tokens (4)"]),
    "dr_grpo negative beta": ("dr_grpo", {"beta": -0.1}, {}, ["methods.dr_grpo: beta must be >= 0", "-0.1"]),
    "gspo eps 0": ("gspo", {"clip_eps": 0.0}, {}, ["methods.gspo: clip_eps", "must be > 0"]),
    "cispo negative eps_high": ("cispo", {"clip_eps_high": -1.0}, {}, ["methods.cispo: ", "clip_eps_high must be > 0"]),
    "sapo tau 0": ("sapo", {"tau_pos": 0.0}, {}, ["methods.sapo.tau_pos must be > 0"]),
    "reinforce_pp negative beta": ("reinforce_pp", {"beta": -0.01}, {},
                                   ["methods.reinforce_pp: beta and kl_loss_coef must be >= 0"]),
    "reinforce_pp_baseline ungrouped": ("reinforce_pp_baseline", {"grouped": False}, {},
                                        ["methods.reinforce_pp_baseline: group_baseline", "grouped: true"]),
    "remax negative beta": ("remax", {"beta": -1.0}, {}, ["methods.remax: beta must be >= 0"]),
    "remax greedy sampling": ("remax", {}, {"temperature": 0.0},   # every method's check: log-probs at T = 0
                              ["train.temperature must be positive, got 0.0"]),
    "gpg one completion per prompt": ("gpg", {}, {"group_size": 1},
                                      ["method 'gpg'", "train.group_size must be >= 2", "got 1"]),
    "ipo tau 0": ("ipo", {"tau": 0.0}, {}, ["methods.ipo.tau must be > 0"]),
    "simpo negative gamma": ("simpo", {"gamma": -0.5}, {}, ["methods.simpo.gamma must be >= 0", "-0.5"]),
    "orpo negative lambda": ("orpo", {"lam": -1.0}, {}, ["methods.orpo.lam must be > 0"]),
    "kto desirable weight 0": ("kto", {"desirable_weight": 0.0}, {}, ["methods.kto.desirable_weight must be > 0"]),
    "kto without both labels": ("kto", {}, {"prompts_per_step": 1, "group_size": 2},
                                ["method 'kto'", "desirable and an undesirable", "must be >= 4", "1 · 2"]),
    "online_dpo group of 1": ("online_dpo", {"group_size": 1}, {},
                              ["methods.online_dpo.group_size must be an integer >= 2"]),
    "dpo one sequence a step": ("dpo", {}, {"prompts_per_step": 1, "group_size": 1},
                                ["method 'dpo' trains on pairs", "must be >= 2"]),
}


CLI = ["dapo eps_high < eps_low", "kto without both labels", "remax greedy sampling"]
"""An option's domain, a method's data and a train option, through compare.py in a subprocess."""


def _raw(name: str) -> dict:
    method, options, train, _ = CASES[name]
    return {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], **train}, "methods": {method: options}}


def _run_case(tmp: Path, name: str):
    method, options, train, _ = CASES[name]
    case = tmp / name.replace(" ", "_")
    case.mkdir()
    cfg_file = case / "config.yaml"
    cfg_file.write_text(yaml.safe_dump(_raw(name)))
    return run_cli("--config", cfg_file, "--no-progress", "--methods", method, "--out", case / "out", timeout=300)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_options")
    cache = tmp / "cache"  # an SFT base would be built here: a refusal before stage 1 leaves it empty
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GCFRAME_CACHE", str(cache))  # run_cli's environment is os.environ's
        with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
            done = dict(zip(CLI, pool.map(lambda n: _run_case(tmp, n), CLI)))
    return tmp, cache, done


@pytest.mark.parametrize("name", [n for n in CASES if n not in CLI])
def test_a_bad_method_option_is_refused_by_the_checks_compare_runs_first(name):
    from types import SimpleNamespace

    from experiments.compare_config import method_names
    from gcframe.config import from_dict

    with pytest.raises(UserError) as e:
        method_names(SimpleNamespace(methods=CASES[name][0]), from_dict(_raw(name)))
    assert "\n" not in str(e.value)
    for words in CASES[name][3]:
        assert words in str(e.value), str(e.value)


@pytest.mark.parametrize("name", CLI)
def test_a_bad_method_option_is_refused_in_one_line_before_anything_trains(results, name):
    tmp, cache, done = results
    r = done[name]
    assert_one_line_refusal(r, CASES[name][3])
    assert not (tmp / name.replace(" ", "_") / "out").exists()  # nothing written
    assert r.stdout == "", r.stdout
    assert not any(cache.rglob("*.safetensors"))  # no SFT base was trained


def test_every_new_method_has_a_case():
    from methods import REGISTRY

    new = {"dr_grpo", "dapo", "gspo", "cispo", "sapo", "reinforce_pp", "reinforce_pp_baseline", "remax", "gpg", "ipo",
           "simpo", "kto", "orpo", "online_dpo"}
    assert new <= set(REGISTRY)
    assert new <= {method for method, *_ in CASES.values()}


def test_only_dapo_refuses_a_band_wider_below():
    """DAPO's clip-higher is ε_high >= ε_low by definition (Yu et al. 2025 §3.1); GRPO's asymmetric band may be wider
    on either side (gcframe.verify runs grpo_ps with ε_low 0.05 > ε_high 0.02), and GSPO/CISPO keep their own."""
    from methods import REGISTRY

    for name in ("grpo", "grpo_ps", "dr_grpo", "gspo", "cispo"):
        cfg = REGISTRY[name].Config.from_dict({"clip_eps": 0.05, "clip_eps_high": 0.02}, name)
        assert (cfg.clip_eps, cfg.clip_eps_high) == (0.05, 0.02), name
    REGISTRY["dapo"].Config.from_dict({"clip_eps": 0.2, "clip_eps_high": 0.2}, "dapo")  # equal edges: symmetric
    REGISTRY["dapo"].Config.from_dict({"clip_eps": 0.2, "clip_eps_high": None}, "dapo")  # null: symmetric
    with pytest.raises(UserError, match=r"methods\.dapo\.clip_eps_high \(ε_high, 0\.19\) is below clip_eps"):
        REGISTRY["dapo"].Config.from_dict({"clip_eps": 0.2, "clip_eps_high": 0.19}, "dapo")


def test_a_refusal_names_its_section_once():
    """A validate() that cannot know its label gets `methods.<label>:` in front; one that names it is left as is."""
    from methods import REGISTRY

    with pytest.raises(UserError) as e:
        REGISTRY["gspo"].Config.from_dict({"clip_eps": -1.0}, "gspo@narrow")
    assert str(e.value).startswith("methods.gspo@narrow: clip_eps and clip_eps_high must be > 0, got clip_eps -1.0: ")
    assert "None" not in str(e.value)  # issue 62: it read "got 0.0, None"
    with pytest.raises(UserError) as e:
        REGISTRY["sapo"].Config.from_dict({"tau_pos": -1.0}, "sapo@cold")
    assert str(e.value).startswith("methods.sapo.tau_pos must be > 0")
