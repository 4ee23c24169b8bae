"""Results as data: collect an experiment's outputs into results/<name>/, and render the README's and the docs'
tables from those files.

    python -m analysis.results            # re-render every marked table in README.md and docs/*.md
    python -m analysis.results --check    # exit 1 if a marked table differs from its CSV (tests/test_results.py)
    python -m analysis.results --reshape  # re-render a table although its result lost rows or columns on purpose

A table in a markdown file is marked by the CSV it shows (or a result's sentences by its .md, e.g. findings.md,
written from its tables by analysis.findings):

    <!-- result: default/table.csv -->
    (generated: a markdown table, then one line naming the commit and environment that made it)
    <!-- /result -->

Never edit between the markers: change the result (experiments/reproduce.py) and render again.

A damaged results file never reaches the README: rendering refuses (one line, before any markdown file is written) a
CSV that is not text, is empty or holds a row cut short, a marked CSV that is gone while the page shows its table,
and a CSV with fewer rows, or without a column, than the table the page shows was rendered from the same result (its
env.json unchanged, so the line under the table is the same): a file cut at a line boundary or edited by hand, which
would otherwise re-render silently. A result made again (another env.json) may change its tables' shape; one changed
on purpose without being made again (a row dropped by hand) is rendered with --reshape.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

from gcframe.errors import UserError, cli_entry
from gcframe.tracking import env as envinfo

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"(<!-- result: (?P<csv>[\w./-]+) -->\n)(?P<body>.*?)(<!-- /result -->)", re.S)


# -- collecting ----------------------------------------------------------------------------------------------------
def _same_env(envs: list[dict]) -> dict:
    """The environment shared by every part of a result; parts made in different ones are refused, not mixed."""
    envs = [e for e in envs if e]
    if not envs:
        return envinfo.collect()
    differ = list(dict.fromkeys(k for e in envs[1:] for k in envinfo.differences(envs[0], e)))
    if differ:
        raise UserError(f"the parts of this result were made in different environments ({', '.join(differ)} "
                        "differ): re-run them in one (delete the older run folders and reproduce again)")
    return envs[0]


TEXT = (".yaml", ".yml", ".json", ".csv", ".md", ".txt")
"""The files `publish` reads as text (the rest are copied byte for byte: figures, gzip tables)."""


def publish(src: Path, dest: Path, runs: Path | None = None) -> None:
    """Copy a run's file into results/: a text file with every absolute path of this machine written as a published
    file names it (gcframe.tracking.env.portable: relative to the repository, $GCFRAME_CACHE/..., ~/..., and a path
    beside the run folder `runs` outside those as RUNS/...), so that results/ names no folder of the machine that
    made it (tests/test_portable.py)."""
    if src.suffix in TEXT:
        dest.write_text(envinfo.portable(src.read_text(), elsewhere=_runs_place(runs)))
    else:
        shutil.copy(src, dest)


def _runs_place(runs: Path | None) -> dict:
    """`portable`'s name for the folder that holds the run folder `runs` (reproduce.py --runs): RUNS."""
    return {Path(runs).resolve().parent: "RUNS"} if runs is not None else {}


def write_env(env: dict, path: Path, runs: Path | None = None) -> None:
    """A result's env.json: `env` with its paths written as `publish` writes them."""
    path.write_text(envinfo.portable(json.dumps(env, indent=1), elsewhere=_runs_place(runs)) + "\n")


