"""Issue 20, what leaves a run and what readers trust, without Prefect: the removal guard, the review
ledger's links and reviewer names, stale export temporaries, crafted snapshots."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkyard.chunking.errors import UsageError
from chunkyard.chunking.ledger import (
    LEDGER_FILE,
    Ledger,
    LedgerRefused,
    Target,
    check_reviewer,
    ledger_exists,
)
from chunkyard.chunking.pipeline import MassRemovalRefused, check_removals

TARGET = Target("kb", 1, 1, "a.md", "sha", "cid", 0)


# ---------------------------------------------------------------------------------------------
# The removal guard


@pytest.mark.parametrize("previous, removed, documents, share, refused", [
    (4, 3, 1, 0.5, True),      # 75 % > 50 %
    (4, 2, 2, 0.5, False),     # exactly the share is allowed
    (4, 4, 0, 1.0, True),      # no document at all: refused whatever the share
    (0, 0, 0, 0.5, True),      # a first run on an empty source
    (0, 0, 3, 0.5, False),     # a first run
    (10, 1, 9, 0.0, True),     # share 0: no removal without the flag
    (10, 0, 11, 0.0, False),
])
def test_check_removals(previous: int, removed: int, documents: int, share: float, refused: bool) -> None:
    if refused:
        with pytest.raises(MassRemovalRefused) as caught:
            check_removals(previous, removed, documents, share, where="out/kb/v1")
        message = str(caught.value)
        assert message.startswith("out/kb/v1: refused") and "--allow-mass-removal" in message
        assert "\n" not in message and isinstance(caught.value, UsageError)  # one line, exit 2
    else:
        check_removals(previous, removed, documents, share)
    check_removals(previous, removed, documents, share, allow=True)  # the override always publishes


# ---------------------------------------------------------------------------------------------
# The review ledger


def test_a_dangling_ledger_link_is_refused_and_its_target_never_created(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "made.sqlite"
    target.parent.mkdir()
    link = tmp_path / LEDGER_FILE
    link.symlink_to(target)
    with pytest.raises(LedgerRefused, match="symbolic link"):
        Ledger(link)
    with pytest.raises(LedgerRefused, match="symbolic link"):
        ledger_exists(link)
    assert not target.exists() and link.is_symlink()


def test_a_link_to_another_database_is_refused_and_that_database_untouched(tmp_path: Path) -> None:
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    before = other.read_bytes()
    link = tmp_path / LEDGER_FILE
    link.symlink_to(other)
    with pytest.raises(LedgerRefused, match="symbolic link"):
        Ledger(link)
    assert other.read_bytes() == before


def test_a_linked_wal_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_FILE
    Ledger(path).close()
    (tmp_path / f"{LEDGER_FILE}-wal").symlink_to(tmp_path / "stolen")
    with pytest.raises(LedgerRefused, match="-wal: the review ledger is a symbolic link"):
        Ledger(path)


def test_a_new_ledger_appears_complete_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "kb" / LEDGER_FILE
    with Ledger(path) as ledger:
        ledger.flag(TARGET, "other", reviewer="ann")
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == [], "no temporary left"
    with Ledger(path) as ledger:
        assert len(ledger.events()) == 1


def test_a_zero_byte_placeholder_is_replaced_but_a_ledger_with_a_journal_is_not(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_FILE
    path.write_bytes(b"")  # what a failed creation on a full disk used to leave
    assert not ledger_exists(path)
    with Ledger(path) as ledger:
        ledger.flag(TARGET, "other", reviewer="ann")
        assert ledger.last_event_id() == 1
    # A 0-byte main file whose WAL holds data is a real ledger: it is opened, never replaced.
    other = tmp_path / "b" / LEDGER_FILE
    other.parent.mkdir()
    Path(f"{other}-wal").write_bytes(b"x" * 32)
    other.write_bytes(b"")
    assert ledger_exists(other)


@pytest.mark.parametrize("name", ["ann\x1b[31m", "bel\x07", "cr\rx", "lf\nx", "nul\x00", "del\x7f", "ls\u2028x",
                                  " ", "", "x" * 201])
def test_reviewer_names_with_control_characters_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(LedgerRefused):
        check_reviewer(name)
    with Ledger(tmp_path / LEDGER_FILE) as ledger, pytest.raises(LedgerRefused):
        ledger.flag(TARGET, "other", reviewer=name)
    with Ledger(tmp_path / LEDGER_FILE) as ledger:
        assert ledger.events() == []


@pytest.mark.parametrize("name", ["ann", "Zoë Müller", "李雷", "o'brien (QA)", "👩‍💻 dev"])
def test_plain_reviewer_names_are_taken(name: str) -> None:
    check_reviewer(name)


# ---------------------------------------------------------------------------------------------
# Stale export temporaries


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_an_export_removes_its_own_stale_temporaries_only(tmp_path: Path) -> None:
    from chunkyard.chunking.export import STALE_TEMPORARY_SECONDS, write_atomically

    out = tmp_path / "export.jsonl"
    dead = tmp_path / f".export.jsonl.tmp-{_dead_pid()}-0123abcd"
    old_alive = tmp_path / f".export.jsonl.tmp-{os.getppid()}-89abcdef"
    fresh_alive = tmp_path / f".export.jsonl.tmp-{os.getppid()}-deadbeef"
    other_target = tmp_path / f".other.jsonl.tmp-{_dead_pid()}-0123abcd"
    unrelated = tmp_path / ".export.jsonl.tmp-notapid"
    for path in (dead, old_alive, fresh_alive, other_target, unrelated):
        path.write_bytes(b"partial")
    long_ago = time.time() - STALE_TEMPORARY_SECONDS - 60
    os.utime(old_alive, (long_ago, long_ago))
    write_atomically(out, lambda handle: handle.write(b"{}\n"))
    assert out.read_bytes() == b"{}\n"
    assert not dead.exists(), "a temporary of a process that is gone is removed"
    assert not old_alive.exists(), "one older than the threshold is removed (its PID was reused)"
    assert fresh_alive.exists(), "a live export's temporary is left alone"
    assert other_target.exists() and unrelated.exists(), "only this target's temporaries are touched"


def test_a_killed_export_leaves_a_temporary_the_next_one_removes(tmp_path: Path) -> None:
    """A real ``chunkyard export``-like writer killed mid-write, then an export of the same target."""
    from chunkyard.chunking.export import write_atomically

    out = tmp_path / "big.jsonl"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from chunkyard.chunking.export import write_atomically\n"
        "def slow(handle):\n"
        "    handle.write(b'x' * 100000); handle.flush(); print('writing', flush=True); time.sleep(60)\n"
        f"write_atomically(Path({str(out)!r}), slow)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        child.kill()
    finally:
        child.wait()
    left = list(tmp_path.glob(".big.jsonl.tmp-*"))
    assert len(left) == 1 and left[0].stat().st_size == 100000
    write_atomically(out, lambda handle: handle.write(b"done\n"))
    assert list(tmp_path.glob(".big.jsonl.tmp-*")) == []
