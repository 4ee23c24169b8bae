"""Every published interval is re-derived from the per-problem outcomes committed beside it, in full: a number changed
in a result's files (and then copied into the README by `python -m analysis.results`) fails here.

Every result with paired findings publishes the outcomes behind them (results/<name>/problems.csv.gz; the runs'
outcomes at every evaluated step in problems_by_step.csv.gz). From them, with the documented formula (analysis.paired:
the two-way seeds × problems interval on min(Satterthwaite's ν, S − 1) df, over the test seeds where 2 or more are committed, P(A>B)
over the seed means), every row of

    pairs.csv             every pair × metric × planned subgroup, and no pair missing
    gains.csv             each method − the base model; gains_greedy.csv its greedy rows by subgroup
    over_<baseline>.csv   each method − the SFT baseline by subgroup (the README's table)
    findings.csv          DeepSeekMath's orderings
    interaction.csv       A − B at the early and the last step and their change; by_step.csv A − B at every step

is computed again and compared with the published digits (a value rounded to the decimals shown: the computed one
within half a unit of its last digit). The pairs are computed batched, all pairs of a metric and subgroup as one
array (analysis.paired's mean squares and components take leading axes), so the default's 3,600 pairs take seconds.
A planned subgroup's rows (their `subgroup` column: carry / no_carry) come from the outcomes of that subgroup's
problems; the task built from the result's config.yaml says which problem is in which
(analysis.findings.problem_subgroups)."""
from __future__ import annotations

import functools
import itertools
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import families, paired
from analysis.redecide import decided_on
from analysis.runs import TEACHER

RESULTS = Path(__file__).resolve().parents[1] / "results"
PAIRED = sorted(p.parent.name for p in RESULTS.glob("*/pairs.csv"))
COLUMN = {"greedy": "greedy", "maj": "majk", "pass": "passk", "pass@1": "pass1"}
NUMBER = re.compile(r"[+-]?\d+\.\d+")


def _column(metric: str) -> str:
    """pairs.csv's metric label -> the outcome column: greedy, maj@k, pass@k, pass@1."""
    return "pass1" if metric == "pass@1" else COLUMN[re.sub(r"@\d+$", "", metric)]


