"""The question box: type a question, see the top k chunks for it by BM25 and by dense retrieval.

The ranking is ``chunkyard.chunking.review.QuestionBox`` (the evaluation's retrievers); this panel lists
the answers with their scores, marks them in the source view's margin (their rank) and goes to a chunk
when its answer is chosen. In Compare, one panel per snapshot shows whether a rechunk changed which
chunk answers.
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from chunkyard.chunking.errors import ChunkyardError
from chunkyard.chunking.review import Answer, QuestionBox, ReviewIndex

ROW_ROLE = Qt.ItemDataRole.UserRole + 3
TITLES = {"bm25": "BM25 (words)", "dense": "Dense (WordLlama embeddings)"}


def answer_line(index: ReviewIndex, answer: Answer, width: int = 90) -> str:
    """ "1.  2.618  handbook/refunds.md #10 — Tents and shelters | 60 days …" (the chunk's opening words)."""
    doc = int(index.chunk_doc[answer.row])
    text = index.document_text(doc)[int(index.start[answer.row]) : int(index.end[answer.row])]
    opening = " ".join(text.split())
    opening = opening if len(opening) <= width else opening[: width - 1] + "…"
    return f"{answer.rank}.  {answer.score:.3f}  {index.doc_ids[doc]} #{int(index.chunk_index[answer.row])} — {opening}"


class QuestionPanel(QWidget):
    """A question line, k, and the answers of each retriever; ``chunk_chosen(row)`` when one is picked."""

    chunk_chosen = Signal(int)
    answered = Signal()
    _ranked = Signal(object, object, str)  # (question box, answers or None, error): from the ranking thread

    def __init__(self, parent: QWidget | None = None, label: str = ""):
        super().__init__(parent)
        self.index: ReviewIndex | None = None
        self.box: QuestionBox | None = None
        self.answers: dict[str, list[Answer]] = {}
        self.question = QLineEdit()
        self.question.setPlaceholderText(
            "Ask a question (Return): the chunks that answer it, by BM25 and dense"
        )
        self.question.setClearButtonEnabled(True)
        self.k = QSpinBox()
        self.k.setRange(1, 50)
        self.k.setValue(5)
        self.k.setPrefix("top ")
        self.results = QTreeWidget()
        self.results.setHeaderHidden(True)
        self.results.setRootIsDecorated(False)
        self.results.setUniformRowHeights(True)
        self.status = QLabel("")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        # Wrapped within the pane: a long question on one line widened the pane and squeezed the text.
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row = QHBoxLayout()
        if label:
            row.addWidget(QLabel(label))
        row.addWidget(self.question, 1)
        row.addWidget(self.k)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.results, 1)
        layout.addWidget(self.status)
        self.question.returnPressed.connect(self.ask)
        self.results.currentItemChanged.connect(self._on_item)
        self._ranked.connect(self._on_ranked)
        self.busy = False  # a question is being ranked (in a thread: the first one builds the indexes)
        self._asked = ""

    def set_index(self, index: ReviewIndex | None) -> None:
        self.index = index
        self.box = QuestionBox(index) if index is not None else None
        self.answers = {}
        self.results.clear()
        self.status.setText("")

    def ask(self, question: str | None = None) -> bool:
        """Rank the chunks for the question (the line's text unless given) in a thread: the first
        question builds the BM25 index and the dense embeddings (a minute for 30,000 chunks without the
        cache), and the window must go on answering keys meanwhile. ``answered`` follows."""
        if question is not None:
            self.question.setText(question)
        if self.box is None or self.index is None:
            return False
        if self.busy:
            self.status.setText("Still ranking the previous question; ask again when it is done")
            return False
        text, k, box = self.question.text(), self.k.value(), self.box
        self.busy, self._asked = True, text
        first = not box._retrievers
        self.status.setText(
            f"Ranking {self.index.n_chunks:,} chunks…"
            + (
                " (the first question builds the indexes: about a minute per 30,000 chunks, once per snapshot)"
                if first
                else ""
            )
        )

        def rank() -> None:
            try:
                answers, error = box.ask(text, k), ""
            except (ChunkyardError, OSError, ValueError) as exc:
                answers, error = None, str(exc)
            try:
                self._ranked.emit(box, answers, error)
            except RuntimeError:  # the panel was closed meanwhile
                pass

        threading.Thread(target=rank, name="chunkyard-question-box", daemon=True).start()
        return True

    def wait_answered(self, timeout_s: float = 120.0) -> bool:
        """Process events until the question asked is answered (for scripts and tests)."""
        deadline = time.monotonic() + timeout_s
        while self.busy and time.monotonic() < deadline:
            QApplication.processEvents()
            time.sleep(0.01)
        return not self.busy

    def _on_ranked(self, box: QuestionBox, answers: dict[str, list[Answer]] | None, error: str) -> None:
        self.busy = False
        if box is not self.box or self.index is None:  # another snapshot was opened meanwhile
            return
        if answers is None:
            self.status.setText(f"Cannot rank the chunks: {error}")
            self.answers = {}
            self.results.clear()
            self.answered.emit()
            return
        self.answers = answers
        self._fill()
        text = self._asked.strip()
        self.status.setText(
            f"Top {self.k.value()} of {self.index.n_chunks:,} chunks for “{text}”; choose one to "
            "see it (the margin shows each chunk's rank)"
            if text
            else ""
        )
        self.answered.emit()

    def _fill(self) -> None:
        assert self.index is not None
        self.results.clear()
        for name, answers in self.answers.items():
            header = QTreeWidgetItem([TITLES.get(name, name)])
            font = header.font(0)
            font.setBold(True)
            header.setFont(0, font)
            header.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.results.addTopLevelItem(header)
            for answer in answers:
                item = QTreeWidgetItem([answer_line(self.index, answer)])
                item.setData(0, ROW_ROLE, answer.row)
                item.setToolTip(0, f"{name} rank {answer.rank}, score {answer.score:.4f}")
                self.results.addTopLevelItem(item)

    def margin_marks(self) -> dict[int, tuple[str, str]]:
        """row -> (its best rank, "BM25 #1 (2.618) · dense #3 (0.405)") over every retriever's answers."""
        marks: dict[int, tuple[int, list[str]]] = {}
        for name, answers in self.answers.items():
            for answer in answers:
                best, texts = marks.get(answer.row, (answer.rank, []))
                texts.append(f"{name} #{answer.rank} ({answer.score:.3f})")
                marks[answer.row] = (min(best, answer.rank), texts)
        return {
            row: (str(rank) if rank < 10 else "·", "question box: " + " · ".join(texts))
            for row, (rank, texts) in marks.items()
        }

    def _on_item(self, item: QTreeWidgetItem | None, _previous: QTreeWidgetItem | None) -> None:
        row = item.data(0, ROW_ROLE) if item is not None else None
        if row is not None:
            self.chunk_chosen.emit(int(row))
