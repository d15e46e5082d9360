"""Review logic without a GUI: the dataset index the reviewer walks, its queues, progress and statistics.

``ReviewIndex.load`` reads only ids, offsets, sizes and findings of every chunk up front (a few
columns of Arrow, turned into NumPy arrays), so a dataset of a million chunks opens in well under a
second (a snapshot of many parts: from its review-columns files, or for one written before them from
the user's cache after its first open, ``Snapshot.whole_columns``); texts, section paths and ``embed_text`` are read per document on demand. Review state comes
from the ledger (``chunkyard.chunking.ledger``) and is kept as one small integer per chunk, so progress counts
and "next suspicious chunk" are array operations.

Rows are ordered by ``doc_id`` then ``chunk_index``; a *row* is a chunk's position in that order.
``OffsetMap`` is the one place where code-point offsets (the dataset's) and UTF-16 positions (Qt's)
are converted.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chunkyard.chunking.dataset import CHUNKS, DOCUMENTS, REVIEW_COLUMNS, Snapshot, safe_doc_id
from chunkyard.chunking.errors import DatasetError
from chunkyard.chunking.findings import FINDINGS, explain
from chunkyard.chunking.ledger import (
    ChunkState,
    Event,
    Ledger,
    LedgerError,
    Target,
    active_events,
    default_reviewer,
    derive_state,
    ledger_path,
)

UNREVIEWED, OK, FLAGGED = 0, 1, 2
QUEUES: tuple[str, ...] = ("All", "Unreviewed", "Suspicious", "Flagged", "OK", "Disagreements", "Re-check")
# A queue of one finding: "finding:undersized" holds the chunks with that finding no one has decided yet.
FINDING_QUEUE = "finding:"


def reviewer_verdicts(
    events: Sequence[Event], doc_sha256: dict[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """Per chunk_id, each reviewer's own verdict ("OK", "flagged: mid_sentence, boundary: split_table"),
    derived from that reviewer's events alone (the combined state keeps only the latest verdict, so a
    second reviewer's OK hides the first one's flag)."""
    by_reviewer: dict[str, list[Event]] = {}
    for event in active_events(events):
        by_reviewer.setdefault(event.reviewer, []).append(event)
    verdicts: dict[str, dict[str, str]] = {}
    for reviewer, own in by_reviewer.items():
        for chunk_id, state in derive_state(own, doc_sha256).items():
            if state.flagged:
                text = "flagged: " + ", ".join(
                    state.reasons + [f"boundary: {r}" for r in state.boundary_reasons]
                )
            elif state.verdict == "ok":
                text = "OK"
            else:
                continue
            verdicts.setdefault(chunk_id, {})[reviewer] = text
    return verdicts


def disagreements(verdicts: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The chunks two or more reviewers decided differently, with each one's verdict."""
    return {chunk_id: by for chunk_id, by in verdicts.items() if len(set(by.values())) > 1}


def finding_queue(code: str) -> str:
    return FINDING_QUEUE + code


def queue_title(queue: str) -> str:
    """What the window calls a queue ("Finding undersized", "Unreviewed")."""
    return f"Finding {queue[len(FINDING_QUEUE) :]}" if queue.startswith(FINDING_QUEUE) else queue


class ReviewPace:
    """Decisions per minute over the reviewer's latest ones, and the time the rest of a queue would take.

    Counted over the last ``window`` decisions of this session (the pace of the last minutes, not of the
    morning); a pause longer than ``pause_s`` between two decisions is not counted as reviewing time."""

    def __init__(self, window: int = 30, pause_s: float = 300.0, least_s: float = 20.0):
        self.window, self.pause_s, self.least_s = window, pause_s, least_s
        self.times: list[float] = []

    def record(self, now: float, count: int = 1) -> None:
        self.times.extend([now] * max(1, count))
        del self.times[: -self.window - 1]

    def per_minute(self) -> float | None:
        """None until there are three decisions over ``least_s`` seconds of reviewing (two quick keys
        said 9,500 a minute)."""
        if len(self.times) < 3:
            return None
        busy = sum(min(b - a, self.pause_s) for a, b in zip(self.times, self.times[1:], strict=False))
        return None if busy < self.least_s else (len(self.times) - 1) * 60.0 / busy

    def time_left_s(self, remaining: int) -> float | None:
        rate = self.per_minute()
        return None if rate is None or rate <= 0 else remaining * 60.0 / rate


def format_duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


# ---------------------------------------------------------------------------------------------
# Offsets


class OffsetMap:
    """Converts positions in one text between code points (the dataset's) and UTF-16 units (Qt's).

    The only conversion in chunkyard: every view asks this class. A character outside the Basic
    Multilingual Plane (most emoji, rare CJK) is one code point but two UTF-16 units (a surrogate
    pair); every other character is one of each. The positions of those wide characters are kept
    sorted, so both directions are a binary search.
    """

    def __init__(self, text: str):
        code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        self.length = len(code_points)
        self._wide = np.flatnonzero(code_points > 0xFFFF)  # code-point positions of wide characters
        self._wide_utf16 = self._wide + np.arange(len(self._wide))  # their UTF-16 positions
        self.utf16_length = self.length + len(self._wide)

    def to_utf16(self, position: int) -> int:
        """UTF-16 position of code-point position ``position`` (0 ≤ position ≤ len(text))."""
        position = min(max(int(position), 0), self.length)
        return position + int(np.searchsorted(self._wide, position, "left"))

    def to_code_point(self, position: int) -> int:
        """Code-point position of UTF-16 ``position``; inside a surrogate pair, the character it splits."""
        position = min(max(int(position), 0), self.utf16_length)
        return position - int(np.searchsorted(self._wide_utf16, position, "left"))


