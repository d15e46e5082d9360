"""A time limit per document: a document still being read, extracted or chunked at its deadline is abandoned.

Method. One watchdog thread per process keeps the deadlines of the threads working on a document;
at a deadline it raises ``DocumentTimeout`` in that thread (CPython's ``PyThreadState_SetAsyncExc``),
which the thread sees at its next Python bytecode. So a document stuck in Python code (pypdf parsing a
content stream, python-docx walking paragraphs, a chunking loop) is abandoned wherever it is, in a
thread, a process-pool worker or a Dask worker alike, and the worker goes on with the next document.
Not interrupted: one C call that never returns to Python (the limits in ``LimitsConfig`` bound the
inputs of those). ``DocumentTimeout`` derives from ``BaseException`` so that a library's ``except
Exception`` does not swallow it, and it is raised again every ``REFIRE_SECONDS`` while the block
still runs (one delivered inside a ``__del__`` or a gc callback is lost, and a bare ``except:`` may
swallow one). Leaving the block ends the deadline under the watchdog's lock and cancels an exception
raised but not yet delivered, so none ever lands outside the block; the caller catches it around
the ``with`` block.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
import time


class DocumentTimeout(BaseException):  # noqa: N818 - a signal to abandon, not an error of the code
    """The document ran past its deadline (raised asynchronously in the thread working on it)."""


def _set_async_exc(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in the thread at its next bytecode; ``None`` cancels one not yet raised."""
    # PyDLL: called with the GIL held, as the function requires. ``None`` is passed as NULL.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), None if exception is None else ctypes.py_object(exception)
    )


# Raised again this often while the block still runs: an exception delivered inside a ``__del__`` or a
# gc callback is printed as "ignored" and lost, so one raise is not enough.
REFIRE_SECONDS = 0.25


class _Watchdog:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        # token -> [thread id, monotonic time of the next raise, times raised]
        self.active: dict[int, list] = {}
        self.tokens = itertools.count()
        # When the watchdog thread next wakes (set under the lock before it waits): a deadline added
        # after that needs no wake-up, it is looked at then. So a run of short documents, each under
        # its own deadline, does not switch to the watchdog thread per document (issue 22).
        self.wakes_at = -1.0
        self.pid = os.getpid()
        threading.Thread(target=self._watch, name="chunkyard-document-deadlines", daemon=True).start()

    def add(self, thread_id: int, expires: float) -> int:
        with self.lock:
            token = next(self.tokens)
            self.active[token] = [thread_id, expires, 0]
            if expires < self.wakes_at:
                self.lock.notify()
            return token

    def remove(self, token: int) -> None:
        """End the deadline; once this returns, nothing is raised for it any more."""
        with self.lock:
            entry = self.active.pop(token, None)
            if entry is not None and entry[2]:
                # Raised but perhaps not yet delivered: cancel it, so it never lands after the block.
                _set_async_exc(entry[0], None)

    def _watch(self) -> None:
        with self.lock:
            while True:
                now = time.monotonic()
                for entry in self.active.values():
                    if entry[1] <= now:
                        _set_async_exc(entry[0], DocumentTimeout)
                        entry[1], entry[2] = now + REFIRE_SECONDS, entry[2] + 1
                self.wakes_at = max(
                    min((entry[1] for entry in self.active.values()), default=now + 3600), now
                )
                self.lock.wait(max(self.wakes_at - now, 0.001))


_watchdog: _Watchdog | None = None
_watchdog_lock = threading.Lock()


def _get_watchdog() -> _Watchdog:
    global _watchdog
    with _watchdog_lock:
        # A forked worker inherits the object but not the thread: start its own.
        if _watchdog is None or _watchdog.pid != os.getpid():
            _watchdog = _Watchdog()
        return _watchdog


class deadline_at:  # noqa: N801 - used as a function: ``with deadline_at(expires):``
    """Raise ``DocumentTimeout`` in this thread if the block is still running at ``expires``
    (``time.monotonic()``); ``None``: no limit. Several blocks may share one deadline.

    A class rather than a ``@contextmanager`` generator: entered twice per document, and the
    generator machinery cost as much as the deadline itself."""

    __slots__ = ("expires", "token", "watchdog")

    def __init__(self, expires: float | None) -> None:
        self.expires = expires

    def __enter__(self) -> None:
        expires = self.expires
        if expires is None:
            return
        if expires <= time.monotonic():
            raise DocumentTimeout
        self.watchdog = _get_watchdog()
        self.token = self.watchdog.add(threading.get_ident(), expires)

    def __exit__(self, *exc_info: object) -> bool:
        if self.expires is None:
            return False
        # The timeout may land in ``remove`` itself (before its lock): try again until the deadline is
        # gone, then raise it, so none is ever raised after the block.
        late = False
        while True:
            try:
                self.watchdog.remove(self.token)
                break
            except DocumentTimeout:
                late = True
        if late:
            raise DocumentTimeout
        return False
