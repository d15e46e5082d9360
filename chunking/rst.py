"""A line scanner for reStructuredText structure: section titles, literal blocks, directives, lists, tables.

Like ``chunkyard.chunking.markdown.scan`` it does not render anything: the text chunked and stored is the
``.rst`` source itself, and the scanner only says where blocks begin and end, so the packer knows
the good boundaries and the spans to keep whole. It returns the same ``Structure`` as the Markdown
scanner, so the ``rst`` strategy shares the Markdown layout code.

Method: one pass over the lines, each block recognised at a block start (after a blank line):

* **Section titles**: a text line underlined (or over- and underlined) by a line of one repeated
  punctuation character at least as long as the title (or 3). As in docutils, levels are given by
  adornment style (character, with or without overline) in order of first appearance. Titles
  build ``section_path``; each title is a forced boundary and opens a section group.
* **Explicit markup** (``.. name:: argument`` directives such as ``code-block``, ``note``,
  ``image``; comments; ``.. _target:``; footnotes) with its indented body is one ``code`` group,
  kept whole when it fits and otherwise split between lines. Code directives (``code-block``,
  ``code``, ``sourcecode``) label the group with their language.
* **Literal blocks**: a paragraph ending in ``::`` followed by an indented block; the paragraph is
  the lead-in and the block is a ``code`` group with it.
* **Lists**: bullet (``-``, ``*``, ``+``, ``•``) and enumerated (``1.``, ``#.``, ``a)``, ``(iv)``)
  items with their indented bodies; enumerated lists are procedures. A paragraph ending in ``:``
  right before a list, table or directive is its lead-in, as in Markdown.
* **Tables**: grid tables (``+---+`` borders, ``+===+`` header separator) and simple tables
  (``=== ===`` borders); the header rows are the context repeated in ``embed_text`` of a split.
* Everything else is a paragraph (to the next blank line); blank lines are block boundaries.

Linear in the input: no recursion, no backtracking.
"""

from __future__ import annotations

import regex

from chunkyard.chunking.markdown import (
    BLOCK,
    CODE_BLANK,
    CODE_LINE,
    HEADING_BASE,
    LEAD_IN,
    LIST_CONTINUATION,
    LIST_ITEM_NESTED,
    LIST_ITEM_TOP,
    PARAGRAPH_LINE,
    TABLE_ROW,
    Heading,
    Structure,
    section_groups,
)
from chunkyard.chunking.packer import LINE_BREAK, Group, has_lone_cr

RST_SUFFIXES = {".rst", ".rest"}

_ADORNMENT = regex.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*\r?$")
_BLANK = regex.compile(r"[ \t]*\r?$")
_EXPLICIT = regex.compile(r"([ \t]*)\.\.(?:[ \t]+|\r?$)(?:([\w:+.-]+)::(?:[ \t]+(\S+))?)?")
_LIST_ITEM = regex.compile(
    r"([ \t]*)(?:([-*+\u2022\u2023\u2043])|(?:\d{1,9}|#|[A-Za-z]|[ivxlcdm]{1,6}|[IVXLCDM]{1,6})[.)]"
    r"|\((?:\d{1,9}|#|[A-Za-z]|[ivxlcdm]{1,6}|[IVXLCDM]{1,6})\))(?:[ \t]+|\r?$)"
)
_GRID_BORDER = regex.compile(r"[ \t]*\+(?:[-=]+\+)+[ \t]*\r?$")
_GRID_HEADER = regex.compile(r"[ \t]*\+(?:=+\+)+[ \t]*\r?$")
_SIMPLE_BORDER = regex.compile(r"[ \t]*=+(?:[ \t]+=+)+[ \t]*\r?$")
_CODE_DIRECTIVES = {"code-block", "code", "sourcecode", "highlight"}


class _Line:
    __slots__ = ("start", "end", "next", "text", "indent")

    def __init__(self, start: int, end: int, nxt: int, text: str) -> None:
        self.start, self.end, self.next, self.text = start, end, nxt, text
        self.indent = len(text.expandtabs(8)) - len(text.expandtabs(8).lstrip(" "))


def _lines(text: str) -> list[_Line]:
    out = []
    pos = 0
    end = len(text)
    lone_cr = has_lone_cr(text)  # classic Mac OS line ends: see chunkyard.chunking.packer.LINE_BREAK
    while pos < end:
        if lone_cr:
            found = LINE_BREAK.search(text, pos)
            newline = -1 if found is None else found.start()
        else:
            newline = text.find("\n", pos)
        stop = end if newline == -1 else newline
        nxt = end if newline == -1 else newline + 1
        out.append(_Line(pos, stop, nxt, text[pos:stop]))
        pos = nxt
    return out


