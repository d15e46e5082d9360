"""The ``chunkyard`` command line: one entry point, one clear line on failure.

Exit codes: 0 success; 1 failure; 2 bad usage, an invalid or refused config (nothing was done);
3 the run completed but skipped some files (listed in the manifest); 130 interrupted (Ctrl+C).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    if args.command == "run" and args.address and args.task_runner != "dask":
        # Otherwise ignored: the run would go on here while the operator believes their cluster ran it.
        args.usage_error("--address names a Dask scheduler: add --task-runner dask")
    interrupted, restore = _note_interrupts()
    _SERVER.interrupted = interrupted
    try:
        return _main(args, interrupted)
    finally:
        restore()


def _main(args: argparse.Namespace, interrupted: Callable[[], bool]) -> int:
    try:
        with _SERVER:
            return args.handler(args)
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:  # every failure is one clear line unless --debug
        if interrupted():  # Ctrl+C inside a library that wrapped it (pydantic: PydanticSerializationError)
            return _interrupted()
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            # The reader of our output stopped early (``chunkyard preview ... | head``): nothing to say.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_FAILED
        from chunkyard.chunking.errors import ChunkyardError, ConfigError

        if getattr(args, "debug", False):
            raise
        if isinstance(exc, ConfigError):
            for issue in exc.issues:
                print(f"chunkyard: {issue}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, ChunkyardError):
            print(f"chunkyard: error: {exc}", file=sys.stderr)
            return EXIT_FAILED if not getattr(exc, "usage", False) else EXIT_USAGE
        if isinstance(exc, OSError) and exc.strerror:  # a full disk, a read-only folder, ...
            where = f": {exc.filename}" if exc.filename else ""
            print(f"chunkyard: error: {exc.strerror.lower()}{where} (nothing was published; fix it and "
                  "run again)", file=sys.stderr)
            return EXIT_FAILED
        print(f"chunkyard: unexpected error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
              file=sys.stderr)
        return EXIT_FAILED


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (POLLERR), not some other broken pipe."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _interrupted() -> int:
    print("chunkyard: interrupted; no snapshot was published", file=sys.stderr)
    return EXIT_INTERRUPTED


def _note_interrupts() -> tuple[Callable[[], bool], Callable[[], None]]:
    """Remember a Ctrl+C (SIGINT) even when a library turns the KeyboardInterrupt into another error.
    Returns (was there one, put the previous handler back)."""
    import signal
    import threading

    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return (lambda: False), (lambda: None)  # not ours to change (SIGINT ignored, another handler)

    def on_interrupt(signum: int, frame: Any) -> None:
        seen.append(True)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_interrupt)
    return (lambda: bool(seen)), (lambda: signal.signal(signal.SIGINT, signal.default_int_handler))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chunkyard", description="Chunk document corpora into versioned Parquet datasets.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="chunk the config's source folder into the next snapshot")
    run.add_argument("config", type=Path)
    run.add_argument("--source", type=Path, help="source folder (default: the config's source.path)")
    run.add_argument("--output", help="output folder or URI such as s3://bucket/prefix (default: the config's "
                                      "output.path)")
    run.add_argument("--task-runner", choices=["thread", "process", "dask"], default="thread",
                     help="thread (default), process (every core of this machine) or dask")
    run.add_argument("--workers", type=_positive_int, help="worker processes for process/dask (default: every core)")
    run.add_argument("--address", help="with --task-runner dask: a Dask scheduler address (tcp://host:8786); "
                                      "default: a local cluster")
    run.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    run.set_defaults(handler=cmd_run, usage_error=run.error)

    schedule = sub.add_parser("schedule", help="serve the chunking flow on the config's cron schedule")
    schedule.add_argument("config", type=Path)
    schedule.set_defaults(handler=cmd_schedule)

    validate = sub.add_parser("validate", help="check a config and print every problem with its line")
    validate.add_argument("config", type=Path)
    validate.set_defaults(handler=cmd_validate)

    preview = sub.add_parser("preview", help="print the chunks of one file with spans, sizes and findings")
    preview.add_argument("config", type=Path)
    preview.add_argument("file", type=Path)
    preview.add_argument("--text", action="store_true", help="print each chunk's full text")
    preview.add_argument("--json", action="store_true", help="print the chunks as JSON lines")
    preview.set_defaults(handler=cmd_preview)

    review = sub.add_parser("review", help="open the desktop reviewer on a dataset (needs the gui extra)")
    review.add_argument("path", nargs="?", type=_local("review"),
                        help="OUTPUT/NAME, a version folder or a snapshot folder")
    review.add_argument("--doc", metavar="DOC_ID", help="the document to show first")
    review.add_argument("--screenshot", metavar="PNG", type=Path,
                        help="render the window with the first (or --doc) document to PNG and exit")
    review.set_defaults(handler=cmd_review)

    from chunkyard.chunking.ledger import REASONS

    flag = sub.add_parser("flag", help="record a reviewer flag on a chunk in the dataset's review ledger")
    flag.add_argument("path", type=_local("flag"), help="OUTPUT/NAME, a version folder or a snapshot folder")
    flag.add_argument("--doc", required=True, metavar="DOC_ID")
    flag.add_argument("--chunk", required=True, type=int, metavar="N", help="the chunk's chunk_index")
    flag.add_argument("--reason", required=True, choices=REASONS)
    flag.add_argument("--note", help="free text kept with the flag")
    flag.add_argument("--boundary", action="store_true", help="flag the boundary after chunk N, not the chunk")
    flag.add_argument("--reviewer", help="reviewer name (default: the config's reviewer, else the OS user)")
    flag.set_defaults(handler=cmd_flag)

    ledger = sub.add_parser("ledger", help="recover a review ledger: events out to JSON Lines and back")
    ledger_sub = ledger.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    ledger_export = ledger_sub.add_parser("export", help="write every readable event to JSON Lines (works on a "
                                                         "damaged ledger)")
    ledger_export.add_argument("path", type=Path, help="review.sqlite, or OUTPUT/NAME")
    ledger_export.add_argument("--out", required=True, type=Path, help="the JSONL file to write")
    ledger_export.set_defaults(handler=cmd_ledger_export)
    ledger_import = ledger_sub.add_parser("import", help="load exported events into a new (empty) ledger")
    ledger_import.add_argument("path", type=Path, help="review.sqlite (or another *.sqlite file), or OUTPUT/NAME "
                                                       "(created if need be)")
    ledger_import.add_argument("events", type=Path, help="a JSONL file written by `chunkyard ledger export`")
    ledger_import.set_defaults(handler=cmd_ledger_import)

    reprocess = sub.add_parser("reprocess", help="rechunk documents with open flags or constraints -> next snapshot")
    reprocess.add_argument("config", type=Path)
    reprocess.add_argument("--output", type=_local("reprocess"),
                           help="output folder (default: the config's output.path)")
    reprocess.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    reprocess.set_defaults(handler=cmd_reprocess)

    diff = sub.add_parser("diff", help="chunks added / removed / changed / unchanged per document between snapshots")
    diff.add_argument("a", metavar="PATH_A", help="a snapshot, version folder or dataset folder (or its URI)")
    diff.add_argument("b", metavar="PATH_B")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON")
    diff.add_argument("--all", action="store_true",
                      help="list unchanged documents too (--json always lists every document)")
    diff.set_defaults(handler=cmd_diff)

    export = sub.add_parser("export", help="export chunks for a vector store, or the change-set since a snapshot")
    export.add_argument("path", help="a snapshot, version folder or dataset folder (or its URI)")
    export.add_argument("--format", required=True, choices=["parquet", "jsonl"])
    export.add_argument("--out", required=True, type=Path, help="the file to write (replaced atomically)")
    export.add_argument("--since", metavar="OLD", help="write a change-set (upserts + deletes) since OLD")
    export.set_defaults(handler=cmd_export)

    evaluate = sub.add_parser("eval", help="score configs by retrieval quality on a question set")
    evaluate.add_argument("configs", type=Path, nargs="+", metavar="CONFIG")
    evaluate.add_argument("--questions", type=Path, required=True, help="JSONL question set with references")
    evaluate.add_argument("--k", type=_k_values, default=(5,), metavar="K[,K...]",
                          help="how many chunks to retrieve; several at once, e.g. 1,5,10 (default 5)")
    evaluate.add_argument("--retriever", choices=["bm25", "dense", "both"], default="both",
                          help="BM25 (bm25s), dense (WordLlama, offline) or both (default)")
    evaluate.add_argument("--out", type=Path, help="results folder (default: ./evaluations/<UTC time>)")
    evaluate.add_argument("--refresh", action="store_true",
                          help="run the chunking flow even when a snapshot with the config's hash exists")
    evaluate.set_defaults(handler=cmd_eval)

    # --- sync and prune (issue 24): their own module; to move into the flows/cli/ package as is.
    from chunkyard.flows.sync_commands import add_parsers as add_sync_parsers

    add_sync_parsers(sub)
    # --- end of sync and prune
    return parser


def _local(command: str):
    """An argparse type: a local path, or a usage error for a URI (the command reads local datasets only)."""

    def parse(text: str) -> Path:
        from chunkyard.chunking.storage import is_uri

        if is_uri(text) and not text.lower().startswith("file://"):
            raise argparse.ArgumentTypeError(
                f"{text.split('?', 1)[0]}: `chunkyard {command}` works on local datasets only (the review ledger "
                "is a local file); copy the dataset to this machine first")
        if text.lower().startswith("file://"):
            from chunkyard.chunking.storage import location

            return location(text)
        return Path(text)

    return parse


# ---------------------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from chunkyard.chunking.config import field_line
    from chunkyard.chunking.errors import ConfigError, ConfigIssue
    from chunkyard.chunking.pipeline import RunRefused, check_run

    config = _load(args.config)
    try:  # what `run` would refuse before any work: the folders, and the datasets already written
        check_run(config)  # (a config changed under a version that has snapshots)
    except RunRefused as exc:
        line = field_line(config.text, exc.field) if exc.field else None
        raise ConfigError([ConfigIssue(str(args.config), line, exc.field, str(exc))]) from None
    from chunkyard.chunking.embeddings import EmbeddingError, embedder_for

    sink_issues = []
    for index, sink in enumerate(config.model.sinks):  # what `sync` would refuse: a model folder that is not there
        try:
            embedder_for(sink.embedder, config.base_dir)
        except EmbeddingError as exc:
            sink_issues.append(ConfigIssue(str(args.config), field_line(config.text, "sinks"),
                                           f"sinks[{index}].embedder", str(exc)))
    if sink_issues:
        raise ConfigError(sink_issues)
    rules = len(config.rule_settings)
    print(f"{args.config}: ok — dataset {config.name} v{config.version}, strategy {config.chunker.strategy}, "
          f"{config.chunker.max_size} {config.chunker.unit} (overlap {config.chunker.overlap}), "
          f"{rules} rule{'s' if rules != 1 else ''}, config hash {config.hash}")
    return EXIT_OK


def cmd_preview(args: argparse.Namespace) -> int:
    from chunkyard.chunking.api import split_document
    from chunkyard.chunking.documents import Skipped, read_document
    from chunkyard.chunking.errors import ChunkyardError
    from chunkyard.chunking.findings import FINDINGS
    from chunkyard.chunking.words import plural

    config = _load(args.config)
    problem = _not_a_file(args.file)
    if problem:
        print(f"chunkyard: error: {args.file}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    path = args.file.resolve()
    try:
        doc_id = path.relative_to(config.source_dir).as_posix()
    except ValueError:
        doc_id = path.name
        print(f"chunkyard: note: {args.file} is outside the source folder {config.source_dir}; previewed as "
              f"{doc_id!r}", file=sys.stderr)
    else:
        if not config.is_included(doc_id):
            print(f"chunkyard: note: {doc_id} is not in the dataset (source.include/exclude leave it out); "
                  "a run would not chunk it", file=sys.stderr)
    document = read_document(path, doc_id)
    if isinstance(document, Skipped):
        raise ChunkyardError(f"{args.file}: skipped: {document.reason}")
    settings = config.settings_for(doc_id)
    result = split_document(document.text, settings, doc_id, base_dir=config.base_dir,
                            title=document.title or None)
    if args.json:
        for chunk in result.chunks:
            print(json.dumps({
                "index": chunk.index, "start": chunk.start, "end": chunk.end, "size": chunk.size,
                "unit": settings.unit, "n_tokens": chunk.n_tokens, "section_path": list(chunk.section_path),
                "findings": list(chunk.findings), "text": chunk.text, "embed_text": chunk.embed_text,
            }, ensure_ascii=False))
        return EXIT_OK
    print(f"{doc_id}: {result.strategy}, {len(result.chunks)} chunks, max {settings.max_size} {settings.unit}, "
          f"overlap {settings.overlap}; title: {result.title or '—'}")
    for start, end, reason in result.exclusions:
        print(f"  excluded [{start}:{end}] {reason}")
    for chunk in result.chunks:
        section = " > ".join(chunk.section_path) or "—"
        print(f"\n#{chunk.index}  [{chunk.start}:{chunk.end}]  {chunk.size} {settings.unit}  "
              f"({chunk.n_chars} chars{'' if chunk.n_tokens is None else f', {chunk.n_tokens} tokens'})  § {section}")
        for code in chunk.findings:
            print(f"   ! {code}: {FINDINGS.get(code, ('',))[0]}")
        if args.text:
            for line in chunk.text.splitlines():
                print(f"   | {line}")
        else:
            lines = chunk.text.splitlines()
            print(f"   | {_clip(lines[0])}")
            if len(lines) > 2:
                print(f"   | … {plural(len(lines) - 2, 'more line')}")
            if len(lines) > 1:
                print(f"   | {_clip(lines[-1])}")
    return EXIT_OK


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be previewed as one file (missing, a folder, a FIFO, ...), or None.

    Checked before reading: opening a FIFO would wait for a writer forever (``run`` never opens one).
    """
    import stat

    try:
        info = path.stat()
    except FileNotFoundError:
        return "broken symbolic link (its target does not exist)" if path.is_symlink() else "no such file"
    except OSError:
        return None  # read_document gives the reason (permission denied, symlink loop, ...)
    if stat.S_ISDIR(info.st_mode):
        return "is a folder; preview takes one file"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    return None


