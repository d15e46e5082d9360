"""Character-level retrieval metrics (Chroma's method) on hand-computed cases."""

from __future__ import annotations

import pytest

from chunkyard.chunking.evaluation.metrics import merge_ranges, score_retrieval, summarize, total_length
from chunkyard.chunking.evaluation.questions import Span


def ref(start: int, end: int, doc: str = "a.md") -> Span:
    return Span(doc, start, end)


chunk = ref


def test_merge_ranges_joins_overlapping_and_touching():
    assert merge_ranges([(5, 10), (0, 3), (8, 12), (12, 15), (20, 20)]) == [(0, 3), (5, 15)]
    assert total_length([(0, 10), (5, 15)]) == 15


def test_chunk_equal_to_reference_scores_one():
    score = score_retrieval([ref(100, 200)], [chunk(100, 200)])
    assert (score.recall, score.precision, score.iou) == (1.0, 1.0, 1.0)
    assert score.hit and score.reciprocal_rank == 1.0


def test_half_overlap():
    # reference [0,100), chunk [50,150): 50 relevant chars of 100 retrieved, union 150.
    score = score_retrieval([ref(0, 100)], [chunk(50, 150)])
    assert score.recall == pytest.approx(0.5)
    assert score.precision == pytest.approx(0.5)
    assert score.iou == pytest.approx(50 / 150)
    assert score.hit


def test_chunk_covering_half_of_a_long_reference():
    # reference [0,200), chunk [0,100) inside it: recall 1/2, precision 1, IoU 100/200.
    score = score_retrieval([ref(0, 200)], [chunk(0, 100)])
    assert (score.recall, score.precision, score.iou) == (0.5, 1.0, 0.5)


def test_overlapping_chunks_count_once_in_recall_and_twice_in_precision():
    # Chunks [0,60) and [40,100) overlap on [40,60). Reference [0,100) is fully covered:
    # relevant = 100 (merged), retrieved = 60 + 60 = 120 (not merged).
    score = score_retrieval([ref(0, 100)], [chunk(0, 60), chunk(40, 100)])
    assert score.relevant_chars == 100
    assert score.retrieved_chars == 120
    assert score.recall == pytest.approx(1.0)
    assert score.precision == pytest.approx(100 / 120)
    assert score.iou == pytest.approx(100 / 120)


def test_same_chunk_twice_is_paid_twice():
    score = score_retrieval([ref(0, 100)], [chunk(0, 100), chunk(0, 100)])
    assert score.recall == 1.0
    assert score.precision == pytest.approx(0.5)
    assert score.iou == pytest.approx(0.5)


def test_no_hit():
    score = score_retrieval([ref(0, 100)], [chunk(100, 200), chunk(300, 400)])
    assert (score.recall, score.precision, score.iou) == (0.0, 0.0, 0.0)
    assert not score.hit and score.reciprocal_rank == 0.0


def test_same_offsets_in_another_document_do_not_count():
    score = score_retrieval([ref(0, 100, "a.md")], [chunk(0, 100, "b.md")])
    assert score.recall == 0.0 and not score.hit


def test_reciprocal_rank_is_the_first_overlapping_chunk():
    score = score_retrieval([ref(500, 600)], [chunk(0, 100), chunk(200, 300), chunk(550, 650)])
    assert score.reciprocal_rank == pytest.approx(1 / 3)
    # precision over all three retrieved chunks: 50 relevant of 300.
    assert score.precision == pytest.approx(50 / 300)
    assert score.iou == pytest.approx(50 / (300 + 100 - 50))


def test_several_references_and_documents():
    # Two references in a.md, one in b.md (300 reference chars); chunks cover 50 of each a.md
    # reference and all of b.md's, plus 100 irrelevant chars.
    refs = [ref(0, 100), ref(200, 300), ref(0, 100, "b.md")]
    chunks = [chunk(50, 150), chunk(250, 300), chunk(0, 100, "b.md")]
    score = score_retrieval(refs, chunks)
    assert score.reference_chars == 300
    assert score.relevant_chars == 50 + 50 + 100
    assert score.retrieved_chars == 100 + 50 + 100
    assert score.recall == pytest.approx(200 / 300)
    assert score.precision == pytest.approx(200 / 250)
    assert score.iou == pytest.approx(200 / (250 + 300 - 200))


def test_overlapping_references_are_merged():
    score = score_retrieval([ref(0, 100), ref(50, 150)], [chunk(0, 150)])
    assert score.reference_chars == 150
    assert (score.recall, score.precision, score.iou) == (1.0, 1.0, 1.0)


def test_nothing_retrieved():
    score = score_retrieval([ref(0, 10)], [])
    assert (score.recall, score.precision, score.iou, score.hit) == (0.0, 0.0, 0.0, False)


def test_summarize_means_spread_hit_rate_and_mrr():
    scores = [
        score_retrieval([ref(0, 100)], [chunk(0, 100)]),  # recall 1, rr 1
        score_retrieval([ref(0, 100)], [chunk(200, 300), chunk(0, 50)]),  # recall .5, rr 1/2
        score_retrieval([ref(0, 100)], [chunk(200, 300)]),  # no hit
        score_retrieval([ref(0, 100)], [chunk(300, 400), chunk(400, 500), chunk(0, 100)]),  # rr 1/3
    ]
    summary = summarize(scores)
    assert summary["questions"] == 4
    assert summary["recall_mean"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert summary["recall_std"] == pytest.approx(0.4145780, abs=1e-6)
    assert summary["hit_rate"] == pytest.approx(0.75)
    assert summary["mrr"] == pytest.approx((1 + 0.5 + 0 + 1 / 3) / 4)
