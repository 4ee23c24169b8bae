"""Runs that share one accelerator (compare.py, the §5.2 sweep) free their models when they finish: accelerate keeps
every object it prepares, and without the release each run's models and AdamW state stayed in memory (~0.5 GB per
SmolLM2 run)."""
import gc
import weakref

import pytest

from experiments.bench_common import Size, build_base, run_config, task_of
from gcframe.trainer import Trainer, make_accelerator


def test_a_finished_run_leaves_nothing_in_a_shared_accelerator(tmp_path):
    size = Size("test", 32, 2, 4, 64, prompts=2, group=2, new_tokens=4)
    build_base(size, tmp_path / "base")
    cfg = run_config(size, 1)
    task = task_of(cfg, str(tmp_path / "base"))
    acc = make_accelerator()
    alive = []
    for method in ("grpo", "ppo"):  # ppo: a critic and its optimiser too
        tr = Trainer(cfg, method, tmp_path / method, str(tmp_path / "base"), task, acc, show_progress=False)
        tr.fit()
        assert tr.save_model(tmp_path / method / "final").exists()  # the trainer still holds what it needs
        alive += [weakref.ref(m) for m in (tr.method.ctx.policy, *tr.aux_models)] + [weakref.ref(tr.opt)]
        del tr
        gc.collect()
    assert acc._models == [] and acc._optimizers == []
    assert [r() for r in alive] == [None] * 5  # grpo: policy, AdamW; ppo: policy, critic, AdamW


def test_a_runs_starting_memory_is_what_is_live_not_the_heap_an_earlier_run_freed():
    """Many mid-sized blocks freed while a later one is still held: glibc keeps the freed pages below it in its
    heap (RSS stays up) until malloc_trim hands them back. reset_peak must do so, or the next run's start RSS
    includes them and its own growth, measured from there, reads too small."""
    import ctypes

    from gcframe.tracking import memory

    if memory.rss_mb() is None or not memory.reset_peak():
        pytest.skip("needs Linux (/proc and glibc)")
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(64 * 1024) for _ in range(6000)]  # 375 MiB in 64 KiB blocks: below mmap's threshold
    for b in blocks:
        ctypes.memset(b, 1, 64 * 1024)  # touched: resident
    keep = libc.malloc(64 * 1024)  # a live block above them keeps the heap's top from shrinking by itself
    before = memory.rss_mb()
    for b in blocks:
        libc.free(b)
    held = memory.rss_mb()
    memory.reset_peak()
    after = memory.rss_mb()
    libc.free(keep)
    assert before - held < 100  # freeing alone gave (almost) nothing back
    assert held - after > 250  # reset_peak did: 375 MiB were free
