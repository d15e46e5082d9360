"""Embedders and the embedding cache that ``sync`` and ``eval`` share, so a text is embedded once.

Embedders (``embedder_for``):

- ``wordllama`` — WordLlama's bundled 256-d model, offline (the one loader in
  ``chunkyard.chunking.evaluation.retrievers``).
- a folder — a local sentence-transformers model (``SentenceTransformer(folder)``, never downloads;
  needs the ``sentence-transformers`` package).
- ``http(s)://HOST/v1`` or ``http(s)://HOST/v1/embeddings`` — an OpenAI-compatible endpoint
  (``POST /v1/embeddings`` with ``{"model", "input"}``); ``#MODEL`` after the URL names the model
  (default ``text-embedding-3-small``), ``OPENAI_API_KEY`` in the environment is sent as a bearer token.

Each embedder has an ``id`` that names what it computes (model and dimension, or URL and model): the
cache and the sinks key on it, so vectors of two models never mix.

Cache: one SQLite file per embedder in ``OUTPUT/NAME/.embeddings/`` (beside the dataset, never inside
a snapshot), a row per ``sha256(embed_text)`` holding the float32 vector. A rechunk that keeps most
texts, a second sink with the same embedder and an evaluation of a snapshot all read what another
step computed. Rows are committed in batches as they are computed, so an interrupted sync keeps what
it paid for.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from chunkyard.chunking.errors import ChunkyardError

EMBEDDINGS_DIR = ".embeddings"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
BATCH = 256

# Called with (texts embedded so far, texts to embed).
EmbedProgress = Callable[[int, int], None]


class EmbeddingError(ChunkyardError):
    """An embedder that cannot be loaded or reached, or that answered something unusable."""


class Embedder(Protocol):
    id: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 vectors, one row per text, in order."""
        ...


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class WordLlamaEmbedder:
    """WordLlama's bundled model (``l2_supercat``, 256 dimensions, L2-normalised), offline."""

    def __init__(self) -> None:
        from chunkyard.chunking.evaluation.retrievers import DENSE_DIM, DENSE_MODEL

        self.id = f"wordllama/{DENSE_MODEL}/{DENSE_DIM}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from chunkyard.chunking.evaluation.retrievers import embed

        return embed(texts)


