"""The reviewer's compare mode (pytest-qt, offscreen): two snapshots of one document, moved boundaries, a
resolved flag's before/after. The second snapshot comes from reprocessing without Prefect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from chunkyard.chunking.config import load_config_text  # noqa: E402
from chunkyard.chunking.dataset import Snapshot  # noqa: E402
from chunkyard.chunking.ledger import Ledger, Target, ledger_path  # noqa: E402
from chunkyard.chunking.reprocess import reprocess_snapshot  # noqa: E402
from chunkyard.gui.compare_view import CompareWindow, parent_snapshot_path  # noqa: E402

from support.review_fixtures import build_dataset  # noqa: E402

DOC = "runbooks/database-failover.md"


@pytest.fixture
def reprocessed(tmp_path: Path) -> tuple[Snapshot, Snapshot, int]:
    """Snapshot 1, a ``too_large`` flag on its biggest chunk of DOC, and snapshot 2 that resolved it."""
    first = Snapshot.open(build_dataset(tmp_path))
    chunks = [
        row
        for row in first.chunks(["doc_id", "chunk_id", "chunk_index", "n_chars"]).to_pylist()
        if row["doc_id"] == DOC
    ]
    big = max(chunks, key=lambda row: (row["n_chars"], -row["chunk_index"]))
    sha = first.documents(["doc_id", "sha256"], [DOC]).to_pylist()[0]["sha256"]
    with Ledger(ledger_path(first.path)) as ledger:
        flag = ledger.flag(
            Target("fixture-kb", 1, first.number, DOC, sha, big["chunk_id"], big["chunk_index"]),
            "too_large",
            reviewer="tester",
        )
    manifest_config = first.manifest["config"]
    config = load_config_text(manifest_config["text"], Path(manifest_config["path"]))
    result = reprocess_snapshot(config)
    assert result.snapshot is not None
    return first, Snapshot.open(result.snapshot), flag


def test_compare_mode_shows_moved_boundaries_and_resolved_flag(qtbot, reprocessed) -> None:  # type: ignore[no-untyped-def]
    first, second, flag = reprocessed
    assert [f["status"] for f in second.manifest["applied_flags"]] == ["resolved"]
    assert parent_snapshot_path(_index(second)) == first.path
    window = CompareWindow(first.path, second.path, DOC)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert "snapshot 1" in window.left_label.text() and "snapshot 2 (reprocess)" in window.right_label.text()
    # The break inside the too-large chunk is a boundary only the right-hand snapshot has.
    assert window.moved_b, "the new boundary exists only in the reprocessed snapshot"
    assert window.left.moved == window.moved_a and window.right.moved == window.moved_b
    assert "boundaries only in snapshot 1" in window.summary.text()
    window.left.viewport().repaint()  # paints the highlighted boundaries without error
    # The resolved flag is listed; choosing it shows the snapshot it was made on beside the resolving one.
    texts = [window.decisions.item(i).text() for i in range(window.decisions.count())]
    assert any(
        f"resolved flag {flag}: too_large" in text and "resolved by snapshot 2" in text for text in texts
    )
    assert any(text.startswith("constraint ") and text.endswith("applied") for text in texts)
    window.show_pair(second.path, second.path)  # something else first: nothing moved
    assert window.moved_a == window.moved_b == []
    window.decisions.setCurrentRow(0)  # the resolved flag: its before and after
    assert window.index_a.snapshot_number == 1 and window.index_b.snapshot_number == 2
    assert window.moved_b


def test_compare_action_in_the_main_window(qtbot, reprocessed) -> None:  # type: ignore[no-untyped-def]
    from chunkyard.gui.controller import ReviewController
    from chunkyard.gui.main_window import MainWindow

    first, second, _ = reprocessed
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(second.path)
    index = window.controller.index
    window.controller.select_document(index.doc_number(DOC))
    window.compare_with_parent()
    compare = window.compare_window
    qtbot.addWidget(compare)
    assert (
        compare.index_a.snapshot_number == first.number and compare.index_b.snapshot_number == second.number
    )


def _index(snapshot: Snapshot):  # type: ignore[no-untyped-def]
    from chunkyard.chunking.review import ReviewIndex

    return ReviewIndex.load(snapshot.path)


def test_select_text_and_keep_it_together(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A reviewer selects a span that a boundary cuts, presses T; reprocessing keeps it in one chunk; undo retracts."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextCursor

    from chunkyard.chunking.decisions import active_constraints
    from chunkyard.gui.controller import ReviewController
    from chunkyard.gui.main_window import MainWindow

    first = Snapshot.open(build_dataset(tmp_path))
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(first.path)
    index = window.controller.index
    doc = index.doc_number(DOC)
    window.controller.select_document(doc)
    rows = index.doc_rows(doc)
    boundary = int(index.end[rows.start + 2])  # the end of chunk 2: select 60 characters on each side
    text = index.document_text(doc)
    start, end = boundary - 60, boundary + 60
    cursor = window.source_view.textCursor()
    cursor.setPosition(window.source_view.offsets.to_utf16(start))
    cursor.setPosition(window.source_view.offsets.to_utf16(end), QTextCursor.MoveMode.KeepAnchor)
    window.source_view.setTextCursor(cursor)
    qtbot.keyClick(window.chunks_view, Qt.Key.Key_T)
    [constraint] = active_constraints(window.controller.ledger.events("fixture-kb", 1))[DOC]
    assert constraint.kind == "keep_together" and constraint.origin == "explicit"
    assert (constraint.start, constraint.end) == (
        len(text[:start]) + (len(text[start:end]) - len(text[start:end].lstrip())),
        len(text[:end].rstrip()),
    )
    window.undo_action.trigger()
    assert active_constraints(window.controller.ledger.events("fixture-kb", 1)) == {}
    window.redo_action.trigger()
    assert active_constraints(window.controller.ledger.events("fixture-kb", 1))[DOC] == [constraint]
    window.controller.close()  # the reprocess appends to the same ledger

    manifest_config = first.manifest["config"]
    config = load_config_text(manifest_config["text"], Path(manifest_config["path"]))
    result = reprocess_snapshot(config)
    assert result.snapshot is not None and [c["status"] for c in result.manifest["constraints"]] == [
        "applied"
    ]
    spans = [
        (r["start"], r["end"])
        for r in Snapshot.open(result.snapshot).chunks(["doc_id", "start", "end"]).to_pylist()
        if r["doc_id"] == DOC
    ]
    assert any(a <= constraint.start and b >= constraint.end for a, b in spans)
    # What `chunkyard reprocess` prints about it (the flag lines never named a constraint set with T or H).
    from chunkyard.chunking.decisions import reviewer_constraint_lines

    placed = result.manifest["constraints"][0]["placed"]
    assert reviewer_constraint_lines(result.manifest) == [
        f"  constraint {constraint.id} (T, keep together, set in the reviewer) on {DOC} [{placed[0]}:{placed[1]}): "
        "applied"
    ]


def test_selecting_a_resolved_chunk_flag_scrolls_both_sides_to_the_chunk(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Only boundary flags have a position; selecting a resolved flag on a chunk deep in a document left
    both sides at the top, far from what was flagged and changed."""
    long_doc = "# Long\n\n" + "".join(
        f"Paragraph {i} has a few words about tents and stoves.\n\n" for i in range(600)
    )
    first = Snapshot.open(build_dataset(tmp_path, extra={"long/paragraphs.md": long_doc}))
    doc_id = "long/paragraphs.md"
    rows = [
        r
        for r in first.chunks(["doc_id", "chunk_id", "chunk_index", "start"]).to_pylist()
        if r["doc_id"] == doc_id
    ]
    deep = rows[len(rows) * 3 // 4]
    sha = first.documents(["doc_id", "sha256"], [doc_id]).to_pylist()[0]["sha256"]
    with Ledger(ledger_path(first.path)) as ledger:
        ledger.flag(
            Target("fixture-kb", 1, first.number, doc_id, sha, deep["chunk_id"], deep["chunk_index"]),
            "too_large",
            reviewer="tester",
        )
    manifest_config = first.manifest["config"]
    result = reprocess_snapshot(load_config_text(manifest_config["text"], Path(manifest_config["path"])))
    assert result.snapshot is not None
    window = CompareWindow(first.path, result.snapshot, doc_id)
    qtbot.addWidget(window)
    window.resize(1000, 600)
    window.show()
    qtbot.waitExposed(window)
    assert window.left.verticalScrollBar().value() == 0
    window.decisions.setCurrentRow(0)  # the resolved flag on chunk `deep`
    position = window.left.offsets.to_utf16(deep["start"])
    for side in (window.left, window.right):
        first_visible, last_visible = side._visible_range()
        assert first_visible <= position <= last_visible


def test_compare_paints_only_the_moved_boundaries_on_screen(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each paint of a compare side placed a red bar for every moved boundary of the document with Qt's
    cursorRect, which walks the line up to the position: after a flag early in a 1 MB one-line
    document moved all 2,631 boundaries, every paint took half a second (and grows with the square
    of the document). Only the bars of the lines on screen are placed now."""
    doc_id = "long/one-line.md"
    first = Snapshot.open(build_dataset(tmp_path, extra={doc_id: "word " * 60_000}))
    chunk = [
        r
        for r in first.chunks(["doc_id", "chunk_id", "chunk_index"]).to_pylist()
        if r["doc_id"] == doc_id and r["chunk_index"] == 0
    ][0]
    sha = first.documents(["doc_id", "sha256"], [doc_id]).to_pylist()[0]["sha256"]
    with Ledger(ledger_path(first.path)) as ledger:
        ledger.flag(
            Target("fixture-kb", 1, first.number, doc_id, sha, chunk["chunk_id"], 0),
            "too_large",
            reviewer="t",
        )
    manifest_config = first.manifest["config"]
    result = reprocess_snapshot(load_config_text(manifest_config["text"], Path(manifest_config["path"])))
    window = CompareWindow(first.path, result.snapshot, doc_id)
    qtbot.addWidget(window)
    window.resize(1000, 600)
    window.show()
    qtbot.waitExposed(window)
    assert len(window.moved_b) > 300
    view = window.right
    first_visible, last_visible = view._visible_range()
    on_screen = [p for p in view._moved_utf16 if first_visible <= p <= last_visible]
    assert on_screen
    placed: list[int] = []
    cursor_rect, position_rect = view.cursorRect, view._position_rect
    view.cursorRect = lambda *args: placed.append(-1) or cursor_rect(*args)  # type: ignore[method-assign]
    view._position_rect = lambda position: placed.append(position) or position_rect(position)  # type: ignore[method-assign]
    view.grab()
    assert -1 not in placed or len(placed) < 60
    assert all(first_visible <= p <= last_visible for p in placed)  # nothing is placed off screen
    assert set(on_screen) <= set(placed)


@pytest.mark.parametrize("how", ["escape", "ctrl+w", "quit here", "quit in the main window"])
def test_the_compare_window_closes_with_esc_ctrl_w_and_quit(qtbot, reprocessed, how: str) -> None:  # type: ignore[no-untyped-def]
    """It outlived Quit (the process kept running) and Esc and Ctrl+W did not close it."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from chunkyard.gui.controller import ReviewController
    from chunkyard.gui.main_window import MainWindow

    _first, second, _ = reprocessed
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(second.path)
    window.controller.select_document(window.controller.index.doc_number(DOC))
    window.compare_with_parent()
    compare = window.compare_window
    qtbot.addWidget(compare)
    qtbot.waitExposed(compare)
    compare.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is compare)
    if how == "escape":
        qtbot.keyClick(compare.left, Qt.Key.Key_Escape)
    elif how == "ctrl+w":
        qtbot.keyClick(compare.left, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    elif how == "quit here":
        qtbot.keyClick(compare.left, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
        assert not window.isVisible()
    else:
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
        qtbot.keyClick(window.chunks_view, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
        assert not window.isVisible()
    assert not compare.isVisible()
    if how.startswith("quit"):
        assert [w for w in QApplication.topLevelWidgets() if w.isVisible() and w in (window, compare)] == []


def test_the_question_box_in_compare_ranks_both_snapshots(qtbot, reprocessed) -> None:  # type: ignore[no-untyped-def]
    """One question, each snapshot's top k side by side: does the rechunk change which chunk answers?"""
    from PySide6.QtCore import Qt

    from chunkyard.chunking.review import QuestionBox

    first, second, _ = reprocessed
    window = CompareWindow(first.path, second.path, DOC)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    question = "what happens when the primary database fails"
    qtbot.keyClicks(window.question_a.question, question)
    qtbot.keyClick(window.question_a.question, Qt.Key.Key_Return)
    assert window.question_a.wait_answered() and window.question_b.wait_answered()
    for panel, index in ((window.question_a, window.index_a), (window.question_b, window.index_b)):
        expected = QuestionBox(index).ask(question, 5)
        assert {n: [a.row for a in r] for n, r in panel.answers.items()} == {
            n: [a.row for a in r] for n, r in expected.items()
        }
        assert panel.results.topLevelItemCount() == 12  # two headers, five answers each
    best = window.question_b.answers["bm25"][0]
    assert window.index_b.doc_ids[int(window.index_b.chunk_doc[best.row])] == DOC
    assert window.right.answers[best.row][0] == "1"
    window.question_b.results.setCurrentItem(window.question_b.results.topLevelItem(1))
    assert window.right.selected_row == best.row


def test_n_and_p_in_compare_go_to_the_next_changed_document(qtbot, reprocessed) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    from chunkyard.chunking.versions import diff_snapshots

    first, second, _ = reprocessed
    changed = [d.doc_id for d in diff_snapshots(first, second).documents if d.status != "unchanged"]
    assert changed == [DOC]  # only the flagged document was rechunked
    from PySide6.QtWidgets import QApplication

    window = CompareWindow(first.path, second.path, "handbook/returns-and-refunds.md")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window.left, Qt.Key.Key_N)
    assert window.doc_id == DOC and window.windowTitle() == f"Compare — {DOC}"
    assert window.moved_b  # its moved boundaries are shown
    qtbot.keyClick(window.left, Qt.Key.Key_N)
    assert window.doc_id == DOC and "no changed document after this one" in window.summary.text()
    assert not window.step_changed(-1)


def test_after_a_reprocess_the_recheck_queue_holds_the_chunks_rechunked_for_my_flags(
    qtbot, reprocessed
) -> None:  # type: ignore[no-untyped-def]
    from chunkyard.chunking.review import ReviewIndex
    from chunkyard.gui.controller import ReviewController
    from chunkyard.gui.main_window import MainWindow

    first, second, _ = reprocessed
    index = ReviewIndex.load(second.path)
    parent_ids = set(first.chunks(["chunk_id"]).column("chunk_id").to_pylist())
    expected = [
        row
        for row in range(index.n_chunks)
        if index.doc_ids[int(index.chunk_doc[row])] == DOC and index.chunk_id(row) not in parent_ids
    ]
    assert expected and index.set_recheck("tester") == len(expected)
    assert index.set_recheck("someone-else") == 0  # not their flags
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    window.show()
    window.controller.set_reviewer("tester")
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(second.path)
    window.queue_box.setCurrentIndex(window.queue_box.findData("Re-check"))
    controller = window.controller
    assert controller.row == expected[0]  # choosing the queue went to its first chunk
    assert window.queue_progress_label.text().startswith(f"Re-check: 0 of {len(expected)} decided")
    controller.mark_ok()
    assert controller.row == (expected[1] if len(expected) > 1 else controller.row)
