"""Issue 9, point 5: a tampered dataset (wrong Parquet schema, out-of-range offsets, huge strings, a
crafted manifest.json) gives a clear ChunkyardError when opened for review, never a crash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkyard.chunking.dataset import CHUNKS, DOCUMENTS, MANIFEST, REVIEW_COLUMNS_DIR, Snapshot
from chunkyard.chunking.errors import ChunkyardError
from chunkyard.chunking.review import ReviewIndex

from support.parts import drop_review_columns, only_part, seal_review_columns
from support.review_fixtures import build_dataset


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("untrusted"))


def _copy(pristine: Path, tmp_path: Path) -> Path:
    folder = Snapshot.open(pristine).path
    copy = tmp_path / "kb" / "v1" / "0001"
    shutil.copytree(folder, copy)
    for child in copy.rglob("*"):
        child.chmod(0o755 if child.is_dir() else 0o644)
    return copy


@pytest.fixture
def snapshot(pristine: Path, tmp_path: Path) -> Path:
    """A copy without review columns (as written before them): the reviewer reads the crafted parts.
    (With review columns it reads those, which the crafts below leave alone: the view is the one
    published, and ``verify`` reports the parts; the crafts of review columns are further down.)"""
    return drop_review_columns(_copy(pristine, tmp_path))


def _open_fully(path: Path) -> None:
    index = ReviewIndex.load(path)
    for doc in range(index.n_documents):
        index.document_text(doc)
        index.chunk_details(doc)


def _rewrite(path: Path, change) -> None:
    """Rewrite the one part file of the folder ``path`` (``chunks.parquet``, ``documents.parquet``)."""
    path = only_part(path.parent, path.name)
    table = pq.read_table(path)
    pq.write_table(change(table), path)


@pytest.mark.parametrize(
    "manifest",
    [
        "[1, 2, 3]",
        "not json at all",
        '"just a string"',
        '{"schema_version": "1"}',
        '{"schema_version": null}',
        '{"name": 5, "version": "x", "snapshot": []}',
        "{}",
    ],
)
def test_crafted_manifest(snapshot: Path, manifest: str) -> None:
    (snapshot / MANIFEST).write_text(manifest, encoding="utf-8")
    with pytest.raises(ChunkyardError):
        _open_fully(snapshot)


def test_manifest_with_odd_optional_fields_still_opens(snapshot: Path) -> None:
    manifest = json.loads((snapshot / MANIFEST).read_text(encoding="utf-8"))
    manifest["config"] = "oops"
    (snapshot / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    _open_fully(snapshot)


def test_chunks_with_the_wrong_schema(snapshot: Path) -> None:
    pq.write_table(pa.table({"chunk_id": [1, 2], "something": ["a", "b"]}), only_part(snapshot, CHUNKS))
    with pytest.raises(ChunkyardError):
        _open_fully(snapshot)


def test_documents_with_the_wrong_types(snapshot: Path) -> None:
    _rewrite(
        snapshot / DOCUMENTS,
        lambda t: t.set_column(
            t.schema.get_field_index("n_chars"), "n_chars", pa.array(["many"] * t.num_rows)
        ),
    )
    with pytest.raises(ChunkyardError):
        _open_fully(snapshot)


@pytest.mark.parametrize("start, end", [(-5, 3), (0, 10**12), (50, 10), (2**62, 2**62 + 1)])
def test_out_of_range_offsets(snapshot: Path, start: int, end: int) -> None:
    def change(table: pa.Table) -> pa.Table:
        starts = table.column("start").to_pylist()
        ends = table.column("end").to_pylist()
        starts[0], ends[0] = start, end
        table = table.set_column(table.schema.get_field_index("start"), "start", pa.array(starts, pa.int64()))
        return table.set_column(table.schema.get_field_index("end"), "end", pa.array(ends, pa.int64()))

    _rewrite(snapshot / CHUNKS, change)
    with pytest.raises(ChunkyardError):
        _open_fully(snapshot)


def test_not_parquet_at_all(snapshot: Path) -> None:
    only_part(snapshot, CHUNKS).write_bytes(b"PAR1" + b"\x00" * 100 + b"PAR1")
    with pytest.raises(ChunkyardError):
        _open_fully(snapshot)


def test_huge_strings_open(snapshot: Path) -> None:
    """A 20 MB title and doc text are data, not a reason to fail: the reviewer opens them."""
    _rewrite(
        snapshot / DOCUMENTS,
        lambda t: t.set_column(
            t.schema.get_field_index("title"), "title", pa.array(["T" * 20_000_000] * t.num_rows)
        ),
    )
    _open_fully(snapshot)


def test_manifest_is_json_not_code(snapshot: Path) -> None:
    """A manifest is parsed with json (no pickle, no YAML tags): a crafted payload is only a string."""
    manifest = json.loads((snapshot / MANIFEST).read_text(encoding="utf-8"))
    manifest["name"] = "!!python/object/apply:os.system ['touch pwned']"
    (snapshot / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    index = ReviewIndex.load(snapshot)
    assert index.dataset.startswith("!!python") and not Path("pwned").exists()


def test_a_missing_column_is_one_line_naming_the_file(snapshot: Path) -> None:
    """Arrow's message for a missing column goes on with the whole schema, one field per line: the CLI's
    "one clear line" became twenty. The error keeps Arrow's first line only."""
    _rewrite(snapshot / CHUNKS, lambda table: table.drop_columns(["size"]))
    with pytest.raises(ChunkyardError) as caught:
        ReviewIndex.load(snapshot)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{only_part(snapshot, CHUNKS)}: cannot read"), message


@pytest.mark.parametrize("start, end", [(-5, 3), (0, 10**12), (50, 10)])
def test_out_of_range_offsets_in_the_review_columns(
    pristine: Path, tmp_path: Path, start: int, end: int
) -> None:
    """The review columns (what a snapshot written now is opened with) crafted and recorded in the
    manifest as their writer would: offsets outside the document are refused at open all the same."""
    copy = _copy(pristine, tmp_path)
    path = copy / REVIEW_COLUMNS_DIR / CHUNKS
    table = pq.read_table(path)
    starts, ends = table.column("start").to_pylist(), table.column("end").to_pylist()
    starts[0], ends[0] = start, end
    table = table.set_column(table.schema.get_field_index("start"), "start", pa.array(starts, pa.int64()))
    table = table.set_column(table.schema.get_field_index("end"), "end", pa.array(ends, pa.int64()))
    seal_review_columns(copy, CHUNKS, table)
    with pytest.raises(ChunkyardError, match="outside its document"):
        ReviewIndex.load(copy)


def test_review_columns_of_the_wrong_types_are_passed_over_for_the_parts(
    pristine: Path, tmp_path: Path
) -> None:
    copy = _copy(pristine, tmp_path)
    path = copy / REVIEW_COLUMNS_DIR / DOCUMENTS
    table = pq.read_table(path)
    table = table.set_column(
        table.schema.get_field_index("n_chars"), "n_chars", pa.array(["many"] * table.num_rows)
    )
    seal_review_columns(copy, DOCUMENTS, table)
    index = ReviewIndex.load(copy)
    assert index.snapshot.columns_source == "parts" and "column n_chars" in index.snapshot.review_columns_note
    _open_fully(copy)
