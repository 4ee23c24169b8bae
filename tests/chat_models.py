"""Tiny chat models built offline, for testing the real-model path in CI: a byte-level BPE tokenizer trained on a
few lines, with special tokens and a ChatML chat template like SmolLM2's (<|im_start|> as bos, <|im_end|> closing
a turn, no pad token), and a randomly initialised Llama of any size."""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

# SmolLM2-135M-Instruct's template (as its GGUF carries it): a default system turn when none is given
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a helpful AI assistant<|im_end|>\\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = ["What is 12+34? Answer with the number only.", "The answer is 46.", "You are a helpful AI assistant",
          "system user assistant 0123456789 + = ; #### \\boxed{}", "Add the numbers from left to right and write "
          "each running total, separated by ';'. The last total is the answer."] * 20


def build_chat_tokenizer(vocab_size: int = 400, chat_template: str | None = CHATML) -> PreTrainedTokenizerFast:
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", chat_template=chat_template)


def build_chat_model(path: Path, hidden: int = 64, layers: int = 2, chat_template: str | None = CHATML,
                     seed: int = 0, save_tokenizer: bool = True) -> Path:
    """Save a tiny random Llama and the BPE chat tokenizer into `path` (a Hugging Face folder)."""
    tok = build_chat_tokenizer(chat_template=chat_template)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), tie_word_embeddings=True)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(path)
    if save_tokenizer:
        tok.save_pretrained(path)
    return Path(path)


def build_chat_gguf(path: Path, hidden: int = 64, layers: int = 2) -> Path:
    """Write a tiny random Llama with the BPE chat tokenizer as a GGUF file, as llama.cpp's converter lays one out:
    llama.* hyper-parameters, float32 tensors under GGUF names (token_embd, blk.N.attn_q, ..., output_norm; no
    output.weight, so the embedding is tied), the tokenizer as 'gpt2' BPE with its merges, and the ChatML template."""
    import json

    import gguf
    import numpy as np

    tok = build_chat_tokenizer()
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    heads, kv_heads, ffn = 4, 2, 2 * hidden
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIALS else 1 for t in tokens])  # 3 = control token
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(vocab["<|im_start|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_chat_template(CHATML)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (len(tokens), hidden), "output_norm.weight": (hidden,)}
    for i in range(layers):
        kv = hidden * kv_heads // heads
        shapes.update({f"blk.{i}.attn_norm.weight": (hidden,), f"blk.{i}.ffn_norm.weight": (hidden,),
                       f"blk.{i}.attn_q.weight": (hidden, hidden), f"blk.{i}.attn_k.weight": (kv, hidden),
                       f"blk.{i}.attn_v.weight": (kv, hidden), f"blk.{i}.attn_output.weight": (hidden, hidden),
                       f"blk.{i}.ffn_gate.weight": (ffn, hidden), f"blk.{i}.ffn_up.weight": (ffn, hidden),
                       f"blk.{i}.ffn_down.weight": (hidden, ffn)})
    for name, shape in shapes.items():
        value = np.ones(shape) if name.endswith("norm.weight") else 0.02 * rng.standard_normal(shape)
        w.add_tensor(name, value.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