# -- the paired test, batched -----------------------------------------------------------------------------------
def _two_way(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, Var(mean), ν) of n S × P tables d[n, s, p]: analysis.paired.two_way on each."""
    n, S, P = d.shape
    if S == 1:  # problems only
        D, cols = d.mean(axis=(-2, -1)), d.mean(axis=-2)
        ms_p = ((cols - D[:, None]) ** 2).sum(axis=-1) / (P - 1)
        return D, np.maximum(ms_p / P, paired.FLOOR), np.full(n, P - 1.0)
    D, ms_s, ms_p, ms_e = paired.mean_squares(d)
    sv, pv = paired.truncated_components(ms_s, ms_p, ms_e, S, P)
    var, df = paired.components_variance(sv, pv, ms_e, S, P)
    return D, np.maximum(var, paired.FLOOR), np.minimum(df, S - 1.0)  # the kept test's ν: at most the seed term's


def _intervals(d: np.ndarray) -> dict:
    """diff, lo, hi, separated of n paired tables d[n, s, p] (analysis.paired.t_interval at 95%)."""
    D, var, df = _two_way(d)
    half = stats.t.ppf(0.975, df) * np.sqrt(var)
    lo, hi = D - half, D + half
    p = 2 * stats.t.sf(np.abs(D) / np.sqrt(var), df)  # the same t statistic's two-sided p-value
    return {"diff": D, "lo": lo, "hi": hi, "separated": (lo > 0) | (hi < 0), "var": var, "p": p}


class Outcomes:
    """A result's per-problem outcomes as arrays: y[col][method, seed, problem], NaN where a cell was not scored."""

    def __init__(self, frame: pd.DataFrame, groups: dict | None = None):
        m, self.methods = pd.factorize(frame["method"])
        s, seeds = pd.factorize(frame["seed"])
        p, self.problems = pd.factorize(frame["problem"])
        self.seeds, self._tables = np.asarray(seeds), {}
        shape = (len(self.methods), len(self.seeds), len(self.problems))
        cell = np.ravel_multi_index((m, s, p), shape)
        assert np.bincount(cell).max() == 1, "a (method, seed, problem) has more than one row"
        self.y = {}
        for col in set(paired.METRICS) & set(frame.columns):
            y = np.full(shape, np.nan)
            y[m, s, p] = frame[col].to_numpy(float)
            self.y[col] = y
        self.index = {name: i for i, name in enumerate(self.methods)}
        self.group = np.asarray([groups[q] for q in self.problems]) if groups else None

    def scored(self, col: str) -> list[str]:
        """The methods scored on `col`, in the order the file first lists them."""
        return [m for i, m in enumerate(self.methods) if not np.isnan(self.y[col][i]).all()]

    def table(self, method: str, col: str, group: str = "all") -> tuple[tuple, tuple, np.ndarray]:
        """(seeds, problems, S × P outcomes) of one method on `col` and the problems of `group`; every seed scored on
        the same problems (as analysis.paired requires of a published pair)."""
        if (method, col, group) in self._tables:
            return self._tables[(method, col, group)]
        y = self.y[col][self.index[method]]
        if group != "all":
            y = y[:, self.group == group]
        seeds = ~np.isnan(y).all(axis=1)
        y = y[seeds]
        problems = ~np.isnan(y[0])
        assert (~np.isnan(y) == problems).all(), (method, col, "seeds scored on different problems")
        made = self._tables[(method, col, group)] = (tuple(self.seeds[seeds].tolist()),
                                                     tuple(np.flatnonzero(problems).tolist()), y[:, problems])
        return made


def derive(out: Outcomes, col: str, pairs: list[tuple[str, str]], group: str = "all") -> dict:
    """(a, b) -> the paired test of a − b on `col` (diff, lo, hi, separated, p_improve, seeds, problems, se_ratio:
    the paired SE over the unpaired one), every pair of a design computed at once."""
    groups: dict = {}
    for a, b in pairs:
        (sa, pa, ya), (sb, pb, yb) = out.table(a, col, group), out.table(b, col, group)
        assert pa == pb, (a, b, col, "scored on different problems")
        seeds = sorted(set(sa) & set(sb))
        ya, yb = ya[[sa.index(s) for s in seeds]], yb[[sb.index(s) for s in seeds]]
        groups.setdefault((len(seeds), pa), []).append(((a, b), ya, yb))
    result = {}
    for (S, problems), members in groups.items():
        ya, yb = np.stack([m[1] for m in members]), np.stack([m[2] for m in members])
        r = _intervals(ya - yb)
        var_a, var_b = _two_way(ya)[1], _two_way(yb)[1]
        xa, xb = ya.mean(axis=-1), yb.mean(axis=-1)  # seed means
        u = ((xa[:, :, None] > xb[:, None, :]) + 0.5 * (xa[:, :, None] == xb[:, None, :])).sum(axis=(1, 2))
        for i, (pair, _, _) in enumerate(members):
            result[pair] = {k: r[k][i] for k in ("diff", "lo", "hi", "separated", "p")} | {
                "p_improve": u[i] / (S * S), "seeds": S, "problems": len(problems),
                "se_ratio": math.sqrt(r["var"][i]) / math.sqrt(var_a[i] + var_b[i])}
    return result


# -- a result's outcomes ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _outcomes(folder: Path) -> Outcomes:
    frame = pd.read_csv(folder / "problems.csv.gz")
    decided = decided_on(folder)  # the test seeds, where 2 or more are committed (analysis.seeds)
    if decided is not None:
        frame = frame[frame["seed"].isin(decided)].reset_index(drop=True)
    return Outcomes(frame, _groups(folder, frame) if _planned(folder) else None)


