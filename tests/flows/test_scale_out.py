"""Parallel task runners produce the same dataset as the thread runner: process pool and Dask.

A real Prefect server runs on loopback for the module (parallel runners need one); the CLI runs
in subprocesses that inherit ``PREFECT_API_URL``. Only processes started here are stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-scale")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(home)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        from chunkyard.flows.server import prefect_server

        with prefect_server(home, batch=True) as url:  # as `chunkyard run` starts its own
            yield {**env, "PREFECT_API_URL": url}
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-corpus")
    for copy in range(6):
        shutil.copytree(SAMPLE, root / f"part{copy}")
    return root


def run(env: dict[str, str], config: Path, *extra: str) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "run", str(config), *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # A local Dask cluster logged ≈60 INFO lines of its start and stop; warnings only now.
    assert "| INFO    | distributed." not in result.stderr + result.stdout
    return Path(result.stdout.split()[1])  # "Wrote PATH (...)"


def config_for(tmp_path: Path, corpus: Path, name: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        version: 1
        source: {{path: {corpus}}}
        output: {{path: {tmp_path / "out"}}}
        chunker: {{strategy: auto, unit: tokens, max_size: 256, overlap: 32}}
        """),
        encoding="utf-8",
    )
    return path


def chunk_ids(snapshot: Path) -> list[tuple[str, str]]:
    table = pq.read_table(snapshot / "chunks.parquet", columns=["doc_id", "chunk_id"])
    return sorted(zip(table.column("doc_id").to_pylist(), table.column("chunk_id").to_pylist(), strict=True))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_process_and_local_dask_match_the_thread_runner(server_env, corpus, tmp_path):
    reference = chunk_ids(run(server_env, config_for(tmp_path / "t", corpus, "kb")))
    assert len(reference) > 500
    process = run(
        server_env, config_for(tmp_path / "p", corpus, "kb"), "--task-runner", "process", "--workers", "2"
    )
    assert chunk_ids(process) == reference
    dask = run(
        server_env, config_for(tmp_path / "d", corpus, "kb"), "--task-runner", "dask", "--workers", "2"
    )
    assert chunk_ids(dask) == reference


