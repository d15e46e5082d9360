"""``chunkyard sync`` and ``chunkyard prune``: thin command-line skins over ``chunkyard.chunking.sync``
and ``chunkyard.chunking.retention``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chunkyard.flows.cli.command import EXIT_FAILED, EXIT_OK, Command

if TYPE_CHECKING:
    from chunkyard.flows.cli.session import Session


def _sync_arguments(sync: argparse.ArgumentParser) -> None:
    sync.add_argument("config", type=Path)
    sync.add_argument("--sink", metavar="NAME", help="only this sink (default: every sink of the config)")
    sync.add_argument(
        "--to",
        metavar="SNAPSHOT",
        help="the snapshot to bring the store to (vX/NNNN, NNNN of the config's version, or a "
        "path), older ones too (a rollback); default the newest",
    )
    sync.add_argument(
        "--verify",
        action="store_true",
        help="change nothing: compare the store with its snapshot (ids, embed_text hashes) and "
        "say what differs (exit 1 when it does)",
    )
    sync.add_argument(
        "--ask", metavar="QUESTION", help="after syncing, print the 3 chunks nearest to QUESTION"
    )


def _prune_arguments(prune: argparse.ArgumentParser) -> None:
    prune.add_argument("config", type=Path)
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")


class _Progress:
    """A progress bar on stderr while a sink is embedded and written (only on a terminal)."""

    def __init__(self, sink: str, enabled: bool) -> None:
        self.enabled = enabled
        self.sink = sink
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
        return self

    def update(self, stage: str, done: int, total: int) -> None:
        if self._progress is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(f"{self.sink}: {stage}", total=total or None)
        self._progress.update(self._tasks[stage], completed=done, total=total or None)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def cmd_sync(args: argparse.Namespace, session: Session) -> int:
    from chunkyard.chunking.config import load_config
    from chunkyard.chunking.sync import SyncRefused, nearest, sink_config, sync_sink, verify_sink

    config = load_config(args.config)
    sinks = [sink_config(config, args.sink)] if args.sink else list(config.model.sinks)
    if not sinks:
        raise SyncRefused(
            f"{args.config}: no sinks: add `sinks: [{{name, type: lancedb|pgvector, uri|dsn, "
            "table, embedder}]` to the config"
        )
    if args.verify:
        code = EXIT_OK
        for sink in sinks:
            report = verify_sink(config, sink, args.to)
            if report.equal:
                print(
                    f"{sink.name}: {report.store} equals snapshot {report.snapshot} ({report.rows} rows: "
                    "ids, embed_text hashes and metadata match)"
                )
                continue
            code = EXIT_FAILED
            print(
                f"{sink.name}: {report.store} differs from snapshot {report.snapshot}: "
                f"{len(report.missing)} missing, {len(report.extra)} extra, {len(report.changed_text)} with "
                f"other embed_text, {len(report.changed_columns)} with other metadata; run `chunkyard sync` "
                "to repair"
            )
            for label, ids in (
                ("missing", report.missing),
                ("extra", report.extra),
                ("other embed_text", report.changed_text),
                ("other metadata", report.changed_columns),
            ):
                for chunk_id in ids[:5]:
                    print(f"  {label}: {chunk_id}")
                if len(ids) > 5:
                    print(f"  {label}: … {len(ids) - 5} more")
        return code
    for sink in sinks:
        with _Progress(sink.name, session.progress.enabled) as progress:
            report = sync_sink(config, sink, args.to, progress.update)
        if report.method == "up to date":
            print(
                f"{sink.name}: {report.store} already holds {report.target} ({report.rows} rows); nothing to do"
            )
        else:
            print(
                f"{sink.name}: {report.store} {report.held or 'empty'} → {report.target} ({report.method}): "
                f"{report.upserts} upserts, {report.deletes} deletes, {report.embedded} embedded, "
                f"{report.cached} from the cache; {report.rows} rows"
            )
        if args.ask:
            for rank, row in enumerate(nearest(config, sink, args.ask), start=1):
                where = " > ".join(row.get("section_path") or []) or row.get("doc_id")
                text = " ".join(str(row.get("text") or "").split())
                print(f"  {rank}. {row.get('doc_id')} [{where}] {text[:100]}")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace, session: Session) -> int:
    from chunkyard.chunking.config import load_config
    from chunkyard.chunking.retention import prune

    config = load_config(args.config)
    result = prune(config, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    print(
        f"{config.name}: {verb} {len(result.remove)} snapshot{'s' if len(result.remove) != 1 else ''}"
        + (f" ({', '.join(result.remove)})" if result.remove else "")
        + f"; kept {len(result.kept)}"
    )
    for ref, reason in result.kept.items():
        print(f"  kept {ref}: {reason}")
    return EXIT_OK


SYNC = Command(
    "sync",
    "bring each vector-store sink of the config to the newest snapshot (or --to one)",
    _sync_arguments,
    cmd_sync,
)
PRUNE = Command(
    "prune", "remove old snapshots beyond the config's retention: {keep: N}", _prune_arguments, cmd_prune
)
