"""The batch job's logic without the orchestration: prepare a run, chunk batches, build the manifest.

``flows/`` wraps these in Prefect tasks; everything here is plain Python so that unit tests, the
reviewer and users' scripts can call it. A batch is a list of files; a batch result holds Arrow
tables ready to append to the snapshot being written.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import ALGORITHM_VERSION, Config
from chunkyard.chunking.constraints import Constraint, place
from chunkyard.chunking.dataset import (
    CHUNKS_SCHEMA,
    DOCUMENTS_SCHEMA,
    BatchRows,
    PreviousRows,
    Snapshot,
    filter_doc_ids,
    latest_snapshot,
    stored_document,
    version_dir,
)
from chunkyard.chunking.deadline import DocumentTimeout, deadline_at
from chunkyard.chunking.decisions import read_constraints
from chunkyard.chunking.documents import (
    Document,
    Skipped,
    SourceFile,
    describe_exception,
    discover,
    read_document,
)
from chunkyard.chunking.errors import MissingExtra, UsageError
from chunkyard.chunking.findings import break_met, keep_met
from chunkyard.chunking.ledger import LEDGER_FILE
from chunkyard.chunking.packer import Span
from chunkyard.chunking.storage import Location, StoragePath, location

CHUNKYARD_VERSION = "0.1.0"

# Largest batch of source bytes per task. A batch's results (text, chunks, embed_text: about four
# times its bytes in Arrow) are held until written, so these caps bound a run's memory whatever the
# corpus size. A task costs milliseconds in a thread but a few hundred ms in a process or on Dask,
# hence the larger cap there.
MAX_BATCH_BYTES = 4_000_000
MAX_GUIDED_BATCH_BYTES = 8_000_000
MIN_BATCH_BYTES = 256_000
# Most files per batch, however small they are.
MAX_BATCH_FILES = 400
# Batches per worker with the thread runner (Survey.batch_target): enough to balance the workers.
BATCHES_PER_WORKER = 6


class RunRefused(UsageError):
    """A run that must not start (changed config under an existing version, output in source): refused
    before any work, so the CLI exits 2.

    ``field`` names the config key at fault when there is one (``source.path``, ``output.path``).
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass
class RunContext:
    """What a run needs before its first batch: the checked folders, the snapshot it builds on (and
    its documents' sha256, to carry unchanged ones over) and the reviewer constraints to honour."""

    config: Config
    source_dir: Path
    output_dir: Location  # a local folder, or a folder on an object store (chunkyard.chunking.storage)
    version_path: Location
    previous: Snapshot | None
    previous_sha: dict[str, str]
    # Reviewer constraints per doc_id (from the ledger), and the documents that must be rechunked
    # although unchanged because their constraints differ from those the previous snapshot honoured.
    constraints: dict[str, list[Constraint]] = field(default_factory=dict)
    force: set[str] = field(default_factory=set)


def prepare_run(
    config: Config, source: Path | None = None, output: str | Location | None = None
) -> RunContext:
    """Check a run may start and find the snapshot it builds on.

    ``output`` (default: the config's ``output.path``) is a local folder or a URI such as
    ``s3://bucket/prefix`` (``chunkyard.chunking.storage``).
    """
    source_dir, output_dir, previous = _checked(config, source, output)
    return _context(config, source_dir, output_dir, previous)