def from_compare(runs: Path, results: Path, prefix: str = "", families: dict | None = None) -> None:
    """results/<name>/ from a finished compare.py folder: summary.csv (a row per method and seed), table.csv (the
    report's table), change.csv (the change from step 0, and late in the run), why.csv (what the
    logs show), matched.csv (equal compute), time.csv (where the time goes), pairs.csv, findings.csv (§5.2),
    design.csv and findings.md (the paired test: analysis.findings), pairs.png (its greedy pairs as a matrix),
    evals.csv (every evaluation of every run: `write_evals`), interaction.csv, by_step.csv and
    problems_by_step.csv.gz where the runs evaluated the test problems at several steps (analysis.interaction),
    staleness.csv, tolerance.csv, ranks.csv, corrections.csv, sampler.csv, claims.csv and staleness.png where a
    sampler lagged, ran at another precision or was corrected (analysis.off_policy),
    curves.png, gc_view.png, config.yaml, env.json, each name after `prefix` (an earlier stage of the same result);
    families.csv and the family-wise columns where the config declares families (analysis.families): the run
    folder's, else `families` (the recipe config's, for runs started before their config declared them; then written
    into the result's config.yaml).
    The processes that ran its cells (env.json, env.resume*.json) must share one environment."""
    from analysis import report
    from analysis.matched import matched_rows, time_rows
    from analysis.why import why_rows

    env = _same_env([envinfo.load(p) for p in sorted(runs.glob("env*.json"))])
    tables = report.Runs(runs)
    results.mkdir(parents=True, exist_ok=True)
    write_env(env, results / f"{prefix}env.json", runs)
    publish(runs / "config.yaml", results / f"{prefix}config.yaml", runs)
    import yaml

    if families and not (yaml.safe_load((runs / "config.yaml").read_text()) or {}).get("families"):
        made = yaml.safe_load((results / f"{prefix}config.yaml").read_text()) or {}
        (results / f"{prefix}config.yaml").write_text(yaml.safe_dump({**made, "families": families}, sort_keys=False,
                                                                     allow_unicode=True))
    else:
        families = None  # the run folder's own, read by analysis.findings
    summary = pd.read_csv(runs / "summary.csv")
    summary.to_csv(results / f"{prefix}summary.csv", index=False, float_format="%.4f")
    pd.DataFrame(report.summary_rows(tables)).to_csv(results / f"{prefix}table.csv", index=False)
    pd.DataFrame(report.delta_rows(tables)).to_csv(results / f"{prefix}change.csv", index=False)
    pd.DataFrame(why_rows(tables)).to_csv(results / f"{prefix}why.csv", index=False)
    pd.DataFrame(matched_rows(tables)[0]).to_csv(results / f"{prefix}matched.csv", index=False)
    pd.DataFrame(time_rows(tables)).to_csv(results / f"{prefix}time.csv", index=False)
    from analysis import findings

    findings.write(tables, results, prefix, spec=families)  # pairs.csv, findings.csv (§5.2), design.csv, findings.md: the paired test
    from analysis import field_claims

    claims = field_claims.rows(tables)  # the field's claims about the newer methods, where both methods ran
    if claims:
        pd.DataFrame(claims).to_csv(results / f"{prefix}field_claims.csv", index=False)
    report.fig_pairs(tables, findings.tests(tables)[0], results / f"{prefix}pairs.png")  # the greedy pairs drawn
    report.fig_learning_curves(tables, results / f"{prefix}curves.png")
    if report.fig_overoptimisation(tables, results / f"{prefix}overoptimisation.png"):  # runs on r_φ only
        pd.DataFrame(report.overoptimisation_rows(tables)).to_csv(results / f"{prefix}trajectory.csv", index=False)
    if tables.gc and tables.gc.get("methods"):
        report.fig_gc_view(tables, results / f"{prefix}gc_view.png")
        if ((tables.gc.get("off_policy") or {}).get("methods")  # the same probe at a moved θ': clips and gates act
                and report.fig_gc_view(tables, results / f"{prefix}gc_view_off_policy.png", off_policy=True)):
            pd.DataFrame(report.gc_off_rows(tables)).to_csv(results / f"{prefix}gc_off_policy.csv", index=False)
    write_outcomes(tables, results / f"{prefix}{OUTCOMES}")
    write_evals(tables, results / f"{prefix}evals.csv")
    if write_interaction(runs, results, prefix):  # the test problems at several steps of the same runs
        print(f"{results}: the step x method interaction ({prefix}interaction.csv, {prefix}by_step.csv)")
    from analysis import off_policy

    if off_policy.varied(tables):  # a lagging or lower-precision sampler, or a correction: the off-policy tables
        off_policy.write(runs, results, prefix, tables)
        print(f"{results}: the off-policy tables ({prefix}staleness.csv, {prefix}corrections.csv, ...)")
    write_base_curve(runs, results / f"{prefix}base_curve.csv")
    if (runs / "tune" / "tune.csv").is_file():  # compare.py --tune: every trial's validation accuracy, the figure
        from analysis import tuning

        publish(runs / "tune" / "tune.csv", results / f"{prefix}tune.csv")
        table, curve = tuning.tables(tuning.read(runs))
        table.to_csv(results / f"{prefix}tuning.csv", index=False)
        tuning.figure(tuning.read(runs), curve, results / f"{prefix}tuning.png")
    if (runs / "config.yaml").is_file() and _curve_fit(runs, results, prefix):
        print(f"{results}: compute-performance fits ({prefix}curves*.csv, {prefix}fit.png)")
    if (runs / "reward_model.json").exists():  # r_φ: its held-out pairwise accuracy, as a one-row table
        rm = json.loads((runs / "reward_model.json").read_text())
        pd.DataFrame([{"held-out pairwise accuracy": f"{rm['heldout_accuracy']:.3f}",
                       "training pairs": (rm.get("preferences") or {}).get("train_pairs"),
                       "train s": f"{rm.get('train_time_s', float('nan')):.0f}"}]).to_csv(
            results / f"{prefix}reward_model.csv", index=False)
    print(f"{results}: {len(summary)} runs, {summary['method'].nunique()} methods, seeds "
          f"{sorted(summary['seed'].unique().tolist())}")


