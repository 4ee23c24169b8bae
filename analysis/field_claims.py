"""The field's claims about the newer methods, each decided on this task by a paired test, or said to be undecided
with the difference the design could have detected.

    python -m analysis.field_claims OUT     # print the table of a compare.py folder

A claim says that method A beats method B on one quantity. Four quantities, each fixed before the runs:

    greedy     test greedy accuracy of the final models: the per-problem paired test over seeds × problems
               (analysis.paired, the same row as pairs.csv)
    val_half   validation greedy accuracy at the halfway evaluation (train.steps / 2): how far a method has got
               on half the budget ("learns faster")
    drawdown   the validation curve's largest fall, max_t (max_{t' <= t} acc_{t'} − acc_t), over the
               evaluations while training: 0 for a curve that never falls ("more stable"; lower is better)
    len_wrong  mean length (tokens) of the wrong completions sampled in the last fifth of the steps
               (completion_len_wrong; "shortens wrong answers"; lower is better)

The last three are one number per run. Seed s of every method starts from the same base (sft_base.per_seed) and
sees the same prompts, so they are paired by seed: d_s = q_A,s − q_B,s, S seeds,

    Δ = mean_s d_s,   SE = sd(d) / √S,   interval Δ ± t_{0.975, S−1} · SE,
    detectable difference = (t_{0.975, S−1} + t_{0.8, S−1}) · SE      (α 0.05, power 0.8)

Verdict: "holds" where the interval lies on the claim's side of 0, "reversed" where it lies on the other side, and
"not separated" otherwise, given with the detectable difference: a claim not separated at a detectable difference
of 0.10 says nothing about a true effect of 0.02.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcframe.errors import UserError, cli_entry  # noqa: E402


@dataclass(frozen=True)
class Claim:
    a: str
    b: str
    quantity: str
    """greedy | val_half | drawdown | len_wrong (module docstring)."""
    claim: str
    source: str
    """Where the field states it: the paper, and the part of it that says so."""


HIGHER_IS_BETTER = {"greedy": True, "val_half": True, "drawdown": False, "len_wrong": False}

CLAIMS = [
    Claim("gspo", "grpo", "drawdown", "GSPO trains more stably than GRPO",
          "Zheng et al. 2025, arXiv:2507.18071, abstract (GRPO collapses in long training; GSPO trains stably)"),
    Claim("gspo", "grpo", "greedy", "GSPO ends more accurate than GRPO",
          "Zheng et al. 2025, abstract (superior training efficiency and performance)"),
    Claim("cispo", "grpo", "val_half", "CISPO learns faster than GRPO",
          "MiniMax-M1 2025, arXiv:2506.13585, Fig. 2 (CISPO ahead of GRPO and DAPO at equal steps)"),
    Claim("cispo", "dapo", "val_half", "CISPO learns faster than DAPO",
          "MiniMax-M1 2025, Fig. 2 (DAPO's accuracy in about half the steps)"),
    Claim("dr_grpo", "grpo", "len_wrong", "Dr. GRPO keeps wrong answers shorter than GRPO",
          "Liu et al. 2025, arXiv:2503.20783, abstract (GRPO's 1/|o_i| lets wrong responses grow longer; Dr. GRPO is more token-efficient)"),
    Claim("dapo", "grpo", "greedy", "DAPO ends more accurate than GRPO",
          "Yu et al. 2025, arXiv:2503.14476, abstract and Table 1"),
    Claim("sapo", "grpo", "drawdown", "SAPO trains more stably than GRPO",
          "Gao et al. 2025, arXiv:2511.20347, abstract (the soft gate stabilises training)"),
    Claim("reinforce_pp", "grpo", "drawdown", "REINFORCE++ trains more stably than GRPO",
          "Hu et al. 2025, arXiv:2501.03262, abstract (more stable training than GRPO)"),
    Claim("remax", "ppo", "greedy", "ReMax ends as accurate as PPO, without a critic",
          "Li et al. 2023, arXiv:2310.10505, abstract (no loss of performance against PPO)"),
    Claim("simpo", "dpo", "greedy", "SimPO ends more accurate than DPO",
          "Meng et al. 2024, arXiv:2405.14734, abstract (outperforms DPO)"),
    Claim("kto", "dpo", "greedy", "KTO matches or beats DPO, from unpaired examples",
          "Ethayarajh et al. 2024, arXiv:2402.01306, abstract"),
    Claim("online_dpo", "dpo", "greedy", "Online DPO beats offline DPO",
          "Guo et al. 2024, arXiv:2402.04792, abstract (online feedback beats offline DAP methods)"),
]


def run_quantities(train: pd.DataFrame, evals: pd.DataFrame, steps: int) -> pd.DataFrame:
    """One row per (method, seed): val_half, drawdown and len_wrong (module docstring) from the runs' training rows
    (`train`: step, completion_len_wrong) and their evaluation rows while training (`evals`: step, eval_accuracy,
    step 0 the base). A quantity a run did not log is NaN in its row."""
    rows = []
    for (m, s), e in evals.sort_values("step").groupby(["method", "seed"], sort=False):
        acc = e["eval_accuracy"].to_numpy(float)
        peak = pd.Series(acc).cummax().to_numpy()
        half = e[e["step"] <= steps // 2]
        t = train[(train["method"] == m) & (train["seed"] == s)]
        late = t[t["step"] >= steps - steps // 5]  # the last fifth of the steps
        wrong = late["completion_len_wrong"].dropna() if "completion_len_wrong" in late else pd.Series(dtype=float)
        rows.append({"method": m, "seed": s,
                     "val_half": float(half["eval_accuracy"].iloc[-1]) if len(half) else math.nan,
                     "drawdown": float((peak - acc).max()) if len(acc) else math.nan,
                     "len_wrong": float(wrong.mean()) if len(wrong) else math.nan})
    return pd.DataFrame(rows, columns=["method", "seed", "val_half", "drawdown", "len_wrong"])


def seed_paired(q: pd.DataFrame, a: str, b: str, quantity: str, level: float = 0.95, power: float = 0.8) -> dict:
    """The seed-paired difference q_A − q_B of one run-level quantity over the seeds both ran (module docstring).
    E.g. d = 0.02, 0.04, 0.06 -> Δ 0.04, sd 0.02, SE 0.02/√3 = 0.01155; t_{0.975, 2} = 4.303: [−0.0097, 0.0897]."""
    x = q[q["method"] == a].set_index("seed")[quantity]
    y = q[q["method"] == b].set_index("seed")[quantity]
    d = (x - y).dropna()
    n = len(d)
    if n < 2:
        return {"diff": float(d.mean()) if n else math.nan, "lo": math.nan, "hi": math.nan, "mde": math.nan,
                "seeds": n}
    se = float(d.std(ddof=1)) / math.sqrt(n)
    t = stats.t.ppf(1 - (1 - level) / 2, n - 1)
    return {"diff": float(d.mean()), "lo": float(d.mean()) - t * se, "hi": float(d.mean()) + t * se,
            "mde": (t + stats.t.ppf(power, n - 1)) * se, "seeds": n}


def decide(r: dict, higher_is_better: bool) -> str:
    """holds / reversed / not separated, on the claim's side (A better than B)."""
    if not (r["lo"] > 0 or r["hi"] < 0):
        return "not separated"
    return "holds" if (r["lo"] > 0) == higher_is_better else "reversed"


