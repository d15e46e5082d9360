"""Boundary findings: a pure checker that says what is suspicious about each chunk.

The codes are stored in the ``findings`` column and counted in the manifest; ``FINDINGS`` gives
each one's meaning and the config change that fixes it. The reviewer puts them in front of people.

Method. The rules are written once, here, in Python (``_check_spans``, one rule after the other, over
all the chunks of a document). The character work they need is done for all the chunks at once by
three kernels over arrays that know no rule: ``scan`` moves each chunk edge over the characters of a
class toward a bound and reports the edges stopped by a character outside another class (a start whose
line white space is not preceded by a line feed, an end whose line does not go on blank to a line
feed); ``after_last`` finds where the run after the last occurrence of a character begins (a chunk's
last line) and reports those whose first character is of a class (one an ATX heading can begin
with); ``containing`` gives the pairs of points and intervals that hold them (chunk ends inside kept
groups, headings inside chunks). The rules then ask their exact questions (``levels.SENTENCE_ENDED``,
``levels.ATX_LAST_LINE``, the group tests) of the few edges reported, so the Python work grows with
the suspicious edges, not with the chunks. The classes come from ``_class_table``, which Python builds
from ``str.isspace`` and the characters named here: the kernels know no character. The kernels' C
versions in chunking/_pack.c run when built and current; their Python twins here (``_scan``,
``_after_last``, ``_containing``, the same loops with ``regex``/``str`` searches) run otherwise, and
tests/core/test_packer_native.py holds each pair equal (generated input, the corpora) and the
findings equal with either set. Order: each chunk's codes come in the order listed below.

- ``mid_sentence_start`` (not the first chunk): going back from the start over the white space of
  its line reaches the line's start, the document's start, a space between two Thai or Lao letters,
  or ``levels.SENTENCE_ENDED`` holds on the four characters before it; otherwise the finding.
- ``mid_sentence_end`` (not the last chunk): the rest of the end's line (within 200 characters) is
  white space, or ``SENTENCE_ENDED`` holds on the four characters before the end, or the end is a
  space between two Thai or Lao letters; otherwise the finding.
- ``split_procedure``/``_list``/``_table``/``_code`` (not the last chunk): a group of that kind has
  ``body_start < end < group end`` with text after ``end`` in it, no chunk holds all of it (split
  on purpose, e.g. repeated by overlap), and ``end`` is not between the members of a code group (a
  class split between its methods); one code per kind, in the plan's order.
- ``heading_at_end`` (not the last chunk): the last heading the strategy recorded at or before the
  end lies inside the chunk and only white space or a setext underline follows its line; with no
  headings recorded, ``levels.ATX_LAST_LINE`` holds on the chunk's last line (within 300 characters)
  and the chunk holds more than that line.
- ``over_budget`` (the packer says so), ``undersized`` (below min_size, when there are several
  chunks), ``high_overlap`` (more than half the chunk repeats the previous one), and
  ``constraint_unmet`` (``unmet_constraint_chunks``).
- ``words_run_together`` (the ``document`` strategy only: text extracted from PDF or DOCX): at least
  ``_GLUED_SHARE`` of the chunk's ASCII letters, and at least ``_GLUED_LETTERS`` of them, are in runs
  of ``_GLUED_RUN`` lower-case letters or more (``_glued``). Prose has almost none (gnuplot's manual 0.0 %,
  compounds and identifiers); a text layer that lost its word gaps has most (the Debian Reference
  through pypdf: 45 %). A property of the text, not of a boundary: one chunk or many.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
from collections.abc import Callable
from typing import NamedTuple

import regex

from chunkyard.chunking import packer
from chunkyard.chunking.packer import _NON_SPACE, PHRASE_SPACED, SENTENCE_END_MARKS, Span
from chunkyard.chunking.packer import ATX_LAST_LINE as _ATX_LINE
from chunkyard.chunking.packer import SENTENCE_ENDED as _SENTENCE_END

FINDINGS: dict[str, tuple[str, str]] = {
    "over_budget": (
        "The chunk is larger than max_size because no boundary fits inside the budget.",
        "Raise max_size, or use a finer unit; the chunk keeps the text whole rather than drop it.",
    ),
    "mid_sentence_start": (
        "The chunk starts in the middle of a sentence.",
        "Raise max_size or overlap, or use the sentence/markdown strategy.",
    ),
    "mid_sentence_end": (
        "The chunk ends in the middle of a sentence.",
        "Raise max_size, or use the sentence/markdown strategy.",
    ),
    "split_procedure": (
        "A numbered procedure is cut between this chunk and the next.",
        "Raise max_size so the procedure fits, or rely on the lead-in carried in embed_text.",
    ),
    "split_list": (
        "A bullet list is cut between this chunk and the next.",
        "Raise max_size so the list fits.",
    ),
    "split_table": (
        "A table is cut between this chunk and the next (its header is repeated in embed_text).",
        "Raise max_size so the table fits.",
    ),
    "split_code": (
        "A code block is cut between this chunk and the next.",
        "Raise max_size for code files, e.g. with a rule matching them.",
    ),
    "heading_at_end": (
        "The chunk ends with a heading whose content is in the next chunk.",
        "Use the markdown strategy, which opens chunks with headings.",
    ),
    "undersized": (
        "The chunk is smaller than min_size.",
        "Lower min_size, or raise it on purpose to merge small sections.",
    ),
    "high_overlap": (
        "More than half of the chunk repeats the previous chunk.",
        "Lower overlap relative to max_size.",
    ),
    "prefix_shortened": (
        "The chunk's embed_text prefix (title, heading path, lead-in or table header) would take more than "
        "half of max_size, so it was shortened: the title dropped, then outer headings, then outer "
        "lead-ins, then the heading, then the rest cut at a word gap (chunkyard.chunking.prefix).",
        "Raise max_size, shorten the headings or lead-ins, turn off context.title or context.headings, "
        "or set budget: text if you embed the text alone.",
    ),
    "constraint_unmet": (
        "A reviewer's constraint (keep this span together / break here) could not be met within the budget.",
        "Raise max_size so the kept span fits, or retract the constraint in the reviewer.",
    ),
    "words_run_together": (
        "Words of the chunk run together (a quarter or more of its letters are in runs of 20 lower-case letters or more): "
        "the file's text layer lost the spaces between them, so search and embeddings see run-on tokens.",
        "No chunking setting fixes it: the text is read as the file gives it (pypdf does not find word gaps "
        "drawn by glyph positioning in fonts without a space glyph, pypdf issue 3978); export the PDF "
        "again (e.g. with pdflatex or another tool) or leave the file out.",
    ),
}

# ``words_run_together``: runs of this many ASCII letters or more hold at least this share of a chunk's
# letters, and at least this many letters (a short chunk with one long identifier is not flagged).
_GLUED_RUN = 20
_GLUED_SHARE = 0.25
_GLUED_LETTERS = 40
_LETTER_RUN = re.compile(r"[A-Za-z]+")
_LOWER_RUN = re.compile(rf"[a-z]{{{_GLUED_RUN},}}")


def _glued(text: str) -> bool:
    """Whether ``text``'s words run together (``words_run_together``). Only lower-case letters count
    toward a run: glued prose has long lower-case stretches (``movingtoanewrelease``), an identifier
    a capital every few letters (``RegisterDynamicBackgroundWorker``)."""
    glued = sum(map(len, _LOWER_RUN.findall(text)))
    return glued >= _GLUED_LETTERS and glued >= _GLUED_SHARE * sum(map(len, _LETTER_RUN.findall(text)))


# A chunk edge is clean after a sentence end (the packer's marks, and : ;), or, in Thai and Lao,
# at a space between two letters (see ``packer.SENTENCE``).
_PHRASE_LETTER = regex.compile("[" + PHRASE_SPACED + "]")
# A text whose last character is one of them ends a sentence (``_SENTENCE_END`` holds): asked first.
_MARKS = frozenset(SENTENCE_END_MARKS)

_GROUP_CODES = {
    "procedure": "split_procedure",
    "list": "split_list",
    "table": "split_table",
    "code": "split_code",
}

# Characters looked at past a chunk's end for the rest of its line (a chunk ending a line ends cleanly),
# and at the end of a chunk for a heading line when the strategy recorded no headings.
_CLEAN_END_LOOKAHEAD = 200
_HEADING_TAIL = 300

# -- kernels: C in chunking/_pack.c when built, else these Python twins ------------------------------

# Character classes (bits) of ``_class_table``: white space but a line feed; the line feed; the characters
# a line ``_ATX_LINE`` matches can begin with (its `` {0,3}#``).
_INLINE_SPACE = 1
_LINE_FEED = 2
_ATX_FIRST = 4


def _build_class_table() -> bytes:
    r"""The classes of each code point up to the last one with a class (those past it have none).

    ``str.isspace`` is ``re``'s ``\s``, and holds for no code point above U+FFFF (tests/core/test_findings.py
    checks all of them), so the table covers the Basic Multilingual Plane at most.
    """
    plane = "".join(map(chr, range(0x10000)))
    classes = bytearray(0x10000)
    for match in re.finditer(r"\s", plane):
        classes[match.start()] = _INLINE_SPACE
    classes[ord("\n")] = _LINE_FEED
    for char in " #":
        classes[ord(char)] |= _ATX_FIRST
    return bytes(classes[: max(i for i, c in enumerate(classes) if c) + 1])


_class_table_cache: list[bytes] = []


def _class_table() -> bytes:
    if not _class_table_cache:
        _class_table_cache.append(_build_class_table())
    return _class_table_cache[0]


def _scan(
    text: str,
    records: list[tuple],
    field: int,
    reach: int,
    table: bytes,
    mask: int,
    over: bool,
    backward: bool,
    test: int,
    want: bool,
) -> list[int]:
    """Move each ``records[k][field]`` toward a bound ``reach`` away (clipped to the text) while the
    character passed has ``bool(class & mask) == over``; report ``k, stop`` when the character that
    stopped the move (none, at the bound: class 0) has ``bool(class & test) == want``. A character's
    class is ``table[code point]``, 0 past the table. The pairs are flat (``[k, stop, k, stop, ...]``:
    ints only, nothing for the garbage collector)."""
    run = _run_pattern(table, mask, over, backward).match
    size, length, out = len(table), len(text), []
    for k, record in enumerate(records):
        start = record[field]
        seen = size  # the code point that stopped the move (past the table: class 0)
        if backward:
            bound = max(start - reach, 0)
            stop = run(text, bound, start).start()
            if stop > bound:
                seen = ord(text[stop - 1])
        else:
            bound = min(start + reach, length)
            stop = run(text, start, bound).end()
            if stop < bound:
                seen = ord(text[stop])
        if bool(seen < size and table[seen] & test) == want:
            out += (k, stop)
    return out


def _after_last(
    text: str, records: list[tuple], field: int, reach: int, char: str, table: bytes, test: int, want: bool
) -> list[int]:
    """The position after the last ``char`` within ``reach`` before each ``records[k][field]`` (the bound
    when there is none), reported as ``k, start`` when a character follows it before the field's
    position and that character's class has ``bool(class & test) == want``; flat, as ``_scan``'s."""
    size, out = len(table), []
    for k, record in enumerate(records):
        end = record[field]
        low = max(end - reach, 0)
        start = text.rfind(char, low, end) + 1 or low
        if start < end:
            code = ord(text[start])
            if bool(code < size and table[code] & test) == want:
                out += (k, start)
    return out


@functools.lru_cache(maxsize=16)
def _run_pattern(table: bytes, mask: int, over: bool, backward: bool) -> regex.Pattern:
    """A run of the characters with ``bool(class & mask) == over`` (``(?r)``: ending where matched)."""
    members = "".join(f"\\u{code:04x}" for code, classes in enumerate(table) if classes & mask)  # table: BMP
    if not members:
        body = r"(?s:.)" if not over else r"(?!)"
    else:
        body = ("[" if over else "[^") + members + "]"
    return regex.compile(("(?r)" if backward else "") + "(?:" + body + ")*")


def _containing(points: list, at: int, records: list[tuple], low: int, high: int) -> list[int]:
    """The pairs ``i, j`` with ``records[j][low] < p < records[j][high]`` for ``p = points[i]`` (or
    ``points[i][at]`` when ``at >= 0``), sorted, flat as ``_scan``'s."""
    values = points if at < 0 else [point[at] for point in points]
    order = sorted(range(len(values)), key=values.__getitem__)
    ordered = [values[i] for i in order]
    pairs = []
    for j, record in enumerate(records):
        first, stop = bisect.bisect_right(ordered, record[low]), bisect.bisect_left(ordered, record[high])
        pairs.extend((order[k], j) for k in range(first, stop))
    pairs.sort()
    return [number for pair in pairs for number in pair]


