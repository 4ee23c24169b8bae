"""Models and tokenizers, one module a part:

    tokenizers.py  the character-level tokenizer; chat tokenizers (end-of-turn token, pad token)
    tiny.py        the tiny Llama built from a ModelConfig (the default model, and CI's)
    loading.py     Hugging Face loading and saving: a local folder, a hub name, a .gguf file (converted once, cached)
    heads.py       a scalar-head model on a causal-LM backbone (PPO's critic, the reward model)
    adapters.py    how stage 2 computes: eval mode around sampling, gradient checkpointing, LoRA, π_ref as the
                   adapter-disabled base
"""
import importlib

_WHERE = {  # name -> the submodule that defines it; imported on first use (PEP 562), so that reading a config
    # (gcframe.config needs ModelConfig) does not import torch and transformers
    "AdapterDisabled": "adapters", "count_parameters": "adapters", "evaluating": "adapters",
    "prepare_policy": "adapters",
    "ScalarHeadModel": "heads", "position_ids_from_mask": "heads",
    "context_length": "loading", "gguf_folder": "loading", "load_model_and_tokenizer": "loading",
    "load_tokenizer": "loading", "resolve_model_path": "loading", "save_model_and_tokenizer": "loading",
    "ModelConfig": "tiny", "build_tiny_llama": "tiny",
    "DEFAULT_CHARS": "tokenizers", "SPECIAL_TOKENS": "tokenizers", "build_char_tokenizer": "tokenizers",
    "configure_tokenizer": "tokenizers", "end_of_turn_token": "tokenizers", "has_chat_template": "tokenizers",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'gcframe.modeling' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gcframe.modeling.{_WHERE[name]}"), name)
