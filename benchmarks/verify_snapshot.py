"""Benchmark (not a test): what the snapshot checks of issue 20 cost on a generated dataset of
1,000,000 chunks (the one ``benchmarks/reviewer_open.py`` writes, reused when present).

    .venv/bin/python benchmarks/verify_snapshot.py [--chunks 1000000] [--docs 10000] [--out DIR] [--runs 3]

Prints, per step, the best of ``--runs`` (seconds): ``Snapshot.open`` (manifest + the Parquet footers'
column types), ``ReviewIndex.load`` (what the reviewer reads before its first paint),
``Snapshot.verify_files`` (SHA-256 of both files against the manifest) and ``Snapshot.validate``
(every chunk's text against its document, unique ids, safe doc ids).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from reviewer_open import generate  # noqa: E402

from chunkyard.chunking.dataset import Snapshot  # noqa: E402
from chunkyard.chunking.review import ReviewIndex  # noqa: E402


def best(runs: int, call) -> float:  # noqa: ANN001
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "chunkyard-reviewer-bench")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    dataset = generate(args.out, args.chunks, args.docs)
    snapshot = Snapshot.open(dataset)
    if "files" not in snapshot.manifest and not snapshot.parted:
        print(f"{snapshot.path}: written before checksums were recorded; remove {args.out} to regenerate")
    sizes = {
        name: sum(f.stat().st_size for f in snapshot.files(name))
        for name in ("documents.parquet", "chunks.parquet")
    }
    print(
        f"{snapshot.path}: {args.chunks:,} chunks, {args.docs:,} documents, "
        + ", ".join(f"{name} {size / 1e6:.0f} MB" for name, size in sorted(sizes.items()))
        + f"; load average {os.getloadavg()[0]:.1f}"
    )
    for label, call in (
        ("Snapshot.open", lambda: Snapshot.open(dataset)),
        ("ReviewIndex.load", lambda: ReviewIndex.load(dataset)),
        ("Snapshot.verify_files", snapshot.verify_files),
        ("Snapshot.validate", snapshot.validate),
    ):
        print(f"  {label:<22} {best(args.runs, call):7.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
