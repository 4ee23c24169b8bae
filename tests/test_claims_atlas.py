"""docs/results/atlas.md against the update atlas's data: every number and comparison the page states in its own words
(outside the rendered tables) is checked here against results/atlas/*.csv, atlas.json and env.json (and, for the one
sentence that compares with the shared-rate comparison, results/default_mid_curve/table.csv), at the precision it is written at, so
that the prose cannot drift from the data. Each test first asserts that the sentences its docstring quotes are still
on the page: editing the prose means editing the test."""
from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
ATLAS = ROOT / "results" / "atlas"
PAGE = ROOT / "docs" / "results" / "atlas.md"
BASE, LATE = "SFT base", "GRPO step 30"
POLICIES = (BASE, LATE)
ON_POLICY = ("online_rft", "ppo", "grpo", "grpo_ps", "rloo")
GROUP = ("grpo", "grpo_ps", "rloo")
OFFLINE = ("sft", "rft", "dpo")


# -- helpers -----------------------------------------------------------------------------------------------------------
def _csv(name: str, folder: Path = ATLAS) -> pd.DataFrame:
    path = folder / name
    if not path.is_file():
        pytest.skip(f"{path.relative_to(ROOT)} not made yet")
    return pd.read_csv(path)


def _json(name: str) -> dict:
    path = ATLAS / name
    if not path.is_file():
        pytest.skip(f"results/atlas/{name} not made yet")
    return json.loads(path.read_text())


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _says(*sentences: str) -> None:
    """Each sentence is on the page as quoted (line breaks and indentation aside)."""
    flat = _flat(PAGE.read_text())
    for s in sentences:
        assert _flat(s) in flat, f"no longer on the page: {s!r}"


def _is(x: float, written: str) -> bool:
    """x, rounded to the precision `written` is written at, is `written`: '0.197', '−0.40', '27', '201,497', and in
    scientific notation '9e-3' (to its last significant digit)."""
    w = written.replace(",", "").replace("−", "-").lstrip("+")
    exponent = Decimal(w).as_tuple().exponent  # the place of the last written digit: '0.197' -> -3, '9e-3' -> -3
    return abs(x - float(w)) <= 0.5 * 10.0 ** exponent * (1 + 1e-9) + 1e-300


def _span(xs, lo: str, hi: str) -> bool:
    """The range lo–hi is the extent of xs: the least is lo, the greatest hi (as written)."""
    xs = list(xs)
    return _is(min(xs), lo) and _is(max(xs), hi)


def _atlas() -> pd.DataFrame:
    """atlas.csv indexed by (policy, method)."""
    return _csv("atlas.csv").set_index(["policy", "method"])


def _cos(policy: str, a: str, b: str, column: str = "cosine_corr") -> float:
    c = _csv("cosines.csv")
    row = c[(c["policy"] == policy) & (c["a"] == a) & (c["b"] == b)]
    assert len(row) == 1, (policy, a, b)
    return float(row.iloc[0][column])


def _critic(step: int | None = None) -> pd.DataFrame:
    """critic_distance.csv at one probe (the last by default): mse by distance, one column per estimator."""
    d = _csv("critic_distance.csv")
    step = int(d["step"].max()) if step is None else step
    return d[d["step"] == step].pivot(index="distance", columns="estimator", values="mse").sort_index()


def _lengths(step: int | None = None, estimator: str = "critic") -> pd.DataFrame:
    """critic_length.csv at one probe (the last by default) for one estimator, indexed by the completion's length."""
    ln = _csv("critic_length.csv")
    step = int(ln["step"].max()) if step is None else step
    return ln[(ln["step"] == step) & (ln["estimator"] == estimator)].set_index("length").sort_index()


def _right(lengths: pd.DataFrame) -> float:
    """The share of right answers among these completions."""
    return float((lengths["accuracy"] * lengths["sequences"]).sum() / lengths["sequences"].sum())


