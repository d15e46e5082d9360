"""chunking/_pack.c's kernels (findings' scan, after_last, containing; units' token_starts) against their
Python twins, and the greedy packer's fast path for plain text.

The kernels know no rule (the findings' rules are in chunking/findings.py, once): each C kernel must
return what its Python twin returns, on generated input (text made of what the rules look at: sentence
ends and abbreviations, quotes, list numbers, blank lines, CR LF, lone CR, tables, headings, and what
is not ASCII: combining marks, emoji, CJK, no-break spaces, \\x1c; any positions, reaches and classes)
and on the real corpora, and the findings must be the same with either set of kernels. The greedy
packer (``Packer._spans``) chunks the ``fixed`` strategy; the others go through the global segmenter
(``chunkyard.chunking.segmenter``, its kernels in tests/core/test_segmenter.py).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking import native, packer
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.packer import Packer
from chunkyard.chunking.strategies import get_strategy
from chunkyard.chunking.units import make_meter

from support.strategies import markdownish

needs_native = pytest.mark.skipif(
    packer._native is None, reason=f"chunkyard.chunking._pack: {native.status().get('_pack')}"
)


def test_the_accelerator_is_built_and_current_in_ci():
    if not os.environ.get("CI"):
        pytest.skip("only required in CI")
    assert packer._native is not None, native.status()


@needs_native
def test_the_build_is_stamped_with_its_source():
    assert packer._native.SOURCE_SHA256 == native.source_digest("_pack")


PIECES = [
    "Word",
    "word",
    "A",
    "a",
    "I",
    "1",
    "12",
    "1234",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "\n \n",
    "\r\n",
    "\r",
    ". ",
    ".",
    "! ",
    "? ",
    "...",
    "?! ",
    '." ',
    ".) ",
    "'",
    '"',
    "(",
    "[",
    "e.g. ",
    "i.e. ",
    "Dr. ",
    "Mrs. ",
    "approx. ",
    "etc. ",
    "No. 5",
    "(a. ",
    "3. ",
    "- item\n",
    "1. step\n",
    "# Heading\n",
    "## Sub\n",
    "| a | b |\n|---|---|\n",
    "| 1 | 2 |\n",
    "```\ncode\n```\n",
    "é",
    "e\u0301",
    "中文。",
    "😀",
    "👍🏽",
    "\u00a0",
    "\x1c",
    "…",
    "“Quoted.” ",
    # Sentence ends of other scripts (packer.SENTENCE_MARKS) and Thai/Lao phrase gaps.
    "है। ",
    "है॥",
    "؟ ",
    "ہے۔",
    "։ ",
    "ነው። ",
    "፧",
    "។ ",
    "ข้าว ",
    "ดีมาก",
    "ສະບາຍດີ ",
    "\u0e3f",
]
texts = st.lists(st.sampled_from(PIECES), max_size=120).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(st.characters(max_codepoint=0x7E, blacklist_characters="\r"), max_size=80),
    low=st.integers(0, 90),  # positions (the packer never asks below 0)
    width=st.integers(-3, 700),
    last=st.booleans(),
)
def test_the_plain_text_cluster_path_equals_segmenting(text, low, width, last):
    # ASCII without CR: every position is a grapheme boundary, so the packer skips segmenting.
    config = parse_settings({"front_matter": "keep", "strategy": "fixed", "max_size": 10})
    plan = get_strategy("fixed")(text, config, None).plan
    fast = Packer(text, plan, make_meter(text, "chars"), 10, 0, 0)
    slow = Packer(text, plan, make_meter(text, "chars"), 10, 0, 0)
    assert fast._plain
    slow._plain = False
    assert fast._cluster_boundary(low, low + width, last=last) == slow._cluster_boundary(
        low, low + width, last=last
    )


# Pieces around line breaks that rules of UAX #29 join or part: CR LF, a prepend mark, combining
# marks, a ZWJ sequence, regional indicators, a Thai vowel sign, and a run without a line feed.
CLUSTER_PIECES = [
    "a",
    "\r",
    "\n",
    "\r\n",
    "\u0301",
    "\u0600",
    "\u0903",
    "👩",
    "\u200d",
    "🇫",
    "🇷",
    ".",
    " ",
    "ก",
    "\u0e31",
]


@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from(CLUSTER_PIECES), max_size=60).map("".join), data=st.data())
def test_cluster_boundaries_are_those_of_segmenting(text, data):
    """``Packer._is_cluster_boundary`` (its fast paths: after a CR, ASCII, no joining character) and
    ``_clusters`` (from ``_safe_origin``: after a line feed, before a CR) against ``regex``'s ``\\X``."""
    config = parse_settings({"front_matter": "keep", "strategy": "fixed", "max_size": 10})
    plan = get_strategy("fixed")(text, config, None).plan
    pk = Packer(text, plan, make_meter(text, "chars"), 10, 0, 0)
    boundaries = {0, len(text), *(m.end() for m in packer.GRAPHEME.pattern.finditer(text))}
    assert [pk._is_cluster_boundary(p) for p in range(len(text) + 1)] == [
        p in boundaries for p in range(len(text) + 1)
    ]
    low = data.draw(st.integers(0, len(text)))
    high = data.draw(st.integers(low, len(text)))
    assert pk._clusters(low, high) == sorted(p for p in boundaries if low <= p <= high)


