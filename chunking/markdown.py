"""A line scanner for Markdown structure: front matter, headings, lists, tables, fenced code.

It does not render Markdown; it finds where blocks begin and end, so the packer knows which
boundaries are good (before a heading, between blocks, between list items or table rows) and which
spans should stay whole (a procedure with its lead-in sentence, a table, a code block, a section).
One pass over the lines; no recursion, no backtracking, so hostile input stays linear.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import yaml

from chunkyard.chunking import native, yamlbound
from chunkyard.chunking.packer import LINE_BREAK, Group, has_lone_cr

# The line scanner in C (chunking/_mdscan.c) when it was built and is current; else ``_scan_lines``.
_native = native.load("_mdscan")

# Line patterns in the standard ``re``: the same matches as ``regex`` here (no Unicode properties),
# at half the cost per call, and a line scanner calls them once or twice per line.
# An ATX heading is ``_ATX`` below; any line its opening matches is one (the title part can always
# match), and ``_atx_title`` finds the title the lazy group would, without the regex's backtracking
# (checked against ``_ATX`` on millions of random lines; tests/test_markdown.py keeps a sample).
# What front matter may expand to through YAML aliases (nodes + scalar characters, ``yamlbound``); it
# becomes the document's ``metadata_json``, so this also bounds that. Past it the front matter is still
# excluded from the chunks, but its metadata is dropped and ``front_matter_error`` says why.
FRONT_MATTER_MAX_EXPANSION = 65_536
_FRONT_MATTER_END = re.compile(r"^(?:---|\.\.\.)\r*$", re.MULTILINE)
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*\r?$")
_ATX_OPEN = re.compile(r" {0,3}(#{1,6})(?=[ \t]|\r?$)")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*\r?$")
_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*?\r?$")
_TABLE_DELIM = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\r?$")
_LIST_ITEM = re.compile(r"([ \t]*)(?:([-*+])|(\d{1,9})[.)]|(?i:step)[ \t]+(\d{1,9})[:.)])(?:[ \t]+|\r?$)")
_HR = re.compile(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})\r?$")
_BLANK = re.compile(r"[ \t]*\r?$")
# An HTML comment block (CommonMark HTML block type 2): from a line opening "<!--" to the line holding
# "-->" (or the text's end). Opaque: no heading, fence or list inside it is one.
_HTML_COMMENT = re.compile(r" {0,3}<!--")

# Boundary scores (see chunkyard.chunking.packer for the scale).
HEADING_BASE = 97  # h1 = 96 ... h6 = 91: all forced
BLOCK = 60
LIST_ITEM_TOP = 40
CODE_BLANK = 35
LIST_ITEM_NESTED = 32
TABLE_ROW = 30
LEAD_IN = 25
CODE_LINE = 22
PARAGRAPH_LINE = 15
TABLE_FIRST_ROW = 12
LIST_CONTINUATION = 12
AFTER_HEADING = 13  # the first block after a heading: only to keep a unit that fits with it whole


class Heading(NamedTuple):
    start: int
    end: int  # end of the heading line(s)
    level: int
    title: str


@dataclass
class Structure:
    """What the scanner found in one Markdown document."""

    headings: list[Heading] = field(default_factory=list)
    paths: list[tuple[str, ...]] = field(default_factory=list)  # breadcrumb at each heading
    positions: list[int] = field(default_factory=list)
    scores: list[int] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    units: list[Group] = field(default_factory=list)  # more spans to keep whole (``_add_derived_groups``)
    front_matter: tuple[int, int] | None = None
    metadata: dict = field(default_factory=dict)

    def section_path(self, pos: int) -> tuple[str, ...]:
        """The heading breadcrumb in force at ``pos`` (a heading starting at ``pos`` counts)."""
        i = bisect.bisect_right([h.start for h in self.headings], pos) - 1
        return self.paths[i] if i >= 0 else ()

    @property
    def title(self) -> str:
        title = self.metadata.get("title")
        if isinstance(title, str) and title.strip():
            return title.strip()
        for heading in self.headings:
            if heading.level == 1:
                return heading.title
        return ""


# The first character (after spaces and tabs) of a line that any block pattern above can match
# ("s" and "ſ" for "Step 1:"; any digit, as \d is Unicode); a line starting with anything else is
# paragraph text, and the scanner skips the patterns for it.
_MAY_START_BLOCK = frozenset("#`~=-*+_|\rsSſ<") | {""}
# The same, per pattern: a line whose first character (after spaces and tabs) is not in a pattern's
# set cannot match it, so the regex is not run (necessary conditions only; the regex decides).
_ATX_FIRST = frozenset("#")
_FENCE_FIRST = frozenset("`~")
_HR_FIRST = frozenset("*-_")
_SETEXT_FIRST = frozenset("=-")
_ITEM_FIRST = frozenset("-*+sSſ")  # and digits: \d is Unicode, and str.isdigit() covers it


def _may_be_rule(line: str, marker: str) -> bool:
    """Whether a list item line starting with ``marker`` is a thematic break ("- - -") instead."""
    return line.count(marker) >= 3 and _HR.match(line) is not None


def _atx_title(line: str, opened: int) -> str:
    """The title ``_ATX``'s lazy group captures: the rest of the line after the blanks that follow the
    opening ``#``s, without a closing ``#`` run (after a blank), trailing blanks and a final CR."""
    rest = line[opened:].lstrip(" \t")
    body = rest[:-1] if rest.endswith("\r") else rest
    body = body.rstrip(" \t")
    unclosed = body.rstrip("#")
    if unclosed != body and unclosed != unclosed.rstrip(" \t"):
        return unclosed.rstrip(" \t")
    return body


def _is_blank(line: str) -> bool:
    return not line or (line[0] in " \t\r" and _BLANK.match(line) is not None)


def _lines(text: str, start: int, end: int, lone_cr: bool) -> tuple[list[int], list[str]]:
    """Start offsets and texts (without the newline) of the lines of ``text[start:end]``."""
    if start >= end:
        return [], []
    segment = text[start:end]
    # A lone CR (classic Mac OS) ends a line too; a CR before LF stays in its line, as the patterns expect.
    texts = LINE_BREAK.split(segment) if lone_cr else segment.split("\n")
    if texts[-1] == "":
        texts.pop()  # the text ends with a newline: no line after it
    return list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=start)), texts