def _planned(folder: Path) -> bool:
    """Whether the result publishes rows of planned subgroups (a `subgroup` column with more than `all`)."""
    pairs = folder / "pairs.csv"
    return pairs.is_file() and bool((pd.read_csv(pairs, usecols=lambda c: c == "subgroup").get(
        "subgroup", pd.Series(["all"])) != "all").any())


_GROUPS: dict = {}


def _groups(folder: Path, frame: pd.DataFrame) -> dict:
    """problem -> planned subgroup, from the result's config.yaml and, where its prompts are a chat template's, the
    place among the test problems its outcomes record (analysis.findings.problem_subgroups); built once per config
    and problem set (a copy of a result reuses it)."""
    from types import SimpleNamespace

    import yaml

    from analysis.findings import problem_subgroups
    from analysis.runs import RESCORED_SOURCE

    config = (folder / "config.yaml").read_text()
    key = (config, frozenset(frame["problem"]))
    if key not in _GROUPS:
        runs = SimpleNamespace(configs={("result", 0): yaml.safe_load(config)},
                               outcomes=lambda: [(frame, ["greedy"], f"{RESCORED_SOURCE} (problems.csv.gz)", 0)])
        _GROUPS[key] = problem_subgroups(runs)
        assert _GROUPS[key], (folder.name, "no planned subgroups for its problems")
    return _GROUPS[key]


@functools.lru_cache(maxsize=64)
def _derived(folder: Path, metric: str, group: str, pairs: tuple) -> dict:
    return derive(_outcomes(folder), _column(metric), list(pairs), group)


def _table(folder: Path, name: str) -> list[dict]:
    return pd.read_csv(folder / name, dtype=str, keep_default_na=False).to_dict("records")


# -- comparing digits -------------------------------------------------------------------------------------------
def _numbers_match(published: str, values) -> bool:
    """Whether the numbers written in `published` ("+0.122 [+0.049, +0.194]") are `values`, each rounded to the
    decimals shown: within half a unit of its last digit."""
    found = NUMBER.findall(published)
    return len(found) == len(values) and all(
        abs(float(s) - v) <= 0.5 * 10.0 ** -len(s.split(".")[1]) + 1e-9 for s, v in zip(found, values))


def _interval_ok(published: str, r: dict, flag: bool = False) -> bool:
    """'+0.122 [+0.049, +0.194]' (with `flag`, ', separated' when it is, or its family's verdict beside it:
    ', separated family-wise' / ', separated per comparison', analysis.families.mark, which tests/test_families.py
    checks): r's diff and interval."""
    mark = next((m for m in (", separated family-wise", ", separated per comparison") if published.endswith(m)),
                ", separated")
    text = published.removesuffix(mark)
    return _numbers_match(text, (r["diff"], r["lo"], r["hi"])) and (
        not flag or published.endswith(mark) == bool(r["separated"]))


def _row_ok(row, r: dict, interval: str) -> list[str]:
    """What of a pairs.csv / gains.csv row is not what the outcomes give (empty: all of it is)."""
    wrong = [] if _interval_ok(row[interval], r) else [f"{interval} {row[interval]}"]
    if row["separated"] != ("yes" if r["separated"] else "no"):
        wrong.append(f"separated {row['separated']}")
    if (row["seeds"], row["problems"]) != (str(r["seeds"]), str(r["problems"])):
        wrong.append(f"{row['seeds']} seeds × {row['problems']} problems")
    p = row.get("P(A>B)")
    if p not in (None, "–") and not _numbers_match(p, (r["p_improve"],)):
        wrong.append(f"P(A>B) {p}")
    se = row.get("paired SE / unpaired SE")
    if se is not None and not _numbers_match(se, (r["se_ratio"],)):
        wrong.append(f"paired SE / unpaired SE {se}")
    p = row.get("p")
    if p not in (None, "–") and not _significant_match(p, r["p"]):
        wrong.append(f"p {p}")
    return wrong


