"""The reviewer in a real X window (Xvfb, xcb platform), driven by xdotool from the very first key, and the
pre-flight that replaces Qt's abort when a window cannot be opened."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from chunkyard.chunking.ledger import Ledger, ledger_path  # noqa: E402
from chunkyard.chunking.review import ReviewIndex  # noqa: E402
from chunkyard.gui.app import missing_libraries, package_of, preflight  # noqa: E402

from support.review_fixtures import REPO, build_dataset  # noqa: E402


def _free_display() -> int:
    for number in range(90, 200):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(f"/tmp/.X{number}-lock").exists():
            return number
    raise RuntimeError("no free X display number in :90-:199")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def xvfb() -> Iterator[str]:
    """A private Xvfb server on a free display, stopped at the end; skips when Xvfb or xdotool is missing."""
    for tool in ("Xvfb", "xdotool"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install xvfb xdotool; see .ci/run)")
    number = _free_display()
    server = subprocess.Popen(
        ["Xvfb", f":{number}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not Path(f"/tmp/.X11-unix/X{number}").exists():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Xvfb :{number} did not start")
            time.sleep(0.05)
        yield f":{number}"
    finally:
        _stop(server)


def _xdotool(display: str, *args: str, timeout: float = 60) -> str:
    result = subprocess.run(
        ["xdotool", *args],
        env={**os.environ, "DISPLAY": display},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"xdotool {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def _review_session(display: str, dataset: Path, home: Path, keys: list[str]) -> str:
    """Start `chunkyard review DATASET` in a window on ``display``, type ``keys`` from the first key the
    loaded window can take, quit with Ctrl+Q; the reviewer's standard error."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")
    }
    env.update(DISPLAY=display, QT_QPA_PLATFORM="xcb", XDG_CONFIG_HOME=str(home))
    reviewer = subprocess.Popen(
        [sys.executable, "-m", "chunkyard.flows.cli", "review", str(dataset)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The title names the snapshot once it is loaded: the keys go to a window that can take them.
        window = _xdotool(
            display, "search", "--sync", "--onlyvisible", "--name", "chunkyard review — fixture-kb"
        )
        _xdotool(display, "windowfocus", "--sync", window.splitlines()[0])
        # Real key events through XTEST to the focused window (not synthetic events sent to it).
        _xdotool(display, "key", "--delay", "150", *keys)
        _xdotool(display, "key", "ctrl+q")
        try:
            reviewer.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail("the reviewer did not quit on Ctrl+Q")
    finally:
        _stop(reviewer)
    stderr = reviewer.stderr.read() if reviewer.stderr else ""
    assert reviewer.returncode == 0, stderr
    return stderr


def _flagged_rows(index: ReviewIndex) -> list[tuple[int, str | None]]:
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        events = ledger.events()
    return [(index.row_of_chunk_id(event.chunk_id), event.reason) for event in events]


def test_the_first_keys_in_a_real_window_review(xvfb: str, tmp_path: Path) -> None:
    """Open the reviewer in an X window, and from the very first key: N, 2, Ctrl+Q. The flag is in the
    ledger (focus used to start in the filter box, which swallowed N and 2). Reopened, it resumes after
    that flag: 2 at once flags the next chunk to review (it used to start over at the first document)."""
    dataset = build_dataset(tmp_path)
    index = ReviewIndex.load(dataset)
    stderr = _review_session(xvfb, dataset, tmp_path / "config", ["n", "2"])
    # The window opened on the first suspicious chunk and N moved on to the next one: that one is flagged.
    first = index.next_suspicious(None)
    assert first is not None and index.chunk_doc[first] == 0
    second = index.next_suspicious(first)
    assert _flagged_rows(index) == [(second, "mid_sentence")], stderr
    stderr = _review_session(xvfb, dataset, tmp_path / "config", ["3"])
    assert _flagged_rows(index) == [
        (second, "mid_sentence"),
        (index.next_suspicious(second), "split_table"),
    ], stderr


def test_no_display_is_one_line_not_an_abort(tmp_path: Path) -> None:
    dataset = build_dataset(tmp_path)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    result = subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "review", str(dataset)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        "chunkyard: error: no display (DISPLAY is not set); use --screenshot PNG to render the reviewer without one"
    ]


def test_an_x_display_nobody_serves_is_named() -> None:
    assert preflight({"DISPLAY": ":197"}, plugin=Path("/nonexistent")) == (
        "no display: no X server answers on DISPLAY=:197; use --screenshot PNG to render without one"
    )
    assert preflight({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert preflight({"WAYLAND_DISPLAY": "wayland-0"}) is None


def test_missing_x_libraries_are_named_with_their_packages(tmp_path: Path) -> None:
    """A plugin that needs a library the loader cannot find (built here, then deleted), checked by ldd."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or shutil.which("ldd") is None:
        pytest.skip("needs a C compiler and ldd to build a library with a missing dependency")
    (tmp_path / "dep.c").write_text("int chunkyard_dep(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text(
        "int chunkyard_dep(void);\nint plugin(void) { return chunkyard_dep(); }\n"
    )
    dep = tmp_path / "libchunkyard-gone.so.3"
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-Wl,-soname,libchunkyard-gone.so.3",
            "-o",
            str(dep),
            str(tmp_path / "dep.c"),
        ],
        check=True,
    )
    plugin = tmp_path / "libqfake.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(plugin), str(tmp_path / "plugin.c"), str(dep)], check=True
    )
    dep.unlink()
    assert missing_libraries(plugin) == ["libchunkyard-gone.so.3"]
    line = preflight({"DISPLAY": ":0"}, plugin=plugin)
    assert line == (
        "Qt cannot open a window: missing system libraries libchunkyard-gone.so.3; install them "
        "(Debian/Ubuntu: apt-get install libchunkyard-gone3), or use --screenshot PNG"
    )
    assert package_of("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert package_of("libX11.so.6") == "libx11-6"
    assert package_of("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
