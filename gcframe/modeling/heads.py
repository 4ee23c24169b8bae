"""A scalar-head (value / reward) model on a causal-LM backbone: PPO's critic V_ψ and the reward model r_φ.

Shapes: N = batch size, L = sequence length, H = hidden size.
"""
from __future__ import annotations

import copy
import os
import pickle

import torch
import torch.nn as nn
from transformers import AutoModel

from gcframe.errors import UserError


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that ignore left padding: [0 0 0 1 2 ...] for mask [0 0 1 1 1 ...]. [N, L] -> [N, L]"""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class ScalarHeadModel(nn.Module):
    """A causal-LM backbone (no LM head) plus a linear head giving one scalar per position.

    Used as a value model (PPO critic) or reward model. The head starts at zero, so the
    initial output is exactly 0 everywhere. `lm_head` (optional) keeps the LM's own output layer beside it, for a
    reward model that also reads the completion's log-likelihood (gcframe.rewards.model, reward_model.likelihood).
    """

    def __init__(self, backbone: nn.Module, hidden_size: int, lm_head: nn.Module | None = None):
        super().__init__()
        self.backbone = backbone  # e.g. LlamaModel
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.lm_head = lm_head

    @classmethod
    def from_causal_lm(cls, lm, with_lm_head: bool = False) -> "ScalarHeadModel":
        """Copy the backbone of a `*ForCausalLM` (e.g. the SFT model), and its output layer with `with_lm_head`; the
        result shares no tensors with `lm`."""
        backbone = copy.deepcopy(lm.base_model)
        lm_head = copy.deepcopy(lm.get_output_embeddings()) if with_lm_head else None
        model = cls(backbone, lm.config.hidden_size, lm_head)
        return model.to(next(backbone.parameters()).device)

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The backbone's last hidden states [N, L, H]; left padding handled via position ids."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids_from_mask(attention_mask), use_cache=False).last_hidden_state

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, attention_mask [N, L] -> values [N, L] (float32). Left padding is handled via position ids."""
        return self.values(self.hidden(input_ids, attention_mask))

    def values(self, h: torch.Tensor) -> torch.Tensor:
        """The head on hidden states [N, L, H] -> [N, L] (float32), a tensor of its own, never a view: FSDP2 hooks the
        all-gather of the backward onto the output of a sharded module's forward, and warns that a view (squeeze's,
        or float()'s no-op on float32) may lose that hook."""
        return self.head(h.to(self.head.weight.dtype)).squeeze(-1).to(torch.float32, copy=True)

    def save(self, path: str) -> None:
        """Write the backbone (HF format) to `path/backbone`, the head to `path/scalar_head.pt` (and the LM head, if
        kept, to `path/lm_head.pt`)."""
        os.makedirs(path, exist_ok=True)
        self.backbone.save_pretrained(os.path.join(path, "backbone"))
        torch.save(self.head.state_dict(), os.path.join(path, "scalar_head.pt"))
        if self.lm_head is not None:
            torch.save(self.lm_head.state_dict(), os.path.join(path, "lm_head.pt"))  # tensors only: loaded with
            # weights_only=True, so a file in the cache can never run code

    @classmethod
    def load(cls, path: str, dtype: torch.dtype = torch.float32) -> "ScalarHeadModel":
        """Inverse of `save`."""
        head_file = os.path.join(path, "scalar_head.pt")
        if not os.path.isfile(head_file):
            raise UserError(f"no scalar-head model at '{path}': give a directory written by ScalarHeadModel.save")
        backbone = AutoModel.from_pretrained(os.path.join(path, "backbone"), dtype=dtype)
        lm_file = os.path.join(path, "lm_head.pt")
        lm_head = _linear(lm_file, dtype) if os.path.isfile(lm_file) else None
        model = cls(backbone, backbone.config.hidden_size, lm_head)
        model.head.load_state_dict(torch.load(head_file, map_location="cpu", weights_only=True))
        return model


def _linear(path: str, dtype: torch.dtype) -> nn.Linear:
    """The LM head saved by `ScalarHeadModel.save` (a Linear's state dict: weight [V, H], bias [V] if it had one),
    read with weights_only=True (tensors only)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # e.g. a whole pickled module: refused rather than executed
        state = None
    if not isinstance(state, dict) or "weight" not in state:
        raise UserError(f"{path} is not a saved LM head (a state dict with 'weight'): delete it, or its cache folder, "
                        "and run again to rebuild it")
    out_features, in_features = state["weight"].shape
    head = nn.Linear(in_features, out_features, bias="bias" in state, dtype=dtype)
    head.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    return head
