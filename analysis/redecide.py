"""Re-decide a committed result's paired findings from its own files, without its run folders.

    python -m analysis.redecide default smollm2       # results/<name>/ for each name given
    python -m analysis.redecide --all                 # every result with a pairs.csv

A result with paired findings publishes the per-problem outcomes behind them (results/<name>/problems.csv.gz,
analysis.results.write_outcomes), its summary.csv (the methods, in order), its config.yaml (the task's held-out
problems) and, in findings.md's last line, where each metric's outcomes came from. `Published` reads those files
into what analysis.findings reads from a run folder, and `redecide` writes pairs.csv, findings.csv, design.csv,
gains.csv, families.csv, findings.md, headline.md and pairs.png again through analysis.findings and analysis.report,
so that a change of the paired test (analysis.paired) or of the families the config declares (its `families:`,
analysis.families: the family-wise columns of pairs.csv and gains.csv) reaches every published verdict. Then
`python -m analysis.results` re-renders the tables that show them. Prints the verdicts that changed: pair, metric,
old and new interval, per comparison and family-wise. The findings use a result's test seeds, those that took no part
in choosing its rates (analysis.seeds), where at least 2 are committed; --every-seed decides on all of them.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd
import yaml

from gcframe.errors import UserError, cli_entry

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
METRIC = {"greedy": "greedy", "maj": "majk", "pass": "passk", "pass@1": "pass1"}
SOURCES = re.compile(r"<sub>Outcomes: (?P<parts>.*)\.</sub>")


def metric_column(name: str) -> str:
    """findings' metric label -> the outcome column: greedy, maj@k -> majk, pass@k -> passk, pass@1 -> pass1."""
    return "pass1" if name == "pass@1" else METRIC[re.sub(r"@\d+$", "", name)]


class Published:
    """The parts of analysis.runs.Runs that analysis.findings reads, from results/<name>/ (module docstring)."""

    def __init__(self, folder: Path, seeds=None):
        """`seeds`: only these seeds' outcomes (a result's test seeds, analysis.seeds), else every committed one."""
        self.folder = Path(folder)
        self.seed_line = seed_line(self.folder) if decided_on(self.folder) is not None or (
            (self.folder / "summary.csv").is_file() and (self.folder / "config.yaml").is_file()) else None
        needed = [self.folder / f for f in ("problems.csv.gz", "summary.csv", "config.yaml", "findings.md")]
        missing = [f.name for f in needed if not f.is_file()]
        if missing:
            raise UserError(f"{self.folder} lacks {', '.join(missing)}: only a result that publishes its per-problem "
                            "outcomes can be re-decided (python experiments/reproduce.py makes it)")
        frame = pd.read_csv(self.folder / "problems.csv.gz")
        if seeds is not None:
            frame = frame[frame["seed"].isin(list(seeds))]
        cfg = yaml.safe_load((self.folder / "config.yaml").read_text()) or {}
        self.configs = {("result", 0): cfg}
        self.base_label = "base model" if (cfg.get("model") or {}).get("path") else "SFT base"
        order = list(dict.fromkeys(pd.read_csv(self.folder / "summary.csv")["method"]))
        runs = [m for m in order if m in set(frame["method"])]
        self.methods = runs
        self.k = (cfg.get("train") or {}).get("eval_k", "k")
        found = SOURCES.search((self.folder / "findings.md").read_text())
        if not found:
            raise UserError(f"{self.folder}/findings.md has no '<sub>Outcomes: ...</sub>' line naming where its "
                            "outcomes came from: make the result again (python experiments/reproduce.py)")
        keys = ["method", "seed", "problem"]
        self._outcomes, self._base = [], None
        own = frame[frame["method"].isin(runs)]
        for part in found.group("parts").split("; "):
            names, source = part.split(": ", 1)
            metrics = [metric_column(n.strip()) for n in names.split(",")]
            rows = own.dropna(subset=[metrics[0]])
            k = int(rows["k"].max()) if "k" in rows and rows["k"].notna().any() and metrics != ["greedy"] else 0
            cols = keys + (["index"] if "index" in rows else []) + metrics + (["k"] if k else [])
            self._outcomes.append((rows[cols].reset_index(drop=True), metrics, source, k))
        base = frame[frame["method"] == self.base_label]
        if len(base) and self._outcomes:
            first = self._outcomes[0][1]
            self._base = base[keys + [m for m in first if m in base]].reset_index(drop=True)

    def outcomes(self):
        return self._outcomes

    def base_outcomes(self):
        return self._base


FAMILY_WISE = "separated family-wise (Holm)"


def _verdicts(path: Path, key: list[str], interval: str) -> dict:
    if not path.is_file():
        return {}
    t = pd.read_csv(path, dtype=str, keep_default_na=False)
    return {(*(r[k] for k in key), r.get("subgroup", "all")): (r[interval], r["separated"], r.get(FAMILY_WISE, "–"))
            for _, r in t.iterrows()}


