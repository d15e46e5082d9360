"""Evaluate one dataset snapshot on a question set: locate references, retrieve, score, cost.

Method. The snapshot's documents supply the extracted text the references are located in; its
chunks (``embed_text`` indexed, spans scored) go to each retriever once, with the largest k asked
for, and every smaller k is scored on a prefix of the same ranking, so the k values of one run are
consistent with each other. Scores are the character-level metrics of ``metrics.py``; the cost side
counts what a vector store would hold: chunks, embedded characters and cl100k tokens of
``embed_text``, mean chunk size, and the overlap factor (chunk characters ÷ document characters).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkyard.chunking.config import Config
from chunkyard.chunking.dataset import Snapshot, latest_snapshot, version_dir
from chunkyard.chunking.embeddings import cached_embeddings
from chunkyard.chunking.evaluation.metrics import score_retrieval, summarize
from chunkyard.chunking.evaluation.questions import QuestionSet, Span, locate_questions
from chunkyard.chunking.evaluation.retrievers import (
    RETRIEVERS,
    BM25Retriever,
    DenseRetriever,
    EvaluationError,
    Retriever,
)
from chunkyard.chunking.words import plural

Log = Callable[[str], None]


@dataclass
class ConfigEvaluation:
    """The result of one config's snapshot on one question set."""

    label: str
    dataset: str
    version: int
    snapshot: int
    snapshot_path: Path
    config_hash: str
    config_path: str | None
    strategy: str
    retrievers: tuple[str, ...]
    ks: tuple[int, ...]
    questions: int
    cost: dict[str, float]
    summary: list[dict[str, Any]]  # one row per (retriever, k)
    per_question: list[dict[str, Any]] = field(repr=False, default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    embeddings_cache: str | None = None

    def row(self, retriever: str, k: int) -> dict[str, Any]:
        for row in self.summary:
            if row["retriever"] == retriever and row["k"] == k:
                return row
        raise KeyError((retriever, k))

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary (no per-question rows)."""
        return {
            "label": self.label,
            "dataset": self.dataset,
            "version": self.version,
            "snapshot": self.snapshot,
            "snapshot_path": str(self.snapshot_path),
            "config_hash": self.config_hash,
            "config_path": self.config_path,
            "strategy": self.strategy,
            "retrievers": list(self.retrievers),
            "ks": list(self.ks),
            "questions": self.questions,
            "cost": self.cost,
            "summary": self.summary,
            "timings": self.timings,
            "embeddings_cache": self.embeddings_cache,
        }


def reusable_snapshot(config: Config, output: Path | None = None) -> Path | None:
    """The newest snapshot of the config's version when it was made with this exact config hash."""
    vpath = version_dir((output or config.output_dir).resolve(), config.name, config.version)
    newest = latest_snapshot(vpath)
    if newest is None:
        return None
    try:
        snapshot = Snapshot.open(newest)
    except Exception:  # an unreadable manifest is not reusable; the run will say why
        return None
    return newest if snapshot.manifest.get("config", {}).get("hash") == config.hash else None


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,5,10"`` → (1, 5, 10); sorted, unique, each ≥ 1."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"k must be comma-separated whole numbers, got {text!r}") from None
    if not values or values[0] < 1:
        raise ValueError(f"k must be whole numbers of at least 1, got {text!r}")
    return tuple(values)


