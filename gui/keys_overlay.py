"""The `?` overlay: every key of the reviewer and what it does, and what the colours in the text mean.

The list is read from the window's own actions (their text and shortcuts), so it cannot drift from what
the keys do; the colour legend from the source view's colour constants, for the same reason.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRectF, Qt
from PySide6.QtGui import QAction, QColor, QFontMetrics, QKeySequence, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

from chunkyard.gui import source_view

# (colour, what it means) — the source view draws with these very constants.
LEGEND: tuple[tuple[QColor, str], ...] = (
    (source_view.SHADES[0], "a chunk (shades alternate from chunk to chunk)"),
    (source_view.SHADES[1], "the next chunk"),
    (source_view.OVERLAP, "overlap: text in two chunks"),
    (source_view.BOUNDARY, "bar: a boundary between chunks"),
    (source_view.OUTLINE, "outline: the selected chunk"),
    (source_view.FINDING, "margin ! : a finding at this boundary (hover it)"),
    (source_view.FLAG, "margin ⚑ : flagged by a reviewer"),
    (source_view.OK_MARK, "margin ✓ : marked OK"),
    (source_view.ANSWER, "margin 1–9 : the question box ranks this chunk"),
    (QColor("#1d4ed8"), "● before a number: chosen for a bulk decision"),
)


def key_text(action: QAction) -> str:
    return ", ".join(
        sequence.toString(QKeySequence.SequenceFormat.NativeText) for sequence in action.shortcuts()
    )


def key_rows(sections: list[tuple[str, list[QAction]]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(section, [(keys, what)]) for the actions that have a key, in menu order."""
    rows = []
    for title, actions in sections:
        entries = [
            (key_text(action), action.text().replace("&", ""))
            for action in actions
            if not action.isSeparator() and action.shortcuts()
        ]
        if entries:
            rows.append((title, entries))
    return rows


class KeysOverlay(QWidget):
    """A panel over the whole window; any key or click closes it (`?` opens it)."""

    def __init__(self, parent: QWidget, sections: list[tuple[str, list[QAction]]]):
        super().__init__(parent)
        self.sections = sections
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, False)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.hide()
        parent.installEventFilter(self)

    def rows(self) -> list[tuple[str, list[tuple[str, str]]]]:
        return key_rows(self.sections)

    def toggle(self) -> None:
        if self.isVisible():
            self.close_overlay()
            return
        self.setGeometry(self.parentWidget().rect())
        self.show()
        self.raise_()
        self.setFocus(Qt.FocusReason.OtherFocusReason)

    def close_overlay(self) -> None:
        self.hide()
        window = self.parentWidget()
        if hasattr(window, "give_keys_to_review"):
            window.give_keys_to_review()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.parentWidget() and event.type() == QEvent.Type.Resize and self.isVisible():
            self.setGeometry(self.parentWidget().rect())
        return False

    def keyPressEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.close_overlay()  # any key (Esc, ?, …): back to reviewing, the key not acted on

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.close_overlay()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), QColor(15, 23, 42, 200))
        metrics = QFontMetrics(self.font())
        line = metrics.height() + 4
        rows = self.rows()
        key_width = (
            max([metrics.horizontalAdvance(keys) for _t, entries in rows for keys, _w in entries] + [40]) + 16
        )
        # Two columns of sections when they do not fit in one.
        columns: list[list[tuple[str, list[tuple[str, str]]]]] = [[], []]
        heights = [0, 0]
        for section in rows:
            side = 0 if heights[0] <= heights[1] else 1
            columns[side].append(section)
            heights[side] += line * (len(section[1]) + 2)
        legend_height = line * (len(LEGEND) + 2)
        width = min(self.width() - 40, 1200)
        height = min(self.height() - 40, max(heights) + legend_height + line * 2)
        panel = QRectF((self.width() - width) / 2, (self.height() - height) / 2, width, height)
        painter.setBrush(QColor("#ffffff"))
        painter.setPen(QColor("#94a3b8"))
        painter.drawRoundedRect(panel, 8, 8)
        title_font = self.font()
        title_font.setBold(True)
        painter.setFont(title_font)
        painter.setPen(QColor("#0f172a"))
        painter.drawText(
            QRectF(panel.left() + 16, panel.top() + 8, panel.width() - 32, line),
            Qt.AlignmentFlag.AlignVCenter,
            "Keys (any key closes this)",
        )
        column_width = (panel.width() - 48) / 2
        for number, column in enumerate(columns):
            x = panel.left() + 16 + number * (column_width + 16)
            y = panel.top() + 8 + line * 1.5
            for title, entries in column:
                painter.setFont(title_font)
                painter.setPen(QColor("#1d4ed8"))
                painter.drawText(QRectF(x, y, column_width, line), Qt.AlignmentFlag.AlignVCenter, title)
                y += line
                painter.setFont(self.font())
                for keys, what in entries:
                    painter.setPen(QColor("#0f172a"))
                    painter.drawText(QRectF(x, y, key_width, line), Qt.AlignmentFlag.AlignVCenter, keys)
                    painter.setPen(QColor("#334155"))
                    text = metrics.elidedText(
                        what, Qt.TextElideMode.ElideRight, int(column_width - key_width)
                    )
                    painter.drawText(
                        QRectF(x + key_width, y, column_width - key_width, line),
                        Qt.AlignmentFlag.AlignVCenter,
                        text,
                    )
                    y += line
                y += line * 0.5
        y = panel.top() + 8 + line * 1.5 + max(heights)
        painter.setFont(title_font)
        painter.setPen(QColor("#1d4ed8"))
        painter.drawText(
            QRectF(panel.left() + 16, y, panel.width(), line),
            Qt.AlignmentFlag.AlignVCenter,
            "Colours in the text",
        )
        painter.setFont(self.font())
        y += line
        for number, (colour, meaning) in enumerate(LEGEND):
            x = panel.left() + 16 + (number % 2) * (column_width + 16)
            row_y = y + line * (number // 2)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colour)
            painter.drawRect(QRectF(x, row_y + 3, 28, line - 6))
            painter.setPen(QColor("#0f172a"))
            painter.drawText(
                QRectF(x + 36, row_y, column_width - 36, line), Qt.AlignmentFlag.AlignVCenter, meaning
            )
        painter.end()
