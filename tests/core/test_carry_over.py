"""Carrying unchanged documents over reads only the row groups that hold them, and gets the same rows."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq

from chunkyard.chunking.dataset import CHUNKS, DOCUMENTS, Snapshot, resolve_snapshot
from chunkyard.chunking.pipeline import CarryOver, carried_over

from support.review_fixtures import build_dataset


def small_groups_copy(snapshot: Path, target: Path) -> Snapshot:
    """The same snapshot with tiny row groups, so a batch's rows span several of them."""
    target.mkdir()
    for name in (DOCUMENTS, CHUNKS):
        pq.write_table(pq.read_table(snapshot / name), target / name, row_group_size=3)
    return Snapshot(target, {"name": "x", "version": 1, "snapshot": 1, "schema_version": 1})


def test_carry_over_matches_the_filtering_reader(tmp_path: Path) -> None:
    original = resolve_snapshot(build_dataset(tmp_path))
    snapshot = small_groups_copy(original, tmp_path / "small")
    doc_ids = pq.read_table(original / DOCUMENTS, columns=["doc_id"]).column("doc_id").to_pylist()
    carry = CarryOver(snapshot)
    rng = random.Random(7)
    for _ in range(20):
        chosen = rng.sample(doc_ids, rng.randint(0, len(doc_ids)))
        documents, chunks = carry.rows(chosen)
        expected_documents, expected_chunks = carried_over(snapshot, chosen)
        key = ["doc_id"]
        assert documents.sort_by([(k, "ascending") for k in key]).equals(
            expected_documents.sort_by([(k, "ascending") for k in key])
        )
        order = [("doc_id", "ascending"), ("chunk_index", "ascending")]
        assert chunks.sort_by(order).equals(expected_chunks.sort_by(order))
    assert carry.rows(["no/such/doc.md"])[1].num_rows == 0
