"""Grow a committed result by whole seeds, across sessions and machines: `reproduce.py NAME --seeds 5-12`.

A seed is the unit: every arm of a seed runs on one machine, from that seed's own base (stage 1 seeded by it), at the
rates the committed result chose (its config.yaml holds them: the tuning trials are not run again), and is scored on
the same test problems. Its outcomes then join the committed ones:

    runs/reproduce/<name>-seeds/seed<s>/   the seed's compare.py folder (config.yaml: the committed one, seeds [s], no
                                           tune section; `compare.py --resume` runs it, two processes split its cells)
    results/<name>/problems.csv.gz         + the seed's per-problem outcomes (its base's and teacher's too)
    results/<name>/summary.csv, evals.csv  + the seed's rows
    results/<name>/seeds.csv               + the seed: role test, its machine and commit (analysis.seeds)
    then the findings, families, plan and headline re-made from every committed test seed (`remake`)

The committed seeds are the state: a session that ends midway loses at most the seed it was running (its folder
resumes from its checkpoints on the same machine; on another, the seed starts again), and the next session, on any
machine, continues from what is committed. Refused in one line before anything runs: a result not committed, seeds
that are tuning seeds or already committed, a base this machine cannot build, a recipe whose design differs from the
committed result's (config digest).
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pandas as pd

from gcframe.errors import UserError

DESIGN_KEYS = ("task", "model", "sft_base", "train", "reward_model", "methods")
"""The parts of a resolved config that make a result's design (its seeds, families and tuning section aside)."""
DERIVED = {"train.max_new_tokens": 0}
"""Options whose recipe value means "derived when the run starts" (0: from the task); the committed config holds what
was derived."""