class _Server:
    """The Prefect API server of one CLI command: the user's (``PREFECT_API_URL``) or one started on
    loopback by the first flow the command runs, stopped when ``main`` returns.

    Not Prefect's own temporary server: worker processes cannot share that one, and a SIGKILLed run
    would leave it running, where ours ends with this process (``chunkyard.flows.server``). Starting ours is
    also quicker (3.5–4.5 s against 6–7 s with an existing database), and ``start()`` lets it start
    while the command imports the rest (after the config is loaded and checked: a refused one starts none).
    """

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self._pending: Any = None  # a chunkyard.flows.server.PendingServer
        self.interrupted: Callable[[], bool] = lambda: False  # set by main(): was there a Ctrl+C

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        stack, pending, self._stack, self._pending = self._stack, self._pending, None, None
        if stack is None:
            return
        if pending is not None and ((exc_type is not None and issubclass(exc_type, KeyboardInterrupt))
                                    or self.interrupted()):
            pending.abandon()  # Ctrl+C: the prompt comes back at once, not after the server's shutdown
        stack.close()

    def start(self) -> None:
        """Start it (once) without waiting; call before Prefect is imported, for worker processes."""
        from chunkyard.flows.server import pending_server
        from chunkyard.flows.settings import configure_prefect

        configure_prefect(Path.cwd())
        if self._stack is None:
            stack = contextlib.ExitStack()
            self._pending = stack.enter_context(pending_server(batch=True))  # not for `schedule`
            self._stack = stack

    def ensure(self) -> None:
        """Start it if need be, and wait until it answers."""
        self.start()
        self._pending.ready()


