"""The reviewer's main window: documents on the left, the source view in the middle, chunks on the right.

Keys (also in the Review menu): J/K next/previous chunk, N/P next/previous suspicious chunk across
documents, 1–9 flag with a reason, B flag the boundary after the chunk instead, O mark OK, E edit
the note, Ctrl+Z / Ctrl+Shift+Z undo/redo. A verdict moves on to the next chunk of the queue.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QItemSelectionModel, QModelIndex, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QFontDatabase,
    QKeySequence,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QShortcut,
    QShowEvent,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QSizePolicy,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from chunkyard.chunking.ledger import REASON_TEXT, REASONS
from chunkyard.chunking.review import (
    FINDING_QUEUE,
    QUEUES,
    ReviewIndex,
    elide_path,
    finding_queue,
    queue_title,
)
from chunkyard.chunking.words import plural
from chunkyard.gui.controller import CLOSE_PATIENCE_MS, ReviewController
from chunkyard.gui.models import DOC_ROLE, ChunksModel, DocumentsModel
from chunkyard.gui.source_view import SourceView
from chunkyard.gui.stats_view import StatisticsPanel

RECENT_KEY = "recent_datasets"
PANES = ((1, 0.31), (2, 0.39), (1, 0.30))  # documents, text, chunks: (stretch factor, share of the width)
RECENT_MAX = 8


class _ElideRight(QStyledItemDelegate):
    """A column whose cells keep their beginning when cut ("mid_sentence_…", not "…id_sentence_end")."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideRight


class _ElidePath(QStyledItemDelegate):
    """Document ids cut by ``elide_path``: top folders first, then the end, so a name keeps its beginning
    (a leading number) and ids that share a file name stay apart."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._cut: dict[
            tuple[str, int, str], str
        ] = {}  # (id, width, font) -> text: a repaint measures nothing

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        super().initStyleOption(option, index)
        margin = (
            2 * (option.widget.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin) + 1)
            if option.widget is not None
            else 6
        )
        width = max(0, option.rect.width() - margin)
        key = (option.text, width, option.font.key())
        text = self._cut.get(key)
        if text is None:
            if len(self._cut) > 20_000:
                self._cut.clear()
            text = self._cut[key] = elide_path(option.text, width, option.fontMetrics.horizontalAdvance)
        option.text = text
        option.textElideMode = Qt.TextElideMode.ElideRight


class _FittingTable(QTableView):
    """A table whose ``main`` column keeps at least ``share`` of the width: when the pane is narrow (a
    small screen, 2x scaling) the other columns shrink to their header text and then, from the right,
    the ones in ``optional`` are hidden — every name read "…" when the count columns took the pane."""

    def __init__(self, main: int, share: float, optional: tuple[int, ...] = ()):
        super().__init__()
        self.main, self.share, self.optional = main, share, optional
        self.preferred: dict[int, int] = {}  # column -> width it gets when there is room
        self.least: dict[int, int] = {}  # column -> width it keeps however narrow (else its header text's)

    def fit_columns(self) -> None:
        header = self.horizontalHeader()
        width = self.viewport().width()
        if width <= 0 or not self.preferred:
            return
        columns = sorted(self.preferred)
        floor = {
            c: self.least.get(c)
            or header.fontMetrics().horizontalAdvance(
                str(self.model().headerData(c, Qt.Orientation.Horizontal))
            )
            + 14
            for c in columns
        }
        room = width * (1 - self.share)  # what the other columns may take together
        hidden: set[int] = set()
        for column in (None, *self.optional):
            if column is not None:
                hidden.add(column)
            shown = [c for c in columns if c not in hidden]
            if sum(min(floor[c], self.preferred[c]) for c in shown) <= room:
                break
        shown = [c for c in columns if c not in hidden]
        wanted = sum(self.preferred[c] for c in shown)
        low = sum(min(floor[c], self.preferred[c]) for c in shown)
        # Between their header text and their preferred width, in proportion to the room there is.
        scale = 1.0 if wanted <= room else max(0.0, (room - low) / max(1, wanted - low))
        for column in columns:
            header.setSectionHidden(column, column in hidden)
            if column not in hidden:
                least = min(floor[column], self.preferred[column])
                header.resizeSection(
                    column, round(least + (self.preferred[column] - least) * min(1.0, scale))
                )

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_columns()


class _ElidedLabel(QLabel):
    """A one-line label that takes the width it is given and elides its text in the middle (the whole
    text in its tooltip): a plain QLabel is at least as wide as its text, so a long document id and
    title widened the text pane, squeezed the other panes and set the window's minimum width."""

    def __init__(self, text: str = ""):
        super().__init__(text)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self.setToolTip(text)

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideMiddle, rect.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(self.alignment()), text)
        painter.end()


def ask_note(parent: QWidget, text: str, what: str = "this chunk") -> tuple[str, bool]:
    """The note dialog: (text, saved). Unlike Qt's multi-line input dialog (where Tab types a tab and
    Ctrl+Return does nothing) it works from the keyboard alone: Tab leaves the text, Ctrl+Return
    saves, Escape cancels."""
    dialog = QDialog(parent)
    dialog.setWindowTitle(f"Note on {what}")
    edit = QPlainTextEdit(text)
    edit.setTabChangesFocus(True)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    for keys in ("Ctrl+Return", "Ctrl+Enter"):
        QShortcut(QKeySequence(keys), dialog, activated=dialog.accept)
    layout = QVBoxLayout(dialog)
    label = QLabel(f"Note on {what} (Ctrl+Enter saves, Esc cancels):")
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    layout.addWidget(label)
    layout.addWidget(edit)
    layout.addWidget(buttons)
    edit.setFocus()
    edit.moveCursor(QTextCursor.MoveOperation.End)
    accepted = dialog.exec() == QDialog.DialogCode.Accepted
    note = edit.toPlainText()
    dialog.deleteLater()
    return note, accepted


def _isolate(text: str) -> str:
    """``text`` as a bidi isolate (FSI … PDI): laid out in its own direction without reordering what is
    around it, as a right-to-left title next to "12 chunks" would."""
    return f"\u2068{text}\u2069"


