"""`python -m gcframe.verify`: the core claim, checked numerically for every registered method.

For each method: a real batch from its own data source (`collect`), random rewards injected (so advantages are
not trivial), the engine's once-per-batch work (π_ref and π_old log-probs, `prepare`), then the policy is moved
away from π_old (so ratios ≠ 1 and the clip bites) and from π_ref (so the KL term is live, β > 0). In float64:

    g_engine   = ∇θ  −aggregate(GC.detach() · log π_θ)          (gcframe.engine, the method's coefficients)
    g_textbook = ∇θ  L_method(θ)                               (the loss as the paper writes it: gcframe.textbook)

and prints max|g_engine − g_textbook| / max|g_textbook|. Exit status 1 if any row exceeds TOLERANCE, 1e-10: the
built-in rows agree to 1e-16, a textbook loss summed in another order stays far below it, and a normaliser rounded
to float32 shows as 5e-8 to 3e-7. Exit status 2 for a name that is not a method or a method that declares no
textbook loss (`@textbook`). The textbook losses are written from the papers, independently of the methods'
GC code and of the engine's aggregation (gcframe.textbook, `_mean_as_written`).
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
import tempfile
from pathlib import Path

import torch

from gcframe.engine import token_logprobs, weighted_mle_loss
from gcframe.errors import UserError, cli_entry
from gcframe.textbook import TEXTBOOK, _mean_as_written, textbook  # noqa: F401  (the losses; plugins' decorator)

TOLERANCE = 1e-10


# -- the harness ---------------------------------------------------------------------------------------------------
def _verify_config():
    from gcframe.config import from_dict

    return from_dict({
        # the identity holds for any policy, so a small one: one-digit sums, a 2-layer hidden-32 Llama and a base of
        # 60 steps (seconds, cached) that is right often enough for DPO's pairs of a right and a wrong sample
        "task": {"digits": 1, "n_demos": 64, "n_heldout": 16},
        "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "max_positions": 32},
        "sft_base": {"steps": 60, "batch_size": 32, "lr": 0.01, "warmup_steps": 5},
        "train": {"steps": 1, "prompts_per_step": 4, "group_size": 4, "eval_size": 8, "eval_every": 0,
                  "epochs": 2, "sample_every": 0},
        "reward_model": {"pairs": 8, "heldout_pairs": 4},  # a small preference set for dpo's batch of 4 pairs
        "methods": {"grpo": {"beta": 0.1}, "rloo": {"beta": 0.1}, "ppo": {"beta": 0.1},
                    # the non-default options: an asymmetric band (narrow, so this small batch clips) and k2
                    "grpo_ps": {"beta": 0.1, "clip_eps": 0.05, "clip_eps_high": 0.02, "kl_estimator": "k2"},
                    # the GRPO family (tests/test_methods_zoo_pg.py checks each branch was active): bands narrow
                    # enough to bite on both sides, β > 0, SAPO's gate at temperatures where it bends within the
                    # ratios' range, DAPO's overlong cache reaching below some sampled lengths
                    "dr_grpo": {"beta": 0.1, "clip_eps": 0.1},
                    "dapo": {"beta": 0.1, "clip_eps": 0.1, "clip_eps_high": 0.15, "overlong_cache": 4},
                    "gspo": {"beta": 0.1, "kl_estimator": "k3"},
                    "cispo": {"beta": 0.1, "clip_eps": 0.1, "clip_eps_high": 0.1},
                    "sapo": {"beta": 0.1, "tau_pos": 8.0, "tau_neg": 10.0},
                    # KL in the reward (β), for the baseline variant also in the loss (λ); a band narrow enough that
                    # the 16 single-completion prompts of reinforce_pp clip on both sides
                    "reinforce_pp": {"beta": 0.1, "clip_eps": 0.1}, "remax": {"beta": 0.1},
                    "reinforce_pp_baseline": {"beta": 0.1, "kl_loss_coef": 0.1},
                    # λ_U ≠ λ_D (z₀ > 0 at seed 0: kto_z0 in the row's stats), ORPO's odds-ratio term as large as its
                    # SFT term, and G = 8 so that online_dpo pairs every prompt with tokens that move both ways
                    "kto": {"undesirable_weight": 1.5}, "orpo": {"lam": 1.0}, "online_dpo": {"group_size": 8},
                    # issue 64's losses, every branch wide open: a floor c just above 1 (many tokens with Â < 0 pass
                    # it), narrow bands and thresholds, every covariance token a candidate, a KL term on each, RPO's
                    # NLL as large as its DPO term
                    "dual_clip_ppo": {"beta": 0.1, "clip_eps": 0.1, "dual_clip": 1.01},
                    "lite_ppo": {"beta": 0.1, "clip_eps": 0.1}, "maxrl": {"beta": 0.1, "clip_eps": 0.1},
                    "kimi": {"beta": 0.1, "tau": 0.5}, "dppo": {"beta": 0.1, "delta_low": 0.02, "delta_high": 0.02},
                    "gmpo": {"beta": 0.1, "clip_eps": 0.1, "clip_eps_high": 0.15},
                    "clip_cov": {"beta": 0.1, "clip_eps": 0.1, "clip_cov_ratio": 0.2, "clip_cov_lb": -10.0,
                                 "clip_cov_ub": 10.0},
                    "kl_cov": {"beta": 0.1, "kl_cov_ratio": 0.2, "kl_coef": 0.5}, "rpo": {"alpha": 1.0}},
    })


VARIANTS = {"grpo@k3": ("grpo", {"kl_estimator": "k3"}), "grpo@k2": ("grpo", {"kl_estimator": "k2"}),
            "grpo_ps@k3_ratio": ("grpo_ps", {"kl_estimator": "k3_ratio"}),
            "reinforce_pp@grouped": ("reinforce_pp", {"grouped": True}), "remax@grouped": ("remax", {"grouped": True}),
            "gpg@std": ("gpg", {"scale_by_std": True}), "ipo@token_mean": ("ipo", {"token_mean": True}),
            "grpo@dual_clip": ("grpo", {"clip_eps": 0.1, "dual_clip": 1.01}),
            "gspo@dual_clip": ("gspo", {"clip_eps": 0.01, "clip_eps_high": 0.01, "dual_clip": 1.02}),
            "lite_ppo@centred": ("lite_ppo", {"scale_by_std": False}), "kimi@token": ("kimi", {"level": "token"}),
            "dppo@kl": ("dppo", {"divergence": "kl", "delta_low": 0.002, "delta_high": 0.002}),
            "opd@vopd": ("opd", {"baseline": "vopd"})}
"""Rows beyond one per method: label -> (method, options over the config's): every KL estimator GRPO offers, the G per
prompt data sources of reinforce_pp and remax, GPG's std scaling, IPO's per-token log-ratio (TRL's form), dual-clip
PPO's floor on GRPO's token ratio and GSPO's sequence ratio, Lite PPO without the batch std, Kimi's per-token
penalty, DPPO's Binary-KL mask, vOPD's baseline."""


def variant_config(cfg, label: str):
    """(method name, a copy of cfg with the variant's options) for a method name or a VARIANTS label."""
    name, options = VARIANTS.get(label, (label, {}))
    cfg = copy.deepcopy(cfg)
    cfg.methods[name] = {**cfg.methods.get(name, {}), **options}
    return name, cfg


def _inject_rewards(batch, gen: torch.Generator) -> None:
    """Random 0/1 outcomes and random step rewards: every method gets a non-trivial signal. The first prompt's group
    gets equal rewards, so that the zero-variance branch of a group method runs too (GPG's α = B / (B − M))."""
    N, T = batch.completion_ids.shape
    correct = (torch.rand(N, generator=gen) < 0.5).to(torch.float64)
    first = batch.group_ids == batch.group_ids[0]  # [N] the rows of the first group
    correct[first] = correct[first][0]
    for key in ("rewards", "correct"):
        if key in batch.data:
            batch.data[key] = correct.clone()
    if "step_mask" in batch.data:
        mask = (torch.rand(N, T, generator=gen) < 0.3).to(torch.float64) * batch.completion_mask
        batch.data["step_mask"] = mask
        batch.data["step_rewards"] = torch.rand(N, T, generator=gen, dtype=torch.float64) * mask


WIDE = 0.25  # the perturbed policy's ratios must reach below 1 − WIDE and above 1 + WIDE: past every clip band used


def _perturb(model, gen: torch.Generator, scale: float) -> None:
    """θ <- θ + scale·std(θ)·ε: stands in for an update, so that π_θ ≠ π_old and π_θ ≠ π_ref."""
    with torch.no_grad():
        for p in model.parameters():  # drawn on the CPU (the generator's), added where the parameter lives
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device)
            p.add_(noise * scale * (p.std() if p.numel() > 1 else 1))


def move_off_policy(model, batch, old_logp: torch.Tensor, gen: torch.Generator, perturb: float,
                    temperature: float = 1.0, wide: float = WIDE) -> float:
    """Move `model` from its present state (π_old) by _perturb at perturb·2^i, i = 0..4, each from that state, until
    the ratios π_θ/π_old on `batch` reach below 1 − wide and above 1 + wide (past every clip band used); returns the
    scale it stopped at. old_logp [N, T] = log π_old on `batch`."""
    start = {k: v.clone() for k, v in model.state_dict().items()}
    for scale in (perturb * 2 ** i for i in range(5)):  # widen the step until the ratios leave the clip band
        model.load_state_dict(start)
        _perturb(model, gen, scale)
        with torch.no_grad():
            moved = (token_logprobs(model, batch, temperature) - old_logp).exp()[batch.completion_mask.bool()]
        if moved.min() < 1 - wide and moved.max() > 1 + wide:
            break
    return scale


def _grad(model, loss) -> torch.Tensor:
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])


