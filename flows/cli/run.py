"""``chunkyard run``, ``reprocess`` and ``schedule``: the commands that run the Prefect flows."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from chunkyard.chunking.errors import UsageError
from chunkyard.chunking.words import plural
from chunkyard.flows.cli.command import (
    EXIT_OK,
    EXIT_SKIPPED,
    Command,
    load_for_chunking,
    local_path,
    positive_int,
)
from chunkyard.flows.cli.session import Session
from chunkyard.flows.console import one_line_prefect_errors
from chunkyard.flows.settings import configure_prefect

# chunkyard.flows.run, .reprocess and .schedule import Prefect (≈1 s): each handler imports its flow
# module once the config has been checked, while the Prefect server starts on the other core. The
# server and worker modules (subprocess, urllib, multiprocessing) are imported by the handlers too, so
# that the commands without a flow do not load them.


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path)
    parser.add_argument("--source", type=Path, help="source folder (default: the config's source.path)")
    parser.add_argument(
        "--output", help="output folder or URI such as s3://bucket/prefix (default: the config's output.path)"
    )
    parser.add_argument(
        "--task-runner",
        choices=["thread", "process", "dask"],
        default="thread",
        help="thread (default), process (every core of this machine) or dask",
    )
    parser.add_argument(
        "--workers", type=positive_int, help="worker processes for process/dask (default: every core)"
    )
    parser.add_argument(
        "--address",
        help="with --task-runner dask: a Dask scheduler address (tcp://host:8786); default: a local cluster",
    )
    parser.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    parser.add_argument(
        "--allow-mass-removal",
        action="store_true",
        help="publish even when the run removes more than output.max_removed_share of the previous "
        "snapshot's documents, or finds none",
    )


def _check_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.address and args.task_runner != "dask":
        # Otherwise ignored: the run would go on here while the operator believes their cluster ran it.
        parser.error("--address names a Dask scheduler: add --task-runner dask")


def cmd_run(args: argparse.Namespace, session: Session) -> int:
    from chunkyard.flows import workers

    configure_prefect()
    config = load_for_chunking(args.config)
    from chunkyard.chunking.pipeline import check_run  # ≈0.2 s of imports only the chunking commands need

    # A wrong folder or a config changed under its version is refused now, in a fraction of a second,
    # before a Prefect server, a forkserver or the flow starts (the flow checks again: a run may
    # publish meanwhile). It costs the server's head start the time of loading the config (≈0.3 s).
    check_run(config, args.source, args.output)
    if args.task_runner == "process":
        # The workers' parent imports Prefect while this process imports it too (two cores, one
        # wait). Process-pool tasks carry the API URL and settings with them, so the forkserver need
        # not wait for the server; Dask workers read theirs from the environment, so a local
        # cluster's forkserver starts below, once the server is known.
        workers.start_forkserver()
    session.server.start()  # it starts on the other core while this process imports Prefect and the flow
    started = time.perf_counter()
    with session.progress.bar() as progress:
        if args.task_runner == "dask" and not args.address:
            workers.start_forkserver()
        progress.status("importing Prefect")
        from chunkyard.flows import run as run_module

        session.server.ensure(progress.status)
        progress.status("starting the flow run")
        if not args.debug:
            one_line_prefect_errors()
        result = run_module.run(
            config,
            args.source,
            args.output,
            task_runner=args.task_runner,
            workers=args.workers,
            address=args.address,
            progress=progress.update,
            allow_mass_removal=args.allow_mass_removal,
        )
    elapsed = time.perf_counter() - started
    manifest = result.manifest
    if not result.published:
        if args.json:
            print(
                json.dumps(
                    {
                        "name": manifest["name"],
                        "version": manifest["version"],
                        "published": False,
                        "path": str(result.snapshot),
                        "seconds": round(elapsed, 3),
                    },
                    ensure_ascii=False,
                )
            )
        else:
            print(
                f"No change since {result.snapshot}: nothing new, changed or removed in "
                f"{manifest['counts']['documents']} documents; no snapshot published ({elapsed:.1f} s)"
            )
        return EXIT_OK
    if args.json:
        print(
            json.dumps(
                {
                    k: manifest[k]
                    for k in (
                        "name",
                        "version",
                        "snapshot",
                        "kind",
                        "counts",
                        "findings",
                        "size_statistics",
                        "skipped",
                    )
                }
                | {"path": str(result.snapshot), "seconds": round(elapsed, 3)},
                ensure_ascii=False,
            )
        )
    else:
        print_summary(result.snapshot, manifest, elapsed)
    return EXIT_SKIPPED if manifest["counts"]["skipped"] else EXIT_OK


def print_summary(snapshot: Any, manifest: dict[str, Any], elapsed: float) -> None:
    """What ``chunkyard run`` prints: the snapshot, its counts, the skips and the size table."""
    counts = manifest["counts"]
    mb = counts["bytes"] / 1e6
    print(
        f"Wrote {snapshot} ({manifest['kind']} snapshot {manifest['snapshot']} of "
        f"{manifest['name']} v{manifest['version']}) in {elapsed:.1f} s"
    )
    print(
        f"  documents: {counts['documents']} ({counts['new']} new, {counts['changed']} changed, "
        f"{counts['reused']} reused, {counts['removed']} removed), {mb:.1f} MB read, "
        f"{counts.get('text_chars', 0) / 1e6:.1f} M characters of text"
    )
    print(f"  chunks:    {counts['chunks']}")
    if counts["skipped"]:
        print(f"  skipped:   {counts['skipped']} (reasons in manifest.json)")
        for item in manifest["skipped"][:10]:
            print(f"    {item['doc_id']}: {item['reason']}")
        if counts["skipped"] > 10:
            print(f"    … {counts['skipped'] - 10} more")
    if counts.get("kept"):
        print(
            f"  kept:      {counts['kept']} that could not be read or chunked this time keep their previous "
            "chunks (manifest.json: kept)"
        )
    rows = manifest["size_statistics"]
    if rows:
        codes = sorted({code for row in rows for code in row["findings"]})
        width = max([len("rule")] + [len(str(row.get("rule", ""))) for row in rows])
        header = (
            f"  {'rule':<{width}} {'strategy':<10} {'docs':>5} {'chunks':>7} {'p5':>6} {'p50':>6} {'p95':>6}"
        )
        header += "".join(f" {_short(code):>9}" for code in codes)
        print("\n" + header)
        for row in rows:
            line = (
                f"  {str(row.get('rule', '')):<{width}} {row['strategy']:<10} {row['documents']:>5} "
                f"{row['chunks']:>7} {row['size_p5']:>6} {row['size_p50']:>6} {row['size_p95']:>6}"
            )
            for code in codes:
                share = row["findings"].get(code, {}).get("share", 0.0)
                line += f" {share * 100:>8.1f}%"
            print(line)
        if codes:
            print("  (finding columns: share of chunks; see `chunkyard preview` for details)")


def _short(code: str) -> str:
    return {
        "mid_sentence_start": "mid_start",
        "mid_sentence_end": "mid_end",
        "split_procedure": "split_proc",
        "heading_at_end": "head_end",
    }.get(code, code)[:9]


def _schedule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path)


def cmd_schedule(args: argparse.Namespace, session: Session) -> int:
    config = load_for_chunking(args.config)
    configure_prefect()
    if config.model.schedule is None:
        raise UsageError(f'{args.config}: no schedule: add `schedule: {{cron: "0 2 * * *", timezone: UTC}}`')
    from chunkyard.flows import server as server_module

    # Its own server, with every service (a scheduler among them), not the session's batch server.
    with server_module.prefect_server() as api_url:
        from chunkyard.flows.schedule import deployment_name, serve

        schedule = config.model.schedule
        print(
            f"Serving {deployment_name(config)} on '{schedule.cron}' ({schedule.timezone}) via {api_url}; "
            "Ctrl+C stops it",
            flush=True,
        )
        print(
            f"  to run it now, from another shell: PREFECT_API_URL={api_url} prefect deployment run "
            f"'chunkyard-scheduled/{deployment_name(config)}'",
            flush=True,
        )
        serve(config)
    return EXIT_OK


def _reprocess_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path)
    parser.add_argument(
        "--output", type=local_path("reprocess"), help="output folder (default: the config's output.path)"
    )
    parser.add_argument("--json", action="store_true", help="print the manifest summary as JSON")


def cmd_reprocess(args: argparse.Namespace, session: Session) -> int:
    """Apply review decisions: flagged documents rechunked under their constraints, the rest carried over."""
    config = load_for_chunking(args.config)
    from chunkyard.chunking.decisions import reviewer_constraint_lines
    from chunkyard.chunking.reprocess import open_flags_of_other_versions, prepare_reprocess

    context = prepare_reprocess(
        config, args.output
    )  # a refusal is one line now, not a failed flow's traceback
    session.server.ensure()
    started = time.perf_counter()
    from chunkyard.flows import reprocess as reprocess_module

    if not args.debug:
        one_line_prefect_errors()

    result = reprocess_module.reprocess(config, args.output)
    manifest = result.manifest
    flags = manifest.get("applied_flags", [])
    stale = [c for c in manifest.get("constraints", []) if c.get("status") == "stale"]
    if args.json:
        keys = (
            "name",
            "version",
            "snapshot",
            "parent_snapshot",
            "kind",
            "counts",
            "applied_flags",
            "constraints",
        )
        print(
            json.dumps(
                {k: manifest[k] for k in keys if k in manifest}
                | {"path": str(result.snapshot) if result.snapshot else None},
                ensure_ascii=False,
            )
        )
    elif result.snapshot is None:
        print(
            f"Nothing to reprocess in {config.name} v{config.version}: no new or changed constraints "
            f"(snapshot {manifest.get('parent_snapshot')} stays the newest)"
        )
    else:
        counts = manifest["counts"]
        print(
            f"Wrote {result.snapshot} (reprocess snapshot {manifest['snapshot']} of {manifest['name']} "
            f"v{manifest['version']}, parent {manifest['parent_snapshot']}) in {time.perf_counter() - started:.1f} s"
        )
        print(f"  documents: {counts['changed']} rechunked, {counts['reused']} carried over")
    if not args.json:
        constraints = {item["id"]: item for item in manifest.get("constraints", [])}
        for flag in flags:
            print(
                f"  flag {flag['event']} ({flag['reason']}) on {flag['doc_id']} chunk {flag['chunk_index']}: "
                f"{flag['status']}{unmet_hint(constraints.get(flag.get('constraint')), flag['status'], constraints)}"
            )
        for item in stale:
            print(f"  stale constraint {item['id']} ({item['kind']}) on {item['doc_id']}: its text is gone")
        for line in reviewer_constraint_lines(manifest):  # T/H constraints set in the reviewer (no flag line)
            print(line)
        for version, count in open_flags_of_other_versions(context).items():
            print(
                f"  note: {plural(count, 'open flag')} on v{version} not applied here (flags belong to the "
                f"version they were made on; review v{config.version} to flag its chunks)"
            )
    return EXIT_OK


def unmet_hint(
    constraint: dict[str, Any] | None, status: str, constraints: dict[int, dict[str, Any]] | None = None
) -> str:
    """Why a flag's constraint was not met, and what to do: a break constraint inside the span it keeps
    (the packer lets the break win), else the span is over the budget."""
    if status != "unmet" or constraint is None:
        return ""
    start, end = constraint.get("placed") or (constraint["start"], constraint["end"])
    if constraint.get("kind") == "keep_together":
        for other in (constraints or {}).values():
            at = (other.get("placed") or [None])[0]
            if (
                other.get("kind") == "break_here"
                and other.get("doc_id") == constraint.get("doc_id")
                and at is not None
                and start < at < end
            ):
                source = (
                    f"from flag {other['flag_event']}" if other.get("flag_event") else "set in the reviewer"
                )
                return (
                    f" (break_here constraint {other['id']} {source}, at {at}, lies inside the span it keeps "
                    f"together, [{start}:{end}), and a break wins over a keep; max_size is not the cause)"
                )
    return (
        f" (the {end - start:,} characters it keeps together, [{start}:{end}), do not fit max_size: raise "
        "max_size for this file, e.g. with a rule, or unflag it in the reviewer)"
    )


RUN = Command(
    "run",
    "chunk the config's source folder into the next snapshot",
    _run_arguments,
    cmd_run,
    check=_check_run,
)
SCHEDULE = Command(
    "schedule", "serve the chunking flow on the config's cron schedule", _schedule_arguments, cmd_schedule
)
REPROCESS = Command(
    "reprocess",
    "rechunk documents with open flags or constraints -> next snapshot",
    _reprocess_arguments,
    cmd_reprocess,
)
