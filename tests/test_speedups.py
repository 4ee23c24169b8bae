"""The engine's speed-ups change no result: a group's prompt computed once (log-probs and their gradients, and
generation's prefill), prompts tokenised in one call, fused AdamW; and a step reports its phase times."""
import tempfile

import pytest
import torch

from gcframe import engine, sampling
from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama
from gcframe.sampling import encode_completion, encode_completions, encode_prompt, encode_prompts, make_batch
from gcframe.trainer import adamw

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)


@pytest.fixture()
def always_share(monkeypatch):
    monkeypatch.setattr(engine, "MIN_SHARED_TOKENS", 0)  # share even the tiny batches of a test


def _groups(tok):
    # prompts of different lengths (left padding), groups of unequal size, rows of a group not adjacent
    prompts = ["12+3=", "7+7=", "12+3=", "7+7=", "12+3=", "1=", "1="]
    comps = ["15", "14", "1", "", "153;", "1", "22"]
    return (make_batch(tok, prompts, comps, group_ids=[0, 1, 0, 1, 0, 2, 2]),
            make_batch(tok, prompts, comps))  # one group per row: the plain full-sequence forward


def test_shared_prompt_logprobs_and_gradients_equal_the_full_forward(always_share):
    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, TINY).double()
    grouped, single = _groups(tok)
    assert engine.shared_prompts(grouped) is not None and engine.shared_prompts(single) is None
    w = torch.arange(1.0, 8.0, dtype=torch.float64).unsqueeze(1)  # a different weight per row
    outs = []
    for b in (grouped, single):
        logp, ent = engine.token_logprobs(model, b, temperature=0.7, with_entropy=True)
        grads = torch.autograd.grad((w * logp).sum(), list(model.parameters()))
        outs.append((logp, ent, grads))
    (lp1, e1, g1), (lp2, e2, g2) = outs
    torch.testing.assert_close(lp1, lp2, rtol=0, atol=1e-12)
    torch.testing.assert_close(e1, e2, rtol=0, atol=1e-12)
    for a, b in zip(g1, g2):  # HF's RMSNorm computes in float32 even for a float64 model: ~1e-7 relative
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_shared_prompts_only_when_a_group_really_shares_its_prompt(always_share, monkeypatch):
    tok = build_char_tokenizer()
    mixed = make_batch(tok, ["1+1=", "2+2="], ["2", "4"], group_ids=[0, 0])  # one group, two prompts
    assert engine.shared_prompts(mixed) is None
    same = make_batch(tok, ["1+1=", "1+1="], ["2", "3"], group_ids=[0, 0])
    first, inv = engine.shared_prompts(same)
    assert first.tolist() == [0] and inv.tolist() == [0, 0]
    # saves 1 row x 5 prompt tokens (<bos>1+1=) = 5 tokens: below a threshold of 6 nothing is shared
    monkeypatch.setattr(engine, "MIN_SHARED_TOKENS", 6)
    assert engine.shared_prompts(same) is None


def _decode_beside_hf(model, ids, mask, n, steps, eos_id, pad_id, monkeypatch):
    """(decode's greedy tokens and the logits it sampled from, HF generate's greedy output without any sharing)."""
    seen, inner = [], sampling.sample_tokens
    monkeypatch.setattr(sampling, "sample_tokens", lambda z, t: seen.append(z) or inner(z, t))
    with torch.no_grad():
        ours = sampling.decode(model, ids, mask, n, steps, 0.0, eos_id, pad_id)
        hf = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=steps, do_sample=False, top_k=None,
                            top_p=None, temperature=None, pad_token_id=pad_id, eos_token_id=eos_id,
                            output_logits=True, return_dict_in_generate=True)
    return ours, seen, hf


def test_decoding_with_a_shared_prefill_is_hf_generate(always_share, monkeypatch):
    """decode (the group's prompt prefilled once, one forward per token) against HF generate on every row: the same
    greedy tokens and the same logits at every step."""
    torch.manual_seed(0)
    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, TINY).eval()
    n = 3
    rows = [ids for ids in encode_prompts(tok, ["12+34=", "5=", "99+1="]) for _ in range(n)]
    from gcframe.batch import pad_left

    ids, mask = pad_left(rows, tok.pad_token_id)
    assert sampling.shared_prefill(model, ids[::n], mask[::n], n)  # the decode below starts from a shared cache
    ours, seen, hf = _decode_beside_hf(model, ids, mask, n, 6, None, tok.pad_token_id, monkeypatch)
    assert torch.equal(ours, hf.sequences[:, ids.shape[1]:])
    assert len(seen) == len(hf.logits) == 6
    for la, lb in zip(seen, hf.logits):
        torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-5)