def check_paths(
    config: Config, source: Path | None = None, output: str | Location | None = None
) -> tuple[Path, Location]:
    """The source folder and the output location of a run, refused when they cannot work.

    Only local checks (no object store is contacted), so the command line runs them before it
    starts a flow and a wrong path is reported at once.
    """
    source_dir = (source or config.source_dir).resolve()
    output_dir = location(output) if output is not None else config.output_location
    if source_dir.is_file():
        raise RunRefused(
            f"source {source_dir} is a file; source.path must name a folder of documents", "source.path"
        )
    if not source_dir.is_dir():
        if source_dir.exists():  # a FIFO, a device, a socket: never opened
            raise RunRefused(
                f"source {source_dir} is not a folder (a FIFO, device or socket); source.path must "
                "name a folder of documents",
                "source.path",
            )
        raise RunRefused(f"source folder not found: {source_dir}", "source.path")
    pseudo = pseudo_filesystem(source_dir)
    if pseudo:
        raise RunRefused(
            f"source {source_dir} is on the {pseudo} pseudo-filesystem (kernel and device files, not "
            "documents); source.path must name a folder of documents",
            "source.path",
        )
    if isinstance(output_dir, StoragePath):
        return source_dir, output_dir
    output_dir = output_dir.resolve()
    if output_dir.exists() and not output_dir.is_dir():
        raise RunRefused(
            f"output {output_dir} is a file; output.path must name a folder (it is created if missing)",
            "output.path",
        )
    if output_dir.parent == output_dir:
        raise RunRefused(
            f"output {output_dir} is the root of the filesystem; output.path must name a folder for "
            "the datasets",
            "output.path",
        )
    pseudo = pseudo_filesystem(output_dir)
    if pseudo:
        raise RunRefused(
            f"output {output_dir} is on the {pseudo} pseudo-filesystem; output.path must name a folder "
            "for the datasets",
            "output.path",
        )
    if output_dir == source_dir or output_dir.is_relative_to(source_dir):
        raise RunRefused(
            f"output folder {output_dir} is inside the source folder {source_dir}: "
            "the run would chunk its own output; choose an output folder outside the source",
            "output.path",
        )
    if source_dir.is_relative_to(output_dir):
        raise RunRefused(
            f"source folder {source_dir} is inside the output folder {output_dir}: datasets would be written "
            "among the documents (and a dataset folder could shadow them); choose folders apart",
            "source.path",
        )
    return source_dir, output_dir


# Kernel and device filesystems: their files are not documents, and some never end (/proc/kmsg).
PSEUDO_FILESYSTEMS = {
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "debugfs",
    "tracefs",
    "securityfs",
    "cgroup",
    "cgroup2",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "mqueue",
    "hugetlbfs",
    "efivarfs",
    "binfmt_misc",
    "autofs",
    "rpc_pipefs",
    "nsfs",
}


def pseudo_filesystem(path: Path) -> str | None:
    """The type of the pseudo-filesystem ``path`` (resolved) is on, or None (from /proc/self/mountinfo;
    None where that cannot be read)."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best, best_type = "", None
    target = str(path)
    for line in mounts:
        fields = line.split(" ")
        try:
            separator = fields.index("-")
            mount_point, fs_type = fields[4], fields[separator + 1]
        except (ValueError, IndexError):
            continue
        # Mount points escape spaces and the like as octal (\040).
        mount_point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mount_point)
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, fs_type
    return best_type if best_type in PSEUDO_FILESYSTEMS else None


def check_run(
    config: Config, source: Path | None = None, output: str | Location | None = None
) -> Snapshot | None:
    """Every refusal of a run that needs no chunking: the folders (``check_paths``), and a config
    changed under its version (``check_version``). Returns the snapshot the run would build on.

    Pure and quick (it reads the newest manifest), so the command line calls it before it starts a
    Prefect server or a flow; the flow checks again (``prepare_run``), as another run may publish
    in between.
    """
    return _checked(config, source, output)[2]


def _checked(
    config: Config, source: Path | None, output: str | Location | None
) -> tuple[Path, Location, Snapshot | None]:
    """``check_run``'s refusals; returns the source folder, the output and the previous snapshot."""
    source_dir, output_dir = check_paths(config, source, output)
    if isinstance(output_dir, StoragePath) and output_dir.is_file():
        raise RunRefused(f"output {output_dir} is a file; output.path must name a folder (prefix)")
    previous_path = latest_snapshot(version_dir(output_dir, config.name, config.version))
    previous = Snapshot.open(previous_path) if previous_path else None
    if previous is not None:
        check_version(config, previous)
    return source_dir, output_dir, previous