def _fixed_rows(table: QTableView) -> None:
    """Fixed row heights and no resize-to-contents: a table of any length costs only its visible rows."""
    header = table.verticalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
    header.setDefaultSectionSize(table.fontMetrics().height() + 6)
    header.hide()
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setWordWrap(False)
    table.setAlternatingRowColors(True)
    table.horizontalHeader().setHighlightSections(False)


class MainWindow(QMainWindow):
    """The reviewer window over a ``ReviewController``."""

    def __init__(self, controller: ReviewController | None = None):
        super().__init__()
        self.controller = controller or ReviewController(self)
        self.last_error = ""
        self._typed_ahead: list = []  # review keys pressed while the dataset loads (_after_loading)
        self._filtering = False  # filtering moves the list's current row; that is not a user's choice
        self.compare_window: QWidget | None = (
            None  # the Compare window (gui.compare_view.CompareWindow), if open
        )
        self._syncing = (
            False  # the window moves a table's current row to the controller's: not a user's choice
        )
        self.setWindowTitle("chunkyard review")
        self._fit_to_screen(1500, 900)
        self._build_widgets()
        self._build_actions()
        self._connect()
        self.statusBar().showMessage("Open a dataset: File ▸ Open (Ctrl+O)")
        # Decisions waiting for the review ledger (another program holds its lock): shown until written.
        self.pending_label = QLabel("")
        self.pending_label.setTextFormat(Qt.TextFormat.PlainText)
        self.pending_label.setStyleSheet("QLabel { color: #b35900; font-weight: bold; }")
        self.pending_label.hide()
        self.statusBar().addPermanentWidget(self.pending_label)
        self.read_only_label = QLabel("READ-ONLY: decisions are not recorded")
        self.read_only_label.setStyleSheet("QLabel { color: #b91c1c; font-weight: bold; }")
        self.read_only_label.hide()
        self.statusBar().addPermanentWidget(self.read_only_label)
        self.bulk_label = QLabel("")
        self.bulk_label.setTextFormat(Qt.TextFormat.PlainText)
        self.bulk_label.setStyleSheet("QLabel { color: #1d4ed8; font-weight: bold; }")
        self.bulk_label.hide()
        self.statusBar().addPermanentWidget(self.bulk_label)
        self.unsaved_box: QMessageBox | None = None
        self._close_when_saved = False
        self.chunks_view.setFocus(Qt.FocusReason.OtherFocusReason)

    # -- layout ----------------------------------------------------------------------------------

    def _fit_to_screen(self, width: int, height: int) -> None:
        """Open at ``width`` x ``height``, or smaller where the screen is (a 1280 x 720 laptop): a window
        larger than the screen hides its right end (progress) and its status bar."""
        screen = self.screen()
        if screen is not None:
            available = screen.availableGeometry()
            # Leave room for the window frame and title bar the window manager adds.
            width = min(width, available.width() - 16)
            height = min(height, available.height() - 48)
        self.resize(width, height)

    def _build_widgets(self) -> None:
        self.documents_model = DocumentsModel(self)
        # The name keeps 40% of the list; Reviewed, then Flagged, then Findings give way when it is narrow.
        self.documents_view = _FittingTable(0, 0.4, optional=(4, 3, 2))
        self.documents_view.setModel(self.documents_model)
        _fixed_rows(self.documents_view)
        self.documents_view.setSortingEnabled(True)
        # Cut by whole top folders, then at the end ("…/2400-node-swap/README.md", "…/12-returns-and-…"):
        # cut from the left a name lost its leading number, cut in the middle every KEP read "keps/s…DME.md".
        self._path_delegate = _ElidePath(self.documents_view)
        self.documents_view.setItemDelegateForColumn(0, self._path_delegate)
        self.documents_view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        header = self.documents_view.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            # Wide enough for the header text, measured once (not resize-to-contents over the rows).
            text_width = header.fontMetrics().horizontalAdvance(DocumentsModel.HEADERS[column])
            self.documents_view.preferred[column] = max(48, text_width + 14)
            header.resizeSection(column, self.documents_view.preferred[column])
        self.filter_box = QLineEdit()
        self.filter_box.setPlaceholderText("Filter documents…")
        self.filter_box.setClearButtonEnabled(True)
        # Not a Tab stop and never the first focus: review keys typed into it were lost (N, J, 2 became a
        # filter). Ctrl+F or a click enters it; Return or Escape leaves it.
        self.filter_box.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.order_box = QComboBox()
        self.order_box.addItems(["By name", "Most suspicious"])
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        row.addWidget(self.filter_box, 1)
        row.addWidget(self.order_box)
        left_layout.addLayout(row)
        left_layout.addWidget(self.documents_view, 1)

        self.source_view = SourceView()
        self.doc_label = _ElidedLabel("No document")
        centre = QWidget()
        centre_layout = QVBoxLayout(centre)
        centre_layout.setContentsMargins(4, 4, 4, 4)
        centre_layout.addWidget(self.doc_label)
        centre_layout.addWidget(self.source_view, 1)

        self.chunks_model = ChunksModel(self)
        # The section path keeps a quarter of the table; the other columns shrink towards their header text.
        self.chunks_view = _FittingTable(ChunksModel.HEADERS.index("Section"), 0.25)
        self.chunks_view.setModel(self.chunks_model)
        _fixed_rows(self.chunks_view)
        chunk_header = self.chunks_view.horizontalHeader()
        for column, width in enumerate((34, 84, 170, 100, 100)):
            chunk_header.resizeSection(column, width)
            if column != self.chunks_view.main:
                self.chunks_view.preferred[column] = width
        # Never fewer than six rows in view, whatever the splitter or the screen (at 2x it showed two).
        row_height = self.chunks_view.verticalHeader().defaultSectionSize()
        self.chunks_view.setMinimumHeight(
            6 * row_height
            + self.chunks_view.horizontalHeader().sizeHint().height()
            + 2 * self.chunks_view.frameWidth()
            + self.chunks_view.horizontalScrollBar().sizeHint().height()
        )
        # A size is read whole or not at all ("… chars" said nothing).
        self.chunks_view.least[1] = self.chunks_view.fontMetrics().horizontalAdvance("8,888 tokens") + 14
        # The section path takes what the pane has left (it is elided from the left): all columns,
        # the Review column included, stay in view at every pane width.
        chunk_header.setSectionResizeMode(
            ChunksModel.HEADERS.index("Section"), QHeaderView.ResizeMode.Stretch
        )
        self.chunks_view.setTextElideMode(Qt.TextElideMode.ElideLeft)  # the deepest heading matters most
        # Finding codes and verdicts ("⚑ split_procedure") are read from the left.
        self._findings_delegate = _ElideRight(self.chunks_view)
        for column in ("Findings", "Review"):
            self.chunks_view.setItemDelegateForColumn(
                ChunksModel.HEADERS.index(column), self._findings_delegate
            )
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("Select a chunk")
        self.stats = StatisticsPanel()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.detail, "Chunk")
        self.tabs.addTab(self.stats, "Statistics")
        self.evaluation = QPlainTextEdit()
        self.evaluation.setReadOnly(True)
        self.evaluation.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.evaluation.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.evaluation.setPlaceholderText(
            "No evaluation of this dataset yet: run `chunkyard eval CONFIG --questions FILE`"
        )
        self.tabs.addTab(self.evaluation, "Evaluation")
        from chunkyard.gui.question_view import QuestionPanel

        self.question_panel = QuestionPanel()
        self.question_panel.question.setFocusPolicy(
            Qt.FocusPolicy.ClickFocus
        )  # never takes review keys by Tab
        self.tabs.addTab(self.question_panel, "Question")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.chunks_view)
        right.addWidget(self.tabs)
        right.setSizes([380, 480])
        # The chunk table gets the larger share of every height (at 2x scaling it showed two rows).
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        self._right_panes = right

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(centre)
        splitter.addWidget(right)
        # The text gets the largest share at every window size, and of every resize: fixed side panes
        # left a 1280-pixel window 266 pixels of text.
        for pane, (stretch, _share) in enumerate(PANES):
            splitter.setStretchFactor(pane, stretch)
        self._panes_placed = False  # the shares are applied at the first show, at the window's real width
        self.setCentralWidget(splitter)

        toolbar = self.addToolBar("Review")
        toolbar.setObjectName("review-toolbar")
        toolbar.setMovable(False)
        self.progress_label = QLabel("")
        self.progress_label.setTextFormat(Qt.TextFormat.PlainText)
        self.queue_box = QComboBox()
        for queue in QUEUES:
            self.queue_box.addItem(queue, queue)
        # Wide enough for "Finding split_procedure (8)" (it read "Finding split").
        self.queue_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.queue_box.setMinimumContentsLength(24)
        self.queue_box.setCurrentText(self.controller.queue)
        self.queue_box.setToolTip(
            "Queue: which documents are listed and where a verdict moves on to; a finding's "
            "queue holds its chunks not decided yet (or click its bar under Statistics)"
        )
        self.queue_progress_label = QLabel("")
        self.queue_progress_label.setTextFormat(Qt.TextFormat.PlainText)
        self.queue_progress_label.setToolTip(
            "This queue: chunks decided of all it covers, your pace over the "
            "last decisions, and the time the rest would take at that pace"
        )
        self.reviewer_box = QLineEdit(self.controller.reviewer)
        self.reviewer_box.setMaximumWidth(160)
        self.reviewer_box.setToolTip("Reviewer name recorded with each decision")
        self.reviewer_box.setFocusPolicy(
            Qt.FocusPolicy.ClickFocus
        )  # as the filter box: never takes review keys
        self.target_label = QLabel("")
        toolbar.addWidget(QLabel(" Queue: "))
        toolbar.addWidget(self.queue_box)
        toolbar.addWidget(QLabel(" "))
        toolbar.addWidget(self.queue_progress_label)
        toolbar.addSeparator()
        toolbar.addWidget(QLabel(" Reviewer: "))
        toolbar.addWidget(self.reviewer_box)
        toolbar.addSeparator()
        toolbar.addWidget(self.target_label)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Find in chunk text… (/)")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.setMaximumWidth(240)
        self.search_box.setFocusPolicy(
            Qt.FocusPolicy.ClickFocus
        )  # as the filter box: never takes review keys
        self.search_box.setToolTip(
            "Return finds the next chunk whose text contains this (any case); F3 / Shift+F3 "
            "the next / previous one; Esc goes back to reviewing"
        )
        toolbar.addWidget(self.search_box)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        toolbar.addWidget(spacer)
        toolbar.addWidget(self.progress_label)
        toolbar.addWidget(QLabel("  "))

    def _build_actions(self) -> None:
        controller = self.controller
        file_menu = self.menuBar().addMenu("&File")
        open_action = QAction("&Open dataset…", self, shortcut=QKeySequence.StandardKey.Open)
        open_action.triggered.connect(self.choose_dataset)
        file_menu.addAction(open_action)
        self.recent_menu = file_menu.addMenu("Open &recent")
        self._fill_recent()
        file_menu.addSeparator()
        # Ctrl+Q spelled out: the standard Quit key is empty on some platforms (offscreen), and Compare uses it too.
        quit_action = QAction("&Quit", self, shortcut=QKeySequence("Ctrl+Q"))
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)

        review = self.menuBar().addMenu("&Review")

        def add(text: str, keys: str | QKeySequence | list[QKeySequence], slot: object) -> QAction:
            action = QAction(text, self)
            if isinstance(keys, list):
                action.setShortcuts(keys)
            else:
                action.setShortcut(QKeySequence(keys) if isinstance(keys, str) else keys)
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(self._after_loading(slot))
            review.addAction(action)
            self.addAction(action)
            return action

        self.decision_actions: list[QAction] = []  # disabled while the dataset is open read-only
        add("Next chunk", "J", lambda: controller.step_chunk(1))
        add("Previous chunk", "K", lambda: controller.step_chunk(-1))
        add("Next suspicious chunk not decided yet", "N", lambda: self._step_suspicious(1))
        add("Previous suspicious chunk not decided yet", "P", lambda: self._step_suspicious(-1))
        review.addSeparator()
        flag_menu = review.addMenu("Flag")
        for number, reason in enumerate(REASONS, start=1):
            action = QAction(f"{reason} — {REASON_TEXT[reason]}", self)
            action.setShortcut(QKeySequence(str(number)))
            action.triggered.connect(self._after_loading(lambda n=number: controller.flag_number(n)))
            action.setIconText(f"{number} {reason}")  # on the Decide toolbar: the key and its reason, in view
            action.setToolTip(f"{number}: flag {reason} — {REASON_TEXT[reason]}")
            flag_menu.addAction(action)
            self.addAction(action)
            self.decision_actions.append(action)
        self.boundary_action = add(
            "Flag the boundary after this chunk (next flag)",
            "B",
            lambda: controller.set_boundary_mode(not controller.boundary_mode),
        )
        self.boundary_action.setCheckable(True)
        self.decision_actions += [
            self.boundary_action,
            add("Mark OK", "O", controller.mark_ok),
            add("Keep the selected text together", "T", lambda: self.constrain_selection("keep_together")),
            add("Break here (at the text cursor)", "H", lambda: self.constrain_selection("break_here")),
            add("Edit note… (on the chunk just decided, else this one)", "E", self.edit_note),
        ]
        review.addSeparator()
        bulk = review.addMenu("Bulk")
        self._bulk_menu = bulk
        bulk_actions = []
        for text, keys, how in (
            ("Choose the chunks with this chunk's findings", "Ctrl+Shift+F", "findings"),
            ("Choose the chunks with this chunk's section title", "Ctrl+Shift+S", "section"),
            ("Choose a range: press at its first chunk, then at its last", "Ctrl+Shift+R", "range"),
        ):
            action = QAction(text, self, shortcut=QKeySequence(keys))
            action.triggered.connect(lambda _=False, h=how: self.controller.bulk_select(h))
            bulk_actions.append(action)
        clear = QAction("Clear the chosen chunks", self, shortcut=QKeySequence("Ctrl+Shift+X"))
        clear.triggered.connect(controller.clear_bulk)
        bulk_actions.append(clear)
        for number, reason in enumerate(REASONS, start=1):
            action = QAction(f"Flag all chosen as {reason}", self, shortcut=QKeySequence(f"Ctrl+{number}"))
            action.triggered.connect(lambda _=False, r=reason: self.controller.bulk_decide("flag", r))
            bulk_actions.append(action)
        ok_all = QAction("Mark all chosen OK", self, shortcut=QKeySequence("Ctrl+Shift+O"))
        ok_all.triggered.connect(lambda: self.controller.bulk_decide("mark_ok"))
        bulk_actions.append(ok_all)
        for action in bulk_actions:
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            bulk.addAction(action)
            self.addAction(action)
        self.decision_actions += bulk_actions
        review.addSeparator()
        undo = controller.undo_stack.createUndoAction(self, "Undo")
        undo.setShortcut(QKeySequence("Ctrl+Z"))
        redo = controller.undo_stack.createRedoAction(self, "Redo")
        redo.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        for action in (undo, redo):
            review.addAction(action)
            self.addAction(action)
        self.undo_action, self.redo_action = undo, redo
        self.decision_actions += [undo, redo]
        self.flag_actions = [a for a in flag_menu.actions() if not a.isSeparator()]
        self._review_menu, self._flag_menu, self._file_menu = review, flag_menu, file_menu

        view = self.menuBar().addMenu("&View")
        stats = QAction("Statistics", self, shortcut=QKeySequence("Ctrl+T"))
        stats.triggered.connect(lambda: self.tabs.setCurrentWidget(self.stats))
        view.addAction(stats)
        compare = QAction("Compare with the parent snapshot", self, shortcut=QKeySequence("Ctrl+D"))
        compare.triggered.connect(self.compare_with_parent)
        view.addAction(compare)
        find = QAction("Filter documents", self, shortcut=QKeySequence.StandardKey.Find)
        find.triggered.connect(lambda: (self.filter_box.setFocus(), self.filter_box.selectAll()))
        view.addAction(find)
        find_text = QAction("Find in chunk text", self, shortcut=QKeySequence("/"))
        find_text.triggered.connect(
            lambda: (
                self.search_box.setFocus(Qt.FocusReason.ShortcutFocusReason),
                self.search_box.selectAll(),
            )
        )
        view.addAction(find_text)
        next_hit = QAction("Next chunk with the text found", self, shortcut=QKeySequence("F3"))
        next_hit.triggered.connect(lambda: self.step_hit(1))
        view.addAction(next_hit)
        previous_hit = QAction("Previous chunk with the text found", self, shortcut=QKeySequence("Shift+F3"))
        previous_hit.triggered.connect(lambda: self.step_hit(-1))
        view.addAction(previous_hit)
        go = QAction("Go to a chunk or document (N, DOC_ID, DOC_ID#N)", self, shortcut=QKeySequence("Ctrl+G"))
        go.triggered.connect(self.ask_go_to)
        view.addAction(go)
        ask = QAction("Ask a question (the chunks that answer it)", self, shortcut=QKeySequence("Ctrl+K"))
        ask.triggered.connect(self.focus_question)
        view.addAction(ask)
        self._view_menu = view

        help_menu = self.menuBar().addMenu("&Help")
        keys = QAction("Keys and colours", self)
        keys.setShortcuts([QKeySequence("?"), QKeySequence("F1")])
        keys.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        keys.triggered.connect(self.show_keys)
        help_menu.addAction(keys)
        self.addAction(keys)
        self.keys_action = keys
        self._build_decide_toolbar()

    def _build_decide_toolbar(self) -> None:
        """A second toolbar row: each verdict as a button that shows its key ("2 mid_sentence", "O OK")."""
        self.addToolBarBreak()
        bar = self.addToolBar("Decide")
        bar.setObjectName("decide-toolbar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for action in self.flag_actions:
            bar.addAction(action)
        bar.addSeparator()
        for action in self.decision_actions:
            if action.shortcut().toString() in ("B", "O", "E"):
                action.setIconText(
                    {"B": "B boundary", "O": "O OK", "E": "E note"}[action.shortcut().toString()]
                )
                bar.addAction(action)
        bar.addSeparator()
        bar.addAction(self.keys_action)
        self.keys_action.setIconText("? keys")
        self.decide_bar = bar

    def key_sections(self) -> list[tuple[str, list[QAction]]]:
        """The window's actions by menu, for the `?` overlay (read from the menus: it cannot drift)."""
        review = [a for a in self._review_menu.actions() if a.menu() is None]
        return [
            ("Review", review),
            ("Flag the chunk (B first: the boundary after it)", self._flag_menu.actions()),
            ("Bulk: choose chunks, decide them in one step", self._bulk_menu.actions()),
            ("View", self._view_menu.actions()),
            ("File", self._file_menu.actions()),
            ("Help", [self.keys_action]),
            ("In the filter box", [self._leave_filter_action]),
        ]

    def _on_search(self) -> None:
        """Return in the search box: find the chunks containing the text, go to the next one after the
        current chunk, and give the keys back to the review (F3 goes on)."""
        index = self.controller.index
        needle = self.search_box.text()
        self.hits = index.text_matches(needle) if index is not None and needle else None
        self.hits_needle = needle
        self.chunks_view.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.step_hit(1)

    hits = None
    hits_needle = ""

    def step_hit(self, step: int) -> bool:
        index, hits = self.controller.index, self.hits
        if index is None or hits is None:
            self.statusBar().showMessage("Nothing searched yet: / then the text and Return", 5000)
            return False
        total = int(np.count_nonzero(hits))
        if not total:
            self.statusBar().showMessage(f"No chunk contains “{self.hits_needle}”", 5000)
            return False
        row = index.next_row(hits, self.controller.row, step)
        wrapped = row is None
        if wrapped:  # round again from the other end
            row = index.next_row(hits, None, step)
        assert row is not None
        self.controller.select_row(row)
        number = int(np.count_nonzero(hits[: row + 1]))
        self.statusBar().showMessage(
            f"“{self.hits_needle}”: chunk {number} of {total} that contain it"
            + (" (from the other end)" if wrapped else "")
            + " — F3 next, Shift+F3 previous",
            8000,
        )
        return True

    def go_to(self, spec: str) -> bool:
        index = self.controller.index
        if index is None:
            return False
        doc, row, problem = index.go_to(spec, self.controller.doc)
        if problem:
            self.statusBar().showMessage(f"Go to {spec!r}: {problem}", 8000)
            return False
        if row is not None:
            self.controller.select_row(row)
        else:
            self.controller.select_document(doc)
        return True

    def ask_go_to(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        spec, accepted = QInputDialog.getText(
            self, "Go to", "Chunk number (this document), DOC_ID, or DOC_ID#N:"
        )
        if accepted:
            self.go_to(spec)
        self.give_keys_to_review()

    def focus_question(self) -> None:
        self.tabs.setCurrentWidget(self.question_panel)
        self.question_panel.question.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.question_panel.question.selectAll()

    def show_keys(self) -> None:
        from chunkyard.gui.keys_overlay import KeysOverlay

        if getattr(self, "keys_overlay", None) is None:
            self.keys_overlay = KeysOverlay(self, self.key_sections())
        self.keys_overlay.toggle()

    def _connect(self) -> None:
        controller = self.controller
        controller.loading.connect(lambda path: self.statusBar().showMessage(f"Opening {path}…"))
        controller.loaded.connect(self._on_loaded)
        controller.failed.connect(self.show_error)
        controller.document_changed.connect(self._on_document)
        controller.current_changed.connect(self._on_current)
        controller.states_changed.connect(self._on_states)
        controller.boundary_mode_changed.connect(self._on_boundary_mode)
        controller.notice.connect(lambda message: self.statusBar().showMessage(message, 5000))
        controller.pending_changed.connect(self._on_pending)
        controller.read_only_changed.connect(self._on_read_only)
        controller.bulk_changed.connect(self._on_bulk)
        self.source_view.chunk_clicked.connect(controller.select_row)
        self.documents_view.selectionModel().currentRowChanged.connect(self._on_document_clicked)
        self.chunks_view.selectionModel().currentRowChanged.connect(self._on_chunk_clicked)
        self.filter_box.textChanged.connect(self._filter_documents)
        self.filter_box.returnPressed.connect(self._leave_filter)
        leave_filter = QAction("Back to the list (also Return)", self.filter_box)
        self._leave_filter_action = leave_filter
        leave_filter.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        leave_filter.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        leave_filter.triggered.connect(self._leave_filter)
        self.filter_box.addAction(leave_filter)
        self.order_box.currentIndexChanged.connect(self._on_order)
        self.search_box.returnPressed.connect(self._on_search)
        leave_search = QAction("Back to reviewing", self.search_box)
        leave_search.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        leave_search.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        leave_search.triggered.connect(lambda: self.chunks_view.setFocus(Qt.FocusReason.ShortcutFocusReason))
        self.search_box.addAction(leave_search)
        self.question_panel.answered.connect(
            lambda: self.source_view.set_answers(self.question_panel.margin_marks())
        )
        self.question_panel.chunk_chosen.connect(controller.select_row)
        leave_question = QAction("Back to reviewing", self.question_panel.question)
        leave_question.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        leave_question.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        leave_question.triggered.connect(
            lambda: self.chunks_view.setFocus(Qt.FocusReason.ShortcutFocusReason)
        )
        self.question_panel.question.addAction(leave_question)
        self.queue_box.currentIndexChanged.connect(self._on_queue_chosen)
        self.stats.findings.finding_clicked.connect(self.review_finding)
        self.reviewer_box.editingFinished.connect(self._on_reviewer_edited)
        # Return takes the name; Escape drops the edit. Either way the keys go back to the review.
        self.reviewer_box.returnPressed.connect(
            lambda: self.chunks_view.setFocus(Qt.FocusReason.ShortcutFocusReason)
        )
        leave_reviewer = QAction(self.reviewer_box)
        leave_reviewer.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        leave_reviewer.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        leave_reviewer.triggered.connect(
            lambda: (
                self.reviewer_box.setText(self.controller.reviewer),
                self.chunks_view.setFocus(Qt.FocusReason.ShortcutFocusReason),
            )
        )
        self.reviewer_box.addAction(leave_reviewer)

    def _on_reviewer_edited(self) -> None:
        self.controller.set_reviewer(self.reviewer_box.text())
        if (
            self.reviewer_box.text() != self.controller.reviewer
        ):  # an empty name is not taken: show the one used
            self.reviewer_box.setText(self.controller.reviewer)

    # -- opening ---------------------------------------------------------------------------------

    def open_dataset(self, path: str | Path) -> None:
        self.controller.open(path)

    def choose_dataset(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a dataset (NAME, vX or a snapshot folder)")
        if folder:
            self.open_dataset(folder)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        recent = QSettings().value(RECENT_KEY, []) or []
        if isinstance(recent, str):
            recent = [recent]
        for path in recent[:RECENT_MAX]:
            action = self.recent_menu.addAction(str(path))
            action.triggered.connect(lambda _=False, p=path: self.open_dataset(p))
        self.recent_menu.setEnabled(bool(recent))

    def _remember(self, path: str) -> None:
        settings = QSettings()
        recent = settings.value(RECENT_KEY, []) or []
        if isinstance(recent, str):
            recent = [recent]
        recent = [path] + [p for p in recent if p != path]
        settings.setValue(RECENT_KEY, recent[:RECENT_MAX])
        self._fill_recent()

    def _on_loaded(self) -> None:
        index = self.controller.index
        if index is None:
            return
        self.setWindowTitle(
            f"chunkyard review — {index.dataset} v{index.version} / {index.snapshot_number:04d}"
        )
        self.documents_model.set_index(index)
        self.chunks_model.set_document(None, None)
        self.source_view.show_document(None, None)
        self.stats.set_index(index)
        self.question_panel.set_index(index)
        self.source_view.set_answers({})
        self._show_evaluation(index.snapshot.path)
        self.reviewer_box.setText(self.controller.reviewer)
        self.controller.clear_bulk()
        self._fill_finding_queues(index)
        self._update_progress()
        self._apply_queue()
        self._remember(str(index.snapshot.path.parent.parent))
        self.give_keys_to_review()
        self.source_view.setPlaceholderText(self._why_empty(index) if not index.n_chunks else "")
        QTimer.singleShot(0, self._apply_typed_ahead)  # once the first document is shown
        from chunkyard.chunking.decisions import stale_constraints

        stale = stale_constraints(index.snapshot.manifest)
        self.statusBar().showMessage(
            f"{index.snapshot.path}: {plural(index.n_documents, 'document')}, {plural(index.n_chunks, 'chunk')}"
            + (f" — read-only: {self.controller.read_only}" if self.controller.read_only else "")
            + (
                f" — {len(stale)} stale constraint(s), their text is gone: "
                + ", ".join(sorted({entry["doc_id"] for entry in stale}))
                if stale
                else ""
            )
        )

    @staticmethod
    def _why_empty(index: ReviewIndex) -> str:
        """What the text pane says about a snapshot without chunks: each file skipped and why."""
        skipped = [item for item in index.snapshot.manifest.get("skipped") or [] if isinstance(item, dict)]
        head = f"This snapshot has no chunks: {plural(index.n_documents, 'document')} with text" + (
            f", and {plural(len(skipped), 'file')} skipped:"
            if skipped
            else "; no file was skipped (the source folder held none the config includes)."
        )
        lines = [f"  {item.get('doc_id')}: {item.get('reason')}" for item in skipped[:200]]
        if len(skipped) > 200:
            lines.append(f"  … and {len(skipped) - 200} more (manifest.json, `skipped`)")
        return "\n".join([head, *lines, "", f"Snapshot: {index.snapshot.path}"])

    def _after_loading(self, slot: Callable[[], object]) -> Callable[..., None]:
        """A review key pressed while the dataset is still loading waits for it (type-ahead): the first
        N, J or 2 after opening a large dataset are applied, in order, once it is open, not dropped."""

        def run(*_: object) -> None:
            if self.controller.index is None and self.controller.is_loading():
                self._typed_ahead.append(slot)
                self.statusBar().showMessage(
                    f"loading… {plural(len(self._typed_ahead), 'key')} pressed, applied once the dataset is open"
                )
                return
            slot()

        return run

    def _apply_typed_ahead(self) -> None:
        keys, self._typed_ahead = self._typed_ahead, []
        if self.controller.index is not None:
            for slot in keys:
                slot()

    def give_keys_to_review(self) -> None:
        """Put the keyboard focus where review keys work (the chunk table), unless the reviewer is typing
        in a text box: the first N, J or 2 after opening must review, not filter."""
        focused = self.focusWidget()
        typing = isinstance(focused, QLineEdit) and bool(focused.text()) and focused.hasFocus()
        if not typing:
            self.chunks_view.setFocus(Qt.FocusReason.OtherFocusReason)

    def _show_evaluation(self, snapshot_path) -> None:
        """The latest `chunkyard eval` result for this dataset, if any (read from beside the snapshot)."""
        from chunkyard.chunking.errors import ChunkyardError
        from chunkyard.chunking.evaluation.report import format_stored
        from chunkyard.chunking.evaluation.store import latest_evaluation

        try:
            stored = latest_evaluation(snapshot_path)
        except (ChunkyardError, OSError, ValueError, KeyError) as exc:
            self.evaluation.setPlainText(f"Cannot read the evaluation: {exc}")
            return
        self.evaluation.setPlainText(format_stored(stored) if stored else "")

    def show_error(self, message: str) -> None:
        """A clear dialog, never a crash; non-blocking so that a scripted run cannot hang on it."""
        self.last_error = message
        self.statusBar().showMessage(message.splitlines()[0] if message else "")
        box = QMessageBox(
            QMessageBox.Icon.Critical, "chunkyard review", message, QMessageBox.StandardButton.Ok, self
        )
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    # -- reacting to the controller ----------------------------------------------------------------

    def _on_document(self, doc: int) -> None:
        index = self.controller.index
        if index is None or doc < 0:
            return
        self.chunks_model.set_document(index, doc)
        self.source_view.show_document(index, doc)
        title = index.titles[doc]
        n = len(index.doc_rows(doc))
        # The "#" column fits the largest chunk number (it would show "…2" for chunk 8872).
        digits = self.chunks_view.fontMetrics().horizontalAdvance("8" * len(str(max(n - 1, 0))))
        self.chunks_view.preferred[0] = max(34, digits + 14)
        self.chunks_view.fit_columns()
        # Each name in its own bidi isolate: a right-to-left title would otherwise take the count with it.
        name = _isolate(index.doc_ids[doc])
        count = plural(n, "chunk")
        self.doc_label.setText(
            f"{name}  ·  {_isolate(title)}  ·  {count}" if title else f"{name}  ·  {count}"
        )
        self._select_current_document()

    def _select_current_document(self) -> None:
        doc = self.controller.doc
        row = self.documents_model.row_of(doc) if doc is not None else None
        if row is not None:
            proxy = self.documents_model.index(row, 0)
            # Not by blocking the selection model's signals: the view then never hears that the previous
            # row was deselected and leaves it painted as selected (two or three rows after N or K).
            self._syncing = True
            try:
                self.documents_view.selectionModel().setCurrentIndex(
                    proxy,
                    QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
                )
            finally:
                self._syncing = False
            self.documents_view.scrollTo(proxy)

    def _on_current(self, row: int) -> None:
        index = self.controller.index
        if index is None or row < 0:
            self.detail.setPlainText("")
            self.source_view.select_row(None)
            return
        table_row = self.chunks_model.table_row(row)
        if table_row is not None:
            model_index = self.chunks_model.index(table_row, 0)
            self._syncing = True  # as for the document list: the view must hear of the change
            try:
                self.chunks_view.selectionModel().setCurrentIndex(
                    model_index,
                    QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
                )
            finally:
                self._syncing = False
            self.chunks_view.scrollTo(model_index)
        else:
            self.chunks_view.clearSelection()
        self.source_view.select_row(row)
        self._show_detail(row)

    def _on_states(self) -> None:
        self.chunks_model.refresh_states()
        self.documents_model.refresh_counts()
        self.source_view.refresh_states()
        self._apply_queue()
        self._update_progress()
        if self.controller.row is not None:
            self._show_detail(self.controller.row)

    def _on_read_only(self, reason: str) -> None:
        """Read-only (no ledger, a read-only one, the dataset deleted while open): said in the title and
        the status bar, and every decision key and menu entry is disabled."""
        for action in self.decision_actions:
            action.setEnabled(not reason)
        self.read_only_label.setVisible(bool(reason))
        self.read_only_label.setToolTip(reason)
        title = self.windowTitle().removesuffix(" (read-only)")
        self.setWindowTitle(f"{title} (read-only)" if reason else title)

    def _on_bulk(self, count: int, what: str) -> None:
        self.bulk_label.setVisible(bool(what))
        self.bulk_label.setText(
            f"{plural(count, 'chunk')} chosen {what} — Ctrl+1–9 flag them, Ctrl+Shift+O "
            "marks them OK, Ctrl+Shift+X clears"
            if what
            else ""
        )
        self.chunks_model.set_marked(self.controller.bulk)

    def _on_boundary_mode(self, on: bool) -> None:
        self.boundary_action.setChecked(on)
        self.target_label.setText(" Next flag: boundary after chunk " if on else "")

    def _update_progress(self) -> None:
        index = self.controller.index
        self.progress_label.setText(index.progress_text() if index is not None else "")
        self.queue_progress_label.setText(self.controller.queue_progress_text())

    def _fill_finding_queues(self, index: ReviewIndex) -> None:
        """The queue box: the fixed queues, then one per finding the snapshot has ("Finding undersized (180)")."""
        self.queue_box.blockSignals(True)  # refilling is not the user choosing a queue
        try:
            while self.queue_box.count() > len(QUEUES):
                self.queue_box.removeItem(len(QUEUES))
            for queue, count in index.finding_queues():
                self.queue_box.addItem(f"{queue_title(queue)} ({count:,})", queue)
            position = self.queue_box.findData(self.controller.queue)
            if position < 0:
                self.controller.queue = "Unreviewed"
                position = self.queue_box.findData("Unreviewed")
            self.queue_box.setCurrentIndex(position)
        finally:
            self.queue_box.blockSignals(False)

    def _on_queue_chosen(self, position: int) -> None:
        queue = self.queue_box.itemData(position)
        if queue is None:
            return
        self.controller.set_queue(queue)
        if queue.startswith(FINDING_QUEUE) or queue in ("Disagreements", "Re-check"):
            # A queue of particular chunks starts at its first one.
            if not self.controller.first_in_queue():
                self.statusBar().showMessage(f"{queue_title(queue)}: no chunk left in this queue", 5000)
            self.give_keys_to_review()

    def review_finding(self, code: str) -> None:
        """Review the chunks of one finding (a click on its bar in the findings chart)."""
        position = self.queue_box.findData(finding_queue(code))
        if position >= 0:
            self.queue_box.setCurrentIndex(position)

    def _apply_queue(self) -> None:
        index = self.controller.index
        if index is None:
            return
        self._filtering = True
        try:
            self._apply_queue_filter(index)
        finally:
            self._filtering = False

    def _apply_queue_filter(self, index: ReviewIndex) -> None:
        allowed = None if self.controller.queue == "All" else index.documents_in_queue(self.controller.queue)
        if self.documents_model.set_allowed(allowed):
            self._select_current_document()

    def _show_detail(self, row: int) -> None:
        index = self.controller.index
        assert index is not None
        doc = int(index.chunk_doc[row])
        table_row = self.chunks_model.table_row(row)
        detail = self.chunks_model.detail(table_row) if table_row is not None else None
        state = index.state(row)
        start, end = int(index.start[row]), int(index.end[row])
        lines = [
            # "#" is the chunk's index (0-based, as in the table and `chunkyard flag --chunk`); the place counts from 1.
            f"Chunk #{int(index.chunk_index[row])} · {row - index.doc_rows(doc).start + 1} of {len(index.doc_rows(doc))}"
            f" · {index.doc_ids[doc]}",
            f"Offsets    [{start:,}, {end:,})  ·  {end - start:,} characters (code points)",
        ]
        if detail is not None:
            tokens = "" if detail.n_tokens is None else f"  ·  {detail.n_tokens:,} tokens"
            lines.append(f"Size       {detail.size:,} {detail.unit}{tokens}  ·  {detail.strategy}")
            lines.append(f"Section    {' › '.join(detail.section_path) or '—'}")
            if detail.pages:
                lines.append(f"Pages      {detail.pages}")
        if state.flagged:
            verdict = "flagged: " + ", ".join(
                state.reasons + [f"boundary after: {r}" for r in state.boundary_reasons]
            )
        elif state.verdict == "ok":
            verdict = "OK"
        else:
            verdict = "not reviewed"
        if state.reviewer and state.verdict:
            verdict += f"  (by {state.reviewer})"
        lines.append(f"Review     {verdict}")
        if state.note:
            lines.append(f"Note       {state.note}")
        differ = index.verdicts_by_reviewer.get(row)
        if differ:
            lines.append(
                "Reviewers  differ: " + " · ".join(f"{who}: {what}" for who, what in sorted(differ.items()))
            )
        findings = index.explain_findings(row)
        lines.append("")
        lines.append("Findings" if findings else "Findings   none")
        for code, text in findings:
            lines.append(f"  • {code}: {text}")
        if detail is not None:
            preview = detail.embed_text if len(detail.embed_text) <= 1500 else detail.embed_text[:1500] + " …"
            lines += ["", "Embed text (what the embedder sees)", preview]
        self.detail.setPlainText("\n".join(lines))

    # -- user actions ------------------------------------------------------------------------------

    def _filter_documents(self, text: str) -> None:
        self._filtering = True
        try:
            self.documents_model.set_needle(text)
            self._select_current_document()
        finally:
            self._filtering = False

    def _leave_filter(self) -> None:
        """Return or Escape in the filter box: show a listed document (the first, unless the one shown is
        listed) and give the keys back to the document list, so that J, K, 1–9 review again."""
        doc = self.controller.doc
        if (doc is None or self.documents_model.row_of(doc) is None) and self.documents_model.rowCount():
            self.controller.select_document(self.documents_model.doc_at(0))
        self.documents_view.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def _on_document_clicked(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._filtering or self._syncing:
            return
        doc = current.data(DOC_ROLE)
        if doc is not None and doc != self.controller.doc:
            self.controller.select_document(int(doc))

    def _on_chunk_clicked(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid() and not self._syncing:
            self.controller.select_row(self.chunks_model.dataset_row(current.row()))

    def _on_order(self, number: int) -> None:
        if number == 1:
            self.documents_view.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        else:
            self.documents_view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        # The new order is read from its top ("Most suspicious" first): it used to stay scrolled where it was.
        self.documents_view.scrollToTop()

    def _step_suspicious(self, step: int) -> None:
        if not self.controller.step_suspicious(step):
            self.statusBar().showMessage("No more suspicious chunks in that direction", 3000)

    def edit_note(self) -> None:
        if not self.controller.can_record:
            if self.controller.index is not None and self.controller.row is not None:
                self.show_error(self.controller.ledger_problem or "no review ledger is open")
            return
        row = self.controller.note_row()
        if row is None:
            return
        # The chunk is fixed before the dialog opens and named in it: the note reaches that chunk.
        text, accepted = ask_note(self, self.controller.current_note(row), self.controller.describe_row(row))
        if accepted:
            self.controller.set_note(text, row)

    def constrain_selection(self, kind: str) -> None:
        """Turn the source view's selection (keep) or cursor (break) into a constraint."""
        cursor = self.source_view.textCursor()
        to_code_point = self.source_view.offsets.to_code_point
        start, end = to_code_point(cursor.selectionStart()), to_code_point(cursor.selectionEnd())
        if kind == "keep_together" and end <= start:
            self.statusBar().showMessage("Select the text to keep together first, then press T", 5000)
            return
        if self.controller.add_constraint(kind, start, end if kind == "keep_together" else None):
            self.statusBar().showMessage("Constraint recorded; `chunkyard reprocess` applies it", 5000)

    def compare_with_parent(self) -> None:
        """Open compare mode: the current document in the parent snapshot beside this one."""
        from chunkyard.gui.compare_view import CompareWindow, parent_snapshot_path

        index, doc = self.controller.index, self.controller.doc
        if index is None or doc is None:
            self.statusBar().showMessage("Select a document to compare", 5000)
            return
        parent = parent_snapshot_path(index)
        if parent is None:
            self.statusBar().showMessage("This snapshot has no parent snapshot to compare with", 5000)
            return
        if self.compare_window is not None:
            self.compare_window.close()
        self.compare_window = CompareWindow(parent, index.snapshot.path, index.doc_ids[doc])
        self.compare_window.quit_requested.connect(self.close)
        self.compare_window.show()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._panes_placed:
            self._panes_placed = True
            splitter = self.centralWidget()
            splitter.setSizes([round(splitter.width() * share) for _stretch, share in PANES])
            height = self._right_panes.height()
            self._right_panes.setSizes([round(height * 0.55), height - round(height * 0.55)])

    def _on_pending(self, count: int, problem: str) -> None:
        """The status bar says how many decisions wait for the ledger; the window closes once they are
        written if the user chose "Close when saved"."""
        if count:
            self.pending_label.setText(
                f"{problem or 'review ledger busy'} — {self.controller.pending_text()}"
            )
            self.pending_label.setToolTip(
                "Each decision is saved as soon as the review ledger is free; the window shows it already."
            )
            self.pending_label.show()
            return
        was_waiting = not self.pending_label.isHidden()
        self.pending_label.hide()
        asked = self.unsaved_box is not None
        if asked:  # the user closed the window and has not answered yet: nothing stops it now
            self.unsaved_box.done(0)
            self.unsaved_box = None
        if was_waiting:
            self.statusBar().showMessage("Every decision is saved in the review ledger", 5000)
        if self._close_when_saved or asked:
            self.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        controller = self.controller
        if controller.pending_count and not self._close_anyway and not controller.flush(CLOSE_PATIENCE_MS):
            event.ignore()  # nothing is lost by closing: ask what to do with what is not written yet
            self._ask_about_unsaved()
            return
        self._close_anyway = False
        if self.compare_window is not None:  # it kept the process running after Quit
            self.compare_window.close()
            self.compare_window = None
        controller.close()
        super().closeEvent(event)

    _close_anyway = False

    def _ask_about_unsaved(self) -> None:
        if self.unsaved_box is not None:
            self.unsaved_box.raise_()
            return
        controller = self.controller
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "chunkyard review",
            f"{controller.pending_text()[0].upper()}{controller.pending_text()[1:]}: "
            f"{controller.pending_problem()}.\n\nThey are saved as soon as the review ledger is "
            "free. Closing now loses them.",
            QMessageBox.StandardButton.NoButton,
            self,
        )
        box.setTextFormat(Qt.TextFormat.PlainText)
        wait = box.addButton("Close when saved", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Keep reviewing", QMessageBox.ButtonRole.RejectRole)
        lose = box.addButton("Close and lose them", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(wait)
        self.unsaved_box = box

        def chosen(button: object) -> None:
            self.unsaved_box = None
            if button is wait:
                self._close_when_saved = True
                self.statusBar().showMessage("The window closes once every decision is saved", 5000)
            elif button is lose:
                self._close_anyway = True
                controller.drop_pending()
                self.close()

        box.buttonClicked.connect(chosen)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