def test_decoding_stops_when_every_row_has_ended_and_pads_after_eos(monkeypatch):
    torch.manual_seed(0)
    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, TINY).eval()
    from gcframe.batch import pad_left

    ids, mask = pad_left(encode_prompts(tok, ["12+34=", "5="]), tok.pad_token_id)
    first = sampling.decode(model, ids, mask, 1, 1, 0.0, None, tok.pad_token_id)  # each row's greedy first token
    eos = int(first[0, 0])  # call row 0's first token <eos>: row 0 ends at once, row 1 goes on
    ours, _, hf = _decode_beside_hf(model, ids, mask, 1, 6, eos, tok.pad_token_id, monkeypatch)
    assert torch.equal(ours, hf.sequences[:, ids.shape[1]:])
    assert ours[0, 0] == eos and (ours[0, 1:] == tok.pad_token_id).all()  # pad after its <eos>
    assert ours.shape[1] == 6 or (ours[:, -1] == eos).any()  # it ran on until the last row ended, or to the limit
    assert (sampling.decode(model, ids[:1], mask[:1], 1, 6, 0.0, eos, tok.pad_token_id).shape == (1, 1))  # stops


def test_a_model_that_fills_no_cache_decodes_the_same(monkeypatch):
    """Decoding falls back to the whole sequence at every step when the model keeps no KV cache."""
    torch.manual_seed(0)
    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, TINY).eval()

    class NoCache(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, **kw):
            kw.pop(engine.cache_kwarg(self.m))
            return self.m(**{**kw, "use_cache": False})

    from gcframe.batch import pad_left

    ids, mask = pad_left(encode_prompts(tok, ["12+34=", "5="]), tok.pad_token_id)
    a = sampling.decode(model, ids, mask, 1, 5, 0.0, None, tok.pad_token_id)
    b = sampling.decode(NoCache(model), ids, mask, 1, 5, 0.0, None, tok.pad_token_id)
    assert torch.equal(a, b)


def test_sampled_tokens_follow_the_softmax_at_the_temperature():
    """Inverse-CDF sampling draws from softmax(z / T) exactly; a token of probability 0 is never drawn."""
    p = torch.tensor([0.1, 0.2, 0.3, 0.0, 0.4])
    z = p.log().expand(4000, 5)  # log 0 = -inf
    torch.manual_seed(0)
    for T, expected in [(1.0, p), (0.5, p ** 2 / (p ** 2).sum())]:  # T = 0.5: p² / Σp² = [.01 .04 .09 0 .16] / .30
        draws = torch.cat([sampling.sample_tokens(z, T) for _ in range(25)])  # 100,000 draws
        freq = torch.bincount(draws, minlength=5).double() / len(draws)
        assert freq[3] == 0
        sd = (expected * (1 - expected) / len(draws)).sqrt()  # binomial standard error, at most 0.0016
        assert ((freq - expected).abs() <= 4 * sd + 1e-12).all(), (T, freq)
    assert torch.equal(sampling.sample_tokens(torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 1.0]]), 0.0),
                       torch.tensor([1, 0]))  # T = 0: greedy
    with pytest.raises(FloatingPointError):
        sampling.sample_tokens(torch.tensor([[0.0, float("nan"), 1.0]]), 1.0)


def test_batched_encoding_is_the_per_text_encoding():
    tok = build_char_tokenizer()
    texts = ["12+34=", "", " a\nb", "46;102"]
    assert encode_prompts(tok, texts) == [encode_prompt(tok, t) for t in texts]
    assert encode_completions(tok, texts) == [encode_completion(tok, t) for t in texts]
    assert encode_prompts(tok, []) == []


