"""Hostile shapes: one repeated piece of text each, at any size, and the configurations to chunk them with.

Each shape is a function of ``n`` (about ``n`` characters) that repeats what real files hold in
excess: runs of one character (stops, newlines, backticks, pipes), one-line paragraphs, deep
indentation, a script that changes the sentence rules (Thai, Devanagari, a lone CR), a long
code block, table or HTML nesting. ``CONFIGS`` covers every strategy, unit and overlap the segmenter
takes different paths for; ``READS`` goes through ``document_from_bytes`` first (the readers: HTML
extraction, reST, code, Markdown, text) and then ``auto``.

Two users: ``tests/core/test_hostile_shapes.py`` holds every chunk invariant on every shape ×
configuration, and ``benchmarks/growth_scan.py`` times each at ``n`` and ``4n`` to find superlinear
growth (each case the scan found, from 800,000 stops to lines ending with a lone CR, is a test of
its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chunkyard.chunking.api import ChunkedDocument, split_document
from chunkyard.chunking.documents import document_from_bytes

SHAPES: dict[str, Callable[[int], str]] = {
    "newlines": lambda n: "x\n" + "\n" * n + "y",
    "spaces": lambda n: "x " + " " * n + "y",
    "crlf": lambda n: "x\r\n" + "\r\n" * (n // 2) + "y",
    "ws-mix": lambda n: "x" + " \t\n" * (n // 3) + "y",
    "nbsp": lambda n: "x" + "\u00a0\u3000" * (n // 2) + "y",
    "oneline-paras": lambda n: "x\n\n" * (n // 3),
    "aaaa": lambda n: "a" * n,
    "cjk": lambda n: "漢字" * (n // 2),
    "dots": lambda n: "." * n,
    "sent-dots": lambda n: "a. " * (n // 3),
    "hashes": lambda n: "#\n" * (n // 2),
    "hash-line": lambda n: "#" * n,
    "fences": lambda n: "```\n" * (n // 4),
    "tildes": lambda n: "~" * n,
    "quotes": lambda n: ">" * n,
    "quote-lines": lambda n: "> a\n" * (n // 4),
    "pipes": lambda n: "|" * n,
    "table-rows": lambda n: "|a|b|\n|-|-|\n" + "|x|y|\n" * (n // 6),
    "dash-list": lambda n: "- x\n" * (n // 4),
    "nested-indent": lambda n: "".join(" " * (i % 200) + "- a\n" for i in range(n // 100)),
    "indent-spaces": lambda n: "- a\n" + " " * n + "b",
    "html-tags": lambda n: "<div>" * (n // 5),
    "backticks": lambda n: "`" * n,
    "stars": lambda n: "*" * n,
    "underscores": lambda n: "_ " * (n // 2),
    "brackets": lambda n: "[" * n,
    "front-matter": lambda n: "---\n" + "a: b\n" * (n // 5) + "---\ntext",
    "dashes-lines": lambda n: "---\n" * (n // 4),
    "setext": lambda n: "a\n===\n" * (n // 6),
    "combining": lambda n: "a" + "\u0301" * n,
    "zwj": lambda n: "👩‍" * (n // 3),
    "digits-list": lambda n: "1. x\n" * (n // 5),
    "long-word-lines": lambda n: ("w" * 3000 + "\n") * (n // 3001),
    "thai": lambda n: "สวัสดีครับ" * (n // 10),
    "danda": lambda n: "क।" * (n // 2),
    "thai-dots": lambda n: "\u0e01 " + "." * n,
    "cr-dots": lambda n: "a\rb" + "." * n,
    "fence-dots": lambda n: "```\n" + "." * n + "\n```\n",
    "table-dots": lambda n: "| a |\n|---|\n| " + "." * n + " |\n",
    "thai-spaced": lambda n: "สวัสดี ครับ " * (n // 12),
    "cr-lines": lambda n: "a.\r" * (n // 3),
    "excl-run": lambda n: "!?" * (n // 2) + "\n`",
    "ellipsis-lines": lambda n: ("." * 79 + "\n") * (n // 80),
    "abbrev-run": lambda n: "e.g." * (n // 4),
    "quotes-stops": lambda n: '."' * (n // 2),
    "html-dots": lambda n: "<p>" + "." * n + "</p>",
    "py-nested": lambda n: "".join(" " * (4 * (i % 50)) + f"def f{i}():\n" for i in range(n // 120)),
    "py-defs": lambda n: "def f():\n    pass\n\n" * (n // 20),
    "py-longfn": lambda n: "def f():\n" + "    x = 1\n" * (n // 10),
    "py-strings": lambda n: 'x = """' + "a\n" * (n // 2) + '"""\n',
    "py-brackets": lambda n: "x = " + "(" * (n // 2) + ")" * (n // 2),
    "py-comments": lambda n: "# c\n" * (n // 4),
    "py-classes": lambda n: "class A:\n" + "    def m(self):\n        pass\n" * (n // 30),
    "py-decorators": lambda n: "@d\n" * (n // 3) + "def f(): pass\n",
    "py-unterminated": lambda n: "'" * 3 + "a" * n,
    "rst-sections": lambda n: "Title\n=====\n\ntext\n\n" * (n // 20),
    "rst-underlines": lambda n: "a\n" + "=" * n + "\n",
    "rst-directives": lambda n: ".. note::\n\n   body\n\n" * (n // 20),
    "rst-nested-dir": lambda n: "".join(" " * (3 * (i % 60)) + ".. note::\n\n" for i in range(n // 100)),
    "rst-grid": lambda n: "+---+---+\n" + "| a | b |\n+---+---+\n" * (n // 20),
    "rst-literal": lambda n: "x::\n\n" + "    code\n" * (n // 9),
    "rst-bullets": lambda n: "* a\n" * (n // 4),
    "rst-colons": lambda n: ":" * n,
    "rst-dotdot": lambda n: ".. " * (n // 3),
    "rst-fields": lambda n: ":f: v\n" * (n // 6),
    "html-nest": lambda n: "<div>" * (n // 10) + "x" + "</div>" * (n // 10),
    "html-attrs": lambda n: "<p " + 'a="b" ' * (n // 6) + ">x</p>",
    "html-comment": lambda n: "<!--" + "a" * n,
    "html-open-tags": lambda n: "<p>x" * (n // 4),
    "html-headings": lambda n: "<h2>a</h2><p>b</p>" * (n // 18),
    "html-table": lambda n: "<table>" + "<tr><td>a</td><td>b</td></tr>" * (n // 29) + "</table>",
    "html-lists": lambda n: "<ul>" * (n // 8) + "<li>a" * (n // 8),
    "html-pre": lambda n: "<pre>" + "a\n" * (n // 2) + "</pre>",
    "html-entities": lambda n: "<p>" + "&amp;" * (n // 5) + "</p>",
    "html-script": lambda n: "<script>" + "a<" * (n // 2) + "</script>",
    "lt-run": lambda n: "<" * n,
}

# name -> (settings, the path the document is given: it picks the strategy's reader rules)
CONFIGS: dict[str, tuple[dict[str, Any], str | None]] = {
    "rec": ({"strategy": "recursive", "unit": "chars", "max_size": 1000}, None),
    "md": ({"strategy": "markdown", "unit": "chars", "max_size": 1000}, None),
    "sent": ({"strategy": "sentence", "unit": "chars", "max_size": 1000}, None),
    "mdtok": ({"strategy": "markdown", "unit": "tokens", "max_size": 512, "overlap": 64}, None),
    "recwords": ({"strategy": "recursive", "unit": "words", "max_size": 200, "min_size": 50}, None),
    "recov": ({"strategy": "recursive", "unit": "chars", "max_size": 1000, "overlap": 200}, None),
    "sentov": ({"strategy": "sentence", "unit": "words", "max_size": 200, "overlap": 40}, None),
    "rectok": ({"strategy": "recursive", "unit": "tokens", "max_size": 512, "overlap": 64}, None),
    "code": ({"strategy": "code", "unit": "chars", "max_size": 1000}, "x.py"),
    "codetok": ({"strategy": "code", "unit": "tokens", "max_size": 512, "overlap": 64}, "x.py"),
    "rst": ({"strategy": "rst", "unit": "chars", "max_size": 1000}, "x.rst"),
    "html": ({"strategy": "html", "unit": "chars", "max_size": 1000}, "x.html"),
    "fixed": ({"strategy": "fixed", "unit": "chars", "max_size": 1000, "overlap": 100}, None),
    "auto": ({"strategy": "auto", "unit": "chars", "max_size": 1000}, "x.md"),
}
# name -> the path a raw file is read as (``document_from_bytes``), then chunked by ``auto``
READS = {"htmlread": "x.html", "rstread": "x.rst", "pyread": "x.py", "mdread": "x.md", "txtread": "x.txt"}
READ_SETTINGS: dict[str, Any] = {"strategy": "auto", "unit": "chars", "max_size": 1000}
CASES = (*CONFIGS, *READS)


def prepared(text: str, case: str) -> tuple[str, dict[str, Any], str | None]:
    """What ``case`` chunks, with what settings and path: for a read, the text the reader extracts
    (``""`` when it skips the file)."""
    if case in READS:
        document = document_from_bytes(text.encode(), READS[case])
        return getattr(document, "text", ""), READ_SETTINGS, READS[case]
    settings, path = CONFIGS[case]
    return text, settings, path


def chunk(text: str, case: str) -> ChunkedDocument | None:
    """``text`` chunked as ``case`` says; None when a read skips it."""
    text, settings, path = prepared(text, case)
    return split_document(text, settings, path) if text or case not in READS else None
