"""Threads against load: a workload timed idle and beside one busy process, at gcframe's choice of threads
(gcframe.tracking.threads) and at torch's default, with the ratios side by side.

    python experiments/bench_threads.py                         # compare.py --quick --methods sft from an empty
                                                                # cache (stage 1 + 8 steps), 4 runs per repeat
    python experiments/bench_threads.py --workload steps        # a short fixed workload: 40 SFT steps of the tiny Llama
    python experiments/bench_threads.py --smoke                 # the plumbing only, in seconds (no number to keep)

Run it on an otherwise idle machine: before each idle run it waits (up to --idle-wait s) for the 1-minute load to
fall below 0.5, since the previous run still shows in it. "Busy" is one spinning Python process beside the run
(`while True: pass`), started --settle s before it. Each run is a fresh process (and, for compare.py, a fresh
GCFRAME_CACHE, so stage 1 is timed too); auto is the run without OMP_NUM_THREADS or --threads, torch's default is
`--threads D` with D what torch picks in a fresh process.

What must hold (issue 44): auto is no slower than torch's default idle (auto / default near 1), and auto beside one
busy process is within 1.5x of auto idle. Output: OUT/bench_threads.json and the table printed at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from gcframe.errors import UserError, cli_entry  # noqa: E402

IDLE_BELOW = 0.5  # the 1-minute load under which the machine counts as idle


def child_env(cache: str | None = None) -> dict:
    """The environment of a timed run: without OMP_NUM_THREADS (so that gcframe or torch chooses)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    if cache:
        env["GCFRAME_CACHE"] = cache
    return env


def torch_default() -> int:
    """The thread count torch picks in a fresh process without OMP_NUM_THREADS."""
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=child_env(),
                       capture_output=True, text=True, check=True)
    return int(r.stdout.strip())


def command(workload: str, steps: int, out: Path, threads: int | None) -> list[str]:
    flag = ["--threads", str(threads)] if threads else []
    if workload == "compare":
        return [sys.executable, str(ROOT / "experiments" / "compare.py"), "--quick", "--methods", "sft",
                "--no-progress", "--out", str(out), *flag]
    return [sys.executable, str(Path(__file__).resolve()), "--work", str(steps), *flag]


def timed(cmd: list[str], cache: str | None) -> dict:
    """One run -> its wall time and the thread count it printed ('threads: N of ...')."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=child_env(cache), capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise UserError(f"the timed run failed (exit {r.returncode}): {' '.join(cmd)}: "
                        f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}")
    line = next((x for x in r.stdout.splitlines() if x.startswith("threads: ")), "")
    return {"wall_s": round(wall, 2), "threads": int(line.split()[1]) if line else None, "line": line}


def wait_idle(limit_s: float, say) -> float:
    """Wait until the 1-minute load falls below IDLE_BELOW, at most limit_s seconds -> the load then."""
    t0 = time.time()
    while (load := os.getloadavg()[0]) >= IDLE_BELOW and time.time() - t0 < limit_s:
        time.sleep(5)
    if load >= IDLE_BELOW:
        say(f"  warning: the 1-minute load is still {load:.2f} after {limit_s:.0f} s: the machine is not idle, "
            "so the idle rows are not idle")
    return load


def trial(args, condition: str, threads: int | None, i: int, say) -> dict:
    """One timed run: condition 'idle' or 'busy', threads None (auto) or torch's default count."""
    spinner = None
    load = wait_idle(args.idle_wait, say) if condition == "idle" else None
    if condition == "busy":
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(args.settle)
    cache = tempfile.mkdtemp(prefix="bench-threads-cache-") if args.workload == "compare" else None
    out = Path(args.out) / f"run-{condition}-{'auto' if threads is None else threads}-{i}"
    shutil.rmtree(out, ignore_errors=True)
    try:
        res = timed(command(args.workload, args.steps, out, threads), cache)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    row = {"condition": condition, "setting": "auto" if threads is None else "default", "repeat": i,
           "load_before": load, **res}
    say(f"  {condition:4} {row['setting']:7} repeat {i}: {res['wall_s']:.1f} s at {res['threads']} thread(s)")
    return row


