"""Datasets on an object store: a real S3 API (moto's server on loopback), reached through a URI.

The run writes the data files of snapshot NNNN first and ``manifest.json`` last; readers ignore a
snapshot folder without a manifest. Refresh runs read the previous snapshot back through pyarrow.fs
and carry unchanged documents over. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from chunkyard.chunking.dataset import (
    CHUNKS_SCHEMA,
    DOCUMENTS_SCHEMA,
    ObjectStoreSnapshotWriter,
    Snapshot,
    clean_uncommitted,
    latest_snapshot,
    list_snapshots,
    resolve_snapshot,
)
from chunkyard.chunking.errors import DatasetError
from chunkyard.chunking.storage import StoragePath, location

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"
KEY, SECRET, REGION = "testing", "testing", "us-east-1"


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on a random loopback port with an empty bucket; yields the URI query."""
    from moto.server import ThreadedMotoServer

    # moto keeps one in-memory backend per process: other tests here use other bucket names.
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        filesystem = pafs.S3FileSystem(
            endpoint_override=f"{host}:{port}",
            scheme="http",
            access_key=KEY,
            secret_key=SECRET,
            region=REGION,
            allow_bucket_creation=True,
        )
        filesystem.create_dir("bucket")
        yield {"filesystem": filesystem, "query": f"endpoint_override={host}:{port}&scheme=http"}
    finally:
        server.stop()


