"""chunking/_pack.c (findings.check_spans, units' token_starts) against its Python references, and the
greedy packer's fast path for plain text.

The greedy packer (``Packer._spans``, Python only since the rules left _pack.c) chunks the ``fixed``
strategy; the others go through the global segmenter (``chunkyard.chunking.segmenter``, its kernels in
tests/core/test_segmenter.py). The C code must give the same findings and token starts: on the real
corpora and on generated text made of what the rules look at (sentence ends and abbreviations, quotes,
list numbers, blank lines, CR LF, lone CR, tables, headings) and what is not ASCII (combining marks,
emoji, CJK, no-break spaces, \\x1c).
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


# -- findings: chunking/_pack.c check_spans against findings._check_spans -----------------------------


def both_findings(
    text: str, strategy: str, max_size: int, overlap: int, min_size: int, path: str | None = None
):
    from chunkyard.chunking import findings
    from chunkyard.chunking.packer import Span, _char_classes

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
        reference = findings._check_spans(text, variant, layout, min_size)
        fast = packer._native.check_spans(
            text,
            variant,
            layout.heading_starts,
            layout.plan.groups,
            layout.plan.start,
            min_size,
            _char_classes,
        )
        assert fast == reference


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
    strategy=st.sampled_from(["recursive", "markdown", "sentence"]),
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
