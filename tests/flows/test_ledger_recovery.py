"""Issue 9, point 4 (recovery): a corrupted review ledger is refused with a message naming the way
out, and its events go out to JSON Lines and back into a fresh ledger with the same state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chunkyard.chunking.ledger import Ledger, LedgerError, Target, export_events, import_events
from chunkyard.flows.cli import main

TARGET = Target("kb", 1, 1, "guides/a.md", "sha-a", "chunk-0", 0)
OTHER = Target("kb", 1, 1, "guides/a.md", "sha-a", "chunk-1", 1)


def _fill(path: Path, n: int = 300) -> None:
    with Ledger(path) as ledger:
        flag = ledger.flag(TARGET, "mid_sentence", reviewer="ann")
        ledger.retract(flag, reviewer="ann")
        ledger.flag(OTHER.at_boundary(120), "split_procedure", reviewer="bob", note="ünïcödé 🦆")
        for i in range(n):
            ledger.note(TARGET, "x" * 200 + str(i), reviewer="ann")


def test_round_trip_keeps_every_event_and_the_state(tmp_path: Path) -> None:
    source, copy, events = (
        tmp_path / "a" / "review.sqlite",
        tmp_path / "b" / "review.sqlite",
        tmp_path / "e.jsonl",
    )
    _fill(source, 5)
    assert export_events(source, events) == (8, 0)
    assert import_events(copy, events) == 8
    with Ledger(source) as a, Ledger(copy) as b:
        assert a.events() == b.events()
        assert a.state("kb", 1) == b.state("kb", 1)
        b.flag(TARGET, "other", reviewer="cy")  # the imported ledger is usable
    with pytest.raises(LedgerError, match="already holds events"):
        import_events(copy, events)


def test_corrupt_ledger_is_refused_and_its_events_recovered_by_the_cli(tmp_path: Path, capsys) -> None:
    dataset = tmp_path / "kb"
    dataset.mkdir()
    path = dataset / "review.sqlite"
    _fill(path)
    with Ledger(path) as ledger:
        expected = ledger.events()
    data = bytearray(path.read_bytes())
    data[4096:8192] = os.urandom(4096)  # scribble over a page after the header
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="corrupt|not a usable") as caught:
        Ledger(path)
    message = str(caught.value)
    assert "ledger export" in message or "not a usable" in message

    events = tmp_path / "events.jsonl"
    code = main(["ledger", "export", str(dataset), "--out", str(events)])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err, err
    recovered = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    assert recovered, "some events survive a damaged page"
    by_id = {e.id: e for e in expected}
    assert all(by_id[r["id"]].note == r["note"] for r in recovered), "what is recovered is what was written"
    if code == 1:
        assert "lost" in out

    path.rename(dataset / "review.sqlite.damaged")
    assert main(["ledger", "import", str(dataset), str(events)]) == 0
    with Ledger(path) as ledger:
        assert [e.id for e in ledger.events()] == [r["id"] for r in recovered]


@pytest.mark.parametrize(
    "line, problem",
    [
        ("not json", "not a ledger event"),
        ('{"id": 1}', "missing"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_import_rejects_a_bad_line_with_its_number(tmp_path: Path, line: str, problem: str) -> None:
    source = tmp_path / "review.sqlite"
    _fill(source, 1)
    events = tmp_path / "e.jsonl"
    export_events(source, events)
    text = events.read_text(encoding="utf-8").splitlines()
    text.insert(1, line)
    events.write_text("\n".join(text) + "\n", encoding="utf-8")
    with pytest.raises(LedgerError, match=rf"e\.jsonl:2: .*{problem}"):
        import_events(tmp_path / "new.sqlite", events)
    assert not (tmp_path / "new.sqlite").exists() or Ledger(tmp_path / "new.sqlite").last_event_id() == 0


def test_import_refuses_a_retract_of_a_missing_event(tmp_path: Path) -> None:
    source = tmp_path / "review.sqlite"
    _fill(source, 0)
    events = tmp_path / "e.jsonl"
    export_events(source, events)
    lines = events.read_text(encoding="utf-8").splitlines()
    events.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")  # drop event 1; event 2 retracts it
    with pytest.raises(LedgerError, match=r"e\.jsonl:1: .*retracts event 1"):
        import_events(tmp_path / "new.sqlite", events)


def test_export_never_writes_over_the_ledger_and_names_the_file_it_cannot_write(
    tmp_path: Path, capsys
) -> None:
    """`--out` naming the ledger itself replaced it with its JSON Lines (a broken ledger); a folder was
    reported as the hidden temporary file beside it, with "nothing was published"."""
    dataset = tmp_path / "kb"
    dataset.mkdir()
    path = dataset / "review.sqlite"
    _fill(path, 3)
    before = path.read_bytes()
    for out in (path, dataset / "." / "review.sqlite", Path(f"{path}-wal")):
        assert main(["ledger", "export", str(dataset), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the review ledger itself" in err, err
    assert path.read_bytes() == before
    with Ledger(path) as ledger:
        assert len(ledger.events()) == 6
    assert main(["ledger", "export", str(dataset), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"chunkyard: error: {tmp_path}: cannot write the events") and ".tmp" not in err, err
    assert "published" not in err


def test_import_into_a_dataset_folder_not_yet_there_creates_the_folder(tmp_path: Path, capsys) -> None:
    """Restoring the ledger before the first run: `ledger import OUTPUT/NAME` made a *file* OUTPUT/NAME,
    and the next `chunkyard run` failed with "not a directory" where the dataset folder belongs."""
    source, events = tmp_path / "old" / "review.sqlite", tmp_path / "events.jsonl"
    _fill(source, 2)
    assert export_events(source, events) == (5, 0)
    dataset = tmp_path / "out" / "kb"
    assert main(["ledger", "import", str(dataset), str(events)]) == 0
    assert dataset.is_dir() and (dataset / "review.sqlite").is_file()
    assert f"into {dataset / 'review.sqlite'}" in capsys.readouterr().out
    with Ledger(dataset / "review.sqlite") as ledger:
        assert len(ledger.events()) == 5
    named = tmp_path / "restored.sqlite"  # a file name still names the file
    assert main(["ledger", "import", str(named), str(events)]) == 0
    assert named.is_file()
