"""Tokenizers: the character-level tokenizer of the tiny model, and what a chat tokenizer's template implies
(its end-of-turn token, a pad token where it has none)."""
from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from gcframe.errors import UserError

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]  # ids 0, 1, 2, 3
DEFAULT_CHARS = "".join(c for c in string.printable if c not in "\t\r\x0b\x0c")  # 96 chars, incl. "\n" and " "



def build_char_tokenizer(chars: str | None = None) -> PreTrainedTokenizerFast:
    """Character-level tokenizer: <pad>=0, <bos>=1, <eos>=2, <unk>=3, then one id per character.

    Encoding adds no special tokens, `decode` returns the exact text (no inserted spaces),
    padding is on the left (so generation continues right after the prompt).
    """
    chars = DEFAULT_CHARS if chars is None else chars
    uniq = list(dict.fromkeys(chars))  # de-duplicate, keep order
    if not uniq:
        raise UserError("build_char_tokenizer got an empty character set: pass at least one character")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + uniq)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # every single character (newline and space included) is its own pre-token
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tk.decoder = decoders.Fuse()  # concatenate tokens as-is
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        clean_up_tokenization_spaces=False,  # would turn "a ." into "a."
        add_bos_token=False,
        add_eos_token=False,
    )
    return tok



# -----------------------------------------------------------------------------
# chat tokenizers


def special_tokens(tok) -> set[str]:
    """The tokenizer's special tokens: the named ones (bos/eos/pad/...) and added tokens marked special
    (<|im_start|>, <|im_end|>, ...)."""
    out = set(tok.all_special_tokens)
    out.update(t.content for t in getattr(tok, "added_tokens_decoder", {}).values() if getattr(t, "special", False))
    return out


def has_chat_template(tok) -> bool:
    return bool(getattr(tok, "chat_template", None))


def end_of_turn_token(tok) -> str | None:
    """The token a chat template closes an assistant turn with (ChatML's <|im_end|>, Llama 3's <|eot_id|>), read off
    the template itself: the first special token rendered after a probe reply. None without a template."""
    if not has_chat_template(tok):
        return None
    probe = "gcframe-probe-reply"
    try:
        text = tok.apply_chat_template([{"role": "user", "content": "q"}, {"role": "assistant", "content": probe}],
                                       tokenize=False)
    except Exception:  # a template that refuses this conversation shape: fall back to eos
        return None
    tail = text.split(probe, 1)[-1]
    for token in sorted(special_tokens(tok), key=len, reverse=True):
        if tail.lstrip().startswith(token):
            return token
    return None


def with_prompt_bos(tok):
    """The tokenizer a trained model is saved with. Training opens every plain-text prompt with <bos>
    (`gcframe.sampling.encode_prompt`); where `tok(text)` would not, this returns a copy whose `tok(text)` does
    (transformers' `add_bos_token`), so `AutoTokenizer.from_pretrained(final)` gives plain `transformers` code the
    prompts the model was trained on ('12+34=' -> <bos>12+34=). `add_special_tokens=False`, which is how gcframe
    encodes, is unchanged. A chat tokenizer is returned as it is: its template opens the prompt itself."""
    import copy

    if tok.bos_token_id is None or has_chat_template(tok):
        return tok
    ids = tok("0")["input_ids"]
    if ids and ids[0] == tok.bos_token_id:
        return tok  # it adds <bos> already
    out = copy.deepcopy(tok)
    out.add_bos_token = True
    added = out("0")["input_ids"]
    return out if added and added[0] == tok.bos_token_id else tok  # a tokenizer that ignores it: as it was


def configure_tokenizer(tok):
    """What gcframe expects of every tokenizer: left padding (generation continues right after the prompt); eos =
    the template's end-of-turn token where the tokenizer has a chat template (a completion is one assistant turn:
    sampling stops there and demonstrations end with it); a pad token (eos where it has none)."""
    eot = end_of_turn_token(tok)
    if eot is not None and eot != tok.eos_token:
        tok.eos_token = eot
    if tok.eos_token is None:
        raise UserError("the tokenizer has no eos token and no chat template to take an end-of-turn token from: "
                        "set tokenizer.eos_token and save it beside the model")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok
