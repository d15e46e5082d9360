"""The real Prefect flow end to end: snapshots, incremental reuse, refusal, kill safety, plain readers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunkyard.chunking.dataset import Snapshot, list_snapshots

from support.checks import recount
from support.cli import SAMPLE, chunk_ids, one_document_source, run_cli, write_config
from support.signals import with_ctrl_c

REPO = Path(__file__).resolve().parents[2]


# The session-wide Prefect test server, ``prefect_server``, is in conftest.py.


def first_sample_run(tmp_path: Path) -> tuple[Path, Path, Path, Snapshot]:
    """The sample corpus copied to ``tmp_path/src`` and run once: (source, output, config, snapshot)."""
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == 0
    return source, output, config, Snapshot.open(output / "kb")


def test_runs_are_incremental(prefect_server, tmp_path, capsys):
    source, output, config, first = first_sample_run(tmp_path)
    assert first.number == 1 and first.manifest["kind"] == "full"
    n_docs = first.manifest["counts"]["documents"]
    assert n_docs == len([p for p in SAMPLE.rglob("*") if p.is_file()])
    assert first.manifest["counts"]["new"] == n_docs

    # Nothing new, changed or removed: no snapshot is published, and the run says so in one line.
    capsys.readouterr()
    assert run_cli("run", str(config)) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(
        f"No change since {first.path}: nothing new, changed or removed"
    )
    assert list_snapshots(first.path.parent) == [1]
    assert not list(first.path.parent.glob(".staging-*"))
    second = Snapshot.open(output / "kb")
    assert second.number == 1

    changed = source / "handbook" / "onboarding.md"
    changed.write_text(
        changed.read_text(encoding="utf-8") + "\n\n## Added later\n\nA new paragraph.\n", encoding="utf-8"
    )
    (source / "support" / "faq.md").unlink()
    (source / "notes" / "new-note.txt").write_text(
        "A brand new note. It has two sentences.\n", encoding="utf-8"
    )
    assert run_cli("run", str(config)) == 0
    third = Snapshot.open(output / "kb")
    counts = third.manifest["counts"]
    assert third.number == 2 and third.manifest["parent_snapshot"] == 1
    assert (counts["changed"], counts["new"], counts["removed"]) == (1, 1, 1)
    assert counts["reused"] == n_docs - 2
    assert third.manifest["removed"] == ["support/faq.md"]
    before, after = chunk_ids(second.path), chunk_ids(third.path)
    for doc_id, ids in after.items():
        if doc_id not in ("handbook/onboarding.md", "notes/new-note.txt"):
            assert ids == before[doc_id], doc_id
    assert "support/faq.md" not in after

    # Every chunk in the published dataset is an exact span of its stored document text.
    texts = dict(
        zip(
            *[third.documents(["doc_id", "text"]).column(c).to_pylist() for c in ("doc_id", "text")],
            strict=True,
        )
    )
    chunks = third.chunks(["doc_id", "start", "end", "text"]).to_pylist()
    assert chunks and all(texts[c["doc_id"]][c["start"] : c["end"]] == c["text"] for c in chunks)


def test_a_file_that_cannot_be_read_keeps_its_previous_chunks(prefect_server, tmp_path, monkeypatch):
    """A document the previous snapshot holds, unreadable this time (EIO after retries, permission
    denied) or whose chunking failed, keeps its chunks: it used to vanish from the snapshot without
    being counted as removed, so `export --since` deleted its vectors until the next run. A file read and
    found unusable (here: emptied) is removed, and counted."""
    import chunkyard.chunking.pipeline as pipeline
    from chunkyard.chunking.documents import Skipped, read_document

    source, output, config, first = first_sample_run(tmp_path)
    unreadable = "handbook/onboarding.md"
    (source / unreadable).write_text("changed, but unreadable this time\n", encoding="utf-8")
    (source / "support" / "faq.md").write_text("", encoding="utf-8")  # read, and empty: removed

    def flaky(path, doc_id, *args):
        if doc_id == unreadable:
            return Skipped(doc_id, "unreadable: Input/output error (after 3 attempts)", keep_previous=True)
        return read_document(path, doc_id, *args)

    monkeypatch.setattr(pipeline, "read_document", flaky)
    assert run_cli("run", str(config)) == 3  # completed with skips
    second = Snapshot.open(output / "kb")
    manifest = second.manifest
    assert manifest["kept"] == [unreadable] and manifest["counts"]["kept"] == 1
    assert manifest["removed"] == ["support/faq.md"] and manifest["counts"]["removed"] == 1
    assert {s["doc_id"] for s in manifest["skipped"]} == {unreadable, "support/faq.md"}
    assert chunk_ids(second.path)[unreadable] == chunk_ids(first.path)[unreadable]
    assert "support/faq.md" not in chunk_ids(second.path)


def test_kept_documents_are_those_not_read_and_those_under_an_unlistable_folder():
    from chunkyard.chunking.documents import Skipped
    from chunkyard.chunking.pipeline import kept_documents

    previous = ["a.md", "docs/b.md", "docs/deep/c.md", "docsx/d.md", "e.md", "f.md"]
    skipped = [
        Skipped("a.md", "permission denied", keep_previous=True),
        Skipped("docs", "unreadable folder: Permission denied", keep_previous=True, folder=True),
        Skipped("e.md", "binary file (NUL bytes)"),
        Skipped("new.md", "permission denied", keep_previous=True),
    ]  # not in the previous snapshot
    assert kept_documents(skipped, previous) == ["a.md", "docs/b.md", "docs/deep/c.md"]
    assert kept_documents(
        [Skipped(".", "unreadable folder: EIO", keep_previous=True, folder=True)], previous
    ) == sorted(previous)


def test_a_failed_run_says_why_in_one_line_without_prefects_copy(
    prefect_server, tmp_path, capsys, monkeypatch
):
    """A run that fails inside the flow (here: a changed config under its version) printed Prefect's
    flow-run ERROR line, "Encountered exception during execution: RunRefused('config changed ...')",
    above chunkyard's own line saying the same: two lines for one failure (likewise a full disk, an
    unreachable Dask scheduler or bucket). chunkyard's line is the only one now.

    The command line refuses a changed config before the flow starts; the flow refuses it again (a
    run of another config may publish between the two), which is the case made here."""
    import chunkyard.chunking.pipeline

    source = tmp_path / "src"
    source.mkdir()
    (source / "a.md").write_text("# A\n\nSome text here.\n", encoding="utf-8")
    output = tmp_path / "out"
    assert run_cli("run", str(write_config(tmp_path, source, output))) == 0
    capsys.readouterr()
    monkeypatch.setattr(
        chunkyard.chunking.pipeline, "check_run", lambda *args: None
    )  # as if published meanwhile
    assert run_cli("run", str(write_config(tmp_path, source, output, max_size=300))) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chunkyard: error: config changed since "), lines


def test_prefects_copy_of_an_interrupt_is_not_shown_either():
    """Ctrl+C during a thread run printed Prefect's "Crash detected! Execution was aborted by an
    interrupt signal." above "chunkyard: interrupted; no snapshot was published"."""
    import logging

    from chunkyard.flows.console import NoTraceback

    def shown(name: str, message: str) -> bool:
        return NoTraceback().filter(logging.LogRecord(name, logging.ERROR, __file__, 1, message, None, None))

    assert not shown("prefect.flow_runs", "Crash detected! Execution was aborted by an interrupt signal.")
    assert shown(
        "prefect.task_runs",
        "Task run failed with exception: OSError(5) - Retry 1/2 will start 1 second(s) from now",
    )
    assert shown("prefect.flow_runs", "Crash detected! Something else")


