"""The tiny Llama the project builds itself (the default model, and what CI runs)."""
from __future__ import annotations

from dataclasses import dataclass

from gcframe.errors import UserError


@dataclass
class ModelConfig:
    """Size of the tiny Llama built by `build_tiny_llama` (defaults: ~1.06M params with the char tokenizer)."""

    hidden_size: int = 128
    """Width H of the residual stream (and of the tied token embedding)."""
    num_layers: int = 4
    """Number of transformer blocks."""
    num_heads: int = 4
    """Attention heads per block (no grouped-query attention); must divide hidden_size."""
    intermediate_size: int = 512
    """Width of the SwiGLU MLP inside each block."""
    max_positions: int = 256
    """Longest sequence (prompt + completion) the model is configured for."""


def build_tiny_llama(tokenizer, cfg: ModelConfig, seed: int = 0):
    """A freshly initialised float32 LlamaForCausalLM sized by `cfg`, deterministic given `seed` (global RNG
    untouched)."""
    import torch  # here, not at the top: ModelConfig is read with every config, before torch is needed
    from transformers import LlamaConfig, LlamaForCausalLM

    if cfg.hidden_size % cfg.num_heads != 0:
        raise UserError(
            f"hidden_size {cfg.hidden_size} is not divisible by num_heads {cfg.num_heads}: pick sizes that divide"
        )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.float()

