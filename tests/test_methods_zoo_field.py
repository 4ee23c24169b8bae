"""Issue 64's policy losses by hand: dual-clip PPO's floor (PPO and GRPO), Lite PPO's batch std, MaxRL's mean-scaled
advantage, Kimi's quadratic penalty (both levels), DPPO's masks, GMPO's geometric mean, Clip-Cov's and KL-Cov's
covariance-selected tokens and RPO's NLL term, each on a batch small enough to compute in a comment; their defaults;
and their bad options refused in one line. gcframe.verify's rows (tests/test_verify.py) check every branch against
the papers' losses; tests/test_trl_equivalence_field.py runs TRL's code where TRL ships the loss."""
import math

import pytest
import torch

from gcframe.errors import UserError
from methods import get_method
from methods.base import Method
from tests.test_methods_zoo_pg import close, make, method, ratios_batch

H = 1 / math.sqrt(2)  # Â = ±1/√2: one group of two, rewards [1, 0], std-scaled


def on(name, b, logp, **options):
    m = method(name, **options)
    m.prepare(b)
    return m, m.coefficients(b, logp)


# -- dual clip ---------------------------------------------------------------------------------------------------
def test_grpo_dual_clip_floors_only_negative_advantages_past_c():
    # ε = 0.2, c = 2.5. Row 0 (Â = +h): r = 2 > 1.2 clipped -> 0; r = 1.05 -> h·1.05; r = 3 clipped -> 0.
    # Row 1 (Â = −h): r = 0.5 < 0.8 clipped -> 0; r = 3 > c -> 0 (the floor); r = 2 inside (0.8, 2.5] -> −2h.
    b, logp = ratios_batch([[2.0, 1.05, 3.0], [0.5, 3.0, 2.0]])
    m, gc = on("grpo", b, logp, beta=0.0, dual_clip=2.5)
    assert close(gc, [[0.0, 1.05 * H, 0.0], [0.0, 0.0, -2.0 * H]])
    assert m.pop_stats()["dual_clip_frac"] == pytest.approx(1 / 6)
    _, plain = on("grpo", b, logp, beta=0.0)  # without the floor the r = 3, Â < 0 token pushes with −3h
    assert close(plain, [[0.0, 1.05 * H, 0.0], [0.0, -3.0 * H, -2.0 * H]])


def test_dual_clip_ppo_on_given_advantages():
    # PPO's coefficient on advantages A = [1, −1, −1, −1] and ratios [2, 2, 2.9, 0.5], ε = 0.2, c = 3 (the default):
    # A > 0, r = 2 > 1.2 -> 0; A < 0, r = 2 ∈ (0.8, 3] -> −2; r = 2.9 ∈ (0.8, 3] -> −2.9; r = 0.5 < 0.8 -> 0
    cls = get_method("dual_clip_ppo")
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(), ctx=None)
    r = torch.tensor([[2.0, 2.0, 2.9, 0.5]], dtype=torch.float64)
    logp = torch.zeros_like(r)
    b = make([0.0], logp, -r.log())
    b.data["advantages"] = torch.tensor([[1.0, -1.0, -1.0, -1.0]], dtype=torch.float64)
    assert close(m.coefficients(b, logp), [[0.0, -2.0, -2.9, 0.0]])
    m.cfg.dual_clip = 2.5  # r = 2.9 > 2.5: the floor stops it
    assert close(m.coefficients(b, logp), [[0.0, -2.0, 0.0, 0.0]])
    assert cls.Config().dual_clip == 3.0 and get_method("ppo").Config().dual_clip is None


