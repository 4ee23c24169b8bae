"""How stage 2 computes with a model: eval mode around sampling, gradient checkpointing, LoRA adapters and the
adapter-disabled reference, parameter counts."""
from __future__ import annotations

import contextlib
import warnings

import torch
import torch.nn as nn

from gcframe.errors import UserError

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
        with quiet_peft():
            model = get_peft_model(model, cfg)  # base weights frozen, adapters trainable
    return model


@contextlib.contextmanager
def quiet_peft():
    """Around peft's model wrapping: it asks transformers' deprecated is_gradient_checkpointing (a FutureWarning
    that says nothing to the user)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


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
