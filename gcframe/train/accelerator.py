"""The run's Accelerator (gcframe.trainer, compare.py and every driver build theirs here), and the end of its
process group at exit."""
from __future__ import annotations

import atexit

from accelerate import Accelerator

from gcframe import sharding


def make_accelerator() -> Accelerator:
    """The run's Accelerator. Without a GPU it must be told cpu=True, else a multi-process launch (torchrun,
    `accelerate launch --multi_gpu`) silently runs independent single processes instead of one gloo group.

    Under several processes the process group is destroyed at exit, while the interpreter is still whole: left to
    the interpreter's teardown, Gloo's worker threads can abort the process ("terminate called without an active
    exception", SIGABRT) after its work is done (pytorch/pytorch#190489). Destroying it ends those threads only if
    nothing else holds the group: torch.distributed.nn.functional's collectives take `group=group.WORLD` as a
    default argument, so that module, imported once the group exists (transformers imports it with its models),
    would hold the group until the teardown; imported here first, its defaults are None. FSDP2's device mesh holds
    it too: `sharding.release_meshes` lets go of it."""
    import torch.distributed.nn  # noqa: F401  (before the process group exists: see above)

    acc = Accelerator(cpu=not torch.cuda.is_available())
    if acc.num_processes > 1:
        atexit.register(_end_process_group, acc)
    return acc


def _end_process_group(acc: Accelerator) -> None:
    """At exit: destroy the process group, then drop the last references to it (sharded models left in reference
    cycles hold it too), so that Gloo's threads end now."""
    import gc

    acc.state.destroy_process_group()
    sharding.release_meshes()
    gc.collect()
