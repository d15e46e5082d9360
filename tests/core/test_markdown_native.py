"""The Markdown line scanner in C (chunking/_mdscan.c) against the Python reference (``_scan_lines``).

Both must give the same headings, boundaries and groups on every text: the real corpora, and
generated Markdown built from the pieces every line pattern looks at (markers, indents, tabs, CR, lone
CR, Unicode digits and spaces, pipes, colons), at any start and end.
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
        fast.front_matter,
        fast.metadata,
    ) == (
        reference.headings,
        reference.paths,
        reference.positions,
        reference.scores,
        reference.groups,
        reference.front_matter,
        reference.metadata,
    )
    assert all(type(h) is markdown.Heading for h in fast.headings)
    assert all(type(g) is markdown.Group for g in fast.groups)
    return markdown._scan_lines(text, start, end, lone_cr), mdscan.scan_lines(text, start, end, lone_cr)


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
    "\r",
    "\r\n",
    "\n",
    "\n\n",
    "\x0b",
    "\x1c",
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
    ],
)
def test_same_structure_on_edge_cases(text):
    reference, fast = both(text)
    assert fast == reference


@needs_native
def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        mdscan.scan_lines("abc", 2, 1, False)
    with pytest.raises(ValueError):
        mdscan.scan_lines("abc", 0, 4, False)