OUTCOMES = "problems.csv.gz"
"""Every final model's per-problem outcomes behind pairs.csv and gains.csv (method, seed, problem id, greedy and,
where sampled, majk, passk, pass1): a reader recomputes any paired interval from them (analysis.paired), over the
rows where that metric is filled. Where greedy came from a re-scoring on N problems and the sampled metrics from the
runs' last evaluation on fewer, those are filled only on their problems (findings.md names each metric's source)."""


def write_outcomes(tables, path: Path) -> None:
    """The per-problem outcomes the paired test used (`Runs.outcomes`: each metric from its own source, and the
    base's where it was scored): one row per method, seed and problem, with the problem's index among the test
    problems where the runs recorded it (analysis.findings.problem_subgroups names a chat prompt's problem by it),
    gzip-compressed CSV, written the same bytes for the same outcomes."""
    picks = tables.outcomes()
    if not picks:
        return
    keys = ["method", "seed", "problem"]
    own = [f[keys + (["index"] if "index" in f and i == 0 else []) + metrics + (["k"] if k and "k" in f else [])]
           for i, (f, metrics, _, k) in enumerate(picks)]  # each its metrics; the problem's index from the first
    frame = own[0]
    for other in own[1:]:  # e.g. maj@k / pass@k from the last evaluation, beside greedy re-scored
        frame = frame.merge(other, on=keys, how="outer")
    for reference in (tables.base_outcomes(), tables.teacher_outcomes()):  # the base's, and a teacher's
        if reference is not None:
            frame = pd.concat([frame, reference], ignore_index=True)
    if "index" in frame:  # a problem's index is the same in every row of it (the base's rows included)
        frame["index"] = frame["problem"].map(frame.dropna(subset=["index"]).groupby("problem")["index"].first())
    cols = [c for c in ("method", "seed", "problem", "index", "greedy", "majk", "passk", "pass1", "k")
            if c in frame]
    write_csv_gz(frame[cols].sort_values(["method", "seed", "problem"], kind="stable"), path)


def write_interaction(runs: Path, results: Path, prefix: str = "") -> bool:
    """interaction.csv, by_step.csv and problems_by_step.csv.gz (analysis.interaction.tables), each name after
    `prefix`, where the runs evaluated the test problems at several steps; False, nothing written, otherwise."""
    from analysis import interaction

    made = interaction.tables(runs)
    if made is None:
        return False
    pairs, steps, outcomes = made
    pairs.to_csv(results / f"{prefix}interaction.csv", index=False)
    steps.to_csv(results / f"{prefix}by_step.csv", index=False, float_format="%.4f")
    write_csv_gz(outcomes, results / f"{prefix}{interaction.STEP_OUTCOMES}")  # the same bytes for the same outcomes
    return True


def write_csv_gz(frame: pd.DataFrame, path: Path) -> None:
    """A gzip-compressed CSV written the same bytes for the same rows (no time or name in its header)."""
    import gzip
    import io

    buf = io.StringIO()
    frame.to_csv(buf, index=False, float_format="%.6g")
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue().encode())


