"""``chunkyard diff`` and ``chunkyard export [--since]`` on real corpus changes (edit, add, delete).

A copy of part of ``../shared/corpora/rust-book`` is chunked, changed and chunked again; the diff
must match the changes, and the change-set applied to the old export must give exactly the new one,
in both formats.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.export import (
    EXPORT_SCHEMA,
    apply_change_set,
    change_set,
    export_rows,
    read_export,
    write_atomically,
)
from chunkyard.chunking.versions import moved_boundaries


def run_cli(*args: str) -> int:
    from chunkyard.flows.cli import main

    return main(list(args))


@pytest.fixture
def corpus_copy(corpora_dir: Path, tmp_path: Path) -> Path:
    """Twelve chapters of the Rust book (real Markdown with code, lists and tables)."""
    chapters = sorted((corpora_dir / "rust-book" / "src").glob("ch0[3-5]*.md"))[:12]
    if len(chapters) < 6:
        pytest.skip("the rust-book corpus lacks the chapters this test uses")
    source = tmp_path / "src"
    source.mkdir()
    for chapter in chapters:
        shutil.copyfile(chapter, source / chapter.name)
    return source


def write_config(folder: Path, source: Path, output: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: book
        version: 1
        source: {{path: {source}, include: ["**/*.md"]}}
        output: {{path: {output}}}
        chunker: {{strategy: markdown, unit: tokens, max_size: 300, overlap: 0}}
        """),
        encoding="utf-8",
    )
    return path


