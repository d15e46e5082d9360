"""Structure kept (docs/design.md, invariant 5) by the markdown strategy, on small fixtures and the sample corpus.

Headings open chunks and never end one; procedures, tables and fenced code stay whole when they fit,
and when they cannot, the split falls between steps/rows/lines and each later piece's ``embed_text``
repeats the lead-in or table header; breadcrumbs follow ATX and setext headings; front matter is
excluded, recorded, and gives the title.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkyard.chunking.api import Chunk, split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.markdown import (
    _ATX,
    _ATX_OPEN,
    _QUOTED_FENCE,
    _atx_title,
    _quoted_fences,
    front_matter_span,
    scan,
)
from chunkyard.chunking.strategies import get_strategy

from support.checks import recount, run_and_check, spanned_section_path

KB = Path(__file__).resolve().parents[2] / "examples" / "kb"

HEADING_LINE = regex.compile(r"^ {0,3}#{1,6}(?:[ \t].*)?$|^ {0,3}(?:=+|-+)[ \t]*$")


def md(text: str, **settings: object) -> list[Chunk]:
    """Markdown chunks of ``text``. The structure tests below size their budgets against the text, so
    ``budget: text`` unless a test says otherwise (the default budget: tests/core/test_embed_budget.py)."""
    config = {
        "strategy": "markdown",
        "unit": "chars",
        "max_size": 200,
        "overlap": 0,
        "budget": "text",
        **settings,
    }
    return run_and_check(text, config).chunks


def boundaries(chunks: list[Chunk]) -> set[int]:
    return {c.start for c in chunks} | {c.end for c in chunks}


# ---------------------------------------------------------------------------------------------
# Headings


SECTIONS = """\
# Returns

Most items can be returned within sixty days of delivery. Members get ninety days.

## Exceptions

Fuel canisters and opened water filters cannot be returned. Personalised items neither.

### Damaged items

Damaged items are covered by the warranty process instead. Ask for a photo first.

## Refund timing

Refunds are issued within five business days. Card refunds can take longer to appear.

Setext section
--------------

