"""Regenerate a committed result: run its experiment, then copy what it found into results/<name>/.

    python experiments/reproduce.py --list                  # the results and the command behind each
    python experiments/reproduce.py default                 # the default comparison, every method, 5 seeds
    python experiments/reproduce.py default --seeds 5-12    # grow the committed result by 8 new test seeds
    python experiments/reproduce.py default --check 0       # a committed seed again, beside results/ (compare them)
    python experiments/reproduce.py default --quick         # a smoke run into runs/reproduce-quick (results/ untouched)
    python experiments/reproduce.py --all                   # everything, in the order listed
    python experiments/reproduce.py default --backend ray --address auto   # the cells on a Ray cluster
    python -m analysis.results                              # re-render the README's and docs' tables from results/

Resumable: the same command again skips finished seeds and continues a killed one from its checkpoint.
Planned: a compare result whose config declares families with min_effect prints its plan first (analysis.plan: the
test seeds each family needs, family-wise) and is refused when its test seeds cannot decide one, unless
--underpowered; `--seeds A-B` then grows it by seeds, each merged into results/<name>/ as it finishes, across sessions
and machines (experiments/grow.py): commit results/<name>/ after each seed, and the same command continues.
Parallel: start the same command in two shells, one thread each (OMP_NUM_THREADS=1). A comparison's processes
split its method x seed cells by compare.py's claim files (gcframe.tracking.claims); whichever finishes last writes
results/<name>/.

A result folder holds what made it and what it found:
    results/<name>/env.json      the environment (gcframe.tracking.env): versions, CPU, threads, commit, command
    results/<name>/config.yaml   the configuration
    results/<name>/*.csv         the numbers (summary.csv: one row per method and seed; table.csv: the table shown)
    results/<name>/*.png         the figure(s) the README or the docs show
Runs themselves (metrics, samples, models) stay under runs/reproduce/<name>/ and are not committed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from gcframe.errors import UserError, cli_entry  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "experiments" / "configs"


@dataclass
class Recipe:
    """How one result is made. kind 'compare': experiments/compare.py over every seed; 'command': one script."""

    doc: str
    kind: str
    config: str = ""
    """compare: the config file (experiments/configs/...)."""
    seeds: list = field(default_factory=lambda: [0])
    """compare: the seeds of the committed result."""
    args: list = field(default_factory=list)
    """compare: further compare.py arguments (e.g. the --methods of a sweep)."""
    command: list = field(default_factory=list)
    """command: the script and its arguments; OUT is replaced by the run folder."""
    quick: list = field(default_factory=lambda: ["--quick"])
    """Arguments that make the smoke version."""
    keep: list = field(default_factory=list)
    """command: files (globs, relative to the run folder) copied into results/<name>/."""
    base_run: dict = field(default_factory=dict)
    """compare: a comparison made first whose final model every run of this one starts from (the seed's pipeline:
    an SFT stage, then RL from it): {config, method, seed}; its runs go to runs/<name>-<method>/, the model is passed
    as --model RUNS/<method>/seed<seed>/final, and its tables go into results/<name>/ under the prefix <method>_stage_.
    Optional "band": (low, high), the greedy accuracy the stage's final model must reach, and "room": the least
    pass@k − greedy it must leave, both on "check": (N, k), N validation problems with k samples (else its last
    evaluation); a stage outside them stops the recipe before anything runs from it."""
    rescore: list = field(default_factory=list)
    """compare: `python -m gcframe.evaluate` arguments run on the finished comparison (e.g. --problems 500): its final
    models scored on more held-out problems than its training evaluations, for the paired comparison."""


DEFAULT_METHODS = ("sft,rft,online_rft,online_rft@filled,ppo,grpo,grpo_ps,dpo,rloo,sft_filtered,sft_clean,"
                   "dr_grpo,dapo,gspo,cispo,sapo,reinforce_pp,reinforce_pp_baseline,remax,gpg,"
                   "ipo,simpo,kto,orpo,online_dpo")
"""The default result's labels: the seed's eight methods and online_rft@filled, the intervention that gives online RFT
as many correct samples per step as RFT; SFT given the checker's information (sft_filtered, sft_clean); and every
other registered method (docs/results/default.md)."""

SEED_METHODS = "sft,rft,online_rft,online_rft@filled,ppo,grpo,grpo_ps,dpo,rloo"
"""The seed's eight methods and the online-RFT intervention: the labels of results/default_scarce."""

SMOLLM2_SLIP_STAGE = {"config": "smollm2_slip_sft.yaml", "method": "sft", "seed": 0, "band": (0.2, 0.6),
                      "room": 0.10, "check": (500, 4)}
"""smollm2_slip's SFT stage: SmolLM2 fine-tuned on the slipping annotator, refused outside 0.2-0.6 greedy or with
less than 0.10 of pass@4 above it on 500 validation problems."""

OFF_POLICY_QUICK = ("grpo,grpo@k16,grpo@k16_tis,dapo@k16_seq_mis,ppo@k16_naive,cispo@k4_bf16,gspo@k1,sapo@bf16,"
                    "grpo@bf16_tis,reinforce_pp@k4")