# -- what it does ------------------------------------------------------------------------------------------------------
def test_the_atlas_set_up_its_policies_prompts_and_draws():
    """'The mid-curve SFT base (`experiments/configs/mid_curve_base.yaml`; greedy held-out accuracy 0.41 on
    500 problems, recorded in `atlas.json`) and the policy after 30 GRPO steps from it (that config's GRPO; 4
    steps with `--quick`).'
    'The first Q = 64 RL prompts (16 with `--quick`).' 'Every completion with π(o|q) ≥ 10⁻⁶ (10⁻⁴ with `--quick`)'
    'its step is drawn 192 times (12 with `--quick`)' 'A step is B = 8 prompts × G = 8 samples (64 sequences).
    Methods with auxiliary models (PPO's critic) first train them for 60 steps at the fixed policy, as the trainer
    would; RFT's pool (512 correct samples of the SFT base)'
    'python experiments/atlas.py --quick --out runs/atlas-q  # plumbing only: 16 prompts, 12 draws'"""
    _says("The mid-curve SFT base (`experiments/configs/mid_curve_base.yaml`; greedy held-out accuracy 0.41 "
          "on 500 problems, recorded in `atlas.json`) and the policy after 30 GRPO steps from it (the default "
          "config's GRPO; 4 steps with `--quick`).",
          "The first Q = 64 RL prompts (16 with `--quick`).",
          "Every completion with π(o|q) ≥ 10⁻⁶ (10⁻⁴ with `--quick`)",
          "its step is drawn 192 times (12 with `--quick`)",
          "A step is B = 8 prompts × G = 8 samples (64 sequences). Methods with auxiliary models (PPO's critic) "
          "first train them for 60 steps at the fixed policy, as the trainer would; RFT's pool (512 correct samples "
          "of the SFT base)",
          "python experiments/atlas.py --quick --out runs/atlas-q  # plumbing only: 16 prompts, 12 draws")
    info = _json("atlas.json")
    assert info["quick"] is False
    base = info["base"]
    assert _is(base["eval_accuracy"], "0.41") and "eval_size=500," in base["eval_key"]
    spec = info["spec"]
    assert (spec["prompts"], spec["draws"], spec["rl_steps"], spec["eps"]) == (64, 192, 30, 1e-6)
    assert (spec["aux_warmup"], spec["rft_pool"]) == (60, 512)
    assert (info["step"]["prompts_per_step"], info["step"]["group_size"]) == (8, 8)
    assert list(info["policies"]) == [BASE, LATE] == ["SFT base", f"GRPO step {spec['rl_steps']}"]
    g = _csv("g_star.csv")
    assert all(g.groupby("policy").size() == spec["prompts"])  # g* over the Q prompts
    a = _csv("atlas.csv")
    assert (a["draws"] == spec["draws"]).all()
    import methods

    # the seed's eight, as the page says; every one still registered (reproduce.py atlas re-makes it with them all)
    assert info["methods"] == ["sft", "rft", "online_rft", "ppo", "grpo", "grpo_ps", "dpo", "rloo"]
    assert set(info["methods"]) <= set(methods.REGISTRY)
    assert "covers the seed's eight methods" in (ROOT / "docs" / "results" / "atlas.md").read_text()
    assert set(a["method"]) == set(info["methods"]) and set(a["policy"]) == set(POLICIES)
    from experiments.atlas import QUICK

    assert (QUICK["rl_steps"], QUICK["prompts"], QUICK["eps"], QUICK["draws"]) == (4, 16, 1e-4, 12)


