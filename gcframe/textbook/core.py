"""The registry of textbook losses and the aggregations written out per sequence (a leaf: the loss modules import it)."""
from __future__ import annotations

from typing import Callable

import torch

TEXTBOOK: dict[str, Callable] = {}


def textbook(name: str):
    """Register the textbook loss of method `name`: fn(method, batch, logp [N,T] with grad) -> scalar."""

    def deco(fn):
        TEXTBOOK[name] = fn
        return fn

    return deco


def _mean_as_written(values: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """The engine's aggregations (gcframe/engine.py's table) written out per sequence, not through its weights:
    token-mean Σ_i S_i / Σ_i |o_i|, seq-mean-token-mean (1/N) Σ_i S_i / |o_i|, seq-mean-token-sum (1/N) Σ_i S_i,
    seq-mean-token-sum-norm (1/N) Σ_i S_i / T, with S_i = Σ_{t in o_i} x_{i,t}."""
    sums, lengths = [], []
    for x, m in zip(values, mask):  # a Python loop over the sequences
        kept = m > 0
        sums.append(x[kept].sum())
        lengths.append(int(kept.sum()))
    N, T = len(sums), mask.shape[1]
    if mode == "token-mean":
        return sum(sums) / max(sum(lengths), 1)
    if mode == "seq-mean-token-mean":
        return sum(s / max(n, 1) for s, n in zip(sums, lengths)) / N
    if mode == "seq-mean-token-sum":
        return sum(sums) / N
    if mode == "seq-mean-token-sum-norm":
        return sum(sums) / (N * T)
    raise ValueError(f"no textbook form of the aggregation '{mode}'")
