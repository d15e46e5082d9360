"""Two runs publishing into one dataset version at once (local storage: staging folder + rename).

Each publish took the next free number by renaming, retrying on a taken one, but the parent link was
the snapshot its run had started from: two runs started from 0001 published 0002 and 0003 both with
``parent_snapshot: 1``, so 0002 was no one's parent and the history forked. Numbers are now taken
under the version's publish lock, each snapshot's parent is the one published just before it, and
the snapshot a run was built from (when another run published in between) is kept as ``built_on``.
A reprocess, which edits its parent, is not published on top of a newer snapshot it would undo.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chunkyard.chunking.config import load_config_text
from chunkyard.chunking.dataset import Snapshot, SnapshotWriter, list_snapshots
from chunkyard.chunking.ledger import Ledger, Target, ledger_path

from support.review_fixtures import CONFIG, REPO, build_dataset, staged_copy


def _manifests(version_path: Path) -> dict[int, dict]:
    return {
        number: json.loads((version_path / f"{number:04d}" / "manifest.json").read_text(encoding="utf-8"))
        for number in list_snapshots(version_path)
    }


def _check_history(version_path: Path, published: list[int], writers: int) -> None:
    manifests = _manifests(version_path)
    assert sorted(published) == list(range(2, writers + 2)), "consecutive numbers, none skipped"
    assert list(manifests) == list(range(1, writers + 2))
    for number, manifest in manifests.items():
        assert manifest["snapshot"] == number
        assert manifest["parent_snapshot"] == (number - 1 or None), (number, manifest["parent_snapshot"])
    # Every run was built from 0001; the first to publish follows it directly, the others say so.
    assert [number for number, m in manifests.items() if number > 1 and "built_on" not in m] == [2]
    assert all(m["built_on"] == 1 for number, m in manifests.items() if number > 2)
    assert not list(version_path.glob(".staging-*"))


def test_threads_publishing_at_once_take_consecutive_numbers_and_name_the_real_parent(tmp_path: Path) -> None:
    base = Snapshot.open(build_dataset(tmp_path))
    writers = 8
    staged = [staged_copy(base) for _ in range(writers)]
    barrier = threading.Barrier(writers)
    published: list[int] = []
    errors: list[BaseException] = []

    def publish(writer: SnapshotWriter, manifest: dict) -> None:
        try:
            barrier.wait()
            published.append(int(writer.publish(manifest).name))
        except BaseException as exc:  # reported below, with the thread's exception
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=item) for item in staged]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    _check_history(base.path.parent, published, writers)


_PUBLISHER = """
import sys, time
from pathlib import Path
sys.path[:0] = [str(Path(sys.argv[3]).parent)]  # tests/, for support
from support.review_fixtures import staged_copy
from chunkyard.chunking.dataset import Snapshot

writer, manifest = staged_copy(Snapshot.open(sys.argv[1]))
go = Path(sys.argv[2])
(go.parent / f"ready-{writer.staging.name}").touch()
while not go.exists():
    time.sleep(0.001)
print(int(writer.publish(manifest).name))
"""


def test_processes_publishing_at_once_take_consecutive_numbers_and_name_the_real_parent(
    tmp_path: Path,
) -> None:
    base = Snapshot.open(build_dataset(tmp_path / "data"))
    go = tmp_path / "go"
    writers = 3
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _PUBLISHER, str(base.path), str(go), str(Path(__file__).resolve().parent)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(writers)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < writers and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()  # all staged: publish at once
    outputs = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in outputs]
    _check_history(base.path.parent, [int(out) for out, _ in outputs], writers)


def test_a_reprocess_is_not_published_over_a_snapshot_published_meanwhile(tmp_path: Path) -> None:
    """A reprocess copies its parent and rechunks the flagged documents: published after a run that
    published meanwhile, it would have been the newest snapshot without that run's changes."""
    from chunkyard.chunking.dataset import SnapshotSuperseded
    from chunkyard.chunking.pipeline import rechunk_stored
    from chunkyard.chunking.reprocess import reprocess_snapshot

    dataset = build_dataset(tmp_path)
    snapshot = Snapshot.open(dataset)
    config = load_config_text(
        CONFIG.replace("SOURCE", str(tmp_path / "src")).replace("OUTPUT", str(tmp_path / "out")),
        tmp_path / "config.yaml",
    )
    doc = "runbooks/database-failover.md"
    chunks = snapshot.chunks(["doc_id", "chunk_id", "chunk_index", "end"], [doc]).to_pylist()
    first = min(chunks, key=lambda row: row["chunk_index"])
    sha = snapshot.documents(["doc_id", "sha256"], [doc]).column("sha256")[0].as_py()
    with Ledger(ledger_path(snapshot.path)) as ledger:
        ledger.flag(
            Target(
                snapshot.name, snapshot.version, snapshot.number, doc, sha, first["chunk_id"], 0, first["end"]
            ),
            "mid_sentence",
            reviewer="ann",
        )
    rechunked: list[list[str]] = []

    def rechunk_while_a_run_publishes(parent: Snapshot, doc_ids: list[str], constraints: dict) -> object:
        rechunked.append(doc_ids)
        writer, manifest = staged_copy(parent)
        writer.publish(manifest)  # another run publishes 0002 meanwhile
        return rechunk_stored(config, parent, doc_ids, constraints)

    with pytest.raises(SnapshotSuperseded, match="nothing was published: run again"):
        reprocess_snapshot(config, rechunk=rechunk_while_a_run_publishes)
    assert rechunked == [[doc]]
    assert list_snapshots(dataset / "v1") == [1, 2] and not list((dataset / "v1").glob(".staging-*"))
    # Run again: on top of 0002, and the flag is resolved by the snapshot that applied it.
    result = reprocess_snapshot(config)
    assert result.manifest["snapshot"] == 3 and result.manifest["parent_snapshot"] == 2
    assert "built_on" not in result.manifest