def test_changed_config_under_same_version_is_refused(prefect_server, tmp_path, capsys):
    source, output = one_document_source(tmp_path)
    assert run_cli("run", str(write_config(tmp_path, source, output))) == 0
    capsys.readouterr()
    assert run_cli("run", str(write_config(tmp_path, source, output, max_size=300))) == 2
    err = capsys.readouterr().err
    assert "bump `version`" in err and "Traceback" not in err
    assert list_snapshots(output / "kb" / "v1") == [1]
    assert run_cli("run", str(write_config(tmp_path, source, output, max_size=300, version=2))) == 0
    assert list_snapshots(output / "kb" / "v2") == [1]


def test_an_unchanged_config_after_an_algorithm_change_is_refused_for_what_it_is(
    prefect_server, tmp_path, capsys, monkeypatch
):
    """After an upgrade that chunks differently (ALGORITHM_VERSION), an unchanged config was refused with
    'config changed since ...', which its user had not done. The message now names the real cause."""
    import chunkyard.chunking.config
    import chunkyard.chunking.pipeline

    source, output = one_document_source(tmp_path)
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == 0
    capsys.readouterr()
    new = str(int(chunkyard.chunking.config.ALGORITHM_VERSION) + 1)
    monkeypatch.setattr(chunkyard.chunking.config, "ALGORITHM_VERSION", new)
    monkeypatch.setattr(chunkyard.chunking.pipeline, "ALGORITHM_VERSION", new)
    from chunkyard.flows.run import config_from_text

    config_from_text.cache_clear()  # configs are cached per text within a process
    assert run_cli("run", str(config)) == 2
    err = capsys.readouterr().err
    assert (
        f"chunking algorithm {int(new) - 1} → {new}; the config is unchanged" in err
        and "bump `version`" in err
    )
    assert "config changed" not in err and list_snapshots(output / "kb" / "v1") == [1]


