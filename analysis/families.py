"""Families of comparisons and their family-wise verdicts: Holm's (1979) step-down adjustment of the paired test's
p-values within each family.

A result's config names the comparisons its prose decides on, grouped in families, in its `families:` section:

    families:
      over_sft_filtered: {against: sft_filtered, metric: greedy, subgroups: [all, carry, no_carry]}
      over_base: {against: base, metric: greedy, subgroups: [all, carry, no_carry]}
      deepseekmath: {pairs: [[online_rft, rft], [grpo, online_rft], [grpo_ps, grpo]], metric: greedy}
      every_pair: {pairs: all, metric: greedy, declared: after the runs}

`against: LABEL` is every method run against LABEL (`base`: against the model the runs started from, the rows of
gains.csv); `pairs:` lists [A, B] pairs, or `all` for every pair of the methods run. `metric` is one of greedy,
maj@k, pass@k, pass@1 (default greedy); `subgroups` the planned subgroups of the test problems it is decided on
(default [all]), each its own family: a family is the comparisons of one question, and a subgroup asks its own (a
gain on every problem, a gain on the carries, a cost on the rest). `declared` says when the family was written into
the config: "before the runs" (the default: a config read by compare.py before anything runs) or, where a family was
declared for a result made earlier, "after the runs". `min_effect` (in (0, 1]) is the smallest difference the family
must detect: analysis.plan sizes the test seeds for it, family-wise. The comparisons of a family are those among the methods that
ran; a comparison is in at most one family.

The paired test gives each comparison its two-sided p-value, p = 2·P(T_ν > |D|/SE) (analysis.paired.t_interval:
separated per comparison ⟺ p < 0.05). Within a family of m comparisons Holm's method orders the p-values,
p_(1) ≤ … ≤ p_(m), and its adjusted p-values are p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)); a comparison is
separated family-wise where p̃ < 0.05, and then the chance that any comparison of the family is separated where its
difference is 0 is at most 0.05, whatever the dependence between the comparisons (every method against one baseline
shares that baseline's outcomes). docs/concepts/statistics.md says why Holm and not simultaneous intervals.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gcframe.errors import UserError

ALPHA = 0.05
BASE = "base"
"""`against: base`: every method against the model the runs started from (analysis.findings.gain_table)."""
KEYS = {"against", "pairs", "metric", "subgroups", "declared", "min_effect"}
METRICS = {"greedy": "greedy", "pass@1": "pass1", "pass1": "pass1", "maj@k": "majk", "majk": "majk",
           "pass@k": "passk", "passk": "passk"}
DECLARED = "before the runs"


def holm(p) -> np.ndarray:
    """Holm's adjusted p-values of one family, in the order given: p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))
    over the p-values sorted ascending (ties keep their order)."""
    p = np.asarray(p, float)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (len(p) - np.arange(len(p))) * p[order])
    out = np.empty(len(p))
    out[order] = np.maximum.accumulate(scaled)
    return out


def check(spec) -> dict[str, dict]:
    """A config's `families:` section, each family's options completed (metric greedy, subgroups [all], declared
    before the runs), or a UserError naming what is wrong."""
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise UserError(f"config section 'families' must map family names to options, got {spec!r}")
    out = {}
    for name, f in spec.items():
        where = f"families.{name}"
        if not isinstance(f, dict):
            raise UserError(f"{where} must be a mapping (against: LABEL or pairs: [[A, B], ...]), got {f!r}")
        unknown = sorted(set(f) - KEYS)
        if unknown:
            raise UserError(f"unknown option(s) {', '.join(unknown)} in {where}: known are {', '.join(sorted(KEYS))}")
        if ("against" in f) == ("pairs" in f):
            raise UserError(f"{where} needs exactly one of against: LABEL (every method against it) and pairs: "
                            "[[A, B], ...] (or pairs: all)")
        pairs = f.get("pairs")
        if pairs is not None and pairs != "all" and not (
                isinstance(pairs, list) and pairs and all(isinstance(p, list) and len(p) == 2 and p[0] != p[1]
                                                         and all(isinstance(x, str) for x in p) for p in pairs)):
            raise UserError(f"{where}.pairs must be 'all' or a list of [A, B] pairs of two labels, got {pairs!r}")
        if "against" in f and not isinstance(f["against"], str):
            raise UserError(f"{where}.against must be a label (or 'base'), got {f['against']!r}")
        metric = f.get("metric", "greedy")
        if metric not in METRICS:
            raise UserError(f"{where}.metric must be one of greedy, maj@k, pass@k, pass@1, got {metric!r}")
        subs = f.get("subgroups", ["all"])
        if not (isinstance(subs, list) and subs and all(isinstance(s, str) for s in subs)):
            raise UserError(f"{where}.subgroups must be a list of subgroup names (all, or the task's), got {subs!r}")
        declared = f.get("declared", DECLARED)
        if not isinstance(declared, str) or not declared.strip():
            raise UserError(f"{where}.declared must say when the family was declared (e.g. 'before the runs'), "
                            f"got {declared!r}")
        effect = f.get("min_effect")
        if effect is not None and (isinstance(effect, bool) or not isinstance(effect, (int, float))
                                   or not 0 < effect <= 1):
            raise UserError(f"{where}.min_effect must be a difference in accuracy in (0, 1] (e.g. 0.1, the smallest "
                            f"the family must detect), got {effect!r}")
        out[str(name)] = {**({"against": f["against"]} if "against" in f else {"pairs": pairs}),
                          "metric": METRICS[metric], "subgroups": list(subs), "declared": declared,
                          **({"min_effect": float(effect)} if effect is not None else {})}
    return out


def describe(f: dict) -> str:
    """'every method − sft_filtered', 'every method − the base', 'every pair', '3 pairs'."""
    if "against" in f:
        return f"every method − {'the base' if f['against'] == BASE else f['against']}"
    return "every pair" if f["pairs"] == "all" else f"{len(f['pairs'])} pair{'s' * (len(f['pairs']) != 1)}"


def _members(f: dict, rows: pd.DataFrame, base: str) -> pd.Series:
    """Which rows of a paired-test table (columns a, b) are this family's comparisons (`metric` and subgroup aside)."""
    if "against" in f:
        other = base if f["against"] == BASE else f["against"]
        return (rows["a"] == other) | (rows["b"] == other)
    if f["pairs"] == "all":
        return pd.Series(True, index=rows.index)
    wanted = {frozenset(p) for p in f["pairs"]}
    return pd.Series([frozenset((a, b)) in wanted for a, b in zip(rows["a"], rows["b"])], index=rows.index)


