"""Which old snapshots ``chunkyard prune`` may remove, and removing them.

Method. The snapshots of a dataset (every version) are ordered newest first by (version, number);
``retention: {keep: N}`` keeps the first N. Whatever N says, a snapshot is never removed when it is

- the newest of the dataset, or the newest of the config's version (the next run builds on it);
- held by a sink, or the target of a sync that has not finished (``OUTPUT/NAME/.sinks/``);
- referred to by an open flag or an active constraint in the review ledger
  (``chunkyard.chunking.decisions``).

A snapshot is removed by renaming it to a hidden name first (readers list only numbered folders
holding a manifest, so it disappears at once and whole), then deleting that folder.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from chunkyard.chunking.config import Config
from chunkyard.chunking.dataset import list_snapshots
from chunkyard.chunking.errors import UsageError

_VERSION = re.compile(r"^v(\d+)$")


class PruneRefused(UsageError):
    """A prune that cannot start (no retention in the config)."""


@dataclass
class PrunePlan:
    remove: list[str] = field(default_factory=list)  # vX/NNNN, oldest first
    kept: dict[str, str] = field(default_factory=dict)  # vX/NNNN -> why it stays


def dataset_snapshots(dataset: Path) -> list[tuple[int, int]]:
    """(version, number) of every published snapshot of a dataset, newest first."""
    found = []
    if dataset.is_dir():
        for folder in dataset.iterdir():
            match = _VERSION.match(folder.name)
            if match and folder.is_dir():
                found.extend((int(match.group(1)), number) for number in list_snapshots(folder))
    return sorted(found, reverse=True)


def _ref(version: int, number: int) -> str:
    return f"v{version}/{number:04d}"


def protected(config: Config, dataset: Path, snapshots: list[tuple[int, int]]) -> dict[str, str]:
    """Snapshots that are never removed, with the reason (the first one found)."""
    from chunkyard.chunking.sync import all_states

    reasons: dict[str, str] = {}

    def protect(ref: str, why: str) -> None:
        reasons.setdefault(ref, why)

    if snapshots:
        protect(_ref(*snapshots[0]), "the newest snapshot")
    current = [s for s in snapshots if s[0] == config.version]
    if current:
        protect(_ref(*current[0]), f"the newest of v{config.version}, which the next run builds on")
    for state in all_states(dataset):
        if state.snapshot:
            protect(state.snapshot, f"held by sink {state.sink}")
        if state.target:
            protect(state.target, f"target of an unfinished sync of sink {state.sink}")
    ledger_file = dataset / "review.sqlite"
    if ledger_file.is_file():
        from chunkyard.chunking.decisions import decode_constraint, open_flags
        from chunkyard.chunking.ledger import Ledger, active_events

        with Ledger(ledger_file) as ledger:
            events = ledger.events(config.name)
        for flag in open_flags(events):
            protect(_ref(flag.version, flag.snapshot), f"an open flag (event {flag.id}) refers to it")
        for event in active_events(events):
            if decode_constraint(event) is not None:
                protect(_ref(event.version, event.snapshot), f"a constraint (event {event.id}) refers to it")
    return reasons


def plan_prune(config: Config) -> PrunePlan:
    if config.model.retention is None:
        raise PruneRefused(
            f"{config.path}: no retention in the config: add `retention: {{keep: N}}` (N snapshots "
            "kept besides those a sink, a flag or a constraint needs)"
        )
    keep = config.model.retention.keep
    dataset = config.output_dir / config.name
    snapshots = dataset_snapshots(dataset)
    plan = PrunePlan()
    guarded = protected(config, dataset, snapshots)
    for index, snapshot in enumerate(snapshots):
        ref = _ref(*snapshot)
        if ref in guarded:
            plan.kept[ref] = guarded[ref]
        elif index < keep:
            plan.kept[ref] = f"one of the {keep} newest (retention.keep)"
        else:
            plan.remove.append(ref)
    plan.remove.reverse()
    return plan


def prune(config: Config, dry_run: bool = False) -> PrunePlan:
    """Remove the snapshots ``plan_prune`` selects (none with ``dry_run``)."""
    plan = plan_prune(config)
    if dry_run:
        return plan
    dataset = config.output_dir / config.name
    for leftover in dataset.glob("v*/.pruned-*"):  # a prune killed while deleting
        shutil.rmtree(leftover, ignore_errors=True)
    for ref in plan.remove:
        folder = dataset / ref
        hidden = folder.parent / f".pruned-{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.replace(folder, hidden)  # gone for readers at once, whole
        shutil.rmtree(hidden)
    return plan


__all__ = ["PrunePlan", "PruneRefused", "dataset_snapshots", "plan_prune", "protected", "prune"]