def write_evals(tables, path: Path) -> None:
    """evals.csv: every evaluation of every run (method, seed, step, compute in sequences trained on, accuracy,
    problems evaluated, the run's compute when finished: analysis.curves.curve_points), from which a reader refits any
    run's compute-performance curve (analysis.curves.run_fits) or draws its learning curve. Nothing where no run
    evaluated."""
    from analysis import curves

    if tables.eval.empty:
        return
    curves.curve_points(tables, "sequences").to_csv(path, index=False, float_format="%.6g")


def write_base_curve(runs: Path, path: Path) -> None:
    """base_curve.csv: the SFT base's stage 1 (`gcframe.stage1`), read from the cached base the runs started from:
    its curve (step, mean training loss, greedy accuracy on its split) and, per row, the split it decided on, where it
    stopped, by which rule, and which evaluation it kept. With a base per seed (sft_base.per_seed) every seed's base,
    a `seed` column saying whose. Nothing for a pretrained model (no stage 1)."""
    import yaml

    from gcframe import pipeline
    from gcframe.config import from_dict
    from gcframe.tracking.log import cache_root

    made = yaml.safe_load((runs / "config.yaml").read_text())
    raw = {k: v for k, v in made.items() if k in ("seed", "task", "model", "sft_base", "train", "reward_model")}
    cfg = from_dict({**raw, "methods": {}})
    if cfg.model.path:
        return
    seeds = (made.get("seeds") or [cfg.seed]) if cfg.sft_base.per_seed else [None]
    frames = []
    for seed in seeds:
        key = pipeline.base_key(cfg if seed is None else from_dict({**raw, "seed": seed, "methods": {}}))
        info_file = cache_root() / "sft_base" / key / "base_info.json"
        if not info_file.is_file():
            continue
        s1 = json.loads(info_file.read_text()).get("stage1") or {}
        curve = pd.DataFrame(s1.get("curve") or [])
        if curve.empty:
            continue
        curve = curve.assign(split=s1.get("split", "test"), steps_trained=s1.get("steps_trained"),
                             stopped_by=s1.get("stopped_by") or "steps",
                             kept_step=s1.get("best_step") or s1.get("steps_trained"))
        frames.append(curve if seed is None else curve.assign(seed=seed))
    if frames:
        pd.concat(frames, ignore_index=True).to_csv(path, index=False, float_format="%.4f")


def _curve_fit(runs: Path, results: Path, prefix: str) -> bool:
    """analysis.curves on the runs' evaluation curves, its tables and figure into results/ -> whether it fitted
    (a folder whose runs evaluated too few times is skipped: its curves are not fitted)."""
    import tempfile

    from analysis import curves

    with tempfile.TemporaryDirectory() as tmp:
        try:
            dest = curves.write(runs, out=tmp)
        except UserError as e:
            print(f"{results}: no compute-performance fit ({e})")
            return False
        for name in ("curves.csv", "curves_runs.csv", "orderings.csv", "forecast.csv", "curves.md",
                     *(f.name for f in sorted(dest.glob("curves_*.csv")) if f.name != "curves_runs.csv")):
            publish(dest / name, results / f"{prefix}{name}")
        shutil.copy(dest / "curves.png", results / f"{prefix}fit.png")
    with tempfile.TemporaryDirectory() as tmp:  # the same curves against training wall time: what a step costs
        try:  # (a teacher's forward passes, a critic) counts, so C_90 there is the time to near the ceiling
            dest = curves.write(runs, axis="time", out=tmp)
        except UserError as e:
            print(f"{results}: no fit against training time ({e})")
        else:
            publish(dest / "curves.csv", results / f"{prefix}curves_time.csv")
            publish(dest / "curves_per_method.csv", results / f"{prefix}curves_time_per_method.csv")
    return True


def from_command(runs: Path, results: Path, keep: list[str]) -> None:
    """results/<name>/: the files `keep` names (globs in the run folder) and env.json."""
    results.mkdir(parents=True, exist_ok=True)
    found = [f for pattern in keep for f in sorted(runs.glob(pattern)) if f.is_file()]
    if not found:
        raise UserError(f"{runs} holds none of {', '.join(keep)}: the experiment has not finished (where another "
                        "process still runs its cells, it collects them when it ends; otherwise run the same command "
                        "again)")
    for f in found:
        publish(f, results / f.name, runs)
    env = envinfo.load(runs / "env.json") or next((envinfo.load(p) for p in sorted(runs.glob("env*.json"))), {})
    write_env(env or envinfo.collect(), results / "env.json", runs)
    print(f"{results}: {', '.join(f.name for f in found)}")