def adjust(spec: dict, pairs: pd.DataFrame, gains: pd.DataFrame, base: str):
    """Every family's comparisons found in the paired tests (`pairs`: analysis.findings' every pair, `gains`: every
    method − the base, each with `metric`, `subgroup`, `p` and `separated`) -> (pairs, gains) with the columns
    `family`, `p_holm` and `fw_separated` (None outside every family), and the families' summary rows
    (`summary`). A family's subgroup that the result does not have is refused in one line."""
    pairs, gains = pairs.copy(), gains.copy()
    for t in (pairs, gains):
        if len(t):
            t["family"], t["p_holm"], t["fw_separated"] = None, math.nan, None
    found = []
    known = set(pairs.get("subgroup", pd.Series(dtype=str))) | set(gains.get("subgroup", pd.Series(dtype=str)))
    for name, f in spec.items():
        table = gains if "against" in f and f["against"] == BASE else pairs
        missing = [s for s in f["subgroups"] if s not in known]
        if missing and len(table):
            raise UserError(f"families.{name}.subgroups names {', '.join(missing)}, which this result does not have "
                            f"(its subgroups: {', '.join(sorted(known)) or 'all'})")
        if table.empty:
            continue
        for sub in f["subgroups"]:
            rows = table[(table["metric"] == f["metric"]) & (table["subgroup"] == sub)]
            rows = rows[_members(f, rows, base)]
            if rows.empty:
                continue
            taken = rows[rows["family"].notna()]
            if len(taken):
                r = taken.iloc[0]
                raise UserError(f"{r['a']} − {r['b']} ({f['metric']}, {sub}) is in families {r['family']} and {name}: "
                                "a comparison belongs to one family")
            adjusted = holm(rows["p"])
            table.loc[rows.index, "family"] = name
            table.loc[rows.index, "p_holm"] = adjusted
            table.loc[rows.index, "fw_separated"] = (adjusted < ALPHA) & rows["separated"].astype(bool).to_numpy()
            found.append((name, f, sub, table.loc[rows.index]))
    return pairs, gains, [summary(name, f, sub, rows, base) for name, f, sub, rows in found]


