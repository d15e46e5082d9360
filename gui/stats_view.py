"""The statistics panel: a histogram of chunk sizes with the config's budgets, and chunks per finding code.

Drawn with QPainter (QtCharts would need pyside6-addons, ≈400 MB, for two pictures).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from chunkyard.chunking.findings import FINDINGS
from chunkyard.chunking.review import Budget, ReviewIndex

BAR = QColor("#60a5fa")
BUDGET = QColor("#dc2626")
AXIS = QColor("#334155")
FINDING_BAR = QColor("#f59e0b")


class SizeHistogram(QWidget):
    """Bars of chunk counts per size bin; a dashed red line at each budget in the same unit."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.counts = np.zeros(0, dtype=np.int64)
        self.edges = np.zeros(1)
        self.unit = ""
        self.other_units: dict[str, int] = {}  # chunks measured in another unit, left out, per unit
        self.budgets: list[Budget] = []
        self.setMinimumHeight(150)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_index(self, index: ReviewIndex | None) -> None:
        self.other_units = {}
        if index is None or not index.n_chunks:
            self.counts, self.edges, self.budgets = np.zeros(0, dtype=np.int64), np.zeros(1), []
        else:
            self.counts, self.edges = index.size_histogram(40)
            self.unit = index.unit
            self.other_units = index.other_units()
            self.budgets = [b for b in index.budgets if b.unit == index.unit]
        self.update()

    def title(self) -> str:
        """ "Chunk sizes (tokens)", saying how many chunks in other units are not shown."""
        if not self.unit:
            return "Chunk sizes"
        left_out = "".join(
            f"; {n:,} chunks in {unit} not shown" for unit, n in sorted(self.other_units.items())
        )
        return f"Chunk sizes ({self.unit}{left_out})"

    def sizeHint(self) -> QSize:
        return QSize(320, 180)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#ffffff"))
        metrics = QFontMetrics(self.font())
        line = metrics.height()
        left, right, top, bottom = metrics.horizontalAdvance("00000") + 8, 10, line + 6, line * 2 + 6
        plot = QRectF(left, top, max(10, self.width() - left - right), max(10, self.height() - top - bottom))
        painter.setPen(AXIS)
        painter.drawText(QRectF(0, 0, self.width(), line + 4), Qt.AlignmentFlag.AlignCenter, self.title())
        if not len(self.counts):
            painter.drawText(plot, Qt.AlignmentFlag.AlignCenter, "no chunks")
            painter.end()
            return
        peak = max(1, int(self.counts.max()))
        x_max = float(self.edges[-1]) or 1.0
        width = plot.width() / len(self.counts)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(BAR)
        for number, count in enumerate(self.counts):
            height = plot.height() * int(count) / peak
            painter.drawRect(
                QRectF(
                    plot.left() + number * width + 0.5, plot.bottom() - height, max(1.0, width - 1), height
                )
            )
        painter.setPen(QPen(AXIS, 1))
        painter.drawLine(plot.bottomLeft(), plot.bottomRight())
        painter.drawLine(plot.bottomLeft(), plot.topLeft())
        painter.drawText(
            QRectF(0, plot.top() - line / 2, left - 4, line), Qt.AlignmentFlag.AlignRight, f"{peak:,}"
        )
        painter.drawText(
            QRectF(0, plot.bottom() - line / 2, left - 4, line), Qt.AlignmentFlag.AlignRight, "0"
        )
        for fraction in (0.0, 0.5, 1.0):
            value = x_max * fraction
            x = plot.left() + plot.width() * fraction
            align = {
                0.0: Qt.AlignmentFlag.AlignLeft,
                0.5: Qt.AlignmentFlag.AlignHCenter,
                1.0: Qt.AlignmentFlag.AlignRight,
            }[fraction]
            box = QRectF(
                x - (0 if fraction == 0 else 60 if fraction == 1 else 30), plot.bottom() + 2, 60, line
            )
            painter.drawText(box, align, f"{value:,.0f}")
        label_y = plot.top() + 2
        for budget in sorted(self.budgets, key=lambda b: b.max_size):
            x = plot.left() + plot.width() * min(1.0, budget.max_size / x_max)
            painter.setPen(QPen(BUDGET, 1.5, Qt.PenStyle.DashLine))
            painter.drawLine(int(x), int(plot.top()), int(x), int(plot.bottom()))
            painter.setPen(BUDGET)
            text = f"{budget.max_size} ({budget.label})"
            text_width = metrics.horizontalAdvance(text)
            tx = x - text_width - 3 if x + text_width + 3 > plot.right() else x + 3
            painter.drawText(QRectF(tx, label_y, text_width + 2, line), Qt.AlignmentFlag.AlignLeft, text)
            label_y += line
        painter.setPen(AXIS)
        painter.drawText(
            QRectF(plot.left(), plot.bottom() + line + 2, plot.width(), line),
            Qt.AlignmentFlag.AlignCenter,
            "dashed: max_size budget",
        )
        painter.end()