class Kernels(NamedTuple):
    scan: Callable
    after_last: Callable
    containing: Callable


PYTHON_KERNELS = Kernels(_scan, _after_last, _containing)


_native_kernels: dict[int, Kernels] = {}


def kernels() -> Kernels:
    """The C kernels (chunking/_pack.c) when built and current, else their Python twins."""
    native = packer._native
    if native is None:
        return PYTHON_KERNELS
    found = _native_kernels.get(id(native))
    if found is None:
        found = _native_kernels[id(native)] = Kernels(native.scan, native.after_last, native.containing)
    return found


def check_spans(text: str, spans: list[Span], layout, min_size: int) -> list[list[str]]:
    """Finding codes for each span, in order. ``layout`` is a ``chunkyard.chunking.strategies.Layout``."""
    results = _check_spans(text, spans, layout, min_size)
    plan = layout.plan
    if plan.keep or plan.breaks:  # reviewer constraints (most documents have none)
        for index in unmet_constraint_chunks(text, spans, plan.keep, plan.breaks):
            if "constraint_unmet" not in results[index]:
                results[index].append("constraint_unmet")
    if layout.strategy == "document":  # text extracted from PDF or DOCX
        for codes, span in zip(results, spans, strict=True):
            if _glued(text[span.start : span.end]):
                codes.append("words_run_together")
    return results


