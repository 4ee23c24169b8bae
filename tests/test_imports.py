"""No import circles between the project's modules (gcframe/, methods/, experiments/, analysis/).

The graph is read statically with `ast`: every `import` and `from ... import` statement of a module, at the top
level or inside a function, is an edge to the most specific project module it names (`from gcframe.engine import
aggregate` -> gcframe.engine; `from experiments import benchmark_trl` -> experiments.benchmark_trl). Imports under
`if TYPE_CHECKING:` count too: a circle that type hints need is still a circle in the layering. A function-level
import does not make a circle go away, it only postpones it, so it is an edge like any other.
"""
from __future__ import annotations

import ast
import itertools
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
