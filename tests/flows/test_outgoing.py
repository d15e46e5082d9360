"""Issue 20, what leaves a run: an emptied source never deletes the corpus downstream, a full disk
leaves no staging folder and no broken ledger behind.

The full-disk tests use a real 1 MB tmpfs as the output folder (``mount -t tmpfs``, which needs root
and a kernel that lets this process mount); where mounting is not allowed they are skipped with
the reason.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkyard.chunking.dataset import Snapshot, list_snapshots
from chunkyard.chunking.ledger import LEDGER_FILE, Ledger
from chunkyard.flows.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE

from support.cli import run_cli, write_config


def _source(tmp_path: Path, count: int) -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    for number in range(count):
        (source / f"doc{number:02d}.md").write_text(
            f"# Doc {number}\n\nSome text of document {number}.\n", encoding="utf-8"
        )
    return source


def _last_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_an_emptied_source_publishes_nothing_and_exits_2(prefect_server, tmp_path, capsys):
    source = _source(tmp_path, 4)
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == EXIT_OK
    version_path = output / "kb" / "v1"
    for path in source.iterdir():  # an unmounted share, a failed sync
        path.unlink()
    capsys.readouterr()
    assert run_cli("run", str(config)) == EXIT_USAGE
    line = _last_line(capsys)
    assert "refused" in line and "no document" in line and "--allow-mass-removal" in line, line
    assert list_snapshots(version_path) == [1], "nothing was published"
    assert not list(version_path.glob(".staging-*")), "the refused run removed its staging folder"

    assert run_cli("run", str(config), "--allow-mass-removal") == EXIT_OK
    assert list_snapshots(version_path) == [1, 2]
    assert Snapshot.open(version_path).manifest["counts"]["removed"] == 4


def test_removing_more_than_the_share_is_refused_and_at_most_the_share_is_not(
    prefect_server, tmp_path, capsys
):
    source = _source(tmp_path, 4)
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == EXIT_OK
    version_path = output / "kb" / "v1"
    for name in ("doc00.md", "doc01.md", "doc02.md"):
        (source / name).unlink()
    capsys.readouterr()
    assert run_cli("run", str(config)) == EXIT_USAGE  # 3 of 4 = 75 % > 50 %
    line = _last_line(capsys)
    assert "remove 3 of the previous snapshot's 4 documents (75%" in line and "max_removed_share" in line, (
        line
    )
    assert list_snapshots(version_path) == [1]

    # The share is a setting: with 0.8 the same run publishes.
    relaxed = (
        write_config(tmp_path, source, output)
        .read_text(encoding="utf-8")
        .replace(f"output: {{path: {output}}}", f"output: {{path: {output}, max_removed_share: 0.8}}")
    )
    config.write_text(relaxed, encoding="utf-8")
    assert run_cli("run", str(config)) == EXIT_OK
    assert list_snapshots(version_path) == [1, 2]


def test_a_first_run_on_an_empty_source_is_refused(prefect_server, tmp_path, capsys):
    source = tmp_path / "src"
    source.mkdir()
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == EXIT_USAGE
    line = _last_line(capsys)
    assert "no document" in line and "first snapshot" in line, line
    assert list_snapshots(output / "kb" / "v1") == []


# ---------------------------------------------------------------------------------------------
# A really full disk


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs, unmounted at the end; skipped where this process may not mount."""
    folder = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path, leave: int = 0) -> None:
    """Fill the filesystem of ``folder`` up to ``leave`` bytes free."""
    block = b"\0" * 4096
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, block)
    except OSError:
        pass
    finally:
        os.close(fd)
    if leave:
        size = (folder / "filler").stat().st_size
        os.truncate(folder / "filler", max(0, size - leave))


def test_a_run_on_a_full_disk_removes_its_staging_folder_and_names_the_path(
    prefect_server, tmp_path, tiny_disk, capsys
):
    source = tmp_path / "src"
    source.mkdir()
    # Incompressible text, larger than the disk: the writers fail, and closing them fails again.
    for number in range(8):
        (source / f"big{number}.md").write_text(
            "# Big\n\n" + " ".join(uuid.uuid4().hex for _ in range(20_000)) + "\n", encoding="utf-8"
        )
    config = write_config(tmp_path, source, tiny_disk, extra="")
    capsys.readouterr()
    assert run_cli("run", str(config)) == EXIT_FAILED
    line = _last_line(capsys)
    assert "no space left on device" in line and str(tiny_disk) in line and "nothing was published" in line, (
        line
    )
    version_path = tiny_disk / "kb" / "v1"
    assert list_snapshots(version_path) == []
    leftovers = [p.name for p in version_path.iterdir() if p.name.startswith(".staging-")]
    assert leftovers == [], f"staging left on the full disk: {leftovers}"