def test_output_inside_source_is_refused(prefect_server, tmp_path, capsys):
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    assert run_cli("run", str(write_config(tmp_path, source, source / "datasets"))) == 2
    assert "inside the source folder" in capsys.readouterr().err
    assert not (source / "datasets").exists()


def _no_server_or_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if `chunkyard run` starts a Prefect server, the forkserver or the flow."""
    from chunkyard.flows import run as run_module
    from chunkyard.flows import workers
    from chunkyard.flows.cli.session import PrefectServer

    monkeypatch.setattr(run_module, "run", lambda *a, **k: pytest.fail("the flow started"))
    monkeypatch.setattr(PrefectServer, "start", lambda self: pytest.fail("a Prefect server was started"))
    monkeypatch.setattr(PrefectServer, "ensure", lambda self: pytest.fail("a Prefect server was started"))
    monkeypatch.setattr(workers, "start_forkserver", lambda: pytest.fail("the forkserver was started"))


@pytest.mark.parametrize("runner", ["thread", "process"])
@pytest.mark.parametrize("case", ["config changed", "algorithm changed"])
def test_a_changed_config_is_refused_before_any_server_starts(tmp_path, capsys, monkeypatch, case, runner):
    """`chunkyard run` started the Prefect server (and, for processes, the forkserver) first, waited
    for it and started the flow, which only then refused a config changed without a version bump:
    seconds, and Prefect's output, for a refusal the command can make from the newest manifest."""
    import chunkyard.chunking.config
    import chunkyard.chunking.pipeline

    from support.review_fixtures import CONFIG, build_dataset

    dataset = build_dataset(tmp_path / "data")
    _no_server_or_flow(monkeypatch)
    text = CONFIG.replace("SOURCE", str(tmp_path / "data" / "src")).replace(
        "OUTPUT", str(tmp_path / "data" / "out")
    )
    if case == "config changed":
        text = text.replace("max_size: 420", "max_size: 300")
    else:
        new = str(int(chunkyard.chunking.config.ALGORITHM_VERSION) + 1)
        monkeypatch.setattr(chunkyard.chunking.config, "ALGORITHM_VERSION", new)
        monkeypatch.setattr(chunkyard.chunking.pipeline, "ALGORITHM_VERSION", new)
    config = tmp_path / "data" / "config.yaml"
    config.write_text(text, encoding="utf-8")
    capsys.readouterr()
    started = time.perf_counter()
    code = run_cli("run", str(config), "--task-runner", runner)
    elapsed = time.perf_counter() - started
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "bump `version`" in err and "Traceback" not in err, err
    assert elapsed < 1.0, f"the refusal took {elapsed:.2f} s"
    assert list_snapshots(dataset / "v1") == [1]


