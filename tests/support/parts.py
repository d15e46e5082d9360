"""Reaching the part files of a snapshot (``documents.parquet/`` and ``chunks.parquet/`` folders), for
tests that damage or craft one file on purpose."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from chunkyard.chunking.dataset import MANIFEST, REVIEW_COLUMNS_DIR, REVIEW_COLUMNS_KEY, parts_digest


def part_files(snapshot: Path, name: str) -> list[Path]:
    """The part files of ``name`` (``chunks.parquet`` or ``documents.parquet``) in row order."""
    return sorted((Path(snapshot) / name).glob("part-*.parquet"))


def only_part(snapshot: Path, name: str) -> Path:
    """The one part file of a small snapshot (the test fixtures' corpora fit in one part)."""
    files = part_files(snapshot, name)
    assert len(files) == 1, f"{snapshot / name}: {len(files)} parts, expected one"
    return files[0]


def reseal(snapshot: Path) -> None:
    """Record the part files' current sizes and SHA-256 in the manifest, as a crafted snapshot's
    author would: the content checks must then stand alone."""
    path = Path(snapshot) / MANIFEST
    path.chmod(0o644)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    for part in manifest["parts"]:
        for kind in ("documents", "chunks"):
            data = (Path(snapshot) / part[kind]["file"]).read_bytes()
            part[kind]["bytes"] = len(data)
            part[kind]["sha256"] = hashlib.sha256(data).hexdigest()
    path.write_text(json.dumps(manifest), encoding="utf-8")


def seal_review_columns(snapshot: Path, filename: str, table: pa.Table, digest: str | None = None) -> None:
    """Write ``table`` as the review-columns file of ``filename`` (``chunks.parquet`` or
    ``documents.parquet``) and record it in the manifest as a writer would: its rows, size and
    SHA-256, and as the parts it was made from (entry and footer) ``digest`` or the manifest's own."""
    path = Path(snapshot) / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    digest = digest or parts_digest(manifest["parts"])
    target = Path(snapshot) / REVIEW_COLUMNS_DIR / filename
    target.unlink(missing_ok=True)
    with pq.ParquetWriter(target, table.schema) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"chunkyard.parts": digest})
    data = target.read_bytes()
    entry = manifest[REVIEW_COLUMNS_KEY]
    entry["parts"] = digest
    entry[filename.split(".")[0]].update(
        rows=table.num_rows, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
    )
    path.chmod(0o644)
    path.write_text(json.dumps(manifest), encoding="utf-8")


def drop_review_columns(snapshot: Path) -> Path:
    """``snapshot`` as one written before review columns: no files, no manifest entry."""
    import shutil

    path = Path(snapshot) / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest[REVIEW_COLUMNS_KEY]
    path.chmod(0o644)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    shutil.rmtree(Path(snapshot) / REVIEW_COLUMNS_DIR)
    return Path(snapshot)


WORDS = (
    "snapshot part refresh chunk document parquet manifest reviewer export version retention sink "
    "embedding store verify atomic publish folder object bucket query column row group"
).split()


def synthetic_corpus(source: Path, documents: int = 120, seed: int = 3) -> list[Path]:
    """``documents`` Markdown pages of 0.5-6 KB of words under four folders of ``source``."""
    rng = random.Random(seed)
    paths = []
    for index in range(documents):
        path = source / f"area-{index % 4}" / f"page-{index:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        paragraphs = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + "."
            for _ in range(rng.randint(2, 8))
        ]
        path.write_text(f"# Page {index}\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
