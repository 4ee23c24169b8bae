"""Dynamic sampling (train.dynamic_sampling): groups without a reward difference are replaced by fresh prompts' groups.
A change of data source: the kept groups' GC is the plain method's, bit for bit."""
from __future__ import annotations

import dataclasses
import hashlib

import pytest
import torch

from experiments.bench_common import Size, make_trainer
from gcframe.engine import token_logprobs
from gcframe.errors import UserError
from gcframe.rewards import scoring
from methods import REGISTRY, Method, get_method, register
from gcframe import forkserver

SIZE = Size("test", 32, 2, 4, 64, prompts=4, group=4, new_tokens=4)


@pytest.fixture(scope="module")
def base(tiny_base):
    return tiny_base


def flat_prompt(prompt: str) -> bool:
    """Half the prompts (by a digest of their text) give every completion the same reward."""
    return hashlib.blake2b(prompt.encode(), digest_size=1).digest()[0] % 2 == 0


@pytest.fixture
def rewards(monkeypatch):
    """Rewards by rule, not by the untrained model's answers: a flat prompt's group is all 0 (or all 1 with
    `everything_flat`), another's alternates 1, 0, 1, 0 (reward difference, and a correct answer in every group)."""
    state = {"all_flat": False}

    def score(batch, task, tok, source="verifier", reward_model=None):
        r, seen = [], {}
        for t, g in zip(batch.texts, batch.group_ids.tolist()):
            i = seen[g] = seen.get(g, -1) + 1
            r.append(0.0 if state["all_flat"] or flat_prompt(t["prompt"]) else float(i % 2 == 0))
        batch.data["rewards"] = torch.tensor(r)
        batch.data["correct"] = torch.tensor(r)
        return batch

    monkeypatch.setattr("gcframe.context.score", score)
    return state


def trainer(base, tmp_path, method="grpo", **train):
    tr = make_trainer(method, SIZE, base, str(tmp_path / method), steps=2,
                      method_opts={"grpo": {"beta": 0.04}} if method.startswith("grpo") else None)
    tr.ctx.cfg = dataclasses.replace(tr.ctx.cfg, train=dataclasses.replace(tr.ctx.cfg.train, **train))
    return tr


def groups(batch):
    return [batch[torch.nonzero(batch.group_ids == g, as_tuple=True)[0]] for g in torch.unique(batch.group_ids)]


def test_a_step_keeps_b_groups_with_signal_and_counts_what_it_dropped(base, tmp_path, rewards):
    tr = trainer(base, tmp_path, dynamic_sampling=True)
    batch = tr.ctx.rollout(4, 4)
    stats = tr.ctx.pop_stats()
    kept = groups(batch)
    assert len(kept) == 4 and len(batch) == 16
    assert all(g.data["rewards"].std() > 0 for g in kept)  # every kept group carries a reward difference
    assert all(not flat_prompt(g.texts[0]["prompt"]) for g in kept)
    drawn = stats["ds_prompts_drawn"]
    assert drawn in (8, 12, 16) and stats["ds_capped"] == 0  # rounds of B = 4 prompts until 4 groups have signal
    # every drawn group is kept (4) or dropped: flat ones, and non-flat ones beyond the 4 kept (the last round's)
    assert stats["ds_groups_dropped"] == drawn - 4
    assert 0 < stats["ds_zero_var_drawn"] < 1 and stats["ds_dropped_tokens"] >= stats["ds_groups_dropped"] * 4


def test_at_the_cap_dropped_groups_fill_the_batch(base, tmp_path, rewards):
    rewards["all_flat"] = True
    tr = trainer(base, tmp_path, dynamic_sampling=True, max_prompts_per_step=8)
    batch = tr.ctx.rollout(4, 4)
    stats = tr.ctx.pop_stats()
    assert len(groups(batch)) == 4 and stats["ds_prompts_drawn"] == 8 and stats["ds_capped"] == 1
    assert stats["ds_groups_dropped"] == 4 and stats["ds_zero_var_drawn"] == 1.0  # 8 drawn, 4 fill the batch


def _gc(tr, batch):
    """The method's GC [N, T] on `batch` (float64), with log-probs of π_θ and of a π_ref moved away from it (ρ ≠ 1,
    so that β's term is not 0), and a π_old that puts some ratios outside the clip band."""
    with torch.no_grad():
        batch.data["ref_logp"] = token_logprobs(tr.ctx.reference, batch, 1.0)
        logp = token_logprobs(tr.policy, batch, 1.0)
        batch.data["old_logp"] = logp - 0.3 * torch.sin(7 * logp)  # ratio e^{0.3 sin(7 logp)}: in [0.74, 1.35]
        tr.method.prepare(batch)
    return tr.method.coefficients(batch, logp).detach()


