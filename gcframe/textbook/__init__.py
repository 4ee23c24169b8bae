"""The textbook losses `gcframe.verify` checks the engine against: one function per method, written from the paper's
equation (cited by number), independently of the method's GC code and of the engine's aggregation.

    TEXTBOOK[name](method, batch, logp) -> scalar loss whose gradient the engine's −aggregate(GC·log π) must equal

A method's loss lives in the module of its family: classic (the seed's table), plus a module per family of the
methods added beside them. A plugin declares its own with `@textbook("name")` (importable as gcframe.verify.textbook).
"""
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


from gcframe.textbook import classic  # noqa: E402,F401  (registers on import; the order --list-methods uses)
from gcframe.textbook import preference_zoo  # noqa: E402,F401
from gcframe.textbook import policy_gradient_zoo  # noqa: E402,F401
from gcframe.textbook import baselines_zoo  # noqa: E402,F401
