"""A teacher beside the checker (issue 64): on-policy distillation's GC and vOPD's baseline by hand, the teacher's
columns and sequence-level distillation's data from a real (tiny) teacher, and the teacher refused in one line
before anything trains: none given, a path that does not exist, a tokenizer that is not the student's. The teachers
are tiny Llamas built here with the project's character tokenizer; nothing is downloaded."""
from __future__ import annotations

import copy
import math
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import torch
import yaml

from gcframe.batch import Batch
from gcframe.errors import UserError
from methods import get_method
from methods.base import Method
from tests.test_bad_input import assert_one_line_refusal
from tests.test_resume import TINY_CONFIG, run_cli


def _opd(**options):
    cls = get_method("opd")
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(**options), ctx=None)
    return m


def _batch(logp, data):
    N, T = logp.shape
    return Batch(torch.ones(N, 1, dtype=torch.long), torch.ones(N, 1, dtype=torch.long),
                 torch.zeros(N, T, dtype=torch.long), torch.ones(N, T, dtype=torch.float64), torch.zeros(N).long(), data)


# -- GC by hand ----------------------------------------------------------------------------------------------------
def test_opd_gc_by_hand():
    # log π_T = [−1, −2], log π_θ = [−1.5, −1]: GC = log π_T − log π_θ = [0.5, −1] (the teacher likes token 0 more)
    logp = torch.tensor([[-1.5, -1.0]], dtype=torch.float64)
    t = torch.tensor([[-1.0, -2.0]], dtype=torch.float64)
    assert _opd().coefficients(_batch(logp, {"teacher_logp": t}), logp).tolist() == [[0.5, -1.0]]
    # vOPD: minus b_t = −KL_t, KL = [0.3, 0.1] -> [0.8, −0.9]
    kl = torch.tensor([[0.3, 0.1]], dtype=torch.float64)
    gc = _opd(baseline="vopd").coefficients(_batch(logp, {"teacher_logp": t, "teacher_kl": kl}), logp)
    assert gc[0].tolist() == pytest.approx([0.8, -0.9], abs=1e-15)
    # a reused batch: π_old(o_0) = π_θ(o_0)/2, so r = 2 on token 0: [1.0, −1]
    old = logp - torch.tensor([[math.log(2.0), 0.0]], dtype=torch.float64)
    gc = _opd().coefficients(_batch(logp, {"teacher_logp": t, "old_logp": old}), logp)
    assert gc[0].tolist() == pytest.approx([1.0, -1.0], rel=1e-14)


def test_vopd_kl_column_by_hand():
    # one position, V = 2: student logits [0, 0] (π_S = [½, ½]), teacher [0, ln 3] (π_T = [¼, ¾]);
    # KL(π_S ‖ π_T) = ½ ln(½/¼) + ½ ln(½/¾) = ½ ln(4/3) ≈ 0.14384; the sampled token 1 has log π_T = ln ¾
    from gcframe.teacher import teacher_columns

    def model(logits):
        return lambda **kw: NS(logits=torch.tensor([[logits, [0.0, 0.0]]], dtype=torch.float64))

    b = Batch(torch.ones(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long), torch.tensor([[1]]),
              torch.ones(1, 1, dtype=torch.float64), torch.zeros(1).long())
    taken, kl = teacher_columns(model([0.0, math.log(3.0)]), b, student=model([0.0, 0.0]))
    assert float(kl) == pytest.approx(0.5 * math.log(4 / 3), rel=1e-14) and float(taken) == pytest.approx(math.log(0.75))
    assert teacher_columns(model([0.0, math.log(3.0)]), b)[1] is None  # no student: no KL column