def test_grpo_ps_reads_as_grpo():
    """'On the default task (2 operands, no shown steps) a completion has one step, the answer, so GRPO-PS's process
    reward is the outcome reward and its row reads as GRPO's.'"""
    _says("so GRPO-PS's process reward is the outcome reward and its row reads as GRPO's.")
    a = _atlas()
    for policy in POLICIES:
        g, ps = a.loc[(policy, "grpo")], a.loc[(policy, "grpo_ps")]
        assert _cos(policy, "grpo", "grpo_ps") > 0.999 and _cos(policy, "grpo", "grpo_ps", "cosine") > 0.99, policy
        for col in ("cosine_corr", "scale", "rel_bias", "step_cosine"):
            assert abs(g[col] - ps[col]) < 0.005, (policy, col)
        for col in ("snr", "snr_per_ktok"):
            assert abs(g[col] / ps[col] - 1) < 0.03, (policy, col)
        assert abs(g["snr"] - ps["snr"]) < 0.1 * abs(g["snr"] - a.loc[(policy, "ppo"), "snr"])  # nearer than PPO's


# -- results -----------------------------------------------------------------------------------------------------------
def test_the_policies_g_star_and_the_time():
    """'(E[r] over the 64 prompts is 0.197 at the SFT base and 0.251 after 30 GRPO steps, lower bounds: the walk prunes
    0.004 and 0.005 of probability per prompt on average, at most 9·10⁻³; g* by enumeration of 201,497 and 207,998
    completions; 27 min of wall time and 1,043 s of CPU for the whole atlas with the critic study, as one one-thread
    process beside another one-thread job on a 2-core machine)'
    'it is reported per prompt in `g_star.csv` and per policy in `atlas.json`, so E[r] and g* are exact to that.'"""
    _says("(E[r] over the 64 prompts is 0.197 at the SFT base and 0.251 after 30 GRPO steps, lower bounds: the walk "
          "prunes 0.004 and 0.005 of probability per prompt on average, at most 9·10⁻³; g\\* by enumeration of "
          "201,497 and 207,998 completions; 27 min of wall time and 1,043 s of CPU for the whole atlas with the critic "
          "study, as one one-thread process beside another one-thread job on a 2-core machine):",
          "it is reported per prompt in `g_star.csv` and per policy in `atlas.json`, so E[r] and g\\* are exact to "
          "that.")
    info = _json("atlas.json")
    g = _csv("g_star.csv")
    pruned = []
    for policy, er, mean, leaves in [(BASE, "0.197", "0.004", "201,497"), (LATE, "0.251", "0.005", "207,998")]:
        pol = info["policies"][policy]
        rows = g[g["policy"] == policy]
        assert len(rows) == 64 and _is(pol["p_mean"], er) and _is(rows["p"].mean(), er), policy
        assert _is(pol["leaves"], leaves), policy
        assert abs(rows["pruned_mass"].max() - pol["pruned_mass_max"]) < 1e-12, policy
        assert _is(pol["pruned_mass_mean"], mean) and _is(rows["pruned_mass"].mean(), mean), policy
        assert (rows["p"] >= 0).all() and (rows["p"] + rows["pruned_mass"] <= 1 + 1e-9).all(), policy  # bounds
        pruned.append(pol["pruned_mass_max"])
    assert max(pruned) <= 9.5e-3 and _is(max(pruned), "9e-3")
    t = info["time_s"]
    assert _is(t["total"] / 60, "27") and _is(t["cpu_total"], "1,043")
    assert abs(t["atlas"] + t["critic"] - t["total"]) < 1  # the whole atlas with the critic study
    env = _json("env.json")
    assert env["threads"] == 1 and env["cores"] == 2 and env["device"] == "cpu"


