"""Scheduling on a real Prefect server: the deployment's cron, a triggered run, the served CLI.

Each test runs in its own process with its own PREFECT_HOME so that the session's test harness
(see test_flow.py) and these real servers never share settings or a database.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from support.signals import with_ctrl_c

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"
pytestmark = pytest.mark.slow


def write_config(tmp_path: Path, cron: str = "0 2 * * *", timezone: str = "Europe/Paris") -> Path:
    path = tmp_path / "scheduled.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: nightly
        version: 1
        source: {{path: {SAMPLE}, include: ["**/*.md"]}}
        output: {{path: {tmp_path / "out"}}}
        chunker: {{strategy: markdown, unit: chars, max_size: 800}}
        schedule: {{cron: "{cron}", timezone: {timezone}}}
        """),
        encoding="utf-8",
    )
    return path


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    return env


def test_deployment_has_the_cron_schedule_and_a_triggered_run_publishes(tmp_path):
    config = write_config(tmp_path)
    script = textwrap.dedent(f"""
        import asyncio, json
        from pathlib import Path
        from chunkyard.flows.settings import configure_prefect
        configure_prefect(Path({str(tmp_path)!r}))
        from chunkyard.flows.server import prefect_server
        with prefect_server() as url:
            from prefect.client.orchestration import get_client
            from prefect.deployments import run_deployment
            from prefect.runner import Runner
            from chunkyard.chunking.config import load_config
            from chunkyard.flows.schedule import build_deployment
            config = load_config({str(config)!r})
            deployment = build_deployment(config)
            deployment_id = deployment.apply()
            async def read():
                async with get_client() as client:
                    return await client.read_deployment(deployment_id)
            stored = asyncio.run(read())
            schedule = stored.schedules[0].schedule
            run = run_deployment(f"chunkyard-scheduled/{{deployment.name}}", timeout=0)
            runner = Runner(name="test-runner", query_seconds=1)
            runner.add_deployment(deployment)
            asyncio.run(runner.start(run_once=True))
            print(json.dumps({{"cron": schedule.cron, "timezone": schedule.timezone, "name": stored.name,
                              "parameters": stored.parameters}}))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads(result.stdout.strip().splitlines()[-1])
    assert info["cron"] == "0 2 * * *" and info["timezone"] == "Europe/Paris"
    assert info["name"] == "nightly-v1"
    assert info["parameters"] == {"config_path": str(config)}
    snapshot = tmp_path / "out" / "nightly" / "v1" / "0001" / "manifest.json"
    assert snapshot.is_file(), result.stderr[-3000:]
    manifest = json.loads(snapshot.read_text())
    assert manifest["counts"]["documents"] == len(list(SAMPLE.rglob("*.md")))


def test_schedule_command_serves_and_stops_its_own_server(tmp_path):
    config = write_config(tmp_path, cron="*/5 * * * *", timezone="UTC")
    # with_ctrl_c: the SIGINT below stops it even when pytest was started with SIGINT ignored (nohup).
    process = subprocess.Popen(
        with_ctrl_c("-m", "chunkyard.flows.cli", "schedule", str(config)),
        cwd=REPO,
        env=clean_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        line = process.stdout.readline()
        deadline = time.monotonic() + 120
        while "Serving" not in line and time.monotonic() < deadline and process.poll() is None:
            line = process.stdout.readline()
        match = re.search(r"via (http://127\.0\.0\.1:\d+/api)", line)
        assert match, line
        api = match.group(1)
        found = []
        while time.monotonic() < deadline and not found:
            request = urllib.request.Request(
                api + "/deployments/filter",
                data=b"{}",
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                found = [d for d in json.load(response) if d["name"] == "nightly-v1"]
            time.sleep(0.5)
        assert found and found[0]["schedules"][0]["schedule"]["cron"] == "*/5 * * * *"
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    with pytest.raises(OSError):  # the server chunkyard started is gone with it
        urllib.request.urlopen(api + "/health", timeout=2)


def test_a_server_named_in_the_prefect_profile_is_used_not_started(tmp_path):
    """`prefect config set PREFECT_API_URL=...` (a profile) counts as configured, like the variable."""
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/api"
        home = tmp_path / "home"
        home.mkdir()
        (home / "profiles.toml").write_text(
            f'active = "mine"\n\n[profiles.mine]\nPREFECT_API_URL = "{url}"\n'
        )
        env = {**os.environ, "PREFECT_HOME": str(home)}
        env.pop("PREFECT_API_URL", None)
        probe = (
            "from chunkyard.flows.server import prefect_server\n"
            "with prefect_server() as url:\n"
            "    print(url)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == url
        assert not (home / "server.log").exists(), "no server was started"
    finally:
        httpd.shutdown()


def test_only_files_prefect_reads_settings_from_make_it_import_prefect_first(tmp_path, monkeypatch):
    from chunkyard.flows.server import _may_configure_prefect

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    assert not _may_configure_prefect()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert not _may_configure_prefect()
    (tmp_path / "pyproject.toml").write_text("[tool.prefect.api]\nurl = 'http://127.0.0.1:1/api'\n")
    assert _may_configure_prefect()
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / ".env").write_text("PREFECT_API_URL=http://127.0.0.1:1/api\n")
    assert _may_configure_prefect()


def test_a_scheduled_run_says_what_it_wrote_and_why_it_failed_in_one_line(prefect_server, tmp_path, capsys):
    """What the console of `chunkyard schedule` shows per run. A run that published said nothing at all;
    a refused one (the config edited under the same version while served) printed 133 lines: three
    tracebacks of the same RunRefused (the inner flow, the scheduled flow, Prefect's engine)."""
    from chunkyard.flows.schedule import scheduled_run

    config = write_config(tmp_path)
    scheduled_run(str(config))
    out = capsys.readouterr().out
    assert f"Wrote {tmp_path / 'out' / 'nightly' / 'v1' / '0001'} (full snapshot 1 of nightly v1):" in out, (
        out
    )

    config.write_text(config.read_text().replace("max_size: 800", "max_size: 700"), encoding="utf-8")
    with pytest.raises(Exception, match="bump `version`"):
        scheduled_run(str(config))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err[-3000:]
    lines = captured.err.strip().splitlines()
    assert lines[0].startswith(f"chunkyard: scheduled run of {config} failed: config changed since "), lines
    assert len(lines) <= 2, lines  # and Prefect's "Engine execution exited with unexpected exception"


def test_schedule_prints_how_to_trigger_a_run_on_its_server_not_prefects_dead_ui_link(
    tmp_path, monkeypatch, capsys
):
    """Prefect's banner advertised "the Prefect UI: http://127.0.0.1:PORT/deployments" (chunkyard's server
    runs with the UI off: that page does not exist) and `prefect deployment run [DEPLOYMENT_NAME]`, which
    from another shell reaches another server unless PREFECT_API_URL names this one."""
    import contextlib

    import prefect

    import chunkyard.flows.server
    from chunkyard.flows.cli import main

    served = {}
    monkeypatch.setattr(
        chunkyard.flows.server,
        "prefect_server",
        lambda *a, **k: contextlib.nullcontext("http://127.0.0.1:9/api"),
    )
    monkeypatch.setattr(prefect, "serve", lambda *deployments, **options: served.update(options))
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    assert main(["schedule", str(write_config(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert served.get("print_starting_message") is False
    assert "Prefect UI" not in out
    assert (
        "PREFECT_API_URL=http://127.0.0.1:9/api prefect deployment run 'chunkyard-scheduled/nightly-v1'"
        in out
    ), out


def test_a_scheduled_runs_process_ends_when_chunkyard_schedule_is_killed(tmp_path):
    """`kill -9` of `chunkyard schedule` during a scheduled run left the run's process (`python -m
    prefect.engine`, started by Prefect's runner) chunking on for a minute and more, publishing a snapshot
    after the operator had stopped the schedule, then retrying its dead server. ``scheduled_run`` now
    watches its parent (whichever thread started it) and ends with it; its staging folder is removed
    by the next run."""
    child = textwrap.dedent("""
        import time
        from chunkyard.flows.workers import end_with_parent
        end_with_parent(interval=0.1)
        print("watching", flush=True)
        time.sleep(60)
    """)
    parent = textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", {child!r}], stdout=subprocess.PIPE, text=True)
        print(child.pid, child.stdout.readline().strip(), flush=True)
        time.sleep(60)
    """)
    process = subprocess.Popen([sys.executable, "-c", parent], cwd=REPO, stdout=subprocess.PIPE, text=True)
    pid_text, state = process.stdout.readline().split(" ", 1)
    child_pid = int(pid_text)
    assert state.strip() == "watching"
    process.kill()
    process.wait()

    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while running(child_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert not running(child_pid), "the child outlived its killed parent"
    finally:
        if running(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_the_scheduled_flow_ends_with_its_parent():
    import inspect

    from chunkyard.flows.schedule import scheduled_run

    assert "end_with_parent()" in inspect.getsource(scheduled_run.fn)