# -- comparing a regenerated result with the committed one -----------------------------------------------------------
def _same_value(a: str, b: str) -> bool:
    """Two CSV cells equal: as text, or as numbers that agree to the decimals the coarser of the two shows (the
    committed summary.csv is written to 4 decimals, a run's own to full precision)."""
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False

    def decimals(t: str) -> int | None:
        return None if "e" in t.lower() else len(t.split(".")[1]) if "." in t else 0

    d = [n for n in (decimals(a), decimals(b)) if n is not None]
    tol = 0.5 * 10.0 ** -min(d) if d else 0.0
    return abs(x - y) <= tol + 1e-12 * max(abs(x), abs(y), 1.0)


def _row_name(row, keys: list[str]) -> str:
    """'grpo seed 0': the first key's value, then each other key with its name."""
    return " ".join([str(row[keys[0]])] + [f"{k} {row[k]}" for k in keys[1:]])


def compare_rows(new_csv, committed_csv, examples: int = 3) -> str:
    """Column by column, which values of a regenerated CSV (e.g. `reproduce.py default --seeds 0`'s summary.csv)
    equal the committed one's -> the lines to print.

    Rows are matched by method and seed where both files have those columns, else by their first column (a key that
    repeats is matched in order); the committed file may hold more rows (other seeds). A column is "equal" where
    every matched row agrees (`_same_value`), else the rows that differ are counted and the first `examples` shown,
    committed → new. Rows of the new file that the committed one lacks, and columns only one file has, are named."""
    new, old = (pd.read_csv(f, dtype=str, keep_default_na=False) for f in (new_csv, committed_csv))
    keys = [c for c in ("method", "seed") if c in new and c in old] or [new.columns[0]]
    if any(k not in old for k in keys):
        return f"{new_csv} and {committed_csv} share no key column ({', '.join(keys)}): nothing to compare"
    for df in (new, old):
        df["#"] = df.groupby(keys).cumcount().astype(str)
    both = new.merge(old, on=[*keys, "#"], how="left", suffixes=("", " (committed)"), indicator=True)
    matched = both[both["_merge"] == "both"]
    lines = [f"{new_csv} against the committed {committed_csv}: {len(matched)} of {len(new)} rows matched by "
             f"{', '.join(keys)} ({len(old)} committed rows)"]
    cpus = [(json.loads(e.read_text()).get("cpu") if e.is_file() else None) or "unknown"
            for e in (Path(new_csv).with_name("env.json"), Path(committed_csv).with_name("env.json"))]
    lines.append(f"  CPU: this run {cpus[0]}, the committed rows {cpus[1]}"
                 + ("" if cpus[0] == cpus[1] else " (another CPU family rounds in another order: expect differences)"))
    equal, differ = [], []
    for col in [c for c in new.columns if c in old and c not in (*keys, "#")]:
        other = col if col in keys else f"{col} (committed)"
        bad = [(r, r[other], r[col]) for _, r in matched.iterrows() if not _same_value(r[col], r[other])]
        if not bad:
            equal.append(col)
            continue
        shown = "; ".join(f"{_row_name(r, keys)}: {a} → {b}" for r, a, b in bad[:examples])
        differ.append(f"  differ: {col} in {len(bad)} of {len(matched)} rows (committed → new: {shown}"
                      + (", ..." if len(bad) > examples else "") + ")")
    if len(matched):
        lines.append(f"  equal in every matched row: {', '.join(equal) or 'no column'}")
        lines += differ
    missing = both[both["_merge"] == "left_only"]
    if len(missing):
        lines.append("  not in the committed file: " + ", ".join(_row_name(r, keys) for _, r in missing.iterrows()))
    for name, cols in (("the new", [c for c in new if c not in old]),
                       ("the committed", [c for c in old if c not in new])):
        if cols:
            lines.append(f"  only in {name} file: {', '.join(cols)}")
    return "\n".join(lines)


