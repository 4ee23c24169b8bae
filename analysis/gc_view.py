"""The GC view: the per-token gradient coefficient every method assigns to one fixed probe set of completions.

Each method is built on the SFT base exactly as a run builds it (through the Trainer), handed the same probe
batch with known rewards, and asked for GC after the engine's once-per-batch work (log π_ref when the method
uses a reference, then `method.prepare`). θ = θ_old = the SFT base, so every ratio is 1 and the view shows the
methods' weighting of the tokens, not an optimisation state:

    GC[i, t] = method.coefficients(probe, log π_θ(o_t | q, o_<t))          [N, T]

The probe: a few held-out prompts, each with four completions built from the gold steps (all right; right steps
but a wrong answer; a wrong step but the right answer; all wrong), so outcome and process supervision disagree on
some rows. Rewards are the outcome verifier's (1/0); step rewards come from the step verifier. A preference-pair
method (DPO) gets the rows it can pair (one right, one wrong per prompt); the others are blank in its view.

The off-policy view scores the same probe after the policy is moved away from π_old = the SFT base by one fixed,
seeded perturbation (gcframe.verify.move_off_policy: θ + s·std(θ)·ε, s widened until the probe's ratios reach below
1 − 0.25 and above 1 + 0.25), the same θ for every method; prepare ran at θ_old, as in a run's later epochs:

    GC_off[i, t] = method.coefficients(probe, log π_θ'(o_t | q, o_<t)),   r = π_θ'/π_old ≠ 1          [N, T]

so the clips and gates act: GRPO's clip zeroes a token's surrogate part where the advantage pushes r past its band,
CISPO keeps it (clipped weight, nonzero), SAPO's gate shrinks it, GSPO clips whole sequences. Per method it records
zeroed_frac (of the tokens whose on-policy GC ≠ 0, those whose off-policy GC is exactly 0; a β > 0 KL term keeps a
clipped token off 0 by −β·c) and the method's own statistics of that pass (clip_frac, gate weights, ...).

`save(out, runs, base_dir, task, acc)` writes OUT/gc_view.json, which analysis.report draws.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

from gcframe.batch import Batch
from gcframe.engine import token_logprobs
from gcframe.rewards import process_rewards, score
from gcframe.sampling import make_batch

OFF_POLICY_SEED = 0
"""The seed of the off-policy view's perturbation: the same moved policy for every method and every run."""
OFF_POLICY_STEP = 0.05
"""The first perturbation scale s (× std of each parameter), doubled up to 4 times until the ratios leave the bands."""

PAIR_METHODS = ("dpo",)
"""Methods whose data are preference pairs: every group must be one chosen and one rejected sequence (also any method
class with `pairwise = True`: ipo, simpo, orpo, online_dpo)."""


def _bump(field: str, by: int) -> str:
    return str(int(field) + by) if field.strip().lstrip("-").isdigit() else field + "0"


def probe_texts(task, n_prompts: int = 3) -> list[dict]:
    """Four completions of each of `n_prompts` held-out prompts, built from the gold steps s_1..s_K:
    [s, s with a wrong answer, s with a wrong first step (K > 1; else another wrong answer), all steps wrong],
    and for the second prompt only wrong answers (a zero-variance group for outcome rewards)."""
    out = []
    for g in range(min(n_prompts, len(task.heldout))):
        row = task.heldout[g]
        s = list(row["steps"])
        all_wrong = [_bump(x, 1) for x in s[:-1]] + [_bump(s[-1], 11)]
        if g == 1:  # every answer wrong, but some steps right: outcome rewards are flat, step rewards are not
            variants = [s[:-1] + [_bump(s[-1], 1)], s[:-1] + [_bump(s[-1], 2)],
                        [_bump(x, 10) for x in s[:-1]] + [_bump(s[-1], 3)], all_wrong]
        else:
            first_wrong = [_bump(s[0], 10)] + s[1:]  # K > 1: the answer stays right; K = 1: a wrong answer
            variants = [s, s[:-1] + [_bump(s[-1], 1)], first_wrong, all_wrong]
        for v in variants:
            out.append({"prompt": row["prompt"], "completion": ";".join(v), "answer": row["answer"],
                        "steps": s, "group": g})
    return out


def probe_batch(task, tok, n_prompts: int = 3) -> Batch:
    """The probe as a Batch: rewards/correct [N] from the outcome verifier, step_rewards/step_mask [N, T]."""
    texts = probe_texts(task, n_prompts)
    batch = make_batch(tok, [t["prompt"] for t in texts], [t["completion"] for t in texts],
                       [t["group"] for t in texts], texts)
    score(batch, task, tok, "verifier")
    batch.data["step_rewards"], batch.data["step_mask"] = process_rewards(batch, task, tok)
    return batch


