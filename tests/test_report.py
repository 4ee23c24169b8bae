"""analysis.report on synthetic run folders (with a torn last line) and analysis.gc_view on a tiny untrained model."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

import torch
import yaml

from analysis import gc_view
from analysis.report import mean_ci, write_report
from gcframe.errors import resume_command  # the command as the messages print it (paths quoted)

K = 4
ROOT = Path(__file__).resolve().parents[1]


def _eval_row(step, acc, kl=None, proxy=None, sampled=True):
    row = {"step": step, "eval_accuracy": acc, "gen_tokens": 100 * step, "time_s": 2.0 * step}
    if sampled:
        row.update(eval_pass1=acc - 0.05, eval_passk=0.8, eval_majk=acc + 0.02, eval_kl_ref=kl if step else 0.0)
        if proxy is not None:
            row["eval_proxy_reward"] = proxy
    return row


def _train_row(step, reward, kl=None):
    row = {"step": step, "loss": 0.1, "reward_mean": reward, "accuracy": reward, "gen_tokens": 100 * (step + 1),
           "time_s": 2.0 * (step + 1), "time_collect": 1.5, "time_generate": 1.0, "time_prepare": 0.1,
           "time_update": 0.4, "peak_rss_mb": 500.0 + step, "peak_rss_run_mb": 60.0 + step}
    if kl is not None:
        row["kl_ref"] = kl
    return row


def _write_run(out: Path, method: str, seed: int, final_acc: float, reward: str = "verifier", kl: bool = True,
               torn: bool = False):
    d = out / method / f"seed{seed}"
    d.mkdir(parents=True)
    rows = [_eval_row(0, 0.4)]
    for s in range(10):
        rows.append(_train_row(s, 0.4 + 0.02 * s, 0.01 * s if kl else None))
        if s + 1 == 5:
            rows.append(_eval_row(5, (0.4 + final_acc) / 2, sampled=False))
    rows.append(_eval_row(10, final_acc, kl=0.05, proxy=1.5 if reward == "reward_model" else None))
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if torn:  # a crash mid-write: half a JSON object, no newline
        text += json.dumps(_train_row(10, 0.9))[:25]
    (d / "metrics.jsonl").write_text(text)
    (d / "config.yaml").write_text(yaml.safe_dump({"method": method.split("@")[0], "seed": seed,
                                                   "train": {"eval_k": K, "reward": reward}}))


def _synthetic_gc() -> dict:
    probe = [{"prompt": "1+2+3=", "completion": c, "group": 0, "reward": r, "step_rewards": [r],
              "tokens": list(c) + ["•"]} for c, r in (("3;6", 1.0), ("3;7", 0.0))]
    off = {"scale": 0.8, "ratio": [[1.3] * 4, [0.9] * 4], "note": "synthetic off-policy", "errors": {},
           "methods": {"grpo": {"method": "grpo", "gc": [[0.0] * 4, [-0.63] * 4], "zeroed_frac": 0.5,
                                "stats": {"clip_frac": 0.5, "ratio_mean": 1.1}},
                       "rft": {"method": "rft", "gc": [[1.0] * 4, None], "zeroed_frac": 0.0, "stats": {}}}}
    return {"probe": probe, "note": "synthetic", "errors": {}, "off_policy": off,
            "methods": {"grpo": {"method": "grpo", "gc": [[0.7] * 4, [-0.7] * 4]},
                        "rft": {"method": "rft", "gc": [[1.0] * 4, None]}}}


@pytest.fixture
def out(tmp_path):
    out = tmp_path / "out"
    _write_run(out, "grpo", 0, 0.5)
    _write_run(out, "grpo", 1, 0.7, torn=True)
    _write_run(out, "rft", 0, 0.6, kl=False)
    _write_run(out, "grpo@beta0", 0, 0.3, reward="reward_model")
    pd.DataFrame({"method": ["grpo", "grpo", "rft", "grpo@beta0"], "seed": [0, 1, 0, 0],
                  "final_accuracy": [0.5, 0.7, 0.6, 0.3]}).to_csv(out / "summary.csv", index=False)
    (out / "gc_view.json").write_text(json.dumps(_synthetic_gc()))
    return out


def test_mean_ci_t_interval():
    # [0.5, 0.7]: mean 0.6, sd = 0.1414, t(0.975, df=1) = 12.706 -> half-width 12.706 · 0.1414 / √2 = 1.2706
    assert mean_ci([0.5, 0.7]) == "0.600 ± 1.271"
    assert mean_ci([0.25]) == "0.250 (1 seed, no interval)"  # one value: no spread, no interval
    assert mean_ci([]) == "–"


def test_report_table_and_figures(out):
    path = write_report(out)
    md = path.read_text()
    assert path == out / "report" / "summary.md"
    assert f"| method | seeds | accuracy | maj@{K} | pass@{K} | pass@1 | KL to ref |" in md
    lines = md.splitlines()
    table = md.split("## Change from the SFT base")[0].splitlines()
    row = {ln.split("|")[1].strip(): ln for ln in table if ln.startswith("| ")}
    assert "0.600 ± 1.271" in row["grpo"]  # both seeds read although seed 1's last line is torn
    assert "0.600 (1 seed, no interval)" in row["rft"] and "0.300 (1 seed, no interval)" in row["grpo@beta0"]
    assert "| 509 (+69) |" in row["grpo"]  # the largest peak over steps 0..9: 500 + 9 total, 60 + 9 the run's own
    # the runs' step-0 rows, one per seed (2): the same base and draws for every method of a seed, so no spread
    assert "| SFT base (step 0) | 2 | 0.400 | 0.420 | 0.800 | 0.350 | 0 |" in md
    # Δ maj@k of grpo: end (0.6 + .02) − start (0.4 + .02) = +0.200
    assert any(ln.startswith("| grpo | +0.200 |") for ln in lines)
    # last third of grpo's 10 steps: the last evaluation at or before 6.67 is step 5, at (0.4 + final) / 2; per seed
    # end − step 5 = 0.5 − 0.45 = 0.05 and 0.7 − 0.55 = 0.15: mean 0.100, sd 0.0707, 12.706 · 0.0707 / √2 = 0.635
    assert any(ln.startswith("| grpo |") and ln.endswith("| +0.100 ± 0.635 (steps 5→10) |") for ln in lines)
    # the off-policy GC view: its ratio span, and per method the zeroed share and the clip it recorded (not ratio_mean)
    assert "(ratios on the probe 0.900–1.300)" in md
    assert "| grpo | 0.500 | clip_frac 0.500 |" in md and "| rft | 0.000 | – |" in md
    for name in ("learning_curves", "reward_vs_kl", "cost", "gc_view", "gc_view_off_policy", "overoptimisation"):
        png = out / "report" / f"{name}.png"
        assert png.is_file() and 0 < png.stat().st_size < 300_000, name
        assert f"]({name}.png)" in md


# scenario -> {(method, seed): final accuracy}; every run starts at the base, 0.4 (_write_run)
ODD_RUNS = {
    "one seed": {("grpo", 0): 0.6, ("online_rft", 0): 0.5, ("rft", 0): 0.45},
    "no gain": {("grpo", 0): 0.3, ("grpo", 1): 0.35, ("rft", 0): 0.4, ("rft", 1): 0.2},
    "all equal": {("grpo", 0): 0.4, ("grpo", 1): 0.4, ("rft", 0): 0.4, ("rft", 1): 0.4},
}


def _cells(md: str, header_start: str) -> list[str]:
    """The cells of every markdown-table column whose header starts with header_start."""
    out = []
    for table in md.split("\n\n"):
        lines = [ln for ln in table.splitlines() if ln.startswith("|")]
        if not lines:
            continue
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        for i, name in enumerate(head):
            if name.startswith(header_start):
                out += [[c.strip() for c in ln.strip("|").split("|")][i] for ln in lines[2:]]
    return out


@pytest.mark.parametrize("scenario", list(ODD_RUNS))
def test_no_printed_number_that_cannot_be_right(tmp_path, scenario):
    """One seed, no method gaining, every run equal: the report, the console summary of compare.py and
    analysis.matched's budget line print no NaN, no count above its total, no interval from one seed and no time
    to a target that no method set (a* = base when no method gained: every run 'reaches' it at 0 s)."""
    import re
    import sys

    from analysis.matched import budget_line, matched_rows
    from analysis.runs import Runs

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from compare import console_table

    out = tmp_path / "out"
    finals = ODD_RUNS[scenario]
    for (method, seed), acc in finals.items():
        _write_run(out, method, seed, acc, kl=False)
    summary = pd.DataFrame([{"method": m, "seed": s, "base_accuracy": 0.4, "initial_accuracy": 0.4,
                             "final_accuracy": a, "time_s": 20.0, "gen_tokens": 1000, "steps": 10}
                            for (m, s), a in finals.items()])
    summary.to_csv(out / "summary.csv", index=False)
    md = write_report(out).read_text()
    console = console_table(summary)
    budget = budget_line(matched_rows(Runs(out))[1])
    for text in (md, console, budget):
        assert not re.search(r"\b(nan|inf)\b", text, re.IGNORECASE), text
        for a, b in re.findall(r"\b(\d+)/(\d+)\b", text):
            assert int(a) <= int(b), (a, b)  # k/n seeds, k of n samples: never more than all
    assert _cells(md, "s to ") and _cells(md, "tokens to ")
    for cell in _cells(md, "s to ") + _cells(md, "tokens to "):  # time and tokens to a*: never a free 0
        assert not re.match(r"^0\b", cell), cell
    one_seed = scenario == "one seed"
    assert ("95% t-interval" in md) is not one_seed  # promised only where an interval was computed
    if one_seed:
        assert "1 seed per method, so no interval" in md and "| 0.600 (1 seed, no interval) |" in md
        assert console.count("– (1 seed)") == 3  # the std of one value is not a number
        # a* = 0.4 + (0.6 − 0.4) / 2 = 0.5: grpo reaches it halfway (step 5 at 0.5, 10 s); rft never does
        assert "s to 0.500" in md and "a* = 0.500" in budget
    else:  # every method ended at or below the base 0.4: no target to time
        assert "no method gained on the base" in md and "a* = – (no method gained on the base)" in budget
        assert set(_cells(md, "s to a target")) == {"– (no method gained)"}
        # rft's std over its two seeds: |0.4 − 0.2| / √2 = 0.141 (no gain); 0 (all equal)
        assert "– (1 seed)" not in console
        assert console.splitlines()[-1].split()[3] == ("0.141" if scenario == "no gain" else "0.000")


def test_late_gain_tells_a_flat_curve_from_a_rising_one():
    from analysis.report import late_gain

    def curve(seed, accs, every=4):  # evaluations at steps 0, 4, 8, ...
        return [{"seed": seed, "step": every * i, "eval_accuracy": a} for i, a in enumerate(accs)]

    rising = pd.DataFrame(curve(0, [.2, .3, .4, .5, .6, .7, .8]) + curve(1, [.2, .3, .4, .5, .6, .7, .9]))
    flat = pd.DataFrame(curve(0, [.2, .5, .6, .6, .6, .6, .6]) + curve(1, [.2, .6, .6, .6, .6, .6, .6]))
    # 24 steps: 2/3 of them is step 16 (the fifth evaluation): 0.8 − 0.6 and 0.9 − 0.6; 0.6 − 0.6 twice
    assert late_gain(rising) == (pytest.approx([0.2, 0.3]), 16, 24)
    assert late_gain(flat) == (pytest.approx([0.0, 0.0]), 16, 24)
    assert late_gain(pd.DataFrame(curve(0, [.2, .4], every=10))) == ([], None, None)  # no evaluation before the end


def test_every_method_of_a_sweep_gets_its_own_colour():
    from analysis.runs import palette

    for n in (3, 12, 25):  # tab10 alone would give the 11th and 12th labels the 1st's and 2nd's colours
        colours = palette([f"grpo@lr{i}" for i in range(n)])
        assert len(set(colours.values())) == n


def test_report_without_reward_model_runs_or_gc_view(out):
    shutil.rmtree(out / "grpo@beta0")
    (out / "gc_view.json").unlink()
    md = write_report(out).read_text()
    assert not (out / "report" / "overoptimisation.png").exists()
    assert "## GC view" not in md and "| rft |" in md


def test_report_on_an_empty_folder_is_a_user_error(tmp_path):
    from gcframe.errors import UserError

    with pytest.raises(UserError, match="no runs"):
        write_report(tmp_path)


# -- gc_view on a tiny untrained model ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from accelerate import Accelerator

    from gcframe.config import from_dict
    from gcframe.modeling import build_char_tokenizer, build_tiny_llama, save_model_and_tokenizer
    from gcframe.pipeline import prepare

    cfg, task = prepare(from_dict({
        "task": {"operands": 3, "digits": 1, "n_demos": 16, "n_heldout": 8},
        "model": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "max_positions": 32},
        "train": {"prompts_per_step": 2, "group_size": 4}}))
    tok = build_char_tokenizer()
    base = tmp_path_factory.mktemp("base")
    save_model_and_tokenizer(build_tiny_llama(tok, cfg.model, seed=0), tok, str(base))
    return cfg, task, base, Accelerator(cpu=True)


def tiny_teacher(cfg, base) -> str:
    """A teacher for opd and sft_teacher beside the tiny base: another tiny Llama (seed 1) with the base's tokenizer."""
    from gcframe.modeling import build_tiny_llama, load_model_and_tokenizer, save_model_and_tokenizer

    tok = load_model_and_tokenizer(str(base))[1]
    folder = base.parent / f"{base.name}-teacher"
    save_model_and_tokenizer(build_tiny_llama(tok, cfg.model, seed=1), tok, str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def views(tiny):
    """gc_view.compute for every registered method, and grpo with β = 0 as 'grpo@beta0' (no KL term: a clipped token's
    GC is exactly 0), on the tiny model."""
    import copy

    import methods.dpo
    from methods import REGISTRY

    cfg, task, base, acc = tiny
    cfg = copy.deepcopy(cfg)
    teacher = tiny_teacher(cfg, base)
    cfg.methods.update(opd={"teacher": teacher}, sft_teacher={"teacher": teacher})  # the teacher's methods need one
    beta0 = copy.deepcopy(cfg)
    beta0.methods["grpo"] = {"beta": 0.0}
    with pytest.MonkeyPatch.context() as mp:
        # DPO builds its preference set from base samples in __init__; the view only needs its GC on the probe
        mp.setattr(methods.dpo, "load_or_build", lambda *a, **k: ({"train": []}, {}))
        return gc_view.compute([(n, n, cfg) for n in REGISTRY] + [("grpo@beta0", "grpo", beta0)], base, task, acc,
                               n_prompts=3)


def test_gc_view_shapes_and_signs(views):
    from methods import REGISTRY

    res = views
    assert not res["errors"], res["errors"]
    probe = res["probe"]
    assert len(probe) == 12 and [p["group"] for p in probe] == [0] * 4 + [1] * 4 + [2] * 4
    assert set(res["methods"]) == set(REGISTRY) | {"grpo@beta0"}
    for name, entry in res["methods"].items():
        assert len(entry["gc"]) == len(probe), name
        for p, row in zip(probe, entry["gc"]):
            if row is not None:  # one value per completion token, <eos> included
                assert len(row) == len(p["tokens"]) and all(math.isfinite(v) for v in row), name
    # DPO sees only the pairable rows: group 1 has no right answer
    assert [r is None for r in res["methods"]["dpo"]["gc"][4:8]] == [True] * 4
    # GRPO (outcome): GC sign = sign(r − group mean); the all-wrong group gets exactly 0 (β·KL grad is 0 at π_ref)
    rewards = torch.tensor([p["reward"] for p in probe]).view(3, 4)
    centred = (rewards - rewards.mean(1, keepdim=True)).flatten()
    for c, row in zip(centred.tolist(), res["methods"]["grpo"]["gc"]):
        assert all((v > 0) == (c > 0) and (v < 0) == (c < 0) for v in row)
    # process supervision grades the steps of the all-wrong group: some of its tokens get a non-zero GC
    assert any(v != 0 for row in res["methods"]["grpo_ps"]["gc"][4:8] for v in row)
    assert all(v == 1.0 for row in res["methods"]["sft"]["gc"] for v in row)


def test_gc_view_off_policy(views):
    from methods import REGISTRY

    on, off = views["methods"], views["off_policy"]
    probe = views["probe"]
    assert not off["errors"], off["errors"]
    assert set(off["methods"]) == set(REGISTRY) | {"grpo@beta0"}  # every method, pairs, kto and remax included
    ratios = [v for row in off["ratio"] for v in row]
    assert min(ratios) < 0.75 and max(ratios) > 1.25  # past every clip band of GRPO's defaults (ε = 0.2)
    for name, entry in off["methods"].items():
        # the same rows as the on-policy view (pairs for the pairwise methods, every row for kto and remax)
        assert [r is None for r in entry["gc"]] == [r is None for r in on[name]["gc"]], name
        for p, row in zip(probe, entry["gc"]):
            if row is not None:
                assert len(row) == len(p["tokens"]) and all(math.isfinite(v) for v in row), name
    # the view moved the policy: a ratio-weighted method's GC differs from its on-policy GC on some token
    def flat(entry):
        return [v for row in entry["gc"] if row is not None for v in row]

    for name in ("grpo", "cispo", "sapo", "gspo", "ppo", "remax", "dpo", "kto"):
        assert flat(off["methods"][name]) != flat(on[name]), name
    assert all(v == 1.0 for row in off["methods"]["sft"]["gc"] for v in row)  # no ratio in SFT's GC
    # GRPO's clip (β = 0) zeroes tokens whose advantage pushes r past the band; CISPO keeps each of them (clipped
    # weight × Â ≠ 0), and records no zeroed token
    grpo, cispo = off["methods"]["grpo@beta0"], off["methods"]["cispo"]
    kept = [(i, t) for i, (g, c) in enumerate(zip(grpo["gc"], cispo["gc"])) for t in range(len(g))
            if g[t] == 0 and c[t] != 0 and on["grpo@beta0"]["gc"][i][t] != 0]
    assert kept, "grpo's clip zeroed no token that cispo keeps"
    assert grpo["zeroed_frac"] > 0 and grpo["stats"]["clip_frac"] > 0 and cispo["zeroed_frac"] == 0
    # with β > 0 the clipped token keeps −β·c: GRPO's own clip_frac still says where its clip acted
    assert off["methods"]["grpo"]["stats"]["clip_frac"] == grpo["stats"]["clip_frac"]


def test_gc_view_probe_variants(tiny):
    _, task, _, _ = tiny
    texts = gc_view.probe_texts(task, 2)
    row = task.heldout[0]
    comps = [t["completion"] for t in texts[:4]]
    assert comps[0] == ";".join(row["steps"])  # the gold completion first
    ok = [task.verify(c, row["answer"]) for c in comps]
    assert ok == [True, False, True, False]  # right; wrong answer; wrong first step, right answer; all wrong
    assert len(set(comps)) == 4 and not any(task.verify(t["completion"], t["answer"]) for t in texts[4:8])


def _write_problems(out: Path, method: str, seed: int, correct: list[int]):
    rows = [{"step": 10, "problem": f"p{i}", "index": i, "greedy_correct": c} for i, c in enumerate(correct)]
    (out / method / f"seed{seed}" / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_deepseekmath_findings_are_decided_by_the_paired_test(tmp_path):
    out = tmp_path / "out"
    #            online_rft      rft            d = online − rft
    # seed 0:    [1, 1, 1, 0]    [0, 1, 0, 0]   [1, 0, 1, 0]
    # seed 1:    [1, 1, 0, 1]    [0, 0, 0, 1]   [1, 1, 0, 0]
    # D = 4/8 = 0.5; seed means .5, .5 -> MS_S = 0; problem means [1, .5, .5, 0] -> MS_P = 2·0.5/3 = 1/3;
    # residuals [0, −.5, .5, 0], [0, .5, −.5, 0] -> MS_E = 1/3. Components truncated at 0: σ²_S = (0 − 1/3)/4 -> 0,
    # σ²_P = (1/3 − 1/3)/2 = 0, so Var = MS_E/8 = 1/24, SE 0.2041; Satterthwaite over M_S = 1/3 (1 df), M_P = 1/3
    # (3 df), −σ²_E = −1/3 (3 df): ν = (1/3)² / ((1/3)²·(1 + 1/3 + 1/3)) = 0.6, t(0.975, 0.6) = 67.84 -> ±13.849:
    # [−13.349, +14.349], not separated (two seeds whose seed term is not seen leave almost no df)
    for seed, (online, offline) in enumerate([([1, 1, 1, 0], [0, 1, 0, 0]), ([1, 1, 0, 1], [0, 0, 0, 1])]):
        _write_run(out, "online_rft", seed, sum(online) / 4, kl=False)
        _write_run(out, "rft", seed, sum(offline) / 4, kl=False)
        _write_problems(out, "online_rft", seed, online)
        _write_problems(out, "rft", seed, offline)
    md = write_report(out).read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| §5.2.1, Fig. 5: online RFT beats RFT"))
    assert "| online_rft − rft | greedy | +0.500 [-13.349, +14.349] | not separated | 2 | 4 |" in line
    assert "**greedy** (2 seeds × 4 problems): 0 of 1 pair separated by the paired test. Means: online_rft 0.750, rft 0.250." in md
    assert "grpo − online_rft" not in md  # only comparisons whose two methods ran


def test_rates_kl_and_proxy_reward():
    from gcframe.evaluate import rates

    # 4 problems, k = 2: KL = 1.0 / 4 tokens = 0.25; proxy = 2.0 / 8 samples = 0.25
    res = rates({"n": 4, "greedy_correct": 2, "pass1_correct": 1.5, "passk_correct": 3, "majk_correct": 2,
                 "kl_sum": 1.0, "kl_tokens": 4, "proxy_sum": 2.0, "proxy_n": 8}, k=2)
    assert res == {"eval_accuracy": 0.5, "eval_pass1": 0.375, "eval_passk": 0.75, "eval_majk": 0.5,
                   "eval_kl_ref": 0.25, "eval_proxy_reward": 0.25}
    assert set(rates({"n": 4, "greedy_correct": 1})) == {"eval_accuracy"}  # k = 0: greedy only


def test_trainer_evaluate_with_k_samples(tiny, tmp_path):
    import copy

    from gcframe.trainer import Trainer

    cfg, task, base, acc = tiny
    cfg = copy.deepcopy(cfg)
    cfg.train.eval_size, cfg.train.reward = 8, "reward_model"

    class ConstantRM:  # r_φ = 0.5 for every sample
        def score(self, batch):
            return torch.full((len(batch),), 0.5)

    trainer = Trainer(cfg, "grpo", tmp_path / "run", base, task, acc, show_progress=False, reward_model=ConstantRM())
    res = trainer.evaluate(0, k=2)
    for key in ("eval_accuracy", "eval_pass1", "eval_passk", "eval_majk"):
        assert 0.0 <= res[key] <= 1.0, key
    assert res["eval_pass1"] <= res["eval_passk"]
    assert res["eval_kl_ref"] == pytest.approx(0.0, abs=1e-6)  # the policy IS the reference at step 0
    assert res["eval_proxy_reward"] == pytest.approx(0.5)
    assert "eval_kl_ref" not in trainer.evaluate(0, k=0)  # greedy-only evaluations between start and end
    trainer.logger.close()


def test_figures_say_which_methods_they_omit_and_why(out):
    """rft logs no kl_ref (the training panel of reward_vs_kl leaves it out), grpo@beta0 trained on r_φ (shown in
    overoptimisation.png instead), and an sft run that samples no tokens is missing from the generated-tokens panel."""
    _write_run(out, "sft", 0, 0.55, kl=False)
    rows = [json.loads(line) for line in (out / "sft" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    (out / "sft" / "seed0" / "metrics.jsonl").write_text("".join(json.dumps({**r, "gen_tokens": 0}) + "\n"
                                                                for r in rows))
    md = write_report(out).read_text()
    notes = [ln for ln in md.splitlines() if ln.startswith("- ") and "not shown" in ln]
    assert "- learning_curves.png, generated-tokens panel: not shown: sft (they sample no tokens" in md
    assert any(n.startswith("- reward_vs_kl.png, training panel: not shown: rft, sft (no kl_ref") for n in notes)
    assert any("not shown: grpo@beta0 (trained on r_φ" in n for n in notes)
    assert len(notes) == 3, notes


def test_gc_view_shares_one_colour_scale_by_default():
    from analysis.report import gc_scales

    methods = {"ppo": {"gc": [[2.0, -1.5], None]}, "grpo": {"gc": [[0.7, -0.7]]}, "none": {"gc": [None]}}
    assert gc_scales(methods) == {"ppo": 2.0, "grpo": 2.0, "none": 2.0}  # max |GC| over every panel: |2.0|
    assert gc_scales(methods, shared=False) == {"ppo": 2.0, "grpo": 0.7, "none": 1.0}  # own max; empty -> 1


def test_greedy_only_runs_have_no_sampled_columns(tmp_path):
    # train.eval_k 0: no samples were drawn at evaluation, so no "maj@0 | pass@0" columns of dashes
    for seed in (0, 1):
        d = tmp_path / "grpo" / f"seed{seed}"
        d.mkdir(parents=True)
        rows = [_eval_row(0, 0.4, sampled=False), _train_row(0, 0.4), _eval_row(1, 0.5, sampled=False)]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / "config.yaml").write_text(yaml.safe_dump({"method": "grpo", "seed": seed, "train": {"eval_k": 0}}))
    md = write_report(tmp_path).read_text()
    assert "| method | seeds | accuracy | train time (s) |" in md
    assert "maj@0" not in md and "pass@0" not in md


def test_outcomes_take_greedy_from_a_rescoring_and_sampled_metrics_from_the_last_evaluation(tmp_path):
    """Every run re-scored greedily on 6 problems: greedy comes from there; maj@k and pass@k (not re-scored) from the
    last training evaluation's 4 problems; a re-scoring only some runs have is not used."""
    from analysis.runs import Runs

    out = tmp_path / "out"
    for m in ("grpo", "rloo"):
        _write_run(out, m, 0, 0.5)
        rows = [{"step": 10, "problem": f"p{i}", "index": i, "greedy_correct": i % 2, "k": 2, "k_correct": i % 3,
                 "maj_correct": int(i == 1)} for i in range(4)]
        (out / m / "seed0" / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (out / m / "seed0" / "rescored").mkdir()
        again = [{"step": 10, "problem": f"p{i}", "index": i, "greedy_correct": 1} for i in range(6)]
        (out / m / "seed0" / "rescored" / "final-n6-k0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in again))
    (out / "grpo" / "seed0" / "rescored" / "final-n9-k0.jsonl").write_text("")  # grpo's alone: not common
    picks = Runs(out).outcomes()
    assert [(p[1], p[3]) for p in picks] == [(["greedy"], 0), (["majk", "passk", "pass1"], 2)]
    greedy, sampled = picks[0][0], picks[1][0]
    assert len(greedy) == 12 and greedy["greedy"].eq(1).all() and "re-scored on 6" in picks[0][2]
    assert len(sampled) == 8 and "last evaluation" in picks[1][2]
    # k_correct of p0..p3 = 0, 1, 2, 0 of k = 2 -> pass1 0, .5, 1, 0; passk 0, 1, 1, 0
    assert sampled[sampled["method"] == "grpo"]["pass1"].tolist() == [0.0, 0.5, 1.0, 0.0]
    assert sampled[sampled["method"] == "grpo"]["passk"].tolist() == [0.0, 1.0, 1.0, 0.0]


def test_overoptimisation_trajectory_by_hand(out):
    """grpo@beta0 (trained on r_φ): held-out gold 0.4 → (0.4 + 0.3)/2 = 0.35 → 0.3, best at step 0; its samples'
    gold 0.4 + 0.02·s: 5-step means 0.44 (steps 0–4) and 0.54 (5–9); the proxy only at the end (1.5)."""
    from analysis.report import overoptimisation_rows
    from analysis.runs import Runs

    rows = overoptimisation_rows(Runs(out), window=5)
    assert [r["method"] for r in rows] == ["grpo@beta0"]  # the verifier-trained runs are not in it
    r = rows[0]
    assert r["gold greedy: start → best (step) → end"] == "0.400 → 0.400 (0) → 0.300"
    assert r["gold of its samples, 5-step means: first → best (steps) → last"] == "0.440 → 0.540 (5–9) → 0.540"
    assert r["proxy r_φ: start → end"] == "– → 1.500" and r["KL to π_ref at the end"] == "0.050"


# -- damaged and unfinished run folders ----------------------------------------------------------------------------
def _finished_run(out: Path, method: str, seed: int, correct: list[int]):
    """A finished run as compare.py leaves it: evaluations at steps 0, 5 and 10 in metrics.jsonl and problems.jsonl
    (the same problems each time), train.steps 10 in its config and a final/ model folder."""
    _write_run(out, method, seed, sum(correct) / len(correct))
    d = out / method / f"seed{seed}"
    cfg = yaml.safe_load((d / "config.yaml").read_text())
    cfg["train"]["steps"] = 10
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    rows = [{"step": step, "problem": f"p{i}", "index": i, "greedy_correct": c if step == 10 else 0}
            for step in (0, 5, 10) for i, c in enumerate(correct)]
    (d / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "final").mkdir()


def _damage(run: Path, how: str):
    """Damage one run folder the ways a user hit (issue: a metrics.jsonl cut in half, a deleted problems.jsonl)."""
    metrics, problems = run / "metrics.jsonl", run / "problems.jsonl"
    if how == "metrics cut in half":  # mid-line: a cut last line, and the final evaluation gone
        metrics.write_bytes(metrics.read_bytes()[: metrics.stat().st_size // 2])
    elif how == "final evaluation rows missing":  # cut at a line: every row whole, the step-10 evaluation gone
        lines = metrics.read_text().splitlines(keepends=True)
        metrics.write_text("".join(ln for ln in lines if json.loads(ln)["step"] < 10))
    elif how == "problems ahead of metrics":  # no final/ (e.g. copied without models): only the steps disagree
        shutil.rmtree(run / "final")
        lines = metrics.read_text().splitlines(keepends=True)
        metrics.write_text("".join(ln for ln in lines if json.loads(ln)["step"] < 10))
    elif how == "problems.jsonl deleted":
        problems.unlink()
    elif how == "metrics.jsonl deleted":  # the folder's other files stay: the run must not vanish from the report
        metrics.unlink()
    elif how == "problems.jsonl cut":  # the final evaluation's rows half there
        lines = problems.read_text().splitlines(keepends=True)
        problems.write_text("".join(lines[: len(lines) - 3]))


DAMAGE = {"metrics cut in half": "metrics.jsonl ends in a cut line although the run finished",
          "final evaluation rows missing": "metrics.jsonl's last evaluation is of step 5 but the run finished 10 steps",
          "problems ahead of metrics": "problems.jsonl's last evaluation is of step 10 but metrics.jsonl's of step 5",
          "problems.jsonl deleted": "problems.jsonl is missing (the other runs have theirs)",
          "problems.jsonl cut": "problems.jsonl holds 3 rows for the evaluation of step 10 and 6 for another",
          "metrics.jsonl deleted": "metrics.jsonl is missing (without its rows the run would leave the report)"}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_run_folder_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, how):
    """Each damage named in one line (the run folder and the file), exit 2, and report/ left as it was: never a
    table of one step beside a paired test of another (the user saw grpo's step-40 0.420 in the table and 0.460 in
    the paired section), nor a method silently leaving the paired test."""
    from analysis.report import main

    out = tmp_path / "out"
    _finished_run(out, "grpo", 0, [1, 1, 1, 0, 1, 0])
    _finished_run(out, "rft", 0, [0, 1, 0, 0, 1, 0])
    (out / "report").mkdir()
    (out / "report" / "summary.md").write_text("the last good report")
    main([str(out)])  # the undamaged folder reports
    before = {p: p.read_bytes() for p in (out / "report").iterdir()}
    _damage(out / "grpo" / "seed0", how)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main([str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"1 damaged run folder: {out / 'grpo' / 'seed0'}: {DAMAGE[how]}" in err, err
    assert f"{resume_command(out)}" in err  # how to fix it, from anywhere
    assert {p: p.read_bytes() for p in (out / "report").iterdir()} == before


def test_a_full_disk_during_the_report_names_its_folder_and_leaves_every_figure_whole(out, tmp_path, capsys,
                                                                                       monkeypatch):
    """ENOSPC while reward_vs_kl.png is written (a figure's OSError carries no file name): one line naming the disk
    and OUT/report, not the working directory, with the command to run again; the figure of the earlier report is
    kept whole, and no temporary file is left. Before: '... written to <cwd>' and a truncated PNG."""
    import errno

    import matplotlib.figure

    from analysis.report import main

    write_report(out)
    figure = out / "report" / "reward_vs_kl.png"
    before = figure.read_bytes()
    savefig = matplotlib.figure.Figure.savefig

    def full(fig, fname, *args, **kwargs):
        if "reward_vs_kl" in str(fname):
            Path(fname).write_bytes(before[:100])  # what the disk took before it filled
            raise OSError(errno.ENOSPC, "No space left on device")
        return savefig(fig, fname, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    monkeypatch.chdir(tmp_path)  # the working directory is not the run folder
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main([str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"while the report was written to '{out / 'report'}'" in err and f"analysis.report {out} again" in err
    assert figure.read_bytes() == before and not list((out / "report").glob("*.tmp*"))


def test_a_torn_rescored_file_is_named_damaged(tmp_path, capsys):
    """A re-scoring on 6 problems that holds 3 (torn mid-write, or cut after): the file is named as damaged, with
    how to score it again (before: "evaluated on 3 problems but ... on 6", as if the model had been scored on other
    problems than the rest)."""
    from analysis.report import main

    out = tmp_path / "out"
    for m in ("grpo", "rft"):
        _finished_run(out, m, 0, [1, 1, 0, 0])
        again = out / m / "seed0" / "rescored" / "final-n6-k0.jsonl"
        again.parent.mkdir()
        again.write_text("".join(json.dumps({"step": 10, "problem": f"p{i}", "greedy_correct": 1}) + "\n"
                                 for i in range(6)))
    torn = out / "rft" / "seed0" / "rescored" / "final-n6-k0.jsonl"
    torn.write_bytes(torn.read_bytes()[: len(torn.read_bytes()) // 2])  # 3 whole rows and half of the 4th
    with pytest.raises(SystemExit) as e:
        main([str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"'{torn}' is damaged: it holds 3 of the 6 problems its name says" in err
    assert f"python -m gcframe.evaluate {out} --problems 6 --k 0" in err
    assert not (out / "report").exists()


def test_a_line_of_garbage_inside_a_log_is_one_line_naming_the_file(tmp_path, capsys):
    """A damaged line with rows after it: one line naming the file and the line (a JSONDecodeError traceback that
    named no file before), exit 2, report/ left as it was."""
    from analysis.report import main

    out = tmp_path / "out"
    _finished_run(out, "grpo", 0, [1, 1, 1, 0, 1, 0])
    metrics = out / "grpo" / "seed0" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines[:2]) + "garbage{\n" + "".join(lines[2:]))
    with pytest.raises(SystemExit) as e:
        main([str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"error: '{metrics}' line 3 is not a JSON row" in err, err
    assert not (out / "report").exists()


def test_an_unfinished_run_is_marked_not_refused(tmp_path):
    """A run still going (or stopped) reports what it logged, marked with the step it got to; a cut last line of
    a run that has not finished (still writing) is skipped and said."""
    out = tmp_path / "out"
    _finished_run(out, "grpo", 0, [1, 1, 0, 0])
    _finished_run(out, "rft", 0, [0, 1, 0, 0])
    run = out / "rft" / "seed0"
    shutil.rmtree(run / "final")
    for name in ("metrics.jsonl", "problems.jsonl"):  # stopped after the step-5 evaluation, mid-way through a row
        f = run / name
        f.write_text("".join(ln for ln in f.read_text().splitlines(keepends=True) if json.loads(ln)["step"] < 10))
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps(_train_row(5, 0.5))[:20])
    md = write_report(out).read_text()
    assert ("- rft seed 0: not finished: its last evaluation is of step 5 of 10 (still running, or stopped: "
            "compare.py --resume continues it); its cut last line of metrics.jsonl is skipped") in md
    assert "grpo seed 0:" not in md


def test_a_run_the_folder_lists_but_has_no_folder_of_is_named(tmp_path):
    """OUT/config.yaml lists grpo and rft with seeds 0 and 1; rft seed 1 has no folder (never started, or deleted):
    the report names it rather than report 3 runs as if they were all."""
    out = tmp_path / "out"
    for method, seed in (("grpo", 0), ("grpo", 1), ("rft", 0)):
        _finished_run(out, method, seed, [1, 0, 1, 0])
    (out / "config.yaml").write_text(yaml.safe_dump({"methods_run": ["grpo", "rft"], "seeds": [0, 1]}))
    md = write_report(out).read_text()
    assert "- rft seed 1: not started (no run folder; compare.py --resume trains it)" in md
    assert "grpo seed 1:" not in md and "Runs: 3 (grpo, rft)" in md


def test_a_rescoring_not_every_run_has_is_named(tmp_path):
    """grpo alone was re-scored on 6 problems: the paired test cannot use it, and the report says so and how to
    score the rest (the scored one is kept)."""
    out = tmp_path / "out"
    _finished_run(out, "grpo", 0, [1, 1, 0, 0])
    _finished_run(out, "rft", 0, [0, 1, 0, 0])
    again = out / "grpo" / "seed0" / "rescored" / "final-n6-k0.jsonl"
    again.parent.mkdir()
    again.write_text("".join(json.dumps({"step": 10, "problem": f"p{i}", "greedy_correct": 1}) + "\n"
                             for i in range(6)))
    md = write_report(out).read_text()
    assert (f"- Left out: the re-scoring on 6 problems (k = 0) is left out: 1 of 2 runs have it, not rft seed 0; "
            f"score them with python -m gcframe.evaluate {out} --problems 6 --k 0") in md
    assert "the last evaluation of each run, 4 held-out problems" in md  # what the paired test used instead


def test_one_seed_verdicts_say_what_the_interval_covers_and_leave_out_p_improve(tmp_path):
    """At one seed the interval is over problems only: every verdict says it covers this run's problems, not a new
    training run, and P(A>B) (always 0 or 1 over one seed) is printed nowhere. At two seeds P(A>B) is there."""
    from analysis import findings
    from analysis.runs import Runs

    out = tmp_path / "out"
    _finished_run(out, "online_rft", 0, [1, 1, 1, 1, 1, 0, 1, 1])
    _finished_run(out, "rft", 0, [0, 0, 0, 0, 1, 0, 0, 0])
    md = write_report(out).read_text()
    assert "P(A>B)" not in md and "P(A > B) over seeds" not in md
    assert "**One seed: each interval covers this run's problems, not a new training run.**" in md
    assert "**greedy** (1 seed × 8 problems: each interval covers this run's problems, not a new training run)" in md
    # d = online − rft = [1,1,1,1,0,0,1,1]: D = 0.75, MS_P = (6·0.25² + 2·0.75²)/7 = 1.5/7, SE = √(1.5/7/8) =
    # 0.16366, t(0.975, 7) = 2.3646: 0.75 ± 0.387 = [+0.363, +1.137]
    assert ("DeepSeekMath §5.2.1, Fig. 5, online_rft − rft: greedy holds (+0.750 [+0.363, +1.137]) (1 seed: each "
            "interval covers this run's problems, not a new training run).") in md
    assert "decided by the paired test (1 seed: each interval covers this run's problems" in md
    findings.write(Runs(out), tmp_path)
    assert "P(A>B)" not in (tmp_path / "pairs.csv").read_text()
    _finished_run(out, "online_rft", 1, [1, 1, 1, 1, 1, 0, 1, 0])
    _finished_run(out, "rft", 1, [0, 0, 1, 0, 1, 0, 0, 0])
    md = write_report(out).read_text()
    assert "| P(A>B) |" in md and "One seed" not in md and "not a new training run" not in md


def test_the_header_says_what_each_part_ran_with(tmp_path):
    """A folder started at 2 threads and resumed at 1 (grpo seed 0 started at 2, resumed at 1; rft at 1) is not
    '2 thread(s)': the header gives the range and names the parts. One count everywhere: that count alone."""
    out = tmp_path / "out"
    _finished_run(out, "grpo", 0, [1, 0])
    _finished_run(out, "rft", 0, [0, 1])
    env = {"torch": {"version": "2.13.0+cpu", "cpu_capability": "AVX2"}, "packages": {"transformers": "5"},
           "python": "3.11", "device": "cpu", "cpu": "EPYC", "commit": "abc1234def"}
    for path, threads in ((out / "env.json", 2), (out / "env.resume.json", 1), (out / "grpo/seed0/env.json", 2),
                          (out / "grpo/seed0/env.resume.json", 1), (out / "rft/seed0/env.json", 1)):
        path.write_text(json.dumps({**env, "threads": threads}))
    md = write_report(out).read_text()
    assert "EPYC, 1–2 thread(s), commit abc1234" in md and "EPYC, 2 thread(s)" not in md
    assert ("Threads differ between the parts of this folder: the comparison's processes 2 in env.json, 1 in "
            "env.resume.json; per run, 2 then 1 (resumed): grpo seed 0; 1: rft seed 0.") in md
    for path in (out / "env.json", out / "env.resume.json", out / "grpo/seed0/env.json",
                 out / "grpo/seed0/env.resume.json"):
        path.write_text(json.dumps({**env, "threads": 1}))
    md = write_report(out).read_text()
    assert "EPYC, 1 thread(s), commit abc1234" in md and "Threads differ" not in md


def _table(pairs: dict) -> pd.DataFrame:
    """A paired-test table of greedy rows from {(a, b): (diff, separated)}."""
    return pd.DataFrame([{"a": a, "b": b, "metric": "greedy", "diff": d, "separated": s, "k": 0, "n_seeds": 2,
                          "n_problems": 50} for (a, b), (d, s) in pairs.items()])


def test_the_findings_give_the_groups_the_test_orders():
    from analysis.findings import groups_text, ordered_groups

    order = ["a", "b", "c", "d"]  # by mean, best first
    # a, b each beat c and d; c beats d; a − b not separated: {a, b} > c > d
    full = {("a", "b"): (0.01, False), ("a", "c"): (0.2, True), ("a", "d"): (0.3, True), ("b", "c"): (0.15, True),
            ("b", "d"): (0.25, True), ("c", "d"): (0.1, True)}
    assert ordered_groups(order, _table(full)) == ([["a", "b"], ["c"], ["d"]], [])
    assert groups_text(order, _table(full)) == "it orders {a, b} > c > d"
    # b − c not separated: no cut between b and c, yet a > c is separated inside {a, b, c}; every one beats d
    # (the table may hold a pair either way round: d − c, −0.1)
    gap = {**full, ("b", "c"): (0.05, False)}
    gap.pop(("c", "d"))
    gap[("d", "c")] = (-0.1, True)
    assert ordered_groups(order, _table(gap)) == ([["a", "b", "c"], ["d"]], [("a", "c")])
    assert groups_text(order, _table(gap)) == "it orders {a, b, c} > d; within {a, b, c}: a > c"
    # no cut, one separated pair: said as such
    lone = {k: (v[0], k == ("a", "d")) for k, v in full.items()}
    assert groups_text(order, _table(lone)) == ("it orders no group of methods above the rest; "
                                               "within {a, b, c, d}: a > d")
    # nothing separated: one group, nothing to say
    none = {k: (v[0], False) for k, v in full.items()}
    assert ordered_groups(order, _table(none)) == ([["a", "b", "c", "d"]], [])
    assert groups_text(order, _table(none)) == ""


def test_the_report_draws_the_pairs_as_a_matrix_and_keeps_the_sentence_to_groups(tmp_path):
    """Three methods, three seeds × 48 problems: grpo right on all, rft on alternate problems (the same on every
    seed), sft on none. grpo − rft: d = 0, 1, 0, 1, ... on every seed: seed means 0.5 -> MS_S = 0; no residual,
    MS_E = 0; problem means 0 or 1 -> MS_P = 3 · 48 · 0.5²/47 = 0.76596, σ²_P = 0.76596/3 = 0.25532,
    Var = σ²_P/48 = 0.0053191, SE = 0.072932; Satterthwaite over M_S = 0 (2 df), M_P (47 df) gives ν = 47, the kept
    test min(47, S − 1) = 2: t(0.975, 2) = 4.3027, 0.5 ± 0.3138: separated; rft − sft likewise; grpo − sft = 1 on
    every cell. So grpo > rft > sft, and pairs.png is written and linked."""
    from analysis import findings
    from analysis.report import pair_matrix
    from analysis.runs import Runs

    out = tmp_path / "out"
    for seed in (0, 1, 2):
        _finished_run(out, "grpo", seed, [1] * 48)
        _finished_run(out, "rft", seed, [1, 0] * 24)
        _finished_run(out, "sft", seed, [0] * 48)
    md = write_report(out).read_text()
    png = out / "report" / "pairs.png"
    assert png.is_file() and png.stat().st_size > 0 and "![pairs](pairs.png)" in md
    assert "3 of 3 pairs separated by the paired test; it orders grpo > rft > sft. Means:" in md
    assert "grpo > rft (" not in md  # the pairs themselves are in the table and the figure, not the sentence
    runs = Runs(out)
    diff, sep = pair_matrix(runs, findings.tests(runs)[0])
    assert list(diff.index) == ["grpo", "rft", "sft"] and list(diff.columns) == ["grpo", "rft", "sft"]
    # row − column: grpo 1.0, rft 0.5, sft 0.0
    assert diff.loc["grpo", "sft"] == pytest.approx(1.0) and diff.loc["sft", "rft"] == pytest.approx(-0.5)
    assert diff.loc["rft", "grpo"] == pytest.approx(-0.5) and math.isnan(diff.loc["rft", "rft"])
    assert sep.loc["grpo", "sft"] and sep.loc["sft", "grpo"] and not sep.loc["rft", "rft"]


@pytest.mark.parametrize("heldout, says", [
    (500, "32 problems (the same models re-scored: python -m gcframe.evaluate OUT --problems 32) would halve that"),
    (16, "32 problems (more than the task's 16 held-out problems: new runs with task.n_heldout >= 32, then "
         "re-scored) would halve that")])
def test_the_design_says_what_halving_takes(tmp_path, heldout, says):
    """1 seed × 8 problems: halving the SE takes 4 × 8 = 32 problems (Var = MS_P/P). Within task.n_heldout that is
    a re-scoring of the same models; past it (the user saw "2000 problems would halve that" with 500 held out), new
    runs with a larger task.n_heldout."""
    out = tmp_path / "out"
    _finished_run(out, "online_rft", 0, [1, 1, 1, 1, 1, 0, 1, 1])
    _finished_run(out, "rft", 0, [0, 0, 0, 0, 1, 0, 0, 0])
    for d in (out / "online_rft" / "seed0", out / "rft" / "seed0"):
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        (d / "config.yaml").write_text(yaml.safe_dump({**cfg, "task": {"n_heldout": heldout}}))
    md = write_report(out).read_text()
    assert f"| 32 | {heldout} |" in md  # problems to halve it, the task's held-out problems
    assert says in md
