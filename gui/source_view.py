"""The source view: a document's text as plain text with its chunks drawn over it.

Each chunk's span is shaded, alternating two light colours; where consecutive chunks overlap the
shading is darker. A thin bar marks every boundary, the selected chunk is outlined, and the margin
on the left shows a marker on the line of each boundary that carries a finding (hover it for the
explanation) and each reviewer verdict. Clicking the text selects the chunk under it.

Dataset offsets are code points; Qt positions are UTF-16 units. ``chunkyard.chunking.review.OffsetMap`` is the
only conversion — every position below passes through ``self.offsets``.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontDatabase,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
    QResizeEvent,
    QTextCursor,
    QTextLine,
)
from PySide6.QtWidgets import QPlainTextEdit, QToolTip, QWidget

from chunkyard.chunking.review import FLAGGED, OffsetMap, ReviewIndex, display_text

SHADES = (QColor("#dbeafe"), QColor("#fef3c7"))  # alternating chunk backgrounds (light blue, light amber)
OVERLAP = QColor("#c7b8ea")  # overlap of two chunks: darker than either
BOUNDARY = QColor("#475569")
OUTLINE = QColor("#1d4ed8")
FINDING = QColor("#d97706")
FLAG = QColor("#dc2626")
OK_MARK = QColor("#16a34a")
ANSWER = QColor("#7c3aed")  # margin marker of a chunk the question box ranks (its best rank in it)
MARGIN_WIDTH = 26


@dataclass(frozen=True)
class _Marker:
    """Something drawn in the margin: at UTF-16 ``position``, for dataset ``row``."""

    position: int
    row: int
    kind: str  # "finding", "flag", "ok" or "answer"
    text: str
    symbol: str = ""


class SourceView(QPlainTextEdit):
    """Read-only plain-text view of one document with its chunk spans; emits ``chunk_clicked(row)``."""

    chunk_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.answers: dict[
            int, tuple[str, str]
        ] = {}  # row -> (margin symbol, tooltip) of the question box's hits
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSize(max(font.pointSize(), 10))
        self.setFont(font)
        # The shading colours assume a light page whatever the desktop theme is.
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Base, QColor("#ffffff"))
        palette.setColor(QPalette.ColorRole.Text, QColor("#111827"))
        palette.setColor(QPalette.ColorRole.Highlight, QColor("#93c5fd"))
        palette.setColor(QPalette.ColorRole.HighlightedText, QColor("#111827"))
        self.setPalette(palette)
        self.margin = _Margin(self)
        self.setViewportMargins(MARGIN_WIDTH, 0, 0, 0)
        self.updateRequest.connect(self._update_margin)
        self.index: ReviewIndex | None = None
        self.doc: int | None = None
        self.offsets = OffsetMap("")
        self.selected_row: int | None = None
        self._rows = range(0)
        self._starts: list[int] = []  # UTF-16, per chunk of the document
        self._ends: list[int] = []
        self._boundaries: list[int] = []  # UTF-16 positions where a chunk starts or ends, sorted
        self._markers: list[_Marker] = []
        self._findings: list[_Marker] = []  # the document's finding markers, built once per document
        # Every chunk's shading (UTF-16 start, end, colour), by start. It is painted under the text for
        # the visible lines only: Qt's extra selections (one per chunk and overlap) made every paint
        # of a long document slow, and changing them re-laid out a one-line document whole.
        self._shades: list[tuple[int, int, QColor]] = []
        self._shade_starts: list[int] = []
        self._longest_shade = 0
        self._visible: tuple[tuple[int, ...], tuple[int, int]] | None = None  # (view state, visible range)
        self._rtl_blocks: dict[int, bool] = {}  # block number → holds right-to-left text

    # -- content ---------------------------------------------------------------------------------

    def show_document(self, index: ReviewIndex | None, doc: int | None) -> None:
        self.index, self.doc, self.selected_row = index, doc, None
        self._rtl_blocks = {}
        if index is None or doc is None:
            self.offsets = OffsetMap("")
            self.setPlainText("")
            self._rows, self._starts, self._ends, self._boundaries = range(0), [], [], []
            self._markers, self._findings = [], []
            self._shades, self._shade_starts = [], []
            return
        text = index.document_text(doc)
        self.offsets = OffsetMap(text)
        self.setPlainText(display_text(text))
        self._rows = index.doc_rows(doc)
        to_utf16 = self.offsets.to_utf16
        self._starts = [to_utf16(index.start[row]) for row in self._rows]
        self._ends = [to_utf16(index.end[row]) for row in self._rows]
        self._boundaries = sorted(set(self._starts[1:]) | set(self._ends[:-1]))
        self._shade()
        self._findings = self._finding_markers()
        self.refresh_states()

    def _finding_markers(self) -> list[_Marker]:
        """The margin markers of the document's findings (they never change while it is shown)."""
        markers: list[_Marker] = []
        index = self.index
        if index is None or not len(self._rows):
            return markers
        first = self._rows.start
        for row in np.flatnonzero(index.suspicious[first : self._rows.stop]) + first:
            row, position = int(row), int(row) - first
            codes = index.findings(row)
            start_codes = [c for c in codes if c == "mid_sentence_start"]
            end_codes = [c for c in codes if c != "mid_sentence_start"]
            explained = dict(index.explain_findings(row))
            if start_codes:
                markers.append(
                    _Marker(
                        self._starts[position], row, "finding", _describe(index, row, start_codes, explained)
                    )
                )
            if end_codes:
                at = max(self._starts[position], self._ends[position] - 1)
                markers.append(_Marker(at, row, "finding", _describe(index, row, end_codes, explained)))
        return markers

    def set_answers(self, answers: dict[int, tuple[str, str]]) -> None:
        """Mark the chunks a question ranks (row -> (symbol, text)); {} clears them."""
        self.answers = answers
        self.refresh_states()

    def refresh_states(self) -> None:
        """Rebuild the margin's verdict markers and repaint (finding markers are built once per document:
        rebuilding them on every verdict cost 125 ms a key on a document of 20,000 chunks)."""
        markers: list[_Marker] = list(self._findings)
        index = self.index
        if index is not None and len(self._rows):
            first = self._rows.start
            for row in np.flatnonzero(index.verdict[first : self._rows.stop]) + first:
                row, position = int(row), int(row) - first
                verdict = int(index.verdict[row])
                state = index.state(row)
                if verdict == FLAGGED:
                    reasons = state.reasons + [f"boundary: {r}" for r in state.boundary_reasons]
                    text = f"chunk {int(index.chunk_index[row])} flagged: {', '.join(reasons)}"
                else:
                    text = f"chunk {int(index.chunk_index[row])} marked OK by {state.reviewer}"
                if state.note:
                    text += f"\nnote: {state.note}"
                # A flag on the boundary is drawn where the boundary is: at the chunk's end.
                only_boundary = verdict == FLAGGED and state.boundary_reasons and not state.reasons
                at = (
                    max(self._starts[position], self._ends[position] - 1)
                    if only_boundary
                    else self._starts[position]
                )
                # Drawn after the findings: where markers stack up, the verdict is the one on top.
                markers.append(_Marker(at, row, "flag" if verdict == FLAGGED else "ok", text))
            for row, (symbol, text) in self.answers.items():
                if row in self._rows:
                    markers.append(_Marker(self._starts[row - first], row, "answer", text, symbol))
        self._markers = markers
        self.margin.update()
        self.viewport().update()

    def _shade(self) -> None:
        shades: list[tuple[int, int, QColor]] = []
        previous_end = 0
        for position in range(len(self._starts)):
            start, end = self._starts[position], self._ends[position]
            overlap_end = min(previous_end, end) if position else start
            if overlap_end > start:
                shades.append((start, overlap_end, OVERLAP))
            if end > max(start, overlap_end):
                shades.append((max(start, overlap_end), end, SHADES[position % 2]))
            previous_end = max(previous_end, end)
        shades.sort(key=lambda shade: shade[0])
        self._shades = shades
        self._shade_starts = [shade[0] for shade in shades]
        self._longest_shade = max((end - start for start, end, _ in shades), default=0)
        self.viewport().update()

    def shades_on_screen(self) -> list[tuple[int, int, QColor]]:
        """The chunk shading of the visible lines: (start, end, colour), UTF-16, clipped to them."""
        if not self._shades:
            return []
        first, last = self._visible_range()
        lo = bisect.bisect_left(self._shade_starts, first - self._longest_shade)
        hi = bisect.bisect_right(self._shade_starts, last)
        return [
            (max(start, first), min(end, last), colour)
            for start, end, colour in self._shades[lo:hi]
            if max(start, first) < min(end, last)
        ]

    # -- selection -------------------------------------------------------------------------------

    def select_row(self, row: int | None, scroll: bool = True) -> None:
        self.selected_row = row if row is not None and row in self._rows else None
        if self.selected_row is not None and scroll:
            position = self.selected_row - self._rows.start
            cursor = QTextCursor(self.document())
            # End first, then start: the start is what must be visible, with as much of the chunk as fits.
            cursor.setPosition(self._ends[position])
            self.setTextCursor(cursor)
            self.ensureCursorVisible()
            cursor.setPosition(self._starts[position])
            self.setTextCursor(cursor)
            self.ensureCursorVisible()
        self.viewport().update()
        self.margin.update()

    def span_utf16(self, row: int) -> tuple[int, int]:
        position = row - self._rows.start
        return self._starts[position], self._ends[position]

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        if event.button() != Qt.MouseButton.LeftButton or self.textCursor().hasSelection():
            return  # a drag selects text to copy; only a plain click selects a chunk
        if self.index is None or self.doc is None:
            return
        position = self.offsets.to_code_point(self.cursorForPosition(event.position().toPoint()).position())
        row = self.index.chunk_at(self.doc, position, prefer=self.selected_row)
        if row is not None:
            self.chunk_clicked.emit(row)

    # -- painting --------------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        shades = self.shades_on_screen()
        if shades:  # under the text, which QPlainTextEdit draws next (it does not fill its background)
            painter = QPainter(self.viewport())
            for start, end, colour in shades:
                for rect in self._span_rects(start, end, to_edge=False):
                    painter.fillRect(rect, colour)
            painter.end()
        super().paintEvent(event)
        if not self._starts:
            return
        first, last = self._visible_range()
        painter = QPainter(self.viewport())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(BOUNDARY, 2))
        lo = bisect.bisect_left(self._boundaries, first)
        hi = bisect.bisect_right(self._boundaries, last)
        for position in self._boundaries[lo:hi]:
            rect = self._position_rect(position)
            painter.drawLine(rect.left(), rect.top() + 1, rect.left(), rect.bottom())
            painter.drawLine(rect.left() - 3, rect.top() + 1, rect.left() + 3, rect.top() + 1)
        if self.selected_row is not None:
            start, end = self.span_utf16(self.selected_row)
            if end >= first and start <= last:
                path = self._span_path(max(start, first), min(end, last))
                painter.setPen(QPen(OUTLINE, 2))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawPath(path)
        painter.end()

    def _visible_range(self) -> tuple[int, int]:
        """UTF-16 positions of the first visible line's start and the last visible line's end.

        Found from the block layouts by bisecting line tops: ``cursorForPosition`` walks every line
        of a paragraph, 84 ms on a 10 MB one-line document, and this runs several times per paint.
        """
        key = (
            self.verticalScrollBar().value(),
            self.viewport().width(),
            self.viewport().height(),
            self.document().revision(),
            self.document().blockCount(),
        )
        if self._visible is not None and self._visible[0] == key:
            return self._visible[1]
        height = self.viewport().height()
        offset = self.contentOffset()
        block = self.firstVisibleBlock()
        if not block.isValid():
            return 0, 0
        first = self._line_at(block, offset, 0.0)[0]
        while True:  # the last block that begins on screen (a screen holds a few dozen)
            following = block.next()
            if (
                not following.isValid()
                or self.blockBoundingGeometry(following).translated(offset).top() >= height
            ):
                break
            block = following
        last = self._line_at(block, offset, float(height))[1]
        self._visible = (key, (first, last))
        return first, last

    def _line_at(self, block: Any, offset: QPointF, y: float) -> tuple[int, int]:
        """Start and end (UTF-16, end + 1) of the line of ``block`` at viewport height ``y``, or the
        nearest one inside the block."""
        layout = block.layout()
        count = layout.lineCount() if layout is not None else 0
        if count == 0:
            return block.position(), block.position() + block.length()
        top = self.blockBoundingGeometry(block).translated(offset).top()
        lo, hi = 0, count - 1
        while lo < hi:  # the first line whose bottom is below y
            mid = (lo + hi) // 2
            line = layout.lineAt(mid)
            if top + line.y() + line.height() <= y:
                lo = mid + 1
            else:
                hi = mid
        line = layout.lineAt(lo)
        start = block.position() + line.textStart()
        return start, start + line.textLength() + 1

    def _position_rect(self, position: int) -> QRect:
        """``cursorRect`` of a cursor at ``position`` (UTF-16), found by bisecting the lines of its
        block: Qt places a cursor by scanning every line before it, 48 ms deep into a 10 MB line."""
        block = self.document().findBlock(position)
        layout = block.layout() if block.isValid() else None
        if layout is None or layout.lineCount() == 0:
            cursor = QTextCursor(self.document())
            cursor.setPosition(position)
            return self.cursorRect(cursor)
        relative = position - block.position()
        line = layout.lineAt(_line_index(layout, relative))
        geometry = self.blockBoundingGeometry(block).translated(self.contentOffset())
        return QRect(
            math.floor(geometry.left() + line.cursorToX(relative)[0] + 0.5),  # qRound, as Qt does
            math.floor(geometry.top() + line.y() + 0.5),
            self.cursorWidth(),
            math.floor(line.height() + 0.5),
        )

    def _span_path(self, start: int, end: int) -> QPainterPath:
        """Outline of the text from ``start`` to ``end`` (UTF-16) the way a text selection is shaped:
        from the start to the right edge, whole lines between, the left edge to the end."""
        path = QPainterPath()
        path.setFillRule(Qt.FillRule.WindingFill)
        for rect in self._span_rects(start, end, to_edge=True):
            path.addRect(rect)
        return path.simplified()

    def _span_rects(self, start: int, end: int, *, to_edge: bool) -> list[QRectF]:
        """A rectangle per visible line of the text from ``start`` to ``end`` (UTF-16). A line the span
        runs past ends at the viewport's right edge (``to_edge``) or at the line's text."""
        rects: list[QRectF] = []
        block = self.document().findBlock(start)
        offset = self.contentOffset()
        right_edge = self.viewport().width() - 3.0
        height = self.viewport().height()
        while block.isValid() and block.position() <= end:
            geometry = self.blockBoundingGeometry(block).translated(offset)
            if geometry.top() > height:
                break
            layout, base = block.layout(), block.position()
            number = _line_index(layout, max(start, base) - base)
            while number < layout.lineCount():
                line = layout.lineAt(number)
                number += 1
                line_start = base + line.textStart()
                line_end = line_start + line.textLength()
                if line_start > end or geometry.top() + line.y() > height:
                    break
                a, b = max(start, line_start), min(end, line_end)
                if a > b or (a == b and a == end and a != start):
                    continue
                if self._has_rtl(block):
                    rects += _bidi_rects(
                        block, line, geometry, a, b, right_edge if to_edge and end > line_end else None
                    )
                    continue
                left = geometry.left() + (line.cursorToX(a - base)[0] if a > line_start else 0.0) + 1
                if end > line_end:
                    right = right_edge if to_edge else geometry.left() + line.naturalTextWidth() + 1
                else:
                    right = geometry.left() + line.cursorToX(b - base)[0] + 1
                right = max(right, left + 4) if to_edge else right
                if right > left:
                    rects.append(QRectF(left, geometry.top() + line.y(), right - left, line.height() + 0.5))
            block = block.next()
        return rects

    def _has_rtl(self, block: Any) -> bool:
        """Whether ``block`` holds right-to-left text (then its lines are not drawn left to right)."""
        number = block.blockNumber()
        if number not in self._rtl_blocks:
            self._rtl_blocks[number] = (
                block.textDirection() == Qt.LayoutDirection.RightToLeft
                or _RTL.search(block.text()) is not None
            )
        return self._rtl_blocks[number]

    # -- margin ----------------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        rect = self.contentsRect()
        self.margin.setGeometry(QRect(rect.left(), rect.top(), MARGIN_WIDTH, rect.height()))

    def _update_margin(self, rect: QRect, dy: int) -> None:
        if dy:
            self.margin.scroll(0, dy)
        else:
            self.margin.update(0, rect.y(), self.margin.width(), rect.height())

    def markers_on_screen(self) -> list[tuple[QRect, _Marker]]:
        """Margin rectangles of the markers whose line is visible (several on one line stack up)."""
        placed: list[tuple[QRect, _Marker]] = []
        if not self._markers:
            return placed
        first, last = self._visible_range()
        per_line: dict[int, int] = {}
        for marker in self._markers:
            if not first <= marker.position <= last:
                continue
            rect = self._position_rect(marker.position)
            slot = per_line.get(rect.top(), 0)
            per_line[rect.top()] = slot + 1
            size = min(11, max(8, rect.height() - 4))
            x = 1 + min(slot, 1) * 12  # two markers side by side on one line; more stack on the second
            placed.append((QRect(x, rect.top() + (rect.height() - size) // 2, size, size), marker))
        return placed

    def paint_margin(self, painter: QPainter, clip: QRect) -> None:
        painter.fillRect(clip, QColor("#f1f5f9"))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        if self.selected_row is not None:
            start, end = self.span_utf16(self.selected_row)
            top = self._position_rect(start).top()
            bottom = self._position_rect(max(start, end - 1)).bottom()
            painter.fillRect(QRect(MARGIN_WIDTH - 4, top, 3, max(4, bottom - top)), OUTLINE)
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSize(max(7, font.pointSize() - 2))
        painter.setFont(font)
        for rect, marker in self.markers_on_screen():
            colour = {"finding": FINDING, "flag": FLAG, "ok": OK_MARK, "answer": ANSWER}[marker.kind]
            painter.setPen(QPen(colour.darker(130), 1))
            painter.setBrush(QBrush(colour))
            if marker.kind == "finding":
                painter.drawEllipse(rect)
                symbol = "!"
            elif marker.kind == "answer":
                painter.drawRect(rect)
                symbol = marker.symbol
            else:
                painter.drawRoundedRect(rect, 2, 2)
                symbol = "⚑" if marker.kind == "flag" else "✓"
            painter.setPen(QColor("#ffffff"))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, symbol)

    def marker_text_at(self, point: QPoint) -> str | None:
        texts = [
            marker.text
            for rect, marker in self.markers_on_screen()
            if rect.adjusted(-2, -2, 2, 2).contains(point)
        ]
        return "\n\n".join(texts) if texts else None

    def marker_row_at(self, point: QPoint) -> int | None:
        for rect, marker in self.markers_on_screen():
            if rect.adjusted(-2, -2, 2, 2).contains(point):
                return marker.row
        return None


class _Margin(QWidget):
    """The strip left of the text where finding and verdict markers are painted."""

    def __init__(self, view: SourceView):
        super().__init__(view)
        self.view = view
        self.setMouseTracking(True)

    def sizeHint(self) -> QSize:
        return QSize(MARGIN_WIDTH, 0)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        self.view.paint_margin(painter, event.rect())
        painter.end()

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            point = event.pos()  # type: ignore[attr-defined]
            text = self.view.marker_text_at(point)
            if text:
                QToolTip.showText(event.globalPos(), text, self)  # type: ignore[attr-defined]
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().event(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        row = self.view.marker_row_at(event.position().toPoint())
        if row is not None:
            self.view.chunk_clicked.emit(row)


# Characters of right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, N'Ko, …; their presentation forms
# and supplementary blocks) and the explicit right-to-left marks, embeddings, overrides and isolates.
_RTL = re.compile(
    "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\u200f\u202b\u202e\u2067"
    "\U00010800-\U00010fff\U0001e800-\U0001efff]"
)


def _bidi_rects(block: Any, line: Any, geometry: QRectF, a: int, b: int, edge: float | None) -> list[QRectF]:
    """Rectangles of the characters ``a``..``b`` (UTF-16, in ``block``) on ``line`` where the text runs
    right to left, or both ways: each character's box between its leading and trailing edges, joined
    where they touch. A logical span can be several pieces on screen. With ``edge`` (the span goes on
    past the line), the piece holding the line's last character is stretched to the side the line
    continues on: the left edge in a right-to-left paragraph, ``edge`` otherwise."""
    base = block.position()
    pieces: list[list[float]] = []
    for position in range(a - base, b - base):
        x1 = line.cursorToX(position, QTextLine.Edge.Leading)[0]
        x2 = line.cursorToX(position, QTextLine.Edge.Trailing)[0]
        pieces.append([min(x1, x2), max(x1, x2)])
    if edge is not None:
        rtl = block.textDirection() == Qt.LayoutDirection.RightToLeft
        end_x = line.cursorToX(line.textStart() + line.textLength(), QTextLine.Edge.Leading)[0]
        pieces.append([0.0, end_x] if rtl else [end_x, edge - geometry.left()])
    pieces.sort()
    merged: list[list[float]] = []
    for left, right in pieces:
        if right - left <= 0:
            continue
        if merged and left <= merged[-1][1] + 0.5:
            merged[-1][1] = max(merged[-1][1], right)
        else:
            merged.append([left, right])
    top = geometry.top() + line.y()
    return [
        QRectF(geometry.left() + left + 1, top, right - left, line.height() + 0.5) for left, right in merged
    ]


def _line_index(layout: Any, position: int) -> int:
    """The line of ``layout`` that holds ``position`` (relative to its block): the last one starting
    at or before it. ``QTextLayout.lineForTextPosition`` scans the lines one by one."""
    lo, hi = 0, layout.lineCount() - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.lineAt(mid).textStart() <= position:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _describe(index: ReviewIndex, row: int, codes: list[str], explained: dict[str, str]) -> str:
    where = "start" if codes == ["mid_sentence_start"] else "end"
    head = f"chunk {int(index.chunk_index[row])} ({where} boundary)"
    return head + "".join(f"\n• {code}: {explained.get(code, '')}" for code in codes)


__all__ = ["SourceView"]
