"""The findings of a comparison, decided by the paired test (analysis.paired) on per-problem outcomes, and written
as data: every sentence the report, the README or a result page states about which method beats which is rendered
from these tables.

    pairs.csv      every pair of methods × metric: Δ, 95% interval over seeds and problems, P(A > B) (left out at
                   one seed, where it is 0 or 1), separated, and how much pairing by problem narrowed the interval
                   (paired SE / unpaired SE)
    findings.csv   DeepSeekMath §5.2's orderings, each decided by the paired test: holds, reversed, not separated
    gains.csv      each method against the model the runs started from, where it was re-scored on the same problems
                   (`python -m gcframe.evaluate OUT --base`): the same paired test, the base's outcomes in every seed
    design.csv     what the design can detect: seeds, problems, the minimum detectable difference (α 0.05, power
                   0.8), the seeds or problems that would halve it and the task's held-out problems
    findings.md    the sentences, from the three tables; headline.md their short form (greedy only)
    families.csv   where the config declares families of comparisons (its `families:`, analysis.families): each
                   family's count of verdicts per comparison and family-wise (Holm), and which ones family-wise;
                   pairs.csv and gains.csv then give every row its p-value and a family's rows their family, Holm
                   p-value and family-wise verdict, and over_<baseline>.csv and gains_greedy.csv mark each cell
                   "separated family-wise" or "separated per comparison"

pairs.csv and gains.csv have a `subgroup` column: "all" (every test problem), then the same rows on each planned
subgroup of the task's test problems where the task defines them (`problem_subgroups`: arithmetic's carry /
no_carry), so that a cost on one part of the problems is reported beside a gain on the other. The orderings, the
design and the sentences are decided on all problems; findings.md and headline.md add the gains per subgroup.

At one seed every interval covers that run's problems, not a new training run (SCOPE), and every sentence with a
verdict says so. Which methods beat which is said as the groups the test orders (`ordered_groups`).

    python -m analysis.findings OUT      # print the sentences of a compare.py folder
"""
from __future__ import annotations

import argparse
import numbers
import sys

import pandas as pd

from analysis import families, paired
from analysis.runs import Runs
from gcframe.errors import cli_entry

CLAIMS = [  # (method, compared with, what DeepSeekMath reports)
    ("online_rft", "rft", "§5.2.1, Fig. 5: online RFT beats RFT (samples of the live policy, not the SFT model)"),
    ("grpo", "online_rft", "§5.2.1, Fig. 5: GRPO beats online RFT (wrong samples pushed down, by how much)"),
    ("grpo_ps", "grpo", "§4.1.3 / Fig. 5: process supervision beats outcome supervision"),
]


def metric_name(metric: str, k) -> str:
    return {"greedy": "greedy", "majk": f"maj@{k}", "passk": f"pass@{k}", "pass1": "pass@1"}[metric]


def tests(runs: Runs) -> tuple[pd.DataFrame, list[str]]:
    """Every pair × metric through analysis.paired -> (rows, where each metric's outcomes come from). Computed once
    per Runs (the findings, the pairs figure and the field's claims all read it: 300 pairs at 25 methods)."""
    cached = vars(runs).get("_paired_tests")  # its own, never a Subgroup's parent's (Subgroup.__getattr__)
    if cached is not None:
        return cached
    parts, sources = [], []
    for frame, metrics, source, k in runs.outcomes():
        if frame["method"].nunique() < 2:
            continue
        rows = paired.pairwise(frame, metrics=metrics, methods=[m for m in runs.methods if m in set(frame["method"])])
        if len(rows):
            parts.append(rows.assign(source=source, k=k))
            sources.append(f"{', '.join(metric_name(m, k) for m in metrics)}: {source}")
    runs._paired_tests = ((pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), sources)
    return runs._paired_tests


ALL = "all"  # the subgroup of every problem
PER_COMPARISON = "These verdicts are per comparison."
"""Said after the count and the groups of every pair: each is its own 95% interval (a declared family's verdicts are
the family lines', analysis.families)."""


def _task_class(runs: Runs):
    """The class of the runs' task (gcframe.tasks.TASKS), or None for a name it does not know."""
    from gcframe import tasks

    cfg = next(iter(runs.configs.values()), None) or {}
    name = (cfg.get("task") or {}).get("name", "arithmetic")
    return getattr(tasks, tasks.TASKS[name]) if name in tasks.TASKS else None