def test_the_on_policy_mean_steps_point_up_the_reward_and_one_step_is_mostly_noise():
    """'Online RFT, PPO, GRPO, GRPO-PS and RLOO have mean steps at cosine 0.987–1.000 to g* at both policies, and at
    least 0.98 to one another (the second figure); 192 draws resolve every mean (n·SNR ≥ 9). RLOO's is g* itself, as
    the exact tests' closed form says: scale 0.93–0.95 and relative bias 0.000 (‖ḡ − g*‖ within the noise of its
    draws). One step of GRPO, GRPO-PS or RLOO has an SNR of 0.048–0.056 and points at g* with a cosine of
    0.23–0.25.'"""
    _says("**The on-policy methods' mean steps point up the reward; one step is mostly noise.** Online RFT, PPO, GRPO, "
          "GRPO-PS and RLOO have mean steps at cosine 0.987–1.000 to g\\* at both policies, and at least 0.98 to one "
          "another (the second figure); 192 draws resolve every mean (n·SNR ≥ 9). RLOO's is g\\* itself, as the exact "
          "tests' closed form says: scale 0.93–0.95 and relative bias 0.000 (‖ḡ − g\\*‖ within the noise of its "
          "draws). One step of GRPO, GRPO-PS or RLOO has an SNR of 0.048–0.056 and points at g\\* with a cosine of "
          "0.23–0.25.")
    from analysis.atlas import RESOLVED

    a = _atlas()
    on = a.loc[[(p, m) for p in POLICIES for m in ON_POLICY]]
    assert _span(on["cosine_corr"], "0.987", "1.000")
    nsnr = a["draws"] * a["snr"]
    assert nsnr.min() >= 9 and nsnr.min() >= RESOLVED  # every mean resolved: no cosine is blanked (n/a)
    assert _is(a["draws"].iloc[0], "192")
    for policy in POLICIES:
        block = [_cos(policy, x, y) for x in ON_POLICY + ("g*",) for y in ON_POLICY + ("g*",) if x != y]
        assert min(block) >= 0.98, policy
    rloo = a.loc[[(p, "rloo") for p in POLICIES]]
    assert _span(rloo["scale"], "0.93", "0.95") and all(abs(rloo["scale"] - 1) < 0.1)
    assert (rloo["rel_bias"] == 0).all()  # ‖ḡ − g*‖² ≤ tr/n: no bias beyond the noise
    group = a.loc[[(p, m) for p in POLICIES for m in GROUP]]
    assert _span(group["snr"], "0.048", "0.056") and _span(group["step_cosine"], "0.23", "0.25")
    assert (on["snr"] < 1).all()  # ‖E ĝ‖² below the noise of one step: mostly noise


def test_ppo_is_the_least_noisy_on_policy_step():
    """'PPO's step is the least noisy of the on-policy steps (SNR 0.15–0.19, 3.0–3.7 times GRPO's, GRPO-PS's and
    RLOO's; one step at cosine 0.38 and 0.41). It costs more CPU per step (0.26–0.28 s against 0.11–0.16 s) and still
    gives the most signal per CPU second of the on-policy methods (0.55–0.74 against 0.31–0.61).'"""
    _says("**PPO's step is the least noisy of the on-policy steps** (SNR 0.15–0.19, 3.0–3.7 times GRPO's, GRPO-PS's "
          "and RLOO's; one step at cosine 0.38 and 0.41). It costs more CPU per step (0.26–0.28 s against 0.11–0.16 s) "
          "and still gives the most signal per CPU second of the on-policy methods (0.55–0.74 against 0.31–0.61).")
    a = _atlas()
    others = [m for m in ON_POLICY if m != "ppo"]
    ppo = a.loc[[(p, "ppo") for p in POLICIES]]
    rest = a.loc[[(p, m) for p in POLICIES for m in others]]
    for policy in POLICIES:
        at = a.loc[policy].loc[list(ON_POLICY)]
        assert at["snr"].idxmax() == "ppo" and at["snr_per_s"].idxmax() == "ppo", policy
        assert at["cpu_s"].idxmax() == "ppo", policy
    assert _span(ppo["snr"], "0.15", "0.19")
    ratios = [a.loc[(p, "ppo"), "snr"] / a.loc[(p, m), "snr"] for p in POLICIES for m in GROUP]
    assert _span(ratios, "3.0", "3.7")
    assert _is(a.loc[(BASE, "ppo"), "step_cosine"], "0.38") and _is(a.loc[(LATE, "ppo"), "step_cosine"], "0.41")
    assert _span(ppo["cpu_s"], "0.26", "0.28") and _span(rest["cpu_s"], "0.11", "0.16")
    assert _span(ppo["snr_per_s"], "0.55", "0.74") and _span(rest["snr_per_s"], "0.31", "0.61")