_SERVER = _Server()


def cmd_run(args: argparse.Namespace) -> int:
    from chunkyard.flows.settings import configure_prefect

    configure_prefect(Path.cwd())
    config = _load(args.config)
    from chunkyard.chunking.pipeline import check_run

    # A wrong folder or a config changed under its version is refused now, in a fraction of a second,
    # before a Prefect server, a forkserver or the flow starts (the flow checks again: a run may
    # publish meanwhile). It costs the server's head start the time of loading the config (≈0.3 s).
    check_run(config, args.source, args.output)
    if args.task_runner == "process":
        from chunkyard.flows.workers import start_forkserver

        # The workers' parent imports Prefect while this process imports it too (two cores, one
        # wait). Process-pool tasks carry the API URL and settings with them, so the forkserver need
        # not wait for the server; Dask workers read theirs from the environment, so a local
        # cluster's forkserver starts below, once the server is known.
        start_forkserver()
    _SERVER.start()  # it starts on the other core while this process imports Prefect and the flow
    started = time.perf_counter()
    with _Progress() as progress:
        if args.task_runner == "dask" and not args.address:
            from chunkyard.flows.workers import start_forkserver

            start_forkserver()
        from chunkyard.flows import run as run_module

        _SERVER.ensure()

        if not args.debug:
            _one_line_prefect_errors()
        run_module.progress_hook = progress.update
        try:
            result = run_module.run(config, args.source, args.output, task_runner=args.task_runner,
                                    workers=args.workers, address=args.address)
        finally:
            run_module.progress_hook = None
    elapsed = time.perf_counter() - started
    manifest = result.manifest
    if not result.published:
        if args.json:
            print(json.dumps({"name": manifest["name"], "version": manifest["version"], "published": False,
                              "path": str(result.snapshot), "seconds": round(elapsed, 3)}, ensure_ascii=False))
        else:
            print(f"No change since {result.snapshot}: nothing new, changed or removed in "
                  f"{manifest['counts']['documents']} documents; no snapshot published ({elapsed:.1f} s)")
        return EXIT_OK
    if args.json:
        print(json.dumps({k: manifest[k] for k in ("name", "version", "snapshot", "kind", "counts",
                                                   "findings", "size_statistics", "skipped")}
                         | {"path": str(result.snapshot), "seconds": round(elapsed, 3)}, ensure_ascii=False))
    else:
        _print_summary(result.snapshot, manifest, elapsed)
    return EXIT_SKIPPED if manifest["counts"]["skipped"] else EXIT_OK


