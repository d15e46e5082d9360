"""One registry entry per strategy: the settings union and the names derive from it (docs/design.md,
"Strategies"); the core's modules import each other without a circle."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from chunkyard.chunking import config
from chunkyard.chunking.settings import ChunkerBase, FixedSettings
from chunkyard.chunking.strategies import STRATEGIES, get_strategy, register

CHUNKING = Path(__file__).resolve().parents[2] / "chunking"


def test_names_and_union_come_from_the_registry():
    assert config.STRATEGY_NAMES == tuple(STRATEGIES)
    union = typing.get_args(typing.get_args(config.ChunkerSettings)[0])
    assert union == tuple(entry.settings for entry in STRATEGIES.values())
    for name, entry in STRATEGIES.items():
        assert entry.name == name
        assert issubclass(entry.settings, ChunkerBase)
        assert config.parse_settings({"strategy": name}).__class__ is entry.settings
        assert get_strategy(name) is entry.layout


def test_register_refuses_a_twice_used_name_and_a_mismatched_model():
    with pytest.raises(ValueError, match="registered twice"):
        register("fixed", FixedSettings)(lambda text, settings, path: None)
    with pytest.raises(ValueError, match="FixedSettings says 'fixed'"):
        register("fixed2", FixedSettings)(lambda text, settings, path: None)
    assert "fixed2" not in STRATEGIES


def test_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown strategy 'paragraphs' .known: fixed, sentence"):
        get_strategy("paragraphs")


def _module_level_imports(path: Path) -> set[str]:
    """The chunkyard.chunking modules ``path`` imports when it is loaded (not inside functions)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chunkyard.chunking"):
            if node.module == "chunkyard.chunking":
                names.update(f"{alias.name}" for alias in node.names)
            else:
                names.add(node.module.removeprefix("chunkyard.chunking.").split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(a.name.removeprefix("chunkyard.chunking.").split(".")[0]
                         for a in node.names if a.name.startswith("chunkyard.chunking."))
    return names


def test_no_import_circle_among_the_core_modules():
    modules = {p.stem for p in CHUNKING.glob("*.py")} - {"__init__"}
    graph = {m: _module_level_imports(CHUNKING / f"{m}.py") & modules for m in modules}
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        if state.get(module) == "done":
            return
        if state.get(module) == "open":
            circle = trail[trail.index(module):] + [module]
            raise AssertionError("import circle: " + " -> ".join(circle))
        state[module] = "open"
        for imported in sorted(graph[module]):
            visit(imported, trail + [module])
        state[module] = "done"

    for module in sorted(graph):
        visit(module, [])
    assert "strategies" not in graph["semantic"]