def _plain_prompts(cfg: dict) -> bool:
    """Whether the runs' prompts are the task's own text, so that a problem's id (a digest of its prompt) is computed
    without a tokenizer: task.prompt_format plain, or auto on the tiny model (its character tokenizer has no chat
    template). A pretrained model's chat template renders the prompts otherwise."""
    fmt = (cfg.get("task") or {}).get("prompt_format", "auto")
    return fmt == "plain" or (fmt == "auto" and not (cfg.get("model") or {}).get("path"))


def _plain_task(cfg: dict):
    """The runs' task built from their config's task section alone, its prompts as plain text: no tokenizer and no
    model is loaded. Its test problems are the runs' own, in the same order (a prompt format renders the same
    problems)."""
    from gcframe.config import from_dict
    from gcframe.tasks import build_task

    task_cfg = from_dict({"task": {**(cfg.get("task") or {}), "prompt_format": "plain"}}).task
    return build_task(task_cfg)


def recorded_indices(runs) -> dict[str, int] | None:
    """problem id -> its place among the task's test problems, as the runs' greedy outcomes record it (their `index`
    column: a run folder's per-problem rows, a result's problems.csv.gz); {} where they record none; None where those
    outcomes are not of the test problems (the runs' last evaluation on validation problems, not re-scored)."""
    from analysis.runs import RESCORED_SOURCE

    picks = runs.outcomes() if hasattr(runs, "outcomes") else []
    if not picks:
        return {}
    frame, _, source, _ = picks[0]
    train = (next(iter(runs.configs.values()), None) or {}).get("train") or {}
    if not source.startswith(RESCORED_SOURCE) and train.get("eval_split", "test") != "test":
        return None
    if "index" not in frame:
        return {}
    known = frame[["problem", "index"]].dropna().drop_duplicates()
    return dict(zip(known["problem"], known["index"].astype(int)))


def problem_subgroups(runs: Runs) -> dict[str, str]:
    """problem id -> its planned subgroup, for the test problems of the runs' task (the task's `subgroups()`, e.g.
    ArithmeticTask's carry / no_carry), computed from the problem itself: its operands, from the task the runs'
    config builds without a tokenizer or a model. The problem behind an id is found by its prompt where the prompts
    are plain text, else (a chat template's prompts) by the place among the test problems the outcomes record
    (`recorded_indices`). {} for a task that plans none, or for a chat template's runs scored on validation problems
    only (noted: the subgroups are of the test problems); a task that plans them but whose problems cannot be named is
    refused in one line naming the cause (never {}: the findings would silently lose their subgroup rows)."""
    from gcframe.errors import UserError
    from gcframe.evaluate.problems import problem_id

    cfg = next(iter(runs.configs.values()), None) or {}
    if not hasattr(_task_class(runs), "subgroups"):
        return {}
    task = _plain_task(cfg)
    groups = task.subgroups()  # [n_heldout]: in the test problems' order
    if _plain_prompts(cfg):
        return {problem_id(row): group for row, group in zip(task.heldout, groups)}
    where = f"task.prompt_format {(cfg.get('task') or {}).get('prompt_format', 'auto')} with model " \
            f"{(cfg.get('model') or {}).get('path')}"
    indices = recorded_indices(runs)
    if indices is None:  # scored on validation problems: no subgroup of the test problems applies to them
        getattr(runs, "notes", []).append("no planned subgroups: the runs' outcomes are of their validation problems")
        return {}
    if not indices:
        raise UserError(f"the test problems' subgroups ({', '.join(getattr(task, 'SUBGROUPS', {}))}) cannot be built: "
                        f"the prompts are rendered by the model's chat template ({where}), so a problem's id does not "
                        "name its operands, and the outcomes on the test problems record no `index` (a problem's "
                        "place among them): score the final models again (python -m gcframe.evaluate OUT), which "
                        "records it")
    outside = sorted(i for i in set(indices.values()) if not 0 <= i < len(groups))
    if outside or len(set(indices.values())) < len(indices):
        raise UserError("the test problems' subgroups cannot be built: the outcomes' `index` column names "
                        + (f"places {outside[:3]} outside the task's {len(groups)} test problems" if outside else
                           "one place for two problems") + f" ({where}): the config is not the one the runs used")
    return {problem: groups[i] for problem, i in indices.items()}


