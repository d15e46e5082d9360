"""Two reviewer processes and reprocessing on one dataset at once: nothing lost, nothing locked out.

Each reviewer process appends flags in its own order while the test process runs reprocessing
repeatedly. Every decision must be in the ledger afterwards, no process may fail (SQLite's
"database is locked" is retried with backoff inside the ledger), and each reprocess must have
planned from one consistent view of the ledger: for each reviewer, the flags it applied are a
prefix of that reviewer's flags still open at the time (a torn read would skip one and take a later one).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq

from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import resolve_snapshot
from chunkyard.chunking.ledger import Ledger, ledger_path
from chunkyard.chunking.reprocess import RESOLVED, reprocess_snapshot

from support.review_fixtures import build_dataset

REPO = Path(__file__).resolve().parents[2]
FLAGS_PER_REVIEWER = 150

REVIEWER = textwrap.dedent("""
    import json, random, sys
    from chunkyard.chunking.ledger import Ledger, Target
    ledger_file, name, targets = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    rng = random.Random(name)
    with Ledger(ledger_file) as ledger:
        for i in range(int(sys.argv[4])):
            t = rng.choice(targets)
            target = Target(t["dataset"], t["version"], t["snapshot"], t["doc_id"], t["sha256"],
                            t["chunk_id"], t["chunk_index"])
            ledger.flag(target, rng.choice(["other", "too_small", "mid_sentence"]), reviewer=name,
                        note=f"{name} #{i}")
    print("done")
""")


def test_two_reviewers_and_reprocess_at_once(tmp_path: Path) -> None:
    dataset = build_dataset(tmp_path)
    snapshot = resolve_snapshot(dataset)
    config = load_config(tmp_path / "config.yaml") if (tmp_path / "config.yaml").exists() else None
    if config is None:  # build_dataset builds its config in memory; write it for the reprocess
        manifest = json.loads((snapshot / "manifest.json").read_text())
        (tmp_path / "config.yaml").write_text(manifest["config"]["text"], encoding="utf-8")
        config = load_config(tmp_path / "config.yaml")
    documents = pq.read_table(snapshot / "documents.parquet", columns=["doc_id", "sha256"]).to_pylist()
    sha = {row["doc_id"]: row["sha256"] for row in documents}
    chunks = pq.read_table(
        snapshot / "chunks.parquet", columns=["doc_id", "chunk_id", "chunk_index"]
    ).to_pylist()
    targets = [
        {
            "dataset": config.name,
            "version": config.version,
            "snapshot": int(snapshot.name),
            "doc_id": c["doc_id"],
            "sha256": sha[c["doc_id"]],
            "chunk_id": c["chunk_id"],
            "chunk_index": c["chunk_index"],
        }
        for c in chunks
    ]
    ledger_file = ledger_path(snapshot)
    Ledger(ledger_file).close()  # create the schema before the race starts

    reviewers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                REVIEWER,
                str(ledger_file),
                name,
                json.dumps(targets),
                str(FLAGS_PER_REVIEWER),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("ana", "ben")
    ]
    manifests = []
    while any(process.poll() is None for process in reviewers) or len(manifests) < 2:
        manifests.append(reprocess_snapshot(config, tmp_path / "out").manifest)
        if len(manifests) > 200:
            break
    for process in reviewers:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert "locked" not in err.lower()
    manifests.append(reprocess_snapshot(config, tmp_path / "out").manifest)

    with Ledger(ledger_file) as ledger:
        events = ledger.events(config.name, config.version)
    flags = {
        name: [e.id for e in events if e.kind == "flag" and e.reviewer == name] for name in ("ana", "ben")
    }
    assert all(len(ids) == FLAGS_PER_REVIEWER for ids in flags.values()), {
        k: len(v) for k, v in flags.items()
    }

    resolved: set[int] = set()
    for manifest in manifests:
        applied = {entry["event"] for entry in manifest["applied_flags"]}
        for ids in flags.values():
            still_open = [i for i in ids if i not in resolved]
            mine = [i for i in still_open if i in applied]
            assert mine == still_open[: len(mine)], "a reprocess saw a torn view of the ledger"
        if manifest is manifests[-1]:
            # The final reprocess, after both reviewers finished, saw every flag still open.
            assert applied == {i for ids in flags.values() for i in ids} - resolved
        resolved |= {entry["event"] for entry in manifest["applied_flags"] if entry["status"] == RESOLVED}
    assert len(manifests) >= 3 and resolved, (len(manifests), len(resolved))
    print(f"{len(manifests)} reprocesses, {len(resolved)} flags resolved")
