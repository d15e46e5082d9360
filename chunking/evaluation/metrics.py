"""Character-level retrieval metrics, after Chroma's chunking evaluation ("Evaluating Chunking
Strategies for Retrieval", Smith & Troynikov, 2024).

Method. For one question with reference spans R and retrieved chunks c_1..c_k (spans of the same
documents' extracted text):

- ``relevant``  = |(∪ R) ∩ (∪ c_i)| — reference characters covered by any retrieved chunk, counted
  once even when overlapping chunks both cover them (merged spans);
- ``retrieved`` = Σ |c_i| — every retrieved chunk's characters, *not* merged: overlapping chunks
  are paid for twice, because the reader (an LLM prompt) receives both copies;
- ``reference`` = |∪ R|.

recall = relevant / reference; precision = relevant / retrieved;
IoU = relevant / (retrieved + reference − relevant) (Chroma's denominator: all retrieved characters
plus the reference characters no chunk covered). A *hit* is relevant > 0; the reciprocal rank is
1 / rank of the first chunk that overlaps a reference (0 when none does). Spans of different
documents never intersect.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from chunkyard.chunking.evaluation.questions import Span

Range = tuple[int, int]


def merge_ranges(ranges: Iterable[Range]) -> list[Range]:
    """Union of half-open ranges as sorted, disjoint ranges (touching ranges are joined)."""
    merged: list[list[int]] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def total_length(ranges: Iterable[Range]) -> int:
    """Characters covered by the union of ``ranges``."""
    return sum(end - start for start, end in merge_ranges(ranges))


def intersect(a: Range, b: Range) -> Range | None:
    start, end = max(a[0], b[0]), min(a[1], b[1])
    return (start, end) if start < end else None


@dataclass(frozen=True, slots=True)
class QuestionScore:
    recall: float
    precision: float
    iou: float
    hit: bool
    reciprocal_rank: float
    relevant_chars: int
    retrieved_chars: int
    reference_chars: int


def score_retrieval(references: Sequence[Span], retrieved: Sequence[Span]) -> QuestionScore:
    """Score one question's ranked retrieved chunks against its reference spans (see module doc)."""
    reference_by_doc: dict[str, list[Range]] = defaultdict(list)
    for ref in references:
        reference_by_doc[ref.doc_id].append((ref.start, ref.end))
    merged_refs = {doc: merge_ranges(ranges) for doc, ranges in reference_by_doc.items()}
    reference_chars = sum(end - start for ranges in merged_refs.values() for start, end in ranges)

    overlaps: dict[str, list[Range]] = defaultdict(list)
    retrieved_chars = 0
    first_rank = 0
    for rank, chunk in enumerate(retrieved, start=1):
        retrieved_chars += chunk.end - chunk.start
        for ref_range in merged_refs.get(chunk.doc_id, ()):
            common = intersect((chunk.start, chunk.end), ref_range)
            if common is not None:
                overlaps[chunk.doc_id].append(common)
                if not first_rank:
                    first_rank = rank
    relevant = sum(total_length(ranges) for ranges in overlaps.values())
    union = retrieved_chars + reference_chars - relevant
    return QuestionScore(
        recall=relevant / reference_chars if reference_chars else 0.0,
        precision=relevant / retrieved_chars if retrieved_chars else 0.0,
        iou=relevant / union if union else 0.0,
        hit=relevant > 0,
        reciprocal_rank=1.0 / first_rank if first_rank else 0.0,
        relevant_chars=relevant,
        retrieved_chars=retrieved_chars,
        reference_chars=reference_chars,
    )


METRICS = ("recall", "precision", "iou")


def summarize(scores: Sequence[QuestionScore]) -> dict[str, float]:
    """Mean and spread (population standard deviation) over questions, hit rate and MRR."""
    out: dict[str, float] = {"questions": len(scores)}
    for name in METRICS:
        values = np.asarray([getattr(s, name) for s in scores], dtype=np.float64)
        out[f"{name}_mean"] = float(values.mean()) if values.size else 0.0
        out[f"{name}_std"] = float(values.std()) if values.size else 0.0
    out["hit_rate"] = float(np.mean([s.hit for s in scores])) if scores else 0.0
    out["mrr"] = float(np.mean([s.reciprocal_rank for s in scores])) if scores else 0.0
    return out
