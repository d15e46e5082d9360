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
internals (``prefect.client.orchestration.ssl``, ``prefect.context.SettingsContext``), which is why
Prefect is pinned below 3.10; each is tested in ``tests/test_scale_out.py``. The processes also end
with their parent, even on ``kill -9`` (``die_with_parent``).
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
QUIET_CHILDREN = {"PYTHONWARNINGS": "ignore:resource_tracker:UserWarning", "DASK_LOGGING__DISTRIBUTED": "warning"}


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
    signal.signal(signal.SIGINT, end_quietly_on_interrupt)  # also set by the preload, for any forkserver child
    share_prefect_ssl_contexts()
    reuse_prefect_settings()
    if initializer is not None:
        initializer(*initargs)


def end_quietly_on_interrupt(_signum: int, _frame: Any) -> None:
    """A worker's SIGINT handler. Ctrl+C reaches every process of the terminal's group: the flow
    process reports it and exits (publishing nothing), and a worker just ends, without the
    KeyboardInterrupt traceback each would print. Nothing a worker holds is kept: the flow writes."""
    os._exit(130)


def share_prefect_ssl_contexts() -> None:
    """Let Prefect's API clients in this worker share their verified SSL contexts.

    Prefect builds two API clients for every task in a worker (the hydrated context's and the task
    engine's), and each loads certifi's CA file into a new ``ssl.SSLContext``: ≈0.1 s of a worker's
    ≈0.28 s of Prefect per task on this machine (py-spy). A verified context is never changed after
    it is made, so one per CA file serves every client. Only Prefect's client module sees the shared
    contexts; unverified ones (``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``), which it edits, are made
    afresh as before.
    """
    import ssl
    import types

    try:
        from prefect.client import orchestration
    except ImportError:  # pragma: no cover - Prefect is a dependency
        return
    if not isinstance(getattr(orchestration, "ssl", None), types.ModuleType):
        return  # already shared, or Prefect no longer builds contexts this way
    contexts: dict[tuple[Any, str], ssl.SSLContext] = {}
    create = ssl.create_default_context

    def create_default_context(purpose: Any = ssl.Purpose.SERVER_AUTH, *, cafile: str | None = None,
                               capath: str | None = None, cadata: Any = None) -> ssl.SSLContext:
        if cafile is None or capath is not None or cadata is not None:
            return create(purpose, cafile=cafile, capath=capath, cadata=cadata)
        key = (purpose, cafile)
        if key not in contexts:
            contexts[key] = create(purpose, cafile=cafile)
        return contexts[key]

    shared = types.SimpleNamespace(**{name: getattr(ssl, name) for name in dir(ssl) if not name.startswith("__")})
    shared.create_default_context = create_default_context
    orchestration.ssl = shared


def reuse_prefect_settings() -> None:
    """Build Prefect's settings once per worker for the identical settings every task carries.

    Each task sent to a worker carries the flow's settings, serialised, and the parent's environment;
    Prefect rebuilds its ``Settings`` model from them for every task, which re-reads every settings
    source (hundreds of fields against the environment and ``.env`` files): ≈0.1 s of the ≈0.2 s a
    task costs in a worker (py-spy). The model is rebuilt only when the serialised settings or the
    environment differ from a previous task's; otherwise the one already built is handed to
    ``SettingsContext``, which accepts a built model as it is.
    """
    import json

    try:
        import prefect.context as context_module
        from prefect.settings import Settings
    except ImportError:  # pragma: no cover - Prefect is a dependency
        return
    original = context_module.SettingsContext
    if getattr(original, "_chunkyard_reuses_settings", False):
        return
    built: dict[str, Settings] = {}

    class SettingsContext(original):  # type: ignore[misc,valid-type]
        _chunkyard_reuses_settings = True

        def __init__(self, **data: Any) -> None:
            settings = data.get("settings")
            if isinstance(settings, dict):
                key = json.dumps([settings, sorted(os.environ.items())], sort_keys=True, default=str)
                if key not in built:
                    if len(built) >= 8:
                        built.clear()
                    built[key] = Settings(**settings)
                data = {**data, "settings": built[key]}
            super().__init__(**data)

    SettingsContext.__name__ = SettingsContext.__qualname__ = original.__name__
    context_module.SettingsContext = SettingsContext


def cache_settings_serialization() -> None:
    """In the flow process: serialise Prefect's settings once, not for every task submitted.

    A process-pool (or Dask) submit serialises the whole settings context to send it with the task:
    ≈60 ms of the flow process's CPU per task, taken from the workers on a small machine. The
    settings object of a context does not change (Prefect replaces it, as ``temporary_settings``
    does), so the result is kept for as long as the same context holds the same settings object.
    """
    try:
        import prefect.context as context_module
    except ImportError:  # pragma: no cover - Prefect is a dependency
        return
    cls = context_module.SettingsContext
    original = cls.serialize
    if getattr(original, "_chunkyard_cached", False):
        return
    cache: dict[tuple[int, bool], tuple[Any, Any, dict[str, Any]]] = {}

    def serialize(self: Any, include_secrets: bool = True) -> dict[str, Any]:
        key = (id(self), include_secrets)
        hit = cache.get(key)
        if hit is not None and hit[0] is self and hit[1] is self.settings:
            return hit[2]
        value = original(self, include_secrets=include_secrets)
        if len(cache) >= 16:
            cache.clear()
        cache[key] = (self, self.settings, value)  # holding self keeps its id from being reused
        return value

    serialize._chunkyard_cached = True  # type: ignore[attr-defined]
    cls.serialize = serialize