def pair_rows(batch: Batch) -> tuple[Batch, list[int]]:
    """Rows of the probe paired within each prompt (k-th right with k-th wrong) as a preference batch:
    group id = pair, data["is_chosen"] = 1 on the right one. Returns it and the probe row of each of its rows."""
    rows = []
    correct = batch.data["correct"].tolist()
    for g in torch.unique(batch.group_ids).tolist():
        idx = [i for i in range(len(batch)) if int(batch.group_ids[i]) == g]
        good, bad = [i for i in idx if correct[i] > 0], [i for i in idx if correct[i] <= 0]
        for a, b in zip(good, bad):
            rows += [a, b]
    sub = batch[torch.tensor(rows, dtype=torch.long)]
    sub.group_ids = torch.arange(len(rows) // 2).repeat_interleave(2)
    sub.data["is_chosen"] = torch.tensor([1.0, 0.0]).repeat(len(rows) // 2)
    return sub, rows


@torch.no_grad()
def method_gc(trainer, batch: Batch) -> torch.Tensor:
    """GC [N, T] of the trainer's method on `batch`: the engine's once-per-batch work (log π_ref, log π_old),
    prepare, coefficients at θ = θ_old. `batch` keeps old_logp and what prepare wrote, for off_policy_gc."""
    method, ctx, temp = trainer.method, trainer.ctx, trainer.tcfg.temperature
    if method.uses_reference:
        batch.data["ref_logp"] = token_logprobs(ctx.reference, batch, temp)
    batch.data["old_logp"] = token_logprobs(trainer.policy, batch, temp)  # as the engine stores it for μ > 1
    method.prepare(batch)
    gc = method.coefficients(batch, batch.data["old_logp"].clone()) * batch.completion_mask
    method.pop_stats()
    return gc.float().cpu()


@torch.no_grad()
def move_policy(trainer, probe: Batch) -> float:
    """Move the trainer's policy off π_old by the view's fixed seeded perturbation, widened on the whole `probe`
    (so every method, paired or not, sees the same θ'); returns the scale s."""
    from gcframe.verify import move_off_policy  # noqa: PLC0415 (the harness's perturbation, not a copy of it)

    old = token_logprobs(trainer.policy, probe, trainer.tcfg.temperature)
    return move_off_policy(trainer.ctx.policy, probe, old, torch.Generator().manual_seed(OFF_POLICY_SEED),
                           OFF_POLICY_STEP, trainer.tcfg.temperature)


@torch.no_grad()
def off_policy_gc(trainer, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(GC [N, T], ratio π_θ'/π_old [N, T], the method's statistics) on a batch method_gc prepared, at the moved θ'."""
    method = trainer.method
    logp = token_logprobs(trainer.policy, batch, trainer.tcfg.temperature)
    gc = method.coefficients(batch, logp) * batch.completion_mask
    ratio = (logp - batch.data["old_logp"]).exp() * batch.completion_mask
    return gc.float().cpu(), ratio.float().cpu(), method.pop_stats()


def _rows(values: torch.Tensor, batch: Batch, rows: list[int], n_probe: int) -> list:
    """Per probe row the values of its completion tokens (None where the method's batch has no such row)."""
    out: list = [None] * n_probe
    for j, i in enumerate(rows):
        n = int(batch.completion_mask[j].sum())
        out[i] = [round(float(v), 5) for v in values[j, :n]]
    return out


def compute(runs: list[tuple[str, str, object]], base_dir, task, accelerator, n_prompts: int = 3) -> dict:
    """GC of every (label, method name, RunConfig) on the probe -> the gc_view.json dict."""
    from gcframe.trainer import Trainer  # noqa: PLC0415 (imports methods; keep analysis importable alone)

    note = ("Probe rewards are the outcome verifier's; θ = θ_old = π_ref = the SFT base (ratios 1, k3 KL gradient "
            "0); DPO and the other pair methods see only the probe rows they can pair (right vs wrong, same prompt); "
            "KTO sees every row as an example, right = desirable, without mismatched rows (z₀ = 0, as at π_θ = π_ref).")
    off_note = ("The same probe after the policy moved off π_old = π_ref by one fixed seeded perturbation (the same θ' "
                "for every method; prepare ran at θ_old): ratios r = π_θ'/π_old ≠ 1, so clips and gates act. "
                "zeroed: of the tokens with on-policy GC ≠ 0, the share whose GC is exactly 0 here (a clip that "
                "removes the token; with β > 0 the KL term keeps a clipped token at −β·c instead, see clip_frac).")
    off: dict = {"scale": None, "ratio": None, "methods": {}, "errors": {}, "note": off_note}
    result: dict = {"probe": None, "methods": {}, "errors": {}, "note": note, "off_policy": off}
    row0 = task.heldout[0]
    steps = row0.get("steps") or []
    if not (steps and all(isinstance(x, str) for x in steps) and task.verify(";".join(steps), row0["answer"])):
        result["note"] = "no GC view: the probe is built from arithmetic steps, which this task's verifier rejects"
        return result
    for label, name, cfg in runs:
        try:  # a probe that one method cannot take must not lose the whole comparison's report
            with tempfile.TemporaryDirectory() as tmp:
                trainer = Trainer(cfg, name, Path(tmp) / "run", base_dir, task, accelerator, show_progress=False)
                trainer.logger.close()
            probe = probe_batch(task, trainer.tok, n_prompts)
            if result["probe"] is None:
                result["probe"] = _describe(probe, trainer.tok, getattr(task, "fmt", None))
            batch, rows = probe, list(range(len(probe)))
            if name in PAIR_METHODS or getattr(trainer.method, "pairwise", False):
                batch, rows = pair_rows(probe)
            elif getattr(trainer.method, "unpaired", False):  # KTO: each row an example, right = desirable
                batch.data.update(desirable=batch.data["correct"].float(), mismatched=torch.zeros(len(batch)))
            batch = batch.to(trainer.ctx.device)
            gc = method_gc(trainer, batch)
        except Exception as e:  # noqa: BLE001 — recorded in gc_view.json and printed, the report shows it
            result["errors"][label] = f"{type(e).__name__}: {e}"
            print(f"gc_view: {label}: {result['errors'][label]}", file=sys.stderr)
            continue
        n_probe = len(result["probe"])
        result["methods"][label] = {"method": name, "gc": _rows(gc, batch, rows, n_probe)}
        if getattr(trainer, "sharded", False):  # the perturbation draws whole parameters: not over FSDP2's shards
            off["note"] = "not computed: the policy is sharded (train.shard: fsdp2); run the view in one process"
            del trainer
            continue
        try:  # the off-policy view of the same method: its own failure loses neither view of the others
            scale = move_policy(trainer, probe.to(trainer.ctx.device))
            gc_off, ratio, stats = off_policy_gc(trainer, batch)
        except Exception as e:  # noqa: BLE001 — as above, in the off-policy view's errors
            off["errors"][label] = f"{type(e).__name__}: {e}"
            print(f"gc_view (off-policy): {label}: {off['errors'][label]}", file=sys.stderr)
            continue
        finally:
            del trainer
        live = (gc != 0) & batch.completion_mask.bool().cpu()  # on-policy GC ≠ 0 [N, T]
        zeroed = float(((gc_off == 0) & live).sum() / live.sum().clamp(min=1))
        off["methods"][label] = {"method": name, "gc": _rows(gc_off, batch, rows, n_probe),
                                 "zeroed_frac": round(zeroed, 5),
                                 "stats": {k: round(v, 5) for k, v in stats.items()}}
        if off["ratio"] is None and rows == list(range(n_probe)):  # every method sees the same θ': one record
            off["scale"], off["ratio"] = scale, _rows(ratio, batch, rows, n_probe)
    return result


SENTINEL = "\u2063QUESTION\u2063"


def user_turn(prompt: str, fmt) -> str:
    """The question inside a rendered prompt: a chat prompt's user turn without the template around it (the system
    turn, role headers), found by rendering a sentinel question through the same format; a plain prompt as is."""
    if fmt is None or not getattr(fmt, "chat", False):
        return prompt
    try:
        before, _, after = fmt.render(SENTINEL, SENTINEL).partition(SENTINEL)
    except Exception:  # noqa: BLE001 — a template that cannot render the sentinel: keep the prompt
        return prompt
    if prompt.startswith(before) and prompt.endswith(after) and len(prompt) >= len(before) + len(after):
        return prompt[len(before):len(prompt) - len(after)]
    return prompt


def _describe(batch: Batch, tok, fmt=None) -> list[dict]:
    out = []
    for i, t in enumerate(batch.texts):
        n = int(batch.completion_mask[i].sum())
        ids = batch.completion_ids[i, :n].tolist()
        tokens = ["•" if x == tok.eos_token_id else tok.decode([x]) for x in ids]
        out.append({"prompt": t["prompt"], "question": user_turn(t["prompt"], fmt), "completion": t["completion"],
                    "group": int(batch.group_ids[i]),
                    "reward": float(batch.data["rewards"][i]),
                    "step_rewards": [float(batch.data["step_rewards"][i, k]) for k in range(n)
                                     if batch.data["step_mask"][i, k] > 0],
                    "tokens": tokens})
    return out


def save(out, runs: list[tuple[str, str, object]], base_dir, task, accelerator, n_prompts: int = 3) -> Path:
    """Compute the GC view (on every process: building a method may be collective) and write OUT/gc_view.json."""
    result = compute(runs, base_dir, task, accelerator, n_prompts)
    path = Path(out) / "gc_view.json"
    if accelerator.is_main_process:
        path.write_text(json.dumps(result, indent=1))
    return path
