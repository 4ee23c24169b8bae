"""The weighted-maximum-likelihood engine: one loss for every method.

Every method in scope has a gradient of the form (seed, "One Gradient, Many Methods"; DeepSeekMath §5.2.1)

    ∇J(θ) = E_{(q,o)~D} [ (1/|o|) Σ_t GC(q,o,t) · ∇ log π_θ(o_t | q, o_<t) ]

so the engine needs three things: the token log-probs log π_θ(o_t | q, o_<t), a per-token weight GC supplied by
the method, and a normaliser. The normaliser is its own named axis (`AGGREGATIONS`), never folded into GC:

    token-mean               Σ_{i,t} x_{i,t} / Σ_i |o_i|                      (all tokens equal)
    seq-mean-token-mean      (1/N) Σ_i (1/|o_i|) Σ_t x_{i,t}                  (the seed's GRPO objective)
    seq-mean-token-sum       (1/N) Σ_i Σ_t x_{i,t}                            (sequence log-likelihoods, DPO)
    seq-mean-token-sum-norm  (1/N) Σ_i Σ_t x_{i,t} / L_max                    (Dr. GRPO: a constant length)

The counts (N, Σ|o_i|) are those of the whole optimiser step — all micro-batches and all processes — so that
splitting a batch for gradient accumulation or data parallelism never changes the update.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from gcframe.batch import Batch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


@dataclass(frozen=True)
class Normaliser:
    """Global counts of one optimiser step (summed over micro-batches and processes)."""

    n_seqs: float  # N, number of sequences
    n_tokens: float  # Σ_i |o_i|, number of masked-in tokens
    max_len: int  # L_max for seq-mean-token-sum-norm

    @staticmethod
    def of(mask: torch.Tensor, max_len: int | None = None) -> "Normaliser":
        """Counts of one local tensor mask [N, T] (use `gather` to make them global)."""
        return Normaliser(float(mask.shape[0]), float(mask.sum()), int(max_len or mask.shape[1]))


def check_aggregation(mode: str) -> str:
    if mode not in AGGREGATIONS:
        from gcframe.errors import UserError

        raise UserError(f"unknown aggregation '{mode}': choose one of {', '.join(AGGREGATIONS)}")
    return mode


def token_weights(mask: torch.Tensor, mode: str, norm: Normaliser) -> torch.Tensor:
    """w [N, T] such that aggregate(x) = Σ_{i,t} w_{i,t} x_{i,t} (see the table at the top)."""
    mask = mask.float()
    if mode == "token-mean":
        return mask / max(norm.n_tokens, 1.0)
    if mode == "seq-mean-token-mean":
        lengths = mask.sum(-1, keepdim=True).clamp(min=1.0)  # |o_i|, [N, 1]
        return mask / (lengths * max(norm.n_seqs, 1.0))
    if mode == "seq-mean-token-sum":
        return mask / max(norm.n_seqs, 1.0)
    if mode == "seq-mean-token-sum-norm":
        return mask / (max(norm.n_seqs, 1.0) * norm.max_len)
    check_aggregation(mode)
    raise AssertionError  # unreachable


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, norm: Normaliser | None = None) -> torch.Tensor:
    """Reduce per-token values [N, T] to a scalar by `mode`; `norm` defaults to this tensor's own counts."""
    norm = norm or Normaliser.of(mask)
    return (values * token_weights(mask, mode, norm)).sum()


def weighted_mle_loss(gc: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor, mode: str,
                      norm: Normaliser | None = None) -> torch.Tensor:
    """loss = -aggregate(GC.detach() · log π_θ): its gradient is the unified policy gradient above."""
    return -aggregate(gc.detach() * logp, mask, mode, norm)


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as generation assigns them: [0 0 0 1 2 ...] for `0 0 1 1 1 ...`."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def token_logprobs(model, batch: Batch, temperature: float = 1.0, with_entropy: bool = False):
    """log π_θ(o_t | q, o_<t) for every completion token -> logp [N, T] (and entropy [N, T], no grad).

    Only the last T+1 positions' logits are computed: position P-1+t predicts completion token t.
    """
    T = batch.completion_ids.shape[1]
    attn = batch.attention_mask  # [N, P+T]
    out = model(input_ids=batch.input_ids, attention_mask=attn, position_ids=position_ids(attn),
                logits_to_keep=T + 1, use_cache=False)
    logits = out.logits[:, :-1]  # [N, T, V]
    logits = (logits if logits.dtype == torch.float64 else logits.float()) / temperature
    logp = logits.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)  # [N, T]
    logp = logp * batch.completion_mask  # padding contributes exactly 0
    if not with_entropy:
        return logp
    with torch.no_grad():
        p = F.softmax(logits, -1)
        entropy = -(p * F.log_softmax(logits, -1)).sum(-1) * batch.completion_mask  # [N, T]
    return logp, entropy