TEACHER_PERTURB = 0.5
"""The verify teacher: the SFT base moved by θ + 0.5·std(θ)·ε, far enough that log π_T ≠ log π_θ on every token."""


def make_teacher(base_dir, folder: Path, seed: int) -> str:
    """A teacher for a method that distils one (`uses_teacher`): the SFT base perturbed by a seeded TEACHER_PERTURB
    step, saved with the base's tokenizer in `folder`/teacher -> its path."""
    from gcframe.modeling import load_model_and_tokenizer, save_model_and_tokenizer

    model, tok = load_model_and_tokenizer(str(base_dir))
    _perturb(model, torch.Generator().manual_seed(seed + 2), TEACHER_PERTURB)
    save_model_and_tokenizer(model, tok, folder / "teacher")
    return str(folder / "teacher")


OUTCOMES_AT_SAMPLING = {"online_dpo": "its pairs: a prompt whose samples' rewards differ"}
"""Methods whose data source decides on the rewards of its own samples (method -> what it decides): their rollouts'
outcomes are replaced by `_inject_rewards`' seeded ones as soon as they are sampled (`_seeded_outcomes`), so that
the branch is taken by construction, the same on every machine, not by how the tiny base's samples round on this
CPU (a base that answers every sample of each prompt alike leaves online DPO without a pair)."""


