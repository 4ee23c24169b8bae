"""The core claim, for every registered method: ∇(−GC·log π) = ∇(textbook loss), clip active and β > 0, to a
tolerance that sees a float32 normaliser; an unknown method or one without a textbook loss is one line, exit 2."""
import pytest
import torch

from gcframe import verify
from methods import REGISTRY


def test_every_method_has_a_textbook_loss():
    assert set(REGISTRY) <= set(verify.TEXTBOOK)


@pytest.fixture(scope="module")
def rows():
    from accelerate import Accelerator

    from gcframe import pipeline

    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    return {name: verify.verify_method(name, cfg, task, base_dir, acc) for name in [*REGISTRY, *verify.VARIANTS]}


@pytest.mark.parametrize("name", [*REGISTRY, *verify.VARIANTS])
def test_engine_gradient_equals_textbook_gradient(rows, name):
    r = rows[name]
    assert r["grad_norm"] > 0  # a non-trivial gradient
    assert r["ratio_min"] < 0.95 and r["ratio_max"] > 1.05  # π_θ really moved away from π_old
    assert r["max_rel_diff"] <= verify.TOLERANCE


@pytest.mark.parametrize("name", ["ppo", "grpo", "grpo_ps"])
def test_clip_is_active_and_kl_is_on(rows, name):
    assert rows[name]["clip_frac"] > 0
    assert rows[name]["beta"] > 0


def test_the_preference_methods_run_every_branch(rows):
    """KTO's reference point is live (z₀ > 0, clamped at 0 only where the estimate is negative), ORPO's two terms both
    carry weight, SimPO's margin γ > 0, IPO's token_mean changes the gradient, online DPO found pairs. KTO's z₀ and
    online DPO's pairs are so by construction (gcframe.verify: `_reference_below`, `OUTCOMES_AT_SAMPLING`), on any
    machine: not by how the tiny base's samples round on this CPU."""
    cfg = verify._verify_config()
    assert rows["kto"]["stats"]["kto_z0"] == pytest.approx(verify.Z0_MARGIN, rel=1e-6)  # the reference placed so
    assert rows["orpo"]["stats"]["orpo_sft_loss"] > 0 and rows["orpo"]["stats"]["orpo_or_loss"] > 0
    assert REGISTRY["simpo"].Config.from_dict(cfg.methods.get("simpo", {}), "simpo").gamma > 0
    assert rows["ipo"]["grad_norm"] != pytest.approx(rows["ipo@token_mean"]["grad_norm"], rel=1e-3)
    # 4 prompts × 8 samples with seeded outcomes: the first prompt's alike (no pair), each other's 0/1 at random (a
    # pair unless all 8 agree, 2/256): 3 pairs from the same draws on every machine
    assert rows["online_dpo"]["stats"]["paired_prompts"] == 3 and rows["online_dpo"]["stats"]["unpaired_prompts"] == 1