# -- advantages ---------------------------------------------------------------------------------------------------
def test_lite_ppo_group_mean_batch_std():
    # groups [1, 0, 0, 0] and [1, 1, 0, 0]: means 1/4 and 1/2 -> centred [.75, −.25, −.25, −.25 | .5, .5, −.5, −.5];
    # the batch's 8 rewards hold 3 ones: mean 3/8, unbiased variance (3·(5/8)² + 5·(3/8)²)/7 = 120/448
    b, logp = ratios_batch([[1.0]] * 8, rewards=(1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0))
    b.group_ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    _, gc = on("lite_ppo", b, logp)  # on-policy, β = 0: GC = Â
    std = math.sqrt(120 / 448)
    assert close(gc, [[x / std] for x in (0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5)])
    _, centred = on("lite_ppo", b, logp, scale_by_std=False)
    assert close(centred, [[x] for x in (0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5)])
    flat, logp = ratios_batch([[1.0]] * 4, rewards=(1.0, 1.0, 1.0, 1.0))  # a batch of equal rewards: 0, not NaN
    assert on("lite_ppo", flat, logp)[1].tolist() == [[0.0]] * 4


def test_maxrl_divides_by_the_group_mean():
    # groups [1, 0, 0, 0]: mean 1/4 -> (1 − 1/4)/(1/4) = 3, (0 − 1/4)/(1/4) = −1;  [0, 0, 0, 0]: mean 0 -> 0;
    # [1, 1, 0, 0]: mean 1/2 -> ±1. (1/4)·(3g₁ − g₂ − g₃ − g₄) = g₁ − (g₁ + g₂ + g₃ + g₄)/4: the correct sample's
    # score (K = 1) minus the all-sample mean, MaxRL's estimator
    b, logp = ratios_batch([[1.0]] * 12, rewards=(1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0))
    b.group_ids = torch.arange(12) // 4
    _, gc = on("maxrl", b, logp)
    assert gc[:, 0].tolist() == [3.0, -1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, -1.0, -1.0]


# -- Kimi ---------------------------------------------------------------------------------------------------------
def test_kimi_sequence_and_token_levels():
    # rewards [1, 0] -> Â = r − r̄ = [.5, −.5] (no std); log r row 0 = [.2, .1] (ℓ = .3), row 1 = [−.4, 0] (ℓ = −.4).
    # τ = 0.5, sequence: row 0 .5 − .5·.3 = .35 on each token; row 1 −.5 + .5·.4 = −.3.
    # token: Â r − τ log r: row 0 [.5e^.2 − .1, .5e^.1 − .05], row 1 [−.5e^−.4 + .2, −.5]
    log_r = torch.tensor([[0.2, 0.1], [-0.4, 0.0]], dtype=torch.float64)
    logp = torch.zeros_like(log_r)
    b = make([1.0, 0.0], logp, -log_r)
    _, gc = on("kimi", b, logp, tau=0.5)
    assert close(gc, [[0.35, 0.35], [-0.3, -0.3]])
    _, tok = on("kimi", b, logp, tau=0.5, level="token")
    e = math.exp
    assert close(tok, [[0.5 * e(0.2) - 0.1, 0.5 * e(0.1) - 0.05], [-0.5 * e(-0.4) + 0.2, -0.5]])


# -- DPPO ---------------------------------------------------------------------------------------------------------
def test_dppo_masks_by_probability_not_ratio():
    # Â = ±h. Row 0 (Â > 0): π_old .5 -> π .8 (rose .3 > δ .2: masked); .1 -> .2 (rose .1: kept, though r = 2).
    # Row 1 (Â < 0): .6 -> .3 (fell .3: masked); .6 -> .5 (fell .1: kept, r = 5/6).
    # Binary-KL instead: D(.5→.8) = .5 ln(.5/.8) + .5 ln(.5/.2) = 0.2231 > .2 masked; D(.1→.2) = 0.0367 kept;
    # D(.6→.3) = .6 ln 2 + .4 ln(.4/.7) = 0.1920 < .2 kept; D(.6→.5) = 0.0201 kept
    p_old = torch.tensor([[0.5, 0.1], [0.6, 0.6]], dtype=torch.float64)
    p_new = torch.tensor([[0.8, 0.2], [0.3, 0.5]], dtype=torch.float64)
    b = make([1.0, 0.0], p_new.log(), p_old.log())
    m, gc = on("dppo", b, p_new.log())
    assert close(gc, [[0.0, 2.0 * H], [0.0, -H * 5 / 6]])
    s = m.pop_stats()
    assert (s["mask_high_frac"], s["mask_low_frac"]) == (0.25, 0.25)
    _, kl = on("dppo", b, p_new.log(), divergence="kl")
    assert close(kl, [[0.0, 2.0 * H], [-H * 0.5, -H * 5 / 6]])
    assert 0.5 * math.log(0.5 / 0.8) + 0.5 * math.log(0.5 / 0.2) == pytest.approx(0.2231, abs=1e-4)
    assert 0.6 * math.log(2) + 0.4 * math.log(0.4 / 0.7) == pytest.approx(0.1920, abs=1e-4)