def _seeded_outcomes(ctx, gen: torch.Generator) -> None:
    """ctx.rollout with every batch's rewards replaced by `_inject_rewards`' (seeded by `gen`: the first prompt's
    samples alike, the others' 0/1 at random), before the method's collect sees them."""
    sample = ctx.rollout

    def rollout(*args, **kwargs):
        batch = sample(*args, **kwargs)
        _inject_rewards(batch, gen)
        return batch

    ctx.rollout = rollout


Z0_MARGIN = 0.5
"""KTO's reference point in verify: z₀ = this many nats (`_reference_below`)."""


def _reference_below(batch, policy) -> None:
    """KTO's reference point z₀ = max(0, mean Δ over its mismatched rows), Δ = Σ_t log π_θ/π_ref, is live (z₀ > 0,
    not its clamp at 0) by construction: log π_ref is lowered by one constant per token so that the mismatched rows'
    mean Δ is Z0_MARGIN, whatever sign the moved policy and the perturbed reference gave it on this CPU. The identity
    checked holds for any log π_ref: the textbook loss reads the same batch."""
    mask, rows = batch.completion_mask, batch.data["mismatched"]  # [N, T], [N] 1 on (q_i, o_{i-1})
    with torch.no_grad():
        delta = ((token_logprobs(policy, batch) - batch.data["ref_logp"]) * mask).sum(-1)  # Δ [N]
    mean = (delta * rows).sum() / rows.sum()
    tokens = (mask.sum(-1) * rows).sum() / rows.sum()  # mean length of a mismatched row
    batch.data["ref_logp"] = batch.data["ref_logp"] - (Z0_MARGIN - mean) / tokens * mask  # Δ += that · |o|


