"""Models and tokenizers, one module a part:

    tokenizers.py  the character-level tokenizer; chat tokenizers (end-of-turn token, pad token)
    tiny.py        the tiny Llama built from a ModelConfig (the default model, and CI's)
    loading.py     Hugging Face loading and saving: a local folder, a hub name, a .gguf file (converted once, cached)
    heads.py       a scalar-head model on a causal-LM backbone (PPO's critic, the reward model)
    adapters.py    how stage 2 computes: eval mode around sampling, gradient checkpointing, LoRA, π_ref as the
                   adapter-disabled base
"""
from gcframe.modeling.adapters import AdapterDisabled, count_parameters, evaluating, prepare_policy
from gcframe.modeling.heads import ScalarHeadModel, position_ids_from_mask
from gcframe.modeling.loading import (context_length, gguf_folder, load_model_and_tokenizer, load_tokenizer,
                                      resolve_model_path, save_model_and_tokenizer)
from gcframe.modeling.tiny import ModelConfig, build_tiny_llama
from gcframe.modeling.tokenizers import (DEFAULT_CHARS, SPECIAL_TOKENS, build_char_tokenizer, configure_tokenizer,
                                         end_of_turn_token, has_chat_template)

__all__ = ["AdapterDisabled", "DEFAULT_CHARS", "ModelConfig", "SPECIAL_TOKENS", "ScalarHeadModel",
           "build_char_tokenizer", "build_tiny_llama", "configure_tokenizer", "context_length", "count_parameters",
           "end_of_turn_token", "evaluating", "gguf_folder", "has_chat_template", "load_model_and_tokenizer",
           "load_tokenizer", "position_ids_from_mask", "prepare_policy", "resolve_model_path",
           "save_model_and_tokenizer"]
