"""The chunking flow: discover → chunk batches (Prefect tasks) → write the snapshot → publish.

Thin orchestration over ``chunkyard.chunking.pipeline``. Tasks take batches of documents (a task costs
milliseconds of overhead in a thread and a few hundred in a process, a document often less),
receive the config as text so that workers in other processes or on other machines need nothing
from this one's environment, and are retried on transient errors. Results are written in
submission order, so output is the same whichever task runner ran the tasks.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from chunkyard.chunking.config import Config, load_config_text
from chunkyard.chunking.constraints import Constraint
from chunkyard.chunking.dataset import (
    CHUNKS,
    DOCUMENTS,
    ObjectStoreSnapshotWriter,
    PartCutter,
    PreviousRows,
    SnapshotWriter,
    WorkerPart,
    snapshot_writer,
    write_part,
    write_worker_parts,
)
from chunkyard.chunking.documents import Skipped, SourceFile
from chunkyard.chunking.pipeline import (
    MAX_BATCH_FILES,
    STATS_COLUMNS,
    BatchResult,
    BatchTarget,
    RunStats,
    build_manifest,
    carried_constraints,
    check_removals,
    chunk_files,
    discover_files,
    kept_documents,
    make_batches,
    nothing_changed,
    prepare_run,
    previous_over_budget,
    survey,
)
from chunkyard.chunking.storage import Location
from chunkyard.flows.prefect_compat import (
    ForkserverProcessPoolTaskRunner,
    cache_settings_serialization,
    forget_result,
)

TASK_RUNNERS = ("thread", "process", "dask")


class RunResult:
    """What a run published. A plain class on purpose: Prefect walks a flow's dataclass return value
    for futures, and the stats hold a size per chunk (≈0.25 s of walking on a 20 MB corpus)."""

    __slots__ = ("snapshot", "manifest", "stats", "published")

    def __init__(
        self,
        snapshot: Location | None,
        manifest: dict[str, Any],
        stats: RunStats | None = None,
        published: bool = True,
    ):
        self.snapshot = (
            snapshot  # a local folder, or a chunkyard.chunking.storage.StoragePath for a URI output
        )
        self.manifest = manifest
        self.stats = stats if stats is not None else RunStats()
        # False for a refresh that found nothing new, changed or removed (``nothing_changed``):
        # ``snapshot`` and ``manifest`` are then the previous snapshot's, which still holds everything.
        self.published = published

    def __repr__(self) -> str:
        return f"RunResult(snapshot={self.snapshot!r}, manifest={{...}})"

    @property
    def skipped(self) -> int:
        return len(self.manifest.get("skipped", []))


# Called with (documents_done, bytes_done, total_documents, total_bytes) after each batch.
ProgressHook = Callable[[int, int, int, int], None]


@lru_cache(maxsize=8)
def config_from_text(text: str, path: str | None) -> Config:
    """The config a task receives as text (tasks pass the text, not the object, so a worker process
    parses it once): cached per text within a process."""
    return load_config_text(text, Path(path) if path else None)


@task(name="chunk batch", task_run_name="chunk batch {index}/{total}", retries=2, retry_delay_seconds=1)
def chunk_batch(
    config_text: str,
    config_path: str | None,
    files: list[SourceFile],
    previous_sha: dict[str, str],
    index: int,
    total: int,
    constraints: dict[str, list[Constraint]] | None = None,
    part_folder: str | None = None,
    part_target: int = 0,
) -> BatchResult | WorkerBatch:
    # Reviewer constraints travel as parameters: a Dask worker has no access to the ledger.
    config = config_from_text(config_text, config_path)
    result = chunk_files(config, files, previous_sha, constraints)
    if part_folder:  # a worker process writes its batch itself and returns the statistics only
        return worker_parts(result, files, part_folder, f"batch-{index:06d}", part_target)
    return result


@dataclass
class WorkerBatch:
    """What a worker process returns for a batch it wrote: the parts it cut and wrote (the flow
    renames them into the snapshot), and ``result`` holding the statistics' columns of every row,
    with the rows of the documents in no written part in ``result.part``'s files."""

    result: BatchResult
    parts: list[WorkerPart]


