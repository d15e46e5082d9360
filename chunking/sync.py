"""Keep a vector store equal to a snapshot: ``chunkyard sync``.

Method. Which snapshot a sink holds is recorded in the dataset, ``OUTPUT/NAME/.sinks/SINK.json``
(written atomically): ``snapshot`` (``vX/NNNN``, relative to the dataset folder), the ``embedder`` id
and where the store is. A sync to a target snapshot:

1. records ``target`` in that file before it touches the store;
2. works out the changes: when the record is clean (no ``target`` left over) and names the same
   store, it is the export change-set from the held snapshot to the target
   (``chunkyard.chunking.export.change_set``); otherwise — the first sync, a sync that was killed,
   a record for another store — it reconciles against the store itself: every target row whose
   ``chunk_id`` is missing there or whose ``row_hash`` differs is upserted, every stored id the
   target lacks is deleted;
3. deletes, then upserts by ``chunk_id`` in batches, embedding only ``embed_text`` the dataset's
   embedding cache has not seen (``chunkyard.chunking.embeddings``);
4. records ``snapshot = target`` and clears ``target``, only after the store confirmed every write.

A sync killed at any moment leaves ``target`` set; the next one reconciles, so the store ends equal
to the snapshot with nothing missing or doubled. ``--to`` names any snapshot, older ones too (a
rollback is the same change-set, the other way). ``verify`` compares the store's ids and hashes with
a snapshot and says what differs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkyard.chunking.config import Config, SinkConfig
from chunkyard.chunking.dataset import MANIFEST, Snapshot, list_snapshots, resolve_snapshot
from chunkyard.chunking.embeddings import EmbeddingCache, embedder_for
from chunkyard.chunking.errors import ChunkyardError, DatasetError, UsageError
from chunkyard.chunking.export import change_set, export_rows, write_atomically
from chunkyard.chunking.sinks import BATCH, Sink, open_sink, with_hashes

SINKS_DIR = ".sinks"

# Called with (stage, done, total): rows deleted and upserted so far ("writing"), of how many.
SyncProgress = Callable[[str, int, int], None]


class SyncRefused(UsageError):
    """A sync that must not start (unknown sink, a snapshot that does not exist, another embedder)."""


@dataclass
class SinkState:
    """What ``OUTPUT/NAME/.sinks/SINK.json`` says about a sink."""

    sink: str
    store: str = ""
    embedder: str = ""
    snapshot: str | None = None  # vX/NNNN the store equals
    target: str | None = None  # vX/NNNN a sync started towards and did not finish
    rows: int = 0
    updated_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def dataset_dir(config: Config) -> Path:
    return config.output_dir / config.name


def state_path(dataset: Path, sink_name: str) -> Path:
    return dataset / SINKS_DIR / f"{sink_name}.json"


def read_state(dataset: Path, sink_name: str) -> SinkState:
    path = state_path(dataset, sink_name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SinkState(sink_name)
    except (OSError, ValueError) as exc:
        raise ChunkyardError(
            f"{path}: unreadable sink record: {exc} (remove it: the next sync reconciles "
            "the store with the snapshot)"
        ) from None
    known = {key: data[key] for key in SinkState.__dataclass_fields__ if key in data}
    return SinkState(**{**known, "sink": sink_name})


def write_state(dataset: Path, state: SinkState) -> None:
    path = state_path(dataset, state.sink)
    path.parent.mkdir(parents=True, exist_ok=True)
    state.updated_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    payload = (json.dumps(state.to_json(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    write_atomically(path, lambda handle: handle.write(payload))


def all_states(dataset: Path) -> list[SinkState]:
    folder = dataset / SINKS_DIR
    if not folder.is_dir():
        return []
    return [read_state(dataset, path.stem) for path in sorted(folder.glob("*.json"))]


def snapshot_ref(dataset: Path, snapshot: Snapshot) -> str:
    """``vX/NNNN`` of a snapshot of this dataset."""
    path = Path(str(snapshot.path))
    try:
        return path.resolve().relative_to(dataset.resolve()).as_posix()
    except ValueError:
        raise SyncRefused(f"{path}: not a snapshot of the dataset {dataset}") from None


def find_snapshot(config: Config, ref: str | None) -> Snapshot:
    """The newest snapshot of the dataset, or the one ``ref`` names: ``vX/NNNN``, ``NNNN`` (of the
    config's version), or a path."""
    dataset = dataset_dir(config)
    if ref is None:
        try:
            return Snapshot.open(dataset)
        except DatasetError as exc:
            raise SyncRefused(f"nothing to sync: {exc} (run `chunkyard run` first)") from None
    if re.fullmatch(r"\d+", ref):
        candidate = dataset / f"v{config.version}" / f"{int(ref):04d}"
    elif re.fullmatch(r"v\d+/\d+", ref):
        version, number = ref.split("/")
        candidate = dataset / version / f"{int(number):04d}"
    else:
        candidate = Path(ref)
    if not (candidate / MANIFEST).is_file():
        held = ", ".join(f"v{config.version}/{n:04d}" for n in list_snapshots(dataset / f"v{config.version}"))
        raise SyncRefused(
            f"--to {ref}: no published snapshot at {candidate} (v{config.version} has: {held or 'none'})"
        )
    return Snapshot.open(resolve_snapshot(candidate))


def sink_config(config: Config, name: str) -> SinkConfig:
    for sink in config.model.sinks:
        if sink.name == name:
            return sink
    names = ", ".join(s.name for s in config.model.sinks) or "none"
    raise SyncRefused(f"{config.path}: no sink named {name!r} (sinks: {names})")


@dataclass
class SyncReport:
    sink: str
    store: str
    held: str | None  # what the store held before (per the record)
    target: str
    method: str  # "change-set" | "reconcile" | "up to date"
    upserts: int = 0
    deletes: int = 0
    embedded: int = 0  # distinct texts the embedder computed
    cached: int = 0  # distinct texts read from the embedding cache
    rows: int = 0


class SinkBusy(ChunkyardError):
    """Another sync of the same sink is running."""


@contextlib.contextmanager
def _sink_lock(dataset: Path, sink_name: str) -> Iterator[None]:
    """One sync per sink at a time (``.sinks/SINK.lock``, an advisory lock the OS drops with its process)."""
    import fcntl

    path = state_path(dataset, sink_name).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SinkBusy(
                f"sink {sink_name}: another sync of it is running ({path}); try again when it has finished"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sync_sink(
    config: Config, sink_cfg: SinkConfig, to: str | None = None, progress: SyncProgress | None = None
) -> SyncReport:
    """Bring one sink to the target snapshot (see the module's docstring); one sync per sink at a time."""
    dataset = dataset_dir(config)
    target = find_snapshot(config, to)
    with _sink_lock(dataset, sink_cfg.name):
        return _sync(config, sink_cfg, dataset, target, progress)


def _sync(
    config: Config, sink_cfg: SinkConfig, dataset: Path, target: Snapshot, progress: SyncProgress | None
) -> SyncReport:
    target_ref = snapshot_ref(dataset, target)
    embedder = embedder_for(sink_cfg.embedder, config.base_dir)
    state = read_state(dataset, sink_cfg.name)
    sink = open_sink(sink_cfg, config.base_dir)
    try:
        store = sink.describe()
        if state.embedder and state.embedder != embedder.id and state.store == store:
            raise SyncRefused(
                f"sink {sink_cfg.name}: {store} holds vectors of {state.embedder}, the config now "
                f"names {embedder.id}; give the sink another table (or drop this one)"
            )
        clean = state.target is None and state.snapshot is not None and state.store == store
        held = _open_held(dataset, state.snapshot) if clean else None
        if held is not None and state.snapshot == target_ref:
            return SyncReport(sink_cfg.name, store, state.snapshot, target_ref, "up to date", rows=state.rows)
        target_rows = with_hashes(export_rows(target).to_pylist())
        state.store, state.embedder, state.target = store, embedder.id, target_ref
        write_state(dataset, state)  # in progress: a rerun after a kill reconciles
        if held is not None:
            changes = change_set(export_rows(held), export_rows(target))
            upsert_ids = {
                cid
                for cid, op in zip(
                    changes.column("chunk_id").to_pylist(), changes.column("op").to_pylist(), strict=True
                )
                if op == "upsert"
            }
            deletes = [
                cid
                for cid, op in zip(
                    changes.column("chunk_id").to_pylist(), changes.column("op").to_pylist(), strict=True
                )
                if op == "delete"
            ]
            method = "change-set"
        else:
            stored = sink.ids_and_hashes()
            upsert_ids = {
                row["chunk_id"]
                for row in target_rows
                if stored.get(row["chunk_id"], ("", ""))[1] != row["row_hash"]
            }
            wanted = {row["chunk_id"] for row in target_rows}
            deletes = sorted(cid for cid in stored if cid not in wanted)
            method = "reconcile"
        upserts = [row for row in target_rows if row["chunk_id"] in upsert_ids]
        total = len(deletes) + len(upserts)
        if progress:
            progress("writing", 0, total)
        for start in range(0, len(deletes), BATCH):
            sink.delete(deletes[start : start + BATCH])
            if progress:
                progress("writing", min(start + BATCH, len(deletes)), total)
        computed = cached = 0
        # Embedded and written batch by batch: a kill loses at most one batch of work (the cache keeps
        # every vector computed, the store every batch it confirmed).
        with EmbeddingCache.for_dataset(dataset, embedder) as cache:
            for start in range(0, len(upserts), BATCH):
                batch = upserts[start : start + BATCH]
                embedded = cache.vectors([row["embed_text"] or "" for row in batch])
                computed, cached = computed + embedded.computed, cached + embedded.cached
                sink.upsert(batch, embedded.vectors)
                if progress:
                    progress("writing", len(deletes) + start + len(batch), total)
        previous = state.snapshot
        state.snapshot, state.target, state.rows = target_ref, None, len(target_rows)
        write_state(dataset, state)  # only now: every write above was confirmed by the store
        return SyncReport(
            sink_cfg.name,
            store,
            previous,
            target_ref,
            method,
            len(upserts),
            len(deletes),
            computed,
            cached,
            len(target_rows),
        )
    finally:
        sink.close()


def _open_held(dataset: Path, ref: str | None) -> Snapshot | None:
    if ref is None or not (dataset / ref / MANIFEST).is_file():
        return None  # pruned or never there: reconcile against the store
    return Snapshot.open(dataset / ref)


@dataclass
class VerifyReport:
    sink: str
    store: str
    snapshot: str
    in_progress: str | None
    rows: int = 0
    missing: list[str] = field(default_factory=list)  # in the snapshot, not in the store
    extra: list[str] = field(default_factory=list)  # in the store, not in the snapshot
    changed_text: list[str] = field(default_factory=list)  # embed_text hash differs
    changed_columns: list[str] = field(default_factory=list)  # other exported columns differ

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.changed_text or self.changed_columns)


def verify_sink(config: Config, sink_cfg: SinkConfig, to: str | None = None) -> VerifyReport:
    """Compare the store with the snapshot it should hold: ``to``, else the recorded one, else the newest."""
    dataset = dataset_dir(config)
    state = read_state(dataset, sink_cfg.name)
    snapshot = find_snapshot(config, to if to is not None else state.snapshot)
    expected = {
        row["chunk_id"]: (row["embed_hash"], row["row_hash"])
        for row in with_hashes(export_rows(snapshot).to_pylist())
    }
    sink: Sink = open_sink(sink_cfg, config.base_dir)
    try:
        stored = sink.ids_and_hashes()
        report = VerifyReport(
            sink_cfg.name, sink.describe(), snapshot_ref(dataset, snapshot), state.target, len(expected)
        )
    finally:
        sink.close()
    report.missing = sorted(set(expected) - set(stored))
    report.extra = sorted(set(stored) - set(expected))
    for cid in sorted(set(expected) & set(stored)):
        if expected[cid][0] != stored[cid][0]:
            report.changed_text.append(cid)
        elif expected[cid][1] != stored[cid][1]:
            report.changed_columns.append(cid)
    if not report.equal and state.target is None and state.snapshot == report.snapshot:
        # The record no longer vouches for the store: the next sync reconciles instead of trusting it.
        state.target = state.snapshot
        write_state(dataset, state)
    return report


def nearest(config: Config, sink_cfg: SinkConfig, question: str, k: int = 3) -> list[dict[str, Any]]:
    """The ``k`` stored chunks nearest to ``question`` (embedded by the sink's embedder)."""
    embedder = embedder_for(sink_cfg.embedder, config.base_dir)
    vector = np.asarray(embedder.embed([question]), dtype=np.float32)[0]
    sink = open_sink(sink_cfg, config.base_dir)
    try:
        return sink.search(vector, k)
    finally:
        sink.close()


__all__ = [
    "SINKS_DIR",
    "SinkBusy",
    "SinkState",
    "SyncRefused",
    "SyncReport",
    "VerifyReport",
    "all_states",
    "find_snapshot",
    "nearest",
    "read_state",
    "sink_config",
    "state_path",
    "sync_sink",
    "verify_sink",
    "write_state",
]