def table(rows: list[dict], default: int) -> tuple[str, dict]:
    """The medians side by side and the ratios the issue asks for."""
    med = {(c, s): statistics.median(r["wall_s"] for r in rows if (r["condition"], r["setting"]) == (c, s))
           for c in ("idle", "busy") for s in ("auto", "default")}
    used = {c: sorted({r["threads"] for r in rows if (r["condition"], r["setting"]) == (c, "auto")}) for c in
            ("idle", "busy")}
    ratios = {"idle auto / default": med["idle", "auto"] / med["idle", "default"],
              "busy auto / default": med["busy", "auto"] / med["busy", "default"],
              "auto busy / idle": med["busy", "auto"] / med["idle", "auto"],
              "default busy / idle": med["busy", "default"] / med["idle", "default"]}
    lines = [f"{'':6} {'auto (threads)':>16} {f'default ({default})':>14} {'auto / default':>15}"]
    for c in ("idle", "busy"):
        t = ",".join(map(str, used[c]))
        lines.append(f"{c:6} {med[c, 'auto']:>10.1f} s ({t}) {med[c, 'default']:>12.1f} s "
                     f"{ratios[f'{c} auto / default']:>15.2f}")
    lines.append(f"{'busy / idle':<12} {ratios['auto busy / idle']:>8.2f} {ratios['default busy / idle']:>16.2f}")
    lines.append(f"must hold: idle auto / default <= 1.05: {'yes' if ratios['idle auto / default'] <= 1.05 else 'NO'}"
                 f"; auto busy / idle <= 1.5: {'yes' if ratios['auto busy / idle'] <= 1.5 else 'NO'}")
    return "\n".join(lines), {"medians_s": {f"{c} {s}": v for (c, s), v in med.items()}, "ratios": ratios,
                              "auto_threads": used}


def work(steps: int, threads_flag: int | None) -> int:
    """The short fixed workload: `steps` SFT-sized steps (forward and backward, 64 sequences of 16 tokens) of the
    default config's tiny Llama, at the threads gcframe chooses."""
    import torch

    from gcframe.config import RunConfig
    from gcframe.modeling import build_char_tokenizer, build_tiny_llama
    from gcframe.tracking import threads

    threads.setup(threads_flag)
    tok = build_char_tokenizer()
    model = build_tiny_llama(tok, RunConfig().model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, len(tok), (64, 16), generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"{steps} steps in {time.perf_counter() - t0:.2f} s")
    return 0


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1].lstrip("\n"))  # the first line is the description
    p.add_argument("--workload", choices=("compare", "steps"), default="compare",
                   help="compare: compare.py --quick --methods sft from an empty cache; steps: --steps SFT steps")
    p.add_argument("--steps", type=int, default=40, help="steps of the fixed workload (--workload steps)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each of the 4 settings (the median is shown)")
    p.add_argument("--settle", type=float, default=5.0, help="seconds the busy process spins before a busy run")
    p.add_argument("--idle-wait", type=float, default=240.0, help="at most this many seconds of waiting for an idle "
                   "machine before an idle run")
    p.add_argument("--out", default="runs/bench_threads", help="output folder (bench_threads.json)")
    p.add_argument("--smoke", action="store_true", help="the plumbing only: 2 fixed steps, no waiting (seconds; the "
                   "numbers mean nothing)")
    p.add_argument("--work", type=int, metavar="STEPS", help=argparse.SUPPRESS)  # a timed child: the fixed workload
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)  # (the child's)
    args = p.parse_args(argv)
    if args.work is not None:
        return work(args.work, args.threads)
    if args.smoke:
        args.workload, args.steps, args.repeats, args.settle, args.idle_wait = "steps", 2, 1, 0.0, 0.0
    if args.repeats < 1 or args.steps < 1:
        raise UserError("--repeats and --steps must be at least 1")
    say = lambda s: print(s, flush=True)  # noqa: E731
    Path(args.out).mkdir(parents=True, exist_ok=True)
    default = torch_default()
    say(f"{os.cpu_count()} cores, torch's default {default} thread(s); workload: "
        + ("compare.py --quick --methods sft" if args.workload == "compare" else f"{args.steps} SFT steps"))
    rows = []
    for i in range(args.repeats):
        for condition in ("idle", "busy"):
            for threads in (None, default):
                rows.append(trial(args, condition, threads, i, say))
    text, summary = table(rows, default)
    say("\n" + text)
    result = {"workload": args.workload, "steps": args.steps, "cores": os.cpu_count(), "torch_default": default,
              "smoke": args.smoke, "runs": rows, **summary}
    (Path(args.out) / "bench_threads.json").write_text(json.dumps(result, indent=1) + "\n")
    say(f"\n{Path(args.out) / 'bench_threads.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