class Subgroup:
    """`runs` seen on one planned subgroup of the problems: every outcome frame (and the base's) kept to its
    problems, so that `tests` and `gain_table` decide the same pairs there."""

    def __init__(self, runs, name: str, ids: set[str], words: str):
        self.runs, self.name, self.ids, self.words = runs, name, ids, words  # words: "with a carry"

    def __getattr__(self, attr):
        return getattr(self.runs, attr)

    def outcomes(self):
        return [(f[f["problem"].isin(self.ids)].reset_index(drop=True), metrics, source, k)
                for f, metrics, source, k in self.runs.outcomes()]

    def base_outcomes(self):
        base = self.runs.base_outcomes()
        return None if base is None else base[base["problem"].isin(self.ids)].reset_index(drop=True)


def subgroups(runs: Runs) -> list[Subgroup]:
    """A `Subgroup` view of `runs` for each planned subgroup (`problem_subgroups`), in the task's order; none, with a
    note, where a scored problem is not one of the task's test problems (the config names other problems)."""
    groups = problem_subgroups(runs)
    if not groups:
        return []
    seen = {p for f, *_ in runs.outcomes() for p in f["problem"]}
    if seen - set(groups):  # scored on other problems than the config's test set: no subgroup is known
        getattr(runs, "notes", []).append(f"no planned subgroups: {len(seen - set(groups))} scored problem(s) "
                                          "are not test problems of the task the runs' config builds")
        return []
    words = getattr(_task_class(runs), "SUBGROUPS", {})
    names = [n for n in words if n in set(groups.values())] + sorted(set(groups.values()) - set(words))
    return [Subgroup(runs, n, {p for p, g in groups.items() if g == n}, words.get(n, f"in subgroup {n}"))
            for n in names]


def subgroup_gain_lines(views: list[Subgroup], gains: list[pd.DataFrame], metric: str = "greedy") -> list[str]:
    """'On the test problems with a carry, over the SFT base (0.048 greedy; 3 seeds × 354 problems): ...' for each
    subgroup: its gains and its losses, each with its interval."""
    return [f"On the test problems {v.words}, {line[0].lower()}{line[1:]}" for v, g in zip(views, gains)
            for line in gain_line(v, g, metric)]


def _interval(r) -> str:
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"


SCOPE = "each interval covers this run's problems, not a new training run"
"""What an interval from one seed says (analysis.paired: `levels` "problems"): the seed-to-seed variance is not
measured, so a separated pair need not separate again with another seed."""


def one_seed(table: pd.DataFrame) -> bool:
    """Whether every row of a paired-test table rests on one seed."""
    return len(table) > 0 and bool((table["n_seeds"] == 1).all())


def _p_improve(table: pd.DataFrame) -> dict:
    """The P(A>B) column, or none where every row has one seed: over one seed's score it is always 0, ½ or 1 (a
    row of one seed among others: '–')."""
    if one_seed(table):
        return {}
    return {"P(A>B)": ["–" if r["n_seeds"] == 1 else f"{r['p_improve']:.2f}" for _, r in table.iterrows()]}


def pair_rows(runs: Runs, table: pd.DataFrame | None = None) -> list[dict]:
    table = tests(runs)[0] if table is None else table
    p = _p_improve(table)
    return [{"comparison": f"{r['a']} − {r['b']}", "metric": metric_name(r["metric"], r["k"]),
             "Δ [95% interval]": _interval(r), **{k: v[i] for k, v in p.items()},
             "separated": "yes" if r["separated"] else "no", "seeds": int(r["n_seeds"]),
             "problems": int(r["n_problems"]), "paired SE / unpaired SE": f"{r['se'] / r['unpaired_se']:.2f}",
             "subgroup": r.get("subgroup", ALL), **_family_cells(r)}
            for i, (_, r) in enumerate(table.iterrows())]


def _family_cells(r) -> dict:
    """The paired test's p-value and, where the row is one of a declared family's comparisons (analysis.families),
    the family, its Holm-adjusted p-value and the family-wise verdict ('–' outside every family)."""
    family = r.get("family")
    inside = isinstance(family, str)
    return {"p": f"{r['p']:.3g}", "family": family if inside else "–",
            "Holm p": f"{r['p_holm']:.3g}" if inside else "–",
            "separated family-wise (Holm)": families.fw_word(r.get("fw_separated") if inside else None)}


