"""The estimator lab: the seed's claims about baselines, std scaling and KL estimators, measured exactly.

    python experiments/estimators.py [--quick] [--out DIR] [--overwrite]

Policies: the SFT base of the default comparison (`--quick`: gcframe.verify's small base) and the checkpoints of
a short GRPO run from it (μ = 4 inner epochs, a high learning rate so that it drifts from π_ref = the base).

1. Baselines (claims 1–3). The answer space is the *first completion token* (all V = 100 tokens of the
   vocabulary, reward 1 iff it is the first character of the correct answer), so for each of Q prompts every
   outcome is listed with its probability. Per prompt: g*_q = Σ_v π(v) r(v) ∇log π(v) and d_a = Σ_v π 1[r=a]
   ‖∇log π(v)‖², in the full parameter space (1.06M float64 gradients, no projection: V backward passes per
   prompt through gcframe.engine.token_logprobs). The closed forms of gcframe.estimators then give bias,
   variance and MSE of every estimator exactly, at equal N = B·G (B prompts drawn uniformly from the Q).
   The critic is PPO's V_ψ (methods.ppo: the base's backbone + scalar head, its clipped value loss, its
   AdamW at critic_lr) trained for `critic_steps` steps on N fresh samples per step with the policy held fixed.
2. KL values (claim 4): sampled completions of each checkpoint, exact per-position KL(π_θ‖π_ref) from the full
   vocabulary against the exact mean, std and P(< 0) of k1, k2, k3 at that position.
3. KL loss terms (claim 5): every two-token completion of a few prompts, gradients in the space of the logits
   at those positions (identities there carry over to θ by the chain rule), on-policy and with π_old = the
   policy before the GRPO step (μ = 4 updates later).

Writes OUT/baselines.csv, OUT/std_weight.csv, OUT/kl_values.csv, OUT/kl_gradients.csv, OUT/lab.json, OUT/env.json, then
renders OUT/report/ (analysis.estimators).
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

from gcframe import estimators as est
from gcframe.batch import Batch, pad_left  # noqa: E402
from gcframe.engine import Normaliser, position_ids, token_logprobs
from gcframe.errors import cli_entry
from gcframe.tracking import threads
from gcframe.modeling import load_model_and_tokenizer
from gcframe.sampling import GenerationConfig, Generator, encode_prompts

from experiments.lab_common import add_out_args, finish, fresh_out

ROOT = Path(__file__).resolve().parent
FULL = dict(prompts=24, groups=(2, 4, 8, 16, 32, 64), n=64, critic_steps=100, rl_steps=30, rl_snapshots=(5, 15, 30),
            kl_prompts=32, kl_samples=4, grad_prompts=4, config="configs/mid_curve_base.yaml")
QUICK = dict(prompts=3, groups=(2, 4, 8, 16, 32, 64), n=64, critic_steps=20, rl_steps=8, rl_snapshots=(4, 8),
             kl_prompts=8, kl_samples=4, grad_prompts=2, config=None)
RL = dict(prompts_per_step=16, group_size=8, epochs=4, lr=1e-4, steps=1, eval_every=0, eval_k=0, eval_size=8,
          sample_every=0, checkpoint_every=0)
"""The drift run: GRPO at μ = 4 and lr 1e-4 (2x the comparison's), so checkpoints move away from π_ref."""


def load_config(spec: dict):
    from gcframe import pipeline
    from gcframe.config import from_dict, load_yaml

    if spec["config"]:
        raw = load_yaml(ROOT / spec["config"])
        raw.pop("run", None), raw.pop("tune", None), raw.pop("families", None)  # compare.py's own sections
    else:
        from gcframe.verify import _verify_config
        raw = _verify_config().to_dict()
    raw = {**raw, "train": {**raw.get("train", {}), **RL}, "methods": {"grpo": {}, "ppo": {"beta": 0.0}}}
    return pipeline.prepare(from_dict(raw))


# -- the policies ---------------------------------------------------------------------------------------------------
def drift_run(cfg, task, base_dir, acc, spec) -> dict[int, dict]:
    """GRPO from the base; CPU state dicts after steps s − 1 and s for every snapshot s (π_old, π_θ of step s)."""
    from gcframe.trainer import Trainer

    keep = {s for s in spec["rl_snapshots"]} | {s - 1 for s in spec["rl_snapshots"]}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, "grpo", Path(tmp) / "grpo", base_dir, task, acc, show_progress=False)
        states = {0: copy.deepcopy(trainer.ctx.policy.state_dict())}
        for step in range(spec["rl_steps"]):
            trainer.train_step(step)
            if step + 1 in keep:
                states[step + 1] = copy.deepcopy(trainer.ctx.policy.state_dict())
    return states