"""off_policy's smoke labels: every loss, every staleness, each correction of the grid and the bfloat16 sampler, over
20 steps (k = 16 must be below the run's steps)."""

RECIPES = {
    "default": Recipe("the default comparison: each method's rate tuned on validation (4 rates, 2 seeds), then "
                      "every method and the online-RFT intervention at their rates, 200 steps, 5 seeds, each from "
                      "its own finished SFT base, final models scored on the 500 test problems", "compare",
                      "default.yaml", [0, 1, 2, 3, 4],
                      args=["--tune", "--methods", DEFAULT_METHODS],
                      quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "sft,grpo"],
                      rescore=["--problems", "500", "--k", "8", "--base"]),
    "default_scarce": Recipe(
        "the default comparison's design from the base finished on 600 correct demonstrations (configs/"
        "scarce_demos.yaml): each method's rate tuned on validation, 8 methods and the online-RFT intervention, "
        "200 steps, 3 seeds, final models scored on the 500 test problems", "compare", "scarce_demos.yaml", [0, 1, 2],
        args=["--tune", "--methods", SEED_METHODS],
        quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "sft,grpo"],
        rescore=["--problems", "500", "--k", "8", "--base"]),
    "default_long": Recipe(
        "the §5.2 methods and the intervention at their tuned rates to 1,000 steps, 3 seeds, 10 evaluations evenly "
        "spaced in log-steps on validation, from the base finished on 600 correct demonstrations: curves to fit "
        "(analysis.curves)", "compare", "scarce_demos.yaml", [0, 1, 2],
        args=["--methods", "sft,rft,online_rft,online_rft@filled,grpo", "--steps", "1000"],
        quick=["--quick", "--methods", "sft,grpo"], rescore=["--problems", "500", "--k", "8", "--base"]),
    "default_mid_curve": Recipe(
        "the contrast: the 8 methods at one shared rate (5e-5) from the mid-curve SFT base, 100 steps, 3 seeds, "
        "final models on the 500 test problems", "compare", "mid_curve_base.yaml", [0, 1, 2],
        args=["--methods", "sft,rft,online_rft,ppo,grpo,grpo_ps,dpo,rloo"],
        quick=["--quick", "--methods", "sft,grpo"]),
    "overoptimisation": Recipe("GRPO on the learned reward r_φ at three β: proxy against gold", "compare",
                               "overoptimisation.yaml", [0, 1]),
    "smollm2": Recipe("six methods on SmolLM2-135M-Instruct (LoRA), 2 seeds, final models on 500 problems (ppo's "
                      "cells cost 5x the others', measured in smollm2_trade; grpo_ps is grpo but one token here)",
                      "compare", "smollm2_all.yaml", [0, 1],
                      args=["--methods", "sft,rft,online_rft,dpo,grpo,rloo"],
                      quick=["--quick", "--methods", "sft,grpo"], rescore=["--problems", "500"]),
    "smollm2_slip": Recipe(
        "the default's design on SmolLM2-135M-Instruct: an SFT model (LoRA) finished on a slipping annotator's answers "
        "(smollm2_slip_sft.yaml), then continued SFT, SFT on the demonstrations the checker accepts, RFT, online RFT, "
        "GRPO and Dr. GRPO from it, each rate tuned on validation (3 rates, 32 steps), 3 seeds, final models and the "
        "SFT model on the 500 test problems (greedy, 4 samples); sized to 2.5 h of two one-thread processes (wall.csv)",
        "compare", "smollm2_slip.yaml", [0, 1, 2],
        args=["--tune"], quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "sft,grpo"],
        base_run=SMOLLM2_SLIP_STAGE, rescore=["--problems", "500", "--k", "4", "--base"]),
    "smollm2_slip_long": Recipe(
        "smollm2_slip at 128 steps until the curves flatten: SFT on the accepted demonstrations, RFT, online RFT and "
        "GRPO, each rate tuned on the 500 validation problems over 2 seeds at 128 steps (extended until interior), 8 "
        "evaluations per run, 3 seeds, final models and the SFT model on the 500 test problems; past one session: "
        "resumable", "compare", "smollm2_slip_long.yaml", [0, 1, 2],
        args=["--tune"], quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "sft_filtered,grpo"],
        base_run=SMOLLM2_SLIP_STAGE, rescore=["--problems", "500", "--k", "4", "--base"]),
    "smollm2_slip_dpo": Recipe(
        "smollm2_slip with DPO at β 0.1 and 1 beside its six methods (a preference set of the SFT model's samples "
        "judged by the checker), each rate tuned: past 2.5 h of two processes", "compare", "smollm2_slip.yaml",
        [0, 1, 2], args=["--tune", "--methods", "sft,sft_filtered,rft,online_rft,grpo,dr_grpo,dpo,dpo@beta1"],
        quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "dpo,dpo@beta1"], base_run=SMOLLM2_SLIP_STAGE,
        rescore=["--problems", "500", "--k", "4", "--base"]),
    "smollm2_slip_stage_check": Recipe(
        "smollm2_slip's SFT stage from two other starts (seeds 1 and 2: another LoRA initialisation and order of "
        "demonstrations), scored on the same 500 test problems: how far the finished SFT model moves with its start",
        "compare", "smollm2_slip_sft.yaml", [1, 2], args=["--methods", "sft"], quick=["--quick"],
        rescore=["--problems", "500", "--k", "4"]),
    "smollm2_lr": Recipe("the one-seed learning-rate sweep behind smollm2_all.yaml's per-method rates", "compare",
                         "smollm2_all.yaml", [0],
                         args=["--methods", "ppo@lr5e-4,rft@lr5e-4,dpo@lr5e-4,dpo@lr1e-3,sft@lr5e-4,sft@lr1e-3,"
                               "online_rft@lr5e-4,online_rft@lr1e-3,grpo@lr5e-4,grpo@lr1e-3,rloo@lr5e-4,rloo@lr1e-3"],
                         quick=["--quick", "--methods", "sft@lr5e-4,grpo@lr5e-4"]),
    "smollm2_long": Recipe("the methods still rising at step 24 of the SmolLM2 table, on to 60 steps, seed 0",
                           "compare", "smollm2_all.yaml", [0],
                           args=["--methods", "online_rft@60,dpo@60,grpo@60,grpo_ps@60,rloo@60"],
                           quick=["--quick", "--methods", "online_rft@60,grpo@60"]),
    "smollm2_trade": Recipe("the seed's trade on SmolLM2: PPO's critic against GRPO at G = 4, 8, 16, equal train time",
                            "compare", "smollm2_trade.yaml", [0, 1],
                            quick=["--quick", "--methods", "ppo@g1,grpo@g4"]),
    "word_problems": Recipe("multi-step word problems (GSM8K format) on SmolLM2: grpo, ppo, online_rft, sft",
                            "compare", "smollm2_word_problems.yaml", [0, 1],
                            quick=["--quick", "--methods", "sft,grpo"]),
    "word_problems_pipeline": Recipe(
        "the seed's pipeline on SmolLM2 word problems: SFT, then 8 methods (grpo with dynamic sampling among them) "
        "from the SFT model, 2 seeds, final models and the SFT model on 200 problems", "compare",
        "word_problems_pipeline.yaml", [0, 1],
        quick=["--quick", "--methods", "grpo,grpo@ds"],
        base_run={"config": "word_problems_sft.yaml", "method": "sft", "seed": 0},
        rescore=["--problems", "200", "--base"]),
    "base_stability_finished": Recipe(
        "the default's finished SFT base under rounding: its whole schedule, the best evaluation on validation, on "
        "demonstrations with slips, 1e-7 perturbations, 1 and 2 threads, each base's pass@8", "command",
        command=["experiments/base_stability.py", "--finished", "--only", "slipped demonstrations", "--out", "OUT"],
        keep=["curves.csv", "stability.csv", "headline.md", "stability.png", "env_*.json"]),
    "base_stability_scarce": Recipe(
        "the SFT base finished on 600 correct demonstrations (configs/scarce_demos.yaml) under rounding: early "
        "stopping on validation, 1e-7 perturbations, 1 and 2 threads", "command",
        command=["experiments/base_stability.py", "--finished", "--only", "finished base", "--out", "OUT"],
        keep=["curves.csv", "stability.csv", "headline.md", "stability.png", "env_*.json"]),
    "base_levers": Recipe(
        "what was tried for a finished base with room that rounding does not move: the default's stage 1 with fewer "
        "demonstrations or harder problems, greedy and pass@8 on test, 1e-7 perturbations", "command",
        command=["experiments/base_stability.py", "--levers", "--out", "OUT"],
        keep=["curves.csv", "stability.csv", "headline.md", "stability.png", "env_*.json"]),
    "base_stability": Recipe(
        "the SFT base under rounding: stage 1 with weight perturbations, float64 and two thread counts", "command",
        command=["experiments/base_stability.py", "--study", "--out", "OUT"],
        keep=["curves.csv", "stability.csv", "headline.md", "stability.png", "env_*.json"]),
    "estimators": Recipe("the estimator lab: baselines, std scaling and KL estimators at fixed policies", "command",
                         command=["experiments/estimators.py", "--out", "OUT", "--overwrite"],
                         keep=["*.csv", "lab.json", "report/*.png", "report/*.csv"]),
    "atlas": Recipe("the update atlas: each method's step against the true policy gradient", "command",
                    command=["experiments/atlas.py", "--out", "OUT", "--overwrite"],
                    keep=["atlas.csv", "atlas_table.csv", "cosines.csv", "g_star.csv", "critic_distance.csv",
                          "critic_length.csv", "atlas.json", "report/atlas_heatmap.png", "report/atlas_cosines.png",
                          "report/atlas_critic.png"]),
    "sweep_5_2": Recipe("DeepSeekMath §5.2 at CPU scale: difficulty x length x method x seed", "command",
                        command=["experiments/sweep_5_2.py", "--out", "OUT"],
                        keep=["sweep_report/*.csv", "sweep_report/*.png", "sweep.yaml"]),
    "sweep_5_2_g16": Recipe("the §5.2 map's follow-up: GRPO against online RFT at G = 16, B = 2, hard level, 3 seeds",
                            "command", command=["experiments/sweep_5_2.py", "--config",
                                                "experiments/configs/sweep_5_2_g16.yaml", "--levels", "hard",
                                                "--seeds", "0,1,2", "--out", "OUT"],
                            keep=["sweep_report/*.csv", "sweep_report/*.png", "sweep.yaml"]),
    "paired_coverage": Recipe("the paired interval's coverage by simulation at today's designs (binary outcomes at the "
                              "median components of the default's and smollm2_slip's pairs; seeds' share of Var(D) "
                              "0-0.9; S = 2, 3, 5; P = 500) and the published verdicts that dropping the seed term "
                              "would decide otherwise", "command",
                              command=["experiments/paired_coverage.py", "--out", "OUT/coverage.csv"],
                              quick=["--sims", "50"], keep=["coverage.csv", "components.csv", "verdicts.csv"]),
    "paired_size": Recipe("the paired tests' real size at Holm's levels (α/m, m = 1-25) and their power: five tests on "
                          "binary outcomes under each of four results' fitted components, a stable arm beside a "
                          "seed-variable one and two skewed near-ceiling nulls, S = 3, 5, 10, 20, P = 500, 20,000 "
                          "experiments a cell", "command",
                          command=["experiments/paired_size.py", "--out", "OUT"], quick=["--sims", "200"],
                          keep=["size.csv", "power.csv", "generators.csv", "table.csv"]),
    "rft_vs_online": Recipe(
        "DeepSeekMath §5.2.1 in one design: RFT, online RFT and @filled, each rate tuned at 1,000 steps (2 seeds), and "
        "the controls at their parent's rate (RFT's pool sampled afresh, RFT thinned, @filled on fixed prompts, @filled "
        "at online RFT's rate, RFT at online RFT's rate), 3 seeds from the default's bases, test problems at steps 200-1,000 in the same runs "
        "(analysis.interaction)", "compare", "rft_vs_online.yaml",
        [0, 1, 2], args=["--tune"], quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "rft,online_rft"]),
    "off_policy": Recipe(
        "off-policy RL on the one engine: grpo, dapo, cispo, gspo, sapo, ppo and reinforce_pp with the sampler k = 0, 1, "
        "4, 16 steps behind the learner, at k = 16 with none, token TIS, sequence masked IS and μ as π_old, and a "
        "bfloat16 sampler at k = 0 and 4 (GRPO's also with token TIS at k = 0); the default's bases and design, each "
        "loss at its rate tuned at k = 0 in results/default (reused, not retuned), 3 seeds, the 500 test problems at "
        "steps 50-200 in the same runs; sized to 2.3 h of two one-thread processes (experiments/configs/off_policy.yaml)",
        "compare",
        "off_policy.yaml", [0, 1, 2],
        quick=["--quick", "--steps", "20", "--methods", OFF_POLICY_QUICK]),
    "distillation": Recipe(
        "a teacher beside the checker: on-policy distillation (opd) and SFT on the teacher's completions (sft_teacher), "
        "the teacher the clean annotator's stage 1 of each seed (teacher: clean_base), against sft_filtered, sft_clean, "
        "dapo, reinforce_pp and ppo; every arm tuned at the default's budget on seeds 0 and 1, the findings on test "
        "seeds 2-19 (the plan's, analysis.plan) from the default's bases, the 500 test problems "
        "(experiments/configs/distillation.yaml); grows by --seeds", "compare",
        "distillation.yaml", list(range(20)), args=["--tune"],
        quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "opd,sft_teacher,sft_filtered"]),
    "new_losses": Recipe(
        "the losses that join the default's table when it is next re-made: dual-clip PPO, Lite PPO, Kimi's quadratic "
        "penalty, DPPO, GMPO, Clip-Cov, KL-Cov, MaxRL and RPO, each against the method it modifies (PPO, GRPO, DPO) and "
        "sft_filtered; every arm tuned at the default's budget on seeds 0 and 1, the findings on test seeds 2-9 (the "
        "plan's for over_parent, analysis.plan) from the default's bases, the 500 test problems "
        "(experiments/configs/new_losses.yaml); grows by --seeds", "compare", "new_losses.yaml", list(range(10)),
        args=["--tune"], quick=["--quick", "--tune", "1e-4,1e-3", "--methods", "dual_clip_ppo,gmpo,rpo,grpo"]),
    "slip_sweep": Recipe("the annotator's slip rate as a dial: the default comparison at slip 0, 0.4, 0.8 and 0.9 "
                         "(sft, sft_filtered and three RL methods, 3 seeds, a base per seed) and each RL method's "
                         "greedy gain over the better SFT baseline", "command",
                         command=["experiments/slip_sweep.py", "--out", "OUT"],
                         keep=["slip.csv", "levels.csv", "table.csv", "slip.png", "slip*_problems.csv.gz",
                               "slip*_base_curve.csv"]),
    "benchmark": Recipe("speed and memory against the essential passes and TRL (toy sizes)", "command",
                        command=["experiments/benchmark.py", "--out", "OUT/bench.json"],
                        keep=["bench.json", "steps.csv", "ratios.csv", "memory.csv"]),
    "ray_overhead": Recipe(
        "the Ray backend's cost against the local two-process path: grids of 4 and 12 runs, wall and CPU time, "
        "extrapolated to the default's grid", "command", command=["experiments/benchmark_ray.py", "--out", "OUT"],
        quick=["--sizes", "2,3", "--steps", "3"], keep=["wall.csv", "overhead.csv"]),
    "pipeline": Recipe(
        "train.pipeline against synchronous training on the same two cores: GRPO at one and two threads, the staleness "
        "dial and the pipeline at k = 1 and 4, 60 steps, 2 repeats interleaved", "command",
        command=["experiments/benchmark_pipeline.py", "--out", "OUT"],
        quick=["--steps", "5", "--repeats", "1", "--staleness", "1", "--quick"], keep=["pipeline.csv", "steps.csv"]),
    "benchmark_memory": Recipe("GRPO's and PPO's peak memory at the compute size, with and without micro-batches "
                               "(peak RSS does not depend on the machine's load)", "command",
                               command=["experiments/benchmark.py", "--no-trl", "--sizes", "compute", "--methods",
                                        "grpo,ppo", "--out", "OUT/bench.json"],
                               keep=["bench.json", "memory.csv"]),
}