def rows(runs, table: pd.DataFrame | None = None) -> list[dict]:
    """Every claim whose two methods are among the runs, decided (module docstring); greedy from the paired test's
    table (analysis.findings.tests), the rest from the runs' own rows."""
    from analysis import findings, paired

    present = set(runs.methods)
    claims = [c for c in CLAIMS if {c.a, c.b} <= present]
    if not claims:
        return []
    table = findings.tests(runs)[0] if table is None else table
    steps = int((next(iter(runs.configs.values()), {}).get("train") or {}).get("steps", 0))
    q = run_quantities(runs.train, runs.eval, steps)  # the evaluations while training: train.eval_split's problems
    out = []
    for c in claims:
        if c.quantity == "greedy":
            g = table[(table["metric"] == "greedy") & (table["a"].isin([c.a, c.b])) & (table["b"].isin([c.a, c.b]))]
            if "subgroup" in g:
                g = g[g["subgroup"] == findings.ALL]
            if not len(g):
                continue
            t = g.iloc[0]
            sign = 1 if t["a"] == c.a else -1
            lo, hi = sorted((sign * t["lo"], sign * t["hi"]))
            mde = paired.detectable_difference(t["var_seed"], t["var_problem"], t["var_resid"], int(t["n_seeds"]),
                                               int(t["n_problems"]))["mde"]
            r = {"diff": sign * t["diff"], "lo": lo, "hi": hi, "mde": mde, "seeds": int(t["n_seeds"])}
            design = f"{int(t['n_seeds'])} seeds × {int(t['n_problems'])} test problems"
        else:
            r = seed_paired(q, c.a, c.b, c.quantity)
            design = f"{r['seeds']} seed{'s' if r['seeds'] != 1 else ''} (paired by seed)"
        fmt = "{:+.1f}" if c.quantity == "len_wrong" else "{:+.3f}"
        mfmt = "{:.1f}" if c.quantity == "len_wrong" else "{:.3f}"
        means = {m: q[q["method"] == m][c.quantity].mean() for m in (c.a, c.b)} if c.quantity != "greedy" else {}
        out.append({"claim": c.claim, "source": c.source, "comparison": f"{c.a} − {c.b}", "quantity": c.quantity,
                    "A, B": (", ".join(mfmt.format(means[m]) for m in (c.a, c.b)) if means else "–"),
                    "Δ [95% interval]": (f"{fmt.format(r['diff'])} [{fmt.format(r['lo'])}, {fmt.format(r['hi'])}]"
                                         if not math.isnan(r["lo"]) else "–"),
                    "detectable": mfmt.format(r["mde"]) if not math.isnan(r["mde"]) else "–",
                    "verdict": (decide(r, HIGHER_IS_BETTER[c.quantity]) if not math.isnan(r["lo"])
                                else "undecided (fewer than 2 seeds)"),
                    "design": design})
    return out


@cli_entry
def main(argv=None) -> int:
    from analysis.runs import Runs, markdown_table

    p = argparse.ArgumentParser(prog="python -m analysis.field_claims", description=__doc__.split("\n")[0])
    p.add_argument("out", help="a compare.py folder")
    args = p.parse_args(argv)
    if not Path(args.out).is_dir():
        raise UserError(f"{args.out} is not a folder: give a compare.py output folder")
    got = rows(Runs(Path(args.out)))
    print(markdown_table(got) if got else "no claim here: none has both of its methods among the runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
