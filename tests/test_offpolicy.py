"""Off-policy training (gcframe.offpolicy): μ's log-probs recorded where samples are made, a sampler that lags by k
steps or runs in bfloat16, π_old recomputed, the mismatch logged, one correction applied once to GC, the ring of
snapshots resumable, each correction equal to its textbook form (gcframe.verify's rows), bad input refused."""
from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
import yaml

from analysis import families
from experiments.bench_common import Size, make_trainer
from gcframe.engine import token_logprobs
from gcframe.offpolicy import check as offpolicy_check
from gcframe.offpolicy.corrections import FACTORS, Correction, Inputs
from gcframe.sampling import sample_tokens
from gcframe.tracking.log import read_jsonl

SIZE = Size("test", 32, 2, 4, 64, prompts=4, group=4, new_tokens=4)
CONFIGS = Path(__file__).resolve().parents[1] / "experiments" / "configs"
LR = 3e-2  # large enough that a few steps move the tiny policy far from the sampler's weights


@pytest.fixture
def rewards(monkeypatch):
    """Rewards by rule (the untrained tiny model is never right): 1 for a completion of odd length, else 0, so that
    groups carry reward differences and every step moves the policy."""
    def score(batch, task, tok, source="verifier", reward_model=None):
        r = torch.tensor([float(len(t["completion"]) % 2) for t in batch.texts])
        batch.data["rewards"], batch.data["correct"] = r, r.clone()
        return batch

    monkeypatch.setattr("gcframe.context.score", score)


def trainer(base, tmp_path, method="grpo", steps=6, name="run", **train):
    tr = make_trainer(method, SIZE, base, str(tmp_path / name), steps=steps, train_opts=train)
    for group in tr.opt.param_groups:
        group["lr"] = LR
    tr.sched.base_lrs = [LR]
    return tr


# -- the corrections, by hand ------------------------------------------------------------------------------------
def hand_inputs() -> Inputs:
    """Two sequences: A of 3 tokens with ρ = π_old/μ = 4, 0.25, 1 (Π ρ = 1) and advantage −1; B of 2 tokens with
    ρ = 2, 1.5 (Π ρ = 3) and advantage +1. π_θ = π_old·e^{−0.3} on A, = π_old on B."""
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0]], dtype=torch.float64)
    old = torch.tensor([[-1.0, -2, -0.5], [-1.5, -0.7, 0]], dtype=torch.float64)
    rho = torch.tensor([[4.0, 0.25, 1], [2, 1.5, 1]], dtype=torch.float64)
    mu = (old - rho.log()) * mask
    logp = (old - torch.tensor([[0.3, 0.3, 0.3], [0, 0, 0]], dtype=torch.float64)) * mask
    return Inputs(old, mu, logp, mask, torch.tensor([-1.0, 1.0], dtype=torch.float64))


CASES = {  # (correction, lower, upper): w on A's three tokens, then B's two
    ("tis", None, 2.0): [2, 0.25, 1, 2, 1.5],  # min(ρ, 2): 4 -> 2; B's ρ = 2 is not above C
    ("tis", 0.5, 2.0): [2, 0.5, 1, 2, 1.5],  # clamp(ρ, 0.5, 2): 0.25 -> 0.5
    ("seq_tis", None, 2.0): [1, 1, 1, 2, 2],  # A: Π ρ = 4·0.25·1 = 1; B: Π ρ = 2·1.5 = 3 -> 2
    ("mis", 0.5, 2.0): [0, 0, 1, 2, 1.5],  # 4 > 2 and 0.25 < 0.5 dropped; 2 kept (bounds inclusive)
    ("seq_mis", 0.5, 2.0): [1, 1, 1, 0, 0],  # A's Π ρ = 1 inside [0.5, 2]; B's 3 above: dropped
    ("icepop", 0.5, 5.0): [4, 0, 1, 2, 1.5],  # band [0.5, 5]: only 0.25 dropped
    ("decoupled", None, None): [4, 0.25, 1, 2, 1.5],  # w = ρ
    ("decoupled", None, 3.0): [0, 0.25, 1, 2, 1.5],  # ρ = 4 above the cap 3: dropped
    # A: Â < 0 and mean log(μ/π_θ) = mean(−log ρ) + 0.3 = (−ln 4 + ln 4 + 0)/3 + 0.3 = 0.3 > δ = 0.1: dropped;
    # B: Â > 0: kept whatever its log-ratio
    ("opsm", None, 0.1): [0, 0, 0, 1, 1],
    ("none", None, None): [1, 1, 1, 1, 1],
}


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_each_correction_by_hand(case):
    x = hand_inputs()
    w, cut = Correction(*case).factor(x)
    got = [float(v) for v in w[x.mask > 0]]
    assert got == pytest.approx(CASES[case], rel=1e-12, abs=1e-12)
    assert float(w[1, 2]) == 0.0  # padding carries no weight
    changed = [abs(g - r) > 1e-9 for g, r in zip(got, [4, 0.25, 1, 2, 1.5])]  # cut: where w is not ρ or 1
    if case[0] in ("mis", "icepop", "opsm", "seq_mis") or (case[0] == "decoupled" and case[2]):
        assert cut[x.mask > 0].tolist() == [g == 0 for g in got]  # a mask cuts exactly the tokens it zeroes
    elif case[0] == "tis":
        assert cut[x.mask > 0].tolist() == changed


