"""The weighted-MLE engine: aggregation modes by hand, SFT = transformers' cross-entropy, split invariance."""

import pytest
import torch

from gcframe.engine import AGGREGATIONS, Normaliser, aggregate, token_logprobs, weighted_mle_loss
from gcframe.errors import UserError
from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama
from gcframe.sampling import make_batch

# Two sequences: o_1 has 2 tokens, o_2 has 4 (T = 4).
VALUES = torch.tensor([[1.0, 2.0, 9.0, 9.0],
                       [3.0, 4.0, 5.0, 6.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0, 0.0],
                     [1.0, 1.0, 1.0, 1.0]])


@pytest.mark.parametrize("mode, expected", [
    # token-mean: (1+2+3+4+5+6) / 6 tokens = 21/6 = 3.5
    ("token-mean", 21 / 6),
    # seq-mean-token-mean: ((1+2)/2 + (3+4+5+6)/4) / 2 = (1.5 + 4.5) / 2 = 3.0
    ("seq-mean-token-mean", 3.0),
    # seq-mean-token-sum: ((1+2) + (3+4+5+6)) / 2 = (3 + 18) / 2 = 10.5
    ("seq-mean-token-sum", 10.5),
    # seq-mean-token-sum-norm with L_max = 4: (3 + 18) / (2 · 4) = 2.625
    ("seq-mean-token-sum-norm", 21 / 8),
])
def test_aggregation_by_hand(mode, expected):
    assert aggregate(VALUES, MASK, mode) == pytest.approx(expected, abs=1e-6)


def test_sum_norm_uses_the_fixed_max_length():
    # L_max = 10 instead of the tensor width 4: (3 + 18) / (2 · 10) = 1.05
    assert aggregate(VALUES, MASK, "seq-mean-token-sum-norm", Normaliser(2, 6, 10)) == pytest.approx(1.05)


def test_padding_never_counts():
    # the 9s sit on padding of o_1: changing them changes nothing in any mode
    other = VALUES.clone()
    other[0, 2:] = -1000.0
    for mode in AGGREGATIONS:
        assert aggregate(other, MASK, mode) == aggregate(VALUES, MASK, mode)


def _aggregate_by_loops(values: torch.Tensor, mask: torch.Tensor, mode: str, n_seqs: int, n_tokens: int,
                        max_len: int) -> float:
    """The table at the top of gcframe/engine.py, written out: Python float64 sums over sequences and tokens."""
    seq_sums, seq_lens = [], []
    for i in range(values.shape[0]):
        s, n = 0.0, 0
        for t in range(values.shape[1]):
            if mask[i, t] > 0:
                s, n = s + float(values[i, t]), n + 1
        seq_sums.append(s)
        seq_lens.append(n)
    if mode == "token-mean":
        return sum(seq_sums) / n_tokens
    if mode == "seq-mean-token-mean":
        return sum(s / max(n, 1) for s, n in zip(seq_sums, seq_lens)) / n_seqs
    if mode == "seq-mean-token-sum":
        return sum(seq_sums) / n_seqs
    return sum(seq_sums) / (n_seqs * max_len)  # seq-mean-token-sum-norm


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize("global_counts", [False, True])
def test_float64_aggregation_equals_float64_loops(mode, global_counts):
    """A float64 loss is normalised in float64: lengths 3, 5, 7, 11 (and counts 37, 13·7) have reciprocals that
    float32 rounds by up to 6e-8 relative, which a 1e-12 agreement with plain float64 loops would show."""
    gen = torch.Generator().manual_seed(0)
    lengths = [3, 5, 7, 11, 1, 10]  # Σ|o_i| = 37 tokens
    values = torch.randn(6, 11, generator=gen, dtype=torch.float64)
    mask = torch.tensor([[1.0] * n + [0.0] * (11 - n) for n in lengths], dtype=torch.float64)
    # this micro-batch as part of a larger optimiser step: 13 sequences, 7·13 = 91 tokens, L_max = 19
    n_seqs, n_tokens, max_len = (13, 91, 19) if global_counts else (6, 37, 11)
    norm = Normaliser(float(n_seqs), float(n_tokens), max_len) if global_counts else None
    got = aggregate(values, mask, mode, norm)
    want = _aggregate_by_loops(values, mask, mode, n_seqs, n_tokens, max_len)
    assert got.dtype == torch.float64
    assert abs(float(got) - want) <= 1e-12 * abs(want), (float(got), want)


