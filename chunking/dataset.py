"""Datasets on disk: explicit Arrow schemas, staged writing and atomic publishing, opening.

Layout: ``OUTPUT/NAME/v{version}/{snapshot:04d}/`` holding ``manifest.json``, ``documents.parquet``
and ``chunks.parquet``. A snapshot is written under a hidden staging folder beside its final place
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

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from chunkyard.chunking.errors import ChunkyardError, DatasetError, DatasetPathError
from chunkyard.chunking.parquet_concat import concat_parquet
from chunkyard.chunking.storage import Location, StoragePath, location, parquet_writer, read_parquet

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
DOCUMENTS = "documents.parquet"
CHUNKS = "chunks.parquet"
PARTS = "parts"  # in a staging folder: the part files a parts writer joins at publish
DOCUMENT_ROW_GROUP, CHUNK_ROW_GROUP = 4096, 65536  # rows per row group, at most
_SNAPSHOT = re.compile(r"^\d{4,}$")
_VERSION = re.compile(r"^v(\d+)$")

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


# ---------------------------------------------------------------------------------------------
# Locating snapshots


def version_dir(output: Location, name: str, version: int) -> Location:
    return output / name / f"v{version}"


def list_snapshots(version_path: Location) -> list[int]:
    """Numbers of the published snapshots: numbered folders holding a manifest (others are ignored)."""
    if not version_path.is_dir():
        return []
    return sorted(
        int(p.name) for p in version_path.iterdir()
        if _SNAPSHOT.match(p.name) and (p / MANIFEST).is_file()
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
            raise DatasetPathError(f"{path}: a file, not a dataset folder (give OUTPUT/NAME, a version folder "
                                   "vX or a snapshot folder NNNN)")
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
        datasets = sorted(p for p in path.iterdir() if p.is_dir() and any(
            _VERSION.match(v.name) for v in p.iterdir() if v.is_dir()))
        if len(datasets) == 1:
            return resolve_snapshot(datasets[0])
        if datasets:
            names = ", ".join(p.name for p in datasets)
            raise DatasetPathError(f"{path}: holds several datasets ({names}); name one of them")
    raise DatasetPathError(
        f"{path}: not a chunkyard dataset (expected NAME/vX/NNNN/manifest.json below it)"
    )


def check_manifest(manifest: Any, where: Location) -> None:
    """Refuse a manifest that is not one chunkyard can read, with a message naming the field."""
    if not isinstance(manifest, dict):
        raise DatasetError(f"{where}: not a chunkyard manifest (expected a JSON object)")
    schema = manifest.get("schema_version")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise DatasetError(f"{where}: schema_version: expected a whole number, got {schema!r}")
    if schema > SCHEMA_VERSION:
        raise DatasetError(f"{where}: written by a newer chunkyard (schema {schema}); upgrade chunkyard")
    expected = {"name": str, "version": int, "snapshot": int}
    for key, kind in expected.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DatasetError(f"{where}: {key}: expected {kind.__name__}, got {value!r}")


@dataclass
class Snapshot:
    """A published snapshot, read lazily: the manifest at once, Parquet columns on demand."""

    path: Location
    manifest: dict[str, Any]

    @classmethod
    def open(cls, path: str | Location) -> Snapshot:
        folder = resolve_snapshot(path)
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{folder / MANIFEST}: unreadable manifest: {exc}") from None
        check_manifest(manifest, folder / MANIFEST)
        return cls(folder, manifest)

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
        path = self.path / filename
        try:
            filters = None
            if doc_ids is not None:
                ids = sorted(set(doc_ids))
                filters = [("doc_id", "in", ids)] if ids else None
                if not ids:
                    schema = DOCUMENTS_SCHEMA if filename == DOCUMENTS else CHUNKS_SCHEMA
                    table = schema.empty_table()
                    return table.select(columns) if columns else table
            return read_parquet(path, columns=columns, filters=filters)
        except (OSError, pa.ArrowException) as exc:
            # Arrow may go on with the whole schema, a field per line: its first line says what is wrong.
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatasetError(f"{path}: cannot read: {detail}") from None

    def document_text(self, doc_id: str) -> str:
        table = self.documents(["doc_id", "text"], [doc_id])
        if table.num_rows == 0:
            raise DatasetError(f"{self.path}: no document {doc_id!r}")
        return table.column("text")[0].as_py()


# ---------------------------------------------------------------------------------------------
# Writing


class SnapshotSuperseded(ChunkyardError):
    """Another run published a snapshot while one that must follow its parent directly was made."""


class SnapshotWriter:
    """Writes one snapshot under a staging folder; ``publish`` renames it into place atomically.

    With ``parts`` the rows are not streamed into the two files by this process: each ``write``,
    and each batch a worker process wrote itself into ``part_folder`` (``write_part``, registered
    with ``add_part``), is a pair of part files, and ``publish`` joins them in the order they were
    registered into the same two plain Parquet files (``concat_parquet``: the compressed pages are
    copied, not encoded again). Workers then compress their batches in parallel and send the flow
    statistics only; the published snapshot holds the same rows in the same order either way.
    """

    def __init__(self, version_path: Path, compression: str = "zstd", *, parts: bool = False):
        self.version_path = version_path
        version_path.mkdir(parents=True, exist_ok=True)
        clean_stale_staging(version_path)
        self.staging = version_path / f".staging-{os.getpid()}-{HOST}-{uuid.uuid4().hex[:8]}"
        self.staging.mkdir()
        self.compression = compression
        self.part_folder: Path | None = None
        self._parts: list[tuple[Path | None, Path | None]] = []
        if parts:
            self.part_folder = self.staging / PARTS
            self.part_folder.mkdir()
        else:
            self._documents = pq.ParquetWriter(self.staging / DOCUMENTS, DOCUMENTS_SCHEMA, compression=compression)
            self._chunks = pq.ParquetWriter(self.staging / CHUNKS, CHUNKS_SCHEMA, compression=compression)
        self.closed = False

    def write(self, documents: pa.Table, chunks: pa.Table) -> None:
        if self.part_folder is not None:
            name = f"flow-{len(self._parts):06d}"
            self.add_part(*write_part(self.part_folder, name, documents, chunks, self.compression))
            return
        if documents.num_rows:
            self._documents.write_table(conform(documents, DOCUMENTS_SCHEMA), row_group_size=DOCUMENT_ROW_GROUP)
        if chunks.num_rows:
            self._chunks.write_table(conform(chunks, CHUNKS_SCHEMA), row_group_size=CHUNK_ROW_GROUP)

    def add_part(self, documents_part: str | Path | None, chunks_part: str | Path | None) -> None:
        """Append a batch written by ``write_part`` into ``part_folder`` (None: that table had no rows)."""
        if self.part_folder is None:
            raise DatasetError(f"{self.staging}: this writer streams its rows; it takes no parts")
        self._parts.append(tuple(None if part is None else self._own_part(Path(part))
                                 for part in (documents_part, chunks_part)))  # type: ignore[arg-type]

    def _own_part(self, part: Path) -> Path:
        if part.parent != self.part_folder or not part.is_file():
            raise DatasetError(f"{part}: not a part file of {self.part_folder}")
        return part

    def publish(self, manifest: dict[str, Any], *, strict_parent: bool = False) -> Path:
        """Close the files, write the manifest, and rename the staging folder to the next number.

        Numbering is done under the version's publish lock (``PUBLISH_LOCK``), so two runs publishing
        at once take consecutive numbers and each names the snapshot published just before it as
        ``parent_snapshot``. ``manifest["parent_snapshot"]`` comes in as the snapshot the writer was
        built from; when another run published in between, that one is kept as ``built_on`` (the
        counts and carried-over rows are relative to it), or with ``strict_parent`` (a snapshot made
        by editing its parent, which would undo the newer one) nothing is published and
        ``SnapshotSuperseded`` is raised. ``manifest`` is updated in place.
        """
        self._close()
        base = manifest.get("parent_snapshot")
        for child in self.staging.iterdir():  # the data files; only the manifest is written under the lock
            _fsync_file(child)
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
                        "nothing was published: run again")
                number = (previous or 0) + 1
                manifest["snapshot"] = number
                manifest["parent_snapshot"] = previous
                if previous != base:
                    manifest["built_on"] = base
                else:
                    manifest.pop("built_on", None)
                _write_json(self.staging / MANIFEST, manifest)
                _fsync_file(self.staging / MANIFEST)
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
        for child in target.iterdir():
            child.chmod(0o444)
        return target

    def abort(self) -> None:
        self._close(join_parts=False)
        shutil.rmtree(self.staging, ignore_errors=True)

    def _close(self, join_parts: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        if self.part_folder is None:
            self._documents.close()
            self._chunks.close()
            return
        if join_parts:
            for index, (filename, schema) in enumerate(((DOCUMENTS, DOCUMENTS_SCHEMA), (CHUNKS, CHUNKS_SCHEMA))):
                parts = [pair[index] for pair in self._parts if pair[index] is not None]
                if parts:
                    concat_parquet(parts, self.staging / filename)
                else:
                    pq.write_table(empty_table(schema), self.staging / filename, compression=self.compression)
            shutil.rmtree(self.part_folder)

    def next_number(self) -> int:
        existing = list_snapshots(self.version_path)
        return (existing[-1] + 1) if existing else 1


class ObjectStoreSnapshotWriter:
    """Writes one snapshot on a filesystem without atomic rename (S3 and other object stores).

    The files go straight into the snapshot's numbered folder; ``publish`` writes ``manifest.json``
    last, and that single object commits the snapshot (readers ignore a folder without one). The
    number is one past every numbered folder, committed or not, so a run never writes into the
    leftovers of a killed one; leftovers older than ``stale_after`` seconds are removed at start.
    Two runs writing one dataset version at the same moment are not supported on object stores
    (there is no atomic create-if-absent to arbitrate): ``publish`` refuses when the number was
    committed meanwhile, but the data files of the two runs may have mixed. Schedule runs so they do
    not overlap (a Prefect deployment runs one at a time by default with ``chunkyard schedule``).
    """

    def __init__(self, version_path: StoragePath, compression: str = "zstd", stale_after: float = 3600.0):
        self.version_path = version_path
        clean_uncommitted(version_path, stale_after)
        numbers = [int(child.name) for child in version_path.iterdir() if _SNAPSHOT.match(child.name)]
        self.number = max(numbers, default=0) + 1
        self.staging = version_path / f"{self.number:04d}"
        self._documents = parquet_writer(self.staging / DOCUMENTS, DOCUMENTS_SCHEMA, compression)
        self._chunks = parquet_writer(self.staging / CHUNKS, CHUNKS_SCHEMA, compression)
        self.closed = False

    part_folder = None  # parts need a shared local folder: an object store's rows are written here

    def write(self, documents: pa.Table, chunks: pa.Table) -> None:
        if documents.num_rows:
            self._documents.write_table(conform(documents, DOCUMENTS_SCHEMA), row_group_size=DOCUMENT_ROW_GROUP)
        if chunks.num_rows:
            self._chunks.write_table(conform(chunks, CHUNKS_SCHEMA), row_group_size=CHUNK_ROW_GROUP)

    def _close(self) -> None:
        if not self.closed:
            self._documents.close()
            self._chunks.close()
            self.closed = True

    def publish(self, manifest: dict[str, Any]) -> StoragePath:
        """Close the data files, then write the manifest: the snapshot is visible from that moment."""
        self._close()
        marker = self.staging / MANIFEST
        if marker.exists():
            raise DatasetError(f"{self.staging}: another run published this snapshot meanwhile; run again")
        marker.write_bytes(_json_bytes({**manifest, "snapshot": self.number}))
        return self.staging

    def abort(self) -> None:
        try:
            self._close()
        finally:
            if not (self.staging / MANIFEST).exists():
                self.staging.delete_tree()

    def next_number(self) -> int:
        return self.number


def snapshot_writer(version_path: Location, compression: str = "zstd", *,
                    parts: bool = False) -> SnapshotWriter | ObjectStoreSnapshotWriter:
    """The writer for where the version lives: staging + rename locally, manifest-last elsewhere.

    ``parts``: a local writer takes part files from workers (``SnapshotWriter``); an object store's
    writer has no ``part_folder`` and is written by this process as before.
    """
    if isinstance(version_path, StoragePath):
        return ObjectStoreSnapshotWriter(version_path, compression)
    return SnapshotWriter(version_path, compression, parts=parts)


def write_part(folder: str | Path, name: str, documents: pa.Table, chunks: pa.Table,
               compression: str = "zstd") -> tuple[str | None, str | None]:
    """Write one batch's rows as ``NAME.documents.parquet`` and ``NAME.chunks.parquet`` in ``folder``
    (a ``SnapshotWriter``'s ``part_folder``), as the writer itself would; None for a table without rows.

    Each file is written under a temporary name and renamed, so a retried batch replaces its part whole.
    """
    written: list[str | None] = []
    for kind, table, schema, row_group in (("documents", documents, DOCUMENTS_SCHEMA, DOCUMENT_ROW_GROUP),
                                           ("chunks", chunks, CHUNKS_SCHEMA, CHUNK_ROW_GROUP)):
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
    return (json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_bytes(_json_bytes(data))


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