QUICK_RESCORE = ["--problems", "40"]  # --quick: the re-scoring's plumbing, on a few problems


def declared(config: str) -> dict | None:
    """The `families:` a recipe's config declares (analysis.families), for runs whose own config.yaml predates them."""
    from analysis.families import check
    from gcframe.config import load_yaml

    return check(load_yaml(CONFIGS / config).get("families")) or None


def stage_scores(stage: Path, b: dict) -> tuple[float, float | None, str]:
    """(greedy, pass@k, where from) of the earlier stage's final model: with b["check"] = (N, k), its scores on N
    validation problems with k samples (`python -m gcframe.evaluate --split validation`, run here once and kept);
    else the run's last evaluation (train.eval_split, train.eval_size problems)."""
    import json

    folder = stage / b["method"] / f"seed{b['seed']}"
    if "check" in b:
        from gcframe.evaluate.rescore import scored_name

        n, k = b["check"]
        scored = folder / "rescored" / scored_name("final", n, k, "validation")
        if not scored.is_file():
            run(["-m", "gcframe.evaluate", repo_relative(folder), "--split", "validation", "--problems", str(n),
                 "--k", str(k)])
            wait_for(folder, scored, f"the {b['method']} stage's check")  # a second process: the first one scores it
        rows = [json.loads(line) for line in scored.read_text().splitlines() if line.strip()]
        return (sum(r["greedy_correct"] for r in rows) / len(rows), sum(r["k_correct"] > 0 for r in rows) / len(rows),
                f"{len(rows)} validation problems, {scored}")
    metrics = folder / "metrics.jsonl"
    last = [json.loads(line) for line in metrics.read_text().splitlines() if '"eval_accuracy"' in line][-1]
    return last["eval_accuracy"], last.get("eval_passk"), f"step {last['step']}, {metrics}"


