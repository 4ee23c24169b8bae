"""experiments/compare.py end to end: the quick SFT run writes the documented layout."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gcframe import forkserver

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=ROOT, **env_extra):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **env_extra}
    return forkserver.run([sys.executable, "experiments/compare.py", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_reading_a_config_imports_no_heavy_library():
    """A bad config or argument is reported before torch, transformers and datasets load (seconds each)."""
    code = ("import sys; from gcframe.config import from_dict, load_yaml; "
            "raw = load_yaml('experiments/configs/default.yaml'); raw.pop('run', None); raw.pop('tune', None); "
            "raw.pop('families', None); "
            "from_dict(raw); "
            "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"


def test_list_methods_prints_registered_names():
    res = run("--list-methods")
    assert res.returncode == 0
    rows = [line.split(None, 1) for line in res.stdout.splitlines()]
    names = [r[0] for r in rows]
    assert names[0] == "sft" and len(names) == len(set(names))
    described = dict(rows)  # a one-line description per method, from its module docstring
    assert described["sft"] == "Supervised fine-tuning: imitate every demonstration equally"
    assert described["rloo"].startswith("REINFORCE Leave-One-Out (Ahmadian et al. 2024")


@pytest.fixture(scope="module")
def quick_sft(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "out"
    empty = tmp_path_factory.mktemp("empty-cache")  # --quick must finish from an empty cache (its stage 1 included)
    res = run("--methods", "sft", "--quick", "--out", str(out), "--no-progress", GCFRAME_CACHE=str(empty))
    assert res.returncode == 0, res.stderr[-2000:]
    return out, res


def test_quick_sft_layout(quick_sft):
    out, _ = quick_sft
    assert (out / "config.yaml").is_file()
    run_dir = out / "sft" / "seed0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval_accuracy" in r]
    assert len(train) == 8  # --quick: 8 steps
    assert all({"step", "loss", "gen_tokens", "time_s"} <= set(r) for r in train)
    assert all(0.0 <= r["eval_accuracy"] <= 1.0 for r in evals) and evals[-1]["step"] == 8
    times = [r["time_s"] for r in train]
    assert times == sorted(times)  # cumulative wall time
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and {"prompt", "completion"} <= set(samples[0])
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["method"]) == ["sft"] and 0.0 <= summary["final_accuracy"][0] <= 1.0


def test_quick_run_prints_and_records_its_threads(quick_sft):
    """The thread count (gcframe.tracking.threads) is the run's first line and is in env.json with its reason."""
    out, res = quick_sft
    assert res.stdout.splitlines()[0].startswith("threads: "), res.stdout[:500]
    env = json.loads((out / "env.json").read_text())
    assert env["threads_choice"]["threads"] == env["threads"] >= 1


def test_existing_out_is_not_overwritten(quick_sft):
    out, _ = quick_sft
    before = (out / "summary.csv").read_bytes()
    res = run("--methods", "sft", "--quick", "--out", str(out))
    assert res.returncode == 2
    assert "--overwrite" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert (out / "summary.csv").read_bytes() == before


