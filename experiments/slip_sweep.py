"""The annotator's slip rate as a dial: the default comparison at several task.demo_slip levels, and what RL adds
over SFT given the checker at each (issue: "SFT given the same information").

    python experiments/slip_sweep.py [--config experiments/configs/slip_sweep.yaml] [--out runs/slip_sweep] [--quick]
    python -m analysis.slip runs/slip_sweep          # slip.csv and slip.png: each RL method's gain over the better
                                                     # SFT baseline against the slip rate, with 95% intervals

Each level is a compare.py folder OUT/slip<rate>/ made from the base config (experiments/configs/default.yaml) with
task.demo_slip = rate, the sweep's methods and seeds (each at the base config's tuned rate), its final models then
re-scored on the test problems (`python -m gcframe.evaluate`). Resumable and parallel: run the same command again,
or in a second shell (one thread each); the processes split every level's cells by compare.py's claim files.
`--backend ray [--address ADDR]` runs each level's cells and scorings as Ray tasks (docs/guides/grid-on-ray.md).
"""
from __future__ import annotations

import argparse
import copy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gcframe.errors import UserError, cli_entry  # noqa: E402

KEYS = {"base", "levels", "methods", "seeds", "sft_base", "rescore", "quick"}


def load_sweep(path: Path, quick: bool) -> dict:
    """The sweep's YAML, --quick's section merged over it; a level outside [0, 1] or an unknown key is refused."""
    from gcframe.config import load_yaml

    spec = load_yaml(path)
    unknown = set(spec) - KEYS
    if unknown:
        raise UserError(f"{path} has unknown key(s) {', '.join(sorted(unknown))}: it takes {', '.join(sorted(KEYS))}")
    q = spec.pop("quick", {}) or {}
    if quick:
        spec.update(q)
    levels = spec.get("levels")
    if not isinstance(levels, list) or not levels or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in levels):
        raise UserError(f"levels in {path} must be a list of slip rates in [0, 1] (task.demo_slip), got {levels!r}")
    spec["base"] = (path.parent / spec.get("base", "default.yaml")).resolve()
    return spec


def level_name(rate: float) -> str:
    return f"slip{rate:g}"


def level_config(spec: dict, rate: float) -> dict:
    """The base config with task.demo_slip = rate, the sweep's sft_base options, and only the sweep's methods'
    entries (each keeps its tuned rate); seeds and methods are given to compare.py on its command line."""
    from gcframe.config import load_yaml

    cfg = copy.deepcopy(load_yaml(spec["base"]))
    cfg.pop("run", None)
    cfg.pop("tune", None)
    cfg.pop("families", None)  # the default result's families (analysis.families), not this sweep's
    cfg.setdefault("task", {})["demo_slip"] = float(rate)
    cfg["sft_base"] = {**(cfg.get("sft_base") or {}), **(spec.get("sft_base") or {})}
    cfg["methods"] = {k: v for k, v in (cfg.get("methods") or {}).items() if k in spec["methods"]}
    return cfg


@cli_entry
def main(argv=None) -> int:
    from experiments.reproduce import Recipe, backend_args, compare_cells, finished, rescored
    from gcframe import raygrid
    from gcframe.tracking.log import write_yaml

    p = argparse.ArgumentParser(prog="python experiments/slip_sweep.py", description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(ROOT / "experiments" / "configs" / "slip_sweep.yaml"))
    p.add_argument("--out", default=str(ROOT / "runs" / "slip_sweep"))
    p.add_argument("--quick", action="store_true", help="plumbing only: --quick's levels, seeds and sizes")
    raygrid.add_flags(p, "each level's cells and scorings: its compare.py and gcframe.evaluate commands get the "
                      "flags", unit=False)
    args = p.parse_args(argv)
    raygrid.check_flags(args)  # before anything is written
    spec = load_sweep(Path(args.config), args.quick)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for rate in spec["levels"]:
        folder = out / level_name(rate)
        config = out / f"{level_name(rate)}.yaml"
        if not config.exists():
            write_yaml(config, level_config(spec, rate))
        recipe = Recipe(f"slip {rate:g}", "compare", str(config.resolve()), spec["seeds"],
                        args=["--methods", ",".join(spec["methods"])])
        compare_cells(recipe, spec["seeds"], folder, args.quick, backend_args(args))
        if not finished(folder).exists():
            print(f"{folder}: cells still running elsewhere")
            continue
        if not rescored(folder, spec["rescore"]):  # a second process joins: the models are split by claims
            code = subprocess.call([sys.executable, "-m", "gcframe.evaluate", str(folder), *spec["rescore"],
                                    *backend_args(args)], cwd=ROOT)
            if code:
                raise UserError(f"re-scoring {folder} stopped with exit status {code}: its output above says why; the "
                                "same command resumes")
        if rescored(folder, spec["rescore"]):
            done.append(folder)
    left = len(spec["levels"]) - len(done)
    if left:
        print(f"slip sweep: {len(done)} of {len(spec['levels'])} levels finished in {out}; {left} still running "
              "elsewhere (run the same command again)")
        return 0
    from analysis import slip
    from analysis.results import write_base_curve, write_outcomes
    from analysis.runs import Runs

    for folder in done:  # the per-problem outcomes behind every paired gain, and each seed's stage 1
        write_outcomes(Runs(folder), out / f"{folder.name}_problems.csv.gz")
        write_base_curve(folder, out / f"{folder.name}_base_curve.csv")
    slip.write(out, out)
    print(f"slip sweep: {len(done)} levels finished; gains in {out / 'slip.csv'}, figure {out / 'slip.png'}, "
          f"per-problem outcomes in {out}/slip*_problems.csv.gz, each seed's stage 1 in {out}/slip*_base_curve.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
