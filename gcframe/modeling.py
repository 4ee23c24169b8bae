"""Models and tokenizers: a char-level tokenizer, a tiny Llama, HF loading/saving, and a scalar-head
(value / reward) model built on a causal-LM backbone.

Shapes: N = batch size, L = sequence length, H = hidden size, V = vocab size.
"""
from __future__ import annotations

import contextlib
import copy
import os
import re
import string
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers.utils import logging as hf_logging
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from gcframe.errors import UserError

hf_logging.disable_progress_bar()  # no "Loading weights" bars between our own progress bars

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]  # ids 0, 1, 2, 3
DEFAULT_CHARS = "".join(c for c in string.printable if c not in "\t\r\x0b\x0c")  # 96 chars, incl. "\n" and " "
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")  # "name" or "org/name"


# -----------------------------------------------------------------------------
# tokenizer


def build_char_tokenizer(chars: str | None = None) -> PreTrainedTokenizerFast:
    """Character-level tokenizer: <pad>=0, <bos>=1, <eos>=2, <unk>=3, then one id per character.

    Encoding adds no special tokens, `decode` returns the exact text (no inserted spaces),
    padding is on the left (so generation continues right after the prompt).
    """
    chars = DEFAULT_CHARS if chars is None else chars
    uniq = list(dict.fromkeys(chars))  # de-duplicate, keep order
    if not uniq:
        raise UserError("build_char_tokenizer got an empty character set: pass at least one character")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + uniq)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # every single character (newline and space included) is its own pre-token
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tk.decoder = decoders.Fuse()  # concatenate tokens as-is
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        clean_up_tokenization_spaces=False,  # would turn "a ." into "a."
        add_bos_token=False,
        add_eos_token=False,
    )
    return tok


# -----------------------------------------------------------------------------
# tiny Llama


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


def build_tiny_llama(tokenizer, cfg: ModelConfig, seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised float32 Llama sized by `cfg`, deterministic given `seed` (global RNG untouched)."""
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


# -----------------------------------------------------------------------------
# loading / saving HF causal LMs


def load_model_and_tokenizer(path_or_name: str, dtype: torch.dtype = torch.float32):
    """Load (model, tokenizer) from a local HF causal-LM directory or a hub name.

    The tokenizer gets a pad token (eos if it had none) and left padding; model.config.pad_token_id is set.
    """
    path = str(path_or_name)
    hint = f"model '{path}' not found: give a local Hugging Face model directory (config.json + weights) or a hub name"
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise UserError(hint)
    elif os.path.exists(path) or not _HUB_ID.match(path):
        raise UserError(hint)
    try:  # model first: an unreachable hub then fails once, not twice
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:  # missing files, no hub access, unknown architecture
        raise UserError(f"{hint} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model.config.pad_token_id = tok.pad_token_id
    if getattr(model, "generation_config", None) is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def save_model_and_tokenizer(model, tokenizer, path: str) -> None:
    """Write model weights + config and the tokenizer into directory `path` (created if needed)."""
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


# -----------------------------------------------------------------------------
# scalar-head (value / reward) model


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that ignore left padding: [0 0 0 1 2 ...] for mask [0 0 1 1 1 ...]. [N, L] -> [N, L]"""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class ScalarHeadModel(nn.Module):
    """A causal-LM backbone (no LM head) plus a linear head giving one scalar per position.

    Used as a value model (PPO critic) or reward model. The head starts at zero, so the
    initial output is exactly 0 everywhere.
    """

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone  # e.g. LlamaModel
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_causal_lm(cls, lm) -> "ScalarHeadModel":
        """Copy the backbone of a `*ForCausalLM` (e.g. the SFT model); the result shares no tensors with `lm`."""
        backbone = copy.deepcopy(lm.base_model)
        model = cls(backbone, lm.config.hidden_size)
        return model.to(next(backbone.parameters()).device)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, attention_mask [N, L] -> values [N, L] (float32). Left padding is handled via position ids."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        out = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            use_cache=False,
        )
        h = out.last_hidden_state  # [N, L, H]
        return self.head(h.to(self.head.weight.dtype)).squeeze(-1).float()  # [N, L]

    def save(self, path: str) -> None:
        """Write the backbone (HF format) to `path/backbone` and the head to `path/scalar_head.pt`."""
        os.makedirs(path, exist_ok=True)
        self.backbone.save_pretrained(os.path.join(path, "backbone"))
        torch.save(self.head.state_dict(), os.path.join(path, "scalar_head.pt"))

    @classmethod
    def load(cls, path: str, dtype: torch.dtype = torch.float32) -> "ScalarHeadModel":
        """Inverse of `save`."""
        head_file = os.path.join(path, "scalar_head.pt")
        if not os.path.isfile(head_file):
            raise UserError(f"no scalar-head model at '{path}': give a directory written by ScalarHeadModel.save")
        backbone = AutoModel.from_pretrained(os.path.join(path, "backbone"), dtype=dtype)
        model = cls(backbone, backbone.config.hidden_size)
        model.head.load_state_dict(torch.load(head_file, map_location="cpu", weights_only=True))
        return model


# -----------------------------------------------------------------------------
# bigger models: gradient checkpointing and LoRA (stage 2 only; `model.*` options of the run config)


@contextlib.contextmanager
def evaluating(model: nn.Module):
    """Eval mode (dropout off) for a pass of a model that is otherwise training, restored afterwards. A model
    already in eval mode is not touched: `nn.Module.train` walks every submodule, 0.2 ms a switch for the 1M Llama,
    so a step that never samples from the policy (SFT, RFT, DPO) switches nothing."""
    was = model.training
    if was:
        model.eval()
    try:
        yield model
    finally:
        if was:
            model.train()


def prepare_policy(model, gradient_checkpointing: bool = False, lora_rank: int = 0):
    """The policy as stage 2 trains it: activations recomputed in backward, and/or LoRA adapters of `lora_rank`."""
    if gradient_checkpointing:  # non-reentrant: works under DDP and with frozen (LoRA) inputs
        enable = getattr(model, "activation_checkpointing_enable", None)  # the transformers >= 5.x name
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora_rank:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise UserError("model.lora_rank > 0 needs the peft package: pip install peft") from None
        cfg = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0, target_modules="all-linear")
        with warnings.catch_warnings():  # peft asks transformers' deprecated is_gradient_checkpointing
            warnings.simplefilter("ignore", FutureWarning)
            model = get_peft_model(model, cfg)  # base weights frozen, adapters trainable
    return model


class AdapterDisabled(nn.Module):
    """A frozen view of a LoRA policy's base: the same weights with the adapter switched off (no second copy).

    The policy is held outside the module tree, so .to()/.eval()/.requires_grad_() on the view never reach it.
    """

    def __init__(self, peft_model):
        super().__init__()
        self._policy = [peft_model]

    def parameters(self, recurse: bool = True):  # the sampler asks for the device
        return self._policy[0].parameters(recurse)

    @torch.no_grad()
    def forward(self, *args, **kwargs):
        with self._policy[0].disable_adapter():
            return self._policy[0](*args, **kwargs)

    @torch.no_grad()
    def generate(self, *args, **kwargs):
        with self._policy[0].disable_adapter():
            return self._policy[0].generate(*args, **kwargs)


# -----------------------------------------------------------------------------


def count_parameters(module: nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in module.parameters())