# -- GMPO ---------------------------------------------------------------------------------------------------------
def test_gmpo_geometric_mean_of_clipped_ratios():
    # ε_low = 0.4, ε_high = 0.3 (log space). Row 0 (Â = +h): log r [.5, .1]: .5 > .3 clipped to .3 (no gradient),
    # .1 kept; g₀ = exp((.3 + .1)/2) = e^.2 -> GC [0, h e^.2].
    # Row 1 (Â = −h): log r [−.5, .2]: −.5 < −.4 clipped to −.4 (no gradient), .2 kept; g₁ = e^{(−.4 + .2)/2} = e^{−.1}
    log_r = torch.tensor([[0.5, 0.1], [-0.5, 0.2]], dtype=torch.float64)
    logp = torch.zeros_like(log_r)
    b = make([1.0, 0.0], logp, -log_r)
    m, gc = on("gmpo", b, logp, clip_eps=0.4, clip_eps_high=0.3)
    assert close(gc, [[0.0, H * math.exp(0.2)], [0.0, -H * math.exp(-0.1)]])
    s = m.pop_stats()
    assert (s["clip_high_frac"], s["clip_low_frac"]) == (0.25, 0.25)


# -- Clip-Cov and KL-Cov ---------------------------------------------------------------------------------------------
def _cov_batch():
    # Â = [h, h | −h, −h] (mean 0), log π_old = [−1, −2 | −1, −3] (mean −7/4):
    # Cov = h·[.75, −.25 | −.75, 1.25] ≈ [.530, −.177, −.530, .884]
    old = torch.tensor([[-1.0, -2.0], [-1.0, -3.0]], dtype=torch.float64)
    log_r = torch.tensor([[0.1, 0.0], [0.0, -0.2]], dtype=torch.float64)
    return make([1.0, 0.0], old + log_r, old), old + log_r, log_r


def test_kl_cov_penalises_the_top_covariance_token():
    # ρ = 0.25 of 4 tokens: k = 1, the token (1, 1) (Cov 1.25h). GC = Â r − β_kl sign(log r) there: log r = −0.2,
    # so −h e^{−0.2} + 1; the others Â r: [h e^{0.1}, h | −h, ·]
    b, logp, _ = _cov_batch()
    m, gc = on("kl_cov", b, logp, kl_cov_ratio=0.25)
    assert b.data["cov_selected"].tolist() == [[0.0, 0.0], [0.0, 1.0]]
    assert close(gc, [[H * math.exp(0.1), H], [-H, -H * math.exp(-0.2) + 1.0]])


def test_clip_cov_detaches_the_drawn_band_tokens():
    # band (0.5, 1): candidates (0, 0) at .530 and (1, 1) at .884; ρ = 0.5 of 4 tokens -> k = 2: both detached.
    # Others keep PPO's clipped surrogate (ε = 0.2, every ratio inside): (0, 1) h·1, (1, 0) −h·1
    b, logp, _ = _cov_batch()
    m, gc = on("clip_cov", b, logp, clip_cov_ratio=0.5, clip_cov_lb=0.5, clip_cov_ub=1.0)
    assert b.data["cov_selected"].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert close(gc, [[0.0, H], [-H, 0.0]])
    b, logp, _ = _cov_batch()  # k = 1: one of the two candidates, drawn by the seeded keys; the others untouched
    m, gc = on("clip_cov", b, logp, clip_cov_ratio=0.25, clip_cov_lb=0.5, clip_cov_ub=1.0)
    chosen = b.data["cov_selected"]
    assert float(chosen.sum()) == 1.0 and float(chosen[0, 1] + chosen[1, 0]) == 0.0
    assert float(gc[chosen.bool()].abs().sum()) == 0.0 and float(gc[~chosen.bool()].abs().min()) > 0.5


