"""train.pipeline (gcframe.offpolicy.pipeline): the sampler in a process of its own, k batches ahead of the learner.
It generates the staleness dial's own batches, so a pipelined run logs the simulated run's metrics, samples and
weights exactly (one machine, one thread each); its checkpoints resume either way; what it cannot run is refused
in one line (the config's cases with the other off-policy options: tests/test_offpolicy.py's BAD)."""
from __future__ import annotations

import pytest
import torch

from gcframe.tracking.log import read_jsonl
from tests.test_offpolicy import rewards, trainer  # noqa: F401 - the fixture by rule, the trainer at a large rate


def _rows(run) -> list[dict]:
    """metrics.jsonl without the wall-clock columns (time_*, peak memory): everything else must be equal."""
    return [{k: v for k, v in r.items() if not k.startswith(("time", "peak_"))} for r in read_jsonl(run / "metrics.jsonl")]


@pytest.mark.parametrize("k", [1, 3])
def test_the_pipelined_run_is_the_staleness_dials_run(tiny_base, tmp_path, rewards, k):  # noqa: F811
    """Every logged number (loss, rewards, KL(μ‖π_old), the correction's counts, evaluations), the logged samples
    and the final weights equal the simulated dial's; the sampler process is gone afterwards."""
    runs = {}
    for pipelined in (False, True):
        tr = trainer(tiny_base, tmp_path, name=f"p{int(pipelined)}", steps=6, staleness=k, correction="tis",
                     minibatches=2, pipeline=pipelined)
        tr.tcfg.sample_every = 1
        tr.fit()
        runs[pipelined] = tr
        if pipelined:
            assert tr.pipe.proc is None  # closed and joined
    sim, pipe = (_rows(tmp_path / f"p{i}") for i in (0, 1))
    assert len(sim) == len(pipe) and sim == pipe
    trained = [r for r in sim if "loss" in r]
    assert [r["sampler_lag"] for r in trained] == [min(s, k) for s in range(6)]
    assert max(r["mismatch_kl_k3"] for r in trained) > 1e-4  # off-policy data, not a trivial equality
    assert read_jsonl(tmp_path / "p0" / "samples.jsonl") == read_jsonl(tmp_path / "p1" / "samples.jsonl")
    a, b = (dict(runs[i].ctx.policy.named_parameters()) for i in (False, True))
    assert all(torch.equal(a[n], b[n]) for n in a)
    timed = [r for r in read_jsonl(tmp_path / "p1" / "metrics.jsonl") if "loss" in r]
    assert all(r["time_sampler_generate"] > 0 for r in timed)  # the sampler's own seconds, logged beside the wait


def test_a_pipelined_checkpoint_resumes_with_or_without_the_pipeline(tiny_base, tmp_path, rewards,  # noqa: F811
                                                                     monkeypatch):
    """A checkpoint holds the sampler process's random state and data order (adopted with each batch), so a run
    killed at step 4 resumes from its step-2 checkpoint, pipelined or simulated, into the uninterrupted run's rows."""
    from gcframe.trainer import Trainer

    def run(name, pipelined):
        tr = trainer(tiny_base, tmp_path, name=name, steps=6, staleness=2, correction="mis", pipeline=pipelined)
        tr.tcfg.checkpoint_every = 2
        return tr

    run("full", False).fit()
    step = Trainer.train_step

    def killed_at_3(self, s):
        if s == 3:
            raise KeyboardInterrupt
        return step(self, s)

    from gcframe.errors import on_sigterm

    on_sigterm()  # as after any command run in this process: the sampler must still stop when the learner stops
    for name, again in (("a", True), ("b", False)):
        monkeypatch.setattr(Trainer, "train_step", killed_at_3)
        with pytest.raises(KeyboardInterrupt):
            run(name, True).fit()
        monkeypatch.setattr(Trainer, "train_step", step)
        run(name, again).fit(resume=True)
        assert _rows(tmp_path / name) == _rows(tmp_path / "full"), name


def test_a_pipeline_on_several_learner_processes_is_refused(tiny_base, tmp_path, rewards, monkeypatch):  # noqa: F811
    from accelerate import Accelerator

    from gcframe.errors import UserError

    monkeypatch.setattr(Accelerator, "num_processes", property(lambda self: 2))
    with pytest.raises(UserError, match="one sampler beside one learner process, and this run has 2"):
        trainer(tiny_base, tmp_path, staleness=1, pipeline=True)


