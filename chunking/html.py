"""HTML → Markdown-like plain text: the text that HTML documents are chunked and stored as.

Why. Chunk offsets refer to the *extracted* text, which the dataset stores, so the extraction
decides what the reviewer reads and what the chunker can see. The text is written as Markdown
(ATX headings, ``1.`` / ``-`` list items, pipe tables, fenced code, ``>`` quotes) so that the
Markdown scanner (``chunkyard.chunking.markdown.scan``) finds sections, procedures, tables and code in it
and the ``html`` strategy can simply be the markdown strategy.

Method. selectolax's lexbor parser builds the DOM as a browser would (unclosed tags, stray end
tags, misnested tables are repaired by the HTML5 tree-construction rules), so nothing here has to
cope with broken markup. Elements hidden by attribute are removed with one CSS query before the
walk. Then one iterative depth-first walk (``first_child``/``next`` pointers and an explicit
stack, so hostile nesting cannot hit Python's recursion limit) drives a line writer:

* text nodes are collected into an inline buffer; a block boundary flushes it, collapsing runs of
  ASCII whitespace as a browser does (never inside ``<pre>``, whose text is collected raw);
* block elements ask for one or two line breaks before the next output (``need``), so nested
  ``<div>`` soup produces one blank line, not many;
* list items, ``<dd>`` and ``<blockquote>`` push a line prefix (3 spaces, 2 spaces, ``> ``) and
  list items set a one-shot marker (``- ``, ``3. ``) for their first line;
* table cells, captions and headings are written into a *flat* writer, where every block boundary
  is a space, and a table is rendered as a pipe table when it closes. A table whose cells hold
  headings or other tables is a layout table and is written as ordinary blocks instead.

Non-content elements (script, style, nav, head, comments, ...) are skipped with their subtree and
counted in ``exclusions``. The work per node is constant, so extraction is linear in the input;
the one super-linear cost, lexbor's handling of absurdly deep nesting, is avoided as browsers do:
in documents with thousands of start tags, tags nested deeper than 512 are removed before parsing
(text kept; counted in ``metadata["nesting_limited"]``).
``extract_html`` never raises: on an unexpected failure it returns empty text and says why in
``metadata["error"]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode


@dataclass
class HtmlExtraction:
    """The extracted text of one HTML document and what was left out of it."""

    text: str
    title: str = ""
    # One entry per kind of dropped content: {"kind": ..., "count": n, "chars": serialized size}.
    exclusions: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


# Elements whose subtree is not content. The kind recorded is the tag name.
_DROP_TAGS = frozenset(
    {
        "head",
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "iframe",
        "svg",
        "title",
        "object",
        "embed",
        "applet",
        "canvas",
        "audio",
        "video",
        "select",
        "datalist",
        # Raw-text elements whose "text" is unparsed markup.
        "noembed",
        "noframes",
        # Ruby annotations (readings above the base text: 漢<rt>kan</rt>): inline they would split every
        # annotated word ("漢kan字ji"); the base text stays.
        "rt",
        "rp",
    }
)
# Hidden by attribute: removed before the walk, recorded as kind "hidden".
_HIDDEN_SELECTOR = '[hidden], [aria-hidden="true" i], [style*="display:none" i], [style*="display: none" i]'

# Node kinds.
_INLINE, _BLOCK, _HEADING, _LIST, _ITEM, _QUOTE, _PRE, _TABLE, _ROW, _CELL, _CAPTION = range(11)
_THEAD, _DT, _DD, _HR, _BR, _DROP, _COMMENT, _TEXT = range(11, 19)
# Blocks that end a heading's line when they come after its text (see _Walker.enter).
_ENDS_HEADING = frozenset({_BLOCK, _HEADING, _LIST, _ITEM, _QUOTE, _PRE, _TABLE, _DT, _DD, _HR})

_KINDS: dict[str, int] = {tag: _DROP for tag in _DROP_TAGS}
_KINDS.update({"-text": _TEXT, "-comment": _COMMENT})
_KINDS.update(
    {
        tag: _BLOCK
        for tag in (
            "address",
            "article",
            "aside",
            "body",
            "center",
            "details",
            "dialog",
            "div",
            "dl",
            "fieldset",
            "figcaption",
            "figure",
            "footer",
            "form",
            "header",
            "hgroup",
            "legend",
            "main",
            "marquee",
            "p",
            "search",
            "section",
            "summary",
            "tbody",
            "tfoot",
            "frameset",
        )
    }
)
_KINDS.update({f"h{level}": _HEADING for level in range(1, 7)})
_KINDS.update({tag: _LIST for tag in ("ul", "ol", "menu", "dir")})
_KINDS.update({tag: _PRE for tag in ("pre", "listing", "xmp", "plaintext")})
_KINDS.update(
    {
        "li": _ITEM,
        "blockquote": _QUOTE,
        "table": _TABLE,
        "tr": _ROW,
        "td": _CELL,
        "th": _CELL,
        "caption": _CAPTION,
        "thead": _THEAD,
        "dt": _DT,
        "dd": _DD,
        "hr": _HR,
        "br": _BR,
    }
)


def _tag_ids() -> tuple[dict[int, int], dict[int, int], int]:
    """Node kinds and heading levels by lexbor tag id (an int is cheaper to read than a name)."""
    parser = LexborHTMLParser("<body><!--c-->t</body>")
    body = parser.body
    assert body is not None and body.first_child is not None and body.last_child is not None
    kinds = {body.first_child.tag_id: _COMMENT, body.last_child.tag_id: _TEXT}
    for name, kind in _KINDS.items():
        if not name.startswith("-"):
            kinds[parser.create_node(name).tag_id] = kind
    levels = {parser.create_node(f"h{level}").tag_id: level for level in range(1, 7)}
    return kinds, levels, parser.create_node("ol").tag_id


_KINDS_BY_ID, _HEADING_LEVELS, _OL_ID = _tag_ids()
_TEXT_ID = next(tag_id for tag_id, kind in _KINDS_BY_ID.items() if kind == _TEXT)
_HEAD_ID = LexborHTMLParser("").create_node("head").tag_id

# Exit actions pushed with a node's next sibling and run after its children.
(
    _X_NONE,
    _X_SPACE,
    _X_BLOCK,
    _X_HEADING,
    _X_LIST,
    _X_ITEM,
    _X_QUOTE,
    _X_PRE,
    _X_TABLE,
    _X_ROW,
    _X_CELL,
    _X_CAPTION,
    _X_THEAD,
    _X_DT,
    _X_DD,
    _X_LAYOUT,
) = range(16)

_WS = re.compile(r"[ \t\n\r\f]+")  # HTML whitespace; NBSP is content and is kept
# Line starts the Markdown scanner would misread in plain text: ATX headings, code fences, setext
# underlines (and a leading "---" would even be taken for front matter).
_MD_LINE_START = re.compile(r"#{1,6}(?:[ \t]|$)|`{3}|~{3}|[=-]+[ \t]*$")
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang)-([\w+#.-]+)")
_FENCE_IN_CODE = re.compile(r"(?m)^[ \t]*(`{3,})[ \t]*$")
_LEADING_BLANK_LINES = re.compile(r"^(?:[ \t\f\r]*\n)+")

# Permalink anchors that documentation generators append to headings ("Alias Directive ¶").
_PERMALINK = " \u00b6\U0001f517"
# lexbor's tree construction costs time proportional to the nesting depth for each start tag (it
# scans the stack of open elements), so 100,000 unclosed <div> take minutes. Like browsers
# (Chrome caps the depth at 512), start tags nested deeper than _MAX_NESTING are dropped with their
# end tags, keeping all text. Only documents with more than _NESTING_SCAN_FROM start tags are
# scanned: below that, even the worst nesting costs a few tens of milliseconds.
_MAX_NESTING = 512
_NESTING_SCAN_FROM = 4096
_MAX_PREFIX_DEPTH = 8  # deeper nesting is not indented further (keeps hostile input linear)
_MAX_LAYOUT_TABLES = 16  # layout-table detection queries the subtree; bound it under nesting
_MAX_COLSPAN = 50
_MAX_ROWSPAN = 1000
_BR_MARK = "\x00"  # marks <br> in the inline buffer; the parser drops NUL from text in <body>


# For the nesting scan: tags that never hold children, and the open tags each start tag closes
# implicitly (an approximation of the HTML5 tree-construction rules, enough to follow real pages).
_VOID_TAGS = frozenset(
    {
        "area",
        "base",
        "basefont",
        "bgsound",
        "br",
        "col",
        "embed",
        "frame",
        "hr",
        "image",
        "img",
        "input",
        "keygen",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "html",
        "head",
        "body",
    }
)
_CLOSES_P = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "ul",
    }
)
_IMPLIED_CLOSE: dict[str, frozenset[str]] = {
    "li": frozenset({"li", "p"}),
    "dt": frozenset({"dt", "dd", "p"}),
    "dd": frozenset({"dt", "dd", "p"}),
    "tr": frozenset({"tr", "td", "th"}),
    "td": frozenset({"td", "th"}),
    "th": frozenset({"td", "th"}),
    "thead": frozenset({"thead", "tbody", "tfoot", "tr", "td", "th"}),
    "tbody": frozenset({"thead", "tbody", "tfoot", "tr", "td", "th"}),
    "tfoot": frozenset({"thead", "tbody", "tfoot", "tr", "td", "th"}),
    "option": frozenset({"option"}),
    "optgroup": frozenset({"optgroup", "option"}),
    "rb": frozenset({"rb", "rt", "rp", "rtc"}),
    "rt": frozenset({"rb", "rt", "rp"}),
    "rp": frozenset({"rb", "rt", "rp"}),
    "rtc": frozenset({"rb", "rt", "rp", "rtc"}),
}
_IMPLIED_CLOSE.update({tag: frozenset({"p"}) for tag in _CLOSES_P})
_RAW_TEXT_TAGS = frozenset(
    {
        "script",
        "style",
        "textarea",
        "title",
        "xmp",
        "iframe",
        "noembed",
        "noframes",
        "noscript",
    }
)
# Attribute text stops at "<" (and quoted values are bounded): a "<" without a ">" must not make
# every later search scan to the end of the document. Possessive, so it never backtracks.
_TAG = re.compile(r"""<(?:(/?)([A-Za-z][^\s/<>]*)(?:[^<>"']|"[^"]{0,256}"|'[^']{0,256}')*+>|!--)""")
_RAW_TEXT_END = {name: re.compile(r"</" + name, re.IGNORECASE) for name in _RAW_TEXT_TAGS}


def _limit_nesting(source: str) -> tuple[str, int]:
    """Remove start tags nested deeper than ``_MAX_NESTING`` (with their end tags); count them.

    An approximate tokenizer and tree builder (comments and raw-text elements are skipped, void
    tags ignored, end tags and implied end tags pop the stack) that only has to recognise
    pathological nesting, in one linear pass.
    """
    stack: list[tuple[str, bool]] = []  # (tag name, removed)
    open_names: dict[str, int] = {}
    removed: list[tuple[int, int]] = []
    # The tags are read by one regex scan; a comment or raw-text element ends it, and the next
    # scan starts after it (``pos``; -1: nothing more to read).
    pos = 0
    while pos >= 0:
        resume, pos = pos, -1
        for match in _TAG.finditer(source, resume):
            closing, name = match.groups()
            if name is None:  # a comment
                close = source.find("-->", match.end())
                pos = -1 if close == -1 else close + 3
                break
            name = name.lower()
            if closing:  # an end tag: closes the innermost open element of that name
                if open_names.get(name):
                    while stack:
                        top, gone = stack.pop()
                        open_names[top] -= 1
                        if top == name:
                            if gone:
                                removed.append(match.span())
                            break
                continue
            if name in _RAW_TEXT_TAGS:
                close = _RAW_TEXT_END[name].search(source, match.end())
                pos = -1 if close is None else close.start()
                break
            if name == "plaintext":
                break
            if name in _VOID_TAGS:  # "<div/>" is an open <div> in HTML: only void tags are exempt
                continue
            closes = _IMPLIED_CLOSE.get(name)
            if closes:
                while stack and stack[-1][0] in closes:
                    open_names[stack.pop()[0]] -= 1
            gone = len(stack) >= _MAX_NESTING
            if gone:
                removed.append(match.span())
            stack.append((name, gone))
            open_names[name] = open_names.get(name, 0) + 1
    if not removed:
        return source, 0
    pieces, last = [], 0
    for start, end in removed:
        pieces.append(source[last:start])
        last = end
    pieces.append(source[last:])
    return "".join(pieces), len(removed)


def _collapse(text: str) -> str:
    if text.isascii():
        return " ".join(text.split())  # faster; for ASCII, split() differs only on rare controls
    return _WS.sub(" ", text).strip(" ")


def _escape(line: str) -> str:
    return "\\" + line if line[0] in "#`~=-" and _MD_LINE_START.match(line) else line


class _Table:
    __slots__ = ("layout", "rows", "row", "head_index", "in_head", "caption", "spanned")

    def __init__(self, layout: bool) -> None:
        self.layout = layout
        self.rows: list[list[str]] = []
        self.row: list[str] | None = None
        self.head_index = -1  # index of the first row that came from <thead>
        self.in_head = False
        self.caption = ""
        self.spanned: dict[int, int] = {}  # column -> rows below still covered by a rowspan above

    def skip_spanned(self, to_column: int = -1) -> None:
        """Empty cells in the current row for the columns a rowspan above covers, from the row's end
        (up to ``to_column`` too, at the end of the row), so the cells after them keep their columns."""
        row = self.row
        assert row is not None
        while len(row) in self.spanned or len(row) <= to_column:
            column = len(row)
            row.append("")
            if column in self.spanned:
                self.spanned[column] -= 1
                if not self.spanned[column]:
                    del self.spanned[column]

    def lines(self) -> list[str]:
        rows = [row for row in self.rows if any(row)]
        if not rows:
            return []
        head = (
            self.head_index
            if 0 <= self.head_index < len(self.rows) and any(self.rows[self.head_index])
            else -1
        )
        header = self.rows[head] if head >= 0 else rows[0]
        # Only the header is padded to the widest row (the delimiter row must match it); padding
        # every row would make a wide, long table quadratic in size.
        width = max(len(row) for row in rows)

        def line(cells: list[str]) -> str:
            return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"

        out = [line(header + [""] * (width - len(header))), "|" + "|".join([" --- "] * width) + "|"]
        out.extend(line(row) for row in rows if row is not header)
        return out


class _Writer:
    """Lines of Markdown-like text, built block by block.

    A *flat* writer (table cell, caption) keeps everything on one line; ``flat`` is also raised
    while a heading is open so that its content stays on the heading line.
    """

    __slots__ = (
        "out",
        "pending",
        "inline",
        "prefixes",
        "prefix",
        "marker",
        "marker_at",
        "flat",
        "raw",
        "language",
        "heading",
        "lists",
        "tables",
        "colspan",
        "rowspan",
        "first_h1",
        "open_headings",
    )

    def __init__(self, flat: bool = False) -> None:
        self.out: list[str] = []
        self.pending = 0  # line breaks owed before the next block
        self.inline: list[str] = []
        self.prefixes: list[str] = []
        self.prefix = ""
        self.marker: str | None = None  # a list item's marker, written before its first line
        self.marker_at = 0  # length of ``prefix`` when the marker was set
        self.flat = 1 if flat else 0
        self.raw: list[str] | None = None  # text of an open <pre>
        self.language = ""
        self.heading = 0
        self.lists: list[list[int]] = []  # [ordered, next number, len(out) when the list began]
        self.tables: list[_Table] = []
        self.colspan = 1
        self.rowspan = 1
        self.first_h1 = ""
        # One entry per heading element being walked: True while its text is still being collected,
        # False once a block inside it ended the heading line (an unclosed <h1> swallowing the page).
        self.open_headings: list[bool] = []

    def need(self, breaks: int) -> None:
        # An item whose marker is not written yet decided its own separation.
        if self.marker is None and breaks > self.pending:
            self.pending = breaks

    def push(self, prefix: str) -> None:
        self.prefixes.append(prefix)
        self.prefix = "".join(self.prefixes[:_MAX_PREFIX_DEPTH])

    def pop(self) -> None:
        if self.prefixes:
            self.prefixes.pop()
            self.prefix = "".join(self.prefixes[:_MAX_PREFIX_DEPTH])

    def open_item(self, marker: str, indent: str, breaks: int | None) -> None:
        """Start a list item or definition: ``breaks`` line breaks before it (None: at least 1)."""
        self.flush()
        if self.marker is not None:
            # The enclosing item has no text of its own (``<li><ul>``): its marker gets a line.
            self.emit([""])
        self.pending = breaks if breaks is not None else max(self.pending, 1)
        self.marker = self.prefix + marker
        self.push(indent)
        self.marker_at = len(self.prefix)

    def flush(self) -> None:
        """Write the inline buffer as one paragraph (several lines when it holds <br>)."""
        if not self.inline:
            return
        raw = "".join(self.inline)
        self.inline.clear()
        if raw.isspace():
            return
        if _BR_MARK in raw:
            lines: list[str] = []
            for part in raw.split(_BR_MARK):
                line = _collapse(part)
                if line and not line.isspace():
                    lines.append(_escape(line))
                elif lines and lines[-1]:
                    lines.append("")  # <br><br> separates paragraphs
            while lines and not lines[-1]:
                lines.pop()
            if lines:
                self.emit(lines)
            return
        line = _collapse(raw)
        if line and not line.isspace():
            self.emit([_escape(line)])

    def emit(self, lines: list[str], *, own_line: int = 0) -> None:
        """Write the lines of one block, after the line breaks owed, each with the line prefix.

        ``own_line``: the block is only recognised at the start of a line (a code fence), or after
        a blank line (a table), so a pending item marker is first written on a line of its own,
        followed by ``own_line`` line breaks.
        """
        if own_line and self.marker is not None:
            self.emit([""])
            self.pending = own_line
        out = self.out
        if out:
            out.append("\n" * max(self.pending, 1))
        self.pending = 0
        if not lines:
            return
        prefix = self.prefix
        line = lines[0]
        if self.marker is not None:
            head = self.marker + prefix[self.marker_at :]
            self.marker = None
            out.append(head + line if line else head.rstrip())
        else:
            out.append(prefix + line if line else "")
        if len(lines) > 1:  # the later lines, as one string (a code block can have thousands)
            rest = lines[1:]
            out.append("\n" + "\n".join([prefix + line if line else "" for line in rest] if prefix else rest))


class _CellWriter(_Writer):
    """The flat writer of a table cell or caption (one per cell, so it is built cheaply).

    Only the fields that a flat writer with no open heading reads are set: ``_Walker.enter``
    returns early for every element inside it (writing a space at most), so only the inline
    buffer fills. A field left unset would raise AttributeError if read, never pass silently.
    """

    __slots__ = ()

    def __init__(self, colspan: int = 1, rowspan: int = 1) -> None:
        self.inline = []
        self.raw = None
        self.flat = 1
        self.open_headings = []
        self.colspan = colspan
        self.rowspan = rowspan


def _code_lines(code: str, language: str) -> list[str]:
    code = _LEADING_BLANK_LINES.sub("", code).rstrip()
    if not code:
        return []
    # A line of backticks inside the code would close a shorter fence.
    longest = max((len(m) for m in _FENCE_IN_CODE.findall(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + language, *code.split("\n"), fence]


def _language(node: LexborNode) -> str:
    classes = node.attributes.get("class") or ""
    match = _LANGUAGE.search(classes)
    if match is None:
        child = node.first_child
        while child is not None and child.tag == "-text" and not (child.text_content or "").strip():
            child = child.next
        if child is not None and child.tag == "code":
            match = _LANGUAGE.search(child.attributes.get("class") or "")
    return match.group(1) if match else ""


def _int_attribute(node: LexborNode, name: str, default: int, low: int, high: int) -> int:
    return _int_value(node.attributes.get(name), default, low, high)


def _int_value(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int((value or "").strip())))
    except ValueError:
        return default


def _is_layout_table(node: LexborNode) -> bool:
    # css() matches the node itself too, hence "more than one table".
    return node.css_first("h1, h2, h3, h4, h5, h6") is not None or len(node.css("table")) > 1


class _Walker:
    def __init__(self) -> None:
        self.exclusions: dict[str, list[int]] = {}

    def record(self, kind: str, chars: int) -> None:
        entry = self.exclusions.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += chars

    def walk(self, root: LexborNode) -> _Writer:
        main = _Writer()
        writers = [main]
        w = main
        stack: list[tuple[int, LexborNode | None]] = []
        node = root.first_child
        kinds = _KINDS_BY_ID
        text_id = _TEXT_ID
        enter, leave = self.enter, self.leave
        # Where text goes: the current writer's inline buffer, or its raw text inside <pre>; read
        # again after every enter and leave, the only places that change the writer or its raw.
        inline, raw = w.inline, w.raw
        while True:
            if node is None:
                if not stack:
                    break
                action, node = stack.pop()
                if action:
                    w = leave(action, w, writers)
                    inline, raw = w.inline, w.raw
                continue
            tag_id = node.tag_id
            if tag_id == text_id:
                text = node.text_content
                if text:
                    if raw is not None:
                        raw.append(text)
                    elif inline or not text.isspace():  # leading white space would be stripped
                        inline.append(text)
                node = node.next
                continue
            kind = kinds.get(tag_id, _INLINE)
            if kind == _INLINE:
                action = _X_NONE
            elif kind == _DROP or kind == _COMMENT:
                if tag_id != _HEAD_ID or node.first_child is not None:  # not the parser's empty <head>
                    self.record("comment" if kind == _COMMENT else node.tag or "?", len(node.html or ""))
                node = node.next
                continue
            else:
                action = enter(kind, tag_id, node, w, writers)
                w = writers[-1]
                inline, raw = w.inline, w.raw
            child = node.first_child
            if child is None:
                if action:
                    w = leave(action, w, writers)
                    inline, raw = w.inline, w.raw
                node = node.next
            else:
                stack.append((action, node.next))
                node = child
        while len(writers) > 1:  # unbalanced only if the walk was cut short; be safe
            writers.pop()
        main.flush()
        return main

    def enter(self, kind: int, tag_id: int, node: LexborNode, w: _Writer, writers: list[_Writer]) -> int:
        if w.raw is not None:  # inside <pre>: only line breaks matter
            if kind == _BR:
                w.raw.append("\n")
            return _X_NONE
        if w.flat and not (
            kind in _ENDS_HEADING
            and w.open_headings
            and w.open_headings[-1]
            and w.flat == 1
            and "".join(w.inline).strip()
        ):
            if kind == _THEAD:
                return _X_NONE
            w.inline.append(" ")
            return _X_NONE if kind == _BR or kind == _HR else _X_SPACE
        if w.flat:
            # A block after the heading's text: the heading was never closed (``<h1>Title<p>...``,
            # which the parser nests in the h1). Its line ends here; the rest is written as body.
            self.end_heading(w)
            w.open_headings[-1] = False
        # Most frequent first: cells, rows and blocks are most of the elements that are not inline.
        if kind == _CELL or kind == _ROW or kind == _CAPTION:
            table = w.tables[-1] if w.tables else None
            if table is None or table.layout or (kind == _CELL and table.row is None):
                w.flush()
                w.need(2)
                return _X_BLOCK
            if kind == _ROW:
                table.row = []
                return _X_ROW
            if kind == _CAPTION:
                writers.append(_CellWriter())
                return _X_CAPTION
            attributes = node.attributes
            writers.append(
                _CellWriter(
                    _int_value(attributes.get("colspan"), 1, 1, _MAX_COLSPAN),
                    _int_value(attributes.get("rowspan"), 1, 1, _MAX_ROWSPAN),
                )
                if attributes
                else _CellWriter()
            )
            return _X_CELL
        if kind == _BLOCK:
            w.flush()
            w.need(2)
            return _X_BLOCK
        if kind == _BR:
            w.inline.append(_BR_MARK)
            return _X_NONE
        if kind == _HEADING:
            w.flush()
            w.need(2)
            w.flat += 1
            w.heading = _HEADING_LEVELS[tag_id]
            w.open_headings.append(True)
            return _X_HEADING
        if kind == _LIST:
            w.flush()
            w.need(1 if w.lists else 2)
            ordered = tag_id == _OL_ID
            start = _int_attribute(node, "start", 1, 0, 999_999_999) if ordered else 1
            w.lists.append([ordered, start, len(w.out)])
            return _X_LIST
        if kind == _ITEM:
            current = w.lists[-1] if w.lists else None
            if current is not None and current[0]:
                marker = f"{current[1]}. "
                current[1] = min(current[1] + 1, 999_999_999)
            else:
                marker = "- "
            # Items of one list are tight: one line break between them, once the list has output.
            w.open_item(marker, "   ", 1 if current is not None and len(w.out) > current[2] else None)
            return _X_ITEM
        if kind == _QUOTE:
            w.flush()
            w.need(2)
            w.push("> ")
            return _X_QUOTE
        if kind == _PRE:
            w.flush()
            w.need(2)
            w.raw = []
            w.language = _language(node)
            return _X_PRE
        if kind == _TABLE:
            w.flush()
            w.need(2)
            layouts = sum(1 for table in w.tables if table.layout)
            w.tables.append(_Table(layouts < _MAX_LAYOUT_TABLES and _is_layout_table(node)))
            return _X_LAYOUT if w.tables[-1].layout else _X_TABLE
        table = w.tables[-1] if w.tables else None
        if kind == _THEAD:
            if table is None or table.layout:
                return _X_NONE
            table.in_head = True
            return _X_THEAD
        if kind == _DT:
            w.flush()
            w.need(2)
            return _X_DT
        if kind == _DD:
            w.open_item(": ", "  ", None)
            return _X_DD
        if kind == _HR:
            w.flush()
            w.need(2)
            w.emit(["* * *"])  # not "---": that would be a setext underline or front matter
            w.need(2)
        return _X_NONE

    @staticmethod
    def end_heading(w: _Writer) -> None:
        """Write the open heading's line from the text collected so far."""
        w.flat -= 1
        text = _collapse("".join(w.inline)).rstrip(_PERMALINK)
        w.inline.clear()
        if text and not text.isspace():
            w.emit(["#" * w.heading + " " + text])
            if w.heading == 1 and not w.first_h1:
                w.first_h1 = text
        w.need(2)

    def leave(self, action: int, w: _Writer, writers: list[_Writer]) -> _Writer:
        # Most frequent first (see enter).
        if action == _X_CELL or action == _X_CAPTION:
            cell = writers.pop()
            w = writers[-1]
            text = _collapse("".join(cell.inline))
            table = w.tables[-1]
            if action == _X_CAPTION:
                table.caption = text
            elif table.row is not None:
                if table.spanned:
                    table.skip_spanned()
                column = len(table.row)
                table.row.append(text.replace("|", "\\|"))
                if cell.colspan > 1:
                    table.row.extend([""] * (cell.colspan - 1))
                if cell.rowspan > 1:
                    for covered in range(column, column + cell.colspan):
                        table.spanned[covered] = cell.rowspan - 1
        elif action == _X_ROW:
            table = w.tables[-1]
            if table.row and table.spanned:
                table.skip_spanned(max(table.spanned))
            row, table.row = table.row, None
            if row:
                if table.in_head and table.head_index < 0:
                    table.head_index = len(table.rows)
                table.rows.append(row)
        elif action == _X_SPACE:
            w.inline.append(" ")
        elif action == _X_BLOCK:
            w.flush()
            w.need(2)
        elif action == _X_LAYOUT:
            w.flush()
            w.tables.pop()
            w.need(2)
        elif action == _X_HEADING:
            if w.open_headings.pop():
                self.end_heading(w)
            else:  # ended early by a block inside it: what follows that block is body text
                w.flush()
                w.need(2)
        elif action == _X_LIST:
            w.flush()
            if w.lists:
                w.lists.pop()
            w.need(1 if w.lists else 2)
        elif action == _X_ITEM or action == _X_DD:
            w.flush()
            w.pop()
            w.marker = None  # an empty item is dropped
            w.need(1)
        elif action == _X_QUOTE:
            w.flush()
            w.pop()
            w.need(2)
        elif action == _X_PRE:
            lines = _code_lines("".join(w.raw or ()), w.language)
            w.raw = None
            if lines:
                w.emit(lines, own_line=1)
            w.need(2)
        elif action == _X_TABLE:
            w.flush()
            table = w.tables.pop()
            if table.caption:
                w.emit([_escape(table.caption)])
                w.need(2)
            lines = table.lines()
            if lines:
                w.emit(lines, own_line=2)
            w.need(2)
        elif action == _X_THEAD:
            w.tables[-1].in_head = False
        elif action == _X_DT:
            w.flush()
            w.need(1)
        return w


def _metadata(parser: LexborHTMLParser, root: LexborNode) -> tuple[str, dict[str, Any]]:
    metadata: dict[str, Any] = {}
    lang = (root.attributes.get("lang") or root.attributes.get("xml:lang") or "").strip()
    if lang:
        metadata["lang"] = lang
    title = ""
    head = parser.head
    if head is not None:
        title_node = head.css_first("title")
        if title_node is not None:
            title = _collapse(title_node.text())
        for meta in head.css("meta[name], meta[property]"):
            attributes = meta.attributes
            name = (attributes.get("name") or attributes.get("property") or "").strip().lower()
            content = _collapse(attributes.get("content") or "")
            if name in ("description", "keywords", "author", "og:description") and content:
                metadata.setdefault("description" if name == "og:description" else name, content)
    return title, metadata


def _extract(source: str | bytes) -> HtmlExtraction:
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    limited = 0
    # Few start tags: even the worst nesting is cheap to parse (see _NESTING_SCAN_FROM). End tags
    # are counted only when there are that many tags at all.
    tags = source.count("<")
    if tags > _NESTING_SCAN_FROM and tags - source.count("</") > _NESTING_SCAN_FROM:
        source, limited = _limit_nesting(source)
    # Lone surrogates (from a lenient decoder) cannot be encoded for the parser; replace them.
    parser = LexborHTMLParser(source.encode("utf-8", "replace"))
    root = parser.root
    if root is None:
        return HtmlExtraction("")
    title, metadata = _metadata(parser, root)
    if limited:
        metadata["nesting_limited"] = limited  # start/end tags removed to cap the depth
    walker = _Walker()
    # Reverse document order: a hidden element inside another is removed first, so no node is
    # touched after an ancestor has been freed.
    for node in reversed(parser.css(_HIDDEN_SELECTOR)):
        if node.mem_id == root.mem_id:
            continue  # the root cannot be removed; its content is still extracted
        walker.record("hidden", len(node.html or ""))
        node.decompose()
    main = walker.walk(root)
    text = "".join(main.out)
    if text:
        text += "\n"
    exclusions = [
        {"kind": kind, "count": count, "chars": chars} for kind, (count, chars) in walker.exclusions.items()
    ]
    return HtmlExtraction(text, title or main.first_h1, exclusions, metadata)


def extract_html(source: str) -> HtmlExtraction:
    """Extract the Markdown-like text, title, exclusions and metadata of an HTML document.

    Never raises: malformed or binary input gives whatever text a browser would show, at worst
    an empty text (with ``metadata["error"]`` when extraction itself failed).
    """
    try:
        return _extract(source)
    except Exception as exc:  # one bad file must not stop a batch run
        return HtmlExtraction("", "", [], {"error": f"{type(exc).__name__}: {exc}"})
