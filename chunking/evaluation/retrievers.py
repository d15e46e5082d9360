"""Retrievers over a snapshot's chunks, both offline: BM25 (``bm25s``) and dense (``wordllama``).

Method. Both index each chunk's ``embed_text`` (what a vector store would receive: title and heading
breadcrumb plus the text) and return, for each question, chunk row numbers best first.

- BM25: ``bm25s`` (Lucene's BM25 variant, k1 = 1.5, b = 0.75) over ``bm25s.tokenize`` tokens
  (lower-cased words of two or more characters, English stop words removed, no stemming).
- Dense: WordLlama's 256-dimensional ``l2_supercat`` embeddings (the weights ship in the wheel and
  are loaded with downloads disabled), L2-normalised, so cosine similarity is a dot product; top-k
  is a NumPy sort of one matrix product.

Ties are broken by row number (stable sort), so results are deterministic. Chunk embeddings go
through the dataset's embedding cache, ``OUTPUT/NAME/.embeddings/`` (``chunkyard.chunking.embeddings``,
shared with ``chunkyard sync``): beside the snapshots, never inside one, keyed by model and
``sha256(embed_text)``, so another snapshot or config re-embeds only texts it has not seen. Heavy
libraries are imported inside functions, so importing this module stays cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from chunkyard.chunking.errors import ChunkyardError, import_extra

RETRIEVERS = ("bm25", "dense")
DENSE_MODEL = "l2_supercat"
DENSE_DIM = 256


class EvaluationError(ChunkyardError):
    """An evaluation that cannot run (missing retriever library, unreadable dataset, ...)."""


class Retriever(Protocol):
    name: str

    def search(self, queries: Sequence[str], k: int) -> list[list[int]]: ...


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` highest scores, best first; ties by index."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return []
    order = np.argsort(-scores, kind="stable")[:k]
    return [int(i) for i in order]


class BM25Retriever:
    """Lexical baseline."""

    name = "bm25"

    def __init__(self, texts: Sequence[str]):
        bm25s = import_extra("bm25s", "The bm25 retriever", "eval")
        # bm25s sets its own logger to DEBUG at import; its index/retrieve chatter is not for users.
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self._bm25s = bm25s
        self.n = len(texts)
        tokens = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
        self._index = bm25s.BM25()
        self._index.index(tokens, show_progress=False)

    def scores(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Each query's BM25 score of every text (the reviewer's question box lists them)."""
        tokenized = self._bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)
        # A query of stop words only matches nothing; every chunk scores 0 (ranked by row).
        return [
            np.asarray(self._index.get_scores(tokens) if tokens else np.zeros(self.n), dtype=np.float64)
            for tokens in tokenized
        ]

    def search(self, queries: Sequence[str], k: int) -> list[list[int]]:
        return [top_k(scores, k) for scores in self.scores(queries)]


@lru_cache(maxsize=1)
def load_wordllama() -> Any:
    """WordLlama from the weights inside the installed package; never downloads."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        wordllama = import_extra("wordllama", "The dense retriever", "eval")
        WordLlama = wordllama.WordLlama  # noqa: N806 - the library's class
    finally:
        # wordllama calls logging.basicConfig(level=INFO) on import; keep the host's logging as it was.
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    try:
        return WordLlama.load(
            config=DENSE_MODEL,
            dim=DENSE_DIM,
            cache_dir=Path(wordllama.__file__).parent,
            disable_download=True,
        )
    except Exception as exc:  # missing weights file, incompatible version
        raise EvaluationError(
            f"cannot load the WordLlama model offline: {type(exc).__name__}: {exc}"
        ) from None


def embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised float32 embeddings, one row per text."""
    if not texts:
        return np.zeros((0, DENSE_DIM), dtype=np.float32)
    vectors = np.asarray(load_wordllama().embed(list(texts), norm=True, batch_size=256), dtype=np.float32)
    return vectors


class DenseRetriever:
    """Cosine similarity over WordLlama embeddings."""

    name = "dense"

    def __init__(self, embeddings: np.ndarray):
        self.embeddings = embeddings

    def scores(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Each query's cosine similarity to every text."""
        if not len(queries):
            return []
        return list(embed(queries) @ self.embeddings.T)

    def search(self, queries: Sequence[str], k: int) -> list[list[int]]:
        return [top_k(scores, k) for scores in self.scores(queries)]
