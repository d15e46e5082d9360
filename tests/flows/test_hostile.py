"""Issue 9, point 1: ``chunkyard run`` over the hostile corpus completes, skips each bad file with a
specific reason, and stores every good file with exact spans."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.documents import SourceFile, discover

from support.cli import run_cli, write_config
from support.hostile_corpus import build_hostile_corpus, make_deep

EXIT_SKIPPED = 3


@pytest.fixture(scope="module")
def hostile_run(prefect_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    corpus = build_hostile_corpus(root / "src")
    output = root / "out"
    code = run_cli("run", str(write_config(root, corpus.root, output)))
    yield corpus, code, Snapshot.open(output)
    remove_tree(root)


def remove_tree(path: Path) -> None:
    """Delete a tree too deep for pytest's own (recursive) temp-folder cleanup."""
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.mark.slow
def test_run_completes_with_skips(hostile_run, capsys):
    corpus, code, snapshot = hostile_run
    assert code == EXIT_SKIPPED, "completed with skips is exit code 3, distinct from 0 and 1"
    assert snapshot.manifest["counts"]["skipped"] == len(corpus.bad)


@pytest.mark.slow
def test_every_bad_file_is_skipped_with_its_reason(hostile_run):
    corpus, _, snapshot = hostile_run
    reasons = {item["doc_id"]: item["reason"] for item in snapshot.manifest["skipped"]}
    assert set(reasons) == set(corpus.bad)
    for doc_id, reason in reasons.items():
        assert corpus.reason_matches(doc_id, reason), (doc_id, reason, corpus.bad[doc_id])


@pytest.mark.slow
def test_every_good_file_is_stored_with_exact_spans(hostile_run):
    corpus, _, snapshot = hostile_run
    documents = {
        row["doc_id"]: row for row in snapshot.documents(["doc_id", "text", "metadata_json"]).to_pylist()
    }
    assert set(documents) == set(corpus.good)
    for doc_id, expected in corpus.good.items():
        if expected is not None:
            assert documents[doc_id]["text"] == expected, doc_id
    chunks = snapshot.chunks(["doc_id", "start", "end", "text"]).to_pylist()
    seen: set[str] = set()
    for chunk in chunks:
        text = documents[chunk["doc_id"]]["text"]
        assert 0 <= chunk["start"] < chunk["end"] <= len(text)
        assert text[chunk["start"] : chunk["end"]] == chunk["text"]
        seen.add(chunk["doc_id"])
    assert seen == set(corpus.good), "every good document has chunks"
    html = documents["unclosed.html"]
    assert "Last words" in html["text"] and "sss" not in html["text"]  # the 5 MB <script> is dropped...
    excluded = json.loads(html["metadata_json"])["extraction_exclusions"]  # ...as a recorded exclusion
    assert sum(item["chars"] for item in excluded) > 5_000_000


def test_file_deleted_between_discovery_and_reading(tmp_path: Path) -> None:
    from chunkyard.chunking.config import load_config_text
    from chunkyard.chunking.pipeline import chunk_files

    (tmp_path / "stays.md").write_text("# Stays\n\ntext\n", encoding="utf-8")
    (tmp_path / "goes.md").write_text("# Goes\n\ntext\n", encoding="utf-8")
    found = [item for item in discover(tmp_path, ["**/*"], []) if isinstance(item, SourceFile)]
    assert [f.doc_id for f in found] == ["goes.md", "stays.md"]
    os.unlink(tmp_path / "goes.md")
    config = load_config_text(
        f"name: kb\nversion: 1\nsource: {{path: {tmp_path}}}\nchunker: {{unit: chars, max_size: 100}}\n"
    )
    result = chunk_files(config, found, {})
    assert [(s.doc_id, s.reason) for s in result.skipped] == [
        ("goes.md", "file vanished before it could be read")
    ]
    assert result.chunked == ["stays.md"]


def test_discovery_survives_folders_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    corpus = tmp_path / "deep"
    corpus.mkdir()
    try:
        (make_deep(corpus, 1500) / "x.md").write_text("x", encoding="utf-8")
        (corpus / "a.md").write_text("a", encoding="utf-8")
        found = [item.doc_id for item in discover(corpus, ["**/*"], [])]
        assert found == ["a.md", "/".join(["d"] * 1500) + "/x.md"]
    finally:
        remove_tree(corpus)


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful as root")
def test_unreadable_case_is_reported_as_not_generated_under_root(tmp_path: Path) -> None:
    corpus = build_hostile_corpus(tmp_path, large_mb=0.01, line_mb=0.01, script_mb=0.01, depth=2, headings=2)
    assert "unreadable" in corpus.not_generated and "unreadable.md" not in corpus.bad