def _check_spans(
    text: str, spans: list[Span], layout, min_size: int, using: Kernels | None = None
) -> list[list[str]]:
    """The findings of ``check_spans`` but ``constraint_unmet``, with the kernels ``using`` (default: ``kernels()``)."""
    if not isinstance(spans, list):
        spans = list(spans)
    n = len(spans)
    results: list[list[str]] = [[] for _ in range(n)]
    if any(map(_OVER_BUDGET, spans)):
        for codes, span in zip(results, spans, strict=True):
            if span.over_budget:
                codes.append("over_budget")
    if n < 2:
        return results
    using = using or kernels()
    scan = using.scan
    table, plan, length, last = _class_table(), layout.plan, len(text), n - 1
    doc_start = plan.start
    phrase, sentence_ended, marks = _PHRASE_LETTER.match, _SENTENCE_END.search, _MARKS
    # Starts: back over the white space of the line; a line feed before it is clean, the rest are asked.
    for index, pos in _pairs(
        scan(text, spans, 0, length, table, _INLINE_SPACE, True, True, _LINE_FEED, False)
    ):
        start = spans[index].start
        if index and not (
            pos <= doc_start
            or text[pos - 1] in marks
            or sentence_ended(text[max(doc_start, pos - 4) : pos])
            or (pos < start < length and phrase(text, pos - 1) and phrase(text, start))
        ):
            results[index].append("mid_sentence_start")
    # Ends: on over the white space of the line (within the lookahead); a line feed there is clean.
    lookahead = _CLEAN_END_LOOKAHEAD
    for index, after in _pairs(
        scan(text, spans, 1, lookahead, table, _INLINE_SPACE, True, False, _LINE_FEED, False)
    ):
        end = spans[index].end
        if index != last and not (
            (end and text[end - 1] in marks)
            or sentence_ended(text[max(0, end - 4) : end])
            or (0 < end < length and end < after < length and phrase(text, end - 1) and phrase(text, after))
        ):
            results[index].append("mid_sentence_end")
    if plan.groups:
        for index, codes in _group_cuts(text, spans, plan.groups, using.containing).items():
            results[index].extend(codes)
    for index in _headings_at_end(text, spans, layout.heading_starts, using, table):
        results[index].append("heading_at_end")
    if min_size:
        for codes, span in zip(results, spans, strict=True):
            if span.size < min_size:
                codes.append("undersized")
    # A chunk that starts before the previous one ends (overlap, or spans out of order).
    if any(map(operator.lt, map(_START, itertools.islice(spans, 1, None)), map(_END, spans))):
        for index in range(1, n):
            shared = spans[index - 1].end - spans[index].start
            if shared > 0 and shared * 2 > spans[index].end - spans[index].start:
                results[index].append("high_overlap")
    return results


