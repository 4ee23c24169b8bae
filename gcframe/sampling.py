"""From text to Batch: tokenising demonstrations and sampling completions.

Generation sits behind one small interface, `Generator.generate(model, prompts, n) -> Batch`, so a faster
backend (vLLM, SGLang, a custom KV-cache loop) can replace Hugging Face `generate` without touching the engine.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gcframe.batch import Batch, pad_left, pad_right


def encode_prompt(tok, text: str) -> list[int]:
    """<bos> + prompt tokens (no <bos> where the tokenizer has none)."""
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ([tok.bos_token_id] if tok.bos_token_id is not None else []) + ids


def encode_completion(tok, text: str) -> list[int]:
    """completion tokens + <eos>: the model is trained to stop."""
    return tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


def make_batch(tok, prompts: list[str], completions: list[str], group_ids: list[int] | None = None,
               texts: list[dict] | None = None) -> Batch:
    """A Batch of fixed (prompt, completion) texts: demonstrations, filtered samples, preference pairs."""
    p_ids, p_mask = pad_left([encode_prompt(tok, p) for p in prompts], tok.pad_token_id)
    c_ids, c_mask = pad_right([encode_completion(tok, c) for c in completions], tok.pad_token_id)
    gids = torch.tensor(group_ids if group_ids is not None else range(len(prompts)), dtype=torch.long)
    texts = texts or [{"prompt": p, "completion": c} for p, c in zip(prompts, completions)]
    return Batch(p_ids, p_mask, c_ids, c_mask.float(), gids, {}, texts)


@dataclass
class GenerationConfig:
    max_new_tokens: int = 16
    """Longest completion; one that reaches it without <eos> is flagged `truncated`."""
    temperature: float = 1.0
    """Sampling temperature; 0 means greedy decoding."""


class Generator:
    """Batched sampling with a KV cache through Hugging Face `generate`: n completions of every prompt."""

    def __init__(self, tok, cfg: GenerationConfig):
        self.tok, self.cfg = tok, cfg

    @torch.no_grad()
    def generate(self, model, prompts: list[str], n: int = 1, temperature: float | None = None,
                 max_new_tokens: int | None = None) -> Batch:
        """Completions for each prompt repeated n times -> Batch with group_ids = prompt index.

        batch.data["truncated"] [N] is 1 where no <eos> came within max_new_tokens; tokens after <eos> are
        padding with completion_mask 0.
        """
        tok = self.tok
        temperature = self.cfg.temperature if temperature is None else temperature
        rows = [encode_prompt(tok, p) for p in prompts for _ in range(n)]
        p_ids, p_mask = pad_left(rows, tok.pad_token_id)  # [N, P]
        device = next(model.parameters()).device
        sample = temperature > 0
        out = model.generate(
            input_ids=p_ids.to(device), attention_mask=p_mask.to(device),
            max_new_tokens=max_new_tokens or self.cfg.max_new_tokens,
            do_sample=sample, temperature=temperature if sample else None, top_k=None, top_p=None,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        ).cpu()
        c_ids = out[:, p_ids.shape[1]:]  # [N, T]
        is_eos = c_ids == tok.eos_token_id
        seen_eos_before = (is_eos.cumsum(-1) - is_eos.long()) > 0  # strictly after the first <eos>
        mask = (~seen_eos_before).float()  # 1 up to and including the first <eos>
        c_ids = c_ids.masked_fill(seen_eos_before, tok.pad_token_id)
        truncated = (~is_eos.any(-1)).float()  # [N]
        texts = []
        for i, row in enumerate(c_ids.tolist()):
            keep = [t for t, m in zip(row, mask[i].tolist()) if m and t != tok.eos_token_id]
            texts.append({"prompt": prompts[i // n], "completion": tok.decode(keep, skip_special_tokens=True)})
        gids = torch.arange(len(prompts)).repeat_interleave(n)
        return Batch(p_ids, p_mask, c_ids, mask, gids, {"truncated": truncated}, texts)