@pytest.fixture
def aws_env(monkeypatch):
    # Credentials as a deployment would give them: the usual variables (pyarrow reads them).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def write_config(folder: Path, source: Path, output: str, name: str = "kb") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        version: 1
        source: {{path: {source}, include: ["**/*"]}}
        output: {{path: "{output}"}}
        chunker: {{strategy: auto, unit: tokens, max_size: 256, overlap: 16}}
        """),
        encoding="utf-8",
    )
    return path


def run_cli(*args: str) -> int:
    from chunkyard.flows.cli import main

    return main(list(args))


def chunk_ids(snapshot: Snapshot) -> list[tuple[str, str]]:
    table = snapshot.chunks(["doc_id", "chunk_id"])
    return sorted(zip(table.column("doc_id").to_pylist(), table.column("chunk_id").to_pylist(), strict=True))


def test_full_then_refresh_into_s3_matches_a_local_run(prefect_server, s3, aws_env, tmp_path, capsys):
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    uri = f"s3://bucket/out?{s3['query']}"
    config = write_config(tmp_path, source, uri)
    local_config = write_config(tmp_path, source, str(tmp_path / "local"), name="local")

    assert run_cli("run", str(local_config)) == 0
    reference = chunk_ids(Snapshot.open(tmp_path / "local" / "local"))
    assert run_cli("run", str(config)) == 0
    printed = capsys.readouterr().out
    assert "Wrote s3://bucket/out/kb/v1/0001 " in printed and "endpoint_override" not in printed

    first = Snapshot.open(f"s3://bucket/out/kb?{s3['query']}")
    assert isinstance(first.path, StoragePath) and first.number == 1 and first.manifest["kind"] == "full"
    # chunk ids hash the config, and the two configs differ only in name and output: same ids
    assert chunk_ids(first) == reference

    # The files are plain Parquet on the bucket, read without chunkyard.
    table = pq.read_table("bucket/out/kb/v1/0001/chunks.parquet", filesystem=s3["filesystem"])
    assert table.num_rows == len(reference)

    # A refresh reads the previous snapshot back from the bucket and carries every document over.
    changed = source / "handbook" / "onboarding.md"
    changed.write_text(
        changed.read_text(encoding="utf-8") + "\n\n## Added later\n\nA new paragraph.\n", encoding="utf-8"
    )
    assert run_cli("run", str(config)) == 0
    second = Snapshot.open(f"s3://bucket/out/kb/v1?{s3['query']}")
    counts = second.manifest["counts"]
    assert (
        second.number == 2
        and second.manifest["kind"] == "refresh"
        and second.manifest["parent_snapshot"] == 1
    )
    assert counts["changed"] == 1 and counts["reused"] == counts["documents"] - 1
    after = dict.fromkeys(doc for doc, _ in chunk_ids(second))
    assert set(after) == {doc for doc, _ in reference}
    unchanged_before = [item for item in reference if item[0] != "handbook/onboarding.md"]
    unchanged_after = [item for item in chunk_ids(second) if item[0] != "handbook/onboarding.md"]
    assert unchanged_after == unchanged_before
    texts = dict(
        zip(
            *[second.documents(["doc_id", "text"]).column(c).to_pylist() for c in ("doc_id", "text")],
            strict=True,
        )
    )
    assert all(
        texts[c["doc_id"]][c["start"] : c["end"]] == c["text"]
        for c in second.chunks(["doc_id", "start", "end", "text"]).to_pylist()
    )

    # diff and export read remote snapshots; review refuses a URI with a clear message.
    assert (
        run_cli("diff", f"s3://bucket/out/kb/v1/0001?{s3['query']}", f"s3://bucket/out/kb?{s3['query']}") == 0
    )
    assert "handbook/onboarding.md" in capsys.readouterr().out
    out = tmp_path / "export.jsonl"
    assert run_cli("export", f"s3://bucket/out/kb?{s3['query']}", "--format", "jsonl", "--out", str(out)) == 0
    assert sum(1 for _ in out.open(encoding="utf-8")) == second.manifest["counts"]["chunks"]
    with pytest.raises(SystemExit) as refused:
        run_cli("review", f"s3://bucket/out/kb?{s3['query']}")
    assert refused.value.code == 2
    assert "works on local datasets only" in capsys.readouterr().err


def test_a_refresh_on_s3_refers_to_the_unchanged_parts_and_reads_as_a_fresh_run(
    prefect_server, s3, aws_env, tmp_path, monkeypatch
):
    """No hard links on an object store: the refreshed manifest names the previous snapshot's
    unchanged part files (``../0001/...``) and uploads only the parts that changed; every reader goes
    through the manifest and gets what a fresh local run of the same files holds."""
    from chunkyard.chunking import dataset as dataset_module
    from chunkyard.chunking.export import export

    from support.parts import synthetic_corpus

    monkeypatch.setattr(dataset_module, "PART_BYTES", 4_000)
    source = tmp_path / "src"
    paths = synthetic_corpus(source, documents=60)
    uri = f"s3://bucket/shared?{s3['query']}"
    config = write_config(tmp_path, source, uri)
    assert run_cli("run", str(config)) == 0
    paths[20].write_text(paths[20].read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    assert run_cli("run", str(config)) == 0
    second = Snapshot.open(f"s3://bucket/shared/kb?{s3['query']}", validate=True)  # checksums of every part
    assert second.number == 2
    # Its own review columns (uploaded with it, never a reference), equal to its parts' (validate).
    assert second.review_columns() is not None, second.review_columns_note
    referred = [p for p in second.parts if p["chunks"]["file"].startswith("../0001/")]
    assert len(second.parts) > 5 and 1 <= len(second.parts) - len(referred) <= 3
    storage = second.manifest["storage"]
    assert storage["bytes_written"] < storage["bytes"] / 3
    # What was uploaded for 0002: only the new parts (and the manifest).
    uploaded = [info for info in (second.path).files() if not info.path.endswith("manifest.json")]
    assert sum(info.size for info in uploaded) == storage["bytes_written"]

    local_config = write_config(tmp_path, source, str(tmp_path / "local"), name="local")
    assert run_cli("run", str(local_config)) == 0
    local = Snapshot.open(tmp_path / "local" / "local")
    assert second.chunks(["chunk_id", "doc_id", "text"]).equals(local.chunks(["chunk_id", "doc_id", "text"]))
    assert second.documents().equals(local.documents())
    assert [p["key"] for p in second.parts] == [p["key"] for p in local.parts]
    # The files in order, for DuckDB or Polars (docs/storage.md): plain Parquet on the bucket.
    files = second.files("chunks.parquet")
    table = pq.read_table([f.path for f in files], filesystem=s3["filesystem"], columns=["chunk_id"])
    assert table.column("chunk_id").to_pylist() == local.chunks(["chunk_id"]).column("chunk_id").to_pylist()
    assert (
        export(f"s3://bucket/shared/kb?{s3['query']}", tmp_path / "e.jsonl", "jsonl")["rows"]
        == table.num_rows
    )


def test_a_snapshot_without_manifest_is_ignored_and_skipped(s3, aws_env):
    root = location(f"s3://bucket/uncommitted?{s3['query']}")
    vpath = root / "kb" / "v1"
    assert isinstance(vpath, StoragePath)
    first = ObjectStoreSnapshotWriter(vpath)
    first.write(DOCUMENTS_SCHEMA.empty_table(), CHUNKS_SCHEMA.empty_table())
    published = first.publish({"schema_version": 1, "name": "kb", "version": 1, "snapshot": None})
    assert published.name == "0001"

    # A killed run: data files of 0002 written, no manifest.
    killed = ObjectStoreSnapshotWriter(vpath)
    assert killed.number == 2
    killed._close({})
    assert (vpath / "0002" / "chunks.parquet" / "part-00000001.parquet").is_file()
    assert not (vpath / "0002" / "manifest.json").exists()
    assert list_snapshots(vpath) == [1]
    assert latest_snapshot(vpath).name == "0001"
    assert resolve_snapshot(root / "kb").name == "0001"
    assert Snapshot.open(root / "kb").number == 1
    with pytest.raises(DatasetError, match="no such dataset folder|not a chunkyard dataset|no published"):
        Snapshot.open(vpath / "0002")

    # The next run skips past the leftovers (a young folder may belong to a run still writing) ...
    following = ObjectStoreSnapshotWriter(vpath)
    assert following.number == 3
    following.abort()  # an aborted run removes what it wrote
    assert not (vpath / "0003").exists()
    # ... and leftovers older than the grace period are removed.
    assert [p.name for p in clean_uncommitted(vpath, stale_after=0)] == ["0002"]
    assert not (vpath / "0002").exists() and list_snapshots(vpath) == [1]


def test_manifest_is_written_last(s3, aws_env, monkeypatch):
    """When the manifest is written, both data files are already complete, readable objects."""
    vpath = location(f"s3://bucket/order?{s3['query']}") / "kb" / "v1"
    seen: dict[str, int] = {}
    original = StoragePath.write_bytes

    def check_then_write(self, data):
        if self.name == "manifest.json":
            for name in ("documents.parquet", "chunks.parquet"):
                seen[name] = pq.read_table((self.parent / name).path, filesystem=self.filesystem).num_rows
                review = self.parent / "review-columns" / name
                seen[f"review-columns/{name}"] = pq.read_table(
                    review.path, filesystem=self.filesystem
                ).num_rows
        return original(self, data)

    monkeypatch.setattr(StoragePath, "write_bytes", check_then_write)
    writer = ObjectStoreSnapshotWriter(vpath)
    documents = pa.table(
        {
            "doc_id": ["a"],
            "path": ["a"],
            "format": ["text"],
            "strategy": ["recursive"],
            "sha256": ["0"],
            "n_bytes": [1],
            "n_chars": [1],
            "n_chunks": [0],
            "title": [""],
            "exclusions": [[]],
            "metadata_json": ["{}"],
            "text": ["a"],
            "page_starts": [[]],
        }
    )
    writer.write(documents, CHUNKS_SCHEMA.empty_table())
    target = writer.publish({"schema_version": 1, "name": "kb", "version": 1, "snapshot": None})
    assert seen == {
        "documents.parquet": 1,
        "chunks.parquet": 0,
        "review-columns/documents.parquet": 1,
        "review-columns/chunks.parquet": 0,
    }
    assert json.loads((target / "manifest.json").read_text())["snapshot"] == 1
    assert {info.path.split("/0001/", 1)[1] for info in target.files()} == {
        "manifest.json",
        "documents.parquet/part-00000001.parquet",
        "chunks.parquet/part-00000001.parquet",
        "review-columns/documents.parquet",
        "review-columns/chunks.parquet",
    }
    opened = Snapshot.open(f"s3://bucket/order/kb?{s3['query']}")
    assert opened.review_columns() is not None, opened.review_columns_note


def test_uris_in_config():
    from chunkyard.chunking.config import load_config_text

    config = load_config_text(
        'name: kb\nversion: 1\nsource: {path: src}\noutput: {path: "s3://b/p?region=x"}\n'
    )
    assert config.model.output.path == "s3://b/p?region=x"
    with pytest.raises(DatasetError, match="not a local folder"):
        _ = config.output_dir
    local = load_config_text('name: kb\nversion: 1\nsource: {path: src}\noutput: {path: "file:///tmp/x"}\n')
    assert local.output_location == Path("/tmp/x")
    from chunkyard.chunking.errors import ConfigError

    with pytest.raises(ConfigError, match="source.path must be a folder of this machine"):
        load_config_text('name: kb\nversion: 1\nsource: {path: "s3://b/src"}\n')
    with pytest.raises(DatasetError, match="unknown filesystem 'nosuch'"):
        location("nosuch://x/y")


def test_an_unreachable_gcs_bucket_fails_with_a_reason_instead_of_retrying_for_minutes(monkeypatch):
    """GCS retries for 15 minutes by default; chunkyard bounds it, and a URI may set its own limit."""
    from chunkyard.chunking import storage

    limit = storage.GCS_RETRY_LIMIT_SECONDS
    assert storage._bounded("gs://bucket/prefix", "gs") == f"gs://bucket/prefix?retry_limit_seconds={limit}"
    assert (
        storage._bounded("gs://b/p?scheme=http", "gs") == f"gs://b/p?scheme=http&retry_limit_seconds={limit}"
    )
    assert storage._bounded("gs://b/p?retry_limit_seconds=5", "gs") == "gs://b/p?retry_limit_seconds=5"
    assert storage._bounded("s3://b/p?region=x", "s3") == "s3://b/p?region=x"
    assert (
        str(location("gs://bucket/prefix?retry_limit_seconds=5")) == "gs://bucket/prefix"
    )  # pyarrow takes it
    # This machine has no network and no Google credentials: the first request must fail, not hang.
    monkeypatch.setattr(storage, "GCS_RETRY_LIMIT_SECONDS", 1)
    with pytest.raises(DatasetError, match="gs://bucket/prefix: cannot reach"):
        location("gs://bucket/prefix").exists()


def test_a_bucket_that_does_not_exist_is_a_clear_error(s3, aws_env):
    """`chunkyard run --output s3://nobucket/out` ended with "chunkyard: unexpected error: OSError: When
    initiating multiple part upload for key ... NO_SUCH_BUCKET ... (rerun with --debug for details)"."""
    from chunkyard.chunking.dataset import snapshot_writer

    with pytest.raises(
        DatasetError,
        match=r"^s3://nobucket/out/kb/v1/0001: cannot write: .*"
        r"bucket does not exist",
    ):
        snapshot_writer(location(f"s3://nobucket/out/kb/v1?{s3['query']}"))
