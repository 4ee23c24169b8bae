"""Methods from outside the package: a user's own file, or an installed package's entry point.

    python experiments/compare.py --methods-from my_methods.py --methods sft,reinforce
    python -m gcframe.verify --methods-from my_methods.py

    # an installed package declares its modules in its pyproject.toml; gcframe imports them when `methods` is imported
    [project.entry-points."gcframe.methods"]
    reinforce = "my_package.reinforce"

A plugin registers its method with `methods.register` and its textbook loss with `gcframe.verify.textbook`, exactly
as the built-in methods do (README "Adding a method"); importing it is all gcframe does, so nothing in gcframe is
edited. Import errors, a missing file and a file that registers nothing are one-line UserErrors.
"""
from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from gcframe.errors import UserError

ENTRY_POINT_GROUP = "gcframe.methods"
_modules: dict = {}  # resolved path -> the imported module
_loaded: dict[str, list[str]] = {}  # resolved path -> the method names it registered


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


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
        raise UserError(f"{flag}: '{path}' failed to import ({_first_line(e)}): fix the file") from None
    finally:
        sys.path.remove(str(p.resolve().parent))
    _modules[key] = module
    return module


def load_file(path: str | Path, flag: str = "--methods-from") -> list[str]:
    """Import a user's method file (`import_file`) -> the method names it registered."""
    from methods.base import REGISTRY

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


API = {"collect": ("step",), "coefficients": ("batch", "logp"), "prepare": ("batch",)}
"""The calls the engine makes on every method (methods/base.py), each with its arguments after self."""


def check_api(cls, where: str) -> None:
    """Refuse, when a method file is imported (before anything runs), a registered method the engine could not
    call: one without `collect` or `coefficients` of its own, or whose collect, coefficients or prepare does not
    take the engine's arguments (`coefficients(self, batch)`). One line naming the method and what is wrong."""
    import inspect

    from methods.base import Method

    name = getattr(cls, "name", cls.__name__)
    for attr, args in API.items():
        fn = getattr(cls, attr, None)
        call = f"{attr}(self, {', '.join(args)})"
        if fn is None or (attr != "prepare" and fn is getattr(Method, attr)):
            raise UserError(f"{where}: method '{name}' has no {attr} of its own: define {call} (methods/base.py: "
                            "collect(step) -> Batch, coefficients(batch, logp) -> GC [N, T])")
        try:
            inspect.signature(fn).bind(None, *args)
        except TypeError:
            raise UserError(f"{where}: method '{name}' defines {attr}{inspect.signature(fn)}, but the engine calls "
                            f"{call}: give it that signature") from None
        except ValueError:  # no signature to read (a builtin): the call decides
            pass


def load(paths) -> list[str]:
    """`load_file` for each of `paths` (None, one path, or a list) -> every method name they registered."""
    if not paths:
        return []
    return [n for p in ([paths] if isinstance(paths, (str, Path)) else paths) for n in load_file(p)]


def load_entry_points() -> list[str]:
    """Import every module of the `gcframe.methods` entry-point group (installed packages) -> their names."""
    names = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001
            raise UserError(f"entry point '{ep.name} = {ep.value}' of group {ENTRY_POINT_GROUP} failed to import "
                            f"({_first_line(e)}): fix or uninstall that package") from None
        names.append(ep.name)
    from methods.base import REGISTRY

    for name in names:
        if name in REGISTRY:
            check_api(REGISTRY[name], f"entry point '{name}' of group {ENTRY_POINT_GROUP}")
    return names


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