def _oriented(r, f: dict, base: str) -> tuple[str, float]:
    """A family row as its summary names it, with its difference in the family's direction: (the method, method −
    baseline) for against-families, (A − B, its difference) for pairs, in the order the config lists the pair."""
    if "against" in f:
        other = base if f["against"] == BASE else f["against"]
        return (r["b"], -r["diff"]) if r["a"] == other else (r["a"], r["diff"])
    if f["pairs"] != "all" and [r["b"], r["a"]] in f["pairs"] and [r["a"], r["b"]] not in f["pairs"]:
        return f"{r['b']} − {r['a']}", -r["diff"]
    return f"{r['a']} − {r['b']}", r["diff"]


def summary(name: str, f: dict, sub: str, rows: pd.DataFrame, base: str) -> dict:
    """One row of families.csv: the family, its subgroup, how many comparisons are separated per comparison and
    family-wise, and which ones family-wise, above and below (in the family's direction)."""
    fw = [_oriented(r, f, base) for _, r in rows[rows["fw_separated"].astype(bool)].iterrows()]
    up, down = [n for n, d in fw if d > 0], [n for n, d in fw if d < 0]
    return {"family": name, "comparisons": describe(f), "metric": rows["metric"].iloc[0], "subgroup": sub,
            "declared": f["declared"], "members": len(rows),
            "separated per comparison": int(rows["separated"].astype(bool).sum()),
            "separated family-wise (Holm)": len(fw), "family-wise: above": ", ".join(up) or "–",
            "family-wise: below": ", ".join(down) or "–"}


def mark(separated: bool, fw) -> str:
    """The verdict a summary cell shows: '' (not separated), ', separated' (no family covers it), ', separated per
    comparison' (its family does not separate it) or ', separated family-wise'."""
    if not separated:
        return ""
    if fw is None or (isinstance(fw, float) and math.isnan(fw)):
        return ", separated"
    return ", separated family-wise" if fw else ", separated per comparison"


def fw_word(fw) -> str:
    """pairs.csv's and gains.csv's `separated family-wise (Holm)` cell: yes, no, or – outside every family."""
    if fw is None or (isinstance(fw, float) and math.isnan(fw)):
        return "–"
    return "yes" if fw else "no"


def sentence(row: dict) -> str:
    """findings.md's line of one family and subgroup: 'Family over_sft_filtered (every method − sft_filtered, greedy,
    on all problems; declared after the runs), Holm at α 0.05: 8 of 24 separated family-wise (21 per comparison);
    above: ...; below: ....'"""
    where = "all problems" if row["subgroup"] == "all" else f"subgroup {row['subgroup']}"
    metric = {"pass1": "pass@1", "majk": "maj@k", "passk": "pass@k"}.get(row["metric"], row["metric"])
    text = (f"Family {row['family']} ({row['comparisons']}, {metric}, on {where}; declared {row['declared']}), "
            f"Holm at α {ALPHA}: {row['separated family-wise (Holm)']} of {row['members']} separated family-wise "
            f"({row['separated per comparison']} per comparison)")
    parts = [f"{w}: {row[f'family-wise: {w}']}" for w in ("above", "below") if row[f"family-wise: {w}"] != "–"]
    return text + ("; " + "; ".join(parts) if parts else "") + "."
