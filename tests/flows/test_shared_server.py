"""The shared loopback Prefect server: reused by consecutive commands, stopped by its stop call or
once idle, never left running by a test (each test here stops what it started)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def command(home: Path, idle: float, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh process as a command would, with the shared server in ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        {
            "CHUNKYARD_HOME": str(home),
            "CHUNKYARD_PREFECT_SERVER": "shared",
            "CHUNKYARD_SERVER_IDLE_SECONDS": str(idle),
        }
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=REPO
    )


USE = """
import json, os
from chunkyard.flows.server import healthy, pending_server
with pending_server(batch=True) as pending:
    url = pending.ready()
    assert healthy(url) and os.environ["PREFECT_API_URL"] == url
    print(json.dumps({"url": url, "supervisor": pending._supervisor, "waited_for": pending.waiting_for}))
"""


def use(home: Path, idle: float) -> dict:
    done = command(home, idle, USE)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def server_pid(home: Path) -> int:
    """The ``prefect server`` process under the supervisor (found by its port in the command line)."""
    state = json.loads((home / "server.json").read_text())
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                b"server" in cmdline
                and str(state["port"]).encode() in cmdline
                and b"supervise" not in cmdline
            ):
                return int(proc.name)
    raise AssertionError("no prefect server process found")


def stop(home: Path) -> None:
    done = command(
        home,
        60,
        "from chunkyard.flows.server import stop_shared_server as s; raise SystemExit(0 if s() else 1)",
    )
    state_file = home / "server.json"
    if done.returncode and state_file.exists():  # last resort, so that no test leaves it running
        os.kill(json.loads(state_file.read_text())["supervisor"], signal.SIGKILL)


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_consecutive_commands_reuse_one_server_until_it_is_stopped(tmp_path):
    home = tmp_path / "home"
    try:
        first = use(home, 600)
        assert first["waited_for"].startswith("starting the shared Prefect server")
        prefect = server_pid(home)
        second = use(home, 600)
        assert (second["url"], second["supervisor"]) == (first["url"], first["supervisor"])
        assert second["waited_for"] == ""  # nothing to wait for: it answers already
        assert (home / "prefect" / "prefect.db").exists()  # Prefect's state is in the per-user home
    finally:
        stop(home)
    assert not (home / "server.json").exists()
    assert wait_until(lambda: not alive(first["supervisor"]) and not alive(prefect), 30)
    from chunkyard.flows.server import healthy

    assert not healthy(first["url"], timeout=1)


def test_an_idle_server_stops_itself_and_the_next_command_starts_a_new_one(tmp_path):
    home = tmp_path / "home"
    try:
        first = use(home, 3)
        prefect = server_pid(home)
        assert wait_until(lambda: not alive(first["supervisor"]) and not alive(prefect), 60)
        assert not (home / "server.json").exists()
        second = use(home, 600)
        assert second["supervisor"] != first["supervisor"]
    finally:
        stop(home)


def test_a_server_in_use_is_not_stopped_when_idle_elsewhere(tmp_path):
    """A command holding the server for longer than the idle time keeps it."""
    home = tmp_path / "home"
    long_use = USE.replace(
        "    print(", "    import time; time.sleep(6)\n    assert healthy(url)\n    print("
    )
    try:
        done = command(home, 2, long_use)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        stop(home)


def test_a_killed_supervisor_takes_its_server_along_and_is_replaced(tmp_path):
    home = tmp_path / "home"
    try:
        first = use(home, 600)
        prefect = server_pid(home)
        os.kill(first["supervisor"], signal.SIGKILL)
        assert wait_until(lambda: not alive(prefect), 30)  # the server ends with its supervisor
        second = use(home, 600)  # the stale state file names a dead supervisor: a new one starts
        assert second["supervisor"] != first["supervisor"]
    finally:
        stop(home)