class LocalModelEmbedder:
    """A sentence-transformers model from a local folder (loaded offline, normalised vectors)."""

    def __init__(self, folder: Path):
        if not folder.is_dir():
            raise EmbeddingError(
                f"{folder}: no such model folder (an embedder is `wordllama`, a local "
                "sentence-transformers model folder or an http(s):// endpoint URL)"
            )
        self.folder = folder
        # The folder's files (names and sizes) stand for the model: another model there is another id.
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(folder).as_posix()}\0{path.stat().st_size}\0".encode())
        self.id = f"local/{folder.name}/{digest.hexdigest()[:12]}"
        self._model = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise EmbeddingError(
                    f"embedder {self.folder}: a local model needs the 'sentence-transformers' "
                    "package (pip install sentence-transformers)"
                ) from None
            try:
                self._model = SentenceTransformer(str(self.folder), local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - any load failure is one line for the user
                raise EmbeddingError(
                    f"embedder {self.folder}: cannot load the model: {type(exc).__name__}: {exc}"
                ) from None
        vectors = self._model.encode(
            list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint."""

    def __init__(self, spec: str, timeout: float = 120.0):
        url, _, model = spec.partition("#")
        url = url.rstrip("/")
        if not url.endswith("/embeddings"):
            url += "/embeddings"
        self.url, self.model, self.timeout = url, model or DEFAULT_OPENAI_MODEL, timeout
        self.id = f"openai/{self.url}#{self.model}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        body = json.dumps({"model": self.model, "input": list(texts)}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if os.environ.get("OPENAI_API_KEY"):
            headers["Authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace").strip()
            raise EmbeddingError(f"embedder {self.url}: HTTP {exc.code} {exc.reason}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EmbeddingError(f"embedder {self.url}: cannot reach the endpoint: {reason}") from None
        except ValueError:
            raise EmbeddingError(f"embedder {self.url}: the answer is not JSON") from None
        try:
            items = sorted(answer["data"], key=lambda item: item["index"])
            vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise EmbeddingError(f"embedder {self.url}: the answer has no data[].embedding list") from None
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingError(
                f"embedder {self.url}: asked for {len(texts)} embeddings, got "
                f"{vectors.shape[0] if vectors.ndim else 0}"
            )
        return vectors


def embedder_for(spec: str, base_dir: Path) -> Embedder:
    """The embedder a config names: ``wordllama``, an endpoint URL, or a model folder (relative to
    the config's folder)."""
    if spec == "wordllama":
        return WordLlamaEmbedder()
    if re.match(r"^https?://", spec, re.IGNORECASE):
        return OpenAIEmbedder(spec)
    return LocalModelEmbedder((base_dir / Path(spec).expanduser()).resolve())


def cache_file(dataset_dir: Path, embedder_id: str) -> Path:
    """``OUTPUT/NAME/.embeddings/<readable id>-<digest>.sqlite``: one file per embedder."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", embedder_id).strip("-")[:60]
    return dataset_dir / EMBEDDINGS_DIR / f"{readable}-{text_hash(embedder_id)[:10]}.sqlite"


@dataclass
class Embedded:
    vectors: np.ndarray  # one row per text asked for
    computed: int  # distinct texts the embedder was called for (the rest came from the cache)
    cached: int  # distinct texts read from the cache


class EmbeddingCache:
    """Vectors by ``sha256(text)`` for one embedder, in a SQLite file beside the dataset."""

    def __init__(self, path: Path, embedder: Embedder):
        self.path, self.embedder = path, embedder
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('embedder', ?)", (embedder.id,))
        self._db.commit()
        stored = self._db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()[0]
        if stored != embedder.id:
            raise EmbeddingError(
                f"{path}: an embedding cache of {stored!r}, not of {embedder.id!r}; remove it"
            )

    @classmethod
    def for_dataset(cls, dataset_dir: Path, embedder: Embedder) -> EmbeddingCache:
        return cls(cache_file(dataset_dir, embedder.id), embedder)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self._db.execute(
                f"SELECT hash, vector FROM vectors WHERE hash IN ({','.join('?' * len(part))})", part
            ).fetchall()
            found.update((h, np.frombuffer(blob, dtype=np.float32)) for h, blob in rows)
        return found

    def vectors(self, texts: Sequence[str], progress: EmbedProgress | None = None) -> Embedded:
        """A vector per text: from the cache, or computed (each distinct text once) and stored."""
        hashes = [text_hash(text) for text in texts]
        known = self.lookup(hashes)
        missing: dict[str, str] = {}
        for digest, text in zip(hashes, texts, strict=True):
            if digest not in known and digest not in missing:
                missing[digest] = text
        todo = list(missing.items())
        if progress:
            progress(0, len(todo))
        for start in range(0, len(todo), BATCH):
            part = todo[start : start + BATCH]
            computed = np.asarray(self.embedder.embed([text for _, text in part]), dtype=np.float32)
            rows = [(digest, computed[i].tobytes()) for i, (digest, _) in enumerate(part)]
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()
            known.update((digest, computed[i]) for i, (digest, _) in enumerate(part))
            if progress:
                progress(min(start + BATCH, len(todo)), len(todo))
        dims = {vector.shape[0] for vector in known.values()}
        if len(dims) > 1:
            raise EmbeddingError(
                f"{self.path}: vectors of several dimensions {sorted(dims)} for one embedder; "
                "remove the cache file"
            )
        dim = dims.pop() if dims else 0
        matrix = np.stack([known[digest] for digest in hashes]) if hashes else np.zeros((0, dim), np.float32)
        return Embedded(matrix, computed=len(todo), cached=len(set(hashes)) - len(todo))


# ---------------------------------------------------------------------------------------------
# For the evaluation and the reviewer's question box: WordLlama vectors of a snapshot's chunks


@dataclass
class CachedEmbeddings:
    vectors: np.ndarray
    status: str  # "hit" | "written" | "not cached: <reason>"
    path: Path | None


def cached_embeddings(
    snapshot_path: Path | None, chunk_ids: Sequence[str], texts: Sequence[str], use_cache: bool = True
) -> CachedEmbeddings:
    """WordLlama vectors of chunk texts through the dataset's embedding cache (``OUTPUT/NAME/.embeddings/``),
    which ``chunkyard sync`` shares: only texts no step has embedded before are computed; ``hit`` when
    none was."""
    from chunkyard.chunking.evaluation.retrievers import embed

    if snapshot_path is None or not use_cache or not isinstance(snapshot_path, Path) or not texts:
        return CachedEmbeddings(embed(texts), "not cached: caching off", None)
    try:
        with EmbeddingCache.for_dataset(snapshot_path.parent.parent, WordLlamaEmbedder()) as cache:
            got = cache.vectors(texts)
    except (OSError, sqlite3.Error) as exc:  # a read-only dataset folder: embed without caching
        return CachedEmbeddings(embed(texts), f"not cached: {getattr(exc, 'strerror', None) or exc}", None)
    return CachedEmbeddings(got.vectors, "hit" if got.computed == 0 else "written", cache.path)


__all__ = [
    "EMBEDDINGS_DIR",
    "CachedEmbeddings",
    "Embedded",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingError",
    "LocalModelEmbedder",
    "OpenAIEmbedder",
    "WordLlamaEmbedder",
    "cache_file",
    "cached_embeddings",
    "embedder_for",
    "text_hash",
]
