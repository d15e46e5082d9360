"""Sinks and retention in the config (errors with line and field), the embedding cache (each text
embedded once per embedder), and the embedders' error paths."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from chunkyard.chunking.config import load_config_text
from chunkyard.chunking.embeddings import (
    EmbeddingCache,
    EmbeddingError,
    LocalModelEmbedder,
    WordLlamaEmbedder,
    cache_file,
    embedder_for,
)
from chunkyard.chunking.errors import ConfigError

BASE = """\
name: kb
version: 1
source: {path: /tmp}
"""


def _issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(textwrap.dedent(text))
    return [str(issue) for issue in caught.value.issues]


def test_sinks_and_retention_validate_with_line_and_field():
    config = load_config_text(
        BASE
        + textwrap.dedent("""\
        sinks:
          - {name: lance, type: lancedb, uri: ./vectors, table: kb}
          - {name: pg, type: pgvector, dsn: "postgresql://localhost/rag", table: kb_chunks, embedder: ./model}
        retention: {keep: 3}
        """)
    )
    assert [s.name for s in config.model.sinks] == ["lance", "pg"]
    assert config.model.sinks[0].embedder == "wordllama" and config.model.retention.keep == 3
    issues = _issues(
        BASE
        + textwrap.dedent("""\
        sinks:
          - name: lance
            type: lancedb
            table: kb
          - {name: pg, type: pgvector, dsn: x, table: "bad-name"}
          - {name: q, type: qdrant, uri: x, table: t}
          - {name: lance, type: lancedb, uri: ./v, table: kb2}
        retention: {keep: 0}
        """)
    )
    text = "\n".join(issues)
    assert "<config>:5: sinks[0].uri: a lancedb sink needs `uri`" in text
    assert "<config>:8: sinks[1].table:" in text
    assert "sinks[2].type:" in text and "'lancedb' or 'pgvector'" in text
    assert "<config>:11: retention.keep:" in text


def test_duplicate_sink_names_are_refused():
    text = "\n".join(
        _issues(
            BASE
            + textwrap.dedent("""\
        sinks:
          - {name: a, type: lancedb, uri: ./v, table: one}
          - {name: a, type: lancedb, uri: ./v, table: two}
        """)
        )
    )
    assert "sinks: sink names must be unique: a appear" in text


def test_sinks_do_not_change_the_config_hash():
    plain = load_config_text(BASE)
    with_sinks = load_config_text(
        BASE + "sinks: [{name: a, type: lancedb, uri: ./v, table: t}]\nretention: {keep: 2}\n"
    )
    assert plain.hash == with_sinks.hash  # where chunks are stored is not how they are cut


class _Counting:
    """An embedder that counts the texts it is asked for (a stand-in only for counting: the real
    WordLlama path is tested below and in the sync tests)."""

    def __init__(self, ident: str = "counting/4"):
        self.id = ident
        self.asked: list[str] = []

    def embed(self, texts):
        self.asked.extend(texts)
        return np.asarray([[len(t), t.count("a"), 1.0, 0.0] for t in texts], dtype=np.float32)


def test_the_cache_embeds_each_text_once_per_embedder(tmp_path):
    embedder = _Counting()
    with EmbeddingCache.for_dataset(tmp_path, embedder) as cache:
        first = cache.vectors(["alpha", "beta", "alpha"])
        assert (first.computed, first.cached) == (2, 0) and first.vectors.shape == (3, 4)
        assert np.array_equal(first.vectors[0], first.vectors[2])
    with EmbeddingCache.for_dataset(tmp_path, embedder) as cache:  # reopened: the vectors persisted
        second = cache.vectors(["beta", "gamma"])
    assert (second.computed, second.cached) == (1, 1) and embedder.asked == ["alpha", "beta", "gamma"]
    other = _Counting("other/4")
    assert cache_file(tmp_path, other.id) != cache_file(tmp_path, embedder.id)
    with EmbeddingCache.for_dataset(tmp_path, other) as cache:
        assert cache.vectors(["alpha"]).computed == 1  # another embedder never reads these vectors


def test_wordllama_vectors_through_the_cache_equal_direct_ones(tmp_path):
    embedder = WordLlamaEmbedder()
    direct = embedder.embed(["How do I return a tent?", "Stoves and fuel"])
    with EmbeddingCache.for_dataset(tmp_path, embedder) as cache:
        cached = cache.vectors(["How do I return a tent?", "Stoves and fuel"])
    assert embedder.id == "wordllama/l2_supercat/256" and np.allclose(direct, cached.vectors)


def test_embedder_specs_and_the_local_model_error_paths(tmp_path):
    assert isinstance(embedder_for("wordllama", tmp_path), WordLlamaEmbedder)
    with pytest.raises(EmbeddingError, match="no such model folder"):
        embedder_for("models/none", tmp_path)
    folder = tmp_path / "models" / "broken"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    embedder = embedder_for("models/broken", tmp_path)
    assert isinstance(embedder, LocalModelEmbedder) and embedder.id.startswith("local/broken/")
    # No sentence-transformers model ships offline here: the error names the folder and what is missing.
    with pytest.raises(
        EmbeddingError,
        match=r"embedder .*broken: (a local model needs the 'sentence-transformers'|"
        r"cannot load the model)",
    ):
        embedder.embed(["x"])


def test_a_sink_without_the_sync_extra_names_the_extra(tmp_path, monkeypatch):
    import sys

    from chunkyard.chunking.errors import MissingExtra
    from chunkyard.chunking.sinks import open_sink

    config = load_config_text(
        BASE + "sinks:\n  - {name: lance, type: lancedb, uri: ./v, table: kb}\n"
        "  - {name: pg, type: pgvector, dsn: x, table: kb}\n"
    )
    monkeypatch.setitem(sys.modules, "lancedb", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for sink, driver in zip(config.model.sinks, ("lancedb", "pgvector"), strict=True):
        with pytest.raises(
            MissingExtra,
            match=rf"sink {sink.name}: a {driver} sink needs the sync extra: "
            r"pip install 'chunkyard\[sync\]'",
        ):
            open_sink(sink, tmp_path)
