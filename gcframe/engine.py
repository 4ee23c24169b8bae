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


def token_weights(mask: torch.Tensor, mode: str, norm: Normaliser, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """w [N, T] in `dtype` such that aggregate(x) = Σ_{i,t} w_{i,t} x_{i,t} (see the table at the top). The dtype is
    the values' (`aggregate`): float32 weights would round 1/Σ|o| and 1/(|o_i|·N) by up to 6e-8 relative, an error
    a float64 loss must not carry."""
    mask = mask.to(dtype)
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
    """Reduce per-token values [N, T] to a scalar by `mode`; `norm` defaults to this tensor's own counts. The weights
    are computed in the values' dtype, float32 at least (a bfloat16 value is not weighted in bfloat16)."""
    norm = norm or Normaliser.of(mask)
    return (values * token_weights(mask, mode, norm, torch.promote_types(values.dtype, torch.float32))).sum()


def weighted_mle_loss(gc: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor, mode: str,
                      norm: Normaliser | None = None) -> torch.Tensor:
    """loss = -aggregate(GC.detach() · log π_θ): its gradient is the unified policy gradient above."""
    return -aggregate(gc.detach() * logp, mask, mode, norm)


def check_gc(gc, logp: torch.Tensor, method: str) -> None:
    """A method's GC before the engine first uses it: a floating tensor of logp's shape [N, T], finite. A GC of shape
    [N] would broadcast silently against [N, T] when N == T; a Python float would weight every token alike. Each is
    refused in one line naming the method and what is wrong (MethodError)."""
    from gcframe.errors import MethodError

    want = f"a float tensor of logp's shape [N, T] = {list(logp.shape)}, one coefficient per completion token"
    if not isinstance(gc, torch.Tensor):
        raise MethodError(f"method '{method}': coefficients(batch, logp) returned {type(gc).__name__} {gc!r:.40}, "
                          f"not a tensor: return {want} (e.g. torch.full_like(logp, value))")
    if gc.shape != logp.shape:
        hint = (": a per-sequence coefficient g [N] is g[:, None].expand_as(logp)" if gc.dim() == 1
                and len(gc) == logp.shape[0] else "")
        raise MethodError(f"method '{method}': coefficients(batch, logp) returned GC of shape {list(gc.shape)}: "
                          f"return {want}{hint}")
    if not gc.is_floating_point():
        raise MethodError(f"method '{method}': coefficients(batch, logp) returned GC of dtype {gc.dtype}: return "
                          f"{want} (e.g. gc.to(logp.dtype))")
    bad = int((~torch.isfinite(gc)).sum())
    if bad:
        raise MethodError(f"method '{method}': coefficients(batch, logp) returned GC with {bad} non-finite entr"
                          f"{'y' if bad == 1 else 'ies'} (nan or inf) of {gc.numel()} on the first batch: return "
                          f"{want}, every entry finite (padding positions included: mask them with 0, not nan)")


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as generation assigns them: [0 0 0 1 2 ...] for `0 0 1 1 1 ...`."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


MIN_SHARED_TOKENS = 128
"""Share a group's prompt pass only when it saves at least this many prompt tokens: below that the extra forward
call costs more than it saves (tiny models on a CPU; experiments/benchmark.py)."""


def shared_prompts(batch: Batch) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(first [U], inverse [N]) when the rows of every group share one prompt and sharing saves MIN_SHARED_TOKENS
    (G completions of a prompt, DPO pairs): row i's prompt is row first[inverse[i]]'s. Else None."""
    gids, P, least = batch.group_ids, batch.prompt_ids.shape[1], max(MIN_SHARED_TOKENS, 1)
    if (len(gids) - 1) * P < least:  # even one prompt for all rows would save too little
        return None
    uniq, inv = torch.unique(gids, return_inverse=True)
    if (len(gids) - len(uniq)) * P < least:
        return None
    rows = torch.arange(len(gids), device=gids.device)
    first = torch.full((len(uniq),), len(gids), device=gids.device).scatter_reduce(0, inv, rows, "amin")  # [U]
    src = first[inv]  # [N]
    same = torch.equal(batch.prompt_ids, batch.prompt_ids[src]) and torch.equal(batch.prompt_mask,
                                                                                 batch.prompt_mask[src])
    return (first, inv) if same else None


def cache_kwarg(model) -> str:
    """The name under which this transformers version's forward takes a KV cache (`cache` since 5.x)."""
    import inspect

    from transformers import PreTrainedModel

    roots = [model, *getattr(model, "_policy", [])]  # modeling.AdapterDisabled holds the policy outside its tree
    base = next((m for r in roots for m in r.modules() if isinstance(m, PreTrainedModel)), model)  # under PEFT/DDP
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def prefix_shared_logits(model, batch: Batch, first: torch.Tensor, inv: torch.Tensor):
    """Logits [N, T, V] predicting the completion tokens, the prompt computed once per group: the prompt's keys and
    values depend on the prompt alone (causal attention), so one pass over the U distinct prompts, its KV cache
    gathered to the N rows, then one pass over the completions is the same function (gradient included: the
    gather sums the rows' gradients into their prompt) with U·P instead of N·P prompt tokens. None when the model
    filled no cache (e.g. gradient checkpointing turns it off)."""
    from transformers import DynamicCache

    P, T = batch.prompt_ids.shape[1], batch.completion_ids.shape[1]
    cache, key = DynamicCache(), cache_kwarg(model)
    pm = batch.prompt_mask[first]  # [U, P]
    head = model(input_ids=batch.prompt_ids[first], attention_mask=pm, position_ids=position_ids(pm),
                 use_cache=True, logits_to_keep=1, **{key: cache}).logits  # [U, 1, V]: predicts o_0
    if cache.get_seq_length() != P:
        return None
    cache.batch_select_indices(inv)  # [U, ...] -> [N, ...]
    attn = batch.attention_mask  # [N, P+T]
    tail = model(input_ids=batch.completion_ids, attention_mask=attn, position_ids=position_ids(attn)[:, P:],
                 use_cache=True, logits_to_keep=T, **{key: cache}).logits  # [N, T, V]: position t predicts o_{t+1}
    return torch.cat([head[inv], tail[:, :-1]], dim=1)  # [N, T, V]


def token_logprobs(model, batch: Batch, temperature: float = 1.0, with_entropy: bool = False):
    """log π_θ(o_t | q, o_<t) for every completion token -> logp [N, T] (and entropy [N, T], no grad).

    Only the last T+1 positions' logits are computed: position P-1+t predicts completion token t. Rows that share
    a prompt (groups, pairs) share its forward pass (`prefix_shared_logits`; not under DDP, which allows one
    forward per backward, nor with gradient checkpointing, which turns the KV cache off).
    """
    T = batch.completion_ids.shape[1]
    attn = batch.attention_mask  # [N, P+T]
    shared = shared_prompts(batch)
    if shared is not None and (isinstance(model, torch.nn.parallel.DistributedDataParallel) or (model.training and any(
            getattr(m, "gradient_checkpointing", False) is True for m in model.modules()))  # it turns the cache off
            or getattr(getattr(model, "config", None), "_attn_implementation", "sdpa") != "sdpa"):
        shared = None  # (eager attention gave NaN gradients through the gathered cache in float64: sdpa only)
    logits = prefix_shared_logits(model, batch, *shared) if shared is not None else None
    if logits is None:
        out = model(input_ids=batch.input_ids, attention_mask=attn, position_ids=position_ids(attn),
                    logits_to_keep=T + 1, use_cache=False)
        logits = out.logits[:, :-1]  # [N, T, V]
    logits = logits if logits.dtype == torch.float64 else logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    lse = logits.logsumexp(-1)  # [N, T]
    logp = logits.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1) - lse  # [N, T]
    logp = logp * batch.completion_mask  # padding contributes exactly 0
    if not with_entropy:
        return logp
    with torch.no_grad():  # H = −Σ_v p_v log p_v = lse − Σ_v p_v z_v, with p = softmax(z): one pass over V
        entropy = (lse - (torch.exp(logits - lse.unsqueeze(-1)) * logits).sum(-1)) * batch.completion_mask  # [N, T]
    return logp, entropy