def front_matter_span(text: str) -> tuple[int, int, dict] | None:
    """YAML front matter (``---`` ... ``---``) at the very start: its span and parsed mapping.

    Front matter that is not a YAML mapping is still front matter (excluded from chunks), and its
    mapping is ``{"front_matter_error": why}`` so that the document's metadata says what was lost."""
    offset = 1 if text.startswith("\ufeff") else 0
    if not (text.startswith("---\n", offset) or text.startswith("---\r\n", offset)):
        return None
    pos = text.find("\n", offset) + 1
    # The closing line: ``---`` or ``...`` and nothing else but CRs, found by one search.
    closing = _FRONT_MATTER_END.search(text, pos)
    if closing is None:
        return None
    end = min(closing.end() + 1, len(text))  # with its newline, if it has one
    try:
        data = yamlbound.load(text[pos : closing.start()], FRONT_MATTER_MAX_EXPANSION)
    except yamlbound.YamlTooLarge as exc:  # an alias bomb: its expansion is never built
        return (
            offset,
            end,
            {"front_matter_error": f"front matter at line {exc.line + 1}: {exc.problem}; not used"},
        )
    except yaml.YAMLError as exc:
        return offset, end, {"front_matter_error": _yaml_problem(exc)}
    if data is None:
        return offset, end, {}
    if not isinstance(data, dict):
        return (
            offset,
            end,
            {
                "front_matter_error": f"front matter is a YAML {type(data).__name__}, not a "
                "mapping of keys to values; not used"
            },
        )
    return offset, end, data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for invalid front matter, with its line in the document (front matter starts on line 2)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 2}" if mark is not None else ""
    return f"invalid YAML in the front matter{where}: {problem}; not used"


def scan(
    text: str, start: int = 0, end: int | None = None, *, exclude_front_matter: bool = True
) -> Structure:
    """Scan ``text[start:end]`` for Markdown structure."""
    end = len(text) if end is None else end
    structure = Structure()
    fm = front_matter_span(text) if start == 0 else None
    if fm is not None:
        fm_start, fm_end, metadata = fm
        structure.metadata = {k: v for k, v in metadata.items() if isinstance(k, str)}
        if exclude_front_matter:
            structure.front_matter = (0, fm_end)  # a BOM before it is excluded with it
            start = min(fm_end, end)  # a range that ends inside the front matter scans nothing
    lone_cr = start < end and has_lone_cr(text, start, end)
    if _native is not None:  # the line scan and the steps below, in C
        (
            structure.headings,
            structure.paths,
            structure.positions,
            structure.scores,
            structure.groups,
            quote_heads,
        ) = _native.structure(text, start, end, lone_cr, Heading, Group)
        # The quote heads stand for the searches of "\n" then a quote marker only where the scan's
        # lines are the text's lines after a line feed, up to its end.
        lines_are_lf_lines = not lone_cr and end == len(text) and (start == 0 or text[start - 1] == "\n")
        _add_derived_groups(text, structure, start, end, quote_heads if lines_are_lf_lines else None)
        _add_unit_starts(text, structure)
        return structure
    headings, structure.positions, structure.scores, groups = _scan_lines(text, start, end, lone_cr)
    structure.headings = list(map(Heading._make, headings))
    structure.paths = _breadcrumbs(structure.headings)
    structure.groups = [
        Group(
            kind,
            anchor,
            group_end,
            body,
            context=_lead_text(text, anchor, body)
            if header_end < 0
            else _join_context(_lead_text(text, anchor, body), text[body:header_end]),
            label=label,
        )
        for kind, anchor, group_end, body, header_end, label in groups
    ]
    structure.groups.extend(section_groups(structure.headings, end))
    structure.groups.sort(key=lambda g: (g.start, -g.end))
    _add_derived_groups(text, structure, start, end)
    _add_unit_starts(text, structure)
    return structure


_BLANKS = re.compile(r"[ \t]*")


def _add_unit_starts(text: str, structure: Structure) -> None:
    """A boundary at the first character of each group or unit (not a section) that starts at or
    after the indentation of its line, where the line's start is a boundary: scored as that line
    start. A chunk keeps the indentation of the line it starts on (the packer), so a unit that fits
    without its line's indentation but not with it (a nested list, a fenced block or a lead-in inside
    an item) can be held whole only by a chunk starting at its first character. In C
    (``_mdscan.unit_starts``) when it is built; the reference is ``_unit_starts``
    (tests/core/test_markdown_native.py holds them equal)."""
    if _native is not None:
        if structure.positions:
            found = _native.unit_starts(
                text, structure.positions, structure.scores, structure.groups, structure.units
            )
            if found is not None:
                structure.positions, structure.scores = found
        return
    _unit_starts(text, structure)


def _unit_starts(text: str, structure: Structure) -> None:
    """``_add_unit_starts`` in Python, the reference."""
    positions, scores = structure.positions, structure.scores
    if not positions:
        return
    size = len(text)
    # Only a start with a blank before or at it can be on an indented line (most start a line).
    candidates = {
        start
        for group in itertools.chain(structure.groups, structure.units)
        if ((start := group[1]) < size and text[start] in " \t") or (start > 0 and text[start - 1] in " \t")
        if group[0] != "section"
    }
    added: dict[int, int] = {}
    for start in candidates:
        first = _BLANKS.match(text, start).end()
        line_start = text.rfind("\n", 0, start) + 1
        if line_start == first or text[line_start:start].strip(" \t"):
            continue  # not indented, or not at the line's first text
        k = bisect.bisect_left(positions, line_start)
        if k == len(positions) or positions[k] != line_start:
            continue
        j = bisect.bisect_left(positions, first, k)
        if j < len(positions) and positions[j] == first:
            continue
        added[first] = scores[k]
    if len(added) <= 16:  # a few: inserted in place
        for first, score in added.items():
            j = bisect.bisect_left(positions, first)
            positions.insert(j, first)
            scores.insert(j, score)
    else:  # the runs of ``positions`` between the new ones, copied whole (none of these is in it)
        new_positions: list[int] = []
        new_scores: list[int] = []
        done = 0
        for first in sorted(added):
            j = bisect.bisect_left(positions, first, done)
            new_positions += positions[done:j]
            new_positions.append(first)
            new_scores += scores[done:j]
            new_scores.append(added[first])
            done = j
        new_positions += positions[done:]
        new_scores += scores[done:]
        structure.positions, structure.scores = new_positions, new_scores


