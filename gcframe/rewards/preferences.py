"""Preference data: triples (q, o_w, o_l) from SFT-base samples, judged by a simulated annotator.

The seed's "The Preference Reward Model": people see a prompt and two completions and say which they prefer. Here
the annotator is simulated from the task's gold verifier: for each prompt the frozen SFT base samples k
completions; if at least one is correct and one is wrong, the annotator is shown one of each (picked at random)
and prefers the correct one, except that with probability `label_noise` it states the opposite preference.

    prompts (seeded order) -> k samples each (SFT base) -> task.verify -> at most one pair per prompt
    -> DatasetDict {train, heldout}: prompt, chosen, rejected, answer, flipped (True where the label was swapped)

The held-out pairs come from prompts that give no training pair. Building is deterministic given the options
(the seed drives prompt order, sampling, pair choice and label noise, each from its own stream, so changing
`label_noise` changes the flips only). The set is cached next to the SFT base under a hash of everything it
depends on, built once and shared by the reward model and DPO.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import datasets
import torch

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.sampling import GenerationConfig, Generator, make_batch
from gcframe.tracking import claims
from gcframe.tracking.log import publish_dir
from gcframe.tracking.progress import progress

VERSION = 1  # bump when the construction changes: old caches are then ignored


@dataclass(frozen=True)
class PreferenceOptions:
    pairs: int = 2000  # training pairs wanted
    heldout_pairs: int = 256  # held-out pairs wanted (disjoint prompts)
    samples_per_prompt: int = 8  # k completions sampled per prompt
    label_noise: float = 0.0  # probability the annotator swaps chosen and rejected
    seed: int = 0  # prompt order, sampling, pair choice, noise

    @staticmethod
    def of(cfg, **overrides) -> "PreferenceOptions":
        """From a RunConfig's `reward_model` section (seeded by task.seed, like the SFT base); None overrides
        are ignored, so a method may leave an option to the shared section."""
        r = cfg.reward_model
        opts = PreferenceOptions(r.pairs, r.heldout_pairs, r.samples_per_prompt, r.label_noise, cfg.task.seed)
        return dataclasses.replace(opts, **{k: v for k, v in overrides.items() if v is not None})


def derived_dir(base_dir) -> Path:
    """Where artefacts derived from an SFT base are cached: the base's own folder when it is one of ours,
    otherwise a folder in the cache named after the base's path (a user's model directory is never written)."""
    from gcframe.pipeline import cache_root

    base, root = Path(base_dir).resolve(), cache_root().resolve()
    if root in base.parents:
        return base
    return root / "derived" / hashlib.sha256(str(base).encode()).hexdigest()[:12]


def cache_key(obj: dict) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def annotate(completions: list[str], correct: list[bool], pick: random.Random, noise: random.Random,
             label_noise: float) -> tuple[str, str, bool] | None:
    """The simulated annotator on one prompt's samples -> (chosen, rejected, flipped), or None if the samples
    are all right or all wrong. One draw of `noise` per pair, so the flips do not move the pair choice."""
    good = [c for c, ok in zip(completions, correct) if ok]
    bad = [c for c, ok in zip(completions, correct) if not ok]
    if not good or not bad:
        return None
    w, l = pick.choice(good), pick.choice(bad)
    flipped = noise.random() < label_noise
    return (l, w, True) if flipped else (w, l, False)


@torch.no_grad()
def build(model, tok, task, opts: PreferenceOptions, max_new_tokens: int, temperature: float = 1.0,
          prompts_per_call: int = 64) -> tuple[datasets.DatasetDict, dict]:
    """Sample, judge and split -> ({train, heldout}, info). Stops when both splits are full or prompts run out."""
    k = opts.samples_per_prompt
    gen = Generator(tok, GenerationConfig(max_new_tokens, temperature))
    order = torch.randperm(len(task.prompts), generator=torch.Generator().manual_seed(opts.seed)).tolist()
    pick, noise = random.Random(f"pick-{opts.seed}"), random.Random(f"annotator-{opts.seed}")
    want = {"train": opts.pairs, "heldout": opts.heldout_pairs}
    out: dict[str, list[dict]] = {"train": [], "heldout": []}
    info = {"prompts_seen": 0, "all_correct": 0, "all_wrong": 0, "samples_correct": 0, "flipped": 0}
    device = next(model.parameters()).device
    bar = progress(total=opts.pairs + opts.heldout_pairs, desc="preference pairs from the base's samples",
                   unit="pair")  # minutes on a real model: a bar, or a plain line every 10 s
    with bar, torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(opts.seed)
        for start in range(0, len(order), prompts_per_call):
            if all(len(out[s]) >= want[s] for s in out):
                break
            rows = [task.prompts[i] for i in order[start:start + prompts_per_call]]
            batch = gen.generate(model, [r["prompt"] for r in rows], n=k)  # [len(rows)·k]
            for j, row in enumerate(rows):
                split = "train" if len(out["train"]) < want["train"] else "heldout"
                if len(out[split]) >= want[split]:
                    break
                comps = [t["completion"] for t in batch.texts[j * k:(j + 1) * k]]
                ok = [bool(task.verify(c, row["answer"])) for c in comps]
                info["prompts_seen"] += 1
                info["samples_correct"] += sum(ok)
                info["all_correct"] += all(ok)
                info["all_wrong"] += not any(ok)
                judged = annotate(comps, ok, pick, noise, opts.label_noise)
                if judged is not None:
                    chosen, rejected, flipped = judged
                    info["flipped"] += flipped
                    out[split].append({"prompt": row["prompt"], "chosen": chosen, "rejected": rejected,
                                       "answer": row["answer"], "flipped": flipped})
                    bar.update(1)
    info["base_sample_accuracy"] = info["samples_correct"] / max(info["prompts_seen"] * k, 1)
    info.update(train_pairs=len(out["train"]), heldout_pairs=len(out["heldout"]))
    if not out["train"] or not out["heldout"]:
        raise UserError(f"only {len(out['train'])} training and {len(out['heldout'])} held-out preference pairs "
                        f"from {info['prompts_seen']} prompts: the SFT base's samples are almost all right "
                        f"({info['all_correct']} prompts) or all wrong ({info['all_wrong']}); raise "
                        "reward_model.samples_per_prompt or lower reward_model.pairs")
    return datasets.DatasetDict({s: datasets.Dataset.from_list(out[s]) for s in out}), info


def load_or_build(cfg, task, tok, base_dir, model_fn: Callable[[], torch.nn.Module], opts: PreferenceOptions,
                  accelerator=None) -> tuple[datasets.DatasetDict, dict]:
    """The cached preference set of this SFT base and these options (built by the main process on first use).

    `model_fn` returns the frozen SFT base to sample from; it is only called when the set must be built.
    """
    key = cache_key({"options": dataclasses.asdict(opts), "task": dataclasses.asdict(cfg.task),
                     "max_new_tokens": cfg.train.max_new_tokens, "temperature": cfg.train.temperature,
                     "base": str(Path(base_dir).resolve()), "version": VERSION})
    d = derived_dir(base_dir) / "preferences" / key
    main = accelerator is None or accelerator.is_main_process
    solo = accelerator is None or accelerator.num_processes == 1
    lock = d.with_name(d.name + ".claim")  # a second compare.py process sharing the cache waits for the first's set
    said = False
    while main and solo and not (d / "info.json").exists() and not claims.acquire(lock):
        if not said:  # a second process sharing the cache: say what it waits for, once
            print(f"waiting for the preference set another process is building ({d})", file=sys.stderr, flush=True)
            said = True
        time.sleep(2)
    try:
        if main and not (d / "info.json").exists():
            _build_and_publish(cfg, task, tok, model_fn, opts, key, d)
    finally:
        claims.release(lock)
    if accelerator is not None:
        accelerator.wait_for_everyone()
    return datasets.load_from_disk(str(d)), json.loads((d / "info.json").read_text())


def _build_and_publish(cfg, task, tok, model_fn, opts: PreferenceOptions, key: str, d: Path) -> None:
    t0 = time.time()
    sets, info = build(model_fn(), tok, task, opts, cfg.train.max_new_tokens, cfg.train.temperature)
    info.update(options=dataclasses.asdict(opts), key=key, build_time_s=round(time.time() - t0, 1))
    tmp = d.with_name(f"{d.name}.tmp{os.getpid()}")
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no "Saving the dataset" bars in the CLI's output
    sets.save_to_disk(str(tmp))
    if not quiet:
        datasets.enable_progress_bars()
    (tmp / "info.json").write_text(json.dumps(info, indent=1))
    publish_dir(tmp, d)


def pair_batch(tok, rows: list[dict]) -> Batch:
    """P pairs -> a Batch of 2P sequences [o⁺_0, o⁻_0, o⁺_1, o⁻_1, ...]: a pair shares a group id (minibatches
    never split it) and data["is_chosen"] [2P] is 1 on o⁺, 0 on o⁻."""
    prompts = [r["prompt"] for r in rows for _ in range(2)]
    completions = [r[side] for r in rows for side in ("chosen", "rejected")]
    texts = [{"prompt": r["prompt"], "completion": r[side], "answer": r["answer"], "side": side}
             for r in rows for side in ("chosen", "rejected")]
    batch = make_batch(tok, prompts, completions, torch.arange(len(rows)).repeat_interleave(2).tolist(), texts)
    batch.data["is_chosen"] = torch.tensor([1.0, 0.0]).repeat(len(rows))  # [2P]
    return batch
