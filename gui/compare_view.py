"""Compare mode: one document in two snapshots side by side, with the boundaries that moved highlighted.

Each side is a ``SourceView`` (chunks shaded, a bar at every boundary). A boundary present in only
one snapshot is drawn as a thick red bar on that side (``chunkyard.chunking.versions.moved_boundaries``; only
when the document text is the same in both, otherwise offsets are not comparable and the window
says so). The list below holds the document's review decisions: each resolved flag (select it to
see the snapshot it was made on beside the one that resolved it, scrolled to the flagged place)
and each constraint with what became of it in the right-hand snapshot (applied, re-anchored,
unmet, stale).
"""

from __future__ import annotations

import bisect
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QKeySequence, QPainter, QPaintEvent, QPen, QShortcut, QTextCursor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from chunkyard.chunking.decisions import Resolution, resolutions
from chunkyard.chunking.ledger import Ledger, ledger_path
from chunkyard.chunking.review import ReviewIndex
from chunkyard.chunking.versions import moved_boundaries
from chunkyard.chunking.words import plural
from chunkyard.gui.source_view import SourceView

MOVED = QColor("#dc2626")
RESOLUTION_ROLE = Qt.ItemDataRole.UserRole + 1


class CompareSourceView(SourceView):
    """A source view that also draws the boundaries only this side has (``moved``, code points)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.moved: list[int] = []
        self._moved_utf16: list[int] = []

    def set_moved(self, positions: list[int]) -> None:
        self.moved = positions
        self._moved_utf16 = sorted(self.offsets.to_utf16(p) for p in positions)
        self.viewport().update()

    def scroll_to(self, position: int) -> None:
        cursor = QTextCursor(self.document())
        cursor.setPosition(self.offsets.to_utf16(position))
        self.setTextCursor(cursor)
        self.ensureCursorVisible()

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self._moved_utf16:
            return
        # Only the bars of the lines on screen, placed by bisecting lines (``_position_rect``): Qt's
        # cursorRect for every moved boundary made each paint of a long one-line document take seconds.
        first, last = self._visible_range()
        lo = bisect.bisect_left(self._moved_utf16, first)
        hi = bisect.bisect_right(self._moved_utf16, last)
        painter = QPainter(self.viewport())
        painter.setPen(QPen(MOVED, 4))
        for position in self._moved_utf16[lo:hi]:
            rect = self._position_rect(position)
            painter.drawLine(rect.left(), rect.top(), rect.left(), rect.bottom())
        painter.end()


class CompareWindow(QWidget):
    """Snapshot A (left) and B (right) of one document, and the document's decisions.

    Esc and Ctrl+W close it; Quit (Ctrl+Q) here asks the reviewer to quit (``quit_requested``), and the
    main window closes it when it closes, so it never outlives the reviewer."""

    quit_requested = Signal()

    def __init__(self, path_a: str | Path, path_b: str | Path, doc_id: str, parent: QWidget | None = None):
        super().__init__(parent)
        for keys in (QKeySequence(Qt.Key.Key_Escape), QKeySequence("Ctrl+W")):
            QShortcut(keys, self, activated=self.close)
        QShortcut(QKeySequence("Ctrl+Q"), self, activated=self.quit_requested.emit)
        # N / P: the next / previous document whose chunks differ between the two snapshots.
        QShortcut(QKeySequence("N"), self, activated=lambda: self.step_changed(1))
        QShortcut(QKeySequence("P"), self, activated=lambda: self.step_changed(-1))
        self._changed: list[str] | None = None
        self.setWindowTitle(f"Compare — {doc_id}")
        self.resize(1400, 850)
        self._indexes: dict[Path, ReviewIndex] = {}
        self.doc_id = doc_id
        self.left, self.right = CompareSourceView(), CompareSourceView()
        self.left_label, self.right_label = QLabel(), QLabel()
        self.summary = QLabel()
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.decisions = QListWidget()
        self.decisions.setMaximumHeight(140)
        panes = QSplitter(Qt.Orientation.Horizontal)
        for label, view in ((self.left_label, self.left), (self.right_label, self.right)):
            pane = QWidget()
            box = QVBoxLayout(pane)
            box.setContentsMargins(2, 2, 2, 2)
            box.addWidget(label)
            box.addWidget(view, 1)
            panes.addWidget(pane)
        layout = QVBoxLayout(self)
        header = QHBoxLayout()
        header.addWidget(self.summary, 1)
        layout.addLayout(header)
        layout.addWidget(panes, 1)
        layout.addWidget(
            QLabel("Decisions on this document (select a resolved flag to see its before/after):")
        )
        layout.addWidget(self.decisions)
        # The question box for both snapshots: one question, each side's top k (did a rechunk change which
        # chunk answers?); the question line is the left panel's, the right one follows it.
        from chunkyard.gui.question_view import QuestionPanel

        self.question_a, self.question_b = QuestionPanel(label="Question:"), QuestionPanel()
        self.question_b.question.hide()
        self.question_b.k.hide()
        answers = QSplitter(Qt.Orientation.Horizontal)
        answers.addWidget(self.question_a)
        answers.addWidget(self.question_b)
        layout.addWidget(answers)
        self.question_a.question.returnPressed.connect(self._ask_both)
        for panel, view in ((self.question_a, self.left), (self.question_b, self.right)):
            panel.chunk_chosen.connect(lambda row, v=view: v.select_row(row))
            panel.answered.connect(lambda p=panel, v=view: v.set_answers(p.margin_marks()))
        self.decisions.currentItemChanged.connect(self._on_decision)
        # Scrolling one side scrolls the other: the same text lines up when it is unchanged.
        self.left.verticalScrollBar().valueChanged.connect(self.right.verticalScrollBar().setValue)
        self.right.verticalScrollBar().valueChanged.connect(self.left.verticalScrollBar().setValue)
        self.moved_a: list[int] = []
        self.moved_b: list[int] = []
        self.show_pair(path_a, path_b)
        self._fill_decisions()

    # -- content ---------------------------------------------------------------------------------

    def _index(self, path: str | Path) -> ReviewIndex:
        key = Path(path).resolve()
        if key not in self._indexes:
            self._indexes[key] = ReviewIndex.load(key)
        return self._indexes[key]

    def show_pair(self, path_a: str | Path, path_b: str | Path, focus: int | None = None) -> None:
        """Show snapshot ``path_a`` left and ``path_b`` right; scroll both to ``focus`` (code points)."""
        self.index_a, self.index_b = self._index(path_a), self._index(path_b)
        spans = []
        texts = []
        for index, view, label in (
            (self.index_a, self.left, self.left_label),
            (self.index_b, self.right, self.right_label),
        ):
            doc = index.doc_number(self.doc_id)
            view.show_document(index if doc is not None else None, doc)
            rows = index.doc_rows(doc) if doc is not None else range(0)
            spans.append([(int(index.start[r]), int(index.end[r])) for r in rows])
            texts.append(index.document_text(doc) if doc is not None else None)
            kind = index.snapshot.manifest.get("kind", "")
            label.setText(
                f"snapshot {index.snapshot_number} ({kind}) — "
                + (plural(len(rows), "chunk") if doc is not None else "document not in this snapshot")
            )
        if texts[0] is not None and texts[0] == texts[1]:
            self.moved_a, self.moved_b = moved_boundaries(spans[0], spans[1])
            self.summary.setText(
                f"{self.doc_id}: {len(self.moved_a)} boundaries only in snapshot "
                f"{self.index_a.snapshot_number}, {len(self.moved_b)} only in snapshot "
                f"{self.index_b.snapshot_number} (red)"
            )
        else:
            self.moved_a, self.moved_b = [], []
            self.summary.setText(
                f"{self.doc_id}: the document's text differs between the snapshots; "
                "boundaries are not compared"
            )
        self.left.set_moved(self.moved_a)
        self.right.set_moved(self.moved_b)
        if getattr(self, "question_a", None) is not None:
            for panel, index in ((self.question_a, self.index_a), (self.question_b, self.index_b)):
                if panel.index is not index:
                    panel.set_index(index)
        if focus is not None:
            self.left.scroll_to(focus)
            self.right.scroll_to(focus)

    def changed_documents(self) -> list[str]:
        """doc_ids whose chunks differ between the left and the right snapshot (``chunkyard diff``'s rule)."""
        if self._changed is None:
            from chunkyard.chunking.versions import diff_snapshots

            diff = diff_snapshots(self.index_a.snapshot, self.index_b.snapshot)
            self._changed = [d.doc_id for d in diff.documents if d.status != "unchanged"]
        return self._changed

    def step_changed(self, step: int) -> bool:
        """Show the next (``step`` 1) or previous changed document after this one, in doc_id order."""
        changed = self.changed_documents()
        later = (
            [d for d in changed if d > self.doc_id] if step > 0 else [d for d in changed if d < self.doc_id]
        )
        if not later:
            self.summary.setText(
                f"{self.doc_id}: no changed document {'after' if step > 0 else 'before'} this one "
                f"({plural(len(changed), 'changed document')})"
            )
            return False
        self.show_document(later[0] if step > 0 else later[-1])
        return True

    def show_document(self, doc_id: str) -> None:
        self.doc_id = doc_id
        self.setWindowTitle(f"Compare — {doc_id}")
        self.show_pair(self.index_a.snapshot.path, self.index_b.snapshot.path)
        self._fill_decisions()

    def _ask_both(self) -> None:
        """The left panel's question, asked of both snapshots (each panel ranks its own snapshot's chunks)."""
        self.question_b.k.setValue(self.question_a.k.value())
        self.question_b.ask(self.question_a.question.text())  # in its own thread, beside the left one's

    def _fill_decisions(self) -> None:
        self.decisions.clear()
        try:
            with Ledger(ledger_path(self.index_b.snapshot.path)) as ledger:
                events = ledger.events(self.index_b.dataset, self.index_b.version, doc_id=self.doc_id)
        except Exception as exc:  # the compare view must open even without a readable ledger
            self.decisions.addItem(f"review ledger not readable: {exc}")
            return
        self.resolutions: list[Resolution] = resolutions(events)
        for resolution in self.resolutions:
            flag = resolution.flag
            where = (
                f"boundary at {flag.boundary}" if flag.boundary is not None else f"chunk {flag.chunk_index}"
            )
            item = QListWidgetItem(
                f"resolved flag {flag.id}: {flag.reason} on {where} (snapshot {flag.snapshot}) "
                f"→ resolved by snapshot {resolution.snapshot}"
            )
            item.setData(RESOLUTION_ROLE, resolution)
            self.decisions.addItem(item)
        for entry in self.index_b.snapshot.manifest.get("constraints") or []:
            if entry.get("doc_id") == self.doc_id:
                placed = entry.get("placed")
                where = f"[{placed[0]}:{placed[1]}]" if placed else "its text is gone"
                self.decisions.addItem(
                    f"constraint {entry['id']}: {entry['kind']} {where} — {entry['status']}"
                )

    def _on_decision(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        resolution = item.data(RESOLUTION_ROLE) if item is not None else None
        if not isinstance(resolution, Resolution):
            return
        version_path = self.index_b.snapshot.path.parent
        before = version_path / f"{resolution.flag.snapshot:04d}"
        after = version_path / f"{resolution.snapshot:04d}"
        if before.is_dir() and after.is_dir():
            focus = resolution.flag.boundary
            if focus is None:  # a flag on a chunk: where that chunk starts in the snapshot it was made on
                index = self._index(before)
                doc = index.doc_number(self.doc_id)
                row = (
                    index.row_of(doc, resolution.flag.chunk_index)
                    if doc is not None and resolution.flag.chunk_index is not None
                    else None
                )
                focus = int(index.start[row]) if row is not None else None
            self.show_pair(before, after, focus)


def parent_snapshot_path(index: ReviewIndex) -> Path | None:
    """The folder of the snapshot ``index``'s snapshot was made from, if it is still there."""
    parent = index.snapshot.manifest.get("parent_snapshot")
    if not isinstance(parent, int):
        return None
    path = index.snapshot.path.parent / f"{parent:04d}"
    return path if path.is_dir() else None


__all__ = ["CompareSourceView", "CompareWindow", "parent_snapshot_path"]