def test_online_rft_points_along_g_star():
    """'Online RFT's mean step is g*'s direction (cosine 1.000 at both policies): ... Its SNR is GRPO's at the base
    (0.050) and above it after GRPO's 30 steps (0.072 against 0.056); one step of it points at g* a little better than
    one of GRPO's, GRPO-PS's or RLOO's (0.29 and 0.27).'"""
    _says("**Online RFT's mean step is g\\*'s direction** (cosine 1.000 at both policies):",
          "Its SNR is GRPO's at the base (0.050) and above it after GRPO's 30 steps (0.072 against 0.056); one step of "
          "it points at g\\* a little better than one of GRPO's, GRPO-PS's or RLOO's (0.29 and 0.27).")
    a = _atlas()
    for policy in POLICIES:
        assert _is(a.loc[(policy, "online_rft"), "cosine_corr"], "1.000"), policy
        assert all(a.loc[(policy, "online_rft"), "step_cosine"] > a.loc[(policy, m), "step_cosine"] for m in GROUP)
    assert _is(a.loc[(BASE, "online_rft"), "snr"], "0.050") and _is(a.loc[(BASE, "grpo"), "snr"], "0.050")
    assert _is(a.loc[(LATE, "online_rft"), "snr"], "0.072") and _is(a.loc[(LATE, "grpo"), "snr"], "0.056")
    assert _is(a.loc[(BASE, "online_rft"), "step_cosine"], "0.29")
    assert _is(a.loc[(LATE, "online_rft"), "step_cosine"], "0.27")


def test_rft_points_partly_the_same_way_with_the_most_signal():
    """'RFT's offline pool points partly the same way (0.81, then 0.73), with more signal per step than any on-policy
    method (SNR 0.68–0.72) and per CPU second (6.3–7.0, against 0.31–0.74): ... The pool stays the base's, and after
    GRPO's 30 steps it points less well.'"""
    _says("**RFT's offline pool points partly the same way** (0.81, then 0.73), with more signal per step than any "
          "on-policy method (SNR 0.68–0.72) and per CPU second (6.3–7.0, against 0.31–0.74):",
          "The pool stays the base's, and after GRPO's 30 steps it points less well.")
    a = _atlas()
    rft = a.loc[[(p, "rft") for p in POLICIES]]
    on = a.loc[[(p, m) for p in POLICIES for m in ON_POLICY]]
    assert _is(rft.loc[(BASE, "rft"), "cosine_corr"], "0.81") and _is(rft.loc[(LATE, "rft"), "cosine_corr"], "0.73")
    assert rft["cosine_corr"].max() < on["cosine_corr"].min()  # partly: below every on-policy method
    assert _span(rft["snr"], "0.68", "0.72") and rft["snr"].min() > on["snr"].max()
    assert _span(rft["snr_per_s"], "6.3", "7.0") and rft["snr_per_s"].min() > on["snr_per_s"].max()
    assert _span(on["snr_per_s"], "0.31", "0.74")


