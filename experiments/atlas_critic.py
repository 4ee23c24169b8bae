"""The critic along the sequence (the update atlas, part 2): the seed's "Terminal Reward Makes the Critic Ill-Posed".

The seed claims a per-token value V_ψ(s_t), s_t = (q, o_<t), must predict a terminal reward "thousands of tokens
before the only supervision signal arrives", so it is "hard in proportion to how long the generation is". Measured
here during a PPO run (methods.ppo as the trainer runs it, β = 0 so that the realised return from every token is
the terminal reward, R_t = r(q, o) with γ = 1) on arithmetic with shown steps (4 operands of 1 digit:
"1+8+3+9=" -> "9;12;21", completions of 6 to 9 tokens with <eos>; 2 digits made stage 1's base too weak, 0.03). Every `critic_every` steps, on a fixed
probe of prompts × G samples of the current policy:

    critic      e_t = (V_ψ(s_t) − R_t)²            as a function of the distance d = |o| − 1 − t to the last token
    group mean  e   = (b_i − r_i)²,  b_i = (1/(G−1)) Σ_{j≠i} r_j   (the leave-one-out group mean: a prediction of
                r_i that does not see it; GRPO's own mean is (G−1)/G of it, its error ((G−1)/G)² of this one)

and the explained variance 1 − Var(R − V)/Var(R) over the tokens of completions of each length |o| (for the group
mean, over those sequences). The error against the *realised* return contains Var(r | s_t), which a perfect critic
also pays: it is large at the prompt and 0 once the answer is written, so a falling error towards the end is partly
the task's, not the critic's. At d = |o| − 1 (the first token, s = the prompt) both predictors see the same state.

Writes OUT/critic_distance.csv and OUT/critic_length.csv.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import torch

from gcframe.rewards import score

TASK = dict(operands=4, digits=1, show_steps=True)


def probe(tr, task, prompts: list[str], answers: list[str], G: int, step: int) -> pd.DataFrame:
    """One row per completion token of G samples of each prompt: distance, length, V, R and the LOO group mean."""
    from gcframe.modeling import evaluating

    policy = tr.ctx.policy
    with torch.no_grad(), evaluating(policy):
        batch = tr.ctx.generator.generate(policy, prompts, n=G)
        for t, gid in zip(batch.texts, batch.group_ids.tolist()):
            t.update(answer=answers[gid], steps=[])
        score(batch, task, tr.tok)
        values = tr.method.values(batch).double()  # V_ψ(s_t) [N, T]
    r = batch.data["rewards"].double()  # [N], the realised return of every token (β = 0, γ = 1)
    sums = torch.zeros(len(prompts), dtype=torch.float64).index_add_(0, batch.group_ids, r)
    loo = (sums[batch.group_ids] - r) / (G - 1)  # [N]
    mask = batch.completion_mask.bool()
    L = mask.sum(-1)  # |o| [N]
    i, t = mask.nonzero(as_tuple=True)
    return pd.DataFrame({"step": step, "seq": i.numpy(), "length": L[i].numpy(), "distance": (L[i] - 1 - t).numpy(),
                         "value": values[i, t].numpy(), "ret": r[i].numpy(), "group_mean": loo[i].numpy()})


def explained(df: pd.DataFrame, pred: str) -> float:
    var = df["ret"].var()
    return float(1 - (df["ret"] - df[pred]).var() / var) if len(df) > 1 and var > 1e-12 else float("nan")


def summarise(tokens: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(by distance to the end, by completion length) for the critic and the group mean, per probe step."""
    dist, length = [], []
    for (step, d), sub in tokens.groupby(["step", "distance"]):
        for name, col in (("critic", "value"), ("group mean", "group_mean")):
            dist.append({"step": step, "estimator": name, "distance": d, "tokens": len(sub),
                         "mse": float(((sub[col] - sub["ret"]) ** 2).mean())})
    for (step, L), sub in tokens.groupby(["step", "length"]):
        first = sub[sub["distance"] == L - 1]  # one row per sequence: the prediction from the prompt alone
        for name, col in (("critic", "value"), ("group mean", "group_mean")):
            length.append({"step": step, "estimator": name, "length": L, "sequences": len(first),
                           "accuracy": float(first["ret"].mean()), "ev": explained(sub, col),
                           "ev_first": explained(first, col), "mse": float(((sub[col] - sub["ret"]) ** 2).mean()),
                           "mse_first": float(((first[col] - first["ret"]) ** 2).mean())})
    return pd.DataFrame(dist), pd.DataFrame(length)


def critic_config(spec: dict, load_config):
    """(RunConfig, task) of the critic's run: the atlas's config (`load_config`) on TASK, PPO without a KL term, and
    stage 1 of spec['critic_sft_steps'] steps (with --quick's stage-1 rule, spec['stage1'])."""
    return load_config(spec, {"task": TASK, "methods": {"ppo": {"beta": 0.0}},
                              "sft_base": {"steps": spec["critic_sft_steps"], **spec.get("stage1", {})}})


def run(out: Path, spec: dict, load_config, acc, say) -> dict:
    """PPO from this task's SFT base for spec['critic_steps'] steps, probed every spec['critic_every']."""
    from gcframe import pipeline
    from gcframe.trainer import Trainer

    cfg, task = critic_config(spec, load_config)
    base_dir, base_info = pipeline.sft_base(cfg, task, acc, show_progress=False)
    rows = [task.prompts[i] for i in range(spec["critic_prompts"])]
    prompts, answers = [r["prompt"] for r in rows], [r["answer"] for r in rows]
    frames, log = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, "ppo", Path(tmp) / "ppo", base_dir, task, acc, show_progress=False)
        for s in range(spec["critic_steps"]):
            row, _ = tr.train_step(s)
            log.append({k: row.get(k) for k in ("step", "accuracy", "explained_var", "value_loss", "completion_len")})
            if (s + 1) % spec["critic_every"] == 0:
                frames.append(probe(tr, task, prompts, answers, spec["critic_group"], s + 1))
                say(f"  PPO step {s + 1}: accuracy {row.get('accuracy', 0):.3f}, "
                    f"explained variance {row.get('explained_var', float('nan')):.3f}")
    dist, length = summarise(pd.concat(frames, ignore_index=True))
    dist.to_csv(out / "critic_distance.csv", index=False)
    length.to_csv(out / "critic_length.csv", index=False)
    return {"task": TASK, "base": base_info, "train_log": log}