def test_a_failure_in_the_sampler_process_is_raised_by_the_learner(tiny_base, tmp_path, rewards,  # noqa: F811
                                                                    monkeypatch):
    """A batch the sampler did not generate (here demonstrations) is refused in the sampler process, and the
    learner raises that one line; the process is closed."""
    from gcframe.errors import UserError
    from methods.grpo import GRPO

    from gcframe.errors import on_sigterm

    on_sigterm()  # a SIGTERM handler inherited by the sampler must not keep it alive when the learner stops it
    monkeypatch.setattr(GRPO, "collect", lambda self, step: self.ctx.demonstrations(4))
    tr = trainer(tiny_base, tmp_path, staleness=1, pipeline=True)
    with pytest.raises(UserError, match="built its batch elsewhere than from the sampler"):
        tr.fit()
    assert tr.pipe.proc is None


def test_messages_larger_than_a_pipes_buffer_never_deadlock(tiny_base, tmp_path, rewards, monkeypatch):  # noqa: F811
    """Every message padded to 1 MB (a real model's weights and batches are larger than a pipe's 64 KB buffer): the
    learner's weights and the sampler's batches cross without both sides blocked on a send, at k = 4."""
    from gcframe.offpolicy import pipeline

    send, recv = pipeline._send, pipeline._recv
    monkeypatch.setattr(pipeline, "_send", lambda conn, obj: send(conn, (obj, b"x" * 2**20)))
    monkeypatch.setattr(pipeline, "_recv", lambda conn: recv(conn)[0])
    tr = trainer(tiny_base, tmp_path, name="big", steps=8, staleness=4, pipeline=True)
    tr.fit()
    assert [r["sampler_lag"] for r in read_jsonl(tmp_path / "big" / "metrics.jsonl") if "loss" in r] == \
        [min(s, 4) for s in range(8)]


# Runs compare.py, but at the start of step 3 (after the checkpoint of step 2) the learner kills its own sampler
# process with SIGKILL, as `kill -9` or the kernel's out-of-memory killer would, and waits until it is gone.
KILL_SAMPLER = """
import os, runpy, signal, sys
from gcframe.trainer import Trainer
_train_step = Trainer.train_step
def train_step(self, step):
    if step == 3 and self.pipe is not None:  # (stage 1 trains the SFT base with no sampler process)
        os.kill(self.pipe.proc.pid, signal.SIGKILL)
        self.pipe.proc.join(30)
    return _train_step(self, step)
Trainer.train_step = train_step
sys.argv[0] = {compare!r}
runpy.run_path({compare!r}, run_name="__main__")
"""


def test_a_killed_sampler_process_is_one_line_with_the_resume_command(tmp_path):
    """As the user meets it: one line naming the sampler process and its signal, exit 2, the checkpoint of step 2
    kept, and the --resume line it prints finishes the run. The learner cannot wait on a dead sampler (a closed pipe
    reads EOF and refuses a write at once), and each command runs under run_cli's time limit."""
    import shlex

    from gcframe.tracking import checkpoint
    from tests.test_bad_input import assert_one_line_refusal
    from tests.test_resume import COMPARE, TINY_CONFIG, run_cli, write_config

    cfg = write_config(tmp_path / "tiny.yaml", {**TINY_CONFIG, "train": {
        **TINY_CONFIG["train"], "steps": 6, "staleness": 1, "pipeline": True}})
    script, out = tmp_path / "kill_sampler.py", tmp_path / "out"
    script.write_text(KILL_SAMPLER.format(compare=str(COMPARE)))
    r = run_cli("--config", cfg, "--methods", "grpo", "--seeds", "0", "--no-progress", "--out", out, script=script)
    assert_one_line_refusal(r, ["the sampler process (train.pipeline) ended before batch ",
                                "killed by signal 9 (SIGKILL)", "grpo seed 0's checkpoint of step 2",
                                f"continue with: python {shlex.quote(str(COMPARE))} --resume "
                                f"{shlex.quote(str(out))}"])
    assert checkpoint.latest(out / "grpo" / "seed0").name == "step-000002"
    resumed = run_cli("--resume", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert max(r["step"] for r in read_jsonl(out / "grpo" / "seed0" / "metrics.jsonl")) == 6
