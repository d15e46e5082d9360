"""Qt item models over a ``ReviewIndex``: the documents of a snapshot and the chunks of one document.

Both read the index's arrays directly, so a table of any size costs nothing until rows are painted;
the chunk model asks the index for section paths only for the document shown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from chunkyard.chunking.review import FLAGGED, OK, ChunkDetail, ReviewIndex

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
DOC_ROLE = Qt.ItemDataRole.UserRole + 2

_Index = QModelIndex | QPersistentModelIndex
FLAGGED_BRUSH = QBrush(QColor("#fde2e2"))
OK_BRUSH = QBrush(QColor("#dcfce7"))
REVIEWED_TEXT = QBrush(QColor("#111827"))


class _HeaderedTableModel(QAbstractTableModel):
    """A flat table model whose columns are its ``HEADERS``."""

    HEADERS: tuple[str, ...] = ()

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if (
            orientation == Qt.Orientation.Horizontal
            and role == Qt.ItemDataRole.DisplayRole
            and 0 <= section < len(self.HEADERS)
        ):
            return self.HEADERS[section]
        return None


class DocumentsModel(_HeaderedTableModel):
    """One row per listed document: name, chunks, chunks with findings, flagged and reviewed chunks.

    Sorting and filtering are done here with NumPy over the index's arrays rather than in a
    QSortFilterProxyModel, whose per-comparison Python calls take seconds on 10,000 documents.
    ``doc_at(row)`` / ``row_of(doc)`` map between table rows and document numbers.
    """

    HEADERS = ("Document", "Chunks", "Findings", "Flagged", "Reviewed")
    _KEYS = ("chunks", "suspicious", "flagged", "reviewed")

    def __init__(self, parent: Any = None):
        super().__init__(parent)
        self.index_data: ReviewIndex | None = None
        self._stats: dict[str, np.ndarray] = {}
        self._order = np.zeros(0, dtype=np.int64)  # all documents in sort order
        self._rows = np.zeros(0, dtype=np.int64)  # the listed ones, in sort order
        self._position = np.zeros(0, dtype=np.int64)  # document → listed row, or -1
        self._needle = ""
        self._allowed: np.ndarray | None = None
        self.sort_column, self.sort_order = 0, Qt.SortOrder.AscendingOrder

    def set_index(self, index: ReviewIndex | None) -> None:
        self.beginResetModel()
        self.index_data = index
        self._stats = index.document_stats() if index is not None else {}
        self._needle, self._allowed = "", None
        self._order = np.arange(index.n_documents if index is not None else 0, dtype=np.int64)
        self._sort_order_array()
        self._apply_filter()
        self.endResetModel()

    def refresh_counts(self) -> None:
        """Review counts changed: recompute and repaint the count columns."""
        if self.index_data is None or not self.rowCount():
            return
        self._stats = self.index_data.document_stats()
        self.dataChanged.emit(self.index(0, 3), self.index(self.rowCount() - 1, 4))

    # -- listing ---------------------------------------------------------------------------------

    def set_needle(self, text: str) -> None:
        self.beginResetModel()
        self._needle = text.strip().lower()
        self._apply_filter()
        self.endResetModel()

    def set_allowed(self, allowed: np.ndarray | None) -> bool:
        """List only the documents where ``allowed`` holds (all for None); False if nothing changed."""
        same = (allowed is None and self._allowed is None) or (
            allowed is not None and self._allowed is not None and np.array_equal(allowed, self._allowed)
        )
        if same:
            return False
        self.beginResetModel()
        self._allowed = allowed
        self._apply_filter()
        self.endResetModel()
        return True

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not 0 <= column < len(self.HEADERS):
            return
        self.layoutAboutToBeChanged.emit()
        persistent = self.persistentIndexList()
        docs = [self.doc_at(i.row()) for i in persistent]
        self.sort_column, self.sort_order = column, order
        self._sort_order_array()
        self._apply_filter()
        moved = []
        for i, doc in zip(persistent, docs, strict=True):
            row = self.row_of(doc) if doc is not None else None
            moved.append(self.index(row, i.column()) if row is not None else QModelIndex())
        self.changePersistentIndexList(persistent, moved)
        self.layoutChanged.emit()

    def _sort_order_array(self) -> None:
        index = self.index_data
        if index is None:
            return
        names = np.arange(index.n_documents)  # document numbers are already in name order
        descending = self.sort_order == Qt.SortOrder.DescendingOrder
        if self.sort_column == 0:
            order = names[::-1] if descending else names
        else:
            key = self._stats[self._KEYS[self.sort_column - 1]]
            order = np.lexsort((names, -key if descending else key))  # ties keep name order
        self._order = np.asarray(order, dtype=np.int64)

    def _apply_filter(self) -> None:
        index = self.index_data
        if index is None:
            self._rows = self._position = np.zeros(0, dtype=np.int64)
            return
        keep = np.ones(index.n_documents, dtype=bool) if self._allowed is None else self._allowed.copy()
        if self._needle:
            needle = self._needle
            keep &= np.fromiter(
                (
                    needle in d.lower() or needle in t.lower()
                    for d, t in zip(index.doc_ids, index.titles, strict=True)
                ),
                dtype=bool,
                count=index.n_documents,
            )
        self._rows = self._order[keep[self._order]]
        self._position = np.full(index.n_documents, -1, dtype=np.int64)
        self._position[self._rows] = np.arange(len(self._rows))

    def doc_at(self, row: int) -> int | None:
        return int(self._rows[row]) if 0 <= row < len(self._rows) else None

    def row_of(self, doc: int) -> int | None:
        if not 0 <= doc < len(self._position):
            return None
        row = int(self._position[doc])
        return row if row >= 0 else None

    # -- the model interface ---------------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's own default
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or self.index_data is None:
            return None
        doc = self.doc_at(index.row())
        if doc is None:
            return None
        column = index.column()
        if role == DOC_ROLE:
            return doc
        if column == 0:
            if role in (Qt.ItemDataRole.DisplayRole, SORT_ROLE):
                return self.index_data.doc_ids[doc]
            if role == Qt.ItemDataRole.ToolTipRole:
                title = self.index_data.titles[doc]
                return f"{self.index_data.doc_ids[doc]}\n{title}" if title else self.index_data.doc_ids[doc]
            return None
        value = int(self._stats[self._KEYS[column - 1]][doc])
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{value:,}" if value or column == 1 else ""
        if role == SORT_ROLE:
            return value
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and column == 2 and value:
            return QBrush(QColor("#b45309"))
        if role == Qt.ItemDataRole.ForegroundRole and column == 3 and value:
            return QBrush(QColor("#b91c1c"))
        return None


class ChunksModel(_HeaderedTableModel):
    """The chunks of one document: index, size with unit, section path, findings, review state."""

    HEADERS = ("#", "Size", "Section", "Findings", "Review")

    def __init__(self, parent: Any = None):
        super().__init__(parent)
        self.index_data: ReviewIndex | None = None
        self.doc: int | None = None
        self.first_row = 0
        self._count = 0
        self._details: list[ChunkDetail] = []
        self.marked: np.ndarray | None = (
            None  # the bulk selection (dataset rows), shown as "●" before the number
        )

    def set_marked(self, marked: np.ndarray | None) -> None:
        self.marked = marked
        self.refresh_states()

    def set_document(self, index: ReviewIndex | None, doc: int | None) -> None:
        self.beginResetModel()
        self.index_data, self.doc = index, doc
        if index is None or doc is None:
            self.first_row, self._count, self._details = 0, 0, []
        else:
            rows = index.doc_rows(doc)
            self.first_row, self._count = rows.start, len(rows)
            details = index.chunk_details(doc)
            self._details = details if len(details) == self._count else []
        self.endResetModel()

    def refresh_states(self) -> None:
        if self._count:
            self.dataChanged.emit(self.index(0, 0), self.index(self._count - 1, len(self.HEADERS) - 1))

    def dataset_row(self, table_row: int) -> int:
        return self.first_row + table_row

    def table_row(self, dataset_row: int) -> int | None:
        position = dataset_row - self.first_row
        return position if 0 <= position < self._count else None

    def detail(self, table_row: int) -> ChunkDetail | None:
        return self._details[table_row] if 0 <= table_row < len(self._details) else None

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self._count

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or self.index_data is None or not (0 <= index.row() < self._count):
            return None
        ix = self.index_data
        row = self.first_row + index.row()
        column = index.column()
        if role == Qt.ItemDataRole.BackgroundRole:
            verdict = int(ix.verdict[row])
            return FLAGGED_BRUSH if verdict == FLAGGED else OK_BRUSH if verdict == OK else None
        if role == Qt.ItemDataRole.ForegroundRole:
            # Dark text on the light verdict colours whatever the theme (a dark one has light text).
            return REVIEWED_TEXT if int(ix.verdict[row]) != 0 else None
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (0, 1):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role not in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return None
        if column == 0:
            mark = "● " if self.marked is not None and row < len(self.marked) and self.marked[row] else ""
            return f"{mark}{int(ix.chunk_index[row])}"
        if column == 1:
            return f"{int(ix.size[row]):,} {self._unit(index.row())}"
        if column == 2:
            detail = self.detail(index.row())
            return " › ".join(detail.section_path) if detail else ""
        if column == 3:
            codes = ix.findings(row)
            if role == Qt.ItemDataRole.ToolTipRole:
                return "\n".join(f"{code}: {text}" for code, text in ix.explain_findings(row)) or None
            return ", ".join(codes)
        state = ix.state(row)
        if state.flagged:
            reasons = state.reasons + [f"boundary: {r}" for r in state.boundary_reasons]
            text = "⚑ " + ", ".join(reasons)
        elif state.verdict == "ok":
            text = "✓ OK"
        else:
            text = ""
        if state.note:
            text = f"{text} ✎".strip()
            if role == Qt.ItemDataRole.ToolTipRole:
                return f"{text}\nnote: {state.note}"
        return text

    def _unit(self, table_row: int) -> str:
        detail = self.detail(table_row)
        return detail.unit if detail else (self.index_data.unit if self.index_data else "")
