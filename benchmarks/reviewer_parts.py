"""Benchmark (not a test): ``ReviewIndex.load`` of a snapshot of many parts, opened for the first time
with its review-columns files, against the same snapshot without them (as written before them: from
the parts, then from the user's cache) and the same rows as two plain files (the layout before parts).

    .venv/bin/python benchmarks/reviewer_parts.py [SNAPSHOT] [--repeats 3]

SNAPSHOT defaults to the generated dataset of ``benchmarks/reviewer_open.py`` (1,000,000 chunks over
10,000 documents, written by ``SnapshotWriter``; made if missing). The "new" snapshot is SNAPSHOT
when it has review columns; otherwise (written before them, or as two files) a refresh of it in a
temporary folder carrying every document over (``SnapshotWriter.write_previous``: its parts shared
by hard link where their ``parts_format`` allows, rewritten otherwise; review columns written at
publish; the writer and its review columns timed). The "old" one is the same parts
without the review columns (files and manifest entry removed), and "two files" its rows rewritten as
two plain files (manifest schema 1). The cache lives in a temporary ``CHUNKYARD_CACHE_DIR``, emptied
before each repeat. After one untimed open (the first in a process pays for imports and Arrow
kernels, whichever layout it opens), each repeat, in one process: new (first open), old cold (parts), old warm
(cache), two files; wall seconds of ``ReviewIndex.load`` (the files are in the page cache: a first
open from a cold disk also waits for the disk). The four indexes are checked equal and each open's
source (``Snapshot.columns_source``) is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


def two_files(snapshot: Path, target: Path) -> Path:
    from chunkyard.chunking.dataset import Snapshot

    opened = Snapshot.open(snapshot)
    folder = target / opened.name / f"v{opened.version}" / f"{opened.number:04d}"
    folder.mkdir(parents=True)
    pq.write_table(opened.documents(), folder / "documents.parquet", compression="zstd", row_group_size=4096)
    pq.write_table(opened.chunks(), folder / "chunks.parquet", compression="zstd", row_group_size=65536)
    dropped = ("parts", "parts_format", "storage", "review_columns")
    manifest = {k: v for k, v in opened.manifest.items() if k not in dropped}
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 1}), encoding="utf-8")
    return folder


def refreshed(snapshot: Path, target: Path) -> tuple[Path, str]:
    """A refresh of ``snapshot`` in ``target`` carrying every document over (its parts shared where
    their format allows: hard links), so with review columns of its own; and what it cost: the
    writer's seconds and, of them, the review columns' (``_ReviewColumnsWriter``)."""
    from chunkyard.chunking import dataset
    from chunkyard.chunking.dataset import Snapshot, SnapshotWriter

    previous = Snapshot.open(snapshot)
    doc_ids = previous.documents(["doc_id"]).column("doc_id").to_pylist()
    spent = [0.0]

    def timed(method):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        return wrapper

    writer_class = dataset._ReviewColumnsWriter
    originals = {name: getattr(writer_class, name) for name in ("add", "finish")}
    for name, method in originals.items():
        setattr(writer_class, name, timed(method))
    shared_columns = dataset._PartsWriter._shared_columns
    dataset._PartsWriter._shared_columns = timed(shared_columns)
    try:
        started = time.perf_counter()
        writer = SnapshotWriter(target / previous.name / f"v{previous.version}", previous=previous)
        writer.write_previous(doc_ids)
        folder = writer.publish({**previous.manifest, "kind": "refresh", "parent_snapshot": None})
        seconds = time.perf_counter() - started
    finally:
        for name, method in originals.items():
            setattr(writer_class, name, method)
        dataset._PartsWriter._shared_columns = shared_columns
    parts = len(Snapshot.open(folder).parts)
    shared = parts - writer.parts_written
    return folder, (
        f"the new snapshot is a refresh of it carrying every document over ({shared:,} of {parts:,} "
        f"parts shared), written in {seconds:.2f} s, of which the review columns {spent[0]:.2f} s"
    )


def without_review_columns(snapshot: Path, target: Path) -> Path:
    """The same parts (hard links) and manifest without review columns: a snapshot written before them."""
    folder = target / snapshot.parent.parent.name / snapshot.parent.name / snapshot.name
    for source in snapshot.glob("*.parquet/*.parquet"):
        (folder / source.parent.name).mkdir(parents=True, exist_ok=True)
        os.link(source, folder / source.parent.name / source.name)
    manifest = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
    del manifest["review_columns"]
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", nargs="?", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        os.environ["CHUNKYARD_CACHE_DIR"] = str(cache)
        from chunkyard.chunking.dataset import Snapshot, resolve_snapshot, wait_for_cache_writes
        from chunkyard.chunking.review import ReviewIndex

        if args.snapshot is None:
            from reviewer_open import generate

            args.snapshot = generate(
                Path(tempfile.gettempdir()) / "chunkyard-reviewer-bench" / "1000000-10000", 1_000_000, 10_000
            )
        source = resolve_snapshot(args.snapshot)
        if Snapshot.open(source).review_columns() is not None:
            new, made = source, "the new snapshot is SNAPSHOT itself"
        else:
            new, made = refreshed(source, Path(tmp) / "new")
        old = without_review_columns(new, Path(tmp) / "old")
        plain = two_files(new, Path(tmp) / "plain")
        opened = Snapshot.open(new)
        review_bytes = sum(
            opened.manifest["review_columns"][kind]["bytes"] for kind in ("documents", "chunks")
        )
        cases = (
            ("new, first open", new, "review-columns"),
            ("old, cold", old, "parts"),
            ("old, warm", old, "cache"),
            ("two files", plain, "parts"),
        )
        times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        loaded = {}
        ReviewIndex.load(plain)  # untimed: the process's first open pays for lazy imports and kernels
        for _ in range(args.repeats):
            shutil.rmtree(cache, ignore_errors=True)
            for name, path, expected in cases:
                started = time.perf_counter()
                loaded[name] = ReviewIndex.load(path)
                times[name].append(time.perf_counter() - started)
                wait_for_cache_writes()  # (in the background: not in the figure)
                found = loaded[name].snapshot.columns_source
                assert found == expected, (name, found, loaded[name].snapshot.review_columns_note)
        first, *others = loaded.values()
        for other in others:
            assert first.chunk_ids.equals(other.chunk_ids) and first.doc_ids == other.doc_ids
            for attribute in ("start", "end", "size", "chunk_doc", "finding_bits"):
                assert np.array_equal(getattr(first, attribute), getattr(other, attribute)), attribute
        parts_bytes = sum(p[k]["bytes"] for p in opened.parts for k in ("documents", "chunks"))
        print(
            f"snapshot: {source} ({len(opened.parts):,} parts, {first.n_chunks:,} chunks, "
            f"{first.n_documents:,} documents, {parts_bytes / 1e6:.1f} MB of parts); review columns "
            f"{review_bytes / 1e6:.1f} MB; load average {os.getloadavg()[0]:.1f}"
        )
        print(made)
        medians = {name: statistics.median(values) for name, values in times.items()}
        for name, values in times.items():
            print(
                f"{name}: {', '.join(f'{v:.2f}' for v in values)} s (median {medians[name]:.2f}, "
                f"{medians[name] / medians['two files']:.2f}x two files)"
            )
        print("the four indexes are equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