def test_diff_and_change_set_on_corpus_changes(
    prefect_server, corpus_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    output = tmp_path / "out"
    config = write_config(tmp_path, corpus_copy, output)
    assert run_cli("run", str(config)) == 0
    old = Snapshot.open(output / "book")

    files = sorted(corpus_copy.glob("*.md"))
    edited = max(files, key=lambda f: f.stat().st_size)  # long enough that its first half is several chunks
    deleted = next(f for f in files if f != edited)
    text = edited.read_text(encoding="utf-8")
    middle = text.index("\n\n", len(text) // 2)  # an edit in the middle: the first half keeps its chunks
    edited.write_text(
        text[:middle] + "\n\nA paragraph added by the test, in the middle of the chapter.\n" + text[middle:],
        encoding="utf-8",
    )
    deleted.unlink()
    (corpus_copy / "zz-new-chapter.md").write_text(
        "# New chapter\n\nA brand new chapter. It has two sentences.\n", encoding="utf-8"
    )
    assert run_cli("run", str(config)) == 0
    new = Snapshot.open(output / "book")
    assert new.number == old.number + 1

    # diff --json: per document, by chunk_id.
    capsys.readouterr()
    assert run_cli("diff", str(old.path), str(new.path), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    status = {d["doc_id"]: d for d in report["documents"]}
    assert status[deleted.name]["status"] == "removed" and status[deleted.name]["added"] == []
    assert status["zz-new-chapter.md"]["status"] == "added" and status["zz-new-chapter.md"]["removed"] == []
    assert status[edited.name]["status"] == "changed"
    assert status[edited.name]["unchanged"] > 0  # chunks before the edit keep their ids
    assert status[edited.name]["added"] and status[edited.name]["removed"]
    others = [
        d for d in report["documents"] if d["doc_id"] not in (edited.name, deleted.name, "zz-new-chapter.md")
    ]
    assert others and all(d["status"] == "unchanged" and not d["added"] and not d["removed"] for d in others)
    totals = report["totals"]
    assert totals["documents_added"] == totals["documents_removed"] == totals["documents_changed"] == 1
    assert totals["chunks_added"] == sum(len(d["added"]) for d in report["documents"])
    assert (
        totals["chunks_unchanged"] + totals["chunks_changed"] + totals["chunks_added"]
        == new.manifest["counts"]["chunks"]
    )
    assert run_cli("diff", str(old.path), str(output / "book")) == 0  # a dataset folder opens its newest
    assert "1 added, 1 removed, 1 changed" in capsys.readouterr().out

    for fmt in ("parquet", "jsonl"):
        full_old, full_new, changes = (tmp_path / f"{name}.{fmt}" for name in ("old", "new", "changes"))
        assert run_cli("export", str(old.path), "--format", fmt, "--out", str(full_old)) == 0
        assert run_cli("export", str(new.path), "--format", fmt, "--out", str(full_new)) == 0
        assert (
            run_cli("export", str(new.path), "--format", fmt, "--out", str(changes), "--since", str(old.path))
            == 0
        )
        before, after, delta = read_export(full_old), read_export(full_new), read_export(changes)
        assert after.num_rows == new.manifest["counts"]["chunks"]
        assert apply_change_set(before, delta).equals(after)
        ops = delta.column("op").to_pylist()
        deleted_ids = {
            cid for cid, op in zip(delta.column("chunk_id").to_pylist(), ops, strict=True) if op == "delete"
        }
        assert deleted_ids == {cid for d in report["documents"] for cid in d["removed"]}
        assert ops.count("upsert") < after.num_rows  # unchanged chunks are not sent again
        assert not list(tmp_path.glob(".*.tmp-*")), "no temporary files left behind"
    assert pq.read_schema(tmp_path / "changes.parquet").metadata[b"chunkyard.since"] == str(old.path).encode()


def test_change_set_catches_same_id_with_new_text(tmp_path: Path) -> None:
    """A chunk_id names a span: same id with other text must be an upsert, not 'unchanged'."""

    def table(rows: list[dict]) -> pa.Table:
        full = [{name: row.get(name) for name in EXPORT_SCHEMA.names} | {"op": "upsert"} for row in rows]
        return pa.Table.from_pylist(full, schema=EXPORT_SCHEMA)

    old = table(
        [
            {"chunk_id": "a", "doc_id": "d", "chunk_index": 0, "text": "old"},
            {"chunk_id": "b", "doc_id": "d", "chunk_index": 1, "text": "same"},
        ]
    )
    new = table(
        [
            {"chunk_id": "a", "doc_id": "d", "chunk_index": 0, "text": "new"},
            {"chunk_id": "b", "doc_id": "d", "chunk_index": 1, "text": "same"},
            {"chunk_id": "c", "doc_id": "e", "chunk_index": 0, "text": "added"},
        ]
    )
    delta = change_set(old, new)
    assert delta.column("chunk_id").to_pylist() == ["a", "c"]
    assert apply_change_set(old, delta).equals(new)


def test_export_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    target.write_text("previous\n", encoding="utf-8")

    def fail(handle) -> None:  # type: ignore[no-untyped-def]
        handle.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception, match="No space left"):
        write_atomically(target, fail)
    assert target.read_text(encoding="utf-8") == "previous\n"
    assert os.listdir(tmp_path) == ["export.jsonl"]


def test_export_rows_of_the_fixture_dataset(tmp_path: Path) -> None:
    from support.review_fixtures import build_dataset

    snapshot = Snapshot.open(build_dataset(tmp_path))
    rows = export_rows(snapshot)
    assert rows.schema.names == EXPORT_SCHEMA.names
    assert rows.num_rows == snapshot.manifest["counts"]["chunks"]
    titles = dict(
        zip(
            *[snapshot.documents(["doc_id", "title"]).column(c).to_pylist() for c in ("doc_id", "title")],
            strict=True,
        )
    )
    assert all(row["doc_title"] == titles[row["doc_id"]] for row in rows.to_pylist())


def test_moved_boundaries() -> None:
    assert moved_boundaries([(0, 10), (10, 20), (20, 30)], [(0, 10), (10, 25), (25, 30)]) == ([20], [25])


def test_diff_into_a_pipe_closed_early_claims_nothing(tmp_path: Path) -> None:
    """`chunkyard diff A B --json | head -c 100`: the reader leaving is not an error to report.

    It printed "chunkyard: error: broken pipe (nothing was published; ...)"; after `chunkyard run ... |
    head` that was false, the snapshot had been published.
    """
    import subprocess
    import sys

    from support.review_fixtures import REPO, build_dataset

    dataset = build_dataset(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "chunkyard.flows.cli", "diff", str(dataset), str(dataset), "--json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before anything is written
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1
    assert err == "", err


def test_export_never_writes_into_a_published_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--out` inside a snapshot folder replaced its (read-only) chunks.parquet with the export: the
    immutable snapshot no longer opened. It is refused, and nothing in the snapshot changes."""
    from support.review_fixtures import build_dataset

    snapshot = Snapshot.open(build_dataset(tmp_path)).path
    before = {str(path): path.read_bytes() for path in snapshot.rglob("*") if path.is_file()}
    for name in ("chunks.parquet", "manifest.json", "export.jsonl"):
        assert run_cli("export", str(snapshot), "--format", "jsonl", "--out", str(snapshot / name)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "published snapshot" in err, err
    assert {str(path): path.read_bytes() for path in snapshot.rglob("*") if path.is_file()} == before


def test_a_file_given_for_a_snapshot_is_called_a_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--since old-export.jsonl` (OLD is a snapshot, not an export) said "no such dataset folder" for a file
    that is right there."""
    from support.review_fixtures import build_dataset

    dataset = build_dataset(tmp_path)
    old = tmp_path / "old.jsonl"
    assert run_cli("export", str(dataset), "--format", "jsonl", "--out", str(old)) == 0
    capsys.readouterr()
    assert (
        run_cli(
            "export",
            str(dataset),
            "--format",
            "jsonl",
            "--out",
            str(tmp_path / "new.jsonl"),
            "--since",
            str(old),
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{old}: a file, not a dataset folder" in err and "no such" not in err, (
        err
    )