def cmd_schedule(args: argparse.Namespace) -> int:
    config = _load(args.config)
    from chunkyard.flows.server import prefect_server
    from chunkyard.flows.settings import configure_prefect

    configure_prefect(Path.cwd())
    if config.model.schedule is None:
        from chunkyard.chunking.errors import UsageError

        raise UsageError(f"{args.config}: no schedule: add `schedule: {{cron: \"0 2 * * *\", timezone: UTC}}`")
    with prefect_server() as api_url:
        from chunkyard.flows.schedule import deployment_name, serve

        schedule = config.model.schedule
        print(f"Serving {deployment_name(config)} on '{schedule.cron}' ({schedule.timezone}) via {api_url}; "
              "Ctrl+C stops it", flush=True)
        print(f"  to run it now, from another shell: PREFECT_API_URL={api_url} prefect deployment run "
              f"'chunkyard-scheduled/{deployment_name(config)}'", flush=True)
        serve(config)
    return EXIT_OK


class _NoTraceback:
    """A logging filter that keeps Prefect's error lines but drops their tracebacks on the console,
    and drops the flow-run lines that only repeat the failure chunkyard reports (``SAID_BY_CHUNKYARD``).

    chunkyard prints one clear line for a failure; the traceback stays available with --debug (and in
    the Prefect UI when a real server is used).
    """

    # Prefect's flow-run logger reports the exception that ends the flow ("Encountered exception
    # during execution: RunRefused(...)") and a Ctrl+C ("Crash detected! Execution was aborted by an
    # interrupt signal."); chunkyard prints each of these itself, in one line.
    SAID_BY_CHUNKYARD = ("Encountered exception during execution",
                         "Crash detected! Execution was aborted by an interrupt signal")

    def filter(self, record) -> bool:  # noqa: ANN001 - logging.LogRecord
        if record.name.startswith("prefect.flow_runs") and isinstance(record.msg, str) and \
                record.msg.startswith(self.SAID_BY_CHUNKYARD):
            return False
        if record.exc_info or record.exc_text:
            record.exc_info, record.exc_text = None, None
        return True


