"""A scalar-head (value / reward) model on a causal-LM backbone: PPO's critic V_ψ and the reward model r_φ.

Shapes: N = batch size, L = sequence length, H = hidden size.
"""
from __future__ import annotations

import copy
import os

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