Setext headings open sections too. This one is a level two heading.
"""


def _ends_with_heading(chunk: Chunk) -> bool:
    last_line = chunk.text.rstrip().rsplit("\n", 1)[-1]
    return HEADING_LINE.match(last_line) is not None


@pytest.mark.parametrize("max_size", [60, 90, 120, 200, 400])
@pytest.mark.parametrize("min_size", [0, 30])
def test_heading_never_ends_a_chunk(max_size: int, min_size: int) -> None:
    chunks = md(SECTIONS, max_size=max_size, min_size=min_size)
    for chunk in chunks[:-1]:
        assert "heading_at_end" not in chunk.findings
        assert not _ends_with_heading(chunk), chunk.text
        assert not HEADING_LINE.match(chunk.text.strip()), f"a chunk that is only a heading: {chunk.text!r}"


@pytest.mark.parametrize("max_size", [60, 120, 200])
def test_heading_opens_the_next_chunk(max_size: int) -> None:
    """Small sections share a chunk; a heading that does not open a chunk lies inside one with the text
    before it (no chunk starts in a section's text while its heading ends the previous chunk), and a
    chunk that starts in a section after its heading does so only when the section does not fit."""
    chunks = md(SECTIONS, max_size=max_size)
    starts = {c.start for c in chunks}
    for heading in ("# Returns", "## Exceptions", "### Damaged items", "## Refund timing", "Setext section"):
        pos = SECTIONS.index(heading)
        holder = next(c for c in chunks if c.start <= pos < c.end)
        assert pos in starts or holder.start < pos, heading
    for chunk in chunks[1:]:
        heading_before = max(
            SECTIONS.rfind("\n#", 0, chunk.start), SECTIONS.rfind("\nSetext", 0, chunk.start)
        )
        if chunk.start not in (heading_before + 1, 0) and heading_before >= 0:
            nxt = min(p for p in (SECTIONS.find("\n#", chunk.start), len(SECTIONS)) if p >= 0)
            assert len(SECTIONS[heading_before + 1 : nxt].strip()) > max_size, chunk.text


@pytest.mark.parametrize("max_size", [60, 120, 200, 400])
def test_a_chunk_section_path_is_the_deepest_section_holding_it(max_size: int) -> None:
    layout = get_strategy("markdown")(SECTIONS, parse_settings({"unit": "chars", "max_size": max_size}), None)
    chunks = md(SECTIONS, max_size=max_size)
    for chunk in chunks:
        assert chunk.section_path == spanned_section_path(layout, SECTIONS, chunk.start, chunk.end)
    if max_size == 400:  # sections share chunks: some path is an ancestor of a heading inside the chunk
        assert any(len(c.section_path) < len(layout.section_path(c.end - 1)) for c in chunks)


def test_empty_section_heading_does_not_end_a_chunk_when_merging_small_sections() -> None:
    text = "# A\n\nOne.\n\n# B\n\n# C\n\nTwo.\n"
    chunks = md(text, max_size=100, min_size=12)
    assert not any("heading_at_end" in c.findings for c in chunks), [c.text for c in chunks]
    assert not any(_ends_with_heading(c) for c in chunks[:-1])


def test_empty_section_heading_goes_with_the_next_one() -> None:
    text = "# A\n\nOne.\n\n# B\n\n# C\n\nTwo.\n"
    # At 100 characters the three small sections share one chunk; at 20, the empty '# B' opens the
    # chunk of '# C' rather than ending the chunk of '# A'.
    assert [c.text for c in md(text, max_size=100)] == [text.strip()]
    assert [c.text for c in md(text, max_size=20)] == ["# A\n\nOne.", "# B\n\n# C\n\nTwo."]


def test_heading_opens_the_chunk_when_its_section_does_not_fit() -> None:
    text = "# Heading One\n\nBody text that is rather long here. And another sentence follows it."
    chunks = md(text, max_size=30)
    assert chunks[0].text.startswith("# Heading One\n\nBody")
    assert all(c.section_path == ("Heading One",) for c in chunks)


def test_recursive_is_not_heading_aware_yet_leaves_no_heading_at_a_chunk_end() -> None:
    """recursive has no headings in its plan; the segmenter still prices a '#' line at a chunk's end
    (the findings' rule), so the cut falls before it."""
    text = "Intro para that is long enough to fill it.\n# Heading One\nBody text that is rather long here."
    recursive = run_and_check(text, {"strategy": "recursive", "unit": "chars", "max_size": 60}).chunks
    assert not any("heading_at_end" in c.findings for c in recursive)
    assert recursive[1].text.startswith("# Heading One")
    chunks = md(text, max_size=60)
    assert chunks[1].text.startswith("# Heading One\nBody")
    assert not any("heading_at_end" in c.findings for c in chunks)


def test_overlap_never_reaches_back_across_a_heading() -> None:
    chunks = md(SECTIONS, max_size=90, overlap=40)
    heading_starts = [m.start() for m in regex.finditer(r"(?m)^#{1,6} |^Setext section$", SECTIONS)]
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        if chunk.start < previous.end:
            assert not any(chunk.start < h < previous.end for h in heading_starts)


@pytest.mark.parametrize("path", sorted(KB.rglob("*.md")), ids=lambda p: p.name)
@pytest.mark.parametrize(
    ("unit", "max_size", "min_size"), [("chars", 400, 0), ("tokens", 128, 20), ("tokens", 384, 40)]
)
def test_no_chunk_ends_with_a_heading_in_the_sample_corpus(
    path: Path, unit: str, max_size: int, min_size: int
) -> None:
    text = path.read_text(encoding="utf-8")
    # token_overlap: a known core bug, reproduced in test_invariants.test_regression_token_overlap_*
    chunks = run_and_check(
        text,
        {
            "strategy": "markdown",
            "unit": unit,
            "max_size": max_size,
            "overlap": max_size // 10,
            "min_size": min_size,
            "budget": "text",  # the heading-and-unit arithmetic below is of the text alone
        },
        tolerate={"token_overlap"},
    ).chunks
    in_code = _code_line_starts(text)
    units = [
        (g.start, g.end)
        for g in (*scan(text).groups, *scan(text).units)
        if g.kind in ("procedure", "list", "table", "code")
    ]
    for chunk, after in itertools.pairwise(chunks):
        last_line_start = chunk.start + chunk.text.rstrip().rfind("\n") + 1
        if "heading_at_end" not in chunk.findings and last_line_start in in_code:
            continue
        if "heading_at_end" in chunk.findings or _ends_with_heading(chunk):
            # Only to keep a procedure, list, table or code block that fits whole, when it and the
            # heading do not fit together: the next chunk holds the unit, which starts right after it.
            heading = text[last_line_start : chunk.end]
            assert recount(heading + "\n\n" + after.text, unit) > max_size, chunk.text[-80:]
            assert any(
                after.start <= a < b <= after.end and not text[chunk.end : a].strip() for a, b in units
            ), chunk.text[-80:]


def _code_line_starts(text: str) -> set[int]:
    """Line starts inside fenced code blocks (where '# ...' is a comment, not a heading)."""
    return {
        line_start
        for group in scan(text).groups
        if group.kind == "code"
        for line_start in _line_starts(text, group.body_start, group.end)
    }


def _line_starts(text: str, start: int, end: int) -> list[int]:
    return [start] + [m.end() for m in regex.finditer(r"\n", text, pos=start, endpos=end)]


# ---------------------------------------------------------------------------------------------
# Procedures


PROCEDURE = """\
# Refunds

Some intro paragraph about refunds that is long enough to matter here.

To issue a refund:

1. Open the order in the admin panel.
2. Click the refund button at the top.
3. Choose the items to refund and the reason.
4. Confirm the refund and notify the customer.

After that, close the ticket.
"""
LEAD_IN = "To issue a refund:"
STEP_STARTS = [PROCEDURE.index(f"{n}. ") for n in range(1, 5)]
PROCEDURE_START = PROCEDURE.index(LEAD_IN)
PROCEDURE_END = PROCEDURE.index("customer.") + len("customer.")


def test_procedure_that_fits_stays_whole_with_its_lead_in() -> None:
    chunks = md(PROCEDURE, max_size=250)
    holder = [c for c in chunks if c.start <= PROCEDURE_START and c.end >= PROCEDURE_END]
    assert holder, "the procedure and its lead-in are not in one chunk"
    # The intro paragraph could have taken part of the procedure; it ends early instead (a smaller chunk).
    assert chunks[0].end < PROCEDURE_START
    assert not any(c.findings for c in chunks)


@pytest.mark.parametrize("max_size", [50, 60, 70, 100, 120, 150])
def test_procedure_that_does_not_fit_splits_between_steps(max_size: int) -> None:
    chunks = md(PROCEDURE, max_size=max_size)
    step_ends = [PROCEDURE.rindex(".", 0, s) + 1 for s in STEP_STARTS[1:]] + [PROCEDURE_END]
    for chunk in chunks:
        if PROCEDURE_START < chunk.start < PROCEDURE_END:
            assert chunk.start in STEP_STARTS, f"a piece starts inside a step: {chunk.text[:30]!r}"
        if PROCEDURE_START < chunk.end < PROCEDURE_END:
            assert chunk.end in step_ends or chunk.end == PROCEDURE_START + len(LEAD_IN), (
                f"a piece ends inside a step: {chunk.text[-30:]!r}"
            )
    pieces = [c for c in chunks if c.start < PROCEDURE_END and c.end > STEP_STARTS[0]]
    assert len(pieces) > 1, "the procedure was not split"
    for piece in pieces:
        if LEAD_IN not in piece.text:
            assert LEAD_IN in piece.embed_text, f"no lead-in in the embed_text of {piece.text[:30]!r}"
    for piece in pieces[:-1]:
        assert "split_procedure" in piece.findings


def test_procedure_with_step_n_markers() -> None:
    text = (
        "Follow these steps to reset a till:\n\n"
        + "\n".join(f"Step {n}: do the thing number {n} carefully and check it." for n in range(1, 7))
        + "\n"
    )
    starts = [text.index(f"Step {n}:") for n in range(1, 7)]
    chunks = md(text, max_size=120)
    assert len(chunks) > 1
    for chunk in chunks[1:]:
        assert chunk.start in starts and "Follow these steps to reset a till:" in chunk.embed_text


# ---------------------------------------------------------------------------------------------
# Tables


TABLE = """\
# Rates

Shipping rates by zone:

| Zone | Rate | Days |
|------|------|------|
| A | $5 | 2 |
| B | $7 | 3 |
| C | $9 | 4 |
| D | $11 | 5 |
| E | $13 | 6 |
"""
HEADER = "| Zone | Rate | Days |"


def test_table_that_fits_stays_whole() -> None:
    chunks = md(TABLE, max_size=200)
    assert len(chunks) == 1 and not chunks[0].findings


@pytest.mark.parametrize("max_size", [50, 60, 80, 100])
def test_table_that_does_not_fit_splits_between_rows_and_repeats_the_header(max_size: int) -> None:
    chunks = md(TABLE, max_size=max_size)
    row_starts = [m.start() for m in regex.finditer(r"(?m)^\|", TABLE)]
    row_ends = [m.start() for m in regex.finditer(r"(?m)\|$", TABLE)]
    table_start = TABLE.index(HEADER)
    assert len(chunks) > 1
    for chunk in chunks:
        if chunk.start > table_start:
            assert chunk.start in row_starts, f"a piece starts inside a row: {chunk.text[:20]!r}"
            assert HEADER in chunk.embed_text and "Shipping rates by zone:" in chunk.embed_text
        if table_start < chunk.end < len(TABLE.rstrip()):
            assert chunk.end - 1 in row_ends, f"a piece ends inside a row: {chunk.text[-20:]!r}"
            assert "split_table" in chunk.findings


# ---------------------------------------------------------------------------------------------
# Fenced code


CODE = (
    "Run this:\n\n```python\n"
    + "\n".join(f"value_{i} = compute({i}, factor={i * 3})" + ("\n" if i % 4 == 3 else "") for i in range(12))
    + "\n```\n\nDone.\n"
)


def test_code_that_fits_stays_whole_with_its_lead_in() -> None:
    chunks = md(CODE, max_size=500)
    assert len(chunks) == 1 and chunks[0].label == "python"


@pytest.mark.parametrize(
    ("unit", "max_size"), [("chars", 60), ("chars", 120), ("chars", 200), ("tokens", 40)]
)
def test_code_is_never_split_inside_a_line(unit: str, max_size: int) -> None:
    chunks = md(CODE, unit=unit, max_size=max_size)
    code_start, code_end = CODE.index("```python"), CODE.rindex("```") + 3
    line_starts = set(_line_starts(CODE, 0, len(CODE)))
    assert len(chunks) > 1
    for chunk in chunks:
        if code_start < chunk.start < code_end:
            assert chunk.start in line_starts, chunk.text[:30]
        if code_start < chunk.end < code_end:
            assert CODE[chunk.end] == "\n", chunk.text[-30:]
            assert "split_code" in chunk.findings
        if code_start + 12 < chunk.start < code_end:
            assert "Run this:" in chunk.embed_text
            assert chunk.label == "python"


def test_heading_inside_code_is_not_a_heading() -> None:
    text = "# Real\n\n```bash\n# install it\napt-get install x\n```\n\nAfter.\n"
    structure = scan(text)
    assert [h.title for h in structure.headings] == ["Real"]
    assert {c.section_path for c in md(text, max_size=20)} == {("Real",)}


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "Intro.\n\n```\ncode one\n# not a heading\ncode two\n"
    structure = scan(text)
    assert structure.headings == []
    [code] = [g for g in structure.groups if g.kind == "code"]
    assert code.end == len(text.rstrip("\n"))


# ---------------------------------------------------------------------------------------------
# Breadcrumbs, front matter, title


def test_section_path_breadcrumbs_atx_and_setext() -> None:
    text = """\
Guide
=====

Intro text.

Install
-------

Install text.

### Linux ###

Linux text.

#### Debian

Debian text.

## Upgrade

Upgrade text.

# Appendix

Appendix text.
"""
    chunks = md(text, max_size=30)
    paths = {c.text.splitlines()[-1]: c.section_path for c in chunks}
    assert paths["Intro text."] == ("Guide",)
    assert paths["Install text."] == ("Guide", "Install")
    assert paths["Linux text."] == ("Guide", "Install", "Linux")  # closing hashes are not in the title
    assert paths["Debian text."] == ("Guide", "Install", "Linux", "Debian")
    assert paths["Upgrade text."] == ("Guide", "Upgrade")  # a sibling resets deeper levels
    assert paths["Appendix text."] == ("Appendix",)
    upgrade = next(c for c in chunks if c.text.endswith("Upgrade text."))
    assert upgrade.embed_text.startswith("Guide > Upgrade\n\n")


def test_text_before_the_first_heading_has_an_empty_path() -> None:
    chunks = md("Preamble text here.\n\n# First\n\nBody.\n", max_size=25)
    assert chunks[0].section_path == () and chunks[-1].section_path == ("First",)


def test_thematic_break_is_not_a_setext_heading() -> None:
    text = "Para one.\n\n---\n\nPara two.\n"
    assert scan(text).headings == []


FRONT = """\
---
title: Returns and Refunds
owner: Dana
tags: [returns, refunds]
---

# Returns

Body text of the page.
"""


def test_front_matter_is_excluded_and_recorded_and_gives_the_title() -> None:
    result = split_document(FRONT, {"strategy": "markdown", "unit": "chars", "max_size": 200})
    end = FRONT.index("---\n\n") + 4  # through the closing fence's line
    assert result.exclusions == [(0, end, "front_matter")]
    assert result.title == "Returns and Refunds"
    assert result.metadata == {
        "title": "Returns and Refunds",
        "owner": "Dana",
        "tags": ["returns", "refunds"],
    }
    assert all(c.start >= end for c in result.chunks)
    assert "owner: Dana" not in "".join(c.text for c in result.chunks)
    assert result.chunks[0].embed_text.startswith("Returns and Refunds\nReturns\n\n")


def test_front_matter_kept_when_configured() -> None:
    result = split_document(
        FRONT, {"strategy": "markdown", "unit": "chars", "max_size": 200, "front_matter": "keep"}
    )
    assert result.exclusions == []
    assert result.chunks[0].start == 0 and "owner: Dana" in result.chunks[0].text


@pytest.mark.parametrize(
    "text",
    ["---\ntitle: x\n", "---\n---\nbody\n", "\n---\ntitle: x\n---\nbody\n"],
    ids=["unclosed", "empty", "not-at-start"],
)
def test_front_matter_edge_cases(text: str) -> None:
    result = split_document(text, {"strategy": "markdown", "unit": "chars", "max_size": 200})
    run_and_check(text, {"strategy": "markdown", "unit": "chars", "max_size": 200})
    if text.startswith("---\n---"):
        assert result.exclusions == [(0, 8, "front_matter")] and result.metadata == {}
    else:
        assert result.exclusions == []


def test_front_matter_with_invalid_yaml_is_still_excluded() -> None:
    text = "---\ntitle: [unclosed\n---\n# Real Title\n\nBody.\n"
    result = split_document(text, {"strategy": "markdown", "unit": "chars", "max_size": 200})
    assert result.exclusions == [(0, text.index("# Real"), "front_matter")]
    assert result.title == "Real Title"
    # libyaml's wording (front matter is parsed with yaml.CSafeLoader), PyYAML's without it.
    assert result.metadata["front_matter_error"] in (
        "invalid YAML in the front matter at line 3: did not find expected ',' or ']'; not used",
        "invalid YAML in the front matter at line 3: expected ',' or ']', but got '<stream end>'; not used",
    )
    assert list(result.metadata) == ["front_matter_error"]


def test_a_front_matter_alias_bomb_is_refused_at_once_and_its_metadata_dropped() -> None:
    """Nested ``&a``/``*a`` lists (461 bytes) expanded to millions of nodes in ``metadata_json`` (the run
    was killed at 150 s); now the expansion is measured on the node graph and refused with its line."""
    lines = ["---", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    text = "\n".join(lines) + "\n---\n# Title\n\nBody text.\n"
    started = time.perf_counter()
    result = split_document(text, {"strategy": "markdown", "unit": "chars", "max_size": 200})
    assert time.perf_counter() - started < 1.0
    assert result.exclusions == [(0, text.index("# Title"), "front_matter")]
    error = result.metadata["front_matter_error"]
    assert (
        error.startswith("front matter at line 6: YAML aliases expand this to more than 65,536")
        and "not used" in error
    )
    assert list(result.metadata) == ["front_matter_error"]
    # A modest use of aliases is still metadata.
    small = "---\nbase: &b {lang: en}\npage: *b\n---\n# T\n\nBody.\n"
    assert split_document(small, {"strategy": "markdown", "unit": "chars", "max_size": 200}).metadata == {
        "base": {"lang": "en"},
        "page": {"lang": "en"},
    }


def test_front_matter_with_crlf() -> None:
    text = "---\r\ntitle: Windows\r\n---\r\nBody.\r\n"
    assert front_matter_span(text) == (0, text.index("Body"), {"title": "Windows"})


def test_title_falls_back_to_first_h1_then_file_name() -> None:
    config = {"strategy": "markdown", "unit": "chars", "max_size": 200}
    assert split_document("## Sub\n\n# Main\n\ntext", config, "a.md").title == "Main"
    assert split_document("Just text.", config, "guides/return-policy_v2.md").title == "return policy v2"


def test_embed_text_context_switches() -> None:
    base = {"strategy": "markdown", "unit": "chars", "max_size": 200}
    text = FRONT
    full = split_document(text, base).chunks[0]
    none = split_document(text, {**base, "context": {"title": False, "headings": False}}).chunks[0]
    titled = split_document(text, {**base, "context": {"title": True, "headings": False}}).chunks[0]
    assert none.embed_text == none.text
    assert titled.embed_text == "Returns and Refunds\n\n" + titled.text
    assert full.embed_text == "Returns and Refunds\nReturns\n\n" + full.text


def test_title_equal_to_first_breadcrumb_is_not_repeated() -> None:
    chunk = md("# Returns\n\nBody text.\n")[0]
    assert chunk.embed_text == "Returns\n\n# Returns\n\nBody text."


atx_lines = st.lists(
    st.sampled_from(
        [
            " ",
            "  ",
            "   ",
            "    ",
            "\t",
            "#",
            "##",
            "######",
            "#######",
            "\r",
            "a",
            "b c",
            "é",
            "\u00a0",
            "\x0b",
            "\u2028",
            "x#",
            "#x",
            " #",
            "# ",
            "\\#",
        ]
    ),
    max_size=10,
).map("".join)


@settings(max_examples=3000, deadline=None)
@given(atx_lines)
def test_atx_headings_and_titles_are_what_the_full_pattern_says(line: str) -> None:
    """The scanner matches only a heading's opening and slices its title; the full pattern is the reference."""
    full = _ATX.match(line)
    opened = _ATX_OPEN.match(line)
    assert bool(full) == bool(opened)
    if full:
        assert len(opened.group(1)) == len(full.group(1))
        assert _atx_title(line, opened.end()) == (full.group(2) or "")


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["\n", "\r\n", " ", "\t", ">", "> ", "```", "~~~", "`", "x", "  >"]), max_size=16
    )
)
def test_quoted_fences_are_the_line_start_matches_of_the_pattern(pieces: list[str]) -> None:
    """``_quoted_fences`` finds what ``(?m)^`` before ``_QUOTED_FENCE`` finds, led by a line feed instead."""
    text = "".join(pieces)
    reference = re.compile(r"(?m)^" + _QUOTED_FENCE.pattern)
    assert _quoted_fences(text) == [(m.start(), m.end()) for m in reference.finditer(text)]


