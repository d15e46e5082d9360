"""The review ledger: state derived from append-only events, undo as events, durability, concurrency."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chunkyard.chunking.errors import ChunkyardError
from chunkyard.chunking.ledger import (
    REASONS,
    Ledger,
    LedgerError,
    Target,
    active_events,
    derive_state,
    ledger_path,
)

TARGET = Target("kb", 1, 1, "guides/a.md", "sha-a", "chunk-0", 0)
OTHER = Target("kb", 1, 1, "guides/a.md", "sha-a", "chunk-1", 1)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    with Ledger(tmp_path / "review.sqlite") as opened:
        yield opened


def test_path_is_beside_the_version_folders(tmp_path: Path) -> None:
    assert ledger_path(tmp_path / "kb" / "v2" / "0003") == tmp_path / "kb" / "review.sqlite"


def test_wal_mode_full_sync_and_schema_version(ledger: Ledger) -> None:
    connection = sqlite3.connect(ledger.path)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("SELECT version FROM schema_version").fetchone()[0] == 1
    assert ledger._connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_state_is_derived_from_events(ledger: Ledger) -> None:
    ledger.flag(TARGET, "mid_sentence", reviewer="ann")
    ledger.flag(TARGET, "split_table", reviewer="ann")
    ledger.flag(OTHER.at_boundary(120), "split_procedure", reviewer="bob", note="steps 3 and 4 apart")
    ledger.note(TARGET, "look again", reviewer="ann")
    state = ledger.state("kb", 1)
    assert state["chunk-0"].verdict == "flagged"
    assert state["chunk-0"].reasons == ["mid_sentence", "split_table"]
    assert state["chunk-0"].note == "look again"
    assert state["chunk-1"].boundary_reasons == ["split_procedure"] and state["chunk-1"].reasons == []
    ledger.unflag(TARGET, reviewer="ann", reason="mid_sentence")
    assert ledger.state("kb", 1)["chunk-0"].reasons == ["split_table"]
    ledger.unflag(TARGET, reviewer="ann")
    assert ledger.state("kb", 1)["chunk-0"].verdict is None
    ledger.mark_ok(OTHER, reviewer="bob")
    other = ledger.state("kb", 1)["chunk-1"]
    assert other.verdict == "ok" and not other.boundary_reasons and other.reviewer == "bob"


def test_events_of_a_changed_document_are_ignored(ledger: Ledger) -> None:
    ledger.flag(TARGET, "other", reviewer="ann")
    assert "chunk-0" in ledger.state("kb", 1, {"guides/a.md": "sha-a"})
    assert "chunk-0" not in ledger.state("kb", 1, {"guides/a.md": "sha-b"})
    assert ledger.state("kb", 2) == {}


def test_undo_and_redo_are_events(ledger: Ledger) -> None:
    flag = ledger.flag(TARGET, "too_small", reviewer="ann")
    undo = ledger.retract(flag, reviewer="ann")
    assert "chunk-0" not in ledger.state("kb", 1)
    redo = ledger.retract(undo, reviewer="ann")
    assert ledger.state("kb", 1)["chunk-0"].reasons == ["too_small"]
    ledger.retract(flag, reviewer="ann")  # undo again
    assert "chunk-0" not in ledger.state("kb", 1)
    kinds = [event.kind for event in ledger.events()]
    assert kinds == ["flag", "retract", "retract", "retract"]  # nothing was deleted or updated
    assert [e.id for e in active_events(ledger.events())] == []
    assert redo > undo > flag


def test_undo_of_mark_ok_restores_the_earlier_flag(ledger: Ledger) -> None:
    ledger.flag(TARGET, "split_code", reviewer="ann")
    ok = ledger.mark_ok(TARGET, reviewer="ann")
    assert ledger.state("kb", 1)["chunk-0"].verdict == "ok"
    ledger.retract(ok, reviewer="ann")
    assert ledger.state("kb", 1)["chunk-0"].reasons == ["split_code"]


def test_rejects_unknown_reasons_and_empty_reviewers(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="unknown flag reason"):
        ledger.flag(TARGET, "ugly", reviewer="ann")
    with pytest.raises(LedgerError, match="reviewer"):
        ledger.flag(TARGET, REASONS[0], reviewer=" ")
    with pytest.raises(LedgerError, match="no event"):
        ledger.retract(999, reviewer="ann")
    ledger.constraint(TARGET.at_boundary(10), "break_here", reviewer="ann")
    assert derive_state(ledger.events())["chunk-0"].constraints == [("break_here", 10)]


def test_a_file_that_is_not_a_ledger_is_refused_clearly(tmp_path: Path) -> None:
    garbage = tmp_path / "review.sqlite"
    garbage.write_bytes(b"PAR1 this is not sqlite at all" * 100)
    with pytest.raises(ChunkyardError, match="not a review ledger"):
        Ledger(garbage)
    foreign = tmp_path / "foreign.sqlite"
    connection = sqlite3.connect(foreign)
    connection.execute("CREATE TABLE cats (name TEXT)")
    connection.commit()
    connection.close()
    with pytest.raises(LedgerError, match="not a chunkyard review ledger"):
        Ledger(foreign)


def test_a_corrupted_ledger_is_detected_at_open(tmp_path: Path) -> None:
    path = tmp_path / "review.sqlite"
    with Ledger(path) as ledger:
        for n in range(300):
            ledger.flag(TARGET, "other", reviewer="ann", note="x" * 200 + str(n))
    data = bytearray(path.read_bytes())
    assert len(data) > 8192
    data[4096:8192] = os.urandom(4096)  # scribble over a page after the header
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="corrupt|not a usable|cannot"):
        Ledger(path)


def test_a_ledger_from_a_newer_chunkyard_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "review.sqlite"
    Ledger(path).close()
    connection = sqlite3.connect(path)
    connection.execute("INSERT INTO schema_version VALUES (99, 'later')")
    connection.commit()
    connection.close()
    with pytest.raises(LedgerError, match="newer chunkyard"):
        Ledger(path)


_WRITER = textwrap.dedent(
    """
    import sys
    from chunkyard.chunking.ledger import Ledger, Target
    path, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ledger = Ledger(path)
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for n in range(count):
        ledger.flag(Target("kb", 1, 1, "a.md", "sha", f"{who}-{n}", n), "other", reviewer=who)
    print("done", flush=True)
    if count == 1:
        import time
        time.sleep(60)  # the parent kills us here, right after the flag was recorded
    """
)


def _writer(path: Path, who: str, count: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), who, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def test_a_flag_survives_sigkill_right_after_it_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "review.sqlite"
    process = _writer(path, "ann", 1)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "done"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    with Ledger(path) as ledger:
        assert ledger.state("kb", 1)["ann-0"].reasons == ["other"]


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "review.sqlite"
    Ledger(path).close()
    writers = [_writer(path, who, 1000) for who in ("ann", "bob")]
    for process in writers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in writers:
        process.stdin.close()
        assert process.wait(timeout=120) == 0
    with Ledger(path) as ledger:
        events = ledger.events("kb", 1)
    assert len(events) == 2000
    assert {e.chunk_id for e in events} == {f"{who}-{n}" for who in ("ann", "bob") for n in range(1000)}


def test_write_problem_names_a_ledger_that_cannot_be_written(tmp_path: Path) -> None:
    """SQLite opens a file it may not write read-only without a word; the probe says so up front."""
    import shutil

    path = tmp_path / "review.sqlite"
    with Ledger(path) as ledger:
        assert ledger.write_problem() is None
        assert ledger.events() == []  # the probe wrote nothing
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another program writing: busy, not read-only, and not waited for
        started = time.monotonic()
        assert ledger.write_problem() is None
        assert time.monotonic() - started < 1.0
        holder.execute("ROLLBACK")
        holder.close()
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here")
    try:
        with Ledger(path) as ledger:
            problem = ledger.write_problem()
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert problem is not None and problem.startswith(f"{path}: the review ledger is read-only")