def gain_table(runs: Runs) -> pd.DataFrame:
    """Each method − the base, per metric of the greedy re-scoring, through analysis.paired. A shared base is one
    model, so its outcomes stand in every seed: d[s,p] = y_m[s,p] − y_base[p], and the seed variance is the method's
    alone; with a base per seed (sft_base.per_seed) d[s,p] = y_m[s,p] − y_base_s[p], and it holds the bases' too.
    Empty without a re-scored base."""
    base = runs.base_outcomes()
    if base is None:
        return pd.DataFrame()
    frame, metrics, _, k = runs.outcomes()[0]
    both = pd.concat([frame, base], ignore_index=True)
    rows = [paired.paired_difference(both, m, runs.base_label, metric) | {"k": k, "base_mean": base[metric].mean()}
            for m in runs.methods if m in set(frame["method"]) for metric in metrics if base[metric].notna().all()]
    return pd.DataFrame(rows)


def gain_rows(runs: Runs, gains: pd.DataFrame | None = None) -> list[dict]:
    gains = gain_table(runs) if gains is None else gains
    p = _p_improve(gains)
    return [{"method": r["a"], "metric": metric_name(r["metric"], r["k"]), "over": r["b"],
             "gain [95% interval]": _interval(r), **{k: v[i] for k, v in p.items()},
             "separated": "yes" if r["separated"] else "no", "seeds": int(r["n_seeds"]),
             "problems": int(r["n_problems"]), "subgroup": r.get("subgroup", ALL), **_family_cells(r)}
            for i, (_, r) in enumerate(gains.iterrows())]


def gain_summary(rows: pd.DataFrame, metric: str = "greedy") -> pd.DataFrame:
    """gains.csv's `metric` rows as one row per method and a column per subgroup (all problems first): the gain with
    its interval and its verdict (analysis.families.mark: "separated family-wise", "separated per comparison" where
    its family does not separate it, "separated" where no family covers it), e.g. "+0.486 [+0.437, +0.535],
    separated family-wise"."""
    g = rows[rows["metric"] == metric]
    out = {}
    fw = {"yes": True, "no": False}
    for _, r in g.iterrows():
        cell = r["gain [95% interval]"] + families.mark(r["separated"] == "yes",
                                                        fw.get(r.get("separated family-wise (Holm)")))
        out.setdefault(r["method"], {"method": r["method"]})[r["subgroup"]] = cell
    return pd.DataFrame(list(out.values()), columns=["method", *dict.fromkeys(g["subgroup"])])


BASELINES = ("sft_filtered", "sft_clean")
"""The SFT baseline a comparison is read against, the first one present in a result's runs: SFT on the
demonstrations the checker accepts (given the information RL gets), else SFT on clean ones."""


def versus_summary(table: pd.DataFrame, baseline: str, metric: str = "greedy") -> pd.DataFrame:
    """Every method − `baseline` from the paired tests (`table`: tests()' rows, a `subgroup` column), as one row per
    method (the file's name says the baseline: over_<baseline>.csv) and a column per subgroup (all problems first),
    e.g. "+0.072 [+0.041, +0.103], separated family-wise" (analysis.families.mark: "separated per comparison" where
    the declared family does not separate it, "separated" where no family covers it); a pair the
    test wrote as baseline − method is turned round (Δ and the interval negated and swapped)."""
    t = table[(table["metric"] == metric) & ((table["a"] == baseline) | (table["b"] == baseline))]
    out = {}
    for _, r in t.iterrows():
        flip = r["a"] == baseline
        other = r["b"] if flip else r["a"]
        out.setdefault(other, {"method": other})[r.get("subgroup", ALL)] = _cell(r, flip)
    rows = pd.DataFrame(list(out.values()), columns=["method", *dict.fromkeys(t.get("subgroup", [ALL]))])
    mean = {r["method"]: float(r[ALL].split()[0]) for _, r in rows.iterrows()} if ALL in rows else {}
    return rows.sort_values("method", key=lambda m: m.map(lambda x: -mean.get(x, 0.0)), kind="stable")


def _cell(r, flip: bool = False) -> str:
    """A paired test's row as "+0.072 [+0.041, +0.103]" and its verdict (analysis.families.mark); flip: as b − a."""
    d, lo, hi = (-r["diff"], -r["hi"], -r["lo"]) if flip else (r["diff"], r["lo"], r["hi"])
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" + families.mark(r["separated"], r.get("fw_separated"))


def family_summary(table: pd.DataFrame, pairs: list, metric: str = "greedy") -> pd.DataFrame:
    """A declared family of pairs (its `pairs:` list) from the paired tests (`table`: tests()' rows, a `subgroup`
    column): one row per comparison "A − B" in the order declared, a column per subgroup, each cell as over_<baseline>.csv's
    (a pair the test wrote as B − A turned round); pairs whose methods did not both run are left out."""
    t = table[table["metric"] == metric]
    rows = []
    for a, b in pairs:
        row = {"comparison": f"{a} − {b}"}
        for _, r in t[((t["a"] == a) & (t["b"] == b)) | ((t["a"] == b) & (t["b"] == a))].iterrows():
            row[r.get("subgroup", ALL)] = _cell(r, flip=r["a"] == b)
        if len(row) > 1:
            rows.append(row)
    return pd.DataFrame(rows, columns=["comparison", *dict.fromkeys(t.get("subgroup", [ALL]))])


