"""The reviewer window driven with keys and clicks (pytest-qt, offscreen), and its models under qtmodeltester."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QPoint, QPointF, QSettings, Qt  # noqa: E402
from PySide6.QtGui import QTextCursor  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from chunkyard.chunking.ledger import Ledger, ledger_path  # noqa: E402
from chunkyard.chunking.review import ReviewIndex  # noqa: E402
from chunkyard.gui.controller import ReviewController  # noqa: E402
from chunkyard.gui.main_window import MainWindow  # noqa: E402
from chunkyard.gui.models import ChunksModel, DocumentsModel  # noqa: E402

from support.parts import only_part  # noqa: E402
from support.review_fixtures import REPO, build_dataset  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("gui"))


@pytest.fixture
def dataset(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "fixture-kb"
    shutil.copytree(built, copy)
    return copy


@pytest.fixture(autouse=True)
def isolated_settings(qapp, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Recent-dataset lists go to a temporary folder, not the tester's home."""
    qapp.setOrganizationName("chunkyard-tests")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    yield


def open_window(qtbot, path: Path) -> MainWindow:  # type: ignore[no-untyped-def]
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.resize(1400, 850)
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(path)
    window.activateWindow()
    return window


def press(qtbot, window: MainWindow, key: Qt.Key, modifier=Qt.KeyboardModifier.NoModifier) -> None:  # type: ignore[no-untyped-def]
    qtbot.keyClick(window.chunks_view, key, modifier)