# -- rendering -------------------------------------------------------------------------------------------------------
def _cells(row) -> str:
    """A markdown table's row: a "|" inside a cell (a header such as "|log ρ| > log 2") escaped, not a column."""
    return " | ".join(str(c).replace("|", "\\|") for c in row)


def _fix(csv: Path) -> str:
    """How to mend a damaged or missing results file: restore the committed one, or make the result again."""
    return (f"restore it (git checkout -- {csv}) or make the result again (python experiments/reproduce.py "
            f"{csv.parent.name}), then render again")


def _whole_csv(csv: Path) -> None:
    """Refuse, in one line naming the file, a results CSV pandas would fail on with a traceback (not text, empty, cut
    inside a quoted cell) or read without a word (a last row cut short: pandas fills its missing cells with "", and a
    cell cut inside keeps what is left of it; every results CSV ends its last row with a line break)."""
    import csv as csvlib
    import io

    try:
        text = csv.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{csv} is not a text file (a binary file in its place?): {_fix(csv)}") from None
    if not text.strip():
        raise UserError(f"{csv} is empty (not even its header line): {_fix(csv)}")
    try:
        rows = [(i, r) for i, r in enumerate(csvlib.reader(io.StringIO(text, newline=""), strict=True), 1) if r]
    except csvlib.Error as e:  # a quoted cell never closed: the file was cut inside it
        raise UserError(f"{csv} is cut short or damaged ({e}): {_fix(csv)}") from None
    width = len(rows[0][1])
    short = next(((i, len(r)) for i, r in rows if len(r) != width), None)
    if short:
        cells = f"{short[1]} cell{'s' if short[1] != 1 else ''}"
        raise UserError(f"{csv} is cut short or damaged (row {short[0]} has {cells}, its header {width}): {_fix(csv)}")
    if not text.endswith("\n"):  # every results CSV ends its last row with one (pandas' to_csv)
        raise UserError(f"{csv} is cut short (its last row has no line break: cut inside it): {_fix(csv)}")