def check_stage(stage: Path, b: dict) -> None:
    """The earlier stage's base is the one the recipe intends: its greedy accuracy (stage_scores) inside b["band"]
    and with pass@k − greedy of at least b["room"], else one line naming what it reached and what to change."""
    greedy, passk, where = stage_scores(stage, b)
    fix = (f"change train.steps or train.lr in experiments/configs/{b['config']} (or the task's demo_slip) and run "
           f"again with {stage} removed")
    lo, hi = b.get("band", (0.0, 1.0))
    if not lo <= greedy <= hi:
        raise UserError(f"the {b['method']} stage ended at {greedy:.3f} greedy ({where}), "
                        f"outside the band [{lo}, {hi}] this recipe is designed for: {fix}")
    if "room" in b and (passk is None or passk - greedy < b["room"]):
        shown = "not measured" if passk is None else f"{passk:.3f}"
        raise UserError(f"the {b['method']} stage ended at {greedy:.3f} greedy and pass@k {shown} ({where}): less "
                        f"than the {b['room']} of room above greedy this recipe needs: {fix}")


def wait_for(folder: Path, done: Path, what: str, poll_s: float = 10.0) -> bool:
    """Wait for `done` while another live process holds a claim under `folder` (a cell it trains, a model it
    scores): True once `done` exists, False when no process is left on it (two polls in a row without a live
    claim), so that a second process started beside the first carries on instead of stopping halfway."""
    from gcframe.tracking import claims

    idle, said = 0, False
    while not done.exists():
        idle = 0 if any(claims.holder(c) for c in folder.rglob("*.claim")) else idle + 1
        if idle >= 2:
            return False
        if not said:
            print(f"{what}: another process is on it; this one waits for {done}", flush=True)
            said = True
        time.sleep(poll_s)
    return True


