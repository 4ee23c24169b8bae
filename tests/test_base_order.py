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
