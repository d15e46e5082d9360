"""Issue 20: damage in a column the reviewer does not read (4 KB zeroed inside chunks.parquet's
``text``) is reported as soon as the dataset is open, not after approval; first paint does not wait."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

import pyarrow.parquet as pq  # noqa: E402

from chunkyard.gui.controller import ReviewController  # noqa: E402
from chunkyard.gui.main_window import MainWindow  # noqa: E402

from support.parts import only_part  # noqa: E402
from support.review_fixtures import build_dataset  # noqa: E402


def _zero_inside_text_column(path: Path, size: int = 4096) -> None:
    metadata = pq.ParquetFile(path).metadata
    column = metadata.row_group(0).column(metadata.schema.names.index("text"))
    start = column.dictionary_page_offset or column.data_page_offset
    size = min(size, column.total_compressed_size // 2)
    with open(path, "r+b") as handle:
        handle.seek(start + (column.total_compressed_size - size) // 2)
        handle.write(b"\0" * size)


@pytest.mark.parametrize("damaged", [True, False])
def test_damage_in_the_text_column_is_reported_when_the_dataset_opens(qtbot, tmp_path: Path, damaged: bool):  # type: ignore[no-untyped-def]
    dataset = build_dataset(tmp_path / "built")
    copy = tmp_path / "fixture-kb"
    shutil.copytree(dataset, copy)
    chunks = only_part(next(copy.glob("v1/0*")), "chunks.parquet")
    if damaged:
        chunks.chmod(0o644)
        _zero_inside_text_column(chunks)
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    failures: list[str] = []
    window.controller.failed.connect(failures.append)
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(copy)
    assert window.controller.index is not None  # shown first: the check runs after the first paint
    assert window.controller.wait_verified(20000)
    qtbot.wait(50)  # the queued signal from the verifier's thread
    if damaged:
        assert (
            failures
            and "chunks.parquet/part-00000001.parquet: damaged" in failures[0]
            and "Do not approve" in failures[0]
        )
        assert "chunks.parquet/part-00000001.parquet: damaged" in window.last_error
    else:
        assert failures == []


def test_closing_stops_the_background_check_at_once(qtbot, tmp_path: Path, monkeypatch):  # type: ignore[no-untyped-def]
    """Closing (or opening another dataset) while the check runs does not wait for it to finish."""
    import threading
    import time

    from chunkyard.chunking.dataset import Snapshot

    started = threading.Event()
    stopped: list[bool] = []

    def slow_verify(self, should_stop=None):  # type: ignore[no-untyped-def]
        started.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if should_stop is not None and should_stop():
                stopped.append(True)
                from chunkyard.chunking.dataset import Stopped

                raise Stopped
            time.sleep(0.01)

    monkeypatch.setattr(Snapshot, "verify", slow_verify)
    dataset = build_dataset(tmp_path / "built")
    window = MainWindow(ReviewController())
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.controller.loaded, timeout=20000):
        window.open_dataset(dataset)
    assert started.wait(10)
    began = time.monotonic()
    window.controller.close()
    assert time.monotonic() - began < 5 and stopped == [True]
