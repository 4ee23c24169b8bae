"""MkDocs hook: pages built from the code, so nothing in the docs is written twice.

Three markers, each on a line of its own in a page's Markdown:

    <!-- gcframe:config gcframe.config.TrainConfig train -->
        a table of the dataclass's fields (option, type, default, the field's docstring) for the config section
        `train`; inherited fields included, in the order the dataclass has them
    <!-- gcframe:method grpo -->
        a built-in method from its code: the registered name and flags, its data source (the class docstring),
        its gradient coefficient (the `coefficients` docstring), the module's notes, and its options (its Config)
    <!-- gcframe:fields gcframe.evaluate.problems.FIELDS -->
        a {name: meaning} mapping of the code as a two-column table (the columns of a per-problem file)

The types and defaults come from `dataclasses.fields` of the imported class, the docstrings from the source (the
string literal under each field, as mkdocstrings reads them).

Numbers that the prose quotes from the code or the default config are written between value markers, which name
where the number comes from; a code host shows the page's Markdown with the number alone (the markers are HTML
comments), and the site's build writes what the code gives now:

    <!-- gcframe:value config.task.n_demos -->1,000<!-- /value -->

A written number that the code no longer gives makes the build warn, and so fail under `--strict`: rewrite every
page's numbers with `python docs/hooks/reference.py` (it also turns a `{{ config.task.n_demos }}` placeholder,
which the build fills but warns about, into a marker). What a marker can name:

    config.task.n_demos              what `python experiments/compare.py` runs: the built-in defaults under
                                     experiments/configs/default.yaml (its `run:` section aside)
    builtin.train.checkpoint_every
                                     a built-in default (gcframe.config.RunConfig), what a config that leaves the
                                     option unset gets
    tiny_llama.parameters            the parameter count of the default config's tiny Llama, e.g. 1.06M
                                     (`tiny_llama.float32_mb`: its weights' size in float32, MB)
    py.gcframe.tracking.health.WINDOW
                                     any module-level value, attributes and mapping keys followed by dots

An optional Python format spec follows a colon: `py.gcframe.tracking.health.THRESHOLDS.truncated_frac:.0%` gives
25%. Without one an integer is written with thousands separators (1,000), a switch as true/false.

The build warns, and so fails under `--strict`, when a field has no docstring, a method has no `coefficients`
docstring, a marker names something that does not exist, a written number is not the code's, a raw placeholder is
left, or a file in methods/ has no page in docs/methods/.
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
MARKER = re.compile(r"^<!-- gcframe:(config|method|fields) ([\w.]+)(?: ([\w.]+))? -->$", re.M)
VALUE = re.compile(r"\{\{ *(\w+)\.([\w.]+)(?::([^}]*?))? *\}\}")  # a raw placeholder: shown as written on a code host
WRITTEN = re.compile(r"<!-- gcframe:value (\w+)\.([\w.]+?)(?::([^>]*?))? -->(.*?)<!-- /value -->", re.S)
"""A value marker with the number written between its two comments."""
NOT_METHODS = {"__init__", "base"}
DEFAULT_CONFIG = ROOT / "experiments" / "configs" / "default.yaml"
_sources: dict[str, object] = {}  # the objects placeholders read, built once per build


def on_config(config, **kwargs):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    _sources.clear()  # `mkdocs serve` rebuilds in one process: read the config and the code again
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
            if kind == "fields":
                return fields_table(target)
            return config_table(target, section) if kind == "config" else method_section(target)
        except (ImportError, AttributeError, KeyError, TypeError) as e:
            log.warning(f"{page.file.src_uri}: marker '{m.group(0)}' names nothing usable ({type(e).__name__}: {e})")
            return ""

    from gcframe.errors import UserError  # a default.yaml that does not load

    def value(m: re.Match, written: str | None = None) -> str:
        try:
            now = fill(*m.groups()[:3])
        except (ImportError, AttributeError, KeyError, TypeError, ValueError, UserError) as e:
            what = f"placeholder '{m.group(0)}'" if written is None else f"value marker '{key(*m.groups()[:3])}'"
            log.warning(f"{page.file.src_uri}: {what} names nothing usable ({type(e).__name__}: {e})")
            return m.group(0) if written is None else written
        if written is None:
            log.warning(f"{page.file.src_uri}: placeholder '{m.group(0)}' shows as written where the Markdown is read "
                        "(a code host): run `python docs/hooks/reference.py` to write it as a value marker")
        elif written != now:
            log.warning(f"{page.file.src_uri}: '{written}' is written for {key(*m.groups()[:3])}, which is now "
                        f"'{now}': run `python docs/hooks/reference.py` to rewrite the pages' numbers")
        return now

    markdown = WRITTEN.sub(lambda m: value(m, m.group(4)), MARKER.sub(render, markdown))
    return VALUE.sub(value, markdown)


def key(name: str, path: str, spec: str | None) -> str:
    """What a value marker names: 'config.task.n_demos' or, with a format spec, 'py.X.Y:.0%'."""
    return f"{name}.{path}" + (f":{spec}" if spec else "")


def rewrite(markdown: str) -> str:
    """The page's Markdown with every value marker's number set to what the code gives now, and every raw
    placeholder turned into a value marker (the source of the numbers a code host shows)."""
    def marker(m: re.Match) -> str:
        return f"<!-- gcframe:value {key(*m.groups()[:3])} -->{fill(*m.groups()[:3])}<!-- /value -->"

    return WRITTEN.sub(marker, VALUE.sub(marker, markdown))


def fields_table(dotted: str) -> str:
    """A {name: meaning} mapping of the code (e.g. gcframe.evaluate.problems.FIELDS) as a two-column table."""
    fields = resolve(dotted)
    rows = [f"| `{name}` | {meaning} |" for name, meaning in fields.items()]
    return "\n".join(["| column | meaning |", "|---|---|", *rows]) + "\n"


# -- reading the code ---------------------------------------------------------------------------------------------
def resolve(dotted: str):
    """'gcframe.config.TrainConfig' or 'methods.grpo.GRPO.Config' -> the object."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return lookup(obj, ".".join(parts[i:])) if parts[i:] else obj
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


