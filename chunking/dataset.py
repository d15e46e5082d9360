"""Datasets on disk: explicit Arrow schemas, staged writing and atomic publishing, opening.

Layout: ``OUTPUT/NAME/v{version}/{snapshot:04d}/`` holding ``manifest.json``, ``documents.parquet/``
and ``chunks.parquet/``: two folders of part files (``part-00000001.parquet``, ...), each part the rows
of one group of consecutive documents, cut where the documents themselves say (``PartCutter``), so a
refresh rewrites only the parts holding a changed document and hard-links the others from the
previous snapshot (docs/storage.md, "Snapshots that cost only what changed"). Snapshots written before
parts (manifest ``schema_version`` 1) hold two plain files of those names and are read as one part. A snapshot is written under a hidden staging folder beside its final place
and renamed into place in one step once complete (``rename(2)`` of a folder is atomic on a local
POSIX filesystem), so a killed run never leaves a visible partial snapshot. Readers ignore hidden
folders; writers remove staging folders whose process is gone. Published snapshots are never
modified (files are made read-only). The number is taken under the version's publish lock, so
concurrent runs get consecutive numbers and each snapshot's parent is the one published before it.

On a filesystem without an atomic folder rename (object stores such as S3, reached through a URI,
see ``chunkyard.chunking.storage``) the files of snapshot NNNN are written straight into ``NNNN/`` and
``manifest.json`` is written last, as the commit marker: one object appears whole or not at all, and
every reader ignores a numbered folder without a manifest. A killed run leaves only such an
uncommitted folder; later runs skip past it and remove it once it is older than a grace period.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from chunkyard.chunking.api import ChunkedDocument, chunk_id
from chunkyard.chunking.documents import Document
from chunkyard.chunking.errors import ChunkyardError, DatasetError, DatasetPathError
from chunkyard.chunking.pdf import page_of
from chunkyard.chunking.storage import (
    Location,
    StoragePath,
    location,
    parquet_file,
    read_parquet,
)

SCHEMA_VERSION = 1  # of the Parquet columns (``chunkyard.schema_version`` in each file's metadata)
# Of the manifest: 1, two data files; 2, part folders (``parts`` in the manifest).
LAYOUT_VERSION = 2
MANIFEST = "manifest.json"
DOCUMENTS = "documents.parquet"
CHUNKS = "chunks.parquet"
PARTS = "parts"  # in a staging folder: the part files a parts writer joins at publish
DOCUMENT_ROW_GROUP, CHUNK_ROW_GROUP = 4096, 65536  # rows per row group, at most
_SNAPSHOT = re.compile(r"^\d{4,}$")
# The part files of a snapshot, in row order by name (DuckDB, Polars and pyarrow list them sorted).
PART_FILE = "part-{:08d}.parquet"
# Target source bytes per part (``PartCutter``): chosen by measurement, see docs/storage.md.
# ``CHUNKYARD_PART_BYTES`` overrides it (for measurements: benchmarks/refresh_bytes.py); snapshots cut
# with another target share no parts with these (``parts_format``).
PART_BYTES = int(os.environ.get("CHUNKYARD_PART_BYTES") or 128_000)
# Min/max statistics only for the small columns (a filter on doc_id uses them); the text columns'
# would be whole texts in every footer (≈7 % of a part's bytes, for nothing).
STATISTICS = {
    DOCUMENTS: ["doc_id", "path", "sha256", "n_bytes", "n_chars", "n_chunks"],
    CHUNKS: ["chunk_id", "doc_id", "chunk_index", "start", "end", "size", "n_chars", "n_tokens"],
}
_VERSION = re.compile(r"^v(\d+)$")

_KIND = {DOCUMENTS: "documents", CHUNKS: "chunks"}  # a part entry's key for each folder

# The columns the reviewer opens a snapshot with (``ReviewIndex.load``). A parted snapshot holds them
# once more, every row in row order, in one small file per table written at publish
# (``review-columns/documents.parquet`` and ``review-columns/chunks.parquet``, the manifest's
# ``review_columns`` entry): one file read instead of a file open per part (docs/storage.md).
REVIEW_COLUMNS = {
    DOCUMENTS: ["doc_id", "title", "sha256", "n_chars"],
    CHUNKS: ["chunk_id", "doc_id", "chunk_index", "start", "end", "size", "unit", "findings"],
}
REVIEW_COLUMNS_DIR = "review-columns"
REVIEW_COLUMNS_KEY = "review_columns"  # the manifest's entry
REVIEW_PARTS_METADATA = b"chunkyard.parts"  # in each file's footer: the ``parts_digest`` it was made from
REVIEW_ROW_GROUP = 1 << 18  # rows per row group: few groups read fastest, and bound the writer's memory

EXCLUSION_TYPE = pa.struct([("start", pa.int64()), ("end", pa.int64()), ("reason", pa.string())])

DOCUMENTS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("format", pa.string(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("n_bytes", pa.int64(), nullable=False),
        pa.field("n_chars", pa.int64(), nullable=False),
        pa.field("n_chunks", pa.int32(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("exclusions", pa.list_(EXCLUSION_TYPE), nullable=False),
        pa.field("metadata_json", pa.string(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        # Paged formats (PDF): offset in ``text`` where each page begins; empty for the others.
        pa.field("page_starts", pa.list_(pa.int64()), nullable=False),
    ],
    metadata={"chunkyard.schema_version": str(SCHEMA_VERSION)},
)

CHUNKS_SCHEMA = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32(), nullable=False),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("end", pa.int64(), nullable=False),
        pa.field("section_path", pa.list_(pa.string()), nullable=False),
        pa.field("size", pa.int32(), nullable=False),
        pa.field("unit", pa.string(), nullable=False),
        pa.field("n_chars", pa.int32(), nullable=False),
        pa.field("n_tokens", pa.int32()),  # null: not counted (count_tokens: false)
        pa.field("strategy", pa.string(), nullable=False),
        pa.field("label", pa.string(), nullable=False),
        pa.field("config_version", pa.int32(), nullable=False),
        pa.field("config_hash", pa.string(), nullable=False),
        pa.field("findings", pa.list_(pa.string()), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("embed_text", pa.large_string(), nullable=False),
        # 1-based pages of the chunk's first and last character (paged formats); null otherwise.
        pa.field("page_start", pa.int32()),
        pa.field("page_end", pa.int32()),
    ],
    metadata={"chunkyard.schema_version": str(SCHEMA_VERSION)},
)


def empty_table(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


REVIEW_SCHEMAS = {
    filename: pa.schema([schema.field(name) for name in REVIEW_COLUMNS[filename]], metadata=schema.metadata)
    for filename, schema in ((DOCUMENTS, DOCUMENTS_SCHEMA), (CHUNKS, CHUNKS_SCHEMA))
}


def parts_digest(parts: list[dict[str, Any]]) -> str:
    """What a snapshot's review-columns files were made from: a SHA-256 over every part's rows and
    SHA-256, documents and chunks, in row order. Another set of parts (a refresh, a crafted or
    resealed manifest) gives another digest, so a column file is used only beside its own parts."""
    digest = hashlib.sha256()
    for part in parts:
        for kind in ("documents", "chunks"):
            entry = part.get(kind) if isinstance(part, dict) else None
            entry = entry if isinstance(entry, dict) else {}
            digest.update(f"{entry.get('rows')!r} {entry.get('sha256')!r}\n".encode())
    return digest.hexdigest()


class _NotUsable(Exception):
    """Why a snapshot's review-columns files are not read (its columns then come from the parts)."""


# ---------------------------------------------------------------------------------------------
# Building rows

# The key of ``metadata_json`` that holds the extractor's exclusions (HTML scripts, PDF artefacts, ...),
# kept apart from the chunker's own ``exclusions`` column.
EXTRACTION_EXCLUSIONS = "extraction_exclusions"


class BatchRows:
    """The rows of ``documents.parquet`` and ``chunks.parquet`` for one batch, added one chunked
    document at a time: the one place the columns of ``DOCUMENTS_SCHEMA`` and ``CHUNKS_SCHEMA`` are
    filled (docs/design.md, "Dataset contract").

    Column by column: one list per column, extended by one comprehension per document (a third of the
    cost of appending per chunk and column), turned into Arrow tables by ``tables``.
    """

    def __init__(self) -> None:
        self._documents: dict[str, list[Any]] = {name: [] for name in DOCUMENTS_SCHEMA.names}
        self._chunks: dict[str, list[Any]] = {name: [] for name in CHUNKS_SCHEMA.names}

    def add(
        self,
        document: Document,
        chunked: ChunkedDocument,
        *,
        unit: str,
        config_version: int,
        config_hash: str,
    ) -> None:
        """The document's row and one row per chunk of ``chunked`` (its chunks under one config)."""
        metadata = {**document.metadata, **_jsonable(chunked.metadata)}
        if document.exclusions:
            metadata[EXTRACTION_EXCLUSIONS] = document.exclusions
        chunks = chunked.chunks
        documents = self._documents
        documents["doc_id"].append(document.doc_id)
        documents["path"].append(document.path)
        documents["format"].append(document.format)
        documents["strategy"].append(chunked.strategy)
        documents["sha256"].append(document.sha256)
        documents["n_bytes"].append(document.n_bytes)
        documents["n_chars"].append(len(document.text))
        documents["n_chunks"].append(len(chunks))
        documents["title"].append(chunked.title)
        documents["exclusions"].append(
            [{"start": s, "end": e, "reason": r} for s, e, r in chunked.exclusions]
        )
        documents["metadata_json"].append(
            json.dumps(metadata, ensure_ascii=False, sort_keys=True, default=str)
        )
        documents["text"].append(document.text)
        documents["page_starts"].append(list(document.page_starts))

        count = len(chunks)
        doc_id = document.doc_id
        columns = self._chunks
        columns["chunk_id"].extend([chunk_id(doc_id, c.start, c.end, config_hash) for c in chunks])
        columns["doc_id"].extend([doc_id] * count)
        columns["chunk_index"].extend([c.index for c in chunks])
        columns["start"].extend([c.start for c in chunks])
        columns["end"].extend([c.end for c in chunks])
        columns["section_path"].extend([list(c.section_path) for c in chunks])
        columns["size"].extend([c.size for c in chunks])
        columns["unit"].extend([unit] * count)
        columns["n_chars"].extend([c.n_chars for c in chunks])
        columns["n_tokens"].extend([c.n_tokens for c in chunks])
        columns["strategy"].extend([c.strategy for c in chunks])
        columns["label"].extend([c.label for c in chunks])
        columns["config_version"].extend([config_version] * count)
        columns["config_hash"].extend([config_hash] * count)
        columns["findings"].extend([list(c.findings) for c in chunks])
        columns["text"].extend([c.text for c in chunks])
        columns["embed_text"].extend([c.embed_text for c in chunks])
        # Pages of the chunk's first and last character (PDF); null for documents without pages.
        pages = document.page_starts
        if pages:
            columns["page_start"].extend([page_of(pages, c.start) for c in chunks])
            columns["page_end"].extend([page_of(pages, max(c.start, c.end - 1)) for c in chunks])
        else:
            columns["page_start"].extend([None] * count)
            columns["page_end"].extend([None] * count)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        """The documents and chunks tables of the rows added so far."""
        return (
            pa.table(self._documents, schema=DOCUMENTS_SCHEMA),
            pa.table(self._chunks, schema=CHUNKS_SCHEMA),
        )


def stored_document(row: dict[str, Any]) -> Document:
    """A ``documents.parquet`` row read back as the document it was made from (``BatchRows.add``'s
    inverse for what chunking needs), so a snapshot can be rechunked without its source folder."""
    metadata = json.loads(row["metadata_json"] or "{}")
    return Document(
        row["doc_id"],
        row["path"],
        row["format"],
        row["sha256"],
        row["n_bytes"],
        row["text"],
        title=row["title"],
        exclusions=metadata.pop(EXTRACTION_EXCLUSIONS, []),
        metadata=metadata,
        page_starts=list(row.get("page_starts") or []),
    )


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))


