"""The Bradley–Terry reward model r_φ (seed, "The Preference Reward Model"; Bradley & Terry 1952).

    P(o_w ≻ o_l | q) = σ(r_φ(q, o_w) − r_φ(q, o_l))
    L(φ) = −E_{(q, o_w, o_l)} [ log σ(r_φ(q, o_w) − r_φ(q, o_l)) ]

r_φ is a `ScalarHeadModel` initialised from the SFT base (its backbone; the head starts at 0, so every pair starts
at σ(0) = 1/2), read at the last real completion token, the <eos>. With reward_model.likelihood it also keeps the
SFT model's LM head and adds the completion's log-likelihood, r_φ = v_φ(h_eos) + Σ_t log π_φ(o_t | q, o_<t): it then
starts where the SFT model's own likelihood ranks the pair, and the same loss trains both parts. Only score
differences are trained: r_φ is identified up to a per-prompt shift, which a group-relative advantage removes
anyway.

    load_or_train(cfg, task, base_dir, accelerator) -> (RewardModel, info)   cached next to the SFT base
    RewardModel.score(batch) -> Tensor[N]                                      no grad; for gcframe.rewards.score
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from gcframe.batch import Batch
from gcframe.modeling import ScalarHeadModel, load_model_and_tokenizer
from gcframe.rewards.preferences import PreferenceOptions, cache_key, derived_dir, load_or_build, pair_batch
from gcframe.tracking.log import publish_dir

VERSION = 1


class RewardModel:
    """r_φ(q, o): one scalar per sequence, the head's value at o's last real token (plus, with the LM head kept,
    the completion's log-likelihood under r_φ's own LM: reward_model.likelihood)."""

    def __init__(self, model: ScalarHeadModel, tok, chunk: int = 512):
        self.model, self.tok, self.chunk = model, tok, chunk

    def rewards(self, batch: Batch) -> torch.Tensor:
        """r_φ [N] with grad: the head's value at o's last token, index P + |o| − 1 in input_ids (|o| counts the
        <eos>); with the LM head kept (reward_model.likelihood), plus Σ_t log π_φ(o_t | q, o_<t) over o's tokens."""
        dev = next(self.model.parameters()).device
        ids, mask = batch.input_ids.to(dev), batch.attention_mask.to(dev)  # [N, P+T]
        h = self.model.hidden(ids, mask)  # [N, P+T, H]
        P = batch.prompt_ids.shape[1]
        last = P + batch.completion_mask.sum(-1).long().to(dev) - 1  # [N]
        r = self.model.values(h).gather(1, last.clamp(min=0).unsqueeze(1)).squeeze(1)  # [N]
        if self.model.lm_head is None:
            return r
        logits = self.model.lm_head(h[:, P - 1:-1]).float()  # [N, T, V]: position P−1+t predicts o_t
        logp = torch.log_softmax(logits, -1).gather(-1, batch.completion_ids.to(dev).unsqueeze(-1)).squeeze(-1)
        return r + (logp * batch.completion_mask.to(dev)).sum(-1)  # [N]

    @torch.no_grad()
    def score(self, batch: Batch) -> torch.Tensor:
        """r_φ [N] (no grad, eval mode), in chunks of `chunk` sequences."""
        self.model.eval()
        n = len(batch)
        parts = [self.rewards(batch[i:i + self.chunk]) for i in range(0, n, self.chunk)]
        return torch.cat(parts) if parts else torch.zeros(0)

    @torch.no_grad()
    def pairwise(self, pairs, batch_size: int = 256) -> dict:
        """On preference pairs: accuracy (r(o_w) > r(o_l); a tie counts 1/2) against the annotator's labels and
        against the gold preference (a flipped pair's gold winner is its `rejected`), and the mean BT loss."""
        rows, margins = pairs.to_list(), []
        for i in range(0, len(rows), batch_size):
            r = self.score(pair_batch(self.tok, rows[i:i + batch_size]))  # [2·P_chunk]
            margins.append(r[0::2] - r[1::2])  # r(o_w) − r(o_l) [P_chunk]
        m = torch.cat(margins).cpu()
        sign = torch.tensor([-1.0 if r["flipped"] else 1.0 for r in rows])  # −1 where the label was swapped
        acc = lambda x: float(((x > 0).float() + 0.5 * (x == 0).float()).mean())  # noqa: E731
        return {"accuracy": acc(m), "gold_accuracy": acc(m * sign),
                "loss": float(bradley_terry_loss(m, torch.zeros_like(m)))}