def api(env: dict[str, str], route: str, body: dict | None = None):
    import urllib.request

    request = urllib.request.Request(
        env["PREFECT_API_URL"] + route,
        method="GET" if body is None else "POST",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def test_only_batch_servers_run_without_the_scheduling_services(tmp_path):
    from chunkyard.flows.server import server_environment

    batch, full = server_environment(tmp_path, batch=True), server_environment(tmp_path)
    assert batch["PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED"] == "false"
    assert "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED" not in batch  # task runs are recorded
    assert not any(key.startswith("PREFECT_SERVER_SERVICES_") for key in full)  # `chunkyard schedule`'s


def test_a_started_batch_server_has_its_services_off(tmp_path):
    """A real server started the way `chunkyard run` starts one, asked for its settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {
        "PREFECT_HOME": str(tmp_path)
    }
    script = textwrap.dedent(f"""\
        import json, urllib.request
        from pathlib import Path
        from chunkyard.flows.server import prefect_server
        with prefect_server(Path({str(tmp_path)!r}), batch=True) as url:
            with urllib.request.urlopen(url + "/admin/settings", timeout=30) as response:
                print(json.dumps(json.load(response)["server"]["services"]))
        """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    services = json.loads(result.stdout.strip().splitlines()[-1])
    assert not services["scheduler"]["enabled"] and not services["late_runs"]["enabled"]
    assert services["task_run_recorder"]["enabled"] and services["event_persister"]["enabled"]


def test_flow_and_task_runs_are_recorded_by_name(server_env, corpus, tmp_path):
    """What the Prefect UI lists for a process run: the flow run and every `chunk batch i/n`."""
    run(server_env, config_for(tmp_path, corpus, "named-runs"), "--task-runner", "process", "--workers", "2")
    flow_runs = api(
        server_env, "/flow_runs/filter", {"flow_runs": {"name": {"any_": ["chunk named-runs v1"]}}}
    )
    assert len(flow_runs) == 1 and flow_runs[0]["state_type"] == "COMPLETED"
    names: list[str] = []
    deadline = time.monotonic() + 30  # task runs are recorded from their events, a moment later
    while time.monotonic() < deadline:
        task_runs = api(
            server_env, "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_runs[0]["id"]]}}}
        )
        names = sorted(t["name"] for t in task_runs if t["state_type"] == "COMPLETED")
        if names and all(name.startswith("chunk batch ") for name in names):
            total = names[0].rsplit("/", 1)[1]
            if len(names) == int(total):
                break
        time.sleep(0.5)
    assert names, "no completed task runs recorded"
    total = int(names[0].rsplit("/", 1)[1])
    assert names == sorted(f"chunk batch {i}/{total}" for i in range(1, total + 1))


def test_dask_against_a_separately_started_cluster(server_env, corpus, tmp_path):
    port = free_port()
    started = []
    try:
        started.append(
            subprocess.Popen(
                [
                    str(BIN / "dask"),
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--no-dashboard",
                ],
                env=server_env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        started.append(
            subprocess.Popen(
                [
                    str(BIN / "dask"),
                    "worker",
                    f"tcp://127.0.0.1:{port}",
                    "--nworkers",
                    "2",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                ],
                env=server_env,
                cwd=REPO,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        reference = chunk_ids(run(server_env, config_for(tmp_path / "t", corpus, "kb")))
        remote = run(
            server_env,
            config_for(tmp_path / "r", corpus, "kb"),
            "--task-runner",
            "dask",
            "--address",
            f"tcp://127.0.0.1:{port}",
        )
        assert chunk_ids(remote) == reference
    finally:
        for process in started:
            os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_process_runner_into_s3_matches_the_thread_runner(server_env, corpus, tmp_path, monkeypatch):
    """Workers never touch the output: the flow process writes to the bucket; ids equal a local run's."""
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    from chunkyard.chunking.dataset import Snapshot

    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    s3.start()
    try:
        host, port = s3.get_host_and_port()
        pafs.S3FileSystem(
            endpoint_override=f"{host}:{port}",
            scheme="http",
            access_key="k",
            secret_key="s",
            region="us-east-1",
            allow_bucket_creation=True,
        ).create_dir("scaleout")
        query = f"endpoint_override={host}:{port}&scheme=http"
        env = {
            **server_env,
            "AWS_ACCESS_KEY_ID": "k",
            "AWS_SECRET_ACCESS_KEY": "s",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        reference = chunk_ids(run(server_env, config_for(tmp_path / "t", corpus, "kb")))
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "chunkyard.flows.cli",
                "run",
                str(config_for(tmp_path / "s", corpus, "kb")),
                "--output",
                f"s3://scaleout/out?{query}",
                "--task-runner",
                "process",
                "--workers",
                "2",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        assert result.stdout.split()[1] == "s3://scaleout/out/kb/v1/0001"
        for key, value in env.items():  # pyarrow takes credentials from the environment only
            if key.startswith("AWS_"):
                monkeypatch.setenv(key, value)
        table = Snapshot.open(f"s3://scaleout/out/kb?{query}").chunks(["doc_id", "chunk_id"])
        remote = sorted(
            zip(table.column("doc_id").to_pylist(), table.column("chunk_id").to_pylist(), strict=True)
        )
        assert remote == reference
    finally:
        s3.stop()


def test_workers_share_prefects_verified_ssl_contexts_only(monkeypatch):
    """A worker's Prefect clients reuse one verified SSL context; unverified ones stay their own."""
    import ssl

    import certifi
    from prefect.client import orchestration

    from chunkyard.flows.prefect_compat import share_ssl_contexts

    monkeypatch.setattr(orchestration, "ssl", ssl)  # restored after the test
    share_ssl_contexts()
    shared = orchestration.ssl
    assert shared is not ssl and shared.SSLContext is ssl.SSLContext and shared.CERT_NONE == ssl.CERT_NONE
    first = shared.create_default_context(cafile=certifi.where())
    assert shared.create_default_context(cafile=certifi.where()) is first
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    insecure = shared.create_default_context()
    assert insecure is not shared.create_default_context() and insecure is not first
    assert ssl.create_default_context(cafile=certifi.where()) is not first  # the stdlib is untouched
    share_ssl_contexts()  # a second call changes nothing
    assert orchestration.ssl is shared
    contexts = [
        orchestration.SyncPrefectClient("http://127.0.0.1:9/api")._client._transport._pool._ssl_context
        for _ in range(2)
    ]
    assert contexts[0] is contexts[1]  # what the clients of two tasks use


def test_workers_build_prefect_settings_once_for_identical_tasks(monkeypatch):
    """The settings every task carries are built into a model once per worker, and again on change."""
    import prefect.context as context_module
    from prefect.context import serialize_context
    from prefect.settings import get_current_settings

    from chunkyard.flows.prefect_compat import reuse_settings

    monkeypatch.setattr(context_module, "SettingsContext", context_module.SettingsContext)  # restored after
    original = context_module.SettingsContext
    serialized = serialize_context()["settings_context"]
    reference = original(**serialized).settings
    reuse_settings()
    patched = context_module.SettingsContext
    assert patched is not original and issubclass(patched, original)
    first, second = patched(**serialized), patched(**serialized)
    assert first.settings is second.settings and first.settings == reference
    with second:
        assert get_current_settings() is second.settings
    changed = {**serialized, "settings": {**serialized["settings"], "logging": {"level": "ERROR"}}}
    assert patched(**changed).settings is not first.settings
    assert patched(**changed).settings.logging.level == "ERROR"
    monkeypatch.setenv("CHUNKYARD_TEST_ENV_CHANGED", "1")  # a different environment: built again
    assert patched(**serialized).settings is not first.settings
    reuse_settings()  # a second call changes nothing
    assert context_module.SettingsContext is patched


def test_the_flow_serialises_prefects_settings_once_per_settings_object(monkeypatch):
    import prefect.context as context_module
    from prefect.context import serialize_context
    from prefect.settings import PREFECT_LOGGING_LEVEL, temporary_settings

    from chunkyard.flows.prefect_compat import cache_settings_serialization

    monkeypatch.setattr(context_module.SettingsContext, "serialize", context_module.SettingsContext.serialize)
    plain = serialize_context()["settings_context"]
    cache_settings_serialization()
    first = serialize_context()["settings_context"]
    assert first == plain and serialize_context()["settings_context"] is first
    with temporary_settings({PREFECT_LOGGING_LEVEL: "ERROR"}):
        changed = serialize_context()["settings_context"]
        assert changed is not first and changed["settings"]["logging"]["level"] == "ERROR"
    assert serialize_context()["settings_context"] == plain


@pytest.mark.parametrize("preset", [None, "3"])
def test_workers_get_one_blas_thread_unless_the_user_chose(preset):
    """Forked workers inherit OPENBLAS_NUM_THREADS=1 from the forkserver; the parent's environment is
    left as it was, and a value the user set wins."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    if preset:
        env["OPENBLAS_NUM_THREADS"] = preset
    script = textwrap.dedent("""\
        import concurrent.futures, multiprocessing, os
        from chunkyard.flows.workers import start_forkserver
        assert start_forkserver()
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
            worker = pool.submit(os.getenv, "OPENBLAS_NUM_THREADS").result()
            omp = pool.submit(os.getenv, "OMP_NUM_THREADS").result()
        print(worker, omp, os.environ.get("OPENBLAS_NUM_THREADS"))
        """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    worker, omp, parent = result.stdout.split()
    assert (worker, omp, parent) == ((preset, "1", preset) if preset else ("1", "1", "None"))


@pytest.mark.parametrize(
    "value, message",
    [("0", "at least 1, got 0"), ("-2", "at least 1, got -2"), ("two", "expected a whole number")],
)
def test_cli_rejects_an_impossible_number_of_workers(capsys, value, message):
    from chunkyard.flows.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["run", "x.yaml", "--task-runner", "process", "--workers", value])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_ctrl_c_while_the_forkserver_imports_prints_no_traceback():
    """Ctrl+C in the first seconds of a process or Dask run reaches the forkserver while it imports
    Prefect (``chunkyard.flows._preload``): it printed a 40-line KeyboardInterrupt traceback above chunkyard's
    one line. The import now finishes (the flow process reports the interrupt and ends it)."""
    script = textwrap.dedent("""
        import os, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl+C, even under nohup
        class InterruptDuringImport:  # a deterministic Ctrl+C in the middle of the preload's imports
            def find_spec(self, name, path=None, target=None):
                if name == "prefect.task_engine":
                    os.kill(os.getpid(), signal.SIGINT)
                return None
        sys.meta_path.insert(0, InterruptDuringImport())
        import chunkyard.flows._preload
        from chunkyard.flows.workers import end_quietly_on_interrupt
        print("handler kept:", signal.getsignal(signal.SIGINT) is end_quietly_on_interrupt)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr[
        -2000:
    ]
    assert result.returncode == 0
    assert result.stdout.strip() == "handler kept: True"


def test_a_local_dask_cluster_does_not_take_port_8787(monkeypatch):
    """``dashboard_address: None`` turns the dashboard off, but the scheduler still starts its HTTP
    server on 8787 of every interface: with that port taken (another cluster, a user's scheduler)
    each run warned "Port 8787 is already in use ... Hosting the HTTP server on port N instead". A
    local cluster's scheduler listens on a free loopback port instead, with no dashboard."""
    import contextlib

    import chunkyard.flows.server
    import chunkyard.flows.workers
    from chunkyard.flows.run import task_runner_for

    monkeypatch.setattr(
        chunkyard.flows.server, "prefect_server", lambda **kwargs: contextlib.nullcontext("http://x/api")
    )
    monkeypatch.setattr(chunkyard.flows.workers, "forkserver_available", lambda: False)
    with task_runner_for("dask", 2, None) as runner:
        scheduler = runner.cluster_kwargs.get("scheduler_kwargs", {})
    assert scheduler.get("dashboard") is False
    assert scheduler.get("dashboard_address") == "127.0.0.1:0"


@pytest.mark.parametrize("runner", [[], ["--task-runner", "thread"], ["--task-runner", "process"]])
def test_cli_refuses_a_dask_address_without_the_dask_runner(capsys, runner):
    """``--address tcp://...`` without ``--task-runner dask`` was ignored: the run went on in local
    threads (or processes) and the operator believed their cluster had done it."""
    from chunkyard.flows.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["run", "x.yaml", *runner, "--address", "tcp://127.0.0.1:8786"])
    assert exit_info.value.code == 2
    assert "--address names a Dask scheduler: add --task-runner dask" in capsys.readouterr().err


def test_an_unreachable_dask_scheduler_is_named_in_one_line(prefect_server, tmp_path, capsys, monkeypatch):
    """It read "chunkyard: unexpected error: OSError: Timed out trying to connect to tcp://... after 30 s
    (rerun with --debug for details)", as if chunkyard had a bug."""
    import dask

    from chunkyard.flows.cli import main

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "c.yaml"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    config.write_text(
        f"name: kb\nversion: 1\nsource: {{path: {tmp_path / 'src'}}}\noutput: {{path: {tmp_path / 'out'}}}\n",
        encoding="utf-8",
    )
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["run", str(config), "--task-runner", "dask", "--address", f"tcp://127.0.0.1:{port}"])
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"chunkyard: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: "
    ), lines
    assert not (tmp_path / "out" / "kb" / "v1").is_dir() or not any(
        (tmp_path / "out" / "kb" / "v1").iterdir()
    )


