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
