"""Which seeds of a committed result chose its rates and which test them, and where each seed was made.

A tuned result (`compare.py --tune`) chose each method's rate on validation runs at its `tune.seeds`; those seeds'
runs at the chosen rate share the seed component the choice was made on (within a method, validation and test accuracy
correlate 0.8–0.9 across seeds), so they are tuning seeds, and the findings use only the others: the test seeds. A
result whose rates were tuned in another one on the same seeds names them (`rates_from: {result, seeds}`); an untuned
result has no tuning seeds.

results/<name>/seeds.csv lists every committed seed: its role (tuning or test), the machine (CPU, cores, platform) and
commit it was made on, and when. A result made in one grid names its grid's env.json for every seed; a seed added
later (`reproduce.py NAME --seeds A-B`, experiments/grow.py) names its own.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

FILE = "seeds.csv"
COLUMNS = ["seed", "role", "cpu", "cores", "platform", "commit", "dirty", "made", "source"]


def tuning_seeds(cfg: dict) -> list[int]:
    """The seeds a result's rates were chosen on: its config's tune.seeds (tune.seed), or rates_from.seeds where its
    rates were tuned in another result on the same seeds' bases; none where neither."""
    tune = cfg.get("tune") or {}
    if not tune:
        return sorted(int(s) for s in (cfg.get("rates_from") or {}).get("seeds", []))
    seeds = tune.get("seeds", [tune.get("seed", 0)])
    return sorted(int(s) for s in seeds)


def committed(folder: Path) -> list[int]:
    """The seeds whose runs a result publishes (its summary.csv)."""
    return sorted(int(s) for s in pd.read_csv(Path(folder) / "summary.csv")["seed"].unique())


def roles(folder: Path, cfg: dict | None = None) -> dict[str, list[int]]:
    """{"tuning": [...], "test": [...]} of a committed result's seeds."""
    import yaml

    cfg = cfg if cfg is not None else (yaml.safe_load((Path(folder) / "config.yaml").read_text()) or {})
    tuned = set(tuning_seeds(cfg))
    seeds = committed(folder)
    return {"tuning": [s for s in seeds if s in tuned], "test": [s for s in seeds if s not in tuned]}


def env_row(env: dict, seed: int, role: str, source: str) -> dict:
    """seeds.csv's row of one seed made in the environment `env` (gcframe.tracking.env's env.json)."""
    return {"seed": seed, "role": role, "cpu": env.get("cpu", ""), "cores": env.get("cores", ""),
            "platform": env.get("platform", ""), "commit": str(env.get("commit", ""))[:12],
            "dirty": bool(env.get("dirty", False)), "made": env.get("made", ""), "source": source}


def table(folder: Path) -> pd.DataFrame:
    """seeds.csv of a result: the file where it is written, else every seed from the grid's env.json."""
    import json

    import yaml

    folder = Path(folder)
    if (folder / FILE).is_file():
        return pd.read_csv(folder / FILE)
    env = json.loads((folder / "env.json").read_text()) if (folder / "env.json").is_file() else {}
    r = roles(folder, yaml.safe_load((folder / "config.yaml").read_text()) or {})
    rows = [env_row(env, s, role, "env.json") for role in ("tuning", "test") for s in r[role]]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values("seed", ignore_index=True)
