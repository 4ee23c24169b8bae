"""The Batch: what every data source produces and every method's GC is computed from.

A batch holds N sequences, each a left-padded prompt followed by a right-padded completion:

    prompt_ids      [N, P]   <pad><pad><bos>1 2 + 3 4 =
    completion_ids  [N, T]   4 6 <eos><pad><pad>
    completion_mask [N, T]   1 1 1    0    0          (1 on the tokens whose log-prob is trained)

Every per-token quantity (log-probs, advantages, GC) is [N, T], aligned with `completion_ids`.
`group_ids` [N] says which sequences share a prompt (GRPO groups, DPO pairs); minibatches never split a group.
Per-sequence or per-token tensors a method or the engine adds go in `data` and are sliced with the batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch


@dataclass
class Batch:
    prompt_ids: torch.Tensor  # [N, P] long, left padded
    prompt_mask: torch.Tensor  # [N, P] long, 1 on real prompt tokens
    completion_ids: torch.Tensor  # [N, T] long, right padded
    completion_mask: torch.Tensor  # [N, T] float, 1 on trained completion tokens
    group_ids: torch.Tensor  # [N] long, sequences of one prompt share an id
    data: dict[str, torch.Tensor] = field(default_factory=dict)  # rewards [N], old_logp [N,T], ...
    texts: list[dict] = field(default_factory=list)  # per sequence: prompt, completion, answer (for logging)

    def __len__(self) -> int:
        return self.completion_ids.shape[0]

    @property
    def input_ids(self) -> torch.Tensor:  # [N, P+T]
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:  # [N, P+T]; completion padding after <eos> is masked
        return torch.cat([self.prompt_mask, self.completion_mask.long()], dim=1)

    def __getitem__(self, idx) -> "Batch":
        """Rows `idx` (a LongTensor of indices or a slice) of every tensor; texts follow."""
        if isinstance(idx, slice):
            idx = torch.arange(len(self))[idx]
        sub = {k: v[idx] for k, v in self.data.items()}
        texts = [self.texts[i] for i in idx.tolist()] if self.texts else []
        return replace(
            self,
            prompt_ids=self.prompt_ids[idx],
            prompt_mask=self.prompt_mask[idx],
            completion_ids=self.completion_ids[idx],
            completion_mask=self.completion_mask[idx],
            group_ids=self.group_ids[idx],
            data=sub,
            texts=texts,
        )

    def to(self, device) -> "Batch":
        return replace(
            self,
            prompt_ids=self.prompt_ids.to(device),
            prompt_mask=self.prompt_mask.to(device),
            completion_ids=self.completion_ids.to(device),
            completion_mask=self.completion_mask.to(device),
            group_ids=self.group_ids.to(device),
            data={k: v.to(device) for k, v in self.data.items()},
        )

    def split(self, n: int, generator: torch.Generator | None = None) -> list["Batch"]:
        """`n` minibatches of whole groups (shuffled when a generator is given); groups are never split."""
        groups = torch.unique(self.group_ids)
        if generator is not None:
            groups = groups[torch.randperm(len(groups), generator=generator)]
        n = max(1, min(n, len(groups)))
        parts = []
        for chunk in torch.tensor_split(groups, n):
            rows = torch.nonzero(torch.isin(self.group_ids, chunk), as_tuple=True)[0]
            parts.append(self[rows])
        return parts


def concat(batches: list[Batch], pad_id: int) -> Batch:
    """One batch of several (rollouts of different prompts): prompts left-padded and completions right-padded to the
    widest, per-token data ([N, T]) right-padded with 0, group ids renumbered so that groups stay distinct."""
    import torch.nn.functional as F

    if len(batches) == 1:
        return batches[0]
    P = max(b.prompt_ids.shape[1] for b in batches)
    T = max(b.completion_ids.shape[1] for b in batches)
    parts, offset = [], 0
    for b in batches:
        p, t = P - b.prompt_ids.shape[1], T - b.completion_ids.shape[1]
        data = {k: F.pad(v, (0, t)) if v.dim() == 2 and v.shape[1] == b.completion_ids.shape[1] else v
                for k, v in b.data.items()}
        gids = torch.unique(b.group_ids, return_inverse=True)[1] + offset  # 0..g-1, then shifted
        offset = int(gids.max()) + 1 if len(gids) else offset
        parts.append(Batch(F.pad(b.prompt_ids, (p, 0), value=pad_id), F.pad(b.prompt_mask, (p, 0)),
                           F.pad(b.completion_ids, (0, t), value=pad_id), F.pad(b.completion_mask, (0, t)),
                           gids, data, list(b.texts)))
    keys = set(parts[0].data)
    if any(set(b.data) != keys for b in parts):
        raise ValueError("batches to concatenate carry different data keys")
    return Batch(*(torch.cat([getattr(b, f) for b in parts]) for f in
                   ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "group_ids")),
                 data={k: torch.cat([b.data[k] for b in parts]) for k in keys},
                 texts=[t for b in parts for t in b.texts])


def pad_right(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists -> (ids [N, T], mask [N, T])."""
    width = max(1, max((len(s) for s in seqs), default=1))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def pad_left(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists -> (ids [N, P], mask [N, P])."""
    width = max(1, max((len(s) for s in seqs), default=1))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
    return ids, mask