def _said(interval: str, sep: str, fw: str) -> str:
    """'+0.058 [+0.030, +0.087], separated, family-wise yes' (family-wise left out outside every family)."""
    return f"{interval}, {'separated' if sep == 'yes' else 'not separated'}" + (
        "" if fw in ("–", "") else f", family-wise {fw}")


def decided_on(folder: Path) -> list[int] | None:
    """The seeds a result's findings use: its test seeds (analysis.seeds) where at least 2 are committed, else every
    seed (None), the findings then saying that the tuning seeds are among them (`seed_line`)."""
    from analysis.seeds import roles

    if not ((folder / "summary.csv").is_file() and (folder / "config.yaml").is_file()):
        return None  # not a result (Published refuses it in one line)
    test = roles(folder)["test"]
    return test if len(test) >= 2 else None


def seed_line(folder: Path) -> str:
    """The line findings.md and headline.md open with: which seeds decide, and which chose the rates."""
    from analysis.seeds import roles

    r = roles(folder)
    show = lambda xs: ", ".join(map(str, xs))  # noqa: E731
    if not r["tuning"]:
        return f"Findings on seeds {show(r['test'])} (no seed took part in choosing rates)."
    if len(r["test"]) >= 2:
        return (f"Findings on the test seeds {show(r['test'])}; {_seeds(r['tuning'])} chose the rates and "
                f"{'is' if len(r['tuning']) == 1 else 'are'} left out.")
    return (f"Findings on every seed, {show(sorted(r['test'] + r['tuning']))}, the tuning {_seeds(r['tuning'])} among them: "
            f"fewer than 2 test seeds are committed (grow the result: python experiments/reproduce.py "
            f"{folder.name} --seeds {max(r['test'] + r['tuning']) + 1}-{max(r['test'] + r['tuning']) + 5}).")


def _seeds(xs: list[int]) -> str:
    """'seed 0', 'seeds 0, 1'."""
    return ("seed " if len(xs) == 1 else "seeds ") + ", ".join(map(str, xs))


def redecide(folder: Path, every_seed: bool = False) -> list[dict]:
    """Write the paired findings of results/<name>/ again from its outcomes -> the verdicts that changed. The
    findings use the test seeds (`decided_on`); every_seed: every committed seed, the tuning seeds among them."""
    from analysis import findings, report

    folder = Path(folder)
    runs = Published(folder, seeds=None if every_seed else decided_on(folder))
    if every_seed:
        runs.seed_line = None
    files = (("pairs.csv", ["comparison", "metric"], "Δ [95% interval]"),
             ("gains.csv", ["method", "over", "metric"], "gain [95% interval]"))
    before = {name: _verdicts(folder / name, key, col) for name, key, col in files}
    table, _ = findings.tests(runs)
    findings.write(runs, folder)
    if (folder / "pairs.png").is_file():
        report.fig_pairs(runs, table, folder / "pairs.png")
    steps = folder / "problems_by_step.csv.gz"
    if steps.is_file():  # the step × method interaction (analysis.interaction), on the same seeds
        from analysis import interaction

        frame = pd.read_csv(steps)
        frame = frame if decided_on(folder) is None or every_seed else frame[frame["seed"].isin(decided_on(folder))]
        pairs_, by_step = interaction.from_outcomes(frame, runs.methods)
        pairs_.to_csv(folder / "interaction.csv", index=False)
        by_step.to_csv(folder / "by_step.csv", index=False, float_format="%.4f")
    changed = []
    for name, key, col in files:
        after = _verdicts(folder / name, key, col)
        for k, (old, sep, fw) in before[name].items():
            new, new_sep, new_fw = after.get(k, ("(gone)", "", "–"))
            if (new_sep, new_fw) != (sep, fw):
                *names, metric, group = k  # group: the subgroup of problems (analysis.findings), "all" for every one
                pair = (names[0] if name == "pairs.csv" else f"{names[0]} − {names[1]}") + \
                    ("" if group == "all" else f" ({group})")
                changed.append({"result": folder.name, "comparison": pair, "metric": metric,
                                "before": _said(old, sep, fw), "now": _said(new, new_sep, new_fw)})
    return changed


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.redecide", description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help="results/<name> folders to re-decide")
    p.add_argument("--all", action="store_true", help="every result with a pairs.csv")
    p.add_argument("--changes", type=Path, help="also write the changed verdicts to this CSV")
    p.add_argument("--every-seed", action="store_true", help="decide on every committed seed, the tuning seeds "
                   "among them (what the findings were before test seeds were kept apart), not on the test seeds")
    args = p.parse_args(argv)
    names = sorted(f.parent.name for f in RESULTS.glob("*/pairs.csv")) if args.all else args.names
    if not names:
        raise UserError("name a result (python -m analysis.redecide default) or give --all")
    changed = [c for n in names for c in redecide(RESULTS / n, every_seed=args.every_seed)]
    for c in changed:
        print(f"{c['result']}: {c['comparison']}, {c['metric']}: {c['before']} -> {c['now']}")
    print(f"{len(changed)} verdict(s) changed in {len(names)} result(s)")
    if args.changes:
        pd.DataFrame(changed, columns=["result", "comparison", "metric", "before", "now"]).to_csv(args.changes,
                                                                                                index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