def test_the_verify_rows_pass_and_take_every_branch():
    rows = offpolicy_check.rows()
    assert {r["label"] for r in rows} == set(offpolicy_check.CHECKS)
    for r in rows:
        assert offpolicy_check.passed(r, 1e-10), r


def test_a_wrong_factor_fails_its_verify_row(monkeypatch):
    """The check can fail: TIS without its truncation (w = ρ) is not TIS's textbook gradient."""
    monkeypatch.setitem(FACTORS, "tis", FACTORS["decoupled"])
    row = offpolicy_check.check("tis")
    assert row["max_rel_diff"] > 1e-3 and not offpolicy_check.passed(row, 1e-10)


def test_a_branch_not_taken_fails_its_verify_row(monkeypatch):
    monkeypatch.setitem(offpolicy_check.CHECKS, "tis", ("tis", None, 100.0))  # no ρ reaches a cap of 100
    row = offpolicy_check.check("tis")
    assert row["missing"] == ["ρ > C: w = C"] and not offpolicy_check.passed(row, 1e-10)


# -- μ recorded where the sample is made -------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_the_sampler_returns_the_drawn_tokens_log_probability(temperature):
    # logits (0, ln 3): p = (1, 3)/4 at T = 1; at T = 2, p ∝ (1, √3): p = (1, √3)/(1 + √3)
    logits = torch.tensor([[0.0, math.log(3)]] * 64)
    tok, logp = sample_tokens(logits, temperature, with_logp=True)
    p1 = 0.75 if temperature == 1 else math.sqrt(3) / (1 + math.sqrt(3))
    want = torch.where(tok == 1, torch.tensor(math.log(p1)), torch.tensor(math.log(1 - p1))).double()
    assert torch.allclose(logp, want, atol=1e-12) and set(tok.tolist()) == {0, 1}
    assert sample_tokens(logits, 0.0, with_logp=True)[1] is None  # greedy: no behaviour log-prob


def test_a_sampled_batch_carries_mu_logp_equal_to_the_learners(tiny_base, tmp_path):
    tr = trainer(tiny_base, tmp_path)
    batch = tr.ctx.rollout(4, 4)
    mu = batch.data["mu_logp"]
    with torch.no_grad():
        learner = token_logprobs(tr.ctx.policy, batch)
    assert mu.dtype == learner.dtype and mu.shape == learner.shape
    assert (mu - learner).abs().max() < 1e-5  # a KV-cache decode against a full forward: rounding only
    assert bool((mu[batch.completion_mask == 0] == 0).all()) and bool((mu[batch.completion_mask > 0] < 0).all())
    greedy = tr.ctx.complete([{"prompt": "1+2=", "answer": "3"}], 1, temperature=0.0)
    assert "mu_logp" not in greedy.data


