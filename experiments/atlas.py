"""The update atlas: every method's single step as an estimate of the policy gradient g* = ∇E[r], at a fixed policy.

    python experiments/atlas.py [--quick] [--methods-from FILE.py] [--methods a,b] [--out DIR] [--overwrite]

The seed's thesis ("One Gradient, Many Methods") is that every method is a weighted imitation step Σ GC ∇log π on
its own data. Here each registered method's step is drawn many times through its public object, exactly as the
trainer runs it (collect -> π_ref log-probs -> prepare -> coefficients -> engine loss -> ∇), but never applied,
so every draw is a step at the same policy. Two policies: the SFT base of the default config and a checkpoint
after `rl_steps` GRPO steps from it (the default config's GRPO). A fixed prompt set of Q prompts (the first Q of
the task's RL prompts) is what the methods that sample draw their prompts from, and what g* is taken over:

    g* = ∇ (1/Q) Σ_q E_{o~π(·|q)}[r(q, o)] = (1/Q) Σ_q Σ_o π(o|q) r(q, o) ∇log π(o|q)        [D = all weights]

by enumeration: every completion whose probability is ≥ `eps` is listed by a tree walk over the vocabulary (one
forward per depth) and scored by the task's own verifier; the probability left in pruned branches bounds what is
missing (reported per policy: `pruned_mass`). For each method, with ĝ_k the ascent direction −∇loss of draw k,
ḡ their mean over n draws and tr = (1/(n−1)) Σ_k ‖ĝ_k − ḡ‖² (the trace of one step's covariance):

    cosine      cos(ḡ, g*)                         (cosine_corr: ‖E ĝ‖ estimated unbiasedly, √(‖ḡ‖² − tr/n))
    scale       ḡ·g*/‖g*‖²                         (what a learning rate would have to undo)
    rel_bias    ‖E ĝ − g*‖/‖g*‖ (unbiased ‖·‖²: ‖ḡ − g*‖² − tr/n);  sin_angle = √(1 − cos²), the scale-free bias
    snr         ‖E ĝ‖² / E‖ĝ − E ĝ‖² = (‖ḡ‖² − tr/n) / tr      (one step; invariant to any learning rate)
    snr_per_ktok, snr_per_kgen, snr_per_s: snr ÷ (trained tokens, generated tokens, CPU seconds) of one step.
                A step over B independent prompts has B times less noise, so snr grows in proportion to a
                step's size and these rates compare methods that spend differently (offline data: no generation).

Writes OUT/atlas.csv (method × policy), OUT/cosines.csv (every pair of mean updates and g*), OUT/g_star.csv,
OUT/critic_distance.csv and OUT/critic_length.csv (experiments/atlas_critic.py), OUT/atlas.json, OUT/env.json,
then renders OUT/report/ and OUT/atlas_table.csv, the headline measures the docs show (analysis.atlas).
"""
from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from analysis.atlas import NO_NOISE_SNR, RESOLVED  # noqa: E402
from experiments.compare_config import QUICK as COMPARE_QUICK  # noqa: E402
from experiments.lab_common import add_out_args, finish, fresh_out  # noqa: E402
from gcframe.batch import Batch, pad_right  # noqa: E402
from gcframe.engine import token_logprobs, weighted_mle_loss  # noqa: E402
from gcframe.errors import cli_entry  # noqa: E402
from gcframe.tracking import threads  # noqa: E402
from gcframe.rewards import score  # noqa: E402
from gcframe.sampling import encode_prompts  # noqa: E402

ROOT = Path(__file__).resolve().parent
FULL = dict(prompts=64, draws=192, rl_steps=30, eps=1e-6, aux_warmup=60, rft_pool=512, critic_steps=60,
            critic_every=15, critic_prompts=48, critic_group=8, sft_steps=None, critic_sft_steps=1000)
