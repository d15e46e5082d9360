"""The reviewer opens a snapshot of many parts with what a snapshot of two files gives it (issue 22).

``ReviewIndex.load`` reads a few whole columns (``Snapshot.whole_columns``). A snapshot written now
holds them in its own review-columns files (written at publish, covered by the manifest): they are
read instead of the parts when they are exactly the ones the manifest names for these parts, and
passed over for the parts when missing, damaged or stale. A snapshot written before them is read
from its parts once and kept in the user's cache. Checked here without Prefect or Qt: the index
loaded from the review columns, from the parts, from the cache, and from the same rows as two plain
files is the same, array for array, and a refresh writes review columns of its own.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from chunkyard.chunking import dataset as dataset_module
from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import (
    CHUNKS,
    DOCUMENTS,
    MANIFEST,
    REVIEW_COLUMNS,
    REVIEW_COLUMNS_DIR,
    Snapshot,
    SnapshotWriter,
    parts_digest,
    wait_for_cache_writes,
)
from chunkyard.chunking.errors import DatasetError
from chunkyard.chunking.pipeline import chunk_files, discover_files, make_batches, prepare_run
from chunkyard.chunking.review import ReviewIndex

from support.cli import write_config
from support.parts import drop_review_columns, part_files, reseal, seal_review_columns, synthetic_corpus

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


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A snapshot of ≈150 parts (one document each), written once for the module."""
    tmp_path = tmp_path_factory.mktemp("published")
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(dataset_module, "PART_BYTES", 1_000)
        source = tmp_path / "src"
        synthetic_corpus(source, documents=150)
        config = load_config(write_config(tmp_path, source, tmp_path / "out"))
        context = prepare_run(config)
        writer = SnapshotWriter(context.version_path)
        for files, _ in make_batches(discover_files(context), 50_000):
            result = chunk_files(config, files, {})
            writer.write(result.documents, result.chunks)
        return writer.publish({"name": "kb", "version": 1, "parent_snapshot": None})


@pytest.fixture
def parted(published: Path, monkeypatch, tmp_path: Path) -> Path:
    """A copy of ``published`` for one test (which may damage it), and its cache folder in
    ``CHUNKYARD_CACHE_DIR``."""
    monkeypatch.setattr(dataset_module, "PART_BYTES", 1_000)
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "out" / "kb" / "v1" / "0001"
    shutil.copytree(published, copy)
    return copy


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


_old = drop_review_columns


def _from_parts(snapshot: Path) -> ReviewIndex:
    """The index made from the parts themselves (what every open must show)."""
    opened = Snapshot.open(snapshot)
    return ReviewIndex(
        opened, opened.documents(REVIEW_COLUMNS[DOCUMENTS]), opened.chunks(REVIEW_COLUMNS[CHUNKS])
    )


_seal = seal_review_columns


def test_a_new_snapshot_opens_from_its_review_columns_without_the_parts_or_the_cache(
    parted: Path, tmp_path: Path, monkeypatch
) -> None:
    opened = Snapshot.open(parted)
    entry = opened.manifest["review_columns"]
    assert entry["parts"] == parts_digest(opened.parts)
    for filename, kind in ((DOCUMENTS, "documents"), (CHUNKS, "chunks")):
        path = parted / REVIEW_COLUMNS_DIR / filename
        assert entry[kind]["file"] == f"{REVIEW_COLUMNS_DIR}/{filename}"
        assert entry[kind]["columns"] == REVIEW_COLUMNS[filename]
        assert entry[kind]["bytes"] == path.stat().st_size and not path.stat().st_mode & 0o222
        assert entry[kind]["rows"] == sum(part[kind]["rows"] for part in opened.parts)
    storage = opened.manifest["storage"]
    files = [p for p in parted.rglob("*.parquet") if p.is_file()]
    assert storage["bytes"] == storage["bytes_written"] == sum(p.stat().st_size for p in files)
    opened.verify()  # the checksums (review columns included), then their content against the parts

    plain = ReviewIndex.load(_two_files(parted, tmp_path / "plain"))

    def no_parts(*args, **kwargs):
        raise AssertionError("read the parts although the review columns hold the columns")

    with monkeypatch.context() as patched:
        patched.setattr(Snapshot, "chunks", no_parts)
        patched.setattr(Snapshot, "documents", no_parts)
        index = ReviewIndex.load(parted)
    wait_for_cache_writes()
    assert index.snapshot.columns_source == "review-columns", index.snapshot.review_columns_note
    _same(index, plain)
    assert index.snapshot.part_of(index.doc_ids[5]) == Snapshot.open(parted).part_of(index.doc_ids[5])
    assert not list((tmp_path / "cache").glob("*.parquet")), "a snapshot with review columns needs no cache"


