"""Held-out evaluation: greedy accuracy, and from k samples per problem pass@1, pass@k and maj@k, with the outcome of
every problem.

maj@k is majority voting over the k extracted answers (self-consistency, DeepSeekMath §5.2 reports it beside
pass@k: RL that sharpens the output distribution raises maj@k but not pass@k). An optional `on_samples` hook sees
each batch of sampled completions and returns more sums to add (the trainer's KL to π_ref and proxy reward).
"""
from __future__ import annotations

import hashlib
from collections import Counter

import torch

from gcframe.evaluate.problems import problem_id
from gcframe.sampling import Generator

COUNT_KEYS = ("n", "greedy_correct", "pass1_correct", "passk_correct", "majk_correct",
              "kl_sum", "kl_tokens", "proxy_sum", "proxy_n")
"""Every sum `evaluate` may return (with its hook): a fixed list, so processes reduce the same vector."""


def eval_seed(seed: int, step: int, rank: int = 0) -> int:
    """The seed of the evaluation at `step` of a run with `seed`, on process `rank`: a stream of its own, apart from
    the training generator's, the same for every method of the seed (Trainer.evaluate, the re-scoring command)."""
    digest = hashlib.blake2b(f"eval|{seed}|{step}|{rank}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def _chunks(rows: list[dict], size: int):
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def majority(answers: list) -> str | None:
    """The most frequent non-empty answer; ties go to the one seen first (Counter keeps insertion order); None
    when no completion gave an answer."""
    votes = Counter(a for a in answers if a)
    return votes.most_common(1)[0][0] if votes else None


@torch.no_grad()
def evaluate(model, generator: Generator, task, rows: list[dict], k: int = 0, batch_size: int = 256,
             on_samples=None, on_chunk=None, records: list | None = None) -> dict:
    """Counts over `rows` (held-out problems): greedy correct, and with k > 0 sampled pass@1 / pass@k / maj@k.

    Returns sums (not means) so that shards from several processes can be added before dividing by `n`.
    `on_chunk(n)` is told each time n more problems are done (a progress bar). `records`, when given, receives one
    dict per problem (`gcframe.evaluate.problems.FIELDS`): its id, greedy correctness, the greedy completion's
    extracted answer, length in tokens and truncation, and with k samples the number correct and the majority answer.
    A row's `index` (its position in the held-out set) is kept when the row carries one.
    """
    out = Counter(n=len(rows))
    for chunk in _chunks(rows, batch_size):
        prompts = [r["prompt"] for r in chunk]
        greedy = generator.generate(model, prompts, n=1, temperature=0.0)
        ok_greedy = [bool(task.verify(t["completion"], r["answer"])) for t, r in zip(greedy.texts, chunk)]
        out["greedy_correct"] += sum(ok_greedy)
        recs = None
        if records is not None:
            lengths = greedy.completion_mask.sum(-1).tolist()  # [n]: tokens up to and including <eos>
            recs = [{"problem": problem_id(r), "index": r.get("index"), "greedy_correct": int(ok),
                     "greedy_answer": task.extract_answer(t["completion"]), "completion_len": int(n_tok),
                     "truncated": int(cut)}
                    for r, t, ok, n_tok, cut in zip(chunk, greedy.texts, ok_greedy, lengths,
                                                    greedy.data["truncated"].tolist())]
        if k > 0:
            sampled = generator.generate(model, prompts, n=k)
            if on_samples is not None:
                out.update(on_samples(sampled))  # Counter.update adds the sums
            for j, r in enumerate(chunk):
                comps = [t["completion"] for t in sampled.texts[j * k:(j + 1) * k]]
                ok = [bool(task.verify(c, r["answer"])) for c in comps]
                top = majority([task.extract_answer(c) for c in comps])
                maj_ok = top is not None and bool(task.verify(top, r["answer"]))
                out["pass1_correct"] += sum(ok) / k
                out["passk_correct"] += any(ok)
                out["majk_correct"] += maj_ok
                if recs is not None:
                    recs[j].update(k=k, k_correct=sum(ok), maj_answer=top, maj_correct=int(maj_ok))
        if recs is not None:
            records.extend(recs)
        if on_chunk is not None:
            on_chunk(len(chunk))
    return dict(out)


def rates(counts: dict, k: int = 0) -> dict:
    """Turn summed counts into the logged metrics."""
    n = max(counts.get("n", 0), 1)
    res = {"eval_accuracy": counts.get("greedy_correct", 0) / n}
    if k > 0:
        res.update(eval_pass1=counts.get("pass1_correct", 0) / n, eval_passk=counts.get("passk_correct", 0) / n,
                   eval_majk=counts.get("majk_correct", 0) / n)
    if counts.get("kl_tokens"):  # per-token k3 mean over the policy's own samples
        res["eval_kl_ref"] = counts["kl_sum"] / counts["kl_tokens"]
    if counts.get("proxy_n"):  # mean r_φ of the same samples
        res["eval_proxy_reward"] = counts["proxy_sum"] / counts["proxy_n"]
    return res
