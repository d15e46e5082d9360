"""The review-columns files of a snapshot hold exactly its parts' columns, whatever the cut.

``SnapshotWriter`` writes ``review-columns/documents.parquet`` and ``.../chunks.parquet`` while it cuts
the parts (rows made now, rows carried over into new parts, parts shared with the previous snapshot),
in row groups of ``REVIEW_ROW_GROUP`` rows. Checked with hypothesis over random documents, part
targets, row-group sizes and a refresh that keeps, changes, removes and inserts documents: the files
are used (``review_columns``) and equal the columns read from the parts, row for row, for the full
snapshot and for its refresh, and ``validate`` (which compares them) passes.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from unittest import mock

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkyard.chunking import dataset as dataset_module
from chunkyard.chunking.dataset import (
    CHUNKS,
    CHUNKS_SCHEMA,
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    REVIEW_COLUMNS,
    Snapshot,
    SnapshotWriter,
)

FINDINGS = ["undersized", "split_table", "mid_sentence_end"]

document = st.tuples(
    st.integers(1, 3_000),  # characters (= bytes: ASCII)
    st.lists(st.sampled_from(FINDINGS), max_size=2),  # the findings of its first chunk
    st.integers(0, 4),  # chunks
)


def _rows(
    doc_id: str, size: int, findings: list[str], n_chunks: int, title: str
) -> tuple[pa.Table, pa.Table]:
    text = (doc_id + " ") * (size // (len(doc_id) + 1)) + "x" * (size % (len(doc_id) + 1))
    bounds = [len(text) * i // max(n_chunks, 1) for i in range(n_chunks + 1)]
    documents = {
        "doc_id": [doc_id],
        "path": [doc_id],
        "format": ["text"],
        "strategy": ["recursive"],
        "sha256": [hashlib.sha256(text.encode()).hexdigest()],
        "n_bytes": [len(text)],
        "n_chars": [len(text)],
        "n_chunks": [n_chunks],
        "title": [title],
        "exclusions": [[]],
        "metadata_json": ["{}"],
        "text": [text],
        "page_starts": [[]],
    }
    starts, ends = bounds[:-1], bounds[1:]
    chunks = {
        "chunk_id": [
            hashlib.sha256(f"{doc_id}\0{i}\0{s}\0{e}".encode()).hexdigest()[:24]
            for i, (s, e) in enumerate(zip(starts, ends, strict=True))
        ],
        "doc_id": [doc_id] * n_chunks,
        "chunk_index": list(range(n_chunks)),
        "start": starts,
        "end": ends,
        "section_path": [[]] * n_chunks,
        "size": [e - s for s, e in zip(starts, ends, strict=True)],
        "unit": ["chars"] * n_chunks,
        "n_chars": [e - s for s, e in zip(starts, ends, strict=True)],
        "n_tokens": [None] * n_chunks,
        "strategy": ["recursive"] * n_chunks,
        "label": ["default"] * n_chunks,
        "config_version": [1] * n_chunks,
        "config_hash": ["0" * 16] * n_chunks,
        "findings": [findings if i == 0 else [] for i in range(n_chunks)],
        "text": [text[s:e] for s, e in zip(starts, ends, strict=True)],
        "embed_text": [text[s:e] for s, e in zip(starts, ends, strict=True)],
        "page_start": [None] * n_chunks,
        "page_end": [None] * n_chunks,
    }
    return pa.table(documents, schema=DOCUMENTS_SCHEMA), pa.table(chunks, schema=CHUNKS_SCHEMA)


def _check(snapshot: Snapshot) -> None:
    found = snapshot.review_columns()
    assert found is not None, snapshot.review_columns_note
    assert found[0].equals(snapshot.documents(REVIEW_COLUMNS[DOCUMENTS]))
    assert found[1].equals(snapshot.chunks(REVIEW_COLUMNS[CHUNKS]))
    snapshot.validate()


@settings(max_examples=30, deadline=None)
@given(
    documents=st.lists(document, max_size=24),
    target=st.sampled_from([600, 2_000, 1_000_000]),
    row_group=st.sampled_from([1, 3, 7, 1 << 18]),
    fates=st.lists(st.sampled_from(["keep", "keep", "keep", "change", "remove", "insert"]), max_size=24),
)
def test_review_columns_are_the_parts_columns_for_any_cut_and_refresh(
    documents, target, row_group, fates
) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(dataset_module, "PART_BYTES", target),
        mock.patch.object(dataset_module, "REVIEW_ROW_GROUP", row_group),
    ):
        version = Path(tmp) / "kb" / "v1"
        rows = {f"doc-{i:03d}.md": spec for i, spec in enumerate(documents)}
        writer = SnapshotWriter(version)
        for doc_id, (size, findings, n_chunks) in rows.items():
            writer.write(*_rows(doc_id, size, findings, n_chunks, "first"))
        first = Snapshot.open(writer.publish({"name": "kb", "version": 1, "parent_snapshot": None}))
        _check(first)

        writer = SnapshotWriter(version, previous=first)
        for index, doc_id in enumerate(
            sorted(rows) + [f"doc-{i:03d}.md" for i in range(len(rows), len(fates))]
        ):
            fate = fates[index] if index < len(fates) else "keep"
            if doc_id not in rows:
                if fate == "insert":
                    writer.write(*_rows(doc_id, 100 + index, [], 1, "inserted"))
            elif fate in ("keep", "insert"):
                writer.write_previous([doc_id])
            elif fate == "change":
                size, findings, n_chunks = rows[doc_id]
                writer.write(*_rows(doc_id, size + 1, findings[:1], n_chunks, "changed"))
        second = Snapshot.open(writer.publish({"name": "kb", "version": 1, "parent_snapshot": 1}))
        _check(second)
        _check(first)  # untouched by the refresh