def test_the_flow_lets_go_of_each_batch_result_once_written(server_env):
    """Prefect's futures for tasks in other processes keep each result (and its pickled bytes) for the
    whole flow: a run's flow process grew by every batch (137 MB -> 631 MB on 70.9 MB). Consumed the
    way the run consumes batches, with and without ``chunkyard.flows.prefect_compat.forget_result``: live memory grows with
    the number of results without it, and stays at about one result with it."""
    script = textwrap.dedent("""\
        import tracemalloc
        from collections import deque
        from prefect import flow, task
        from prefect.task_runners import ProcessPoolTaskRunner
        from chunkyard.flows.prefect_compat import forget_result

        @task
        def payload(index: int) -> bytes:
            return bytes([index % 251]) * 4_000_000

        @flow(task_runner=ProcessPoolTaskRunner(max_workers=1))
        def consume(forget: bool) -> float:
            tracemalloc.start()
            pending = deque()
            for index in range(8):
                pending.append(payload.submit(index))
                while len(pending) > 1:
                    future = pending.popleft()
                    assert len(future.result()) == 4_000_000
                    if forget:
                        forget_result(future)
            while pending:
                future = pending.popleft()
                future.result()
                if forget:
                    forget_result(future)
            current = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            return current / 1e6

        print(consume(False), consume(True))
        """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=server_env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    kept, released = map(float, result.stdout.split()[-2:])
    assert kept > 20, f"without releasing, {kept:.1f} MB stayed live: the test no longer shows the leak"
    assert released < 10, f"{released:.1f} MB of 8 results of 4 MB stayed live"


def test_workers_parts_publish_the_thread_runners_tables_row_for_row(server_env, corpus, tmp_path):
    """Process-pool workers cut their batches into the snapshot's parts and write them; the flow
    renames them in: the snapshot holds the thread runner's rows, column for column and in its
    order, cut into the same part files (keys, bytes, SHA-256), on a full run and on a refresh
    (parts with rows carried over cut by the flow). Small parts (8 kB of source), so the corpus
    has dozens and the batches several."""
    source = tmp_path / "source"
    shutil.copytree(corpus, source)
    server_env = {**server_env, "CHUNKYARD_PART_BYTES": "8000"}
    thread_config, process_config = (
        config_for(tmp_path / "t", source, "kb"),
        config_for(tmp_path / "p", source, "kb"),
    )

    def same_tables(first: Path, second: Path) -> None:
        for name in ("documents.parquet", "chunks.parquet"):
            assert pq.read_table(first / name).equals(pq.read_table(second / name)), name
        assert sorted(p.name for p in second.iterdir()) == [
            "chunks.parquet",
            "documents.parquet",
            "manifest.json",
            "review-columns",
        ]
        parts = [json.loads((s / "manifest.json").read_text())["parts"] for s in (first, second)]
        assert len(parts[0]) > 20 and parts[0] == parts[1]
        # The review columns too: the same files, from the workers' parts read back as from the rows.
        review = [json.loads((s / "manifest.json").read_text())["review_columns"] for s in (first, second)]
        assert review[0] == review[1]

    full = run(server_env, thread_config)
    same_tables(full, run(server_env, process_config, "--task-runner", "process", "--workers", "2"))
    changed = sorted(source.rglob("*.md"))[3]
    changed.write_text(changed.read_text(encoding="utf-8") + "\n\nOne more paragraph.\n", encoding="utf-8")
    (sorted(source.rglob("*.md"))[7]).unlink()
    refresh = run(server_env, thread_config)
    assert json.loads((refresh / "manifest.json").read_text())["counts"]["reused"] > 0
    same_tables(refresh, run(server_env, process_config, "--task-runner", "process", "--workers", "2"))
