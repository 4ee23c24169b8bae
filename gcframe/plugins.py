"""Methods from outside the package: a user's own file, or an installed package's entry point.

    python experiments/compare.py --methods-from my_methods.py --methods sft,reinforce
    python -m gcframe.verify --methods-from my_methods.py

    # an installed package declares its modules in its pyproject.toml; gcframe imports them when `methods` is imported
    # (or a method is asked for by a name not registered yet: gcframe.registry)
    [project.entry-points."gcframe.methods"]
    reinforce = "my_package.reinforce"

A plugin registers its method with `methods.register` (gcframe.registry's) and its textbook loss with
`gcframe.verify.textbook`, exactly as the built-in methods do (README "Adding a method"); importing it is all gcframe
does, so nothing in gcframe is edited. Import errors, a missing file and a file that registers nothing are one-line
UserErrors.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gcframe.errors import UserError
from gcframe.registry import (  # noqa: F401  (API, the group and load_entry_points lived here before gcframe.registry)
    API, ENTRY_POINT_GROUP, REGISTRY, check_api, first_line, load_entry_points)

_modules: dict = {}  # resolved path -> the imported module
_loaded: dict[str, list[str]] = {}  # resolved path -> the method names it registered


def import_file(path: str | Path, flag: str = "--methods-from"):
    """Import a user's Python file once per process (its folder first on sys.path, so that it may import its
    neighbours) -> the module. `flag` names the option in error messages."""
    p = Path(path).expanduser()
    if not p.exists():
        where = "" if flag.startswith("--") else " (a relative path in a config file is read from its folder)"
        raise UserError(f"{flag}: '{path}' not found: give the path of your .py file{where}")
    if not p.is_file() or p.suffix != ".py":
        raise UserError(f"{flag}: '{path}' is not a Python file: give the path of a .py file")
    key = str(p.resolve())
    if key in _modules:
        return _modules[key]
    name = f"gcframe_user_{p.stem}"  # in sys.modules before it runs: dataclasses and pickle look it up there
    spec = importlib.util.spec_from_file_location(name, p)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(p.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 — the user's code: a SyntaxError, an ImportError, a name registered twice
        del sys.modules[name]
        raise UserError(f"{flag}: '{path}' failed to import ({first_line(e)}): fix the file") from None
    finally:
        sys.path.remove(str(p.resolve().parent))
    _modules[key] = module
    return module


def load_file(path: str | Path, flag: str = "--methods-from") -> list[str]:
    """Import a user's method file (`import_file`) -> the method names it registered."""
    key = str(Path(path).expanduser().resolve())
    if key in _loaded:
        return _loaded[key]
    before = set(REGISTRY)
    import_file(path, flag)
    new = [n for n in REGISTRY if n not in before]
    if not new:
        raise UserError(f"{flag}: '{path}' registers no method: decorate a Method subclass with @register(\"name\") "
                        "(README 'Adding a method')")
    try:
        for name in new:
            check_api(REGISTRY[name], f"{flag} '{path}'")
    except UserError:  # refused: none of the file's methods stays registered (the registry is the process's)
        for name in new:
            REGISTRY.pop(name, None)
        raise
    _loaded[key] = new
    return new


def load(paths) -> list[str]:
    """`load_file` for each of `paths` (None, one path, or a list) -> every method name they registered."""
    if not paths:
        return []
    return [n for p in ([paths] if isinstance(paths, (str, Path)) else paths) for n in load_file(p)]


def describe(cls) -> str:
    """A method's description: its `description`, else the first paragraph of its module's docstring, whole (its
    lines joined: a docstring's line break is no place to cut a sentence)."""
    text = getattr(cls, "description", "") or (sys.modules[cls.__module__].__doc__ or cls.__doc__ or "")
    first = text.strip().split("\n\n")[0]
    return " ".join(first.split()).removesuffix(".")


def listing(rows: list[tuple[str, str]], gap: int = 2) -> str:
    """name + description rows in two columns. On a terminal each description is wrapped at its width, at spaces,
    under its own column (the terminal would cut words where its line ends); elsewhere (a pipe, a file) one line
    each."""
    import shutil
    import textwrap

    width = max((len(name) for name, _ in rows), default=0) + gap
    if not sys.stdout.isatty():
        return "\n".join(f"{name:<{width}}{text}" for name, text in rows)
    columns = max(shutil.get_terminal_size((100, 24)).columns, width + 30)
    return "\n".join(textwrap.fill(text, columns, initial_indent=f"{name:<{width}}", subsequent_indent=" " * width,
                                    break_long_words=False, break_on_hyphens=False) for name, text in rows)
