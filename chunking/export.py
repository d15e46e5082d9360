"""Exports for vector-store ingestion: a stable schema, full or as a change-set, written atomically.

Schema (``EXPORT_SCHEMA``, version ``EXPORT_SCHEMA_VERSION``): one row per chunk with ``op``,
``chunk_id``, ``doc_id``, ``chunk_index``, ``start``, ``end``, ``text``, ``embed_text``,
``section_path``, ``n_tokens``, ``n_chars``, ``strategy``, ``label``, ``findings``,
``config_version``, ``config_hash``, ``doc_title``, ``doc_path``. ``op`` is ``upsert`` or
``delete``; a full export is the change-set from nothing (every row an upsert). A delete row
carries only ``op``, ``chunk_id`` and ``doc_id`` (the rest null).

Change-set (``--since OLD``): rows of the new snapshot whose ``chunk_id`` is new, or whose exported
columns differ from OLD's row with that id (a ``chunk_id`` names a span, so an edited document can
keep an id with other text) are upserts; ids only in OLD are deletes. Applying it to OLD's export
(drop the deletes, replace or add the upserts by ``chunk_id``) gives exactly the new export.
Unchanged chunks are left out, so a store re-embeds only what changed.

Files are written to a temporary file beside the target, fsynced, then renamed over it
(``os.replace``), so a reader sees the old file or the new one, never a partial one.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from chunkyard.chunking.dataset import MANIFEST, Snapshot
from chunkyard.chunking.errors import ChunkyardError, UsageError

EXPORT_SCHEMA_VERSION = 1
FORMATS = ("parquet", "jsonl")

EXPORT_SCHEMA = pa.schema(
    [
        pa.field("op", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32()),
        pa.field("start", pa.int64()),
        pa.field("end", pa.int64()),
        pa.field("text", pa.large_string()),
        pa.field("embed_text", pa.large_string()),
        pa.field("section_path", pa.list_(pa.string())),
        pa.field("n_tokens", pa.int32()),
        pa.field("n_chars", pa.int32()),
        pa.field("strategy", pa.string()),
        pa.field("label", pa.string()),
        pa.field("findings", pa.list_(pa.string())),
        pa.field("config_version", pa.int32()),
        pa.field("config_hash", pa.string()),
        pa.field("doc_title", pa.string()),
        pa.field("doc_path", pa.string()),
    ],
    metadata={"chunkyard.export_schema_version": str(EXPORT_SCHEMA_VERSION)},
)
_CHUNK_COLUMNS = [name for name in EXPORT_SCHEMA.names if name not in ("op", "doc_title", "doc_path")]
_CONTENT = [name for name in EXPORT_SCHEMA.names if name != "op"]


class ExportError(ChunkyardError):
    """An export that cannot be written (bad format, unwritable target)."""


class ExportRefused(ExportError, UsageError):
    """An export refused before anything is written (a bad --out or format): the CLI exits 2."""


def export_rows(snapshot: Snapshot) -> pa.Table:
    """Every chunk of the snapshot in the export schema (all upserts), ordered by doc_id, chunk_index."""
    chunks = snapshot.chunks([name for name in _CHUNK_COLUMNS])
    documents = snapshot.documents(["doc_id", "title", "path"])
    where = pc.index_in(chunks.column("doc_id"), value_set=documents.column("doc_id").combine_chunks())
    columns: dict[str, Any] = {"op": pa.array(["upsert"] * chunks.num_rows, pa.string())}
    for name in _CHUNK_COLUMNS:
        columns[name] = chunks.column(name)
    columns["doc_title"] = documents.column("title").combine_chunks().take(where)
    columns["doc_path"] = documents.column("path").combine_chunks().take(where)
    table = pa.table(columns).cast(EXPORT_SCHEMA)
    if table.num_rows:
        table = table.take(
            pc.sort_indices(table, sort_keys=[("doc_id", "ascending"), ("chunk_index", "ascending")])
        )
    return table


def change_set(old: pa.Table, new: pa.Table) -> pa.Table:
    """Upserts (new ids, or same id with other content) then deletes (ids gone), from two full exports."""
    old_rows = {row["chunk_id"]: row for row in old.select(_CONTENT).to_pylist()}
    new_ids = new.column("chunk_id").to_pylist()
    keep = [
        i for i, row in enumerate(new.select(_CONTENT).to_pylist()) if old_rows.get(row["chunk_id"]) != row
    ]
    upserts = new.take(pa.array(keep, pa.int64()))
    gone = sorted(set(old_rows) - set(new_ids), key=lambda cid: (old_rows[cid]["doc_id"], cid))
    deletes = pa.table(
        {
            name: (
                pa.array(["delete"] * len(gone), pa.string())
                if name == "op"
                else pa.array(gone, pa.string())
                if name == "chunk_id"
                else pa.array([old_rows[cid]["doc_id"] for cid in gone], pa.string())
                if name == "doc_id"
                else pa.nulls(len(gone), EXPORT_SCHEMA.field(name).type)
            )
            for name in EXPORT_SCHEMA.names
        },
        schema=EXPORT_SCHEMA,
    )
    return pa.concat_tables([upserts, deletes])


def apply_change_set(base: pa.Table, changes: pa.Table) -> pa.Table:
    """``base`` with ``changes`` applied (what an ingestion job does), ordered like an export."""
    rows = {row["chunk_id"]: row for row in base.to_pylist()}
    for row in changes.to_pylist():
        if row["op"] == "delete":
            rows.pop(row["chunk_id"], None)
        else:
            rows[row["chunk_id"]] = row
    table = pa.Table.from_pylist(list(rows.values()), schema=EXPORT_SCHEMA)
    if table.num_rows:
        table = table.take(
            pc.sort_indices(table, sort_keys=[("doc_id", "ascending"), ("chunk_index", "ascending")])
        )
    return table


def export(path: str | Path, out: str | Path, fmt: str, since: str | Path | None = None) -> dict[str, Any]:
    """Write the export (or the change-set since ``since``) of the snapshot at ``path``; returns counts."""
    if fmt not in FORMATS:
        raise ExportRefused(f"unknown export format {fmt!r} (use one of: {', '.join(FORMATS)})")
    folder = Path(out).parent
    if (folder / MANIFEST).is_file():
        raise ExportRefused(
            f"{out}: inside the published snapshot {folder}, which is never modified; "
            "write the export elsewhere"
        )
    # Validated whole (Snapshot.validate): what ships is exactly what the documents say.
    snapshot = Snapshot.open(path, validate=True)
    table = export_rows(snapshot)
    base = None
    if since is not None:
        base = Snapshot.open(since, validate=True)
        table = change_set(export_rows(base), table)
    metadata = {
        "chunkyard.export_schema_version": str(EXPORT_SCHEMA_VERSION),
        "chunkyard.dataset": snapshot.name,
        "chunkyard.version": str(snapshot.version),
        "chunkyard.snapshot": str(snapshot.number),
        "chunkyard.since": str(base.path) if base else "",
    }
    write_atomically(Path(out), lambda handle: _write(table, fmt, handle, metadata))
    ops = table.column("op").to_pylist()
    return {
        "rows": table.num_rows,
        "upserts": ops.count("upsert"),
        "deletes": ops.count("delete"),
        "snapshot": str(snapshot.path),
        "since": str(base.path) if base else None,
    }


def read_export(path: str | Path) -> pa.Table:
    """An export file (either format) back as a table in the export schema."""
    path = Path(path)
    if path.suffix == ".parquet" or path.read_bytes()[:4] == b"PAR1":
        return pq.read_table(path).cast(EXPORT_SCHEMA)
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return pa.Table.from_pylist(
        [{name: row.get(name) for name in EXPORT_SCHEMA.names} for row in rows], schema=EXPORT_SCHEMA
    )


def _write(table: pa.Table, fmt: str, handle: BinaryIO, metadata: dict[str, str]) -> None:
    if fmt == "parquet":
        schema = table.schema.with_metadata(
            {**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}}
        )
        pq.write_table(table.cast(schema), handle, compression="zstd")
        return
    for row in table.to_pylist():
        if row["op"] == "delete":
            row = {"op": "delete", "chunk_id": row["chunk_id"], "doc_id": row["doc_id"]}
        handle.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")


# A temporary export file whose process still exists is left alone unless it is older than this
# (its PID may then belong to another program): an export of a large snapshot takes minutes, not a day.
STALE_TEMPORARY_SECONDS = 24 * 3600


def remove_stale_temporaries(target: Path, now: float | None = None) -> list[Path]:
    """Remove ``.TARGET.tmp-PID-RANDOM`` files beside ``target`` left by killed exports of the same
    target: those whose process is gone, or older than ``STALE_TEMPORARY_SECONDS``. Temporaries of
    other targets and of a live export are left alone."""
    folder = target.parent if str(target.parent) else Path(".")
    prefix = f".{target.name}.tmp-"
    removed = []
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text, _, rest = entry.name[len(prefix) :].partition("-")
        if not pid_text.isdigit() or not rest:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            old = now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMPORARY_SECONDS
            if int(pid_text) != os.getpid() and (old or not _pid_alive(int(pid_text))):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue  # gone meanwhile, or not ours to remove
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def write_atomically(target: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write through ``write`` into a temporary file beside ``target``, fsync, rename over ``target``.
    Temporaries that killed exports of the same target left behind are removed first."""
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise ExportRefused(f"{folder}: no such folder for the export")
    remove_stale_temporaries(target)
    temporary = folder / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(temporary, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        raise ExportError(f"{target}: cannot write the export: {exc.strerror or exc}") from None
    finally:
        if temporary.exists():
            temporary.unlink()
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # some filesystems cannot fsync a folder; the rename itself is atomic


__all__ = [
    "EXPORT_SCHEMA",
    "FORMATS",
    "ExportError",
    "ExportRefused",
    "apply_change_set",
    "change_set",
    "export",
    "export_rows",
    "read_export",
    "remove_stale_temporaries",
    "write_atomically",
]