def test_fused_adamw_takes_the_same_step():
    torch.manual_seed(0)
    p, q = torch.nn.Parameter(torch.randn(5)), None
    q = torch.nn.Parameter(p.detach().clone())
    opts = [adamw([p], lr=0.1, weight_decay=0.01), torch.optim.AdamW([q], lr=0.1, weight_decay=0.01)]
    for _ in range(3):
        for x, o in zip((p, q), opts):
            x.grad = torch.linspace(-1, 1, 5)
            o.step()
    torch.testing.assert_close(p, q)


@pytest.mark.parametrize("method,phases", [("grpo", {"generate", "score"}), ("ppo", {"generate", "score", "critic"})])
def test_a_step_reports_its_phase_times(method, phases):
    from experiments.bench_common import SIZES, Size, build_base, make_trainer

    size = Size("test", 32, 2, 4, 64, prompts=2, group=2, new_tokens=4)
    with tempfile.TemporaryDirectory() as tmp:
        build_base(size, f"{tmp}/base")
        tr = make_trainer(method, size, f"{tmp}/base", f"{tmp}/run", steps=1)
        row, _ = tr.train_step(0)
        tr.logger.close()
    for k in ("collect", "prepare", "update", *phases):
        assert row[f"time_{k}"] >= 0.0
    assert row["time_generate"] <= row["time_collect"]
    assert set(SIZES) == {"small", "compute"}


def test_the_policy_samples_in_eval_mode_and_a_step_that_never_samples_switches_no_mode():
    from experiments.bench_common import Size, build_base, make_trainer

    size = Size("test", 32, 2, 4, 64, prompts=2, group=2, new_tokens=4)
    with tempfile.TemporaryDirectory() as tmp:
        build_base(size, f"{tmp}/base")
        seen = {}
        for method in ("grpo", "sft"):
            tr = make_trainer(method, size, f"{tmp}/base", f"{tmp}/{method}", steps=2)
            policy, inner = tr.ctx.policy, tr.ctx.generator.generate
            switches = []
            tr.ctx.generator.generate = lambda model, *a, **k: (switches.append(("sample", model.training)),
                                                                 inner(model, *a, **k))[1]
            tr.train_step(0)  # the first step puts the freshly loaded (eval-mode) policy into train mode
            assert policy.training
            real_train = policy.train
            policy.train = lambda mode=True: (switches.append(mode), real_train(mode))[1]
            tr.train_step(1)
            del policy.train
            tr.logger.close()
            assert policy.training  # the update ran in train mode, and it stays there
            seen[method] = switches
    # step 0 samples in eval mode; step 1: eval for sampling, sample, back to train (one switch each way)
    assert seen["grpo"] == [("sample", False), False, ("sample", False), True]
    assert seen["sft"] == []  # SFT never samples: no eval/train walk over the modules


def test_drawing_from_a_dataset_reads_the_same_rows_as_from_a_list():
    from datasets import Dataset

    from gcframe.context import Context

    rows = [{"prompt": f"{i}+1=", "completion": str(i + 1), "steps": [i, i + 1]} for i in range(7)]
    got = []
    for data in (Dataset.from_list(rows), rows):
        ctx = type("Ctx", (), {})()  # only what Context.draw reads
        ctx.rng, ctx._orders, ctx.rank, ctx.world = torch.Generator().manual_seed(3), {}, 0, 1
        got.append([Context.draw(ctx, data, 5, "x") for _ in range(3)])  # 15 rows: crosses a reshuffle
    assert got[0] == got[1]
    assert len({r["prompt"] for r in got[1][0] + got[1][1][:2]}) == 7  # the first 7 rows are one permutation