# -- findings: chunking/_pack.c's kernels against their Python twins --------------------------------


def native_kernels():
    from chunkyard.chunking import findings

    return findings.kernels()


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(texts, st.text(max_size=200)),
    data=st.data(),
    field=st.sampled_from([0, 1]),
    reach=st.one_of(st.integers(0, 8), st.integers(0, 400)),
    mask=st.integers(0, 7),
    test=st.integers(0, 7),
    over=st.booleans(),
    backward=st.booleans(),
    want=st.booleans(),
)
def test_scan_equals_its_twin(text, data, field, reach, mask, test, over, backward, want):
    from chunkyard.chunking import findings

    positions = st.integers(0, len(text))
    records = data.draw(st.lists(st.tuples(positions, positions), max_size=12))
    table = data.draw(st.sampled_from([findings._class_table(), b"", bytes(range(8)) * 40]))
    args = (text, records, field, reach, table, mask, over, backward, test, want)
    assert native_kernels().scan(*args) == findings._scan(*args)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(texts, st.text(max_size=200)),
    data=st.data(),
    reach=st.one_of(st.integers(0, 8), st.integers(0, 400)),
    char=st.sampled_from(["\n", " ", "é", "😀"]),
    test=st.integers(0, 7),
    want=st.booleans(),
)
def test_after_last_equals_its_twin(text, data, reach, char, test, want):
    from chunkyard.chunking import findings

    records = data.draw(st.lists(st.tuples(st.integers(0, len(text))), max_size=12))
    table = data.draw(st.sampled_from([findings._class_table(), b"", bytes(range(8)) * 40]))
    args = (text, records, 0, reach, char, table, test, want)
    assert native_kernels().after_last(*args) == findings._after_last(*args)


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    points=st.lists(st.integers(0, 60), max_size=20),
    intervals=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=20),
    as_records=st.booleans(),
)
def test_containing_equals_its_twin(points, intervals, as_records):
    from chunkyard.chunking import findings

    given_points, at = ([(p, -p) for p in points], 0) if as_records else (points, -1)
    records = [("x", a, b) for a, b in intervals]
    fast = native_kernels().containing(given_points, at, records, 1, 2)
    assert fast == findings._containing(given_points, at, records, 1, 2)
    pairs = list(zip(fast[::2], fast[1::2], strict=True))
    assert pairs == sorted(
        (i, j) for i, p in enumerate(points) for j, (a, b) in enumerate(intervals) if a < p < b
    )


# ASCII pieces (long ones too: the kernel passes over a word of ASCII code units at once) and the
# non-ASCII code points of each string kind (with those of the narrower kinds), so that each of the
# kernel's three loops is run.
_ASCII_PIECES = ["a", " ", "\n", "\x7f", "abcdefgh", "0123456789abcdef"]
_NON_ASCII_BY_KIND = (
    ["\x80", "\xe9", "\xff"],
    ["\xe9", "\u0100", "\u2019", "\u0301"],
    ["\xe9", "\u2019", "\U0001f469", "\U00010000"],
)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_non_ascii_run_equals_its_twin_and_the_runs(data):
    """``non_ascii_run`` (C, when built, and its Python twin) against the runs it stands for, in text of
    each string kind (latin-1, UCS-2, UCS-4)."""
    kind = data.draw(st.sampled_from(_NON_ASCII_BY_KIND))
    text = "".join(data.draw(st.lists(st.sampled_from(_ASCII_PIECES + kind * 3), max_size=60)))
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    least = data.draw(st.integers(1, 6))
    want = next(
        (p for p in range(start, end - least + 1) if all(ord(c) > 0x7F for c in text[p : p + least])),
        -1,
    )
    assert packer.non_ascii_run(text, start, end, least) == want
    if packer._native is not None:
        assert packer._native.non_ascii_run(text, start, end, least) == want
        with pytest.raises(ValueError):
            packer._native.non_ascii_run(text, start, end, 0)


def both_findings(
    text: str, strategy: str, max_size: int, overlap: int, min_size: int, path: str | None = None
):
    from chunkyard.chunking import findings
    from chunkyard.chunking.packer import Span

    config = parse_settings(
        {
            "front_matter": "keep",
            "strategy": strategy,
            "max_size": max_size,
            "overlap": overlap,
            "min_size": min_size,
        }
    )
    layout = get_strategy(strategy)(text, config, path)
    spans = Packer(text, layout.plan, make_meter(text, "chars"), max_size, overlap, min_size).spans()
    # As packed, out of order and with gaps (a peer's spans, as benchmarks/quality_compare.py checks them).
    for variant in (spans, spans[::-1], [Span(s.start, s.end, s.end - s.start) for s in spans[::2]]):
        python = findings._check_spans(text, variant, layout, min_size, findings.PYTHON_KERNELS)
        assert findings._check_spans(text, variant, layout, min_size, native_kernels()) == python


