"""Evaluation results on disk: a comparison folder per ``chunkyard eval`` run, and a record per snapshot.

Method. A run writes its ``--out`` folder (``summary.parquet``: one row per config × retriever × k;
``questions.parquet``: one row per config × retriever × k × question; ``results.json``; ``chart.png``).
Each evaluated snapshot also gets a record, so that its evaluations can be found from the dataset
alone: ``OUTPUT/NAME/vX/.evaluations/NNNN/<UTC time>-<questions>-<id>/`` with ``evaluation.json``
and that config's ``questions.parquet``. Records sit beside the snapshot, never inside it (published
snapshots are read-only and immutable); hidden folders are ignored by snapshot discovery. A record is
written under a staging name and renamed into place, so readers never see half of one.
``latest_evaluation(path)`` takes any path ``Snapshot`` accepts and returns the newest record.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chunkyard.chunking.dataset import list_snapshots, resolve_snapshot
from chunkyard.chunking.evaluation.questions import QuestionSet
from chunkyard.chunking.evaluation.runner import ConfigEvaluation

EVALUATIONS_DIR = ".evaluations"
RECORD = "evaluation.json"
QUESTIONS = "questions.parquet"
SUMMARY = "summary.parquet"
RESULTS = "results.json"
CHART = "chart.png"
FORMAT_VERSION = 1

COST_COLUMNS = (
    "chunks",
    "embedded_chars",
    "embedded_tokens",
    "mean_chunk_chars",
    "mean_chunk_tokens",
    "overlap_factor",
)

SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("config", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("snapshot", pa.int32(), nullable=False),
        pa.field("config_hash", pa.string(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
        pa.field("retriever", pa.string(), nullable=False),
        pa.field("k", pa.int32(), nullable=False),
        pa.field("questions", pa.int32(), nullable=False),
        pa.field("recall_mean", pa.float64(), nullable=False),
        pa.field("recall_std", pa.float64(), nullable=False),
        pa.field("precision_mean", pa.float64(), nullable=False),
        pa.field("precision_std", pa.float64(), nullable=False),
        pa.field("iou_mean", pa.float64(), nullable=False),
        pa.field("iou_std", pa.float64(), nullable=False),
        pa.field("hit_rate", pa.float64(), nullable=False),
        pa.field("mrr", pa.float64(), nullable=False),
        pa.field("chunks", pa.int64(), nullable=False),
        pa.field("embedded_chars", pa.int64(), nullable=False),
        pa.field("embedded_tokens", pa.int64(), nullable=False),
        pa.field("mean_chunk_chars", pa.float64(), nullable=False),
        pa.field("mean_chunk_tokens", pa.float64(), nullable=False),
        pa.field("overlap_factor", pa.float64(), nullable=False),
    ]
)

QUESTIONS_SCHEMA = pa.schema(
    [
        pa.field("config", pa.string(), nullable=False),
        pa.field("retriever", pa.string(), nullable=False),
        pa.field("k", pa.int32(), nullable=False),
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("line", pa.int32(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("recall", pa.float64(), nullable=False),
        pa.field("precision", pa.float64(), nullable=False),
        pa.field("iou", pa.float64(), nullable=False),
        pa.field("hit", pa.bool_(), nullable=False),
        pa.field("reciprocal_rank", pa.float64(), nullable=False),
        pa.field("relevant_chars", pa.int64(), nullable=False),
        pa.field("retrieved_chars", pa.int64(), nullable=False),
        pa.field("reference_chars", pa.int64(), nullable=False),
        pa.field("chunk_ids", pa.list_(pa.string()), nullable=False),
        pa.field("doc_ids", pa.list_(pa.string()), nullable=False),
    ]
)


def summary_rows(evaluation: ConfigEvaluation) -> list[dict[str, Any]]:
    rows = []
    for row in evaluation.summary:
        rows.append(
            {
                **{name: row[name] for name in SUMMARY_SCHEMA.names if name in row},
                "dataset": evaluation.dataset,
                "version": evaluation.version,
                "snapshot": evaluation.snapshot,
                "config_hash": evaluation.config_hash,
                "strategy": evaluation.strategy,
                "questions": int(row["questions"]),
                **{name: evaluation.cost[name] for name in COST_COLUMNS},
            }
        )
    return rows


def summary_table(evaluations: list[ConfigEvaluation]) -> pa.Table:
    rows = [row for evaluation in evaluations for row in summary_rows(evaluation)]
    return pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA)


def questions_table(evaluations: list[ConfigEvaluation]) -> pa.Table:
    rows = [row for evaluation in evaluations for row in evaluation.per_question]
    return pa.Table.from_pylist(rows, schema=QUESTIONS_SCHEMA)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def questions_info(question_set: QuestionSet) -> dict[str, Any]:
    return {
        "path": str(question_set.path) if question_set.path else question_set.label,
        "sha256": question_set.sha256,
        "count": len(question_set.questions),
    }


def write_results(
    evaluations: list[ConfigEvaluation], question_set: QuestionSet, out_dir: Path, *, chart: bool = True
) -> dict[str, Path]:
    """Write the comparison folder; returns the paths written by kind."""
    from chunkyard.chunking.pipeline import CHUNKYARD_VERSION

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out_dir / SUMMARY, "questions": out_dir / QUESTIONS, "json": out_dir / RESULTS}
    pq.write_table(summary_table(evaluations), paths["summary"], compression="zstd")
    pq.write_table(questions_table(evaluations), paths["questions"], compression="zstd")
    if chart:
        from chunkyard.chunking.evaluation.report import write_chart

        paths["chart"] = write_chart(evaluations, out_dir / CHART)
    payload = {
        "format_version": FORMAT_VERSION,
        "created_at": _now().isoformat(),
        "chunkyard_version": CHUNKYARD_VERSION,
        "questions": questions_info(question_set),
        "metrics": "character-level recall, precision, IoU (Chroma's method), hit rate, MRR at each k",
        "configs": [evaluation.describe() for evaluation in evaluations],
        "files": {kind: path.name for kind, path in paths.items() if kind != "json"},
    }
    _write_json(paths["json"], payload)
    return paths


# ---------------------------------------------------------------------------------------------
# Records beside the snapshot


def evaluations_dir(snapshot_path: Path) -> Path:
    """``OUTPUT/NAME/vX/.evaluations/NNNN``: where a snapshot's evaluation records live."""
    return snapshot_path.parent / EVALUATIONS_DIR / snapshot_path.name