def gain_line(runs: Runs, gains: pd.DataFrame, metric: str = "greedy") -> list[str]:
    """'Over the base model (0.412 greedy; 2 seeds × 200 problems): grpo +0.071 [+0.030, +0.112], separated; ...'"""
    g = gains[gains["metric"] == metric] if len(gains) else gains
    if g.empty:
        return []
    level = g["base_mean"].iloc[0]
    parts = [f"{r['a']} {r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}], "
             + (families.mark(r["separated"], r.get("fw_separated"))[2:] or "not separated") for _, r in g.iterrows()]
    return [f"Over the {runs.base_label} ({level:.3f} {metric_name(metric, g['k'].iloc[0])}; {_design(g)}): "
            + "; ".join(parts) + "."]


def verdict(r) -> str:
    if not r["separated"]:
        return "not separated"
    return "holds" if r["diff"] > 0 else "reversed"


def claim_rows(runs: Runs, table: pd.DataFrame | None = None) -> list[dict]:
    """DeepSeekMath's orderings among the methods run, decided by the paired test, per metric."""
    table = tests(runs)[0] if table is None else table
    out = []
    for a, b, claim in CLAIMS:
        for _, r in table.iterrows():
            if {r["a"], r["b"]} == {a, b}:
                sign = 1 if r["a"] == a else -1  # the table's pair may be ordered b − a
                r = r.copy()
                r["diff"], r["lo"], r["hi"] = sign * r["diff"], *sorted((sign * r["lo"], sign * r["hi"]))
                fw = r.get("fw_separated") if isinstance(r.get("family"), str) else None
                out.append({"claim (DeepSeekMath)": claim, "comparison": f"{a} − {b}",
                            "metric": metric_name(r["metric"], r["k"]), "Δ [95% interval]": _interval(r),
                            "verdict": verdict(r), "seeds": int(r["n_seeds"]), "problems": int(r["n_problems"])}
                           | ({"verdict, family-wise (Holm)": "–" if fw is None else
                               verdict(r) if fw else "not separated"} if "family" in table else {}))
    return out


def heldout_problems(runs: Runs) -> int | None:
    """The task's held-out problems (task.n_heldout of the runs' config): the most a re-scoring can score without
    new runs. None where the configs do not say."""
    found = [(cfg.get("task") or {}).get("n_heldout") for cfg in runs.configs.values()]
    return next((int(n) for n in found if isinstance(n, numbers.Integral)), None)


