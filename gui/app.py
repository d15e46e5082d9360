"""Entry point of the reviewer: ``chunkyard review [PATH] [--doc DOC_ID] [--screenshot PNG]``.

With ``--screenshot`` the window opens the dataset, shows the first (or the given) document with its
chunk boundaries, saves a PNG of the window and exits — for documentation and for checking what
users see. Without a display it renders offscreen.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


# Debian/Ubuntu packages of the libraries Qt's xcb platform loads, where the package name does not follow
# from the library's soname by Debian's rule (``libfoo-bar.so.N`` -> ``libfoo-barN``, ``libfoo2.so.N`` -> ``libfoo2-N``).
_PACKAGE_OF = {
    "libglib-2.0.so.0": "libglib2.0-0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0",
    "libdbus-1.so.3": "libdbus-1-3",
}
# What the README lists for `chunkyard review` in a window (the same names the pre-flight prints).
XCB_PACKAGES = (
    "libxcb-cursor0",
    "libxcb-icccm4",
    "libxcb-keysyms1",
    "libxcb-image0",
    "libxcb-render-util0",
    "libxcb-xkb1",
    "libxkbcommon-x11-0",
)


def package_of(soname: str) -> str:
    """The Debian package that ships the shared library ``soname`` (``libxcb-cursor.so.0`` -> ``libxcb-cursor0``)."""
    if soname in _PACKAGE_OF:
        return _PACKAGE_OF[soname]
    match = re.fullmatch(r"(lib.+?)\.so\.(\d+)(?:\..*)?", soname)
    if not match:
        return soname
    name, major = match.group(1).lower(), match.group(2)
    return f"{name}-{major}" if name[-1].isdigit() else f"{name}{major}"


def missing_libraries(library: Path) -> list[str]:
    """Sonames ``library`` needs that the dynamic loader cannot find (``ldd``), in its order; [] when
    ``ldd`` is not there to ask (Qt then says it itself)."""
    ldd = shutil.which("ldd")
    if ldd is None or not library.exists():
        return []
    try:
        listing = subprocess.run([ldd, str(library)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    missing = []
    for line in listing.splitlines():
        name, _, found = line.strip().partition(" => ")
        if found.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def _xcb_plugin() -> Path:
    import PySide6

    return Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"


def _display_socket_missing(display: str) -> bool:
    """Whether a local X display (``:N``) has no server socket: Qt would abort "could not connect"."""
    match = re.fullmatch(r":(\d+)(?:\.\d+)?", display)
    return bool(match) and not Path(f"/tmp/.X11-unix/X{match.group(1)}").exists()


def preflight(environ: dict[str, str] | None = None, plugin: Path | None = None) -> str | None:
    """Why Qt could not open a window here, in one line, or None when it can.

    Qt's xcb platform aborts the process (SIGABRT, exit 134) before Python can catch anything when a
    library it loads is missing or there is no X display: checked first, so the reviewer can say which
    packages to install, or that there is no display (``--screenshot`` renders offscreen)."""
    environ = dict(os.environ) if environ is None else environ
    platform = environ.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    if platform and platform != "xcb":
        return None  # offscreen, wayland, vnc, ...: not the xcb platform
    display = environ.get("DISPLAY", "")
    if not platform and not display and environ.get("WAYLAND_DISPLAY"):
        return None  # Qt picks its Wayland platform
    if not display:
        return "no display (DISPLAY is not set); use --screenshot PNG to render the reviewer without one"
    if sys.platform.startswith("linux"):
        missing = missing_libraries(plugin or _xcb_plugin())
        if missing:
            packages = " ".join(dict.fromkeys(package_of(name) for name in missing))
            return (
                f"Qt cannot open a window: missing system libraries {', '.join(missing)}; "
                f"install them (Debian/Ubuntu: apt-get install {packages}), or use --screenshot PNG"
            )
    if _display_socket_missing(display):
        return f"no display: no X server answers on DISPLAY={display}; use --screenshot PNG to render without one"
    return None


def run_review(
    path: str | Path | None,
    *,
    screenshot: Path | None = None,
    doc: str | None = None,
    started: float | None = None,
) -> int:
    """Show the reviewer (or render one screenshot) and return the process exit code."""
    started = time.perf_counter() if started is None else started
    if screenshot is not None and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if QApplication.instance() is None:
        problem = preflight()
        if problem is not None and screenshot is not None:
            os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a screenshot needs no window: render it offscreen
        elif problem is not None:
            print(f"chunkyard: error: {problem}", file=sys.stderr)
            return 1
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        _quiet_offscreen_platform()
    app = application()
    controller = ReviewController()
    window = MainWindow(controller)
    outcome = {"code": 0, "message": ""}
    usage = {
        "refused": False
    }  # the path or --doc given names nothing to show: exit 2, as for other bad usage

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
            # Resume after the reviewer's latest decision (the first chunk to review on a fresh ledger).
            row = controller.start_row()
            if row is not None:
                controller.select_row(row)
                return True
            number = 0
        else:
            return True
        rows = index.doc_rows(number)
        suspicious = index.next_suspicious(rows.start - 1 if rows.start else None, 1)
        controller.select_document(
            number, suspicious if suspicious is not None and suspicious in rows else None
        )
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
        if path is None and controller.index is None and not outcome["message"]:
            # The user typed no path: say that the current folder was tried, not only a folder found in it.
            message = (
                f"no PATH given, and the current folder ({Path.cwd()}) is not a dataset to open: {message}"
            )
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
