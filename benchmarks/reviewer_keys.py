"""Benchmark (not a test): what one review key costs, repaint included, on a real corpus (offscreen).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/reviewer_keys.py CORPUS_DIR [--include "**/*.md"]
        [--out DIR] [--keys 40]

The corpus is chunked once (pipeline functions and ``SnapshotWriter``, no Prefect; markdown, 384 tokens)
into ``--out`` and reused. Then the window is opened at 1500x900 and, per kind of key, ``--keys`` presses
are timed from the key to the end of the repaint it causes: ``J`` (next chunk), ``O`` (a verdict that
moves on, in the Unreviewed queue) and ``O`` in the queue of the most common finding (which usually
moves to another document). Each decision is written to a throwaway copy of the ledger.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def build(corpus: Path, out: Path, include: str) -> Path:
    from chunkyard.chunking.config import load_config_text
    from chunkyard.chunking.dataset import SnapshotWriter
    from chunkyard.chunking.pipeline import (
        RunStats,
        build_manifest,
        chunk_files,
        discover_files,
        make_batches,
        prepare_run,
    )

    dataset = out / corpus.name
    if (dataset / "v1").exists():
        return dataset
    text = (
        f'name: {corpus.name}\nversion: 1\nreviewer: bench\nsource: {{path: {corpus}, include: ["{include}"]}}\n'
        f"output: {{path: {out}}}\nchunker: {{strategy: auto, unit: tokens, max_size: 384, overlap: 32, "
        "min_size: 40}\n"
    )
    config = load_config_text(text, out / "config.yaml")
    context = prepare_run(config)
    writer, stats = SnapshotWriter(context.version_path), RunStats()
    for files, skipped in make_batches(discover_files(context)):
        stats.skipped.extend(skipped)
        result = chunk_files(config, files, {})
        stats.skipped.extend(result.skipped)
        writer.write(result.documents, result.chunks)
        stats.add(result.documents, result.chunks)
        stats.new.extend(result.chunked)
    writer.publish(build_manifest(context, stats, "full", []))
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--include", default="**/*.md")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "chunkyard-reviewer-keys")
    parser.add_argument("--keys", type=int, default=40)
    args = parser.parse_args()
    dataset = build(args.corpus.resolve(), args.out, args.include)
    (dataset / "review.sqlite").unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        (dataset / f"review.sqlite{suffix}").unlink(missing_ok=True)

    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv[:1])
    app.setOrganizationName("chunkyard-bench")
    from chunkyard.gui.controller import ReviewController
    from chunkyard.gui.main_window import MainWindow

    window = MainWindow(ReviewController())
    window.resize(1500, 900)
    window.show()
    controller = window.controller
    controller.open(dataset)
    controller.wait_loaded()
    for _ in range(5):
        app.processEvents()
    index = controller.index
    assert index is not None
    print(f"{dataset}: {index.n_documents:,} documents, {index.n_chunks:,} chunks")

    def timed(key: Qt.Key) -> float:
        started = time.perf_counter()
        QTest.keyClick(window.chunks_view, key)
        app.processEvents()
        window.repaint()
        return time.perf_counter() - started

    window.activateWindow()
    controller.select_row(0)
    app.processEvents()
    runs = {"J (next chunk)": [timed(Qt.Key.Key_J) for _ in range(args.keys)]}
    runs["O (verdict, Unreviewed queue)"] = [timed(Qt.Key.Key_O) for _ in range(args.keys)]
    code = next(iter(index.finding_counts()), None)
    if code is not None:
        window.review_finding(code)
        app.processEvents()
        left = int(index.queue_mask(controller.queue).sum())
        runs[f"O (verdict, queue of {code})"] = [timed(Qt.Key.Key_O) for _ in range(min(args.keys, left))]
    for what, times in runs.items():
        if times:
            print(
                f"{what}: median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms "
                f"over {len(times)} keys"
            )
    window.close()


if __name__ == "__main__":
    main()