_START, _END, _OVER_BUDGET = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(3)
_KIND = operator.itemgetter(0)


def _pairs(flat: list[int]):
    """``[a, b, c, d, ...]`` as ``(a, b), (c, d), ...``."""
    items = iter(flat)
    return zip(items, items, strict=True)


def _headings_at_end(
    text: str, spans: list[Span], heading_starts: list[int], using: Kernels, table: bytes
) -> list[int]:
    """Indexes of the chunks (but the last) that end with a heading whose content is in the next one."""
    last, found = len(spans) - 1, []
    if heading_starts:
        # The last heading at or before a chunk's end must lie inside the chunk: the last one inside
        # it, unless a heading starts at the end itself.
        inside: dict[int, int] = {}
        for h, index in _pairs(using.containing(heading_starts, -1, spans, 0, 1)):
            inside[index] = h  # pairs are sorted by heading, so the last one stays
        for index in inside:
            end = spans[index].end
            k = bisect.bisect_left(heading_starts, end)
            if index == last or (k < len(heading_starts) and heading_starts[k] == end):
                continue
            # The heading's line runs to the chunk end: nothing after it in this chunk.
            line_end = text.find("\n", heading_starts[inside[index]], end)
            if line_end != -1 and not text[end - 1].isspace() and text[end - 1] not in "=-":
                continue  # the chunk ends in text after the heading's line
            after = None if line_end == -1 else _NON_SPACE.search(text, line_end, end)
            # Nothing after the line, or a setext underline (only = and - between white space).
            if after is None or (text[after.start()] in "=-" and not text[line_end:end].strip().strip("=-")):
                found.append(index)
        return found
    # No headings recorded: the chunk's last line (within _HEADING_TAIL characters) is an ATX heading,
    # and the chunk holds more than that line. Only lines that begin as one can are asked.
    for index, line in _pairs(using.after_last(text, spans, 1, _HEADING_TAIL, "\n", table, _ATX_FIRST, True)):
        start, end = spans[index].start, spans[index].end
        # The line's start is a ``^`` of the pattern: after a line feed, or the start of its slice.
        if (
            index != last
            and start < line < end
            and (
                _ATX_LINE.match(text, line, end)
                if text[line - 1] == "\n"
                else _ATX_LINE.match(text[line:end])
            )
        ):
            found.append(index)
    return found


