"""The source view: a document's text as plain text with its chunks drawn over it.

Each chunk's span is shaded, alternating two light colours; where consecutive chunks overlap the
shading is darker. A thin bar marks every boundary, the selected chunk is outlined, and the margin
on the left shows a marker on the line of each boundary that carries a finding (hover it for the
explanation) and each reviewer verdict. Clicking the text selects the chunk under it.

Dataset offsets are code points; Qt positions are UTF-16 units. ``chunking.review.OffsetMap`` is the
only conversion — every position below passes through ``self.offsets``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QEvent, QPoint, QRect, QRectF, QSize, Qt, Signal
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
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QToolTip, QWidget

from chunking.review import FLAGGED, OffsetMap, ReviewIndex, display_text

SHADES = (QColor("#dbeafe"), QColor("#fef3c7"))  # alternating chunk backgrounds (light blue, light amber)
OVERLAP = QColor("#c7b8ea")  # overlap of two chunks: darker than either
BOUNDARY = QColor("#475569")
OUTLINE = QColor("#1d4ed8")
FINDING = QColor("#d97706")
FLAG = QColor("#dc2626")
OK_MARK = QColor("#16a34a")
MARGIN_WIDTH = 26


@dataclass(frozen=True)
class _Marker:
    """Something drawn in the margin: at UTF-16 ``position``, for dataset ``row``."""

    position: int
    row: int
    kind: str  # "finding", "flag" or "ok"
    text: str


class SourceView(QPlainTextEdit):
    """Read-only plain-text view of one document with its chunk spans; emits ``chunk_clicked(row)``."""

    chunk_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
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
        # Every chunk's shading (UTF-16 start, end, colour), by start; only the part near the screen
        # is given to Qt as extra selections (thousands of them made each paint take seconds).
        self._shades: list[tuple[int, int, QColor]] = []
        self._shade_starts: list[int] = []
        self._longest_shade = 0
        self._shaded: tuple[int, int] | None = None  # the UTF-16 window the extra selections cover
        self.verticalScrollBar().valueChanged.connect(lambda _value: self._shade_visible())

    # -- content ---------------------------------------------------------------------------------

    def show_document(self, index: ReviewIndex | None, doc: int | None) -> None:
        self.index, self.doc, self.selected_row = index, doc, None
        if index is None or doc is None:
            self.offsets = OffsetMap("")
            self.setPlainText("")
            self._rows, self._starts, self._ends, self._boundaries = range(0), [], [], []
            self._markers = []
            self._shades, self._shade_starts, self._shaded = [], [], None
            self.setExtraSelections([])
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
        self.refresh_states()

    def refresh_states(self) -> None:
        """Rebuild the margin markers (findings and verdicts) and repaint."""
        markers: list[_Marker] = []
        index = self.index
        if index is not None:
            for position, row in enumerate(self._rows):
                codes = index.findings(row)
                if codes:
                    start_codes = [c for c in codes if c == "mid_sentence_start"]
                    end_codes = [c for c in codes if c != "mid_sentence_start"]
                    explained = dict(index.explain_findings(row))
                    if start_codes:
                        markers.append(_Marker(self._starts[position], row, "finding",
                                               _describe(index, row, start_codes, explained)))
                    if end_codes:
                        at = max(self._starts[position], self._ends[position] - 1)
                        markers.append(_Marker(at, row, "finding", _describe(index, row, end_codes, explained)))
                verdict = int(index.verdict[row])
                if verdict != 0:
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
                    at = max(self._starts[position], self._ends[position] - 1) if only_boundary else self._starts[position]
                    markers.append(_Marker(at, row, "flag" if verdict == FLAGGED else "ok", text))
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
        self._shaded = None
        self._shade_visible()

    def _shade_visible(self) -> None:
        """Give Qt the shading of the screen and one screen either side, clipped to that window."""
        if not self._shades:
            return
        first, last = self._visible_range()
        if self._shaded is not None and self._shaded[0] <= first and last <= self._shaded[1]:
            return
        screen = max(last - first, 1)
        low, high = max(0, first - screen), last + screen
        lo = bisect.bisect_left(self._shade_starts, low - self._longest_shade)
        hi = bisect.bisect_right(self._shade_starts, high)
        document = self.document()
        self.setExtraSelections([_selection(document, max(start, low), min(end, high), colour)
                                 for start, end, colour in self._shades[lo:hi] if max(start, low) < min(end, high)])
        self._shaded = (low, high)

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
        super().paintEvent(event)
        if not self._starts:
            return
        first, last = self._visible_range()
        painter = QPainter(self.viewport())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(BOUNDARY, 2))
        cursor = QTextCursor(self.document())
        lo = bisect.bisect_left(self._boundaries, first)
        hi = bisect.bisect_right(self._boundaries, last)
        for position in self._boundaries[lo:hi]:
            cursor.setPosition(position)
            rect = self.cursorRect(cursor)
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
        top = self.cursorForPosition(QPoint(0, 0)).position()
        bottom = self.cursorForPosition(QPoint(self.viewport().width(), self.viewport().height())).position()
        block = self.document().findBlock(bottom)
        # The end of the last visible line, not of its paragraph: one paragraph may be a whole
        # 10 MB document on one line, and everything up to this end is measured per paint.
        line = block.layout().lineForTextPosition(bottom - block.position()) if block.layout() else None
        if line is not None and line.isValid():
            return top, block.position() + line.textStart() + line.textLength() + 1
        return top, block.position() + block.length()

    def _span_path(self, start: int, end: int) -> QPainterPath:
        """Outline of the text from ``start`` to ``end`` (UTF-16) the way a text selection is shaped:
        from the start to the right edge, whole lines between, the left edge to the end."""
        path = QPainterPath()
        path.setFillRule(Qt.FillRule.WindingFill)
        block = self.document().findBlock(start)
        offset = self.contentOffset()
        right_edge = self.viewport().width() - 3.0
        while block.isValid() and block.position() <= end:
            geometry = self.blockBoundingGeometry(block).translated(offset)
            layout = block.layout()
            for number in range(layout.lineCount()):
                line = layout.lineAt(number)
                line_start = block.position() + line.textStart()
                line_end = line_start + line.textLength()
                a, b = max(start, line_start), min(end, line_end)
                if a > b or (a == b and a == end and a != start):
                    continue
                left = geometry.left() + (line.cursorToX(a - block.position())[0] if a > line_start else 0.0) + 1
                right = right_edge if end > line_end else geometry.left() + line.cursorToX(b - block.position())[0] + 1
                right = max(right, left + 4)
                path.addRect(QRectF(left, geometry.top() + line.y(), right - left, line.height() + 0.5))
            block = block.next()
        return path.simplified()

    # -- margin ----------------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._shaded = None  # lines rewrap: another stretch of text is on screen
        self._shade_visible()
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
        cursor = QTextCursor(self.document())
        per_line: dict[int, int] = {}
        for marker in self._markers:
            if not first <= marker.position <= last:
                continue
            cursor.setPosition(marker.position)
            rect = self.cursorRect(cursor)
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
            cursor = QTextCursor(self.document())
            cursor.setPosition(start)
            top = self.cursorRect(cursor).top()
            cursor.setPosition(max(start, end - 1))
            bottom = self.cursorRect(cursor).bottom()
            painter.fillRect(QRect(MARGIN_WIDTH - 4, top, 3, max(4, bottom - top)), OUTLINE)
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSize(max(7, font.pointSize() - 2))
        painter.setFont(font)
        for rect, marker in self.markers_on_screen():
            colour = {"finding": FINDING, "flag": FLAG, "ok": OK_MARK}[marker.kind]
            painter.setPen(QPen(colour.darker(130), 1))
            painter.setBrush(QBrush(colour))
            if marker.kind == "finding":
                painter.drawEllipse(rect)
                symbol = "!"
            else:
                painter.drawRoundedRect(rect, 2, 2)
                symbol = "⚑" if marker.kind == "flag" else "✓"
            painter.setPen(QColor("#ffffff"))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, symbol)

    def marker_text_at(self, point: QPoint) -> str | None:
        texts = [marker.text for rect, marker in self.markers_on_screen() if rect.adjusted(-2, -2, 2, 2).contains(point)]
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


def _selection(document: Any, start: int, end: int, colour: QColor) -> QTextEdit.ExtraSelection:
    selection = QTextEdit.ExtraSelection()
    cursor = QTextCursor(document)
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    selection.cursor = cursor
    fmt = QTextCharFormat()
    fmt.setBackground(colour)
    fmt.setProperty(QTextFormat.Property.FullWidthSelection, False)
    selection.format = fmt
    return selection


def _describe(index: ReviewIndex, row: int, codes: list[str], explained: dict[str, str]) -> str:
    where = "start" if codes == ["mid_sentence_start"] else "end"
    head = f"chunk {int(index.chunk_index[row])} ({where} boundary)"
    return head + "".join(f"\n• {code}: {explained.get(code, '')}" for code in codes)


__all__ = ["SourceView"]