def render_table(csv: Path) -> str:
    """The markdown table of a results CSV (every cell as written) and the line saying what made it."""
    if not csv.is_file():
        raise UserError(f"{csv} not found: make it with python experiments/reproduce.py {csv.parent.name}")
    try:
        env = envinfo.load(csv.parent / "env.json")
    except ValueError:  # not JSON (UnicodeDecodeError is one too)
        raise UserError(f"{csv.parent / 'env.json'} is not a JSON file (damaged?): {_fix(csv.parent / 'env.json')}") \
            from None
    stamp = f"<sub>`results/{csv.parent.name}/{csv.name}` · {envinfo.describe(env)} · " \
            f"`python experiments/reproduce.py {csv.parent.name}`</sub>"
    if csv.suffix == ".md":  # sentences written from a result's tables (analysis.findings): shown as they are
        return csv.read_text().rstrip("\n") + "\n\n" + stamp + "\n"
    _whole_csv(csv)
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    lines = ["| " + _cells(df.columns) + " |", "|" + "|".join("---" for _ in df.columns) + "|"]
    lines += ["| " + _cells(row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n\n" + stamp + "\n"


STAMP = re.compile(r"^<sub>`results/.*</sub>$", re.M)
"""The line under a rendered table naming its file, the environment (env.json) and the command that made it."""


def _shape(body: str) -> tuple[list[str], int] | None:
    """The columns and the number of rows of a table `render_table` rendered, with the line under it -> None for a
    body that holds none (a marker not rendered yet, a result's sentences)."""
    lines = body.split("\n")
    if len(lines) < 2 or not lines[0].startswith("| ") or not lines[1].startswith("|---") or not STAMP.search(body):
        return None
    rows = 0
    for line in lines[2:]:  # the rows, up to the blank line above the line naming the file
        if not line.startswith("|"):
            break
        rows += 1
    return re.split(r"(?<!\\) \| ", lines[0][2:-2]), rows


def _lost(shown: str, new: str) -> str | None:
    """What a table would lose on re-rendering, where its result is the one it was rendered from (the same line
    under it: the same env.json): the rows and columns a CSV cut or edited since lost -> None where nothing is lost,
    or the result was made again (its tables may change shape then)."""
    old, now = _shape(shown), _shape(new)
    if old is None or now is None or STAMP.search(shown).group(0) != STAMP.search(new).group(0):
        return None
    gone = [c for c in old[0] if c not in now[0]]
    lost = ([f"{old[1] - now[1]} of the {old[1]} rows"] if now[1] < old[1] else []) + \
        ([f"column{'s' if len(gone) > 1 else ''} {', '.join(gone)}"] if gone else [])
    return " and ".join(lost) or None


def render_text(text: str, results: Path, reshape: bool = False) -> str:
    """Every marked table whose CSV exists rendered from it; a marker whose CSV does not exist yet is left as it is
    (the check reports it). Refused (UserError), before anything is written, where the file was damaged since the
    table was rendered: the table shown and its CSV gone, or rows or columns lost from the same result (`_lost`;
    `reshape` accepts those)."""
    def one(m):
        csv = results / m.group("csv")
        if not csv.is_file():
            if STAMP.search(m.group("body")):  # rendered before: the file was there
                raise UserError(f"{csv} is gone, and the page shows its table: {_fix(csv)}")
            return m.group(0)
        new = render_table(csv)
        lost = None if reshape else _lost(m.group("body"), new)
        if lost:
            raise UserError(f"{csv} lacks {lost} that the page's table shows, though its result is the same one "
                            f"(env.json unchanged): the file was cut or edited since the table was rendered; "
                            f"{_fix(csv)} (a change made on purpose: python -m analysis.results --reshape)")
        return m.group(1) + new + m.group(4)

    return MARK.sub(one, text)


def marked_files(root: Path) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p.is_file()]


def render_all(root: Path = ROOT, results: Path | None = None, reshape: bool = False) -> list[Path]:
    """Re-render every marked table; returns the files that changed. Every file is rendered before any is written:
    a refusal (`render_text`) leaves every page as it was."""
    results = results or root / "results"
    made = []
    for path in marked_files(root):
        text = path.read_text()
        try:
            new = render_text(text, results, reshape)
        except UserError as e:
            raise UserError(f"{path.relative_to(root)}: {e}; no page was changed") from None
        if new != text:
            made.append((path, new))
    for path, new in made:
        path.write_text(new)
    return [path for path, _ in made]


def check(root: Path = ROOT, results: Path | None = None) -> list[str]:
    """Problems: marked tables that differ from their CSV, results made with another commit than the others."""
    results = results or root / "results"
    problems, commits = [], {}
    for path in marked_files(root):
        for m in MARK.finditer(path.read_text()):
            csv = results / m.group("csv")
            if not csv.is_file():
                problems.append(f"{path.relative_to(root)}: {m.group('csv')} not found in {results}")
                continue
            if m.group("body") != render_table(csv):
                problems.append(f"{path.relative_to(root)}: the table of {m.group('csv')} differs from the CSV "
                                "(run python -m analysis.results)")
            env = envinfo.load(csv.parent / "env.json")
            commits[csv.parent.name] = envinfo.short_commit(env, missing="?")
    return problems + provenance(commits)


def provenance(commits: dict[str, str]) -> list[str]:
    """Results made at different commits are named, never silently shown side by side."""
    if len(set(commits.values())) <= 1:
        return []
    return ["results made at different commits: " + ", ".join(f"{k} {v}" for k, v in sorted(commits.items()))
            + " (fine when the code between them does not change these results; say so where they are shown)"]


@cli_entry
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.results", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="report tables that differ from their CSV; exit 1 if any")
    p.add_argument("--results", default=str(ROOT / "results"), help="the results folder")
    p.add_argument("--reshape", action="store_true", help="render a table whose CSV has fewer rows or columns than "
                   "the table shown although its result was not made again (refused otherwise: a cut or edited file)")
    args = p.parse_args(argv)
    if args.check:
        problems = check(ROOT, Path(args.results))
        print("\n".join(problems) or "every marked table matches its CSV")
        return 1 if any("differs" in p or "not found" in p for p in problems) else 0
    changed = render_all(ROOT, Path(args.results), args.reshape)
    print("re-rendered: " + (", ".join(str(p.relative_to(ROOT)) for p in changed) or "nothing changed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
