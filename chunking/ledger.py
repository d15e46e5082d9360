"""The review ledger: reviewers' decisions as append-only events in SQLite, state derived from them.

One ledger per dataset name, at ``OUTPUT/NAME/review.sqlite`` beside the ``vX`` folders, so every
version and snapshot of a dataset shares it. Events are never updated or deleted: flagging,
unflagging, marking OK, noting and recording a constraint each append a row, and undo appends a
``retract`` event naming the event it cancels (redo retracts the retraction). The current state of
each chunk is a pure fold over the active events (``derive_state``).

Durability and concurrency: WAL journal with ``synchronous=FULL`` (a committed event is fsynced
before ``append`` returns, so a reviewer killed right after a keypress loses nothing); each event is
one ``BEGIN IMMEDIATE`` transaction; ``busy_timeout`` plus a retry with exponential backoff make two
reviewers writing at once both succeed. A file that is not a ledger, a corrupt one, or one written by
a newer chunkyard is refused at open with a ``LedgerError`` that says what to do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import os
import random
import sqlite3
import stat
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from chunkyard.chunking.errors import ChunkyardError, UsageError

LEDGER_FILE = "review.sqlite"
LEDGER_SCHEMA_VERSION = 1

# Reasons a reviewer can give for a flag, in the order of the number keys 1–9.
REASONS: tuple[str, ...] = (
    "split_procedure",
    "mid_sentence",
    "split_table",
    "split_code",
    "heading_at_end",
    "too_small",
    "too_large",
    "wrong_section",
    "other",
)
REASON_TEXT: dict[str, str] = {
    "split_procedure": "a numbered procedure is split",
    "mid_sentence": "the split falls mid-sentence",
    "split_table": "a table is split",
    "split_code": "a code block is split",
    "heading_at_end": "a heading is cut off from its content",
    "too_small": "the chunk is too small to be useful",
    "too_large": "the chunk is too large / mixes topics",
    "wrong_section": "the chunk belongs to another section",
    "other": "another problem (see the note)",
}
CONSTRAINTS: tuple[str, ...] = ("keep_together", "break_here")
EVENT_KINDS: tuple[str, ...] = ("flag", "unflag", "mark_ok", "note", "constraint", "retract")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('flag', 'unflag', 'mark_ok', 'note', 'constraint', 'retract')),
    dataset TEXT NOT NULL,
    version INTEGER NOT NULL,
    snapshot INTEGER NOT NULL,
    doc_id TEXT NOT NULL,
    doc_sha256 TEXT NOT NULL,
    chunk_id TEXT,
    chunk_index INTEGER,
    boundary INTEGER,
    reason TEXT,
    note TEXT,
    target_event INTEGER REFERENCES events(id),
    reviewer TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_doc ON events (dataset, version, doc_id);
"""


class LedgerError(ChunkyardError):
    """A review ledger that cannot be opened or written (corrupt, foreign, newer, read-only)."""


class LedgerBusy(LedgerError):
    """Another connection held the ledger's write lock for longer than this one was willing to wait."""


class LedgerRefused(LedgerError, UsageError):
    """A ledger command given a path or events file it cannot work with; nothing written (the CLI exits 2)."""


@dataclass(frozen=True, slots=True)
class Target:
    """What an event is about: a chunk, or the boundary at ``boundary`` (code points) after it."""

    dataset: str
    version: int
    snapshot: int
    doc_id: str
    doc_sha256: str
    chunk_id: str | None = None
    chunk_index: int | None = None
    boundary: int | None = None

    def at_boundary(self, offset: int) -> Target:
        return replace(self, boundary=offset)


@dataclass(frozen=True, slots=True)
class Event:
    """One row of the ledger."""

    id: int
    kind: str
    dataset: str
    version: int
    snapshot: int
    doc_id: str
    doc_sha256: str
    chunk_id: str | None
    chunk_index: int | None
    boundary: int | None
    reason: str | None
    note: str | None
    target_event: int | None
    reviewer: str
    created_at: str


@dataclass
class ChunkState:
    """A chunk's review state, derived from the active events about it."""

    verdict: str | None = None  # None (unreviewed), "ok" or "flagged"
    reasons: list[str] = field(default_factory=list)  # flags on the chunk itself
    boundary_reasons: list[str] = field(default_factory=list)  # flags on the boundary after it
    note: str = ""
    constraints: list[tuple[str, int | None]] = field(default_factory=list)  # (kind, boundary)
    reviewer: str = ""
    updated_at: str = ""

    @property
    def reviewed(self) -> bool:
        return self.verdict is not None

    @property
    def flagged(self) -> bool:
        return self.verdict == "flagged"


