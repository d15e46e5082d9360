"""Issue 9, point 2: faults during a run — SIGKILL at random points, a full disk, a transient error.

The kill loop talks to the session's Prefect test server (``PREFECT_API_URL``), so each killed
process spends its time chunking, not starting a server, and leaves no orphaned server behind.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkyard.chunking.dataset import MANIFEST, SnapshotWriter, list_snapshots

from support.cli import SAMPLE, chunk_ids, one_document_source, run_cli, write_config

KILL_SEED = 20240909
KILLS = 5


def _tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _visible(version_path: Path) -> list[str]:
    return (
        sorted(p.name for p in version_path.iterdir() if not p.name.startswith("."))
        if version_path.exists()
        else []
    )


@pytest.mark.slow
def test_random_sigkill_loop(prefect_server, tmp_path):
    """SIGKILL ``chunkyard run`` at seeded random moments; nothing partial, next run identical."""
    from prefect.settings import PREFECT_API_URL

    source = tmp_path / "src"
    for copy in range(12):
        shutil.copytree(SAMPLE, source / f"copy{copy:02d}")
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    version_path = output / "kb" / "v1"
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "CI": "true"}
    rng = random.Random(KILL_SEED)
    moments = []
    for _ in range(KILLS):
        delay = rng.uniform(0.0, 1.5)
        process = subprocess.Popen(
            [sys.executable, "-m", "chunkyard.flows.cli", "run", str(config)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Start the clock once the run is under way (staging exists): Prefect's startup is not the
        # part under test, and it varies from machine to machine.
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and process.poll() is None
            and not list(version_path.glob(".staging-*"))
        ):
            time.sleep(0.005)
        time.sleep(delay)
        finished = process.poll() is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        moments.append((round(delay, 3), finished))
        # Either the run finished before the kill (a whole snapshot), or nothing is visible at all.
        visible = _visible(version_path)
        for name in visible:
            assert (version_path / name / MANIFEST).is_file(), (
                f"partial snapshot {name} after kill at {delay:.3f}s"
            )
        if visible:
            shutil.rmtree(version_path / visible[0])  # keep later kills meaningful: start from scratch
            for name in visible[1:]:
                shutil.rmtree(version_path / name)
    assert not all(finished for _, finished in moments), f"no kill landed mid-run: {moments}"

    assert run_cli("run", str(config)) == 0
    assert list_snapshots(version_path) == [1]
    assert not list(version_path.glob(".staging-*")), "staging left by killed runs is cleaned"
    reference_output = tmp_path / "reference"
    (tmp_path / "ref").mkdir()
    reference = write_config(tmp_path / "ref", source, reference_output)
    assert run_cli("run", str(reference)) == 0
    assert chunk_ids(version_path / "0001") == chunk_ids(reference_output / "kb" / "v1" / "0001")


def test_full_disk_fails_clearly_and_keeps_the_previous_snapshot(
    prefect_server, tmp_path, monkeypatch, capsys
):
    source, output = one_document_source(tmp_path)
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == 0
    version_path = output / "kb" / "v1"
    before = _tree_digest(version_path / "0001")
    capsys.readouterr()

    (source / "b.md").write_text("# B\n\nA new file to write.\n", encoding="utf-8")

    def no_space(self: SnapshotWriter, relative: str, data: bytes) -> None:
        from chunkyard.chunking.dataset import write_failure

        raise write_failure(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), self.staging / relative)

    monkeypatch.setattr(SnapshotWriter, "_put", no_space)  # where a part's bytes go to the disk
    assert run_cli("run", str(config)) == 1
    err = capsys.readouterr().err
    # chunkyard's own answer is one line. (Prefect's flow-run logger also prints its traceback above
    # it; reported to the lead: flows/run.py / logging config, not this test's to fix.)
    last = err.strip().splitlines()[-1]
    assert last.startswith("chunkyard: error: no space left on device: ") and "nothing was published" in last
    assert list_snapshots(version_path) == [1]
    assert _tree_digest(version_path / "0001") == before, "the previous snapshot is untouched"
    assert not list(version_path.glob(".staging-*")), "the failed run removed its staging folder"

    monkeypatch.undo()
    assert run_cli("run", str(config)) == 0  # space is back: the next run succeeds
    assert list_snapshots(version_path) == [1, 2]


def test_transient_error_in_a_batch_is_retried(prefect_server, tmp_path, monkeypatch):
    """A batch whose first attempt fails with an I/O error succeeds on Prefect's task retry."""
    import chunkyard.flows.run as run_module

    source, output = one_document_source(tmp_path)
    calls: list[int] = []
    real = run_module.chunk_files

    def flaky(*args: object, **kwargs: object):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error (simulated, transient)")
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "chunk_files", flaky)
    assert run_cli("run", str(write_config(tmp_path, source, output))) == 0
    assert len(calls) == 2, "the batch was retried once"
    assert list_snapshots(output / "kb" / "v1") == [1]


def test_staging_folders_of_other_machines_are_left_to_them(tmp_path):
    """A process id means something only on the machine that gave it: with an output folder shared by
    runs on several machines, a run removed another machine's live staging folder (its PID looked dead
    here). Now a foreign staging folder goes only once nothing in it changed for a day."""
    from chunkyard.chunking.dataset import FOREIGN_STAGING_SECONDS, HOST, clean_stale_staging

    dead = 2**22 + 12345  # above pid_max's default: no such process here
    folders = {
        name: tmp_path / name
        for name in (
            f".staging-{dead}-{HOST}-aaaaaaaa",  # this machine, process gone: removed
            f".staging-{os.getpid()}-{HOST}-bbbbbbbb",  # this machine, this process: kept
            f".staging-{dead}-0f0f0f0f-cccccccc",  # another machine, written to a minute ago: kept
            f".staging-{dead}-0f0f0f0f-dddddddd",  # another machine, untouched for two days: removed
            f".staging-{dead}-eeeeeeee",  # named before machines were: as this machine's
        )
    }
    for folder in folders.values():
        folder.mkdir()
        (folder / "chunks.parquet").write_bytes(b"partial")
    now = time.time()
    old = now - FOREIGN_STAGING_SECONDS - 3600
    for path in (
        folders[f".staging-{dead}-0f0f0f0f-dddddddd"],
        folders[f".staging-{dead}-0f0f0f0f-dddddddd"] / "chunks.parquet",
    ):
        os.utime(path, (old, old))
    removed = {path.name for path in clean_stale_staging(tmp_path, now=now)}
    assert removed == {
        f".staging-{dead}-{HOST}-aaaaaaaa",
        f".staging-{dead}-0f0f0f0f-dddddddd",
        f".staging-{dead}-eeeeeeee",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(folders) - removed)
