"""concat_parquet joins Parquet parts into one plain file: the same rows, in order, for every reader."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkyard.chunking.config import load_config_text
from chunkyard.chunking.dataset import (
    CHUNKS_SCHEMA,
    DOCUMENTS_SCHEMA,
    SnapshotWriter,
    empty_table,
    write_part,
)
from chunkyard.chunking.parquet_concat import ParquetConcatError, concat_parquet, decode_footer, encode_footer
from chunkyard.chunking.pipeline import chunk_files, discover_files, make_batches, prepare_run

KB = Path(__file__).resolve().parents[2] / "examples" / "kb"
ROWS = st.lists(
    st.tuples(
        st.integers(-(2**62), 2**62),
        st.one_of(st.none(), st.text(max_size=30)),
        st.lists(st.text(max_size=5), max_size=4),
    ),
    max_size=300,
)


def table_of(rows) -> pa.Table:
    return pa.table(
        {
            "n": pa.array([r[0] for r in rows], pa.int64()),
            "s": pa.array([r[1] for r in rows], pa.string()),
            "l": pa.array([r[2] for r in rows], pa.list_(pa.string())),
        }
    )


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(
        st.tuples(ROWS, st.integers(1, 120), st.sampled_from(["zstd", "snappy", "none"])),
        min_size=1,
        max_size=5,
    )
)
def test_the_joined_file_holds_every_parts_rows_in_order(tmp_path_factory, parts):
    folder = tmp_path_factory.mktemp("parts")
    tables, paths = [], []
    for index, (rows, row_group, codec) in enumerate(parts):
        table = table_of(rows)
        path = folder / f"{index}.parquet"
        pq.write_table(table, path, compression=codec, row_group_size=row_group)
        tables.append(table)
        paths.append(path)
    assert concat_parquet(paths, folder / "all.parquet") == sum(t.num_rows for t in tables)
    joined = pq.ParquetFile(folder / "all.parquet")
    assert joined.read().equals(pa.concat_tables(tables))
    assert joined.metadata.num_row_groups == sum(pq.ParquetFile(p).metadata.num_row_groups for p in paths)
    # Row groups are addressable one by one, as readers that take a few row groups do.
    if joined.metadata.num_row_groups:
        last = joined.metadata.num_row_groups - 1
        assert (
            joined.read_row_group(last).equals(
                pq.ParquetFile(paths[-1]).read_row_group(
                    pq.ParquetFile(paths[-1]).metadata.num_row_groups - 1
                )
            )
            or tables[-1].num_rows == 0
        )


def test_a_footer_decodes_and_encodes_to_the_same_bytes(tmp_path):
    path = tmp_path / "chunks.parquet"
    pq.write_table(empty_table(CHUNKS_SCHEMA), path)
    data = path.read_bytes()
    (length,) = struct.unpack("<I", data[-8:-4])
    footer = data[-8 - length : -8]
    assert encode_footer(decode_footer(footer)) == footer


def test_duckdb_reads_a_joined_snapshot_file(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    parts = []
    for index in range(3):
        path = tmp_path / f"{index}.parquet"
        pq.write_table(
            pa.table({"n": list(range(index * 10, index * 10 + 10)), "s": [f"v{i}" for i in range(10)]}),
            path,
            compression="zstd",
        )
        parts.append(path)
    concat_parquet(parts, tmp_path / "all.parquet")
    rows = duckdb.sql(f"select n, s from read_parquet('{tmp_path / 'all.parquet'}')").fetchall()
    assert rows == [(n, f"v{n % 10}") for n in range(30)]


def test_parts_of_another_schema_or_with_a_page_index_are_refused(tmp_path):
    pq.write_table(pa.table({"n": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"m": [1, 2]}), tmp_path / "b.parquet")
    with pytest.raises(ParquetConcatError, match="b.parquet: its schema differs"):
        concat_parquet([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "out.parquet")
    pq.write_table(pa.table({"n": [3]}), tmp_path / "c.parquet", write_page_index=True)
    with pytest.raises(ParquetConcatError, match="c.parquet: has a page index"):
        concat_parquet([tmp_path / "a.parquet", tmp_path / "c.parquet"], tmp_path / "out.parquet")
    (tmp_path / "d.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ParquetConcatError, match="d.parquet: not a Parquet file"):
        concat_parquet([tmp_path / "d.parquet"], tmp_path / "out.parquet")


def _batches(tmp_path: Path) -> list[tuple[pa.Table, pa.Table]]:
    """Real batches of the bundled sample, one document each (the pipeline without Prefect)."""
    text = f"name: kb\nversion: 1\nsource: {{path: {KB}}}\noutput: {{path: {tmp_path / 'out'}}}\n"
    config = load_config_text(
        text + "chunker: {strategy: auto, unit: chars, max_size: 400}\n", tmp_path / "c.yaml"
    )
    context = prepare_run(config)
    return [
        (r.documents, r.chunks)
        for r in (
            chunk_files(config, files, {})
            for files, _ in make_batches(discover_files(context), target_bytes=1)
        )
    ]


def _rows(tmp_path: Path) -> tuple[pa.Table, pa.Table]:
    return _batches(tmp_path)[0]


def test_a_parts_writer_publishes_what_a_streaming_writer_does(tmp_path):
    """Parts written by 'workers' and rows written by the flow, interleaved, give the streaming
    writer's files row for row; the part folder is gone from the published snapshot."""
    batches = _batches(tmp_path)
    batches.insert(1, (batches[0][0].slice(0, 0), batches[0][1].slice(0, 0)))  # a batch of skipped files only
    assert len(batches) > 5
    streaming = SnapshotWriter(tmp_path / "stream" / "v1")
    for documents, chunks in batches:
        streaming.write(documents, chunks)
    stream_snapshot = streaming.publish({"parent_snapshot": None})
    parted = SnapshotWriter(tmp_path / "parts" / "v1", parts=True)
    for index, (documents, chunks) in enumerate(batches):
        if index % 3 == 1:
            parted.write(documents, chunks)  # the flow's own rows (carried over) between workers' parts
        else:
            parted.add_part(*write_part(parted.part_folder, f"batch-{index}", documents, chunks))
    parts_snapshot = parted.publish({"parent_snapshot": None})
    for filename, schema in (("documents.parquet", DOCUMENTS_SCHEMA), ("chunks.parquet", CHUNKS_SCHEMA)):
        expected = pq.read_table(stream_snapshot / filename)
        assert expected.schema == schema and pq.read_table(parts_snapshot / filename).equals(expected)
    assert sorted(p.name for p in parts_snapshot.iterdir()) == sorted(
        p.name for p in stream_snapshot.iterdir()
    )


def test_a_parts_writer_without_rows_publishes_empty_files_and_abort_removes_its_parts(tmp_path):
    empty = SnapshotWriter(tmp_path / "v1", parts=True).publish({"parent_snapshot": None})
    assert pq.read_table(empty / "chunks.parquet").num_rows == 0
    assert pq.read_table(empty / "documents.parquet").schema == DOCUMENTS_SCHEMA
    aborted = SnapshotWriter(tmp_path / "v1", parts=True)
    aborted.add_part(*write_part(aborted.part_folder, "batch-1", *_rows(tmp_path)))
    aborted.abort()
    assert not aborted.staging.exists()
    with pytest.raises(Exception, match="not a part file"):
        other = SnapshotWriter(tmp_path / "v2", parts=True)
        other.add_part(Path(tmp_path / "elsewhere.parquet"), None)