def parse_seeds(text: str) -> list[int]:
    """'5-12' -> [5, ..., 12]; '3,4,9' -> [3, 4, 9]; anything else one line."""
    seeds: list[int] = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise UserError(f"--seeds takes seeds like 5-12 or 3,4,9 (whole numbers >= 0, a range low-high), got "
                            f"{text!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        seeds += range(lo, hi + 1)
    if len(set(seeds)) < len(seeds):
        raise UserError(f"--seeds {text} lists a seed twice: each seed runs once")
    return seeds


def _clean(d):
    if isinstance(d, dict):
        out = {k: _clean(v) for k, v in d.items()}
        return {k: v for k, v in out.items() if v not in ({}, None)}
    return d


def design(raw: dict) -> dict:
    """A resolved config's design: DESIGN_KEYS, every method's options without its tuned train.lr, empty ones gone."""
    raw = {k: raw[k] for k in DESIGN_KEYS if k in raw}
    raw["methods"] = {label: {**(o or {}), "train": {k: v for k, v in ((o or {}).get("train") or {}).items()
                                                    if k != "lr"}}
                      for label, o in (raw.get("methods") or {}).items()}
    return _clean(raw)


def _flat(d: dict, pre: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{pre}{k}.") if isinstance(v, dict) else {f"{pre}{k}": v})
    return out


def digest(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


def recipe_design(config: Path) -> dict:
    """The design of a recipe's config file as compare.py resolves it (built-in defaults under the file)."""
    from gcframe.config import from_dict, load_yaml, resolve_paths

    raw = resolve_paths(load_yaml(config), Path(config).resolve().parent)
    for key in ("run", "splits", "processes", "tune", "families"):
        raw.pop(key, None)
    return design(from_dict(raw).to_dict())


def design_difference(committed: dict, recipe: dict) -> list[str]:
    """The keys (dotted) whose values differ between two designs; a key only one of them has is an option added
    since (at its default, which the committed run had before it was an option) and not a difference."""
    a, b = _flat(committed), _flat(recipe)
    return sorted(k for k in set(a) & set(b) if a[k] != b[k] and DERIVED.get(k, object()) != b[k])


def check(name: str, recipe, seeds: list[int], results: Path, configs: Path) -> dict:
    """Every refusal before anything runs (module docstring) -> the committed config.yaml; `configs`: the folder of
    the recipes' config files."""
    import yaml

    from analysis.seeds import committed, tuning_seeds

    folder = results / name
    if recipe.kind != "compare":
        raise UserError(f"{name} is made by one script, not by seeds: only a compare result grows by --seeds")
    if recipe.base_run:
        raise UserError(f"{name} starts from an earlier stage ({recipe.base_run['config']}) that a grown seed would "
                        "have to re-train on this machine: growing such a result by seeds is not supported yet")
    needed = [f for f in ("config.yaml", "summary.csv", "problems.csv.gz", "findings.md") if not (folder / f).is_file()]
    if needed:
        raise UserError(f"{folder} lacks {', '.join(needed)}: grow a committed result (python experiments/"
                        f"reproduce.py {name} makes it first)")
    cfg = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    tuned = sorted(set(seeds) & set(tuning_seeds(cfg)))
    if tuned:
        raise UserError(f"--seeds {', '.join(map(str, tuned))} chose {name}'s rates (tune.seeds "
                        f"{tuning_seeds(cfg)}): a test seed must take no part in tuning; give other seeds")
    have = sorted(set(seeds) & set(committed(folder)))
    if have:
        raise UserError(f"seed(s) {', '.join(map(str, have))} of {name} are committed already (results/{name}/"
                        f"summary.csv has seeds {committed(folder)}): give new seeds, e.g. --seeds "
                        f"{max(committed(folder)) + 1}-{max(committed(folder)) + len(seeds)}")
    model = str((cfg.get("model") or {}).get("path") or "")
    if model.startswith("package:"):
        import importlib.util

        pkg = model.split(":", 1)[1].split("/")[0]
        if importlib.util.find_spec(pkg) is None:
            raise UserError(f"{name}'s model is {model}, and the package {pkg} is not installed here, so no seed's "
                            f"base can be built on this machine: install it (pip install -c requirements/lock.txt "
                            f"-e '.[smollm2]') or grow the result on a machine that has it")
    elif model and not Path(model).is_dir():
        raise UserError(f"{name}'s model is the folder {model}, which this machine does not have, so no seed's base "
                        "can be built here")
    differ = design_difference(design(cfg), recipe_design(configs / recipe.config))
    if differ:
        raise UserError(f"experiments/configs/{recipe.config} no longer has results/{name}'s design (digest "
                        f"{digest(design(cfg))}): {', '.join(differ[:5])}{' ...' if len(differ) > 5 else ''} "
                        f"differ; grow it from the commit that made it ({_commit(folder)}), or make the result anew")
    return cfg


def _commit(folder: Path) -> str:
    env = json.loads((folder / "env.json").read_text()) if (folder / "env.json").is_file() else {}
    return str(env.get("commit") or "unknown")[:12]


def seed_folder(runs: Path, name: str, seed: int) -> Path:
    return runs.with_name(f"{name}-seeds") / f"seed{seed}"


def prepare(folder: Path, cfg: dict, seed: int) -> None:
    """The seed's compare.py folder: the committed config.yaml (the chosen rates in it), seeds [s], no tuning."""
    import yaml

    if (folder / "config.yaml").is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    raw = {k: v for k, v in cfg.items() if k != "tune"}
    raw["seeds"] = [seed]
    tmp = folder / "config.yaml.tmp"
    tmp.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    tmp.replace(folder / "config.yaml")


def merge(seed_out: Path, results: Path, seed: int, families: dict | None) -> None:
    """The finished seed's rows into the committed files (module docstring); rows of that seed already there are
    replaced, so merging twice changes nothing."""
    from analysis import results as collect
    from analysis.seeds import COLUMNS, FILE, env_row, table
    from gcframe.tracking import env as envinfo

    made = seed_out / "result"
    collect.from_compare(seed_out, made, families=families)
    for name in ("problems.csv.gz", "summary.csv", "evals.csv"):
        new = pd.read_csv(made / name)
        if not (results / name).is_file():
            continue
        old = pd.read_csv(results / name)
        both = pd.concat([old[old["seed"] != seed], new[new["seed"] == seed]], ignore_index=True)
        tmp = results / f".{name}.tmp"
        if name.endswith(".gz"):
            collect.write_csv_gz(both, tmp)
        else:
            both.to_csv(tmp, index=False, float_format="%.4f" if name == "summary.csv" else None)
        tmp.replace(results / name)
    env = envinfo.load(made / "env.json")
    env["made"] = time.strftime("%Y-%m-%d", time.gmtime((seed_out / "report" / "summary.md").stat().st_mtime))
    seeds = table(results)
    seeds = pd.concat([seeds[seeds["seed"] != seed], pd.DataFrame([env_row(env, seed, "test", f"grown: {seed_out.name}")])],
                      ignore_index=True).sort_values("seed")
    seeds[COLUMNS].to_csv(results / FILE, index=False)


def test_table(results: Path) -> pd.DataFrame:
    """test_seeds.csv: each method's (and the base's and teacher's) test-problem scores over the findings' seeds, as
    mean ± the 95% t half-width over seeds (t_{0.975, S−1}·SD/√S), the seeds named."""
    from scipy import stats

    from analysis.redecide import decided_on

    frame = pd.read_csv(results / "problems.csv.gz")
    seeds = decided_on(results) or sorted(frame["seed"].unique())
    frame = frame[frame["seed"].isin(seeds)]
    runs = list(dict.fromkeys(pd.read_csv(results / "summary.csv")["method"]))  # the result's own order
    order = [m for m in dict.fromkeys(frame["method"]) if m not in runs and m != "teacher"] + \
        [m for m in runs if m in set(frame["method"])] + (["teacher"] if "teacher" in set(frame["method"]) else [])
    rows = []
    for method in order:
        per = frame[frame["method"] == method].groupby("seed")[["greedy", "majk", "passk", "pass1"]].mean()
        row = {"method": method, "test seeds": ", ".join(map(str, per.index))}
        for col, name in (("greedy", "greedy"), ("majk", "maj@k"), ("passk", "pass@k"), ("pass1", "pass@1")):
            x = per[col].dropna()
            if len(x) == 0:
                row[name] = "–"
            elif len(x) == 1:
                row[name] = f"{x.iloc[0]:.3f}"
            else:
                half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / len(x) ** 0.5
                row[name] = f"{x.mean():.3f} ± {half:.3f}"
        rows.append(row)
    return pd.DataFrame(rows)


def remake(results: Path, sims: int | None = None) -> list[dict]:
    """The findings, families, plan, headline and test-seed table (test_seeds.csv) of a result from its committed
    test seeds -> the changed verdicts."""
    from analysis import plan, redecide
    from analysis.families import check
    import yaml

    changed = redecide.redecide(results)
    test_table(results).to_csv(results / "test_seeds.csv", index=False)
    cfg = yaml.safe_load((results / "config.yaml").read_text()) or {}
    spec = check(cfg.get("families"))
    if any(f.get("min_effect") is not None for f in spec.values()):
        from analysis.seeds import roles

        rows = plan.plan_rows(redecide.Published(results), spec, len(roles(results, cfg)["test"]),
                              sims or plan.SIMS)
        pd.DataFrame(rows).to_csv(results / "plan.csv", index=False, float_format="%.5g")
        print(plan.text(rows))
    return changed
