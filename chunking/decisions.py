"""Review decisions the chunker acts on, read from and written to the review ledger.

The ledger (``chunkyard.chunking.ledger``) holds events; this module folds them into what reprocessing and
runs need: the *open flags* (flagged and not since unflagged, marked OK or resolved), the *active
constraints* (constraint events not retracted, decoded by ``chunkyard.chunking.constraints``, without those
derived from a flag the reviewers took back before it was resolved), and the
*resolutions* (which snapshot resolved which flag, for the reviewer's before/after).

A resolution is an ``unflag`` event that ``chunkyard reprocess`` appends for a flag it fixed: it
names the flag's chunk and reason like any unflag (so the reviewer's state clears the flag, and undo
re-opens it), its ``snapshot`` is the snapshot that resolved it, and its ``note`` is a JSON object
``{"chunkyard_resolution": 1, "flag_event": ID, "snapshot": N, "constraint": ID}``. Using the
existing event kind keeps the ledger readable by every chunkyard that can read it at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from chunkyard.chunking.constraints import KINDS, Constraint
from chunkyard.chunking.ledger import Event, Ledger, Target, active_events, ledger_exists

REPROCESS_REVIEWER = "chunkyard reprocess"


@dataclass(frozen=True)
class Resolution:
    """A flag and the snapshot that resolved it."""

    flag: Event
    snapshot: int
    constraint: int | None
    event: int  # the resolution event's id


def _json_note(note: str | None, key: str) -> dict | None:
    if not note or not note.startswith("{"):
        return None
    try:
        data = json.loads(note)
    except ValueError:
        return None
    return data if isinstance(data, dict) and key in data else None


def decode_constraint(event: Event) -> Constraint | None:
    """The constraint a ``constraint`` event records (None for one without a chunkyard anchor)."""
    if event.kind != "constraint" or event.reason not in KINDS:
        return None
    data = _json_note(event.note, "chunkyard_constraint")
    if data is None or not isinstance(data.get("start"), int) or not isinstance(data.get("end"), int):
        return None
    return Constraint(
        event.reason,
        event.doc_id,
        event.doc_sha256,
        data["start"],
        data["end"],
        before=str(data.get("before", "")),
        text=str(data.get("text", "")),
        after=str(data.get("after", "")),
        origin=str(data.get("origin", "explicit")),
        flag_event=data.get("flag_event"),
        id=event.id,
    )


def active_constraints(events: Iterable[Event]) -> dict[str, list[Constraint]]:
    """Constraints not retracted, per doc_id, in ledger order; one derived from a flag the reviewers
    took back (``withdrawn_flags``) goes with its flag."""
    events = list(events)
    withdrawn = withdrawn_flags(events)
    out: dict[str, list[Constraint]] = {}
    for event in active_events(events):
        constraint = decode_constraint(event)
        if constraint is not None and constraint.flag_event not in withdrawn:
            out.setdefault(constraint.doc_id, []).append(constraint)
    return out


def resolution_of(event: Event) -> dict | None:
    """The resolution record of an ``unflag`` appended by reprocess, else None."""
    if event.kind != "unflag":
        return None
    return _json_note(event.note, "chunkyard_resolution")


def open_flags(events: Iterable[Event]) -> list[Event]:
    """Flag events still open: not unflagged (same chunk, same place, that reason or all), marked OK or resolved.

    The same fold as ``chunkyard.chunking.ledger.derive_state``, kept per flag event rather than per chunk.
    """
    return sorted(_fold_flags(events)[0].values(), key=lambda e: e.id)


def withdrawn_flags(events: Iterable[Event]) -> set[int]:
    """Ids of the flags the reviewers took back: retracted (undo), unflagged or marked OK while open.

    A flag resolved by reprocess is not withdrawn by what follows (a reviewer marking the fixed chunk OK).
    """
    return _fold_flags(events)[1]


def _fold_flags(events: Iterable[Event]) -> tuple[dict[int, Event], set[int]]:
    """(open flags by id, withdrawn flag ids)."""
    events = list(events)
    active = active_events(events)
    active_ids = {event.id for event in active}
    withdrawn = {event.id for event in events if event.kind == "flag" and event.id not in active_ids}
    open_: dict[int, Event] = {}
    for event in active:
        if event.chunk_id is None:
            continue
        if event.kind == "flag":
            open_[event.id] = event
        elif event.kind in ("unflag", "mark_ok"):
            resolution = resolution_of(event)
            for flag_id, flag in list(open_.items()):
                if flag.chunk_id != event.chunk_id or flag.doc_sha256 != event.doc_sha256:
                    continue
                if resolution is not None:
                    if resolution.get("flag_event") == flag_id:
                        del open_[flag_id]
                elif event.kind == "mark_ok" or (
                    (flag.boundary is None) == (event.boundary is None)
                    and event.reason in (None, flag.reason)
                ):
                    del open_[flag_id]
                    withdrawn.add(flag_id)
    return open_, withdrawn


def resolutions(events: Iterable[Event]) -> list[Resolution]:
    """Active resolutions, with the flag each resolved, in ledger order."""
    active = active_events(events)
    by_id = {event.id: event for event in active}
    out = []
    for event in active:
        record = resolution_of(event)
        if record is None:
            continue
        flag = by_id.get(record.get("flag_event"))  # a retracted flag has no resolution to show
        if flag is not None and flag.kind == "flag":
            out.append(
                Resolution(
                    flag, int(record.get("snapshot", event.snapshot)), record.get("constraint"), event.id
                )
            )
    return out


def constraint_target(
    dataset: str,
    version: int,
    snapshot: int,
    constraint: Constraint,
    *,
    chunk_id: str | None = None,
    chunk_index: int | None = None,
) -> Target:
    """What a constraint event is about: its document, the chunk it was set on, and its start as the boundary."""
    return Target(
        dataset,
        version,
        snapshot,
        constraint.doc_id,
        constraint.doc_sha256,
        chunk_id,
        chunk_index,
        constraint.start,
    )


def record_constraint(
    ledger: Ledger,
    dataset: str,
    version: int,
    snapshot: int,
    constraint: Constraint,
    *,
    reviewer: str,
    chunk_id: str | None = None,
    chunk_index: int | None = None,
) -> Constraint:
    """Append the constraint to the ledger; returns it with its event id."""
    target = constraint_target(
        dataset, version, snapshot, constraint, chunk_id=chunk_id, chunk_index=chunk_index
    )
    event_id = ledger.constraint(target, constraint.kind, reviewer=reviewer, note=constraint.payload())
    return Constraint(
        **{**{f: getattr(constraint, f) for f in Constraint.__dataclass_fields__}, "id": event_id}
    )


def resolve_flag(
    ledger: Ledger, flag: Event, snapshot: int, constraint: int | None, *, reviewer: str = REPROCESS_REVIEWER
) -> int:
    """Append the resolution of ``flag`` by ``snapshot`` (an ``unflag`` carrying the record)."""
    target = Target(
        flag.dataset,
        flag.version,
        snapshot,
        flag.doc_id,
        flag.doc_sha256,
        flag.chunk_id,
        flag.chunk_index,
        flag.boundary,
    )
    note = json.dumps(
        {"chunkyard_resolution": 1, "flag_event": flag.id, "snapshot": snapshot, "constraint": constraint},
        sort_keys=True,
    )
    return ledger.append("unflag", target, reviewer=reviewer, reason=flag.reason, note=note)


def read_constraints(ledger_file: Path, dataset: str, version: int) -> dict[str, list[Constraint]]:
    """Active constraints of one dataset version; none when there is no ledger (it is not created)."""
    if not ledger_exists(ledger_file):  # a link is refused; a 0-byte placeholder holds nothing
        return {}
    with Ledger(ledger_file) as ledger:
        return active_constraints(ledger.events(dataset, version))


def stale_constraints(manifest: dict) -> list[dict]:
    """A snapshot's constraints whose text is gone from their document (for the reviewer to redo)."""
    return [entry for entry in manifest.get("constraints") or [] if entry.get("status") == "stale"]