def model_at(base_dir, state) -> torch.nn.Module:
    m, _ = load_model_and_tokenizer(str(base_dir), dtype=torch.float64)
    m.load_state_dict({k: v.to(torch.float64) for k, v in state.items()})
    return m.eval()


# -- 1. baselines: the first answer token, enumerated ---------------------------------------------------------------
def token_batch(tok, prompt: str, tokens: torch.Tensor) -> Batch:
    """One row per candidate first token: the prompt, then that single token (completion_mask 1)."""
    p_ids, p_mask = pad_left(encode_prompts(tok, [prompt]) * len(tokens), tok.pad_token_id)
    n = len(tokens)
    return Batch(p_ids, p_mask, tokens.view(n, 1), torch.ones(n, 1, dtype=torch.float64), torch.zeros(n, dtype=torch.long))


def prompt_statistics(model, tok, prompt: str, answer: str) -> dict:
    """p, g*_q [D], d_0, d_1 for one prompt, in the full parameter space.

    log π(v|q) = log_softmax(z)_v with z the logits after the prompt (one row), so s_v = ∇log π(v|q) = J_v − m,
    J_v = ∇z_v, m = Σ_u π_u J_u: V + 2 backward passes through a one-prompt graph. π is checked against
    gcframe.engine.token_logprobs on the V rows (prompt, v).
    """
    V = len(tok)
    params = [p for p in model.parameters() if p.requires_grad]
    flat = lambda gs: torch.cat([g.reshape(-1) for g in gs])  # noqa: E731
    b = token_batch(tok, prompt, torch.zeros(1, dtype=torch.long))
    attn = b.prompt_mask
    z = model(input_ids=b.prompt_ids, attention_mask=attn, position_ids=position_ids(attn)).logits[0, -1].double()
    logp = torch.log_softmax(z, -1)  # [V]
    with torch.no_grad():
        engine_logp = token_logprobs(model, token_batch(tok, prompt, torch.arange(V)))[:, 0]
    assert torch.allclose(engine_logp, logp.detach(), atol=1e-9), "the enumerated π differs from the engine's"
    pi = logp.detach().exp()
    r = torch.zeros(V, dtype=torch.float64)
    r[tok(answer, add_special_tokens=False)["input_ids"][0]] = 1.0  # the correct first character
    g_star = flat(torch.autograd.grad((pi * r * logp).sum(), params, retain_graph=True))  # Σ π r ∇log π
    m = flat(torch.autograd.grad((pi * z).sum(), params, retain_graph=True))  # Σ_u π_u ∇z_u
    d = torch.zeros(2, dtype=torch.float64)
    for v in range(V):
        s = flat(torch.autograd.grad(z[v], params, retain_graph=v < V - 1)) - m  # ∇log π(v|q)
        d[int(r[v])] += pi[v] * float(s @ s)
    return {"p": float((pi * r).sum()), "g_star": g_star, "d": d, "pi": pi, "r": r}


