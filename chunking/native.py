"""Optional C accelerators: loaded when built from the current source, else the Python reference runs.

``pip install -e .`` (or a wheel build) compiles each ``chunking/_NAME.c`` into ``chunkyard.chunking._NAME``;
setup.py stamps the module with the SHA-256 of the source it was built from. A module built from an
older source (the ``.c`` edited since, without reinstalling) is not used, so a stale build can never
give results the source does not; ``status()`` says which accelerators are in use and why not.
Set ``CHUNKYARD_PURE_PYTHON=1`` to run the Python reference everywhere.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from types import ModuleType

_SOURCE_DIR = Path(__file__).resolve().parent
_status: dict[str, str] = {}


def source_digest(name: str) -> str | None:
    """SHA-256 of ``chunking/NAME.c`` as setup.py computes it (None when the source is not shipped)."""
    path = _SOURCE_DIR / f"{name}.c"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def load(name: str) -> ModuleType | None:
    """``chunking.NAME`` when it is built, current and not switched off; else None."""
    if os.environ.get("CHUNKYARD_PURE_PYTHON"):
        _status[name] = "off (CHUNKYARD_PURE_PYTHON is set)"
        return None
    try:
        module = importlib.import_module(f"chunkyard.chunking.{name}")
    except ImportError as exc:
        _status[name] = f"not built ({exc}); reinstall with a C compiler: pip install -e ."
        return None
    expected = source_digest(name)
    if expected is not None and getattr(module, "SOURCE_SHA256", None) != expected:
        _status[name] = f"stale (built from another chunking/{name}.c); rebuild: pip install -e ."
        return None
    _status[name] = "in use"
    return module


def status() -> dict[str, str]:
    """Each accelerator loaded so far and whether it is in use."""
    return dict(_status)
