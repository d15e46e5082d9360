"""Builds a small real dataset for the reviewer tests, without Prefect: pipeline functions + SnapshotWriter."""

from __future__ import annotations

import shutil
from pathlib import Path

from chunkyard.chunking.config import load_config_text
from chunkyard.chunking.dataset import Snapshot, SnapshotWriter
from chunkyard.chunking.pipeline import (
    RunStats,
    build_manifest,
    chunk_files,
    discover_files,
    make_batches,
    prepare_run,
)

REPO = Path(__file__).resolve().parents[2]
KB = REPO / "examples" / "kb"

# Emoji (outside the BMP: two UTF-16 units each) and CJK (one unit each) before and inside chunks,
# so a position error anywhere shows up as a highlight or a click that lands on the wrong chunk.
EMOJI_DOC = """# Emoji and CJK 😀

Camping checklist 🏕️🔥: bring a stove 🍳, a tent ⛺ and water 💧💧💧. 日本語のテキストもあります。
The stove, the tent and the water go in the blue bag; the first-aid kit goes in the lid pocket, where
it is found in the dark. Pack the heavy things close to your back and the light ones on top.

## Section two 🚀

中文段落：退货政策适用于所有商品。😀😀😀 Each emoji above is a surrogate pair in UTF-16.
More text follows so that the chunker has to split this document into several chunks. 🎒🎒
Each section here is long enough that no two of them fit in one chunk together, so the document
has one chunk per section.

## Section three

Three sections of about three hundred characters each make three chunks at the fixture's budget of
420 characters, whatever the price of a chunk that runs across a heading.

Final words 👋 with a family emoji 👨‍👩‍👧 and flags 🇳🇴🇯🇵 at the very end.
"""

CONFIG = """\
name: fixture-kb
version: 1
reviewer: test-reviewer
source: {path: SOURCE, include: ["**/*.md"]}
output: {path: OUTPUT}
chunker:
  strategy: markdown
  unit: chars
  max_size: 420
  overlap: 40
  min_size: 40
"""


def build_dataset(root: Path, extra: dict[str, str] | None = None) -> Path:
    """Write one snapshot of a 4-document corpus (plus ``extra`` documents, by relative path) under
    ``root``; returns ``root/out/fixture-kb``."""
    source = root / "src"
    for relative in (
        "handbook/returns-and-refunds.md",
        "runbooks/database-failover.md",
        "policies/expenses.md",
    ):
        target = source / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(KB / relative, target)
    (source / "notes").mkdir(parents=True, exist_ok=True)
    (source / "notes" / "emoji.md").write_text(EMOJI_DOC, encoding="utf-8")
    for relative, text in (extra or {}).items():
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(text, encoding="utf-8")
    text = CONFIG.replace("SOURCE", str(source)).replace("OUTPUT", str(root / "out"))
    config = load_config_text(text, root / "config.yaml")
    context = prepare_run(config)
    writer = SnapshotWriter(context.version_path)
    stats = RunStats()
    for files, _skipped in make_batches(discover_files(context)):
        result = chunk_files(config, files, {})
        writer.write(result.documents, result.chunks)
        stats.add(result.documents, result.chunks)
        stats.new.extend(result.chunked)
    writer.publish(build_manifest(context, stats, "full", []))
    return root / "out" / "fixture-kb"


def staged_copy(base: Snapshot) -> tuple[SnapshotWriter, dict]:
    """A writer holding a refresh of ``base`` (its rows), and its manifest, ready to publish."""
    writer = SnapshotWriter(base.path.parent)
    writer.write(base.documents(), base.chunks())
    return writer, {**base.manifest, "kind": "refresh", "snapshot": None, "parent_snapshot": base.number}
