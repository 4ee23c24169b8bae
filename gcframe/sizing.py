"""What a run holds in memory at once, estimated from its config before anything is allocated, against what the
machine can hold: a size that cannot fit (`train.prompts_per_step: 1000000000`) is refused in one line that gives the
estimate, instead of growing until the machine runs out.

The estimate counts the largest tensors of each phase, in bytes (float32 = 4; the sampler's softmax and its
cumulative sum are float64), for a model of vocabulary V, width H, MLP width I, L layers and K·D key/value width:

    sampling     N = prompts_per_step · group_size sequences at once (this process's share of them), each of
                 S = the longest prompt + max_new_tokens tokens: the KV cache 2·L·N·S·K·D·4 and,
                 per decoded token, the logits N·V·4 and their float64 softmax and CDF N·V·16
    an update    M = micro_batch_size (else the minibatch, N / minibatches) sequences: the logits and their
                 gradient 2·M·S·V·4, and the layers' outputs kept for the backward pass, at least M·S·L·4·H·4
    stage 1      the same update at M = sft_base.batch_size (the tiny model's SFT base)
    weights      the policy, its gradient and AdamW's two moments: 4 copies of the parameters (π_ref and PPO's
                 critic not counted); with model.lora_rank the base alone (the adapters' share is small)

It is a floor, not a forecast (the allocator, Python objects and the data add to it): a config it refuses cannot run
here, one it accepts may still be tight. Nothing in a run is allocated in proportion to train.steps (the evaluation
steps are a rule, not a list: gcframe.trainer.EvalSteps).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from gcframe.errors import UserError

GiB = 2 ** 30


@dataclass
class Dims:
    """The sizes of a causal LM the estimate needs."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    kv_width: int  # key/value heads × head dimension
    params: int


def dims_of(cfg, tok) -> Dims | None:
    """The model's sizes: the tiny Llama's from the config (and the tokenizer's vocabulary), a pretrained model's
    from its config.json; None where they cannot be read (no estimate is made)."""
    if not cfg.model.path:
        from gcframe.modeling import build_char_tokenizer

        m, vocab = cfg.model, len(tok or build_char_tokenizer())
        h, i, n = m.hidden_size, m.intermediate_size, m.num_layers
        return Dims(vocab, h, i, n, h, vocab * h + n * (4 * h * h + 3 * h * i + 2 * h) + h)
    try:
        from transformers import AutoConfig

        from gcframe.modeling import resolve_model_path

        c = AutoConfig.from_pretrained(resolve_model_path(cfg.model.path))
        c = getattr(c, "text_config", None) or c
        h, n, v = c.hidden_size, c.num_hidden_layers, c.vocab_size
        i = getattr(c, "intermediate_size", 4 * h)
        heads = getattr(c, "num_attention_heads", 1)
        kv = getattr(c, "num_key_value_heads", None) or heads
        head_dim = getattr(c, "head_dim", None) or h // heads
    except Exception:  # noqa: BLE001 (an architecture this does not know: no estimate, the run decides)
        return None
    return Dims(v, h, i, n, kv * head_dim, v * h + n * (2 * h * h + 2 * h * kv * head_dim + 3 * h * i))


def estimate(cfg, dims: Dims, prompt_tokens: int) -> dict[str, float]:
    """Bytes each phase holds at once (module docstring): sampling, update, stage 1 (tiny model only), weights."""
    t = cfg.train
    seq = prompt_tokens + t.max_new_tokens
    n = math.ceil(t.prompts_per_step * t.group_size / max(int(os.environ.get("WORLD_SIZE", "1") or 1), 1))
    micro = t.micro_batch_size or math.ceil(n / max(t.minibatches, 1))

    def update(m: int) -> float:
        return 2 * m * seq * dims.vocab * 4 + m * seq * dims.layers * 4 * dims.hidden * 4

    out = {"sampling": 2 * dims.layers * n * seq * dims.kv_width * 4 + n * dims.vocab * 20,
           "an update": update(micro), "weights": (1 if cfg.model.lora_rank else 4) * dims.params * 4}
    if not cfg.model.path:
        out["stage 1"] = update(cfg.sft_base.batch_size)
    return out


def machine_bytes() -> tuple[int, str] | None:
    """(bytes, what they are) this machine can hold: the GPU's memory where torch sees one, else RAM (the smaller of
    the physical memory and a cgroup's limit); None where neither can be read."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory, "GPU memory"
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            text = limit.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total, "memory"


def check(cfg, dims: Dims | None, prompt_tokens: int, where: str = "") -> None:
    """Refuse, in one line with the estimate, a config whose largest phase cannot fit this machine."""
    have = machine_bytes()
    if dims is None or have is None:
        return
    parts = estimate(cfg, dims, prompt_tokens)
    phase = max(parts, key=parts.get)
    need = parts[phase] + (parts["weights"] if phase != "weights" else 0)
    if need <= have[0]:
        return
    t, seq = cfg.train, prompt_tokens + cfg.train.max_new_tokens
    n = t.prompts_per_step * t.group_size
    sizes = f"train.prompts_per_step {t.prompts_per_step} × train.group_size {t.group_size}"
    what, fix = {
        "sampling": (f"sampling {n:,} sequences of up to {seq} tokens at once ({sizes})",
                     "lower train.prompts_per_step or train.group_size (or train.max_new_tokens)"),
        "an update": ((f"a forward and backward pass over train.micro_batch_size {t.micro_batch_size} sequences of "
                       f"up to {seq} tokens", "lower train.micro_batch_size") if t.micro_batch_size else
                      (f"a forward and backward pass over {math.ceil(n / max(t.minibatches, 1)):,} sequences of up to "
                       f"{seq} tokens ({sizes} / train.minibatches {t.minibatches})",
                       "lower train.prompts_per_step, or set train.micro_batch_size")),
        "stage 1": (f"stage 1's pass over sft_base.batch_size {cfg.sft_base.batch_size} demonstrations",
                    "lower sft_base.batch_size"),
        "weights": (f"the weights, gradients and optimiser state of {dims.params / 1e6:,.0f}M parameters",
                    "use a smaller model"),
    }[phase]
    raise UserError(f"{where}{what} needs about {_size(need)} (gcframe.sizing's estimate, a floor; the weights and "
                    f"optimiser included), but this machine holds {_size(have[0])} of {have[1]}: {fix}")


def _size(b: float) -> str:
    if b >= 2 ** 50:
        return f"{b / 2 ** 50:,.0f} PiB"
    return f"{b / GiB:,.1f} GiB" if b >= GiB / 10 else f"{b / 2 ** 20:,.0f} MiB"
