"""Seeded random candidate passages for a held-out question set: documents first, then one passage each.

    .venv/bin/python eval/sample_passages.py --corpus ../shared/corpora/hugo-docs --seed 1 --n 80
        [--include '**/*.md'] [--exclude LICENSE.md]

Prints one JSON line per sampled document: ``{"n", "doc_id", "heading", "text"}``, where ``text`` is a
passage of the document exactly as it is in the file (a substring, 80 to 600 characters) and ``heading``
the nearest Markdown heading above it (to help write the question; not part of the reference).

The sample is chosen before anyone reads a document, so the question writer does not pick the passages
that suit some chunker: the documents are ``random.Random(seed).sample`` of every file the include globs
match (sorted doc ids), and the passage of a document is a seeded random choice among its *prose
blocks*: blank-line separated blocks outside the front matter, fenced code, HTML comments and tables,
that are not a heading, a shortcode-only or HTML-only line, a link list or a checklist item, that hold
mostly letters, are unique in their document and appear in no other sampled document's text (template
boilerplate, such as the KEP template's, is common to many). A document without such a block prints
``"text": null`` and is skipped by the writer. Nothing here reads a chunker's output.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

from chunkyard.chunking.documents import Skipped, discover, read_document

MIN_CHARS, MAX_CHARS = 80, 600
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_SHORTCODE_ONLY = re.compile(r"^\s*(\{\{[<%].*?[>%]\}\}\s*)+$")
_HTML_ONLY = re.compile(r"^\s*<[^>]+>\s*$")


def prose_blocks(text: str) -> list[tuple[str, str]]:
    """(nearest heading, block) for every candidate prose block of a Markdown text, in order."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() in ("---", "+++"):  # front matter
        marker = lines[0].strip()
        for i in range(1, len(lines)):
            if lines[i].strip() == marker:
                start = i + 1
                break
    blocks: list[tuple[str, str]] = []
    heading = ""
    current: list[str] = []
    fence = comment = False

    def flush() -> None:
        if current:
            block = "\n".join(current).strip()
            if _is_prose(block):
                blocks.append((heading, block))
            current.clear()

    for line in lines[start:]:
        if fence:
            if _FENCE.match(line):
                fence = False
            continue
        if comment:
            if "-->" in line:
                comment = False
            continue
        if _FENCE.match(line):
            flush()
            fence = True
            continue
        if line.lstrip().startswith("<!--"):
            flush()
            comment = "-->" not in line
            continue
        match = _HEADING.match(line)
        if match:
            flush()
            heading = match.group(1)
            continue
        if not line.strip():
            flush()
            continue
        current.append(line)
    flush()
    return blocks


def _is_prose(block: str) -> bool:
    if not MIN_CHARS <= len(block) <= MAX_CHARS:
        return False
    first = block.lstrip()
    if first.startswith(("|", "- [", "* [", "[", "<", "{{", "    ", "\t", ">", "!")):
        return False
    if any(_SHORTCODE_ONLY.match(line) or _HTML_ONLY.match(line) for line in block.splitlines()):
        return False
    if any(line.lstrip().startswith("|") for line in block.splitlines()):
        return False
    letters = sum(ch.isalpha() or ch == " " for ch in block)
    return letters >= 0.75 * len(block) and "." in block


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--include", action="append", help="glob over doc ids (default: **/*.md)")
    parser.add_argument("--exclude", action="append", default=[], help="glob over doc ids to leave out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=80)
    args = parser.parse_args(argv)
    include = args.include or ["**/*.md"]
    doc_ids = sorted(
        item.doc_id for item in discover(args.corpus, include, args.exclude) if not isinstance(item, Skipped)
    )
    rng = random.Random(args.seed)
    chosen = rng.sample(doc_ids, min(args.n, len(doc_ids)))
    texts = {}
    for doc_id in chosen:
        document = read_document(args.corpus / doc_id, doc_id)
        texts[doc_id] = "" if isinstance(document, Skipped) else document.text
    for n, doc_id in enumerate(chosen, start=1):
        text = texts[doc_id]
        candidates = [
            (heading, block)
            for heading, block in prose_blocks(text)
            if text.count(block) == 1 and not any(block in t for d, t in texts.items() if d != doc_id)
        ]
        heading, block = rng.choice(candidates) if candidates else ("", None)
        print(json.dumps({"n": n, "doc_id": doc_id, "heading": heading, "text": block}, ensure_ascii=False))
    print(f"{len(chosen)} documents of {len(doc_ids)} (seed {args.seed})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
