"""Vector stores a dataset is synced into, behind one small interface (``Sink``).

A sink stores one row per chunk, keyed by ``chunk_id``: the content columns of the export schema
(``chunkyard.chunking.export``: ``doc_id``, ``text``, ``embed_text``, ``section_path``, ...), then
``embed_hash`` (``sha256(embed_text)``), ``row_hash`` (a digest of every exported column, so a
changed heading or offset is a difference too) and ``vector``. Upserts replace by ``chunk_id``, so
applying the same batch twice leaves the same store: a sync that was killed is finished by running
it again.

Kinds: ``lancedb`` (an embedded folder, or any LanceDB URI) and ``pgvector`` (PostgreSQL with the
``vector`` extension, through psycopg 3). Another store (Qdrant, Chroma) is a class with the methods
of ``Sink`` and a line in ``open_sink``. The drivers are imported when a sink is opened, so this
module costs nothing to import.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from chunkyard.chunking.config import SinkConfig
from chunkyard.chunking.errors import ChunkyardError, import_extra
from chunkyard.chunking.export import EXPORT_SCHEMA

CONTENT_COLUMNS = [name for name in EXPORT_SCHEMA.names if name != "op"]
HASH_COLUMNS = ["embed_hash", "row_hash"]
BATCH = 500


class SinkError(ChunkyardError):
    """A vector store that cannot be opened, read or written."""


def row_hash(row: dict[str, Any]) -> str:
    """A digest of a row's exported columns (``CONTENT_COLUMNS``), the same in every store."""
    payload = json.dumps(
        [row.get(name) for name in CONTENT_COLUMNS], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def stored_hashes(rows: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """``chunk_id -> (embed_hash, row_hash)`` of rows read back from a store (``CONTENT_COLUMNS``)."""
    return {row["chunk_id"]: (row["embed_hash"], row["row_hash"]) for row in with_hashes(rows)}


def with_hashes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Export rows (``op`` dropped) with ``embed_hash`` and ``row_hash`` added."""
    out = []
    for row in rows:
        content = {name: row.get(name) for name in CONTENT_COLUMNS}
        content["embed_hash"] = hashlib.sha256((content["embed_text"] or "").encode("utf-8")).hexdigest()
        content["row_hash"] = row_hash(content)
        out.append(content)
    return out


class Sink(Protocol):
    """What ``chunkyard sync`` needs of a store."""

    name: str

    def describe(self) -> str:
        """Where the rows go, fit to print (no password)."""
        ...

    def ids_and_hashes(self) -> dict[str, tuple[str, str]]:
        """Every stored ``chunk_id`` with ``(embed_hash, row_hash)`` computed from the stored columns (not
        read from the hash columns, so an edit behind chunkyard's back shows); empty when the table is absent."""
        ...

    def upsert(self, rows: list[dict[str, Any]], vectors: np.ndarray) -> None:
        """Insert or replace rows (``with_hashes`` rows) by ``chunk_id``; durable when it returns."""
        ...

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove rows by ``chunk_id`` (absent ids are no error); durable when it returns."""
        ...

    def search(self, vector: np.ndarray, k: int) -> list[dict[str, Any]]:
        """The ``k`` nearest rows (without their vectors), nearest first."""
        ...

    def close(self) -> None: ...


def _shown_dsn(dsn: str) -> str:
    """A DSN without its password."""
    dsn = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn, flags=re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# LanceDB


def _lance_schema(dim: int) -> pa.Schema:
    fields = []
    for name in CONTENT_COLUMNS:
        kind = EXPORT_SCHEMA.field(name).type
        fields.append(
            pa.field(
                name,
                pa.string() if kind == pa.large_string() else kind,
                nullable=name not in ("chunk_id", "doc_id"),
            )
        )
    fields += [pa.field(name, pa.string(), nullable=False) for name in HASH_COLUMNS]
    fields.append(pa.field("vector", pa.list_(pa.float32(), dim)))
    return pa.schema(fields)


class LanceSink:
    def __init__(self, config: SinkConfig, base_dir: Path):
        lancedb = import_extra("lancedb", f"sink {config.name}: a lancedb sink", "sync")
        uri = config.uri or ""
        self.uri = uri if "://" in uri else str((base_dir / uri).resolve())
        self.name, self.table_name = config.name, config.table
        try:
            self._db = lancedb.connect(self.uri)
        except Exception as exc:  # noqa: BLE001 - the driver's own errors, as one line
            raise SinkError(f"sink {self.name}: cannot open LanceDB at {self.uri}: {exc}") from None
        self._table = self._open()

    def describe(self) -> str:
        return f"lancedb {self.uri} table {self.table_name}"

    def _open(self) -> Any:
        listing = self._db.list_tables()
        names = listing.tables if hasattr(listing, "tables") else list(listing)
        return self._db.open_table(self.table_name) if self.table_name in names else None

    def _run(self, what: str, action: Any) -> Any:
        try:
            return action()
        except SinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - LanceDB's and Lance's own errors, as one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SinkError(f"sink {self.name}: {what} {self.table_name} in {self.uri}: {first}") from None

    def ids_and_hashes(self) -> dict[str, tuple[str, str]]:
        if self._table is None:
            return {}
        return self._run(
            "cannot read",
            lambda: stored_hashes(
                self._table.search().select(CONTENT_COLUMNS).limit(None).to_arrow().to_pylist()
            ),
        )

    def upsert(self, rows: list[dict[str, Any]], vectors: np.ndarray) -> None:
        if rows:
            self._run("cannot write", lambda: self._upsert(rows, vectors))

    def _upsert(self, rows: list[dict[str, Any]], vectors: np.ndarray) -> None:
        schema = _lance_schema(int(vectors.shape[1]))
        columns = {
            name: pa.array([row[name] for row in rows], schema.field(name).type)
            for name in CONTENT_COLUMNS + HASH_COLUMNS
        }
        columns["vector"] = pa.FixedSizeListArray.from_arrays(
            pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1)), int(vectors.shape[1])
        )
        data = pa.table(columns, schema=schema)
        if self._table is None:
            self._table = self._db.create_table(self.table_name, schema=schema, exist_ok=True)
        stored = self._table.schema.field("vector").type
        if getattr(stored, "list_size", None) != vectors.shape[1]:
            raise SinkError(
                f"sink {self.name}: table {self.table_name} holds vectors of {stored}, the embedder "
                f"gives {vectors.shape[1]} dimensions; use another table for another embedder"
            )
        self._table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all().execute(
            data
        )

    def delete(self, chunk_ids: Sequence[str]) -> None:
        if self._table is None:
            return
        for start in range(0, len(chunk_ids), BATCH):
            quoted = ", ".join("'" + cid.replace("'", "''") + "'" for cid in chunk_ids[start : start + BATCH])
            if quoted:
                self._run(
                    "cannot delete from", lambda quoted=quoted: self._table.delete(f"chunk_id IN ({quoted})")
                )

    def search(self, vector: np.ndarray, k: int) -> list[dict[str, Any]]:
        if self._table is None:
            return []
        found = self._table.search(np.asarray(vector, dtype=np.float32)).limit(k).to_list()
        return [{key: value for key, value in row.items() if key != "vector"} for row in found]

    def close(self) -> None:
        self._table = None


# ---------------------------------------------------------------------------------------------
# PostgreSQL + pgvector

_PG_TYPES = {
    pa.string(): "text",
    pa.large_string(): "text",
    pa.int32(): "integer",
    pa.int64(): "bigint",
    pa.list_(pa.string()): "text[]",
}


class PgvectorSink:
    def __init__(self, config: SinkConfig, base_dir: Path):
        psycopg = self._psycopg = import_extra("psycopg", f"sink {config.name}: a pgvector sink", "sync")
        self.name, self.table_name, self.dsn = config.name, config.table, config.dsn or ""
        try:
            self._conn = psycopg.connect(self.dsn, connect_timeout=30)
            with self._conn.transaction():
                self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise SinkError(
                f"sink {self.name}: cannot use PostgreSQL at {_shown_dsn(self.dsn)}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            ) from None

    def describe(self) -> str:
        return f"pgvector {_shown_dsn(self.dsn)} table {self.table_name}"

    def _exists(self) -> bool:
        # Quoted, as every statement here names it (the config allows only letters, digits and _).
        return (
            self._conn.execute("SELECT to_regclass(%s)", (f'"{self.table_name}"',)).fetchone()[0] is not None
        )

    def _create(self, dim: int) -> None:
        from psycopg import sql

        columns = [
            sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(_PG_TYPES[EXPORT_SCHEMA.field(name).type]))
            for name in CONTENT_COLUMNS
        ]
        columns[0] = sql.SQL("{} text PRIMARY KEY").format(sql.Identifier("chunk_id"))
        columns += [sql.SQL("{} text NOT NULL").format(sql.Identifier(name)) for name in HASH_COLUMNS]
        columns.append(sql.SQL("vector vector({})").format(sql.Literal(dim)))
        self._conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                sql.Identifier(self.table_name), sql.SQL(", ").join(columns)
            )
        )

    def _run(self, what: str, action: Any) -> Any:
        try:
            with self._conn.transaction():
                return action()
        except self._psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SinkError(f"sink {self.name}: {what} {self.table_name}: {first}") from None

    def ids_and_hashes(self) -> dict[str, tuple[str, str]]:
        from psycopg import sql
        from psycopg.rows import dict_row

        def read() -> dict[str, tuple[str, str]]:
            if not self._exists():
                return {}
            with self._conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(
                    sql.SQL("SELECT {} FROM {}").format(
                        sql.SQL(", ").join(map(sql.Identifier, CONTENT_COLUMNS)),
                        sql.Identifier(self.table_name),
                    )
                )
                return stored_hashes(list(cursor.fetchall()))

        return self._run("cannot read", read)

    def upsert(self, rows: list[dict[str, Any]], vectors: np.ndarray) -> None:
        if not rows:
            return
        from psycopg import sql

        names = CONTENT_COLUMNS + HASH_COLUMNS + ["vector"]
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT (chunk_id) DO UPDATE SET {}").format(
            sql.Identifier(self.table_name),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join([sql.Placeholder()] * (len(names) - 1) + [sql.SQL("%s::vector")]),
            sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in names[1:]),
        )
        params = [
            [row[name] for name in CONTENT_COLUMNS + HASH_COLUMNS]
            + ["[" + ",".join(repr(float(x)) for x in vector) + "]"]
            for row, vector in zip(rows, vectors, strict=True)
        ]

        def write() -> None:
            self._create(int(vectors.shape[1]))
            with self._conn.cursor() as cursor:
                cursor.executemany(statement, params)

        self._run("cannot write", write)

    def delete(self, chunk_ids: Sequence[str]) -> None:
        from psycopg import sql

        def remove() -> None:
            if self._exists() and chunk_ids:
                self._conn.execute(
                    sql.SQL("DELETE FROM {} WHERE chunk_id = ANY(%s)").format(
                        sql.Identifier(self.table_name)
                    ),
                    (list(chunk_ids),),
                )

        self._run("cannot delete from", remove)

    def search(self, vector: np.ndarray, k: int) -> list[dict[str, Any]]:
        from psycopg import sql
        from psycopg.rows import dict_row

        literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"

        def find() -> list[dict[str, Any]]:
            if not self._exists():
                return []
            with self._conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(
                    sql.SQL(
                        "SELECT {}, vector <=> %s::vector AS _distance FROM {} "
                        "ORDER BY vector <=> %s::vector LIMIT %s"
                    ).format(
                        sql.SQL(", ").join(map(sql.Identifier, CONTENT_COLUMNS)),
                        sql.Identifier(self.table_name),
                    ),
                    (literal, literal, k),
                )
                return list(cursor.fetchall())

        return self._run("cannot search", find)

    def close(self) -> None:
        self._conn.close()


def open_sink(config: SinkConfig, base_dir: Path) -> Sink:
    """The store a sink config names (relative LanceDB folders resolve against ``base_dir``)."""
    kinds = {"lancedb": LanceSink, "pgvector": PgvectorSink}
    return kinds[config.type](config, base_dir)


__all__ = [
    "CONTENT_COLUMNS",
    "LanceSink",
    "PgvectorSink",
    "Sink",
    "SinkError",
    "open_sink",
    "row_hash",
    "with_hashes",
]