def scan_rst(text: str) -> Structure:
    """Scan a reStructuredText document for its structure (see the module docstring)."""
    structure = Structure()
    lines = _lines(text)
    n = len(lines)
    end = len(text)
    boundaries: dict[int, int] = {}
    styles: list[tuple[str, bool]] = []  # adornment styles in order of first appearance
    stack: list[Heading] = []
    state = {"last_end": -1, "after_heading": False}
    prev_para: tuple[int, int, bool] | None = None  # (start offset, last line index, ends with ":")

    def blank(index: int) -> bool:
        return _BLANK.match(lines[index].text) is not None

    def mark(pos: int, score: int) -> None:
        if 0 < pos < end:
            boundaries[pos] = max(boundaries.get(pos, 0), score)

    def mark_block(pos: int) -> None:
        if not state["after_heading"]:  # a heading's first block stays with it
            mark(pos, BLOCK)

    def lead_in_start(block_start: int) -> int:
        if prev_para is not None and prev_para[2] and state["last_end"] == prev_para[1]:
            boundaries[block_start] = LEAD_IN
            return prev_para[0]
        mark_block(block_start)
        return block_start

    def finish_block(last: int, *, heading: bool = False) -> None:
        state["last_end"] = last
        state["after_heading"] = heading

    def add_heading(first: _Line, last: _Line, style: tuple[str, bool], title: str) -> None:
        if style not in styles:
            styles.append(style)
        level = styles.index(style) + 1
        heading = Heading(first.start, last.end, level, title.strip())
        while stack and stack[-1].level >= level:
            stack.pop()
        stack.append(heading)
        structure.headings.append(heading)
        structure.paths.append(tuple(h.title for h in stack))
        mark(first.start, HEADING_BASE - min(level, 6))

    def indented_body(first: int, indent: int) -> int:
        """Index of the last non-blank line of the block indented deeper than ``indent`` from ``first``."""
        last = first - 1
        j = first
        while j < n:
            if blank(j):
                j += 1
                continue
            if lines[j].indent <= indent:
                break
            last = j
            j += 1
        return last

    def mark_code_lines(first: int, last: int) -> None:
        for k in range(first, last + 1):
            if not blank(k):
                mark(lines[k].start, CODE_BLANK if k > 0 and blank(k - 1) else CODE_LINE)

    i = 0
    while i < n:
        line = lines[i]
        if blank(i):
            i += 1
            continue
        adornment = _ADORNMENT.match(line.text)
        # Over- and underlined title.
        if (
            adornment
            and line.indent == 0
            and i + 2 < n
            and not blank(i + 1)
            and not _ADORNMENT.match(lines[i + 1].text)
            and _ADORNMENT.match(lines[i + 2].text)
            and lines[i + 2].text.strip()[0] == adornment.group(1)
        ):
            add_heading(line, lines[i + 2], (adornment.group(1), True), lines[i + 1].text)
            finish_block(i + 2, heading=True)
            prev_para = None
            i += 3
            continue
        # Underlined title.
        if not adornment and line.indent == 0 and i + 1 < n:
            underline = _ADORNMENT.match(lines[i + 1].text)
            title = line.text.strip()
            if (
                underline
                and lines[i + 1].indent == 0
                and len(lines[i + 1].text.strip()) >= min(len(title), 3)
            ):
                add_heading(line, lines[i + 1], (underline.group(1), False), title)
                finish_block(i + 1, heading=True)
                prev_para = None
                i += 2
                continue
        if _GRID_BORDER.match(line.text) or _SIMPLE_BORDER.match(line.text):
            last, header_end = _table_extent(lines, i, n)
            anchor = lead_in_start(line.start)
            simple = _SIMPLE_BORDER.match(line.text) is not None
            for k in range(i + 2, last + 1):
                if lines[k].start <= header_end or blank(k):
                    continue
                if simple:
                    if not _SIMPLE_BORDER.match(lines[k].text):
                        mark(lines[k].start, TABLE_ROW)  # a row of a simple table
                elif _GRID_BORDER.match(lines[k - 1].text) and not _GRID_BORDER.match(lines[k].text):
                    mark(lines[k].start, TABLE_ROW)  # the first line of a grid row
            context = text[line.start : header_end] if header_end > line.start else ""
            lead = _lead_text(text, anchor, line.start)
            structure.groups.append(
                Group(
                    "table",
                    anchor,
                    lines[last].end,
                    line.start,
                    context="\n".join(part for part in (lead, context) if part),
                )
            )
            finish_block(last)
            prev_para = None
            i = last + 1
            continue
        if adornment:  # a transition
            mark_block(line.start)
            finish_block(i)
            prev_para = None
            i += 1
            continue
        explicit = _EXPLICIT.match(line.text)
        if explicit:
            anchor = lead_in_start(line.start)
            last = max(i, indented_body(i + 1, line.indent))
            mark_code_lines(i + 1, last)
            name = (explicit.group(2) or "").lower()
            label = (explicit.group(3) or "") if name in _CODE_DIRECTIVES else ""
            structure.groups.append(
                Group(
                    "code",
                    anchor,
                    lines[last].end,
                    line.start,
                    context=_lead_text(text, anchor, line.start),
                    label=label,
                )
            )
            finish_block(last)
            prev_para = None
            i = last + 1
            continue
        item = _LIST_ITEM.match(line.text)
        if item:
            anchor = lead_in_start(line.start)
            ordered = item.group(2) is None
            base = line.indent
            last = i
            j = i + 1
            while j < n:
                if blank(j):
                    j += 1
                    continue
                candidate = lines[j]
                sub = _LIST_ITEM.match(candidate.text)
                if candidate.indent > base:
                    if sub:
                        mark(candidate.start, LIST_ITEM_NESTED)
                    else:
                        mark(candidate.start, CODE_LINE if blank(j - 1) else LIST_CONTINUATION)
                elif candidate.indent == base and sub and (sub.group(2) is None) == ordered:
                    mark(candidate.start, LIST_ITEM_TOP)
                else:
                    break
                last = j
                j += 1
            structure.groups.append(
                Group(
                    "procedure" if ordered else "list",
                    anchor,
                    lines[last].end,
                    line.start,
                    context=_lead_text(text, anchor, line.start),
                )
            )
            finish_block(last)
            prev_para = None
            i = last + 1
            continue
        # Paragraph: to the next blank line (or a line that starts an explicit markup block).
        j = i + 1
        while j < n and not blank(j) and not _EXPLICIT.match(lines[j].text):
            j += 1
        mark_block(line.start)
        for k in range(i + 1, j):
            mark(lines[k].start, PARAGRAPH_LINE)
        para_text = text[line.start : lines[j - 1].end].rstrip()
        if para_text.endswith("::"):
            body = j
            while body < n and blank(body):
                body += 1
            last = indented_body(body, line.indent) if body < n else j - 1
            if body < n and last >= body:
                boundaries[lines[body].start] = LEAD_IN
                mark_code_lines(body + 1, last)
                structure.groups.append(
                    Group(
                        "code",
                        line.start,
                        lines[last].end,
                        lines[body].start,
                        context=_lead_text(text, line.start, lines[body].start),
                    )
                )
                finish_block(last)
                prev_para = None
                i = last + 1
                continue
        prev_para = (line.start, j - 1, para_text.endswith(":"))
        finish_block(j - 1)
        i = j

    structure.groups.extend(section_groups(structure.headings, end))
    structure.groups.sort(key=lambda g: (g.start, -g.end))
    structure.positions = sorted(boundaries)
    structure.scores = [boundaries[p] for p in structure.positions]
    return structure


def _table_extent(lines: list[_Line], first: int, n: int) -> tuple[int, int]:
    """(index of the table's last line, end offset of its header or -1) for a table at ``first``."""
    grid = _GRID_BORDER.match(lines[first].text) is not None
    header_end = -1
    if grid:
        j = first + 1
        last = first
        while j < n and lines[j].text.lstrip().startswith(("+", "|")):
            if header_end < 0 and _GRID_HEADER.match(lines[j].text):
                header_end = lines[j].end
            last = j
            j += 1
        return last, header_end
    # Simple table: borders at the top, under the header (optional) and at the bottom, which is
    # the first border after the top one followed by a blank line or the end.
    borders = [first]
    last = first
    for j in range(first + 1, n):
        if not _BLANK.match(lines[j].text):
            last = j
        if _SIMPLE_BORDER.match(lines[j].text):
            borders.append(j)
            if j + 1 >= n or _BLANK.match(lines[j + 1].text):
                break
    if len(borders) >= 3:
        header_end = lines[borders[1]].end
    return last, header_end


def _lead_text(text: str, anchor: int, body_start: int) -> str:
    return " ".join(text[anchor:body_start].split()) if anchor < body_start else ""
