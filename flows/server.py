"""The Prefect API server a command uses: the user's, or one started on loopback.

Not Prefect's temporary in-process server: cron schedules do not fire on it, every worker process
of a process pool or Dask cluster would start its own, and a run killed with SIGKILL leaves it
running. So every command that runs a flow uses a real server: the one ``PREFECT_API_URL`` names, or
one chunkyard starts (``prefect server start --host 127.0.0.1``) and stops on exit, which also ends
when chunkyard is killed. Only the process chunkyard started is ever stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from chunkyard.chunking.errors import ChunkyardError


class ServerError(ChunkyardError):
    pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextlib.contextmanager
def prefect_server(home: Path | None = None, startup_timeout: float = 90.0, *, batch: bool = False) -> Iterator[str]:
    """Yield a Prefect API URL: the configured one, else a loopback server started here.

    Configured means ``PREFECT_API_URL`` in the environment, in the active Prefect profile
    (``prefect config set PREFECT_API_URL=...``) or in Prefect's current settings (a test harness).
    While inside, ``PREFECT_API_URL`` is set in this process's environment (worker processes
    inherit it). On exit the started server gets SIGTERM, then SIGKILL if it lingers. ``batch``: see
    ``pending_server``.
    """
    with pending_server(home, startup_timeout, batch=batch) as server:
        yield server.ready()


class PendingServer:
    """A server being started: ``url`` is known at once, ``ready()`` waits until it answers."""

    def __init__(self, url: str, process: subprocess.Popen | None, log_path: Path | None, timeout: float):
        self.url = url
        self._process = process
        self._log_path = log_path
        self._timeout = timeout
        self._ready = False
        self.abandoned = False

    def abandon(self) -> None:
        """The command was interrupted (Ctrl+C): on exit, do not send queued logs and events, and stop
        a server started here at once rather than after its graceful shutdown (up to 15 s while it is
        still answering the interrupted run's requests)."""
        self.abandoned = True

    def ready(self) -> str:
        if self._ready:
            return self.url
        process = self._process
        if process is None:  # the configured server
            if not healthy(self.url, timeout=10):
                raise ServerError(f"PREFECT_API_URL={self.url} does not answer; start the server or unset it")
        else:
            deadline = time.monotonic() + self._timeout
            while not healthy(self.url, timeout=1):
                if process.poll() is not None:
                    raise ServerError(f"prefect server exited with code {process.returncode}; see {self._log_path}")
                if time.monotonic() > deadline:
                    raise ServerError(f"prefect server did not become healthy in {self._timeout:.0f} s; "
                                      f"see {self._log_path}")
                time.sleep(0.1)
        self._ready = True
        return self.url


# Server services a batch command (run, reprocess, eval) never uses: they schedule, supervise and
# expire deployment runs, workers and automations. Without them a started server answers 0.5–0.9 s
# sooner. The task run recorder and the event persister stay: flow and task runs are recorded.
_BATCH_SERVICES_OFF = {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in (
    "SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS", "REPOSSESSOR",
    "CLEANUP_RECONCILER", "TRIGGERS")}


def server_environment(home: Path, *, batch: bool = False) -> dict[str, str]:
    """The environment of a server started here: this one's, with its own home, no telemetry, no UI."""
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_UI_ENABLED": "false", **(_BATCH_SERVICES_OFF if batch else {})}
    env.pop("PREFECT_API_URL", None)
    return env


@contextlib.contextmanager
def pending_server(home: Path | None = None, startup_timeout: float = 90.0, *,
                   batch: bool = False) -> Iterator[PendingServer]:
    """Like ``prefect_server``, without waiting for a started server to answer: the caller does
    other work (loading the config, imports) while it starts, then calls ``ready()``.

    ``batch``: a server started here runs without the services that only scheduled deployments
    need (``_BATCH_SERVICES_OFF``); a configured server is used as it is.
    """
    existing = os.environ.get("PREFECT_API_URL") or _configured_api_url()
    process = log_path = None
    if existing:
        url = existing
    else:
        home = home or Path(os.environ.get("PREFECT_HOME", Path.cwd() / ".prefect"))
        home.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        log_path = home / "server.log"
        prefect_cli = Path(sys.executable).with_name("prefect")
        command = _dies_with_us([str(prefect_cli), "server", "start", "--host", "127.0.0.1", "--port", str(port)])
        env = server_environment(home, batch=batch)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    pending = PendingServer(url, process, log_path, startup_timeout)
    try:
        if process is not None and "prefect" in sys.modules:
            # Prefect read its settings at import; tell the running process as well.
            from prefect.settings import PREFECT_API_URL, temporary_settings

            with temporary_settings({PREFECT_API_URL: url}):
                yield pending
        else:
            yield pending
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        if process is not None:
            if not pending.abandoned:
                _drain_prefect_services()
            _stop(process, grace=ABANDON_GRACE if pending.abandoned else STOP_GRACE)


# Run a command so that it gets SIGTERM when this process dies, even by SIGKILL, when no
# ``finally`` runs (chunkyard.flows.workers.die_with_parent). If this process died before that took effect,
# the launcher has been adopted by init and exits instead of starting a server.
_LAUNCHER = """
import os, sys
from chunkyard.flows.workers import die_with_parent, orphaned
die_with_parent()
if orphaned():
    sys.exit(1)
os.execv(sys.argv[1], sys.argv[1:])
"""


def _dies_with_us(command: list[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return command  # elsewhere a killed run leaves the server to be stopped by hand
    return [sys.executable, "-c", _LAUNCHER, *command]


def _configured_api_url() -> str:
    """The API URL of Prefect's settings: profile, ``.env`` or a surrounding settings context."""
    if "prefect" not in sys.modules and not _may_configure_prefect():
        return ""  # nothing could name one: skip importing Prefect (0.8 s) before the server starts
    from prefect.settings import get_current_settings  # Prefect's import, which the flow needs anyway

    return str(get_current_settings().api.url or "")


def _may_configure_prefect() -> bool:
    """Whether a file Prefect reads its settings from exists (else only the environment counts)."""
    home = Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH", home / "profiles.toml")).expanduser()
    cwd = Path.cwd()
    if profiles.exists() or (cwd / ".env").exists() or (cwd / "prefect.toml").exists():
        return True
    try:
        return "[tool.prefect" in (cwd / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _drain_prefect_services() -> None:
    """Send Prefect's queued logs and events while the server still answers."""
    if "prefect" not in sys.modules:
        return
    with contextlib.suppress(Exception):
        from chunkyard.flows.prefect_compat import drain_queued_services

        drain_queued_services(timeout=5)


# Seconds a started server has to shut down after SIGTERM before it gets SIGKILL: after a run, and
# after an interrupted one (its SQLite database survives a kill; the user is waiting for the prompt).
STOP_GRACE = 15.0
ABANDON_GRACE = 1.0


def _stop(process: subprocess.Popen, grace: float = STOP_GRACE) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