def _group_cuts(text: str, spans: list[Span], groups: list, containing) -> dict[int, list[str]]:
    """The split codes of each chunk end (but the last) that cuts a kept group, by chunk index."""
    found: dict[int, list[str]] = {}
    held = code_members = None
    held_by_group: dict[int, bool] = {}
    last = len(spans) - 1
    # The kinds kept whole, in the plan's order (a filter at C speed: sections contain most chunk ends).
    groups = list(itertools.compress(groups, map(_GROUP_CODES.__contains__, map(_KIND, groups))))
    for index, j in _pairs(containing(spans, 1, groups, 3, 2)):  # body_start < end < group end
        group = groups[j]
        code = _GROUP_CODES[group.kind]
        pos = spans[index].end
        if index == last or code in found.get(index, ()) or not _NON_SPACE.search(text, pos, group.end):
            continue
        if group.kind == "code":
            if code_members is None:
                code_members = _CodeMembers(groups)
            if code_members.between(group, pos):
                continue
        whole = held_by_group.get(j)
        if whole is None:
            if held is None:
                held = _HeldWhole(text, spans)
            whole = held_by_group[j] = held(group)
        if whole:
            continue
        found.setdefault(index, []).append(code)
    return found


def keep_met(spans: list[Span], start: int, end: int) -> bool:
    """Whether some chunk holds all of [start, end)."""
    return any(span.start <= start and span.end >= end for span in spans)


