"""Time and embeddings computed by `chunkyard sync` into LanceDB: a first sync, then a resync after
editing one document (corpus copied to a temporary folder first; the real `chunkyard run` makes the
snapshots).

    .venv/bin/python benchmarks/sync_resync.py [CORPUS_DIR] [--embedder wordllama]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from corpora import CORPORA

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = CORPORA / "k8s-enhancements"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--embedder", default="wordllama")
    args = parser.parse_args()
    from chunkyard.chunking.config import load_config
    from chunkyard.chunking.sync import sink_config, sync_sink

    with tempfile.TemporaryDirectory(prefix="chunkyard-sync-bench-") as tmp:
        folder = Path(tmp)
        source = folder / "src"
        shutil.copytree(args.corpus, source)
        config_path = folder / "config.yaml"
        config_path.write_text(
            textwrap.dedent(f"""\
            name: bench
            version: 1
            source: {{path: {source}, include: ["**/*.md"]}}
            output: {{path: {folder / "datasets"}}}
            chunker: {{strategy: auto, unit: tokens, max_size: 512, overlap: 32}}
            sinks:
              - {{name: lance, type: lancedb, uri: {folder / "vectors"}, table: chunks, embedder: '{args.embedder}'}}
            """),
            encoding="utf-8",
        )
        command = [sys.executable, "-m", "chunkyard.flows.cli", "run", str(config_path)]
        files = sorted(source.rglob("*.md"))
        size = sum(f.stat().st_size for f in files)
        print(
            f"corpus {args.corpus.name}: {len(files)} Markdown files, {size / 1e6:.1f} MB; embedder {args.embedder}"
        )

        def run() -> None:
            code = subprocess.run(command, stdout=subprocess.DEVNULL, cwd=folder).returncode
            if code not in (0, 3):  # 3: published, with some files skipped (listed in the manifest)
                raise SystemExit(f"chunkyard run failed with exit code {code}")

        def sync(label: str) -> None:
            config = load_config(config_path)
            started = time.perf_counter()
            report = sync_sink(config, sink_config(config, "lance"))
            elapsed = time.perf_counter() - started
            print(
                f"{label}: {elapsed:.1f} s, {report.upserts} upserts, {report.deletes} deletes, "
                f"{report.embedded} texts embedded, {report.cached} from the cache, {report.rows} rows "
                f"({report.method})"
            )

        run()
        sync("first sync")
        edited = max(files, key=lambda f: f.stat().st_size)
        text = edited.read_text(encoding="utf-8")
        middle = text.index("\n\n", len(text) // 2)
        edited.write_text(
            text[:middle] + "\n\nA paragraph added by the benchmark.\n" + text[middle:], encoding="utf-8"
        )
        run()
        sync(f"resync after editing {edited.relative_to(source)}")
        sync("sync again, nothing changed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