def record_evaluation(
    evaluation: ConfigEvaluation,
    question_set: QuestionSet,
    compared_with: list[str] | None = None,
    out_dir: Path | None = None,
) -> Path | None:
    """Store the evaluation beside its snapshot; returns the record folder, or None if not writable."""
    from chunkyard.chunking.pipeline import CHUNKYARD_VERSION

    created = dt.datetime.now(dt.UTC)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(question_set.label).stem)[:40] or "questions"
    # The name starts with the time to the microsecond, so names sort in the order records were made.
    name = f"{created.strftime('%Y%m%dT%H%M%S%fZ')}-{stem}-{uuid.uuid4().hex[:6]}"
    parent = evaluations_dir(evaluation.snapshot_path)
    staging = parent / f".staging-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        staging.mkdir(parents=True)
        pq.write_table(questions_table([evaluation]), staging / QUESTIONS, compression="zstd")
        _write_json(
            staging / RECORD,
            {
                "format_version": FORMAT_VERSION,
                "created_at": created.replace(microsecond=0).isoformat(),
                "chunkyard_version": CHUNKYARD_VERSION,
                "questions": questions_info(question_set),
                "compared_with": compared_with or [],
                "results_folder": str(out_dir.resolve()) if out_dir else None,
                **evaluation.describe(),
            },
        )
        target = parent / name
        os.rename(staging, target)
        return target
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return None


@dataclass
class StoredEvaluation:
    """One evaluation record of a snapshot, as ``latest_evaluation`` finds it."""

    path: Path  # the record folder
    record: dict[str, Any]  # evaluation.json

    @property
    def created_at(self) -> str:
        return str(self.record.get("created_at", ""))

    @property
    def snapshot(self) -> int:
        return int(self.record.get("snapshot", 0))

    @property
    def snapshot_path(self) -> Path:
        return Path(self.record.get("snapshot_path", ""))

    @property
    def summary(self) -> list[dict[str, Any]]:
        """Rows of retriever, k, questions, recall/precision/iou mean and std, hit_rate, mrr."""
        return list(self.record.get("summary", []))

    @property
    def cost(self) -> dict[str, float]:
        return dict(self.record.get("cost", {}))

    def per_question(self) -> pa.Table:
        """One row per retriever × k × question (schema ``QUESTIONS_SCHEMA``)."""
        return pq.read_table(self.path / QUESTIONS)


def list_evaluations(path: str | Path) -> list[StoredEvaluation]:
    """The evaluation records of the snapshot ``path`` opens, oldest first."""
    snapshot = resolve_snapshot(path)
    return _records_in(evaluations_dir(snapshot))


def latest_evaluation(path: str | Path, *, earlier_snapshots: bool = True) -> StoredEvaluation | None:
    """The newest evaluation of the snapshot ``path`` opens (``OUTPUT/NAME``, ``.../vX`` or ``.../NNNN``).

    With ``earlier_snapshots`` (the default), a snapshot never evaluated falls back to the newest
    evaluation of an earlier snapshot of the same version; ``StoredEvaluation.snapshot`` says which.
    None when there is none.
    """
    snapshot = resolve_snapshot(path)
    records = _records_in(evaluations_dir(snapshot))
    if records:
        return records[-1]
    if earlier_snapshots:
        number = int(snapshot.name)
        for earlier in reversed([n for n in list_snapshots(snapshot.parent) if n < number]):
            records = _records_in(evaluations_dir(snapshot.parent / f"{earlier:04d}"))
            if records:
                return records[-1]
    return None


def _records_in(folder: Path) -> list[StoredEvaluation]:
    if not folder.is_dir():
        return []
    found = []
    for child in sorted(folder.iterdir()):
        if child.name.startswith(".") or not (child / RECORD).is_file():
            continue
        try:
            record = json.loads((child / RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.append(StoredEvaluation(child, record))
    found.sort(key=lambda item: item.path.name)
    return found


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