class FindingCounts(QWidget):
    """Horizontal bars: how many chunks carry each finding code (hover for what it means); a click on a
    bar asks to review that finding's chunks (``finding_clicked``)."""

    finding_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.counts: dict[str, int] = {}
        self.total = 0
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_index(self, index: ReviewIndex | None) -> None:
        self.counts = index.finding_counts() if index is not None else {}
        self.total = index.n_chunks if index is not None else 0
        self.setToolTip(
            "\n".join(f"{code}: {FINDINGS.get(code, ('unknown finding',))[0]}" for code in self.counts)
        )
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        line = QFontMetrics(self.font()).height() + 4
        return QSize(320, line * (max(1, len(self.counts)) + 1) + 6)

    def code_at(self, y: float) -> str | None:
        """The finding whose bar is on line ``y`` (as painted: a title line, then one line per code)."""
        line = QFontMetrics(self.font()).height() + 4
        number = int((y - 2) // line) - 1
        codes = list(self.counts)
        return codes[number] if 0 <= number < len(codes) else None

    def bar_centre(self, code: str) -> QPointF:
        line = QFontMetrics(self.font()).height() + 4
        return QPointF(self.width() / 2, line * (list(self.counts).index(code) + 1) + 2 + line / 2)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        code = self.code_at(event.position().y())
        if code is not None and event.button() == Qt.MouseButton.LeftButton:
            self.finding_clicked.emit(code)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#ffffff"))
        metrics = QFontMetrics(self.font())
        line = metrics.height() + 4
        painter.setPen(AXIS)
        painter.drawText(QRectF(0, 0, self.width(), line), Qt.AlignmentFlag.AlignCenter, "Chunks per finding")
        if not self.counts:
            painter.drawText(QRectF(0, line, self.width(), line), Qt.AlignmentFlag.AlignCenter, "no findings")
            painter.end()
            return
        label_width = max(metrics.horizontalAdvance(code) for code in self.counts) + 8
        number_width = metrics.horizontalAdvance("0,000,000 (00%)") + 6
        bar_space = max(10, self.width() - label_width - number_width - 8)
        peak = max(self.counts.values())
        for number, (code, count) in enumerate(self.counts.items()):
            y = line * (number + 1) + 2
            painter.setPen(AXIS)
            painter.drawText(
                QRectF(4, y, label_width - 6, line),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                code,
            )
            width = bar_space * count / peak
            painter.fillRect(QRectF(label_width, y + 3, max(1.0, width), line - 6), FINDING_BAR)
            share = f" ({count / self.total:.0%})" if self.total else ""
            painter.drawText(
                QRectF(label_width + width + 4, y, number_width, line),
                Qt.AlignmentFlag.AlignVCenter,
                f"{count:,}{share}",
            )
        painter.end()


class StatisticsPanel(QWidget):
    """Both pictures, stacked."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.histogram = SizeHistogram(self)
        self.findings = FindingCounts(self)
        layout.addWidget(self.histogram, 3)
        layout.addWidget(self.findings, 0)

    def set_index(self, index: ReviewIndex | None) -> None:
        self.histogram.set_index(index)
        self.findings.set_index(index)
