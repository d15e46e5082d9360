"""The layer rule: the pure core never imports Prefect or Qt."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_core_imports_neither_prefect_nor_qt():
    script = textwrap.dedent("""
        import importlib, pkgutil, sys
        import chunkyard.chunking
        for module in pkgutil.walk_packages(chunkyard.chunking.__path__, "chunkyard.chunking."):
            importlib.import_module(module.name)
        bad = sorted(name for name in sys.modules
                     if name.split(".")[0] in ("prefect", "PySide6") or name.startswith(("chunkyard.flows", "chunkyard.gui")))
        print(",".join(bad))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", f"chunking imported: {result.stdout.strip()}"


def test_gui_does_not_import_prefect():
    script = textwrap.dedent("""
        import importlib, pkgutil, sys
        import chunkyard.gui
        for module in pkgutil.walk_packages(chunkyard.gui.__path__, "chunkyard.gui."):
            importlib.import_module(module.name)
        print(",".join(sorted(n for n in sys.modules if n.split(".")[0] == "prefect" or n.startswith("chunkyard.flows"))))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.stdout.strip() == ""
