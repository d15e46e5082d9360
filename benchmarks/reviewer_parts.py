"""Benchmark (not a test): ``ReviewIndex.load`` on a snapshot of many parts against the same rows as
two plain files (the layout before parts), cold (cache emptied) and warm (``Snapshot.whole_columns``).

    .venv/bin/python benchmarks/reviewer_parts.py [SNAPSHOT] [--repeats 3]

SNAPSHOT defaults to the generated dataset of ``benchmarks/reviewer_open.py`` (1,000,000 chunks over
10,000 documents, written by ``SnapshotWriter`` into parts; made if missing). Its rows are rewritten
once as two plain files (manifest schema 1) in a temporary folder; the cache lives in a temporary
``CHUNKYARD_CACHE_DIR``. Each repeat, in one process: cold parted, warm parted, two files; wall
seconds of ``ReviewIndex.load``. The three indexes are checked equal.
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
    manifest = {k: v for k, v in opened.manifest.items() if k not in ("parts", "parts_format", "storage")}
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 1}), encoding="utf-8")
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
        parted = resolve_snapshot(args.snapshot)
        plain = two_files(parted, Path(tmp) / "plain")
        opened = Snapshot.open(parted)
        times: dict[str, list[float]] = {"parts, cold": [], "parts, warm": [], "two files": []}
        loaded = {}
        for _ in range(args.repeats):
            shutil.rmtree(cache, ignore_errors=True)
            for name, path in (("parts, cold", parted), ("parts, warm", parted), ("two files", plain)):
                started = time.perf_counter()
                loaded[name] = ReviewIndex.load(path)
                times[name].append(time.perf_counter() - started)
                wait_for_cache_writes()  # (in the background: not in the figure)
        first, *others = loaded.values()
        for other in others:
            assert first.chunk_ids.equals(other.chunk_ids) and first.doc_ids == other.doc_ids
            for attribute in ("start", "end", "size", "chunk_doc", "finding_bits"):
                assert np.array_equal(getattr(first, attribute), getattr(other, attribute)), attribute
        print(
            f"snapshot: {parted} ({len(opened.parts):,} parts, {first.n_chunks:,} chunks, "
            f"{first.n_documents:,} documents); load average {os.getloadavg()[0]:.1f}"
        )
        for name, values in times.items():
            print(
                f"{name}: {', '.join(f'{v:.2f}' for v in values)} s (median {statistics.median(values):.2f})"
            )
        print("the three indexes are equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