def source(name: str):
    """The object a placeholder's first word names (see the module docstring), built on first use."""
    if name not in _sources:
        if name == "config":
            from gcframe.config import from_dict, load_yaml

            raw = load_yaml(DEFAULT_CONFIG)
            for own in ("run", "tune", "families"):  # compare.py's own sections: which methods and seeds, the
                # rate tuning, the findings' families
                raw.pop(own, None)
            _sources[name] = from_dict(raw)
        elif name == "builtin":
            from gcframe.config import RunConfig

            _sources[name] = RunConfig()
        elif name == "tiny_llama":
            from gcframe.modeling import build_char_tokenizer, build_tiny_llama

            model = build_tiny_llama(build_char_tokenizer(), source("config").model)
            n = sum(p.numel() for p in model.parameters())
            _sources[name] = {"parameters": Millions(n), "float32_mb": f"{4 * n / 1e6:.1f}"}
        elif name == "py":
            _sources[name] = None  # the path itself is a dotted name: resolve() imports it
        else:
            raise KeyError(f"unknown source '{name}': use config, builtin, tiny_llama or py")
    return _sources[name]


class Millions(int):
    """A parameter count, written 1.06M."""

    def __format__(self, spec: str) -> str:
        return f"{self / 1e6:.2f}M" if not spec else int.__format__(self, spec)


def lookup(obj, path: str):
    """`path`'s dotted parts as attributes or mapping keys of `obj`."""
    for part in path.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def fill(name: str, path: str, spec: str | None) -> str:
    """The text of one placeholder `{{ name.path:spec }}`."""
    value = resolve(path) if name == "py" else lookup(source(name), path)
    if dataclasses.is_dataclass(value) or isinstance(value, (dict, list, tuple, set, type)) or callable(value):
        raise TypeError(f"{path} is a {type(value).__name__}, not a single value")
    if spec:
        return format(value, spec)
    if isinstance(value, bool):
        return "true" if value else "false"
    if type(value) is int:
        return format(value, ",")
    return format(value, "")


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
    if cls.train_defaults:
        runs = ", ".join(f"`{k}: {str(v).lower() if isinstance(v, bool) else v}`"
                         for k, v in cls.train_defaults.items())
        flags.append(f"runs with {runs} in its train section unless its own `methods.{cls.name}.train` sets them "
                     "(`train_defaults`)")
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


def main() -> int:
    """Rewrite the numbers of every page under docs/ (value markers, raw placeholders) from the code and the
    default config; prints the pages it changed."""
    on_config({})
    changed = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(ROOT)))
    print("numbers rewritten in " + (", ".join(changed) if changed else "no page (every one was current)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
