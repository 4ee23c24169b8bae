"""Session settings. Under pytest-xdist (`-n 2`, the default of pyproject's addopts), each worker process gets one
intra-op thread: two workers on two cores with two threads each would oversubscribe them, and a tiny model's step
slows 10-100x when its OpenMP threads wait on each other. Subprocesses the tests start get OMP_NUM_THREADS=1
themselves (tests/test_resume.cli_env)."""
from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
