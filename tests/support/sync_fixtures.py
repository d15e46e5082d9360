"""Helpers for the sync tests: snapshots published without Prefect, and a real PostgreSQL with
pgvector (the ``pgserver`` wheel's binaries) run as an unprivileged user on a socket in a
temporary folder."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from chunkyard.chunking.config import Config, load_config
from chunkyard.chunking.dataset import SnapshotWriter
from chunkyard.chunking.pipeline import (
    CarryOver,
    RunStats,
    build_manifest,
    chunk_files,
    discover_files,
    make_batches,
    prepare_run,
)


def write_sync_config(
    folder: Path, source: Path, sinks: str, *, version: int = 1, max_size: int = 120, extra: str = ""
) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: kb
        version: {version}
        source: {{path: {source}, include: ["**/*"]}}
        output: {{path: {folder / "datasets"}}}
        chunker: {{strategy: auto, unit: chars, max_size: {max_size}, overlap: 0, min_size: 10}}
        """)
        + sinks
        + extra,
        encoding="utf-8",
    )
    return path


def publish(config_path: Path) -> Path:
    """What the flow does, minus Prefect: chunk changed files, carry the rest over, publish."""
    config: Config = load_config(config_path)
    context = prepare_run(config)
    writer = SnapshotWriter(context.version_path)
    stats = RunStats()
    carry = CarryOver(context.previous) if context.previous is not None else None
    for files, skipped in make_batches(discover_files(context)):
        result = chunk_files(config, files, context.previous_sha)
        writer.write(result.documents, result.chunks)
        stats.add(result.documents, result.chunks)
        if result.reused and carry is not None:
            documents, chunks = carry.rows(result.reused)
            writer.write(documents, chunks)
            stats.add(documents, chunks)
            stats.reused.extend(result.reused)
        for doc_id in result.chunked:
            (stats.changed if doc_id in context.previous_sha else stats.new).append(doc_id)
        stats.skipped.extend(skipped + result.skipped)
    removed = sorted(set(context.previous_sha) - stats.seen)
    return writer.publish(build_manifest(context, stats, "refresh" if context.previous else "full", removed))


def pg_binaries() -> Path | None:
    """``pginstall/bin`` of the pgserver wheel, or None when it is not installed."""
    try:
        with warnings.catch_warnings():
            # pgserver asks platformdirs for a runtime folder at import; unset XDG_RUNTIME_DIR (CI, root)
            # only makes that warn, and the tests never use the folder.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import pgserver  # the pgserver wheel (pyproject.toml says why this one)
    except ImportError:
        return None
    folder = Path(pgserver.__file__).parent / "pginstall" / "bin"
    return folder if (folder / "postgres").is_file() else None


def _unprivileged() -> list[str]:
    """How to run a command as a user PostgreSQL accepts (it refuses root)."""
    if os.geteuid() != 0:
        return []
    name = "nobody"
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", name], check=True)
    runner = shutil.which("runuser") or shutil.which("setpriv")
    if runner and runner.endswith("runuser"):
        return [runner, "-u", name, "--"]
    return ["su", name, "-s", "/bin/sh", "-c"]  # pragma: no cover - util-linux is in Debian's base


def _check_vector(dsn: str, log: Path) -> None:
    """Create pgvector and compute one distance, so a ``vector.so`` built for another CPU (it dies
    with SIGILL, "Illegal instruction", at the first distance) fails here saying so, not in a test."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
            connection.execute("SELECT '[1,2,3]'::vector <=> '[1,2,4]'::vector").fetchone()
    except psycopg.OperationalError as error:
        tail = log.read_text(errors="replace")[-1500:]
        cpu = "a CPU instruction this machine lacks" if "Illegal instruction" in tail else "an unknown cause"
        raise RuntimeError(
            f"pgvector's first distance crashed the test server ({cpu}): {error}\n{tail}"
        ) from None


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL server with pgvector on a socket in a new folder of /tmp; yields its DSN; stopped
    and removed on exit. Not under pytest's basetemp: pytest takes the other users' access to that
    folder away when another session starts, and the server runs as another user."""
    binaries = pg_binaries()
    assert binaries is not None
    folder = Path(tempfile.mkdtemp(prefix="chunkyard-pg-"))
    data = folder / "data"
    as_user = _unprivileged()
    if as_user:
        os.chmod(folder, 0o777)
    done = subprocess.run(
        as_user + [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed ({done.returncode}): {done.stdout[-1000:]} {done.stderr[-2000:]}")
    log = open(folder / "postgres.log", "wb")
    server = subprocess.Popen(
        as_user
        + [
            str(binaries / "postgres"),
            "-D",
            str(data),
            "-k",
            str(folder),
            "-c",
            "listen_addresses=",
            "-p",
            "5432",
            "-c",
            "fsync=off",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    dsn = f"host={folder} port=5432 user=postgres dbname=postgres"
    try:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "postgres did not start: " + (folder / "postgres.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.2)
        _check_vector(dsn, folder / "postgres.log")
        yield dsn
    finally:
        server.terminate()  # SIGTERM: smart shutdown
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
