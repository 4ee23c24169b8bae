"""The trainer carved into its parts (issue 76.5: gcframe/train/metrics.py, gcframe/train/evaluation.py) changed no
number: a fixed-seed run of each method family (SFT, RFT, PPO, GRPO, DPO, OPD, the staleness dial with a correction,
the pipelined sampler, and a run that reads its step-0 evaluation from another run's) logs the metrics.jsonl rows,
samples.jsonl and problems.jsonl, and names the step-0 evaluation file, that the trainer before the carving did.

tests/carving_identity.json holds them, written by the pre-carving trainer (`python -m tests.test_carving_identity
--write`, 3 steps a family on the 32-wide tiny Llama, one thread). Wall-clock columns (time_*, peak_*) are left out;
every other value must be equal, in the same order. Float rounding is the machine's: on another torch version or
CPU the golden does not apply, and the test says so and skips.
"""
from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

import pytest
import torch

GOLDEN = Path(__file__).with_name("carving_identity.json")
STEPS = 3
FAMILIES = {  # name -> (method, train options); every run evaluates at step 2 and at its last step (k = 2)
    "sft": ("sft", {}),
    "rft": ("rft", {}),
    "ppo": ("ppo", {"micro_batch_size": 8}),  # two micro-batches: accumulation, the critic's own update
    "grpo": ("grpo", {"minibatches": 2}),  # π_old recomputed, the mismatch logged
    "dpo": ("dpo", {}),
    "opd": ("opd", {}),
    "grpo_stale": ("grpo", {"staleness": 1, "correction": "tis"}),
    "grpo_pipeline": ("grpo", {"staleness": 1, "correction": "tis", "pipeline": True}),
}


def environment() -> dict:
    """What the golden's float rounding depends on."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"torch": torch.__version__, "cpu": cpu, "python": platform.python_version()}


def _score(batch, task, tok, source="verifier", reward_model=None):
    """Rewards by rule (the untrained tiny model is never right): 1 for a completion of odd length (tests/
    test_offpolicy.py's rewards)."""
    r = torch.tensor([float(len(t["completion"]) % 2) for t in batch.texts])
    batch.data["rewards"], batch.data["correct"] = r, r.clone()
    return batch


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else ""


def bases(root: Path) -> tuple[str, str]:
    """The tiny base (experiments.bench_common's) and a teacher of the same shape and tokenizer, another seed."""
    from experiments.bench_common import build_base
    from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama, save_model_and_tokenizer
    from tests.test_offpolicy import SIZE

    base, teacher = root / "base", root / "teacher"
    build_base(SIZE, str(base))
    tok = build_char_tokenizer()
    tok.bos_token = None  # as build_base's
    mc = ModelConfig(SIZE.hidden_size, SIZE.num_layers, SIZE.num_heads, SIZE.intermediate_size)
    save_model_and_tokenizer(build_tiny_llama(tok, mc, seed=1), tok, str(teacher))
    return str(base), str(teacher)


def run_family(name: str, base: str, teacher: str, out: Path, step0: Path) -> dict:
    """One family's fixed-seed run -> its rows without wall-clock columns, the digests of its samples and
    per-problem outcomes, and the step-0 evaluation files in `step0`."""
    import gcframe.context
    from experiments.bench_common import make_trainer
    from tests.test_offpolicy import LR, SIZE

    method, train = FAMILIES[name]
    opts = {"opd": {"teacher": teacher}} if method == "opd" else None
    score, gcframe.context.score = gcframe.context.score, _score
    try:
        tr = make_trainer(method, SIZE, base, str(out / name), steps=STEPS, method_opts=opts, train_opts=train)
        tr.tcfg.eval_every, tr.tcfg.eval_k, tr.tcfg.sample_every, tr.step0_evals = 2, 2, 1, step0  # (run_config: 0)
        for group in tr.opt.param_groups:  # tests/test_offpolicy.py's rate: three steps move the tiny policy
            group["lr"] = LR
        tr.sched.base_lrs = [LR]
        tr.fit()
    finally:
        gcframe.context.score = score
    rows = [{k: v for k, v in r.items() if not k.startswith(("time", "peak_"))} for r in _lines(out / name /
                                                                                                  "metrics.jsonl")]
    return {"rows": rows, "samples": _digest(out / name / "samples.jsonl"),
            "problems": _digest(out / name / "problems.jsonl"), "step0": sorted(p.name for p in step0.iterdir())}


def all_families(root: Path) -> dict:
    """Every family in its own step-0 folder, then GRPO again in GRPO's: its step 0 read back (eval_shared)."""
    torch.set_num_threads(1)
    base, teacher = bases(root)
    got = {name: run_family(name, base, teacher, root / "runs", root / f"step0_{name}") for name in FAMILIES}
    got["grpo_shared_step0"] = run_family("grpo", base, teacher, root / "again", root / "step0_grpo")
    return got


@pytest.fixture(scope="module")
def golden() -> dict:
    data = json.loads(GOLDEN.read_text())
    if data["environment"] != environment():
        pytest.skip(f"tests/carving_identity.json was written on {data['environment']}, this is {environment()}: "
                    "its float rounding need not repeat here")
    return data["families"]


@pytest.fixture(scope="module")
def families(golden, tmp_path_factory) -> dict:
    return all_families(tmp_path_factory.mktemp("carving"))


@pytest.mark.parametrize("name", [*FAMILIES, "grpo_shared_step0"])
def test_each_family_logs_what_it_logged_before_the_carving(golden, families, name):
    want, got = golden[name], families[name]
    assert got["rows"] == want["rows"]
    assert [list(r) for r in got["rows"]] == [list(r) for r in want["rows"]]  # the columns in the same order
    assert (got["samples"], got["problems"], got["step0"]) == (want["samples"], want["problems"], want["step0"])


def test_the_golden_is_not_trivial(golden):
    """Every family trained and evaluated; the stale runs were off-policy; the pipeline logged the dial's rows;
    the second GRPO run read its step 0 back."""
    for name in FAMILIES:
        rows = golden[name]["rows"]
        assert sum("loss" in r for r in rows) == STEPS and sum("eval_accuracy" in r for r in rows) == 3, name
    assert any(r.get("mismatch_kl_k3", 0) > 0 for r in golden["grpo_stale"]["rows"])
    assert golden["grpo_pipeline"]["rows"] == golden["grpo_stale"]["rows"]
    assert golden["grpo_shared_step0"]["rows"][0]["eval_shared"] == 1


if __name__ == "__main__":  # python -m tests.test_carving_identity --write   (or --check: print what differs)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        got = all_families(Path(d))
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps({"environment": environment(), "steps": STEPS, "families": got}, indent=1) + "\n")
        print(f"wrote {GOLDEN}")
    else:
        want = json.loads(GOLDEN.read_text())["families"]
        for name in got:
            print(name, "same" if got[name] == want[name] else "DIFFERENT")
