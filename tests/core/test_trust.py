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


@pytest.mark.parametrize(
    "previous, removed, documents, share, refused",
    [
        (4, 3, 1, 0.5, True),  # 75 % > 50 %
        (4, 2, 2, 0.5, False),  # exactly the share is allowed
        (4, 4, 0, 1.0, True),  # no document at all: refused whatever the share
        (0, 0, 0, 0.5, True),  # a first run on an empty source
        (0, 0, 3, 0.5, False),  # a first run
        (10, 1, 9, 0.0, True),  # share 0: no removal without the flag
        (10, 0, 11, 0.0, False),
    ],
)
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


@pytest.mark.parametrize(
    "name",
    ["ann\x1b[31m", "bel\x07", "cr\rx", "lf\nx", "nul\x00", "del\x7f", "ls\u2028x", " ", "", "x" * 201],
)
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


# ---------------------------------------------------------------------------------------------
# Crafted and damaged snapshots: one loader (Snapshot.verify) for every reader


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.review_fixtures import build_dataset

    return build_dataset(tmp_path_factory.mktemp("trust"))


@pytest.fixture
def crafted(pristine: Path, tmp_path: Path) -> Path:
    """A writable copy of the pristine snapshot, without the manifest's checksums (as a crafted manifest,
    or one written before they were recorded, would be): the content checks must stand alone."""
    import json
    import shutil

    from chunkyard.chunking.dataset import MANIFEST, Snapshot

    copy = tmp_path / "kb" / "v1" / "0001"
    shutil.copytree(Snapshot.open(pristine).path, copy)
    for child in copy.rglob("*"):
        child.chmod(0o755 if child.is_dir() else 0o644)
    manifest = json.loads((copy / MANIFEST).read_text(encoding="utf-8"))
    assert [set(part) for part in manifest["parts"]] == [{"key", "documents", "chunks"}]
    (copy / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return copy


def _rewrite(snapshot: Path, name: str, change) -> None:
    """Craft the (one) part file of ``name`` and record its new checksum, as a crafted snapshot's
    author would: the content checks must stand alone."""
    import pyarrow.parquet as pq

    from support.parts import only_part, reseal

    path = only_part(snapshot, name)
    pq.write_table(change(pq.read_table(path)), path)
    reseal(snapshot)


def _set(table, name: str, values, kind=None):
    import pyarrow as pa

    array = pa.array(values, kind) if kind is not None else pa.array(values)
    return table.set_column(table.schema.get_field_index(name), name, array)


def _crafts():
    import pyarrow as pa

    def first_text_is(value_of):
        return lambda t: _set(
            t, "text", [value_of(i, v) for i, v in enumerate(t.column("text").to_pylist())], pa.large_string()
        )

    return {
        "text column of integers": (
            "chunks",
            lambda t: _set(t, "text", list(range(t.num_rows))),
            "column text: expected string, found int64",
        ),
        "a null text": (
            "chunks",
            first_text_is(lambda i, v: None if i == 2 else v),
            "column text, row 2: null",
        ),
        "one chunk_id for every chunk": (
            "chunks",
            lambda t: _set(t, "chunk_id", ["same"] * t.num_rows),
            "column chunk_id, row 1: 'same' is not unique",
        ),
        "a doc_id leaving the source": (
            "both",
            lambda t: _set(
                t,
                "doc_id",
                ["../../ghost" if d == "notes/emoji.md" else d for d in t.column("doc_id").to_pylist()],
            ),
            "'../../ghost' has an empty, '.' or '..' segment",
        ),
        "an absolute doc_id": (
            "both",
            lambda t: _set(
                t,
                "doc_id",
                ["/etc/passwd" if d == "notes/emoji.md" else d for d in t.column("doc_id").to_pylist()],
            ),
            "'/etc/passwd' is an absolute path",
        ),
        "a chunk of a document not listed": (
            "chunks",
            lambda t: _set(t, "doc_id", ["ghost.md"] + t.column("doc_id").to_pylist()[1:]),
            "column doc_id, row 0: 'ghost.md' is not a document of this snapshot",
        ),
        "text that is not the document's": (
            "chunks",
            first_text_is(lambda i, v: "APPROVED " + v[9:] if i == 3 else v),
            "column text, row 3 (chunk",
        ),
        "offsets past the document": (
            "chunks",
            lambda t: _set(
                t, "end", [e + 10**6 if i == 0 else e for i, e in enumerate(t.column("end").to_pylist())]
            ),
            "columns start/end, row 0",
        ),
        "n_chars that is not the text's length": (
            "documents",
            lambda t: _set(t, "n_chars", [n + 5 for n in t.column("n_chars").to_pylist()]),
            "column n_chars, row 0",
        ),
    }


@pytest.mark.parametrize("craft", list(_crafts()))
def test_a_crafted_snapshot_is_refused_by_every_reader(crafted: Path, tmp_path: Path, craft: str) -> None:
    from chunkyard.chunking.dataset import CHUNKS, DOCUMENTS, Snapshot
    from chunkyard.chunking.errors import DatasetError
    from chunkyard.chunking.export import export
    from chunkyard.chunking.versions import diff_snapshots

    which, change, expected = _crafts()[craft]
    for name in [CHUNKS, DOCUMENTS] if which == "both" else [CHUNKS if which == "chunks" else DOCUMENTS]:
        _rewrite(crafted, name, change)
    readers = {
        "open(validate=True)": lambda: Snapshot.open(crafted, validate=True),
        "export": lambda: export(crafted, tmp_path / "e.jsonl", "jsonl"),
        "export --since": lambda: export(crafted.parent.parent, tmp_path / "e.jsonl", "jsonl", since=crafted),
        "diff": lambda: diff_snapshots(Snapshot.open(crafted), Snapshot.open(crafted)),
        "verify (the reviewer's background check)": lambda: Snapshot.open(crafted).verify(),
    }
    for reader, call in readers.items():
        with pytest.raises(DatasetError) as caught:
            call()
        message = str(caught.value)
        assert expected in message and "\n" not in message, f"{reader}: {message}"
        assert message.startswith(str(crafted)), f"{reader} names the file: {message}"
    assert not (tmp_path / "e.jsonl").exists()


@pytest.mark.parametrize(
    "craft", ["a doc_id leaving the source", "a chunk of a document not listed", "text column of integers"]
)
def test_the_reviewer_refuses_at_open_what_it_reads(crafted: Path, craft: str) -> None:
    from chunkyard.chunking.dataset import CHUNKS, DOCUMENTS
    from chunkyard.chunking.errors import DatasetError
    from chunkyard.chunking.review import ReviewIndex

    which, change, _ = _crafts()[craft]
    for name in [CHUNKS, DOCUMENTS] if which == "both" else [CHUNKS if which == "chunks" else DOCUMENTS]:
        _rewrite(crafted, name, change)
    index = None
    with pytest.raises(DatasetError):
        index = ReviewIndex.load(crafted)
        for doc in range(index.n_documents):  # the text column is read per document, on demand
            index.document_text(doc)
            index.chunk_details(doc)


def _zero_inside_text_column(path: Path, size: int = 4096) -> int:
    """Zero ``size`` bytes in the middle of the ``text`` column chunk of ``path``; returns the offset."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(path).metadata
    column = metadata.row_group(0).column(metadata.schema.names.index("text"))
    start = column.dictionary_page_offset or column.data_page_offset
    length = column.total_compressed_size
    size = min(size, length // 2)
    offset = start + (length - size) // 2
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(b"\0" * size)
    return offset


def test_damage_in_a_column_the_reviewer_does_not_read_is_found_by_verify(
    pristine: Path, tmp_path: Path
) -> None:
    import shutil

    from chunkyard.chunking.dataset import CHUNKS, Snapshot
    from chunkyard.chunking.errors import DatasetError
    from chunkyard.chunking.review import ReviewIndex

    from support.parts import only_part

    copy = tmp_path / "kb" / "v1" / "0001"
    shutil.copytree(Snapshot.open(pristine).path, copy)
    only_part(copy, CHUNKS).chmod(0o644)
    _zero_inside_text_column(only_part(copy, CHUNKS))
    index = ReviewIndex.load(copy)  # ids, offsets, findings only: opens as if nothing were wrong
    assert index.n_chunks > 0
    with pytest.raises(
        DatasetError, match=r"chunks\.parquet/part-\d+\.parquet: damaged: its content differs"
    ):
        index.snapshot.verify()
    with pytest.raises(DatasetError):
        Snapshot.open(copy, validate=True)


def test_a_pristine_snapshot_passes_every_check(pristine: Path, tmp_path: Path) -> None:
    from chunkyard.chunking.dataset import Snapshot
    from chunkyard.chunking.export import export

    snapshot = Snapshot.open(pristine, validate=True)
    for part in snapshot.parts:
        for kind in ("documents", "chunks"):
            assert part[kind]["bytes"] == snapshot.resolve(part[kind]["file"]).stat().st_size
    assert export(pristine, tmp_path / "e.jsonl", "jsonl")["rows"] > 0


@pytest.mark.parametrize(
    "doc_id, safe",
    [
        ("a.md", True),
        ("docs/guide v2/ünïcode 😀.md", True),
        ("line\nbreak.md", True),
        ("..hidden..md", True),
        ("C:notes.md", True),
        ("trailing\\", True),
        ("a\\b.md", True),
        ("...md", True),
        ("../x", False),
        ("a/../../x", False),
        ("/etc/passwd", False),
        ("a//b", False),
        ("./a", False),
        ("C:/x", False),
        ("C:\\x", False),
        ("\\\\server\\share", False),
        ("\\x", False),
        ("a\\..\\b", False),
        ("", False),
        ("nul\x00", False),
    ],
)
def test_safe_doc_id(doc_id: str, safe: bool) -> None:
    from chunkyard.chunking.dataset import safe_doc_id

    assert (safe_doc_id(doc_id) is None) == safe