def test_the_issue_64_methods_run_every_branch(rows):
    """Each branch of the new losses was taken in its row (their hand-computed cases: tests/test_methods_zoo_field.py):
    the dual clip's floor beside the plain clip, both sides of DPPO's masks (TV and KL), GMPO's log-space clip on both
    sides, some but not all tokens chosen by covariance, Kimi's log-ratios moved, vOPD's KL live and the teacher unlike
    the student, the teacher's pool built, RPO's NLL term carrying weight, Lite PPO's batch std changing the step."""
    s = {name: r["stats"] for name, r in rows.items()}
    for name in ("dual_clip_ppo", "grpo@dual_clip"):
        assert 0 < s[name]["dual_clip_frac"] < s[name]["clip_frac"], name
    for name in ("grpo@dual_clip", "gmpo", "clip_cov", "maxrl", "lite_ppo"):
        assert s[name]["clip_low_frac"] > 0 and s[name]["clip_high_frac"] > 0 and s[name]["clip_frac"] < 1, name
    for name in ("dppo", "dppo@kl"):
        assert s[name]["mask_high_frac"] > 0 and s[name]["mask_low_frac"] > 0 and s[name]["mask_frac"] < 1, name
    for name in ("clip_cov", "kl_cov"):
        assert 0 < s[name]["cov_selected_frac"] < 1, name
    assert s["kl_cov"]["kl_cov_penalty"] > 0 and s["clip_cov"]["cov_candidate_frac"] > s["clip_cov"]["cov_selected_frac"]
    assert s["kimi"]["seq_log_ratio_abs"] > 0.05 and s["kimi@token"]["log_ratio_sq"] > 0.01
    assert s["opd@vopd"]["teacher_kl"] > 0.01 and s["opd"]["reverse_kl"] > 0.01
    assert s["sft_teacher"]["pool_size"] == 16 and s["maxrl"]["zero_var_frac"] > 0
    assert s["rpo"]["nll_loss"] > 0.1 and s["rpo"]["dpo_loss"] > 0.1
    assert rows["lite_ppo"]["grad_norm"] != pytest.approx(rows["lite_ppo@centred"]["grad_norm"], rel=1e-3)


def test_a_wrong_coefficient_is_caught(rows, monkeypatch):
    """The check can fail: GRPO without its KL term no longer matches the textbook loss with β > 0."""
    from accelerate import Accelerator

    from gcframe import pipeline
    from methods.grpo import GRPO

    original = GRPO.coefficients

    def without_kl(self, batch, logp):
        beta, self.cfg.beta = self.cfg.beta, 0.0
        try:
            return original(self, batch, logp)
        finally:
            self.cfg.beta = beta

    monkeypatch.setattr(GRPO, "coefficients", without_kl)
    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    assert verify.verify_method("grpo", cfg, task, base_dir, acc)["max_rel_diff"] > 1e-3


def test_a_method_that_reads_pi_old_cannot_declare_it_unused(rows, monkeypatch):
    """needs_old_logp False lets the engine skip π_old's forward pass: declared by a method whose GC reads the ratio
    (CISPO's clipped weight), verify fails it; every method that declares it passes (test above), and the engine then
    stores no π_old for it."""
    from accelerate import Accelerator

    from gcframe import pipeline
    from methods.cispo import CISPO

    assert {n for n, m in REGISTRY.items() if not m.needs_old_logp} >= {"sft", "rft", "online_rft", "dpo", "kto"}
    assert not any(r["reads_old_logp_undeclared"] for r in rows.values())
    monkeypatch.setattr(CISPO, "needs_old_logp", False)
    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=False)
    r = verify.verify_method("cispo", cfg, task, base_dir, acc)
    assert r["reads_old_logp_undeclared"] and r["max_rel_diff"] == float("inf")


def test_each_declared_store_is_what_prepare_stored(rows):
    """`Method.stores` (what a train.correction's columns are checked against before a run): every column a method's
    prepare stored in its row is declared, and a column a correction reads (opsm: the advantages) is declared only
    where prepare stored it. Every method a correction may apply to (one with a ratio) declares."""
    from gcframe.offpolicy.corrections import READS, method_columns

    read = {c for name in READS for c in method_columns(name)}
    assert read == {"advantages"}
    for label, r in rows.items():
        cls = REGISTRY[verify.VARIANTS.get(label, (label,))[0]]
        assert cls.stores is not None or not cls.needs_old_logp, label
        if cls.stores is not None:
            assert set(r["prepared"]) <= set(cls.stores), (label, r["prepared"])
            assert {c for c in cls.stores if c in read} <= set(r["prepared"]), (label, r["prepared"])
    assert "advantages" not in rows["opd"]["prepared"] and "advantages" in rows["grpo"]["prepared"]