QUICK = dict(prompts=16, draws=12, rl_steps=4, eps=1e-4, aux_warmup=8, rft_pool=64, critic_steps=6,
             critic_every=3, critic_prompts=12, critic_group=4, sft_steps=300, critic_sft_steps=300,
             stage1={k: v for k, v in COMPARE_QUICK["sft_base"].items() if k not in ("steps", "batch_size")})
"""sft_steps: stage 1 of the atlas's base (None: the default comparison's, shared with its cache; --quick: a
300-step base, as compare.py --quick's, so that a quick run from an empty cache stays within minutes);
critic_sft_steps: stage 1 of the critic task's own base (atlas_critic.py); stage1: what --quick's stage 1 replaces
of the config's, for both bases: compare.py --quick's rule, all its steps (no stopping rule, no evaluations), since a
300-step base cannot reach the default's target (0.128 of 0.40 after 300 steps) and its evaluations every 2 steps
are most of a quick run's time."""
STEP = dict(prompts_per_step=8, group_size=8)
"""One drawn step: B = 8 prompts × G = 8 (64 sequences; the comparison's G, half its B, to afford more draws)."""


def load_config(spec: dict, overrides: dict | None = None):
    """The default comparison's config (its SFT base), with the atlas's step size and small RFT pool."""
    from gcframe import pipeline
    from gcframe.config import from_dict, load_yaml

    raw = load_yaml(ROOT / "configs/mid_curve_base.yaml")
    raw.pop("run", None), raw.pop("tune", None), raw.pop("families", None)  # compare.py's own sections
    raw["train"] = {**raw.get("train", {}), "eval_every": 0, "eval_k": 0, "sample_every": 0, "checkpoint_every": 0}
    raw.setdefault("methods", {}).setdefault("rft", {})["pool_size"] = spec["rft_pool"]
    if spec.get("sft_steps"):
        raw["sft_base"] = {**raw.get("sft_base", {}), "steps": spec["sft_steps"], **spec.get("stage1", {})}
    for section, values in (overrides or {}).items():
        raw[section] = {**raw.get(section, {}), **values}
    return pipeline.prepare(from_dict(raw))


def flat(grads) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in grads]).double()