def train_critic(cfg, task, base_dir, acc, model, tok, prompts, stats, spec) -> torch.Tensor:
    """PPO's critic trained as PPO trains it (prepare -> auxiliary_loss -> clip -> AdamW), policy fixed: N
    single-token samples per step from the Q prompts; returns V_ψ(q) [Q]."""
    from gcframe.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, "ppo", Path(tmp) / "ppo", base_dir, task, acc, policy=model, tok=tok,
                          show_progress=False, dtype=torch.float64)
    method, opt = trainer.method, trainer.aux_opts[0]
    critic = method.critic.double()
    gen = torch.Generator().manual_seed(0)
    full = [token_batch(tok, q, torch.zeros(1, dtype=torch.long)) for q in prompts]

    def batch_of(idx, tokens):
        p_ids, p_mask = pad_left([full[i].prompt_ids[0][full[i].prompt_mask[0].bool()].tolist() for i in idx],
                                 tok.pad_token_id)
        n = len(idx)
        rewards = torch.stack([stats[i]["r"][t] for i, t in zip(idx, tokens)])
        zeros = torch.zeros(n, 1, dtype=torch.float64)
        return Batch(p_ids, p_mask, torch.tensor(tokens).view(n, 1), torch.ones(n, 1, dtype=torch.float64),
                     torch.arange(n), {"rewards": rewards, "ref_logp": zeros, "old_logp": zeros})

    for _ in range(spec["critic_steps"]):
        idx = torch.randint(len(prompts), (spec["n"],), generator=gen).tolist()
        tokens = [int(torch.multinomial(stats[i]["pi"], 1, generator=gen)) for i in idx]
        b = batch_of(idx, tokens)
        with torch.no_grad():
            method.prepare(b)  # V_old, GAE returns (= r: one token, γ = 1), as in a PPO step
        loss = method.auxiliary_loss(b, Normaliser.of(b.completion_mask))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), cfg.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    with torch.no_grad():
        return method.values(batch_of(list(range(len(prompts))), [0] * len(prompts)))[:, 0]


def baseline_rows(label, stats, critic_values, spec) -> list[dict]:
    """Bias, variance, MSE of every estimator × std scaling × G at N = B·G (gcframe.estimators)."""
    g = torch.stack([s["g_star"] for s in stats])  # [Q, D]
    gram = g @ g.T  # [Q, Q]
    gnorm2 = gram.diagonal()
    ps = [s["p"] for s in stats]
    base = {"critic": critic_values.tolist(), "value": ps,
            "best_constant": [float(s["d"][1] / s["d"].sum()) for s in stats]}  # b* = E[r‖s‖²]/E[‖s‖²]
    rows = []
    for G in spec["groups"]:
        for kind in est.BASELINES:
            for scale in (False, True):
                alpha, second = [], []
                for q, s in enumerate(stats):
                    m = est.group_moments(kind, G, ps[q], scale, base[kind][q] if kind in base else 0.0)
                    alpha.append(m.shrink)
                    second.append(m.second_moment(s["d"], float(gnorm2[q]), G))
                out = est.batch_summary(torch.tensor(alpha), torch.tensor(second), gram, spec["n"] / G)
                rows.append({"policy": label, "estimator": kind, "std_scaling": scale, "G": G, "B": spec["n"] // G,
                             "N": spec["n"], **out})
    return rows


# -- 2./3. KL estimators ------------------------------------------------------------------------------------------
def full_logprobs(model, batch: Batch) -> torch.Tensor:
    """log π(· | q, o_<t) over the vocabulary at every completion position [N, T, V] (token_logprobs' alignment)."""
    T, attn = batch.completion_ids.shape[1], batch.attention_mask
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=attn, position_ids=position_ids(attn),
                       logits_to_keep=T + 1, use_cache=False).logits[:, :-1]
    return torch.log_softmax(logits.double(), -1)


