"""Benchmark (not a test): time to first paint and peak memory of ``chunkyard review --screenshot``
on a generated dataset of 1,000,000 chunks.

    .venv/bin/python benchmarks/reviewer_open.py [--chunks 1000000] [--docs 10000] [--out DIR] [--runs 3]

The dataset is written once with ``SnapshotWriter`` (the real schema and layout, no Prefect) and reused
on later runs. Each measurement is a fresh process, as a user would start it; peak memory is that
process's maximum resident set size (``wait4``), first paint is reported by the reviewer itself
(``CHUNKYARD_TIMING=1``: from the start of the command to the window painted with the document).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from chunkyard.chunking.dataset import CHUNKS_SCHEMA, DOCUMENTS_SCHEMA, SnapshotWriter, latest_snapshot  # noqa: E402

WORDS = np.array(
    "the order refund policy customer stove tent ship return warehouse label carrier "
    "within days receipt store manager approve exchange warranty defect gear pack".split()
)
FINDING_CODES = ["mid_sentence_start", "mid_sentence_end", "split_procedure", "split_table", "undersized"]


def generate(root: Path, n_chunks: int, n_docs: int, seed: int = 7) -> Path:
    """Write NAME=bench, v1, snapshot 0001 with ``n_chunks`` chunks over ``n_docs`` documents."""
    dataset = root / "bench"
    if latest_snapshot(dataset / "v1") is not None:
        return dataset
    rng = np.random.default_rng(seed)
    per_doc = n_chunks // n_docs
    writer = SnapshotWriter(dataset / "v1")
    config_hash = "0" * 16
    batch_docs = 500
    for first in range(0, n_docs, batch_docs):
        doc_cols: dict[str, list] = {name: [] for name in DOCUMENTS_SCHEMA.names}
        chunk_cols: dict[str, list] = {name: [] for name in CHUNKS_SCHEMA.names}
        for doc in range(first, min(n_docs, first + batch_docs)):
            doc_id = f"section-{doc // 100:03d}/doc-{doc:05d}.md"
            pieces = [
                " ".join(rng.choice(WORDS, size=int(rng.integers(20, 40)))) + ".\n\n" for _ in range(per_doc)
            ]
            text = "".join(pieces)
            doc_cols["doc_id"].append(doc_id)
            doc_cols["path"].append(doc_id)
            doc_cols["format"].append("markdown")
            doc_cols["strategy"].append("markdown")
            doc_cols["sha256"].append(hashlib.sha256(text.encode()).hexdigest())
            doc_cols["n_bytes"].append(len(text))
            doc_cols["n_chars"].append(len(text))
            doc_cols["n_chunks"].append(per_doc)
            doc_cols["title"].append(f"Document {doc}")
            doc_cols["exclusions"].append([])
            doc_cols["metadata_json"].append("{}")
            doc_cols["text"].append(text)
            doc_cols["page_starts"].append([])
            start = 0
            for index, piece in enumerate(pieces):
                end = start + len(piece)
                codes = [FINDING_CODES[int(rng.integers(len(FINDING_CODES)))]] if rng.random() < 0.08 else []
                chunk_cols["chunk_id"].append(
                    hashlib.sha256(f"{doc_id}\0{start}\0{end}".encode()).hexdigest()[:24]
                )
                chunk_cols["doc_id"].append(doc_id)
                chunk_cols["chunk_index"].append(index)
                chunk_cols["start"].append(start)
                chunk_cols["end"].append(end)
                chunk_cols["section_path"].append([f"Document {doc}", f"Part {index // 10}"])
                chunk_cols["size"].append(len(piece) // 4)
                chunk_cols["unit"].append("tokens")
                chunk_cols["n_chars"].append(len(piece))
                chunk_cols["n_tokens"].append(len(piece) // 4)
                chunk_cols["strategy"].append("markdown")
                chunk_cols["label"].append("")
                chunk_cols["config_version"].append(1)
                chunk_cols["config_hash"].append(config_hash)
                chunk_cols["findings"].append(codes)
                chunk_cols["text"].append(piece)
                chunk_cols["embed_text"].append(f"Document {doc}\n\n{piece}")
                chunk_cols["page_start"].append(None)
                chunk_cols["page_end"].append(None)
                start = end
        writer.write(pa.table(doc_cols, schema=DOCUMENTS_SCHEMA), pa.table(chunk_cols, schema=CHUNKS_SCHEMA))
    config_text = (
        "name: bench\nversion: 1\nsource: {path: .}\nchunker: {strategy: markdown, unit: tokens, "
        "max_size: 128, overlap: 0, min_size: 8}\n"
    )
    writer.publish(
        {
            "schema_version": 1,
            "name": "bench",
            "version": 1,
            "kind": "full",
            "config": {"path": None, "hash": config_hash, "text": config_text},
            "counts": {"documents": n_docs, "chunks": per_doc * n_docs},
        }
    )
    return dataset


def measure(dataset: Path, png: Path) -> dict[str, float]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "CHUNKYARD_TIMING": "1"}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "chunkyard.flows.cli", "review", str(dataset), "--screenshot", str(png)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    stderr = process.stderr.read() if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"review --screenshot failed ({process.returncode}): {stderr}")
    line = next(line for line in stderr.splitlines() if line.startswith("timing:"))
    loaded = float(line.split("loaded ")[1].split(" s")[0])
    painted = float(line.split("first paint ")[1].split(" s")[0])
    return {
        "loaded_s": loaded,
        "first_paint_s": painted,
        "process_wall_s": wall,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "chunkyard-reviewer-bench")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    dataset = generate(args.out / f"{args.chunks}-{args.docs}", args.chunks, args.docs)
    snapshot = latest_snapshot(dataset / "v1")
    assert snapshot is not None
    size_mb = sum(p.stat().st_size for p in snapshot.iterdir()) / 1e6
    print(
        f"dataset: {snapshot} ({args.chunks:,} chunks, {args.docs:,} documents, {size_mb:,.0f} MB on disk; "
        f"ready in {time.perf_counter() - started:.1f} s)"
    )
    results = [measure(dataset, args.out / "screenshot.png") for _ in range(args.runs)]
    for number, result in enumerate(results, 1):
        print(
            f"run {number}: data loaded {result['loaded_s']:.2f} s, first paint {result['first_paint_s']:.2f} s, "
            f"process {result['process_wall_s']:.2f} s, peak RSS {result['peak_rss_mb']:,.0f} MB"
        )
    print(
        f"median: first paint {statistics.median(r['first_paint_s'] for r in results):.2f} s, "
        f"peak RSS {statistics.median(r['peak_rss_mb'] for r in results):,.0f} MB "
        f"(process start to exit {statistics.median(r['process_wall_s'] for r in results):.2f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