def display_text(text: str) -> str:
    """The text as a plain-text view should be given it, with exactly the same positions.

    Qt turns CR LF into one paragraph break, which would shift every later position by one; a CR before
    LF is shown as a space instead (same length in code points and in UTF-16).
    """
    return text.replace("\r\n", " \n")


def elide_path(path: str, width: float, measure: Callable[[str], float], ellipsis: str = "…") -> str:
    """A document id cut to fit ``width`` (as ``measure`` counts it), keeping the beginning of its names.

    Whole top folders go first ("…/2400-node-swap/README.md"), so what is left starts where a name starts
    (a leading number stays in view, and ids sharing a file name stay apart); when even the last folder
    and the file name are too wide, they are cut at their end ("…/2400-node-sw…"), the file name alone
    ("…/12-returns-and-ref…") unless it is a generic one (README, index) that says less than its folder.
    """
    if measure(path) <= width:
        return path
    parts = path.split("/")
    generic = len(parts) > 1 and parts[-1].split(".", 1)[0].lower() in {
        "readme",
        "index",
        "_index",
        "main",
        "__init__",
    }
    kept = (
        2 if generic else 1
    )  # the names always shown: the file's, and its folder's when the file's is generic
    for first in range(1, len(parts) - kept + 1):
        candidate = ellipsis + "/" + "/".join(parts[first:])
        if measure(candidate) <= width:
            return candidate
    rest, prefix = "/".join(parts[-kept:]), ellipsis + "/" if len(parts) > kept else ""
    low, high = 0, len(rest)  # the longest beginning of ``rest`` that fits with the ellipsis after it
    while low < high:
        middle = (low + high + 1) // 2
        if measure(prefix + rest[:middle] + ellipsis) <= width:
            low = middle
        else:
            high = middle - 1
    return prefix + rest[:low] + ellipsis


# ---------------------------------------------------------------------------------------------
# The index


@dataclass(frozen=True)
class ChunkDetail:
    """What the chunk table and the detail panel show; read per document on demand."""

    chunk_index: int
    section_path: tuple[str, ...]
    size: int
    unit: str
    n_chars: int
    n_tokens: int | None  # None: not counted (count_tokens: false)
    strategy: str
    embed_text: str
    page_start: int | None = None  # 1-based pages of paged documents (PDF); None otherwise
    page_end: int | None = None

    @property
    def pages(self) -> str:
        """ "p. 3", "p. 3–4", or "" for a document without pages."""
        if self.page_start is None:
            return ""
        end = self.page_end if self.page_end is not None else self.page_start
        return f"p. {self.page_start}" if end == self.page_start else f"p. {self.page_start}–{end}"


@dataclass(frozen=True)
class Budget:
    """A size budget from the dataset's config (defaults, or a rule's override)."""

    max_size: int
    unit: str
    label: str