def test_sft_and_dpo_point_elsewhere():
    """'SFT and DPO point elsewhere: SFT's mean step is at cosine 0.48 (0.25 after GRPO) to g*, DPO's at 0.23 (0.27):
    ... After GRPO's steps the two point much the same way (cosine 0.86 between their mean updates, 0.41 at the
    base).'"""
    _says("**SFT and DPO point elsewhere**: SFT's mean step is at cosine 0.48 (0.25 after GRPO) to g\\*, DPO's at 0.23 "
          "(0.27):",
          "After GRPO's steps the two point much the same way (cosine 0.86 between their mean updates, 0.41 at the "
          "base).")
    a = _atlas()
    for policy, sft, dpo in [(BASE, "0.48", "0.23"), (LATE, "0.25", "0.27")]:
        at = a.loc[policy]["cosine_corr"]
        assert _is(at["sft"], sft) and _is(at["dpo"], dpo), policy
        assert max(at["sft"], at["dpo"]) < at.drop(["sft", "dpo"]).min(), policy  # the two lowest
        assert _is(_cos(policy, "sft", "g*"), sft) and _is(_cos(policy, "dpo", "g*"), dpo), policy
    assert _is(_cos(LATE, "sft", "dpo"), "0.86") and _is(_cos(BASE, "sft", "dpo"), "0.41")


def test_snr_per_token_a_high_snr_and_the_default_comparison():
    """'For the sampling methods SNR per generated token equals SNR per token; SFT, RFT and DPO generate nothing at
    step time. ... After GRPO's 30 steps SFT has the highest SNR of all (0.83) and the lowest cosine to g* (0.25). In
    the shared-rate comparison from that base the three methods with the highest SNR at the base, RFT, SFT and PPO, end with the highest
    greedy accuracy (SFT 0.629, RFT 0.609 and PPO 0.538, against 0.472–0.495 for the rest; that comparison's base was
    built on another CPU than this page's, 0.402 against 0.410)'"""
    _says("For the sampling methods SNR per generated token equals SNR per token; SFT, RFT and DPO generate nothing "
          "at step time.",
          "After GRPO's 30 steps SFT has the highest SNR of all (0.83) and the lowest cosine to g\\* (0.25). In the "
          "[shared-rate comparison from that base](default.md#the-contrast-one-shared-rate-from-a-mid-curve-base) the three methods with the highest SNR at the base, RFT, SFT and PPO, end "
          "with the highest greedy accuracy (SFT 0.629, RFT 0.609 and PPO 0.538,\nagainst 0.472–0.495 for the rest; that "
          "comparison's base was built on another CPU than this page's, 0.402 against\n0.410);")
    a = _csv("atlas.csv")
    sampling = a[a["method"].isin(ON_POLICY)]
    assert (sampling["gen_tokens"] > 0).all() and (sampling["gen_tokens"] == sampling["tokens"]).all()
    assert ((sampling["snr_per_kgen"] - sampling["snr_per_ktok"]).abs() < 1e-12).all()
    offline = a[a["method"].isin(OFFLINE)]
    assert (offline["gen_tokens"] == 0).all() and offline["snr_per_kgen"].isna().all()
    late = a[a["policy"] == LATE].set_index("method")
    assert late["snr"].idxmax() == "sft" and late["cosine_corr"].idxmin() == "sft"
    assert _is(late.loc["sft", "snr"], "0.83") and _is(late.loc["sft", "cosine_corr"], "0.25")
    base = a[a["policy"] == BASE].set_index("method")["snr"].sort_values(ascending=False)
    assert list(base.index[:3]) == ["rft", "sft", "ppo"]
    t = _csv("table.csv", ROOT / "results" / "default_mid_curve")
    acc = {m: float(str(v).split("±")[0]) for m, v in zip(t["method"], t["accuracy"]) if m in set(a["method"])}
    assert set(acc) == set(a["method"])
    top = sorted(acc, key=acc.get, reverse=True)
    assert top[:3] == ["sft", "rft", "ppo"]
    assert [_is(acc[m], w) for m, w in [("sft", "0.629"), ("rft", "0.609"), ("ppo", "0.538")]] == [True] * 3
    assert _span([acc[m] for m in top[3:]], "0.472", "0.495")
    assert _is(float(t.set_index("method").loc["SFT base (step 0)", "accuracy"]), "0.402")  # "0.402 against 0.410"
    assert _is(json.loads((ROOT / "results" / "atlas" / "atlas.json").read_text())["base"]["eval_accuracy"], "0.410")
    envs = [json.loads((ROOT / "results" / n / "env.json").read_text()) for n in ("default_mid_curve", "atlas")]
    assert envs[0]["cpu"] != envs[1]["cpu"]  # "built on another CPU"


