"""MkDocs hook: pages built from the code, so nothing in the docs is written twice.

Two markers, each on a line of its own in a page's Markdown:

    <!-- gcframe:config gcframe.config.TrainConfig train -->
        a table of the dataclass's fields (option, type, default, the field's docstring) for the config section
        `train`; inherited fields included, in the order the dataclass has them
    <!-- gcframe:method grpo -->
        a built-in method from its code: the registered name and flags, its data source (the class docstring),
        its gradient coefficient (the `coefficients` docstring), the module's notes, and its options (its Config)

The types and defaults come from `dataclasses.fields` of the imported class, the docstrings from the source (the
string literal under each field, as mkdocstrings reads them). The build warns, and so fails under `--strict`, when a
field has no docstring, a method has no `coefficients` docstring, a marker names something that does not exist, or a
file in methods/ has no page in docs/methods/.
"""
from __future__ import annotations

import ast
import dataclasses
import html
import importlib
import inspect
import logging
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("mkdocs.hooks.gcframe")
MARKER = re.compile(r"^<!-- gcframe:(config|method) ([\w.]+)(?: ([\w.]+))? -->$", re.M)
NOT_METHODS = {"__init__", "base"}


def on_config(config, **kwargs):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return config


def on_files(files, config, **kwargs):
    pages = {Path(f.src_uri).stem for f in files if f.src_uri.startswith("methods/")}
    for path in sorted((ROOT / "methods").glob("*.py")):
        if path.stem not in NOT_METHODS and path.stem not in pages:
            log.warning(f"methods/{path.name} has no page: add docs/methods/{path.stem}.md with "
                        f"<!-- gcframe:method {path.stem} --> and list it in mkdocs.yml's nav")
    return files


def on_page_markdown(markdown, page, config, files, **kwargs):
    def render(m: re.Match) -> str:
        kind, target, section = m.groups()
        try:
            return config_table(target, section) if kind == "config" else method_section(target)
        except (ImportError, AttributeError, KeyError, TypeError) as e:
            log.warning(f"{page.file.src_uri}: marker '{m.group(0)}' names nothing usable ({type(e).__name__}: {e})")
            return ""

    return MARKER.sub(render, markdown)


# -- reading the code ---------------------------------------------------------------------------------------------
def resolve(dotted: str):
    """'gcframe.config.TrainConfig' or 'methods.grpo.GRPO.Config' -> the object."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"no module in {dotted}")


def field_docstrings(cls) -> dict[str, str]:
    """name -> the string literal under `name: type = value` in the class body, for the class and its bases."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        body = tree.body[0].body
        for node, nxt in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
                out[node.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return "(section)"
    else:
        return "(required)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    return repr(value)


# -- rendering ------------------------------------------------------------------------------------------------------
def inline(text: str) -> str:
    """A docstring as one HTML paragraph: escaped, `code` spans kept as code."""
    text = " ".join(text.split())
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def config_table(target: str, section: str | None) -> str:
    cls = resolve(target)
    docs = field_docstrings(cls)
    prefix = f"{section}." if section else ""
    rows = []
    for f in dataclasses.fields(cls):
        doc = docs.get(f.name)
        if doc is None:
            nested = f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory)
            if not nested:
                log.warning(f"{target}.{f.name} has no docstring: write one under the field")
            doc = f"The `{f.name}:` section, below." if nested else ""
        anchor = f"{prefix}{f.name}".replace(".", "-")
        rows.append(f'<tr id="{anchor}"><td><code>{html.escape(f.name)}</code></td>'
                    f"<td><code>{html.escape(str(f.type))}</code></td>"
                    f"<td><code>{html.escape(default_text(f))}</code></td><td>{inline(doc)}</td></tr>")
    return ('<table class="gcframe-config">\n<thead><tr><th>option</th><th>type</th><th>default</th>'
            "<th>what it does</th></tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>\n")


def fenced(text: str) -> str:
    return "```text\n" + text.strip("\n") + "\n```\n"


def method_section(name: str) -> str:
    module = importlib.import_module(f"methods.{name}")
    from methods.base import REGISTRY, MethodConfig

    classes = [c for c in REGISTRY.values() if c.__module__ == module.__name__]
    if len(classes) != 1:
        raise KeyError(f"methods/{name}.py registers {len(classes)} methods, the page expects one")
    cls = classes[0]
    coeff = cls.__dict__.get("coefficients")
    formula = inspect.getdoc(coeff) if coeff is not None else None
    if coeff is not None and not formula:
        log.warning(f"methods/{name}.py: {cls.__name__}.coefficients has no docstring: state its formula there")
    flags = [f"registered as `{cls.name}` (`--methods {cls.name}`, `methods.{cls.name}` in a config)"]
    if cls.uses_reference:
        flags.append("the engine fills `batch.data['ref_logp']` (log π_ref) once per batch (`uses_reference`)")
    if cls.needs_groups:
        flags.append("needs `train.group_size >= 2` (`needs_groups`)")
    out = ["## At a glance", "", *[f"- {f}" for f in flags], f"- source: `methods/{name}.py`", ""]
    out += ["## Data source", "", inspect.getdoc(cls) or "", ""]
    if formula:
        out += ["## Gradient coefficient", "", f"`{cls.__name__}.coefficients` returns GC `[N, T]`:", "",
                fenced(formula)]
    else:  # inherited: say from where
        owner = next(k for k in cls.__mro__ if "coefficients" in k.__dict__)
        out += ["## Gradient coefficient", "", f"Inherited from `{owner.__module__}.{owner.__qualname__}`:", "",
                fenced(inspect.getdoc(owner.coefficients) or "")]
    if module.__doc__:
        out += ["## Notes from the code", "", f"The docstring of `methods/{name}.py`:", "", fenced(module.__doc__)]
    own = cls.Config is not MethodConfig
    out += [f"## Options: `methods.{cls.name}`", "",
            ("Set under `methods:` in a config, e.g. `methods: {" + cls.name + ": {aggregation: token-mean}}`. "
             + ("" if own else "The method has no options of its own, only the base class's.")), "",
            config_table(f"{cls.Config.__module__}.{cls.Config.__qualname__}", f"methods.{cls.name}")]
    return "\n".join(out)