def ledger_path(snapshot_path: str | Path) -> Path:
    """``OUTPUT/NAME/review.sqlite`` for a snapshot folder ``OUTPUT/NAME/vX/NNNN``."""
    return Path(snapshot_path).parent.parent / LEDGER_FILE


def default_reviewer() -> str:
    """The OS user name, the reviewer's name unless the config or the person says otherwise."""
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return os.environ.get("USER") or "reviewer"


def active_events(events: Iterable[Event]) -> list[Event]:
    """Events not cancelled by an active ``retract``, in ledger order (retracts themselves dropped).

    A retract only ever names an earlier event, so walking newest to oldest decides each event's fate
    before the events it could cancel are reached; a retracted retract (a redo) cancels nothing.
    """
    ordered = sorted(events, key=lambda e: e.id)
    retracted: set[int] = set()
    kept: list[Event] = []
    for event in reversed(ordered):
        if event.id in retracted:
            continue
        if event.kind == "retract":
            if event.target_event is not None:
                retracted.add(event.target_event)
            continue
        kept.append(event)
    kept.reverse()
    return kept


def derive_state(
    events: Iterable[Event], doc_sha256: Mapping[str, str] | None = None
) -> dict[str, ChunkState]:
    """Current state per ``chunk_id`` from the ledger's events.

    With ``doc_sha256`` (doc_id → sha256 of the document in the snapshot shown), events about another
    revision of a document are ignored: a ``chunk_id`` hashes the span, not the text, so a changed
    document could otherwise inherit verdicts about text it no longer has.
    """
    states: dict[str, ChunkState] = {}
    for event in active_events(events):
        if event.chunk_id is None:
            continue
        if doc_sha256 is not None and doc_sha256.get(event.doc_id) != event.doc_sha256:
            continue
        state = states.setdefault(event.chunk_id, ChunkState())
        on_boundary = event.boundary is not None
        reasons = state.boundary_reasons if on_boundary else state.reasons
        if event.kind == "flag":
            if event.reason and event.reason not in reasons:
                reasons.append(event.reason)
            state.verdict = "flagged"
        elif event.kind == "unflag":
            if event.reason is None:
                reasons.clear()
            elif event.reason in reasons:
                reasons.remove(event.reason)
            if not state.reasons and not state.boundary_reasons and state.verdict == "flagged":
                state.verdict = None
        elif event.kind == "mark_ok":
            state.reasons.clear()
            state.boundary_reasons.clear()
            state.verdict = "ok"
        elif event.kind == "note":
            state.note = event.note or ""
        elif event.kind == "constraint":
            state.constraints.append((event.reason or "", event.boundary))
        state.reviewer = event.reviewer
        state.updated_at = event.created_at
    return states


T = TypeVar("T")


