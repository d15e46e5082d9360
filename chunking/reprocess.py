"""Reprocessing without the orchestration: turn open flags into constraints, pick what to rechunk.

``chunkyard reprocess CONFIG`` writes the next snapshot of the config's version from the newest one
(the *parent*), reading document text from the parent (a dataset is self-contained; the source
folder is not read). Method:

1. every open flag of the version (``chunkyard.chunking.decisions.open_flags``) becomes a constraint
   (``chunkyard.chunking.constraints.constraint_for_flag``), derived on the text and chunks of the snapshot the
   flag was made in and recorded in the ledger — once: a flag that already has one reuses it;
2. the documents rechunked are those whose active constraints differ from the ones the parent
   honoured (a flag's new constraint is such a difference); every other document's rows are copied
   from the parent. A flag whose constraint the parent already honoured is not rechunked again (it
   would give the parent's chunks): when nothing else changed no snapshot is written, the flag's
   outcome is the parent's, and a flag the parent met is resolved by the parent;
3. the manifest records ``kind: reprocess``, the parent, every flag considered with what became of
   it (``applied_flags``) and every constraint's outcome; after publishing, each flag whose
   constraint is met is *resolved* (``chunkyard.chunking.decisions.resolve_flag``) by the new snapshot. A flag
   whose constraint cannot fit the budget stays open, and its chunk carries ``constraint_unmet``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from chunkyard.chunking.config import Config
from chunkyard.chunking.constraints import Constraint, constraint_for_flag
from chunkyard.chunking.dataset import Snapshot, SnapshotWriter, latest_snapshot, version_dir
from chunkyard.chunking.decisions import active_constraints, open_flags, record_constraint, resolve_flag
from chunkyard.chunking.ledger import LEDGER_FILE, Event, Ledger
from chunkyard.chunking.pipeline import (
    BatchResult,
    RunContext,
    RunRefused,
    RunStats,
    build_manifest,
    carried_constraints,
    carried_over,
    constraints_changed,
    previous_over_budget,
    rechunk_stored,
)
from chunkyard.chunking.strategies import get_strategy

RESOLVED = "resolved"


@dataclass
class FlagOutcome:
    """One open flag a reprocess considered, and the constraint it became (if any)."""

    flag: Event
    constraint: Constraint | None = None
    status: str = ""  # filled from the constraint's outcome, or why there is none

    def entry(self) -> dict[str, Any]:
        flag = self.flag
        return {
            "event": flag.id,
            "doc_id": flag.doc_id,
            "snapshot": flag.snapshot,
            "chunk_id": flag.chunk_id,
            "chunk_index": flag.chunk_index,
            "boundary": flag.boundary,
            "reason": flag.reason,
            "reviewer": flag.reviewer,
            "constraint": self.constraint.id if self.constraint else None,
            "status": self.status,
        }


@dataclass
class ReprocessPlan:
    context: RunContext
    flags: list[FlagOutcome] = field(default_factory=list)
    constraints: dict[str, list[Constraint]] = field(default_factory=dict)  # every active one, per doc
    doc_ids: list[str] = field(default_factory=list)  # documents to rechunk

    def applied_flags(self, outcomes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Manifest entries of the flags, each with its constraint's outcome in the new snapshot."""
        status_of = {entry["id"]: entry["status"] for entry in outcomes}
        for outcome in self.flags:
            if outcome.constraint is not None:
                status = status_of.get(outcome.constraint.id, "not_rechunked")
                outcome.status = RESOLVED if status in ("applied", "reanchored") else status
        return [outcome.entry() for outcome in self.flags]


def prepare_reprocess(config: Config, output: Path | None = None) -> RunContext:
    """The context of a reprocess: the newest snapshot of the config's version is the parent."""
    output_dir = (output or config.output_dir).resolve()
    vpath = version_dir(output_dir, config.name, config.version)
    parent_path = latest_snapshot(vpath)
    if parent_path is None:
        raise RunRefused(f"{vpath}: no snapshot to reprocess yet; run `chunkyard run` first")
    parent = Snapshot.open(parent_path, validate=True)  # its rows are copied into the next snapshot
    old_hash = parent.manifest.get("config", {}).get("hash")
    if old_hash != config.hash:
        raise RunRefused(
            f"config changed since {parent.path} (config hash {old_hash} → {config.hash}): reprocessing applies "
            f"review decisions under the same config; bump `version` and `chunkyard run` instead"
        )
    table = parent.documents(["doc_id", "sha256"])
    previous_sha = dict(
        zip(table.column("doc_id").to_pylist(), table.column("sha256").to_pylist(), strict=True)
    )
    source = Path(parent.manifest.get("source") or config.source_dir)
    return RunContext(config, source, output_dir, vpath, parent, previous_sha)


