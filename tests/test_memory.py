"""Runs that share one accelerator (compare.py, the §5.2 sweep) free their models when they finish: accelerate keeps
every object it prepares, and without the release each run's models and AdamW state stayed in memory (~0.5 GB per
SmolLM2 run)."""
import gc
import weakref

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