# -- RPO ----------------------------------------------------------------------------------------------------------
def test_rpo_adds_alpha_over_the_chosen_length():
    # one pair, Δ⁺ = Δ⁻ = 0 (π_θ = π_ref): σ(0) = 1/2, β = 0.1 -> DPO's ±0.05; |o⁺| = 2, α = 1 -> +1/2 on o⁺:
    # chosen tokens 0.55, rejected −0.05 (the rejected has 3 tokens)
    from gcframe.batch import Batch

    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    logp = torch.log(torch.tensor([[0.5, 0.4, 1.0], [0.3, 0.2, 0.6]], dtype=torch.float64)) * mask
    b = Batch(torch.ones(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long),
              mask, torch.tensor([0, 0]), {"is_chosen": torch.tensor([1.0, 0.0]), "ref_logp": logp.clone()})
    cls = get_method("rpo")
    m = cls.__new__(cls)
    Method.__init__(m, cls.Config(), ctx=None)
    assert close(m.coefficients(b, logp), [[0.55, 0.55, 0.0], [-0.05, -0.05, -0.05]])


# -- defaults and bad options ----------------------------------------------------------------------------------------
def test_the_papers_defaults():
    C = {n: get_method(n).Config() for n in ("lite_ppo", "kimi", "dppo", "gmpo", "clip_cov", "kl_cov", "maxrl", "rpo")}
    assert (C["lite_ppo"].aggregation, C["lite_ppo"].scale_by_std, C["lite_ppo"].beta) == ("token-mean", True, 0.0)
    assert (C["kimi"].aggregation, C["kimi"].scale_by_std, C["kimi"].level) == ("seq-mean-token-sum", False, "sequence")
    assert (C["dppo"].delta_low, C["dppo"].delta_high, C["dppo"].divergence) == (0.2, 0.2, "tv")  # SkyRL, prime-rl
    assert (C["gmpo"].clip_eps, C["gmpo"].clip_eps_high, C["gmpo"].aggregation) == (0.4, None, "seq-mean-token-mean")
    assert (C["clip_cov"].clip_cov_ratio, C["clip_cov"].clip_cov_lb, C["clip_cov"].clip_cov_ub) == (2e-4, 1.0, 5.0)
    assert (C["kl_cov"].kl_cov_ratio, C["kl_cov"].kl_coef, C["kl_cov"].aggregation) == (2e-4, 1.0, "token-mean")
    assert (C["maxrl"].scale_by_std, C["rpo"].alpha, C["rpo"].beta) == (False, 1.0, 0.1)