class ReviewIndex:
    """Every chunk of a snapshot as arrays, plus its review state; see the module docstring."""

    def __init__(self, snapshot: Snapshot, documents: pa.Table, chunks: pa.Table):
        self.snapshot = snapshot
        self.dataset = snapshot.name
        self.version = snapshot.version
        self.snapshot_number = snapshot.number
        try:
            self._build(documents, chunks)
        except (pa.ArrowException, ValueError, TypeError, KeyError, OverflowError) as exc:
            raise DatasetError(f"{snapshot.path}: malformed dataset: {exc}") from None
        self.verdict = np.zeros(self.n_chunks, dtype=np.int8)
        self.states: dict[int, ChunkState] = {}
        self.disagree = np.zeros(self.n_chunks, dtype=bool)  # reviewers decided the chunk differently
        self.recheck = np.zeros(
            self.n_chunks, dtype=bool
        )  # rechunked for a reviewer's flags (``set_recheck``)
        self.verdicts_by_reviewer: dict[
            int, dict[str, str]
        ] = {}  # row -> reviewer -> verdict, where they differ
        self._details: OrderedDict[int, list[ChunkDetail]] = OrderedDict()
        self._texts: OrderedDict[int, str] = OrderedDict()
        self.config_reviewer, self.budgets = config_facts(snapshot.manifest)

    @classmethod
    def load(cls, path: str | Path) -> ReviewIndex:
        """Open the newest snapshot at or below ``path`` and read its ids, offsets and findings."""
        snapshot = Snapshot.open(path)
        documents, chunks = snapshot.whole_columns(REVIEW_COLUMNS[DOCUMENTS], REVIEW_COLUMNS[CHUNKS])
        return cls(snapshot, documents, chunks)

    def _build(self, documents: pa.Table, chunks: pa.Table) -> None:
        order = pc.sort_indices(documents, sort_keys=[("doc_id", "ascending")])
        documents = documents.take(order)
        doc_ids = documents.column("doc_id").combine_chunks()
        if pc.count_distinct(doc_ids).as_py() != len(doc_ids):
            raise ValueError("documents.parquet lists a doc_id twice")
        self.doc_ids: list[str] = doc_ids.to_pylist()
        for doc_id in self.doc_ids:
            if problem := safe_doc_id(doc_id):
                raise ValueError(f"documents.parquet: doc_id {doc_id!r} {problem}")
        self.titles: list[str] = documents.column("title").to_pylist()
        self.doc_sha256: list[str] = documents.column("sha256").to_pylist()
        self.doc_chars = documents.column("n_chars").to_numpy().astype(np.int64)
        self._doc_ordinal = {doc_id: i for i, doc_id in enumerate(self.doc_ids)}

        ordinal = pc.index_in(chunks.column("doc_id"), value_set=doc_ids)
        known = pc.is_valid(ordinal)
        if len(known) and not pc.all(known).as_py():  # (all() of no chunks is null, not true)
            # Chunks of a document the snapshot does not list: shown against no text, yet exported.
            row = int(pc.index(known, False).as_py())
            raise ValueError(
                f"chunks.parquet: row {row}: doc_id {chunks.column('doc_id')[row].as_py()!r} is not a "
                "document of this snapshot"
            )
        # chunk_id uniqueness and text == document[start:end] are checked by Snapshot.verify, which the
        # window runs in the background once the dataset is shown (counting 1M ids here took 0.3-1.5 s).
        doc_of = ordinal.to_numpy(zero_copy_only=False).astype(np.int32)
        chunk_index = chunks.column("chunk_index").to_numpy().astype(np.int64)
        order = np.lexsort((chunk_index, doc_of))
        # Writers usually store chunks already in this order; then nothing needs reshuffling.
        in_order = bool(np.array_equal(order, np.arange(len(order))))

        def arranged(values: np.ndarray) -> np.ndarray:
            return (values if in_order else values[order]).astype(np.int64, copy=False)

        self.chunk_doc = doc_of if in_order else doc_of[order]
        self.chunk_index = arranged(chunk_index)
        self.start = arranged(chunks.column("start").to_numpy())
        self.end = arranged(chunks.column("end").to_numpy())
        self.size = arranged(chunks.column("size").to_numpy())
        self.n_chunks = len(order)
        take = None if in_order else pa.array(order, type=pa.int64())
        chunk_ids = chunks.column("chunk_id").combine_chunks()
        self.chunk_ids = chunk_ids if take is None else chunk_ids.take(take)
        units = chunks.column("unit")
        unit_counts = pc.value_counts(units).to_pylist() if len(units) else []
        self.unit = max(unit_counts, key=lambda item: item["counts"])["values"] if unit_counts else "chars"
        self._unit_counts = {str(item["values"]): int(item["counts"]) for item in unit_counts}
        # Which chunks are measured in that unit (a rule can measure some documents in another one).
        in_unit = pc.fill_null(pc.equal(units, self.unit), False).to_numpy(zero_copy_only=False).astype(bool)
        self.in_unit = in_unit if in_order else in_unit[order]
        bad = (self.start < 0) | (self.end < self.start) | (self.end > self.doc_chars[self.chunk_doc])
        if self.n_chunks and bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"chunk {int(self.chunk_index[row])} of {self.doc_ids[self.chunk_doc[row]]!r} has "
                f"offsets [{int(self.start[row])}:{int(self.end[row])}] outside its document"
            )
        # doc_first[d]..doc_first[d+1] are document d's rows.
        self.doc_first = np.searchsorted(self.chunk_doc, np.arange(len(self.doc_ids) + 1)).astype(np.int64)
        findings = chunks.column("findings").combine_chunks()
        self._build_findings(findings if take is None else findings.take(take))

    def _build_findings(self, findings: pa.Array) -> None:
        """One bit per finding code per chunk (codes this chunkyard does not know get bits too)."""
        known = list(FINDINGS)
        flat = pc.list_flatten(findings)
        parents = pc.list_parent_indices(findings).to_numpy()
        present = [code for code in pc.unique(flat).to_pylist() if code is not None] if len(flat) else []
        self.finding_codes: list[str] = known + sorted(set(present) - set(known))
        self.finding_codes = self.finding_codes[:64]
        self.finding_bits = np.zeros(self.n_chunks, dtype=np.uint64)
        if len(flat):
            code_numbers = pc.index_in(flat, value_set=pa.array(self.finding_codes, pa.string()))
            code_numbers = code_numbers.fill_null(-1).to_numpy()
            for number in np.unique(code_numbers):
                if number < 0:
                    continue
                rows = np.unique(parents[code_numbers == number])
                self.finding_bits[rows] |= np.uint64(1) << np.uint64(number)
        self.suspicious = self.finding_bits != 0

    # -- documents -------------------------------------------------------------------------------

    @property
    def n_documents(self) -> int:
        return len(self.doc_ids)

    def doc_number(self, doc_id: str) -> int | None:
        return self._doc_ordinal.get(doc_id)

    def doc_rows(self, doc: int) -> range:
        return range(int(self.doc_first[doc]), int(self.doc_first[doc + 1]))

    def row_of(self, doc: int, chunk_index: int) -> int | None:
        rows = self.doc_rows(doc)
        position = bisect.bisect_left(self.chunk_index[rows.start : rows.stop], chunk_index)
        if position < len(rows) and self.chunk_index[rows.start + position] == chunk_index:
            return rows.start + position
        return None

    def document_text(self, doc: int) -> str:
        """The document's text (read on demand; the last few are cached)."""
        if doc in self._texts:
            self._texts.move_to_end(doc)
            return self._texts[doc]
        text = self.snapshot.document_text(self.doc_ids[doc])
        if not isinstance(text, str):
            raise DatasetError(f"{self.snapshot.path}: document {self.doc_ids[doc]!r} has no text")
        self._texts[doc] = text
        if len(self._texts) > 8:
            self._texts.popitem(last=False)
        return text

    def chunk_details(self, doc: int) -> list[ChunkDetail]:
        """Section paths, token counts and embed_text of one document's chunks, in row order."""
        if doc in self._details:
            self._details.move_to_end(doc)
            return self._details[doc]
        columns = [
            "doc_id",
            "chunk_index",
            "section_path",
            "size",
            "unit",
            "n_chars",
            "n_tokens",
            "strategy",
            "embed_text",
        ]
        try:
            try:
                table = self.snapshot.chunks([*columns, "page_start", "page_end"], [self.doc_ids[doc]])
            except DatasetError:  # a snapshot written before chunks had pages
                table = self.snapshot.chunks(columns, [self.doc_ids[doc]])
            table = table.filter(pc.equal(table.column("doc_id"), self.doc_ids[doc]))
            table = table.take(pc.sort_indices(table, sort_keys=[("chunk_index", "ascending")]))
            rows = table.to_pylist()
        except pa.ArrowException as exc:
            raise DatasetError(
                f"{self.snapshot.path}: malformed chunks of {self.doc_ids[doc]!r}: {exc}"
            ) from None
        details = [
            ChunkDetail(
                int(r["chunk_index"]),
                tuple(r["section_path"] or ()),
                int(r["size"]),
                r["unit"] or "",
                int(r["n_chars"]),
                None if r["n_tokens"] is None else int(r["n_tokens"]),
                r["strategy"] or "",
                r["embed_text"] or "",
                r.get("page_start"),
                r.get("page_end"),
            )
            for r in rows
        ]
        self._details[doc] = details
        if len(self._details) > 8:
            self._details.popitem(last=False)
        return details

    def document_stats(self) -> dict[str, np.ndarray]:
        """Per document: chunks, suspicious chunks, flagged chunks, reviewed chunks."""
        starts = self.doc_first[:-1]
        counts = np.diff(self.doc_first)

        def per_doc(values: np.ndarray) -> np.ndarray:
            if not self.n_chunks:
                return np.zeros(len(counts), dtype=np.int64)
            sums = np.add.reduceat(values.astype(np.int64), np.minimum(starts, self.n_chunks - 1))
            return np.where(counts > 0, sums, 0)

        return {
            "chunks": counts,
            "suspicious": per_doc(self.suspicious),
            "flagged": per_doc(self.verdict == FLAGGED),
            "reviewed": per_doc(self.verdict != UNREVIEWED),
        }

    # -- chunks ----------------------------------------------------------------------------------

    def chunk_id(self, row: int) -> str:
        return self.chunk_ids[row].as_py()

    def findings(self, row: int) -> list[str]:
        bits = int(self.finding_bits[row])
        return [code for number, code in enumerate(self.finding_codes) if bits >> number & 1]

    def explain_findings(self, row: int) -> list[tuple[str, str]]:
        return [(code, explain(code)) for code in self.findings(row)]

    def target(self, row: int, *, boundary: bool = False) -> Target:
        """The ledger target for a chunk, or for the boundary at its end (between it and the next)."""
        doc = int(self.chunk_doc[row])
        return Target(
            self.dataset,
            self.version,
            self.snapshot_number,
            self.doc_ids[doc],
            self.doc_sha256[doc],
            self.chunk_id(row),
            int(self.chunk_index[row]),
            int(self.end[row]) if boundary else None,
        )

    def state(self, row: int) -> ChunkState:
        return self.states.get(row) or ChunkState()

    def chunk_at(self, doc: int, position: int, prefer: int | None = None) -> int | None:
        """The row of the chunk containing code-point ``position`` in ``doc``.

        Where chunks overlap, ``prefer`` wins if it contains the position, else the later chunk.
        """
        rows = self.doc_rows(doc)
        if not len(rows):
            return None
        if prefer is not None and prefer in rows and self.start[prefer] <= position < self.end[prefer]:
            return prefer
        starts = self.start[rows.start : rows.stop]
        candidate = int(np.searchsorted(starts, position, "right")) - 1
        for offset in range(candidate, max(candidate - 4, -1), -1):
            row = rows.start + offset
            if self.start[row] <= position < self.end[row]:
                return row
        return None

    # -- review state ----------------------------------------------------------------------------

    def doc_sha_map(self) -> dict[str, str]:
        return dict(zip(self.doc_ids, self.doc_sha256, strict=True))

    def apply_states(self, states: dict[str, ChunkState], docs: list[int] | None = None) -> None:
        """Install derived states (by chunk_id); with ``docs``, only those documents' rows are replaced."""
        if docs is None:
            self.verdict[:] = UNREVIEWED
            self.states = {}
            rows_ids = self.chunk_ids
            base = 0
            scopes = [(0, self.n_chunks)]
        else:
            scopes = [(int(self.doc_first[d]), int(self.doc_first[d + 1])) for d in docs]
        for first, last in scopes:
            if docs is not None:
                self.verdict[first:last] = UNREVIEWED
                for row in range(first, last):
                    self.states.pop(row, None)
                rows_ids = self.chunk_ids.slice(first, last - first)
                base = first
            if not states or last == first:
                continue
            value_set = pa.array(list(states), pa.string())
            found = pc.index_in(rows_ids, value_set=value_set)
            positions = np.flatnonzero(pc.is_valid(found).to_numpy(zero_copy_only=False))
            for position in positions:
                row = base + int(position)
                state = states[self.chunk_id(row)]
                self.states[row] = state
                self.verdict[row] = FLAGGED if state.flagged else OK if state.verdict == "ok" else UNREVIEWED

    def reload_state(
        self, ledger: Ledger, docs: list[int] | None = None, pending: Sequence[Event] = ()
    ) -> None:
        """Re-derive state from the ledger, for the whole dataset or some documents. ``pending``: events
        decided but not written yet (the reviewer's queue while another program holds the ledger's
        lock), after the ledger's own; their ids sort after every written one."""
        if docs is None:
            events = ledger.events(self.dataset, self.version)
        else:
            events = []
            for doc in docs:
                events.extend(ledger.events(self.dataset, self.version, doc_id=self.doc_ids[doc]))
        events.extend(
            e
            for e in pending
            if e.dataset == self.dataset
            and e.version == self.version
            and (docs is None or self.doc_number(e.doc_id) in docs)
        )
        sha = self.doc_sha_map()
        self.apply_states(derive_state(events, sha), docs)
        self._apply_disagreements(disagreements(reviewer_verdicts(events, sha)), docs)

    def _apply_disagreements(self, found: dict[str, dict[str, str]], docs: list[int] | None) -> None:
        """Install where reviewers differ (by chunk_id), for the whole dataset or ``docs``."""
        if docs is None:
            self.disagree = np.zeros(self.n_chunks, dtype=bool)
            self.verdicts_by_reviewer = {}
            scopes = [(0, self.n_chunks)]
        else:
            scopes = [(int(self.doc_first[d]), int(self.doc_first[d + 1])) for d in docs]
        for first, last in scopes:
            self.disagree[first:last] = False
            for row in [r for r in self.verdicts_by_reviewer if first <= r < last]:
                del self.verdicts_by_reviewer[row]
        if not found:
            return
        value_set = pa.array(list(found), pa.string())
        for first, last in scopes:
            positions = pc.index_in(self.chunk_ids.slice(first, last - first), value_set=value_set)
            for position in np.flatnonzero(pc.is_valid(positions).to_numpy(zero_copy_only=False)):
                row = first + int(position)
                self.disagree[row] = True
                self.verdicts_by_reviewer[row] = found[self.chunk_id(row)]

    def progress(self) -> tuple[int, int, int]:
        """(reviewed, total, flagged) chunks."""
        return (
            int(np.count_nonzero(self.verdict != UNREVIEWED)),
            self.n_chunks,
            int(np.count_nonzero(self.verdict == FLAGGED)),
        )

    def progress_text(self) -> str:
        reviewed, total, flagged = self.progress()
        return f"{reviewed:,} of {total:,} reviewed · {flagged:,} flagged"

    def set_recheck(self, reviewer: str) -> int:
        """After a reprocess: mark the chunks to re-check, those of documents rechunked for ``reviewer``'s
        flags that the parent snapshot did not have (new chunk ids). Returns how many; none unless this
        snapshot is a reprocess."""
        self.recheck = np.zeros(self.n_chunks, dtype=bool)
        manifest = self.snapshot.manifest
        parent = manifest.get("parent_snapshot")
        if manifest.get("kind") != "reprocess" or not isinstance(parent, int) or not self.n_chunks:
            return 0
        docs = {
            entry.get("doc_id")
            for entry in manifest.get("applied_flags") or []
            if isinstance(entry, dict) and entry.get("reviewer") == reviewer
        }
        numbers = [number for doc_id in docs if (number := self.doc_number(str(doc_id))) is not None]
        if not numbers:
            return 0
        try:
            parent_snapshot = Snapshot.open(self.snapshot.path.parent / f"{parent:04d}")
            parent_ids = parent_snapshot.chunks(["chunk_id"]).column("chunk_id").combine_chunks()
        except (DatasetError, pa.ArrowException):  # the parent is gone: every chunk of those documents is new
            parent_ids = pa.array([], pa.string())
        new = ~pc.is_in(self.chunk_ids, value_set=parent_ids).to_numpy(zero_copy_only=False).astype(bool)
        in_docs = np.isin(self.chunk_doc, numbers)
        self.recheck = new & in_docs
        return int(np.count_nonzero(self.recheck))

    def finding_mask(self, code: str) -> np.ndarray:
        """Chunks that carry finding ``code`` (none when no chunk does)."""
        if code not in self.finding_codes:
            return np.zeros(self.n_chunks, dtype=bool)
        bit = np.uint64(1) << np.uint64(self.finding_codes.index(code))
        return (self.finding_bits & bit) != 0

    def finding_queues(self) -> list[tuple[str, int]]:
        """(queue, chunks with the finding) for each finding some chunk has, largest first."""
        return [(finding_queue(code), count) for code, count in self.finding_counts().items()]

    def queue_progress(self, queue: str) -> tuple[int, int]:
        """(decided, total) of a queue: a finding queue counts every chunk with the finding, decided or
        not; Unreviewed and All count the whole dataset, Suspicious its suspicious chunks."""
        if queue.startswith(FINDING_QUEUE):
            scope = self.finding_mask(queue[len(FINDING_QUEUE) :])
        elif queue == "Suspicious":
            scope = self.suspicious
        elif queue == "Re-check":
            scope = self.recheck
        elif queue in ("Flagged", "OK", "Disagreements"):
            count = int(np.count_nonzero(self.queue_mask(queue)))
            return count, count
        else:
            scope = np.ones(self.n_chunks, dtype=bool)
        return int(np.count_nonzero(scope & (self.verdict != UNREVIEWED))), int(np.count_nonzero(scope))

    def queue_mask(self, queue: str) -> np.ndarray:
        if queue.startswith(FINDING_QUEUE):
            return self.finding_mask(queue[len(FINDING_QUEUE) :]) & (self.verdict == UNREVIEWED)
        if queue == "Unreviewed":
            return self.verdict == UNREVIEWED
        if queue == "Suspicious":
            return self.suspicious
        if queue == "Flagged":
            return self.verdict == FLAGGED
        if queue == "OK":
            return self.verdict == OK
        if queue == "All":
            return np.ones(self.n_chunks, dtype=bool)
        if queue == "Disagreements":
            return self.disagree.copy()
        if queue == "Re-check":
            return self.recheck & (self.verdict == UNREVIEWED)
        raise ValueError(f"unknown queue {queue!r} (one of {', '.join(QUEUES)})")

    def documents_in_queue(self, queue: str) -> np.ndarray:
        """Per document: whether any of its chunks is in ``queue``."""
        mask = self.queue_mask(queue)
        counts = np.diff(self.doc_first)
        if not self.n_chunks:
            return np.zeros(self.n_documents, dtype=bool)
        hits = np.add.reduceat(mask.astype(np.int64), np.minimum(self.doc_first[:-1], self.n_chunks - 1))
        return (counts > 0) & (hits > 0)

    def next_row(self, mask: np.ndarray, row: int | None, step: int = 1) -> int | None:
        """The nearest row after (step 1) or before (step -1) ``row`` where ``mask`` holds, across documents."""
        if step > 0:
            first = 0 if row is None else row + 1
            hits = np.flatnonzero(mask[first:])
            return first + int(hits[0]) if len(hits) else None
        last = self.n_chunks if row is None else row
        hits = np.flatnonzero(mask[:last])
        return int(hits[-1]) if len(hits) else None

    def next_suspicious(self, row: int | None, step: int = 1) -> int | None:
        return self.next_row(self.suspicious, row, step)

    def next_to_review(self, row: int | None, step: int = 1) -> int | None:
        """N/P: the nearest suspicious chunk no one has decided yet (flagged or OK chunks are passed over)."""
        return self.next_row(self.suspicious & (self.verdict == UNREVIEWED), row, step)

    def row_of_chunk_id(self, chunk_id: str | None) -> int | None:
        if chunk_id is None or not self.n_chunks:
            return None
        position = pc.index(self.chunk_ids, chunk_id).as_py()
        return None if position is None or position < 0 else int(position)

    def resume_row(self, events: Sequence[Event], reviewer: str | None = None) -> int | None:
        """Where a reviewer picks up: the next chunk to review after the chunk of their latest decision (a
        flag, OK or note on this snapshot's chunks; anyone's when they have none), else that chunk's
        successor; with no decisions at all, the first chunk to review. None for an empty snapshot."""
        decisions = [
            e
            for e in events
            if e.kind in ("flag", "mark_ok", "note", "unflag")
            and e.dataset == self.dataset
            and e.version == self.version
        ]
        mine = [e for e in decisions if reviewer is not None and e.reviewer == reviewer] or decisions
        for event in sorted(mine, key=lambda e: e.id, reverse=True):
            row = self.row_of_chunk_id(event.chunk_id)
            if row is not None:
                after = self.next_to_review(row)
                if after is not None:
                    return after
                later = self.next_row(self.verdict == UNREVIEWED, row)
                return later if later is not None else row
        if not self.n_chunks:
            return None
        first = self.next_to_review(None)
        return first if first is not None else 0

    # -- bulk selections -------------------------------------------------------------------------

    def section_titles(self) -> np.ndarray:
        """Per row, the chunk's innermost section title ("" when it has none); read once, on demand (one
        column of Arrow for the whole snapshot)."""
        cached = getattr(self, "_section_titles", None)
        if cached is not None:
            return cached
        titles = np.full(self.n_chunks, "", dtype=object)
        for row, path in enumerate(self.chunk_column("section_path")):
            if path:
                titles[row] = str(path[-1])
        self._section_titles = titles
        return titles

    def chunk_column(self, name: str) -> list[Any]:
        """One column of ``chunks.parquet`` for every row, in row order (read whole: a few columns of
        the snapshot at once, for a search or a selection over all chunks, not per document)."""
        values: list[Any] = [None] * self.n_chunks
        if not self.n_chunks:
            return values
        table, rows, hit = self._column_rows(name)
        for row, value, ok in zip(rows.tolist(), table.column(name).to_pylist(), hit.tolist(), strict=True):
            if ok:
                values[row] = value
        return values

    def _column_rows(self, name: str) -> tuple[pa.Table, np.ndarray, np.ndarray]:
        """``chunks.parquet``'s doc_id, chunk_index and ``name``, with the row of each of its chunks (and
        whether it has one: a chunk of a document the snapshot does not list has none)."""
        try:
            table = self.snapshot.chunks(["doc_id", "chunk_index", name])
            ordinal = pc.index_in(table.column("doc_id"), value_set=pa.array(self.doc_ids, pa.string()))
            known = pc.is_valid(ordinal).to_numpy(zero_copy_only=False)
            doc = ordinal.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            chunk_index = table.column("chunk_index").to_numpy().astype(np.int64)
        except pa.ArrowException as exc:
            raise DatasetError(
                f"{self.snapshot.path}: malformed column {name!r} in chunks.parquet: {exc}"
            ) from None
        # Rows are ordered by (document, chunk_index): each chunk's row is found by that key.
        scale = int(max(self.chunk_index.max(), chunk_index.max() if len(chunk_index) else 0)) + 1
        keys = self.chunk_doc.astype(np.int64) * scale + self.chunk_index
        wanted = doc * scale + chunk_index
        rows = np.minimum(np.searchsorted(keys, wanted), self.n_chunks - 1)
        return table, rows, (keys[rows] == wanted) & known

    def text_matches(self, needle: str) -> np.ndarray:
        """Per row, whether the chunk's text contains ``needle`` (case-insensitive; Arrow's substring
        search over the whole text column, read once per search)."""
        mask = np.zeros(self.n_chunks, dtype=bool)
        if not needle or not self.n_chunks:
            return mask
        table, rows, hit = self._column_rows("text")
        found = pc.fill_null(pc.match_substring(table.column("text"), needle, ignore_case=True), False)
        found = found.to_numpy(zero_copy_only=False).astype(bool) & hit
        mask[rows[found]] = True
        return mask

    def go_to(self, spec: str, doc: int | None = None) -> tuple[int | None, int | None, str]:
        """Where "Go to" takes the reviewer: ``12`` (chunk 12 of document ``doc``), ``guides/refunds.md``
        (a document), ``guides/refunds.md#12`` or ``guides/refunds.md 12`` (a chunk of it); a unique
        part of a doc_id names it too. Returns (document, row or None, "") or (None, None, why not)."""
        spec = spec.strip()
        if not spec:
            return None, None, "type a chunk number or a document id"
        name, number = spec, None
        for separator in ("#", " "):
            head, sep, tail = spec.rpartition(separator)
            if sep and tail.strip().isdigit() and head.strip():
                name, number = head.strip(), int(tail)
                break
        if spec.isdigit():
            if doc is None:
                return None, None, "open a document first, or give its id: DOC_ID#N"
            name, number = self.doc_ids[doc], int(spec)
        target = self.doc_number(name)
        if target is None:
            matches = [i for i, doc_id in enumerate(self.doc_ids) if name.lower() in doc_id.lower()]
            if len(matches) != 1:
                return (
                    None,
                    None,
                    (
                        f"no document {name!r}"
                        if not matches
                        else f"{len(matches)} documents match {name!r}: "
                        + ", ".join(self.doc_ids[i] for i in matches[:5])
                        + (" …" if len(matches) > 5 else "")
                    ),
                )
            target = matches[0]
        if number is None:
            return target, None, ""
        row = self.row_of(target, number)
        if row is None:
            rows = self.doc_rows(target)
            return (
                None,
                None,
                (
                    f"{self.doc_ids[target]} has no chunk {number} (chunks 0–{len(rows) - 1})"
                    if len(rows)
                    else f"{self.doc_ids[target]} has no chunks"
                ),
            )
        return target, row, ""

    def same_section_mask(self, row: int) -> np.ndarray:
        """Chunks whose innermost section title is this chunk's (none when it has no title)."""
        titles = self.section_titles()
        title = titles[row]
        if not title:
            return np.zeros(self.n_chunks, dtype=bool)
        return titles == title

    def same_findings_mask(self, row: int) -> np.ndarray:
        """Chunks that carry every finding this chunk carries (none when it has no finding)."""
        bits = self.finding_bits[row]
        if not bits:
            return np.zeros(self.n_chunks, dtype=bool)
        return (self.finding_bits & bits) == bits

    def range_mask(self, first: int, last: int) -> np.ndarray:
        """The rows from ``first`` to ``last`` (either order), across documents."""
        low, high = sorted((first, last))
        mask = np.zeros(self.n_chunks, dtype=bool)
        mask[low : high + 1] = True
        return mask

    # -- statistics ------------------------------------------------------------------------------

    def other_units(self) -> dict[str, int]:
        """Chunks measured in a unit other than ``self.unit``, per unit (left out of the size histogram)."""
        return {unit: n for unit, n in self._unit_counts.items() if unit != self.unit}

    def finding_counts(self) -> dict[str, int]:
        """Chunks carrying each finding code, largest first (codes no chunk has are left out)."""
        counts = {}
        for number, code in enumerate(self.finding_codes):
            n = int(np.count_nonzero(self.finding_bits >> np.uint64(number) & np.uint64(1)))
            if n:
                counts[code] = n
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def size_histogram(self, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
        """Counts and bin edges of the sizes of the chunks measured in ``self.unit`` (the others are left
        out: see ``other_units``), with room for the largest budget."""
        sizes = self.size if self.in_unit.all() else self.size[self.in_unit]
        top = max(
            [int(sizes.max()) if len(sizes) else 1]
            + [b.max_size for b in self.budgets if b.unit == self.unit]
        )
        return np.histogram(sizes, bins=bins, range=(0, max(1, top)))


@dataclass(frozen=True)
class Answer:
    """One chunk a retriever ranks for a question: its rank (1 = best), row and score."""

    retriever: str
    rank: int
    row: int
    score: float


class QuestionBox:
    """The reviewer's question box: the top k chunks of a snapshot for a question, by BM25 and by dense
    retrieval (``chunkyard.chunking.evaluation``'s retrievers, over ``embed_text`` as `chunkyard eval`
    ranks them; the dense embeddings come from the snapshot's cache, or are computed and stored there).
    Each retriever is built at its first question."""

    RETRIEVERS = ("bm25", "dense")

    def __init__(self, index: ReviewIndex):
        self.index = index
        self._texts: list[str] | None = None
        self._retrievers: dict[str, Any] = {}

    def texts(self) -> list[str]:
        if self._texts is None:
            self._texts = [text or "" for text in self.index.chunk_column("embed_text")]
        return self._texts

    def retriever(self, name: str) -> Any:
        if name not in self._retrievers:
            from chunkyard.chunking.evaluation import retrievers

            if name == "bm25":
                self._retrievers[name] = retrievers.BM25Retriever(self.texts())
            elif name == "dense":
                from chunkyard.chunking.embeddings import cached_embeddings  # the cache sync shares

                chunk_ids = self.index.chunk_ids.to_pylist()
                cached = cached_embeddings(self.index.snapshot.path, chunk_ids, self.texts())
                self._retrievers[name] = retrievers.DenseRetriever(cached.vectors)
            else:
                raise ValueError(f"unknown retriever {name!r} (one of {', '.join(self.RETRIEVERS)})")
        return self._retrievers[name]

    def ask(self, question: str, k: int = 5, names: Sequence[str] = RETRIEVERS) -> dict[str, list[Answer]]:
        """Per retriever, its top ``k`` chunks for ``question``, best first (none for an empty question)."""
        from chunkyard.chunking.evaluation.retrievers import top_k

        question = question.strip()
        answers: dict[str, list[Answer]] = {}
        for name in names:
            if not question or not self.index.n_chunks:
                answers[name] = []
                continue
            scores = self.retriever(name).scores([question])[0]
            answers[name] = [
                Answer(name, rank, row, float(scores[row]))
                for rank, row in enumerate(top_k(scores, k), start=1)
            ]
        return answers


def open_ledger_for(index: ReviewIndex) -> Ledger:
    """The ledger of the index's dataset (created when absent)."""
    return Ledger(ledger_path(index.snapshot.path))


def config_facts(manifest: dict[str, Any]) -> tuple[str | None, list[Budget]]:
    """The reviewer name and size budgets from the config the snapshot was made with, if readable."""
    text = (manifest.get("config") or {}).get("text") if isinstance(manifest.get("config"), dict) else None
    if not isinstance(text, str):
        return None, []
    try:
        from chunkyard.chunking.config import load_config_text

        config = load_config_text(text)
    except Exception:  # an old or foreign config must not stop the reviewer from opening
        return None, []
    budgets = [Budget(config.chunker.max_size, config.chunker.unit, "default")]
    for patterns, settings in config.rule_settings:
        budget = Budget(settings.max_size, settings.unit, ", ".join(patterns))
        if all((b.max_size, b.unit) != (budget.max_size, budget.unit) for b in budgets):
            budgets.append(budget)
    return config.model.reviewer, budgets


def reviewer_name(index: ReviewIndex | None = None) -> str:
    """The config's ``reviewer`` when set, else the OS user."""
    if index is not None and index.config_reviewer:
        return index.config_reviewer
    return default_reviewer()


__all__ = [
    "FINDING_QUEUE",
    "QUEUES",
    "Answer",
    "ChunkDetail",
    "QuestionBox",
    "ReviewPace",
    "finding_queue",
    "format_duration",
    "queue_title",
    "Budget",
    "LedgerError",
    "OffsetMap",
    "ReviewIndex",
    "display_text",
    "elide_path",
    "disagreements",
    "reviewer_verdicts",
    "open_ledger_for",
    "reviewer_name",
]