def worker_parts(
    result: BatchResult, files: list[SourceFile], part_folder: str, name: str, part_target: int
) -> WorkerBatch:
    """Cut the batch into the snapshot's parts and write them (compressed on this worker's core)."""
    chunked, reused = set(result.chunked), set(result.reused)
    sizes = dict(
        zip(
            result.documents.column("doc_id").to_pylist(),
            result.documents.column("n_bytes").to_pylist(),
            strict=True,
        )
    )
    sequence = [
        (f.doc_id, sizes[f.doc_id] if f.doc_id in chunked else f.size, f.doc_id in reused)
        for f in files
        if f.doc_id in chunked or f.doc_id in reused
    ]
    parts, documents, chunks = write_worker_parts(
        part_folder, name, sequence, result.documents, result.chunks, part_target
    )
    result.part = write_part(part_folder, name, documents, chunks)
    result.documents = result.documents.select(STATS_COLUMNS["documents"])
    result.chunks = result.chunks.select(STATS_COLUMNS["chunks"])
    return WorkerBatch(result, parts)


def part_aligned_batches(
    items: Iterable[SourceFile | Skipped], target_bytes: BatchTarget, part_target: int
) -> Iterator[tuple[list[SourceFile], list[Skipped]]]:
    """``make_batches``' batches, each closed only where the snapshot's parts end: ``PartCutter``
    over the discovered files' ids and sizes, the rule the writer applies to the documents' rows. A
    worker can then cut its batch into the snapshot's parts alone (``write_worker_parts``); where a
    file is skipped or its size differs, the flow's writer cuts those parts itself."""
    limit_of = target_bytes if callable(target_bytes) else (lambda done: target_bytes)
    cutter = PartCutter(part_target)
    batch: list[SourceFile] = []
    skipped: list[Skipped] = []
    size = done = 0
    limit = limit_of(0)
    for item in items:
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        batch.append(item)
        size += item.size
        if cutter.ends_after(item.doc_id, item.size) and (size >= limit or len(batch) >= MAX_BATCH_FILES):
            yield batch, skipped
            done += size
            limit = limit_of(done)
            batch, skipped, size = [], [], 0
    if batch or skipped:
        yield batch, skipped


@flow(name="chunkyard-run", flow_run_name="chunk {config_name}", log_prints=True)
def chunk_corpus(
    config_text: str,
    config_path: str | None = None,
    config_name: str = "",
    source: str | None = None,
    output: str | None = None,
    kind: str = "auto",
    workers: int = 1,
    task_runner: str = "thread",
    progress: ProgressHook | None = None,
    allow_mass_removal: bool = False,
) -> RunResult:
    """Chunk the config's source folder into the next snapshot of its dataset version.

    The config travels as its text (plus the path its relative paths resolve against), so the
    parameters Prefect records are plain strings and workers rebuild the same config. ``progress``,
    if given, is called in this process after each batch is written (Prefect's record of the
    parameter is an empty object).
    """
    config = config_from_text(config_text, config_path)
    # ``output`` stays a string (a path or a URI with its query) so that the flow's parameters are plain.
    context = prepare_run(config, Path(source) if source else None, output or None)
    if kind == "auto":
        kind = "refresh" if context.previous else "full"
    sizes = survey(context)
    # A task costs milliseconds in a thread, a few hundred ms of CPU in a process or on Dask.
    target = sizes.batch_target(workers) if task_runner == "thread" else sizes.guided_target(workers)
    total = sizes.count_batches(target)
    if progress:  # the totals are known: the bar shows 0/N, not 0/?, until the first batch
        progress(0, 0, sizes.files, sizes.total_bytes)
    # Worker processes write their batches' Parquet themselves (compressing on every core) and the
    # flow joins the parts at publish; a thread runner's batches are in this process already.
    # The writer shares the previous snapshot's parts that hold no changed document (hard links
    # locally, references on an object store): a refresh writes only what changed.
    writer = snapshot_writer(context.version_path, parts=task_runner == "process", previous=context.previous)
    part_folder = str(writer.part_folder) if writer.part_folder is not None else None
    stats = RunStats(rule_of=config.rule_label)
    carry = (
        PreviousRows(
            context.previous, {DOCUMENTS: STATS_COLUMNS["documents"], CHUNKS: STATS_COLUMNS["chunks"]}
        )
        if context.previous is not None
        else None
    )
    previous_reasons = previous_over_budget(context.previous) if context.previous is not None else {}
    try:
        pending: deque[tuple[Any, list[SourceFile], list[Skipped]]] = deque()
        done_docs = done_bytes = 0

        def drain(limit: int) -> None:
            nonlocal done_docs, done_bytes
            while len(pending) > limit:
                future, files, skipped = pending.popleft()
                result: BatchResult | WorkerBatch = future.result()
                forget_result(future)
                _record(result, files, skipped, context, writer, stats, carry, previous_reasons)
                batch = result.result if isinstance(result, WorkerBatch) else result
                done_docs += len(batch.chunked) + len(batch.reused) + len(batch.skipped)
                done_bytes += batch.n_bytes
                if progress is not None:
                    progress(done_docs, done_bytes, sizes.files, sizes.total_bytes)

        # quote(): Prefect would otherwise walk every file, hash and constraint of a batch looking
        # for futures (≈0.1 s of the flow's CPU per batch on k8s, competing with the workers).
        # prefect-dask ships a quote() as a bare tuple, so Dask batches are walked as before.
        opaque = quote if task_runner != "dask" else _same
        batches: Iterable[tuple[list[SourceFile], list[Skipped]]]
        if part_folder is not None:  # batches end where parts do: workers write whole parts
            batches = list(part_aligned_batches(discover_files(context), target, writer.part_target))
            total = len(batches)
        else:
            batches = make_batches(discover_files(context), target_bytes=target)
        for index, (files, skipped) in enumerate(batches, start=1):
            # A document whose constraints changed is rechunked even when its bytes did not.
            batch_sha = {
                f.doc_id: context.previous_sha[f.doc_id]
                for f in files
                if f.doc_id in context.previous_sha and f.doc_id not in context.force
            }
            batch_constraints = {
                f.doc_id: context.constraints[f.doc_id] for f in files if f.doc_id in context.constraints
            }
            future = chunk_batch.submit(
                config.text,
                config_path,
                opaque(files),
                opaque(batch_sha),
                index,
                max(total, index),
                opaque(batch_constraints or None),
                part_folder,
                writer.part_target,
            )
            pending.append((future, files, skipped))
            drain(2 * workers)  # enough queued that no worker waits while the oldest batch finishes
        drain(0)
        removed = sorted(set(context.previous_sha) - stats.seen)  # kept documents are seen
        if kind == "refresh" and context.previous is not None and nothing_changed(context, stats, removed):
            writer.abort()  # the previous snapshot already holds exactly this
            return RunResult(context.previous.path, context.previous.manifest, stats, published=False)
        check_removals(
            len(context.previous_sha),
            len(removed),
            stats.documents,
            config.model.output.max_removed_share,
            allow=allow_mass_removal,
            where=str(context.version_path),
        )
        manifest = build_manifest(context, stats, kind, removed)
        snapshot = writer.publish(manifest)
    except BaseException:
        writer.abort()
        raise
    manifest["snapshot"] = int(snapshot.name)
    return RunResult(snapshot, manifest, stats)


