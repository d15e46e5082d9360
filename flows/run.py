"""The chunking flow: discover → chunk batches (Prefect tasks) → write the snapshot → publish.

Thin orchestration over ``chunking.pipeline``. Tasks take batches of documents (a task costs
milliseconds of overhead, a document often less), receive the config as text so that workers in
other processes or on other machines need nothing from this one's environment, and are retried
on transient errors. Results are written in submission order, so output is deterministic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.task_runners import ThreadPoolTaskRunner

from chunking.config import Config, load_config_text
from chunking.dataset import SnapshotWriter
from chunking.documents import SourceFile, Skipped
from chunking.pipeline import (
    BatchResult,
    RunStats,
    build_manifest,
    carried_over,
    chunk_files,
    discover_files,
    make_batches,
    prepare_run,
)


@dataclass
class RunResult:
    snapshot: Path | None
    manifest: dict[str, Any]
    stats: RunStats = field(repr=False, default_factory=RunStats)

    @property
    def skipped(self) -> int:
        return len(self.manifest.get("skipped", []))


# Called with (documents_done, bytes_done, finished_discovering, documents_found) after each batch.
ProgressHook = Callable[[int, int, bool, int], None]
progress_hook: ProgressHook | None = None


@lru_cache(maxsize=8)
def _config_from_text(text: str, path: str | None) -> Config:
    return load_config_text(text, Path(path) if path else None)


@task(name="chunk batch", task_run_name="chunk batch {index}", retries=2, retry_delay_seconds=1)
def chunk_batch(config_text: str, config_path: str | None, files: list[SourceFile],
                previous_sha: dict[str, str], index: int) -> BatchResult:
    config = _config_from_text(config_text, config_path)
    return chunk_files(config, files, previous_sha)


@flow(name="chunkyard-run", flow_run_name="chunk {config_name}", log_prints=True)
def chunk_corpus(config_text: str, config_path: str | None = None, config_name: str = "",
                 source: str | None = None, output: str | None = None, kind: str = "auto",
                 max_in_flight: int = 4) -> RunResult:
    """Chunk the config's source folder into the next snapshot of its dataset version.

    The config travels as its text (plus the path its relative paths resolve against), so the
    parameters Prefect records are plain strings and workers rebuild the same config.
    """
    config = _config_from_text(config_text, config_path)
    context = prepare_run(config, Path(source) if source else None, Path(output) if output else None)
    if kind == "auto":
        kind = "refresh" if context.previous else "full"
    writer = SnapshotWriter(context.version_path)
    stats = RunStats()
    try:
        pending: deque[tuple[Any, list[Skipped]]] = deque()
        found = 0
        done_docs = 0
        done_bytes = 0

        def drain(limit: int) -> None:
            nonlocal done_docs, done_bytes
            while len(pending) > limit:
                future, skipped = pending.popleft()
                result: BatchResult = future.result()
                _record(result, skipped, context, writer, stats)
                done_docs += len(result.chunked) + len(result.reused) + len(result.skipped) + len(skipped)
                done_bytes += result.n_bytes
                if progress_hook:
                    progress_hook(done_docs, done_bytes, False, found)

        for index, (files, skipped) in enumerate(make_batches(discover_files(context)), start=1):
            found += len(files) + len(skipped)
            batch_sha = {f.doc_id: context.previous_sha[f.doc_id] for f in files if f.doc_id in context.previous_sha}
            future = chunk_batch.submit(config.text, config_path, files, batch_sha, index)
            pending.append((future, skipped))
            drain(max_in_flight)
        drain(0)
        if progress_hook:
            progress_hook(done_docs, done_bytes, True, found)
        removed = sorted(set(context.previous_sha) - stats.seen - {s.doc_id for s in stats.skipped})
        manifest = build_manifest(context, stats, kind, removed)
        snapshot = writer.publish(manifest)
    except BaseException:
        writer.abort()
        raise
    manifest["snapshot"] = int(snapshot.name)
    return RunResult(snapshot, manifest, stats)


def _record(result: BatchResult, skipped: list[Skipped], context, writer: SnapshotWriter, stats: RunStats) -> None:
    writer.write(result.documents, result.chunks)
    stats.add(result.documents, result.chunks)
    if result.reused and context.previous is not None:
        documents, chunks = carried_over(context.previous, result.reused)
        writer.write(documents, chunks)
        stats.add(documents, chunks)
    stats.reused.extend(result.reused)
    for doc_id in result.chunked:
        (stats.changed if doc_id in context.previous_sha else stats.new).append(doc_id)
    stats.skipped.extend(skipped)
    stats.skipped.extend(result.skipped)
    stats.n_bytes += result.n_bytes


def run(config: Config, source: Path | None = None, output: Path | None = None, *,
        task_runner: str = "thread", kind: str = "auto") -> RunResult:
    """Run the flow with the chosen task runner (thread here; process and dask come with scale-out)."""
    if task_runner != "thread":
        raise ValueError(f"task runner {task_runner!r} is not available yet (use thread)")
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    runner = ThreadPoolTaskRunner(max_workers=2)
    # The heartbeat thread adds about a second at exit; a batch job does not need it.
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        return chunk_corpus.with_options(task_runner=runner)(
            config.text,
            str(config.path) if config.path else None,
            config_name=f"{config.name} v{config.version}",
            source=str(source) if source else None,
            output=str(output) if output else None,
            kind=kind,
        )
