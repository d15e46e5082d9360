"""The three test groups stay apart (docs/design.md, "Layers"): no test module imports another (shared
helpers live in tests/support), and the core group names neither Prefect, Qt nor the flows and gui
layers, so it runs in a venv without them (.ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# Also inside strings: a script a test runs in a subprocess counts.
TEST_IMPORT = re.compile(r"^\s*(?:from|import)\s+(test_\w+)", re.MULTILINE)
LAYER_IMPORT = re.compile(
    r"^\s*(?:from|import)\s+(prefect\w*|PySide6|pytestqt|chunkyard\.(?:flows|gui))\b", re.MULTILINE
)


def test_no_test_module_imports_another():
    found = {
        str(path.relative_to(TESTS)): TEST_IMPORT.findall(path.read_text(encoding="utf-8"))
        for path in TESTS.rglob("*.py")
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_core_group_imports_neither_prefect_nor_qt():
    core = [TESTS / "conftest.py", *(TESTS / "core").rglob("*.py"), *(TESTS / "support").rglob("*.py")]
    found = {
        str(path.relative_to(TESTS)): LAYER_IMPORT.findall(path.read_text(encoding="utf-8")) for path in core
    }
    # support.cli runs the command line for the flows group; the core group never imports it.
    found.pop("support/cli.py")
    assert {path: names for path, names in found.items() if names} == {}
    users = [
        p.name
        for p in (TESTS / "core").rglob("*.py")
        if p != Path(__file__)
        and re.search(r"support\.cli\b|support import cli", p.read_text(encoding="utf-8"))
    ]
    assert users == []