@settings(max_examples=400, deadline=None)
@given(
    rows=st.integers(3, 30),
    width=st.integers(1, 6),
    max_size=st.integers(120, 500),
    overlap=st.integers(5, 100),
    unit=st.sampled_from(["chars", "tokens"]),
)
def test_an_overlapping_chunk_never_starts_mid_row_or_mid_code_line(
    rows: int, width: int, max_size: int, overlap: int, unit: str
) -> None:
    """Overlap reaches back to a table row or code line start, or not at all (it used to start a chunk
    at "some text | 5 |", in the middle of a row)."""
    cells = " | ".join(f"cell {c} text" for c in range(width))
    table = (
        "| "
        + " | ".join(f"h{c}" for c in range(width))
        + " |\n|"
        + "---|" * width
        + "\n"
        + "".join(f"| row {r} {cells} |\n" for r in range(rows))
    )
    code = (
        "```python\n"
        + "".join(f"value_{r} = compute(alpha, beta, gamma, {r})\n" for r in range(rows))
        + "```\n"
    )
    text = f"# Data\n\nThe table lists the values:\n\n{table}\nAnd the code that makes them:\n\n{code}"
    overlap = min(overlap, max_size // 2) if unit == "chars" else min(overlap // 4, max_size // 8)
    config = {
        "strategy": "markdown",
        "unit": unit,
        "max_size": max_size if unit == "chars" else max_size // 4,
        "overlap": overlap,
        "min_size": 0,
    }
    chunks = md(text, **config)
    bodies = [(g.body_start, g.end) for g in scan(text).groups if g.kind in ("table", "code")]
    longest_line = max(len(line) for line in text.splitlines())
    if longest_line >= config["max_size"]:
        return  # a line that cannot fit is cut wherever it must be
    for chunk in chunks[1:]:
        inside = any(body < chunk.start < end for body, end in bodies)
        assert not inside or text[chunk.start - 1] == "\n", (
            chunk.start,
            text[chunk.start - 20 : chunk.start + 20],
        )


@pytest.mark.parametrize("strategy", ["markdown", "rst", "recursive"])
def test_classic_mac_line_ends_are_line_ends(strategy: str) -> None:
    """A file whose lines end with a lone CR (classic Mac OS) has headings, lines and paragraphs like
    any other: it used to be one line, so the first heading's title was the whole document, repeated
    in every chunk's section_path and embed_text."""
    if strategy == "rst":
        text = "Title\r=====\r\rFirst paragraph of the text. It has sentences.\r\rTwo\r---\r\rSecond section text.\r"
    else:
        text = (
            "# Title\r\rFirst paragraph of the text. It has sentences.\r\r## Two\r\rSecond section text.\r"
            "- item one\r- item two\r"
        )
    chunks = split_document(
        text, {"strategy": strategy, "unit": "chars", "max_size": 60, "overlap": 0, "budget": "text"}
    ).chunks
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert len(chunk.embed_text) < len(chunk.text) + 20, chunk.embed_text  # no document-long breadcrumb
    if strategy == "recursive":  # paragraph breaks are where the chunks end
        assert [c.text.split("\r")[0] for c in chunks] == ["# Title", "## Two"]
    else:
        assert [c.section_path for c in chunks][:2] == [("Title",), ("Title", "Two")]
        assert chunks[1].text.startswith("## Two" if strategy == "markdown" else "Two\r---")


@settings(max_examples=300, deadline=None)
@given(
    sections=st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 8), st.integers(0, 40)), min_size=1, max_size=8
    ),
    max_size=st.integers(40, 300),
    overlap=st.integers(1, 150),
)
def test_an_overlapping_chunk_never_starts_inside_a_heading(
    sections: list[tuple[int, int, int]], max_size: int, overlap: int
) -> None:
    """Overlap never reaches back into a heading line: a chunk began at "Data" of "# Data" (the heading
    the previous chunk started on), repeating it and its first paragraph."""
    text = "".join(
        f"{'#' * level} Heading number {words} of the text\n\n"
        + "Some words here. " * words
        + "\n\n"
        + "A lead-in sentence:\n\n1. first step\n2. second step\n\n" * (extra % 2)
        for level, words, extra in sections
    )
    chunks = md(text, unit="chars", max_size=max_size, overlap=min(overlap, max_size // 2), min_size=0)
    for heading in scan(text).headings:
        for chunk in chunks:
            assert not heading.start < chunk.start < heading.end, (heading, chunk.start, chunk.text[:40])


def test_front_matter_that_is_not_a_mapping_says_so_in_the_metadata() -> None:
    """It is still excluded as front matter, but its content is not dropped without a word."""
    document = split_document(
        "---\n- a\n- b\n---\nBody text.\n", {"strategy": "markdown", "unit": "chars", "max_size": 100}
    )
    assert document.metadata["front_matter_error"].startswith("front matter is a YAML list, not a mapping")
    assert [c.text for c in document.chunks] == ["Body text."] and document.exclusions[0][2] == "front_matter"


def test_an_html_comment_is_one_opaque_block() -> None:
    """CommonMark HTML block type 2: from '<!--' to the line holding '-->'. A fence, heading or list item
    inside it is none (a KEP template's comment holding "``` <<[UNRESOLVED ...]>>" opened a code block
    that swallowed the table of contents after it)."""
    text = (
        "# Title\n\nIntro.\n\n<!--\nNote:\n``` <<[UNRESOLVED context ]>> Stuff\nargued. <<[/UNRESOLVED]>> ```\n"
        "# not a heading\n- not an item\n-->\n\n- [Summary](#summary)\n  - [Goals](#goals)\n"
        "- [Design](#design)\n\nBody.\n<!-- an interrupting comment -->\n"
    )
    structure = scan(text)
    assert [h.title for h in structure.headings] == ["Title"]
    kinds = [(g.kind, text[g.start : g.end]) for g in structure.groups if g.kind != "section"]
    assert kinds == [("list", "- [Summary](#summary)\n  - [Goals](#goals)\n- [Design](#design)")]
    comment = text.index("<!--")
    assert comment in structure.positions  # the comment is a block: a boundary before it
    assert text.index("<!-- an") in structure.positions  # it interrupts a paragraph
    assert (
        text.index("# not") not in structure.positions
        or dict(zip(structure.positions, structure.scores, strict=True))[text.index("# not")] < 30
    )
    unclosed = scan("<!-- open\n# h\n```\n")
    assert not unclosed.headings and not [g for g in unclosed.groups if g.kind == "code"]


def _units(text: str) -> set[tuple[str, str]]:
    structure = scan(text)
    return {(g.kind, text[g.start : g.end]) for g in (*structure.groups, *structure.units)}


def test_lists_are_units_as_commonmark_delimits_them() -> None:
    # Nesting by each item's content column: '  1.' (indent 2 < column 3) is a sibling, not nested.
    text = (
        "Run these:\n\n1. Map the resources\n   - by group\n   - or fail\n1. For each group\n"
        "  1. exec the plugin\n  1. read its output\n\nAfter.\n"
    )
    steps = text[text.index("1. Map") : text.index("\n\nAfter")]
    units = _units(text)
    assert ("list", steps) in units
    assert ("procedure", "Run these:\n\n" + steps) in units
    assert ("list", "- by group\n   - or fail") in units
    # Another bullet character starts another list; a lazy line continues the item before it.
    text = "- a\n- b\n* c\n  more\nlazy text\n\nEnd.\n"
    units = _units(text)
    assert ("list", "- a\n- b") in units and ("list", "* c\n  more\nlazy text") in units
    # A "2." line cannot start a list inside a paragraph; after a blank line, a nested list ends at a
    # line indented less (right after its text, that line would be a lazy continuation).
    text = "- item\n  text\n  2. not a list\n    * nested\n    * nested too\n\n  back in the item\n"
    units = _units(text)
    assert not any(body.startswith("2. not") for _, body in units)
    assert ("list", "* nested\n    * nested too") in units
    # A link reference definition between a lead-in and its list is no block: the lead-in stays.
    text = "These are limited:\n\n[hooks]: https://example.com/hooks\n\n1. one\n1. two\n"
    assert ("procedure", text.strip()) in _units(text)
    # Fenced code inside an item belongs to it; an HTML comment between blocks is skipped.
    text = "1. step\n\n   ```\n   - not an item\n   ```\n2. next\n\n<!-- - no -->\n"
    units = _units(text)
    assert ("list", text[: text.index("2. next") + len("2. next")]) in units
    assert not any(body.startswith("- not") or body.startswith("- no") for _, body in units)


def test_every_commonmark_list_of_the_sample_corpus_is_a_unit() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    parser = markdown_it.MarkdownIt("commonmark").enable("table")
    checked = 0
    for path in sorted(KB.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        structure = scan(text, exclude_front_matter=True)
        offset = structure.front_matter[1] if structure.front_matter else 0
        body = text[offset:]
        line_starts = [offset, *(offset + i + 1 for i, ch in enumerate(body) if ch == "\n")]
        spans = {
            (g.start, g.end) for g in (*structure.groups, *structure.units) if g.kind in ("list", "procedure")
        }
        for token in parser.parse(body):
            if token.type not in ("bullet_list_open", "ordered_list_open") or token.map is None:
                continue
            begin = line_starts[token.map[0]]
            finish = line_starts[token.map[1]] if token.map[1] < len(line_starts) else len(text)
            piece = text[begin:finish]
            begin += len(piece) - len(piece.lstrip())
            finish = begin + len(text[begin:finish].rstrip())
            assert (begin, finish) in spans, (path.name, text[begin : begin + 60])
            checked += 1
    assert checked > 20


# Lists that once took the derived units quadratic time: the crossing check compared every unit with
# every CommonMark list within 20,000 characters (18 s on 0.5 MB of alternating nested items), and
# every line extended every open list (a deep staircase followed by lazy lines).
HOSTILE_LISTS = {
    "1 MB list": "- item text in a list of many items\n" * 28_000,
    "100,000 one-line items": "- a\n" * 100_000,
    "10 MB line in an item": "- " + "word " * 2_000_000,
    "1 MB of alternating nested items": "- a\n  - b\n" * 100_000,
    "700 deep, then 100,000 lazy lines": "".join("  " * i + "- x\n" for i in range(700)) + "lazy\n" * 100_000,
    "100,000 code lines in an item": "1. step\n\n   ```\n" + "   code\n" * 100_000 + "   ```\n",
    "100,000 quoted items, blank quote lines between": "> - a\n>\n" * 100_000,
    "1,000 quotes deep, 1,000 lines": ("> " * 1_000 + "- a\n") * 1_000,
    "10 MB quoted line": "> - " + "word " * 2_000_000,
}


@pytest.mark.parametrize("name", list(HOSTILE_LISTS))
@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_hostile_lists_scan_in_linear_time(name: str, native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from chunkyard.chunking import markdown

    if native and markdown._native is None:
        pytest.skip("the C scanner is not built")
    if not native:
        monkeypatch.setattr(markdown, "_native", None)
    text = HOSTILE_LISTS[name]
    started = time.process_time()
    structure = scan(text)
    elapsed = time.process_time() - started
    assert all(0 <= g.start < g.end <= len(text) for g in (*structure.groups, *structure.units))
    # Linear work takes a few seconds at most in pure Python; the quadratic steps took minutes.
    assert elapsed < 30, f"{name}: {elapsed:.1f} s"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=400), st.data())
def test_the_block_range_maximum_is_the_maximum_of_the_slice(values: list[int], data: st.DataObject) -> None:
    from chunkyard.chunking.markdown import _range_max

    query = _range_max(values)
    for _ in range(20):
        low = data.draw(st.integers(0, len(values) - 1))
        high = data.draw(st.integers(low + 1, len(values)))
        assert query(low, high) == max(values[low:high])


_spans = st.tuples(st.integers(0, 400), st.integers(0, 400)).map(sorted)


@settings(max_examples=300, deadline=None)
@given(
    units=st.lists(st.tuples(st.sampled_from(["list", "procedure", "code"]), _spans), max_size=40),
    lists=st.lists(_spans, min_size=1, max_size=150),
)
def test_units_crossing_a_list_are_dropped_as_a_pairwise_check_says(units, lists) -> None:
    """``_not_crossing`` (range queries; in C when it is built) and its Python reference against every
    pair: a list or procedure is dropped when a list starts inside it and ends after it, or ends
    inside it and starts before it."""
    from chunkyard.chunking.markdown import _not_crossing, _not_crossing_py
    from chunkyard.chunking.packer import Group

    nested = [Group(kind, a, b, a) for kind, (a, b) in units]
    found = [Group("list", a, b, a) for a, b in lists]

    def crosses(a: int, b: int) -> bool:
        return any((a < s < b < e) or (s < a < e < b) for s, e in lists)

    expected = [g for g in nested if g.kind == "code" or not crosses(g.start, g.end)]
    assert _not_crossing(nested, found) == expected
    assert _not_crossing_py(nested, found) == expected


QUOTED_LISTS = (
    "Intro.\n\n"
    "> That said, the annotation has a legacy name\n> and we should fix this. So:\n> \n"
    ">   1. When the flag is unset, delete both\n>      annotations.\n"
    ">   2. When it is set, write the new one:\n>      - on start\n>      - on change\n> \n"
    "> Kubelet keeps the existing behavior.\n\n"
    "> - a\n> > 1. quoted twice\n> >    more\n> >\n> - b\n\n"
    ">- tight\n>* other marker\n\nEnd.\n"
)


def test_lists_in_block_quotes_are_units_as_commonmark_delimits_them() -> None:
    """The line scanner reads a block quote as paragraphs; its lists are units all the same, each from
    the line's '>' to the end of its last item (with the quote's blank lines after it, as CommonMark's
    list reaches to the next line with text), at any quote depth."""
    markdown_it = pytest.importorskip("markdown_it")
    text = QUOTED_LISTS
    line_starts = [0, *(i + 1 for i, ch in enumerate(text) if ch == "\n")]
    structure = scan(text)
    spans = {(g.start, g.end) for g in structure.units if g.kind == "list"}
    expected = set()
    for token in markdown_it.MarkdownIt("commonmark").parse(text):
        if token.type in ("bullet_list_open", "ordered_list_open") and token.map is not None:
            begin = line_starts[token.map[0]]
            finish = line_starts[token.map[1]] if token.map[1] < len(line_starts) else len(text)
            piece = text[begin:finish]
            begin += len(piece) - len(piece.lstrip())
            expected.add((begin, begin + len(text[begin:finish].rstrip())))
    assert len(expected) == 7 and expected <= spans, sorted(expected - spans)
    procedure = text[text.index("> That said") : text.index("> Kubelet") - 2]
    assert ("procedure", procedure) in _units(text)
    chunks = md(text, max_size=len(procedure) + 10)
    assert any(c.start <= text.index("> That said") and c.end >= text.index("> Kubelet") - 2 for c in chunks)


def test_a_nested_list_that_fits_only_without_its_indentation_is_held_whole() -> None:
    """A chunk keeps the indentation of the line it starts on; a nested list of 200 characters indented
    by 6 is 206 with it, so a chunk may start at the list's first character (a boundary there)."""
    nested = "- " + "a" * 95 + "\n      - " + "b" * 94
    assert len(nested) == 200
    text = "Intro paragraph here.\n\n- Top item\n    - Second level\n      " + nested + "\n- After\n"
    begin = text.index("- aaa")
    finish = begin + len(nested)
    assert ("list", text[begin:finish]) in _units(text)
    chunks = md(text, max_size=len(nested))
    assert any(c.start <= begin and c.end >= finish for c in chunks), [(c.start, c.end) for c in chunks]
    assert begin in scan(text).positions and text.rfind("\n", 0, begin) + 1 in scan(text).positions


def test_a_fenced_block_in_an_item_that_fits_only_without_its_blanks_is_held_whole() -> None:
    """A code block's body starts at its fence, after its blanks (an item's, three): a chunk may start
    there without paying for a cut inside a code line, so a 200-character block (203 with its
    blanks) is one chunk at a budget of 200."""
    lines = ["```json", *(f'   "key{i}": "{"v" * 12}",' for i in range(6)), "   ```"]
    block = "\n".join(lines)
    block = block.replace("v" * 12, "v" * (12 + 200 - len(block)), 1)
    text = "Intro.\n\n   Text of an item, indented.\n\n   " + block + "\n\nAfter.\n"
    begin = text.index("```json")
    finish = begin + len(block)
    assert finish - begin == 200 and [g for g in scan(text).groups if g.kind == "code"][0].body_start == begin
    chunks = md(text, max_size=200)
    assert any(c.start <= begin and c.end >= finish for c in chunks), [(c.start, c.end) for c in chunks]