_START = operator.itemgetter(1)  # a Group's start
_END = operator.itemgetter(2)
# A fence line inside a block quote ("> ```"), from the line's start: at the text's start, or after a
# line feed (a pattern led by the literal is searched for four times faster than one led by ``(?m)^``).
_QUOTED_FENCE = re.compile(r"[ \t]{0,3}>[ \t]?(?:>[ \t]?)*(?:`{3,}|~{3,})")
_QUOTED_FENCE_AFTER_LF = re.compile(r"\n" + _QUOTED_FENCE.pattern)


def _quoted_fences(text: str, quote_heads: list[int] | None = None, start: int = 0) -> list[tuple[int, int]]:
    """(start, end) of each match of ``_QUOTED_FENCE`` at a line's start, in order.

    With ``quote_heads`` (``_quote_heads`` of ``text[start:]``, whose lines start at ``start`` and
    after each line feed), only those lines are tried past ``start``: a match begins with at most
    three blanks and ">", and quote lines are few, the lines of a document many."""
    if quote_heads is None or start > 0:
        first = _QUOTED_FENCE.match(text, 0, len(text) if quote_heads is None else start)
        found = [(first.start(), first.end())] if first is not None else []
        found.extend(
            (match.start() + 1, match.end())
            for match in _QUOTED_FENCE_AFTER_LF.finditer(text, 0, len(text) if quote_heads is None else start)
        )
    else:
        found = []
    if quote_heads is not None:
        match = _QUOTED_FENCE.match
        for line in quote_heads:
            fence = match(text, line)
            if fence is not None and (line == 0 or text[line - 1] == "\n"):
                found.append((line, fence.end()))
    return found


_QUOTE_HEAD = re.compile(r"[ \t]{0,3}>")


def _quote_heads(text: str, start: int, end: int, lone_cr: bool) -> list[int]:
    """The start of every line of ``text[start:end]`` (``_lines``) whose first character after at most
    three spaces or tabs is ">": every line a block quote's marker may open (``_QUOTE_PREFIX``,
    ``_QUOTED_FENCE``). The scanner in C gives them with the structure; this is its reference
    (tests/core/test_markdown_native.py holds them equal)."""
    starts, texts = _lines(text, start, end, lone_cr)
    return [pos for pos, line in zip(starts, texts, strict=True) if _QUOTE_HEAD.match(line)]


_BLOCK_LINE = re.compile(r"[ \t]*(?:#|```|~~~|\||>|[-*+][ \t]|\d{1,9}[.)][ \t])")


def _add_derived_groups(
    text: str,
    structure: Structure,
    start: int = 0,
    end: int | None = None,
    quote_heads: list[int] | None = None,
) -> None:
    """``structure.units``: spans the line scan does not make groups of, derived from the groups it makes,
    for the segmenter to keep whole when they fit (they give no context and no findings):

    - a ``list`` for each nested list inside a list or procedure: a run of item lines indented deeper
      than its list's first item, with the lines between them; it ends at a line indented less than
      its items (or as much, when not an item), and a ``procedure`` of it with the item that holds it;
      and a ``code`` group for a fenced block inside an item or a block quote;
    - the body alone (items, rows, code lines) of a group with a lead-in, which may fit when the two
      together do not;
    - a ``procedure`` for an ordered list with the paragraph right before it (a blank line between
      them at most) when that paragraph is not already its lead-in (one ending with ':');
    - the lists as CommonMark delimits them (``commonmark_lists``), those inside block quotes too
      (``quoted_lists``); a unit above that crosses one of them is dropped.

    ``quote_heads``: ``_quote_heads`` of ``text[start:]``, when the scan's lines are the text's lines
    (``scan``), so that block quotes are looked for only there.
    """
    nested = group_units(text, structure.groups)
    # With ``quote_heads`` and none of them, no line of ``text[start:]`` may open a block quote: no
    # fence in a quote is found after ``start`` (``_quoted_fences``), nor a quoted list (``quoted_lists``).
    no_quotes = quote_heads is not None and not quote_heads
    if ">" in text and not (no_quotes and start == 0):
        # Fenced code inside a block quote ("> ```"): the line scanner reads quotes as paragraphs.
        opening: int | None = None
        for fence_start, fence_end in _quoted_fences(text, quote_heads, start):
            if opening is None:
                opening = fence_start
            else:
                line_end = text.find("\n", fence_end)
                nested.append(Group("code", opening, len(text) if line_end == -1 else line_end, opening))
                opening = None
    # The lists as CommonMark reads them; a nested list or procedure found by indentation above that
    # crosses one of them (starts inside it and ends after it, or the reverse) is dropped: both cannot
    # lie whole in one chunk, and CommonMark's is the one a reader sees rendered.
    end = len(text) if end is None else end
    lists = [g for g in commonmark_lists(text, start, end) if g.end - g.start <= _CROSS_CHECK_LIMIT]
    if ">" in text and not no_quotes:
        lists.extend(
            g
            for g in quoted_lists(text, start, end, quote_heads=quote_heads)
            if g.end - g.start <= _CROSS_CHECK_LIMIT
        )
    if lists and any(g[0] in ("list", "procedure") for g in nested):  # else nothing to drop
        nested = _not_crossing(nested, lists)
    structure.units = merged_units(nested, lists, structure.groups)


