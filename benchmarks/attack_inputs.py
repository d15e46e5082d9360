"""What the attack inputs of issue 20 cost one document now: wall time of ``read_document`` per case, with
the default limits, and front matter parsing (libyaml under the alias bound vs ``yaml.safe_load``).

    .venv/bin/python benchmarks/attack_inputs.py [--docx-mb 20] [--pdf-pages 20] [--corpus ../shared/corpora/hugo-docs]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from corpora import CORPORA

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main(argv: list[str] | None = None) -> int:
    import yaml

    from chunkyard.chunking import markdown
    from chunkyard.chunking.documents import Skipped, SourceFile, discover, read_document

    from support.attack_corpus import build_attack_corpus

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docx-mb", type=float, default=20)
    parser.add_argument("--pdf-pages", type=int, default=20)
    parser.add_argument("--corpus", type=Path, default=CORPORA / "hugo-docs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        corpus = build_attack_corpus(Path(folder), docx_mb=args.docx_mb, pdf_pages=args.pdf_pages)
        print("| file | bytes | seconds | result |\n|---|---:|---:|---|")
        for item in discover(corpus.root, ["**/*"], []):
            started = time.perf_counter()
            result = (
                item
                if isinstance(item, Skipped)
                else read_document(item.path, item.doc_id, identity=item.identity)
            )
            elapsed = time.perf_counter() - started
            size = item.size if isinstance(item, SourceFile) else 0
            what = result.reason if isinstance(result, Skipped) else f"read: {len(result.text):,} characters"
            print(f"| {item.doc_id} | {size:,} | {elapsed:.3f} | {what[:90]} |")
    if args.corpus.is_dir():
        texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(args.corpus.rglob("*.md"))]
        texts = [t for t in texts if t.startswith("---\n")]

        def timed() -> float:
            started = time.perf_counter()
            for text in texts:
                markdown.front_matter_span(text)
            return time.perf_counter() - started

        bounded = min(timed() for _ in range(3))
        real = markdown.yamlbound.load
        markdown.yamlbound.load = lambda text, max_size: yaml.safe_load(text)
        try:
            plain = min(timed() for _ in range(3))
        finally:
            markdown.yamlbound.load = real
        print(
            f"\nfront matter of {len(texts)} pages in {args.corpus.name}: yaml.safe_load {plain * 1000:.0f} ms, "
            f"libyaml with the alias bound {bounded * 1000:.0f} ms ({plain / bounded:.1f}×)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