def check_version(config: Config, previous: Snapshot) -> None:
    """Refuse a run of ``config`` on top of ``previous`` (the newest snapshot of its version) when the
    chunks would differ under the same version: a changed config, or an unchanged one after an
    upgrade of chunkyard that chunks differently. Either way the version must be bumped."""
    recorded = previous.manifest.get("config")
    old_hash = recorded.get("hash") if isinstance(recorded, dict) else None
    if old_hash == config.hash:
        return
    old_algorithm = str(previous.manifest.get("algorithm_version", ""))
    if (
        old_algorithm
        and old_algorithm != ALGORITHM_VERSION
        and isinstance(recorded, dict)
        and recorded.get("text") == config.text
    ):
        raise RunRefused(
            f"this chunkyard chunks differently from the one that made {previous.path} (chunking algorithm "
            f"{old_algorithm} → {ALGORITHM_VERSION}; the config is unchanged): bump `version` in "
            f"{config.path or 'the config'} so the new chunks go to a new dataset version",
            "version",
        )
    raise RunRefused(
        f"config changed since {previous.path} (config hash {old_hash} → {config.hash}) but "
        f"version is still {config.version}: bump `version` in {config.path or 'the config'} "
        "so the new chunks go to a new dataset version",
        "version",
    )


class MassRemovalRefused(RunRefused):
    """A run that would publish a snapshot without most of its parent's documents (or with none at
    all): an emptied source is an unmounted share or a failed sync far more often than a deliberate
    deletion, and ``export --since`` would then delete the corpus downstream. Nothing is published;
    the CLI exits 2 (a refused run), ``--allow-mass-removal`` publishes anyway."""


def check_removals(
    previous_documents: int,
    removed: int,
    documents: int,
    max_removed_share: float,
    *,
    allow: bool = False,
    where: str = "",
) -> None:
    """Refuse to publish a snapshot of ``documents`` documents that drops ``removed`` of the
    ``previous_documents`` of its parent when that is more than ``max_removed_share`` of them, or
    that holds no document at all (a first run on an empty source included), unless ``allow``.

    One rule for every writer of a snapshot: the flow calls it after chunking, just before it
    publishes, with the exact counts (a file read and found unusable counts as removed).
    """
    if allow:
        return
    prefix = f"{where}: " if where else ""
    hint = (
        "nothing was published; check that the source folder is mounted and complete, or pass "
        "--allow-mass-removal to publish it anyway"
    )
    if documents == 0:
        before = (
            f"the previous snapshot has {previous_documents:,}"
            if previous_documents
            else "this would be the first snapshot"
        )
        raise MassRemovalRefused(
            f"{prefix}refused: the run found no document to publish ({before}); {hint}", "source.path"
        )
    if previous_documents and removed / previous_documents > max_removed_share:
        raise MassRemovalRefused(
            f"{prefix}refused: the run would remove {removed:,} of the previous snapshot's "
            f"{previous_documents:,} documents ({removed / previous_documents:.0%}, more than "
            f"output.max_removed_share = {max_removed_share:g}); {hint}",
            "output.max_removed_share",
        )


def _context(config: Config, source_dir: Path, output_dir: Location, previous: Snapshot | None) -> RunContext:
    vpath = version_dir(output_dir, config.name, config.version)
    previous_sha: dict[str, str] = {}
    if previous is not None:
        table = previous.documents(["doc_id", "sha256"])
        previous_sha = dict(
            zip(table.column("doc_id").to_pylist(), table.column("sha256").to_pylist(), strict=True)
        )
    # The review ledger is a local SQLite file; a dataset on an object store has none (review is local).
    constraints = (
        {}
        if isinstance(vpath, StoragePath)
        else read_constraints(vpath.parent / LEDGER_FILE, config.name, config.version)
    )
    force = constraints_changed(previous, constraints) if previous is not None else set()
    return RunContext(config, source_dir, output_dir, vpath, previous, previous_sha, constraints, force)


def constraint_ids(manifest: dict[str, Any]) -> dict[str, set[int]]:
    """Per doc_id, the ids of the constraints a snapshot was made under (from its manifest)."""
    out: dict[str, set[int]] = {}
    for entry in manifest.get("constraints") or []:
        out.setdefault(entry["doc_id"], set()).add(int(entry["id"]))
    return out


