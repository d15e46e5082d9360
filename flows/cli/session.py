"""What one ``chunkyard`` command shares, made by ``main()`` and passed to the command's handler.

A ``Session`` holds the Prefect server handle (``PrefectServer``), the progress display
(``ProgressDisplay``) and whether Ctrl+C was pressed. Nothing here is module state: two ``main()``
calls in one process (the tests do this) get two sessions.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chunkyard.flows.settings import configure_prefect

if TYPE_CHECKING:
    from chunkyard.flows.server import PendingServer


class PrefectServer:
    """The Prefect API server of one command: the user's (``PREFECT_API_URL``) or one started on
    loopback by the first flow the command runs, stopped when the session ends.

    Not Prefect's own temporary server: worker processes cannot share that one, and a SIGKILLed run
    would leave it running, where ours ends with this process (``chunkyard.flows.server``). Starting ours is
    also quicker (3.5–4.5 s against 6–7 s with an existing database), and ``start()`` lets it start
    while the command imports the rest (after the config is loaded and checked: a refused one starts none).
    """

    def __init__(self, interrupted: Callable[[], bool] = lambda: False) -> None:
        self._stack: contextlib.ExitStack | None = None
        self._pending: PendingServer | None = None
        self._interrupted = (
            interrupted  # was there a Ctrl+C (a library may have turned it into another error)
        )

    def __enter__(self) -> PrefectServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        stack, pending, self._stack, self._pending = self._stack, self._pending, None, None
        if stack is None:
            return
        if pending is not None and (
            (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)) or self._interrupted()
        ):
            pending.abandon()  # Ctrl+C: the prompt comes back at once, not after the server's shutdown
        stack.close()

    def start(self) -> None:
        """Start it (once) without waiting; call before Prefect is imported, for worker processes."""
        configure_prefect()
        if self._stack is None:
            # Here, not at the top: subprocess, urllib and the rest only for the commands that run a flow.
            from chunkyard.flows.server import pending_server

            stack = contextlib.ExitStack()
            self._pending = stack.enter_context(pending_server(batch=True))  # not for `schedule`
            self._stack = stack

    def ensure(self, report: Callable[[str], None] | None = None) -> None:
        """Start it if need be, and wait until it answers."""
        self.start()
        assert self._pending is not None
        self._pending.ready(report)


class ProgressDisplay:
    """Whether and how runs show progress: a bar on stderr, only on a terminal (not under CI)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stderr(cls) -> ProgressDisplay:
        return cls(sys.stderr.isatty() and os.environ.get("CI") != "true")

    def bar(self) -> ProgressBar:
        """A bar for one run: ``with display.bar() as bar: run(..., progress=bar.update)``."""
        return ProgressBar(self.enabled)


class ProgressBar:
    """A progress bar on stderr while a run is going; does nothing when not enabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None  # a rich.progress.Progress
        self._task: Any = None
        self._started = time.perf_counter()

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            from rich.console import Console  # only on a terminal: rich costs its import otherwise
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("docs"),
                TextColumn("{task.fields[mb]:.1f} MB · {task.fields[rate]:.1f} MB/s"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("chunking", total=None, mb=0.0, rate=0.0)
        return self

    def status(self, text: str) -> None:
        """Say what the run is waiting for before its first batch (the server, the flow run)."""
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def update(self, docs: int, n_bytes: int, total_docs: int, total_bytes: int) -> None:
        """A ``chunkyard.flows.run.ProgressHook``."""
        if self._progress is None:
            return
        elapsed = max(1e-6, time.perf_counter() - self._started)
        self._progress.update(
            self._task,
            completed=docs,
            total=total_docs or None,
            description="chunking",
            mb=n_bytes / 1e6,
            rate=n_bytes / 1e6 / elapsed,
        )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


class Session:
    """One command's shared objects: the Prefect server, the progress display, the Ctrl+C flag."""

    def __init__(
        self, interrupted: Callable[[], bool] = lambda: False, progress: ProgressDisplay | None = None
    ) -> None:
        self.interrupted = interrupted
        self.server = PrefectServer(interrupted)
        self.progress = progress if progress is not None else ProgressDisplay.for_stderr()

    def __enter__(self) -> Session:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.__exit__(*exc)