@pytest.mark.parametrize("name, options, words", [
    ("dual_clip_ppo", {"dual_clip": 1.0}, "methods.dual_clip_ppo: dual_clip (dual-clip PPO's c) must be > 1, got 1.0"),
    ("grpo", {"dual_clip": 0.5}, "methods.grpo: dual_clip (dual-clip PPO's c) must be > 1, got 0.5"),
    ("cispo", {"dual_clip": 3.0}, "methods.cispo: dual_clip floors GRPO's clipped surrogate"),
    ("kimi", {"tau": -0.1}, "methods.kimi: tau (τ, the quadratic penalty's weight) must be > 0, got -0.1"),
    ("kimi", {"level": "word"}, "methods.kimi: level must be 'sequence'"),
    ("kimi", {"aggregation": "token-mean"}, "level 'sequence' is eq. 3's mean over the samples"),
    ("dppo", {"delta_low": -0.1}, "methods.dppo: delta_low and delta_high must be >= 0"),
    ("dppo", {"divergence": "js"}, "methods.dppo: divergence must be 'tv'"),
    ("gmpo", {"clip_eps": 0.0}, "methods.gmpo: clip_eps and clip_eps_high must be > 0"),
    ("clip_cov", {"clip_cov_ratio": 0.0}, "methods.clip_cov: clip_cov_ratio must be in (0, 1]"),
    ("clip_cov", {"clip_cov_lb": 5.0, "clip_cov_ub": 1.0}, "clip_cov_lb must be below clip_cov_ub"),
    ("kl_cov", {"kl_coef": -1.0}, "methods.kl_cov: kl_coef must be >= 0"),
    ("maxrl", {"scale_by_std": True}, "methods.maxrl: MaxRL's advantage is (R − mean)/mean"),
    ("rpo", {"alpha": -1.0}, "methods.rpo.alpha must be >= 0"),
    ("opd", {"baseline": "critic"}, "methods.opd: baseline must be 'none' or 'vopd'"),
    ("sft_teacher", {"pool_size": 0}, "methods.sft_teacher: pool_size must be an integer >= 1"),
])
def test_bad_options_are_one_line(name, options, words):
    with pytest.raises(UserError) as e:
        get_method(name).Config.from_dict(options, name)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["lite_ppo", "maxrl", "dppo", "gmpo", "kimi", "kl_cov"])
def test_on_policy_gc_is_the_advantage(name):
    """One pass over a batch: π_old = π_θ, every ratio 1, no clip, mask or penalty acts, and at β = 0 GC = Â (Clip-Cov
    detaches a few tokens even on-policy, so it is not in this list)."""
    logp = torch.log(torch.tensor([[0.3, 0.6], [0.2, 0.9]], dtype=torch.float64))
    b = make([1.0, 0.0], logp, logp.clone())
    m = method(name)
    m.prepare(b)
    del b.data["old_logp"]
    assert torch.equal(m.coefficients(b, logp), b.data["advantages"])


# -- their head to head (experiments/configs/new_losses.yaml, reproduce.py new_losses) -------------------------------
def test_the_new_losses_grid_pairs_each_loss_with_the_method_it_modifies():
    from pathlib import Path

    import yaml

    from analysis import families
    from experiments.compare import parse_args
    from experiments.compare_config import build_config, method_names
    from experiments.reproduce import RECIPES
    from methods import REGISTRY

    recipe = RECIPES["new_losses"]
    config = Path(__file__).resolve().parents[1] / "experiments" / "configs" / recipe.config
    args = parse_args(["--config", str(config)])
    labels = method_names(args, build_config(args)[0])
    raw, default = (yaml.safe_load((config.parent / f).read_text()) for f in (recipe.config, "default.yaml"))
    design = ("task", "sft_base", "train", "reward_model")
    assert {k: raw[k] for k in design} == {k: default[k] for k in design} and raw["tune"]["lr"] == default["tune"]["lr"]
    assert "--tune" in recipe.args and recipe.seeds[:2] == [0, 1]  # every arm tuned at the same budget
    # its test seeds are as many as the committed plan asks (analysis.plan: the planned families' rows)
    import pandas as pd

    plan = pd.read_csv(Path(__file__).resolve().parents[1] / "results" / "new_losses" / "plan.csv")
    assert len(recipe.seeds) - 2 >= pd.to_numeric(plan["seeds planned"]).max()
    spec = families.check(raw["families"])
    parents = [tuple(p) for p in spec["over_parent"]["pairs"]]
    assert {a for a, _ in parents} == set(labels) - {"ppo", "grpo", "dpo", "sft_filtered"}  # every new loss, once
    assert all(issubclass(REGISTRY[a], REGISTRY[b]) for a, b in parents)  # against the class it extends
    quick = parse_args(["--config", str(config), *recipe.quick])
    assert set(method_names(quick, build_config(quick)[0])) <= set(labels)