def test_float32_weights_are_unchanged():
    """Float32 training keeps float32 normalisers, bit for bit: mask / count, with the count as a Python float."""
    from gcframe.engine import token_weights

    mask = MASK[:, :3]  # lengths 2 and 3: 1/5 and 1/6 are inexact in float32
    norm = Normaliser.of(mask)
    want = {"token-mean": mask / 5.0, "seq-mean-token-mean": mask / (mask.sum(-1, keepdim=True) * 2.0),
            "seq-mean-token-sum": mask / 2.0, "seq-mean-token-sum-norm": mask / (2.0 * 3)}
    for mode in AGGREGATIONS:
        w = token_weights(mask, mode, norm, torch.float32)
        assert w.dtype == torch.float32 and torch.equal(w, want[mode]), mode
    # values of a half-precision type are weighted in float32, not rounded further
    assert aggregate(VALUES.bfloat16(), MASK, "token-mean").dtype == torch.float32


def test_unknown_aggregation_lists_the_known_ones():
    with pytest.raises(UserError, match="token-mean"):
        aggregate(VALUES, MASK, "mean-of-everything")


def test_loss_gradient_is_gc_weighted_logp():
    # d/dlogp of -aggregate(GC·logp) under token-mean is -GC·mask/6
    logp = torch.zeros(2, 4, requires_grad=True)
    gc = torch.tensor([[2.0, -1.0, 5.0, 5.0], [1.0, 0.0, 3.0, 1.0]])
    weighted_mle_loss(gc, logp, MASK, "token-mean").backward()
    assert torch.allclose(logp.grad, -gc * MASK / 6)


def test_gc_is_detached():
    # a GC that depends on logp must not leak its own gradient into the loss
    logp = torch.randn(2, 4, requires_grad=True)
    weighted_mle_loss(logp * 3, logp, MASK, "token-mean").backward()
    assert torch.allclose(logp.grad, -(3 * logp.detach()) * MASK / 6)


# -- with a real model ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_and_tok():
    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), seed=0)
    return model.double(), tok


@pytest.fixture(scope="module")
def batch(model_and_tok):
    _, tok = model_and_tok
    prompts = ["1+2=", "12+34=", "5+5=", "99+1=", "7+80=", "3+4="]
    completions = ["3", "46", "10", "100", "87", ""]  # the last one is empty: only <eos> is trained
    return make_batch(tok, prompts, completions, group_ids=[0, 0, 1, 1, 2, 2])