def merged_units(nested: list[Group], lists: list[Group], groups: list[Group]) -> list[Group]:
    """``nested`` and the ``lists`` not already a list or procedure of ``nested`` or of ``groups`` (the
    same kind, start and end), sorted by (start, -end), stably (``_add_derived_groups``). In C
    (``_mdscan.merged_units``) when it is built; the reference is ``_merged_units``
    (tests/core/test_markdown_native.py holds them equal)."""
    if _native is not None:
        return _native.merged_units(nested, lists, groups)
    return _merged_units(nested, lists, groups)


def _merged_units(nested: list[Group], lists: list[Group], groups: list[Group]) -> list[Group]:
    """``merged_units`` in Python, the reference."""
    known = {g[:3] for g in nested if g[0] in ("list", "procedure")}
    known.update(g[:3] for g in groups if g[0] in ("list", "procedure"))
    merged = nested + [g for g in lists if g[:3] not in known]
    # By (start, -end), stable: by end descending, then by start.
    merged.sort(key=_END, reverse=True)
    merged.sort(key=_START)
    return merged


def group_units(text: str, groups: list[Group]) -> list[Group]:
    """The units derived from each of the scanned ``groups`` in turn (``_add_derived_groups``, the first
    three): a procedure with the paragraph before it, the body alone, the units read by indentation.
    In C (``_mdscan.group_units``) when it is built; the reference is ``_group_units``
    (tests/core/test_markdown_native.py holds them equal)."""
    if _native is not None:
        return _native.group_units(text, groups, Group)
    return _group_units(text, groups)


def _group_units(text: str, groups: list[Group]) -> list[Group]:
    """``group_units`` in Python, the reference."""
    nested: list[Group] = []
    for kind, anchor, group_end, body, _context, label in groups:
        if kind == "section":
            continue
        if kind == "procedure" and anchor == body:
            lead_in = _paragraph_before(text, anchor)
            if lead_in is not None:
                nested.append(Group("procedure", lead_in, group_end, body))
        if anchor < body and kind in ("procedure", "list", "table", "code"):  # with a lead-in: the body alone
            nested.append(Group(kind, body, group_end, body, label=label))
        if kind in ("list", "procedure") and text.find("\n", body, group_end) >= 0:
            nested.extend(_indented_units(text, body, group_end))
    return nested


def _not_crossing(nested: list[Group], lists: list[Group]) -> list[Group]:
    """``nested`` without the lists and procedures that cross one of ``lists`` (``_add_derived_groups``).
    In C (``_mdscan.not_crossing``) when it is built; the reference is ``_not_crossing_py``
    (tests/core/test_markdown_native.py holds them equal)."""
    if _native is not None:
        return _native.not_crossing(nested, lists, _CROSS_CHECK_LIMIT)
    return _not_crossing_py(nested, lists)


def _not_crossing_py(nested: list[Group], lists: list[Group]) -> list[Group]:
    """``_not_crossing`` in Python, the reference.

    Two range queries per unit: a list starting inside it that ends after it (the most any list
    starting there reaches), or one ending inside it that starts before it (the least start). A
    range of at most ``_RANGE_BLOCK`` values is read at once, the others by ``_range_max``."""
    by_start = sorted((g.start, g.end) for g in lists)
    starts = [a for a, _ in by_start]
    reaches = [b for _, b in by_start]
    furthest = _range_max(reaches)
    by_end = sorted((g.end, g.start) for g in lists)
    ends = [b for b, _ in by_end]
    lows = [-a for _, a in by_end]
    earliest = _range_max(lows)
    bisect_left, bisect_right = bisect.bisect_left, bisect.bisect_right
    kept = []
    for group in nested:
        kind, a, b = group[0], group[1], group[2]
        if (kind == "list" or kind == "procedure") and b - a <= _CROSS_CHECK_LIMIT:
            low, high = bisect_right(starts, a), bisect_left(starts, b)
            if (
                low < high
                and (max(reaches[low:high]) if high - low <= _RANGE_BLOCK else furthest(low, high)) > b
            ):
                continue
            low, high = bisect_right(ends, a), bisect_left(ends, b)
            if (
                low < high
                and -(max(lows[low:high]) if high - low <= _RANGE_BLOCK else earliest(low, high)) < a
            ):
                continue
        kept.append(group)
    return kept


_QUOTE_AFTER_LF = re.compile(r"\n {0,3}>")  # a line of a block quote (after the first)
_QUOTE_PREFIX = re.compile(r"( {0,3})>[ \t]?")  # its marker, with the one blank a marker takes
_QUOTE_DEPTH = 8  # quotes inside quotes: the lists of the first eight levels


def quoted_lists(
    text: str, start: int, end: int, depth: int = 0, quote_heads: list[int] | None = None
) -> list[Group]:
    """The lists inside the block quotes of ``text[start:end]`` as ``commonmark_lists`` delimits them,
    in offsets of ``text``: a block quote is a run of lines opening with ``>`` (after up to three
    spaces); its text is those lines without the marker (and one blank after it), read for lists as
    a document of its own, and for quotes inside it, to ``_QUOTE_DEPTH`` levels. A unit that starts a
    line of the quote starts at its ``>``, as a reader sees the quoted list begin. (Lazy continuation
    lines without a ``>`` end the quote here.) ``quote_heads`` (``_quote_heads`` of ``text[start:end]``,
    when its lines are the text's lines): the only lines a quote may start on, else searched for."""
    out: list[Group] = []
    pos = start
    head = 0  # the next of ``quote_heads`` to try
    while pos < end:
        if (pos == 0 or text[pos - 1] == "\n") and _QUOTE_PREFIX.match(text, pos, end):
            line = pos
        elif quote_heads is None:
            found = _QUOTE_AFTER_LF.search(text, pos, end)  # a literal first: a fast search
            if found is None:
                break
            line = found.start() + 1
        else:  # the first head after ``pos`` where the search above matches
            line = -1
            while head < len(quote_heads):
                at = quote_heads[head]
                head += 1
                if at > pos and text[at - 1] == "\n" and _QUOTE_PREFIX.match(text, at, end):
                    line = at
                    break
            if line < 0:
                break
        pieces: list[str] = []
        quoted_starts: list[int] = []  # where each line starts in the quote's text
        content_starts: list[int] = []  # where the same line's content starts in ``text``
        marks: list[int] = []  # the position of its ``>``
        size = 0
        while line < end:
            prefix = _QUOTE_PREFIX.match(text, line, end)
            if prefix is None:
                break
            newline = text.find("\n", line, end)
            line_end = end if newline == -1 else newline
            quoted_starts.append(size)
            content_starts.append(prefix.end())
            marks.append(line + len(prefix.group(1)))
            pieces.append(text[prefix.end() : line_end])
            size += line_end - prefix.end() + 1
            line = line_end + 1
        pos = line
        quoted = "\n".join(pieces)
        found_lists = commonmark_lists(quoted, 0, len(quoted))
        if depth + 1 < _QUOTE_DEPTH and ">" in quoted:
            found_lists.extend(quoted_lists(quoted, 0, len(quoted), depth + 1))
        if not found_lists:
            continue
        # For each line, the last line of the run of blank lines it starts (the line before it: none).
        blank_until = list(range(-1, len(pieces) - 1))
        for j in range(len(pieces) - 1, -1, -1):
            if not pieces[j].strip():
                blank_until[j] = blank_until[j + 1] if j + 1 < len(pieces) and blank_until[j + 1] > j else j
        lines = (quoted_starts, content_starts, marks, blank_until)
        out.extend(_unquoted(g, quoted, lines) for g in found_lists)
    return out


