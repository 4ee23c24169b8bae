"""The optimiser of every trained model (the policy, PPO's critic) and the policy's learning-rate schedule."""
from __future__ import annotations

import math

import torch


def adamw(params, **kw) -> torch.optim.AdamW:
    """torch AdamW, fused into one kernel on CPU and CUDA: the same update as the per-tensor loop torch picks on CPU
    by default, 4-10x faster for the tiny models here (experiments/benchmark.py)."""
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") for p in params) or None
    return torch.optim.AdamW(params, fused=fused, **kw)


def lr_factor(warmup: int, steps: int, schedule: str):
    """The learning-rate multiplier of step s: linear warm-up over `warmup` steps, then constant or a cosine that
    reaches 0 after the last step (`steps`)."""
    def factor(s: int) -> float:
        if warmup and s < warmup:
            return (s + 1) / warmup
        if schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(s - warmup + 1, steps - warmup) / max(steps - warmup, 1)))
        return 1.0

    return factor