def test_a_flag_on_a_full_disk_leaves_no_ledger_that_blocks_later_runs(
    prefect_server, tmp_path, tiny_disk, capsys
):
    from support.review_fixtures import build_dataset

    built = Snapshot.open(build_dataset(tmp_path / "built"))
    # The dataset on the small disk, then the disk filled to the last few bytes.
    target = tiny_disk / "kb" / "v1" / "0001"
    target.mkdir(parents=True)
    for child in built.path.rglob("*"):
        if child.is_dir():
            (target / child.relative_to(built.path)).mkdir()
        else:
            (target / child.relative_to(built.path)).write_bytes(child.read_bytes())
    _fill(tiny_disk)
    doc = built.documents(["doc_id"]).column("doc_id")[0].as_py()
    capsys.readouterr()
    code = run_cli(
        "flag", str(target), "--doc", doc, "--chunk", "0", "--reason", "other", "--reviewer", "ann"
    )
    assert code == EXIT_FAILED
    assert "review ledger" in _last_line(capsys)
    ledger = tiny_disk / "kb" / LEDGER_FILE
    assert not ledger.exists(), f"a {ledger.stat().st_size}-byte ledger was left on the full disk"
    assert [p.name for p in (tiny_disk / "kb").iterdir() if p.name != "v1"] == []

    (tiny_disk / "filler").unlink()  # space is back: the flag is recorded in a complete ledger
    assert (
        run_cli("flag", str(target), "--doc", doc, "--chunk", "0", "--reason", "other", "--reviewer", "ann")
        == EXIT_OK
    )
    with Ledger(ledger) as opened:
        assert [event.kind for event in opened.events()] == ["flag"]


# ---------------------------------------------------------------------------------------------
# The command line on crafted snapshots and ledgers


@pytest.fixture
def crafted_copy(tmp_path: Path) -> Path:
    """A writable copy of a real snapshot whose chunks all share one chunk_id (manifest checksums
    dropped, as a crafted manifest would)."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from support.review_fixtures import build_dataset

    built = Snapshot.open(build_dataset(tmp_path / "built"))
    copy = tmp_path / "crafted" / "kb" / "v1" / "0001"
    shutil.copytree(built.path, copy)
    from support.parts import only_part, reseal

    for child in copy.rglob("*"):
        child.chmod(0o755 if child.is_dir() else 0o644)
    part = only_part(copy, "chunks.parquet")
    table = pq.read_table(part)
    table = table.set_column(
        table.schema.get_field_index("chunk_id"), "chunk_id", pa.array(["same"] * table.num_rows)
    )
    pq.write_table(table, part)
    reseal(copy)  # checksums that match: the content checks must stand alone
    return copy


@pytest.mark.parametrize(
    "command",
    [
        ["export", "{p}", "--format", "jsonl", "--out", "{tmp}/e.jsonl"],
        ["export", "{good}", "--format", "jsonl", "--out", "{tmp}/e.jsonl", "--since", "{p}"],
        ["diff", "{good}", "{p}"],
    ],
)
def test_export_and_diff_exit_1_on_a_crafted_snapshot(crafted_copy: Path, tmp_path: Path, capsys, command):
    good = tmp_path / "built" / "out" / "fixture-kb"
    args = [part.format(p=crafted_copy, tmp=tmp_path, good=good) for part in command]
    assert run_cli(*args) == EXIT_FAILED
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == (
        f"chunkyard: error: {crafted_copy / 'chunks.parquet'}: column chunk_id, row 1: 'same' is not unique"
    ), lines
    assert not (tmp_path / "e.jsonl").exists()


def test_flag_refuses_a_ledger_link_and_a_reviewer_name_with_control_characters(tmp_path: Path, capsys):
    from support.review_fixtures import build_dataset

    dataset = build_dataset(tmp_path / "built")
    snapshot = Snapshot.open(dataset)
    doc = snapshot.documents(["doc_id"]).column("doc_id")[0].as_py()
    flag = ["flag", str(dataset), "--doc", doc, "--chunk", "0", "--reason", "other"]
    assert run_cli(*flag, "--reviewer", "ann\x1b]0;owned\x07") == EXIT_USAGE
    assert "control character U+001B" in _last_line(capsys)
    assert not (dataset / LEDGER_FILE).exists(), "a refused flag creates no ledger"
    target = tmp_path / "elsewhere.sqlite"
    (dataset / LEDGER_FILE).symlink_to(target)
    assert run_cli(*flag, "--reviewer", "ann") == EXIT_USAGE
    assert "is a symbolic link" in _last_line(capsys)
    assert not target.exists()
