"""Worker processes for ``--task-runner process`` that start warm: forked from a preloaded server.

Prefect's ``ProcessPoolTaskRunner`` spawns each worker as a fresh interpreter, which then spends
2–4 s of CPU importing Prefect, loading its collections (``prefect_dask`` pulls in Dask) and the
tokenizer before its first batch. On a 2-core machine two workers doing that at once, while the
flow process imports Prefect too, cost more than a second batch saves on a corpus of a few MB.

Here the workers come from a ``forkserver`` that imports all of that once (``chunkyard.flows._preload``), and
the forkserver is started by ``chunkyard run`` *before* the flow process imports Prefect, so the two
imports overlap on two cores. Forking from the forkserver is safe: it is single-threaded and never
talks to the Prefect API. Everything else — task submission, state, retries, logs and events
forwarded to the flow — is Prefect's own runner.

Three small patches cut what Prefect costs per task (≈0.26 → ≈0.10 s of a worker's CPU, py-spy):
a worker's API clients share one verified SSL context, a worker builds the settings every task
carries into a model once, and the flow process serialises them once. They reach into Prefect's
internals, so they live in ``chunkyard.flows.prefect_compat`` with its other private names; each is
tested in ``tests/flows/test_scale_out.py``. The processes also end with their parent, even on
``kill -9`` (``die_with_parent``).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

PRELOAD = ["chunkyard.flows._preload"]


def forkserver_available() -> bool:
    return sys.platform != "win32" and "forkserver" in multiprocessing.get_all_start_methods()


def start_forkserver() -> bool:
    """Start the preloaded forkserver now (non-blocking: it imports while the caller goes on).

    Call it after the environment workers need is set (``PREFECT_*``; per-task settings are sent
    with every task anyway) and before importing Prefect in this process.
    """
    if not forkserver_available():
        return False
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    # The forkserver, and so every worker, inherits them; so does multiprocessing's resource tracker.
    with _environment_defaults({**WORKER_THREAD_LIMITS, **QUIET_CHILDREN}):
        multiprocessing.forkserver.ensure_running()
    return True


# One BLAS/OpenMP thread per worker process, as Dask's nanny sets for its workers: N workers on N
# cores, each with a BLAS pool as wide as the machine, oversubscribe it. Semantic chunking's embeddings
# ran ≈13% slower that way, with one worker as with two (k8s, OpenBLAS). A value the user set is kept.
WORKER_THREAD_LIMITS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# Quiet children. After Ctrl+C the program exits without multiprocessing's cleanup
# (``chunkyard.flows.cli.entry``), and the resource tracker, which then removes the pool's semaphores itself,
# would warn about them; a local Dask cluster's workers (forked from the forkserver) would log their
# start and stop at INFO.
QUIET_CHILDREN = {
    "PYTHONWARNINGS": "ignore:resource_tracker:UserWarning",
    "DASK_LOGGING__DISTRIBUTED": "warning",
}


@contextlib.contextmanager
def _environment_defaults(defaults: dict[str, str]):
    """Set the variables not already set, for the duration (child processes started inside inherit them)."""
    added = {name: value for name, value in defaults.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def ready() -> bool:
    """A no-op task: submitting one per worker forks the workers before the first batch is ready."""
    return True


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent dies, even by SIGKILL (Linux).

    The flow's process, killed with ``kill -9``, runs no ``finally``: without this its forkserver,
    the workers forked from it and the loopback Prefect server it started would run on. The signal
    fires when the parent *thread* that forked this process ends; all of them are forked from a
    main thread (the CLI's, or the forkserver's only thread).
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG


_WATCHING: list[int] = []  # the parent pid being watched by ``end_with_parent`` in this process


def end_with_parent(interval: float = 1.0) -> None:
    """End this process at once once its parent has died, checked every ``interval`` s.

    For a process whose parent started it from a thread that may not be its main one (Prefect's
    runner starts each flow run of ``chunkyard schedule``), where ``die_with_parent``'s kernel signal,
    which fires when that *thread* ends, could stop a healthy run. Not SIGTERM: Prefect's engine
    turns it into a crash it then retries to report to the dead server. Once per process.
    """
    import threading
    import time

    if _WATCHING or orphaned():
        return
    parent = os.getppid()
    _WATCHING.append(parent)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)  # like the kill -9 that ended the parent: a staging folder is removed by the next run

    threading.Thread(target=watch, name="chunkyard-end-with-parent", daemon=True).start()


def orphaned() -> bool:
    """Whether the parent died before ``die_with_parent`` took effect (adopted by init)."""
    return sys.platform.startswith("linux") and os.getppid() == 1


def init_worker(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    """A process-pool worker's initializer: end with the forkserver, then Prefect's own set-up."""
    die_with_parent()
    if orphaned():
        os._exit(1)
    signal.signal(
        signal.SIGINT, end_quietly_on_interrupt
    )  # also set by the preload, for any forkserver child
    from chunkyard.flows.prefect_compat import reuse_settings, share_ssl_contexts

    share_ssl_contexts()
    reuse_settings()
    if initializer is not None:
        initializer(*initargs)


def end_quietly_on_interrupt(_signum: int, _frame: Any) -> None:
    """A worker's SIGINT handler. Ctrl+C reaches every process of the terminal's group: the flow
    process reports it and exits (publishing nothing), and a worker just ends, without the
    KeyboardInterrupt traceback each would print. Nothing a worker holds is kept: the flow writes."""
    os._exit(130)