def evaluate_snapshot(
    path: str | Path,
    question_set: QuestionSet,
    *,
    ks: Sequence[int] = (5,),
    retrievers: Sequence[str] = RETRIEVERS,
    label: str | None = None,
    use_cache: bool = True,
    log: Log | None = None,
) -> ConfigEvaluation:
    """Score a snapshot (any path ``Snapshot.open`` accepts) on ``question_set``."""
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise EvaluationError("k must be at least 1")
    unknown = [name for name in retrievers if name not in RETRIEVERS]
    if unknown:
        raise EvaluationError(f"unknown retriever {unknown[0]!r} (use: {', '.join(RETRIEVERS)})")
    say = log or (lambda message: None)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    snapshot = Snapshot.open(path, validate=True)
    documents = snapshot.documents(["doc_id", "text"], doc_ids=question_set.doc_ids)
    texts = dict(
        zip(documents.column("doc_id").to_pylist(), documents.column("text").to_pylist(), strict=True)
    )
    located = locate_questions(question_set, texts.get, f"dataset {snapshot.path}")
    chunks = snapshot.chunks(
        ["chunk_id", "doc_id", "start", "end", "n_chars", "n_tokens", "strategy", "embed_text"]
    )
    if chunks.num_rows == 0:
        raise EvaluationError(f"{snapshot.path}: the snapshot has no chunks to retrieve")
    chunk_ids = chunks.column("chunk_id").to_pylist()
    doc_ids = chunks.column("doc_id").to_pylist()
    spans = [
        Span(d, s, e)
        for d, s, e in zip(
            doc_ids, chunks.column("start").to_pylist(), chunks.column("end").to_pylist(), strict=True
        )
    ]
    embed_texts = chunks.column("embed_text").to_pylist()
    timings["load"] = time.perf_counter() - started

    label = label or f"{snapshot.name} v{snapshot.version}"
    queries = [q.question for q in located]
    max_k = ks[-1]
    if max_k > len(spans):
        say(
            f"note: {label} has {plural(len(spans), 'chunk')}: k = {', '.join(str(k) for k in ks if k > len(spans))} "
            "retrieves every chunk"
        )
    summary: list[dict[str, Any]] = []
    per_question: list[dict[str, Any]] = []
    cache_status: str | None = None
    for name in retrievers:
        t0 = time.perf_counter()
        retriever: Retriever
        if name == "bm25":
            retriever = BM25Retriever(embed_texts)
            timings[f"{name}_index"] = time.perf_counter() - t0
            say(f"bm25: indexed {len(spans):,} chunks in {timings['bm25_index']:.1f} s")
        else:
            cached = cached_embeddings(snapshot.path, chunk_ids, embed_texts, use_cache)
            cache_status = cached.status
            retriever = DenseRetriever(cached.vectors)
            timings[f"{name}_index"] = time.perf_counter() - t0
            how = (
                "read from the snapshot's cache" if cached.status == "hit" else f"embedded ({cached.status})"
            )
            say(f"dense: {len(spans):,} chunk embeddings {how} in {timings['dense_index']:.1f} s")
        t0 = time.perf_counter()
        rankings = retriever.search(queries, max_k)
        timings[f"{name}_search"] = time.perf_counter() - t0
        for k in ks:
            scores = []
            for question, ranking in zip(located, rankings, strict=True):
                top = ranking[:k]
                score = score_retrieval(question.spans, [spans[i] for i in top])
                scores.append(score)
                per_question.append(
                    {
                        "config": label,
                        "retriever": name,
                        "k": k,
                        "question_id": question.id,
                        "line": question.line,
                        "question": question.question,
                        "recall": score.recall,
                        "precision": score.precision,
                        "iou": score.iou,
                        "hit": score.hit,
                        "reciprocal_rank": score.reciprocal_rank,
                        "relevant_chars": score.relevant_chars,
                        "retrieved_chars": score.retrieved_chars,
                        "reference_chars": score.reference_chars,
                        "chunk_ids": [chunk_ids[i] for i in top],
                        "doc_ids": [doc_ids[i] for i in top],
                    }
                )
            summary.append({"config": label, "retriever": name, "k": k, **summarize(scores)})
    cost = measure_cost(
        snapshot,
        chunks.column("n_chars").to_numpy(),
        chunks.column("n_tokens").to_numpy().astype(float),
        embed_texts,
    )
    strategies = sorted(set(chunks.column("strategy").to_pylist()))
    timings["total"] = time.perf_counter() - started
    return ConfigEvaluation(
        label=label,
        dataset=snapshot.name,
        version=snapshot.version,
        snapshot=snapshot.number,
        snapshot_path=snapshot.path,
        config_hash=str(snapshot.manifest.get("config", {}).get("hash", "")),
        config_path=snapshot.manifest.get("config", {}).get("path"),
        strategy="+".join(strategies),
        retrievers=tuple(retrievers),
        ks=ks,
        questions=len(located),
        cost=cost,
        summary=summary,
        per_question=per_question,
        timings={key: round(value, 3) for key, value in timings.items()},
        embeddings_cache=cache_status,
    )


def measure_cost(
    snapshot: Snapshot, n_chars: np.ndarray, n_tokens: np.ndarray, embed_texts: Sequence[str]
) -> dict[str, float]:
    """What the config costs downstream: rows, embedded characters and tokens, overlap overhead."""
    from chunkyard.chunking.units import get_tokenizer

    tokenizer = get_tokenizer("cl100k_base")
    embedded_tokens = sum(tokenizer.count(text) for text in embed_texts)
    document_chars = int(np.sum(snapshot.documents(["n_chars"]).column("n_chars").to_numpy()))
    chunks = len(embed_texts)
    text_chars = int(n_chars.sum())
    return {
        "documents": int(snapshot.manifest.get("counts", {}).get("documents", 0)),
        "chunks": chunks,
        "document_chars": document_chars,
        "chunk_chars": text_chars,
        "embedded_chars": sum(len(text) for text in embed_texts),
        "embedded_tokens": embedded_tokens,
        "mean_chunk_chars": round(text_chars / chunks, 1) if chunks else 0.0,
        # n_tokens is null (NaN here) where the config did not count tokens.
        "mean_chunk_tokens": round(float(np.nanmean(n_tokens)), 1)
        if chunks and not np.isnan(n_tokens).all()
        else 0.0,
        "mean_embedded_tokens": round(embedded_tokens / chunks, 1) if chunks else 0.0,
        "overlap_factor": round(text_chars / document_chars, 3) if document_chars else 0.0,
    }