def ledger_file(context: RunContext) -> Path:
    return context.version_path.parent / LEDGER_FILE


def open_flags_of_other_versions(context: RunContext) -> dict[int, int]:
    """Open flags per other version of the dataset (version -> count): reprocess applies only its own
    version's, so flags left on an earlier version after a bump are worth a word."""
    path = ledger_file(context)
    if not path.is_file():
        return {}
    with Ledger(path) as ledger:
        events = ledger.events(context.config.name)
    by_version: dict[int, list[Event]] = {}
    for event in events:
        if event.version != context.config.version:
            by_version.setdefault(event.version, []).append(event)
    counts = {version: len(open_flags(items)) for version, items in sorted(by_version.items())}
    return {version: count for version, count in counts.items() if count}


def plan_reprocess(context: RunContext, ledger: Ledger) -> ReprocessPlan:
    """Turn open flags into recorded constraints and choose the documents to rechunk."""
    config, parent = context.config, context.previous
    assert parent is not None
    events = ledger.events(config.name, config.version)
    constraints = active_constraints(events)
    by_flag = {c.flag_event: c for items in constraints.values() for c in items if c.flag_event is not None}
    plan = ReprocessPlan(context)
    snapshots: dict[int, Snapshot | None] = {}
    for flag in open_flags(events):
        outcome = FlagOutcome(flag, by_flag.get(flag.id))
        plan.flags.append(outcome)
        if flag.doc_id not in context.previous_sha:
            outcome.status = "document_gone"
            continue
        if outcome.constraint is None:
            constraint = _derive(context, flag, snapshots)
            if isinstance(constraint, str):
                outcome.status = constraint
                continue
            outcome.constraint = record_constraint(
                ledger,
                config.name,
                config.version,
                flag.snapshot,
                constraint,
                reviewer=flag.reviewer,
                chunk_id=flag.chunk_id,
                chunk_index=flag.chunk_index,
            )
            constraints.setdefault(flag.doc_id, []).append(outcome.constraint)
    plan.constraints = constraints
    # A flag's new constraint changes its document's constraints; one the parent already honoured
    # (met, or unmet: it cannot fit) would only give the parent's chunks again, so it is not rechunked.
    changed = constraints_changed(parent, constraints)
    plan.doc_ids = sorted(changed & set(context.previous_sha))
    return plan


def _derive(context: RunContext, flag: Event, snapshots: dict[int, Snapshot | None]) -> Constraint | str:
    """The constraint for a flag, from the snapshot it was made in; a reason string when there is none."""
    if flag.snapshot not in snapshots:
        path = context.version_path / f"{flag.snapshot:04d}"
        snapshots[flag.snapshot] = Snapshot.open(path) if path.is_dir() else None
    snapshot = snapshots[flag.snapshot]
    if snapshot is None:
        return "snapshot_gone"
    documents = snapshot.documents(["doc_id", "sha256", "text"], [flag.doc_id])
    documents = documents.filter(pc.equal(documents.column("doc_id"), flag.doc_id))
    if documents.num_rows == 0 or documents.column("sha256")[0].as_py() != flag.doc_sha256:
        return "document_gone"
    text = documents.column("text")[0].as_py()
    chunks = snapshot.chunks(["doc_id", "chunk_index", "start", "end"], [flag.doc_id])
    chunks = chunks.filter(pc.equal(chunks.column("doc_id"), flag.doc_id))
    chunks = chunks.take(pc.sort_indices(chunks, sort_keys=[("chunk_index", "ascending")]))
    spans = list(zip(chunks.column("start").to_pylist(), chunks.column("end").to_pylist(), strict=True))
    settings = context.config.settings_for(flag.doc_id)
    layout = get_strategy(settings.strategy)(text, settings, flag.doc_id)
    constraint = constraint_for_flag(
        flag.reason or "",
        flag.boundary,
        flag.chunk_index or 0,
        spans,
        text,
        layout,
        flag.doc_id,
        flag.doc_sha256,
        flag_event=flag.id,
    )
    return constraint if constraint is not None else "no_constraint"