def _unquoted(group: Group, quoted: str, lines: tuple[list[int], list[int], list[int], list[int]]) -> Group:
    """``group`` of a block quote's text (``quoted_lists``) in offsets of the document: a start with
    only blanks before it on its line moves to the line's ``>``; the end takes in the quote's blank
    lines after it (to their last ``>``), as they belong to the list until the next line with text."""
    quoted_starts, content_starts, marks, blank_until = lines

    def opening(offset: int) -> int:
        i = bisect.bisect_right(quoted_starts, offset) - 1
        if not quoted[quoted_starts[i] : offset].strip():
            return marks[i]
        return content_starts[i] + offset - quoted_starts[i]

    i = bisect.bisect_right(quoted_starts, group.end - 1) - 1
    end = content_starts[i] + group.end - quoted_starts[i]
    if i + 1 < len(marks) and blank_until[i + 1] > i:
        end = marks[blank_until[i + 1]] + 1
    return Group(group.kind, opening(group.start), end, opening(group.body_start))


def _indented_units(text: str, begin: int, end: int) -> list[Group]:
    """The units read by indentation inside one list or procedure ``text[begin:end]`` (its body):
    a ``list`` per nested list, a ``procedure`` of it with the item that holds it, a ``code`` group
    per fenced block (``group_units``). In C as ``_mdscan.indented_units`` (and inside
    ``_mdscan.group_units``); this is the reference (tests/core/test_markdown_native.py holds them
    equal). One pass over the lines; the open nested lists' indents rise strictly, and every open
    list ends where the last non-blank line outside a fence does (one ``finish``), so each line
    costs a constant amortised."""
    nested: list[Group] = []
    base = -1
    fence: tuple[int, str] | None = None  # (start, marker) of a fenced code block inside the list
    open_lists: list[
        tuple[int, int, int]
    ] = []  # (indent, start, parent item start) of nested lists still open
    finish = begin  # the end of every open nested list
    items: list[tuple[int, int]] = []  # (indent, start) of the latest item lines
    pos = begin
    while pos < end:
        newline = text.find("\n", pos, end)
        line_end = end if newline == -1 else newline
        line = text[pos:line_end]
        stripped = line.lstrip(" \t")
        if fence is not None:
            if stripped.startswith(fence[1]) and not stripped.strip().strip(fence[1][0]):
                nested.append(Group("code", fence[0], len(line.rstrip()) + pos, fence[0]))
                fence = None
            pos = line_end + 1
            continue
        if stripped.startswith(("```", "~~~")):
            fence = (pos, stripped[:3])
        if stripped.strip():
            indent = len(line[: len(line) - len(stripped)].expandtabs(4))
            is_item = _LIST_ITEM.match(line) is not None
            if base < 0:
                base = indent
            while open_lists and (
                indent < open_lists[-1][0] or (indent == open_lists[-1][0] and not is_item)
            ):
                _indent, opened, parent = open_lists.pop()
                nested.append(Group("list", opened, finish, opened))
                if parent >= 0:  # the item that holds it, with its text: a procedure inside an item
                    nested.append(Group("procedure", parent, finish, opened))
            if is_item and indent > base and (not open_lists or open_lists[-1][0] < indent):
                parent = next((start for item_indent, start in reversed(items) if item_indent < indent), -1)
                open_lists.append((indent, pos, parent))
            if is_item:
                items.append((indent, pos))
                if len(items) > 64:
                    del items[:32]
            finish = len(line.rstrip()) + pos
        pos = line_end + 1
    for _indent, opened, parent in open_lists:
        nested.append(Group("list", opened, finish, opened))
        if parent >= 0:
            nested.append(Group("procedure", parent, finish, opened))
    return nested


_CROSS_CHECK_LIMIT = 20_000  # longer units are never kept whole by a budget in practice: not compared


_RANGE_BLOCK = 64