def kl_value_rows(label, kl_step, model, ref, tok, prompts, spec, gen_cfg) -> dict:
    """Claim 4 at one policy: completions sampled from π_θ, exact per-position moments of k1, k2, k3."""
    torch.manual_seed(1)
    batch = Generator(tok, gen_cfg).generate(model, prompts, n=spec["kl_samples"])
    s = est.kl_value_stats(full_logprobs(model, batch), full_logprobs(ref, batch))  # each [N, T]
    m = batch.completion_mask.bool()
    row = {"policy": label, "step": kl_step, "tokens": int(m.sum()), "kl": float(s["kl"][m].mean())}
    for k in ("k1", "k2", "k3"):
        bias = (s[f"{k}_mean"] - s["kl"])[m]
        row.update({f"{k}_bias": float(bias.mean()), f"{k}_max_abs_bias": float(bias.abs().max()),
                    f"{k}_std": float(s[f"{k}_std"][m].mean()), f"{k}_neg": float(s[f"{k}_neg"][m].mean())})
    return row


def two_token_logprobs(model, tok, prompt):
    """(log π(o_1|q) [V], log π(o_2|q, o_1) [V, V]) for every first token o_1."""
    V = len(tok)
    b = token_batch(tok, prompt, torch.arange(V))
    b = Batch(b.prompt_ids, b.prompt_mask, torch.cat([b.completion_ids, b.completion_ids], 1),
              torch.ones(V, 2, dtype=torch.float64), b.group_ids)  # the second column is a placeholder
    lp = full_logprobs(model, b)  # [V, 2, V]
    return lp[0, 0], lp[:, 1]


def kl_gradient_rows(label, step, theta, old, ref, tok, prompts, setting) -> list[dict]:
    vecs, tok_vecs = {}, {}
    for q in prompts:
        (t1, t2), (r1, r2), (o1, o2) = (two_token_logprobs(m, tok, q) for m in (theta, ref, old))
        for k, v in est.two_token_gradients(t1, t2, r1, r2, o1, o2).items():
            vecs.setdefault(k, []).append(v)
        z = t1.clone().requires_grad_(True)
        rev, fwd = est.exact_kls(z, r1)
        tok_vecs.setdefault("rev", []).append(torch.autograd.grad(rev, z, retain_graph=True)[0])
        tok_vecs.setdefault("fwd", []).append(torch.autograd.grad(fwd, z)[0])
        for k in ("k1", "k2", "k3", "k3_ratio"):
            tok_vecs.setdefault(k, []).append(est.loss_term_gradient(t1, r1, o1, k))
    vecs = {k: torch.cat(v) for k, v in vecs.items()}
    tok_vecs = {k: torch.cat(v) for k, v in tok_vecs.items()}
    rows = []
    for kind in ("k1", "k2", "k3", "k3_ratio"):
        for target in ("rev", "fwd"):
            rows.append({"policy": label, "step": step, "setting": setting, "level": "token", "estimator": kind,
                         "target": f"KL({'θ‖ref' if target == 'rev' else 'ref‖θ'})",
                         "norm": float(tok_vecs[kind].norm()), **est.compare(tok_vecs[kind], tok_vecs[target])})
    for kind in ("k1", "k2", "k3", "k3_ratio", "k1_reward"):
        for target, name in (("rev_seq", "KL(θ‖ref) seq"), ("fwd_seq", "KL(ref‖θ) seq"),
                             ("rev_tok", "KL(θ‖ref) per token")):
            rows.append({"policy": label, "step": step, "setting": setting, "level": "sequence", "estimator": kind,
                         "target": name, "norm": float(vecs[kind].norm()), **est.compare(vecs[kind], vecs[target])})
    return rows


def std_weight_rows() -> list[dict]:
    rows = []
    for G in (2, 4, 8, 16, 64):
        for i in range(1, 50):
            p = i / 50
            rows.append({"G": G, "p": p, "weight": est.effective_weight(G, p), "one_over_std": (p * (1 - p)) ** -0.5})
    return rows


