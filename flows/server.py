"""The Prefect API server a command uses: the user's, a shared one on loopback, or a private one.

Not Prefect's temporary in-process server: cron schedules do not fire on it, every worker process
of a process pool or Dask cluster would start its own, and a run killed with SIGKILL leaves it
running. So every command that runs a flow uses a real server: the one ``PREFECT_API_URL`` names,
else, for batch commands (run, reprocess, eval), the **shared** server (``shared_server``): one
loopback ``prefect server start`` per user, started by the first command that needs it and reused
by the next ones, so a warm ``chunkyard run`` does not wait seconds for a server. It lives under a
small supervisor process that stops it once no command has used it for
``CHUNKYARD_SERVER_IDLE_SECONDS`` (default 600), or on ``stop_shared_server()``. Its state and
Prefect's (``PREFECT_HOME``) are in one per-user folder (``chunkyard_home()``), not in whatever
folder the command runs from. ``CHUNKYARD_PREFECT_SERVER=private`` (the tests set it) starts a
private server per command instead, stopped on exit and ending when the command is killed, as
``chunkyard schedule`` always does. Only processes chunkyard started are ever stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
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
def prefect_server(
    home: Path | None = None, startup_timeout: float = 90.0, *, batch: bool = False
) -> Iterator[str]:
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

    # What ``ready()`` waits for, for a progress line ("" when the server already answers).
    waiting_for = ""
    _supervisor: int | None = None  # the shared server's supervisor, when that is the server

    def ready(self, report: Callable[[str], None] | None = None) -> str:
        """Wait until the server answers; ``report`` is told what the wait is for when there is one."""
        if self._ready:
            return self.url
        if report is not None and self.waiting_for and not healthy(self.url, timeout=0.5):
            report(self.waiting_for)
        process = self._process
        if self._supervisor is not None:
            deadline = time.monotonic() + self._timeout
            while not healthy(self.url, timeout=1):
                if not _alive(self._supervisor):
                    raise ServerError(
                        f"the shared Prefect server stopped while starting; see {self._log_path}"
                    )
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"the shared Prefect server did not become healthy in {self._timeout:.0f} s; "
                        f"see {self._log_path}"
                    )
                time.sleep(0.05)
        elif process is None:  # the configured server
            if not healthy(self.url, timeout=10):
                raise ServerError(f"PREFECT_API_URL={self.url} does not answer; start the server or unset it")
        else:
            deadline = time.monotonic() + self._timeout
            while not healthy(self.url, timeout=1):
                if process.poll() is not None:
                    raise ServerError(
                        f"prefect server exited with code {process.returncode}; see {self._log_path}"
                    )
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"prefect server did not become healthy in {self._timeout:.0f} s; "
                        f"see {self._log_path}"
                    )
                time.sleep(0.05)
        self._ready = True
        return self.url


# Server services a batch command (run, reprocess, eval) never uses: they schedule, supervise and
# expire deployment runs, workers and automations. Without them a started server answers 0.5–0.9 s
# sooner. The task run recorder and the event persister stay: flow and task runs are recorded.
_BATCH_SERVICES_OFF = {
    f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"
    for name in (
        "SCHEDULER",
        "LATE_RUNS",
        "FOREMAN",
        "CANCELLATION_CLEANUP",
        "PAUSE_EXPIRATIONS",
        "REPOSSESSOR",
        "CLEANUP_RECONCILER",
        "TRIGGERS",
    )
}


def server_environment(home: Path, *, batch: bool = False) -> dict[str, str]:
    """The environment of a server started here: this one's, with its own home, no telemetry, no UI."""
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_UI_ENABLED": "false",
        **(_BATCH_SERVICES_OFF if batch else {}),
    }
    env.pop("PREFECT_API_URL", None)
    return env


