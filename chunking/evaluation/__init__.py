"""Retrieval evaluation of chunking configs: question sets, BM25 and dense retrievers, character metrics.

Method (after Chroma's chunking evaluation): each question carries reference spans of the documents'
extracted text; a retriever ranks the snapshot's chunks; recall, precision and IoU are measured in
characters on merged spans (overlapping chunks count once towards what was found and every time
towards what was read), with hit rate and MRR, at several k. The pure logic lives here; the
``chunkyard eval`` command only picks snapshots (reusing one whose config hash matches, else running
the chunking flow) and prints. Results are written to a comparison folder and beside each snapshot,
where ``latest_evaluation(path)`` finds them.

Modules: ``questions`` (JSONL loading, validation, locating), ``metrics``, ``retrievers`` (and the
per-snapshot embedding cache), ``runner`` (``evaluate_snapshot``), ``store`` (results on disk,
``latest_evaluation``), ``report`` (table and chart).
"""

from chunkyard.chunking.evaluation.metrics import QuestionScore, merge_ranges, score_retrieval, summarize
from chunkyard.chunking.evaluation.questions import (
    LocatedQuestion,
    Question,
    QuestionIssue,
    QuestionSet,
    QuestionSetError,
    Reference,
    Span,
    load_questions,
    locate_questions,
    parse_questions,
)
from chunkyard.chunking.evaluation.retrievers import RETRIEVERS, EvaluationError
from chunkyard.chunking.evaluation.runner import (
    ConfigEvaluation,
    evaluate_snapshot,
    parse_ks,
    reusable_snapshot,
)
from chunkyard.chunking.evaluation.store import (
    StoredEvaluation,
    latest_evaluation,
    list_evaluations,
    record_evaluation,
    write_results,
)

__all__ = [
    "RETRIEVERS",
    "ConfigEvaluation",
    "EvaluationError",
    "LocatedQuestion",
    "Question",
    "QuestionIssue",
    "QuestionScore",
    "QuestionSet",
    "QuestionSetError",
    "Reference",
    "Span",
    "StoredEvaluation",
    "evaluate_snapshot",
    "latest_evaluation",
    "list_evaluations",
    "load_questions",
    "locate_questions",
    "merge_ranges",
    "parse_ks",
    "parse_questions",
    "record_evaluation",
    "reusable_snapshot",
    "score_retrieval",
    "summarize",
    "write_results",
]
