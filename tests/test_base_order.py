"""compare.py's bases, one per seed (sft_base.per_seed): a process skips a base another process is training and
comes back to it last, so that two processes sharing a comparison train two bases at once."""
from gcframe.config import from_dict
from gcframe.pipeline import base_claimed_elsewhere, base_key, cache_root
from gcframe.tracking import claims


def test_a_base_another_process_trains_is_taken_last(tmp_path, monkeypatch):
    from experiments.compare import _with_seed, build_bases

    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path))
    cfg = from_dict({"sft_base": {"per_seed": True}})
    d = cache_root() / "sft_base" / base_key(_with_seed(cfg, 1))
    d.parent.mkdir(parents=True)
    lock = d.with_name(d.name + ".claim")
    assert claims.acquire(lock)  # "another process" (this one: a live holder) trains seed 1's base
    assert base_claimed_elsewhere(_with_seed(cfg, 1)) and not base_claimed_elsewhere(_with_seed(cfg, 2))
    order = []

    def bases(seed):  # stands in for seed_bases: seed 1's is finished by the time the others are
        order.append(seed)
        if seed == 2:
            claims.release(lock)
        return None, {}

    build_bases(cfg, [0, 1, 2, 3], bases)
    assert order == [0, 2, 1, 3]  # 1 skipped while claimed; after 2 its claim is gone and it comes next
    order.clear()
    build_bases(from_dict({}), [0, 1, 2], bases)  # one shared base (compare passes seeds[:1]): no reordering
    assert order == [0, 1, 2]


def test_cells_train_seed_by_seed_and_the_summary_keeps_method_order(tmp_path, monkeypatch):
    """compare.run_cells trains every method's seed 0 before any seed 1 (a comparison stopped part-way holds whole
    seeds: a pilot for analysis.power), and returns its rows method by method, as summary.csv lists them."""
    import types

    import gcframe.tracking.env
    import gcframe.tracking.final_model
    import gcframe.trainer
    from experiments import compare

    trained = []

    class FakeTrainer:
        def __init__(self, cfg, name, run_dir, base, *args, label="", **kwargs):
            self.label = label

        def fit(self, resume=False):
            trained.append(self.label)
            return {"final_accuracy": 0.5, "steps": 1, "time_s": 1.0}

    train = types.SimpleNamespace(steps=1, eval_split="test", keep_checkpoints=False)
    monkeypatch.setattr(gcframe.trainer, "Trainer", FakeTrainer)
    monkeypatch.setattr(gcframe.tracking.final_model, "finish", lambda *a, **k: None)
    monkeypatch.setattr(gcframe.tracking.env, "write_env", lambda path: None)
    monkeypatch.setattr(compare, "run_config", lambda cfg, label, seed: (label, types.SimpleNamespace(train=train)))
    acc = types.SimpleNamespace(num_processes=1, is_main_process=True, print=lambda *a: None)
    rows = compare.run_cells(tmp_path, None, ["sft", "grpo"], [0, 1], bases=lambda seed: (None, None), task=None,
                             acc=acc, rm=None, args=types.SimpleNamespace(resume=False), where={}, tracker_names=[],
                             show=False)
    assert trained == ["sft seed 0", "grpo seed 0", "sft seed 1", "grpo seed 1"]
    assert [(r["method"], r["seed"]) for r in rows] == [("sft", 0), ("sft", 1), ("grpo", 0), ("grpo", 1)]