def test_a_runs_peak_memory_is_its_own_not_the_processes():
    from experiments.bench_common import Size, build_base, make_trainer
    from gcframe.tracking import memory

    if not memory.reset_peak() or memory.peak_rss_mb() is None:
        pytest.skip("this OS cannot restart the RSS peak (Linux >= 4.0 with /proc only)")
    size = Size("test", 32, 2, 4, 64, prompts=2, group=2, new_tokens=4)
    with tempfile.TemporaryDirectory() as tmp:
        build_base(size, f"{tmp}/base")
        big = torch.ones(300 * 2**20 // 4)  # 300 MiB touched, then freed: an earlier run's peak
        del big
        before = memory.peak_rss_mb()
        tr = make_trainer("sft", size, f"{tmp}/base", f"{tmp}/run", steps=1)
        row, _ = tr.train_step(0)
        tr.logger.close()
    assert before - row["peak_rss_mb"] > 200  # the freed 300 MiB is not this run's peak
    assert row["peak_rss_mb"] >= memory.rss_mb() - 50  # but the run's own memory is
    assert 0 <= row["peak_rss_run_mb"] < 100  # its growth: a 10k-parameter model, its AdamW state, activations


def test_decoding_a_chat_model_under_lora_is_hf_generate(always_share, tmp_path, monkeypatch):
    """decode's shared prefill on a real BPE tokenizer with a chat template, through a peft LoRA model and its
    adapter-disabled view (π_ref): the same greedy tokens and logits as HF generate with a prefill of every row."""
    from gcframe.batch import pad_left
    from gcframe.modeling import AdapterDisabled, load_model_and_tokenizer, prepare_policy
    from gcframe.tasks import TaskConfig, build_task
    from tests.chat_models import build_chat_model

    model, tok = load_model_and_tokenizer(build_chat_model(tmp_path / "chat"))
    model = prepare_policy(model, lora_rank=4).eval()
    for name, p in model.named_parameters():  # B starts at 0: give the adapters a value so their effect shows
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    task = build_task(TaskConfig(n_demos=4, n_heldout=4), tok)
    n, prompts = 3, [task.heldout[i]["prompt"] for i in range(2)]
    ids, mask = pad_left([r for r in encode_prompts(tok, prompts) for _ in range(n)], tok.pad_token_id)
    firsts = []
    for m in (model, AdapterDisabled(model)):
        assert sampling.shared_prefill(m, ids[::n], mask[::n], n)  # a cache was built
        ours, seen, hf = _decode_beside_hf(m, ids, mask, n, 5, None, tok.pad_token_id, monkeypatch)
        assert torch.equal(ours, hf.sequences[:, ids.shape[1]:])
        for la, lb in zip(seen, hf.logits, strict=True):
            torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-5)
        firsts.append(seen[0])
    assert not torch.allclose(firsts[0], firsts[1])  # the adapter changed the policy: both paths were exercised


def test_a_shared_step0_evaluation_changes_no_number(tmp_path):
    """compare.py's OUT/step0_evals: a run that reads the step-0 evaluation another run of its seed wrote logs
    exactly what it would have computed itself: the evaluation's numbers, its per-problem rows and every training row
    after it. Other evaluation settings are another file."""
    from experiments.bench_common import Size, build_base, make_trainer
    from gcframe.tracking.log import read_jsonl

    size = Size("test", 32, 2, 4, 64, prompts=2, group=4, new_tokens=4)
    build_base(size, tmp_path / "base")
    shared = tmp_path / "step0_evals"

    def run(method, name, folder, k=2):
        tr = make_trainer(method, size, str(tmp_path / "base"), str(tmp_path / name), steps=3)
        tr.tcfg.eval_k, tr.tcfg.eval_every, tr.tcfg.eval_size, tr.step0_evals = k, 2, 8, folder
        tr.fit()
        return read_jsonl(tmp_path / name / "metrics.jsonl")

    def numbers(rows):
        return [{k: v for k, v in r.items() if not k.startswith(("time", "peak_")) and k != "eval_shared"}
                for r in rows]

    first = run("grpo", "a", shared)  # computes and writes
    assert len(list(shared.glob("*.pt"))) == 1 and "eval_shared" not in first[0]
    got = run("rloo", "b", shared)  # reads it
    alone = run("rloo", "c", None)  # computes it itself
    assert got[0]["eval_shared"] == 1 and got[0]["time_eval"] == 0.0
    assert numbers(got) == numbers(alone) and len(got) == len(alone) == 6  # 3 steps, evaluated at 0, 2, 3
    problems = [read_jsonl(tmp_path / name / "problems.jsonl") for name in ("b", "c")]
    assert problems[0] == problems[1] and len(problems[0]) == 3 * 8  # 8 problems at steps 0, 2 and 3
    run("rloo", "d", shared, k=1)  # pass@1 from one sample: another evaluation, another file
    assert len(list(shared.glob("*.pt"))) == 2
