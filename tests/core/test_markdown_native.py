"""The Markdown scanner in C (chunking/_mdscan.c) against the Python reference: the line scan
(``_scan_lines``) with the lines a block quote may open (``_quote_heads``), the lists as CommonMark
delimits them (``_commonmark_lists``) and the units read by indentation inside a list (``_indented_units``).

Both must give the same headings, boundaries, groups and units on every text: the real corpora, and
generated Markdown built from the pieces every line pattern looks at (markers, indents, tabs, CR, lone
CR, Unicode digits and spaces, pipes, colons, nested items, lazy lines, fences in items, block quotes),
at any start and end.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkyard.chunking import markdown, native
from chunkyard.chunking.packer import has_lone_cr

mdscan = markdown._native

needs_native = pytest.mark.skipif(
    mdscan is None, reason=f"chunkyard.chunking._mdscan: {native.status().get('_mdscan')}"
)


def test_the_accelerator_is_built_and_current_in_ci():
    """CI installs with a compiler: a missing or stale build there means the C scanner went untested."""
    if not os.environ.get("CI"):
        pytest.skip("only required in CI")
    assert mdscan is not None, native.status()


@needs_native
def test_the_build_is_stamped_with_its_source():
    assert mdscan.SOURCE_SHA256 == native.source_digest("_mdscan")


def test_a_stale_build_is_not_used(monkeypatch):
    monkeypatch.setattr(native, "_status", {})
    monkeypatch.delenv("CHUNKYARD_PURE_PYTHON", raising=False)
    monkeypatch.setattr(native, "source_digest", lambda name: "0" * 64)
    assert native.load("_mdscan") is None
    assert native.status()["_mdscan"].startswith("stale")


def test_the_pure_python_switch(monkeypatch):
    monkeypatch.setattr(native, "_status", {})
    monkeypatch.setenv("CHUNKYARD_PURE_PYTHON", "1")
    assert native.load("_mdscan") is None
    assert native.status()["_mdscan"].startswith("off")


def both(text: str, start: int = 0, end: int | None = None):
    """The line scan and the whole structure (``scan``), in Python and in C."""
    end = len(text) if end is None else end
    lone_cr = start < end and has_lone_cr(text, start, end)
    fast = markdown.scan(text, start, end)
    markdown._native = None
    try:
        reference = markdown.scan(text, start, end)
    finally:
        markdown._native = mdscan
    assert (
        fast.headings,
        fast.paths,
        fast.positions,
        fast.scores,
        fast.groups,
        fast.units,
        fast.front_matter,
        fast.metadata,
    ) == (
        reference.headings,
        reference.paths,
        reference.positions,
        reference.scores,
        reference.groups,
        reference.units,
        reference.front_matter,
        reference.metadata,
    )
    assert all(type(h) is markdown.Heading for h in fast.headings)
    assert all(type(g) is markdown.Group for g in (*fast.groups, *fast.units))
    same_lists(text, start, end)
    quote_heads = mdscan.structure(text, start, end, lone_cr, markdown.Heading, markdown.Group)[5]
    assert quote_heads == markdown._quote_heads(text, start, end, lone_cr)
    same_group_units(text, reference.groups)
    for group in reference.groups:
        if group.kind in ("list", "procedure"):
            same_indented_units(text, group.body_start, group.end)
    return markdown._scan_lines(text, start, end, lone_cr), mdscan.scan_lines(text, start, end, lone_cr)


def same_lists(text: str, start: int, end: int) -> None:
    fast = mdscan.commonmark_lists(text, start, end, markdown.Group)
    assert fast == markdown._commonmark_lists(text, start, end)
    assert all(type(g) is markdown.Group for g in fast)


def same_group_units(text: str, groups: list[markdown.Group]) -> None:
    fast = mdscan.group_units(text, groups, markdown.Group)
    assert fast == markdown._group_units(text, groups)
    assert all(type(g) is markdown.Group for g in fast)


def same_merged_units(nested: list, lists: list, groups: list) -> None:
    fast = mdscan.merged_units(nested, lists, groups)
    assert fast == markdown._merged_units(nested, lists, groups)
    assert all(a is b for a, b in zip(fast, markdown._merged_units(nested, lists, groups), strict=True))


def same_indented_units(text: str, begin: int, end: int) -> None:
    fast = mdscan.indented_units(text, begin, end, markdown.Group)
    assert fast == markdown._indented_units(text, begin, end)
    assert all(type(g) is markdown.Group for g in fast)


@needs_native
@pytest.mark.corpus
def test_same_structure_on_the_real_corpora(corpora_dir):
    checked = 0
    for path in sorted(corpora_dir.rglob("*")):
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        reference, fast = both(text)
        assert fast == reference, path
        checked += 1
    assert checked > 1000


PIECES = [
    "#",
    "##",
    "###### ",
    "####### ",
    "# Title",
    "Title #",
    " ##",
    "    #",
    "\t#",
    " ",
    "  ",
    "   ",
    "    ",
    "\t",
    "```",
    "````",
    "~~~",
    "~~~~",
    "```py",
    "``` a`b",
    "~~~ `x",
    "`",
    "-",
    "- ",
    "--",
    "---",
    "- - -",
    "* ",
    "***",
    "* * *",
    "+ ",
    "_",
    "___",
    "=",
    "===",
    "1. ",
    "1.",
    "12) ",
    "1234567890. ",
    "Step 3: ",
    "ſtep 2. ",
    "STEP 4)",
    "step\t5:",
    "stepx",
    "<!--",
    "   <!-- ",
    "-->",
    "<!-- x -->",
    "<",
    "|",
    "| a |",
    "|---|",
    ":-:",
    "|:--|--:|",
    "| - |",
    "a",
    "word",
    "end:",
    "é",
    "١. ",
    "²",
    "\u00a0",
    "\u2028",
    "\u3000",
    "中文",
    "😀",
    # 2-byte characters with a byte of "\n", "|" or ">" (0x0A, 0x7C, 0x3E): the C scanner's searches
    # (memchr of the low byte) must read each such hit as the whole character it is part of
    "\u0a0a\u7c0a\u3e7c\u010a\u0a3e\u2d2d",
    "\r",
    "\r\n",
    "\n",
    "\n\n",
    "\x0b",
    "\x1c",
    ">",
    "> ",
    ">>",
    "   > ",
    "    >",
    "\t> ",
    "> ```",
    "> - ",
]
lines = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
documents = st.lists(lines, max_size=30).map("\n".join)


@needs_native
@settings(max_examples=400, deadline=None)
@given(documents, st.data())
def test_same_structure_on_generated_markdown(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    for begin, stop in ((0, len(text)), (start, end)):
        reference, fast = both(text, begin, stop)
        assert fast == reference


@needs_native
@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "\r",
        "\r\n",
        "a",
        "# a",
        "a\rb\r\n|x|\r|-|\r",
        "```\ncode",
        "- a\n  - b\n\n    c\nd",
        "para:\n- a\n- b",
        "Title\n===\ntext",
        "x" * 10_000 + "\n# h",
        "| a |\n|---|\n| 1 |\n| 2 |\n\ntext",
        "<!--\n``` a\n- b\n# c\n-->\n- d",
        "text\n<!-- one -->\n- a\n<!-- x\n\n# h",
        "- a\n<!--\n-->\n  <!-- -->\n\t<!--",
        "\u0a0a\u7c0a a | b\u3e7c\n|\u7c0a-|---|\n| \u010a |\u0a7c\n<!-- \u3e2d\u2d3e -\u3e2d->\n\u0a0a-->\n# \u7c7c",
        "\u0a0a" * 40 + "\n" + "\u7c0a" * 40 + "|\n|-|\n" + "\u010a" * 3,
        "\u7c0a a\n|-|\n| x |",  # a byte 0x7C, no "|": no table
        "\u0a7c\u7c0a\n---|---\n\u7c7c",
        "<!--\n--\u3e2d\n# h\n",  # "--" and a byte 0x3E: the comment does not close
    ],
)
def test_same_structure_on_edge_cases(text):
    reference, fast = both(text)
    assert fast == reference


# Lines of lists: indents (spaces, tabs, mixed), markers (bullets, both ordered delimiters, start
# numbers, too many digits, Unicode digits), gaps after the marker, item text that opens another block,
# lazy text, block quotes, fences in items, HTML comments, link reference definitions, thematic breaks.
LIST_INDENTS = ["", " ", "  ", "   ", "    ", "     ", "      ", "        ", "\t", "\t\t", " \t", "  \t "]
LIST_MARKERS = [
    *("- ", "* ", "+ ", "-", "*", "-\t", "-     ", "1. ", "1) ", "2. ", "0. ", "7) ", "10. ", "123456789. "),
    *(
        "1234567890. ",
        "1.",
        "3.\t",
        "1.      ",
        "١. ",
        "Step 1: ",
        "> ",
        "> - ",
        ">",
        "- - -",
        "* * *",
        "***",
    ),
    *("---", "___", "", ""),
    *("-  ", "-   ", "-    ", "1.  ", "1.   ", "1.    ", "2)     ", "- \t", "*\t\t", "+ \t "),
]
LIST_TEXTS = [
    *("item", "text:", "Lead-in:", "", " ", "# heading", "## h", "####### x", "```", "~~~", "```go", "````"),
    *("> quote", "<!-- c", "<!-- c -->", "-->", "[ref]: http://x", "[]: y", "[a]:", "- nested", "1. n"),
    *("é ü", "中文", "😀", "\u00a0", "\u3000", "\x0b", "|a|b|", "===", "\r", " \r", "a\rb"),
]
# Whole lines that open, continue or close a block, so that fences and comments inside items close
# (or not) within a short document.
LIST_BLOCK_LINES = [
    *("```", "````", "```go", "``` x", "```  ", "~~~", "~~~~ ~", "``", "   ```", "  ~~~", "\t```", "```\r"),
    *("<!--", "-->", "x -->", "- a", "  - b", "    - c", "1. x", "2) y", "text", "lazy", "", " ", "> q"),
    *("***", "---", "___", "- - -", " * * *", "  ***", "[r]: u", "# h", "Step 2: s"),
    *("-    x", "1.    x", "  y", "   y", "    y", "     y", "      - z", "\t- z"),
]
list_lines = st.one_of(
    st.builds(
        lambda indent, marker, text, end: indent + marker + text + end,
        st.sampled_from(LIST_INDENTS),
        st.sampled_from(LIST_MARKERS),
        st.sampled_from(LIST_TEXTS),
        st.sampled_from(["\n", "\n", "\n", "\r\n", "\n\n"]),
    ),
    st.builds(lambda line: line + "\n", st.sampled_from(LIST_BLOCK_LINES)),
)
list_documents = st.lists(list_lines, max_size=40).map("".join)


@needs_native
@settings(max_examples=600, deadline=None)
@given(list_documents, st.data())
def test_same_lists_and_units_on_generated_lists(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    both(text)
    both(text, start, end)
    same_lists(text, start, end)
    same_indented_units(text, start, end)


@needs_native
@settings(max_examples=600, deadline=None)
@given(list_documents, st.data())
def test_same_group_units_at_any_offsets(text, data):
    """``group_units`` on groups placed anywhere (a procedure without a lead-in at every kind of
    position: the paragraph before it is looked for; lead-ins of every kind; bodies over any lines)."""
    size = len(text)
    offsets = st.integers(0, size)
    groups = []
    for _ in range(data.draw(st.integers(0, 8))):
        kind = data.draw(st.sampled_from(["procedure", "procedure", "list", "table", "code", "section"]))
        start, body, end = sorted(data.draw(st.tuples(offsets, offsets, offsets)))
        if data.draw(st.booleans()):
            body = start
        groups.append(markdown.Group(kind, start, end, body, label=data.draw(st.sampled_from(["", "py"]))))
    same_group_units(text, groups)


small_groups = st.builds(
    lambda kind, start, length, body: markdown.Group(kind, start, start + length, start + body),
    st.sampled_from(["list", "procedure", "code", "table", "section"]),
    st.integers(0, 6),
    st.integers(0, 4),
    st.integers(0, 2),
)


@needs_native
@settings(max_examples=1000, deadline=None)
@given(
    st.lists(small_groups, max_size=12),
    st.lists(small_groups, max_size=12),
    st.lists(small_groups, max_size=12),
)
def test_same_merged_units(nested, lists, groups):
    """``merged_units`` on few distinct offsets: many equal keys, so that the kinds, the known keys and
    the stable order all count (the very same objects, in the same order)."""
    same_merged_units(nested, lists, groups)


@needs_native
@pytest.mark.parametrize(
    "text",
    [
        "- a\n  - b\n    - c\nlazy\n\n  back\n* other\n",
        "1. one\n2. two\n3) three\n\n   ```\n   - in code\n   ```\n4. four\n",
        "Para:\n\n5. five\n6. six\n\ntext\n2. not a list\n",
        "- a\r\n  - b\r\n\r\n    c\r\n",
        "\t- tab\n\t\t- deeper\n  \t- mixed\n",
        "> - quoted\n> - items\n\n- a\n  ```\n  code\n",
        "- <!--\n- not\n-->\n- after\n",
        "".join("  " * i + "- x\n" for i in range(40)) + "lazy\n" * 5,
    ],
)
def test_same_lists_and_units_on_edge_cases(text):
    both(text)
    same_lists(text, 0, len(text))
    same_indented_units(text, 0, len(text))


@needs_native
def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        mdscan.scan_lines("abc", 2, 1, False)
    with pytest.raises(ValueError):
        mdscan.scan_lines("abc", 0, 4, False)
    with pytest.raises(ValueError):
        mdscan.group_units("abc", [markdown.Group("list", 0, 4, 0)], markdown.Group)
    with pytest.raises(TypeError):
        mdscan.group_units("abc", [("list", 0, 3)], markdown.Group)
    for function in (mdscan.commonmark_lists, mdscan.indented_units):
        with pytest.raises(ValueError):
            function("abc", 2, 1, markdown.Group)
        with pytest.raises(ValueError):
            function("abc", 0, 4, markdown.Group)
        with pytest.raises(TypeError):
            function("abc", 0, 3, dict)