# -- the dials -----------------------------------------------------------------------------------------------------
def test_the_sampler_generates_with_the_weights_of_k_steps_ago(tiny_base, tmp_path, rewards):
    k = 2
    tr = trainer(tiny_base, tmp_path, staleness=k, correction="tis")
    snapshots, lags = [], []
    for step in range(5):
        snapshots.append(copy.deepcopy(tr.ctx.policy.state_dict()))  # θ_step: the weights at the step's start
        row, batch = tr.train_step(step)
        lags.append(row["sampler_lag"])
        behind = copy.deepcopy(tr.ctx.policy).eval()
        behind.load_state_dict(snapshots[max(0, step - k)])
        start = copy.deepcopy(tr.ctx.policy).eval()
        start.load_state_dict(snapshots[step])
        with torch.no_grad():
            assert (token_logprobs(behind, batch) - batch.data["mu_logp"]).abs().max() < 1e-5  # μ = θ_{max(0, s−k)}
            assert (token_logprobs(start, batch) - batch.data["old_logp"]).abs().max() < 1e-6  # π_old = θ_s
        assert len(tr.ctx.sampler.ring) == k
    assert lags == [0, 1, 2, 2, 2]
    assert row["mismatch_kl_k3"] > 1e-3 and row["mismatch_ratio_max"] > 1.2  # the lag shows in the log
    assert 0 < row["correction_frac"] < 1 and "mismatch_band_frac" in row


def test_with_lora_the_ring_holds_the_adapters_alone(tiny_base, tmp_path, rewards):
    tr = make_trainer("grpo", SIZE, tiny_base, str(tmp_path / "lora"), steps=4, train_opts={"staleness": 2},
                      model_opts={"lora_rank": 4})
    tr.train_step(0)
    snapshot = tr.ctx.sampler.ring[-1]
    trainable = {n for n, p in tr.ctx.policy.named_parameters() if p.requires_grad}
    assert set(snapshot) == trainable and all("lora_" in n for n in snapshot)  # the adapters, not the base weights
    held = sum(t.numel() for t in snapshot.values())
    assert held < 0.5 * sum(p.numel() for p in tr.ctx.policy.parameters())


def test_a_killed_stale_run_resumes_with_the_same_samples(tiny_base, tmp_path, rewards, monkeypatch):
    """The ring of snapshots is saved with the checkpoint: without it, steps 3-4 would sample from θ_2 instead of
    θ_1 and θ_2, and the logged mismatch (and everything after) would differ."""
    from gcframe.trainer import Trainer

    def run(name):
        tr = trainer(tiny_base, tmp_path, name=name, staleness=2, correction="mis")
        tr.tcfg.checkpoint_every = 2
        return tr

    run("full").fit()
    step = Trainer.train_step

    def killed_at_3(self, s):
        if s == 3:
            raise KeyboardInterrupt
        return step(self, s)

    monkeypatch.setattr(Trainer, "train_step", killed_at_3)
    with pytest.raises(KeyboardInterrupt):
        run("killed").fit()
    monkeypatch.setattr(Trainer, "train_step", step)
    run("killed").fit(resume=True)

    def rows(name):
        return [{k: v for k, v in r.items() if not k.startswith(("time", "peak_"))}
                for r in read_jsonl(tmp_path / name / "metrics.jsonl")]

    full, resumed = rows("full"), rows("killed")
    assert resumed == full
    assert max(r.get("mismatch_kl_k3", 0) for r in full) > 1e-3  # the samples were off-policy


def test_a_bfloat16_sampler_beside_a_float32_learner(tiny_base, tmp_path, rewards):
    tr = trainer(tiny_base, tmp_path, sampler_dtype="bfloat16")
    row, batch = tr.train_step(0)
    assert {p.dtype for p in tr.ctx.sampler.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in tr.ctx.policy.parameters()} == {torch.float32}
    assert batch.data["mu_logp"].dtype == torch.float32 and row["sampler_lag"] == 0
    # the same weights, another precision: μ ≠ π_old by far more than float32 rounding (KL ~1e-12 and ratios within
    # 1e-6 of 1, test_on_policy_runs_compute_nothing_more) and far less than a lag of two steps (KL ~1e-2)
    assert 1e-8 < row["mismatch_kl_k3"] < 1e-4 and row["mismatch_ratio_max"] > 1 + 1e-4


def test_naive_stores_mu_as_pi_old_and_none_recomputes_it(tiny_base, tmp_path, rewards, monkeypatch):
    seen = {}
    for correction in ("naive", "none"):
        tr = trainer(tiny_base, tmp_path, name=correction, staleness=2, correction=correction)
        coefficients = tr.method.coefficients

        def spy(batch, logp, correction=correction, coefficients=coefficients):
            seen[correction] = (batch.data["old_logp"].clone(), batch.data["mu_logp"].clone())
            return coefficients(batch, logp)

        monkeypatch.setattr(tr.method, "coefficients", spy)
        for step in range(4):
            tr.train_step(step)
    old, mu = seen["naive"]
    assert torch.equal(old, mu)  # μ used as π_old: nothing recomputed
    old, mu = seen["none"]
    assert (old - mu).abs().max() > 1e-3  # π_old recomputed: the learner's, two steps ahead of the sampler


