"""Tests for gcframe.modeling: char tokenizer, tiny Llama, HF save/load, scalar-head model. All offline, CPU, tiny."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from gcframe.errors import UserError
from gcframe.modeling import (
    DEFAULT_CHARS,
    ModelConfig,
    ScalarHeadModel,
    build_char_tokenizer,
    build_tiny_llama,
    count_parameters,
    load_model_and_tokenizer,
    save_model_and_tokenizer,
)

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64)


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


@pytest.fixture(scope="module")
def lm(tok):
    return build_tiny_llama(tok, TINY, seed=0).eval()


# ----------------------------------------------------------------------------- tokenizer


def test_tokenizer_specials_and_vocab(tok):
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert len(tok) == 4 + len(DEFAULT_CHARS) == 100
    assert "\t" not in DEFAULT_CHARS and "\n" in DEFAULT_CHARS and " " in DEFAULT_CHARS
    assert tok.padding_side == "left"


def test_tokenizer_is_char_level_without_added_specials(tok):
    ids = tok("12+3=")["input_ids"]
    assert len(ids) == 5
    assert ids == [tok.convert_tokens_to_ids(c) for c in "12+3="]
    assert all(i >= 4 for i in ids)  # no bos/eos/unk
    assert len(set(ids)) == 5  # five distinct characters -> five distinct ids
    assert tok("a")["input_ids"] != tok("b")["input_ids"]


@pytest.mark.parametrize("text", ["12+3=15", "Hello, world .\n  x  y!", " leading and trailing ", "a\n\nb"])
def test_tokenizer_exact_decode(tok, text):
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids, skip_special_tokens=True) == text
    wrapped = [tok.pad_token_id, tok.bos_token_id] + ids + [tok.eos_token_id]
    assert tok.decode(wrapped, skip_special_tokens=True) == text


def test_tokenizer_unknown_char_maps_to_unk(tok):
    assert tok("\té")["input_ids"] == [tok.unk_token_id] * 2


def test_custom_charset():
    t = build_char_tokenizer("0123456789+=")
    assert len(t) == 16
    assert t("1+1=2")["input_ids"] == [5, 14, 5, 15, 6]
    with pytest.raises(UserError):
        build_char_tokenizer("")


def test_left_padding_batch(tok):
    batch = tok(["1+1=", "12+34="], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 6)
    assert batch["input_ids"][0].tolist() == [0, 0] + tok("1+1=")["input_ids"]
    assert batch["attention_mask"].tolist() == [[0, 0, 1, 1, 1, 1], [1] * 6]


def test_tokenizer_save_load_round_trip(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    t2 = AutoTokenizer.from_pretrained(tmp_path)
    text = "Ab 12+3=\n~"
    assert t2(text)["input_ids"] == tok(text)["input_ids"]
    assert t2.get_vocab() == tok.get_vocab()
    assert (t2.pad_token, t2.bos_token, t2.eos_token, t2.unk_token) == ("<pad>", "<bos>", "<eos>", "<unk>")
    assert t2.padding_side == "left"
    assert t2.decode(t2(text)["input_ids"]) == text


# ----------------------------------------------------------------------------- model


def test_default_config_param_count(tok):
    n = count_parameters(build_tiny_llama(tok, ModelConfig()))
    assert 900_000 <= n <= 1_200_000


def test_build_is_deterministic_and_float32(tok):
    a, b, c = (build_tiny_llama(tok, TINY, seed=s) for s in (0, 0, 1))
    assert a.dtype == torch.float32
    assert a.config.tie_word_embeddings and a.lm_head.weight.data_ptr() == a.model.embed_tokens.weight.data_ptr()
    assert a.config.vocab_size == len(tok) and a.config.pad_token_id == 0 and a.config.eos_token_id == 2
    for (n, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), n
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


def test_bad_config_raises(tok):
    with pytest.raises(UserError):
        build_tiny_llama(tok, ModelConfig(hidden_size=30, num_heads=4))


def test_save_load_round_trip_same_logits(tok, lm, tmp_path):
    save_model_and_tokenizer(lm, tok, str(tmp_path / "ckpt"))
    m2, t2 = load_model_and_tokenizer(str(tmp_path / "ckpt"))
    m2.eval()
    texts = ["1+1=", "123+456=", "hi"]
    b1 = tok(texts, padding=True, return_tensors="pt")
    b2 = t2(texts, padding=True, return_tensors="pt")
    assert torch.equal(b1["input_ids"], b2["input_ids"])
    with torch.no_grad():
        l1 = lm(**b1).logits
        l2 = m2(**b2).logits
    assert l1.shape == (3, 8, len(tok))
    torch.testing.assert_close(l1, l2, atol=1e-6, rtol=0)
    assert t2.padding_side == "left" and m2.config.pad_token_id == t2.pad_token_id == 0


def test_load_sets_pad_to_eos_when_missing(tok, lm, tmp_path):
    t = build_char_tokenizer()
    t.pad_token = None
    save_model_and_tokenizer(lm, t, str(tmp_path))
    _, t2 = load_model_and_tokenizer(str(tmp_path))
    assert t2.pad_token_id == t2.eos_token_id == 2


def test_load_bf16(tok, lm, tmp_path):
    save_model_and_tokenizer(lm, tok, str(tmp_path))
    m2, _ = load_model_and_tokenizer(str(tmp_path), dtype=torch.bfloat16)
    assert next(m2.parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize("bad", ["/definitely/not/a/model_dir", "./no such dir/x", "../x/y/z"])
def test_missing_path_raises_user_error(bad):
    with pytest.raises(UserError) as e:
        load_model_and_tokenizer(bad)
    msg = str(e.value)
    assert f"'{bad}'" in msg and "not found" in msg and "\n" not in msg


def test_dir_without_model_raises_user_error(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(UserError, match="no config.json"):
        load_model_and_tokenizer(str(tmp_path))


def test_generate_with_left_padded_prompts(tok, lm):
    prompts = ["1+1=", "12+34="]
    batch = tok(prompts, padding=True, return_tensors="pt")
    torch.manual_seed(0)
    out = lm.generate(**batch, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[0] == 2 and 6 < out.shape[1] <= 11
    assert torch.equal(out[:, :6], batch["input_ids"])  # prompt kept, completion appended on the right
    # left padding must not change the greedy continuation of the shorter prompt
    alone = tok(prompts[:1], return_tensors="pt")
    out1 = lm.generate(**alone, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    n = min(out1.shape[1] - 4, out.shape[1] - 6)
    assert torch.equal(out[0, 6 : 6 + n], out1[0, 4 : 4 + n])
    assert isinstance(tok.decode(out[0, 6:], skip_special_tokens=True), str)


# ----------------------------------------------------------------------------- scalar head


def test_scalar_head_shape_and_zero_init(tok, lm):
    vm = ScalarHeadModel.from_causal_lm(lm)
    batch = tok(["1+1=2", "12+34=46"], padding=True, return_tensors="pt")
    v = vm(batch["input_ids"], batch["attention_mask"])
    assert v.shape == (2, 8) and v.dtype == torch.float32
    assert v._base is None  # not a view: FSDP2 hooks the backward's all-gather onto it, and a view may lose the hook
    assert torch.count_nonzero(v) == 0  # zero head -> zero values
    assert torch.count_nonzero(vm.head.weight) == 0 and torch.count_nonzero(vm.head.bias) == 0
    assert count_parameters(vm) == count_parameters(lm.model) + TINY.hidden_size + 1


def test_scalar_head_backbone_is_a_copy(tok):
    lm = build_tiny_llama(tok, TINY, seed=3)
    before = {n: p.detach().clone() for n, p in lm.named_parameters()}
    vm = ScalarHeadModel.from_causal_lm(lm)
    lm_ptrs = {p.data_ptr() for p in lm.parameters()}
    assert not lm_ptrs & {p.data_ptr() for p in vm.parameters()}
    # same initial weights ...
    for (n, p), q in zip(lm.model.named_parameters(), vm.backbone.parameters()):
        assert torch.equal(p, q), n
    # ... but training the value model leaves the LM untouched
    with torch.no_grad():
        for p in vm.backbone.parameters():
            p.add_(1.0)
    for n, p in lm.named_parameters():
        assert torch.equal(p, before[n]), n


def test_scalar_head_gradients_and_left_padding_invariance(tok, lm):
    vm = ScalarHeadModel.from_causal_lm(lm)
    torch.nn.init.normal_(vm.head.weight, std=0.1)
    batch = tok(["1+1=", "12+34="], padding=True, return_tensors="pt")
    v = vm(batch["input_ids"], batch["attention_mask"])
    alone = tok(["1+1="], return_tensors="pt")
    v1 = vm(alone["input_ids"], alone["attention_mask"])
    torch.testing.assert_close(v[0, 2:], v1[0], atol=1e-5, rtol=1e-5)  # padding does not shift values
    v.sum().backward()
    assert vm.head.weight.grad is not None and vm.backbone.embed_tokens.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in lm.parameters())


def test_scalar_head_save_load(tok, lm, tmp_path):
    vm = ScalarHeadModel.from_causal_lm(lm)
    torch.nn.init.normal_(vm.head.weight, std=0.1)
    vm.save(str(tmp_path / "vm"))
    vm2 = ScalarHeadModel.load(str(tmp_path / "vm"))
    ids = tok(["3*4=12"], return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(vm(**ids), vm2(**ids), atol=1e-6, rtol=0)
    with pytest.raises(UserError):
        ScalarHeadModel.load(str(tmp_path / "nothing"))


def test_scalar_head_keeps_its_lm_head_as_tensors_only(tok, lm, tmp_path):
    vm = ScalarHeadModel.from_causal_lm(lm, with_lm_head=True)
    vm.save(str(tmp_path / "vm"))
    state = torch.load(tmp_path / "vm" / "lm_head.pt", weights_only=True)  # a state dict: loads without pickle code
    assert set(state) == {k for k, _ in vm.lm_head.named_parameters()}
    vm2 = ScalarHeadModel.load(str(tmp_path / "vm"))
    assert torch.equal(vm2.lm_head.weight, vm.lm_head.weight) and type(vm2.lm_head) is torch.nn.Linear
    torch.save(vm.lm_head, tmp_path / "vm" / "lm_head.pt")  # a whole pickled module: refused, never unpickled
    with pytest.raises(UserError, match=r"lm_head.pt is not a saved LM head .* delete it"):
        ScalarHeadModel.load(str(tmp_path / "vm"))
