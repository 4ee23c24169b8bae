"""Every data source on a chat model, a minute of one core: behind the `slow` marker (python -m pytest -m slow
tests/test_chat_sources.py), so the README's test command stays within CI's ten minutes; tests/test_chat.py runs the
chat path itself (sft, grpo, ppo's refusal, two processes) in every run."""
from __future__ import annotations

import json

import pytest

from tests.chat_models import build_chat_model
from tests.test_resume import run_cli


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory):
    return build_chat_model(tmp_path_factory.mktemp("chat") / "model")


SOURCES = ["sft_clean", "rft", "ppo", "grpo_ps", "dpo", "kto", "online_dpo", "remax", "dapo"]
"""One method per data source whose chat-format path differs (exact demonstrations written in chat, the SFT model's
pool, the critic, step rewards, offline pairs, unpaired examples, live pairs, the greedy rollout, dynamic sampling with
overlong shaping). sft and grpo run on the chat model in test_chat.py; the others collect as one of these and differ
only in GC, which is model-agnostic (gcframe.verify)."""


@pytest.mark.slow
def test_every_data_source_runs_on_a_chat_model(chat_dir, tmp_path):
    """compare.py --model on the tiny chat model: no stage 1, π_ref = the loaded model, every data source, the
    report."""
    out = tmp_path / "out"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({
        "task": {"n_demos": 32, "n_heldout": 16},
        "train": {"steps": 1, "prompts_per_step": 4, "group_size": 2, "eval_every": 0, "eval_size": 4, "eval_k": 2,
                  "sample_every": 1, "max_new_tokens": 4, "checkpoint_every": 0},
        "reward_model": {"steps": 1, "pairs": 4, "heldout_pairs": 2, "samples_per_prompt": 2},
    }))
    r = run_cli("--config", cfg, "--model", str(chat_dir), "--out", str(out), "--no-progress",
                "--methods", ",".join(SOURCES), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "pretrained, no stage 1; prompts: chat" in r.stdout
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary["method"]) == sorted(SOURCES)
    assert summary["base_accuracy"].notna().all()  # the step-0 evaluation of the loaded model
    sample = json.loads((out / "grpo_ps" / "seed0" / "samples.jsonl").read_text().splitlines()[0])
    assert sample["prompt"].startswith("<|im_start|>system")
    assert (out / "report" / "summary.md").is_file() and (out / "gc_view.json").is_file()