def test_an_old_parted_snapshot_opens_from_its_parts_then_from_the_cache(
    parted: Path, tmp_path: Path, monkeypatch
) -> None:
    _old(parted)
    assert len(Snapshot.open(parted).parts) >= dataset_module.COLUMNS_CACHE_MIN_PARTS
    Snapshot.open(parted).verify()
    plain = ReviewIndex.load(_two_files(parted, tmp_path / "plain"))
    cold = ReviewIndex.load(parted)
    assert (
        cold.snapshot.columns_source == "parts" and "no review_columns" in cold.snapshot.review_columns_note
    )
    wait_for_cache_writes()
    assert len(list((tmp_path / "cache").glob("*.parquet"))) == 2
    _same(cold, plain)

    def no_parts(*args, **kwargs):
        raise AssertionError("read the parts although the cache holds the columns")

    with monkeypatch.context() as patched:
        patched.setattr(Snapshot, "chunks", no_parts)
        patched.setattr(Snapshot, "documents", no_parts)
        warm = ReviewIndex.load(parted)
    assert warm.snapshot.columns_source == "cache"
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
    _old(parted)
    plain = ReviewIndex.load(_two_files(parted, tmp_path / "plain"))
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", "")  # no cache
    _same(ReviewIndex.load(parted), plain)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be", encoding="utf-8")
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", str(blocked / "columns"))
    _same(ReviewIndex.load(parted), plain)
    wait_for_cache_writes()
    _same(ReviewIndex.load(parted), plain)


def _shifted(table: pa.Table, name: str = "size") -> pa.Table:
    """``table`` with every value of ``name`` one more: valid, of the right types, and wrong."""
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, pc.add(table.column(name), 1).cast(table.schema.field(name).type))


def _missing(snapshot: Path) -> str:
    (snapshot / REVIEW_COLUMNS_DIR / CHUNKS).unlink()
    return "cannot read"


def _damaged(snapshot: Path) -> str:
    path = snapshot / REVIEW_COLUMNS_DIR / CHUNKS
    table = _shifted(pq.read_table(path))
    path.unlink()
    pq.write_table(table, path)  # a valid file of other values, not recorded in the manifest
    return "damaged"