# ---------------------------------------------------------------------------------------------
# Locating snapshots


def version_dir(output: Location, name: str, version: int) -> Location:
    return output / name / f"v{version}"


def list_snapshots(version_path: Location) -> list[int]:
    """Numbers of the published snapshots: numbered folders holding a manifest (others are ignored)."""
    if not version_path.is_dir():
        return []
    return sorted(
        int(p.name) for p in version_path.iterdir() if _SNAPSHOT.match(p.name) and (p / MANIFEST).is_file()
    )


def latest_snapshot(version_path: Location) -> Location | None:
    snapshots = list_snapshots(version_path)
    return version_path / f"{snapshots[-1]:04d}" if snapshots else None


def resolve_snapshot(path: str | Location) -> Location:
    """Any of ``OUTPUT/NAME``, ``OUTPUT/NAME/vX`` or a snapshot folder → the newest snapshot below it.

    ``path`` may be a URI (``s3://bucket/out/NAME``): see ``chunkyard.chunking.storage``.
    """
    path = location(path)
    if (path / MANIFEST).is_file():
        return path
    if not path.is_dir():
        if path.is_file():
            raise DatasetPathError(
                f"{path}: a file, not a dataset folder (give OUTPUT/NAME, a version folder "
                "vX or a snapshot folder NNNN)"
            )
        raise DatasetPathError(f"{path}: no such dataset folder")
    if _VERSION.match(path.name):
        found = latest_snapshot(path)
        if found is None:
            raise DatasetPathError(f"{path}: no published snapshot in this version folder")
        return found
    versions = sorted(
        (int(m.group(1)), p) for p in path.iterdir() if p.is_dir() and (m := _VERSION.match(p.name))
    )
    for _, vpath in reversed(versions):
        found = latest_snapshot(vpath)
        if found is not None:
            return found
    if not versions:
        # An output folder holding exactly one dataset opens that dataset.
        datasets = sorted(
            p
            for p in path.iterdir()
            if p.is_dir() and any(_VERSION.match(v.name) for v in p.iterdir() if v.is_dir())
        )
        if len(datasets) == 1:
            return resolve_snapshot(datasets[0])
        if datasets:
            names = ", ".join(p.name for p in datasets)
            raise DatasetPathError(f"{path}: holds several datasets ({names}); name one of them")
    raise DatasetPathError(f"{path}: not a chunkyard dataset (expected NAME/vX/NNNN/manifest.json below it)")


def check_manifest(manifest: Any, where: Location) -> None:
    """Refuse a manifest that is not one chunkyard can read, with a message naming the field."""
    if not isinstance(manifest, dict):
        raise DatasetError(f"{where}: not a chunkyard manifest (expected a JSON object)")
    schema = manifest.get("schema_version")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise DatasetError(f"{where}: schema_version: expected a whole number, got {schema!r}")
    if schema > LAYOUT_VERSION:
        raise DatasetError(f"{where}: written by a newer chunkyard (schema {schema}); upgrade chunkyard")
    expected = {"name": str, "version": int, "snapshot": int}
    for key, kind in expected.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DatasetError(f"{where}: {key}: expected {kind.__name__}, got {value!r}")


