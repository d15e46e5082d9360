"""A small valid config and a writer, for the config tests of tests/core and tests/flows."""

from __future__ import annotations

import textwrap
from pathlib import Path

BASE = """\
name: kb
version: 1
source: {path: docs}
chunker:
  strategy: recursive
  unit: chars
  max_size: 800
  overlap: 100
"""


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    """``text`` (dedented) written to ``tmp_path/name``."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path