def test_the_command_exits_zero(rows, capsys, monkeypatch):
    # the fixture's rows are the same function's on the same config: the command's own table and exit status are
    # what this checks (each gradient is checked above), without computing all of them a second time
    monkeypatch.setattr(verify, "verify_method", lambda name, *a, **k: rows[name])
    assert verify.main([]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{name} " in out for name in REGISTRY)
    assert "nan" not in out  # a method without a clip shows "–" in the clip-fraction column (issue 26)
    assert any(line.startswith("sft ") and " – " in line for line in out.splitlines())


def _base():
    from accelerate import Accelerator

    from gcframe import pipeline

    cfg, task = pipeline.prepare(verify._verify_config())
    acc = Accelerator(cpu=True)
    return cfg, task, pipeline.sft_base(cfg, task, acc, show_progress=False)[0], acc


@pytest.mark.parametrize("name", ["grpo", "sft"])  # seq-mean-token-mean over 16 rows, token-mean
def test_a_float32_normaliser_is_caught(rows, monkeypatch, name):
    """The engine's weights rounded to float32, as they once were: 1/Σ|o| and 1/(|o_i|·N) off by up to 6e-8
    relative, which the tolerance sees (the textbook side aggregates on its own, in float64)."""
    from gcframe import engine

    exact = engine.token_weights
    monkeypatch.setattr(engine, "token_weights", lambda mask, mode, norm, dtype=torch.float32:
                        exact(mask, mode, norm, torch.float32).to(dtype))
    assert rows[name]["max_rel_diff"] < 1e-14  # the fixture's rows, with float64 weights
    assert verify.verify_method(name, *_base())["max_rel_diff"] > 100 * verify.TOLERANCE


@pytest.mark.parametrize("mode, expected", [
    # two sequences, o_1 = (1, 2) and o_2 = (3, 4, 5, 6), T = 4 (test_engine.py's example)
    ("token-mean", 21 / 6),  # (1+2+3+4+5+6) / 6 tokens
    ("seq-mean-token-mean", 3.0),  # ((1+2)/2 + (3+4+5+6)/4) / 2 = (1.5 + 4.5) / 2
    ("seq-mean-token-sum", 10.5),  # (3 + 18) / 2
    ("seq-mean-token-sum-norm", 21 / 8),  # (3 + 18) / (2 · 4)
])
def test_the_textbook_side_aggregates_by_hand(mode, expected):
    values = torch.tensor([[1.0, 2.0, 9.0, 9.0], [3.0, 4.0, 5.0, 6.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    assert float(verify._mean_as_written(values, mask, mode)) == pytest.approx(expected, rel=1e-15)


def _one_line_exit_2(capsys, monkeypatch, argv) -> str:
    """verify.main(argv) must stop before the SFT base (minutes on a larger one): exit 2, one line on stderr."""
    from gcframe import pipeline

    def no_base(*_a, **_k):
        raise AssertionError("trained the SFT base before checking the names")

    monkeypatch.setattr(pipeline, "sft_base", no_base)
    with pytest.raises(SystemExit) as e:
        verify.main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1 and not out, (out, err)
    return err


def test_an_unknown_method_is_named_with_the_known_ones(capsys, monkeypatch):
    err = _one_line_exit_2(capsys, monkeypatch, ["--methods", "grpo,nope"])
    assert "unknown method 'nope'" in err and "NO TEXTBOOK LOSS" not in err
    assert all(name in err for name in [*REGISTRY, *verify.VARIANTS])


def test_a_method_without_a_textbook_loss_says_how_to_declare_one(capsys, monkeypatch):
    """A registered method whose file declares no @textbook loss (the README's short my_methods.py): named, with the
    decorator and the guide; exit 2, where a gradient that differs exits 1 (tests/test_plugins.py)."""
    from methods.grpo import GRPO

    monkeypatch.setitem(REGISTRY, "reinforce", GRPO)  # registered, but absent from verify.TEXTBOOK
    for argv in (["--methods", "sft,reinforce"], []):  # named, or among all registered methods
        err = _one_line_exit_2(capsys, monkeypatch, argv)
        assert "no textbook loss is declared for 'reinforce'" in err
        assert '@textbook("reinforce")' in err and "docs/guides/adding-a-method.md" in err
