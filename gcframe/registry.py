"""The methods' registry. gcframe owns it and the methods register into it; the engine finds a method by its name
(`get_method`) and never imports a method's module.

A method file decorates its class with `@register("name")` (`from methods import register` re-exports this one).
The methods come in through the entry-point group `gcframe.methods` (`load_entry_points`): the built-in ones
(methods/, an entry of this project's pyproject.toml) first, then every installed package's. A driver that imports
its methods itself (compare.py's `import methods`, a user's `--methods-from FILE.py`, gcframe.plugins) needs no entry
point; `get_method` loads the group only for a name not registered yet, and `methods()` for the whole list.
"""
from __future__ import annotations

import inspect
from importlib.metadata import distributions

from gcframe.errors import UserError

REGISTRY: dict[str, type] = {}
"""name -> method class, in registration order (the order --list-methods prints and "every method" runs)."""
ENTRY_POINT_GROUP = "gcframe.methods"
INSTALL = "pip install -e ."
"""What puts the built-in methods' entry point in the environment (pyproject.toml declares it)."""
_loaded: list[str] | None = None  # the group's entry-point names, once loaded (None: not yet)
NONE_REGISTERED = (f"no method is registered, as the entry points of group {ENTRY_POINT_GROUP} (the built-in methods "
                   f"among them) are not installed: install the checkout ({INSTALL})")


def register(name: str):
    """Class decorator: make a method available under `name` (for --methods and configs)."""

    def deco(cls):
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"method name '{name}' registered twice")
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return deco


def get_method(name: str) -> type:
    """The method registered as `name` (the entry points loaded first where it is not), else one line naming the
    known methods."""
    if name not in REGISTRY:
        load_entry_points()
    if name not in REGISTRY:
        if not REGISTRY:
            raise UserError(f"unknown method '{name}': {NONE_REGISTERED}")
        raise UserError(f"unknown method '{name}': known methods are {', '.join(REGISTRY)} "
                        "(see --list-methods)")
    return REGISTRY[name]


def methods() -> dict[str, type]:
    """Every method: the registry once the entry points are loaded (none at all: one line naming the install)."""
    load_entry_points()
    if not REGISTRY:
        raise UserError(NONE_REGISTERED)
    return REGISTRY


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _group() -> list:
    """The group's entry points, the first of each name on the path, this project's own first. Every distribution's
    are read: `entry_points()` keeps one distribution per project, the first found, and metadata left in a
    checkout by an install made before pyproject.toml declared the built-in methods (gcframe.egg-info) would hide
    the installed one's."""
    found: dict = {}
    for dist in sorted(distributions(), key=lambda d: d.name != "gcframe"):  # (a stable sort: the path's order)
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                found.setdefault(ep.name, ep)
    return list(found.values())


def load_entry_points() -> list[str]:
    """Import every module of the `gcframe.methods` entry-point group, this project's own entry (the built-in
    methods) first, once per process -> their names. Re-entrant: a module of the group that imports `methods`,
    which loads the group, loads nothing twice."""
    global _loaded
    if _loaded is not None:
        return _loaded
    _loaded = names = []
    try:
        for ep in _group():
            try:
                ep.load()
            except Exception as e:  # noqa: BLE001
                raise UserError(f"entry point '{ep.name} = {ep.value}' of group {ENTRY_POINT_GROUP} failed to "
                                f"import ({first_line(e)}): fix or uninstall that package") from None
            names.append(ep.name)
        for name in names:
            if name in REGISTRY:
                check_api(REGISTRY[name], f"entry point '{name}' of group {ENTRY_POINT_GROUP}")
    except BaseException:
        _loaded = None  # a later call tries again (and says the same line)
        raise
    return names


API = {"collect": ("step",), "coefficients": ("batch", "logp"), "prepare": ("batch",)}
"""The calls the engine makes on every method (the base class's API), each with its arguments after self."""


def check_api(cls, where: str) -> None:
    """Refuse, when a method file is imported (before anything runs), a registered method the engine could not
    call: one without `collect` or `coefficients` of its own (the base class's are abstract), or whose collect,
    coefficients or prepare does not take the engine's arguments (`coefficients(self, batch)`). One line naming the
    method and what is wrong."""
    name = getattr(cls, "name", cls.__name__)
    for attr, args in API.items():
        fn = getattr(cls, attr, None)
        call = f"{attr}(self, {', '.join(args)})"
        if fn is None or (attr != "prepare" and getattr(fn, "__isabstractmethod__", False)):
            raise UserError(f"{where}: method '{name}' has no {attr} of its own: define {call} (methods/base.py: "
                            "collect(step) -> Batch, coefficients(batch, logp) -> GC [N, T])")
        try:
            inspect.signature(fn).bind(None, *args)
        except TypeError:
            raise UserError(f"{where}: method '{name}' defines {attr}{inspect.signature(fn)}, but the engine calls "
                            f"{call}: give it that signature") from None
        except ValueError:  # no signature to read (a builtin): the call decides
            pass
