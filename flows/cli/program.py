"""``main(argv)`` and the ``chunkyard`` program: parse, run the command in a session, and turn every
failure into one line and an exit code."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from chunkyard.chunking.errors import ChunkyardError, ConfigError
from chunkyard.flows.cli.command import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from chunkyard.flows.cli.parser import parse
from chunkyard.flows.cli.session import ProgressDisplay, Session


def main(argv: list[str] | None = None) -> int:
    """Run one command (``argv`` without the program name; default ``sys.argv[1:]``); return its exit code."""
    args = parse(argv)
    if args is None:
        return EXIT_USAGE
    interrupted, restore = _note_interrupts()
    try:
        return _run(args, Session(interrupted, ProgressDisplay.for_stderr()))
    finally:
        restore()


def _run(args: argparse.Namespace, session: Session) -> int:
    try:
        with session:
            return args.handler(args, session)
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:  # every failure is one clear line unless --debug
        if (
            session.interrupted()
        ):  # Ctrl+C inside a library that wrapped it (pydantic: PydanticSerializationError)
            return _interrupted()
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            # The reader of our output stopped early (``chunkyard preview ... | head``): nothing to say.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_FAILED
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
            print(
                f"chunkyard: error: {exc.strerror.lower()}{where} (nothing was published; fix it and "
                "run again)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        print(
            f"chunkyard: unexpected error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (POLLERR), not some other broken pipe."""
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
    seen: list[bool] = []
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        return (lambda: False), (lambda: None)  # not ours to change (SIGINT ignored, another handler)

    def on_interrupt(signum: int, frame: Any) -> None:
        seen.append(True)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_interrupt)
    return (lambda: bool(seen)), (lambda: signal.signal(signal.SIGINT, signal.default_int_handler))


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
        atexit._run_exitfuncs()
    # After Ctrl+C the atexit handlers are skipped: multiprocessing's would join pool workers that are
    # stuck sending a result nobody reads (the program hung); they end with this process (their
    # parent-death signal), and nothing was published.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