def test_the_correction_multiplies_gc_once_in_the_engine(tiny_base, tmp_path, rewards, monkeypatch):
    """The method's GC (here 1 on every token) reaches the loss multiplied by min(π_old/μ, C), computed from the
    batch independently of gcframe.offpolicy."""
    import gcframe.trainer as trainer_module

    tr = trainer(tiny_base, tmp_path, staleness=2, correction="tis", correction_high=1.05)
    monkeypatch.setattr(tr.method, "coefficients", lambda batch, logp: batch.completion_mask.clone())
    seen = []
    loss = trainer_module.weighted_mle_loss
    monkeypatch.setattr(trainer_module, "weighted_mle_loss", lambda gc, *a, **k: seen.append(gc) or loss(gc, *a, **k))
    for step in range(4):
        row, batch = tr.train_step(step)
    d = batch.data
    want = torch.exp(d["old_logp"] - d["mu_logp"]).clamp(max=1.05) * batch.completion_mask
    assert torch.allclose(seen[-1], want, atol=1e-6)
    assert (want[batch.completion_mask > 0] == 1.05).any() and (want[batch.completion_mask > 0] < 1.05).any()


def test_on_policy_runs_compute_nothing_more(tiny_base, tmp_path, rewards):
    """k = 0, float32, no correction, one minibatch: no π_old forward and no mismatch columns (the default's cost);
    with two minibatches π_old is computed anyway and the mismatch is logged for free, at rounding level."""
    tr = trainer(tiny_base, tmp_path)
    row, batch = tr.train_step(0)
    assert "old_logp" not in batch.data and not any(k.startswith(("mismatch", "correction", "sampler")) for k in row)
    assert tr.ctx.sampler is None
    tr = trainer(tiny_base, tmp_path, name="mb2", minibatches=2)
    row, _ = tr.train_step(0)
    assert abs(row["mismatch_kl_k1"]) < 1e-6 and row["mismatch_kl_k3"] < 1e-9 and row["mismatch_far_frac"] == 0


