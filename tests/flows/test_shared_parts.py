"""Issue 24, item 4: snapshots that cost only what changed.

A snapshot's rows are part files (``documents.parquet/`` and ``chunks.parquet/`` folders) cut at
content-defined document boundaries; a refresh rewrites the parts holding a changed document and
hard-links the others from the previous snapshot. Checked here on real runs (``chunkyard run``): the
unchanged parts are the same inodes, the refreshed snapshot equals a fresh full run of the same
files (rows, order, ids, parts), DuckDB and Polars read exactly its rows through the documented
paths, and pruning the older snapshot leaves the newer one verifying.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from chunkyard.chunking import dataset as dataset_module
from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import CHUNKS, DOCUMENTS, PartCutter, Snapshot, part_key
from chunkyard.chunking.retention import prune

from support.cli import run_cli, write_config
from support.parts import synthetic_corpus


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of ≈4 KB of source (a few documents each), so a small corpus has dozens of them."""
    monkeypatch.setattr(dataset_module, "PART_BYTES", 4_000)


def _files(snapshot: Path) -> dict[str, os.stat_result]:
    return {str(p.relative_to(snapshot)): p.stat() for p in snapshot.glob("*.parquet/part-*.parquet")}


def test_a_small_change_shares_the_unchanged_parts_and_equals_a_fresh_run(
    prefect_server, small_parts, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    paths = synthetic_corpus(source)
    config = write_config(tmp_path, source, tmp_path / "out")
    assert run_cli("run", str(config)) == 0
    first = Snapshot.open(tmp_path / "out" / "kb")
    assert len(first.parts) >= 20

    # 2 % of the documents: two edited, one added, one removed.
    for path in (paths[17], paths[80]):
        path.write_text(path.read_text(encoding="utf-8") + "\nOne more sentence.\n", encoding="utf-8")
    (source / "area-1" / "page-050b.md").write_text("# Inserted\n\nA new page.\n", encoding="utf-8")
    paths[101].unlink()
    assert run_cli("run", str(config)) == 0
    second = Snapshot.open(tmp_path / "out" / "kb", validate=True)
    assert second.number == 2

    before, after = _files(first.path), _files(second.path)
    shared = [
        name for name, info in after.items() if any(info.st_ino == old.st_ino for old in before.values())
    ]
    new = [name for name in after if name not in shared]
    # Each change rewrites the part holding it (and at most, rarely, a neighbour): ≤ 3 parts per change.
    assert 2 * 1 <= len(new) <= 2 * 3 * 4, new
    assert len(shared) >= len(after) - 2 * 3 * 4
    for name in shared:  # a hard link: one file, two names, read-only
        assert after[name].st_nlink == 2 and not after[name].st_mode & 0o222
    storage = second.manifest["storage"]
    assert storage["parts_written"] == len(new) // 2 and storage["parts"] == len(second.parts)
    # The review columns are the refresh's own files (new, one name each), written beside its new parts.
    review = [p.stat() for p in second.path.glob("review-columns/*.parquet")]
    assert len(review) == 2 and all(info.st_nlink == 1 for info in review)
    assert second.review_columns() is not None, second.review_columns_note
    assert storage["bytes_written"] == sum(after[name].st_size for name in new) + sum(
        i.st_size for i in review
    )

    # The same files chunked from scratch: the same rows, in the same order, cut into the same parts.
    (tmp_path / "fresh").mkdir()
    fresh_config = write_config(tmp_path / "fresh", source, tmp_path / "fresh-out")
    assert run_cli("run", str(fresh_config)) == 0
    fresh = Snapshot.open(tmp_path / "fresh-out" / "kb", validate=True)
    assert fresh.manifest["kind"] == "full" and second.manifest["kind"] == "refresh"
    assert second.documents().equals(fresh.documents())
    assert second.chunks().equals(fresh.chunks())
    assert [p["key"] for p in second.parts] == [p["key"] for p in fresh.parts]
    assert [p["chunks"]["sha256"] for p in second.parts] == [p["chunks"]["sha256"] for p in fresh.parts]


def test_duckdb_and_polars_read_exactly_the_snapshots_rows(
    prefect_server, small_parts, tmp_path: Path
) -> None:
    import duckdb

    source = tmp_path / "src"
    paths = synthetic_corpus(source, documents=60)
    config = write_config(tmp_path, source, tmp_path / "out")
    assert run_cli("run", str(config)) == 0
    paths[5].write_text("# Changed\n\nEntirely new text.\n", encoding="utf-8")
    assert run_cli("run", str(config)) == 0
    snapshot = Snapshot.open(tmp_path / "out" / "kb")
    assert snapshot.number == 2 and len(snapshot.parts) > 5
    expected = snapshot.chunks(["chunk_id", "doc_id", "text"]).to_pylist()
    documents = snapshot.documents(["doc_id", "text"]).to_pylist()
    for path in (f"{snapshot.path}/chunks.parquet", f"{snapshot.path}/chunks.parquet/*.parquet"):
        rows = duckdb.sql(f"select chunk_id, doc_id, text from '{path}'").fetchall()
        assert [dict(zip(("chunk_id", "doc_id", "text"), row, strict=True)) for row in rows] == expected, path
    rows = duckdb.sql(f"select doc_id, text from '{snapshot.path}/documents.parquet/*.parquet'").fetchall()
    assert [dict(zip(("doc_id", "text"), row, strict=True)) for row in rows] == documents
    polars = pytest.importorskip("polars")
    frame = (
        polars.scan_parquet(f"{snapshot.path}/chunks.parquet/*.parquet")
        .select("chunk_id", "doc_id")
        .collect()
    )
    assert frame.to_dicts() == [{"chunk_id": r["chunk_id"], "doc_id": r["doc_id"]} for r in expected]


def test_pruning_the_older_snapshot_leaves_the_newer_one_whole(
    prefect_server, small_parts, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    paths = synthetic_corpus(source, documents=60)
    config_path = write_config(tmp_path, source, tmp_path / "out", extra="retention: {keep: 1}\n")
    assert run_cli("run", str(config_path)) == 0
    paths[30].write_text(paths[30].read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    assert run_cli("run", str(config_path)) == 0
    newer = Snapshot.open(tmp_path / "out" / "kb")
    expected = newer.chunks()
    links = [p.stat().st_nlink for p in newer.path.glob("*.parquet/*.parquet")]
    assert max(links) == 2  # shares parts with 0001

    plan = prune(load_config(config_path))
    assert plan.remove == ["v1/0001"] and not (tmp_path / "out" / "kb" / "v1" / "0001").exists()
    after = Snapshot.open(tmp_path / "out" / "kb", validate=True)  # checksums of every part, then content
    assert after.number == 2 and after.chunks().equals(expected)
    assert {p.stat().st_nlink for p in after.path.glob("*.parquet/*.parquet")} == {1}


def test_a_refresh_from_a_snapshot_of_two_files_rewrites_it_into_parts(
    prefect_server, tmp_path: Path
) -> None:
    """Datasets written before parts (two plain files, manifest schema 1) still open, and the next run
    carries their rows over into parts."""
    import pyarrow.parquet as pq

    source = tmp_path / "src"
    synthetic_corpus(source, documents=20)
    config = write_config(tmp_path, source, tmp_path / "out")
    assert run_cli("run", str(config)) == 0
    parted = Snapshot.open(tmp_path / "out" / "kb")
    expected_documents, expected_chunks = parted.documents(), parted.chunks()
    # The same snapshot in the layout of before: two files, checksums under "files".
    old = parted.path.parent / "0001"
    for name in (DOCUMENTS, CHUNKS):
        table = pq.read_table(old / name)
        shutil.rmtree(old / name)
        pq.write_table(table, old / name)
    manifest = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    for key in ("parts", "parts_format", "storage"):
        manifest.pop(key)
    manifest["schema_version"] = 1
    manifest["files"] = {
        name: dict(zip(("bytes", "sha256"), dataset_module.file_digest(old / name), strict=True))
        for name in (DOCUMENTS, CHUNKS)
    }
    (old / "manifest.json").chmod(0o644)
    (old / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    legacy = Snapshot.open(old, validate=True)
    assert not legacy.parted and legacy.chunks().equals(expected_chunks)

    assert run_cli("run", "--allow-mass-removal", str(config)) in (0, 3)  # nothing changed
    (source / "area-0" / "page-000.md").write_text("# Changed\n\nNew.\n", encoding="utf-8")
    assert run_cli("run", str(config)) == 0
    refreshed = Snapshot.open(tmp_path / "out" / "kb", validate=True)
    assert refreshed.parted and refreshed.number == 2
    assert refreshed.documents().num_rows == expected_documents.num_rows
    assert refreshed.documents(["doc_id"]).equals(expected_documents.select(["doc_id"]))


def test_part_bounds_move_only_around_an_insertion_or_removal() -> None:
    """The cutter's bounds depend on each document and the bytes since the last bound: removing or
    inserting one document changes the parts around it only, not every part after it."""
    rng = random.Random(11)
    documents = [(f"folder-{i // 50}/doc-{i:05d}.md", rng.randint(500, 40_000)) for i in range(3000)]

    def parts(sequence):
        cutter, current, out = PartCutter(64_000), [], []
        for doc_id, size in sequence:
            current.append(doc_id)
            if cutter.ends_after(doc_id, size):
                out.append(part_key(current))
                current = []
        if current:
            out.append(part_key(current))
        return out

    base = set(parts(documents))
    changed = []
    for _ in range(60):
        at = rng.randrange(len(documents))
        if rng.random() < 0.5:
            edited = documents[:at] + documents[at + 1 :]
        else:
            edited = documents[:at] + [(f"new-{at}.md", rng.randint(500, 40_000))] + documents[at:]
        changed.append(len(set(parts(edited)) - base))
    assert max(changed) <= 5 and sum(changed) / len(changed) <= 2, changed
    assert len(base) > 500
