"""Worker processes write the snapshot's parts themselves (issue 22, item 3).

With ``--task-runner process`` the flow makes batches that end where parts end
(``part_aligned_batches``), each worker cuts its batch into parts with the writer's own rule and
writes them (``write_worker_parts``), and the flow renames them into the snapshot when its own
cutter agrees, reading them back only where it does not (a skipped file, a size that changed).
Checked here in one process, against the writer fed every row (what the thread runner does): the
same part files, byte for byte, and the workers' files are the published ones (same inode).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chunkyard.chunking import dataset as dataset_module
from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import Snapshot, SnapshotWriter
from chunkyard.chunking.documents import SourceFile
from chunkyard.chunking.pipeline import chunk_files, discover_files, make_batches, prepare_run
from chunkyard.flows.run import part_aligned_batches, worker_parts

from support.cli import write_config
from support.parts import synthetic_corpus


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(dataset_module, "PART_BYTES", 4_000)


def _publish(tmp_path: Path, source: Path, name: str, *, workers: bool) -> tuple[Snapshot, int]:
    """A full run of ``source`` without Prefect: rows fed to the writer (``workers=False``) or parts
    written as a worker would. Returns the snapshot and how many parts were workers' files, renamed."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = load_config(write_config(tmp_path, source, tmp_path / name))
    context = prepare_run(config)
    writer = SnapshotWriter(context.version_path, parts=workers)
    items = discover_files(context)
    batches = (
        part_aligned_batches(items, 9_000, writer.part_target) if workers else make_batches(items, 7_000)
    )
    for index, (files, _skipped) in enumerate(batches):
        result = chunk_files(config, files, {})
        parts = []
        if workers:
            batch = worker_parts(
                result, files, str(writer.part_folder), f"batch-{index:06d}", writer.part_target
            )
            result, parts = batch.result, batch.parts
            documents, chunks = writer.load_part(*result.part)
        else:
            documents, chunks = result.documents, result.chunks
        chunked = set(result.chunked)
        order = [(f.doc_id, False) for f in files if f.doc_id in chunked]
        writer.write_batch(order, documents, chunks, parts)
    manifest = {"name": "kb", "version": 1, "parent_snapshot": None}
    adopted = writer.parts_adopted
    return Snapshot.open(writer.publish(manifest)), adopted


def _inodes(snapshot: Snapshot) -> list[int]:
    return [
        os.stat(path).st_ino
        for name in ("documents.parquet", "chunks.parquet")
        for path in snapshot.files(name)
    ]


def test_worker_parts_are_the_parts_the_flow_would_cut(small_parts, tmp_path: Path) -> None:
    source = tmp_path / "src"
    synthetic_corpus(source, documents=150)
    flow, _ = _publish(tmp_path / "a", source, "out", workers=False)
    workers, adopted = _publish(tmp_path / "b", source, "out", workers=True)
    assert len(flow.parts) >= 30
    assert workers.parts == flow.parts  # keys, rows, bytes, SHA-256, file names
    # The review columns, from the workers' files read back: the same files as from the rows.
    assert workers.manifest["review_columns"] == flow.manifest["review_columns"]
    assert workers.review_columns() is not None, workers.review_columns_note
    workers.verify()  # review columns against the parts too
    # Every part but the last (where no bound may end it) is a file a worker wrote, renamed.
    assert adopted >= len(workers.parts) - 1


def test_where_a_skipped_file_moves_the_bounds_the_flow_cuts_those_parts_itself(
    monkeypatch, tmp_path: Path
) -> None:
    """A file the workers skip counts in the batches' bounds (its size is known before it is read)
    but not in the rows: the flow's cutter then differs from a worker's until both end a part after
    the same document again, and the parts in between are cut by the flow from the rows."""
    monkeypatch.setattr(dataset_module, "PART_BYTES", 16_000)  # parts of several documents
    source = tmp_path / "src"
    synthetic_corpus(source, documents=150)
    (tmp_path / "c").mkdir()
    context = prepare_run(load_config(write_config(tmp_path / "c", source, tmp_path / "c" / "out")))
    batches = list(part_aligned_batches(discover_files(context), 9_000, 16_000))
    for files, _ in (batches[1], batches[3]):  # the file that ends the batch: skipped when read (binary)
        files[-1].path.write_bytes(b"\x00" * files[-1].size)
    flow, _ = _publish(tmp_path / "a", source, "out", workers=False)
    workers, adopted = _publish(tmp_path / "b", source, "out", workers=True)
    assert workers.parts == flow.parts
    assert workers.chunks().equals(flow.chunks()) and workers.documents().equals(flow.documents())
    assert len(workers.parts) // 2 < adopted < len(workers.parts) - 1  # some cut by the flow, most by workers
    assert not list(workers.path.glob("parts")), "the workers' folder is not published"


def test_batches_end_where_parts_end(small_parts, tmp_path: Path) -> None:
    source = tmp_path / "src"
    synthetic_corpus(source, documents=150)
    config = load_config(write_config(tmp_path, source, tmp_path / "out"))
    context = prepare_run(config)
    files = [item for item in discover_files(context) if isinstance(item, SourceFile)]
    cutter = dataset_module.PartCutter(4_000)
    bounds = {f.doc_id for f in files if cutter.ends_after(f.doc_id, f.size)}
    batches = list(part_aligned_batches(discover_files(context), 20_000, 4_000))
    assert len(batches) > 3
    assert [f for batch, _ in batches for f in batch] == files
    for batch, _ in batches[:-1]:
        assert batch[-1].doc_id in bounds and sum(f.size for f in batch) >= 20_000