# -- the critic along the sequence -------------------------------------------------------------------------------------
def test_the_critic_study_set_up():
    """'arithmetic with shown steps, 4 one-digit operands ("1+8+3+9=" -> "9;12;21"; the probed completions have 1–12
    tokens, 85–89% of them 6–9), for 60 steps, and probes its critic every 15 steps on 48 prompts × 8 samples'
    'completions of at most 12 tokens are far from the seed's thousands.'"""
    _says("arithmetic with shown steps, 4 one-digit operands (\"1+8+3+9=\" -> \"9;12;21\"; the probed completions have "
          "1–12 tokens, 85–89% of them 6–9), for 60 steps, and probes its critic every 15 steps on 48 prompts × 8 "
          "samples",
          "completions of at most 12 tokens are far from the seed's thousands.")
    info = _json("atlas.json")
    spec, task = info["spec"], info["critic"]["task"]
    assert task == {"operands": 4, "digits": 1, "show_steps": True}
    assert (spec["critic_steps"], spec["critic_every"], spec["critic_prompts"], spec["critic_group"]) == (60, 15, 48, 8)
    assert len(info["critic"]["train_log"]) == spec["critic_steps"]
    d = _csv("critic_distance.csv")
    assert sorted(set(d["step"])) == [15, 30, 45, 60]
    assert (d[d["distance"] == 0]["tokens"] == 48 * 8).all()
    ln = _csv("critic_length.csv")
    ln = ln[ln["estimator"] == "critic"]
    assert _span(ln["length"], "1", "12")
    shares = [g[g["length"].between(6, 9)]["sequences"].sum() / g["sequences"].sum() for _, g in ln.groupby("step")]
    assert all(g["sequences"].sum() == 48 * 8 for _, g in ln.groupby("step"))
    assert _span([100 * s for s in shares], "85", "89")