__all__ = [
    "REPROCESS_REVIEWER",
    "stale_constraints",
    "Resolution",
    "active_constraints",
    "constraint_target",
    "decode_constraint",
    "open_flags",
    "read_constraints",
    "record_constraint",
    "resolution_of",
    "resolutions",
    "resolve_flag",
    "withdrawn_flags",
]


def reviewer_constraint_lines(manifest: dict) -> list[str]:
    """What a reprocess says about the constraints set in the reviewer (T keeps a selection together, H
    breaks at the cursor), one line each: those come from no flag, so the flag lines never mentioned them.

    ``manifest``: the reprocess snapshot's manifest (its ``constraints`` outcomes)."""
    lines = []
    for item in manifest.get("constraints") or []:
        if (
            not isinstance(item, dict)
            or item.get("origin") == "flag"
            or item.get("flag_event") is not None
            or item.get("status") == "stale"
        ):  # stale ones have their own line
            continue
        kind = item.get("kind")
        key = (
            "T, keep together"
            if kind == "keep_together"
            else "H, break here"
            if kind == "break_here"
            else kind
        )
        start, end = item.get("placed") or (item.get("start"), item.get("end"))
        where = f"[{start}:{end})" if kind == "keep_together" else f"at {start}"
        lines.append(
            f"  constraint {item.get('id')} ({key}, set in the reviewer) on {item.get('doc_id')} {where}: "
            f"{item.get('status', 'not applied')}"
        )
    return lines
