"""gcframe.sharding without a process group: the option's validation, what is counted as a process's memory, and
the no-ops of a single process (the 2-process behaviour is in test_distributed.py and test_resume.py)."""
import pytest
import torch

from gcframe import sharding
from gcframe.config import from_dict
from gcframe.errors import UserError
from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=32)


@pytest.mark.parametrize("train,model,says", [
    ({"shard": "zero3"}, {}, "train.shard must be one of none, fsdp2, got 'zero3'"),
    ({"shard": "fsdp2"}, {"lora_rank": 4}, "train.shard: fsdp2 with model.lora_rank > 0 is untested"),
])
def test_bad_shard_options_are_one_line_errors(train, model, says):
    with pytest.raises(UserError, match=says):
        from_dict({"train": train, "model": model})


def test_sharding_needs_more_than_one_process():
    assert sharding.enabled("fsdp2", 2) and not sharding.enabled("fsdp2", 1) and not sharding.enabled("none", 8)


def test_decoder_layers_are_the_units():
    model = build_tiny_llama(build_char_tokenizer(), TINY)
    assert sharding.block_names(model) == {"LlamaDecoderLayer"}
    with pytest.raises(UserError, match="found no decoder layers in Linear"):
        sharding.shard(torch.nn.Linear(2, 2), torch.device("cpu"), 2)


def test_local_bytes_counts_params_grads_and_adamw_state():
    model = torch.nn.Linear(3, 2)  # 3·2 + 2 = 8 float32 parameters = 32 bytes
    opt = torch.optim.AdamW(model.parameters())
    assert sharding.local_bytes(model, opt) == {"params": 32, "grads": 0, "optimizer": 0}
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    # grads 32 bytes; AdamW: exp_avg + exp_avg_sq (32 bytes each) and a float32 `step` per tensor (2 x 4 bytes)
    assert sharding.local_bytes(model, opt) == {"params": 32, "grads": 32, "optimizer": 32 + 32 + 8}


def test_gathered_leaves_an_unsharded_model_alone():
    model = torch.nn.Linear(2, 2)
    with sharding.gathered(model, None):
        assert not sharding.is_gathered(model)  # nothing to gather: Hugging Face keeps its own synced_gpus default
    assert not hasattr(model, "_gcframe_gathered")
