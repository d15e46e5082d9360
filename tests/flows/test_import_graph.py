"""No import cycle between chunkyard's modules: the import graph of ``chunkyard.chunking`` and
``chunkyard.flows`` (and the top ``chunkyard`` package), read from the source with ``ast``.

Every ``import`` counts, at module level and inside functions, except those under
``if TYPE_CHECKING:`` (never executed). ``from a.b import c`` is an edge to ``a.b.c`` when that is a
module, else to ``a.b``. The implicit import of a module's parent package is not an edge (every
submodule would otherwise be in a cycle with an ``__init__`` that imports it).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Installed name -> folder in the repository (pyproject.toml's package-dir).
ROOTS = {
    "chunkyard": REPO / "chunkyard",
    "chunkyard.chunking": REPO / "chunking",
    "chunkyard.flows": REPO / "flows",
}


def module_files(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module under the roots, by its dotted name (a package by its ``__init__.py``)."""
    modules: dict[str, Path] = {}
    for name, folder in roots.items():
        top_only = any(other != name and other.startswith(name + ".") for other in roots)
        paths = sorted(folder.glob("*.py")) if top_only else sorted(folder.rglob("*.py"))
        for path in paths:
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([name, *parts])] = path
    return modules


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = (
                test.id
                if isinstance(test, ast.Name)
                else test.attr
                if isinstance(test, ast.Attribute)
                else ""
            )
            if name == "TYPE_CHECKING":
                skipped.update(id(inner) for child in node.body for inner in ast.walk(child))
    return skipped


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules that the module ``name`` (source at ``path``) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def known_prefix(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        else:
            continue
        for target in targets:
            resolved = known_prefix(target)
            if resolved is not None and resolved != name:
                found.add(resolved)
    return found


def import_graph(roots: dict[str, Path]) -> dict[str, set[str]]:
    modules = module_files(roots)
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan), as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(_one_cycle(sorted(group), graph))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def _one_cycle(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A path from the group's first module back to itself inside the group (breadth first)."""
    members, start = set(group), group[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    return group  # unreachable for a strongly connected group


def _described(found: list[list[str]]) -> str:
    return "; ".join(" -> ".join(cycle) for cycle in found)


GRAPH = import_graph(ROOTS)


def _cycles_touching(prefix: str) -> list[list[str]]:
    return [cycle for cycle in cycles(GRAPH) if any(m == prefix or m.startswith(prefix + ".") for m in cycle)]


def test_the_graph_covers_both_layers_and_sees_function_level_imports():
    assert {
        "chunkyard",
        "chunkyard.chunking.api",
        "chunkyard.flows.run",
        "chunkyard.flows.cli",
        "chunkyard.flows.cli.program",
        "chunkyard.chunking.evaluation",
    } <= set(GRAPH)
    # chunkyard.flows.cli.run imports chunkyard.flows.run inside its handler only.
    assert "chunkyard.flows.run" in GRAPH["chunkyard.flows.cli.run"]
    assert "chunkyard.flows.cli.command" in GRAPH["chunkyard.flows.cli.run"]  # from ... import names
    assert "chunkyard.flows.cli" not in GRAPH["chunkyard.flows.cli.run"]  # the parent package is no edge


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import f\n", encoding="utf-8")
    (package / "a.py").write_text("from pkg import b\n\ndef f():\n    return b.g()\n", encoding="utf-8")
    (package / "b.py").write_text("def g():\n    from pkg.c import h\n    return h()\n", encoding="utf-8")
    (package / "c.py").write_text("import pkg.a\n\ndef h():\n    return 1\n", encoding="utf-8")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n", encoding="utf-8"
    )
    (package / "e.py").write_text("from . import d\n", encoding="utf-8")
    graph = import_graph({"pkg": package})
    assert graph["pkg.e"] == {"pkg.d"} and graph["pkg.d"] == set()  # relative import; TYPE_CHECKING skipped
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_no_import_cycle_in_flows():
    found = _cycles_touching("chunkyard.flows")
    assert not found, f"import cycles: {_described(found)}"


def test_no_import_cycle_in_chunking():
    found = _cycles_touching("chunkyard.chunking")
    assert not found, f"import cycles: {_described(found)}"