def _truncated(snapshot: Path) -> str:
    path = snapshot / REVIEW_COLUMNS_DIR / DOCUMENTS
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[: len(data) // 2])
    return "damaged"


def _stale_parts(snapshot: Path) -> str:
    """A part rewritten and the manifest resealed (as a crafted snapshot's author would): the review
    columns were made from other parts and must not be used, whatever their checksums say."""
    path = part_files(snapshot, CHUNKS)[3]
    table = _shifted(pq.read_table(path))
    path.unlink()
    pq.write_table(table, path)
    reseal(snapshot)
    return "stale"


def _stale_footer(snapshot: Path) -> str:
    """Files of other content, recorded in the manifest for these parts, whose footer names other
    parts (files made for another snapshot, with an entry edited to fit)."""
    path = snapshot / REVIEW_COLUMNS_DIR / CHUNKS
    _seal(snapshot, CHUNKS, _shifted(pq.read_table(path)), digest="0" * 64)
    manifest = json.loads((snapshot / MANIFEST).read_text(encoding="utf-8"))
    manifest["review_columns"]["parts"] = parts_digest(manifest["parts"])
    (snapshot / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return "stale"


def _fewer_rows(snapshot: Path) -> str:
    path = snapshot / REVIEW_COLUMNS_DIR / CHUNKS
    _seal(snapshot, CHUNKS, pq.read_table(path).slice(1))
    return "rows"


def _not_a_column(snapshot: Path) -> str:
    path = snapshot / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["review_columns"]["chunks"]["columns"].remove("findings")
    path.chmod(0o644)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return "no column findings"


def _elsewhere(snapshot: Path) -> str:
    path = snapshot / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["review_columns"]["chunks"]["file"] = "../0002/review-columns/chunks.parquet"
    path.chmod(0o644)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return "not this snapshot's"


@pytest.mark.parametrize(
    "change",
    [_missing, _damaged, _truncated, _stale_parts, _stale_footer, _fewer_rows, _not_a_column, _elsewhere],
)
def test_review_columns_that_are_not_the_manifests_own_are_passed_over_for_the_parts(
    parted: Path, monkeypatch, change
) -> None:
    """Each way the review columns may not be the ones published with these parts: the view is the
    parts' (which the changed files are not: every one holds other values), never the file's."""
    monkeypatch.setenv("CHUNKYARD_CACHE_DIR", "")
    for path in (parted / REVIEW_COLUMNS_DIR).iterdir():
        path.chmod(0o644)
    why = change(parted)
    index = ReviewIndex.load(parted)
    assert index.snapshot.columns_source == "parts"
    assert why in index.snapshot.review_columns_note, index.snapshot.review_columns_note
    _same(index, _from_parts(parted))
    if change in (_missing, _damaged, _truncated):  # published files that are not as published
        with pytest.raises(DatasetError, match="review-columns/.*(cannot read|damaged)"):
            Snapshot.open(parted).verify_files()
    if change in (_stale_parts, _stale_footer, _fewer_rows):  # not used, so nothing wrong is shown
        Snapshot.open(parted).validate()


def test_review_columns_that_agree_with_the_manifest_but_not_the_parts_are_refused_by_verify(
    parted: Path,
) -> None:
    """A crafted snapshot may bring review columns recorded in its manifest for its parts but holding
    other values (as it may bring crafted parts): ``verify``, which the reviewer runs in the
    background, compares them with the parts and names the first row that differs."""
    for path in (parted / REVIEW_COLUMNS_DIR).iterdir():
        path.chmod(0o644)
    path = parted / REVIEW_COLUMNS_DIR / CHUNKS
    table = pq.read_table(path)
    sizes = table.column("size").to_pylist()
    sizes[7] += 1
    _seal(
        parted,
        CHUNKS,
        table.set_column(table.schema.get_field_index("size"), "size", pa.array(sizes, pa.int32())),
    )
    index = ReviewIndex.load(parted)
    assert index.snapshot.columns_source == "review-columns"  # the manifest's own: read as such
    Snapshot.open(parted).verify_files()  # the checksums agree
    with pytest.raises(
        DatasetError, match=r"review-columns/chunks.parquet: column size, row 7: not the value of"
    ):
        Snapshot.open(parted).verify()


def test_a_refresh_writes_review_columns_of_its_own(parted: Path, tmp_path: Path, monkeypatch) -> None:
    """A refresh shares most parts with its parent but not the review columns: its files are new,
    hold its own rows (a changed title, a removed document), and are built from the parent's review
    columns for the shared parts (or, for a parent written before them, from the shared parts)."""
    first = Snapshot.open(parted)
    documents, chunks = first.documents(), first.chunks()
    doc_ids = documents.column("doc_id").to_pylist()
    changed, removed = doc_ids[40], doc_ids[90]

    def refresh(previous: Snapshot) -> Snapshot:
        writer = SnapshotWriter(parted.parent, previous=previous)
        for doc_id in doc_ids:
            if doc_id == removed:
                continue
            if doc_id != changed:
                writer.write_previous([doc_id])
                continue
            mine = documents.filter(pc.equal(documents.column("doc_id"), doc_id))
            mine = mine.set_column(mine.schema.get_field_index("title"), "title", pa.array(["A new title"]))
            writer.write(mine, chunks.filter(pc.equal(chunks.column("doc_id"), doc_id)))
        published = writer.publish({"name": "kb", "version": 1, "parent_snapshot": previous.number})
        return Snapshot.open(published)

    reads = []
    original = dataset_module.read_parquet

    def counting(path, **options):
        if options.get("columns") == REVIEW_COLUMNS[CHUNKS]:
            reads.append(path)
        return original(path, **options)

    monkeypatch.setattr(dataset_module, "read_parquet", counting)
    second = refresh(first)
    assert not reads, "the shared parts' columns come from the parent's review columns"
    assert 0 < second.manifest["storage"]["parts_written"] < len(second.parts) // 4
    for filename in (DOCUMENTS, CHUNKS):
        mine, theirs = parted / REVIEW_COLUMNS_DIR / filename, second.path / REVIEW_COLUMNS_DIR / filename
        assert os.stat(mine).st_ino != os.stat(theirs).st_ino and not os.stat(theirs).st_mode & 0o222
    second.verify()
    index = ReviewIndex.load(second.path)
    assert index.snapshot.columns_source == "review-columns"
    _same(
        index,
        ReviewIndex(
            second, second.documents(REVIEW_COLUMNS[DOCUMENTS]), second.chunks(REVIEW_COLUMNS[CHUNKS])
        ),
    )
    assert removed not in index.doc_ids and index.titles[index.doc_ids.index(changed)] == "A new title"

    # The same refresh of a parent written before review columns: the same files, from the parts.
    _old(first.path)
    third = refresh(Snapshot.open(first.path))
    assert reads
    assert third.manifest["review_columns"] == second.manifest["review_columns"]