class Ledger:
    """An open review ledger. Safe to share between threads (calls are serialised by a lock)."""

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 5000, retries: int = 8):
        self.path = Path(path)
        self.retries = retries
        self._lock = threading.RLock()
        self._connection = _open(self.path, busy_timeout_ms)

    def set_patience(self, busy_timeout_ms: int, retries: int) -> None:
        """How long a call waits for another connection's lock (``busy_timeout``, then ``retries`` more
        attempts with backoff) before a write raises ``LedgerBusy``. The defaults suit a batch command
        (5 s, 8 retries); the reviewer calls on its GUI thread, so it waits a few milliseconds and
        queues what it could not write (``chunkyard.gui.controller``)."""
        with self._lock:
            self._connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self.retries = retries

    # -- writing -------------------------------------------------------------------------------

    def append(
        self,
        kind: str,
        target: Target,
        *,
        reviewer: str,
        reason: str | None = None,
        note: str | None = None,
        target_event: int | None = None,
        created_at: str | None = None,
    ) -> int:
        """Append one event and fsync it; returns its id. Retries while another writer holds the lock,
        then raises ``LedgerBusy``. ``created_at``: when the decision was made, if not now (one that
        waited in the reviewer's queue)."""
        check_event(kind, reason, target_event)
        check_reviewer(reviewer)
        row = (
            kind,
            target.dataset,
            int(target.version),
            int(target.snapshot),
            target.doc_id,
            target.doc_sha256,
            target.chunk_id,
            target.chunk_index,
            target.boundary,
            reason,
            note,
            target_event,
            reviewer,
            created_at or now_stamp(),
        )

        def insert(connection: sqlite3.Connection) -> int:
            cursor = connection.execute(
                "INSERT INTO events (kind, dataset, version, snapshot, doc_id, doc_sha256, chunk_id, "
                "chunk_index, boundary, reason, note, target_event, reviewer, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            return int(cursor.lastrowid)

        return self._write(insert)

    def flag(self, target: Target, reason: str, *, reviewer: str, note: str | None = None) -> int:
        return self.append("flag", target, reviewer=reviewer, reason=reason, note=note)

    def unflag(self, target: Target, *, reviewer: str, reason: str | None = None) -> int:
        return self.append("unflag", target, reviewer=reviewer, reason=reason)

    def mark_ok(self, target: Target, *, reviewer: str) -> int:
        return self.append("mark_ok", target, reviewer=reviewer)

    def note(self, target: Target, text: str, *, reviewer: str) -> int:
        return self.append("note", target, reviewer=reviewer, note=text)

    def constraint(self, target: Target, kind: str, *, reviewer: str, note: str | None = None) -> int:
        return self.append("constraint", target, reviewer=reviewer, reason=kind, note=note)

    def retract(self, event_id: int, *, reviewer: str) -> int:
        """Cancel event ``event_id`` (undo); retracting a retract restores what it cancelled (redo)."""
        original = self.event(event_id)
        if original is None:
            raise LedgerError(f"{self.path}: no event {event_id} to retract")
        target = Target(
            original.dataset,
            original.version,
            original.snapshot,
            original.doc_id,
            original.doc_sha256,
            original.chunk_id,
            original.chunk_index,
            original.boundary,
        )
        return self.append("retract", target, reviewer=reviewer, target_event=event_id)

    # -- reading -------------------------------------------------------------------------------

    def event(self, event_id: int) -> Event | None:
        rows = self._read("SELECT * FROM events WHERE id = ?", (event_id,))
        return rows[0] if rows else None

    def events(
        self,
        dataset: str | None = None,
        version: int | None = None,
        *,
        doc_id: str | None = None,
        after: int = 0,
    ) -> list[Event]:
        """Events in ledger order, optionally for one dataset (and version, document), after an id."""
        clauses, params = ["id > ?"], [after]
        for column, value in (("dataset", dataset), ("version", version), ("doc_id", doc_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return self._read(f"SELECT * FROM events WHERE {' AND '.join(clauses)} ORDER BY id", tuple(params))

    def state(
        self, dataset: str, version: int, doc_sha256: Mapping[str, str] | None = None
    ) -> dict[str, ChunkState]:
        return derive_state(self.events(dataset, version), doc_sha256)

    def write_problem(self) -> str | None:
        """Why nothing can be written to this ledger (a read-only file, folder or filesystem), or None.

        Probes with a write that is rolled back (SQLite opens a file it may not write read-only, without
        a word, and refuses only the first write). A ledger another program is writing to is not read-only:
        a lock held elsewhere gives None."""
        with self._lock:
            # Without waiting for another program's lock: a held lock already says "not read-only".
            patience = int(self._connection.execute("PRAGMA busy_timeout").fetchone()[0])
            self._connection.execute("PRAGMA busy_timeout = 0")
            try:
                self._connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if "locked" in message or "busy" in message:
                    return None
                return f"{self.path}: the review ledger is read-only ({exc})"
            finally:
                self._connection.execute(f"PRAGMA busy_timeout = {patience}")
            try:
                version = int(self._connection.execute("PRAGMA user_version").fetchone()[0])
                self._connection.execute(f"PRAGMA user_version = {version}")
            except sqlite3.DatabaseError as exc:
                return f"{self.path}: the review ledger is read-only ({exc})"
            finally:
                if self._connection.in_transaction:
                    self._connection.execute("ROLLBACK")
        return None

    def last_event_id(self) -> int:
        with self._lock:
            try:
                value = self._connection.execute("SELECT max(id) FROM events").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"{self.path}: cannot read the review ledger: {exc}") from None
        return int(value or 0)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Event]:
        with self._lock:
            try:
                rows = self._connection.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"{self.path}: cannot read the review ledger: {exc}") from None
        return [Event(*row) for row in rows]

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        delay = 0.02
        for attempt in range(self.retries + 1):
            with self._lock:
                try:
                    self._connection.execute("BEGIN IMMEDIATE")
                    try:
                        result = work(self._connection)
                        self._connection.execute("COMMIT")
                    except BaseException:
                        if self._connection.in_transaction:
                            self._connection.execute("ROLLBACK")
                        raise
                    return result
                except sqlite3.OperationalError as exc:
                    message = str(exc).lower()
                    busy = "locked" in message or "busy" in message
                    if busy and attempt == self.retries:
                        raise LedgerBusy(
                            f"{self.path}: cannot record the decision: {exc} (another program is "
                            "writing to the review ledger)"
                        ) from None
                    if not busy:
                        raise LedgerError(f"{self.path}: cannot record the decision: {exc}") from None
                except sqlite3.DatabaseError as exc:
                    raise LedgerError(f"{self.path}: cannot record the decision: {exc}") from None
            # busy_timeout already waited; back off with jitter so two writers stop colliding.
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")