@contextlib.contextmanager
def pending_server(
    home: Path | None = None, startup_timeout: float = 90.0, *, batch: bool = False
) -> Iterator[PendingServer]:
    """Like ``prefect_server``, without waiting for a started server to answer: the caller does
    other work (loading the config, imports) while it starts, then calls ``ready()``.

    ``batch``: a server started here runs without the services that only scheduled deployments
    need (``_BATCH_SERVICES_OFF``); a configured server is used as it is.
    """
    existing = os.environ.get("PREFECT_API_URL") or _configured_api_url()
    process = log_path = None
    lease: SharedLease | None = None
    if existing:
        url = existing
    elif batch and home is None and server_mode() == "shared":
        lease = _lease_shared_server(startup_timeout)
        url = lease.url
    else:
        home = home or Path(os.environ.get("PREFECT_HOME") or prefect_home())
        home.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        log_path = home / "server.log"
        # ``python -m prefect``, not the ``prefect`` script next to it: a venv may lack its scripts.
        command = _dies_with_us(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
        )
        env = server_environment(home, batch=batch)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    pending = PendingServer(url, process, log_path, startup_timeout)
    if lease is not None:
        pending.waiting_for = lease.waiting_for
        pending._log_path = lease.log_path
        pending._supervisor = lease.supervisor
    try:
        if (process is not None or lease is not None) and "prefect" in sys.modules:
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
        if lease is not None:
            if not pending.abandoned:
                _drain_prefect_services()
            lease.release()


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


# -- the shared server -----------------------------------------------------------------------------

SERVER_MODE = "CHUNKYARD_PREFECT_SERVER"  # "shared" (the default) or "private"
IDLE_SECONDS = "CHUNKYARD_SERVER_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 600.0
_STATE, _LOCK, _LOG = "server.json", "server.lock", "server.log"


def chunkyard_home() -> Path:
    """chunkyard's per-user state: ``CHUNKYARD_HOME``, else ``$XDG_STATE_HOME/chunkyard``
    (``~/.local/state/chunkyard``). Holds the shared server's state and Prefect's home."""
    explicit = os.environ.get("CHUNKYARD_HOME")
    if explicit:
        return Path(explicit).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "chunkyard"


def prefect_home() -> Path:
    """Where Prefect keeps its state (database, profiles) unless ``PREFECT_HOME`` says otherwise."""
    return chunkyard_home() / "prefect"


def server_mode() -> str:
    mode = os.environ.get(SERVER_MODE, "shared").strip().lower() or "shared"
    if mode not in ("shared", "private"):
        raise ServerError(f"{SERVER_MODE}={mode!r}: use shared or private")
    return mode


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_SECONDS, "")
    try:
        value = float(raw) if raw else DEFAULT_IDLE_SECONDS
    except ValueError:
        raise ServerError(f"{IDLE_SECONDS}={raw!r}: not a number of seconds") from None
    return max(1.0, value)


class SharedLease:
    """One command's use of the shared server: a shared lock on its lock file while the command runs
    (the supervisor stops it only when nobody holds one and it has been idle long enough)."""

    def __init__(self, url: str, supervisor: int, lock: int, folder: Path, waiting_for: str):
        self.url, self.supervisor, self._lock, self.folder = url, supervisor, lock, folder
        self.waiting_for = waiting_for
        self.log_path = folder / _LOG

    def release(self) -> None:
        if self._lock < 0:
            return
        with contextlib.suppress(OSError):
            os.utime(self.folder / _STATE)  # idle from now
        os.close(self._lock)  # releases the shared lock
        self._lock = -1


def shared_server(startup_timeout: float = 90.0) -> contextlib.AbstractContextManager[PendingServer]:
    """The shared loopback server for one command (``PREFECT_API_URL`` set while inside): started
    now when none runs, reused otherwise. ``ready()`` waits until it answers. The CLI calls this (or
    ``pending_server(batch=True)``, which picks it unless a server is configured or
    ``CHUNKYARD_PREFECT_SERVER=private``)."""
    os.environ.setdefault(SERVER_MODE, "shared")
    if server_mode() != "shared":
        raise ServerError(f"{SERVER_MODE}=private: no shared server")
    return pending_server(None, startup_timeout, batch=True)


def shared_server_status() -> dict | None:
    """The shared server's state (url, port, supervisor pid, idle seconds), or None when none runs."""
    state = _read_state(chunkyard_home())
    return state if state is not None and _alive(state.get("supervisor", 0)) else None


