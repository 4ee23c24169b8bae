"""No import circles between the project's modules (gcframe/, methods/, experiments/, analysis/), and no arrow back
up: the library (gcframe/) imports nothing of methods/, experiments/ or analysis/ and names none of their modules in
a string (the methods come in through gcframe.registry's entry points or the driver's own import).

The graph is read statically with `ast`: every `import` and `from ... import` statement of a module, at the top
level or inside a function, is an edge to the most specific project module it names (`from gcframe.engine import
aggregate` -> gcframe.engine; `from experiments import benchmark_trl` -> experiments.benchmark_trl). Imports under
`if TYPE_CHECKING:` count too: a circle that type hints need is still a circle in the layering. A function-level
import does not make a circle go away, it only postpones it, so it is an edge like any other.
"""
from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gcframe", "methods", "experiments", "analysis")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT, packages=PACKAGES) -> dict[str, Path]:
    """Module name -> file, for every .py file under the packages."""
    return {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """(dotted name, line) of everything a module imports; `from X import a` gives X.a (a module or not) and X."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..pkg import y
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out += [(f"{base}.{alias.name}" if base else alias.name, node.lineno) for alias in node.names]
            if base:
                out.append((base, node.lineno))
    return out


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, dict[str, int]]:
    """module -> {imported project module: line of the first import of it}."""
    modules = project_modules(root, packages)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = graph.setdefault(name, {})
        for target, line in imported_names(tree, name, path.name == "__init__.py"):
            while target and target not in modules:  # gcframe.engine.aggregate -> gcframe.engine
                target = target.rpartition(".")[0]
            if target and target != name:  # (a package's __init__ naming its own package adds no edge)
                edges.setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[tuple[list[str], list[str]]]:
    """(one concrete circle [a, b, ..., a], all the modules of its strongly connected component) per component
    with a circle (Tarjan, iterative)."""
    index, low, on_stack, stack, comps, counter = {}, {}, set(), [], [], [0]

    def strongconnect(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    out = []
    for comp in comps:
        members = set(comp)
        start = min(comp)
        if len(comp) == 1 and start not in graph.get(start, {}):
            continue
        path, seen = [start], {start}  # walk inside the component until the walk closes on itself
        while True:
            nxt = next((w for w in sorted(graph[path[-1]]) if w in members and (w == start or w not in seen)), None)
            if nxt is None:  # dead end for this greedy walk: a shortest path back to start (BFS) closes it
                nxt = _shortest_back(graph, path[-1], start, members)
                path += nxt
                break
            path.append(nxt)
            if nxt == start:
                break
            seen.add(nxt)
        out.append((path, sorted(comp)))
    return out


def _shortest_back(graph, src: str, dst: str, members: set[str]) -> list[str]:
    prev, frontier = {src: None}, [src]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
                if w == dst:
                    hops, at = [dst], v
                    while at != src:
                        hops.append(at)
                        at = prev[at]
                    return hops[::-1]
        frontier = nxt
    return [dst]


def describe(cycle: list[str], members: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path],
             root: Path = ROOT) -> str:
    hops = [f"{modules[a].relative_to(root)}:{graph[a][b]} imports {b}" for a, b in itertools.pairwise(cycle)]
    knot = len(members) > len(cycle) - 1
    more = f" (the circle is part of a knot of {len(members)}: {', '.join(members)})" if knot else ""
    return " -> ".join(cycle) + more + "\n    " + "\n    ".join(hops)


def test_no_import_cycles():
    graph, modules = import_graph(), project_modules()
    found = cycles(graph)
    assert not found, "import cycle(s) between project modules:\n  " + "\n  ".join(
        describe(c, members, graph, modules) for c, members in found)


def test_the_check_sees_a_cycle(tmp_path):
    """The check itself: a planted circle through a function-level import, a relative import and a package."""
    pkg = tmp_path / "gcframe"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from gcframe.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from gcframe.sub import g\n    return g\n")
    (pkg / "sub" / "__init__.py").write_text("from .c import g\n")
    (pkg / "sub" / "c.py").write_text("import gcframe.a\n\ng = 1\n")
    (pkg / "d.py").write_text("import gcframe.a\n")  # outside the circle
    graph = import_graph(tmp_path, ("gcframe",))
    assert graph["gcframe.sub"] == {"gcframe.sub.c": 1}
    (circle, members), = cycles(graph)
    assert circle == ["gcframe.a", "gcframe.b", "gcframe.sub", "gcframe.sub.c", "gcframe.a"]
    assert members == ["gcframe.a", "gcframe.b", "gcframe.sub", "gcframe.sub.c"]
    text = describe(circle, members, graph, project_modules(tmp_path, ("gcframe",)), tmp_path)
    assert "gcframe/b.py:2 imports gcframe.sub" in text
    (pkg / "sub" / "c.py").write_text("g = 1\n")  # broken: no circle
    assert cycles(import_graph(tmp_path, ("gcframe",))) == []


# -- no arrow back up: the library never imports (or names) what sits above it -------------------------------------
ABOVE = ("methods", "experiments", "analysis")
"""The packages above gcframe/: the methods, the drivers, the readers of run folders."""
NAMED_HERE = {  # (file, name): why the library may name it in a string (no import: user-facing text or repo data)
    ("gcframe/errors.py", "experiments"): "resume_command prints the command that continues a comparison "
                                          "(python <checkout>/experiments/compare.py --resume OUT); analysis/ prints "
                                          "it too, and analysis/ imports nothing of experiments/",
    ("gcframe/tracking/env.py", "methods"): "RUN_CODE: the checkout's paths of the code a run executes, the pathspec "
                                            "same_run_code gives git diff (data about the checkout)",
    ("gcframe/tracking/env.py", "experiments/compare.py"): "RUN_CODE (as above)",
    ("gcframe/tracking/env.py", "experiments/compare_config.py"): "RUN_CODE (as above)",
    ("gcframe/evaluate/rescore.py", "analysis.report"): "the next command `python -m gcframe.evaluate` prints "
                                                        "(python -m analysis.report OUT: docs/concepts/runs.md)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are documentation: a statement that is a string alone (a module's, class's
    or function's docstring, an attribute's docstring under its assignment)."""
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def upward_imports(root: Path = ROOT, lower: str = "gcframe", above=ABOVE) -> list[str]:
    """'file:line imports NAME' for every import, at any depth (a function's, under TYPE_CHECKING), of a module of a
    package above `lower`."""
    out, known = [], project_modules(root, above)
    for name, path in project_modules(root, (lower,)).items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for target, line in imported_names(tree, name, path.name == "__init__.py"):
            while target.rpartition(".")[0] and target not in known:  # methods.grpo.GRPO -> methods.grpo
                target = target.rpartition(".")[0]
            if target.split(".")[0] in above:
                out.append(f"{path.relative_to(root)}:{line} imports {target}")
    return sorted(set(out))


def upward_strings(root: Path = ROOT, lower: str = "gcframe", above=ABOVE) -> list[tuple[str, str, int]]:
    """(file, name, line) for every string of `lower` (not documentation) that names a module above it: a dotted
    module name anywhere in it (`"analysis.report"`, `"python -m analysis.report OUT"`: what import_module, runpy or
    `python -m` would load), a path into such a package as the whole string (`"experiments/compare.py"`), or the
    package's bare name as a path's part or an item of a list (`ROOT / "experiments" / ...`, a preload tuple). A
    path inside a sentence (`see experiments/configs/`) points the reader, as a docstring does; `"methods"` as a
    config key (`raw.get("methods")`, `{"methods": ...}`) names a config section."""
    modules = set(project_modules(root, above))
    dotted = re.compile(rf"(?<![\w.])(?:{'|'.join(above)})(?:\.\w+)+")
    whole_path = re.compile(rf"^(?:{'|'.join(above)})(?:/[\w.-]+)+/?$")
    out = []
    for path in sorted((root / lower).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docs, parent = _docstrings(tree), {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parent[id(child)] = node
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
                continue
            text, up = node.value, parent.get(id(node))
            if isinstance(up, ast.JoinedStr) and id(up) in docs:
                continue
            found = []
            for m in dotted.finditer(text):
                name = m.group(0)
                while name and name not in modules:  # analysis.report.write_report -> analysis.report
                    name = name.rpartition(".")[0]
                if "." in name:
                    found.append(name)
            if whole_path.match(text):
                found.append(text.rstrip("/"))
            if text in above and (isinstance(up, (ast.Tuple, ast.List, ast.Set)) or
                                  (isinstance(up, ast.BinOp) and isinstance(up.op, ast.Div))):
                found.append(text)
            out += [(path.relative_to(root).as_posix(), name, node.lineno) for name in found]
    return out


def test_the_library_imports_nothing_above_it():
    """gcframe/ -> methods/, experiments/, analysis/: none, at any depth (a method is found by name in
    gcframe.registry; a driver's units, claims and fork-server modules are the driver's: experiments/compare_grid.py,
    tests/conftest.py)."""
    found = upward_imports()
    assert not found, "the library imports what sits above it (register into gcframe.registry instead, or move the " \
                      "driver's part to experiments/):\n  " + "\n  ".join(found)


def test_the_library_names_nothing_above_it_in_strings():
    found = [(f, name, line) for f, name, line in upward_strings() if (f, name) not in NAMED_HERE]
    assert not found, "the library names a module above it in a string (a coupling the import graph cannot see: " \
                      "let the driver pass it in):\n  " + "\n  ".join(f"{f}:{n}: {name!r}" for f, name, n in found)
    kept = {(f, name) for f, name, _ in upward_strings()}
    assert set(NAMED_HERE) <= kept, f"no longer named (drop from NAMED_HERE): {sorted(set(NAMED_HERE) - kept)}"


def test_the_upward_checks_see_a_planted_arrow(tmp_path):
    """The checks themselves: a function-level import, one under TYPE_CHECKING, a relative one that stays inside,
    and every form of string they flag beside the ones they leave (documentation, a sentence's path, a config key)."""
    pkg = tmp_path / "gcframe"
    pkg.mkdir()
    for above in ABOVE:
        (tmp_path / above).mkdir()
        (tmp_path / above / "__init__.py").write_text("")
    (tmp_path / "methods" / "grpo.py").write_text("")
    (tmp_path / "analysis" / "report.py").write_text("")
    (tmp_path / "experiments" / "compare.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        '"""Docstring naming methods.grpo and experiments/compare.py: documentation."""\n'
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "if TYPE_CHECKING:\n"
        "    import analysis.report\n"
        "def f(cfg, root):\n"
        '    """methods.grpo again, in a function\'s docstring."""\n'
        "    from methods.grpo import GRPO\n"
        '    cfg.get("methods")\n'
        '    c = {"methods": 1}\n'
        '    hint = "(see experiments/compare.py for the flags)"\n'
        '    preload = ("torch", "methods", "analysis.report")\n'
        '    script = root / "experiments" / "compare.py"\n'
        '    also = "experiments/compare.py"\n'
        '    line = f"then python -m analysis.report {root}"\n'
        '    return GRPO\n')
    (pkg / "b.py").write_text("")
    assert upward_imports(tmp_path) == ["gcframe/a.py:5 imports analysis.report", "gcframe/a.py:8 imports methods.grpo"]
    found = sorted((name, line) for _, name, line in upward_strings(tmp_path))
    assert found == [("analysis.report", 12), ("analysis.report", 15), ("experiments", 13),
                     ("experiments/compare.py", 14), ("methods", 12)]


def test_the_library_alone_loads_no_method_and_the_registry_finds_them():
    """A fresh interpreter: the library's modules (the trainer, verify, the plugins, the grid, the fork server, the
    corrections' check, the re-scoring) load nothing above gcframe/; asking the registry for a method loads the
    built-in ones through their entry point (pyproject.toml), in their order, and an unknown name lists them."""
    code = ("import sys\n"
            "import gcframe.trainer, gcframe.verify, gcframe.plugins, gcframe.raygrid, gcframe.forkserver\n"
            "import gcframe.offpolicy.check, gcframe.evaluate.rescore, gcframe.registry as r\n"
            f"above = {ABOVE!r}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in above))\n"
            "print(r.get_method('grpo').__module__, list(r.REGISTRY)[:3])\n"
            "try:\n    r.get_method('nope')\nexcept Exception as e:\n    print(str(e)[:60])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "[]", lines[0]
    assert lines[1] == "methods.grpo ['sft', 'rft', 'online_rft']"
    assert lines[2] == "unknown method 'nope': known methods are sft, rft, online_rf"


def test_a_registry_without_its_entry_points_says_how_to_install_them(monkeypatch):
    """An environment whose metadata lacks the group (a checkout never installed, or installed before pyproject.toml
    declared the built-in methods): asking for a method is one line naming the install command."""
    from gcframe import registry
    from gcframe.errors import UserError

    monkeypatch.setattr(registry, "REGISTRY", {})
    monkeypatch.setattr(registry, "_loaded", None)
    monkeypatch.setattr(registry, "_group", lambda: [])
    try:
        registry.get_method("grpo")
    except UserError as e:
        assert str(e) == ("unknown method 'grpo': no method is registered, as the entry points of group "
                          "gcframe.methods (the built-in methods among them) are not installed: install the checkout "
                          "(pip install -e .)")
    else:
        raise AssertionError("no refusal")
    try:
        registry.methods()  # gcframe.verify's list: the same line, not an unknown variant of nothing
    except UserError as e:
        assert str(e).startswith("no method is registered") and str(e).endswith("(pip install -e .)")
    else:
        raise AssertionError("no refusal")