def stamp(runs: Path, what: str) -> float:
    """The time (Unix seconds) the recipe whose runs go to `runs` first got to `what` ("started": its first process
    began; "finished": its result was first collected), kept in <runs>.<what> so that a second process, a resumed
    one or a later collection keeps the first time."""
    path = runs.with_name(f"{runs.name}.{what}")
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{time.time():.0f}\n")
    return float(path.read_text())


def write_wall(runs: Path, results: Path) -> None:
    """results/<name>/wall.csv: the recipe's wall time from its first process's start to its first result, with
    the processes' thread count; a recipe stopped and resumed counts the time it stood still too."""
    import pandas as pd

    start, end = stamp(runs, "started"), stamp(runs, "finished")
    results.mkdir(parents=True, exist_ok=True)
    fmt = "%Y-%m-%d %H:%M:%S UTC"
    pd.DataFrame([{"started": time.strftime(fmt, time.gmtime(start)), "finished": time.strftime(fmt, time.gmtime(end)),
                   "wall_s": round(end - start), "wall_h": round((end - start) / 3600, 2),
                   "threads per process": os.environ.get("OMP_NUM_THREADS", "")}]).to_csv(results / "wall.csv",
                                                                                         index=False)


def rescored(out: Path, args: list[str]) -> bool:
    """Whether every run of the comparison `out` has the re-scoring `args` asks for written."""
    n = args[args.index("--problems") + 1] if "--problems" in args else None
    k = args[args.index("--k") + 1] if "--k" in args else "0"
    k = "*" if k == "0" else k  # greedy only: any scoring holds it (gcframe.evaluate.rescore.holds_greedy)
    runs = [p for p in out.glob("*/seed*") if (p / "final").is_dir()]
    base = "--base" not in args or list((out / "rescored").glob(f"base-n{n or '*'}-k{k}.jsonl")) or \
        list((out / "rescored").glob(f"base-seed*-n{n or '*'}-k{k}.jsonl"))  # a base per seed (sft_base.per_seed)
    return bool(base) and all(list((p / "rescored").glob(f"final-n{n or '*'}-k{k}.jsonl")) for p in runs)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1].lstrip("\n"))  # the first line is the description
    p.add_argument("names", nargs="*", help="result names (see --list)")
    p.add_argument("--all", action="store_true", help="every result, in the order of --list")
    p.add_argument("--list", action="store_true", help="print the results and their commands, then exit")
    p.add_argument("--quick", action="store_true", help="smoke versions into runs/reproduce-quick/ (results/ kept)")
    p.add_argument("--seeds", help="compare results: grow the committed result by these new test seeds (5-12, or "
                   "5,6,9): every arm of a seed on this machine at the committed rates, merged into results/<name>/ "
                   "as it finishes (experiments/grow.py)")
    p.add_argument("--check", metavar="SEEDS", help="compare results: run these committed seeds again (comma-"
                   "separated) into runs/reproduce/<name>-seeds<...>/, beside results/, and compare their rows")
    p.add_argument("--underpowered", action="store_true", help="run a recipe although its test seeds cannot decide "
                   "a declared family at its min_effect (plan.csv and the page then say so)")
    p.add_argument("--runs", default=str(ROOT / "runs" / "reproduce"), help="where the runs go")
    p.add_argument("--results", default=str(ROOT / "results"), help="where the result folders go")
    from gcframe import raygrid

    raygrid.add_flags(p, "a compare result's bases, trials, runs and scorings: their compare.py and "
                      "gcframe.evaluate commands get the flags", unit=False)
    args = p.parse_args(argv)
    raygrid.check_flags(args)  # --address with --backend ray; Ray installed (before anything runs)
    return args