def _one_line_prefect_errors() -> None:
    import logging

    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for handler in logging.getLogger(name).handlers:
            console = isinstance(handler, logging.StreamHandler) or "Console" in type(handler).__name__
            if console and not any(isinstance(f, _NoTraceback) for f in handler.filters):
                handler.addFilter(_NoTraceback())


def _load(path: Path):
    """A config for a command that chunks: validated, and its tokenizer files loadable."""
    import dataclasses

    from chunkyard.chunking.config import load_config, tokenizer_load_issues
    from chunkyard.chunking.errors import ConfigError

    config = load_config(path)
    issues = tokenizer_load_issues(config)
    if issues:  # named as the user wrote the config's path, like load_config's issues
        raise ConfigError([dataclasses.replace(issue, file=str(path)) for issue in issues])
    return config


def _print_summary(snapshot: Path | None, manifest: dict[str, Any], elapsed: float) -> None:
    counts = manifest["counts"]
    mb = counts["bytes"] / 1e6
    print(f"Wrote {snapshot} ({manifest['kind']} snapshot {manifest['snapshot']} of "
          f"{manifest['name']} v{manifest['version']}) in {elapsed:.1f} s")
    print(f"  documents: {counts['documents']} ({counts['new']} new, {counts['changed']} changed, "
          f"{counts['reused']} reused, {counts['removed']} removed), {mb:.1f} MB")
    print(f"  chunks:    {counts['chunks']}")
    if counts["skipped"]:
        print(f"  skipped:   {counts['skipped']} (reasons in manifest.json)")
        for item in manifest["skipped"][:10]:
            print(f"    {item['doc_id']}: {item['reason']}")
        if counts["skipped"] > 10:
            print(f"    … {counts['skipped'] - 10} more")
    if counts.get("kept"):
        print(f"  kept:      {counts['kept']} that could not be read or chunked this time keep their previous "
              "chunks (manifest.json: kept)")
    rows = manifest["size_statistics"]
    if rows:
        codes = sorted({code for row in rows for code in row["findings"]})
        width = max([len("rule")] + [len(str(row.get("rule", ""))) for row in rows])
        header = (f"  {'rule':<{width}} {'strategy':<10} {'docs':>5} {'chunks':>7} {'p5':>6} {'p50':>6} "
                  f"{'p95':>6}")
        header += "".join(f" {_short(code):>9}" for code in codes)
        print("\n" + header)
        for row in rows:
            line = (f"  {str(row.get('rule', '')):<{width}} {row['strategy']:<10} {row['documents']:>5} "
                    f"{row['chunks']:>7} {row['size_p5']:>6} {row['size_p50']:>6} {row['size_p95']:>6}")
            for code in codes:
                share = row["findings"].get(code, {}).get("share", 0.0)
                line += f" {share * 100:>8.1f}%"
            print(line)
        if codes:
            print("  (finding columns: share of chunks; see `chunkyard preview` for details)")


def _short(code: str) -> str:
    return {"mid_sentence_start": "mid_start", "mid_sentence_end": "mid_end", "split_procedure": "split_proc",
            "heading_at_end": "head_end"}.get(code, code)[:9]


def _clip(line: str, width: int = 100) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