def break_met(text: str, spans: list[Span], position: int) -> bool:
    """Whether no chunk holds text on both sides of ``position``."""
    return not any(
        span.start < position < span.end
        and text[span.start : position].strip()
        and text[position : span.end].strip()
        for span in spans
    )


def unmet_constraint_chunks(
    text: str, spans: list[Span], keep: list[tuple[int, int]], breaks: list[int]
) -> list[int]:
    """Indexes of the chunks that cut a keep span or cross a break (the first such chunk each)."""
    found: list[int] = []
    for start, end in keep:
        if spans and not keep_met(spans, start, end):
            # The chunk where the span begins is the one that failed to hold it.
            found.append(next((i for i, s in enumerate(spans) if s.end > start), len(spans) - 1))
    for position in breaks:
        if not break_met(text, spans, position):
            found.append(next(i for i, s in enumerate(spans) if s.start < position < s.end))
    return found


class _HeldWhole:
    """Whether some chunk holds a whole group: the chunk starts bisected, with the furthest end among
    the chunks starting at or before each."""

    def __init__(self, text: str, spans: list[Span]):
        self.text = text
        starts = list(map(_START, spans))
        if not all(map(operator.le, starts, starts[1:])):
            spans = sorted(spans, key=_START)
            starts = list(map(_START, spans))
        self.starts = starts
        self.reach = list(itertools.accumulate(map(_END, spans), max))

    def __call__(self, group) -> bool:
        k = bisect.bisect_right(self.starts, group.start)
        return k > 0 and self.reach[k - 1] >= _content_end(self.text, group.end)


class _CodeMembers:
    """Code groups by start, to ask whether a position lies between the members of one."""

    def __init__(self, groups: list):
        self.code = sorted((g for g in groups if g.kind == "code"), key=lambda g: g.start)
        self.starts = [g.start for g in self.code]

    def between(self, group, pos: int) -> bool:
        """``pos`` lies between nested definitions (code groups inside ``group``) and inside none."""
        i = bisect.bisect_left(self.starts, group.start)
        j = bisect.bisect_right(self.starts, group.end)
        members = [g for g in self.code[i:j] if g is not group and g.end <= group.end]
        if not members or pos < min(m.start for m in members):
            return False
        return not any(m.start < pos < m.end for m in members)


def _content_end(text: str, end: int) -> int:
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def explain(code: str) -> str:
    meaning, fix = FINDINGS.get(code, ("Unknown finding.", ""))
    return f"{meaning} {fix}".strip()