def params_of(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


# -- g* by enumeration ---------------------------------------------------------------------------------------------
@torch.no_grad()
def enumerate_completions(model, tok, prompt: str, max_new: int, eps: float, temperature: float):
    """Every completion o with π(o|q) ≥ eps -> (ids [list of token lists], log π(o|q) [M], pruned mass).

    A tree walk: the frontier's prefixes all have the same length, so one forward per depth over [n, P + t]
    gives π(·|q, prefix) [n, V]; a child is a leaf at <eos> or at max_new tokens (truncated, as the sampler ends).
    """
    p_ids = torch.tensor(encode_prompts(tok, [prompt])[0])
    frontier, front_lp = [[]], torch.zeros(1, dtype=torch.float64)
    leaves, leaf_lp, pruned, floor = [], [], 0.0, torch.log(torch.tensor(eps, dtype=torch.float64))
    for depth in range(max_new):
        x = torch.cat([p_ids.expand(len(frontier), -1), torch.tensor(frontier, dtype=torch.long).view(len(frontier), depth)], 1)
        z = model(input_ids=x, logits_to_keep=1).logits[:, -1].double() / temperature  # [n, V]
        lp = front_lp.unsqueeze(1) + torch.log_softmax(z, -1)  # log π(prefix + v) [n, V]
        keep = lp >= floor
        pruned += float(lp[~keep].exp().sum())
        nxt, nxt_lp = [], []
        for i, v in keep.nonzero().tolist():
            ids = frontier[i] + [v]
            if v == tok.eos_token_id or depth == max_new - 1:
                leaves.append(ids)
                leaf_lp.append(lp[i, v])
            else:
                nxt.append(ids)
                nxt_lp.append(lp[i, v])
        if not nxt:
            break
        frontier, front_lp = nxt, torch.stack(nxt_lp)
    return leaves, torch.stack(leaf_lp), pruned


def leaf_batch(tok, prompt: str, leaves: list[list[int]], answer: str, task) -> Batch:
    """The listed completions of one prompt as a Batch (mask 1 up to and including <eos>), scored by the task."""
    p_ids = torch.tensor(encode_prompts(tok, [prompt])[0]).expand(len(leaves), -1)
    c_ids, c_mask = pad_right(leaves, tok.pad_token_id)
    texts = [{"prompt": prompt, "answer": answer, "steps": [],
              "completion": tok.decode([t for t in ids if t != tok.eos_token_id], skip_special_tokens=True)}
             for ids in leaves]
    b = Batch(p_ids, torch.ones_like(p_ids), c_ids, c_mask.float(), torch.zeros(len(leaves), dtype=torch.long), {}, texts)
    return score(b, task, tok)


def g_star(model, tok, task, rows: list[dict], max_new: int, eps: float, temperature: float) -> dict:
    """g* [D] = (1/Q) Σ_q Σ_{o listed, r=1} π(o|q) ∇log π(o|q) (one backward per prompt through the engine's
    token_logprobs), and per prompt p_q = Σ π r (a lower bound; + pruned mass is an upper bound)."""
    from gcframe.tracking.progress import progress

    params, g, ps, pruned, n_leaves = params_of(model), 0.0, [], [], 0
    for r in progress(rows, desc="g* by enumeration", unit="prompt"):
        leaves, lp, miss = enumerate_completions(model, tok, r["prompt"], max_new, eps, temperature)
        b = leaf_batch(tok, r["prompt"], leaves, r["answer"], task)
        w = lp.exp() * b.data["rewards"].double()  # π(o) r(o) [M]
        ps.append(float(w.sum()))
        pruned.append(miss)
        n_leaves += len(leaves)
        hit = w > 0
        if hit.any():
            seq = token_logprobs(model, b[hit.nonzero().squeeze(1)], temperature).sum(-1)  # log π(o|q) with grad
            assert torch.allclose(seq.detach().double(), lp[hit], atol=1e-4), "the enumerated π differs from the engine's"
            g = g + flat(torch.autograd.grad((w[hit].to(seq.dtype) * seq).sum(), params)) / len(rows)
    return {"g": g, "p": ps, "pruned": pruned, "leaves": n_leaves}


# -- drawing a method's step --------------------------------------------------------------------------------------
def make_trainer(cfg, name, base_dir, task, fixed, acc, state, tmp):
    """A Trainer for `name` whose policy is the fixed policy `state` (a fresh copy per method). What a method builds
    when it is made (DPO's preference set) comes from the whole task; what it draws per step, from `fixed`."""
    from gcframe.modeling import load_model_and_tokenizer
    from gcframe.trainer import Trainer

    model, tok = load_model_and_tokenizer(str(base_dir))
    model.load_state_dict(state)
    tr = Trainer(cfg, name, Path(tmp) / name, base_dir, task, acc, policy=model, tok=tok, show_progress=False)
    tr.ctx.task = tr.task = fixed
    return tr


def collect_prepared(tr, step: int) -> Batch:
    """The trainer's own first half of a step: collect, π_ref log-probs, prepare (no grad)."""
    m, temp = tr.method, tr.tcfg.temperature
    batch = m.collect(step)
    with torch.no_grad():
        if m.uses_reference:
            batch.data["ref_logp"] = token_logprobs(tr.ctx.reference, batch, temp)
        m.prepare(batch)
    return batch


def warm_auxiliary(tr, steps: int) -> None:
    """Train the method's auxiliary models (PPO's critic) as the trainer does, the policy held fixed."""
    if not tr.aux_models:
        return
    for s in range(steps):
        batch = collect_prepared(tr, s)
        aux = tr.method.auxiliary_loss(batch, tr._global_norm(batch))
        aux.backward()
        for m, o in zip(tr.aux_models, tr.aux_opts):
            torch.nn.utils.clip_grad_norm_(m.parameters(), tr.tcfg.grad_clip or float("inf"))
            o.step()
            o.zero_grad(set_to_none=True)
    tr.method.pop_stats()


def draw(tr, step: int) -> tuple[torch.Tensor, dict]:
    """One step's update ĝ = −∇loss [D] (float64) and its cost: trained and generated tokens, CPU seconds."""
    c0 = time.process_time()
    tr.policy.train()
    batch = collect_prepared(tr, step)
    logp = token_logprobs(tr.policy, batch, tr.tcfg.temperature)  # [N, T]
    gc = tr.method.coefficients(batch, logp)  # [N, T]
    loss = weighted_mle_loss(gc, logp, batch.completion_mask, tr.aggregation, tr._global_norm(batch))
    g = -flat(torch.autograd.grad(loss, params_of(tr.policy)))
    tokens = float(batch.completion_mask.sum())
    tr.method.pop_stats()
    return g, {"tokens": tokens, "gen": tokens if "truncated" in batch.data else 0.0,
               "cpu_s": time.process_time() - c0}


def draw_many(tr, n: int, gs: torch.Tensor) -> dict:
    """Streaming moments of n draws: Σĝ [D], Σ‖ĝ‖², Σ cos(ĝ_k, g*), costs."""
    collect_prepared(tr, 0)  # an untimed first collect: builds what a method builds once (RFT's pool, DPO's pairs)
    tr.method.pop_stats()
    s, s2, cos, cost = 0.0, 0.0, 0.0, {"tokens": 0.0, "gen": 0.0, "cpu_s": 0.0}
    for k in range(n):
        g, c = draw(tr, k + 1)
        s, s2 = s + g, s2 + float(g @ g)
        cos += float(g @ gs) / max(float(g.norm() * gs.norm()), 1e-300)
        cost = {key: cost[key] + c[key] for key in cost}
    return {"sum": s, "sum2": s2, "n": n, "step_cos": cos / n, **{key: v / n for key, v in cost.items()}}


# -- the measures ---------------------------------------------------------------------------------------------------
def measures(mom: dict, gs: torch.Tensor) -> tuple[dict, torch.Tensor, float]:
    """The module docstring's measures from streaming moments -> (row, ḡ, tr/n)."""
    n = mom["n"]
    mean = mom["sum"] / n  # ḡ [D]
    tr = max(mom["sum2"] - n * float(mean @ mean), 0.0) / max(n - 1, 1)  # E‖ĝ − Eĝ‖², unbiased
    m2 = float(mean @ mean) - tr / n  # ‖E ĝ‖², unbiased
    g2, dot = float(gs @ gs), float(mean @ gs)
    cos = dot / max((float(mean @ mean) * g2) ** 0.5, 1e-300)
    # where the draws' noise outweighs their mean (‖ḡ‖² ≤ tr/n) the mean is not resolved: no corrected cosine
    # (NaN, shown as n/a), SNR 0; identical draws (tr = 0, RFT's fixed pool) have no measurable noise: SNR n/a
    snr = max(m2, 0.0) / tr if tr > 0 else float("nan")
    resolved = m2 > 0 and n * m2 >= RESOLVED * tr  # analysis.atlas.RESOLVED: ‖E ĝ‖² ≥ 2 × the mean's noise
    cos_corr = max(min(dot / (m2 * g2) ** 0.5, 1.0), -1.0) if resolved else float("nan")
    row = {"draws": n, "cosine": cos, "cosine_corr": cos_corr,
           "sin_angle": max(1 - cos ** 2, 0.0) ** 0.5, "scale": dot / g2,
           "rel_bias": max(float((mean - gs) @ (mean - gs)) - tr / n, 0.0) ** 0.5 / g2 ** 0.5,
           "step_cosine": mom["step_cos"], "snr": snr, "mean_norm": max(m2, 0.0) ** 0.5, "noise_norm": tr ** 0.5,
           "tokens": mom["tokens"], "gen_tokens": mom["gen"], "cpu_s": mom["cpu_s"],
           "snr_per_ktok": 1e3 * snr / mom["tokens"], "snr_per_s": snr / mom["cpu_s"],
           "snr_per_kgen": 1e3 * snr / mom["gen"] if mom["gen"] else float("nan")}
    return row, mean, tr / n


def cosine_rows(label: str, means: dict[str, tuple[torch.Tensor, float]], gs: torch.Tensor) -> list[dict]:
    """cos between every pair of mean updates (and g*, noise 0): raw, and with each ‖E ĝ‖² corrected by its tr/n
    (independent draws, so ḡ_a·ḡ_b is already unbiased for E ĝ_a · E ĝ_b)."""
    vecs = {"g*": (gs, 0.0), **means}
    rows = []
    for a, (va, na) in vecs.items():
        for b, (vb, nb) in vecs.items():
            dot = float(va @ vb)
            raw = dot / max(float(va.norm() * vb.norm()), 1e-300)
            prod = (float(va @ va) - na) * (float(vb @ vb) - nb)  # ‖E ĝ_a‖² ‖E ĝ_b‖², unbiased; ≤ 0: unresolved
            corr = raw if a == b else (max(min(dot / prod ** 0.5, 1.0), -1.0) if prod > 0 else float("nan"))
            rows.append({"policy": label, "a": a, "b": b, "cosine": raw, "cosine_corr": corr})
    return rows


# -- the policies -------------------------------------------------------------------------------------------------
def policies(cfg_rl, task, base_dir, acc, steps: int) -> dict[str, dict]:
    """{label: CPU state dict}: the SFT base and the policy after `steps` GRPO steps of the default config."""
    from gcframe.tracking.progress import progress
    from gcframe.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg_rl, "grpo", Path(tmp) / "grpo", base_dir, task, acc, show_progress=False)
        out = {"SFT base": copy.deepcopy(tr.ctx.policy.state_dict())}
        for s in progress(range(steps), desc="the GRPO policy", unit="step"):
            tr.train_step(s)
        out[f"GRPO step {steps}"] = copy.deepcopy(tr.ctx.policy.state_dict())
    return out


