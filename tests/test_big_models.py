"""The options for bigger models (model.lora_rank, model.gradient_checkpointing, model.bf16) on a tiny base."""
from __future__ import annotations

import copy

import pytest
import torch

from gcframe.config import from_dict
from gcframe.engine import token_logprobs
from gcframe.modeling import (
    AdapterDisabled,
    ModelConfig,
    build_char_tokenizer,
    build_tiny_llama,
    prepare_policy,
    save_model_and_tokenizer,
)
from gcframe.sampling import make_batch

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=32)
TRAIN = {"steps": 1, "prompts_per_step": 2, "group_size": 4, "lr": 0.01, "eval_size": 4, "eval_k": 0,
         "checkpoint_every": 0, "sample_every": 0, "max_new_tokens": 6}


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


@pytest.fixture(scope="module")
def base_dir(tok, tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    save_model_and_tokenizer(build_tiny_llama(tok, TINY, seed=0), tok, str(d))
    return d


def _batch(tok):
    return make_batch(tok, ["1+2=", "1+2=", "30+4="], ["3", "4", "34"], group_ids=[0, 0, 1])


def _trainer(base_dir, tmp_path, **model):
    from gcframe.tasks import build_task
    from gcframe.trainer import Trainer, make_accelerator
    from tests.dist_worker import FixedSampler

    cfg = from_dict({"task": {"digits": 1, "n_demos": 16, "n_heldout": 4}, "model": model, "train": TRAIN})
    trainer = Trainer(cfg, "grpo", tmp_path / "run", base_dir, build_task(cfg.task), make_accelerator(),
                      show_progress=False)
    trainer.ctx.generator = FixedSampler(trainer.tok)  # groups with reward variance: a non-zero update
    return trainer


def test_lora_trains_adapters_and_the_reference_is_the_base_without_a_copy(base_dir, tmp_path, tok):
    pytest.importorskip("peft")
    trainer = _trainer(base_dir, tmp_path, lora_rank=4)
    policy, ref = trainer.ctx.policy, trainer.ctx.reference
    assert isinstance(ref, AdapterDisabled) and len(ref.state_dict()) == 0  # no second copy of the weights
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if not p.requires_grad}
    adapters = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    assert adapters and all("lora_" in n for n in adapters)
    trainer.train_step(0)
    assert all(torch.equal(p, frozen[n]) for n, p in policy.named_parameters() if n in frozen)
    assert any(not torch.equal(p, adapters[n]) for n, p in policy.named_parameters() if n in adapters)
    batch = _batch(tok)
    base = build_tiny_llama(tok, TINY, seed=0).eval()
    with torch.no_grad():
        assert torch.allclose(token_logprobs(ref, batch), token_logprobs(base, batch), atol=1e-5)
        assert not torch.allclose(token_logprobs(policy.eval(), batch), token_logprobs(base, batch), atol=1e-5)
    assert all(p.requires_grad for n, p in policy.named_parameters() if n in adapters)  # the view froze nothing


def test_gradient_checkpointing_gives_the_same_gradient(tok):
    plain = build_tiny_llama(tok, TINY, seed=0).double().train()
    ckpt = prepare_policy(copy.deepcopy(plain), gradient_checkpointing=True).train()
    batch = make_batch(tok, ["1+2=", "30+4="], ["3", "34"])  # one row per prompt: the plain full forward for both
    grads = []
    for model in (plain, ckpt):
        token_logprobs(model, batch).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-12, atol=1e-14)


def test_bf16_autocast_trains_a_step(base_dir, tmp_path):
    trainer = _trainer(base_dir, tmp_path, bf16=True)
    with torch.autocast("cpu", torch.bfloat16):
        row, _ = trainer.train_step(0)
    assert row["grad_norm"] > 0 and torch.isfinite(torch.tensor(row["loss"]))
    assert next(trainer.ctx.policy.parameters()).dtype == torch.float32  # weights stay float32


def test_lora_without_peft_is_a_user_error(monkeypatch, tok):
    import sys

    from gcframe.errors import UserError

    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(UserError, match="pip install peft"):
        prepare_policy(build_tiny_llama(tok, TINY), lora_rank=4)