def verify_method(label: str, cfg, task, base_dir, acc, seed: int = 0, perturb: float = 0.05) -> dict:
    from gcframe.registry import get_method
    from gcframe.trainer import Trainer

    name, cfg = variant_config(cfg, label)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    with tempfile.TemporaryDirectory() as tmp:
        if getattr(get_method(name), "uses_teacher", False):  # a teacher unlike the student by construction
            cfg.methods[name] = {**cfg.methods.get(name, {}), "teacher": make_teacher(base_dir, Path(tmp), seed)}
        trainer = Trainer(cfg, name, Path(tmp) / name, base_dir, task, acc, show_progress=False,
                          dtype=torch.float64)  # (a teacher is loaded here, before its folder goes)
    method, policy = trainer.method, trainer.ctx.policy
    if name in OUTCOMES_AT_SAMPLING:  # its collect decides on its samples' rewards: seeded ones, on any machine
        _seeded_outcomes(trainer.ctx, torch.Generator().manual_seed(seed + 3))
    for m in method.auxiliary_models().values():
        m.double()
    batch = method.collect(0).to(acc.device)
    _inject_rewards(batch, gen)
    with torch.no_grad():
        if method.uses_reference:  # π_ref moved off π_old: a KL folded into the reward (PPO, REINFORCE++) is live
            _perturb(trainer.ctx.reference, torch.Generator().manual_seed(seed + 1), perturb)
            batch.data["ref_logp"] = token_logprobs(trainer.ctx.reference, batch)
        batch.data["old_logp"] = token_logprobs(policy, batch)
        before = set(batch.data)
        method.prepare(batch)
        prepared = sorted(set(batch.data) - before)  # the columns prepare stored (`Method.stores` declares them)
    move_off_policy(policy, batch, batch.data["old_logp"], gen, perturb)
    if "mismatched" in batch.data:  # KTO: its reference point z₀ > 0 on any machine
        _reference_below(batch, policy)

    logp = token_logprobs(policy, batch)
    gc = method.coefficients(batch, logp)
    g_engine = _grad(policy, weighted_mle_loss(gc, logp, batch.completion_mask, method.cfg.aggregation))
    g_text = _grad(policy, TEXTBOOK[name](method, batch, token_logprobs(policy, batch)))
    ratio = (logp.detach() - batch.data["old_logp"]).exp()[batch.completion_mask.bool()]
    stats = method.pop_stats()
    same = True
    if not method.needs_old_logp:  # the engine does not store π_old for it: its GC must not read it
        old = batch.data.pop("old_logp")
        same = torch.equal(method.coefficients(batch, logp), gc)
        batch.data["old_logp"] = old
        method.pop_stats()
    return {
        "method": label,
        "max_rel_diff": (float((g_engine - g_text).abs().max() / g_text.abs().max().clamp(min=1e-300)) if same
                         else float("inf")),  # needs_old_logp False, yet its GC reads π_old: a failure
        "reads_old_logp_undeclared": not same,
        "grad_norm": float(g_text.norm()),
        "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max()),
        "clip_frac": stats.get("clip_frac", float("nan")),
        "beta": getattr(method.cfg, "beta", 0.0),
        "stats": stats,  # everything the method recorded (gcframe.verify's own tests read which branches ran)
        "prepared": prepared,
    }