class _Progress:
    """A progress bar on stderr while a run is going (only on a terminal)."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty() and os.environ.get("CI") != "true"
        self._progress = None
        self._task = None
        self._started = time.perf_counter()

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("chunking"), BarColumn(), MofNCompleteColumn(), TextColumn("docs"),
                TextColumn("{task.fields[mb]:.1f} MB · {task.fields[rate]:.1f} MB/s"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("chunking", total=None, mb=0.0, rate=0.0)
        return self

    def update(self, docs: int, n_bytes: int, total_docs: int, total_bytes: int) -> None:
        if self._progress is None:
            return
        elapsed = max(1e-6, time.perf_counter() - self._started)
        self._progress.update(self._task, completed=docs, total=total_docs or None,
                              mb=n_bytes / 1e6, rate=n_bytes / 1e6 / elapsed)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()



def cmd_review(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    from chunkyard.chunking.errors import ChunkyardError

    try:  # Qt is imported only here and inside gui/
        from chunkyard.gui.app import run_review
    except ImportError as exc:
        raise ChunkyardError(f"the reviewer needs PySide6: pip install 'chunkyard[gui]' ({exc})") from None
    return run_review(args.path, screenshot=args.screenshot, doc=args.doc, started=started)


def cmd_flag(args: argparse.Namespace) -> int:
    import pyarrow.compute as pc

    from chunkyard.chunking.dataset import Snapshot
    from chunkyard.chunking.errors import UsageError
    from chunkyard.chunking.ledger import Ledger, Target, default_reviewer, ledger_path
    from chunkyard.chunking.review import config_facts

    snapshot = Snapshot.open(args.path)
    documents = snapshot.documents(["doc_id", "sha256"], [args.doc])
    if documents.num_rows == 0:
        raise UsageError(f"{snapshot.path}: no document {args.doc!r} in this snapshot")
    chunks = snapshot.chunks(["chunk_id", "doc_id", "chunk_index", "end"], [args.doc])
    chunks = chunks.filter(pc.equal(chunks.column("doc_id"), args.doc))
    match = chunks.filter(pc.equal(chunks.column("chunk_index"), args.chunk))
    if match.num_rows == 0:
        raise UsageError(f"{snapshot.path}: {args.doc!r} has no chunk {args.chunk} "
                         f"(it has chunks 0–{max(chunks.num_rows - 1, 0)})")
    if args.boundary and args.chunk >= chunks.num_rows - 1:
        raise UsageError(f"chunk {args.chunk} is the last of {args.doc!r}: there is no boundary after it")
    if args.reviewer is not None and not args.reviewer.strip():
        raise UsageError("a reviewer name is required to record a decision: --reviewer is empty")
    reviewer = args.reviewer or config_facts(snapshot.manifest)[0] or default_reviewer()
    target = Target(snapshot.name, snapshot.version, snapshot.number, args.doc, documents.column("sha256")[0].as_py(),
                    match.column("chunk_id")[0].as_py(), args.chunk,
                    match.column("end")[0].as_py() if args.boundary else None)
    path = ledger_path(snapshot.path)
    with Ledger(path) as ledger:
        event = ledger.flag(target, args.reason, reviewer=reviewer, note=args.note)
    where = "the boundary after chunk" if args.boundary else "chunk"
    print(f"flagged {where} {args.chunk} of {args.doc} as {args.reason} (event {event} in {path}, by {reviewer})")
    return EXIT_OK


def _ledger_file(path: Path) -> Path:
    """``review.sqlite`` itself, or the ledger of the dataset folder ``OUTPUT/NAME`` (which may not exist
    yet: a path that does not exist and is not named like a database file is a dataset folder)."""
    from chunkyard.chunking.ledger import LEDGER_FILE

    folder = path.is_dir() or (not path.exists() and path.suffix.lower() not in (".sqlite", ".sqlite3", ".db"))
    return path / LEDGER_FILE if folder else path


def cmd_ledger_export(args: argparse.Namespace) -> int:
    from chunkyard.chunking.ledger import export_events

    path = _ledger_file(args.path)
    written, lost = export_events(path, args.out)
    print(f"Wrote {args.out}: {written} events from {path}" + (f"; {lost} unreadable events lost" if lost else ""))
    return EXIT_FAILED if lost else EXIT_OK


def cmd_ledger_import(args: argparse.Namespace) -> int:
    from chunkyard.chunking.ledger import import_events

    path = _ledger_file(args.path)
    count = import_events(path, args.events)
    print(f"Imported {count} events from {args.events} into {path}")
    return EXIT_OK


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _k_values(text: str) -> tuple[int, ...]:
    from chunkyard.chunking.evaluation.runner import parse_ks

    try:
        return parse_ks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _eval_labels(paths: list[Path]) -> list[str]:
    """Short, distinct names for the configs: file stems, with the folder when stems repeat."""
    stems = [path.stem for path in paths]
    labels = [stem if stems.count(stem) == 1 else f"{path.resolve().parent.name}/{stem}"
              for stem, path in zip(stems, paths, strict=True)]
    return [label if labels.count(label) == 1 else str(path) for label, path in zip(labels, paths, strict=True)]


def cmd_eval(args: argparse.Namespace) -> int:
    """Score configs by retrieval quality: snapshot per config (reused or chunked), retrieve, compare."""
    from chunkyard.chunking.evaluation import (
        QuestionSetError,
        evaluate_snapshot,
        load_questions,
        record_evaluation,
        reusable_snapshot,
        write_results,
    )
    from chunkyard.chunking.evaluation.questions import locate_questions, source_text_reader
    from chunkyard.chunking.evaluation.report import format_table
    from chunkyard.chunking.words import plural

    unique: dict[Path, Path] = {}
    for path in args.configs:  # a config listed twice (cfg.yaml ./cfg.yaml, a glob and a name) counts once
        if path.resolve() in unique:
            print(f"{path}: listed twice; evaluated once", file=sys.stderr)
        unique.setdefault(path.resolve(), path)
    args.configs = list(unique.values())
    configs = [_load(path) for path in args.configs]
    labels = _eval_labels(list(args.configs))
    retrievers = ("bm25", "dense") if args.retriever == "both" else (args.retriever,)
    out_dir = args.out or Path("evaluations") / time.strftime("%Y%m%d-%H%M%S", time.gmtime())

    def note(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    _check_eval_configs(list(args.configs), configs, refresh=args.refresh)
    _check_out_folder(out_dir)
    try:
        questions = load_questions(args.questions)
        snapshots = []
        for path, config in zip(args.configs, configs, strict=True):
            snapshot = None if args.refresh else reusable_snapshot(config)
            if snapshot is None:  # check the references before spending time on chunking
                locate_questions(questions, source_text_reader(config.source_dir, config.is_included),
                                 f"the source of {path} (include: {', '.join(config.model.source.include)})")
            snapshots.append(snapshot)
        note(f"{args.questions}: {plural(len(questions.questions), 'question')}; "
             f"retrievers: {', '.join(retrievers)}; k = {', '.join(map(str, args.k))}")
        evaluations = []
        for index, (config, label, snapshot) in enumerate(zip(configs, labels, snapshots, strict=True), start=1):
            prefix = f"[{index}/{len(configs)}] {label}"
            if snapshot is None:
                note(f"{prefix}: chunking {config.source_dir} into {config.name} v{config.version} "
                     f"(config hash {config.hash})")
                started = time.perf_counter()
                snapshot = _eval_chunk(config)
                note(f"{prefix}: wrote {snapshot} in {time.perf_counter() - started:.1f} s")
            else:
                note(f"{prefix}: reusing {snapshot} (same config hash {config.hash})")
            evaluation = evaluate_snapshot(snapshot, questions, ks=args.k, retrievers=retrievers, label=label,
                                           log=lambda message, prefix=prefix: note(f"{prefix}: {message}"))
            evaluations.append(evaluation)
    except QuestionSetError as exc:
        for issue in exc.issues:
            print(f"chunkyard: {issue}", file=sys.stderr)
        return EXIT_USAGE

    print(format_table(evaluations))
    paths = write_results(evaluations, questions, out_dir)
    recorded = [record_evaluation(e, questions, compared_with=labels, out_dir=out_dir) for e in evaluations]
    print(f"\nResults in {out_dir}: " + ", ".join(path.name for path in paths.values()))
    for evaluation, record in zip(evaluations, recorded, strict=True):
        if record is None:
            note(f"  note: could not record the evaluation beside {evaluation.snapshot_path} (not writable)")
    print("Metrics are character-level (Chroma's method): recall = share of reference characters retrieved; "
          "precision = share of retrieved characters that are reference; IoU = overlap ÷ union; "
          "hit rate = share of questions with a reference in the top k; MRR = mean 1/rank of the first hit.")
    return EXIT_OK


def _check_eval_configs(paths: list[Path], configs: list[Any], *, refresh: bool) -> None:
    """Refuse, before anything is evaluated or chunked, configs whose chunking would be refused: two
    that write one dataset version with different settings, or one changed under an existing version."""
    from chunkyard.chunking.errors import UsageError
    from chunkyard.chunking.evaluation import reusable_snapshot
    from chunkyard.chunking.pipeline import prepare_run

    writers: dict[tuple[str, str, int], tuple[Path, str]] = {}
    for path, config in zip(paths, configs, strict=True):
        key = (str(config.output_location), config.name, config.version)
        other = writers.setdefault(key, (path, config.hash))
        if other[1] != config.hash:
            raise UsageError(f"{other[0]} and {path} both write {config.name} v{config.version} in "
                           f"{config.output_location} with different chunking settings: give one another name "
                           "or version")
    for config in configs:
        if refresh or reusable_snapshot(config) is None:
            prepare_run(config)  # raises RunRefused: a missing folder, a changed config under its version, ...


def _check_out_folder(out_dir: Path) -> None:
    """Refuse an --out that cannot become a results folder before anything is evaluated."""
    from chunkyard.chunking.errors import UsageError

    folder = out_dir
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent  # the nearest existing folder: where the results folder would be made
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {out_dir}: {folder} is a file; --out must name a folder (created if missing)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out_dir}: {folder} is not writable")


def _eval_chunk(config: Any) -> Path:  # a chunkyard.chunking.config.Config
    """Run the chunking flow for one config (as ``chunkyard run`` does) and return its snapshot."""
    from chunkyard.chunking.errors import ChunkyardError

    _SERVER.ensure()
    from chunkyard.flows import run as run_module

    with _Progress() as progress:
        run_module.progress_hook = progress.update
        try:
            result = run_module.run(config)
        finally:
            run_module.progress_hook = None
    if result.snapshot is None:
        raise ChunkyardError(f"chunking {config.name} v{config.version} published no snapshot")
    return result.snapshot


def cmd_reprocess(args: argparse.Namespace) -> int:
    """Apply review decisions: flagged documents rechunked under their constraints, the rest carried over."""
    config = _load(args.config)
    from chunkyard.chunking.reprocess import open_flags_of_other_versions, prepare_reprocess
    from chunkyard.chunking.words import plural

    context = prepare_reprocess(config, args.output)  # a refusal is one line now, not a failed flow's traceback
    _SERVER.ensure()
    started = time.perf_counter()
    from chunkyard.flows.reprocess import reprocess

    if not args.debug:
        _one_line_prefect_errors()

    result = reprocess(config, args.output)
    manifest = result.manifest
    flags = manifest.get("applied_flags", [])
    stale = [c for c in manifest.get("constraints", []) if c.get("status") == "stale"]
    if args.json:
        keys = ("name", "version", "snapshot", "parent_snapshot", "kind", "counts", "applied_flags", "constraints")
        print(json.dumps({k: manifest[k] for k in keys if k in manifest}
                         | {"path": str(result.snapshot) if result.snapshot else None}, ensure_ascii=False))
    elif result.snapshot is None:
        print(f"Nothing to reprocess in {config.name} v{config.version}: no new or changed constraints "
              f"(snapshot {manifest.get('parent_snapshot')} stays the newest)")
    else:
        counts = manifest["counts"]
        print(f"Wrote {result.snapshot} (reprocess snapshot {manifest['snapshot']} of {manifest['name']} "
              f"v{manifest['version']}, parent {manifest['parent_snapshot']}) in {time.perf_counter() - started:.1f} s")
        print(f"  documents: {counts['changed']} rechunked, {counts['reused']} carried over")
    if not args.json:
        constraints = {item["id"]: item for item in manifest.get("constraints", [])}
        for flag in flags:
            print(f"  flag {flag['event']} ({flag['reason']}) on {flag['doc_id']} chunk {flag['chunk_index']}: "
                  f"{flag['status']}{_unmet_hint(constraints.get(flag.get('constraint')), flag['status'], constraints)}")
        for item in stale:
            print(f"  stale constraint {item['id']} ({item['kind']}) on {item['doc_id']}: its text is gone")
        for version, count in open_flags_of_other_versions(context).items():
            print(f"  note: {plural(count, 'open flag')} on v{version} not applied here (flags belong to the "
                  f"version they were made on; review v{config.version} to flag its chunks)")
    return EXIT_OK


def _unmet_hint(constraint: dict[str, Any] | None, status: str,
                constraints: dict[int, dict[str, Any]] | None = None) -> str:
    """Why a flag's constraint was not met, and what to do: a break constraint inside the span it keeps
    (the packer lets the break win), else the span is over the budget."""
    if status != "unmet" or constraint is None:
        return ""
    start, end = constraint.get("placed") or (constraint["start"], constraint["end"])
    if constraint.get("kind") == "keep_together":
        for other in (constraints or {}).values():
            at = (other.get("placed") or [None])[0]
            if (other.get("kind") == "break_here" and other.get("doc_id") == constraint.get("doc_id")
                    and at is not None and start < at < end):
                source = f"from flag {other['flag_event']}" if other.get("flag_event") else "set in the reviewer"
                return (f" (break_here constraint {other['id']} {source}, at {at}, lies inside the span it keeps "
                        f"together, [{start}:{end}), and a break wins over a keep; max_size is not the cause)")
    return (f" (the {end - start:,} characters it keeps together, [{start}:{end}), do not fit max_size: raise "
            "max_size for this file, e.g. with a rule, or unflag it in the reviewer)")


def cmd_diff(args: argparse.Namespace) -> int:
    from chunkyard.chunking.dataset import Snapshot
    from chunkyard.chunking.versions import diff_snapshots, format_diff

    diff = diff_snapshots(Snapshot.open(args.a), Snapshot.open(args.b))
    if args.json:
        print(json.dumps(diff.to_json(), ensure_ascii=False))
    else:
        print(format_diff(diff, all_documents=args.all))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from chunkyard.chunking.export import export

    counts = export(args.path, args.out, args.format, since=args.since)
    what = f"change-set since {counts['since']}" if counts["since"] else "export"
    print(f"Wrote {args.out}: {what} of {counts['snapshot']} — {counts['upserts']} upserts, "
          f"{counts['deletes']} deletes ({args.format})")
    return EXIT_OK


def entry() -> None:
    """The ``chunkyard`` program: ``main``, then an exit that skips tearing the interpreter down.

    Python's finalisation frees every module and object of Prefect, pydantic, pyarrow and the rest,
    ≈0.5 s after every command, and nothing in it matters here: the atexit handlers still run first
    (logging flushed, multiprocessing's helpers ended), the standard streams are flushed, snapshots
    are published by rename and the review ledger commits through SQLite before ``main`` returns.
    Exceptions (argparse's usage exit, ``--debug`` tracebacks) take the ordinary way out.
    """
    code = main()
    if code != EXIT_INTERRUPTED:
        import atexit

        atexit._run_exitfuncs()
    # After Ctrl+C the atexit handlers are skipped: multiprocessing's would join pool workers that are
    # stuck sending a result nobody reads (the program hung); they end with this process (their
    # parent-death signal), and nothing was published.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