def _kind(kind: pa.DataType) -> str:
    """A type up to the width of its strings, integers and lists (what a reader may be given)."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "string"
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"list<{_kind(kind.value_type)}>"
    if pa.types.is_struct(kind):
        return "struct<" + ", ".join(f"{f.name}: {_kind(f.type)}" for f in kind) + ">"
    return str(kind)


def check_columns(
    table: pa.Table, schema: pa.Schema, path: Location, *, whole: bool = True, first_row: int = 0
) -> pa.Table:
    """``table`` (columns read from ``path``) with each column of ``schema`` checked and cast to its
    type: the same kind of type (strings, integers, lists of them), no nulls where the schema allows
    none, integers that fit. Columns outside the schema are passed on as they are. The error names the
    file, the column and the first bad row (the row in the file when ``whole``; otherwise the
    ``doc_id`` of the row, as a filtered read has no file positions)."""
    for name in table.column_names:
        if name not in schema.names:
            continue
        field = schema.field(name)
        column = table.column(name)
        if _kind(column.type) != _kind(field.type):
            raise DatasetError(f"{path}: column {name}: expected {_kind(field.type)}, found {column.type}")
        if not field.nullable and column.null_count:
            row = int(pc.index(pc.is_null(column), True).as_py())
            raise DatasetError(
                f"{path}: column {name}, {_row(table, row, whole, first_row)}: null, where a value "
                "is required"
            )
        if _kind(field.type) == "list<string>" and len(column) and pc.list_flatten(column).null_count:
            lists = column.combine_chunks()
            parents = pc.list_parent_indices(lists)
            row = int(parents[pc.index(pc.is_null(pc.list_flatten(lists)), True).as_py()].as_py())
            raise DatasetError(
                f"{path}: column {name}, {_row(table, row, whole, first_row)}: a null in the list"
            )
        if column.type != field.type:
            try:
                table = table.set_column(table.schema.get_field_index(name), name, column.cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise DatasetError(f"{path}: column {name}: {str(exc).splitlines()[0]}") from None
    return table


def _row(table: pa.Table, row: int, whole: bool, first_row: int) -> str:
    if whole:
        return f"row {first_row + row}"
    if "doc_id" in table.column_names:
        return f"a row of document {table.column('doc_id')[row].as_py()!r}"
    return "a row"


_DRIVE_PATH = re.compile(r"^[A-Za-z]:[/\\]")


def safe_doc_id(doc_id: str) -> str | None:
    r"""Why ``doc_id`` is not a safe document id, or None. A document id is the file's POSIX path
    relative to the source folder: not empty, no NUL, not absolute (``/``; nor ``\``, ``C:/`` or
    ``C:\`` for a consumer on Windows), no empty, ``.`` or ``..`` segment, and no ``..`` between
    backslashes either. Exporters and stores use it as a path or key. Any other character of a POSIX
    file name (spaces, newlines, a backslash elsewhere) is allowed: discovery makes ids of real files."""
    if not doc_id:
        return "is empty"
    if "\x00" in doc_id:
        return "holds a NUL character"
    if doc_id.startswith(("/", "\\")) or _DRIVE_PATH.match(doc_id):
        return "is an absolute path; a document id is relative to the source folder"
    if any(part in ("", ".", "..") for part in doc_id.split("/")) or ".." in re.split(r"[/\\]", doc_id):
        return "has an empty, '.' or '..' segment; a document id never leaves the source folder"
    return None


class Stopped(Exception):
    """A background check asked to stop (the reviewer closed the dataset): not a finding."""


def file_digest(path: Location, should_stop: Callable[[], bool] | None = None) -> tuple[int, str]:
    """Size and SHA-256 (hex) of a file, read in 1 MiB blocks (hashlib releases the GIL on them)."""
    digest = hashlib.sha256()
    size = 0
    opener = (
        path.filesystem.open_input_stream(path.path) if isinstance(path, StoragePath) else open(path, "rb")
    )
    with opener as handle:
        while block := handle.read(1 << 20):
            if should_stop is not None and should_stop():
                raise Stopped
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


@dataclass
class Snapshot:
    """A published snapshot, read lazily: the manifest at once, Parquet columns on demand."""

    path: Location
    manifest: dict[str, Any]
    # Not fields: where ``whole_columns`` found the columns, and why not in the review columns.
    columns_source = ""
    review_columns_note = ""

    @classmethod
    def open(cls, path: str | Location, *, validate: bool = False) -> Snapshot:
        """The newest snapshot at or below ``path``; the manifest is checked at once, every column as
        it is read (``check_columns``). With ``validate``, the whole snapshot first (``verify``: the
        checksums recorded at publish, then ``validate``): what every reader that passes rows on
        (export, diff, reprocess, eval) asks for."""
        folder = resolve_snapshot(path)
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{folder / MANIFEST}: unreadable manifest: {exc}") from None
        check_manifest(manifest, folder / MANIFEST)
        snapshot = cls(folder, manifest)
        snapshot.check_schemas()
        if validate:
            snapshot.verify()
        return snapshot

    def check_schemas(self) -> None:
        """Refuse data files whose columns have the wrong kind of type, from the Parquet footers alone
        (milliseconds): a reader that never reads a column (the reviewer and ``text``) still refuses
        a file where it holds integers. Columns a file lacks are for the reader that needs them.
        Of a parted snapshot the first part of each kind is checked (one writer wrote them all; the
        checksums in the manifest cover the others)."""
        for filename, schema in ((DOCUMENTS, DOCUMENTS_SCHEMA), (CHUNKS, CHUNKS_SCHEMA)):
            if self.parted and not self.parts:
                continue
            # Only the first file is named (a path per part costs ≈0.1 ms: 0.3 s at 3,000 parts).
            path = (
                self.resolve(self.parts[0][_KIND[filename]]["file"]) if self.parted else self.path / filename
            )
            try:
                found = parquet_file(path).schema_arrow
            except (OSError, pa.ArrowException) as exc:
                detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise DatasetError(f"{path}: cannot read: {detail}") from None
            for field in found:
                if field.name in schema.names and _kind(field.type) != _kind(schema.field(field.name).type):
                    raise DatasetError(
                        f"{path}: column {field.name}: expected {_kind(schema.field(field.name).type)}, "
                        f"found {field.type}"
                    )

    # -- where the rows are -------------------------------------------------------------------------

    @property
    def parted(self) -> bool:
        """Whether the rows are in part folders (``LAYOUT_VERSION`` 2) rather than two files."""
        return isinstance(self.manifest.get("parts"), list)

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The manifest's part entries, in row order (empty for a snapshot of two plain files)."""
        parts = self.manifest.get("parts")
        if parts is None:
            return []
        if not isinstance(parts, list) or not all(
            isinstance(p, dict) and isinstance(p.get("documents"), dict) and isinstance(p.get("chunks"), dict)
            for p in parts
        ):
            raise DatasetError(f"{self.path / MANIFEST}: parts: expected a list of part entries")
        return parts

    def files(self, filename: str) -> list[Location]:
        """The data files of ``documents.parquet`` or ``chunks.parquet``, in row order."""
        if not self.parted:
            return [self.path / filename]
        kind = _KIND[filename]
        return [self.resolve(part[kind]["file"]) for part in self.parts]

    def resolve(self, relative: str) -> Location:
        """A file named in the manifest, relative to this snapshot's folder (``../0003/...``: a part of
        an earlier snapshot of the version, which object-store snapshots refer to instead of copying)."""
        if not isinstance(relative, str) or relative.startswith("/") or "\\" in relative:
            raise DatasetError(f"{self.path / MANIFEST}: parts: {relative!r} is not a relative file name")
        found: Location = self.path
        pieces = relative.split("/")
        for index, piece in enumerate(pieces):
            if piece == "..":
                # Only a sibling snapshot's folder: ``../NNNN/`` at the start, nothing above the version.
                if index != 0 or len(pieces) < 3 or not _SNAPSHOT.match(pieces[1]):
                    raise DatasetError(
                        f"{self.path / MANIFEST}: parts: {relative!r} leaves the version folder"
                    )
                found = found.parent
            elif piece in ("", "."):
                raise DatasetError(f"{self.path / MANIFEST}: parts: {relative!r} is not a plain file name")
            else:
                found = found / piece
        return found

    def part_of(self, doc_id: str) -> int | None:
        """The part holding ``doc_id``'s rows (0 for a snapshot of two files), None when it has none."""
        return self._document_parts().get(doc_id)

    def document_sizes(self) -> dict[str, int]:
        """doc_id -> n_bytes of every document (what a writer carrying them over cuts parts by)."""
        table = self._read(DOCUMENTS, ["doc_id", "n_bytes"], None)
        return dict(zip(table.column("doc_id").to_pylist(), table.column("n_bytes").to_pylist(), strict=True))

    def _document_parts(self) -> dict[str, int]:
        """doc_id -> part, kept from the first whole read of the documents' ids (or read now)."""
        if getattr(self, "_parts_cache", None) is None:
            self._read(DOCUMENTS, ["doc_id"], None)
        return self._parts_cache

    def _remember_parts(self, table: pa.Table) -> None:
        """Note which part each document is in, from a whole read of the documents' doc_id."""
        ids = table.column("doc_id").to_pylist()
        if self.parted:
            counts = [int(part["documents"].get("rows", -1)) for part in self.parts]
            if sum(counts) != len(ids):
                raise DatasetError(
                    f"{self.path / MANIFEST}: parts: the documents' row counts add up to {sum(counts)}, "
                    f"the files hold {len(ids)} rows"
                )
            owners = np.repeat(np.arange(len(counts)), counts).tolist()
        else:
            owners = [0] * len(ids)
        self._parts_cache = dict(zip(ids, owners, strict=True))

    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def version(self) -> int:
        return int(self.manifest["version"])

    @property
    def number(self) -> int:
        return int(self.manifest["snapshot"])

    def documents(self, columns: list[str] | None = None, doc_ids: Iterable[str] | None = None) -> pa.Table:
        return self._read(DOCUMENTS, columns, doc_ids)

    def chunks(self, columns: list[str] | None = None, doc_ids: Iterable[str] | None = None) -> pa.Table:
        return self._read(CHUNKS, columns, doc_ids)

    def _read(self, filename: str, columns: list[str] | None, doc_ids: Iterable[str] | None) -> pa.Table:
        schema = DOCUMENTS_SCHEMA if filename == DOCUMENTS else CHUNKS_SCHEMA
        files = self.files(filename)
        where: Location = files[0] if len(files) == 1 else self.path / filename
        try:
            filters = None
            if doc_ids is not None:
                ids = sorted(set(doc_ids))
                filters = [("doc_id", "in", ids)] if ids else None
                if not ids:
                    table = schema.empty_table()
                    return table.select(columns) if columns else table
                if self.parted:  # only the parts holding them
                    index = self._document_parts()
                    wanted = sorted({index[i] for i in ids if i in index})
                    files = [files[number] for number in wanted]
                    if len(files) == 1:
                        where = files[0]
            if not files:
                table = schema.empty_table()
                return table.select(columns) if columns else table
            if len(files) == 1:
                table = read_parquet(files[0], columns=columns, filters=filters)
            elif filters is None and isinstance(files[0], Path):
                table = _read_parallel(files, columns)
            else:
                table = read_parquet(files, columns=columns, filters=filters)
        except (OSError, pa.ArrowException) as exc:
            # Arrow may go on with the whole schema, a field per line: its first line says what is wrong.
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatasetError(f"{where}: cannot read: {detail}") from None
        table = check_columns(table, schema, where, whole=doc_ids is None)
        if filename == DOCUMENTS and doc_ids is None and "doc_id" in table.column_names:
            self._remember_parts(table)
        return table

    def whole_columns(
        self, documents_columns: list[str], chunks_columns: list[str]
    ) -> tuple[pa.Table, pa.Table]:
        """Whole columns of both tables, in row order: what the reviewer opens a snapshot with.

        A local snapshot of many parts costs a file open, a footer and a few column chunks per part
        (≈0.7 ms of CPU each: 2 s for 3,000 files, where one file of the same rows reads in 0.2 s).
        So, in order:

        1. the snapshot's own review-columns files (``review_columns``), written at publish, when
           they hold these columns and are exactly the ones the manifest names for these parts;
        2. for a snapshot without them (written before them) or whose files are missing, damaged or
           stale: the user's cache (``columns_cache_dir``), whose entry is named by a hash of the
           snapshot's path, its manifest's bytes (every part's SHA-256) and the columns, so any
           other snapshot, or this one resealed, misses it; written in a background thread
           (``wait_for_cache_writes``), passed over when it cannot be read or written;
        3. the parts.

        ``columns_source`` then says which (``review-columns``, ``cache`` or ``parts``), and
        ``review_columns_note`` why the first was not used."""
        found = self.review_columns(documents_columns, chunks_columns)
        if found is not None:
            self.columns_source = REVIEW_COLUMNS_DIR
            documents, chunks = found
            if "doc_id" in documents.column_names:
                self._remember_parts(documents)
            return documents, chunks
        cache = self._columns_cache(documents_columns, chunks_columns)
        if cache is not None:
            found = _read_cached(cache)
            if (
                found is not None
                and found[0].column_names == documents_columns
                and (found[1].column_names == chunks_columns)
            ):
                documents = check_columns(found[0], DOCUMENTS_SCHEMA, self.path / DOCUMENTS)
                chunks = check_columns(found[1], CHUNKS_SCHEMA, self.path / CHUNKS)
                if "doc_id" in documents.column_names:
                    self._remember_parts(documents)
                self.columns_source = "cache"
                return documents, chunks
        documents = self.documents(documents_columns)
        chunks = self.chunks(chunks_columns)
        self.columns_source = "parts"
        if cache is not None:  # written beside the caller's work (pyarrow releases the GIL)
            writer = threading.Thread(target=_write_cached, args=(cache, documents, chunks), daemon=True)
            _CACHE_WRITES.append(writer)
            writer.start()
        return documents, chunks

    def review_columns(
        self, documents_columns: list[str] | None = None, chunks_columns: list[str] | None = None
    ) -> tuple[pa.Table, pa.Table] | None:
        """Columns of every row (``REVIEW_COLUMNS`` or a subset) from the snapshot's review-columns
        files, or None, with the reason in ``review_columns_note``, unless they are the files the
        manifest names, made from these very parts: the entry's ``parts`` is ``parts_digest`` of
        the manifest's parts (and so is each file's footer), the row counts are the parts', and each
        file has the size and SHA-256 the entry records (hashed at every read: ≈0.04 s for a million
        chunks). Columns are checked as every read's (``check_columns``). A snapshot without them,
        or with files missing, damaged, stale or lacking a column, is read from its parts instead:
        never a view other than the parts'. (A crafted snapshot may bring files that agree with
        their manifest but not with its parts, as it may bring crafted parts: ``validate`` compares
        them with the parts.)"""
        self.review_columns_note = ""
        try:
            return self._read_review_columns(documents_columns, chunks_columns)
        except _NotUsable as exc:
            self.review_columns_note = str(exc)
            return None

    def _read_review_columns(
        self, documents_columns: list[str] | None, chunks_columns: list[str] | None
    ) -> tuple[pa.Table, pa.Table]:
        entry = self.manifest.get(REVIEW_COLUMNS_KEY)
        where = self.path / MANIFEST
        if entry is None:
            raise _NotUsable(f"{where}: no {REVIEW_COLUMNS_KEY} (a snapshot written before them)")
        if not self.parted or not isinstance(entry, dict):
            raise _NotUsable(f"{where}: {REVIEW_COLUMNS_KEY}: not an entry of a parted snapshot")
        try:
            parts = self.parts
        except DatasetError as exc:
            raise _NotUsable(str(exc)) from None
        digest = parts_digest(parts)
        if entry.get("parts") != digest:
            raise _NotUsable(
                f"{where}: {REVIEW_COLUMNS_KEY}: made from other parts than the manifest's (stale)"
            )
        tables = []
        for filename, wanted in ((DOCUMENTS, documents_columns), (CHUNKS, chunks_columns)):
            kind = _KIND[filename]
            relative = f"{REVIEW_COLUMNS_DIR}/{filename}"
            item = entry.get(kind)
            if not isinstance(item, dict) or item.get("file") != relative:
                raise _NotUsable(f"{where}: {REVIEW_COLUMNS_KEY}: {kind}: not this snapshot's {relative}")
            listed = item.get("columns")
            columns = list(wanted) if wanted is not None else listed
            if not isinstance(listed, list) or not isinstance(columns, list):
                raise _NotUsable(f"{where}: {REVIEW_COLUMNS_KEY}: {kind}: no list of columns")
            missing = [name for name in columns if name not in listed]
            if missing:
                raise _NotUsable(f"{self.path / relative}: holds no column {missing[0]}")
            try:
                rows = sum(int(part[kind].get("rows", -1)) for part in parts)
            except (TypeError, ValueError):
                raise _NotUsable(f"{where}: parts: a row count that is not a number") from None
            if item.get("rows") != rows:
                raise _NotUsable(f"{where}: {REVIEW_COLUMNS_KEY}: {kind}: not the parts' {rows} rows")
            path = self.path / relative
            try:
                data = path.read_bytes()
            except (OSError, pa.ArrowException, DatasetError) as exc:
                raise _NotUsable(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
            if len(data) != item.get("bytes") or hashlib.sha256(data).hexdigest() != item.get("sha256"):
                raise _NotUsable(f"{path}: damaged: its content differs from what was published")
            try:
                file = pq.ParquetFile(pa.BufferReader(data))
                if (file.metadata.metadata or {}).get(REVIEW_PARTS_METADATA) != digest.encode():
                    raise _NotUsable(f"{path}: made from other parts than the manifest's (stale)")
                table = file.read(columns=columns)
            except (OSError, pa.ArrowException) as exc:
                detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise _NotUsable(f"{path}: cannot read: {detail}") from None
            if table.num_rows != rows or table.column_names != columns:
                raise _NotUsable(f"{path}: not the parts' {rows} rows of {columns}")
            try:
                tables.append(check_columns(table, REVIEW_SCHEMAS[filename], path))
            except DatasetError as exc:
                raise _NotUsable(str(exc)) from None
        return tables[0], tables[1]

    def _columns_cache(self, documents_columns: list[str], chunks_columns: list[str]) -> Path | None:
        if not self.parted or not isinstance(self.path, Path) or len(self.parts) < COLUMNS_CACHE_MIN_PARTS:
            return None
        folder = columns_cache_dir()
        if folder is None:
            return None
        try:
            manifest = (self.path / MANIFEST).read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256()
        for piece in (
            str(self.path.resolve()).encode("utf-8", "surrogatepass"),
            manifest,
            json.dumps([documents_columns, chunks_columns, SCHEMA_VERSION]).encode(),
        ):
            digest.update(hashlib.sha256(piece).digest())
        return folder / digest.hexdigest()[:40]

    def validate(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Check the whole snapshot, as every reader needs it to be (``DatasetError`` naming the file,
        column and first bad row otherwise): each column of the schema with its type and no nulls
        where none are allowed; ``doc_id`` unique among documents and a safe relative POSIX path
        (``safe_doc_id``); ``n_chars`` the length of ``text``; ``chunk_id`` unique; each chunk of a
        listed document, with ``0 <= start <= end <= len(text)`` and ``text == document[start:end]``.

        Reads the documents' ``text`` once and the chunks in record batches, so memory stays about
        the corpus size. Cost on a snapshot of 1M chunks: see ``docs/reliability.md``. ``should_stop``
        is asked between batches; when it says so, ``Stopped`` is raised.
        """
        documents = self.documents(["doc_id", "n_chars", "text"])
        doc_path = self._label(DOCUMENTS)
        doc_ids = documents.column("doc_id").to_pylist()
        texts: dict[str, str] = {}
        for row, (doc_id, n_chars, text) in enumerate(
            zip(
                doc_ids,
                documents.column("n_chars").to_pylist(),
                documents.column("text").to_pylist(),
                strict=True,
            )
        ):
            problem = safe_doc_id(doc_id)
            if problem:
                raise DatasetError(f"{doc_path}: column doc_id, row {row}: {doc_id!r} {problem}")
            if doc_id in texts:
                raise DatasetError(f"{doc_path}: column doc_id, row {row}: {doc_id!r} is listed twice")
            if n_chars != len(text):
                raise DatasetError(
                    f"{doc_path}: column n_chars, row {row} ({doc_id!r}): {n_chars} but its text "
                    f"has {len(text)} characters"
                )
            texts[doc_id] = text
        del documents
        chunk_path = self._label(CHUNKS)
        ids = self.chunks(["chunk_id"]).column("chunk_id").combine_chunks()
        if len(ids) and pc.count_distinct(ids).as_py() != len(ids):
            seen: set[str] = set()
            for row, value in enumerate(ids.to_pylist()):
                if value in seen:
                    raise DatasetError(f"{chunk_path}: column chunk_id, row {row}: {value!r} is not unique")
                seen.add(value)
        del ids
        columns = ["doc_id", "chunk_index", "start", "end", "text"]
        known = pa.array(list(texts), pa.string())
        documents_in_order = list(texts.values())
        lengths = np.fromiter(
            (len(text) for text in documents_in_order), dtype=np.int64, count=len(documents_in_order)
        )
        row = 0
        try:
            for chunk_path in self.files(CHUNKS):
                batches = parquet_file(chunk_path).iter_batches(batch_size=65536, columns=columns)
                for batch in batches:
                    if should_stop is not None and should_stop():
                        raise Stopped
                    table = check_columns(
                        pa.Table.from_batches([batch]), CHUNKS_SCHEMA, chunk_path, first_row=row
                    )
                    self._check_chunk_batch(table, known, documents_in_order, lengths, row)
                    row += table.num_rows
        except (OSError, pa.ArrowException) as exc:
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatasetError(f"{chunk_path}: cannot read: {detail}") from None
        self._check_review_columns(should_stop)

    def _check_review_columns(self, should_stop: Callable[[], bool] | None = None) -> None:
        """The review-columns files, where a reader would use them (``review_columns``), hold exactly
        the parts' columns: a snapshot whose files agree with its manifest but not with its parts
        (crafted) would show the reviewer other rows than it ships. Files that are not used
        (missing, stale, damaged: ``verify_files`` names damage) show nothing, so nothing is compared."""
        found = self.review_columns()
        if found is None:
            return
        for filename, table in zip((DOCUMENTS, CHUNKS), found, strict=True):
            if should_stop is not None and should_stop():
                raise Stopped
            parts = self._read(filename, table.column_names, None)
            for name in table.column_names:
                mine, theirs = table.column(name).combine_chunks(), parts.column(name).combine_chunks()
                if mine.equals(theirs):
                    continue
                mine_rows, their_rows = mine.to_pylist(), theirs.to_pylist()
                row = next(
                    (i for i, (a, b) in enumerate(zip(mine_rows, their_rows, strict=False)) if a != b),
                    min(len(mine_rows), len(their_rows)),
                )
                raise DatasetError(
                    f"{self.path / REVIEW_COLUMNS_DIR / filename}: column {name}, row {row}: not the "
                    f"value of {self._label(filename)} (the reviewer would show other rows than the "
                    "snapshot holds)"
                )

    def _check_chunk_batch(
        self, table: pa.Table, known: pa.Array, documents: list[str], lengths: np.ndarray, first_row: int
    ) -> None:
        """One batch of chunks against the documents: the document exists, the offsets are in it, the
        text is the document's there. Vectorised except for the text comparison itself."""
        path = self._label(CHUNKS)

        def where(row: int) -> str:
            return (
                f"row {first_row + row} (chunk {table.column('chunk_index')[row].as_py()} of "
                f"{table.column('doc_id')[row].as_py()!r})"
            )

        ordinal = pc.index_in(table.column("doc_id"), value_set=known)
        if ordinal.null_count:
            row = int(pc.index(pc.is_null(ordinal), True).as_py())
            raise DatasetError(
                f"{path}: column doc_id, row {first_row + row}: "
                f"{table.column('doc_id')[row].as_py()!r} is not a document of this snapshot"
            )
        doc = ordinal.to_numpy(zero_copy_only=False).astype(np.int64)
        start = table.column("start").to_numpy()
        end = table.column("end").to_numpy()
        outside = (start < 0) | (end < start) | (end > lengths[doc])
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise DatasetError(
                f"{path}: columns start/end, {where(row)}: [{start[row]}:{end[row]}] is outside its "
                f"document ({lengths[doc[row]]} characters)"
            )
        text = table.column("text")
        wrong_length = pc.utf8_length(text).to_numpy(zero_copy_only=False) != end - start
        if wrong_length.any():
            row = int(np.flatnonzero(wrong_length)[0])
            raise DatasetError(
                f"{path}: column text, {where(row)}: not the document's text at [{start[row]}:{end[row]}]"
            )
        # Same length: equal when the document has the text at ``start`` (no slice is copied).
        for row, (number, at, value) in enumerate(
            zip(doc.tolist(), start.tolist(), text.to_pylist(), strict=True)
        ):
            if not documents[number].startswith(value, at):
                raise DatasetError(
                    f"{path}: column text, {where(row)}: not the document's text at [{start[row]}:{end[row]}]"
                )

    def _label(self, filename: str) -> Location:
        """How errors name the rows of ``filename``: the file, or the part folder (rows counted over
        all its parts)."""
        files = self.files(filename)
        return files[0] if len(files) == 1 and not self.parted else self.path / filename

    def verify_files(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Check the data files against the sizes and SHA-256 the manifest recorded at publish
        (``files``; in a parted snapshot each part's entry, shared parts included): damage
        anywhere, also in columns no reader checks (a disk, a copy, a sync). A snapshot written
        before checksums were recorded passes."""
        if self.parted:
            checks = [
                (self.resolve(part[kind]["file"]), part[kind])
                for part in self.parts
                for kind in _KIND.values()
            ]
            entry = self.manifest.get(REVIEW_COLUMNS_KEY)
            if entry is not None:  # derived files, checked like the parts: they were published too
                for filename, kind in _KIND.items():
                    relative = f"{REVIEW_COLUMNS_DIR}/{filename}"
                    item = entry.get(kind) if isinstance(entry, dict) else None
                    if not isinstance(item, dict) or item.get("file") != relative:
                        raise DatasetError(
                            f"{self.path / MANIFEST}: {REVIEW_COLUMNS_KEY}: {kind}: expected the entry of {relative}"
                        )
                    checks.append((self.path / relative, item))
        else:
            recorded = self.manifest.get("files")
            if not isinstance(recorded, dict):
                return
            checks = []
            for name in (DOCUMENTS, CHUNKS):
                entry = recorded.get(name)
                if not isinstance(entry, dict):
                    raise DatasetError(f"{self.path / MANIFEST}: files: no checksum for {name}")
                checks.append((self.path / name, entry))
        for path, entry in checks:
            try:
                size, digest = file_digest(path, should_stop)
            except OSError as exc:
                raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from None
            if size != entry.get("bytes") or digest != entry.get("sha256"):
                raise DatasetError(
                    f"{path}: damaged: its content differs from what was published "
                    f"({size:,} bytes, sha256 {digest[:12]}…; the manifest records "
                    f"{entry.get('bytes')!r} bytes, sha256 {str(entry.get('sha256'))[:12]}…); "
                    "restore the snapshot from a backup or run again"
                )

    def verify(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Everything a reviewer must know before approving what ships: ``verify_files`` then
        ``validate``. Meant to run in the background once a dataset is open (the reviewer reads ids
        lazily and would otherwise never look at the ``text`` column); ``should_stop`` lets it end
        early (``Stopped``)."""
        self.verify_files(should_stop)
        self.validate(should_stop)

    def document_text(self, doc_id: str) -> str:
        table = self.documents(["doc_id", "text"], [doc_id])
        if table.num_rows == 0:
            raise DatasetError(f"{self.path}: no document {doc_id!r}")
        return table.column("text")[0].as_py()


# ---------------------------------------------------------------------------------------------
# Writing


class SnapshotSuperseded(ChunkyardError):
    """Another run published a snapshot while one that must follow its parent directly was made."""


def _unit_hash(doc_id: str) -> float:
    """A number in [0, 1) that depends on the document id alone (the same on every machine and run)."""
    digest = hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class PartCutter:
    """Where one part ends and the next begins, over the documents in row order.

    Content-defined: once a part holds half of ``target`` source bytes, it ends after a document
    whose id hashes below ``n_bytes / (target / 2)`` (so about every ``target / 2`` further bytes;
    a document of half the target or more always ends it), and at four times ``target`` in any case.
    Past the first half the chance depends on the document alone, never on a position, so two runs
    whose documents differ by an insertion, a removal or an edit end their parts after the same
    documents again at the first such document past the difference: the parts around a change are
    new, every other part is the same group of documents as before, which a refresh finds and
    shares. Measured on 3,000 documents (tests/flows/test_shared_parts.py): one insertion or removal
    changes 1.4 parts on average, 4 at most (docs/storage.md).
    """

    def __init__(self, target: int | None = None):
        self.target = target or PART_BYTES
        self.held = 0

    def ends_after(self, doc_id: str, n_bytes: int) -> bool:
        size = max(int(n_bytes), 1)
        self.held += size
        half = self.target / 2
        if self.held >= 4 * self.target or (self.held >= half and _unit_hash(doc_id) < size / half):
            self.held = 0
            return True
        return False


def part_key(doc_ids: Iterable[str]) -> str:
    """What identifies a part across snapshots: the ids of its documents, in order (a document id
    holds no NUL)."""
    return hashlib.sha256("\x00".join(doc_ids).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def parts_format(compression: str) -> str:
    """What a part's bytes and bounds depend on besides its rows: snapshots whose ``parts_format``
    differs share no parts."""
    described = [
        str(DOCUMENTS_SCHEMA),
        str(DOCUMENTS_SCHEMA.metadata),
        str(CHUNKS_SCHEMA),
        str(CHUNKS_SCHEMA.metadata),
        PART_BYTES,
        DOCUMENT_ROW_GROUP,
        CHUNK_ROW_GROUP,
        STATISTICS,
        compression,
    ]
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]


class PreviousRows:
    """The rows of chosen documents in an earlier snapshot, read part by part (or, from a snapshot
    of two files, by row group), for documents a run carries over without chunking them again."""

    def __init__(self, snapshot: Snapshot, columns: dict[str, list[str]] | None = None):
        """``columns``: only these (per file name), read for the whole snapshot at once (a few small
        columns: what a run's statistics need of the documents it carries over)."""
        self.snapshot = snapshot
        self.columns = columns
        self._files: dict[Location, _FileRows] = {}
        self._whole: dict[str, tuple[pa.Table, dict[str, list[int]]]] = {}

    def rows(self, doc_ids: list[str]) -> tuple[pa.Table, pa.Table]:
        """Both tables for ``doc_ids``, in the snapshot's row order (documents it lacks are left out)."""
        if self.columns is not None:
            return self._whole_rows(DOCUMENTS, doc_ids), self._whole_rows(CHUNKS, doc_ids)
        if not doc_ids:
            return DOCUMENTS_SCHEMA.empty_table(), CHUNKS_SCHEMA.empty_table()
        out = []
        for filename in (DOCUMENTS, CHUNKS):
            files = self.snapshot.files(filename)
            if self.snapshot.parted:
                by_part: dict[int, list[str]] = {}
                for doc_id in doc_ids:
                    part = self.snapshot.part_of(doc_id)
                    if part is not None:
                        by_part.setdefault(part, []).append(doc_id)
                pieces = [self._file(files[part]).take(ids) for part, ids in sorted(by_part.items())]
            else:
                pieces = [self._file(files[0]).take(doc_ids)]
            pieces = [piece for piece in pieces if piece.num_rows] or pieces[:1]
            out.append(pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0])
        return out[0], out[1]

    def _whole_rows(self, filename: str, doc_ids: list[str]) -> pa.Table:
        assert self.columns is not None
        found = self._whole.get(filename)
        if found is None:
            table = self.snapshot._read(filename, self.columns[filename], None)
            rows: dict[str, list[int]] = {}
            for row, doc_id in enumerate(table.column("doc_id").to_pylist()):
                rows.setdefault(doc_id, []).append(row)
            found = self._whole[filename] = (table, rows)
        table, rows = found
        wanted = sorted(row for doc_id in doc_ids for row in rows.get(doc_id, ()))
        return table.take(pa.array(wanted, type=pa.int64()))

    def _file(self, path: Location) -> _FileRows:
        found = self._files.get(path)
        if found is None:
            if len(self._files) > 64 and self.snapshot.parted:
                self._files.clear()  # parts are read in order: the old ones are done with
            found = self._files[path] = _FileRows(path, self.columns)
        return found


class _FileRows:
    """The rows of each doc_id in one Parquet file, read by row group (the last one kept)."""

    def __init__(self, path: Location, columns: list[str] | None):
        self.columns = columns
        try:
            self.file = parquet_file(path)
            ids = self.file.read(columns=["doc_id"]).column("doc_id").to_pylist()
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{path}: cannot read: {exc}") from None
        self.rows: dict[str, list[int]] = {}
        for row, doc_id in enumerate(ids):
            self.rows.setdefault(doc_id, []).append(row)
        metadata = self.file.metadata
        self.group_starts = list(
            np.cumsum([0] + [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)])
        )
        self._cached: tuple[int, pa.Table] | None = None

    def take(self, doc_ids: list[str]) -> pa.Table:
        wanted = sorted(row for doc_id in doc_ids for row in self.rows.get(doc_id, ()))
        pieces: list[pa.Table] = []
        by_group: dict[int, list[int]] = {}
        for row in wanted:
            group = bisect.bisect_right(self.group_starts, row) - 1
            by_group.setdefault(group, []).append(row - self.group_starts[group])
        for group, local in by_group.items():
            pieces.append(self._group(group).take(pa.array(local, type=pa.int64())))
        if not pieces:
            schema = self.file.schema_arrow
            empty = schema.empty_table()
            return empty.select(self.columns) if self.columns else empty
        return pa.concat_tables(pieces)

    def _group(self, group: int) -> pa.Table:
        if self._cached is None or self._cached[0] != group:
            self._cached = (group, self.file.read_row_group(group, columns=self.columns))
        return self._cached[1]


@dataclass
class _Pending:
    """A document waiting in the part being gathered: its rows, or None when they are the previous
    snapshot's."""

    doc_id: str
    documents: pa.Table | None
    chunks: pa.Table | None


def review_table(table: pa.Table, filename: str) -> pa.Table:
    """The reviewer's columns (``REVIEW_COLUMNS``) of rows of ``filename``, with their schema's types."""
    return table.select(REVIEW_COLUMNS[filename]).cast(REVIEW_SCHEMAS[filename])


class _ReviewColumnsWriter:
    """Writes the review-columns files of a snapshot while its parts are cut: each part's rows of
    ``REVIEW_COLUMNS`` are added in row order (``add``) and written in row groups of
    ``REVIEW_ROW_GROUP`` rows (so at most one group is held); ``finish`` stamps each file's footer
    with the parts it was made from (``parts_digest``) and returns the manifest's entry."""

    def __init__(self, sink: Callable[[str], Any], written: Callable[[str, Any], tuple[int, str]]):
        self._sink, self._written = sink, written
        self._writers: dict[str, tuple[pq.ParquetWriter, Any]] = {}
        self._held: dict[str, list[pa.Table]] = {DOCUMENTS: [], CHUNKS: []}
        self._held_rows = {DOCUMENTS: 0, CHUNKS: 0}
        self.rows = {DOCUMENTS: 0, CHUNKS: 0}

    def add(self, documents: pa.Table, chunks: pa.Table) -> None:
        for filename, table in ((DOCUMENTS, documents), (CHUNKS, chunks)):
            table = review_table(table, filename)
            self._held[filename].append(table)
            self._held_rows[filename] += table.num_rows
            self.rows[filename] += table.num_rows
            if self._held_rows[filename] >= REVIEW_ROW_GROUP:
                self._write(filename, last=False)

    def _write(self, filename: str, *, last: bool) -> None:
        held = pa.concat_tables(self._held[filename]) if self._held[filename] else None
        self._held[filename], self._held_rows[filename] = [], 0
        if filename not in self._writers:
            sink = self._sink(f"{REVIEW_COLUMNS_DIR}/{filename}")
            self._writers[filename] = (
                pq.ParquetWriter(sink, REVIEW_SCHEMAS[filename], compression="zstd"),
                sink,
            )
        writer = self._writers[filename][0]
        while held is not None and held.num_rows >= REVIEW_ROW_GROUP:
            writer.write_table(
                held.slice(0, REVIEW_ROW_GROUP).combine_chunks(), row_group_size=REVIEW_ROW_GROUP
            )
            held = held.slice(REVIEW_ROW_GROUP)
        if held is not None and held.num_rows:
            if last:
                writer.write_table(held.combine_chunks(), row_group_size=REVIEW_ROW_GROUP)
            else:  # the rest waits for the next group (a copy: the parts' buffers are let go)
                self._held[filename], self._held_rows[filename] = [held.combine_chunks()], held.num_rows

    def finish(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        digest = parts_digest(parts)
        entry: dict[str, Any] = {"parts": digest}
        for filename, kind in _KIND.items():
            self._write(filename, last=True)
            writer, sink = self._writers.pop(filename)
            writer.add_key_value_metadata({REVIEW_PARTS_METADATA.decode(): digest})
            writer.close()
            relative = f"{REVIEW_COLUMNS_DIR}/{filename}"
            size, sha256 = self._written(relative, sink)
            entry[kind] = {
                "file": relative,
                "columns": REVIEW_COLUMNS[filename],
                "rows": self.rows[filename],
                "bytes": size,
                "sha256": sha256,
            }
        return entry

    def abort(self) -> None:
        for writer, _ in self._writers.values():
            with contextlib.suppress(OSError, pa.ArrowException):
                writer.close()
        self._writers.clear()


class _PartsWriter:
    """What the local and the object-store writer share: documents arrive in row order (``write``
    for rows made now, ``write_previous`` for rows the previous snapshot holds), ``PartCutter``
    cuts them into parts, and each part is either the previous snapshot's very same part (same
    documents in the same order, all carried over: ``_share``, no byte written) or written anew.

    The rows of a part written anew are the same whichever way they came, so a refresh's snapshot
    holds what a full run on the same files would: the same rows in the same order, cut into the
    same parts.
    """

    compression: str
    previous: Snapshot | None

    def _start_parts(self, previous: Snapshot | None) -> None:
        self.previous = previous
        self._cutter = PartCutter()
        self._pending: list[_Pending] = []
        self._entries: list[dict[str, Any]] = []
        self._carry = PreviousRows(previous) if previous is not None else None
        self._shareable: dict[str, dict[str, Any]] = {}
        self._format = parts_format(self.compression)
        if previous is not None and previous.parted and previous.manifest.get("parts_format") == self._format:
            self._shareable = {
                part["key"]: part for part in previous.parts if isinstance(part.get("key"), str)
            }
        self.bytes_written = 0
        self.parts_written = 0
        self.parts_adopted = 0  # of parts_written: files a worker wrote, renamed in (``write_batch``)
        self._sizes: dict[str, int] | None = None
        self._review = _ReviewColumnsWriter(self._columns_sink, self._columns_written)
        # The previous snapshot's review columns (for the parts it shares), read when first needed.
        self._previous_columns: tuple[pa.Table, pa.Table, dict[str, tuple[int, int, int, int]]] | None = None

    @property
    def part_target(self) -> int:
        """The source bytes per part this writer's cutter aims at (``PartCutter``)."""
        return self._cutter.target

    def write(self, documents: pa.Table, chunks: pa.Table) -> None:
        """Rows made by this run, documents in row order (a document's chunks follow its row)."""
        for pending, n_bytes in self._fresh(documents, chunks):
            self._add(pending, n_bytes)

    def write_batch(
        self,
        order: list[tuple[str, bool]],
        documents: pa.Table,
        chunks: pa.Table,
        parts: Iterable[WorkerPart] = (),
    ) -> None:
        """A batch's documents in row order: ``order`` lists (doc_id, carried over), the rows of the
        others are in ``documents``/``chunks`` or in ``parts``, part files a worker wrote
        (``write_worker_parts``). A worker's part becomes this snapshot's part as it is (renamed, not
        read) when it is exactly the part this writer would cut here: no document pending before it,
        its documents next in ``order``, and the cutter ending a part after its last document and
        nowhere before. Otherwise its rows are read back and cut like any others, so the snapshot
        is the same either way."""
        fresh = {pending.doc_id: (pending, n_bytes) for pending, n_bytes in self._fresh(documents, chunks)}
        by_first = {part.doc_ids[0]: part for part in parts}
        sizes = self._previous_sizes() if any(carried for _, carried in order) else {}
        position = 0
        while position < len(order):
            doc_id, carried = order[position]
            part = None if carried else by_first.pop(doc_id, None)
            if part is not None:
                if self._fits(part, order, position):
                    self._adopt_part(part)
                    position += len(part.doc_ids)
                    continue
                for pending, n_bytes in self._fresh(*part.read()):
                    fresh[pending.doc_id] = (pending, n_bytes)
            position += 1
            if carried:
                found = sizes.get(doc_id)
                if found is None:
                    raise DatasetError(
                        f"{self.previous.path if self.previous else '?'}: no document {doc_id!r} to carry over"
                    )
                self._add(_Pending(doc_id, None, None), found)
            else:
                found = fresh.pop(doc_id, None)
                if found is None:
                    raise DatasetError(f"no rows for {doc_id!r}, which the batch's order lists")
                self._add(*found)
        if fresh or by_first:
            extra = next(iter(fresh or by_first))
            raise DatasetError(f"rows of {extra!r}, which the batch's order does not list")

    def _fits(self, part: WorkerPart, order: list[tuple[str, bool]], position: int) -> bool:
        """Whether ``part`` is the part this writer would cut from ``order`` at ``position``."""
        count = len(part.doc_ids)
        if self._pending or self._cutter.held or part.target != self._cutter.target:
            return False
        if order[position : position + count] != [(doc_id, False) for doc_id in part.doc_ids]:
            return False
        trial = PartCutter(self._cutter.target)
        ends = [trial.ends_after(d, n) for d, n in zip(part.doc_ids, part.n_bytes, strict=True)]
        return ends[-1] and not any(ends[:-1]) and part.key == part_key(part.doc_ids)

    def _adopt_part(self, part: WorkerPart) -> None:
        for doc_id, n_bytes in zip(part.doc_ids, part.n_bytes, strict=True):
            self._cutter.ends_after(doc_id, n_bytes)  # ends the part at the last one: held is 0 again
        number = len(self._entries) + 1
        entry: dict[str, Any] = {"key": part.key}
        for filename in (DOCUMENTS, CHUNKS):
            kind = _KIND[filename]
            written = part.files[kind]
            relative = f"{filename}/{PART_FILE.format(number)}"
            self._adopt(relative, Path(written["path"]))
            self.bytes_written += written["bytes"]
            entry[kind] = {
                "file": relative,
                "rows": written["rows"],
                "bytes": written["bytes"],
                "sha256": written["sha256"],
            }
        self.parts_written += 1
        self.parts_adopted += 1
        self._entries.append(entry)
        self._review.add(*(self._own_columns(entry[_KIND[filename]]["file"], filename) for filename in _KIND))

    def _fresh(self, documents: pa.Table, chunks: pa.Table) -> list[tuple[_Pending, int]]:
        try:
            if not documents.num_rows:
                if chunks.num_rows:
                    raise DatasetError("chunk rows without their document rows")
                return []
            documents = conform(documents, DOCUMENTS_SCHEMA)
            chunks = conform(chunks, CHUNKS_SCHEMA)
        except (OSError, pa.ArrowException) as exc:
            if isinstance(exc, pa.ArrowInvalid | pa.ArrowTypeError):
                raise  # rows that do not fit the schema: a bug to show, not a disk to blame
            raise write_failure(exc, self.staging) from None
        spans: dict[str, list[int]] = {}
        for row, doc_id in enumerate(chunks.column("doc_id").to_pylist()):
            span = spans.get(doc_id)
            if span is None:
                spans[doc_id] = [row, row + 1]
            elif span[1] == row:
                span[1] = row + 1
            else:
                raise DatasetError(f"the chunks of {doc_id!r} are not one run of rows")
        out = []
        ids = documents.column("doc_id").to_pylist()
        sizes = documents.column("n_bytes").to_pylist()
        for row, (doc_id, n_bytes) in enumerate(zip(ids, sizes, strict=True)):
            start, end = spans.pop(doc_id, (0, 0))
            out.append((_Pending(doc_id, documents.slice(row, 1), chunks.slice(start, end - start)), n_bytes))
        if spans:
            raise DatasetError(f"chunk rows of {next(iter(spans))!r}, which has no document row")
        return out

    def load_part(
        self, documents_part: str | Path | None, chunks_part: str | Path | None
    ) -> tuple[pa.Table, pa.Table]:
        """The rows of a batch a worker wrote with ``write_part`` into ``part_folder`` (the files are
        removed: their rows go into this snapshot's parts)."""
        if self.part_folder is None:
            raise DatasetError(f"{self.staging}: this writer streams its rows; it takes no parts")
        tables = []
        for part, schema in ((documents_part, DOCUMENTS_SCHEMA), (chunks_part, CHUNKS_SCHEMA)):
            if part is None:
                tables.append(schema.empty_table())
                continue
            path = self._own_part(Path(part))
            tables.append(pq.read_table(path))
            path.unlink()
        return tables[0], tables[1]

    def add_part(self, documents_part: str | Path | None, chunks_part: str | Path | None) -> None:
        """Append a batch written by ``write_part`` into ``part_folder`` (None: that table had no rows)."""
        self.write(*self.load_part(documents_part, chunks_part))

    def _own_part(self, part: Path) -> Path:
        if self.part_folder is None or part.parent != self.part_folder or not part.is_file():
            raise DatasetError(f"{part}: not a part file of {self.part_folder}")
        return part

    def write_previous(self, doc_ids: Iterable[str]) -> None:
        """Documents whose rows are the previous snapshot's, in row order."""
        if self.previous is None:
            raise DatasetError(f"{self.staging}: no previous snapshot to carry documents over from")
        sizes = self._previous_sizes()
        for doc_id in doc_ids:
            found = sizes.get(doc_id)
            if found is None:
                raise DatasetError(f"{self.previous.path}: no document {doc_id!r} to carry over")
            self._add(_Pending(doc_id, None, None), found)

    def _previous_sizes(self) -> dict[str, int]:
        if self._sizes is None:
            self._sizes = self.previous.document_sizes() if self.previous is not None else {}
        return self._sizes

    def _add(self, pending: _Pending, n_bytes: int) -> None:
        self._pending.append(pending)
        if self._cutter.ends_after(pending.doc_id, n_bytes):
            self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        ids = [p.doc_id for p in pending]
        key = part_key(ids)
        number = len(self._entries) + 1
        shared = self._shareable.get(key)
        if shared is not None and all(p.documents is None for p in pending):
            entry = {"key": key}
            for kind in _KIND.values():
                entry[kind] = {**shared[kind], "file": self._share(kind, number, shared[kind]["file"])}
            self._entries.append(entry)
            self._review.add(*self._shared_columns(shared))
            return
        documents, chunks = self._gather(pending)
        self._entries.append(self._store_part(number, key, documents, chunks))
        self._review.add(documents, chunks)

    def _shared_columns(self, shared: dict[str, Any]) -> tuple[pa.Table, pa.Table]:
        """The review columns of a part shared with the previous snapshot: sliced from the previous
        snapshot's review-columns files when they are usable (``Snapshot.review_columns``: checked
        against its manifest, hashed), read from the part's files otherwise."""
        assert self.previous is not None
        if self._previous_columns is None:
            found = self.previous.review_columns()
            offsets: dict[str, tuple[int, int, int, int]] = {}
            if found is not None:
                at_documents = at_chunks = 0
                for part in self.previous.parts:
                    rows_documents, rows_chunks = int(part["documents"]["rows"]), int(part["chunks"]["rows"])
                    if isinstance(part.get("key"), str):
                        offsets[part["key"]] = (at_documents, rows_documents, at_chunks, rows_chunks)
                    at_documents += rows_documents
                    at_chunks += rows_chunks
            empty = (DOCUMENTS_SCHEMA.empty_table(), CHUNKS_SCHEMA.empty_table())
            self._previous_columns = (*(found or empty), offsets)
        documents, chunks, offsets = self._previous_columns
        where = offsets.get(shared["key"])
        if where is not None:
            return documents.slice(where[0], where[1]), chunks.slice(where[2], where[3])
        tables = []
        for filename, kind in _KIND.items():
            path = self.previous.resolve(shared[kind]["file"])
            try:
                tables.append(read_parquet(path, columns=REVIEW_COLUMNS[filename]))
            except (OSError, pa.ArrowException) as exc:
                detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise DatasetError(f"{path}: cannot read: {detail}") from None
        return tables[0], tables[1]

    def _own_columns(self, relative: str, filename: str) -> pa.Table:
        """The review columns of a part file this writer placed (a worker's, renamed in)."""
        raise DatasetError(f"{self.staging}: this writer streams its rows; it takes no parts")

    def _gather(self, pending: list[_Pending]) -> tuple[pa.Table, pa.Table]:
        carried = [p.doc_id for p in pending if p.documents is None]
        previous: dict[str, tuple[pa.Table, pa.Table]] = {}
        if carried:
            assert self._carry is not None
            documents, chunks = self._carry.rows(carried)
            documents, chunks = conform(documents, DOCUMENTS_SCHEMA), conform(chunks, CHUNKS_SCHEMA)
            doc_rows = {d: i for i, d in enumerate(documents.column("doc_id").to_pylist())}
            chunk_rows: dict[str, list[int]] = {}
            for row, doc_id in enumerate(chunks.column("doc_id").to_pylist()):
                chunk_rows.setdefault(doc_id, []).append(row)
            for doc_id in carried:
                previous[doc_id] = (
                    documents.slice(doc_rows[doc_id], 1),
                    chunks.take(pa.array(chunk_rows.get(doc_id, []), type=pa.int64())),
                )
        doc_pieces, chunk_pieces = [], []
        for p in pending:
            documents, chunks = (p.documents, p.chunks) if p.documents is not None else previous[p.doc_id]
            doc_pieces.append(documents)
            chunk_pieces.append(chunks)
        return pa.concat_tables(doc_pieces), pa.concat_tables(chunk_pieces)

    def _store_part(self, number: int, key: str, documents: pa.Table, chunks: pa.Table) -> dict[str, Any]:
        entry: dict[str, Any] = {"key": key}
        self.parts_written += 1
        for filename, table in ((DOCUMENTS, documents), (CHUNKS, chunks)):
            data = part_bytes(filename, table, self.compression)
            relative = f"{filename}/{PART_FILE.format(number)}"
            self._put(relative, data)
            self.bytes_written += len(data)
            entry[_KIND[filename]] = {
                "file": relative,
                "rows": table.num_rows,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        return entry

    def _finish_parts(self, manifest: dict[str, Any]) -> None:
        """The last part, then the parts' entries in the manifest (an empty snapshot gets one empty
        part, so every reader finds the columns)."""
        self._flush()
        if not self._entries:
            self._entries.append(
                self._store_part(1, part_key([]), DOCUMENTS_SCHEMA.empty_table(), CHUNKS_SCHEMA.empty_table())
            )
        review = self._review.finish(self._entries)
        review_bytes = sum(review[kind]["bytes"] for kind in _KIND.values())
        self.bytes_written += review_bytes
        total = sum(entry[kind]["bytes"] for entry in self._entries for kind in _KIND.values())
        manifest["schema_version"] = LAYOUT_VERSION
        manifest["parts_format"] = self._format
        manifest["storage"] = {
            "parts": len(self._entries),
            "parts_written": self.parts_written,
            "bytes": total + review_bytes,  # every file of the snapshot but the manifest
            "bytes_written": self.bytes_written,
        }
        manifest[REVIEW_COLUMNS_KEY] = review
        manifest["parts"] = self._entries
        manifest.pop("files", None)

    # Provided by each writer: store a new file; make a part of the previous snapshot one of this one.
    def _put(self, relative: str, data: bytes) -> None:
        raise NotImplementedError

    def _adopt(self, relative: str, written: Path) -> None:
        """Make a file a worker wrote into ``part_folder`` the snapshot's file ``relative``."""
        raise DatasetError(f"{self.staging}: this writer streams its rows; it takes no parts")

    def _share(self, kind: str, number: int, previous_file: str) -> str:
        raise NotImplementedError

    def _columns_sink(self, relative: str) -> Any:
        """Where the review-columns file ``relative`` is written (a ``pq.ParquetWriter`` sink)."""
        raise NotImplementedError

    def _columns_written(self, relative: str, sink: Any) -> tuple[int, str]:
        """The file is complete: make it the snapshot's ``relative``; its size and SHA-256."""
        raise NotImplementedError


class SnapshotWriter(_PartsWriter):
    """Writes one snapshot under a staging folder; ``publish`` renames it into place atomically.

    Parts written anew are files in the staging folder; a part the previous snapshot holds as it is
    (``previous``) is hard-linked from there (copied where the filesystem has no hard links), so
    every snapshot folder is plain Parquet on its own and removing an older snapshot removes only
    its names, never data a kept snapshot uses.

    With ``parts`` a worker process may write its batch into ``part_folder`` (``write_part``) and
    the flow registers it with ``add_part``: its rows join the parts like any others.
    """

    def __init__(
        self,
        version_path: Path,
        compression: str = "zstd",
        *,
        parts: bool = False,
        previous: Snapshot | None = None,
    ):
        self.version_path = version_path
        version_path.mkdir(parents=True, exist_ok=True)
        clean_stale_staging(version_path)
        self.staging = version_path / f".staging-{os.getpid()}-{HOST}-{uuid.uuid4().hex[:8]}"
        self.staging.mkdir()
        self.compression = compression
        self.part_folder: Path | None = None
        self.closed = False
        if previous is not None and isinstance(previous.path, StoragePath):
            previous = None
        self._start_parts(previous)
        self._new_files: list[Path] = []
        try:
            for filename in (DOCUMENTS, CHUNKS, REVIEW_COLUMNS_DIR):
                (self.staging / filename).mkdir()
            if parts:
                self.part_folder = self.staging / PARTS
                self.part_folder.mkdir()
        except (OSError, pa.ArrowException) as exc:
            self.abort()
            raise write_failure(exc, self.staging) from None

    def _put(self, relative: str, data: bytes) -> None:
        target = self.staging / relative
        try:
            target.write_bytes(data)
        except OSError as exc:
            raise write_failure(exc, target) from None
        self._new_files.append(target)

    def _adopt(self, relative: str, written: Path) -> None:
        target = self.staging / relative
        try:
            os.rename(self._own_part(written), target)
        except OSError as exc:
            raise write_failure(exc, target) from None
        self._new_files.append(target)

    def _columns_sink(self, relative: str) -> Any:
        return str(self.staging / relative)

    def _columns_written(self, relative: str, sink: Any) -> tuple[int, str]:
        target = self.staging / relative
        self._new_files.append(target)
        return file_digest(target)

    def _own_columns(self, relative: str, filename: str) -> pa.Table:
        return pq.read_table(self.staging / relative, columns=REVIEW_COLUMNS[filename])

    def _share(self, kind: str, number: int, previous_file: str) -> str:
        assert self.previous is not None
        filename = DOCUMENTS if kind == "documents" else CHUNKS
        relative = f"{filename}/{PART_FILE.format(number)}"
        source = self.previous.resolve(previous_file)
        target = self.staging / relative
        try:
            os.link(source, target)
        except FileNotFoundError:
            raise DatasetError(
                f"{source}: gone while this run used it (was the snapshot pruned?); nothing was published: run again"
            ) from None
        except OSError:  # no hard links here (EXDEV, EPERM, EMLINK, ...): a copy, in the kernel if it can
            try:
                shutil.copyfile(source, target)
            except OSError as exc:
                raise write_failure(exc, target) from None
            self._new_files.append(target)
            self.bytes_written += target.stat().st_size
        return relative

    def publish(self, manifest: dict[str, Any], *, strict_parent: bool = False) -> Path:
        """Write the last part, the manifest, and rename the staging folder to the next number.

        Numbering is done under the version's publish lock (``PUBLISH_LOCK``), so two runs publishing
        at once take consecutive numbers and each names the snapshot published just before it as
        ``parent_snapshot``. ``manifest["parent_snapshot"]`` comes in as the snapshot the writer was
        built from; when another run published in between, that one is kept as ``built_on`` (the
        counts and carried-over rows are relative to it), or with ``strict_parent`` (a snapshot made
        by editing its parent, which would undo the newer one) nothing is published and
        ``SnapshotSuperseded`` is raised. ``manifest`` is updated in place.
        """
        try:
            self._close(manifest)
            # The new files reach the disk before the manifest names them (one syncfs, not a
            # thousand fsyncs); the shared ones did when their snapshot was published.
            _sync_files(self.staging, self._new_files)
            for folder in (
                self.staging / DOCUMENTS,
                self.staging / CHUNKS,
                self.staging / REVIEW_COLUMNS_DIR,
            ):
                _fsync_dir(folder)
        except (OSError, pa.ArrowException) as exc:
            raise write_failure(exc, self.staging) from None
        base = manifest.get("parent_snapshot")
        with _publish_lock(self.version_path):
            # With the lock no other chunkyard takes a number meanwhile; the retries are for writers
            # that cannot lock (no flock) or do not (an older chunkyard).
            for attempt in range(100):
                existing = list_snapshots(self.version_path)
                previous = existing[-1] if existing else None
                if previous != base and strict_parent:
                    raise SnapshotSuperseded(
                        f"{self.version_path}: the newest snapshot is now {_numbered(previous)}, not "
                        f"{_numbered(base)} this one was made from (another run published meanwhile); "
                        "nothing was published: run again"
                    )
                number = (previous or 0) + 1
                manifest["snapshot"] = number
                manifest["parent_snapshot"] = previous
                if previous != base:
                    manifest["built_on"] = base
                else:
                    manifest.pop("built_on", None)
                try:
                    _write_json(self.staging / MANIFEST, manifest)
                    _fsync_file(self.staging / MANIFEST)
                except OSError as exc:
                    raise write_failure(exc, self.staging / MANIFEST) from None
                _fsync_dir(self.staging)
                target = self.version_path / f"{number:04d}"
                try:
                    os.rename(self.staging, target)
                except OSError:
                    if target.exists() and attempt < 99:
                        continue  # a writer without the lock published this number first
                    raise
                _fsync_dir(self.version_path)
                break
            else:
                raise DatasetError(f"{self.version_path}: could not find a free snapshot number")
        (target / MANIFEST).chmod(0o444)
        for new in self._new_files:  # shared parts are read-only already
            (target / new.relative_to(self.staging)).chmod(0o444)
        return target

    def abort(self) -> None:
        """Remove the staging folder (hard links only: the parts it shares stay where they are)."""
        self.closed = True
        self._review.abort()
        shutil.rmtree(self.staging, ignore_errors=True)
        if self.staging.exists():
            raise DatasetError(
                f"{self.staging}: could not remove the staging folder of this failed run; "
                "remove it by hand (the next run also removes it)"
            )

    def _close(self, manifest: dict[str, Any]) -> None:
        if self.closed:
            return
        self.closed = True  # a close that fails is not tried again (abort still removes the files)
        self._finish_parts(manifest)
        if self.part_folder is not None:
            shutil.rmtree(self.part_folder)

    def next_number(self) -> int:
        existing = list_snapshots(self.version_path)
        return (existing[-1] + 1) if existing else 1


class ObjectStoreSnapshotWriter(_PartsWriter):
    """Writes one snapshot on a filesystem without atomic rename (S3 and other object stores).

    The part files go straight into the snapshot's numbered folder; ``publish`` writes
    ``manifest.json`` last, and that single object commits the snapshot (readers ignore a folder
    without one). A part the previous snapshot holds as it is is not copied: the manifest names
    the previous snapshot's file (``../NNNN/chunks.parquet/part-....parquet``), so a refresh uploads
    only the parts that changed (read such a snapshot through its manifest: docs/storage.md). The
    number is one past every numbered folder, committed or not, so a run never writes into the
    leftovers of a killed one; leftovers older than ``stale_after`` seconds are removed at start.
    Two runs writing one dataset version at the same moment are not supported on object stores
    (there is no atomic create-if-absent to arbitrate): ``publish`` refuses when the number was
    committed meanwhile, but the data files of the two runs may have mixed. Schedule runs so they do
    not overlap (a Prefect deployment runs one at a time by default with ``chunkyard schedule``).
    """

    def __init__(
        self,
        version_path: StoragePath,
        compression: str = "zstd",
        stale_after: float = 3600.0,
        *,
        previous: Snapshot | None = None,
    ):
        self.version_path = version_path
        clean_uncommitted(version_path, stale_after)
        numbers = [int(child.name) for child in version_path.iterdir() if _SNAPSHOT.match(child.name)]
        self.number = max(numbers, default=0) + 1
        self.staging = version_path / f"{self.number:04d}"
        self.compression = compression
        self.closed = False
        if previous is not None and not (
            isinstance(previous.path, StoragePath) and previous.path.parent == version_path
        ):
            previous = None  # references reach sibling snapshots only
        self._start_parts(previous)
        self._put_probe()

    part_folder = None  # parts need a shared local folder: an object store's rows are written here

    def _put_probe(self) -> None:
        """Fail at start, not after the work, when the store cannot be written (a missing bucket, a
        denied write): the first part's upload would be the first write otherwise."""
        probe = self.staging / ".write-check"
        try:
            probe.write_bytes(b"")
            probe.filesystem.delete_file(probe.path)
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{self.staging}: cannot write: {exc}") from None

    def _put(self, relative: str, data: bytes) -> None:
        try:
            (self.staging / relative).write_bytes(data)
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{self.staging / relative}: cannot write: {exc}") from None

    def _columns_sink(self, relative: str) -> Any:
        return pa.BufferOutputStream()  # a few MB per million chunks, uploaded whole at the end

    def _columns_written(self, relative: str, sink: Any) -> tuple[int, str]:
        data = sink.getvalue().to_pybytes()
        self._put(relative, data)
        return len(data), hashlib.sha256(data).hexdigest()

    def _share(self, kind: str, number: int, previous_file: str) -> str:
        assert self.previous is not None
        if previous_file.startswith("../"):
            return previous_file  # already a sibling snapshot's file
        return f"../{self.previous.path.name}/{previous_file}"

    def _close(self, manifest: dict[str, Any]) -> None:
        if not self.closed:
            self.closed = True
            self._finish_parts(manifest)

    def publish(self, manifest: dict[str, Any]) -> StoragePath:
        """Write the last part, then the manifest: the snapshot is visible from that moment."""
        self._close(manifest)
        marker = self.staging / MANIFEST
        if marker.exists():
            raise DatasetError(f"{self.staging}: another run published this snapshot meanwhile; run again")
        marker.write_bytes(_json_bytes({**manifest, "snapshot": self.number}))
        return self.staging

    def abort(self) -> None:
        self.closed = True
        self._review.abort()
        if not (self.staging / MANIFEST).exists():
            self.staging.delete_tree()

    def next_number(self) -> int:
        return self.number


def write_failure(exc: BaseException, path: Location) -> Exception:
    """An error from writing under ``path`` as one that names it: Arrow's ``OSError`` for a full disk
    carries neither an errno nor a file name ("Error writing bytes to file. Detail: [errno 28] ...")."""
    number = exc.errno if isinstance(exc, OSError) and exc.errno else None
    if number is None:
        found = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
        number = int(found.group(1)) if found else None
    if number:
        return OSError(number, os.strerror(number), str(path))
    detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return DatasetError(f"{path}: cannot write: {detail} (nothing was published)")


def snapshot_writer(
    version_path: Location,
    compression: str = "zstd",
    *,
    parts: bool = False,
    previous: Snapshot | None = None,
) -> SnapshotWriter | ObjectStoreSnapshotWriter:
    """The writer for where the version lives: staging + rename locally, manifest-last elsewhere.

    ``parts``: a local writer takes part files from workers (``SnapshotWriter``); an object store's
    writer has no ``part_folder`` and is written by this process as before. ``previous``: the
    snapshot this one is built from, whose unchanged parts it shares.
    """
    if isinstance(version_path, StoragePath):
        return ObjectStoreSnapshotWriter(version_path, compression, previous=previous)
    return SnapshotWriter(version_path, compression, parts=parts, previous=previous)


def write_part(
    folder: str | Path, name: str, documents: pa.Table, chunks: pa.Table, compression: str = "zstd"
) -> tuple[str | None, str | None]:
    """Write one batch's rows as ``NAME.documents.parquet`` and ``NAME.chunks.parquet`` in ``folder``
    (a ``SnapshotWriter``'s ``part_folder``), as the writer itself would; None for a table without rows.

    Each file is written under a temporary name and renamed, so a retried batch replaces its part whole.
    """
    written: list[str | None] = []
    for kind, table, schema, row_group in (
        ("documents", documents, DOCUMENTS_SCHEMA, DOCUMENT_ROW_GROUP),
        ("chunks", chunks, CHUNKS_SCHEMA, CHUNK_ROW_GROUP),
    ):
        if not table.num_rows:
            written.append(None)
            continue
        target = Path(folder) / f"{name}.{kind}.parquet"
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with pq.ParquetWriter(temporary, schema, compression=compression) as part:
            part.write_table(conform(table, schema), row_group_size=row_group)
        os.replace(temporary, target)
        written.append(str(target))
    return written[0], written[1]


def part_bytes(filename: str, table: pa.Table, compression: str = "zstd") -> bytes:
    """One part file of ``documents.parquet`` or ``chunks.parquet``: the one place its bytes are made
    (by the flow and by worker processes alike). The rows are made contiguous first, so the bytes
    depend on the rows alone, not on how a table's columns happen to be chunked."""
    schema, row_group = (
        (DOCUMENTS_SCHEMA, DOCUMENT_ROW_GROUP) if filename == DOCUMENTS else (CHUNKS_SCHEMA, CHUNK_ROW_GROUP)
    )
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(
        sink, schema, compression=compression, write_statistics=STATISTICS[filename]
    ) as writer:
        writer.write_table(conform(table, schema).combine_chunks(), row_group_size=row_group)
    return sink.getvalue().to_pybytes()


@dataclass
class WorkerPart:
    """A part a worker process wrote into a ``SnapshotWriter``'s ``part_folder``
    (``write_worker_parts``): its documents with their sizes, its key, and per kind (``documents``,
    ``chunks``) the file with its rows, bytes and SHA-256, all the manifest needs."""

    doc_ids: list[str]
    n_bytes: list[int]
    key: str
    target: int
    files: dict[str, dict[str, Any]]

    def read(self) -> tuple[pa.Table, pa.Table]:
        """The part's rows (when the flow cuts elsewhere); the files are removed."""
        tables = []
        for kind in ("documents", "chunks"):
            path = Path(self.files[kind]["path"])
            tables.append(pq.read_table(path))
            path.unlink()
        return tables[0], tables[1]


def write_worker_parts(
    folder: str | Path,
    name: str,
    sequence: list[tuple[str, int, bool]],
    documents: pa.Table,
    chunks: pa.Table,
    target: int,
    compression: str = "zstd",
) -> tuple[list[WorkerPart], pa.Table, pa.Table]:
    """Cut a batch's documents into parts as the snapshot's writer would and write, into ``folder``,
    each part that the cutter ends and whose rows are all in ``documents``/``chunks``.

    ``sequence``: the batch's documents in row order, (doc_id, n_bytes, carried over), starting where
    a part starts (the flow makes batches end where parts end). A part holding a document carried
    over, and the last group of the batch if no part ends there, are not written: their rows are
    returned (the flow writes those, with the previous snapshot's rows). The flow takes a written
    part as it is only where its own cutter agrees (``SnapshotWriter.write_batch``).
    """
    cutter = PartCutter(target)
    rows: dict[str, tuple[int, int, int]] = {}  # doc_id -> (document row, first chunk row, chunk count)
    doc_ids = documents.column("doc_id").to_pylist() if documents.num_rows else []
    spans: dict[str, list[int]] = {}
    for row, doc_id in enumerate(chunks.column("doc_id").to_pylist() if chunks.num_rows else []):
        span = spans.setdefault(doc_id, [row, row])
        span[1] = row + 1
    for row, doc_id in enumerate(doc_ids):
        start, end = spans.get(doc_id, (0, 0))
        rows[doc_id] = (row, start, end - start)
    written: list[WorkerPart] = []
    done: set[str] = set()
    group: list[tuple[str, int, bool]] = []
    for item in sequence:
        group.append(item)
        if not cutter.ends_after(item[0], item[1]):
            continue
        current, group = group, []
        if any(carried for _, _, carried in current):
            continue
        ids = [doc_id for doc_id, _, _ in current]
        first, last = rows[ids[0]], rows[ids[-1]]
        if last[0] - first[0] != len(ids) - 1:
            continue  # not consecutive rows (never so for chunk_files' batches): leave it to the flow
        part_documents = documents.slice(first[0], len(ids))
        chunk_start = next((rows[d][1] for d in ids if rows[d][2]), 0)
        chunk_end = max((rows[d][1] + rows[d][2] for d in ids if rows[d][2]), default=chunk_start)
        part_chunks = chunks.slice(chunk_start, chunk_end - chunk_start)
        if part_chunks.num_rows != sum(rows[d][2] for d in ids):
            continue
        files: dict[str, dict[str, Any]] = {}
        for filename, table in ((DOCUMENTS, part_documents), (CHUNKS, part_chunks)):
            data = part_bytes(filename, table, compression)
            kind = _KIND[filename]
            target_path = Path(folder) / f"{name}-{len(written) + 1:04d}.{kind}.parquet"
            temporary = target_path.with_name(f".{target_path.name}.{os.getpid()}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, target_path)  # a retried batch replaces its file whole
            files[kind] = {
                "path": str(target_path),
                "rows": table.num_rows,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        written.append(WorkerPart(ids, [n for _, n, _ in current], part_key(ids), target, files))
        done.update(ids)
    if not done:
        return written, documents, chunks
    keep_docs = pa.array([doc_id not in done for doc_id in doc_ids], type=pa.bool_())
    chunk_ids = chunks.column("doc_id").to_pylist() if chunks.num_rows else []
    keep_chunks = pa.array([doc_id not in done for doc_id in chunk_ids], type=pa.bool_())
    return written, documents.filter(keep_docs), chunks.filter(keep_chunks)


def clean_uncommitted(version_path: StoragePath, stale_after: float = 3600.0) -> list[StoragePath]:
    """Remove numbered folders without a manifest (killed runs) whose newest file is older than ``stale_after`` s.

    Younger ones, and those whose filesystem keeps no times, may belong to a run still writing: they
    are left alone (readers ignore them).
    """
    removed = []
    now = time.time()
    for child in version_path.iterdir():
        if not _SNAPSHOT.match(child.name) or (child / MANIFEST).is_file():
            continue
        times = [info.mtime.timestamp() if info.mtime else now for info in child.files()]
        if not times or now - max(times) >= stale_after:
            child.delete_tree()
            removed.append(child)
    return removed


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast ``table`` to ``schema``, first adding the columns it lacks (rows carried over from a
    snapshot written before they existed): empty lists where the field is not nullable, else nulls."""
    for field in schema:
        if field.name not in table.column_names:
            if not field.nullable and pa.types.is_list(field.type):
                column = pa.array([[]] * table.num_rows, type=field.type)
            else:
                column = pa.nulls(table.num_rows, type=field.type)
            table = table.append_column(field.name, column)
    return table.select(schema.names).cast(schema)


# This machine in staging folder names (``.staging-PID-HOST-RANDOM``): a process id means something
# only on the machine that gave it, and an output folder may be shared (NFS) by runs on several.
HOST = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
# A staging folder of another machine is left alone until nothing in it has changed for this long.
FOREIGN_STAGING_SECONDS = 24 * 3600


def clean_stale_staging(version_path: Path, now: float | None = None) -> list[Path]:
    """Remove staging folders left by runs that are gone: on this machine, whose process no longer
    exists; from another machine (sharing the folder), untouched for ``FOREIGN_STAGING_SECONDS``.
    Folders named before the machine was part of the name (``.staging-PID-RANDOM``) count as this
    machine's."""
    removed = []
    for child in version_path.glob(".staging-*"):
        parts = child.name.split("-")
        try:
            pid = int(parts[1])
        except (IndexError, ValueError):
            continue
        ours = len(parts) < 4 or parts[2] == HOST
        if ours:
            stale = pid != os.getpid() and not _pid_alive(pid)
        else:
            stale = (now if now is not None else time.time()) - _last_change(child) > FOREIGN_STAGING_SECONDS
        if stale:
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
    return removed


def _last_change(folder: Path) -> float:
    """The newest modification time of a folder and the files in it (a writer appends to its files)."""
    times = [folder.stat().st_mtime]
    with contextlib.suppress(OSError):
        times.extend(entry.stat().st_mtime for entry in folder.iterdir())
    return max(times)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _json_bytes(data: dict[str, Any]) -> bytes:
    """The manifest as indented JSON; the part entries one compact line each (a refresh writes its
    manifest whole: at 2,000 parts, indenting them would double its size)."""
    parts = data.get("parts")
    head = {key: value for key, value in data.items() if key != "parts"}
    text = json.dumps(head, indent=2, ensure_ascii=False, sort_keys=False)
    if isinstance(parts, list) and head:
        lines = ",\n".join("    " + json.dumps(p, ensure_ascii=False, separators=(",", ":")) for p in parts)
        text = text[: -len("\n}")] + ',\n  "parts": [\n' + lines + "\n  ]\n}"
    elif parts is not None:
        text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)
    return (text + "\n").encode("utf-8")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_bytes(_json_bytes(data))


def _read_parallel(files: list[Path], columns: list[str] | None) -> pa.Table:
    """Many local Parquet files of one schema as one table, rows in list order: a few threads open
    them (a file open and footer cost more than the reading of a small part's columns)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(path: Path) -> pa.Table:
        return pq.ParquetFile(path).read(columns=columns, use_threads=False)

    with ThreadPoolExecutor(max_workers=8) as pool:
        tables = list(pool.map(one, files))
    return pa.concat_tables(tables, promote_options="default")


# Parted snapshots of fewer parts read fast enough from the parts; the cache keeps this many entries.
COLUMNS_CACHE_MIN_PARTS, COLUMNS_CACHE_ENTRIES = 64, 8


_CACHE_WRITES: list[threading.Thread] = []


def wait_for_cache_writes() -> None:
    """Wait until the cache entries ``Snapshot.whole_columns`` is writing are written."""
    while _CACHE_WRITES:
        _CACHE_WRITES.pop().join()


def columns_cache_dir() -> Path | None:
    """Where ``Snapshot.whole_columns`` keeps columns read from many parts: ``CHUNKYARD_CACHE_DIR``
    (empty: no cache), else ``$XDG_CACHE_HOME/chunkyard/columns`` (``~/.cache/...``)."""
    explicit = os.environ.get("CHUNKYARD_CACHE_DIR")
    if explicit is not None:
        return Path(explicit) if explicit else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "chunkyard" / "columns"


def _read_cached(entry: Path) -> tuple[pa.Table, pa.Table] | None:
    tables = []
    try:
        for kind in ("documents", "chunks"):
            tables.append(pq.read_table(entry.with_suffix(f".{kind}.parquet")))
        os.utime(entry.with_suffix(".chunks.parquet"))  # recently used: kept longest
    except (OSError, pa.ArrowException):
        return None
    return tables[0], tables[1]


def _write_cached(entry: Path, documents: pa.Table, chunks: pa.Table) -> None:
    """Write a cache entry (each file whole, by rename), then keep the newest ``COLUMNS_CACHE_ENTRIES``."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        for kind, table in (("documents", documents), ("chunks", chunks)):
            target = entry.with_suffix(f".{kind}.parquet")
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            pq.write_table(table, temporary, compression="zstd", row_group_size=1 << 20)
            os.replace(temporary, target)
        entries = sorted(entry.parent.glob("*.chunks.parquet"), key=lambda p: p.stat().st_mtime, reverse=True)
        for left in entry.parent.glob(".*.tmp"):  # of a process that ended while it wrote
            if time.time() - left.stat().st_mtime > 3600:
                left.unlink(missing_ok=True)
        for old in entries[COLUMNS_CACHE_ENTRIES:]:
            for kind in ("documents", "chunks"):
                old.with_name(old.name.replace(".chunks.parquet", f".{kind}.parquet")).unlink(missing_ok=True)
    except (OSError, pa.ArrowException):
        return


def _sync_files(folder: Path, files: list[Path]) -> None:
    """Make ``files`` (all under ``folder``) durable: one ``syncfs(2)`` of the filesystem where Linux
    has it, else an fsync per file."""
    if len(files) > 8 and _syncfs(folder):
        return
    for path in files:
        _fsync_file(path)


def _syncfs(folder: Path) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        return syncfs(fd) == 0
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _numbered(number: int | None) -> str:
    return "none" if number is None else f"{number:04d}"


# Beside the snapshots of a version: held (flock) while a snapshot number is chosen and taken.
PUBLISH_LOCK = ".publish.lock"


@contextlib.contextmanager
def _publish_lock(version_path: Path):
    """Hold the version's publish lock: an advisory ``flock`` on ``vX/.publish.lock``, released when
    the block ends or the process dies (a killed run never leaves it held). Where there is no flock
    (Windows) publishing relies on the rename retry alone."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = version_path / PUBLISH_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)  # another user's lock file: locking needs no write access
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def filter_doc_ids(table: pa.Table, doc_ids: Iterable[str]) -> pa.Table:
    ids = pa.array(sorted(set(doc_ids)), type=pa.string())
    return table.filter(pc.is_in(table.column("doc_id"), value_set=ids))