@pytest.mark.parametrize("method", ["grpo", "grpo_ps", "rloo", "online_rft"])
def test_the_kept_groups_gc_is_the_plain_methods(base, tmp_path, rewards, method):
    """A plain rollout (flat and non-flat groups together) against the groups dynamic sampling would keep of it:
    each kept group's GC per token is the same, with β > 0 and the clip active."""
    tr = trainer(base, tmp_path, method, prompts_per_step=8)
    tr.policy.double()
    with torch.no_grad():
        for p in tr.ctx.reference.double().parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    plain = tr.method.collect(0)  # the method's own data source: ctx.rollout(8, 4) (+ step rewards for grpo_ps)
    gc_plain = _gc(tr, plain)
    stats = tr.method.pop_stats()
    keep = torch.cat([torch.nonzero(plain.group_ids == g, as_tuple=True)[0] for g in torch.unique(plain.group_ids)
                      if plain.data["rewards"][plain.group_ids == g].std() > 0])
    assert 0 < len(keep) < len(plain)
    sub = plain[keep]
    sub.data = {k: v for k, v in sub.data.items() if k not in ("ref_logp", "old_logp", "advantages")}
    gc_kept = _gc(tr, sub)
    if method.startswith("grpo"):  # π_ref ≠ π_θ: β's term moves GC on every token
        assert stats["kl_k3"] > 1e-4
    if method == "grpo":  # and the clip is active (grpo_ps's step verifier finds no step right in these samples)
        assert stats["clip_frac"] > 0
    assert gc_kept.dtype == torch.float64 and (gc_kept != 0).any()
    # float64 log-probs of the same rows in a smaller batch may differ in the last bits (other matmul shapes)
    torch.testing.assert_close(gc_kept, gc_plain[keep], rtol=1e-10, atol=1e-12)


def test_a_run_with_dynamic_sampling_logs_its_counts_and_its_generation(base, tmp_path, rewards):
    from gcframe.tracking.log import read_jsonl

    tr = trainer(base, tmp_path, dynamic_sampling=True)
    tr.tcfg = tr.ctx.cfg.train
    tr.fit()
    rows = [r for r in read_jsonl(tmp_path / "grpo" / "metrics.jsonl") if "loss" in r]
    assert len(rows) == 2 and all(r["zero_var_groups"] == 0.0 for r in rows)
    tokens = 0
    for r in rows:  # gen_tokens counts the kept batch and the dropped groups
        tokens += r["completion_len"] * r["n_seqs"] + r["ds_dropped_tokens"]
        assert r["gen_tokens"] == pytest.approx(tokens) and r["ds_prompts_drawn"] >= 8


def test_a_method_from_outside_the_package_gets_dynamic_sampling(base, tmp_path, rewards):
    class Reinforce(Method):
        """A method from outside the package: its data source is ctx.rollout(B, G); rollout_groups undeclared."""

        def collect(self, step):
            t = self.ctx.cfg.train
            return self.ctx.rollout(t.prompts_per_step, t.group_size)

        def coefficients(self, batch, logp):
            r = batch.data["rewards"]
            return (r - r.mean()).unsqueeze(1).expand_as(logp)

    register("reinforce_ds_test")(Reinforce)  # registered here, not at import: other test files see the registry
    try:
        tr = trainer(base, tmp_path, "reinforce_ds_test", dynamic_sampling=True)
        batch = tr.method.collect(0)
        assert all(g.data["rewards"].std() > 0 for g in groups(batch)) and len(groups(batch)) == 4
        with pytest.raises(UserError, match="needs groups of completions"):
            tr.ctx.rollout(4, 1)  # one sample per prompt: there are no groups to filter
    finally:
        REGISTRY.pop("reinforce_ds_test", None)


@pytest.mark.parametrize("method", ["ppo", "sft", "dpo", "rft"])
def test_methods_without_groups_are_refused_naming_the_option(method):
    from gcframe.config import from_dict

    cfg = from_dict({"train": {"dynamic_sampling": True, "group_size": 4}})
    with pytest.raises(UserError, match=rf"train.dynamic_sampling .* '{method}' samples no groups") as e:
        get_method(method).check_run(cfg, method)
    assert all(name in str(e.value) for name in ("grpo", "grpo_ps", "rloo", "online_rft"))
    assert f"(methods: {{{method}: {{train: {{dynamic_sampling: false}}}}}})" in str(e.value)
    get_method("grpo").check_run(cfg, "grpo")  # a group method runs


def test_a_cap_below_b_is_refused():
    from gcframe.config import from_dict

    with pytest.raises(UserError, match=r"max_prompts_per_step \(2\) is below train.prompts_per_step \(4\)"):
        from_dict({"train": {"dynamic_sampling": True, "prompts_per_step": 4, "max_prompts_per_step": 2}})


def test_scoring_is_untouched_by_the_fixture():
    assert scoring.score.__module__ == "gcframe.rewards.scoring"


def test_compare_refuses_it_before_anything_runs(tmp_path):
    import os
    import sys
    from pathlib import Path

    cfg = tmp_path / "ds.yaml"
    cfg.write_text("train: {dynamic_sampling: true}\n")
    out = tmp_path / "out"
    res = forkserver.run([sys.executable, "experiments/compare.py", "--config", str(cfg), "--methods", "grpo,ppo",
                          "--quick", "--out", str(out)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 2 and res.stderr.startswith("error: train.dynamic_sampling") and "'ppo'" in res.stderr
    assert res.stderr.count("\n") == 1 and not out.exists()
