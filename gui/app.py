"""Entry point of the reviewer: ``chunkyard review [PATH] [--doc DOC_ID] [--screenshot PNG]``.

With ``--screenshot`` the window opens the dataset, shows the first (or the given) document with its
chunk boundaries, saves a PNG of the window and exits — for documentation and for checking what
users see. Without a display it renders offscreen.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from chunkyard.gui.controller import ReviewController
from chunkyard.gui.main_window import MainWindow


def application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if app is None:
        app = QApplication(argv or ["chunkyard review"])
    app.setOrganizationName("chunkyard")
    app.setApplicationName("reviewer")
    return app  # type: ignore[return-value]


def _quiet_offscreen_platform() -> None:
    """Drop the offscreen platform's "does not support propagateSizeHints()" notice (printed twice on
    every screenshot; nothing is wrong), and pass every other Qt message on to standard error."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_mode: object, _context: object, message: str) -> None:
        if "does not support propagateSizeHints" not in message:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


def run_review(path: str | Path | None, *, screenshot: Path | None = None, doc: str | None = None,
               started: float | None = None) -> int:
    """Show the reviewer (or render one screenshot) and return the process exit code."""
    started = time.perf_counter() if started is None else started
    if screenshot is not None and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        _quiet_offscreen_platform()
    app = application()
    controller = ReviewController()
    window = MainWindow(controller)
    outcome = {"code": 0, "message": ""}
    usage = {"refused": False}  # the path or --doc given names nothing to show: exit 2, as for other bad usage

    def show_requested_document() -> bool:
        index = controller.index
        if index is None:
            return False
        if doc is not None:
            number = index.doc_number(doc)
            if number is None:
                outcome["message"] = f"{index.snapshot.path}: no document {doc!r} in this snapshot"
                usage["refused"] = True
                return False
        elif index.n_documents:
            number = 0
        else:
            return True
        rows = index.doc_rows(number)
        suspicious = index.next_suspicious(rows.start - 1 if rows.start else None, 1)
        controller.select_document(number, suspicious if suspicious is not None and suspicious in rows else None)
        return True

    if screenshot is None:
        controller.loaded.connect(show_requested_document)
        window.show()
        if path is not None:
            window.open_dataset(path)
        return app.exec()

    def fail(message: str) -> None:
        # The first message wins (a --doc that names no document sets it before calling here).
        code = 2 if usage["refused"] or (controller.index is None and controller.load_refused) else 1
        outcome["code"], outcome["message"] = code, outcome["message"] or message
        app.exit(code)

    def capture() -> None:
        app.processEvents()
        pixmap = window.grab()
        painted = time.perf_counter() - started
        if not pixmap.save(str(screenshot), "PNG"):
            fail(f"{screenshot}: cannot write the PNG")
            return
        if os.environ.get("CHUNKYARD_TIMING"):
            print(f"timing: loaded {loaded_at['t']:.3f} s, first paint {painted:.3f} s", file=sys.stderr)
        app.exit(0)

    loaded_at = {"t": 0.0}

    def on_loaded() -> None:
        loaded_at["t"] = time.perf_counter() - started
        if not show_requested_document():
            fail(outcome["message"] or "nothing to show")
            return
        QTimer.singleShot(0, capture)

    controller.failed.connect(lambda message: fail(message) if controller.index is None else None)
    controller.loaded.connect(on_loaded)
    window.resize(1600, 940)
    window.show()
    window.open_dataset(path if path is not None else ".")
    code = app.exec()
    if code and outcome["message"]:
        print(f"chunkyard: error: {outcome['message']}", file=sys.stderr)
    window.close()
    return code or outcome["code"]