def _significant_match(published: str, value: float, digits: int = 3) -> bool:
    """Whether `published` ('0.00113', '1.2e-05') is `value` at `digits` significant digits (analysis.findings
    writes p as {:.3g}): within half a unit of the last one."""
    x = float(published)
    if x == 0:
        return abs(value) < 1e-300  # a p-value below what a float holds
    return abs(x - value) <= 0.5 * 10.0 ** (math.floor(math.log10(abs(x))) - digits + 1) * (1 + 1e-9)


# -- the checks: each -> the published rows the outcomes do not give ---------------------------------------------
def _by(rows: list[dict], *keys: str) -> dict:
    """rows grouped by `keys`, in the order first seen (a missing key: 'all', a table without subgroups)."""
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r.get(k, "all") for k in keys), []).append(r)
    return out


def check_pairs(folder: Path) -> list[str]:
    """pairs.csv: every row, and every pair of the methods scored on its metric in it (none missing)."""
    wrong, out, base = [], _outcomes(folder), _base(folder)
    for (metric, group), rows in _by(_table(folder, "pairs.csv"), "metric", "subgroup").items():
        listed = [tuple(r["comparison"].split(" − ")) for r in rows]
        scored = [m for m in out.scored(_column(metric)) if m not in (base, TEACHER)]  # the references
        if len(listed) != len(set(map(frozenset, listed))) or \
                set(map(frozenset, listed)) != set(map(frozenset, itertools.combinations(scored, 2))):
            wrong.append(f"{metric}, {group}: the pairs listed are not every pair of {', '.join(scored)}")
        got = _derived(folder, metric, group, tuple(listed))
        for pair, row in zip(listed, rows):
            wrong += [f"{' − '.join(pair)}, {metric}, {group}: {w}" for w in _row_ok(row, got[pair], "Δ [95% interval]")]
    return wrong


def _base(folder: Path) -> str | None:
    """The base model's label in problems.csv.gz (gains.csv's `over`), or None."""
    if not (folder / "gains.csv").is_file():
        return None
    over = {r["over"] for r in _table(folder, "gains.csv")}
    assert len(over) == 1, over
    return over.pop()


def check_gains(folder: Path) -> list[str]:
    """gains.csv (each method − the base: every method on every metric the base was scored on, by subgroup) and
    gains_greedy.csv (its greedy rows, a column per subgroup)."""
    wrong, out, base, derived = [], _outcomes(folder), _base(folder), {}
    for (metric, group), rows in _by(_table(folder, "gains.csv"), "metric", "subgroup").items():
        methods = [m for m in out.scored(_column(metric)) if m not in (base, TEACHER)]
        if sorted(r["method"] for r in rows) != sorted(methods):
            wrong.append(f"{metric}, {group}: the methods listed are not {', '.join(methods)}")
        got = _derived(folder, metric, group, tuple((r["method"], base) for r in rows))
        for row in rows:
            r = derived[(row["method"], metric, group)] = got[(row["method"], base)]
            wrong += [f"{row['method']} − {base}, {metric}, {group}: {w}" for w in _row_ok(row, r, "gain [95% interval]")]
    if (folder / "gains_greedy.csv").is_file():
        wrong += _by_subgroup(_table(folder, "gains_greedy.csv"), lambda m, g: derived.get((m, "greedy", g)),
                              "gains_greedy.csv")
    return wrong


def _by_subgroup(table: list[dict], of, name: str) -> list[str]:
    """A table of a row per method and a column per subgroup, each cell an interval and ', separated' (`of`:
    (method, subgroup) -> the derived pair, or None where none is)."""
    wrong = []
    for row in table:
        for group in list(row)[1:]:
            r = of(row["method"], group)
            if r is None or not _interval_ok(row[group], r, flag=True):
                wrong.append(f"{name}: {row['method']}, {group}: {row[group]}")
    return wrong