def _same(value: Any) -> Any:
    return value


def _record(
    result: BatchResult | WorkerBatch,
    files: list[SourceFile],
    skipped: list[Skipped],
    context,
    writer: SnapshotWriter | ObjectStoreSnapshotWriter,
    stats: RunStats,
    carry: PreviousRows | None,
    previous_reasons: dict[tuple[str, int], str],
) -> None:
    """Hand a batch's documents to the writer in discovery order (rows made now and rows carried
    over from the previous snapshot interleaved, as a full run would write them), and count them."""
    parts: list[WorkerPart] = []
    if isinstance(result, WorkerBatch):  # a worker process wrote the rows; ``result`` holds their statistics
        result, parts = result.result, result.parts
    documents, chunks = result.documents, result.chunks
    if result.part is not None:
        documents, chunks = writer.load_part(*result.part)
    stats.add(result.documents, result.chunks, result.over_budget)
    stats.constraints.extend(result.constraints)
    kept = kept_documents([*skipped, *result.skipped], context.previous_sha) if carry is not None else []
    carried = [*result.reused, *kept]
    chunked = set(result.chunked)
    from_previous = set(carried)
    order = [
        (f.doc_id, f.doc_id in from_previous)
        for f in files
        if f.doc_id in chunked or f.doc_id in from_previous
    ]
    listed = {doc_id for doc_id, _ in order}
    # Kept documents of a folder that could not be listed are not among the batch's files.
    order.extend((doc_id, True) for doc_id in kept if doc_id not in listed)
    writer.write_batch(order, documents, chunks, parts)
    if carried and carry is not None:
        stats.add(*carry.rows(carried), previous_reasons)
        stats.constraints.extend(carried_constraints(context.previous, carried))
    stats.reused.extend(result.reused)
    stats.kept.extend(kept)
    for doc_id in result.chunked:
        (stats.changed if doc_id in context.previous_sha else stats.new).append(doc_id)
    stats.skipped.extend(skipped)
    stats.skipped.extend(result.skipped)
    stats.n_bytes += result.n_bytes


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