def _grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def test_sft_gradient_equals_transformers_cross_entropy(model_and_tok, batch):
    model, tok = model_and_tok
    model.zero_grad()
    logp = token_logprobs(model, batch)
    weighted_mle_loss(torch.ones_like(logp), logp, batch.completion_mask, "token-mean").backward()
    ours = _grads(model).clone()

    # transformers' own loss: labels -100 on the prompt and on padding, the model shifts internally
    model.zero_grad()
    labels = torch.cat([torch.full_like(batch.prompt_ids, -100),
                        batch.completion_ids.masked_fill(batch.completion_mask == 0, -100)], dim=1)
    attn = batch.attention_mask
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    model(input_ids=batch.input_ids, attention_mask=attn, position_ids=pos, labels=labels).loss.backward()
    theirs = _grads(model)
    # transformers up-casts logits to float32 inside its loss, so agreement is to float32 precision
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-8)
    assert not torch.allclose(2 * ours, theirs, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_accumulation_equals_full_batch(model_and_tok, batch, mode):
    """One full batch vs the same batch in micro-batches with accumulation: the same gradient, every mode."""
    model, _ = model_and_tok
    gc = torch.linspace(-1, 2, batch.completion_ids.numel(), dtype=torch.float64).view_as(batch.completion_mask)
    batch.data["gc"] = gc
    norm = Normaliser.of(batch.completion_mask)

    model.zero_grad()
    logp = token_logprobs(model, batch)
    weighted_mle_loss(gc, logp, batch.completion_mask, mode, norm).backward()
    full = _grads(model).clone()

    model.zero_grad()
    for micro in batch.split(3):  # unequal lengths per micro-batch: the trap for per-micro normalisers
        logp = token_logprobs(model, micro)
        weighted_mle_loss(micro.data["gc"], logp, micro.completion_mask, mode, norm).backward()
    accumulated = _grads(model)
    assert torch.allclose(full, accumulated, rtol=1e-9, atol=1e-12)

    # and the naive per-micro-batch normaliser really differs (the bug this guards against), except where a
    # mode's counts happen to be split-proof
    model.zero_grad()
    for micro in batch.split(3):
        logp = token_logprobs(model, micro)
        (weighted_mle_loss(micro.data["gc"], logp, micro.completion_mask, mode) / 3).backward()
    if mode == "token-mean":
        assert not torch.allclose(full, _grads(model), rtol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_and_entropy_are_the_tempered_softmax(model_and_tok, batch, temperature):
    """logp = log softmax(z/τ)[o_t] and H = −Σ_v p_v log p_v from torch.distributions, at the completion tokens."""
    model, _ = model_and_tok
    logp, ent = token_logprobs(model, batch, temperature, with_entropy=True)
    T, a = batch.completion_ids.shape[1], batch.attention_mask
    z = model(input_ids=batch.input_ids, attention_mask=a, position_ids=(a.cumsum(-1) - 1).clamp(min=0)).logits
    dist = torch.distributions.Categorical(logits=z[:, -T - 1:-1] / temperature)  # position P-1+t predicts o_t
    m = batch.completion_mask
    torch.testing.assert_close(logp, dist.log_prob(batch.completion_ids) * m, rtol=0, atol=1e-10)
    torch.testing.assert_close(ent, dist.entropy() * m, rtol=0, atol=1e-10)
    assert (ent[m.bool()] > 0.1).all()  # a random model's distributions are far from one-hot: H is not trivially 0


def test_logprobs_ignore_left_padding(model_and_tok):
    """A prompt's log-probs do not depend on how much left padding its batch-mates force on it."""
    model, tok = model_and_tok
    alone = make_batch(tok, ["1+2="], ["3"])
    padded = make_batch(tok, ["1+2=", "123+456+7="], ["3", "586"])
    a = token_logprobs(model, alone)[0, :2]
    b = token_logprobs(model, padded)[0, :2]
    assert torch.allclose(a, b, atol=1e-10)


def test_split_keeps_groups_whole(batch):
    for part in batch.split(2, torch.Generator().manual_seed(0)):
        for g in part.group_ids.unique():
            assert int((part.group_ids == g).sum()) == int((batch.group_ids == g).sum())
    assert sum(len(p) for p in batch.split(2)) == len(batch)


@pytest.mark.parametrize("gc, words", [
    (1.0, "returned float 1.0, not a tensor"),
    (torch.ones(3), "returned GC of shape [3]: return a float tensor of logp's shape [N, T] = [3, 3], one coefficient "
                    "per completion token: a per-sequence coefficient g [N] is g[:, None].expand_as(logp)"),
    (torch.ones(3, 3, dtype=torch.long), "returned GC of dtype torch.int64"),
    (torch.tensor([[1.0, float("nan"), 1.0]] * 3), "returned GC with 3 non-finite entries (nan or inf) of 9"),
])
def test_the_engine_refuses_a_gc_it_would_misread_naming_the_method(gc, words):
    """issue 62: a GC of shape [N] with N == T broadcasts silently against [N, T] (each token of sequence i would take
    sequence t's coefficient); a float, an integer tensor or a nan are as wrong. One line, naming the method."""
    from gcframe.engine import check_gc
    from gcframe.errors import MethodError

    logp = torch.zeros(3, 3)
    with pytest.raises(MethodError, match=r"^method 'mine': coefficients\(batch, logp\) ") as e:
        check_gc(gc, logp, "mine")
    assert words in str(e.value) and "\n" not in str(e.value)
    check_gc(torch.ones(3, 3, dtype=torch.float64), logp, "mine")  # any float dtype of the right shape


def test_a_method_file_the_engine_cannot_call_is_refused_when_it_is_imported(tmp_path):
    from gcframe.plugins import load_file

    for name, body, words in [
        ("sig_only", "def collect(self, step):\n        return None\n    def coefficients(self, batch):\n"
         "        return batch", "defines coefficients(self, batch), but "
         "the engine calls coefficients(self, batch, logp): give it that signature"),
        ("collect_none", "def coefficients(self, batch, logp):\n        return logp", "has no collect of its own: "
         "define collect(self, step)"),
        ("prep_two", "def collect(self, step):\n        return None\n    def coefficients(self, batch, logp):\n"
         "        return logp\n    def prepare(self):\n        pass", "defines prepare(self), but the engine calls "
         "prepare(self, batch)"),
    ]:
        f = tmp_path / f"{name}.py"
        f.write_text(f"from methods import register\nfrom methods.base import Method\n\n\n@register('{name}')\n"
                     f"class M(Method):\n    {body}\n")
        with pytest.raises(UserError, match=rf"^--methods-from '{f}': method '{name}' ") as e:
            load_file(f)
        assert words in str(e.value)
        from methods import REGISTRY

        assert name not in REGISTRY  # refused, so not left among the registered methods
