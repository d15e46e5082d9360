"""A refresh that finds nothing new, changed or removed publishes no snapshot (``nothing_changed``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from chunkyard.chunking.config import load_config
from chunkyard.chunking.documents import Skipped
from chunkyard.chunking.pipeline import RunStats, nothing_changed, prepare_run

from support.sync_fixtures import publish, write_sync_config

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kb"


def _context(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    (source / "blob.bin").write_bytes(b"\x00\x01binary")  # skipped, with its reason in the manifest
    config_path = write_sync_config(tmp_path, source, "")
    publish(config_path)
    context = prepare_run(load_config(config_path))
    return context, context.previous.manifest["skipped"]


def test_nothing_new_changed_or_removed_and_the_same_skips_is_nothing_to_publish(tmp_path):
    context, skipped = _context(tmp_path)
    assert skipped, "the sample needs a skipped file for this test"
    same = RunStats(skipped=[Skipped(s["doc_id"], s["reason"]) for s in skipped])
    assert nothing_changed(context, same, [])


def test_any_change_is_something_to_publish(tmp_path):
    context, skipped = _context(tmp_path)
    skips = [Skipped(s["doc_id"], s["reason"]) for s in skipped]
    assert not nothing_changed(context, RunStats(skipped=skips, new=["a.md"]), [])
    assert not nothing_changed(context, RunStats(skipped=skips, changed=["handbook/onboarding.md"]), [])
    assert not nothing_changed(context, RunStats(skipped=skips), ["support/faq.md"])
    assert not nothing_changed(context, RunStats(skipped=[]), [])  # a skipped file is gone
    other_reason = [Skipped(s.doc_id, s.reason + " (again)") for s in skips]
    assert not nothing_changed(context, RunStats(skipped=other_reason), [])
    assert not nothing_changed(context, RunStats(skipped=skips, kept=["handbook/onboarding.md"]), [])
    context.previous = None  # a first run always publishes
    assert not nothing_changed(context, RunStats(skipped=skips), [])