# -- a real tiny teacher -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny config and task, a base (seed 0), a teacher (seed 1, final norm negated) with the base's tokenizer, and a
    teacher whose tokenizer has fewer characters."""
    from accelerate import Accelerator

    from gcframe.config import from_dict
    from gcframe.modeling import build_char_tokenizer, build_tiny_llama, save_model_and_tokenizer
    from gcframe.pipeline import prepare

    cfg, task = prepare(from_dict({
        "task": {"operands": 2, "digits": 1, "n_demos": 16, "n_heldout": 8},
        "model": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "max_positions": 32},
        "train": {"steps": 2, "prompts_per_step": 2, "group_size": 2, "max_new_tokens": 6}}))
    tok = build_char_tokenizer()
    root = tmp_path_factory.mktemp("teachers")
    save_model_and_tokenizer(build_tiny_llama(tok, cfg.model, seed=0), tok, str(root / "base"))
    # an untrained tiny Llama with tied embeddings copies its last token ("1+3=" -> "======"), whatever its seed; the
    # teacher's final norm negated turns copying into avoiding it, so its greedy text differs by construction
    teacher = build_tiny_llama(tok, cfg.model, seed=1)
    with torch.no_grad():
        teacher.model.norm.weight.mul_(-1)
    save_model_and_tokenizer(teacher, tok, str(root / "teacher"))
    other = build_char_tokenizer("0123456789+=;")
    save_model_and_tokenizer(build_tiny_llama(other, cfg.model, seed=2), other, str(root / "other"))
    return cfg, task, root, Accelerator(cpu=True)


def _trainer(tiny, name, tmp_path, **options):
    from gcframe.trainer import Trainer

    cfg, task, root, acc = tiny
    cfg = copy.deepcopy(cfg)
    cfg.methods[name] = {"teacher": str(root / "teacher"), **options}
    return Trainer(cfg, name, tmp_path / name, root / "base", task, acc, show_progress=False)


def test_opd_prepare_fills_the_teachers_columns(tiny, tmp_path):
    """teacher_logp is the teacher's log-probability of each sampled token (the engine's own log-prob function on the
    teacher), teacher_kl the full-vocabulary KL of the sampling policy from the teacher; the teacher is frozen."""
    from gcframe.engine import token_logprobs

    tr = _trainer(tiny, "opd", tmp_path, baseline="vopd")
    m = tr.method
    batch = m.collect(0)
    with torch.no_grad():
        m.prepare(batch)
        expected = token_logprobs(m.teacher, batch)
        student = token_logprobs(tr.ctx.policy, batch)
    mask = batch.completion_mask
    assert torch.allclose(batch.data["teacher_logp"], expected, atol=1e-6)
    assert float((batch.data["teacher_logp"] - student).abs().max()) > 0.01  # the teacher is not the student
    assert float((batch.data["teacher_kl"] * mask).min()) >= 0 and float(batch.data["teacher_kl"][mask > 0].min()) > 0
    assert not any(p.requires_grad for p in m.teacher.parameters()) and not m.teacher.training
    assert len(batch) == 4  # B·G = 2·2: the equal budget


def test_sft_teacher_trains_on_the_teachers_greedy_completions(tiny, tmp_path):
    tr = _trainer(tiny, "sft_teacher", tmp_path)
    m = tr.method
    batch = m.collect(0)
    stats = m.pop_stats()
    # the pool: steps · B · G = 2 · 2 · 2 = 8 prompts, each completed once; a step draws B · G = 4 of them
    assert stats["pool_size"] == 8 and len(batch) == 4 and 0 <= stats["pool_teacher_accuracy"] <= 1
    rows = [{"prompt": t["prompt"], "answer": t["answer"]} for t in batch.texts]
    again = tr.ctx.complete(rows, 1, model=m.teacher, temperature=0.0)  # greedy is deterministic
    assert [t["completion"] for t in again.texts] == [t["completion"] for t in batch.texts]
    student = tr.ctx.complete(rows, 1, model=tr.ctx.policy, temperature=0.0)
    assert [t["completion"] for t in student.texts] != [t["completion"] for t in batch.texts]
    assert torch.equal(m.coefficients(batch, torch.zeros_like(batch.completion_mask)),
                       torch.ones_like(batch.completion_mask))


# -- the toy's teacher: clean_base ----------------------------------------------------------------------------------
def test_clean_base_is_stage_1_on_the_exact_annotator_cached_beside_the_bases(tmp_path):
    """`teacher: clean_base` loads the SFT base of the same config with task.demo_slip and demo_noise 0: a base of
    its own (its own cache key), trained once; the student starts from the slipped base."""
    import dataclasses

    from accelerate import Accelerator

    from gcframe import pipeline
    from gcframe.config import from_dict
    from gcframe.teacher import CLEAN_BASE
    from gcframe.trainer import Trainer

    raw = {**TINY_CONFIG, "task": {**TINY_CONFIG["task"], "demo_slip": 0.9},
           "methods": {"opd": {"teacher": CLEAN_BASE}}}
    cfg, task = pipeline.prepare(from_dict(raw))
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    tr = Trainer(cfg, "opd", tmp_path / "opd", base_dir, task, acc, show_progress=False)
    clean = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, demo_slip=0.0, demo_noise=0.0))
    key = pipeline.base_key(clean)
    assert key != base_dir.name and (base_dir.parent / key / "base_info.json").is_file()
    folder_weights = {k: v.clone() for k, v in tr.method.teacher.state_dict().items()}
    from gcframe.modeling import load_model_and_tokenizer

    cached, _ = load_model_and_tokenizer(str(base_dir.parent / key))
    assert all(torch.equal(folder_weights[k], v) for k, v in cached.state_dict().items())  # that base, loaded
    student, _ = load_model_and_tokenizer(str(base_dir))
    assert any(not torch.equal(folder_weights[k], v) for k, v in student.state_dict().items())


def test_clean_base_with_a_pretrained_model_is_refused(tmp_path):
    from gcframe.config import from_dict
    from gcframe.teacher import CLEAN_BASE

    cfg = from_dict({**TINY_CONFIG, "methods": {"opd": {"teacher": CLEAN_BASE}}})
    cfg.model.path = str(tmp_path / "a-pretrained-model")
    with pytest.raises(UserError, match="clean_base trains the tiny Llama on clean demonstrations, and this run starts "
                                        "from a pretrained model"):
        get_method("opd").check_run(cfg, "opd")


# -- refusals -------------------------------------------------------------------------------------------------------
def _method_names(method: str, options: dict):
    from experiments.compare_config import method_names
    from gcframe.config import from_dict

    return method_names(NS(methods=method), from_dict({**TINY_CONFIG, "methods": {method: options}}))


@pytest.mark.parametrize("name", ["opd", "sft_teacher"])
def test_a_teacher_method_without_a_teacher_is_refused(name, tmp_path):
    with pytest.raises(UserError, match=f"method '{name}' distils a teacher, and none is given"):
        _method_names(name, {})
    with pytest.raises(UserError, match=f"methods.{name}.teacher: no model folder at '{tmp_path}/nope'"):
        _method_names(name, {"teacher": str(tmp_path / "nope")})


def test_a_teacher_with_another_tokenizer_is_refused_naming_both(tiny):
    from gcframe.modeling import load_tokenizer

    cfg, task, root, _ = tiny
    cfg = copy.deepcopy(cfg)
    cfg.methods["opd"] = {"teacher": str(root / "other")}
    with pytest.raises(UserError) as e:
        get_method("opd").check_model(cfg, task, load_tokenizer(str(root / "base")))
    msg = str(e.value)
    assert f"the teacher {root / 'other'} does not share the student's tokenizer (the SFT base)" in msg
    assert "a vocabulary of 17 tokens against the student's" in msg and "\n" not in msg
    cfg.methods["opd"] = {"teacher": str(root / "teacher")}
    get_method("opd").check_model(cfg, task, load_tokenizer(str(root / "base")))  # the same tokenizer: accepted


def test_opd_without_a_teacher_through_the_cli(tmp_path):
    """As the user runs it: one line, exit 2, nothing written, before anything trains."""
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(yaml.safe_dump({**TINY_CONFIG, "methods": {"opd": {"baseline": "vopd"}}}))
    r = run_cli("--config", cfg_file, "--no-progress", "--methods", "opd", "--out", tmp_path / "out", timeout=300)
    assert_one_line_refusal(r, ["method 'opd' distils a teacher, and none is given", "methods.opd.teacher"])
    assert not (tmp_path / "out").exists()


# -- a teacher folder on the tiny model (issue 75) -------------------------------------------------------------------
@pytest.fixture(scope="module")
def folders(tiny, tmp_path_factory):
    """Teacher folders for the tiny student: `final`, a run's final model as compare.py writes
    <out>/<method>/seed<k>/final (Trainer.save_model; untrained: what the folder holds matters here, not how good the
    model is); `swapped`, the character tokenizer with the ids of "0" and "1" exchanged (the same 100 strings);
    `wider`, 20 characters more (a 120-entry vocabulary and output layer)."""
    from gcframe.modeling import DEFAULT_CHARS, build_char_tokenizer, build_tiny_llama, save_model_and_tokenizer
    from gcframe.trainer import Trainer

    cfg, task, root, acc = tiny
    d = tmp_path_factory.mktemp("teacher_folders")
    Trainer(copy.deepcopy(cfg), "sft", d / "run", root / "base", task, acc, show_progress=False).save_model(d / "final")
    for name, chars in (("swapped", DEFAULT_CHARS.translate(str.maketrans("01", "10"))),
                        ("wider", DEFAULT_CHARS + "αβγδεζηθικλμνξοπρστυ")):
        tok = build_char_tokenizer(chars)
        save_model_and_tokenizer(build_tiny_llama(tok, cfg.model, seed=3), tok, str(d / name))
    return d


@pytest.mark.parametrize("name", ["opd", "sft_teacher"])
def test_a_teacher_folder_on_the_tiny_model_is_checked_against_its_character_tokenizer(tiny, folders, name):
    """On the tiny model compare.py passes no tokenizer (task.fmt.tok is None; the student's is the character
    tokenizer its SFT base is saved with): a run's final folder shares it and is accepted, the same strings under
    other ids or a 120-entry vocabulary are refused in one line naming what differs (it crashed on None before)."""
    cfg, task, _, _ = tiny
    cfg = copy.deepcopy(cfg)
    cfg.methods[name] = {"teacher": str(folders / "final")}
    get_method(name).check_model(cfg, task, None)
    for teacher, what in (("swapped", ("a vocabulary of 100 tokens against the student's 100 (tokens with other "
                                       "ids: ['0', '1'])")),
                          ("wider", "a vocabulary of 120 tokens against the student's 100 (tokens only one has: ")):
        cfg.methods[name] = {"teacher": str(folders / teacher)}
        with pytest.raises(UserError) as e:
            get_method(name).check_model(cfg, task, None)
        assert f"methods.{name}.teacher: the teacher {folders / teacher} does not share the student's tokenizer " \
               f"(the SFT base): {what}" in str(e.value) and "\n" not in str(e.value)


def test_a_runs_final_folder_as_the_teacher_trains_through_the_cli(folders, tmp_path):
    """As the user runs it: both distillation methods train against a final folder a run saved, exit 0; a teacher
    with another vocabulary is one line, exit 2, before anything is written."""
    from gcframe.tracking.log import read_jsonl

    cfg_file = tmp_path / "config.yaml"
    teacher = {"teacher": str(folders / "final")}
    cfg_file.write_text(yaml.safe_dump({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "steps": 2},
                                        "methods": {"opd": teacher, "sft_teacher": teacher}}))
    out = tmp_path / "out"
    r = run_cli("--config", cfg_file, "--no-progress", "--methods", "opd,sft_teacher", "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("opd", "sft_teacher"):
        assert (out / name / "seed0" / "final" / "model.safetensors").is_file()
        assert max(row["step"] for row in read_jsonl(out / name / "seed0" / "metrics.jsonl")) == 2
    cfg_file.write_text(yaml.safe_dump({**TINY_CONFIG, "methods": {"opd": {"teacher": str(folders / "wider")}}}))
    r = run_cli("--config", cfg_file, "--no-progress", "--methods", "opd", "--out", tmp_path / "other", timeout=300)
    refused = f"methods.opd.teacher: the teacher {folders / 'wider'} does not share the student's tokenizer"
    assert_one_line_refusal(r, [refused, "a vocabulary of 120 tokens against the student's 100"])
    assert not (tmp_path / "other").exists()


def test_a_teacher_path_that_is_a_file_is_named_as_a_file(folders):
    """A weights file given for the folder: said so (it was "it does not exist"), and the folder that holds it named."""
    import re

    weights = folders / "final" / "model.safetensors"
    said = (f"methods.opd.teacher: '{weights}' is a file, not a model folder: give the Hugging Face model folder "
            f"(its folder '{folders / 'final'}' has a config.json)")
    with pytest.raises(UserError, match=re.escape(said)):
        _method_names("opd", {"teacher": str(weights)})


def test_every_method_means_those_that_can_run_without_inputs():
    """compare.py without --methods, the atlas and the benchmarks run `default_methods`: every registered method, a
    teacher's only when its config names a teacher (none can be invented), and compare's checks pass on them all."""
    from methods import REGISTRY, default_methods

    plain = default_methods()
    assert "opd" not in plain and "sft_teacher" not in plain and set(REGISTRY) - set(plain) == {"opd", "sft_teacher"}
    assert "opd" in default_methods({"opd": {"teacher": "somewhere"}})
    from experiments.compare_config import method_names
    from gcframe.config import from_dict

    assert method_names(NS(methods=None), from_dict(TINY_CONFIG)) == plain


# -- the head to head (experiments/configs/distillation.yaml, reproduce.py distillation) -----------------------------
def test_the_distillation_grid_tunes_every_arm_and_distils_the_clean_base():
    from pathlib import Path

    from analysis import families
    from experiments.compare import parse_args
    from experiments.compare_config import build_config, method_names, run_config
    from experiments.reproduce import RECIPES
    from gcframe.teacher import CLEAN_BASE

    recipe = RECIPES["distillation"]
    config = Path(__file__).resolve().parents[1] / "experiments" / "configs" / recipe.config
    args = parse_args(["--config", str(config)])
    cfg, _ = build_config(args)
    labels = method_names(args, cfg)
    assert labels == ["opd", "sft_teacher", "sft_filtered", "sft_clean", "dapo", "reinforce_pp", "ppo"]
    assert "--tune" in recipe.args and recipe.seeds[:2] == [0, 1]  # every arm tuned at the same budget
    # its test seeds are as many as the committed plan asks (analysis.plan: the planned families' rows)
    import pandas as pd

    plan = pd.read_csv(Path(__file__).resolve().parents[1] / "results" / "distillation" / "plan.csv")
    assert len(recipe.seeds) - 2 >= pd.to_numeric(plan["seeds planned"]).max()
    default = yaml.safe_load((config.parent / "default.yaml").read_text())
    raw = yaml.safe_load(config.read_text())
    assert {k: raw[k] for k in ("task", "sft_base", "train", "reward_model")} == \
        {k: default[k] for k in ("task", "sft_base", "train", "reward_model")}  # the default's design, verbatim
    assert raw["tune"]["lr"] == default["tune"]["lr"] and raw["tune"]["seeds"] == default["tune"]["seeds"]
    for label in ("opd", "sft_teacher"):
        assert run_config(cfg, label, 1)[1].methods[label]["teacher"] == CLEAN_BASE
    spec = families.check(raw["families"])
    pairs = [tuple(p) for f in spec.values() for p in f["pairs"]]
    assert all(a in labels and b in labels for a, b in pairs) and len(set(pairs)) == len(pairs)
    quick = parse_args(["--config", str(config), *recipe.quick])
    assert set(method_names(quick, build_config(quick)[0])) <= set(labels)


# -- the teacher as a reference: scored beside the base on the test problems ----------------------------------------
def test_the_teacher_is_scored_on_the_test_problems_as_the_tables_reference_row(tmp_path):
    """compare.py with curves on validation scores the final models and the base on the test problems (`--base`),
    and the teacher the runs distil too: `clean_base` with a base per seed, teacher-seed<s>-n<N>-k<K>.jsonl beside
    base-seed<s>-... Its greedy accuracy there is the one stage 1 measured on the same test problems when the teacher
    was trained (base_info.json's eval_accuracy: the same model, greedy, the same problems); the table's reference
    row reads that file; problems.csv.gz publishes its rows; no paired test takes it as a method."""
    import json

    import pandas as pd

    from analysis.report import Runs, summary_rows
    from analysis.results import write_outcomes
    from gcframe.config import from_dict
    from gcframe.teacher import clean_base_dir
    from gcframe.tracking.log import read_jsonl

    raw = {**TINY_CONFIG, "task": {"operands": 2, "digits": 2, "n_demos": 100, "n_heldout": 16, "n_validation": 100,
                                   "demo_slip": 0.9},  # the fewest validation problems a choice may rank
           "sft_base": {**TINY_CONFIG["sft_base"], "per_seed": True},
           "train": {**TINY_CONFIG["train"], "eval_split": "validation", "eval_size": 100},
           "methods": {"opd": {"teacher": "clean_base"}, "sft_teacher": {"teacher": "clean_base"}}}
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    r = run_cli("--config", cfg_file, "--no-progress", "--methods", "opd,sft_teacher", "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    files = sorted(p.name for p in (out / "rescored").glob("*.jsonl"))
    assert files == ["base-seed0-n16-k2.jsonl", "teacher-seed0-n16-k2.jsonl"], files  # one teacher for both methods
    rows = read_jsonl(out / "rescored" / "teacher-seed0-n16-k2.jsonl")
    run_cfg = yaml.safe_load((out / "opd" / "seed0" / "config.yaml").read_text())
    run_cfg = {k: v for k, v in run_cfg.items() if k not in ("method", "models", "splits")}
    info = json.loads((Path(clean_base_dir(from_dict(run_cfg))) / "base_info.json").read_text())
    accuracy = sum(r["greedy_correct"] for r in rows) / 16
    assert len(rows) == 16 and accuracy == pytest.approx(info["eval_accuracy"], abs=1e-12)
    base = read_jsonl(out / "rescored" / "base-seed0-n16-k2.jsonl")  # the student's base: another model
    assert [r["greedy_answer"] for r in rows] != [r["greedy_answer"] for r in base]
    table = {row["method"]: row for row in summary_rows(Runs(out))}
    reference = table["teacher (reference)"]
    assert reference["test accuracy, 16 problems"] == f"{accuracy:.3f} (1 seed, no interval)"
    assert reference["maj@2"] == f"{sum(r['maj_correct'] for r in rows) / 16:.3f} (1 seed, no interval)"
    assert reference["train time (s)"] == "–" and set(table) == {"SFT base (step 0)", "teacher (reference)", "opd",
                                                                 "sft_teacher"}
    write_outcomes(Runs(out), tmp_path / "problems.csv.gz")
    published = pd.read_csv(tmp_path / "problems.csv.gz")
    teacher = published[published["method"] == "teacher"].sort_values("problem")
    assert len(teacher) == 16 and teacher["greedy"].mean() == pytest.approx(accuracy, abs=1e-12)
    from analysis import findings

    findings.write(Runs(out), tmp_path)  # the paired tests: the methods, each over the base; the teacher is in none
    pairs, gains = pd.read_csv(tmp_path / "pairs.csv"), pd.read_csv(tmp_path / "gains.csv")
    assert set(pairs["comparison"]) == {"opd − sft_teacher"} and set(gains["method"]) == {"opd", "sft_teacher"}
