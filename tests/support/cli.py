"""Helpers for tests that drive the command line: a config on disk, ``main`` in this process, chunk ids."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"


def write_config(
    folder: Path, source: Path, output: Path, *, version: int = 1, max_size: int = 256, extra: str = ""
) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: kb
        version: {version}
        source: {{path: {source}, include: ["**/*"]}}
        output: {{path: {output}}}
        chunker:
          strategy: auto
          unit: tokens
          max_size: {max_size}
          overlap: 16
        """)
        + extra,
        encoding="utf-8",
    )
    return path


def run_cli(*args: str) -> int:
    from chunkyard.flows.cli import main

    return main(list(args))


def chunk_ids(snapshot: Path) -> dict[str, list[str]]:
    table = pq.read_table(snapshot / "chunks.parquet", columns=["doc_id", "chunk_id"])
    out: dict[str, list[str]] = {}
    for doc_id, cid in zip(
        table.column("doc_id").to_pylist(), table.column("chunk_id").to_pylist(), strict=True
    ):
        out.setdefault(doc_id, []).append(cid)
    return out


def one_document_source(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp_path/src`` holding one short Markdown file, and the output folder ``tmp_path/out``."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.md").write_text("# A\n\nSome text here.\n", encoding="utf-8")
    return source, tmp_path / "out"