def now_stamp() -> str:
    """An event's ``created_at``: UTC, ISO 8601 with microseconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def check_event(kind: str, reason: str | None, target_event: int | None) -> None:
    """Refuse an event the ledger would not take (unknown kind or reason, a retract without a target)."""
    if kind not in EVENT_KINDS:
        raise LedgerError(f"unknown event kind {kind!r} (one of {', '.join(EVENT_KINDS)})")
    if kind == "flag" and reason not in REASONS:
        raise LedgerError(f"unknown flag reason {reason!r}: use one of {', '.join(REASONS)}")
    if kind == "constraint" and reason not in CONSTRAINTS:
        raise LedgerError(f"unknown constraint {reason!r}: use one of {', '.join(CONSTRAINTS)}")
    if (kind == "retract") != (target_event is not None):
        raise LedgerError("a retract event, and only a retract event, names the event it cancels")


# Longest reviewer name the ledger takes (a name is shown in one status-bar line).
MAX_REVIEWER_LENGTH = 200


def check_reviewer(reviewer: str) -> None:
    """Refuse a reviewer name that is empty, too long, or holds a control character (ESC, BEL, CR,
    LF, ...: a name is printed to terminals and shown in one line) or a line separator."""
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise LedgerRefused("a reviewer name is required to record a decision")
    bad = next((c for c in reviewer if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if bad is not None:
        raise LedgerRefused(
            f"reviewer name {reviewer!r}: holds the control character U+{ord(bad):04X} "
            f"at position {reviewer.index(bad)}; use a plain name"
        )
    if len(reviewer) > MAX_REVIEWER_LENGTH:
        raise LedgerRefused(f"reviewer name: {len(reviewer)} characters, more than {MAX_REVIEWER_LENGTH}")


def _refuse_links(path: Path) -> None:
    """A ledger (or its -wal/-shm file) that is a symbolic link is refused, dangling or not: SQLite
    would create the ledger at the link's target, or write its tables into another database."""
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LedgerError(f"{candidate}: cannot read the review ledger: {exc.strerror or exc}") from None
        if stat.S_ISLNK(info.st_mode):
            raise LedgerRefused(
                f"{candidate}: the review ledger is a symbolic link (to {os.readlink(candidate)!r}); "
                "chunkyard does not follow it: put the ledger file itself there"
            )
        if candidate == path and not stat.S_ISREG(info.st_mode):
            raise LedgerRefused(f"{path}: not a review ledger (not a regular file)")