def test_open_move_with_j_k_n_p(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None and index.n_documents == 4
    assert window.progress_label.text() == f"0 of {index.n_chunks} reviewed · 0 flagged"
    assert window.controller.reviewer == "test-reviewer"  # from the config
    press(qtbot, window, Qt.Key.Key_J)
    assert controller.row == 0 and controller.doc == 0
    press(qtbot, window, Qt.Key.Key_J)
    press(qtbot, window, Qt.Key.Key_J)
    assert controller.row == 2
    press(qtbot, window, Qt.Key.Key_K)
    assert controller.row == 1
    assert window.chunks_view.currentIndex().row() == 1
    assert window.source_view.selected_row == 1
    suspicious = np.flatnonzero(index.suspicious)
    after = [int(r) for r in suspicious if r > 1]
    press(qtbot, window, Qt.Key.Key_N)
    assert controller.row == after[0]
    press(qtbot, window, Qt.Key.Key_N)
    assert controller.row == after[1]
    press(qtbot, window, Qt.Key.Key_P)
    assert controller.row == after[0]
    # N crosses documents: from the last suspicious chunk of document 0 into a later one
    last_in_first = max(int(r) for r in suspicious if index.chunk_doc[r] == 0)
    controller.select_row(last_in_first)
    press(qtbot, window, Qt.Key.Key_N)
    assert controller.doc != 0 and index.suspicious[controller.row]
    assert window.chunks_model.doc == controller.doc
    assert "Findings" in window.detail.toPlainText()


def test_flag_undo_redo_note_and_reopen(qtbot, dataset: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None
    controller.select_row(3)
    press(qtbot, window, Qt.Key.Key_2)  # 2 = mid_sentence
    assert index.state(3).reasons == ["mid_sentence"]
    assert controller.row == 4  # auto-advance to the next unreviewed chunk
    assert window.progress_label.text() == f"1 of {index.n_chunks} reviewed · 1 flagged"
    assert "mid_sentence" in window.chunks_model.index(3, 4).data()
    press(qtbot, window, Qt.Key.Key_O)  # chunk 4 OK
    assert index.state(4).verdict == "ok" and controller.row == 5
    press(qtbot, window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert index.state(4).verdict is None and controller.row == 4
    press(qtbot, window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert index.state(3).verdict is None
    assert window.progress_label.text() == f"0 of {index.n_chunks} reviewed · 0 flagged"
    press(
        qtbot, window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert index.state(3).reasons == ["mid_sentence"]
    # B then 3: flag the boundary after chunk 6 as split_table
    controller.select_row(6)
    press(qtbot, window, Qt.Key.Key_B)
    assert window.target_label.text().strip()
    press(qtbot, window, Qt.Key.Key_3)
    assert index.state(6).boundary_reasons == ["split_table"] and not controller.boundary_mode
    controller.select_row(8)
    monkeypatch.setattr(
        "chunkyard.gui.main_window.ask_note", lambda *args, **kwargs: ("heading belongs below", True)
    )
    press(qtbot, window, Qt.Key.Key_E)
    assert index.state(8).note == "heading belongs below"
    kinds = [event.kind for event in Ledger(ledger_path(index.snapshot.path)).events()]
    assert kinds == ["flag", "mark_ok", "retract", "retract", "retract", "flag", "note"]
    window.close()

    again = open_window(qtbot, dataset)
    reopened = again.controller.index
    assert reopened is not None
    assert reopened.state(3).reasons == ["mid_sentence"]
    assert reopened.state(4).verdict is None
    assert reopened.state(6).boundary_reasons == ["split_table"]
    assert reopened.state(8).note == "heading belongs below"
    assert again.progress_label.text() == f"2 of {reopened.n_chunks} reviewed · 2 flagged"
    again.controller.select_row(3)
    assert "mid_sentence" in again.detail.toPlainText()
    assert "⚑" in again.chunks_model.index(3, 4).data()


def test_b_then_a_number_on_the_last_chunk_of_a_document_flags_nothing(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """There is no boundary after a document's last chunk: say so (as `chunkyard flag --boundary` does).

    The flag used to land silently on the chunk itself, a target the reviewer did not choose.
    """
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None
    last = index.doc_rows(0).stop - 1
    controller.select_row(last)
    press(qtbot, window, Qt.Key.Key_B)
    press(qtbot, window, Qt.Key.Key_1)
    assert index.state(last).verdict is None and controller.row == last
    assert Ledger(ledger_path(index.snapshot.path)).events() == []
    assert "no boundary after it" in window.statusBar().currentMessage()
    assert not controller.boundary_mode
    press(qtbot, window, Qt.Key.Key_1)  # without B: the chunk itself, as asked
    assert index.state(last).reasons == ["split_procedure"]


def test_a_cleared_reviewer_box_shows_the_name_decisions_are_recorded_under(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """An empty name is not taken (the ledger needs one); the box stayed empty while flags went on under
    the previous name."""
    window = open_window(qtbot, dataset)
    window.reviewer_box.setFocus()
    window.reviewer_box.selectAll()
    qtbot.keyClick(window.reviewer_box, Qt.Key.Key_Backspace)
    qtbot.keyClick(window.reviewer_box, Qt.Key.Key_Return)
    assert window.controller.reviewer == "test-reviewer"
    assert window.reviewer_box.text() == "test-reviewer"


def test_click_in_the_text_selects_the_chunk_under_it_with_emoji(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    controller, view = window.controller, window.source_view
    index = controller.index
    assert index is not None
    doc = index.doc_number("notes/emoji.md")
    assert doc is not None
    controller.select_document(doc)
    text = index.document_text(doc)
    qt_text = view.toPlainText()
    rows = index.doc_rows(doc)
    assert len(rows) >= 2
    for row in rows:
        start, end = int(index.start[row]), int(index.end[row])
        a, b = view.span_utf16(row)
        # the Qt span holds exactly the chunk's text: emoji and CJK before it shift nothing
        assert qt_text.encode("utf-16-le")[2 * a : 2 * b].decode("utf-16-le") == text[start:end]
    last = rows[-1]
    # click on a character only the last chunk holds, past the overlap
    target = int(index.end[last - 1]) + 5
    assert index.start[last] <= target < index.end[last]
    cursor = QTextCursor(view.document())
    cursor.setPosition(view.offsets.to_utf16(target))
    rect = view.cursorRect(cursor)
    controller.select_row(rows[0])
    qtbot.mouseClick(
        view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.center().x() + 1, rect.center().y())
    )
    assert controller.row == last


def test_document_filter_sort_and_queue(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    proxy = window.documents_model
    assert proxy.rowCount() == 4
    window.filter_box.setText("emoji")
    assert proxy.rowCount() == 1 and proxy.index(0, 0).data() == "notes/emoji.md"
    window.filter_box.setText("")
    window.order_box.setCurrentIndex(1)  # most suspicious first
    findings = [int(proxy.index(r, 2).data(Qt.ItemDataRole.UserRole + 1)) for r in range(proxy.rowCount())]
    assert findings == sorted(findings, reverse=True)
    window.queue_box.setCurrentText("Flagged")
    assert proxy.rowCount() == 0
    window.controller.select_row(0)
    window.controller.flag("other")
    assert proxy.rowCount() == 1
    window.queue_box.setCurrentText("All")
    assert proxy.rowCount() == 4
    window.controller.select_row(0)
    qtbot.mouseClick(
        window.documents_view.viewport(),
        Qt.MouseButton.LeftButton,
        pos=window.documents_view.visualRect(proxy.index(3, 0)).center(),
    )
    assert window.controller.doc == proxy.index(3, 0).data(Qt.ItemDataRole.UserRole + 2)


def test_models_pass_qtmodeltester(qtmodeltester, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    index = ReviewIndex.load(dataset)
    documents = DocumentsModel()
    documents.set_index(index)
    qtmodeltester.check(documents)
    documents.sort(2, Qt.SortOrder.DescendingOrder)
    documents.set_needle("s")
    qtmodeltester.check(documents)
    documents.set_allowed(index.documents_in_queue("Suspicious"))
    qtmodeltester.check(documents)
    chunks = ChunksModel()
    chunks.set_document(index, 0)
    qtmodeltester.check(chunks)
    empty = ChunksModel()
    qtmodeltester.check(empty)


def test_bad_parquet_gives_an_error_not_a_crash(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    snapshot = next(dataset.glob("v1/0*"))
    part = only_part(snapshot, "documents.parquet")
    part.chmod(0o644)
    part.write_bytes(b"\x00" * 100)
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.controller.failed, timeout=20000):
        window.open_dataset(dataset)
    assert "documents.parquet" in window.last_error and window.controller.index is None


def test_bad_ledger_opens_read_only_with_a_clear_message(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    (dataset / "review.sqlite").write_bytes(b"definitely not sqlite" * 50)
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.controller.failed, timeout=20000):
        window.open_dataset(dataset)
    assert "not a review ledger" in window.last_error
    assert window.controller.index is not None and window.controller.ledger is None
    window.controller.select_row(0)
    assert not window.controller.flag("other")  # refused with a message, nothing crashes


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_cli_flag_and_screenshot(dataset: Path, tmp_path: Path) -> None:
    result = _cli(
        "flag",
        str(dataset),
        "--doc",
        "notes/emoji.md",
        "--chunk",
        "1",
        "--reason",
        "split_code",
        "--note",
        "scripted",
    )
    assert result.returncode == 0, result.stderr
    index = ReviewIndex.load(dataset)
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        index.reload_state(ledger)
    row = index.row_of(index.doc_number("notes/emoji.md"), 1)
    assert index.state(row).reasons == ["split_code"] and index.state(row).reviewer == "test-reviewer"
    bad = _cli("flag", str(dataset), "--doc", "nope.md", "--chunk", "0", "--reason", "other")
    assert bad.returncode == 2 and "no document 'nope.md'" in bad.stderr and "Traceback" not in bad.stderr
    png = tmp_path / "shot.png"
    shot = _cli("review", str(dataset), "--doc", "notes/emoji.md", "--screenshot", str(png))
    assert shot.returncode == 0, shot.stderr
    assert "propagateSizeHints" not in shot.stderr  # the offscreen platform's notice, dropped
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    missing = _cli("review", str(tmp_path / "nowhere"), "--screenshot", str(png))
    assert missing.returncode == 2 and "no such dataset folder" in missing.stderr


def test_cli_flag_with_an_empty_reviewer_is_refused(dataset: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`--reviewer "$UNSET"` recorded the flag under the config's reviewer (or the OS user) without a word."""
    from chunkyard.flows.cli import main

    code = main(
        [
            "flag",
            str(dataset),
            "--doc",
            "notes/emoji.md",
            "--chunk",
            "1",
            "--reason",
            "other",
            "--reviewer",
            "",
        ]
    )
    assert code == 2 and "a reviewer name is required" in capsys.readouterr().err
    assert not ledger_path(ReviewIndex.load(dataset).snapshot.path).exists()


def test_screenshot_of_an_unknown_document_fails_at_once(dataset: Path, tmp_path: Path) -> None:
    """`--doc` naming no document: one line and exit 2, bad usage (it used to wait forever with the window open)."""
    png = tmp_path / "shot.png"
    try:
        shot = _cli("review", str(dataset), "--doc", "nope.md", "--screenshot", str(png), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("chunkyard review --doc nope.md --screenshot hung instead of failing")
    assert shot.returncode == 2
    assert shot.stderr.strip().splitlines() == [
        f"chunkyard: error: {dataset / 'v1' / '0001'}: no document 'nope.md' in this snapshot"
    ], shot.stderr
    assert not png.exists()


def test_keys_work_from_the_source_view_and_not_while_typing_a_filter(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    controller = window.controller
    controller.select_row(0)
    window.source_view.setFocus()
    qtbot.keyClick(window.source_view, Qt.Key.Key_J)
    assert controller.row == 1
    window.filter_box.setFocus()
    qtbot.keyClicks(window.filter_box, "jk")
    assert window.filter_box.text() == "jk" and controller.row == 1


def test_evaluation_tab_shows_the_latest_evaluation(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    from chunkyard.chunking.dataset import resolve_snapshot
    from chunkyard.chunking.evaluation.store import evaluations_dir

    snapshot = resolve_snapshot(dataset)
    record_dir = evaluations_dir(snapshot) / "20261130T010000000000Z-questions-abc123"
    record_dir.mkdir(parents=True)
    summary = [
        {
            "retriever": "bm25",
            "k": 5,
            "questions": 3,
            "recall_mean": 0.75,
            "recall_std": 0.1,
            "precision_mean": 0.2,
            "precision_std": 0.05,
            "iou_mean": 0.18,
            "iou_std": 0.04,
            "hit_rate": 1.0,
            "mrr": 0.83,
        }
    ]
    (record_dir / "evaluation.json").write_text(
        json.dumps(
            {
                "created_at": "2026-11-30T01:00:00+00:00",
                "snapshot": int(snapshot.name),
                "summary": summary,
                "questions": {"path": "eval/kb-questions.jsonl", "count": 3},
                "cost": {"chunks": 42},
            }
        ),
        encoding="utf-8",
    )
    window = open_window(qtbot, dataset)
    text = window.evaluation.toPlainText()
    assert "bm25" in text and "0.750" in text and "kb-questions.jsonl" in text
    assert window.tabs.tabText(window.tabs.indexOf(window.evaluation)) == "Evaluation"


def test_qt_calls_keep_none_alive() -> None:
    """PySide6 6.12.0 returned None from void methods without a reference: on Python 3.11 every such
    call took one from None, and the reviewer aborted ("deallocating None") after a few hundred
    repaints. None is immortal from Python 3.12 on, where this holds trivially."""
    from PySide6.QtGui import QColor, QTextCharFormat, QTextDocument

    document = QTextDocument("word " * 100)
    cursor, text_format, red = QTextCursor(document), QTextCharFormat(), QColor("red")
    before = sys.getrefcount(None)
    for _ in range(2000):
        cursor.setPosition(5)
        text_format.setBackground(red)
    assert sys.getrefcount(None) - before > -100


def test_repainting_the_reviewer_keeps_none_alive(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    window.controller.select_document(0, None)
    window.grab()
    before = sys.getrefcount(None)
    for _ in range(20):
        window.grab()
    assert (sys.getrefcount(None) - before) / 20 > -5  # 6.12.0: -58 per repaint, None freed after ~400


def test_a_long_one_line_document_is_shaded_where_the_reader_looks(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Qt got an extra selection per chunk and per overlap: 17,800 of them on a 10 MB one-line file,
    and a minute to open it. Now the view paints the shading of the visible lines only."""
    root = build_dataset(tmp_path, extra={"long/one-line.md": "word " * 60_000})
    window = open_window(qtbot, root)
    index, view = window.controller.index, window.source_view
    doc = index.doc_number("long/one-line.md")
    rows = index.doc_rows(doc)
    assert len(rows) > 500

    def shaded_where_visible() -> None:
        first, last = view._visible_range()
        spans = [(start, end) for start, end, _ in view.shades_on_screen()]
        assert 0 < len(spans) < 60 and view.extraSelections() == []  # what is on screen, painted by the view
        visible = [
            view.span_utf16(row)
            for row in rows
            if view.span_utf16(row)[0] < last and view.span_utf16(row)[1] > first
        ]
        assert visible and all(any(a < end and b > start for a, b in spans) for start, end in visible)
        assert first <= min(a for a, _ in spans) and max(b for _, b in spans) <= last
        view.grab()

    window.controller.select_document(doc, rows.start)
    shaded_where_visible()
    numbers = window.chunks_view.fontMetrics().horizontalAdvance(str(len(rows) - 1))
    assert window.chunks_view.columnWidth(0) >= numbers + 8  # "#" shows every digit of the chunk number
    for row in (rows.start + len(rows) // 2, rows.stop - 1):  # the middle, then the last chunk
        window.controller.select_row(row)
        qtbot.waitUntil(lambda row=row: view.span_utf16(row)[0] <= view._visible_range()[1], timeout=5000)
        shaded_where_visible()
    view.verticalScrollBar().setValue(0)  # scrolling by hand moves the shading too
    shaded_where_visible()


def test_finding_codes_keep_their_beginning_when_cut(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QStyleOptionViewItem

    window = open_window(qtbot, dataset)
    view, model = window.chunks_view, window.chunks_model
    window.controller.select_document(0, None)
    column = model.HEADERS.index("Findings")
    option = QStyleOptionViewItem()
    view.itemDelegateForColumn(column).initStyleOption(option, model.index(0, column))
    assert option.textElideMode == Qt.TextElideMode.ElideRight
    assert view.textElideMode() == Qt.TextElideMode.ElideLeft  # the section path keeps its deepest heading


RTL_DOC = (
    "# مرحبا\n\n"
    + "يتم تقسيم هذا المستند إلى أجزاء متعددة لاختبار العرض من اليمين إلى اليسار. " * 14
    + "\n\n## עברית\n\n"
    + "זהו טקסט בעברית לבדיקה של תצוגה מימין לשמאל. " * 14
    + "\n"
)


def _char_centre(view, position: int) -> QPointF | None:  # type: ignore[no-untyped-def]
    """The middle of the character at UTF-16 ``position`` on screen, from Qt's own cursor rectangles."""
    cursor = QTextCursor(view.document())
    cursor.setPosition(position)
    leading = view.cursorRect(cursor)
    cursor.setPosition(position + 1)
    trailing = view.cursorRect(cursor)
    if leading.top() != trailing.top():  # the character ends its line
        return None
    return QPointF((leading.left() + trailing.left()) / 2, leading.center().y())


def test_right_to_left_chunks_are_shaded_and_outlined_on_their_own_characters(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """In Arabic and Hebrew a line's start is on its right: a chunk that began mid-line was shaded and
    outlined over the previous chunk's words (from its start rightwards) and not over its own."""
    root = build_dataset(tmp_path, extra={"intl/rtl.md": RTL_DOC})
    window = open_window(qtbot, root)
    index, view = window.controller.index, window.source_view
    doc = index.doc_number("intl/rtl.md")
    rows = index.doc_rows(doc)
    window.source_view.resize(700, 900)
    checked = 0
    for row in rows:
        window.controller.select_row(row)
        a, b = view.span_utf16(row)
        for to_edge in (False, True):
            rects = view._span_rects(a, b, to_edge=to_edge)
            for position in (a, a + 1, b - 2):
                centre = _char_centre(view, position)
                if centre is not None:
                    checked += 1
                    assert any(r.contains(centre) for r in rects), (row, position, to_edge)
            centre = _char_centre(view, a - 2) if a >= 2 else None
            if centre is not None and view.document().findBlock(a - 2) == view.document().findBlock(a):
                assert not any(r.contains(centre) for r in rects), (row, a - 2, to_edge)
    assert checked > 10


def _visual_x(text: str, position: int, font) -> float:  # type: ignore[no-untyped-def]
    """Where the character at ``position`` of ``text`` is drawn in a left-to-right label (its leading edge)."""
    from PySide6.QtGui import QTextLayout, QTextOption

    layout = QTextLayout(text, font)
    option = QTextOption()
    option.setTextDirection(Qt.LayoutDirection.LeftToRight)
    layout.setTextOption(option)
    layout.beginLayout()
    line = layout.createLine()
    layout.endLayout()
    return line.cursorToX(position)[0]


def test_a_right_to_left_title_does_not_reorder_the_document_line(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The line above the text read "intl/rtl.md · 14 · مرحبا chunks": the count was pulled into the
    Arabic title's run. The title keeps its own direction and the count stays after it."""
    root = build_dataset(tmp_path, extra={"intl/rtl.md": RTL_DOC})
    window = open_window(qtbot, root)
    index = window.controller.index
    doc = index.doc_number("intl/rtl.md")
    window.controller.select_document(doc)
    text, font = window.doc_label.text(), window.doc_label.font()
    count = f"{len(index.doc_rows(doc))} chunks"
    title_at, count_at = text.index(index.titles[doc]), text.index(count)
    # on screen, left to right: the document id, then the title, then "N chunks" with its digits first
    assert _visual_x(text, 0, font) < _visual_x(text, title_at, font) < _visual_x(text, count_at, font)
    assert _visual_x(text, count_at, font) < _visual_x(text, count_at + len(count) - 1, font)


@pytest.mark.parametrize("leave", [Qt.Key.Key_Return, Qt.Key.Key_Escape])
def test_return_or_escape_in_the_filter_hands_the_keys_back(qtbot, dataset: Path, leave: Qt.Key) -> None:  # type: ignore[no-untyped-def]
    """After Ctrl+F and a filter, neither Return nor Escape left the filter box: the next J was typed into
    the filter, and the document shown was not one the filter listed."""
    window = open_window(qtbot, dataset)
    controller, index = window.controller, window.controller.index
    controller.select_row(0)
    qtbot.keyClick(window.chunks_view, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.filter_box.hasFocus()
    qtbot.keyClicks(window.filter_box, "emoji")
    qtbot.keyClick(window.filter_box, leave)
    assert window.filter_box.text() == "emoji" and not window.filter_box.hasFocus()
    emoji = index.doc_number("notes/emoji.md")
    assert controller.doc == emoji  # the only document listed is the one shown
    qtbot.keyClick(window.focusWidget(), Qt.Key.Key_J)
    assert window.filter_box.text() == "emoji"
    assert controller.row == index.doc_rows(emoji).start + 1


def test_return_in_the_reviewer_box_hands_the_keys_back(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """After typing a name and Return the focus stayed in the reviewer box: the next J and 1 were
    appended to the name ("alicej1", recorded with the next decision) and nothing was flagged."""
    window = open_window(qtbot, dataset)
    controller = window.controller
    controller.select_row(0)
    window.reviewer_box.setFocus()
    window.reviewer_box.selectAll()
    qtbot.keyClicks(window.reviewer_box, "alice")
    qtbot.keyClick(window.reviewer_box, Qt.Key.Key_Return)
    assert controller.reviewer == "alice" and not window.reviewer_box.hasFocus()
    qtbot.keyClick(window.focusWidget(), Qt.Key.Key_J)
    qtbot.keyClick(window.focusWidget(), Qt.Key.Key_1)
    assert window.reviewer_box.text() == "alice" and controller.reviewer == "alice"
    assert (
        controller.index.state(1).reasons == ["split_procedure"]
        and controller.index.state(1).reviewer == "alice"
    )
    window.reviewer_box.setFocus()
    qtbot.keyClicks(window.reviewer_box, "bob")
    qtbot.keyClick(window.reviewer_box, Qt.Key.Key_Escape)  # drops the edit
    assert window.reviewer_box.text() == "alice" == controller.reviewer and not window.reviewer_box.hasFocus()


def test_the_window_opens_inside_the_screen(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The window always opened 1500 x 900: on a 1280 x 720 laptop its right end (progress, the Review
    column) and its bottom (status bar) were off the screen."""
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    available = window.screen().availableGeometry()
    minimum = window.minimumSizeHint()
    assert window.width() <= max(available.width(), minimum.width())
    assert window.height() <= max(available.height(), minimum.height())


@pytest.mark.parametrize("size", [(1264, 672), (1600, 940), (2560, 1400)])
def test_the_text_is_the_widest_pane_on_small_and_large_screens(
    qtbot, dataset: Path, size: tuple[int, int]
) -> None:  # type: ignore[no-untyped-def]
    """On a 1280 x 720 laptop the document's text got what was left after fixed 450 and 540 pixel side
    panes: 266 pixels, about 30 characters a line, narrower than either list beside it; and the chunk
    table's Review column was cut off behind a horizontal scroll bar."""
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(dataset)
    window.controller.select_document(0)
    left, centre, right = window.centralWidget().sizes()
    assert centre > left and centre > right
    assert centre >= 0.35 * sum((left, centre, right))
    qtbot.waitUntil(lambda: window.chunks_view.viewport().width() > 0)
    header = window.chunks_view.horizontalHeader()
    assert (
        header.length() <= window.chunks_view.viewport().width()
    )  # every column, Review included, is in view


def test_k_on_a_document_without_chunks_goes_back(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A document whose text is all front matter has no chunks; K there jumped forward to the next
    document's first chunk, as J does, instead of back to the previous document's last chunk."""
    root = build_dataset(tmp_path, extra={"notes/front-matter-only.md": "---\ntitle: Nothing here\n---\n"})
    window = open_window(qtbot, root)
    controller, index = window.controller, window.controller.index
    empty = index.doc_number("notes/front-matter-only.md")
    assert len(index.doc_rows(empty)) == 0 and 0 < empty < index.n_documents - 1
    controller.select_document(empty)
    assert controller.row is None
    press(qtbot, window, Qt.Key.Key_K)
    assert controller.row == index.doc_rows(empty).start - 1  # the last chunk of the document before
    controller.select_document(empty)
    press(qtbot, window, Qt.Key.Key_J)
    assert controller.row == index.doc_rows(empty).start  # the first chunk of the document after


LONG_ID = "keps/sig-api-machinery/5073-declarative-validation-with-validation-gen/README.md"
LONG_TITLE = "KEP-5073: Declarative Validation of Kubernetes Native Types With validation-gen"


def test_a_long_document_id_and_title_do_not_widen_the_window(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The line above the text was as wide as its whole text: with a real KEP's path and title the
    window could not be narrower than 1,613 pixels, and in a 1600-pixel window the document list
    was squeezed to 140 pixels (its filter box "Fi…", its count columns out of sight)."""
    root = build_dataset(tmp_path, extra={LONG_ID: f"# {LONG_TITLE}\n\nSome text about validation.\n"})
    window = open_window(qtbot, root)
    window.resize(1600, 940)
    controller = window.controller
    controller.select_document(controller.index.doc_number(LONG_ID))
    for _ in range(3):
        QApplication.processEvents()
    assert window.minimumSizeHint().width() < 1200
    left, centre, right = window.centralWidget().sizes()
    assert left >= 400 and right >= 400
    assert LONG_TITLE in window.doc_label.text() and LONG_TITLE in window.doc_label.toolTip()


def _shown_text(view, index) -> str:  # type: ignore[no-untyped-def]
    """The text a cell is painted with, as its delegate sets it up (elided to the cell's width)."""
    from PySide6.QtWidgets import QStyleOptionViewItem

    option = QStyleOptionViewItem()
    option.initFrom(view)
    option.rect = view.visualRect(index)
    option.widget = view
    view.itemDelegateForIndex(index).initStyleOption(option, index)
    return view.fontMetrics().elidedText(option.text, option.textElideMode, option.rect.width() - 6)


def test_document_ids_that_share_a_file_name_stay_apart_when_cut(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On the k8s-enhancements corpus every document is keps/SIG/NNNN-name/README.md; cut in the middle
    to fit the list they all read "keps/s…DME.md"; cut from the left ("…swap/README.md") a name lost its
    leading number. Top folders go first now: "…/2400-node-swap/README.md", then the end is cut."""
    ids = [
        "keps/sig-api-machinery/5073-declarative-validation-with-validation-gen/README.md",
        "keps/sig-api-machinery/4020-unknown-version-interoperability-proxy/README.md",
        "keps/sig-apps/1847-autoremove-statefulset-pvcs/README.md",
        "keps/sig-node/2400-node-swap/README.md",
    ]
    root = build_dataset(tmp_path, extra={doc_id: f"# {doc_id}\n\nText.\n" for doc_id in ids})
    window = open_window(qtbot, root)
    window.resize(1264, 672)
    QApplication.processEvents()
    view, model = window.documents_view, window.documents_model
    width = view.columnWidth(0) - 8  # the cell's text margins
    assert width < max(view.fontMetrics().horizontalAdvance(doc_id) for doc_id in ids)  # the ids are cut
    shown = [
        _shown_text(view, model.index(row, 0))
        for row in range(model.rowCount())
        if model.index(row, 0).data() in ids
    ]
    assert len(shown) == len(ids) and len(set(shown)) == len(ids), shown
    assert all(text.startswith("…/") and text[2:6].isdigit() for text in shown), shown


@pytest.mark.parametrize("between", [Qt.Key.Key_O, Qt.Key.Key_J])
def test_b_is_dropped_by_a_verdict_or_a_move_before_its_number(qtbot, dataset: Path, between: Qt.Key) -> None:  # type: ignore[no-untyped-def]
    """B arms "the next flag is on the boundary after this chunk". After B, O (or J) moved to another
    chunk with B still armed, so the next digit flagged that other chunk's boundary, one the reviewer
    never chose, instead of the chunk in view."""
    window = open_window(qtbot, dataset)
    controller, index = window.controller, window.controller.index
    controller.select_row(0)
    press(qtbot, window, Qt.Key.Key_B)
    assert controller.boundary_mode
    press(qtbot, window, between)
    assert controller.row == 1 and not controller.boundary_mode
    assert not window.boundary_action.isChecked() and window.target_label.text() == ""
    press(qtbot, window, Qt.Key.Key_2)
    assert index.state(1).reasons == ["mid_sentence"] and index.state(1).boundary_reasons == []


def _contrast(a, b) -> float:  # type: ignore[no-untyped-def]
    """WCAG contrast ratio of two QColors."""

    def luminance(colour) -> float:  # type: ignore[no-untyped-def]
        channels = [c / 255 for c in (colour.red(), colour.green(), colour.blue())]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_reviewed_rows_stay_readable_in_a_dark_theme(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """Flagged and OK chunks get a light pink or light green row; with a dark desktop theme the text
    kept the theme's light colour, so those rows were blank to the eye."""
    from PySide6.QtGui import QColor, QPalette

    window = open_window(qtbot, dataset)
    palette = window.chunks_view.palette()
    palette.setColor(QPalette.ColorRole.Base, QColor("#1e1e1e"))
    palette.setColor(QPalette.ColorRole.Text, QColor("#eeeeee"))
    window.chunks_view.setPalette(palette)
    controller = window.controller
    controller.select_row(0)
    controller.flag_number(1)  # row 0 flagged, then row 1
    controller.mark_ok()  # row 1 OK
    model = window.chunks_model
    for row in (0, 1):
        for column in range(model.columnCount()):
            index = model.index(row, column)
            background = index.data(Qt.ItemDataRole.BackgroundRole).color()
            foreground = index.data(Qt.ItemDataRole.ForegroundRole)
            text = foreground.color() if foreground is not None else palette.color(QPalette.ColorRole.Text)
            assert _contrast(background, text) >= 4.5, (row, column)


def test_the_review_column_keeps_its_flag_mark_when_cut(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """The table cuts cells from the left (for section paths), so a long verdict read "…lit_procedure":
    the ⚑ or ✓ that says what the row is was the part cut off."""
    from PySide6.QtWidgets import QStyleOptionViewItem

    window = open_window(qtbot, dataset)
    view, model = window.chunks_view, window.chunks_model
    window.controller.select_document(0, None)
    column = model.HEADERS.index("Review")
    option = QStyleOptionViewItem()
    delegate = view.itemDelegateForColumn(column)
    assert delegate is not None
    delegate.initStyleOption(option, model.index(0, column))
    assert option.textElideMode == Qt.TextElideMode.ElideRight


def test_a_verdict_does_not_re_explain_every_finding_of_the_document(
    qtbot, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Every verdict rebuilt the margin's finding markers of the whole document, explanations and all,
    though findings never change: 125 ms per key on a document of 20,000 chunks (all with findings),
    growing with the document. Only the verdict markers are rebuilt now."""
    text = "".join(
        f"Line {i} of the log says the stove and tent were shipped, and then more words follow\n"
        for i in range(3000)
    )
    root = build_dataset(tmp_path, extra={"big/log.md": text})
    window = open_window(qtbot, root)
    controller, index, view = window.controller, window.controller.index, window.source_view
    doc = index.doc_number("big/log.md")
    rows = index.doc_rows(doc)
    assert len(rows) > 500 and index.suspicious[rows.start : rows.stop].sum() > 500
    controller.select_document(doc)
    findings_before = [m for m in view._markers if m.kind == "finding"]
    calls = []
    explain = type(index).explain_findings
    monkeypatch.setattr(
        type(index), "explain_findings", lambda self, row: calls.append(row) or explain(self, row)
    )
    press(qtbot, window, Qt.Key.Key_1)
    press(qtbot, window, Qt.Key.Key_O)
    assert len(calls) <= 4  # the detail pane of the chunk shown, not every chunk of the document
    assert [m for m in view._markers if m.kind == "finding"] == findings_before
    kinds = {(m.row, m.kind) for m in view._markers if m.kind != "finding"}
    assert kinds == {(rows.start, "flag"), (rows.start + 1, "ok")}


def test_a_note_can_be_written_and_saved_with_the_keyboard_alone(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """E opened Qt's multi-line input dialog, where Tab types a tab and Ctrl+Return does nothing: the
    only way to save a note was the mouse. Tab now leaves the text and Ctrl+Return saves."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QPlainTextEdit

    window = open_window(qtbot, dataset)
    controller = window.controller
    controller.select_row(2)
    seen: dict[str, object] = {}

    def type_note() -> None:
        dialog = QApplication.activeModalWidget()
        seen["dialog"] = dialog is not None
        if dialog is None:
            return
        # Its shortcuts (Ctrl+Return) work once it is the active window: under load that comes later.
        qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=10000)
        edit = dialog.findChild(QPlainTextEdit)
        qtbot.keyClicks(edit, "split the table")
        qtbot.keyClick(edit, Qt.Key.Key_Tab)
        seen["tab_left_the_text"] = not edit.hasFocus() and "\t" not in edit.toPlainText()
        edit.setFocus()
        qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        if dialog.isVisible():  # not saved by the keyboard: close it so that the test ends
            seen["still_open"] = True
            dialog.reject()

    QTimer.singleShot(100, type_note)
    press(qtbot, window, Qt.Key.Key_E)
    assert seen.get("dialog") and not seen.get("still_open")
    assert seen.get("tab_left_the_text")
    assert controller.index.state(2).note == "split the table"


def test_a_one_chunk_document_says_1_chunk(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = build_dataset(tmp_path, extra={"notes/short.md": "# Short\n\nOne small paragraph.\n"})
    window = open_window(qtbot, root)
    controller = window.controller
    doc = controller.index.doc_number("notes/short.md")
    assert len(controller.index.doc_rows(doc)) == 1
    controller.select_document(doc)
    assert window.doc_label.text().endswith("·  1 chunk")
    controller.select_document(controller.index.doc_number("notes/emoji.md"))
    assert window.doc_label.text().endswith("·  3 chunks")


def test_the_detail_counts_the_last_chunk_as_the_last(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """The detail read "Chunk 2 of 3" for the last of three chunks (a 0-based index over a count), as if
    one more followed. It names the chunk by its # and counts its place from 1."""
    window = open_window(qtbot, dataset)
    controller, index = window.controller, window.controller.index
    rows = index.doc_rows(index.doc_number("notes/emoji.md"))
    controller.select_row(rows.stop - 1)
    first_line = window.detail.toPlainText().splitlines()[0]
    assert first_line.startswith("Chunk #2 · 3 of 3 · notes/emoji.md"), first_line
    controller.select_row(rows.start)
    assert window.detail.toPlainText().startswith("Chunk #0 · 1 of 3 · ")


def test_closing_the_window_while_a_dataset_loads_does_not_abort(qtbot, dataset: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl+Q while a big dataset was still loading killed the process: "QThread: Destroyed while
    thread is still running", SIGABRT, exit code 134. Closing now waits for the loader, and what it
    loaded is not installed in the closed window."""
    import time

    from chunkyard.chunking.review import ReviewIndex as Index

    load = Index.load.__func__  # type: ignore[attr-defined]

    def slow_load(cls, path):  # type: ignore[no-untyped-def]
        time.sleep(0.4)
        return load(cls, path)

    monkeypatch.setattr(Index, "load", classmethod(slow_load))
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.show()
    controller = window.controller
    window.open_dataset(dataset)
    loader = controller._loader
    assert loader is not None and loader.isRunning()
    window.close()
    assert not loader.isRunning()  # waited for, not destroyed while running
    qtbot.wait(100)  # a late "loaded" is delivered now, if it is going to be
    assert controller.index is None and controller.ledger is None


def test_the_size_histogram_leaves_out_chunks_measured_in_another_unit(
    qtbot, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A rule may measure some documents in another unit. The histogram titled "Chunk sizes (tokens)"
    plotted those chunks' sizes too: with policies/** in chars (budget 2,000) and the rest in tokens
    (budget 384), 32 chunks of up to 1,472 chars looked like chunks four times over the token budget."""
    from support import review_fixtures

    monkeypatch.setattr(
        review_fixtures,
        "CONFIG",
        review_fixtures.CONFIG
        + 'rules:\n  - match: "policies/**"\n    chunker: {unit: words, max_size: 300}\n',
    )
    root = build_dataset(tmp_path)
    window = open_window(qtbot, root)
    index = window.controller.index
    units = index.snapshot.chunks(["unit"]).column("unit").to_pylist()
    in_chars, in_words = units.count("chars"), units.count("words")
    assert index.unit == "chars" and in_words > 0
    histogram = window.stats.histogram
    assert int(histogram.counts.sum()) == in_chars  # the words chunks are not counted as chars
    assert f"{in_words} chunks in words not shown" in histogram.title()


def _hold_ledger_lock(path: Path):  # type: ignore[no-untyped-def]
    """Another program writing to the ledger: a connection in a write transaction (until rollback)."""
    import sqlite3

    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_decisions_do_not_freeze_the_window_while_another_program_holds_the_ledger(
    qtbot, dataset: Path
) -> None:  # type: ignore[no-untyped-def]
    """A verdict was written on the GUI thread, waiting up to 5 s for the ledger's lock and retrying 8
    times: with a reprocess or a script writing, the window froze for most of a minute per key. Now a
    write waits a moment, then the decision waits in a queue (shown as decided, and in the status bar)
    and is written as soon as the lock is free, in order, undo included."""
    import time

    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None
    path = ledger_path(index.snapshot.path)
    other = _hold_ledger_lock(path)
    try:
        controller.select_row(3)
        started = time.perf_counter()
        press(qtbot, window, Qt.Key.Key_2)  # mid_sentence
        press(qtbot, window, Qt.Key.Key_O)  # chunk 4 OK
        press(qtbot, window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # undo the OK
        elapsed = time.perf_counter() - started
        assert elapsed < 2.0, f"three keys took {elapsed:.1f} s"  # each used to wait ≈50 s
        assert index.state(3).reasons == ["mid_sentence"] and index.state(4).verdict is None
        assert window.progress_label.text() == f"1 of {index.n_chunks} reviewed · 1 flagged"
        assert controller.pending_count == 3 and not window.pending_label.isHidden()
        assert (
            "busy" in window.pending_label.text()
            and "3 decisions waiting to be saved" in window.pending_label.text()
        )
        controller.poll_ledger()  # another reviewer's view does not drop what waits
        assert index.state(3).reasons == ["mid_sentence"]
        assert not Ledger(path).events(), "nothing could be written yet"
    finally:
        other.execute("ROLLBACK")
        other.close()
    qtbot.waitUntil(
        lambda: controller.pending_count == 0, timeout=5000
    )  # promptly: a killed window loses nothing
    events = Ledger(path).events()
    assert [e.kind for e in events] == ["flag", "mark_ok", "retract"]
    assert events[2].target_event == events[1].id and events[0].reason == "mid_sentence"
    assert window.pending_label.isHidden()
    controller.poll_ledger()
    assert index.state(3).reasons == ["mid_sentence"] and index.state(4).verdict is None
    window.close()


@pytest.mark.parametrize("choice", ["Close when saved", "Keep reviewing", "Close and lose them"])
def test_closing_with_decisions_not_saved_asks_first(qtbot, dataset: Path, monkeypatch, choice: str) -> None:  # type: ignore[no-untyped-def]
    """Closing the window with decisions still waiting for the ledger tries once more, then asks: close
    once they are saved (nothing lost), keep reviewing, or close and lose them."""
    import chunkyard.gui.controller
    import chunkyard.gui.main_window

    monkeypatch.setattr(chunkyard.gui.main_window, "CLOSE_PATIENCE_MS", 100)
    monkeypatch.setattr(chunkyard.gui.controller, "CLOSE_PATIENCE_MS", 100)
    window = open_window(qtbot, dataset)
    controller = window.controller
    assert controller.index is not None
    path = ledger_path(controller.index.snapshot.path)
    other = _hold_ledger_lock(path)
    try:
        controller.select_row(2)
        press(qtbot, window, Qt.Key.Key_1)
        window.close()
        assert window.isVisible() and controller.index is not None, "not closed with a decision unsaved"
        box = window.unsaved_box
        assert box is not None and "1 decision waiting to be saved" in box.text()
        [button] = [b for b in box.buttons() if b.text() == choice]
        button.click()
        if choice != "Close and lose them":
            assert window.isVisible()
    finally:
        other.execute("ROLLBACK")
        other.close()
    if choice == "Keep reviewing":
        qtbot.waitUntil(lambda: controller.pending_count == 0, timeout=5000)
        qtbot.wait(100)
        assert window.isVisible() and controller.index is not None
        window.close()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    assert controller.index is None and controller.pending_count == 0
    kinds = [e.kind for e in Ledger(path).events()]
    assert kinds == ([] if choice == "Close and lose them" else ["flag"])


def test_the_first_keys_after_opening_review_instead_of_filtering(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """Focus started in "Filter documents…": N and 2 were typed into it and the flag was never recorded."""
    window = open_window(qtbot, dataset)
    QApplication.processEvents()
    focused = QApplication.focusWidget()
    assert focused is window.chunks_view, focused
    controller = window.controller
    controller.select_row(0)
    qtbot.keyClick(focused, Qt.Key.Key_N)
    row = controller.row
    assert row is not None and row > 0 and window.controller.index.suspicious[row]
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_2)
    assert window.filter_box.text() == ""
    assert window.controller.index.state(row).reasons == ["mid_sentence"]
    # Tab from the table never lands in the filter or reviewer box (they take review keys as text).
    for _ in range(8):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        assert QApplication.focusWidget() not in (window.filter_box, window.reviewer_box)


def test_review_keys_pressed_while_the_dataset_loads_are_applied_once_it_is_open(
    qtbot, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A large dataset takes seconds to load: N and 2 pressed meanwhile were dropped, so the first
    intended flag was never recorded. They now wait for the dataset and apply in order."""
    import threading
    import time

    import chunkyard.gui.controller as controller_module

    release = threading.Event()
    real_load = controller_module.ReviewIndex.load

    def slow_load(path):  # type: ignore[no-untyped-def]
        release.wait(20)
        return real_load(path)

    monkeypatch.setattr(controller_module.ReviewIndex, "load", staticmethod(slow_load))
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.resize(1400, 850)
    window.show()
    qtbot.waitExposed(window)
    window.open_dataset(dataset)
    window.activateWindow()
    QApplication.processEvents()
    assert window.controller.is_loading() and window.controller.index is None
    qtbot.keyClick(window.chunks_view, Qt.Key.Key_N)
    qtbot.keyClick(window.chunks_view, Qt.Key.Key_2)
    assert window.filter_box.text() == ""
    assert "2 keys pressed" in window.statusBar().currentMessage()
    started = time.monotonic()
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        release.set()
    index = window.controller.index
    assert index is not None and time.monotonic() - started < 20
    qtbot.waitUntil(lambda: any(index.state(row).reasons for row in range(index.n_chunks)), timeout=5000)
    flagged = [row for row in range(index.n_chunks) if index.state(row).reasons]
    assert len(flagged) == 1 and index.state(flagged[0]).reasons == ["mid_sentence"]
    assert index.suspicious[flagged[0]]  # N went to a suspicious chunk first, then 2 flagged it


def test_a_note_after_a_flag_reaches_the_flagged_chunk_and_names_it(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """A verdict moves on first; E then wrote its note on the next chunk, maybe in another document. The
    note now goes to the chunk just decided, and the dialog (real, typed into) says which one it is."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QLabel, QPlainTextEdit

    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None
    last = index.doc_rows(0).stop - 1  # the last chunk of a document: the flag moves on into the next one
    controller.select_row(last)
    press(qtbot, window, Qt.Key.Key_2)
    assert controller.row == last + 1 and index.chunk_doc[controller.row] == 1
    seen: dict[str, str] = {}

    def type_note() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None:
            return
        seen["title"] = dialog.windowTitle()
        seen["label"] = " ".join(label.text() for label in dialog.findChildren(QLabel))
        qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=10000)  # for its Ctrl+Return
        edit = dialog.findChild(QPlainTextEdit)
        qtbot.keyClicks(edit, "cut mid-sentence")
        qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)

    QTimer.singleShot(100, type_note)
    press(qtbot, window, Qt.Key.Key_E)
    name = f"chunk {int(index.chunk_index[last])} of {index.doc_ids[0]} (flagged: mid_sentence)"
    assert name in seen.get("title", "") and name in seen.get("label", ""), seen
    assert index.state(last).note == "cut mid-sentence" and index.state(last + 1).note == ""
    # Once the reviewer moves, E is about the chunk shown.
    window.activateWindow()  # the offscreen platform does not give the window back after the dialog
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    press(qtbot, window, Qt.Key.Key_J)
    assert controller.note_row() == controller.row == last + 2


def _immutable(*paths: Path):  # type: ignore[no-untyped-def]
    """Make ``paths`` unwritable even for root (``chattr +i``); the caller undoes it with the returned function."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: cannot make a file read-only for root")
    result = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"chattr +i is not supported here: {result.stderr.strip()}")
    return lambda: subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


def test_a_read_only_ledger_says_so_at_open_and_disables_decisions(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """Flags used to show as recorded, then wait forever "until the ledger is free"."""
    snapshot = ReviewIndex.load(dataset).snapshot.path
    Ledger(ledger_path(snapshot)).close()
    undo = _immutable(ledger_path(snapshot), dataset)
    try:
        window = MainWindow(ReviewController())
        qtbot.addWidget(window)
        window.show()
        errors: list[str] = []
        window.controller.failed.connect(errors.append)
        with qtbot.waitSignal(window.controller.loaded, timeout=20000):
            window.open_dataset(dataset)
        assert len(errors) == 1 and "read-only" in errors[0], errors
        assert window.windowTitle().endswith("(read-only)")
        assert not window.read_only_label.isHidden()
        controller = window.controller
        controller.select_row(0)
        window.activateWindow()
        for key in (Qt.Key.Key_2, Qt.Key.Key_O, Qt.Key.Key_3, Qt.Key.Key_E):
            press(qtbot, window, key)
        assert all(not action.isEnabled() for action in window.decision_actions)
        assert not controller.flag("other") and controller.pending_count == 0
        assert controller.index.state(0).verdict is None
        assert len(errors) == 1  # one dialog at open, not one more per key
        assert "Read-only" in window.statusBar().currentMessage()
        window.close()
    finally:
        undo()
    assert Ledger(ledger_path(snapshot)).events() == []


def test_a_read_only_folder_without_a_ledger_is_one_dialog_not_one_per_key(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    undo = _immutable(dataset)
    try:
        window = MainWindow(ReviewController())
        qtbot.addWidget(window)
        window.show()
        errors: list[str] = []
        window.controller.failed.connect(errors.append)
        with qtbot.waitSignal(window.controller.loaded, timeout=20000):
            window.open_dataset(dataset)
        window.controller.select_row(0)
        for _ in range(3):
            assert not window.controller.flag("other")
            assert not window.controller.mark_ok()
        assert len(errors) == 1, errors
        window.close()
    finally:
        undo()


def test_decisions_are_refused_once_the_dataset_is_deleted_while_open(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """They used to go on into the unlinked ledger file: lost without a word."""
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None
    controller.select_row(0)
    press(qtbot, window, Qt.Key.Key_2)
    assert index.state(0).reasons == ["mid_sentence"]
    kept = dataset.parent / "kept"
    shutil.copytree(dataset, kept)  # what a backup holds: the flag given before the deletion
    shutil.rmtree(dataset)
    errors: list[str] = []
    controller.failed.connect(errors.append)
    press(qtbot, window, Qt.Key.Key_3)
    assert controller.read_only.startswith("the dataset was deleted")
    assert len(errors) == 1 and "deleted" in errors[0]
    assert controller.index.state(1).verdict is None and controller.pending_count == 0
    assert window.windowTitle().endswith("(read-only)")
    assert all(not action.isEnabled() for action in window.decision_actions)
    assert not controller.mark_ok() and len(errors) == 1
    assert Ledger(ledger_path(next(kept.glob("v1/0*")))).events()[0].reason == "mid_sentence"
    window.close()


def _painted_selected_rows(view) -> list[int]:  # type: ignore[no-untyped-def]
    """Rows of ``view`` painted in the selection colour (sampled at the left edge of each visible row)."""
    from PySide6.QtGui import QPalette

    # What is on the screen (the window's backing store), not a fresh rendering: grab() repaints everything,
    # so it would never show a row left painted as selected.
    QApplication.processEvents()
    viewport = view.viewport()
    window = viewport.window()
    corner = viewport.mapTo(window, QPoint(0, 0))
    image = (
        window.screen()
        .grabWindow(window.winId(), corner.x(), corner.y(), viewport.width(), viewport.height())
        .toImage()
    )
    highlight = view.palette().color(QPalette.ColorGroup.Active, QPalette.ColorRole.Highlight)
    inactive = view.palette().color(QPalette.ColorGroup.Inactive, QPalette.ColorRole.Highlight)
    model = view.model()
    painted = []
    for row in range(model.rowCount()):
        rect = view.visualRect(model.index(row, 0))
        if rect.height() <= 0 or rect.top() >= image.height() or rect.bottom() < 0:
            continue
        colour = image.pixelColor(rect.left() + 2, min(max(rect.center().y(), 0), image.height() - 1))
        if any(
            abs(colour.red() - c.red()) + abs(colour.green() - c.green()) + abs(colour.blue() - c.blue()) < 30
            for c in (highlight, inactive)
        ):
            painted.append(row)
    return painted


@pytest.mark.parametrize("key", [Qt.Key.Key_N, Qt.Key.Key_J, Qt.Key.Key_K])
def test_only_the_current_rows_are_highlighted_after_crossing_documents(
    qtbot, dataset: Path, key: Qt.Key
) -> None:  # type: ignore[no-untyped-def]
    """After N/K crossed into another document, rows of the previous one stayed painted as selected."""
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    assert index is not None
    first_of_second = index.doc_rows(1).start
    start = (
        first_of_second
        if key == Qt.Key.Key_K
        else max(int(r) for r in np.flatnonzero(index.suspicious) if index.chunk_doc[r] == 0)
        if key == Qt.Key.Key_N
        else first_of_second - 1
    )
    controller.select_row(start)
    QApplication.processEvents()
    press(qtbot, window, key)
    QApplication.processEvents()
    assert controller.doc != int(index.chunk_doc[start])
    documents = _painted_selected_rows(window.documents_view)
    assert documents == [window.documents_model.row_of(controller.doc)], documents
    chunks = _painted_selected_rows(window.chunks_view)
    assert chunks == [window.chunks_model.table_row(controller.row)], chunks


def test_at_2x_scaling_names_are_readable_and_the_chunk_table_shows_rows(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """QT_SCALE_FACTOR=2 on 1920x1080 leaves 960x540 logical pixels (the window opens at 944x492 in
    them): every document name read "…" (the count columns took the list) and the chunk table showed
    two rows."""
    window = open_window(qtbot, dataset)
    window.resize(944, 492)
    QApplication.processEvents()
    window.controller.select_document(0, 3)
    QApplication.processEvents()
    view, model = window.documents_view, window.documents_model
    for row in range(model.rowCount()):
        text = _shown_text(view, model.index(row, 0))
        assert len(text.replace("…", "").replace("/", "")) >= 12, text
    rows_shown = (
        window.chunks_view.viewport().height() // window.chunks_view.verticalHeader().defaultSectionSize()
    )
    assert rows_shown >= 6
    header = window.chunks_view.horizontalHeader()
    assert not any(header.isSectionHidden(c) for c in range(header.count()))  # the Review column included
    size = _shown_text(window.chunks_view, window.chunks_model.index(0, 1))
    assert "…" not in size and size.endswith("chars")
    # Back at full size every column is back.
    window.resize(1500, 900)
    QApplication.processEvents()
    assert not any(view.horizontalHeader().isSectionHidden(c) for c in range(5))


def test_n_and_p_pass_over_decided_chunks_and_reopening_resumes(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    """Reopened, N landed on a flagged chunk and 2 flagged it twice; reopening started at the first document."""
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    suspicious = [int(r) for r in np.flatnonzero(index.suspicious)]
    controller.select_row(suspicious[1])
    press(qtbot, window, Qt.Key.Key_2)
    controller.select_row(suspicious[2])
    press(qtbot, window, Qt.Key.Key_O)
    window.close()
    again = open_window(qtbot, dataset)
    controller = again.controller
    assert controller.start_row() == suspicious[3]  # after the latest decision
    controller.select_row(suspicious[0])
    press(qtbot, again, Qt.Key.Key_N)
    assert controller.row == suspicious[3]
    press(qtbot, again, Qt.Key.Key_P)
    assert controller.row == suspicious[0]


def test_most_suspicious_moves_to_the_top_of_the_list(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    extra = {f"many/{n:03d}-page.md": f"# Page {n}\n\nShort.\n" for n in range(80)}
    window = open_window(qtbot, build_dataset(tmp_path, extra=extra))
    QApplication.processEvents()
    bar = window.documents_view.verticalScrollBar()
    assert window.documents_model.rowCount() == 84 and bar.maximum() > 0
    bar.setValue(bar.maximum())
    window.order_box.setCurrentIndex(1)
    assert bar.value() == 0
    bar.setValue(bar.maximum())
    window.order_box.setCurrentIndex(0)
    assert bar.value() == 0


def _empty_dataset(root: Path) -> Path:
    """A snapshot whose every file was skipped (empty, binary): no documents, no chunks."""
    from chunkyard.chunking.config import load_config_text
    from chunkyard.chunking.dataset import SnapshotWriter
    from chunkyard.chunking.pipeline import (
        RunStats,
        build_manifest,
        chunk_files,
        discover_files,
        make_batches,
        prepare_run,
    )

    from support.review_fixtures import CONFIG

    source = root / "src"
    source.mkdir(parents=True)
    (source / "empty.md").write_text("")
    (source / "binary.md").write_bytes(b"\x00\x01\x02\xff" * 64)
    config = load_config_text(
        CONFIG.replace("SOURCE", str(source)).replace("OUTPUT", str(root / "out")), root / "config.yaml"
    )
    context = prepare_run(config)
    writer = SnapshotWriter(context.version_path)
    stats = RunStats()
    for files, skipped in make_batches(discover_files(context)):
        stats.skipped.extend(skipped)
        result = chunk_files(config, files, {})
        stats.skipped.extend(result.skipped)
        writer.write(result.documents, result.chunks)
        stats.add(result.documents, result.chunks)
    writer.publish(build_manifest(context, stats, "full", []))
    return root / "out" / "fixture-kb"


def test_an_empty_dataset_says_why_instead_of_blank_panes(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, _empty_dataset(tmp_path))
    assert window.controller.index.n_chunks == 0
    why = window.source_view.placeholderText()
    assert why.startswith("This snapshot has no chunks"), why
    assert "  binary.md: " in why and "  empty.md: " in why, why
    window.source_view.viewport().repaint()  # the placeholder is painted without error


def test_review_without_a_path_names_the_current_folder(tmp_path: Path) -> None:
    """It named a folder found below the current one, which the user never typed."""
    (tmp_path / "only" / "v1").mkdir(parents=True)  # one dataset-like folder, with no snapshot
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "review", "--screenshot", str(tmp_path / "shot.png")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"chunkyard: error: no PATH given, and the current folder ({tmp_path}) is not a dataset to open: "
    ), lines


def test_question_mark_lists_every_key_and_the_colours_and_the_toolbar_shows_keys(
    qtbot, dataset: Path
) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QToolButton

    from chunkyard.gui.keys_overlay import LEGEND

    window = open_window(qtbot, dataset)
    press(qtbot, window, Qt.Key.Key_Question)
    overlay = window.keys_overlay
    assert overlay.isVisible() and overlay.geometry() == window.rect()
    listed = {keys: what for _title, entries in overlay.rows() for keys, what in entries}
    # Every action of the window that has a key is listed with that key.
    for action in window.actions():
        if action.shortcuts():
            keys = ", ".join(k.toString() for k in action.shortcuts())
            assert listed.get(keys) == action.text().replace("&", ""), keys
    assert listed["2"].startswith("mid_sentence") and listed["N"].startswith("Next suspicious")
    assert len(LEGEND) == 10
    overlay.repaint()  # paints without error
    qtbot.keyClick(overlay, Qt.Key.Key_Escape)
    assert not overlay.isVisible() and QApplication.focusWidget() is window.chunks_view
    # The Decide toolbar: every verdict with its key, and its buttons act.
    buttons = {b.text(): b for b in window.decide_bar.findChildren(QToolButton) if b.text()}
    assert {
        "1 split_procedure",
        "2 mid_sentence",
        "9 other",
        "B boundary",
        "O OK",
        "E note",
        "? keys",
    } <= set(buttons)
    window.controller.select_row(0)
    qtbot.mouseClick(buttons["3 split_table"], Qt.MouseButton.LeftButton)
    assert window.controller.index.state(0).reasons == ["split_table"]


def test_a_finding_queue_from_the_chart_with_progress_rate_and_time_left(
    qtbot, dataset: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Click a bar of the findings chart: review just that finding's chunks, with n of N, rate, time left."""
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    code, count = next(iter(index.finding_counts().items()))
    window.tabs.setCurrentWidget(window.stats)
    QApplication.processEvents()
    chart = window.stats.findings
    qtbot.mouseClick(chart, Qt.MouseButton.LeftButton, pos=chart.bar_centre(code).toPoint())
    assert controller.queue == f"finding:{code}"
    assert window.queue_box.currentText() == f"Finding {code} ({count:,})"
    mask = index.finding_mask(code)
    first = int(np.flatnonzero(mask)[0])
    assert controller.row == first
    assert window.queue_progress_label.text() == f"Finding {code}: 0 of {count} decided"
    clock = iter([100.0, 110.0, 120.0])
    monkeypatch.setattr("chunkyard.gui.controller.time.monotonic", lambda: next(clock))
    for _ in range(3):  # one verdict each 10 s: 6 a minute
        press(qtbot, window, Qt.Key.Key_O)
        assert mask[controller.row] and index.state(controller.row).verdict is None  # the next of the queue
    left = round((count - 3) * 10 / 60)
    expected = f"Finding {code}: 3 of {count} decided · 6.0/min · "
    assert window.queue_progress_label.text().startswith(expected), window.queue_progress_label.text()
    assert window.queue_progress_label.text().endswith("left") and (
        left < 1 or f"{left} min" in window.queue_progress_label.text()
    )
    # Only documents with chunks of the finding left to decide are listed.
    listed = {window.documents_model.doc_at(r) for r in range(window.documents_model.rowCount())}
    assert listed == {int(index.chunk_doc[r]) for r in np.flatnonzero(index.queue_mask(controller.queue))}


def test_bulk_flag_the_chunks_of_one_section_title_with_one_finding_and_undo_them_as_one(
    qtbot, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """152 of one dataset's 180 undersized findings were the same "Unresolved questions: None." section:
    choose chunks by the same finding, then by the same section title, flag them in one step, undo them in
    one step. (The segmenter now avoids such undersized chunks by taking the end of the section before
    into the tiny one, which then starts mid-sentence: twelve such chunks, all in a "Proposal".)"""
    kep = (
        "# Proposal\n\n## Summary\n\n"
        + "Text of the proposal that is long enough to be one chunk. " * 6
        + "It says what it proposes. "
        + "\n\n## Unresolved questions\n\nNone.\n"
    )
    extra = {f"keps/{n:04d}/README.md": kep for n in range(12)}
    window = open_window(qtbot, build_dataset(tmp_path, extra=extra))
    controller = window.controller
    index = controller.index
    titles = index.section_titles()
    targets = [
        r
        for r in range(index.n_chunks)
        if titles[r] == "Proposal" and "mid_sentence_start" in index.findings(r)
    ]
    assert len(targets) == 12
    controller.select_row(targets[0])
    findings = index.findings(targets[0])
    assert findings  # the tiny "None." section carries a finding
    press(
        qtbot, window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    with_findings = int(np.count_nonzero(index.same_findings_mask(targets[0])))
    assert len(controller.bulk_rows()) == with_findings >= 12
    press(
        qtbot, window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert controller.bulk_rows() == targets  # narrowed to the section title
    assert "12 chunks chosen with" in window.bulk_label.text() and "'Proposal'" in window.bulk_label.text()
    assert window.chunks_model.index(window.chunks_model.table_row(targets[0]), 0).data().startswith("● ")
    press(qtbot, window, Qt.Key.Key_9, Qt.KeyboardModifier.ControlModifier)  # all 12 flagged "other"
    assert all(index.state(r).reasons == ["other"] for r in targets)
    assert controller.bulk is None and window.bulk_label.isHidden()
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        assert [e.kind for e in ledger.events()] == ["flag"] * 12
    press(qtbot, window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # one undo takes all 12 back
    assert all(index.state(r).verdict is None for r in targets)
    assert window.progress_label.text().startswith("0 of")
    press(
        qtbot, window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert all(index.state(r).reasons == ["other"] for r in targets)
    # A range, then OK: decided chunks are left out of a new choice.
    controller.select_row(0)
    press(
        qtbot, window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    controller.select_row(4)
    press(
        qtbot, window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert controller.bulk_rows() == [0, 1, 2, 3, 4]
    press(
        qtbot, window, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert all(index.state(r).verdict == "ok" for r in range(5))


def test_the_question_box_lists_bm25_and_dense_answers_marks_and_opens_them(qtbot, dataset: Path) -> None:  # type: ignore[no-untyped-def]
    from chunkyard.chunking.review import QuestionBox

    window = open_window(qtbot, dataset)
    index = window.controller.index
    press(qtbot, window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    panel = window.question_panel
    assert window.tabs.currentWidget() is panel and panel.question.hasFocus()
    qtbot.keyClicks(panel.question, "how many days do I have to return a tent")
    with qtbot.waitSignal(panel.answered, timeout=120000):  # ranked in a thread: the window stays live
        qtbot.keyClick(panel.question, Qt.Key.Key_Return)
        assert panel.busy
    expected = QuestionBox(index).ask("how many days do I have to return a tent", 5)
    assert {
        name: [(a.row, round(a.score, 6)) for a in answers] for name, answers in panel.answers.items()
    } == {name: [(a.row, round(a.score, 6)) for a in answers] for name, answers in expected.items()}
    assert len(panel.answers["bm25"]) == len(panel.answers["dense"]) == 5
    best = panel.answers["bm25"][0]
    assert index.doc_ids[int(index.chunk_doc[best.row])] == "handbook/returns-and-refunds.md"
    lines = [panel.results.topLevelItem(i).text(0) for i in range(panel.results.topLevelItemCount())]
    assert lines[0].startswith("BM25") and lines[1].startswith(
        f"1.  {best.score:.3f}  handbook/returns-and-refunds.md"
    )
    # Choosing an answer shows its chunk; the margin carries each answer's best rank.
    panel.results.setCurrentItem(panel.results.topLevelItem(1))
    assert window.controller.row == best.row
    marks = window.source_view.answers
    assert marks[best.row][0] == "1" and "bm25 #1" in marks[best.row][1]
    assert any(m.kind == "answer" and m.row == best.row for m in window.source_view._markers)
    window.source_view.viewport().repaint()
    window.source_view.margin.repaint()
    qtbot.keyClick(panel.question, Qt.Key.Key_Escape)
    assert QApplication.focusWidget() is window.chunks_view


def test_find_in_chunk_text_and_go_to(qtbot, dataset: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    hits = [int(r) for r in np.flatnonzero(index.text_matches("stove"))]
    assert len(hits) >= 2
    press(qtbot, window, Qt.Key.Key_Slash)
    assert window.search_box.hasFocus()
    qtbot.keyClicks(window.search_box, "Stove")
    qtbot.keyClick(window.search_box, Qt.Key.Key_Return)
    assert controller.row == hits[0] and QApplication.focusWidget() is window.chunks_view
    assert f"chunk 1 of {len(hits)} that contain it" in window.statusBar().currentMessage()
    press(qtbot, window, Qt.Key.Key_F3)
    assert controller.row == hits[1]
    press(qtbot, window, Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)
    assert controller.row == hits[0]
    press(qtbot, window, Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)  # round to the last one
    assert controller.row == hits[-1] and "from the other end" in window.statusBar().currentMessage()
    # Ctrl+G: a chunk of the document shown, a document, a chunk of another one; a bad one says why.
    answers = iter([("2", True), ("policies/expenses.md", True), ("emoji#1", True), ("nope.md", True)])
    monkeypatch.setattr("PySide6.QtWidgets.QInputDialog.getText", lambda *args, **kwargs: next(answers))
    controller.select_row(5)
    press(qtbot, window, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier)
    assert controller.row == index.row_of(int(index.chunk_doc[5]), 2)
    press(qtbot, window, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier)
    assert index.doc_ids[controller.doc] == "policies/expenses.md"
    press(qtbot, window, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier)
    emoji = index.doc_number("notes/emoji.md")
    assert controller.row == index.row_of(emoji, 1)
    press(qtbot, window, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier)
    assert controller.row == index.row_of(emoji, 1)
    assert "no document 'nope.md'" in window.statusBar().currentMessage()


def test_where_two_reviewers_disagree_is_a_queue_and_the_detail_says_who_said_what(
    qtbot, dataset: Path
) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, dataset)
    controller = window.controller
    index = controller.index
    controller.select_row(4)
    press(qtbot, window, Qt.Key.Key_2)  # test-reviewer flags chunk 4 mid_sentence
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        ledger.mark_ok(index.target(4), reviewer="bob")  # another reviewer, at the same time
    controller.poll_ledger()  # what the window does every few seconds
    window.queue_box.setCurrentIndex(window.queue_box.findData("Disagreements"))
    assert controller.queue == "Disagreements"
    assert window.documents_model.rowCount() == 1 and window.documents_model.doc_at(0) == int(
        index.chunk_doc[4]
    )
    controller.select_row(4)
    assert "Reviewers  differ: bob: OK · test-reviewer: flagged: mid_sentence" in window.detail.toPlainText()
    assert window.queue_progress_label.text().startswith("Disagreements: 1 of 1")