def run(out: Path, quick: bool) -> dict:
    from accelerate import Accelerator

    from gcframe import pipeline

    spec, t0, c0 = QUICK if quick else FULL, time.time(), time.process_time()
    say = lambda what: print(f"[{time.time() - t0:6.1f} s] {what}", file=sys.stderr, flush=True)  # noqa: E731
    cfg, task = load_config(spec)
    acc = Accelerator(cpu=True)
    base_dir, base_info = pipeline.sft_base(cfg, task, acc, show_progress=False)
    t_base = time.time()
    say("SFT base ready; the GRPO drift run")
    states = drift_run(cfg, task, base_dir, acc, spec)
    t_rl = time.time()
    rows_p = [task.prompts[i] for i in range(max(spec["prompts"], spec["kl_prompts"], spec["grad_prompts"]))]
    ref = model_at(base_dir, states[0])
    tok = load_model_and_tokenizer(str(base_dir))[1]
    baselines, kl_values, kl_grads, info = [], [], [], {}
    last = spec["rl_snapshots"][-1]
    for label, step in (("SFT base", 0), (f"GRPO step {last}", last)):
        say(f"baselines at {label}")
        model = ref if step == 0 else model_at(base_dir, states[step])
        qs = rows_p[:spec["prompts"]]
        stats = [prompt_statistics(model, tok, r["prompt"], r["answer"]) for r in qs]
        values = train_critic(cfg, task, base_dir, acc, model, tok, [r["prompt"] for r in qs], stats, spec)
        ps = torch.tensor([s["p"] for s in stats])
        info[label] = {"p_mean": float(ps.mean()), "p_min": float(ps.min()), "p_max": float(ps.max()),
                       "critic_abs_err": float((values - ps).abs().mean())}
        baselines += baseline_rows(label, stats, values, spec)
    t_bl = time.time()
    for s in spec["rl_snapshots"]:
        say(f"KL estimators at GRPO step {s}")
        theta = model_at(base_dir, states[s])
        kl_values.append(kl_value_rows(f"GRPO step {s}", s, theta, ref, tok,
                                       [r["prompt"] for r in rows_p[:spec["kl_prompts"]]], spec,
                                       GenerationConfig(cfg.train.max_new_tokens, 1.0)))
        gp = [r["prompt"] for r in rows_p[:spec["grad_prompts"]]]
        kl_grads += kl_gradient_rows(f"GRPO step {s}", s, theta, theta, ref, tok, gp, "on-policy")
        kl_grads += kl_gradient_rows(f"GRPO step {s}", s, theta, model_at(base_dir, states[s - 1]), ref, tok, gp,
                                     "off-policy (μ = 4 updates)")
    t_kl = time.time()
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(baselines).to_csv(out / "baselines.csv", index=False)
    pd.DataFrame(std_weight_rows()).to_csv(out / "std_weight.csv", index=False)
    pd.DataFrame(kl_values).to_csv(out / "kl_values.csv", index=False)
    pd.DataFrame(kl_grads).to_csv(out / "kl_gradients.csv", index=False)
    from gcframe.tracking.env import write_env

    write_env(out / "env.json")  # what made these numbers (results/estimators/env.json)
    info.update(quick=quick, base=base_info, prompts=spec["prompts"], N=spec["n"], rl=RL, spec={k: spec[k] for k in spec},
                time_s={"base": round(t_base - t0, 1), "rl_run": round(t_rl - t_base, 1),
                        "baselines": round(t_bl - t_rl, 1), "kl": round(t_kl - t_bl, 1),
                        "total": round(time.time() - t0, 1), "cpu_total": round(time.process_time() - c0, 1)})
    return finish(out, "lab.json", info, "analysis.estimators")


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Measure gradient and KL estimators exactly (the estimator lab).")
    p.add_argument("--quick", action="store_true", help="fewer prompts, a shorter drift run (about 2 minutes)")
    add_out_args(p, "estimators")
    threads.add_flag(p)
    args = p.parse_args(argv)
    threads.setup(args.threads)
    out = fresh_out(args.out, "estimators", args.overwrite)
    info = run(out, args.quick)
    print(f"estimator lab: {out} ({info['time_s']['total']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