@pytest.mark.parametrize("case", ["missing source", "source is a file", "output inside source"])
def test_wrong_folders_are_refused_before_any_flow_starts(tmp_path, capsys, monkeypatch, case):
    _no_server_or_flow(monkeypatch)
    source = tmp_path / "src"
    source.mkdir()
    (tmp_path / "file.md").write_text("# A\n", encoding="utf-8")
    where = {
        "missing source": (tmp_path / "nowhere", tmp_path / "out"),
        "source is a file": (tmp_path / "file.md", tmp_path / "out"),
        "output inside source": (source, source / "out"),
    }[case]
    assert run_cli("run", str(write_config(tmp_path, *where))) == 2
    err = capsys.readouterr().err
    expected = {
        "missing source": "source folder not found",
        "source is a file": "is a file",
        "output inside source": "inside the source folder",
    }[case]
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err


def test_bad_files_are_skipped_with_reasons(prefect_server, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "good.md").write_text("# Good\n\nFine text.\n", encoding="utf-8")
    (source / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (source / "binary.bin").write_bytes(b"\x00\x01\x02binary")
    (source / "empty.md").write_bytes(b"")
    (source / "loop").symlink_to(source / "loop")
    output = tmp_path / "out"
    assert run_cli("run", str(write_config(tmp_path, source, output))) == 3  # completed with skips
    manifest = Snapshot.open(output).manifest
    reasons = {item["doc_id"]: item["reason"] for item in manifest["skipped"]}
    assert reasons["latin1.txt"] == "not valid UTF-8 at byte 3"
    assert reasons["binary.bin"].startswith("binary file")
    assert reasons["empty.md"] == "empty file"
    assert reasons["loop"] == "symlink loop"
    assert manifest["counts"]["documents"] == 1


def test_dataset_reads_without_chunkyard(prefect_server, tmp_path):
    output = tmp_path / "out"
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    assert run_cli("run", str(write_config(tmp_path, source, output))) == 0
    snapshot = output / "kb" / "v1" / "0001"
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(
        f"select doc_id, count(*) as n, max(n_tokens) as biggest from '{snapshot}/chunks.parquet' group by doc_id"
    ).fetchall()
    assert len(rows) == json.loads((snapshot / "manifest.json").read_text())["counts"]["documents"]
    assert all(biggest <= 256 for _, _, biggest in rows)
    documents = pq.read_table(snapshot / "documents.parquet")  # plain pyarrow
    assert set(documents.column_names) >= {"doc_id", "sha256", "text", "n_chars"}


@pytest.mark.slow
def test_killed_run_leaves_no_partial_snapshot(prefect_server, tmp_path):
    """SIGKILL the CLI while it writes; nothing partial is visible and the next run succeeds."""
    source = tmp_path / "src"
    for copy in range(30):
        shutil.copytree(SAMPLE, source / f"copy{copy:02d}")
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-sub")}
    env.pop("PREFECT_API_URL", None)
    version_path = output / "kb" / "v1"
    for delay in (0.0, 0.5):
        # Its own session: the temporary Prefect server the run starts is in its process group, and a
        # SIGKILLed run cannot stop it, so the test stops the whole group (and nothing else).
        process = subprocess.Popen(
            [sys.executable, "-m", "chunkyard.flows.cli", "run", str(config)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(version_path.glob(".staging-*")):
            if process.poll() is not None:
                break
            time.sleep(0.01)
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        assert list_snapshots(version_path) == []
        assert (
            not [p for p in version_path.iterdir() if not p.name.startswith(".")]
            if version_path.exists()
            else True
        )
    assert run_cli("run", str(config)) == 0
    assert list_snapshots(version_path) == [1]
    assert not list(version_path.glob(".staging-*")), "stale staging folders are cleaned"
    reference = chunk_ids(version_path / "0001")
    assert run_cli("run", str(write_config(tmp_path, source, tmp_path / "out2"))) == 0
    assert chunk_ids(tmp_path / "out2" / "kb" / "v1" / "0001") == reference  # deterministic ids


def _descendants(pid: int) -> set[int]:
    """Every live process whose chain of parents leads to ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_a_killed_process_run_leaves_no_process_behind(tmp_path):
    """SIGKILL a process-runner run mid-batch: its Prefect server, forkserver and workers all end."""
    source = tmp_path / "src"
    for copy in range(30):
        shutil.copytree(SAMPLE, source / f"copy{copy:02d}")
    config = write_config(tmp_path, source, tmp_path / "out")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-own")}
    env.pop("PREFECT_API_URL", None)  # the run starts its own server
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chunkyard.flows.cli",
            "run",
            str(config),
            "--task-runner",
            "process",
            "--workers",
            "2",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        # Wait until the server (a child), the forkserver (a child) and a worker (its child) all run.
        while time.monotonic() < deadline and process.poll() is None:
            started = _descendants(process.pid)
            server = any("server" in _cmdline(p) and "start" in _cmdline(p) for p in started)
            workers = [p for p in started if "forkserver" in _cmdline(p)]
            if server and len(workers) >= 2:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before its workers started; use a larger corpus"
        process.send_signal(signal.SIGKILL)
        process.wait()
        survivors = _survivors(started)
        assert not survivors, f"still running after the run was killed: {survivors}"
    finally:
        _kill_everything(process, started)


def test_ctrl_c_stops_a_process_run_at_once_and_publishes_nothing(tmp_path):
    """Ctrl+C (SIGINT to the terminal's process group) during a process-runner run: one line, exit 130,
    no snapshot or staging folder, no process left. It used to hang: multiprocessing's exit handler
    joined workers stuck sending results, and each worker printed a KeyboardInterrupt traceback."""
    source = tmp_path / "src"
    paragraph = "The refund policy covers every order shipped within thirty days of purchase. " * 12
    for number in range(24):
        folder = source / f"part{number:02d}"
        folder.mkdir(parents=True)
        (folder / "guide.md").write_text(
            "".join(f"## Section {k}\n\n{paragraph}\n\n" for k in range(700)), encoding="utf-8"
        )
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-own")}
    env.pop("PREFECT_API_URL", None)
    # with_ctrl_c: SIGINT at its default in the child even when pytest was started with it ignored (nohup).
    process = subprocess.Popen(
        with_ctrl_c(
            "-m", "chunkyard.flows.cli", "run", str(config), "--task-runner", "process", "--workers", "2"
        ),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        while (
            time.monotonic() < deadline and process.poll() is None
        ):  # workers up and a snapshot being written
            started = _descendants(process.pid)
            workers = [p for p in started if "forkserver" in _cmdline(p)]
            if len(workers) >= 3 and any(output.glob("kb/v1/.staging-*")):
                break
            time.sleep(0.05)
        time.sleep(0.5)  # into the batches
        assert process.poll() is None, "the run ended before it could be interrupted; use a larger corpus"
        started |= _descendants(process.pid)
        os.killpg(process.pid, signal.SIGINT)
        try:
            _, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say what was still running, and in which state, to find why
            alive = {
                pid: (_state(pid), _cmdline(pid)[:100])
                for pid in started | _descendants(process.pid)
                if _alive(pid)
            }
            _kill_everything(process, started)
            out, err = process.communicate()
            pytest.fail(
                f"still running 60 s after Ctrl+C: {alive}\nstdout: {out[-1500:]}\nstderr: {err[-1500:]}"
            )
        assert process.returncode == 130
        assert "chunkyard: interrupted; no snapshot was published" in err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err and "resource_tracker" not in err, (
            err
        )
        assert list((output / "kb" / "v1").iterdir()) == []
        assert not _survivors(started)
    finally:
        _kill_everything(process, started)


_DEAF_SERVER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"


def test_an_interrupted_command_stops_its_server_at_once(tmp_path, monkeypatch):
    """After Ctrl+C the server a command started gets one second, not the fifteen of a graceful
    shutdown: a server still answering the interrupted run's requests took 4–6 s to stop (and the
    prompt with it). Here the server is a process that ignores SIGTERM."""
    from chunkyard.flows import server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(server, "_configured_api_url", lambda: "")
    monkeypatch.setattr(server, "_dies_with_us", lambda command: [sys.executable, "-c", _DEAF_SERVER])
    with server.pending_server(tmp_path / "home") as pending:
        process = pending._process
        time.sleep(0.3)  # let it install its SIGTERM handler
        pending.abandon()
        started = time.monotonic()
    assert time.monotonic() - started < server.ABANDON_GRACE + 3
    assert process.poll() is not None  # killed, not left behind


@pytest.mark.parametrize(
    ("error", "noted", "abandoned"),
    [
        (KeyboardInterrupt, False, True),
        (ValueError, True, True),  # Ctrl+C that a library turned into another error
        (ValueError, False, False),
        (None, False, False),
    ],
)
def test_the_command_line_abandons_its_server_only_after_ctrl_c(error, noted, abandoned):
    from chunkyard.flows.cli.session import PrefectServer

    class Pending:
        abandoned = False

        def abandon(self):
            self.abandoned = True

    entry = PrefectServer(lambda: noted)
    pending = Pending()
    entry._stack, entry._pending = contextlib.ExitStack(), pending
    entry.__exit__(error, error() if error else None, None)
    assert pending.abandoned is abandoned and entry._stack is None


def _survivors(pids: set[int], wait: float = 30) -> dict[int, str]:
    """The processes of ``pids`` still running after up to ``wait`` seconds, with their command lines."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return {p: _cmdline(p)[:120] for p in pids if _alive(p)}


def _kill_everything(process: subprocess.Popen, started: set[int]) -> None:
    """Clean-up of a test's run: SIGKILL to every process it started and to its process group."""
    for pid in started | _descendants(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _state(pid: int) -> str:
    """A process's state letter and what it waits in (``/proc/PID/stat`` and ``wchan``)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return f"{state} {Path(f'/proc/{pid}/wchan').read_text()}"
    except OSError:
        return "?"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_manifest_says_why_a_chunk_is_over_budget(prefect_server, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "family.md").write_text("# Family\n\n" + "👩‍👩‍👧‍👦 " * 3 + "\n", encoding="utf-8")
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output, max_size=17)
    assert run_cli("run", str(config)) == 0
    manifest = Snapshot.open(output).manifest
    over = manifest["over_budget"]
    assert over and all(item["reason"] == "a single grapheme is larger than the budget" for item in over)
    assert all(item["size"] > 17 and item["unit"] == "tokens" for item in over)
    assert run_cli("run", str(config)) == 0  # carried over: the reason is carried with the rows
    assert Snapshot.open(output).manifest["over_budget"] == over


def test_uncounted_tokens_are_null_and_counted_ones_exact(prefect_server, tmp_path):
    """``count_tokens: false`` (chars) writes null n_tokens; the reviewer's reader and eval cope."""
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    counted = write_config(tmp_path, source, tmp_path / "out", extra="")
    text = (
        counted.read_text(encoding="utf-8")
        .replace("unit: tokens", "unit: chars")
        .replace("overlap: 16", "overlap: 0")
    )
    counted.write_text(text, encoding="utf-8")
    assert run_cli("run", str(counted)) == 0
    uncounted = tmp_path / "uncounted.yaml"
    uncounted.write_text(
        text.replace("name: kb", "name: kb-fast").replace(
            "  overlap: 0\n", "  overlap: 0\n  count_tokens: false\n"
        ),
        encoding="utf-8",
    )
    assert run_cli("run", str(uncounted)) == 0
    fast = pq.read_table(tmp_path / "out" / "kb-fast" / "v1" / "0001" / "chunks.parquet")
    slow = pq.read_table(tmp_path / "out" / "kb" / "v1" / "0001" / "chunks.parquet")
    assert fast.column("n_tokens").null_count == fast.num_rows > 0
    assert fast.column("text").to_pylist() == slow.column("text").to_pylist()  # same chunks
    assert slow.column("n_tokens").null_count == 0
    assert slow.column("n_tokens").to_pylist() == [
        recount(t, "tokens") for t in slow.column("text").to_pylist()
    ]
    from chunkyard.chunking.review import ReviewIndex

    review = ReviewIndex.load(tmp_path / "out" / "kb-fast" / "v1" / "0001")
    assert all(detail.n_tokens is None for detail in review.chunk_details(0))