def check_over_baseline(folder: Path) -> list[str]:
    """over_<baseline>.csv: each method − the SFT baseline, every method of pairs.csv but the baseline."""
    wrong, out, base = [], _outcomes(folder), _base(folder)
    for f in sorted(folder.glob("over_*.csv")):
        baseline, table = f.stem.removeprefix("over_"), _table(folder, f.name)
        methods = [m for m in out.scored("greedy") if m not in (base, baseline, TEACHER)]
        if sorted(r["method"] for r in table) != sorted(methods):
            wrong.append(f"{f.name}: its methods are not {', '.join(sorted(methods))}")
        got = {g: _derived(folder, "greedy", g, tuple((r["method"], baseline) for r in table))
               for g in list(table[0])[1:]}
        wrong += _by_subgroup(table, lambda m, g: got[g][(m, baseline)], f.name)
    return wrong


def check_family_tables(folder: Path) -> list[str]:
    """family_<name>.csv: each declared family of listed pairs, every cell (a comparison in a subgroup) what the
    outcomes give, on the family's metric (config.yaml's families)."""
    import yaml

    wrong = []
    declared = (yaml.safe_load((folder / "config.yaml").read_text()) or {}).get("families") or {}
    for f in sorted(folder.glob("family_*.csv")):
        name, table = f.stem.removeprefix("family_"), _table(folder, f.name)
        if name not in declared:
            wrong.append(f"{f.name}: no family '{name}' in config.yaml")
            continue
        pairs = tuple(tuple(r["comparison"].split(" − ")) for r in table)
        column = families.METRICS[declared[name].get("metric", "greedy")]  # greedy, majk, passk, pass1
        for group in list(table[0])[1:] if table else []:
            got = derive(_outcomes(folder), column, list(pairs), group)
            wrong += [f"{f.name}: {row['comparison']}, {group}: {row[group]}" for row, pair in zip(table, pairs)
                      if not _interval_ok(row[group], got[pair], flag=True)]
    return wrong


def check_findings(folder: Path) -> list[str]:
    """findings.csv: DeepSeekMath's orderings on all problems, each a − b with its verdict, for every claim whose
    two methods ran."""
    from analysis.findings import CLAIMS, verdict

    if not (folder / "findings.csv").is_file():
        return []
    table, wrong = _table(folder, "findings.csv"), []
    metrics = list(dict.fromkeys(r["metric"] for r in _table(folder, "pairs.csv")))
    methods = set(_outcomes(folder).methods)
    expected = [(claim, f"{a} − {b}", m) for a, b, claim in CLAIMS if {a, b} <= methods for m in metrics]
    if [(r["claim (DeepSeekMath)"], r["comparison"], r["metric"]) for r in table] != expected:
        wrong.append("findings.csv: its rows are not every claim whose methods ran, on every metric")
    for row in table:
        a, b = row["comparison"].split(" − ")
        r = _derived(folder, row["metric"], "all", ((a, b),))[(a, b)]
        if not _interval_ok(row["Δ [95% interval]"], r) or row["verdict"] != verdict(r) or \
                (row["seeds"], row["problems"]) != (str(r["seeds"]), str(r["problems"])):
            wrong.append(f"findings.csv: {row['comparison']}, {row['metric']}: {row['Δ [95% interval]']}, "
                         f"{row['verdict']}")
    return wrong