def check_names(names: list[str], registry) -> None:
    """Every name is a registered method (or a VARIANTS label) with a declared textbook loss, else one UserError line
    (exit 2, where a gradient that differs exits 1)."""
    known = ", ".join([*registry, *VARIANTS])
    unknown = [n for n in names if VARIANTS.get(n, (n,))[0] not in registry]
    if unknown or not names:
        what = f"unknown method {', '.join(map(repr, unknown))} in --methods" if unknown else "--methods names no method"
        raise UserError(f"{what}: choose from {known} (--methods-from FILE.py adds your own)")
    bare = list(dict.fromkeys(m for m in (VARIANTS.get(n, (n,))[0] for n in names) if m not in TEXTBOOK))
    if bare:
        raise UserError(f"no textbook loss is declared for {', '.join(map(repr, bare))}, so there is nothing to check "
                        f"its engine gradient against: declare one beside the method with @textbook(\"{bare[0]}\") "
                        "from gcframe.verify (docs/guides/adding-a-method.md)")


@cli_entry
def main(argv=None) -> int:
    """Exit status 0 when every engine gradient equals its textbook gradient, 1 when one differs, 2 for bad input
    (an unknown method, a method without a textbook loss)."""
    from accelerate import Accelerator

    from gcframe import pipeline, registry
    from gcframe.tracking import threads

    p = argparse.ArgumentParser(prog="python -m gcframe.verify",
                                description="Check ∇(−GC·log π) = ∇(textbook loss) for every method.")
    p.add_argument("--methods", help="comma-separated names (default: all registered)")
    p.add_argument("--methods-from", action="append", metavar="FILE.py", help="import your own method(s) and their "
                   "@textbook losses from this file first (gcframe.plugins)")
    threads.add_flag(p)
    args = p.parse_args(argv)
    if args.methods_from:
        from gcframe.plugins import load

        load(args.methods_from)
    known = registry.methods()  # the built-in methods and installed packages' (entry points gcframe.methods)
    names = [n.strip() for n in args.methods.split(",") if n.strip()] if args.methods else [*known, *VARIANTS]
    check_names(names, known)  # before the SFT base: minutes from an empty cache
    threads.setup(args.threads)  # the first line of a run whose input is good
    cfg, task = pipeline.prepare(_verify_config())
    acc = Accelerator(cpu=True)
    base_dir, _ = pipeline.sft_base(cfg, task, acc, show_progress=True)  # minutes from an empty cache: not silent
    rows, ok = [], True
    print(f"{'method':<16} {'max rel diff':>13} {'|grad|':>10} {'ratio range':>17} {'clip frac':>9} {'beta':>6}")
    for name in names:
        r = verify_method(name, copy.deepcopy(cfg), task, base_dir, acc)
        rows.append(r)
        ok &= r["max_rel_diff"] <= TOLERANCE
        clip = "–" if math.isnan(r["clip_frac"]) else f"{r['clip_frac']:.3f}"  # a method without a clip: no fraction
        print(f"{name:<16} {r['max_rel_diff']:>13.2e} {r['grad_norm']:>10.3e} "
              f"{r['ratio_min']:>8.3f}–{r['ratio_max']:<8.3f} {clip:>9} {r['beta']:>6.2f}"
              f"{'' if r['max_rel_diff'] <= TOLERANCE else '   FAIL'}")
    if not args.methods:  # every method: the off-policy corrections too (gcframe.offpolicy.check, no model)
        ok &= _corrections()
    print(("all methods: engine gradient = textbook gradient (tolerance %.0e)" % TOLERANCE) if ok else "FAILED")
    return 0 if ok else 1


def _corrections() -> bool:
    """The off-policy corrections' rows (gcframe.offpolicy.check): GRPO's GC times each correction's factor against
    the corrected objective as its source writes it, on constructed inputs that take every branch -> all passed."""
    from gcframe.offpolicy import check

    ok = True
    print(f"\n{'correction':<16} {'max rel diff':>13}  branches taken (tokens)")
    for row in check.rows():
        good = check.passed(row, TOLERANCE)
        ok &= good
        taken = "; ".join(f"{b} {n}" for b, n in row["branches"].items())
        missing = f"   FAIL (not taken: {'; '.join(row['missing'])})" if row["missing"] else "   FAIL"
        print(f"{row['label']:<16} {row['max_rel_diff']:>13.2e}  {taken}{'' if good else missing}")
    return ok


if __name__ == "__main__":  # run the importable gcframe.verify: a plugin's @textbook registers into its TEXTBOOK
    from gcframe import verify

    sys.exit(verify.main())