def bradley_terry_loss(r_chosen: torch.Tensor, r_rejected: torch.Tensor) -> torch.Tensor:
    """−mean log σ(r_φ(q,o_w) − r_φ(q,o_l)) over pairs [P] -> scalar (the seed's L(φ); logsigmoid is stable)."""
    return -F.logsigmoid(r_chosen - r_rejected).mean()


def train(rm: RewardModel, train_pairs, rcfg, seed: int, show_progress: bool = False) -> dict:
    """rcfg.steps AdamW steps on −log σ(r_φ(q,o_w) − r_φ(q,o_l)), `batch_size` pairs each (a seeded shuffle)."""
    rows = train_pairs.to_list()
    opt = torch.optim.AdamW(rm.model.parameters(), lr=rcfg.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    order, pos, losses = torch.randperm(len(rows), generator=g), 0, []
    rm.model.train()
    for _ in tqdm(range(rcfg.steps), desc="reward model", disable=None if show_progress else True, leave=False):
        idx = []
        while len(idx) < rcfg.batch_size:
            if pos >= len(order):
                order, pos = torch.randperm(len(rows), generator=g), 0
            take = min(rcfg.batch_size - len(idx), len(order) - pos)
            idx += order[pos:pos + take].tolist()
            pos += take
        r = rm.rewards(pair_batch(rm.tok, [rows[i] for i in idx]))  # [2B]
        loss = bradley_terry_loss(r[0::2], r[1::2])  # pairs are rows (2p, 2p+1) = (o_w, o_l)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(rm.model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    rm.model.eval()
    tail = losses[-max(1, len(losses) // 10):]
    return {"train_loss_last": sum(tail) / len(tail)}


def load_or_train(cfg, task, base_dir, accelerator=None, show_progress: bool = False) -> tuple[RewardModel, dict]:
    """The reward model of this SFT base and `cfg.reward_model` (trained by the main process on first use).

    info: held-out pairwise accuracy (annotator labels and gold), its loss, training time and data statistics.
    """
    lm, tok = load_model_and_tokenizer(str(base_dir))
    device = accelerator.device if accelerator is not None else torch.device("cpu")
    opts = PreferenceOptions.of(cfg)
    lm.to(device).eval()
    sets, pref_info = load_or_build(cfg, task, tok, base_dir, lambda: lm, opts, accelerator)
    key = cache_key({"preferences": pref_info["key"], "rm": dataclasses.asdict(cfg.reward_model),
                     "seed": cfg.task.seed, "version": VERSION})
    d = derived_dir(base_dir) / "reward_model" / key
    main = accelerator is None or accelerator.is_main_process
    if main and not (d / "rm_info.json").exists():
        t0 = time.time()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.task.seed)
            rm = RewardModel(ScalarHeadModel.from_causal_lm(lm, cfg.reward_model.likelihood).to(device), tok)
            before = rm.pairwise(sets["heldout"])
            info = train(rm, sets["train"], cfg.reward_model, cfg.task.seed, show_progress)
        after = rm.pairwise(sets["heldout"])
        info.update(heldout_accuracy=after["accuracy"], heldout_gold_accuracy=after["gold_accuracy"],
                    heldout_loss=after["loss"], heldout_accuracy_init=before["accuracy"],
                    train_accuracy=rm.pairwise(sets["train"].select(range(min(512, len(sets["train"])))))["accuracy"],
                    train_time_s=round(time.time() - t0, 1), key=key, config=dataclasses.asdict(cfg.reward_model),
                    preferences={k: v for k, v in pref_info.items() if k != "options"})
        tmp = d.with_name(f"{d.name}.tmp{os.getpid()}")
        rm.model.save(str(tmp))
        (tmp / "rm_info.json").write_text(json.dumps(info, indent=1))
        publish_dir(tmp, d)
    if accelerator is not None:
        accelerator.wait_for_everyone()
    model = ScalarHeadModel.load(str(d)).to(device).eval().requires_grad_(False)
    return RewardModel(model, tok), json.loads((d / "rm_info.json").read_text())