def check_steps(folder: Path) -> list[str]:
    """interaction.csv and by_step.csv from problems_by_step.csv.gz, whose last step is problems.csv.gz's greedy."""
    from analysis.interaction import STEP_OUTCOMES

    steps_df, wrong = pd.read_csv(folder / STEP_OUTCOMES), []
    last = steps_df[steps_df["step"] == steps_df["step"].max()].drop(columns="step")
    final = pd.read_csv(folder / "problems.csv.gz")[["method", "seed", "problem", "greedy"]]
    merged = last.merge(final, on=["method", "seed", "problem"], suffixes=("", "_final"), how="outer")
    if merged[["greedy", "greedy_final"]].isna().any().any() or (merged["greedy"] != merged["greedy_final"]).any():
        wrong.append(f"{STEP_OUTCOMES}: its last evaluation is not problems.csv.gz's greedy outcomes")
    at = {int(s): Outcomes(g) for s, g in steps_df.groupby("step") if s > 0}
    methods = list(dict.fromkeys(steps_df["method"]))

    by = _table(folder, "by_step.csv")
    expected = {(frozenset(p), s) for p in itertools.combinations(methods, 2) for s in at}
    listed = [(frozenset((r["a"], r["b"])), int(r["step"])) for r in by]
    if len(listed) != len(expected) or set(listed) != expected:
        wrong.append("by_step.csv: its rows are not every pair at every evaluated step")
    for (step,), rows in _by(by, "step").items():
        pairs = [(r["a"], r["b"]) for r in rows]
        got = derive(at[int(step)], "greedy", pairs)
        for pair, row in zip(pairs, rows):
            r = got[pair]
            if not _numbers_match(f"{row['Δ']} {row['lo']} {row['hi']}", (r["diff"], r["lo"], r["hi"])) or \
                    row["separated"] != str(bool(r["separated"])):
                wrong.append(f"by_step.csv: {' − '.join(pair)} at step {step}: {row['Δ']} [{row['lo']}, {row['hi']}]")

    inter = _table(folder, "interaction.csv")
    early, late = (int(re.sub(r"\D", "", c)) for c in list(inter[0])[1:3])
    wanted = {frozenset(p) for p in itertools.combinations(methods, 2)}
    if len(inter) != len(wanted) or {frozenset(r["a − b"].split(" − ")) for r in inter} != wanted:
        wrong.append("interaction.csv: its rows are not every pair of the methods")
    for row in inter:
        a, b = row["a − b"].split(" − ")
        ys = {}
        for step in (early, late):
            (sa, pa, ya), (sb, pb, yb) = at[step].table(a, "greedy"), at[step].table(b, "greedy")
            assert (sa, pa) == (sb, pb)
            ys[step] = ya - yb
        r = _intervals(np.stack([ys[early], ys[late], ys[late] - ys[early]]))
        cells = [row[f"at step {early}"], row[f"at step {late}"], row["change (interaction)"]]
        ok = all(_numbers_match(c, (r["diff"][i], r["lo"][i], r["hi"][i])) for i, c in enumerate(cells))
        if not ok or row["changes with length"] != ("yes" if r["separated"][2] else "no") or \
                (row["seeds"], row["problems"]) != (str(len(sa)), str(len(pa))):
            wrong.append(f"interaction.csv: {row['a − b']}: {', '.join(cells)}, {row['changes with length']}")
    return wrong


# -- the tests --------------------------------------------------------------------------------------------------
def test_every_result_with_paired_findings_publishes_its_outcomes():
    for name in PAIRED:
        assert (RESULTS / name / "problems.csv.gz").exists(), name
    for f in RESULTS.glob("*/interaction.csv"):
        assert (f.parent / "problems_by_step.csv.gz").exists() and (f.parent / "by_step.csv").exists(), f.parent.name


@pytest.mark.parametrize("name", PAIRED)
def test_every_published_interval_is_recomputed_from_the_outcomes(name):
    folder = RESULTS / name
    wrong = check_pairs(folder) + check_over_baseline(folder) + check_findings(folder) + check_family_tables(folder)
    if (folder / "gains.csv").is_file():
        wrong += check_gains(folder)
    if (folder / "interaction.csv").is_file():
        wrong += check_steps(folder)
    assert wrong == [], f"{name}: {len(wrong)} published numbers are not what problems.csv.gz gives: {wrong[:5]}"