def resolve_flags(ledger: Ledger, plan: ReprocessPlan, snapshot: int) -> list[int]:
    """Resolve every flag the new snapshot met (call after publishing); returns the resolution event ids."""
    return [
        resolve_flag(ledger, outcome.flag, snapshot, outcome.constraint.id if outcome.constraint else None)
        for outcome in plan.flags
        if outcome.status == RESOLVED
    ]


# (parent snapshot, doc_ids, constraints per doc) -> the batch; the flow passes one running a Prefect task.
Rechunk = Callable[[Snapshot, list[str], dict[str, list[Constraint]]], BatchResult]


@dataclass
class ReprocessResult:
    snapshot: Path | None  # None when there was nothing to reprocess
    manifest: dict[str, Any]
    stats: RunStats = field(default_factory=RunStats)


def reprocess_snapshot(
    config: Config, output: Path | None = None, rechunk: Rechunk | None = None
) -> ReprocessResult:
    """Write the next snapshot of the config's version with the review decisions applied (see module doc)."""
    context = prepare_reprocess(config, output)
    parent = context.previous
    assert parent is not None
    if rechunk is None:

        def rechunk(
            snapshot: Snapshot, doc_ids: list[str], constraints: dict[str, list[Constraint]]
        ) -> BatchResult:
            return rechunk_stored(config, snapshot, doc_ids, constraints)

    with Ledger(ledger_file(context)) as ledger:
        plan = plan_reprocess(context, ledger)
        if not plan.doc_ids:
            # Every open flag's constraint is the parent's: report what became of it there, and
            # resolve the ones the parent met (a resolution that was undone, or never recorded).
            outcomes = list(parent.manifest.get("constraints") or [])
            manifest = {
                "name": config.name,
                "version": config.version,
                "kind": "reprocess",
                "parent_snapshot": parent.number,
                "snapshot": None,
                "applied_flags": plan.applied_flags(outcomes),
                "constraints": outcomes,
            }
            resolve_flags(ledger, plan, parent.number)
            return ReprocessResult(None, manifest)
        result = rechunk(
            parent, plan.doc_ids, {doc_id: plan.constraints.get(doc_id, []) for doc_id in plan.doc_ids}
        )
        # A document whose rechunking failed keeps its parent rows rather than vanish.
        kept = sorted(set(context.previous_sha) - set(result.chunked))
        documents, chunks = carried_over(parent, kept)
        documents, chunks = sorted_by_doc(
            pa.concat_tables([documents, result.documents]), pa.concat_tables([chunks, result.chunks])
        )
        stats = RunStats(rule_of=config.rule_label)
        writer = SnapshotWriter(context.version_path)
        try:
            writer.write(documents, chunks)
            stats.add(documents, chunks, {**previous_over_budget(parent), **result.over_budget})
            stats.n_bytes = sum(parent.documents(["n_bytes"]).column("n_bytes").to_pylist())
            stats.changed, stats.reused, stats.skipped = list(result.chunked), kept, list(result.skipped)
            stats.constraints = result.constraints + carried_constraints(parent, kept)
            manifest = build_manifest(context, stats, "reprocess", [], plan.applied_flags(stats.constraints))
            # Made by editing the parent: published after a newer snapshot it would undo that one's changes.
            snapshot = writer.publish(manifest, strict_parent=True)
        except BaseException:
            writer.abort()
            raise
        manifest["snapshot"] = int(snapshot.name)
        # Only now: a flag is resolved by a snapshot that exists.
        resolve_flags(ledger, plan, int(snapshot.name))
    return ReprocessResult(snapshot, manifest, stats)


def sorted_by_doc(documents: pa.Table, chunks: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Rows in doc_id order (chunks by chunk_index within a document), as a run writes them."""
    if documents.num_rows:
        documents = documents.take(pc.sort_indices(documents, sort_keys=[("doc_id", "ascending")]))
    if chunks.num_rows:
        chunks = chunks.take(
            pc.sort_indices(chunks, sort_keys=[("doc_id", "ascending"), ("chunk_index", "ascending")])
        )
    return documents, chunks


__all__ = [
    "FlagOutcome",
    "ReprocessPlan",
    "ReprocessResult",
    "ledger_file",
    "plan_reprocess",
    "prepare_reprocess",
    "reprocess_snapshot",
    "resolve_flags",
    "sorted_by_doc",
]
