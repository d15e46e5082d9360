"""Speed side by side: chunkyard and the peer chunking libraries, interleaved in one run.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/speed.py [CORPUS_DIR] [--repeats 3] [--groups chars,...] [--write-readme]

Every splitter chunks the same documents (all ``*.md`` under the corpus folder, default
``../shared/corpora``) with the same budget. Within a group, each repeat runs every splitter once
over all documents, in a rotated order, so that a noisy machine slows them alike; the table gives
the median CPU time per core as MB/s (UTF-8 bytes of input), the ratio to chunkyard's first row,
the chunk count and a correctness column: the share of chunks whose text is exactly the document
at their offsets (peers' chunks are located by the offsets they return, or searched for), and the
share over the budget (measured on the chunk text alone: characters, or cl100k tokens).

Groups:
- ``chars``: recursive splitting, 1000 characters, no overlap;
- ``overlap``: the same with 150 characters of overlap;
- ``tokens``: 512 cl100k tokens, 64 of overlap, against tiktoken encoding all text once (the floor)
  and bpe-openai doing the same (the encoder chunkyard uses: the same tokens, faster);
- ``markdown``: Markdown-aware splitting at 1000 characters;
- ``hostile``: time per MB of chunkyard on a 10 MB line, 100,000 one-line paragraphs, a 1 MB table,
  deeply nested lists, 30,000 short lists, 2,000,000 blank lines, 1,000,000 stops and an item
  indented by 1,000,000 spaces, against ordinary prose (the corpus);
- ``fixed``: the fixed cost of one call, in µs: every chars and Markdown splitter on short documents
  that are one chunk (a line; a page with front matter, a heading and two paragraphs), the cost a
  corpus of short pages (hugo-docs) pays per page whatever its length; with a floor, the ``Chunk``
  and ``ChunkedDocument`` of one chunk built in Python without any chunking (what any Python entry
  point pays);
- ``run``: ``chunkyard run`` end to end (read, chunk, findings, Parquet, Prefect) against the sum
  of its parts measured in this process, with its peak memory.

chunkyard runs with findings, section paths, ``embed_text`` and token counts on, as in a run;
``count_tokens: false`` rows show the chars strategies without the cl100k count of every chunk.
Peers are the optional ``bench`` dependencies; a missing one is reported and skipped.
``--write-readme`` replaces the results section of ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import yaml
from corpora import CORPORA, CORPORA_ENV, HTML_CORPUS, MARKDOWN_CORPORA, markdown_files

from chunkyard.chunking.api import Chunk, ChunkedDocument, _new_chunk, split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.units import get_tokenizer
from chunkyard.flows.server import prefect_server

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = CORPORA
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- speed:begin -->", "<!-- speed:end -->"
GROUPS = ("chars", "overlap", "tokens", "markdown", "html", "fixed", "hostile", "run")
TITLES = {
    "chars": "recursive, 1000 characters, no overlap",
    "overlap": "recursive, 1000 characters, overlap 150",
    "tokens": "512 cl100k tokens, overlap 64",
    "markdown": "Markdown-aware, 1000 characters",
    "html": "HTML ({corpora}), 1000 characters, every splitter on the text chunkyard extracts",
}
# The ``fixed`` group's documents, each one chunk at 1000 characters, and how many calls a repeat makes.
SHORT_DOCUMENTS = {
    "one line": "A short page about nothing in particular.\n",
    "short page": (
        "---\ntitle: Install\nweight: 10\n---\n\n# Install\n\nDownload the archive for your platform and "
        "unpack it into a folder on your path.\n\nThen run `tool version` to check that the shell finds it.\n"
    ),
}
FIXED_CALLS = 5000
# The shared corpora reported one by one (the Markdown ones), and the one whose HTML the html group uses.
# The goals: (group, chunkyard's row, the peer's row, at least this ratio of speeds).
GOALS = [
    ("chars", "chunkyard recursive, count_tokens: false", "semantic-text-splitter TextSplitter", 1.5),
    ("chars", "chunkyard recursive, count_tokens: false", "LangChain RecursiveCharacterTextSplitter", 1.5),
    ("markdown", "chunkyard markdown, count_tokens: false", "semantic-text-splitter MarkdownSplitter", 2.0),
    ("markdown", "chunkyard markdown, count_tokens: false", "LangChain MarkdownTextSplitter", 1.0),
    ("tokens", "chunkyard recursive", "tiktoken: encode all text once", 0.8),
    ("html", "chunkyard html, count_tokens: false", "semantic-text-splitter MarkdownSplitter", 2.0),
    ("html", "chunkyard html, count_tokens: false", "LangChain MarkdownTextSplitter", 1.0),
]

# A splitter returns (start, end, text) per chunk; start is -1 when the chunk could not be located.
Spans = list[tuple[int, int, str]]
Splitter = Callable[[str], Spans]


@dataclass
class Entry:
    """A splitter in a group. ``make`` builds it afresh for every repeat, so that no memo (semchunk
    caches token counts) carries over from one repeat to the next."""

    name: str
    make: Callable[[], Splitter]
    note: str = ""
    times: list[float] = field(default_factory=list)
    chunks: int = 0
    exact: float = 1.0
    over: float = 0.0


# -- chunkyard --------------------------------------------------------------------------------------


def chunkyard(settings: dict) -> Splitter:
    parsed = parse_settings({"front_matter": "keep", **settings})
    return lambda text: [(c.start, c.end, c.text) for c in split_document(text, parsed).chunks]


def result_floor() -> Splitter:
    """What any Python entry point pays for a document of one chunk without chunking it: the
    ``Chunk`` (as ``split_document`` builds it) in a list in a ``ChunkedDocument``, read as the rows are."""

    def split(text: str) -> Spans:
        end = len(text.rstrip())
        piece = text[:end]
        fields = (0, 0, end, piece, piece, (), end, end, None, "recursive", (), "", "")
        chunks = ChunkedDocument([_new_chunk(Chunk, fields)], "recursive", "", [], {}).chunks
        return [(c.start, c.end, c.text) for c in chunks]

    return split


# -- peers ------------------------------------------------------------------------------------------


def locate(text: str, pieces: list[str]) -> Spans:
    """Find each piece in order (for peers that return strings only)."""
    spans, cursor = [], 0
    for piece in pieces:
        start = text.find(piece, cursor)
        if start < 0:
            start = text.find(piece)
        spans.append((start, start + len(piece) if start >= 0 else -1, piece))
        if start >= 0:
            cursor = start + 1
    return spans


def by_indices(pairs) -> Spans:
    return [(start, start + len(chunk), chunk) for start, chunk in pairs]


def text_splitter(kind: str, capacity: int, overlap: int, tokens: bool = False) -> Splitter | None:
    try:
        import semantic_text_splitter as sts
    except ImportError:
        return None
    cls = sts.MarkdownSplitter if kind == "markdown" else sts.TextSplitter
    splitter = (
        cls.from_tiktoken_model("gpt-3.5-turbo", capacity, overlap=overlap)
        if tokens
        else cls(capacity, overlap=overlap)
    )
    return lambda text: by_indices(splitter.chunk_indices(text))


def langchain(
    kind: str, size: int, overlap: int, counter: Callable[[str], int] | None = None
) -> Splitter | None:
    try:
        from langchain_text_splitters import MarkdownTextSplitter, RecursiveCharacterTextSplitter
    except ImportError:
        return None
    cls = MarkdownTextSplitter if kind == "markdown" else RecursiveCharacterTextSplitter
    kwargs = {"length_function": counter} if counter else {}
    splitter = cls(chunk_size=size, chunk_overlap=overlap, **kwargs)
    return lambda text: locate(text, splitter.split_text(text))


def semchunk_splitter(size: int, overlap: int, counter) -> Splitter | None:
    try:
        import semchunk
    except ImportError:
        return None
    chunker = semchunk.chunkerify(counter, size)

    def split(text: str) -> Spans:
        chunks, offsets = chunker(text, overlap=overlap or None, offsets=True)
        return [(start, end, chunk) for chunk, (start, end) in zip(chunks, offsets, strict=True)]

    return split


def chonkie_splitter(size: int, tokenizer) -> Splitter | None:
    try:
        from chonkie import RecursiveChunker
    except ImportError:
        return None
    chunker = RecursiveChunker(tokenizer=tokenizer, chunk_size=size)
    return lambda text: [(c.start_index, c.end_index, c.text) for c in chunker.chunk(text)]


# -- groups -----------------------------------------------------------------------------------------


def cl100k():
    return get_tokenizer("cl100k_base").encoding


def fast_encode_all() -> Splitter | None:
    from chunkyard.chunking.units import _bpe_openai_bindings

    bindings = _bpe_openai_bindings()
    if bindings is None:
        return None
    encode = bindings.tokenizer_for_encoding("cl100k_base").encode
    return lambda text: [(0, len(text), text)] if encode(text) else []


def group_entries(group: str) -> list[Entry]:
    enc = cl100k()
    count = enc.encode_ordinary
    entries: list[tuple[str, Callable[[], Splitter | None], str]] = []
    if group in ("chars", "overlap"):
        overlap = 150 if group == "overlap" else 0
        settings = {"strategy": "recursive", "unit": "chars", "max_size": 1000, "overlap": overlap}
        entries = [
            ("chunkyard recursive", lambda: chunkyard(settings), ""),
            (
                "chunkyard recursive, count_tokens: false",
                lambda: chunkyard({**settings, "count_tokens": False}),
                "",
            ),
            ("semantic-text-splitter TextSplitter", lambda: text_splitter("text", 1000, overlap), ""),
            ("LangChain RecursiveCharacterTextSplitter", lambda: langchain("text", 1000, overlap), ""),
            ("semchunk", lambda: semchunk_splitter(1000, overlap, len), ""),
        ]
        if not overlap:  # chonkie's recursive chunker has no overlap of its own
            entries.append(("chonkie RecursiveChunker", lambda: chonkie_splitter(1000, "character"), ""))
    elif group == "tokens":
        entries = [
            (
                "chunkyard recursive",
                lambda: chunkyard(
                    {"strategy": "recursive", "unit": "tokens", "max_size": 512, "overlap": 64}
                ),
                "",
            ),
            (
                "chunkyard markdown",
                lambda: chunkyard({"strategy": "markdown", "unit": "tokens", "max_size": 512, "overlap": 64}),
                "",
            ),
            # chonkie has no overlap: the like-for-like comparison for it.
            (
                "chunkyard recursive, overlap 0",
                lambda: chunkyard({"strategy": "recursive", "unit": "tokens", "max_size": 512, "overlap": 0}),
                "no overlap",
            ),
            (
                "tiktoken: encode all text once",
                lambda: lambda text: [(0, len(text), text)] if count(text) else [],
                "floor",
            ),
            # chunkyard encodes cl100k with bpe-openai (same tokens): its own floor, for comparison.
            ("bpe-openai: encode all text once", lambda: fast_encode_all(), "floor, chunkyard's encoder"),
            ("chonkie RecursiveChunker (tiktoken)", lambda: chonkie_splitter(512, enc), "no overlap"),
            ("semchunk (tiktoken)", lambda: semchunk_splitter(512, 64, lambda t: len(count(t))), ""),
            ("semantic-text-splitter TextSplitter", lambda: text_splitter("text", 512, 64, tokens=True), ""),
            (
                "LangChain RecursiveCharacterTextSplitter",
                lambda: langchain("text", 512, 64, counter=lambda t: len(count(t))),
                "",
            ),
        ]
    elif group == "fixed":
        names = ("chunkyard", "semantic-text-splitter", "LangChain")
        chosen = [e for g in ("chars", "markdown") for e in group_entries(g) if e.name.startswith(names)]
        return [*chosen, Entry("floor: the result of one chunk built in Python", result_floor, "floor")]
    elif group in ("markdown", "html"):  # html: the peers get the text chunkyard extracted from the HTML
        strategy = group
        entries = [
            (
                f"chunkyard {strategy}",
                lambda: chunkyard({"strategy": strategy, "unit": "chars", "max_size": 1000}),
                "",
            ),
            (
                f"chunkyard {strategy}, count_tokens: false",
                lambda: chunkyard(
                    {"strategy": strategy, "unit": "chars", "max_size": 1000, "count_tokens": False}
                ),
                "",
            ),
            ("LangChain MarkdownTextSplitter", lambda: langchain("markdown", 1000, 0), "no structure"),
            ("semantic-text-splitter MarkdownSplitter", lambda: text_splitter("markdown", 1000, 0), ""),
        ]
    available = []
    for name, make, note in entries:
        if make() is None:
            print(f"  ({name}: not installed, skipped)", file=sys.stderr)
        else:
            available.append(Entry(name, make, note))
    return available


def budget_check(group: str) -> tuple[int, Callable[[str], int]]:
    if group == "tokens":
        enc = cl100k()
        return 512, lambda text: len(enc.encode_ordinary(text))
    return 1000, len


def run_group(group: str, texts: list[str], repeats: int, check: bool = True) -> list[Entry]:
    entries = group_entries(group)
    for entry in entries:  # warm up: imports, tokenizer files
        entry.make()(texts[0])
    for repeat in range(repeats):
        order = entries[repeat % len(entries) :] + entries[: repeat % len(entries)]
        for entry in order:
            split = entry.make()
            started = time.process_time()
            for text in texts:
                split(text)
            entry.times.append(time.process_time() - started)
    limit, measure = budget_check(group)
    for entry in entries if check else ():
        total = exact = over = 0
        split = entry.make()
        for text in texts:
            for start, end, chunk in split(text):
                total += 1
                exact += start >= 0 and text[start:end] == chunk
                over += not entry.note.startswith("floor") and measure(chunk) > limit
        entry.chunks, entry.exact, entry.over = total, exact / max(total, 1), over / max(total, 1)
    return entries


# -- hostile inputs ---------------------------------------------------------------------------------


def hostile_documents() -> dict[str, str]:
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
    line = " ".join(words[i % len(words)] for i in range(10_000_000 // 6))[:10_000_000]
    paragraphs = "\n\n".join(f"Paragraph {i} is one short line." for i in range(100_000))
    header = "| name | value | description |\n|---|---|---|\n"
    rows = [
        f"| item {i} | {i * 7} | row {i} of a large table, with some text |" for i in range(1_000_000 // 66)
    ]
    table = header + "\n".join(rows) + "\n"
    nested = "".join(
        ("  " * depth) + f"- item at depth {depth}\n" for _ in range(2_000) for depth in range(12)
    )
    lists = "".join(f"Step {i} needs this:\n\n- item a {i}\n- item b {i}\n\n" for i in range(30_000))
    return {
        "10 MB without a newline": line,
        "100,000 one-line paragraphs": paragraphs,
        "1 MB table": table,
        "nested lists (12 deep, 24,000 items)": nested,
        "30,000 short lists with lead-ins (1.6 MB)": lists,
        "2,000,000 blank lines": "x\n" + "\n" * 2_000_000 + "y",
        "1,000,000 stops": "." * 1_000_000,
        "an item indented by 1,000,000 spaces": "- a\n" + " " * 1_000_000 + "b",
    }


def run_hostile(texts: list[str], repeats: int) -> list[tuple[str, str, float, float]]:
    """(strategy, case, seconds per MB, ratio to prose) for recursive and markdown in chars."""
    rows = []
    for strategy in ("recursive", "markdown"):
        split = chunkyard({"strategy": strategy, "unit": "chars", "max_size": 1000})
        cases = {"prose (the corpus)": texts, **{k: [v] for k, v in hostile_documents().items()}}
        per_mb: dict[str, float] = {}
        for case, docs in cases.items():
            size = sum(len(d.encode()) for d in docs) / 1e6
            times = []
            for _ in range(repeats):
                started = time.process_time()
                for doc in docs:
                    split(doc)
                times.append(time.process_time() - started)
            per_mb[case] = statistics.median(times) / size
        prose = per_mb["prose (the corpus)"]
        rows.extend((strategy, case, seconds, seconds / prose) for case, seconds in per_mb.items())
    return rows


# -- end to end -------------------------------------------------------------------------------------


def run_end_to_end(corpus: Path, texts: list[str], repeats: int) -> list[tuple[str, float, float, float]]:
    """(what, wall s, CPU s, peak RSS MB) of ``chunkyard run`` and of its parts in this process."""
    settings = {"strategy": "markdown", "unit": "tokens", "max_size": 512, "overlap": 64}
    parsed = parse_settings({"front_matter": "exclude", **settings})
    read = chunk = 0.0
    for _ in range(repeats):
        started = time.process_time()
        docs = [p.read_bytes().decode("utf-8") for p in markdown_files(corpus)]
        read += time.process_time() - started
        started = time.process_time()
        for doc in docs:
            split_document(doc, parsed)
        chunk += time.process_time() - started
    rows = [
        ("read + decode (in process)", read / repeats, read / repeats, 0.0),
        ("chunk_document, all documents (in process)", chunk / repeats, chunk / repeats, 0.0),
    ]
    chunkyard_bin = Path(sys.executable).with_name("chunkyard")
    with tempfile.TemporaryDirectory() as tmp, prefect_server(Path(tmp) / "prefect"):
        # One loopback server for every run (PREFECT_API_URL is set for the children), so that
        # the runs do not include starting one.
        config = Path(tmp) / "bench.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "name": "bench",
                    "version": 1,
                    "source": {"path": str(corpus.resolve()), "include": ["**/*.md"]},
                    "output": {"path": str(Path(tmp) / "out")},
                    "chunker": settings,
                }
            )
        )
        sample = Path(tmp) / "sample.yaml"  # the bundled sample: the constant part of the memory
        sample.write_text(
            yaml.safe_dump(
                {
                    "name": "sample",
                    "version": 1,
                    "source": {"path": str(ROOT / "examples" / "kb"), "include": ["**/*.md"]},
                    "output": {"path": str(Path(tmp) / "out")},
                    "chunker": settings,
                }
            )
        )
        for label, path, runner, workers in (
            (
                f"chunkyard run, bundled sample ({len(markdown_files(ROOT / 'examples' / 'kb'))} files)",
                sample,
                "thread",
                1,
            ),
            *(
                (f"chunkyard run --task-runner {r} --workers {w}", config, r, w)
                for r, w in (("thread", 1), ("process", 1), ("process", 2))
            ),
        ):
            walls, cpus, peak = [], [], 0.0
            for repeat in range(repeats):
                # Peak RSS per run from GNU time (the run's own process; the workers of a
                # process pool are counted separately by the kernel and not included).
                rss_file = Path(tmp) / "rss"
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                done = subprocess.run(
                    [
                        "/usr/bin/time",
                        "-f",
                        "%M",
                        "-o",
                        str(rss_file),
                        str(chunkyard_bin),
                        "run",
                        str(path),
                        "--task-runner",
                        runner,
                        "--workers",
                        str(workers),
                        "--output",
                        str(Path(tmp) / f"out-{runner}{workers}-{repeat}"),
                    ],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PREFECT_HOME": str(Path(tmp) / "prefect")},
                )
                if done.returncode not in (0, 3):  # 3: done, some files skipped (and recorded)
                    raise SystemExit(f"chunkyard run failed ({done.returncode}):\n{done.stderr[-2000:]}")
                walls.append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                peak = max(peak, int(rss_file.read_text().split()[-1]) / 1024)
            rows.append((label, statistics.median(walls), statistics.median(cpus), peak))
    return rows


# -- report -----------------------------------------------------------------------------------------


def group_table(group: str, results: dict[str, tuple[list[Entry], float]]) -> list[str]:
    """One row per splitter: MB/s and the speed ratio to chunkyard's first row on each corpus, and the
    correctness columns measured on the last corpus given (all documents)."""
    names = list(results)
    lines = [
        f"### {TITLES[group].format(corpora=', '.join(names))}",
        "",
        "| splitter | "
        + " | ".join(f"{name} MB/s | ÷" for name in names)
        + " | chunks | exact spans | over budget | note |",
        "|---|" + "---:|---:|" * len(names) + "---:|---:|---:|---|",
    ]
    checked = results[names[-1]][0]
    for row, entry in enumerate(checked):
        cells = []
        for name in names:
            entries, mb = results[name]
            base, seconds = statistics.median(entries[0].times), statistics.median(entries[row].times)
            cells.append(f"{mb / seconds:.1f} | {base / seconds:.2f}")
        lines.append(
            f"| {entry.name} | " + " | ".join(cells) + f" | {entry.chunks:,} | {entry.exact:.1%} | "
            f"{entry.over:.2%} | {entry.note} |"
        )
    lines += ["", "÷: this splitter's speed ÷ chunkyard's first row, on the same corpus."]
    return lines


def run_fixed(repeats: int) -> list[str]:
    """The ``fixed`` group: µs per call on each short document, and the ratio to chunkyard's
    count_tokens: false row of the same kind (recursive for the text splitters, markdown for the
    Markdown ones)."""
    results = {
        kind: run_group("fixed", [text] * FIXED_CALLS, repeats) for kind, text in SHORT_DOCUMENTS.items()
    }
    kinds = list(results)
    # Only a document of one chunk measures the cost of a call alone.
    several = [f"{e.name} on the {kind}" for kind in kinds for e in results[kind] if e.chunks != FIXED_CALLS]
    if several:
        raise ValueError(f"not one chunk per call: {', '.join(several)}")
    lines = [
        "### fixed cost of a call (documents of one chunk, 1000 characters)",
        "",
        "| splitter | " + " | ".join(f"{kind} µs | ÷" for kind in kinds) + " |",
        "|---|" + "---:|---:|" * len(kinds),
    ]
    for entry in results[kinds[0]]:
        markdown = "markdown" in entry.name.lower()
        ours = f"chunkyard {'markdown' if markdown else 'recursive'}, count_tokens: false"
        cells = []
        for kind in kinds:
            by_name = {e.name: statistics.median(e.times) / FIXED_CALLS * 1e6 for e in results[kind]}
            mine = by_name[entry.name]
            cells.append(f"{mine:.1f} | {by_name[ours] / mine:.2f}")
        lines.append(f"| {entry.name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "÷: this splitter's speed ÷ chunkyard's count_tokens: false row of the same kind (recursive, or "
        "markdown for the Markdown splitters): a goal of 1.5× chunkyard is a ÷ of at most 0.67 here.",
    ]
    return lines


def goal_table(measured: dict[str, dict[str, tuple[list[Entry], float]]]) -> list[str]:
    """Each goal of the issue as chunkyard's speed ÷ the peer's, per corpus."""
    corpora = list(dict.fromkeys(name for results in measured.values() for name in results))
    lines = [
        "### goals: chunkyard's speed ÷ the peer's, per corpus",
        "",
        "| group | chunkyard | ÷ peer | goal | " + " | ".join(corpora) + " |",
        "|---|---|---|---:|" + "---:|" * len(corpora),
    ]
    for group, ours, theirs, goal in GOALS:
        if group not in measured:
            continue
        cells = []
        for name in corpora:
            entries = {e.name: e for e in measured[group].get(name, ([], 0.0))[0]}
            if ours in entries and theirs in entries:
                ratio = statistics.median(entries[theirs].times) / statistics.median(entries[ours].times)
                cells.append(f"{'**' if ratio < goal else ''}{ratio:.2f}{'**' if ratio < goal else ''}")
            else:
                cells.append("—")
        lines.append(f"| {group} | {ours} | {theirs} | ≥ {goal} | " + " | ".join(cells) + " |")
    lines += ["", "Bold: below the goal."]
    return lines


def per_document_table(
    measured: dict[str, dict[str, tuple[list[Entry], float]]], counts: dict[str, int]
) -> list[str]:
    """The goals' two splitters in µs per document, per corpus: on short pages (hugo-docs) what a
    call costs whatever its length, the arithmetic behind a ratio there."""
    corpora = list(dict.fromkeys(name for results in measured.values() for name in results))
    lines = [
        "### µs per document: chunkyard / the peer, per corpus",
        "",
        "| group | chunkyard | peer | " + " | ".join(corpora) + " |",
        "|---|---|---|" + "---:|" * len(corpora),
    ]
    for group, ours, theirs, _goal in GOALS:
        if group not in measured:
            continue
        cells = []
        for name in corpora:
            entries = {e.name: e for e in measured[group].get(name, ([], 0.0))[0]}
            if ours in entries and theirs in entries and counts.get(name):
                per_doc = [statistics.median(entries[n].times) / counts[name] * 1e6 for n in (ours, theirs)]
                cells.append(f"{per_doc[0]:.0f} / {per_doc[1]:.0f}")
            else:
                cells.append("—")
        lines.append(f"| {group} | {ours} | {theirs} | " + " | ".join(cells) + " |")
    return lines


def corpora_of(root: Path, html_root: Path | None = None) -> tuple[dict[str, list[str]], list[str]]:
    """The Markdown texts per shared corpus (plus "all"), and the HTML of ``html_root`` (default: the
    shared httpd-manual, when ``root`` holds the shared corpora) as chunkyard extracts it. Any other
    folder is one corpus of its own Markdown."""
    from chunkyard.chunking.html import extract_html

    known = [name for name in MARKDOWN_CORPORA if (root / name).is_dir()]
    if root.resolve() == CORPORA.resolve() and len(known) < len(MARKDOWN_CORPORA):
        missing = sorted(set(MARKDOWN_CORPORA) - set(known))
        raise SystemExit(f"the shared corpora {', '.join(missing)} are not under {root} (set {CORPORA_ENV})")
    if known:
        corpora = {
            name: [p.read_text(encoding="utf-8") for p in markdown_files(root / name)] for name in known
        }
        corpora["all"] = [text for name in known for text in corpora[name]]
    else:
        corpora = {root.name or str(root): [p.read_text(encoding="utf-8") for p in markdown_files(root)]}
    given = html_root is not None
    if not given and known and (root / HTML_CORPUS).is_dir():
        html_root = root / HTML_CORPUS
    pages = sorted(html_root.rglob("*.html")) if html_root is not None else []
    if given and not pages:
        raise SystemExit(f"no HTML files under {html_root}")
    return corpora, [extract_html(p.read_text(encoding="utf-8", errors="replace")).text for p in pages]


def versions() -> str:
    names = [
        "semantic-text-splitter",
        "langchain-text-splitters",
        "semchunk",
        "chonkie",
        "tiktoken",
        "bpe-openai",
        "regex",
        "pyarrow",
        "prefect",
    ]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument(
        "--html", type=Path, default=None, help=f"the html group's folder of HTML (default: {HTML_CORPUS})"
    )
    parser.add_argument(
        "--write-readme", action="store_true", help="replace the results in benchmarks/README.md"
    )
    args = parser.parse_args(argv)
    corpora, html_texts = corpora_of(args.corpus, args.html)
    html_name = args.html.name if args.html else HTML_CORPUS
    texts = corpora.get("all") or next(iter(corpora.values()))
    if not texts:
        print(f"no Markdown files under {args.corpus}", file=sys.stderr)
        return 2
    sizes = ", ".join(
        f"{name}: {len(docs)} files, {sum(len(t.encode()) for t in docs) / 1e6:.1f} MB"
        for name, docs in corpora.items()
    )
    if html_texts:
        sizes += (
            f"; {html_name}: {len(html_texts)} HTML files, "
            f"{sum(len(t.encode()) for t in html_texts) / 1e6:.1f} MB of extracted text"
        )
    out = [
        f"Corpus: {args.corpus} ({sizes}); {args.repeats} repeats, "
        f"median CPU time. Machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; {versions()}. "
        f"Run {dt.date.today().isoformat()}.",
        "",
    ]
    print("\n".join(out), flush=True)
    measured: dict[str, dict[str, tuple[list[Entry], float]]] = {}
    for group in args.groups.split(","):
        print(f"[{group}]", file=sys.stderr, flush=True)
        if group == "hostile":
            section = [
                "### hostile inputs (chunkyard, chars 1000)",
                "",
                "| strategy | input | s per MB | × prose |",
                "|---|---|---:|---:|",
            ]
            section += [
                f"| {s} | {case} | {sec:.3f} | {ratio:.2f} |"
                for s, case, sec, ratio in run_hostile(texts, args.repeats)
            ]
        elif group == "run":
            rows = run_end_to_end(args.corpus, texts, args.repeats)
            parts = rows[0][1] + rows[1][1]
            section = [
                "### end to end (markdown, tokens 512/64)",
                "",
                "| what | wall s | CPU s | × parts (wall) | peak RSS MB |",
                "|---|---:|---:|---:|---:|",
            ]
            section += [
                f"| {what} | {wall:.2f} | {cpu:.2f} | "
                f"{'—' if 'sample' in what else f'{wall / parts:.2f}'} | {rss:.0f} |"
                for what, wall, cpu, rss in rows
            ]
            section.append(
                f"| largest document: {max(len(t.encode()) for t in texts) / 1e6:.2f} MB | | | | |"
            )
            section += [
                "",
                "CPU s counts the run's process and the children it waited for: process-pool "
                "workers (forked by a forkserver) are not in it. Peak RSS is the largest single process.",
            ]
        elif group == "fixed":
            section = run_fixed(args.repeats)
        elif group == "html":
            if not html_texts:
                print(f"  (html: no {html_name} under {args.corpus}, skipped)", file=sys.stderr)
                continue
            html_mb = sum(len(t.encode()) for t in html_texts) / 1e6
            measured[group] = {html_name: (run_group(group, html_texts, args.repeats), html_mb)}
            section = group_table(group, measured[group])
        elif group in GROUPS:
            # Each corpus on its own, then all of them (where the correctness columns are measured).
            measured[group] = {
                name: (
                    run_group(group, docs, args.repeats, check=name == list(corpora)[-1]),
                    sum(len(t.encode()) for t in docs) / 1e6,
                )
                for name, docs in corpora.items()
            }
            section = group_table(group, measured[group])
        else:
            parser.error(f"unknown group {group!r} (use: {', '.join(GROUPS)})")
        print("\n".join(section) + "\n", flush=True)
        out += section + [""]
    if measured:
        counts = {name: len(docs) for name, docs in corpora.items()} | {html_name: len(html_texts)}
        section = goal_table(measured) + [""] + per_document_table(measured, counts)
        print("\n".join(section) + "\n", flush=True)
        out += section + [""]
    out_text = "\n".join(out)
    if args.write_readme:
        current = README.read_text(encoding="utf-8")
        head, _, rest = current.partition(BEGIN)
        _, _, tail = rest.partition(END)
        README.write_text(f"{head}{BEGIN}\n{out_text}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
