"""What made a result: the software, the machine and the code, written beside it as `env.json`.

Two runs of the same commit can disagree because a library, the CPU's BLAS kernels or the thread count changed;
this record is how a reader tells which. `describe(env)` is its one-line form, shown by the report and the README.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "accelerate", "peft", "trl", "numpy", "pandas",
            "gguf")
ROOT = Path(__file__).resolve().parents[1]  # the gcframe package (git commands run from it)
REPO = ROOT.parent  # the repository's top: what a published path is named relative to (`portable`)


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


OUTPUTS = ("results", "docs", "*.md")  # what runs write into the tree, not what makes their numbers


def git_state(root: Path = ROOT) -> dict:
    """The commit of the code and whether the tree had uncommitted changes (None outside a git checkout)."""
    def git(*a):
        return subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode:
            return {"commit": None, "dirty": None}
        # outputs (results/, docs/, Markdown) rendered into the tree by an earlier run do not make the code dirty
        status = git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{p}" for p in OUTPUTS))
        return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def collect(argv: list[str] | None = None) -> dict:
    """The environment of this process, as a JSON-ready dict."""
    import torch

    from gcframe.tracking import threads

    cfg = torch.__config__.show()
    blas, lapack = (m.group(1) if (m := re.search(rf"\b{key}=([^,\s]+)", cfg)) else None
                    for key in ("BLAS_INFO", "LAPACK_INFO"))
    env = {
        "python": platform.python_version(),
        "torch": {"version": torch.__version__, "cuda": torch.version.cuda, "blas": blas, "lapack": lapack,
                  "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                  "mkldnn": torch.backends.mkldnn.is_available()},
        "packages": {p: _version(p) for p in PACKAGES if p != "torch"},
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "processes": int(os.environ.get("WORLD_SIZE", "1") or 1),  # a multi-process launch's (torchrun, accelerate)
        "threads_choice": threads.CHOSEN.to_dict() if threads.CHOSEN else None,  # why that many (tracking.threads)
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "platform": platform.platform(),
        **git_state(),
        "command": portable(" ".join([Path(sys.executable).name, *(sys.argv if argv is None else argv)])),
    }
    return env


def write_env(path: str | Path, argv: list[str] | None = None) -> dict:
    env = collect(argv)
    Path(path).write_text(json.dumps(env, indent=1) + "\n")
    return env


def _places(root: Path = REPO) -> list[tuple[str, str]]:
    """(absolute folder, how a published file names it) for `portable`, the deepest first: the repository's top ->
    "." (paths in it relative to it), the cache -> "$GCFRAME_CACHE", the home folder -> "~". Each folder as given
    and resolved (a symlinked checkout is named both ways)."""
    from gcframe.tracking.log import cache_root

    places = {}
    for folder, name in ((Path.home(), "~"), (cache_root(), "$GCFRAME_CACHE"), (root, ".")):
        for form in {str(folder), str(folder.resolve())}:
            if form.rstrip("/") and not form.startswith(("~", "$")):
                places[form.rstrip("/")] = name
    return sorted(places.items(), key=lambda kv: -len(kv[0]))


def portable(text: str, root: Path = REPO, elsewhere: dict | None = None) -> str:
    """`text` (a command line, a config file, a path) with every absolute path inside the repository written
    relative to its top, inside the cache as $GCFRAME_CACHE/..., inside the home folder as ~/..., and inside a folder
    of `elsewhere` ({folder: name}, e.g. a run folder outside all three) by that name: how a file that is published
    (results/) names them, so that it names no folder of the machine that made it.
    "python experiments/compare.py --out /work/gc/runs/x" -> "python experiments/compare.py --out runs/x"."""
    extra = sorted(((str(Path(f).resolve()).rstrip("/"), n) for f, n in (elsewhere or {}).items()),
                   key=lambda kv: -len(kv[0]))
    for folder, name in _places(root) + extra:  # the repository, cache and home first: `elsewhere` is what is left
        def named(m: re.Match, name=name) -> str:
            return (name + "/" if name != "." else "") if m.group(1) else name
        # the folder itself, or a path under it; not a longer folder's name (/work/gc in /work/gc2)
        text = re.sub(rf"(?<![\w.~$/-]){re.escape(folder)}(?:(/)|(?![\w.-]))", named, text)
    return text


SAME = ("commit", "dirty", "python", "cpu", "threads")  # runs whose numbers are put side by side agree on these


RUN_CODE = ("gcframe", "methods", "experiments/compare.py", "experiments/compare_config.py", "pyproject.toml",
            "requirements")
"""The code a run executes (a run's settings are its own OUT/config.yaml, not the repository's YAML files)."""


def same_run_code(a: str, b: str, root: Path = ROOT) -> bool:
    """Whether commits a and b hold the same RUN_CODE: a comparison resumed after a commit that changed only
    docs, tests, configs or scripts around it ran the same code. False where git cannot tell (no checkout, a
    commit it does not have)."""
    try:
        r = subprocess.run(["git", "-C", str(root), "diff", "--quiet", a, b, "--",
                            *(f":(top){p}" for p in RUN_CODE)],  # from the repository's top, wherever root is in it
                           capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def differences(a: dict, b: dict) -> list[str]:
    """What two environments differ in, of what must be equal for their runs to share one result: SAME (two
    commits count as one where they hold the same RUN_CODE), the torch version and the library versions."""
    def key(e):
        return {k: e.get(k) for k in SAME} | {"torch": (e.get("torch") or {}).get("version"),
                                               "packages": e.get("packages")}
    ka, kb = key(a), key(b)
    if ka["commit"] and kb["commit"] and ka["commit"] != kb["commit"] and same_run_code(ka["commit"], kb["commit"]):
        kb["commit"] = ka["commit"]
    return [k for k in ka if ka[k] != kb[k]]


def short_commit(env: dict, missing: str = "no git") -> str:
    """The commit as a person reads it: 7 characters, '+dirty' for a tree with uncommitted changes."""
    return (env.get("commit") or missing)[:7] + ("+dirty" if env.get("dirty") else "")


def describe(env: dict) -> str:
    """One line: torch and transformers versions, CPU capability, threads, CPU or GPU, commit (+ dirty)."""
    if not env:
        return "environment not recorded"
    t = env.get("torch", {})
    return (f"torch {t.get('version')} ({t.get('cpu_capability')}), transformers "
            f"{env.get('packages', {}).get('transformers')}, Python {env.get('python')}, {env.get('device')}: "
            f"{env.get('cpu')}, {env.get('threads')} thread(s), commit {short_commit(env)}")


def load(path: str | Path) -> dict:
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else {}