@needs_native
@pytest.mark.corpus
@pytest.mark.parametrize(
    ("strategy", "max_size", "overlap", "min_size"),
    [("recursive", 1000, 0, 0), ("markdown", 600, 100, 150), ("code", 600, 0, 0)],
)
def test_same_findings_on_the_real_corpora(corpora_dir, strategy, max_size, overlap, min_size):
    for path in sorted(
        p for p in corpora_dir.rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".txt"}
    ):
        text = path.read_text(encoding="utf-8", errors="replace")
        both_findings(text, strategy, max_size, overlap, min_size, path.name)


@needs_native
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    text=st.one_of(texts, markdownish()),
    strategy=st.sampled_from(["recursive", "markdown", "sentence", "fixed"]),
    max_size=st.integers(10, 300),
    overlap_share=st.integers(0, 60),
    min_size=st.sampled_from([0, 5, 50]),
)
def test_same_findings_on_generated_text(text, strategy, max_size, overlap_share, min_size):
    both_findings(text, strategy, max_size, max_size * overlap_share // 100, min(min_size, max_size - 1))


# -- chunk metadata built in one sweep (Layout.contexts_at, Layout.labels_of) ---------------------------


def check_sweeps(text: str, strategy: str, max_size: int, overlap: int, path: str | None = None):
    config = parse_settings(
        {"front_matter": "keep", "strategy": strategy, "max_size": max_size, "overlap": overlap}
    )
    layout = get_strategy(strategy)(text, config, path)
    spans = Packer(text, layout.plan, make_meter(text, "chars"), max_size, overlap, 0).spans()
    for variant in (spans, spans[::-1]):  # as packed, and out of order (the per-chunk path)
        starts = [s.start for s in variant]
        assert layout.contexts_at(starts) == [
            tuple(g.context for g in layout.groups_around(s)) for s in starts
        ]
        extents = [(s.start, s.end) for s in variant]
        assert layout.labels_of(extents) == [layout.code_label(a, b) for a, b in extents]


@pytest.mark.corpus
def test_sweeps_match_per_chunk_lookups_on_the_real_corpora(corpora_dir):
    for path in sorted(
        p for p in corpora_dir.rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".html"}
    ):
        text = path.read_text(encoding="utf-8", errors="replace")
        strategy = {".md": "markdown", ".py": "code", ".html": "html"}[path.suffix]
        check_sweeps(text, strategy, 400, 80, path.name)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(text=markdownish(), max_size=st.integers(20, 300), overlap_share=st.integers(0, 60))
def test_sweeps_match_per_chunk_lookups_on_generated_markdown(text, max_size, overlap_share):
    check_sweeps(text, "markdown", max_size, max_size * overlap_share // 100)


# -- token starts: chunking/_pack.c token_starts against the numpy reference ----------------------------


def check_token_starts(text: str):
    import numpy as np

    from chunkyard.chunking.units import get_tokenizer

    tokenizer = get_tokenizer("cl100k_base")
    fast = tokenizer.token_starts(text)
    assert np.array_equal(fast, tokenizer._token_starts(text, tokenizer._encode(text)))


@needs_native
@pytest.mark.parametrize(
    "text",
    [
        "plain ascii, one byte a character",
        "latin-1 only: café naïve ÿ",  # one byte per character in Python, two in UTF-8
        "the BMP: 日本語 — “quotes” e\u0301",  # two bytes per character in Python
        "astral: 👍🏽 𝔘𝔫𝔦 and 日本",  # four bytes per character in Python
        "\x85\u2028 mixed ü 中 😀 end",
    ],
)
def test_same_token_starts_in_every_string_kind(text):
    check_token_starts(text)
    check_token_starts(text * 50)


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    starts=st.lists(st.integers(-(2**40), 2**40), max_size=60).map(sorted),
    queries=st.lists(st.integers(-(2**41), 2**41), max_size=20),
)
def test_the_c_token_index_equals_its_twin(starts, queries):
    import numpy as np

    from chunkyard.chunking import units

    raw = np.asarray(starts, dtype=np.int64).tobytes()
    queries += [*starts[:5], *(s + 1 for s in starts[:5])]
    assert units._native.token_index(raw, queries) == units._token_index(raw, queries)
    ordered = sorted(queries)  # each search starts from the answer before (galloping)
    assert units._native.token_index(raw, ordered) == units._token_index(raw, ordered)
    for query in queries:
        assert units._native.token_index(raw, query) == units._token_index(raw, query)


@needs_native
@pytest.mark.corpus
def test_same_token_starts_on_the_real_corpora(corpora_dir):
    for path in sorted(corpora_dir.rglob("*.md"))[::3]:
        check_token_starts(path.read_text(encoding="utf-8", errors="replace"))


@needs_native
@settings(max_examples=200, deadline=None)
# No lone surrogates: the numpy reference cannot encode one to UTF-8 (the C one counts it as U+FFFD).
@given(text=st.one_of(texts, st.text(st.characters(exclude_categories=("Cs",)), max_size=300)))
def test_same_token_starts_on_generated_text(text):
    check_token_starts(text)