@pytest.mark.parametrize("args, needle", [
    (["--methods", "nope"], "known methods are sft"),
    (["--steps", "0"], "train.steps must be positive"),
    (["--seeds", "a,b"], "--seeds"),
    (["--model", "/no/such/model"], "not found"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    res = run(*args, "--quick", "--out", str(tmp_path / "o"))
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_rft_pool_progress_never_counts_past_its_target():
    """The pool's last rollout may keep more correct samples than the pool still needs (4107 of a 4096 target):
    the progress counts up to the target, so it never reads 4107/4096."""
    from types import SimpleNamespace

    import torch

    from methods.rft import RFT

    class Bar:
        def __init__(self, total):
            self.total, self.n = total, 0

        def update(self, n):
            self.n += n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    bars = []

    def progress(total, desc, unit):
        bars.append(Bar(total))
        return bars[-1]

    class Batch(SimpleNamespace):
        def __len__(self):
            return 8

    def rollout(b, g, model=None):  # B·G = 8 samples, 7 of them correct
        return Batch(texts=[{"prompt": "p", "completion": "c"}] * 8, completion_mask=torch.ones(8, 3),
                     data={"correct": torch.tensor([1.0] * 7 + [0.0])})

    train = SimpleNamespace(prompts_per_step=2, group_size=4, steps=2)  # target = min(pool_size, 2 · 2 · 4) = 16
    ctx = SimpleNamespace(cfg=SimpleNamespace(train=train), frozen=lambda name: None, progress=progress,
                          rollout=rollout)
    info = RFT(RFT.Config(), ctx).build_pool()
    # rollouts keep 7, 14, 21 correct samples: the third overshoots the target 16 by 5
    assert info["pool_size"] == 21 and info["pool_samples"] == 24
    assert bars[0].total == 16 and bars[0].n == 16  # 7 + 7 + min(7, 16 − 14) = 16, not 21


def test_final_model_loads_with_plain_transformers_and_answers_as_evaluated(quick_sft):
    """The loading snippet of docs/concepts/runs.md, run as written on the run's final/ folder, decodes the same
    greedy answers as gcframe's own evaluation decoding (which opens every prompt with <bos>): the saved tokenizer
    adds it, so plain prompts get the model's trained answers ('12+34=' gave '' without it)."""
    import contextlib
    import io
    import re

    from gcframe.modeling import load_model_and_tokenizer
    from gcframe.sampling import GenerationConfig, Generator

    out, _ = quick_sft
    final = out / "sft" / "seed0" / "final"
    doc = (ROOT / "docs" / "concepts" / "runs.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "AutoTokenizer.from_pretrained" in b)
    assert 'tok("12+34="' in snippet and "bos" not in snippet.split("tok(", 1)[1].split(")")[0]  # plain text in
    prompts = ["12+34="] + [f"{a}+{b}=" for a, b in ((7, 58), (40, 40), (99, 1), (23, 61), (15, 15), (88, 9),
                                                      (31, 47), (60, 2), (5, 94), (72, 18), (44, 39))]
    model, tok = load_model_and_tokenizer(str(final))
    greedy = Generator(tok, GenerationConfig(max_new_tokens=8, temperature=0.0)).generate(model, prompts)
    evaluated = [t["completion"] for t in greedy.texts]
    printed = []
    for p in prompts:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(snippet.replace("OUT/grpo/seed0/final", str(final)).replace('"12+34="', repr(p)), {})
        printed.append(buf.getvalue().rstrip("\n"))
    assert printed == evaluated
    assert sum(bool(a) for a in evaluated) > len(prompts) // 2  # answers, not empty strings compared with each other


def test_quick_shrinks_and_names_what_it_replaced(tmp_path):
    """--quick caps the sizes a user's config sets (a group_size of 1 stays 1, so grpo refuses it as it would
    without --quick) and sets its own evaluation cadence; the values of the user's config it replaced are named
    (configs/default.yaml, used without --config, is --quick's to shrink silently)."""
    import yaml

    from experiments.compare import build_config, parse_args, quick_line

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"sft_base": {"steps": 400, "batch_size": 32},
                                    "train": {"steps": 40, "group_size": 1, "prompts_per_step": 16, "eval_every": 10},
                                    "methods": {"grpo@long": {"train": {"steps": 60}}}}))
    args = parse_args(["--config", str(path), "--quick", "--methods", "sft,grpo@long"])
    cfg = build_config(args)[0]
    # min(400, 300) = 300 and min(32, 64) = 32; min(40, 8) = 8, min(1, 4) = 1, min(16, 8) = 8; eval_every: --quick's 0
    assert (cfg.sft_base.steps, cfg.sft_base.batch_size) == (300, 32)
    assert (cfg.train.steps, cfg.train.group_size, cfg.train.prompts_per_step, cfg.train.eval_every) == (8, 1, 8, 0)
    assert quick_line(args.quick_replaced, cfg, ["sft", "grpo@long"]) == (
        "--quick (a smoke run) replaced your config's sft_base.steps 400 -> 300, train.steps 40 -> 8, "
        "train.prompts_per_step 16 -> 8, train.eval_every 10 -> 0, methods.grpo@long.train.steps 60 -> 8; drop "
        "--quick to run with your values")
    assert quick_line(args.quick_replaced, cfg, ["sft"]).count("grpo@long") == 0  # only the labels that run
    flags = parse_args(["--config", str(path), "--quick", "--steps", "3", "--methods", "sft"])
    assert build_config(flags)[0].train.steps == 3 and "train.steps" not in flags.quick_replaced  # the user's flag
    default = parse_args(["--quick", "--methods", "sft"])
    assert build_config(default)[0].train.steps == 8 and default.quick_replaced == {}
    # DPO's preference pairs: a smoke base of the default task (300 steps on slipped demonstrations) is right on few
    # samples (414 mixed prompts of 9,400 in one run), so --quick asks for 64 + 16 pairs, not 512 + 128
    rm = build_config(parse_args(["--quick", "--methods", "dpo"]))[0].reward_model
    assert (rm.pairs, rm.heldout_pairs) == (64, 16)


def test_quick_stage1_fits_the_token_budget_of_the_default_task():
    """A smoke stage 1 takes about as long on any data: steps x batch x the longest demonstration in tokens stays
    within QUICK_STAGE1_TOKENS = 300 · 64 · 11 = 211,200 (the default task's), and the batch is never larger than the
    demonstrations."""
    from types import SimpleNamespace

    from experiments.compare import QUICK_STAGE1_TOKENS, quick_stage1

    def run(demos, steps=300, batch=64):
        cfg = SimpleNamespace(sft_base=SimpleNamespace(steps=steps, batch_size=batch))
        task = SimpleNamespace(demos={"prompt": [p for p, _ in demos], "completion": [c for _, c in demos]})
        quick_stage1(cfg, task)
        return cfg.sft_base.steps, cfg.sft_base.batch_size

    assert QUICK_STAGE1_TOKENS == 211_200
    # '12+34=' '46': <bos> + 6 + 2 + <eos> = 10 tokens, the longest 11 ('99+99=' '198'): 211,200 // (64 · 11) = 300
    assert run([("12+34=", "46"), ("99+99=", "198")] * 500) == (300, 64)
    # 'What is 7 plus 5?' '12': 1 + 17 + 2 + 1 = 21 tokens; 200 rows: 211,200 // (64 · 21) = 157 steps
    assert run([("What is 7 plus 5?", "12")] * 200) == (157, 64)
    # 30 rows: a batch of 30, 211,200 // (30 · 21) = 335, capped at 300
    assert run([("What is 7 plus 5?", "12")] * 30) == (300, 30)
    assert run([("What is 7 plus 5?", "12")] * 30, steps=60) == (60, 30)  # a config's shorter stage 1 is kept


def test_saved_tokenizer_adds_bos_where_training_does_and_encodes_as_before():
    """with_prompt_bos (final_model.save): tok(text) gives encode_prompt's ids (<bos> + the text), the encoding
    gcframe uses (add_special_tokens=False) is unchanged, so a final model used as the next run's base trains on the
    same ids; the tokenizer it copies is left as it was, and a chat tokenizer (its template opens the prompt) too."""
    from gcframe.modeling import build_char_tokenizer, configure_tokenizer
    from gcframe.modeling.tokenizers import with_prompt_bos
    from gcframe.sampling import encode_prompt
    from tests.chat_models import build_chat_tokenizer

    tok = build_char_tokenizer()
    saved = with_prompt_bos(tok)
    assert saved("12+34=")["input_ids"] == encode_prompt(tok, "12+34=") == [tok.bos_token_id] + \
        tok("12+34=", add_special_tokens=False)["input_ids"]
    assert saved("12+34=", add_special_tokens=False)["input_ids"] == tok("12+34=", add_special_tokens=False)["input_ids"]
    assert tok("12+34=")["input_ids"][0] != tok.bos_token_id  # the training tokenizer itself is not changed
    chat = configure_tokenizer(build_chat_tokenizer())
    assert with_prompt_bos(chat) is chat


def test_a_smoke_run_says_what_it_is_in_its_summary_report_and_resume(quick_sft):
    """issue 62: --quick reported 0.000 for every method, base included, and nothing said a smoke run's numbers mean
    nothing. Its summary, OUT/config.yaml (`smoke`), its report and a --resume of its folder say so."""
    import yaml

    out, res = quick_sft
    said = ("a smoke run (--quick: a 300-step SFT base, 8 steps per method, 100 held-out problems): it shows that "
            "every part runs end to end; its accuracies do not compare the methods")
    assert f"This is {said}" in res.stdout
    assert yaml.safe_load((out / "config.yaml").read_text())["smoke"].startswith(said)
    assert f"**This is {said}" in (out / "report" / "summary.md").read_text()
    cache = next(out.parents[1].glob("empty-cache*"))  # the fixture's: its base is there
    again = run("--resume", str(out), "--no-progress", GCFRAME_CACHE=str(cache))
    assert again.returncode == 0 and f"This is {said}" in again.stdout, again.stderr[-2000:]
