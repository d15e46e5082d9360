"""Boundary quality side by side: chunkyard's findings checker run over every splitter's chunks.

    .venv/bin/python benchmarks/quality_compare.py [CORPUS_DIR] [--max-size 1000]

Every splitter chunks the same Markdown files at the same budget in characters, without overlap.
Peers' chunks are located in the document by offsets (LangChain's ``add_start_index``,
semantic-text-splitter's ``chunk_indices``) and checked by the same pure checker
(``chunkyard.chunking.findings.check_spans``) against the document's Markdown structure, so the shares of
``split_procedure``, ``mid_sentence_start``, ``heading_at_end`` (and the rest) are comparable.
Peers are optional dev dependencies: a missing one is reported and skipped.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from corpora import CORPORA

from chunkyard.chunking import chunk_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.findings import check_spans
from chunkyard.chunking.packer import Span
from chunkyard.chunking.strategies import get_strategy

DEFAULT_CORPUS = CORPORA / "k8s-enhancements"
CODES = (
    "split_procedure",
    "mid_sentence_start",
    "heading_at_end",
    "split_list",
    "split_table",
    "split_code",
    "mid_sentence_end",
)

Splitter = Callable[[str], list[tuple[int, int]]]


def chunkyard_splitter(strategy: str, max_size: int) -> Splitter:
    settings = {
        "strategy": strategy,
        "unit": "chars",
        "max_size": max_size,
        "overlap": 0,
        "front_matter": "keep",
    }
    return lambda text: [(c.start, c.end) for c in chunk_document(text, settings)]


def langchain_splitter(max_size: int) -> Splitter | None:
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
    except ImportError:
        return None
    splitter = RecursiveCharacterTextSplitter(chunk_size=max_size, chunk_overlap=0, add_start_index=True)

    def split(text: str) -> list[tuple[int, int]]:
        spans = []
        for document in splitter.create_documents([text]):
            start = document.metadata["start_index"]
            if start < 0:  # not located: fall back to searching after the previous span
                start = text.find(document.page_content, spans[-1][1] if spans else 0)
            spans.append((start, start + len(document.page_content)))
        return spans

    return split


def text_splitter_markdown(max_size: int) -> Splitter | None:
    try:
        from semantic_text_splitter import MarkdownSplitter
    except ImportError:
        return None
    splitter = MarkdownSplitter(max_size)
    return lambda text: [(start, start + len(chunk)) for start, chunk in splitter.chunk_indices(text)]


def findings_for(text: str, spans: list[tuple[int, int]]) -> list[list[str]]:
    settings = parse_settings(
        {"strategy": "markdown", "unit": "chars", "max_size": 10**9, "front_matter": "keep"}
    )
    layout = get_strategy("markdown")(text, settings, None)
    return check_spans(text, [Span(s, e, e - s) for s, e in spans], layout, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--max-size", type=int, default=1000)
    args = parser.parse_args(argv)
    files = sorted(
        p
        for p in args.corpus.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(args.corpus).parts)
    )
    if not files:
        print(f"no Markdown files under {args.corpus}", file=sys.stderr)
        return 2
    splitters: dict[str, Splitter | None] = {
        "chunkyard recursive": chunkyard_splitter("recursive", args.max_size),
        "chunkyard markdown": chunkyard_splitter("markdown", args.max_size),
        "langchain RecursiveCharacterTextSplitter": langchain_splitter(args.max_size),
        "semantic-text-splitter MarkdownSplitter": text_splitter_markdown(args.max_size),
    }
    texts = [f.read_text(encoding="utf-8-sig", errors="replace") for f in files]
    print(f"{len(files)} files from {args.corpus}, {args.max_size} chars, no overlap\n")
    header = f"{'splitter':<42} {'chunks':>7}" + "".join(f" {code:>19}" for code in CODES)
    print(header)
    for name, split in splitters.items():
        if split is None:
            print(f"{name:<42} (not installed)")
            continue
        counts: Counter[str] = Counter()
        total = 0
        for text in texts:
            if not text.strip():
                continue
            spans = [(s, e) for s, e in split(text) if text[s:e].strip()]
            total += len(spans)
            for codes in findings_for(text, spans):
                counts.update(set(codes))
        print(
            f"{name:<42} {total:>7}" + "".join(f" {100 * counts[c] / max(total, 1):>18.2f}%" for c in CODES)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
