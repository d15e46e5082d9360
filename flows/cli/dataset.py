"""``chunkyard flag``, ``ledger``, ``diff`` and ``export``: work on stored datasets; no flow, no server."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.errors import UsageError
from chunkyard.chunking.ledger import (
    LEDGER_FILE,
    REASONS,
    Ledger,
    Target,
    check_reviewer,
    default_reviewer,
    export_events,
    import_events,
    ledger_path,
)
from chunkyard.flows.cli.command import EXIT_FAILED, EXIT_OK, Command, local_path
from chunkyard.flows.cli.session import Session


def _flag_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", type=local_path("flag"), help="OUTPUT/NAME, a version folder or a snapshot folder"
    )
    parser.add_argument("--doc", required=True, metavar="DOC_ID")
    parser.add_argument("--chunk", required=True, type=int, metavar="N", help="the chunk's chunk_index")
    parser.add_argument("--reason", required=True, choices=REASONS)
    parser.add_argument("--note", help="free text kept with the flag")
    parser.add_argument(
        "--boundary", action="store_true", help="flag the boundary after chunk N, not the chunk"
    )
    parser.add_argument("--reviewer", help="reviewer name (default: the config's reviewer, else the OS user)")


def cmd_flag(args: argparse.Namespace, session: Session) -> int:
    import pyarrow.compute as pc  # ≈0.1 s that only this command needs

    from chunkyard.chunking.review import config_facts

    snapshot = Snapshot.open(args.path)
    documents = snapshot.documents(["doc_id", "sha256"], [args.doc])
    if documents.num_rows == 0:
        raise UsageError(f"{snapshot.path}: no document {args.doc!r} in this snapshot")
    chunks = snapshot.chunks(["chunk_id", "doc_id", "chunk_index", "end"], [args.doc])
    chunks = chunks.filter(pc.equal(chunks.column("doc_id"), args.doc))
    match = chunks.filter(pc.equal(chunks.column("chunk_index"), args.chunk))
    if match.num_rows == 0:
        raise UsageError(
            f"{snapshot.path}: {args.doc!r} has no chunk {args.chunk} "
            f"(it has chunks 0–{max(chunks.num_rows - 1, 0)})"
        )
    if args.boundary and args.chunk >= chunks.num_rows - 1:
        raise UsageError(f"chunk {args.chunk} is the last of {args.doc!r}: there is no boundary after it")
    if args.reviewer is not None and not args.reviewer.strip():
        raise UsageError("a reviewer name is required to record a decision: --reviewer is empty")
    reviewer = args.reviewer or config_facts(snapshot.manifest)[0] or default_reviewer()
    check_reviewer(reviewer)  # before the ledger is opened (or created)
    target = Target(
        snapshot.name,
        snapshot.version,
        snapshot.number,
        args.doc,
        documents.column("sha256")[0].as_py(),
        match.column("chunk_id")[0].as_py(),
        args.chunk,
        match.column("end")[0].as_py() if args.boundary else None,
    )
    path = ledger_path(snapshot.path)
    with Ledger(path) as ledger:
        event = ledger.flag(target, args.reason, reviewer=reviewer, note=args.note)
    where = "the boundary after chunk" if args.boundary else "chunk"
    print(
        f"flagged {where} {args.chunk} of {args.doc} as {args.reason} (event {event} in {path}, by {reviewer})"
    )
    return EXIT_OK


def _ledger_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    export = actions.add_parser(
        "export", help="write every readable event to JSON Lines (works on a damaged ledger)"
    )
    export.add_argument("path", type=Path, help="review.sqlite, or OUTPUT/NAME")
    export.add_argument("--out", required=True, type=Path, help="the JSONL file to write")
    export.set_defaults(handler=cmd_ledger_export)
    load = actions.add_parser("import", help="load exported events into a new (empty) ledger")
    load.add_argument(
        "path",
        type=Path,
        help="review.sqlite (or another *.sqlite file), or OUTPUT/NAME (created if need be)",
    )
    load.add_argument("events", type=Path, help="a JSONL file written by `chunkyard ledger export`")
    load.set_defaults(handler=cmd_ledger_import)


def ledger_file(path: Path) -> Path:
    """``review.sqlite`` itself, or the ledger of the dataset folder ``OUTPUT/NAME`` (which may not exist
    yet: a path that does not exist and is not named like a database file is a dataset folder)."""
    folder = path.is_dir() or (
        not path.exists() and path.suffix.lower() not in (".sqlite", ".sqlite3", ".db")
    )
    return path / LEDGER_FILE if folder else path


def cmd_ledger_export(args: argparse.Namespace, session: Session) -> int:
    path = ledger_file(args.path)
    written, lost = export_events(path, args.out)
    print(
        f"Wrote {args.out}: {written} events from {path}"
        + (f"; {lost} unreadable events lost" if lost else "")
    )
    return EXIT_FAILED if lost else EXIT_OK


def cmd_ledger_import(args: argparse.Namespace, session: Session) -> int:
    path = ledger_file(args.path)
    count = import_events(path, args.events)
    print(f"Imported {count} events from {args.events} into {path}")
    return EXIT_OK


def _diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "a", metavar="PATH_A", help="a snapshot, version folder or dataset folder (or its URI)"
    )
    parser.add_argument("b", metavar="PATH_B")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")
    parser.add_argument(
        "--all", action="store_true", help="list unchanged documents too (--json always lists every document)"
    )


def cmd_diff(args: argparse.Namespace, session: Session) -> int:
    from chunkyard.chunking.versions import diff_snapshots, format_diff

    diff = diff_snapshots(Snapshot.open(args.a), Snapshot.open(args.b))
    if args.json:
        print(json.dumps(diff.to_json(), ensure_ascii=False))
    else:
        print(format_diff(diff, all_documents=args.all))
    return EXIT_OK


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a snapshot, version folder or dataset folder (or its URI)")
    parser.add_argument("--format", required=True, choices=["parquet", "jsonl"])
    parser.add_argument("--out", required=True, type=Path, help="the file to write (replaced atomically)")
    parser.add_argument("--since", metavar="OLD", help="write a change-set (upserts + deletes) since OLD")


def cmd_export(args: argparse.Namespace, session: Session) -> int:
    from chunkyard.chunking.export import export

    counts = export(args.path, args.out, args.format, since=args.since)
    what = f"change-set since {counts['since']}" if counts["since"] else "export"
    print(
        f"Wrote {args.out}: {what} of {counts['snapshot']} — {counts['upserts']} upserts, "
        f"{counts['deletes']} deletes ({args.format})"
    )
    return EXIT_OK


FLAG = Command(
    "flag", "record a reviewer flag on a chunk in the dataset's review ledger", _flag_arguments, cmd_flag
)
LEDGER = Command("ledger", "recover a review ledger: events out to JSON Lines and back", _ledger_arguments)
DIFF = Command(
    "diff",
    "chunks added / removed / changed / unchanged per document between snapshots",
    _diff_arguments,
    cmd_diff,
)
EXPORT = Command(
    "export",
    "export chunks for a vector store, or the change-set since a snapshot",
    _export_arguments,
    cmd_export,
)