def fixed_prompts(task, q: int):
    """A shallow copy of the task whose RL prompts are its first q: the prompt set of every draw and of g*."""
    fixed = copy.copy(task)
    fixed.prompts = task.prompts.select(range(q))
    return fixed, [fixed.prompts[i] for i in range(q)]


def atlas_at(label, state, cfg, task, fixed, rows, base_dir, acc, names, spec, say) -> tuple[list, list, dict]:
    """Rows of atlas.csv and cosines.csv at one policy, and g*'s own figures."""
    from gcframe.modeling import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(str(base_dir))
    model.load_state_dict(state)
    c0 = time.process_time()
    gs = g_star(model.eval(), tok, fixed, rows, cfg.train.max_new_tokens, spec["eps"], cfg.train.temperature)
    info = {"p_mean": sum(gs["p"]) / len(rows), "pruned_mass_mean": sum(gs["pruned"]) / len(rows),
            "pruned_mass_max": max(gs["pruned"]), "leaves": gs["leaves"], "g_star_norm": float(gs["g"].norm()),
            "cpu_s": round(time.process_time() - c0, 1)}
    say(f"{label}: g* from {gs['leaves']} listed completions, E[r] = {info['p_mean']:.3f} "
        f"(pruned mass ≤ {info['pruned_mass_mean']:.2e} per prompt)")
    out, means = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            tr = make_trainer(cfg, name, base_dir, task, fixed, acc, state, tmp)
            warm_auxiliary(tr, spec["aux_warmup"])
            row, mean, noise = measures(draw_many(tr, spec["draws"], gs["g"]), gs["g"])
            out.append({"policy": label, "method": name, "aggregation": tr.aggregation, **row})
            means[name] = (mean, noise)
            corr = "n/a (noise outweighs the mean)" if row["cosine_corr"] != row["cosine_corr"] else \
                f"{row['cosine_corr']:+.3f}"
            snr = "∞ (identical draws)" if row["snr"] > NO_NOISE_SNR else f"{row['snr']:.3g}"
            say(f"  {name:12s} cos {row['cosine']:+.3f} (corrected {corr})  snr {snr}  {row['cpu_s']:.2f} s/step")
            del tr
    return out, cosine_rows(label, means, gs["g"]), {**info, "p": gs["p"], "pruned": gs["pruned"]}


