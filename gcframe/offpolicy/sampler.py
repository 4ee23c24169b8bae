"""The behaviour policy μ as a data source: a copy of the policy that lags the learner by k steps and/or runs in a
lower precision (train.staleness, train.sampler_dtype).

At step s the sampler generates with θ_{max(0, s−k)}, the learner's weights at the start of step s − k: the first
k steps sample from the starting weights, as the first k batches of a pipeline with k in flight do. The weights
it needs are kept in a ring of k snapshots of the *trainable* parameters (all of them for the tiny model, the LoRA
adapters alone when model.lora_rank > 0; frozen weights never change and are not copied); the ring is saved with
every checkpoint (`state_dict`), so a killed run resumes with the same sampler and the same samples.

The sampler itself is one copy of the policy, made once, whose parameters are cast to train.sampler_dtype (its
buffers, rotary frequencies among them, stay as they are, as an inference engine keeps them); before each step the
snapshot it should hold is copied in. The learner stays in its own precision.
"""
from __future__ import annotations

import copy
import functools
from collections import deque

import torch

from gcframe.errors import UserError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def device_of_machine() -> torch.device:
    """Where a run computes (gcframe.trainer.make_accelerator: the GPU when there is one)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@functools.lru_cache(maxsize=None)
def _probe(name: str, device: str) -> str | None:
    """Why `name` cannot run a sampler's passes on `device` (a linear layer, a softmax, a log), or None."""
    dtype = DTYPES[name]
    try:
        if device == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            return "this GPU has no bfloat16 support"
        layer = torch.nn.Linear(8, 8).to(device=device, dtype=dtype)
        with torch.no_grad():
            z = layer(torch.ones(2, 8, device=device, dtype=dtype))
            p = torch.log_softmax(z.double(), -1)
        if not torch.isfinite(p).all():
            return "a linear layer in it gave non-finite values"
    except (RuntimeError, TypeError, NotImplementedError) as e:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def check_dtype(name: str) -> None:
    """Refuse (one line) a sampler dtype this machine cannot run, before anything trains."""
    device = device_of_machine().type
    why = _probe(name, device)
    if why is not None:
        raise UserError(f"train.sampler_dtype {name} cannot run on this machine's {device} ({why}): use float32, or "
                        "a dtype it supports")


class Sampler:
    """μ: generates each step's samples with the weights of k steps ago, in train.sampler_dtype.

    `advance()` at the start of every step (before the data source draws), `model` the module to generate with.
    """

    def __init__(self, policy: torch.nn.Module, staleness: int, dtype: str):
        self.policy, self.k = policy, staleness
        self.dtype = None if dtype == "float32" else DTYPES[dtype]  # float32: the learner's own precision
        self.ring: deque[dict[str, torch.Tensor]] = deque()  # θ_{s−k}, ..., θ_{s−1} at the start of step s
        self.lag = 0  # how many steps behind the learner this step's sampler is
        self.steps = 0  # steps advanced (the lag is min(steps, k))
        self.model = copy.deepcopy(policy)  # the sampler's own module, never trained
        self.model.requires_grad_(False)
        for p in self.model.parameters() if self.dtype is not None else ():  # parameters only: buffers keep theirs
            p.data = p.data.to(self.dtype)

    def trainable(self) -> dict[str, torch.Tensor]:
        """A copy of the policy's trainable parameters (detached, on the policy's device)."""
        return {n: p.detach().clone() for n, p in self.policy.named_parameters() if p.requires_grad}

    def advance(self, load: bool = True) -> dict[str, torch.Tensor]:
        """Start of a step: the sampler takes θ_{max(0, s−k)} (the live weights when k = 0) in its dtype -> θ_s, the
        live weights it snapshotted. load=False keeps the ring and the lag only (train.pipeline: another process
        generates, `gcframe.offpolicy.pipeline`)."""
        now = self.trainable()
        if self.k:
            if not self.ring:  # a fresh run: the first k steps sample from the starting weights
                self.ring.extend([now] * self.k)
            behind = self.ring.popleft()
            self.ring.append(now)
        else:
            behind = now
        self.lag = min(self.steps, self.k)
        self.steps += 1
        if load:
            params = dict(self.model.named_parameters())
            with torch.no_grad():
                for name, value in behind.items():
                    params[name].copy_(value)  # cast to the sampler's dtype by copy_
        return now

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the ring of snapshots (shared tensors saved once) and the steps advanced."""
        return {"ring": list(self.ring), "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        device = next(self.policy.parameters()).device
        self.ring = deque({n: t.to(device) for n, t in snap.items()} for snap in state["ring"])
        self.steps = state["steps"]