def design_rows(runs: Runs, table: pd.DataFrame | None = None) -> list[dict]:
    """Per metric: the smallest difference the design detects (α 0.05, power 0.8), the median over pairs, what
    would halve it (the pair at that median) and the held-out problems the task has (more problems than that need
    new runs: `halving_text`)."""
    table = tests(runs)[0] if table is None else table
    heldout = heldout_problems(runs)
    out = []
    for metric, g in table.groupby("metric", sort=False):
        g = g.sort_values("mde").reset_index(drop=True)
        mid = g.iloc[(len(g) - 1) // 2]
        out.append({"metric": metric_name(metric, mid["k"]), "seeds": int(mid["n_seeds"]),
                    "problems": int(mid["n_problems"]),
                    "detectable difference (median over pairs)": f"{mid['mde']:.3f}",
                    "range over pairs": f"{g['mde'].min():.3f}–{g['mde'].max():.3f}",
                    "seeds to halve it": mid["seeds_to_halve"], "problems to halve it": mid["problems_to_halve"]}
                   | ({"held-out problems (task.n_heldout)": heldout} if heldout else {}))
    return out


def halving_text(d: dict) -> str:
    """What would halve the detectable difference of a design_rows row, and what it takes: more seeds are new
    training runs; more problems, up to the task's task.n_heldout, a re-scoring of the same models (`python -m
    gcframe.evaluate`); beyond it, new runs with a larger task.n_heldout."""
    parts = []
    if isinstance(d["seeds to halve it"], numbers.Integral):
        parts.append(f"{int(d['seeds to halve it'])} seeds (new training runs)")
    n, heldout = d["problems to halve it"], d.get("held-out problems (task.n_heldout)")
    if isinstance(n, numbers.Integral):
        if heldout and n > heldout:
            parts.append(f"{int(n)} problems (more than the task's {heldout} held-out problems: new runs with "
                         f"task.n_heldout >= {int(n)}, then re-scored)")
        elif heldout:
            parts.append(f"{int(n)} problems (the same models re-scored: python -m gcframe.evaluate OUT "
                         f"--problems {int(n)})")
        else:
            parts.append(f"{int(n)} problems")
    return " or ".join(parts) or "neither more seeds nor more problems alone"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def design_size(g: pd.DataFrame) -> str:
    """'3 seeds × 500 problems'."""
    return f"{_count(int(g['n_seeds'].iloc[0]), 'seed')} × {int(g['n_problems'].iloc[0])} problems"


def _design(g: pd.DataFrame) -> str:
    """`design_size`, and at one seed what its intervals cover (SCOPE)."""
    return design_size(g) + (f": {SCOPE}" if one_seed(g) else "")


def ranking(runs: Runs, table: pd.DataFrame, metric: str) -> list[tuple[str, float]]:
    """Methods by their mean outcome on `metric` (the mean over seeds and problems the pairs were tested on)."""
    for frame, metrics, _, _ in runs.outcomes():
        if metric in metrics:
            means = frame.groupby("method", sort=False)[metric].mean()
            return sorted(((m, float(v)) for m, v in means.items()), key=lambda x: -x[1])
    return []


def wins(g: pd.DataFrame) -> set[tuple[str, str]]:
    """(winner, loser) of every separated pair of one metric's rows."""
    return {(r["a"], r["b"]) if r["diff"] > 0 else (r["b"], r["a"]) for _, r in g[g["separated"]].iterrows()}


def ordered_groups(order: list[str], g: pd.DataFrame) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """The groups of methods that the paired test orders, from one metric's rows -> (groups, best first; the
    separated pairs inside a group).

    The rule: take the methods in the order of their means (`order`) and cut between two neighbours wherever every
    method above the cut is separated above every method below it (each such pair's interval excludes 0 in that
    direction). The groups are the runs of methods between cuts: "{a, b} > c > d" says that a and b each beat c and
    d and that c beats d, and nothing about a against b. A group's members are not ordered by the test against each
    other, except the separated pairs inside it, which are returned beside the groups (e.g. a > c inside {a, b, c}
    where b is separated from neither). The groups are a summary of pairs.csv, never more than it: every ">"
    between groups stands for pairs each separated in that direction."""
    won = wins(g)
    seen = set(g["a"]) | set(g["b"])
    order = [m for m in order if m in seen] + sorted(seen - set(order))
    groups: list[list[str]] = []
    for i, m in enumerate(order):
        if i and all((a, b) in won for a in order[:i] for b in order[i:]):
            groups.append([m])
        elif groups:
            groups[-1].append(m)
        else:
            groups = [[m]]
    where = {m: i for i, grp in enumerate(groups) for m in grp}
    inside = sorted(((a, b) for a, b in won if where[a] == where[b]), key=lambda p: (order.index(p[0]),
                                                                                      order.index(p[1])))
    return groups, inside


def _group(members: list[str]) -> str:
    return members[0] if len(members) == 1 else "{" + ", ".join(members) + "}"


LISTED = 12
"""The separated pairs inside a group a findings sentence names; pairs.csv holds every one."""


def groups_text(order: list[str], g: pd.DataFrame) -> str:
    """The clause of a findings sentence (`ordered_groups`): 'it orders {a, b} > c > d', then the separated pairs
    inside a group ('; within {a, b, c}: a > c'); where no cut exists but pairs are separated, 'it orders no group
    of methods above the rest; within ...'; '' where nothing is separated."""
    groups, inside = ordered_groups(order, g)
    within = {}
    for a, b in inside[:LISTED]:
        within.setdefault(next(_group(grp) for grp in groups if a in grp), []).append(f"{a} > {b}")
    parts = [f"within {grp}: {', '.join(pairs)}" for grp, pairs in within.items()]
    if len(inside) > LISTED:  # a sentence is not a table: the rest are pairs.csv's rows
        parts[-1] += f" and {len(inside) - LISTED} more separated pairs (pairs.csv lists every pair)"
    if len(groups) > 1:
        parts.insert(0, "it orders " + " > ".join(_group(grp) for grp in groups))
    elif parts:
        parts.insert(0, "it orders no group of methods above the rest")
    return "; ".join(parts)


def claim_lines(runs: Runs, table: pd.DataFrame) -> list[str]:
    """One line per DeepSeekMath ordering: its verdict and interval on every metric."""
    by_claim: dict[tuple, list[str]] = {}
    fw: dict[tuple, list[str]] = {}
    rows = claim_rows(runs, table)
    for c in rows:
        key = (c["claim (DeepSeekMath)"], c["comparison"])
        by_claim.setdefault(key, []).append(f"{c['metric']} {c['verdict']} ({c['Δ [95% interval]']})")
        if c.get("verdict, family-wise (Holm)", "–") != "–":
            fw.setdefault(key, []).append(f"{c['metric']} {c['verdict, family-wise (Holm)']}")
    scope = f" (1 seed: {SCOPE})" if rows and all(c["seeds"] == 1 for c in rows) else ""
    return [f"DeepSeekMath {claim.split(':')[0]}, {comp}: {'; '.join(parts)}{scope}"
            + (f"; family-wise (Holm): {'; '.join(fw[(claim, comp)])}" if (claim, comp) in fw else "") + "."
            for (claim, comp), parts in by_claim.items()]


def sentences(runs: Runs, table: pd.DataFrame | None = None, gains: pd.DataFrame | None = None) -> list[str]:
    """What the comparison found, one finding a line: per metric the ranking, how many pairs are separated and the
    groups of methods the test orders (`groups_text`; every pair is in pairs.csv and the report's pairs.png), the
    §5.2 orderings, what the design can detect, and what pairing bought. At one seed each verdict says what its
    interval covers (SCOPE)."""
    table = tests(runs)[0] if table is None else table
    if table.empty:
        return ["No two methods were scored on the same problems: nothing to compare."]
    lines = []
    for metric, g in table.groupby("metric", sort=False):
        name = metric_name(metric, g["k"].iloc[0])
        ranked = ", ".join(f"{m} {v:.3f}" for m, v in ranking(runs, table, metric))
        sep = int(g["separated"].sum())
        order = [m for m, _ in ranking(runs, table, metric)]
        line = f"**{name}** ({_design(g)}): {sep} of {_count(len(g), 'pair')} separated by the paired test"
        if sep:
            line += f"; {groups_text(order, g)}"
        lines.append(line + f". Means: {ranked}." + (f" {PER_COMPARISON}" if sep else ""))
    lines += claim_lines(runs, table)
    for d in design_rows(runs, table):
        lines.append(f"The design detects {d['metric']} differences of {d['detectable difference (median over pairs)']}"
                     f" (median over pairs; α 0.05, power 0.8); {halving_text(d)} would halve that.")
    ratio = table["se"] / table["unpaired_se"]
    lines.append(f"Pairing by problem and seed gave standard errors {ratio.min():.2f}–{ratio.max():.2f} times the "
                 f"unpaired ones (median {ratio.median():.2f}).")
    return lines + gain_line(runs, gain_table(runs) if gains is None else gains)


def headline(runs: Runs, table: pd.DataFrame, gains: pd.DataFrame | None = None) -> list[str]:
    """The short form (the README's): greedy's separated pairs and the groups they order, the §5.2 orderings on
    greedy, the gains over the base, and the design's power for greedy differences."""
    g = table[table["metric"] == "greedy"]
    if g.empty:
        return []
    order = [m for m, _ in ranking(runs, table, "greedy")]
    lines = [f"Greedy accuracy ({_design(g)}): {int(g['separated'].sum())} of {_count(len(g), 'pair')} separated by "
             f"the paired test" + (f"; {groups_text(order, g)}. {PER_COMPARISON}" if g["separated"].any() else ".")]
    lines += [c for c in claim_lines(runs, g)] + gain_line(runs, gain_table(runs) if gains is None else gains)
    d = next((d for d in design_rows(runs, g) if d["metric"] == "greedy"), None)
    if d:
        lines.append(f"This design separates a true greedy difference of "
                     f"{d['detectable difference (median over pairs)']} with probability 0.8 (α 0.05, median over "
                     "pairs); smaller ones less often, not never.")
    return lines


def declared_families(runs) -> dict:
    """The `families:` of the config the runs were started with (compare.py writes it into OUT/config.yaml; a
    result's config.yaml), checked (analysis.families.check); {} where it declares none."""
    import yaml
    from pathlib import Path

    where = getattr(runs, "out", None) or getattr(runs, "folder", None)
    cfg = Path(where) / "config.yaml" if where is not None else None
    if cfg is None or not cfg.is_file():
        return {}
    return families.check((yaml.safe_load(cfg.read_text()) or {}).get("families"))


def write(runs: Runs, folder, prefix: str = "", spec: dict | None = None) -> list[str]:
    """pairs.csv, findings.csv, design.csv and findings.md into `folder` -> the sentences; gains.csv and
    gains_greedy.csv over a re-scored base; over_<baseline>.csv, every method against the SFT baseline given the
    checker's information (BASELINES: sft_filtered, else sft_clean), where one ran; families.csv and the family-wise
    columns of pairs.csv and gains.csv where the config declares families (`spec`, else `declared_families`), and
    family_<name>.csv for each family of listed pairs (`family_summary`)."""
    from pathlib import Path

    folder = Path(folder)
    table, sources = tests(runs)
    if table.empty:
        return []
    spec = declared_families(runs) if spec is None else families.check(spec)
    views = subgroups(runs)  # the planned subgroups' rows follow all problems' (ALL) in pairs.csv and gains.csv
    parts = [table.assign(subgroup=ALL)] + [tests(v)[0].assign(subgroup=v.name) for v in views]
    every_pair = pd.concat(parts, ignore_index=True)
    gains = gain_table(runs)  # once: it reads every per-problem file
    sub_gains = [gain_table(v) for v in views]
    every_gain = pd.concat([gains.assign(subgroup=ALL)] + [g.assign(subgroup=v.name) for v, g in zip(views, sub_gains)],
                           ignore_index=True) if len(gains) else pd.DataFrame()
    every_pair, every_gain, family_rows = families.adjust(spec, every_pair, every_gain, runs.base_label)
    table = every_pair[every_pair["subgroup"] == ALL].reset_index(drop=True)  # with its family-wise columns
    if len(gains):
        gains = every_gain[every_gain["subgroup"] == ALL].reset_index(drop=True)
        sub_gains = [every_gain[every_gain["subgroup"] == v.name].reset_index(drop=True) for v in views]
    pd.DataFrame(pair_rows(runs, every_pair)).to_csv(folder / f"{prefix}pairs.csv", index=False)
    baseline = next((b for b in BASELINES if b in set(table["a"]) | set(table["b"])), None)
    if baseline:  # each method against the SFT baseline given the checker's information
        versus_summary(every_pair, baseline).to_csv(folder / f"{prefix}over_{baseline}.csv", index=False)
    claims = claim_rows(runs, table)
    if claims:
        pd.DataFrame(claims).to_csv(folder / f"{prefix}findings.csv", index=False)
    pd.DataFrame(design_rows(runs, table)).to_csv(folder / f"{prefix}design.csv", index=False)
    if family_rows:
        pd.DataFrame(family_rows).to_csv(folder / f"{prefix}families.csv", index=False)
    for name, fam in spec.items():  # a family of listed pairs, as a table of its own: family_<name>.csv
        if isinstance(fam.get("pairs"), list):
            family_summary(every_pair, fam["pairs"], families.METRICS[fam["metric"]]).to_csv(
                folder / f"{prefix}family_{name}.csv", index=False)
    if len(gains):
        rows = pd.DataFrame(gain_rows(runs, every_gain))
        rows.to_csv(folder / f"{prefix}gains.csv", index=False)
        gain_summary(rows).to_csv(folder / f"{prefix}gains_greedy.csv", index=False)
    family_lines = [families.sentence(r) for r in family_rows]
    seeds = [runs.seed_line] if getattr(runs, "seed_line", None) else []  # which seeds decide (analysis.redecide)
    lines = seeds + family_lines + sentences(runs, table, gains) + subgroup_gain_lines(views, sub_gains)
    note = f"\n<sub>Outcomes: {'; '.join(sources)}.</sub>\n"
    (folder / f"{prefix}findings.md").write_text("".join(f"- {s}\n" for s in lines) + note)
    short = seeds + [s for s, r in zip(family_lines, family_rows) if r["metric"] == "greedy"]  # the families first
    short += headline(runs, table, gains) + (subgroup_gain_lines(views, sub_gains) if not table.empty and
                                             (table["metric"] == "greedy").any() else [])
    (folder / f"{prefix}headline.md").write_text("".join(f"- {s}\n" for s in short) + note)
    return lines


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.findings", description=__doc__.split("\n")[0])
    p.add_argument("out", help="the output folder of experiments/compare.py")
    args = p.parse_args(argv)
    print("\n".join(sentences(Runs(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
