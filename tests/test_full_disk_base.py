"""A full disk while stage 1 writes the SFT base into the cache: one line naming the disk, nothing half-written left
in the cache (no tmp folder, no base, no claim), and the next run trains it again."""
import pytest

from gcframe import pipeline
from gcframe.config import from_dict
from gcframe.errors import UserError

TINY = {"task": {"operands": 2, "digits": 2, "n_demos": 64, "n_heldout": 20},
        "model": {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32},
        "sft_base": {"steps": 4, "batch_size": 16, "warmup_steps": 1, "eval_every": 2, "patience": 2},
        "train": {"eval_size": 20}}


def test_a_full_disk_while_the_base_is_saved_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    from accelerate import Accelerator

    import gcframe.modeling

    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path / "cache"))
    cfg, task = pipeline.prepare(from_dict(TINY))
    real = gcframe.modeling.save_model_and_tokenizer

    def full(*a, **k):  # safetensors' own error on a full disk: no OSError, the OS error only in its text
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(gcframe.modeling, "save_model_and_tokenizer", full)
    acc = Accelerator(cpu=True)
    with pytest.raises(UserError, match=r"^the disk at .* is full \(.*\) while the SFT base was written to .*: free "
                                        r"space on it, then run the command again \(the base is trained again"):
        pipeline.sft_base(cfg, task, acc, show_progress=False)
    assert sorted(p.name for p in (tmp_path / "cache" / "sft_base").iterdir()) == []  # no tmp, base or claim
    monkeypatch.setattr(gcframe.modeling, "save_model_and_tokenizer", real)
    d, info = pipeline.sft_base(cfg, task, acc, show_progress=False)  # room again: trained and cached
    assert (d / "base_info.json").is_file() and 0 <= info["eval_accuracy"] <= 1


def test_another_failure_while_the_base_is_saved_is_not_called_a_full_disk(tmp_path, monkeypatch):
    from accelerate import Accelerator

    import gcframe.modeling

    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path / "cache"))
    cfg, task = pipeline.prepare(from_dict(TINY))

    def broken(*a, **k):
        raise RuntimeError("some other failure")

    monkeypatch.setattr(gcframe.modeling, "save_model_and_tokenizer", broken)
    with pytest.raises(RuntimeError, match="some other failure"):
        pipeline.sft_base(cfg, task, Accelerator(cpu=True), show_progress=False)
    assert sorted(p.name for p in (tmp_path / "cache" / "sft_base").iterdir()) == []
