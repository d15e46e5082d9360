"""Every use of a private Prefect name, in one module, checked when it is imported.

chunkyard reaches into Prefect where its public API costs measured time or memory. Those uses are
all here (and the private fields of the standard library's futures and process pools that Prefect's
runners are built from), so that an upgrade of Prefect breaks in one place, loudly:

- ``forget_result`` frees a batch's result once it is written: the private attributes of Prefect's
  futures (``_final_state``, ``_wrapped_future``, the process runner's ``_resolution_future`` and
  ``_process_future``) and ``concurrent.futures.Future._result`` (``chunkyard.flows.run``).
- ``ForkserverProcessPoolTaskRunner`` subclasses Prefect's process runner to replace its
  ``_executor`` (and reads ``_max_workers``, the executor's ``_initializer``/``_initargs``/``_processes``).
- ``drain_queued_services`` sends Prefect's queued logs and events before a server started by
  chunkyard stops (``prefect._internal.concurrency.services.QueueService``; ``chunkyard.flows.server``).
- ``share_ssl_contexts``, ``reuse_settings`` and ``cache_settings_serialization`` patch
  ``prefect.client.orchestration.ssl`` and ``prefect.context.SettingsContext`` in process-pool workers
  and in the flow process (``chunkyard.flows.workers``; the reasons are in each docstring).

``check_prefect()`` runs at import: when one of these names is gone, importing this module (and so
``chunkyard.flows.run``, which every flow needs) raises ``PrefectIncompatible``, naming the installed
Prefect version and each missing name, instead of a run that quietly holds every batch in memory or a
pool that fails mid-run. Prefect is pinned (``pyproject.toml``) to the versions this was checked on.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import prefect
import prefect.context
import prefect.futures
import prefect.task_runners
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner

from chunkyard.chunking.errors import ChunkyardError

PREFECT_VERSION: str = prefect.__version__


class PrefectIncompatible(ChunkyardError, ImportError):
    """The installed Prefect lacks a private name chunkyard relies on (see this module's docstring)."""


# ---------------------------------------------------------------------------------------------
# Freeing a batch's result

# The attributes that lead from a Prefect future to the concurrent futures holding its result:
# PrefectConcurrentFuture._wrapped_future -> (process runner) _UnpicklingFuture.wrapped_future ->
# _ChainedFuture._resolution_future / _process_future.
_FUTURE_CHAIN = ("_wrapped_future", "wrapped_future", "_process_future", "_resolution_future")


def forget_result(future: Any) -> None:
    """Let go of a task's result once the caller has used it.

    Prefect's future for a task in another process wraps a chain of concurrent futures (resolution,
    process, unpickling) that keep the result and its pickled bytes; something in Prefect keeps the
    chain, so without this the flow process held every batch until the run ended (measured with
    tracemalloc: +60 MB of live memory per 8 MB batch, 137 MB -> 631 MB peak RSS on 70.9 MB).
    """
    seen: set[int] = set()
    stack = [future]
    while stack:
        item = stack.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, concurrent.futures.Future) and item.done():
            item._result = None
        for name in _FUTURE_CHAIN:
            stack.append(getattr(item, name, None))
    state = getattr(future, "_final_state", None)
    if state is not None:
        state.data = None


# ---------------------------------------------------------------------------------------------
# The process runner on a preloaded forkserver


