"""Golden snapshots: the chunks of every file of examples/kb, per strategy, compared with tests/golden/*.json.

Any change in chunk output (spans, sizes, section paths, findings, embed_text) fails here as a visible,
reviewable diff. When the change is intended, regenerate and commit the JSON files with::

    .venv/bin/python -m pytest tests/test_golden.py --update-golden

Documents are read with ``chunkyard.chunking.documents.read_document`` (HTML extracted, BOM removed) and chunked
with ``split_document`` as the batch job does. Two settings per strategy: ``default`` is
config/default.yaml's chunker with the strategy swapped in (for ``auto``: ``config.settings_for(doc_id)``,
rules included, exactly what ``chunkyard run`` uses); ``chars`` is 1000 chars, overlap 100, min_size 0.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import Config, load_config
from chunkyard.chunking.documents import Document, SourceFile, discover, read_document

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STRATEGIES = ("fixed", "sentence", "recursive", "markdown", "auto")
CHARS = {"unit": "chars", "max_size": 1000, "overlap": 100, "min_size": 0}


@pytest.fixture(scope="module")
def config() -> Config:
    return load_config(ROOT / "config" / "default.yaml")


@pytest.fixture(scope="module")
def documents(config: Config) -> list[Document]:
    found = list(discover(config.source_dir, config.model.source.include, config.model.source.exclude))
    assert found and all(isinstance(item, SourceFile) for item in found), found
    docs = [read_document(item.path, item.doc_id) for item in found if isinstance(item, SourceFile)]
    assert all(isinstance(doc, Document) for doc in docs), docs
    return docs  # type: ignore[return-value]


def settings_for(config: Config, strategy: str, name: str, doc_id: str) -> dict[str, Any]:
    if strategy == "auto" and name == "default":
        return config.settings_for(doc_id).model_dump()
    settings = {**config.chunker.model_dump(), "strategy": strategy}
    return {**settings, **CHARS} if name == "chars" else settings


def snapshot(config: Config, documents: list[Document], strategy: str) -> list[dict[str, Any]]:
    records = []
    for name in ("default", "chars"):
        for document in documents:
            settings = settings_for(config, strategy, name, document.doc_id)
            result = split_document(
                document.text,
                settings,
                document.doc_id,
                base_dir=config.base_dir,
                title=document.title or None,
            )
            for chunk in result.chunks:
                records.append(
                    {
                        "settings": name,
                        "doc_id": document.doc_id,
                        "index": chunk.index,
                        "start": chunk.start,
                        "end": chunk.end,
                        "size": chunk.size,
                        "strategy": chunk.strategy,
                        "section_path": list(chunk.section_path),
                        "findings": list(chunk.findings),
                        "text": chunk.text[:40],
                        "embed_sha1": hashlib.sha1(chunk.embed_text.encode()).hexdigest()[:12],
                    }
                )
    return records


def dump(records: list[dict[str, Any]]) -> str:
    """One record per line, so a change shows up as a line diff."""
    return "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_golden(strategy: str, config: Config, documents: list[Document], update_golden: bool) -> None:
    path = GOLDEN / f"{strategy}.json"
    actual = dump(snapshot(config, documents, strategy))
    if update_golden:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        pytest.skip(f"rewrote {path.relative_to(ROOT)}")
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: run pytest tests/test_golden.py --update-golden")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = list(
            difflib.unified_diff(
                expected.splitlines(), actual.splitlines(), "golden", "now", n=0, lineterm=""
            )
        )
        changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        pytest.fail(
            f"{strategy}: chunk output differs from {path.relative_to(ROOT)} ({changed} lines changed). If the "
            f"change is intended: pytest tests/test_golden.py --update-golden, review the diff, commit.\n"
            + "\n".join(diff[:40]),
            pytrace=False,
        )


def test_golden_covers_every_sample_file(documents: list[Document]) -> None:
    on_disk = sorted(
        p.relative_to(ROOT / "examples" / "kb").as_posix()
        for p in (ROOT / "examples" / "kb").rglob("*")
        if p.is_file()
    )
    assert sorted(d.doc_id for d in documents) == on_disk


def test_golden_files_are_sorted_and_complete(config: Config, documents: list[Document]) -> None:
    for strategy in STRATEGIES:
        path = GOLDEN / f"{strategy}.json"
        if not path.exists():
            continue
        records = json.loads(path.read_text(encoding="utf-8"))
        for name in ("default", "chars"):
            assert {r["doc_id"] for r in records if r["settings"] == name} == {d.doc_id for d in documents}