def test_the_critic_has_learned_the_mean_reward():
    """'(last probe, PPO step 60; the critic task's base answers 0.41 of its held-out problems, and 0.203 of the probed
    samples are right): the critic's squared error against the realised return is flat along the sequence,
    0.161–0.170 from 0 to 6 tokens before the end, against the leave-one-out group mean's 0.183–0.191. Farther out,
    where only the longer completions reach and fewer of them are right, both fall, to 0.098 and 0.089 at 9 tokens
    out; at 10 and 11 tokens out only 23 and 14 tokens remain. The critic's explained variance is −0.01 to 0.00 at
    every completion length with both outcomes (the group mean's −0.40 to 0.19), and its error at the prompt is the
    reward's own variance, p(1 − p) = 0.162: the critic has learned the mean reward and nothing position-dependent.
    That constant is nearer the return than the mean of the group's 7 other samples, whose error is 1.12–1.14 times the
    critic's from 0 to 6 tokens out, about the 8/7 that their own noise adds.'"""
    _says("(last probe, PPO step 60; the critic task's base answers 0.41 of its held-out problems, and 0.203 of the "
          "probed samples are right): the critic's squared error against the realised return is flat along the "
          "sequence, 0.161–0.170 from 0 to 6 tokens before the end, against the leave-one-out group mean's "
          "0.183–0.191. Farther out, where only the longer completions reach and fewer of them are right, both fall, "
          "to 0.098 and 0.089 at 9 tokens out; at 10 and 11 tokens out only 23 and 14 tokens remain. The critic's "
          "explained variance is −0.01 to 0.00 at every completion length with both outcomes (the group mean's −0.40 "
          "to 0.19), and its error at the prompt is the reward's own variance, p(1 − p) = 0.162: the critic has "
          "learned the mean reward and nothing position-dependent. That constant is nearer the return than the mean "
          "of the group's 7 other samples, whose error is 1.12–1.14 times the critic's from 0 to 6 tokens out, about "
          "the 8/7 that their own noise adds.")
    info = _json("atlas.json")
    assert info["spec"]["critic_steps"] == 60 and _csv("critic_distance.csv")["step"].max() == 60
    assert _is(info["critic"]["base"]["eval_accuracy"], "0.41")
    ln = _lengths()
    p = _right(ln)
    assert _is(p, "0.203") and _is(_right(_lengths(estimator="group mean")), "0.203")
    m = _critic()
    near = m.loc[0:6]
    assert _span(near["critic"], "0.161", "0.170") and _span(near["group mean"], "0.183", "0.191")
    assert near["critic"].max() - near["critic"].min() < 0.01  # flat
    far = m.loc[6:9]
    assert far["critic"].is_monotonic_decreasing and far["group mean"].is_monotonic_decreasing  # both fall
    right = [_right(ln[ln.index >= d + 1]) for d in range(6, 10)]  # among the completions that reach d tokens out
    assert all(x > y for x, y in zip(right, right[1:]))  # fewer of them right
    assert _is(m.loc[9, "critic"], "0.098") and _is(m.loc[9, "group mean"], "0.089")
    d = _csv("critic_distance.csv")
    d = d[(d["step"] == 60) & (d["estimator"] == "critic")].set_index("distance")["tokens"]
    assert (d.loc[10], d.loc[11]) == (23, 14) and d.index.max() == 11
    both = ln["ev"].notna()
    assert list(both) == [0 < a < 1 for a in ln["accuracy"]]  # defined exactly where both outcomes occur
    assert _span(ln["ev"].dropna(), "−0.01", "0.00")
    assert _span(_lengths(estimator="group mean")["ev"].dropna(), "−0.40", "0.19")
    assert _is(p * (1 - p), "0.162") and _is(m.loc[0, "critic"], "0.162")
    assert 0 <= m.loc[0, "critic"] - p * (1 - p) < 1e-3  # no constant does better than the mean; it is the mean
    ratio = near["group mean"] / near["critic"]
    assert _span(ratio, "1.12", "1.14") and (ratio - 8 / 7).abs().max() < 0.02


def test_the_critic_at_every_probe_and_the_seeds_claim():
    """'The first panel shows the same at every probe (steps 15–60): the critic's error flat from 0 to 6 tokens out and
    below the group mean's from 0 to 8. So at these lengths the seed's claim does not show; what shows is its weaker
    form, a per-token critic trained on a terminal reward learning nothing beyond the mean, which here is still less
    noisy than the group's own leave-one-out mean.'
    'if the critic's error grows with the distance to the end, and its explained variance falls with the completion's
    length, at the last probed step, the claim holds at these lengths; if both are flat, it does not show here'"""
    _says("The first panel shows the same at every probe (steps 15–60): the critic's error flat from 0 to 6 tokens out "
          "and below the group mean's from 0 to 8. So at these lengths the seed's claim does not show; what shows is "
          "its weaker form, a per-token critic trained on a terminal reward learning nothing beyond the mean, which "
          "here is still less noisy than the group's own leave-one-out mean.",
          "if the critic's error grows with the distance to the end, and its explained variance falls with the "
          "completion's length, at the last probed step, the claim holds at these lengths; if both are flat, it does "
          "not show here")
    for step in (15, 30, 45, 60):
        m = _critic(step)
        assert m.loc[0:6, "critic"].max() - m.loc[0:6, "critic"].min() < 0.01, step
        assert (m.loc[0:8, "critic"] < m.loc[0:8, "group mean"]).all(), step
    m = _critic()
    assert m.loc[7:, "critic"].max() <= m.loc[0:6, "critic"].max() + 0.01  # the error does not grow farther out
    ev = _lengths()["ev"].dropna()
    assert ev.abs().max() < 0.01  # nor does the explained variance fall with the length: it is 0 at every length
