"""Batch sizing: equal batches for threads, guided (decreasing) batches for processes and Dask."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from chunkyard.chunking.documents import SourceFile
from chunkyard.chunking.pipeline import MAX_BATCH_BYTES, MAX_GUIDED_BATCH_BYTES, Survey, make_batches


def files_of(sizes: list[int]) -> list[SourceFile]:
    return [SourceFile(f"{i}.md", Path(f"/x/{i}.md"), size) for i, size in enumerate(sizes)]


def test_guided_batches_shrink_cover_everything_and_are_counted_exactly():
    rng = np.random.default_rng(7)
    sizes = [int(s) for s in rng.lognormal(10, 1.2, 700)]  # a corpus of mixed sizes, ~20 MB
    survey = Survey(len(sizes), sum(sizes), np.asarray(sizes))
    for workers in (1, 2, 4):
        target = survey.guided_target(workers)
        batches = [files for files, _ in make_batches(files_of(sizes), target)]
        assert survey.count_batches(target) == len(batches)
        assert sum(f.size for b in batches for f in b) == sum(sizes)
        totals = [sum(f.size for f in b) for b in batches]
        assert totals[0] >= min(survey.total_bytes / (2 * workers), MAX_GUIDED_BATCH_BYTES)
        assert totals[0] > 2 * totals[-1]
        # The cap bounds memory: no batch (but for its last file) is over it.
        assert all(
            total - max(f.size for f in b) < MAX_GUIDED_BATCH_BYTES
            for total, b in zip(totals, batches, strict=True)
        )
        # Fewer tasks than six equal batches per worker, the thread runner's sizing.
        assert len(batches) < survey.count_batches(survey.batch_target(workers))


def test_batches_are_capped_whatever_the_corpus_size():
    sizes = [50_000] * 4000  # 200 MB
    survey = Survey(len(sizes), sum(sizes), np.asarray(sizes))
    assert survey.batch_target(1) == MAX_BATCH_BYTES
    assert survey.guided_target(2)(0) == MAX_GUIDED_BATCH_BYTES


def test_constant_target_is_unchanged():
    sizes = [100] * 50
    batches = [len(b) for b, _ in make_batches(files_of(sizes), target_bytes=1000)]
    assert batches == [10] * 5


def _reference_add(stats, documents, chunks, reasons=None):
    """RunStats.add as it was written first, one chunk at a time: the reference for the fast one."""
    from collections import Counter

    stats.documents += documents.num_rows
    stats.chunks += chunks.num_rows
    stats.seen.update(documents.column("doc_id").to_pylist())
    for doc_id, strategy in zip(
        documents.column("doc_id").to_pylist(), documents.column("strategy").to_pylist(), strict=True
    ):
        stats.doc_counts[stats._key(doc_id, strategy)] += 1
    columns = {
        name: chunks.column(name).to_pylist()
        for name in ("strategy", "size", "findings", "doc_id", "chunk_index", "unit")
    }
    for row, (strategy, size, codes) in enumerate(
        zip(columns["strategy"], columns["size"], columns["findings"], strict=True)
    ):
        key = stats._key(columns["doc_id"][row], strategy)
        stats.sizes.setdefault(key, []).append(size)
        stats.chunk_counts[key] += 1
        stats.findings.setdefault(key, Counter()).update(set(codes))
        if "over_budget" in codes:
            doc_id, index = columns["doc_id"][row], columns["chunk_index"][row]
            stats.over_budget.append(
                {
                    "doc_id": doc_id,
                    "chunk_index": index,
                    "size": size,
                    "unit": columns["unit"][row],
                    "reason": (reasons or {}).get(
                        (doc_id, index), "a unit that cannot be split is larger than the budget"
                    ),
                }
            )


def test_run_stats_add_counts_as_the_chunk_by_chunk_reference():
    import random

    import pyarrow as pa

    from chunkyard.chunking.pipeline import RunStats

    rng = random.Random(3)
    codes = ["mid_sentence_end", "over_budget", "split_list", "heading_at_end", "high_overlap"]
    for trial in range(40):
        rule_of = (lambda doc_id: "notes" if doc_id.startswith("n") else "defaults") if trial % 2 else None
        fast, slow = RunStats(rule_of=rule_of), RunStats(rule_of=rule_of)
        for _batch in range(rng.randint(1, 4)):
            docs = [f"{rng.choice('nd')}{rng.randint(0, 30)}.md" for _ in range(rng.randint(0, 6))]
            rows = [
                (doc, rng.choice(["markdown", "code"]), index)
                for doc in docs
                for index in range(rng.randint(0, 5))
            ]
            documents = pa.table(
                {"doc_id": docs, "strategy": [rng.choice(["markdown", "code"]) for _ in docs]}
            )
            chunks = pa.table(
                {
                    "doc_id": [r[0] for r in rows],
                    "strategy": [r[1] for r in rows],
                    "chunk_index": [r[2] for r in rows],
                    "size": [rng.randint(1, 600) for _ in rows],
                    "unit": ["tokens"] * len(rows),
                    "findings": pa.array(
                        [rng.sample(codes, rng.choice([0, 0, 0, 1, 2])) for _ in rows],
                        type=pa.list_(pa.string()),
                    ),
                }
            )
            reasons = (
                {(rows[0][0], rows[0][2]): "a single grapheme is larger than the budget"} if rows else {}
            )
            fast.add(documents, chunks, reasons)
            _reference_add(slow, documents, chunks, reasons)
        assert (fast.documents, fast.chunks, fast.seen, fast.doc_counts) == (
            slow.documents,
            slow.chunks,
            slow.seen,
            slow.doc_counts,
        )
        assert {k: sorted(v) for k, v in fast.sizes.items()} == {k: sorted(v) for k, v in slow.sizes.items()}
        assert fast.chunk_counts == slow.chunk_counts and fast.findings == slow.findings
        assert fast.over_budget == slow.over_budget