def _range_max(values: list[int]) -> Callable[[int, int], int]:
    """``query(low, high) == max(values[low:high])`` (low < high): the maxima of blocks of 64 values,
    so a query reads at most two part blocks and the whole blocks between (built in one pass). A
    crossing query's range holds only lists starting within ``_CROSS_CHECK_LIMIT`` characters, so
    each costs a bounded number of steps."""
    size = _RANGE_BLOCK
    blocks = [max(values[i : i + size]) for i in range(0, len(values), size)]

    def query(low: int, high: int) -> int:
        first, last = -(-low // size), high // size  # the whole blocks inside [low, high)
        if first >= last:
            return max(values[low:high])
        best = max(blocks[first:last])
        if low < first * size:
            best = max(best, max(values[low : first * size]))
        if last * size < high:
            best = max(best, max(values[last * size : high]))
        return best

    return query


# A list item's marker as CommonMark reads it: indentation, a bullet or 1-9 digits with '.' or ')',
# then white space or the line's end.
_CM_ITEM = re.compile(r"([ \t]*)([-+*]|([0-9]{1,9})[.)])([ \t]+|\r?$)")
_CM_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_CM_REFDEF = re.compile(r" {0,3}\[[^\]]+\]:[ \t]*\S")  # a link reference definition's line
_CM_MAY_MATTER = frozenset("-+*0123456789`~<#>|=_\r")  # first characters the full step must see
_CM_NOT_LAZY = re.compile(r"[ \t]*(?:#{1,6}(?:[ \t]|\r?$)|`{3,}|~{3,}|>|<!--)")


def _columns(prefix: str) -> int:
    return len(prefix.expandtabs(4))


def commonmark_lists(text: str, start: int, end: int) -> list[Group]:
    """Every list of ``text[start:end]`` as CommonMark delimits it (block structure only), as units: a
    ``list`` per list at any depth, and a ``procedure`` for an ordered list with the paragraph right
    before it in the same container. In C (``_mdscan.commonmark_lists``) when it is built; the
    reference is ``_commonmark_lists`` (tests/core/test_markdown_native.py holds them equal)."""
    if _native is not None:
        return _native.commonmark_lists(text, start, end, Group)
    return _commonmark_lists(text, start, end)


def _commonmark_lists(text: str, start: int, end: int) -> list[Group]:
    """``commonmark_lists`` in Python, the reference.

    The line scanner reads lists by indentation; CommonMark by each item's content column: a line
    belongs to an item when indented at least to the column its text starts at, a list ends at a line
    indented less that is not an item (or lazily continues a paragraph), and an item of another
    marker (another bullet, or '.' after ')') starts another list. One pass over the lines with a
    stack of open items; fenced code and HTML comments inside are skipped over. (Block quotes are
    not modelled here: ``quoted_lists`` reads each quote's text with this.) Linear: the open items'
    content columns rise strictly, so a line's depth is a bisection, and every open list ends where
    the last line that extends them does (one ``finish``).
    """
    out: list[Group] = []
    # Open levels, outermost first: [list start, ordered, marker, lead-in]; their content columns in ``columns``.
    levels: list[list] = []
    columns: list[int] = []
    finish_all = start  # the end of every open list: a line that extends one extends all
    fence: tuple[str, int] | None = None  # (marker, depth) of an open fenced block
    comment = False
    prev_para = False  # the previous line is paragraph text (a lazy continuation may follow)
    last_para: tuple[int, int] | None = None  # (start, depth) of the last block when it is a paragraph

    def close(depth: int) -> None:
        while len(levels) > depth:
            begin, ordered, _marker, lead = levels.pop()
            columns.pop()
            out.append(Group("list", begin, finish_all, begin))
            if ordered and lead is not None:
                out.append(Group("procedure", lead, finish_all, begin))

    pos = start
    while pos < end:
        newline = text.find("\n", pos, end)
        line_end = end if newline == -1 else newline
        line = text[pos:line_end]
        stripped = line.lstrip(" \t")
        finish = pos + len(line.rstrip())
        if not stripped.strip():
            prev_para = False
            pos = line_end + 1
            continue
        if not levels and fence is None and not comment and stripped[0] not in _CM_MAY_MATTER:
            # Paragraph text outside any list (most lines): only a possible lead-in to note.
            if not prev_para and not _CM_REFDEF.match(line):
                last_para = (pos + len(line) - len(stripped), 0)
                prev_para = True
            pos = line_end + 1
            continue
        indent = _columns(line[: len(line) - len(stripped)])
        depth = bisect.bisect_right(columns, indent)  # the open levels whose content column it reaches
        if comment:
            comment = "-->" not in line
            finish_all = finish
            pos = line_end + 1
            continue
        if fence is not None:
            marker, fence_depth = fence
            if depth >= fence_depth:
                if stripped.startswith(marker) and not stripped.strip().strip(marker[0]):
                    fence = None
                finish_all = finish
                pos = line_end + 1
                continue
            fence = None  # its container closed
        base = columns[depth - 1] if depth else 0
        item = _CM_ITEM.match(line) if indent - base <= 3 else None
        if item and item.group(2) in "-*" and _HR.match(line):
            item = None
        if item:
            number = item.group(3)
            empty = not line[item.end() :].strip()
            # Starting a list inside a paragraph: a bullet or '1', with text.
            if prev_para and depth == len(levels) and (empty or (number is not None and int(number) != 1)):
                item = None
        if item:
            marker = item.group(2)[-1]
            ordered = item.group(3) is not None
            after = item.group(4)
            width = _columns(line[: item.start(2)]) + len(item.group(2))
            gap = (
                len(after.expandtabs(4)) if after.strip(" \t") == "" and not line[item.end() :].strip() else 0
            )
            content = width + 1 if gap or len(after.expandtabs(4)) > 4 else width + len(after.expandtabs(4))
            if depth < len(levels) and levels[depth][2] == marker:
                close(depth + 1)
                columns[depth] = content
            else:
                close(depth)
                lead = last_para[0] if last_para is not None and last_para[1] == depth and ordered else None
                levels.append([pos + (len(line) - len(line.lstrip(" \t"))), ordered, marker, lead])
                columns.append(content)
            finish_all = finish
            text_after = line[item.end() :].strip()
            last_para = (pos, len(levels)) if text_after else None
            prev_para = bool(text_after) and not _CM_NOT_LAZY.match(line[item.end() :])
            pos = line_end + 1
            continue
        lazy = prev_para and not _CM_NOT_LAZY.match(line) and not _HR.match(line)
        if depth < len(levels) and not lazy:
            close(depth)
        if levels:
            finish_all = finish
        if lazy:
            pos = line_end + 1
            continue
        opening = _CM_FENCE.match(line)
        if opening and indent - base <= 3:
            fence = (opening.group(1)[:3], depth)
            last_para, prev_para = None, False
        elif _HTML_COMMENT.match(line[len(line) - len(stripped) :]) and indent - base <= 3:
            comment = "-->" not in line[line.index("<!--") + 4 :]
            last_para, prev_para = None, False
        elif _CM_NOT_LAZY.match(line) or _HR.match(line):
            last_para, prev_para = None, False
        elif not prev_para and _CM_REFDEF.match(line):
            pass  # a link reference definition: no block, so the paragraph before stays the lead-in
        else:
            if not prev_para:
                last_para = (pos + len(line) - len(stripped), depth)
            prev_para = True
        pos = line_end + 1
    close(0)
    return out


def _paragraph_before(text: str, pos: int) -> int | None:
    """Start of the paragraph that ends right before ``pos`` (one blank line between at most), if any."""
    end = pos
    while end > 0 and text[end - 1] in " \t\r\n":
        end -= 1
    if end == 0 or text[end:pos].count("\n") > 2:
        return None
    start = end
    for _ in range(64):  # a paragraph of at most 64 lines
        line_start = text.rfind("\n", 0, start - 1) + 1 if start > 0 else 0
        line = text[line_start:start].rstrip("\r\n")
        if not line.strip():
            return start if start < end else None
        if _BLOCK_LINE.match(line) or _SETEXT.match(line):
            return None
        start = line_start
        if start == 0:
            return 0
    return None


def _breadcrumbs(headings: list[Heading]) -> list[tuple[str, ...]]:
    """The heading path at each heading: the titles of the open headings of lower levels, then its own."""
    stack: list[Heading] = []
    titles: list[str] = []
    paths = []
    for heading in headings:
        while stack and stack[-1].level >= heading.level:
            stack.pop()
            titles.pop()
        stack.append(heading)
        titles.append(heading.title)
        paths.append(tuple(titles))
    return paths


RawHeading = tuple[int, int, int, str]  # start, end, level, title
RawGroup = tuple[
    str, int, int, int, int, str
]  # kind, start, end, body_start, end of a table's header (else -1), label


def _scan_lines(
    text: str, start: int, end: int, lone_cr: bool
) -> tuple[list[RawHeading], list[int], list[int], list[RawGroup]]:
    """The line scanner: headings, boundaries (positions and scores, sorted) and groups of
    ``text[start:end]``. ``chunking/_mdscan.c`` is the same scanner in C, used when it is built; this
    is the reference (tests/test_markdown_native.py holds them equal). ``lone_cr``: lines end at a lone
    CR too (``has_lone_cr``)."""
    starts, texts = _lines(text, start, end, lone_cr)
    # Lines no block pattern can match (most lines of prose): the loops below skip the regexes.
    firsts = [t.lstrip(" \t")[:1] for t in texts]
    plain_lines = [first not in _MAY_START_BLOCK and not first.isdigit() for first in firsts]
    boundaries: dict[int, int] = {}
    headings: list[RawHeading] = []
    groups: list[RawGroup] = []

    def mark(pos: int, score: int) -> None:
        if start < pos < end:
            boundaries[pos] = max(boundaries.get(pos, 0), score)

    i = 0
    n = len(texts)
    last_block_end_line = -1  # index of the last line of the previous block
    heading_lines: set[int] = set()  # last line index of every heading

    def mark_block(pos: int, score: int = BLOCK) -> None:
        # A heading's first block stays with it: right after a heading only a last-resort boundary
        # (the segmenter prices it as a heading left at a chunk's end).
        mark(pos, score if last_block_end_line not in heading_lines else AFTER_HEADING)

    prev_para: tuple[int, int] | None = None  # (start offset, line index) of the preceding paragraph
    prev_para_lead_in = False

    def add_heading(first: int, last: int, level: int, title: str) -> None:
        headings.append((starts[first], starts[last] + len(texts[last]), level, title.strip()))
        mark(starts[first], HEADING_BASE - level)

    def lead_in_start(block_start: int) -> int:
        if prev_para is not None and prev_para_lead_in and last_block_end_line == prev_para[1]:
            mark(block_start, LEAD_IN)
            boundaries[block_start] = LEAD_IN
            return prev_para[0]
        mark_block(block_start)
        return block_start

    while i < n:
        line_text, line_start = texts[i], starts[i]
        plain = plain_lines[i]
        if not plain and _is_blank(line_text):
            i += 1
            continue
        first = firsts[i]
        comment = None if plain or first != "<" else _HTML_COMMENT.match(line_text)
        if comment:
            j = i
            while j < n and "-->" not in (texts[j][comment.end() :] if j == i else texts[j]):
                j += 1
            last = min(j, n - 1)
            mark_block(line_start)
            for pos in starts[i + 1 : last + 1]:
                mark(pos, PARAGRAPH_LINE)
            last_block_end_line, prev_para = last, None
            i = last + 1
            continue
        fence = None if plain or first not in _FENCE_FIRST else _FENCE.match(line_text)
        atx = None if plain or first not in _ATX_FIRST else _ATX_OPEN.match(line_text)
        if atx and not fence:
            add_heading(i, i, len(atx.group(1)), _atx_title(line_text, atx.end()))
            heading_lines.add(i)
            last_block_end_line, prev_para = i, None
            i += 1
            continue
        if fence:
            marker, language = fence.group(2), fence.group(3)
            anchor = lead_in_start(line_start)
            j = i + 1
            while j < n:
                closing = texts[j].strip()
                if closing.startswith(marker[0] * len(marker)) and not closing.strip(marker[0]):
                    break
                j += 1
            last = min(j, n - 1)
            for k in range(i + 2, last + (0 if j < n else 1)):
                # mark(), inlined (code blocks are long; 0 < k, so the position is inside the range)
                score = CODE_BLANK if _is_blank(texts[k - 1]) else CODE_LINE
                if boundaries.get(starts[k], 0) < score:
                    boundaries[starts[k]] = score
            # The body starts at the fence itself, after its (at most three) blanks: a chunk may start there.
            body = line_start + len(fence.group(1))
            groups.append(("code", anchor, starts[last] + len(texts[last]), body, -1, language))
            last_block_end_line, prev_para = last, None
            i = last + 1
            continue
        if i + 1 < n and "|" in line_text and _TABLE_DELIM.match(texts[i + 1]):
            anchor = lead_in_start(line_start)
            j = i + 2
            while j < n and not _is_blank(texts[j]) and "|" in texts[j]:
                # Rows are boundaries; before the first row only as a last resort (header + row 1
                # too big), still better than cutting inside the row.
                score = TABLE_ROW if j > i + 2 else TABLE_FIRST_ROW  # mark(), inlined (0 < j)
                if boundaries.get(starts[j], 0) < score:
                    boundaries[starts[j]] = score
                j += 1
            groups.append(
                (
                    "table",
                    anchor,
                    starts[j - 1] + len(texts[j - 1]),
                    line_start,
                    starts[i + 1] + len(texts[i + 1]),
                    "",
                )
            )
            last_block_end_line, prev_para = j - 1, None
            i = j
            continue
        item = None if plain or not (first in _ITEM_FIRST or first.isdigit()) else _LIST_ITEM.match(line_text)
        if item and not (item.group(2) and _may_be_rule(line_text, item.group(2))):
            anchor = lead_in_start(line_start)
            base_indent = len(item.group(1).expandtabs(4))
            ordered = item.group(2) is None
            j = i + 1
            last = i
            while j < n:
                candidate_text = texts[j]
                if _is_blank(candidate_text):
                    j += 1
                    continue
                candidate_plain = plain_lines[j]
                candidate_first = firsts[j]
                sub = (
                    None
                    if candidate_plain or not (candidate_first in _ITEM_FIRST or candidate_first.isdigit())
                    else _LIST_ITEM.match(candidate_text)
                )
                indent = len(candidate_text) - len(candidate_text.lstrip(" \t"))
                if sub and not (sub.group(2) and _may_be_rule(candidate_text, sub.group(2))):
                    sub_indent = len(sub.group(1).expandtabs(4))
                    if sub_indent < base_indent:
                        break
                    score = LIST_ITEM_TOP if sub_indent <= base_indent + 1 else LIST_ITEM_NESTED
                    if boundaries.get(starts[j], 0) < score:  # mark(), inlined (0 < j)
                        boundaries[starts[j]] = score
                elif indent > base_indent or (
                    j == last + 1
                    and (
                        candidate_plain
                        or (
                            not (candidate_first in _ATX_FIRST and _ATX_OPEN.match(candidate_text))
                            and not (candidate_first in _FENCE_FIRST and _FENCE.match(candidate_text))
                            and not (candidate_first == "<" and _HTML_COMMENT.match(candidate_text))
                        )
                    )
                ):
                    # Continuation: indented, or a lazy line right after the item's text.
                    blank_before = _is_blank(texts[j - 1])
                    score = CODE_LINE if blank_before else LIST_CONTINUATION
                    if boundaries.get(starts[j], 0) < score:  # mark(), inlined (0 < j)
                        boundaries[starts[j]] = score
                else:
                    break
                last = j
                j += 1
            kind = "procedure" if ordered else "list"
            groups.append((kind, anchor, starts[last] + len(texts[last]), line_start, -1, ""))
            last_block_end_line, prev_para = last, None
            i = last + 1
            continue
        if not plain and first in _HR_FIRST and _HR.match(line_text):
            mark_block(line_start)
            last_block_end_line, prev_para = i, None
            i += 1
            continue
        # Paragraph: runs until a blank line or a line that starts another block.
        j = i + 1
        setext_level = 0
        while j < n:
            if plain_lines[j]:
                j += 1
                continue
            following = texts[j]
            if _is_blank(following):
                break
            lead = firsts[j]
            setext = _SETEXT.match(following) if lead in _SETEXT_FIRST else None
            if setext and j == i + 1 and not _LIST_ITEM.match(line_text):
                setext_level = 1 if setext.group(1)[0] == "=" else 2
                break
            if (
                (lead in _ATX_FIRST and _ATX_OPEN.match(following))
                or (lead in _FENCE_FIRST and _FENCE.match(following))
                or (lead in _HR_FIRST and _HR.match(following))
                or (lead == "<" and _HTML_COMMENT.match(following))
            ):
                break
            if lead in _ITEM_FIRST or lead.isdigit():
                following_item = _LIST_ITEM.match(following)
                if following_item and not following_item.group(1):
                    break
            j += 1
        if setext_level:
            add_heading(i, i + 1, setext_level, line_text)
            heading_lines.add(i + 1)
            last_block_end_line, prev_para = i + 1, None
            i += 2
            continue
        mark_block(line_start)
        for pos in starts[i + 1 : j]:  # mark(pos, PARAGRAPH_LINE), inlined: prose has many lines
            if boundaries.get(pos, 0) < PARAGRAPH_LINE:
                boundaries[pos] = PARAGRAPH_LINE
        para_text = text[line_start : (starts[j - 1] + len(texts[j - 1]))].rstrip()
        prev_para, prev_para_lead_in = (line_start, j - 1), para_text.endswith(":")
        last_block_end_line = j - 1
        i = j

    ordered_positions = sorted(boundaries)
    return headings, ordered_positions, [boundaries[p] for p in ordered_positions], groups


def section_groups(headings: list[Heading], end: int) -> list[Group]:
    """A group per heading, from it to the next heading of the same or a higher level (one pass)."""
    ends = [end] * len(headings)
    open_sections: list[int] = []  # indexes of headings whose section is still open
    for index, heading in enumerate(headings):
        while open_sections and headings[open_sections[-1]].level >= heading.level:
            ends[open_sections.pop()] = heading.start
        open_sections.append(index)
    return [Group("section", h.start, ends[i], h.end, context=h.title) for i, h in enumerate(headings)]


def _lead_text(text: str, anchor: int, body_start: int) -> str:
    return " ".join(text[anchor:body_start].split()) if anchor < body_start else ""


def _join_context(*parts: str) -> str:
    return "\n".join(part for part in parts if part)
