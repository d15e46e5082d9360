"""The reviewer's controller: which chunk is current, verdicts written to the ledger, undo and redo.

Every verdict is written to the ledger the moment it is given (there is no Save); the undo stack
holds commands whose undo appends a ``retract`` event and whose redo retracts that retraction, so
the ledger stays append-only and a killed reviewer loses nothing. Loading runs in a worker thread.

Writes happen on the GUI thread, so they wait for another program's lock on the ledger (a
reprocess, another reviewer, a script) only ``WRITE_PATIENCE_MS``: what cannot be written at once
waits in a queue, in order, shown in the window as already decided and in the status bar as
waiting, and is retried every ``RETRY_MS`` until it is written. Closing the window writes the queue
first (``flush``), or says what could not be written.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QThread, QTimer, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from chunkyard.chunking.dataset import Snapshot, Stopped
from chunkyard.chunking.errors import ChunkyardError
from chunkyard.chunking.ledger import (
    REASONS,
    Event,
    Ledger,
    LedgerBusy,
    LedgerError,
    Target,
    check_event,
    now_stamp,
)
from chunkyard.chunking.review import (
    FINDING_QUEUE,
    QUEUES,
    ReviewIndex,
    ReviewPace,
    format_duration,
    open_ledger_for,
    queue_title,
    reviewer_name,
)

# How long one write waits for another program's lock before its decision joins the queue (the
# window does not respond meanwhile), how often the queue is retried, and how long closing waits.
WRITE_PATIENCE_MS = 50
RETRY_MS = 250
CLOSE_PATIENCE_MS = 2000
BUSY = "the review ledger is busy (another program is writing to it)"
# Ids of queued events, for deriving state before they are written: after every written id.
_PROVISIONAL = 1 << 62


@dataclass(eq=False)
class PendingEvent:
    """A decision to append to the ledger: queued until written (``event_id`` is then its id)."""

    seq: int
    kind: str
    target: Target
    reviewer: str
    created_at: str
    reason: str | None = None
    note: str | None = None
    retracts: PendingEvent | None = (
        None  # the decision a retract cancels (written before it: the queue is in order)
    )
    event_id: int | None = None

    @property
    def id(self) -> int:
        return self.event_id if self.event_id is not None else _PROVISIONAL + self.seq

    def as_event(self) -> Event:
        t = self.target
        return Event(
            self.id,
            self.kind,
            t.dataset,
            t.version,
            t.snapshot,
            t.doc_id,
            t.doc_sha256,
            t.chunk_id,
            t.chunk_index,
            t.boundary,
            self.reason,
            self.note,
            self.retracts.id if self.retracts is not None else None,
            self.reviewer,
            self.created_at,
        )


class Loader(QThread):
    """Opens a dataset and its ledger off the GUI thread."""

    loaded = Signal(object, object, str)  # index, ledger or None, ledger problem ("" if none)
    failed = Signal(str)

    def __init__(self, path: str | Path, parent: QObject | None = None):
        super().__init__(parent)
        self.path = path
        self.usage = False  # whether a failure was the path given (no dataset there), not a damaged dataset

    def run(self) -> None:
        try:
            index = ReviewIndex.load(self.path)
        except ChunkyardError as exc:
            self.usage = bool(getattr(exc, "usage", False))
            self.failed.emit(str(exc))
            return
        except Exception as exc:  # a hostile file must end in a dialog, not a crash
            self.failed.emit(f"{self.path}: cannot open: {type(exc).__name__}: {exc}")
            return
        ledger: Ledger | None = None
        problem = ""
        try:
            ledger = open_ledger_for(index)
            index.reload_state(ledger)
            # Opened, but perhaps only for reading: then say so now, not at the first decision.
            problem = ledger.write_problem() or ""
        except ChunkyardError as exc:
            problem = str(exc)
            if ledger is not None:
                ledger.close()
                ledger = None
        except Exception as exc:
            problem = f"review ledger unusable: {type(exc).__name__}: {exc}"
            ledger = None
        self.loaded.emit(index, ledger, problem)


class Verifier(QThread):
    """Checks the open snapshot in the background (``Snapshot.verify``: the checksums recorded at
    publish, every chunk's text against its document), so damage in a column the reviewer never reads
    is reported as soon as the dataset is shown, and the first paint does not wait for it."""

    failed = Signal(str)

    def __init__(self, snapshot: Snapshot, parent: QObject | None = None):
        super().__init__(parent)
        self.snapshot = snapshot

    def run(self) -> None:
        try:
            self.snapshot.verify(should_stop=self.isInterruptionRequested)
        except Stopped:
            return
        except Exception as exc:  # a DatasetError, or whatever a hostile file raises: a dialog
            detail = str(exc) if isinstance(exc, ChunkyardError) else f"{type(exc).__name__}: {exc}"
            self.failed.emit(
                f"{detail}\n\nDo not approve chunks of this snapshot: what is shown may not be what ships."
            )


class _Decision(QUndoCommand):
    """One verdict already given (written, or queued) as ``event``; undo/redo append retract events."""

    def __init__(self, controller: ReviewController, row: int, event: PendingEvent, text: str):
        super().__init__(text)
        self.controller = controller
        self.row = row
        self.event = event
        self.undo_event: PendingEvent | None = None
        self._first = True

    def redo(self) -> None:
        if self._first:  # the event was given before the command was pushed
            self._first = False
            return
        if self.undo_event is not None:
            self.controller._write_retract(self.undo_event, self.row)

    def undo(self) -> None:
        self.undo_event = self.controller._write_retract(self.event, self.row)


class ReviewController(QObject):
    """Selection, navigation and verdicts over one opened dataset."""

    loading = Signal(str)
    loaded = Signal()
    failed = Signal(str)  # a message for an error dialog
    document_changed = Signal(int)  # -1 for none
    current_changed = Signal(int)  # dataset row, -1 for none
    states_changed = Signal()
    boundary_mode_changed = Signal(bool)
    notice = Signal(str)  # a short message for the status bar (nothing went wrong, nothing was done)
    pending_changed = Signal(int, str)  # decisions waiting to be written, and why ("" once none wait)
    read_only_changed = Signal(str)  # why decisions cannot be recorded ("" when they can)
    bulk_changed = Signal(int, str)  # chunks in the bulk selection, and how they were chosen (0, "" for none)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.index: ReviewIndex | None = None
        self.ledger: Ledger | None = None
        self.ledger_problem = ""
        self.read_only = (
            ""  # why decisions cannot be recorded (no ledger, a read-only one, the dataset deleted)
        )
        self._ledger_identity: tuple[int, int] | None = None  # (device, inode) of the ledger file opened
        self.undo_stack = QUndoStack(self)
        self.doc: int | None = None
        self.row: int | None = None
        self.queue = "Unreviewed"
        self.reviewer = reviewer_name()
        self.reviewer_edited = False
        self.boundary_mode = False
        self.auto_advance = True
        # The chunk a verdict was just given on, while the reviewer has not moved since the verdict moved on:
        # a note typed now is about it, not about the chunk the verdict moved to (maybe in another document).
        self.decided_row: int | None = None
        self.pace = ReviewPace()  # decisions per minute, for the queue's time left
        # Bulk decisions: chunks chosen together (same findings, same section title, a range), not decided yet.
        self.bulk: np.ndarray | None = None
        self.bulk_what = ""
        self.bulk_anchor: int | None = None  # where a range starts (the first Ctrl+Shift+R)
        self._loader: Loader | None = None
        self._verifier: Verifier | None = None
        self.load_refused = (
            False  # the last load failed on the path given (the CLI exits 2), not a damaged dataset
        )
        self._seen_event = 0
        # Another reviewer may be writing the same ledger: pick up their events every few seconds.
        self._poll = QTimer(self)
        self._poll.setInterval(3000)
        self._poll.timeout.connect(self.poll_ledger)
        # Decisions not written yet (the ledger was locked by another program), oldest first.
        self._pending: deque[PendingEvent] = deque()
        self._seq = 0
        self._write_problem = ""  # why the oldest queued event could not be written at the last attempt
        self._reported = (
            ""  # the last write error other than a lock shown in a dialog (once, not at every retry)
        )
        self._retry = QTimer(self)
        self._retry.setInterval(RETRY_MS)
        self._retry.timeout.connect(self.flush)

    # -- opening ---------------------------------------------------------------------------------

    def open(self, path: str | Path) -> None:
        """Start loading ``path`` in a worker thread; ``loaded`` or ``failed`` follows."""
        if self._loader is not None and self._loader.isRunning():
            return
        if not self.flush(CLOSE_PATIENCE_MS):
            self.failed.emit(
                f"{self.pending_text()}: {self.pending_problem()}\n\nThey are saved as soon as the "
                "ledger is free; open another dataset after that."
            )
            return
        self.loading.emit(str(path))
        loader = Loader(path, self)
        # What a loader delivers after the window was closed (close() dropped it) is not installed.
        loader.loaded.connect(lambda index, ledger, problem: self._on_loaded(index, ledger, problem, loader))
        loader.failed.connect(lambda message: self._on_load_failed(message, loader))
        self._loader = loader
        loader.start()

    def _on_load_failed(self, message: str, loader: Loader) -> None:
        if loader is self._loader:
            self.load_refused = loader.usage
            self.failed.emit(message)

    def start_row(self) -> int | None:
        """Where reviewing resumes: after this reviewer's latest decision in the ledger (``ReviewIndex.resume_row``)."""
        if self.index is None:
            return None
        events: list[Event] = []
        if self.ledger is not None:
            try:
                events = self.ledger.events(self.index.dataset, self.index.version)
            except ChunkyardError:
                events = []
        return self.index.resume_row(events, self.reviewer)

    def is_loading(self) -> bool:
        """Whether a dataset is being read in the worker thread (``loaded`` or ``failed`` not yet sent)."""
        return self._loader is not None and self._loader.isRunning()

    def wait_loaded(self, timeout_ms: int = 60000) -> bool:
        return self._loader is None or self._loader.wait(timeout_ms)

    def _on_loaded(
        self, index: ReviewIndex, ledger: Ledger | None, problem: str, loader: Loader | None = None
    ) -> None:
        if loader is not None and loader is not self._loader:  # closed while it was loading
            if ledger is not None:
                ledger.close()
            return
        self.close()
        self.index, self.ledger, self.ledger_problem = index, ledger, problem
        self.read_only = problem or ("" if ledger is not None else "no review ledger is open")
        self._ledger_identity = self._identity(ledger)
        if not self.reviewer_edited:
            self.reviewer = reviewer_name(index)
        self._seen_event = ledger.last_event_id() if ledger is not None else 0
        self.doc = self.row = None
        index.set_recheck(self.reviewer)  # after a reprocess: the chunks rechunked for this reviewer's flags
        self.loaded.emit()
        self.read_only_changed.emit(self.read_only)
        if problem:
            self.failed.emit(f"{problem}\n\nThe dataset is open read-only: decisions cannot be recorded.")
        if ledger is not None:
            # On the GUI thread: wait a moment for another program's lock, then queue (``flush``).
            ledger.set_patience(WRITE_PATIENCE_MS, retries=0)
            self._poll.start()
        verifier = self._verifier = Verifier(index.snapshot, self)
        verifier.failed.connect(
            lambda message: self.failed.emit(message) if verifier is self._verifier else None
        )
        verifier.start()

    def wait_verified(self, timeout_ms: int = 60000) -> bool:
        return self._verifier is None or self._verifier.wait(timeout_ms)

    def close(self) -> None:
        loader = self._loader
        if loader is not None and loader.isRunning():
            # A QThread destroyed while it runs aborts the process (closing during a big load did).
            # Loading cannot be interrupted; it is waited for and what it loaded is dropped.
            self._loader = None
            loader.wait()
        verifier, self._verifier = self._verifier, None
        if verifier is not None:  # it stops within one batch of rows
            verifier.requestInterruption()
            verifier.wait()
        self._poll.stop()
        if self._pending and not self.flush(CLOSE_PATIENCE_MS):
            # The window asks before it closes (MainWindow.closeEvent): what is left, the user chose to drop.
            self.drop_pending()
        self._retry.stop()
        self.undo_stack.clear()
        if self.ledger is not None:
            self.ledger.close()
        self.index, self.ledger = None, None

    # -- the ledger file: still the one opened? ---------------------------------------------------

    @staticmethod
    def _identity(ledger: Ledger | None) -> tuple[int, int] | None:
        if ledger is None:
            return None
        try:
            info = os.stat(ledger.path)
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def check_ledger_file(self) -> bool:
        """False (and read-only from now on, said once) when the ledger file opened is gone or replaced:
        the dataset was deleted or rebuilt while the window was open. SQLite would go on writing to the
        unlinked file, and every decision would be lost without a word."""
        if self.ledger is None or self._ledger_identity is None:
            return True
        if self._identity(self.ledger) == self._ledger_identity:
            return True
        if not self.read_only.startswith("the dataset was deleted"):
            waiting = f" {self.pending_text()}, which cannot be saved now." if self._pending else ""
            self.read_only = (
                f"the dataset was deleted or replaced while it was open ({self.ledger.path} is gone): "
                "decisions cannot be recorded; reopen the dataset to go on reviewing"
            )
            self._poll.stop()
            self.undo_stack.clear()  # an undo would have to be recorded too
            self.read_only_changed.emit(self.read_only)
            self.failed.emit(
                f"{self.read_only[0].upper()}{self.read_only[1:]}.{waiting}\n\nEvery decision "
                "given before it was deleted had been saved; nothing more is recorded in this "
                "window."
            )
        return False

    # -- writing: at once, or queued while another program holds the ledger's lock ----------------

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def drop_pending(self) -> int:
        """Forget the decisions not written yet (the user chose to close without them); how many."""
        count = len(self._pending)
        self._pending.clear()
        self._retry.stop()
        if count:
            self.pending_changed.emit(0, "")
        return count

    def pending_text(self) -> str:
        n = len(self._pending)
        return f"{n} decision{'s' if n != 1 else ''} waiting to be saved"

    def pending_problem(self) -> str:
        return self._write_problem or BUSY

    def _give(
        self,
        kind: str,
        target: Target,
        *,
        reason: str | None = None,
        note: str | None = None,
        retracts: PendingEvent | None = None,
    ) -> PendingEvent:
        """Queue one event behind any still waiting, and try to write the queue now."""
        check_event(kind, reason, 0 if retracts is not None else None)  # refused now, never poisons the queue
        self._seq += 1
        event = PendingEvent(self._seq, kind, target, self.reviewer, now_stamp(), reason, note, retracts)
        self._pending.append(event)
        self.flush()
        return event

    def flush(self, patience_ms: int | None = None) -> bool:
        """Write queued events, oldest first, until one cannot be written; True when none are left.

        Each attempt waits ``WRITE_PATIENCE_MS`` for another program's lock (``patience_ms`` instead,
        once, when closing). Retried every ``RETRY_MS`` while events wait."""
        ledger = self.ledger
        if ledger is None or not self._pending:
            self._retry.stop()
            return not self._pending
        if not self.check_ledger_file():  # never write to a deleted dataset's ledger
            self._retry.stop()
            self.pending_changed.emit(len(self._pending), self.read_only)
            return False
        if patience_ms is not None:
            ledger.set_patience(patience_ms, retries=0)
        problem = ""
        try:
            while self._pending:
                event = self._pending[0]
                retracted = event.retracts.event_id if event.retracts is not None else None
                try:
                    event.event_id = ledger.append(
                        event.kind,
                        event.target,
                        reviewer=event.reviewer,
                        reason=event.reason,
                        note=event.note,
                        target_event=retracted,
                        created_at=event.created_at,
                    )
                except LedgerBusy:
                    problem = BUSY
                    break
                except LedgerError as exc:  # a full disk, a read-only folder, ...: retried all the same
                    problem = str(exc)
                    if problem != self._reported:  # said once, not every RETRY_MS
                        self._reported = problem
                        self.failed.emit(
                            f"The decision is not saved yet: {exc}\n\nIt waits with the others and "
                            "is tried again every moment; closing the window asks first."
                        )
                    break
                self._pending.popleft()
        finally:
            if patience_ms is not None:
                ledger.set_patience(WRITE_PATIENCE_MS, retries=0)
        self._write_problem = problem
        if not self._pending:
            self._reported = ""
            self._retry.stop()
        elif not self._retry.isActive():
            self._retry.start()
        self.pending_changed.emit(len(self._pending), problem)
        return not self._pending

    def _pending_events(self) -> list[Event]:
        return [event.as_event() for event in self._pending]

    # -- selection and navigation -----------------------------------------------------------------

    def select_document(self, doc: int | None, row: int | None = None) -> None:
        index = self.index
        if index is None or doc is None or not (0 <= doc < index.n_documents):
            return
        if doc != self.doc:
            self.doc = doc
            self.row = None
            self.document_changed.emit(doc)
        rows = index.doc_rows(doc)
        if row is None:
            row = rows.start if len(rows) else None
        self.select_row(row)

    def select_row(self, row: int | None) -> None:
        self.decided_row = None
        index = self.index
        if index is None or row is None or not (0 <= row < index.n_chunks):
            self.row = None
            self.current_changed.emit(-1)
            return
        doc = int(index.chunk_doc[row])
        if doc != self.doc:
            self.doc = doc
            self.document_changed.emit(doc)
        if row != self.row and self.boundary_mode:
            # B armed a flag on the boundary after the chunk it was pressed on, not after another one.
            self.set_boundary_mode(False)
        self.row = row
        self.current_changed.emit(row)

    def step_chunk(self, step: int) -> None:
        """J/K: the next or previous chunk, continuing into the neighbouring document."""
        if self.index is None or not self.index.n_chunks:
            return
        if self.row is None:
            start = self.index.doc_rows(self.doc).start if self.doc is not None else 0
            # A document without chunks sits between its neighbours: K goes to the one before.
            if step < 0 and self.doc is not None and start > 0:
                start -= 1
            self.select_row(min(start, self.index.n_chunks - 1))
            return
        self.select_row(min(max(self.row + step, 0), self.index.n_chunks - 1))

    def step_suspicious(self, step: int) -> bool:
        """N/P: the next or previous chunk with a finding that no one has decided yet, across documents
        (a flagged or OK chunk is passed over: N used to land on it, and 2 flagged it twice)."""
        if self.index is None:
            return False
        row = self.index.next_to_review(self._anchor(step), step)
        if row is not None:
            self.select_row(row)
        return row is not None

    def set_queue(self, queue: str) -> None:
        if queue not in QUEUES and not queue.startswith(FINDING_QUEUE):
            raise ValueError(f"unknown queue {queue!r}")
        self.queue = queue
        self.states_changed.emit()

    def first_in_queue(self) -> bool:
        """Go to the first chunk of the queue still to decide (a finding queue's first undecided chunk)."""
        if self.index is None:
            return False
        row = self.index.next_row(self.index.queue_mask(self.queue), None)
        if row is not None:
            self.select_row(row)
        return row is not None

    def queue_progress_text(self) -> str:
        """ "Finding undersized: 12 of 180 decided · 6.0/min · 28 min left" for the current queue."""
        if self.index is None:
            return ""
        decided, total = self.index.queue_progress(self.queue)
        parts = [f"{queue_title(self.queue)}: {decided:,} of {total:,} decided"]
        rate = self.pace.per_minute()
        if rate is not None:
            parts.append(f"{rate:.1f}/min")
            left = self.pace.time_left_s(total - decided)
            if left is not None and total > decided:
                parts.append(f"{format_duration(left)} left")
        return " · ".join(parts)

    def _anchor(self, step: int) -> int | None:
        if self.row is not None:
            return self.row
        if self.doc is not None and self.index is not None:
            rows = self.index.doc_rows(self.doc)
            return rows.start - 1 if step > 0 and rows.start > 0 else (rows.start if step < 0 else None)
        return None

    def advance(self) -> None:
        """After a verdict: the next chunk in the current queue, else simply the next chunk. The decided
        chunk stays the target of a note (``note_row``) until the reviewer moves."""
        if self.index is None or self.row is None:
            return
        decided = self.row
        row = self.index.next_row(self.index.queue_mask(self.queue), self.row, 1)
        if row is None:
            row = self.row + 1 if self.row + 1 < self.index.n_chunks else None
        if row is not None:
            self.select_row(row)
        self.decided_row = decided

    def note_row(self) -> int | None:
        """The chunk a note is for: the one just decided (a verdict moved on from it), else the current one."""
        return self.decided_row if self.decided_row is not None else self.row

    # -- verdicts --------------------------------------------------------------------------------

    @property
    def can_record(self) -> bool:
        return (
            self.index is not None and self.ledger is not None and self.row is not None and not self.read_only
        )

    def set_boundary_mode(self, on: bool) -> None:
        """B: the next flag targets the boundary after the current chunk instead of the chunk."""
        self.boundary_mode = on
        self.boundary_mode_changed.emit(on)

    def flag(self, reason: str) -> bool:
        if reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r}")
        if (
            self.boundary_mode
            and self.row is not None
            and self.index is not None
            and not self._has_next_in_doc(self.row)
        ):
            self.set_boundary_mode(False)
            self.notice.emit(
                f"Chunk {self._chunk_label()} is the last: there is no boundary after it; nothing was flagged"
            )
            return False
        on_boundary = self.boundary_mode and self.row is not None
        where = "boundary after chunk" if on_boundary else "chunk"
        done = self._record(
            "flag",
            reason=reason,
            boundary=on_boundary,
            text=f"flag {where} {self._chunk_label()} as {reason}",
        )
        if done:
            self.set_boundary_mode(False)
            if self.auto_advance:
                self.advance()
        return done

    def flag_number(self, number: int) -> bool:
        """Keys 1–9: the reason with that number."""
        if not 1 <= number <= len(REASONS):
            return False
        return self.flag(REASONS[number - 1])

    def mark_ok(self) -> bool:
        done = self._record("mark_ok", text=f"mark chunk {self._chunk_label()} OK")
        if done and self.auto_advance:
            self.advance()
        return done

    def set_note(self, text: str, row: int | None = None) -> bool:
        """A note on ``row`` (default: ``note_row()``, the chunk just decided or the current one)."""
        row = self.note_row() if row is None else row
        return self._record("note", note=text, text=f"note on chunk {self._chunk_label(row)}", row=row)

    def current_note(self, row: int | None = None) -> str:
        row = self.note_row() if row is None else row
        if self.index is None or row is None:
            return ""
        return self.index.state(row).note

    def describe_row(self, row: int) -> str:
        """ "chunk 3 of guides/refunds.md (flagged: mid_sentence)" — what a dialog about ``row`` names."""
        assert self.index is not None
        state = self.index.state(row)
        if state.flagged:
            verdict = "flagged: " + ", ".join(
                state.reasons + [f"boundary after: {r}" for r in state.boundary_reasons]
            )
        elif state.verdict == "ok":
            verdict = "marked OK"
        else:
            verdict = "not reviewed"
        return f"chunk {self._chunk_label(row)} ({verdict})"

    def set_reviewer(self, name: str) -> None:
        name = name.strip()
        if name:
            self.reviewer = name
            self.reviewer_edited = True
            if self.index is not None:
                self.index.set_recheck(name)
                self.states_changed.emit()

    def _chunk_label(self, row: int | None = None) -> str:
        row = self.row if row is None else row
        if self.index is None or row is None:
            return "?"
        return f"{int(self.index.chunk_index[row])} of {self.index.doc_ids[int(self.index.chunk_doc[row])]}"

    def _has_next_in_doc(self, row: int) -> bool:
        assert self.index is not None
        return row + 1 < self.index.n_chunks and self.index.chunk_doc[row + 1] == self.index.chunk_doc[row]

    def _record(
        self,
        kind: str,
        *,
        text: str,
        reason: str | None = None,
        note: str | None = None,
        boundary: bool = False,
        row: int | None = None,
    ) -> bool:
        if self.index is not None and self.ledger is not None and not self.read_only:
            self.check_ledger_file()
        if not self.can_record:
            if self.index is not None and self.read_only:
                # Said in a dialog once (at open, or when it happened) and in the window: a line here per key.
                self.notice.emit(f"Read-only, nothing recorded: {self.read_only}")
            return False
        assert self.index is not None and self.ledger is not None and self.row is not None
        row = self.row if row is None else row
        try:
            event = self._give(kind, self.index.target(row, boundary=boundary), reason=reason, note=note)
        except ChunkyardError as exc:
            self.failed.emit(f"The decision was not recorded: {exc}")
            return False
        if kind in ("flag", "mark_ok"):
            self.pace.record(time.monotonic())
        self._refresh_doc(row)
        self.undo_stack.push(_Decision(self, row, event, text))
        return True

    # -- bulk decisions ----------------------------------------------------------------------------

    def bulk_select(self, how: str) -> int:
        """Choose chunks to decide together, from the current one: ``findings`` (every chunk with all of
        its findings), ``section`` (its innermost section title), ``range`` (from the chunk where the
        first call was made to this one; that first call only marks it). Only chunks no one has decided
        are taken; a second choice narrows the first ("undersized" and then "Unresolved questions").
        Returns how many are chosen."""
        index, row = self.index, self.row
        if index is None or row is None:
            return 0
        if how == "range" and self.bulk_anchor is None:
            self.bulk_anchor = row
            self.notice.emit(
                f"A range starts at chunk {self._chunk_label(row)}: go to its last chunk and "
                "press Ctrl+Shift+R again"
            )
            return 0
        if how == "findings":
            mask, what = (
                index.same_findings_mask(row),
                "with " + " + ".join(index.findings(row) or ["no finding"]),
            )
        elif how == "section":
            title = index.section_titles()[row]
            mask, what = (
                index.same_section_mask(row),
                f"in sections titled {title!r}" if title else "(no title)",
            )
        elif how == "range":
            assert self.bulk_anchor is not None
            mask = index.range_mask(self.bulk_anchor, row)
            what = f"from chunk {self._chunk_label(self.bulk_anchor)} to chunk {self._chunk_label(row)}"
            self.bulk_anchor = None
        else:
            raise ValueError(f"unknown bulk selection {how!r}")
        mask = mask & (index.verdict == 0)
        if self.bulk is not None:
            mask &= self.bulk
            what = f"{self.bulk_what}, {what}"
        self.bulk, self.bulk_what = mask, what
        count = int(np.count_nonzero(mask))
        self.bulk_changed.emit(count, what)
        return count

    def clear_bulk(self) -> None:
        self.bulk, self.bulk_what, self.bulk_anchor = None, "", None
        self.bulk_changed.emit(0, "")

    def bulk_rows(self) -> list[int]:
        return [] if self.bulk is None else [int(r) for r in np.flatnonzero(self.bulk)]

    def bulk_decide(self, kind: str, reason: str | None = None) -> int:
        """Flag (``kind`` "flag" with ``reason``) or mark OK every chunk of the bulk selection, as one
        step of the undo stack; the selection is used up. Returns how many were decided."""
        rows = self.bulk_rows()
        if not rows or self.index is None:
            return 0
        if self.ledger is not None and not self.read_only:
            self.check_ledger_file()
        if self.read_only or self.ledger is None:
            self.notice.emit(f"Read-only, nothing recorded: {self.read_only}")
            return 0
        index = self.index
        what = f"flag {len(rows)} chunks as {reason}" if kind == "flag" else f"mark {len(rows)} chunks OK"
        done = 0
        self.undo_stack.beginMacro(what)
        try:
            for row in rows:
                try:
                    event = self._give(kind, index.target(row), reason=reason)
                except ChunkyardError as exc:
                    self.failed.emit(
                        f"Stopped after {done} of {len(rows)}: the decision was not recorded: {exc}"
                    )
                    break
                self.undo_stack.push(_Decision(self, row, event, f"{kind} chunk {self._chunk_label(row)}"))
                done += 1
        finally:
            self.undo_stack.endMacro()
        self.pace.record(time.monotonic(), done)
        docs = sorted({int(index.chunk_doc[row]) for row in rows})
        try:
            index.reload_state(self.ledger, docs, self._pending_events())
        except ChunkyardError as exc:
            self.failed.emit(str(exc))
        self.clear_bulk()
        self.states_changed.emit()
        self.notice.emit(f"{what[0].upper()}{what[1:]} (one step: Ctrl+Z undoes them all)")
        return done

    def add_constraint(self, kind: str, start: int, end: int | None = None) -> bool:
        """Record an explicit constraint on the current document at code points [start, end); undoable.

        ``keep_together`` keeps the span in one chunk, ``break_here`` puts a boundary at ``start``;
        reprocessing and later runs honour it (``chunkyard.chunking.constraints``).
        """
        from chunkyard.chunking.constraints import anchor
        from chunkyard.chunking.decisions import constraint_target

        if self.index is not None and self.ledger is not None and not self.read_only:
            self.check_ledger_file()
        if not self.can_record or self.doc is None:
            if self.read_only:
                self.notice.emit(f"Read-only, nothing recorded: {self.read_only}")
            else:
                self.notice.emit("Open a document to set a constraint")
            return False
        assert self.index is not None and self.ledger is not None
        index, doc = self.index, self.doc
        row = index.chunk_at(doc, start) or (self.row if self.row is not None else index.doc_rows(doc).start)
        try:
            constraint = anchor(
                index.document_text(doc), index.doc_ids[doc], index.doc_sha256[doc], kind, start, end
            )
            # The event chunkyard.chunking.decisions.record_constraint appends, through the queue.
            target = constraint_target(
                index.dataset,
                index.version,
                index.snapshot_number,
                constraint,
                chunk_id=index.chunk_id(row),
                chunk_index=int(index.chunk_index[row]),
            )
            event = self._give("constraint", target, reason=constraint.kind, note=constraint.payload())
        except (ValueError, ChunkyardError) as exc:
            self.failed.emit(f"The constraint was not recorded: {exc}")
            return False
        self._refresh_doc(row)
        what = "keep together" if kind == "keep_together" else "break here"
        self.undo_stack.push(_Decision(self, row, event, f"{what} at {constraint.start}"))
        return True

    def _write_retract(self, event: PendingEvent, row: int) -> PendingEvent | None:
        if self.ledger is None or not self.check_ledger_file():
            return None
        try:
            retract = self._give("retract", event.target, retracts=event)
        except ChunkyardError as exc:
            self.failed.emit(f"Undo/redo was not recorded: {exc}")
            return None
        self._refresh_doc(row)
        self.select_row(row)  # show what was undone or redone
        return retract

    def _refresh_doc(self, row: int) -> None:
        assert self.index is not None and self.ledger is not None
        try:
            self.index.reload_state(self.ledger, [int(self.index.chunk_doc[row])], self._pending_events())
        except ChunkyardError as exc:
            self.failed.emit(str(exc))
        self.states_changed.emit()

    def poll_ledger(self) -> None:
        """Pick up events other reviewers wrote since we last looked."""
        if self.index is None or self.ledger is None or not self.check_ledger_file():
            return
        try:
            events = self.ledger.events(self.index.dataset, self.index.version, after=self._seen_event)
        except ChunkyardError:
            return
        if not events:
            return
        self._seen_event = events[-1].id
        docs = sorted({d for e in events if (d := self.index.doc_number(e.doc_id)) is not None})
        if docs:
            try:
                self.index.reload_state(self.ledger, docs, self._pending_events())
            except ChunkyardError:
                return
            self.states_changed.emit()
