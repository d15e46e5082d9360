"""Batch sizing: equal batches for threads, guided (decreasing) batches for processes and Dask."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from chunking.documents import SourceFile
from chunking.pipeline import MAX_BATCH_BYTES, MAX_GUIDED_BATCH_BYTES, Survey, make_batches


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
        assert all(total - max(f.size for f in b) < MAX_GUIDED_BATCH_BYTES for total, b in zip(totals, batches, strict=True))
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