def constraints_changed(previous: Snapshot, constraints: dict[str, list[Constraint]]) -> set[str]:
    """Documents whose active constraints differ from those ``previous`` honoured: rechunk them."""
    before = constraint_ids(previous.manifest)
    now = {doc_id: {c.id for c in items} for doc_id, items in constraints.items()}
    return {
        doc_id for doc_id in set(before) | set(now) if before.get(doc_id, set()) != now.get(doc_id, set())
    }


def kept_documents(skipped: Iterable[Skipped], previous_ids: Iterable[str]) -> list[str]:
    """The previous snapshot's documents a run keeps although it skipped them: those it could not
    read or chunk (``Skipped.keep_previous``), and every document under a folder it could not list."""
    previous = set(previous_ids)
    kept: set[str] = set()
    for item in skipped:
        if not item.keep_previous:
            continue
        if item.doc_id in previous:
            kept.add(item.doc_id)
        elif item.folder:
            prefix = "" if item.doc_id == "." else item.doc_id + "/"
            kept.update(doc_id for doc_id in previous if doc_id.startswith(prefix))
    return sorted(kept)


def carried_constraints(previous: Snapshot, doc_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The previous snapshot's constraint entries for documents carried over unchanged."""
    wanted = set(doc_ids)
    return [entry for entry in previous.manifest.get("constraints") or [] if entry["doc_id"] in wanted]


def discover_files(context: RunContext) -> Iterator[SourceFile | Skipped]:
    source = context.config.model.source
    skip = (context.output_dir,) if isinstance(context.output_dir, Path) else ()
    return discover(
        context.source_dir, source.include, source.exclude, skip_dirs=skip, follow_links=source.follow_links
    )


@dataclass
class Survey:
    """Sizes of the files a run will read, from a first pass that keeps no paths."""

    files: int
    total_bytes: int
    sizes: np.ndarray

    def batch_target(self, workers: int) -> int:
        """Bytes per batch: about six batches per worker, between 256 kB and ``MAX_BATCH_BYTES``.

        Large enough that a task's fixed cost (milliseconds in a thread) stays a small share of its
        work, small enough to balance the workers.
        """
        return int(
            min(
                MAX_BATCH_BYTES,
                max(MIN_BATCH_BYTES, self.total_bytes / (max(1, workers) * BATCHES_PER_WORKER)),
            )
        )

    def guided_target(self, workers: int) -> Callable[[int], int]:
        """Bytes for the next batch, given the bytes already batched: fewer, decreasing batches.

        For workers in other processes or on Dask, where a task costs a few hundred milliseconds of
        CPU between the worker, the flow process and the API server (measured: Prefect's context,
        client and state changes per task), which on a small machine is taken from the chunking.
        Guided self-scheduling: each batch is ``1/(2·workers)`` of what is left, never less than
        ``1/(6·workers)`` of the total (nor 256 kB, nor more than ``MAX_GUIDED_BATCH_BYTES``): large
        early batches keep the task count low (8 for two workers instead of 12), small late ones even
        out the finish.
        """
        workers = max(1, workers)
        floor = max(MIN_BATCH_BYTES, self.total_bytes / (BATCHES_PER_WORKER * workers))

        def target(done: int) -> int:
            return int(min(MAX_GUIDED_BATCH_BYTES, max(floor, (self.total_bytes - done) / (2 * workers))))

        return target

    def count_batches(self, target_bytes: BatchTarget, max_files: int = MAX_BATCH_FILES) -> int:
        """How many batches ``make_batches`` makes of these files with the same targets."""
        cutter = _BatchCutter(target_bytes, max_files)
        count = sum(cutter.closes(int(size)) for size in self.sizes)
        return count + (1 if cutter.files else 0)


# Bytes per batch: a constant, or a function of the bytes already batched (Survey.guided_target).
BatchTarget = int | Callable[[int], int]


class _BatchCutter:
    """Where batches end: fed each file's size in order, says whether the batch closes after it
    (``target_bytes`` reached, or ``max_files`` files). The one rule ``make_batches`` and
    ``Survey.count_batches`` share."""

    def __init__(self, target_bytes: BatchTarget, max_files: int) -> None:
        self._target = target_bytes if callable(target_bytes) else (lambda done: target_bytes)
        self._limit = self._target(0)
        self._max_files = max_files
        self.size = self.files = self.done = 0

    def closes(self, size: int) -> bool:
        self.size += size
        self.files += 1
        if self.size < self._limit and self.files < self._max_files:
            return False
        self.done += self.size
        self._limit = self._target(self.done)
        self.size = self.files = 0
        return True


def survey(context: RunContext) -> Survey:
    sizes = [item.size for item in discover_files(context) if isinstance(item, SourceFile)]
    array = np.asarray(sizes, dtype=np.int64)
    return Survey(len(sizes), int(array.sum()) if len(sizes) else 0, array)


def make_batches(
    files: Iterable[SourceFile | Skipped],
    target_bytes: BatchTarget = MAX_BATCH_BYTES,
    max_files: int = MAX_BATCH_FILES,
) -> Iterator[tuple[list[SourceFile], list[Skipped]]]:
    """Group discovered files into batches of about ``target_bytes`` (a task costs milliseconds);
    each batch carries the skips discovered since the previous one."""
    batch: list[SourceFile] = []
    skipped: list[Skipped] = []
    cutter = _BatchCutter(target_bytes, max_files)
    for item in files:
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        batch.append(item)
        if cutter.closes(item.size):
            yield batch, skipped
            batch, skipped = [], []
    if batch or skipped:
        yield batch, skipped


@dataclass
class BatchResult:
    """One batch chunked: its rows (``dataset.BatchRows``), what was reused or skipped, and what became
    of each reviewer constraint; the flow appends the rows to the snapshot being written."""

    documents: pa.Table
    chunks: pa.Table
    skipped: list[Skipped] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    chunked: list[str] = field(default_factory=list)
    n_bytes: int = 0
    constraints: list[dict[str, Any]] = field(default_factory=list)  # what became of each constraint
    over_budget: dict[tuple[str, int], str] = field(default_factory=dict)  # (doc_id, index) -> reason
    # With parts (a worker wrote them: flows.run): the batch's rows are in these files of the snapshot's part folder,
    # and ``documents``/``chunks`` hold only the columns ``RunStats.add`` reads.
    part: tuple[str | None, str | None] | None = None


# The columns of a batch that the flow's statistics read (``RunStats.add``), once its rows are in parts.
STATS_COLUMNS = {
    "documents": ["doc_id", "strategy"],
    "chunks": ["doc_id", "chunk_index", "strategy", "size", "unit", "findings"],
}


def chunk_files(
    config: Config,
    files: list[SourceFile],
    previous_sha: dict[str, str],
    constraints: dict[str, list[Constraint]] | None = None,
) -> BatchResult:
    """Read and chunk a batch; documents whose bytes are unchanged are only listed as reused.

    ``constraints`` (per doc_id) are placed on each document's text as it is now: as recorded when
    its bytes are the ones they were made on, re-anchored by their text otherwise, or stale.
    """
    result, rows = _new_batch()
    limits = config.model.limits
    for source_file in files:
        # One deadline for reading, extracting and chunking the document (chunkyard.chunking.deadline);
        # whatever goes wrong with one document, of any exception type, is that document's skip.
        expires = time.monotonic() + limits.document_seconds
        try:
            with deadline_at(expires):
                document = read_document(source_file.path, source_file.doc_id, limits, source_file.identity)
            if isinstance(document, Skipped):
                result.skipped.append(document)
                continue
            result.n_bytes += document.n_bytes
            if previous_sha.get(document.doc_id) == document.sha256:
                result.reused.append(document.doc_id)
                continue
            _chunk_document(
                config, document, (constraints or {}).get(document.doc_id, []), result, rows, expires
            )
        except DocumentTimeout:
            result.skipped.append(
                Skipped(
                    source_file.doc_id,
                    f"abandoned: still being read or chunked after "
                    f"{limits.document_seconds:g} s (limits.document_seconds)",
                    keep_previous=True,
                )
            )
        except Exception as exc:
            result.skipped.append(
                Skipped(source_file.doc_id, f"failed: {describe_exception(exc)}", keep_previous=True)
            )
    result.documents, result.chunks = rows.tables()
    return result


def rechunk_stored(
    config: Config, snapshot: Snapshot, doc_ids: list[str], constraints: dict[str, list[Constraint]]
) -> BatchResult:
    """Rechunk documents from the text a snapshot stores (reprocessing needs no source folder)."""
    result, rows = _new_batch()
    stored = filter_doc_ids(snapshot.documents(doc_ids=doc_ids), doc_ids).to_pylist()
    for row in sorted(stored, key=lambda r: r["doc_id"]):
        document = stored_document(row)
        result.n_bytes += document.n_bytes
        _chunk_document(config, document, constraints.get(document.doc_id, []), result, rows)
    result.documents, result.chunks = rows.tables()
    return result


def _new_batch() -> tuple[BatchResult, BatchRows]:
    """An empty batch result and the rows its documents are added to."""
    return BatchResult(DOCUMENTS_SCHEMA.empty_table(), CHUNKS_SCHEMA.empty_table()), BatchRows()


def _chunk_document(
    config: Config,
    document: Document,
    constraints: list[Constraint],
    result: BatchResult,
    rows: BatchRows,
    expires: float | None = None,
) -> None:
    """Chunk one document under its constraints and add its rows (or a skip) to the batch.

    Placing the constraints and chunking run under the deadline ``expires``, before any row is added,
    so an abandoned or failed document never leaves a partial row behind."""
    settings = config.settings_for(document.doc_id)
    try:
        with deadline_at(expires):
            placed = [
                (constraint, place(constraint, document.text, document.sha256)) for constraint in constraints
            ]
            chunked = split_document(
                document.text,
                settings,
                document.doc_id,
                base_dir=config.base_dir,
                title=document.title or None,
                constraints=[placement for _, placement in placed if placement is not None],
            )
            spans = [Span(c.start, c.end, c.size) for c in chunked.chunks] if placed else []
            outcomes = [
                _constraint_outcome(document, constraint, placement, spans)
                for constraint, placement in placed
            ]
    except MissingExtra as exc:  # e.g. a JavaScript file without the code extra: say what to install
        result.skipped.append(Skipped(document.doc_id, str(exc), keep_previous=True))
        return
    except Exception as exc:  # a bug or a pathological file must not sink the whole run
        result.skipped.append(
            Skipped(document.doc_id, f"chunking failed: {describe_exception(exc)}", keep_previous=True)
        )
        return
    result.chunked.append(document.doc_id)
    result.constraints.extend(outcomes)
    for chunk in chunked.chunks:
        if chunk.over_budget_reason:
            result.over_budget[(document.doc_id, chunk.index)] = chunk.over_budget_reason
    rows.add(document, chunked, unit=settings.unit, config_version=config.version, config_hash=config.hash)


def _constraint_outcome(
    document: Document, constraint: Constraint, placement: Any, spans: list[Span]
) -> dict[str, Any]:
    """A manifest entry: applied (on the bytes it was made on), reanchored, stale or unmet."""
    entry = constraint.summary()
    if placement is None:
        return {**entry, "status": "stale", "placed": None}
    if placement.kind == "keep_together":
        met = keep_met(spans, placement.start, placement.end)
    else:
        met = break_met(document.text, spans, placement.start)
    status = "applied" if document.sha256 == constraint.doc_sha256 else "reanchored"
    return {**entry, "status": status if met else "unmet", "placed": [placement.start, placement.end]}


def carried_over(previous: Snapshot, doc_ids: list[str]) -> tuple[pa.Table, pa.Table]:
    """The previous snapshot's rows for unchanged documents, copied without rechunking (one call)."""
    if not doc_ids:
        return DOCUMENTS_SCHEMA.empty_table(), CHUNKS_SCHEMA.empty_table()
    documents = filter_doc_ids(previous.documents(doc_ids=doc_ids), doc_ids)
    chunks = filter_doc_ids(previous.chunks(doc_ids=doc_ids), doc_ids)
    return documents, chunks


class CarryOver(PreviousRows):
    """Copies the previous snapshot's rows for unchanged documents, batch after batch, in O(rows read):
    ``chunkyard.chunking.dataset.PreviousRows`` (the part holding each document, or of a snapshot of
    two files the row groups holding its rows)."""


@dataclass
class RunStats:
    """Accumulates what the manifest and the quality summary report."""

    documents: int = 0
    chunks: int = 0
    n_bytes: int = 0  # source bytes read
    text_chars: int = 0  # characters of extracted text the snapshot stores (a DOCX's bytes are not its size)
    reused: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    sizes: dict[str, list[int]] = field(default_factory=dict)  # per strategy, in the unit
    findings: dict[str, Counter] = field(default_factory=dict)  # per strategy
    constraints: list[dict[str, Any]] = field(default_factory=list)  # outcome of each reviewer constraint
    chunk_counts: Counter = field(default_factory=Counter)  # per strategy
    doc_counts: Counter = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)  # skipped, but the previous snapshot's chunks kept
    over_budget: list[dict[str, Any]] = field(default_factory=list)
    rule_of: Callable[[str], str] | None = None  # doc_id -> rule label, for the summary per rule
    _rule_cache: dict[str, str] = field(default_factory=dict, repr=False)

    def _key(self, doc_id: str, strategy: str) -> tuple[str, str]:
        if self.rule_of is None:
            return ("", strategy)
        rule = self._rule_cache.get(doc_id)
        if rule is None:
            rule = self._rule_cache[doc_id] = self.rule_of(doc_id)
        return (rule, strategy)

    def add(
        self, documents: pa.Table, chunks: pa.Table, reasons: dict[tuple[str, int], str] | None = None
    ) -> None:
        self.documents += documents.num_rows
        self.chunks += chunks.num_rows
        if documents.num_rows and "n_chars" in documents.column_names:
            self.text_chars += int(pc.sum(documents.column("n_chars")).as_py() or 0)
        self.seen.update(documents.column("doc_id").to_pylist())
        for doc_id, strategy in zip(
            documents.column("doc_id").to_pylist(), documents.column("strategy").to_pylist(), strict=True
        ):
            self.doc_counts[self._key(doc_id, strategy)] += 1
        if not chunks.num_rows:
            return
        # Chunks come in runs of one document: one key per run, and only the (few) chunks with
        # findings are visited one by one. This runs in the flow process for every batch.
        strategies = chunks.column("strategy").to_pylist()
        sizes = chunks.column("size").to_pylist()
        doc_ids = chunks.column("doc_id").to_pylist()
        row_keys: list[tuple[str, str]] = []
        start = 0
        for (doc_id, strategy), run in itertools.groupby(zip(doc_ids, strategies, strict=True)):
            length = sum(1 for _ in run)
            key = self._key(doc_id, strategy)
            self.sizes.setdefault(key, []).extend(sizes[start : start + length])
            self.chunk_counts[key] += length
            self.findings.setdefault(key, Counter())
            row_keys.extend([key] * length)
            start += length
        findings = chunks.column("findings").combine_chunks()
        codes = pc.list_flatten(findings).to_pylist()
        if not codes:
            return
        rows = pc.list_parent_indices(findings).to_pylist()
        seen_in_row: set[tuple[int, str]] = set()
        for row, code in zip(rows, codes, strict=True):
            if (row, code) in seen_in_row:
                continue  # a code counts once per chunk
            seen_in_row.add((row, code))
            self.findings[row_keys[row]][code] += 1
            if code == "over_budget":
                doc_id, index = doc_ids[row], chunks.column("chunk_index")[row].as_py()
                self.over_budget.append(
                    {
                        "doc_id": doc_id,
                        "chunk_index": index,
                        "size": sizes[row],
                        "unit": chunks.column("unit")[row].as_py(),
                        "reason": (reasons or {}).get(
                            (doc_id, index), "a unit that cannot be split is larger than the budget"
                        ),
                    }
                )

    def summary_rows(self) -> list[dict[str, Any]]:
        """One row per rule × strategy: documents, chunks, size p5/p50/p95/max, share of each finding."""
        rows = []
        for key in sorted(self.sizes):
            rule, strategy = key
            sizes = np.asarray(self.sizes[key])
            count = int(self.chunk_counts[key])
            p5, p50, p95 = (int(x) for x in np.percentile(sizes, [5, 50, 95], method="nearest"))
            rows.append(
                {
                    "rule": rule,
                    "strategy": strategy,
                    "documents": int(self.doc_counts[key]),
                    "chunks": count,
                    "size_p5": p5,
                    "size_p50": p50,
                    "size_p95": p95,
                    "size_max": int(sizes.max()),
                    "findings": {
                        code: {"chunks": n, "share": round(n / count, 4)}
                        for code, n in sorted(self.findings[key].items())
                    },
                }
            )
        return rows