# -- bad input -------------------------------------------------------------------------------------------------------
BAD = {  # train options (and methods): words the one line must hold
    "staleness below 0": ({"staleness": -1}, "grpo", ["train.staleness must be >= 0"]),
    "staleness not below steps": ({"staleness": 4}, "grpo", ["train.staleness (4) must be below train.steps (4)"]),
    "correction without a ratio": ({"correction": "tis"}, "sft",
                                   ["train.correction tis", "'sft' has no ratio", "it applies to ppo, grpo"]),
    "correction for offline dpo": ({"correction": "seq_mis"}, "dpo", ["'dpo' has no ratio", "cispo"]),
    "C not positive": ({"correction": "tis", "correction_high": 0.0}, "grpo", ["correction_high (C", "> 0, got 0"]),
    "lower not below upper": ({"correction": "mis", "correction_low": 2.0, "correction_high": 1.0}, "grpo",
                              ["correction_low (2.0) must be below train.correction_high (1.0)"]),
    "unknown correction": ({"correction": "is"}, "grpo", ["train.correction must be one of none, tis"]),
    "unknown sampler dtype": ({"sampler_dtype": "int8"}, "grpo", ["train.sampler_dtype must be one of float32"]),
    "pipeline without staleness": ({"pipeline": True}, "grpo", ["train.pipeline", "train.staleness is 0"]),
    "pipeline for a method without a ratio": ({"pipeline": True, "staleness": 1}, "sft",
                                              ["train.pipeline", "'sft' has no ratio", "it applies to ppo, grpo"]),
    "pipeline not a boolean": ({"pipeline": "yes", "staleness": 1}, "grpo", ["train.pipeline"]),
    # before, accepted and ignored: the run trained on its demonstrations and analysis.off_policy filed it under k = 2
    "staleness for a method that samples no policy": ({"staleness": 2}, "sft",
                                                      ["train.staleness 2", "'sft' never samples the policy",
                                                       "it applies to online_rft, ppo", "{sft: {train: {staleness: 0}}}"]),
    "a bfloat16 sampler for offline dpo": ({"sampler_dtype": "bfloat16"}, "dpo",
                                           ["train.sampler_dtype bfloat16", "'dpo' never samples",
                                            "{dpo: {train: {sampler_dtype: float32}}}"]),
    "sampler dtype the machine cannot run": ({"sampler_dtype": "float16"}, "grpo",
                                             ["train.sampler_dtype float16 cannot run on this machine",
                                              "no kernel for Half"]),
    # before, accepted: opsm read opd's absent advantages as 0 and never masked a sequence
    "opsm for a method that stores no advantages": ({"correction": "opsm"}, "opd",
                                                    ["train.correction opsm reads batch.data['advantages']",
                                                     "method 'opd' does not store", "(its prepare stores teacher_logp",
                                                     "opsm applies to methods that store it (ppo, grpo",
                                                     "{opd: {train: {correction: none}}}"]),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_off_policy_input_is_one_line_and_exit_2_before_anything(name, tmp_path, capsys, monkeypatch):
    from experiments.compare import main
    from gcframe.offpolicy import sampler
    from tests.test_resume import TINY_CONFIG

    monkeypatch.setattr(sampler, "_probe", lambda dtype, device: "no kernel for Half" if dtype == "float16" else None)
    train, method, words = BAD[name]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], **train}}))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main(["--config", str(config), "--methods", method, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert all(w in err[0] for w in words), err[0]
    assert not out.exists()  # refused before anything was written or trained


# -- the columns a correction reads ----------------------------------------------------------------------------------
def test_each_correction_declares_the_columns_it_reads():
    """READS: the engine's log π_old and log μ for the ratio corrections, nothing for none and naive, log μ and the
    method's advantages for opsm: the one column a method must store."""
    from gcframe.offpolicy.corrections import FILLED, READS, method_columns

    assert set(READS) == set(FACTORS)
    assert READS["none"] == READS["naive"] == () and READS["opsm"] == ("mu_logp", "advantages")
    assert all(READS[n] == FILLED for n in ("tis", "seq_tis", "mis", "seq_mis", "icepop", "decoupled"))
    assert [n for n in READS if method_columns(n)] == ["opsm"]


def test_a_method_that_declares_no_advantages_is_refused_opsm_before_the_run():
    """Method.check_run: opsm on opd (it stores the teacher's log-probs) is one line naming the correction, the method,
    the column and the fix; on grpo (it stores the advantages) and with any ratio correction, accepted."""
    from gcframe.config import from_dict
    from gcframe.errors import UserError
    from methods import REGISTRY

    cfg = from_dict({"train": {"correction": "opsm"}})
    with pytest.raises(UserError) as e:
        REGISTRY["opd"].check_run(cfg, "opd@vopd")
    line = str(e.value)
    assert "\n" not in line and line.startswith("train.correction opsm reads batch.data['advantages'], which method "
                                                "'opd@vopd' does not store (its prepare stores teacher_logp")
    assert "choose a correction that reads only π_old and μ (none, naive, tis" in line
    assert line.endswith("(methods: {opd@vopd: {train: {correction: none}}})")
    REGISTRY["grpo"].check_run(cfg, "grpo")
    tis = from_dict({"train": {"correction": "tis"}, "methods": {"opd": {"teacher": "clean_base"}}})
    REGISTRY["opd"].check_run(tis, "opd")


def test_an_undeclared_method_without_advantages_is_refused_opsm_on_its_first_batch(tiny_base, tmp_path, rewards,
                                                                                     monkeypatch):
    """A method that declares nothing (stores None: a user's) passes the check before the run; its first batch
    without advantages stops the run in one line (before: w = 1 everywhere, the mask never applied)."""
    from gcframe.errors import UserError
    from gcframe.offpolicy import corrections
    from methods import REGISTRY

    monkeypatch.setattr(REGISTRY["grpo"], "stores", None)
    tr = trainer(tiny_base, tmp_path, staleness=1, correction="opsm")
    monkeypatch.setattr(tr.method, "prepare", lambda batch: None)  # stores no advantages
    monkeypatch.setattr(tr.method, "coefficients", lambda batch, logp: batch.completion_mask.clone())
    with pytest.raises(UserError) as e:
        tr.train_step(0)
    line = str(e.value)
    assert line.startswith("train.correction opsm reads batch.data['advantages'], which the method does not store: "
                           "opsm applies to methods that store it (ppo, ") and "\n" not in line
    assert line.endswith("for the method (methods: {<label>: {train: {correction: none}}})")
    x = hand_inputs()
    x.adv, x.method = None, "mine"  # with the method's name (corrections.inputs(..., method=)), it is named
    with pytest.raises(UserError, match="which method 'mine' does not store: .*{mine: {train: {correction: none}}}"):
        corrections.Correction("opsm", None, 0.3).factor(x)
    assert corrections.Correction("tis", None, 2.0).factor(x)[0].shape == x.mask.shape  # reads no advantages


# -- the head-to-head grid (experiments/configs/off_policy.yaml, reproduce.py off_policy) ---------------------------
def test_the_grid_runs_each_loss_at_its_tuned_rate_with_every_dial_and_its_smoke_labels_are_in_it():
    from experiments.compare import parse_args
    from experiments.compare_config import build_config, method_names, run_config
    from experiments.reproduce import OFF_POLICY_QUICK, RECIPES

    recipe = RECIPES["off_policy"]
    config = str(CONFIGS / recipe.config)
    args = parse_args(["--config", config])
    cfg, seeds = build_config(args)  # (reads run.methods into args)
    labels = method_names(args, cfg)
    default = yaml.safe_load((CONFIGS / "default.yaml").read_text())["methods"]
    losses = ["grpo", "dapo", "cispo", "gspo", "sapo", "ppo", "reinforce_pp"]
    want = {"": (0, "float32", "none"), "@k1": (1, "float32", "none"), "@k4": (4, "float32", "none"),
            "@k16": (16, "float32", "none"), "@k16_tis": (16, "float32", "tis"),
            "@k16_seq_mis": (16, "float32", "seq_mis"), "@k16_naive": (16, "float32", "naive"),
            "@bf16": (0, "bfloat16", "none"), "@k4_bf16": (4, "bfloat16", "none"), "@bf16_tis": (0, "bfloat16", "tis")}
    grid = {loss: [v for v in want if v != "@bf16_tis" or loss == "grpo"] for loss in losses}  # TIS on the bfloat16
    assert sorted(labels) == sorted(f"{loss}{v}" for loss in losses for v in grid[loss])       # sampler: GRPO's
    assert recipe.seeds == [0, 1, 2]
    for loss in losses:
        for variant in grid[loss]:
            k, dtype, correction = want[variant]
            t = run_config(cfg, f"{loss}{variant}", 0)[1].train
            assert (t.staleness, t.sampler_dtype, t.correction) == (k, dtype, correction)
            assert t.lr == default[loss]["train"]["lr"]  # the default's rate, tuned at k = 0, reused
            assert (t.eval_split, t.eval_size, t.steps, t.minibatches) == ("test", 500, 200, 2)
    quick = parse_args(["--config", config, *recipe.quick])
    qcfg, _ = build_config(quick)
    assert set(method_names(quick, qcfg)) <= set(labels) and qcfg.train.steps == 20
    assert {label.split("@")[0] for label in OFF_POLICY_QUICK.split(",")} == set(losses)
    # the families the page decides on, declared before the runs: every comparison between two labels of the grid,
    # each loss against itself (staleness, corrections, the sampler's precision) or at one k (the field's claims)
    spec = families.check(yaml.safe_load(open(config))["families"])
    assert set(spec) == {"staleness", "corrections", "bf16_sampler", "field_claims"}
    pairs = {name: [tuple(p) for p in f["pairs"]] for name, f in spec.items()}
    assert all(a in labels and b in labels for ps in pairs.values() for a, b in ps)
    assert all(a.split("@")[0] == b.split("@")[0] for name in ("staleness", "corrections", "bf16_sampler")
               for a, b in pairs[name])
    assert len(pairs["staleness"]) == len(pairs["corrections"]) == 3 * len(losses)
    assert len(pairs["bf16_sampler"]) == 2 * len(losses) + 1  # k = 0 and 4 for each loss, TIS on GRPO's
    assert len({p for ps in pairs.values() for p in ps}) == sum(map(len, pairs.values()))  # in one family at most