def _placeholder(path: Path) -> bool:
    """A 0-byte ``review.sqlite`` with no journal holding data: left by a ledger creation that
    failed (an older chunkyard on a full disk). It holds nothing, so a new ledger may replace it."""
    try:
        if os.lstat(path).st_size != 0:
            return False
    except FileNotFoundError:
        return False
    for suffix in ("-wal", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(f"{path}{suffix}").st_size:
                return False
    return True


def ledger_exists(path: str | Path) -> bool:
    """Whether ``path`` holds a review ledger to read (a 0-byte placeholder does not); a symbolic link is
    refused (``LedgerRefused``)."""
    path = Path(path)
    _refuse_links(path)
    return os.path.lexists(path) and not _placeholder(path)


def _create(path: Path) -> None:
    """Create a complete, empty ledger at ``path`` (when there is none, or only a placeholder): built in
    a hidden file beside it and renamed into place, so a failure (a full disk) leaves no partial
    ledger. Creators are serialised by a lock on the folder, so none replaces another's new ledger."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"{path}: cannot create the review ledger: {exc.strerror or exc}") from None
    temporary = path.with_name(f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with _folder_lock(path.parent):
        if os.path.lexists(path) and not _placeholder(path):
            return  # another process created it meanwhile
        try:
            connection = sqlite3.connect(temporary, isolation_level=None)
            try:
                connection.execute("PRAGMA journal_mode = WAL")
                _ensure_schema(connection, path)
            finally:
                connection.close()
            with open(temporary, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except (OSError, sqlite3.Error) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise LedgerError(
                f"{path}: cannot create the review ledger: {detail} (nothing was recorded)"
            ) from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{temporary}{suffix}")
    with contextlib.suppress(OSError):
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive ``flock`` on the folder itself (no lock file to leave behind); nothing where
    there is no flock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open or create the ledger, checking it is one, intact, and not from a newer chunkyard."""
    _refuse_links(path)
    _check_header(path)
    if not os.path.lexists(path) or _placeholder(path):
        _create(path)
        _refuse_links(path)
    try:
        connection = sqlite3.connect(
            path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as exc:
        raise LedgerError(f"{path}: cannot open the review ledger: {exc}") from None
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise LedgerError(
                f"{path}: the review ledger cannot use WAL mode here (got {mode}); "
                "put the dataset on a local filesystem"
            )
        # FULL: fsync the WAL at every commit, so a committed decision survives a crash or SIGKILL.
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")
        check = connection.execute("PRAGMA quick_check").fetchall()
        if [row[0] for row in check] != ["ok"]:
            detail = "; ".join(str(row[0]) for row in check[:3])
            raise LedgerError(
                f"{path}: the review ledger is corrupt ({detail}); chunkyard will not write to a "
                f"damaged ledger. Recover its events: `chunkyard ledger export {path} --out "
                "events.jsonl`, move it aside with its -wal and -shm files, "
                f"`chunkyard ledger import {path} events.jsonl` (or restore a backup)"
            )
        _ensure_schema(connection, path)
    except LedgerError:
        connection.close()
        raise
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise LedgerError(
            f"{path}: not a usable review ledger ({exc}); move it aside or restore a backup"
        ) from None
    return connection


def _check_header(path: Path) -> None:
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read the review ledger: {exc}") from None
    if header and header != _SQLITE_MAGIC:
        raise LedgerError(
            f"{path}: not a review ledger (not an SQLite database); move it aside — "
            "a new ledger is created when none exists"
        )


def _ensure_schema(connection: sqlite3.Connection, path: Path) -> None:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" not in tables:
        if tables - {"sqlite_sequence"}:
            raise LedgerError(
                f"{path}: an SQLite database but not a chunkyard review ledger "
                f"(tables: {', '.join(sorted(tables))}); move it aside"
            )
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            if connection.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 0:
                connection.execute(
                    "INSERT INTO schema_version (version, created_at) VALUES (?, ?)",
                    (LEDGER_SCHEMA_VERSION, dt.datetime.now(dt.UTC).isoformat(timespec="seconds")),
                )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return
    row = connection.execute("SELECT max(version) FROM schema_version").fetchone()
    version = row[0] if row else None
    if not isinstance(version, int):
        raise LedgerError(
            f"{path}: the review ledger has no schema version; move it aside or restore a backup"
        )
    if version > LEDGER_SCHEMA_VERSION:
        raise LedgerError(
            f"{path}: written by a newer chunkyard (ledger schema {version}, this one reads "
            f"{LEDGER_SCHEMA_VERSION}); upgrade chunkyard"
        )
    columns = {row[1] for row in connection.execute("PRAGMA table_info(events)")}
    missing = set(Event.__slots__) - columns
    if missing:
        raise LedgerError(
            f"{path}: the review ledger's events table lacks {', '.join(sorted(missing))}; "
            "move it aside or restore a backup"
        )


# ---------------------------------------------------------------------------------------------
# Recovery: events out to JSON Lines (even from a damaged ledger) and back into a fresh one.


def export_events(path: str | Path, out: str | Path) -> tuple[int, int]:
    """Write every readable event of the ledger at ``path`` to ``out`` as JSON Lines, in id order.

    Opens the file read-only and without the integrity check, so it also salvages a damaged ledger:
    when reading all rows at once fails, rows are read one id at a time and unreadable ones are
    counted. Returns (events written, events lost). ``out`` is replaced atomically.
    """
    import json

    path, out = Path(path), Path(out)
    if not path.is_file():
        raise LedgerRefused(f"{path}: no review ledger here")
    ledger_files = {Path(os.path.realpath(f"{path}{suffix}")) for suffix in ("", "-wal", "-shm", "-journal")}
    if Path(os.path.realpath(out)) in ledger_files:
        raise LedgerRefused(
            f"{out}: that is the review ledger itself (or its journal); write the events to "
            "another file, e.g. --out events.jsonl"
        )
    _check_header(path)
    columns = ", ".join(Event.__slots__)
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot open the review ledger: {exc}") from None
    rows: list[tuple[Any, ...]] = []
    lost = 0
    try:
        try:
            rows = connection.execute(f"SELECT {columns} FROM events ORDER BY id").fetchall()
        except sqlite3.DatabaseError:
            try:
                last = int(connection.execute("SELECT max(id) FROM events").fetchone()[0] or 0)
            except sqlite3.DatabaseError as exc:
                raise LedgerError(
                    f"{path}: no events can be read from this ledger ({exc}); restore a backup"
                ) from None
            for event_id in range(1, last + 1):
                try:
                    row = connection.execute(
                        f"SELECT {columns} FROM events WHERE id = ?", (event_id,)
                    ).fetchone()
                except sqlite3.DatabaseError:
                    lost += 1
                    continue
                if row is not None:
                    rows.append(row)
    finally:
        connection.close()
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(
                    json.dumps(dict(zip(Event.__slots__, row, strict=True)), ensure_ascii=False) + "\n"
                )
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, out)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise LedgerError(f"{out}: cannot write the events: {exc.strerror or exc}") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return len(rows), lost


def import_events(path: str | Path, source: str | Path) -> int:
    """Load events exported by ``export_events`` into the ledger at ``path`` (created if missing).

    The ledger must hold no events yet: ids are kept, so every ``retract`` still names the event it
    cancels. Every line is checked first; a bad one is reported with its line number and nothing is
    written. Returns the number of events imported.
    """
    import json

    path, source = Path(path), Path(source)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerRefused(f"{source}: cannot read the events file: {exc}") from None
    rows: list[tuple[Any, ...]] = []
    seen: set[int] = set()
    previous = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            missing = [name for name in Event.__slots__ if name not in data]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            event = Event(**{name: data[name] for name in Event.__slots__})
            if not isinstance(event.id, int) or event.id <= previous:
                raise ValueError("ids must be integers in increasing order")
            for name in ("dataset", "doc_id", "doc_sha256", "reviewer", "created_at", "kind"):
                if not isinstance(getattr(event, name), str):
                    raise ValueError(f"{name} must be a string")
            check_reviewer(event.reviewer)
            for name in ("version", "snapshot"):
                if not isinstance(getattr(event, name), int):
                    raise ValueError(f"{name} must be an integer")
            check_event(event.kind, event.reason, event.target_event)
            if event.target_event is not None and event.target_event not in seen:
                raise ValueError(f"it retracts event {event.target_event}, which is not in the file")
        except (ValueError, TypeError, LedgerError) as exc:
            raise LedgerRefused(f"{source}:{number}: not a ledger event: {exc}") from None
        previous = event.id
        seen.add(event.id)
        rows.append(tuple(getattr(event, name) for name in Event.__slots__))
    with Ledger(path) as ledger:
        if ledger.last_event_id():
            raise LedgerRefused(
                f"{path}: already holds events; import into a new ledger (move this one aside)"
            )

        def insert(connection: sqlite3.Connection) -> int:
            connection.executemany(
                f"INSERT INTO events ({', '.join(Event.__slots__)}) VALUES ({', '.join('?' * len(Event.__slots__))})",
                rows,
            )
            return len(rows)

        return ledger._write(insert)