def previous_over_budget(snapshot: Snapshot) -> dict[tuple[str, int], str]:
    """The over-budget reasons a snapshot's manifest recorded, for rows carried over from it."""
    return {
        (item["doc_id"], item["chunk_index"]): item["reason"]
        for item in snapshot.manifest.get("over_budget", [])
        if isinstance(item, dict)
    }


def nothing_changed(context: RunContext, stats: RunStats, removed: list[str]) -> bool:
    """Whether a refresh found nothing to publish: no document new, changed (rechunked) or removed,
    and the same files skipped (for the same reasons) and kept as in the previous snapshot. Its
    snapshot would hold the previous one's rows again, so the run publishes none."""
    previous = context.previous
    if previous is None or stats.new or stats.changed or removed:
        return False
    skipped = [
        {"doc_id": s.doc_id, "reason": s.reason} for s in sorted(stats.skipped, key=lambda s: s.doc_id)
    ]
    return skipped == previous.manifest.get("skipped", []) and sorted(stats.kept) == previous.manifest.get(
        "kept", []
    )


def build_manifest(
    context: RunContext,
    stats: RunStats,
    kind: str,
    removed: list[str],
    applied_flags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    config = context.config
    finding_totals: Counter = Counter()
    for counter in stats.findings.values():
        finding_totals.update(counter)
    tokenizers = sorted({s.tokenizer for _, s in config.rule_settings} | {config.chunker.tokenizer})
    return {
        "schema_version": 1,
        "name": config.name,
        "version": config.version,
        "snapshot": None,  # filled in at publish
        "parent_snapshot": context.previous.number if context.previous else None,
        "kind": kind,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "chunkyard_version": CHUNKYARD_VERSION,
        "algorithm_version": ALGORITHM_VERSION,
        "config": {
            "path": str(config.path) if config.path else None,
            "hash": config.hash,
            "text": config.text,
        },
        "tokenizer": tokenizers[0] if len(tokenizers) == 1 else tokenizers,
        "source": str(context.source_dir),
        "counts": {
            "documents": stats.documents,
            "chunks": stats.chunks,
            "bytes": stats.n_bytes,
            "text_chars": stats.text_chars,
            "reused": len(stats.reused),
            "new": len(stats.new),
            "changed": len(stats.changed),
            "removed": len(removed),
            "skipped": len(stats.skipped),
            "kept": len(stats.kept),
        },
        "removed": removed,
        "skipped": [
            {"doc_id": s.doc_id, "reason": s.reason} for s in sorted(stats.skipped, key=lambda s: s.doc_id)
        ],
        # Previous documents this run could not read or chunk (see ``skipped``), carried over unchanged
        # so that they do not vanish from the dataset (and a vector store) until the next run.
        "kept": sorted(stats.kept),
        "findings": dict(sorted(finding_totals.items())),
        # Every chunk over its size limit, and why (docs/design.md, invariant 3).
        "over_budget": sorted(stats.over_budget, key=lambda item: (item["doc_id"], item["chunk_index"])),
        "size_statistics": stats.summary_rows(),
        "applied_flags": applied_flags or [],
        # Every reviewer constraint of this version and what became of it here: applied, reanchored
        # (the document changed and the constraint was found by its text), unmet (cannot fit the
        # budget; its chunk carries constraint_unmet) or stale (its text is gone: listed for review).
        "constraints": sorted(stats.constraints, key=lambda e: (e["doc_id"], e["id"])),
    }