class ForkserverProcessPoolTaskRunner(ProcessPoolTaskRunner):
    """Prefect's process pool with workers forked from a preloaded forkserver (``chunkyard.flows.workers``).

    ``preload`` names the modules the forkserver imports, ``initializer(prefect_initializer,
    prefect_initargs)`` runs in each worker (and must call Prefect's own initializer), and ``warm_up`` is
    a no-op submitted once per worker so that every worker is forked before the first batch.

    Only the process that created the runner does this: Prefect also enters a duplicate of the
    flow's task runner inside each worker (to hydrate the flow context) for every task, and there it
    stays inert, or each worker would start a forkserver (and a queue, a thread, pools) of its own.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        preload: Sequence[str] = (),
        initializer: Callable[..., None] | None = None,
        warm_up: Callable[[], Any] | None = None,
        owner_pid: int | None = None,
    ):
        super().__init__(max_workers=max_workers)
        self._owner_pid = owner_pid or os.getpid()
        self._preload = list(preload)
        self._worker_initializer = initializer
        self._warm_up = warm_up

    def duplicate(self) -> ForkserverProcessPoolTaskRunner:
        return type(self)(
            max_workers=self._max_workers,
            preload=self._preload,
            initializer=self._worker_initializer,
            warm_up=self._warm_up,
            owner_pid=self._owner_pid,
        )

    def __enter__(self) -> ForkserverProcessPoolTaskRunner:
        if os.getpid() != self._owner_pid:
            # Inside a worker: entered only to rebuild the flow's context for a task, which never
            # submits through it, so none of the parent's queue, thread and pools (Prefect's own
            # ``__enter__``) is made for every task.
            TaskRunner.__enter__(self)
            return self
        super().__enter__()
        import multiprocessing

        # Prefect built a spawn executor (no process started yet): rebuild it on the forkserver
        # context with the same initializer, which wires the workers' event and log forwarding.
        spawned = self._executor
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(self._preload)
        if self._worker_initializer is not None:
            initializer, initargs = self._worker_initializer, (spawned._initializer, spawned._initargs)
        else:
            initializer, initargs = spawned._initializer, spawned._initargs
        self._executor = ProcessPoolExecutor(
            max_workers=self._max_workers, mp_context=context, initializer=initializer, initargs=initargs
        )
        spawned.shutdown(wait=False)
        if self._warm_up is not None:  # fork every worker now, while the flow surveys the source
            for _ in range(self._max_workers):
                self._executor.submit(self._warm_up)
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if os.getpid() == self._owner_pid and exc_type is not None and not issubclass(exc_type, Exception):
            # Interrupted (Ctrl+C): do not wait for the pool. Prefect's exit shuts it down with wait=True,
            # which joins the pool's manager thread; that thread may be reading a result a worker, stopped
            # by the same Ctrl+C, never finished sending, and the run hung there (py-spy, 1 run in ~20).
            executor, self._executor = self._executor, None
            if executor is not None:
                for process in list((getattr(executor, "_processes", None) or {}).values()):
                    with contextlib.suppress(OSError, ValueError, AttributeError):
                        process.kill()
                executor.shutdown(wait=False, cancel_futures=True)
        super().__exit__(exc_type, exc_value, traceback)


# ---------------------------------------------------------------------------------------------
# Prefect's background services


def drain_queued_services(timeout: float = 5) -> None:
    """Send Prefect's queued logs and events (while the server still answers)."""
    from prefect._internal.concurrency.services import QueueService

    QueueService.drain_all(timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Per-task costs in process-pool workers and the flow process


def share_ssl_contexts() -> None:
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

    from prefect.client import orchestration

    if not isinstance(getattr(orchestration, "ssl", None), types.ModuleType):
        return  # already shared
    contexts: dict[tuple[Any, str], ssl.SSLContext] = {}
    create = ssl.create_default_context

    def create_default_context(
        purpose: Any = ssl.Purpose.SERVER_AUTH,
        *,
        cafile: str | None = None,
        capath: str | None = None,
        cadata: Any = None,
    ) -> ssl.SSLContext:
        if cafile is None or capath is not None or cadata is not None:
            return create(purpose, cafile=cafile, capath=capath, cadata=cadata)
        key = (purpose, cafile)
        if key not in contexts:
            contexts[key] = create(purpose, cafile=cafile)
        return contexts[key]

    shared = types.SimpleNamespace(
        **{name: getattr(ssl, name) for name in dir(ssl) if not name.startswith("__")}
    )
    shared.create_default_context = create_default_context
    orchestration.ssl = shared


def reuse_settings() -> None:
    """Build Prefect's settings once per worker for the identical settings every task carries.

    Each task sent to a worker carries the flow's settings, serialised, and the parent's environment;
    Prefect rebuilds its ``Settings`` model from them for every task, which re-reads every settings
    source (hundreds of fields against the environment and ``.env`` files): ≈0.1 s of the ≈0.2 s a
    task costs in a worker (py-spy). The model is rebuilt only when the serialised settings or the
    environment differ from a previous task's; otherwise the one already built is handed to
    ``SettingsContext``, which accepts a built model as it is.
    """
    from prefect.settings import Settings

    context_module = prefect.context
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
    cls = prefect.context.SettingsContext
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


# ---------------------------------------------------------------------------------------------
# The check at import


def _assigns(function: Any, name: str) -> bool:
    """Whether a function's code names an attribute (a constructor that sets ``self.<name>``)."""
    return name in getattr(getattr(function, "__code__", None), "co_names", ())


def missing_names() -> list[str]:
    """Every private name used above that the installed Prefect (or Python) no longer has."""
    missing: list[str] = []

    def need(label: str, present: Callable[[], bool]) -> None:
        try:
            ok = present()
        except Exception:  # a constructor that changed its signature, a class that is gone, ...
            ok = False
        if not ok:
            missing.append(label)

    runners = prefect.task_runners
    need(
        "prefect.futures.PrefectConcurrentFuture._wrapped_future, ._final_state",
        lambda: all(
            hasattr(prefect.futures.PrefectConcurrentFuture(uuid.uuid4(), concurrent.futures.Future()), name)
            for name in ("_wrapped_future", "_final_state")
        ),
    )
    need(
        "prefect.task_runners._UnpicklingFuture.wrapped_future",
        lambda: hasattr(runners._UnpicklingFuture(concurrent.futures.Future()), "wrapped_future"),
    )
    need(
        "prefect.task_runners._ChainedFuture._resolution_future, ._process_future",
        lambda: all(
            hasattr(runners._ChainedFuture(concurrent.futures.Future()), name)
            for name in ("_resolution_future", "_process_future")
        ),
    )
    need("concurrent.futures.Future._result", lambda: hasattr(concurrent.futures.Future(), "_result"))
    need(
        "prefect.task_runners.ProcessPoolTaskRunner._executor, ._max_workers",
        lambda: all(
            hasattr(ProcessPoolTaskRunner(max_workers=1), name) for name in ("_executor", "_max_workers")
        ),
    )
    need(
        "concurrent.futures.ProcessPoolExecutor._initializer, ._initargs, ._processes",
        lambda: all(
            _assigns(ProcessPoolExecutor.__init__, name)
            for name in ("_initializer", "_initargs", "_processes")
        ),
    )
    need("prefect._internal.concurrency.services.QueueService.drain_all", _has_drain_all)
    need("prefect.client.orchestration.ssl", _has_client_ssl)
    need(
        "prefect.context.SettingsContext.serialize",
        lambda: callable(getattr(prefect.context.SettingsContext, "serialize", None)),
    )
    return missing


def _has_drain_all() -> bool:
    from prefect._internal.concurrency.services import QueueService

    return callable(getattr(QueueService, "drain_all", None))


def _has_client_ssl() -> bool:
    from prefect.client import orchestration

    return hasattr(orchestration, "ssl")


def check_prefect() -> None:
    """Raise ``PrefectIncompatible`` when a private name used here is gone from the installed Prefect."""
    missing = missing_names()
    if missing:
        raise PrefectIncompatible(
            f"the installed Prefect {PREFECT_VERSION} lacks what chunkyard.flows.prefect_compat uses: "
            f"{'; '.join(missing)} (install the Prefect chunkyard pins: pip install '{_pinned_prefect()}')"
        )


def _pinned_prefect() -> str:
    """chunkyard's requirement on Prefect as installed (``prefect<3.10,>=3.9``), from its metadata."""
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        for requirement in metadata.requires("chunkyard") or ():
            name = requirement.split(";")[0].strip()
            if name.startswith("prefect") and not name.startswith("prefect-"):
                return name.replace(" ", "")
    return "prefect"


check_prefect()