def run(out: Path, quick: bool, names: list[str] | None) -> dict:
    from accelerate import Accelerator

    import methods
    from experiments import atlas_critic
    from gcframe import pipeline
    from gcframe.tracking.env import write_env

    spec, t0, c0 = QUICK if quick else FULL, time.time(), time.process_time()
    say = lambda what: print(f"[{time.time() - t0:6.1f} s] {what}", file=sys.stderr, flush=True)  # noqa: E731
    names = names or methods.default_methods()  # a method that distils a teacher needs one: named with --methods
    for n in names:
        methods.get_method(n)  # unknown names fail before anything runs
    out.mkdir(parents=True, exist_ok=True)
    write_env(out / "env.json")
    cfg_rl, task = load_config(spec)
    cfg, _ = load_config(spec, {"train": STEP})
    acc = Accelerator(cpu=True)
    base_dir, base_info = pipeline.sft_base(cfg, task, acc, show_progress=False)
    say(f"SFT base ready (held-out accuracy {base_info.get('eval_accuracy')}); {spec['rl_steps']} GRPO steps")
    states = policies(cfg_rl, task, base_dir, acc, spec["rl_steps"])
    fixed, rows = fixed_prompts(task, spec["prompts"])
    atlas, cosines, info = [], [], {}
    for label, state in states.items():
        a, c, info[label] = atlas_at(label, state, cfg, task, fixed, rows, base_dir, acc, names, spec, say)
        atlas, cosines = atlas + a, cosines + c
    t_atlas = time.time()
    pd.DataFrame(atlas).to_csv(out / "atlas.csv", index=False)
    pd.DataFrame(cosines).to_csv(out / "cosines.csv", index=False)
    pd.DataFrame([{"policy": k, "prompt": i, "p": p, "pruned_mass": m} for k, v in info.items()
                  for i, (p, m) in enumerate(zip(v.pop("p"), v.pop("pruned")))]).to_csv(out / "g_star.csv", index=False)
    say("the critic along the sequence (PPO on a task with shown steps)")
    critic_info = atlas_critic.run(out, spec, load_config, acc, say)
    meta = {"quick": quick, "spec": spec, "step": STEP, "methods": names, "base": base_info, "policies": info,
            "critic": critic_info, "time_s": {"atlas": round(t_atlas - t0, 1), "critic": round(time.time() - t_atlas, 1),
                                              "total": round(time.time() - t0, 1),
                                              "cpu_total": round(time.process_time() - c0, 1)}}
    return finish(out, "atlas.json", meta, "analysis.atlas")


@cli_entry
def main(argv=None) -> int:
    from gcframe import plugins

    p = argparse.ArgumentParser(description="Every method's step against the true policy gradient (the update atlas).")
    p.add_argument("--quick", action="store_true", help="fewer prompts and draws (under 3 minutes)")
    p.add_argument("--methods-from", action="append", metavar="FILE.py", help="import your own method(s) first")
    p.add_argument("--methods", default=None, help="comma-separated method names (default: every registered one)")
    add_out_args(p, "atlas")
    threads.add_flag(p)
    args = p.parse_args(argv)
    threads.setup(args.threads)
    if args.methods_from:
        plugins.load([str(Path(f).expanduser().resolve()) for f in args.methods_from])
    out = fresh_out(args.out, "atlas", args.overwrite)
    meta = run(out, args.quick, args.methods.split(",") if args.methods else None)
    print(f"update atlas: {out} ({meta['time_s']['total']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