FORGERIES = [  # (file, a published cell, a forged one): the forgery first (a bound moved, then a verdict)
    ("over_sft_filtered.csv", '"+0.192 [+0.084, +0.300], separated per comparison"',
     '"+0.292 [+0.084, +0.300], separated per comparison"'),
    ("over_sft_filtered.csv", '"+0.192 [+0.084, +0.300], separated per comparison"', '"+0.192 [+0.084, +0.300]"'),
    ("pairs.csv", "sft − rft,greedy,\"-0.397 [-0.792, -0.002]\",0.00,yes,3,500,0.97,all",
     "sft − rft,greedy,\"-0.397 [-0.792, -0.002]\",0.00,yes,3,500,0.97,all".replace(",3,500", ",3,499")),
    ("pairs.csv", '0.97,all,0.0494,', '0.97,all,0.494,'),  # a p-value ten times too large
    ("gains.csv", 'sft,greedy,SFT base,"-0.003 [-0.054, +0.048]",0.67', 'sft,greedy,SFT base,"-0.003 [-0.054, +0.048]",0.97'),
    ("gains_greedy.csv", 'sft,"-0.003 [-0.054, +0.048]"', 'sft,"-0.003 [-0.054, +0.148]"'),
    ("findings.csv", '"+0.033 [-0.060, +0.127]",not separated', '"+0.033 [+0.060, +0.127]",not separated'),
]


@pytest.mark.parametrize("file, cell, forged", FORGERIES)
def test_a_forged_number_is_caught(tmp_path, file, cell, forged):
    """A copy of the default with one published cell changed: the checks name it (the issue: dapo's +0.122 made
    +0.222 in over_sft_filtered.csv, copied into the README by analysis.results, then passed every test)."""
    copy = tmp_path / "default"
    shutil.copytree(RESULTS / "default", copy, ignore=shutil.ignore_patterns("*.png", "*.md"))
    text = (copy / file).read_text()
    assert text.count(cell) == 1, cell
    (copy / file).write_text(text.replace(cell, forged))
    check = {"over_sft_filtered.csv": check_over_baseline, "pairs.csv": check_pairs, "gains.csv": check_gains,
             "gains_greedy.csv": check_gains, "findings.csv": check_findings}[file]
    wrong = check(copy)
    assert len(wrong) == 1, wrong


def test_a_forged_step_table_is_caught(tmp_path):
    copy = tmp_path / "rft_vs_online"
    shutil.copytree(RESULTS / "rft_vs_online", copy, ignore=shutil.ignore_patterns("*.png", "*.md"))
    assert check_steps(copy) == []
    by = (copy / "by_step.csv").read_text()
    (copy / "by_step.csv").write_text(by.replace("rft,online_rft,200,-0.0520", "rft,online_rft,200,-0.0620", 1))
    inter = (copy / "interaction.csv").read_text()
    (copy / "interaction.csv").write_text(inter.replace('"-0.068 [-0.262, +0.126]",no', '"-0.068 [-0.262, +0.126]",yes'))
    assert [w.split(":")[0] for w in check_steps(copy)] == ["by_step.csv", "interaction.csv"]


def test_a_forged_family_table_is_caught(tmp_path):
    """family_<name>.csv (a declared family of pairs, a column per subgroup): a moved bound and a verdict that the
    interval does not give are each named."""
    copy = tmp_path / "default"
    shutil.copytree(RESULTS / "default", copy, ignore=shutil.ignore_patterns("*.png", "*.md"))
    assert check_family_tables(copy) == []
    f = copy / "family_deepseekmath.csv"
    text = f.read_text()
    forged = text.replace('"+0.033 [-0.060, +0.127]"', '"+0.033 [-0.050, +0.127]"').replace(
        '"-0.032 [-0.188, +0.124]"', '"-0.032 [-0.188, +0.124], separated"')
    assert forged.count("-0.050, +0.127") == 1 and forged.count("+0.124], separated") == 1
    f.write_text(forged)
    assert [w.split(":")[1].strip().split(",")[0] for w in check_family_tables(copy)] == [
        "online_rft − rft", "grpo − online_rft"]