def stop_shared_server(timeout: float = 60.0) -> bool:
    """Stop the shared server: it ends once the commands using it have finished (at most ``timeout`` s
    waited here). True when it has stopped or none was running."""
    state = shared_server_status()
    if state is None:
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(state["supervisor"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(state["supervisor"]):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _lease_shared_server(startup_timeout: float) -> SharedLease:
    folder = chunkyard_home()
    folder.mkdir(parents=True, exist_ok=True)
    lock = os.open(folder / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # Exclusive while deciding: the supervisor checks for idleness under the same lock, and two
        # commands starting at once start one server.
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = _read_state(folder)
        waiting_for = ""
        if state is None or not _alive(state.get("supervisor", 0)):
            state = _start_supervisor(folder)
            waiting_for = "starting the shared Prefect server (once; later runs reuse it)"
        os.utime(folder / _STATE)  # in use: not idle
        # A shared lock for the command's duration (flock converts; the supervisor, should it take
        # the exclusive lock in between, finds the state file just touched and not idle).
        fcntl.flock(lock, fcntl.LOCK_SH)
    except BaseException:
        os.close(lock)
        raise
    return SharedLease(state["url"], state["supervisor"], lock, folder, waiting_for)


def _read_state(folder: Path) -> dict | None:
    try:
        state = json.loads((folder / _STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("supervisor"), int) else None


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running shared-server supervisor (not a reused pid)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    if sys.platform.startswith("linux"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        if b"chunkyard.flows.server" in cmdline and b"supervise" in cmdline:
            return True
        # One this process has just started and that has not exec'd yet still shows our command line.
        return _parent_pid(pid) == os.getpid()
    return True


def _parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _start_supervisor(folder: Path) -> dict:
    """Start the supervisor (in a session of its own: it outlives this command) and record it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    home = Path(os.environ.get("PREFECT_HOME") or prefect_home())
    home.mkdir(parents=True, exist_ok=True)
    with open(folder / _LOG, "ab") as log:
        supervisor = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chunkyard.flows.server",
                "supervise",
                str(folder),
                str(port),
                str(home),
                str(idle_seconds()),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"},
        )
    state = {
        "url": url,
        "port": port,
        "supervisor": supervisor.pid,
        "prefect_home": str(home),
        "idle_seconds": idle_seconds(),
        "started": time.time(),
    }
    temporary = folder / f".{_STATE}.{os.getpid()}"
    temporary.write_text(json.dumps(state), encoding="utf-8")
    os.replace(temporary, folder / _STATE)
    return state


def _supervise(folder: Path, port: int, home: Path, idle: float) -> int:
    """The supervisor's loop: run the server; stop it when idle, on SIGTERM, or when it exits."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    command = _dies_with_us(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    )
    server = subprocess.Popen(
        command, env=server_environment(home, batch=True), stdin=subprocess.DEVNULL, start_new_session=True
    )
    lock = os.open(folder / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    state_file = folder / _STATE
    why = ""
    try:
        while server.poll() is None:
            time.sleep(0.5)
            if stopping:
                fcntl.flock(lock, fcntl.LOCK_EX)  # wait for the commands using it to finish
                why = "asked to stop"
                break
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a command is using it
            try:
                last_used = state_file.stat().st_mtime
            except FileNotFoundError:
                why = f"{state_file} was removed"
                break
            if time.time() - last_used >= idle:
                why = f"unused for {idle:g} s"
                break
            fcntl.flock(lock, fcntl.LOCK_UN)
        print(
            f"chunkyard: stopping the shared server on port {port}: {why or f'the server exited (code {server.poll()})'}",
            flush=True,
        )
        # Still holding the exclusive lock (or the server died): a command now waiting starts a new one.
        state = _read_state(folder)
        if state is not None and state.get("supervisor") == os.getpid():
            state_file.unlink(missing_ok=True)
    finally:
        _stop(server)
        os.close(lock)
    return 0


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "supervise":
    raise SystemExit(_supervise(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), float(sys.argv[5])))