def backend_args(args) -> list[str]:
    """What every compare.py and gcframe.evaluate command of this reproduction adds: the backend it runs on."""
    if getattr(args, "backend", "local") != "ray":
        return []
    return ["--backend", "ray", *(["--address", args.address] if args.address else [])]


def chosen(args) -> list[str]:
    if args.all:
        return list(RECIPES)
    if not args.names:
        raise UserError("name a result (or --all): known results are " + ", ".join(RECIPES))
    unknown = [n for n in args.names if n not in RECIPES]
    if unknown:
        raise UserError(f"unknown result(s) {', '.join(unknown)}: known results are {', '.join(RECIPES)} "
                        "(see --list)")
    return args.names


def run(cmd: list[str]) -> None:
    """Run one experiment script with this Python; its progress goes straight to this terminal."""
    print("$ " + " ".join(cmd), flush=True)
    code = subprocess.call([sys.executable, *cmd], cwd=ROOT)
    if code:
        raise UserError(f"'{' '.join(cmd)}' stopped with exit status {code}: its output above says why; the same "
                        "reproduce command resumes from what it finished")


def repo_relative(path: Path) -> str:
    """A path inside the repository as it is named from the repository's top (every command here runs there), so
    that the configs and commands a result publishes (env.json) name no folder of the machine that made it; others
    as given."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def finished(out: Path) -> Path:
    """The file a compare.py folder writes last, its report: summary.csv comes before the test problems' scoring
    (train.eval_split validation) and the report, so a process that took it for the end collected a result whose
    test outcomes were still being written."""
    return out / "report" / "summary.md"


def compare_cells(recipe: Recipe, seeds: list[int], out: Path, quick: bool, backend: list[str] = ()) -> None:
    """A compare result into one compare.py folder, every seed in it. The first process starts it; a second one
    (or a later one, after a kill) resumes it; compare.py's own claim files (OUT/<method>/seed<k>.claim) then split
    the method x seed cells between whichever processes are running, and the last one to finish writes
    the summary, the scores and the report (`finished`)."""
    from gcframe.tracking import claims

    if finished(out).exists():
        print(f"{out}: finished, kept")
        return
    start = out.with_name(out.name + ".start.claim")  # held while one process creates the folder
    if claims.acquire(start):
        try:
            if not (out / "config.yaml").exists():
                run(["experiments/compare.py", "--config", repo_relative(CONFIGS / recipe.config),
                     "--seeds", ",".join(map(str, seeds)), "--out", repo_relative(out), *recipe.args,
                     *(recipe.quick if quick else []), *backend])
                return
        finally:
            claims.release(start)
    else:
        print(f"{out}: another process is starting it; this one joins once its config.yaml is written", flush=True)
        while not (out / "config.yaml").exists() and claims.holder(start):
            time.sleep(2)
    run(["experiments/compare.py", "--resume", repo_relative(out), *backend])


def reproduce(name: str, args) -> Path | None:
    recipe = RECIPES[name]
    runs = Path(args.runs + ("-quick" if args.quick else "")).resolve() / name  # absolute: configs name the stage by it
    results = (Path(args.runs + "-quick") / "results" if args.quick else Path(args.results)) / name
    from analysis import results as collect

    if args.seeds:  # grow a committed compare result (refused in one line for a command's)
        return grow_result(name, recipe, args)
    if recipe.kind == "compare":
        try:
            seeds = [int(s) for s in args.check.split(",")] if args.check else ([0] if args.quick else recipe.seeds)
        except ValueError:
            raise UserError(f"--check takes committed seeds like 0 or 0,1, got {args.check!r}") from None
        if not args.quick and not args.check:
            check_plan(name, recipe, args)
        stage, check = None, seeds != recipe.seeds and not args.quick  # a check, not the result: its own folders
        stamp(runs.with_name(f"{name}-seeds{'-'.join(map(str, seeds))}") if check else runs, "started")
        if recipe.base_run:  # the earlier stage: its final model is this comparison's base
            b = recipe.base_run
            stage = runs.with_name(f"{runs.name}-{b['method']}")
            compare_cells(Recipe(f"{name}: {b['method']} stage", "compare", b["config"], [b["seed"]],
                                 args=["--methods", b["method"]], quick=["--quick"]), [b["seed"]], stage, args.quick,
                          backend_args(args))
            if not wait_for(stage, finished(stage), f"{name}: its {b['method']} stage"):
                print(f"{name}: its {b['method']} stage is still running elsewhere; run the same command again later")
                return None
            if not args.quick and ("band" in b or "room" in b):
                check_stage(stage, b)
            model = stage / b["method"] / f"seed{b['seed']}" / "final"
            recipe = replace(recipe, args=[*recipe.args, "--model", repo_relative(model)])
        if check:
            runs = runs.with_name(f"{name}-seeds{'-'.join(map(str, seeds))}")
            results = runs / "results"
        compare_cells(recipe, seeds, runs, args.quick, backend_args(args))
        if not wait_for(runs, finished(runs), f"{name}: its last cells"):
            print(f"{name}: cells still running elsewhere; the last process to finish writes {results}")
            return None
        if recipe.rescore:  # a second process joins by running the same command: the models are split by claims
            run(["-m", "gcframe.evaluate", repo_relative(runs), *(QUICK_RESCORE if args.quick else recipe.rescore),
                 *backend_args(args)])
            if not rescored(runs, QUICK_RESCORE if args.quick else recipe.rescore):
                print(f"{name}: models still being re-scored elsewhere; the last process to finish writes {results}")
                return None
        collect.from_compare(runs, results, families=declared(recipe.config))
        if not check and not args.quick and (results / "problems.csv.gz").is_file():  # the findings on the test
            # seeds, the plan beside them (analysis.seeds)
            from experiments import grow

            grow.remake(results)
        committed = Path(args.results) / name / "summary.csv"
        if results.parent != Path(args.results) and committed.is_file() and (results / "summary.csv").is_file():
            print(collect.compare_rows(results / "summary.csv", committed))  # the check beside the result
            if args.quick:
                print("  (a smoke run: --quick trains fewer steps on fewer problems, so its rows are expected to "
                      "differ from the committed result's; it shows that the pipeline runs, not the numbers)")
        if stage is not None:
            collect.from_compare(stage, results, prefix=f"{recipe.base_run['method']}_stage_")
        write_wall(runs, results)
    else:
        runs.mkdir(parents=True, exist_ok=True)
        run([a.replace("OUT", repo_relative(runs)) for a in recipe.command] + (recipe.quick if args.quick else []))
        collect.from_command(runs, results, recipe.keep)
    return results


def check_plan(name: str, recipe: Recipe, args) -> None:
    """Print the recipe's family-wise plan (analysis.plan) from its committed result, and refuse in one line a recipe
    whose test seeds cannot decide a declared family at its min_effect, unless --underpowered."""
    spec = declared(recipe.config) or {}
    folder = Path(args.results) / name
    if not any(f.get("min_effect") is not None for f in spec.values()):
        return
    if not (folder / "problems.csv.gz").is_file():
        print(f"{name}: no committed result to plan from; its plan is written beside its findings once it has run")
        return
    from analysis import plan
    from analysis.redecide import Published
    from gcframe.config import load_yaml

    tuned = (load_yaml(CONFIGS / recipe.config).get("tune") or {}).get("seeds", [])
    test = len([s for s in recipe.seeds if s not in tuned])
    rows = plan.plan_rows(Published(folder), spec, test)
    print(f"{name}: the plan, from results/{name}'s components at {test} test seeds\n" + plan.text(rows))
    short = plan.shortfall(rows)
    if short and not args.underpowered:
        raise UserError(f"{name}'s {test} test seeds cannot decide its families: {'; '.join(short)}; grow the "
                        f"committed result instead (--seeds {max(recipe.seeds) + 1}-...), or run it anyway with "
                        "--underpowered")


def grow_result(name: str, recipe: Recipe, args) -> Path | None:
    """`--seeds A-B`: grow results/<name>/ seed by seed (experiments/grow.py); two processes running the same
    command split each seed's cells, and whichever finishes a seed first merges it."""
    from experiments import grow
    from gcframe.tracking import claims

    if args.quick:
        raise UserError("--quick makes a smoke run beside results/; it does not grow a result: drop --seeds or --quick")
    seeds = grow.parse_seeds(args.seeds)
    results = Path(args.results) / name
    cfg = grow.check(name, recipe, seeds, Path(args.results), CONFIGS)
    families = declared(recipe.config)
    from gcframe.config import load_yaml

    raw = load_yaml(CONFIGS / recipe.config).get("families")
    if raw and raw != cfg.get("families"):  # the families (min_effect among them) the recipe declares now:
        import yaml  # analysis, not design, and declared before these seeds run

        cfg = {**cfg, "families": raw}
        (results / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    runs = Path(args.runs).resolve() / name
    print(f"{name}: growing by seed(s) {', '.join(map(str, seeds))}, each at the committed rates, merged into "
          f"{results} as it finishes", flush=True)
    for seed in seeds:
        out = grow.seed_folder(runs, name, seed)
        from analysis.seeds import committed

        if seed in committed(results):
            print(f"{name}: seed {seed} is merged already (another process)")
            continue
        grow.prepare(out, cfg, seed)
        if not finished(out).exists():
            run(["experiments/compare.py", "--resume", repo_relative(out), *backend_args(args)])
        if not wait_for(out, finished(out), f"{name} seed {seed}"):
            print(f"{name}: seed {seed} is still running elsewhere; run the same command again later")
            return None
        if recipe.rescore:
            run(["-m", "gcframe.evaluate", repo_relative(out), *recipe.rescore, *backend_args(args)])
            if not rescored(out, recipe.rescore):
                print(f"{name}: seed {seed}'s models are still being scored elsewhere; run the same command again")
                return None
        lock = results.with_name(f".{name}.merge.claim")
        while not claims.acquire(lock):
            time.sleep(2)
        try:
            if seed not in committed(results):
                grow.merge(out, results, seed, families)
                grow.remake(results)
                print(f"{name}: seed {seed} merged into {results} — commit it now (git add {repo_relative(results)}); "
                      "the same command continues from the next seed, on any machine", flush=True)
        finally:
            claims.release(lock)
    return results


@cli_entry
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        from gcframe.plugins import listing

        rows = []
        for name, r in RECIPES.items():
            what = " ".join(r.command)
            if r.kind == "compare":
                what = " ".join([f"compare.py --config experiments/configs/{r.config}", *r.args]) + f", seeds {r.seeds}"
            rows += [(name, r.doc), ("", what)]
        print(listing(rows))  # a description, then its command under it: wrapped at words on a terminal
        return 0
    names = chosen(args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    made = [(n, reproduce(n, args)) for n in names]
    for n, path in made:
        print(f"{n}: " + (f"results in {path}" if path else "not complete yet (see above)"))
    if not args.quick and any(p and p.parent == Path(args.results) for _, p in made):
        from analysis.results import render_all

        changed = render_all(ROOT, Path(args.results))
        print("tables re-rendered in " + (", ".join(map(str, changed)) if changed else "no file (none changed)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