@contextlib.contextmanager
def task_runner_for(name: str, workers: int, address: str | None) -> Iterator[Any]:
    """The Prefect task runner for ``--task-runner``; parallel runners get a real API server.

    Worker processes read Prefect's settings from their environment, so callers should enter
    ``chunkyard.flows.server.prefect_server()`` before Prefect is imported (the CLI does); this function
    starts one itself otherwise.
    """
    if name == "thread":
        yield ThreadPoolTaskRunner(max_workers=max(1, workers))
        return
    from chunkyard.flows.server import prefect_server

    cache_settings_serialization()  # every submit to another process sends the settings
    with prefect_server(batch=True):
        if name == "process":
            from chunkyard.flows.workers import (
                PRELOAD,
                forkserver_available,
                init_worker,
                ready,
                start_forkserver,
            )

            if forkserver_available():
                start_forkserver()  # already running when the CLI started it early; else it starts now
                yield ForkserverProcessPoolTaskRunner(
                    max_workers=workers, preload=PRELOAD, initializer=init_worker, warm_up=ready
                )
            else:
                yield ProcessPoolTaskRunner(max_workers=workers)
        elif name == "dask":
            from prefect_dask import DaskTaskRunner

            if address:
                yield DaskTaskRunner(address=address)
                return
            import logging

            import dask

            from chunkyard.flows.workers import forkserver_available, start_forkserver

            # A local cluster is this run's business: its scheduler, nannies and workers report their
            # start and stop at INFO (≈60 lines per run, more after Ctrl+C); only warnings are shown.
            # The workers read the level from the environment the forkserver passes on.
            logging.getLogger("distributed").setLevel(logging.WARNING)
            # The local cluster's worker processes come from the same preloaded forkserver.
            settings = {}
            if forkserver_available() and start_forkserver():
                settings = {"distributed.worker.multiprocessing-method": "forkserver"}
            with dask.config.set(settings):
                # No dashboard; the scheduler's HTTP server (which ``dashboard_address: None`` leaves on
                # 8787 of every interface, with a warning when that port is taken) on a free loopback port.
                yield DaskTaskRunner(
                    cluster_kwargs={
                        "n_workers": workers,
                        "threads_per_worker": 1,
                        "processes": True,
                        "dashboard_address": None,
                        "scheduler_kwargs": {"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                    }
                )
        else:
            raise ValueError(f"unknown task runner {name!r} (use one of: {', '.join(TASK_RUNNERS)})")


def run(
    config: Config,
    source: Path | None = None,
    output: str | Path | None = None,
    *,
    task_runner: str = "thread",
    workers: int | None = None,
    address: str | None = None,
    kind: str = "auto",
    progress: ProgressHook | None = None,
    allow_mass_removal: bool = False,
) -> RunResult:
    """Run the flow once with the chosen task runner (thread, process or dask); ``progress`` is called
    with (documents_done, bytes_done, total_documents, total_bytes) after each batch."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    if task_runner not in TASK_RUNNERS:
        raise ValueError(f"unknown task runner {task_runner!r} (use one of: {', '.join(TASK_RUNNERS)})")
    # A thread runner gains nothing from more threads (the GIL); parallel runners use every core.
    workers = workers or (1 if task_runner == "thread" else default_workers())
    with (
        task_runner_for(task_runner, workers, address) as runner,
        temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
        _scheduler_named(address if task_runner == "dask" else None),
    ):
        # The heartbeat thread adds about a second at exit; a batch job does not need it.
        return chunk_corpus.with_options(task_runner=runner)(
            config.text,
            str(config.path) if config.path else None,
            config_name=f"{config.name} v{config.version}",
            source=str(source) if source else None,
            output=str(output) if output else None,
            kind=kind,
            workers=workers,
            task_runner=task_runner,
            progress=progress,
            allow_mass_removal=allow_mass_removal,
        )


@contextlib.contextmanager
def _scheduler_named(address: str | None) -> Iterator[None]:
    """A Dask scheduler that cannot be reached (distributed: ``OSError: Timed out trying to connect to
    ADDRESS after 30 s``) is a failure to say plainly, not an unexpected error."""
    try:
        yield
    except OSError as exc:
        if address and not exc.strerror and str(exc).startswith("Timed out trying to connect to"):
            from chunkyard.chunking.errors import ChunkyardError

            raise ChunkyardError(
                f"cannot reach the Dask scheduler at {address}: {exc} (nothing was published)"
            ) from exc
        raise
