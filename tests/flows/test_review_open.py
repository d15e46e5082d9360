"""The reviewer opens a snapshot of many parts with what a snapshot of two files gives it (issue 22).

``ReviewIndex.load`` reads a few whole columns; of a parted snapshot they are read once from the
parts and kept in the user's cache (``Snapshot.whole_columns``). Checked here without Prefect or
Qt: the index loaded from the parts, from the cache, and from the same rows as two plain files is
the same, array for array; the cache is used on the second open, missed by another snapshot, and
passed over when it cannot be written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from chunkyard.chunking import dataset as dataset_module
from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import Snapshot, SnapshotWriter, wait_for_cache_writes
from chunkyard.chunking.pipeline import chunk_files, discover_files, make_batches, prepare_run
from chunkyard.chunking.review import ReviewIndex

from support.cli import write_config
from support.parts import synthetic_corpus

ARRAYS = (
    "doc_chars",
    "chunk_doc",
    "chunk_index",
    "start",
    "end",
    "size",
    "in_unit",
    "finding_bits",
    "doc_first",
)
LISTS = ("doc_ids", "titles", "doc_sha256", "unit", "finding_codes")


@pytest.fixture
def parted(monkeypatch, tmp_path: Path) -> Path:
    """A snapshot of ≈150 parts (one document each) and its cache folder in ``CHUNKYARD_CACHE_DIR``."""
    monkeypatch.setattr(dataset_module, "PART_BYTES", 1_000)
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "src"
    synthetic_corpus(source, documents=150)
    config = load_config(write_config(tmp_path, source, tmp_path / "out"))
    context = prepare_run(config)
    writer = SnapshotWriter(context.version_path)
    for files, _ in make_batches(discover_files(context), 50_000):
        result = chunk_files(config, files, {})
        writer.write(result.documents, result.chunks)
    return writer.publish({"name": "kb", "version": 1, "parent_snapshot": None})


def _two_files(snapshot: Path, target: Path) -> Path:
    """The same rows as a snapshot of two plain files (manifest schema 1)."""
    opened = Snapshot.open(snapshot)
    folder = target / "kb" / "v1" / "0001"
    folder.mkdir(parents=True)
    pq.write_table(opened.documents(), folder / "documents.parquet")
    pq.write_table(opened.chunks(), folder / "chunks.parquet")
    manifest = {k: v for k, v in opened.manifest.items() if k not in ("parts", "parts_format", "storage")}
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 1}), encoding="utf-8")
    return folder


def _same(first: ReviewIndex, second: ReviewIndex) -> None:
    assert first.n_chunks == second.n_chunks > 0
    for name in ARRAYS:
        assert np.array_equal(getattr(first, name), getattr(second, name)), name
    for name in LISTS:
        assert getattr(first, name) == getattr(second, name), name
    assert first.chunk_ids.equals(second.chunk_ids)


def test_a_parted_snapshot_opens_with_the_two_file_snapshots_index_and_caches_it(
    parted: Path, tmp_path: Path, monkeypatch
) -> None:
    assert len(Snapshot.open(parted).parts) >= dataset_module.COLUMNS_CACHE_MIN_PARTS
    plain = ReviewIndex.load(_two_files(parted, tmp_path / "plain"))
    cold = ReviewIndex.load(parted)
    wait_for_cache_writes()
    assert len(list((tmp_path / "cache").glob("*.parquet"))) == 2
    _same(cold, plain)

    def no_parts(*args, **kwargs):
        raise AssertionError("read the parts although the cache holds the columns")

    with monkeypatch.context() as patched:
        patched.setattr(Snapshot, "chunks", no_parts)
        patched.setattr(Snapshot, "documents", no_parts)
        warm = ReviewIndex.load(parted)
    _same(warm, plain)
    assert warm.snapshot.part_of(warm.doc_ids[5]) == cold.snapshot.part_of(cold.doc_ids[5])

    # A copy elsewhere is another snapshot to the cache: its columns are read from its parts.
    copy = tmp_path / "copy" / "kb" / "v1" / "0001"
    shutil.copytree(parted, copy)
    reads = []
    original = Snapshot.chunks
    monkeypatch.setattr(Snapshot, "chunks", lambda self, *a, **k: reads.append(1) or original(self, *a, **k))
    _same(ReviewIndex.load(copy), plain)
    wait_for_cache_writes()
    assert reads and len(list((tmp_path / "cache").glob("*.parquet"))) == 4


def test_without_a_usable_cache_the_parts_are_read(parted: Path, tmp_path: Path, monkeypatch) -> None:
    plain = ReviewIndex.load(_two_files(parted, tmp_path / "plain"))
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", "")  # no cache
    _same(ReviewIndex.load(parted), plain)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be", encoding="utf-8")
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", str(blocked / "columns"))
    _same(ReviewIndex.load(parted), plain)
    wait_for_cache_writes()
    _same(ReviewIndex.load(parted), plain)
