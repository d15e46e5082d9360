"""The packer: one engine that turns a document and a strategy's *plan* into chunk spans.

For every strategy but ``fixed`` the boundaries are chosen all at once by the global segmenter
(``chunkyard.chunking.segmenter``, its method and cost table in its docstring); the packer then applies
overlap and trims (``Packer._segmented_spans``). The greedy method below packs ``fixed`` (its plan has
the grapheme level only), in Python (``Packer._spans``; in ASCII text without CR every position is a
grapheme boundary, so nothing is segmented). The packer's helpers (white space, grapheme clusters,
textual levels: ``find_ends``, overlap) serve both. No rule is compiled: chunking/_pack.c holds only
kernels over arrays (findings' ``scan``, ``after_last``, ``containing``; the tokenizer's ``token_starts``).

Greedy method. A strategy describes a document as candidate boundaries with scores (a heading scores
higher than a paragraph break, which scores higher than a sentence end, a word gap, a grapheme
gap) and as *groups* that should stay whole (a procedure with its lead-in, a table, a code block,
a section). From each chunk start the packer measures how far the budget reaches, then picks the
end, in this order:

1. a group that begins inside the reach but does not end inside it, and that would fit in a chunk
   of its own, is not cut: the chunk ends where the group begins;
2. a *forced* boundary (a heading) ends the chunk once the chunk has reached ``min_size``;
3. otherwise the best-scored boundary in the second half of the reach, the furthest among equals;
   failing that the best-scored anywhere in the reach. Structural boundaries come from the plan,
   textual ones (paragraph, line, sentence, word, grapheme; a lone CR ends a line too) are found
   lazily in the reach only. An end inside a table row or code line moves back to that line's start
   when the chunk holds text before it: a row or line is cut only when it cannot fit at all.

Every chunk is then measured exactly (for tokens: the chunk text is encoded on its own) and
re-chosen with a shorter reach if it is over budget. Overlap: the next chunk starts at the
earliest, best-scored boundary within ``overlap`` units before the end, never across a forced
boundary or a kept group, never inside a heading's line, and at a row or line start inside a table
or code block; overlap is dropped when it would leave an oversized unit, or a row or line that then
no longer fits, to be cut. Chunks are trimmed of surrounding whitespace (indentation of the first
line is kept), so every non-whitespace character lies in some chunk.

Reviewer constraints (``Plan.keep``, ``Plan.breaks``, see ``chunkyard.chunking.constraints``). The
segmenter makes them hard constraints of its optimisation (its docstring); in the greedy method a *break* is a
forced boundary that ignores ``min_size`` (a reviewer asked for it) and that overlap never reaches
back across. A *keep* span that fits the budget on its own is treated like a kept group (rule 1: the
chunk ends where it begins when it runs past the reach), and any end chosen strictly inside it is
moved to its end when that is within the reach, else to its start. So a fitting keep span lies
wholly inside one chunk; one that cannot fit is cut and ``check_spans`` reports ``constraint_unmet``.
A break inside a keep span wins over the keep (the reviewer's most specific wish).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import regex

from chunkyard.chunking import native
from chunkyard.chunking.segmenter import Segmenter, lead_match_ends
from chunkyard.chunking.segmenter import kernel as segment_kernel
from chunkyard.chunking.units import CharMeter, Meter

if TYPE_CHECKING:
    from chunkyard.chunking.prefix import Reserve

from chunkyard.chunking.levels import (  # noqa: F401  (re-exported: strategies and tests import them from here)
    _BLANKS,
    _BREAK,
    _LONE_CR_LEVELS,
    _NOT_AN_END,
    _SENTENCE_LEAD,
    _SPACE_DIFFERS,
    ATX_LAST_LINE,
    GRAPHEME,
    LINE,
    LINE_GROUPS,
    PARAGRAPH,
    PHRASE_SPACED,
    RECURSIVE_LEVELS,
    SCORE_END,
    SCORE_FORCED,
    SCORE_GRAPHEME,
    SCORE_LINE,
    SCORE_PARAGRAPH,
    SCORE_SENTENCE,
    SCORE_WORD,
    SENTENCE,
    SENTENCE_END_MARKS,
    SENTENCE_ENDED,
    SENTENCE_MARKS,
    SENTENCE_OR_PARAGRAPH,
    WORD,
    TextLevel,
    _lead_ends,
    _level,
    ascii_settled,
    find_ends,
)

# A character ``str.strip()`` keeps: ``re``'s \s is exactly ``str.isspace``, and a search neither copies
# nor scans past the first hit.
_NON_SPACE = re.compile(r"\S")
# Line ends: LF, CRLF (the CR stays in its line), or a lone CR (classic Mac OS). The scanners and the
# packer split lines this way only when a text has a lone CR; other texts keep the fast "\n" paths.
LONE_CR = re.compile(r"\r(?!\n)")
LINE_BREAK = re.compile(_BREAK)


def has_lone_cr(text: str, start: int = 0, end: int | None = None) -> bool:
    return "\r" in text and LONE_CR.search(text, start, len(text) if end is None else end) is not None


# Characters that can continue a grapheme cluster begun before them (or, for regional indicators
# and \r, pair with a neighbour): a boundary next to one must be checked by segmenting.
_CONTINUES = regex.compile(
    r"[\p{M}\p{Grapheme_Cluster_Break=Extend}\p{Grapheme_Cluster_Break=SpacingMark}"
    r"\p{Grapheme_Cluster_Break=ZWJ}\p{Grapheme_Cluster_Break=Regional_Indicator}"
    r"\p{Grapheme_Cluster_Break=Prepend}\r\U0001F3FB-\U0001F3FF]"
)
# A run of such characters long enough to hold a cluster longer than the packer's scanning windows
# (``'a'`` and thousands of combining accents): those clusters are indexed once per text.
LONG_CLUSTER = 64
# A cluster longer than LONG_CLUSTER code points has at most one ASCII code point, its base (a cluster
# is Prepend* base (Extend | SpacingMark | ZWJ)*; no Prepend, Extend, SpacingMark, ZWJ, Hangul or
# pictographic character is ASCII, and CR LF is a cluster of two), so it lies in a run of at least
# LONG_CLUSTER - 1 non-ASCII code points (and the one before it), or its ASCII base comes right after a
# Prepend character ("\u0600" * 30 + "a" + "\u0301" * 40): only such runs, and Prepend characters before
# an ASCII one (rare: 27 code points are Prepend), are segmented, and a text with neither (most texts)
# is passed over by two searches (``regex`` finds the run at about 1 GB/s, eight times faster than
# ``re``).
_NON_ASCII_RUN = regex.compile(f"[^\x00-\x7f]{{{LONG_CLUSTER - 1},}}")
_PREPEND_BEFORE_ASCII = regex.compile(r"\p{Grapheme_Cluster_Break=Prepend}[\x00-\x7f]")
_MAY_BE_IN_LONG_CLUSTER = regex.compile(f"{_NON_ASCII_RUN.pattern}|{_PREPEND_BEFORE_ASCII.pattern}")
# Either way a long cluster holds a run of at least LONG_CLUSTER // 2 non-ASCII code points: with a
# non-ASCII base all of it is one; with an ASCII base its p Prepend characters before the base and its e
# marks after it are two runs with p + 1 + e > LONG_CLUSTER, so one of them has LONG_CLUSTER // 2 or
# more. A text without such a run (none of rust-book's files, 4 of k8s-enhancements' 680) holds no long
# cluster: one pass of the kernel ``non_ascii_run`` (``_pack.c``; its twin below is this search) settles
# it, without the UTF-8 encoding and the Prepend search (a property lookup per character) that took 29 %
# of rust-book's recursive chunking instructions before.
_HALF_NON_ASCII_RUN = regex.compile(f"[^\x00-\x7f]{{{LONG_CLUSTER // 2},}}")


def non_ascii_run(text: str, start: int, end: int, least: int) -> int:
    """Where the first run of at least ``least`` (>= 1) consecutive non-ASCII code points in
    ``text[start:end]`` begins, or -1 (``0 <= start``, ``end <= len(text)``); the kernel's twin."""
    if least < 1 or start < 0 or end > len(text):
        raise ValueError("non_ascii_run: least >= 1 and 0 <= start, end <= len(text)")
    pattern = (
        _HALF_NON_ASCII_RUN if least == LONG_CLUSTER // 2 else regex.compile(f"[^\x00-\x7f]{{{least},}}")
    )
    found = pattern.search(text, start, end)
    return found.start() if found is not None else -1


def _may_hold_long_cluster(text: str, start: int, end: int) -> bool:
    if text.isascii() or _first_non_ascii_run(text, start, end, LONG_CLUSTER // 2) < 0:
        return False
    return (
        _NON_ASCII_RUN.search(text, start, end) is not None
        or _PREPEND_BEFORE_ASCII.search(text, start, end) is not None
    )


class Group(NamedTuple):
    """A span that should stay in one chunk when it fits (procedure, list, table, code, section).

    ``start`` includes the lead-in; ``body_start`` is where the items/rows/lines begin. ``context``
    is what a piece of a split group repeats in its ``embed_text`` (lead-in sentence, table
    header); ``label`` is extra metadata such as a code block's language.
    """

    kind: str
    start: int
    end: int
    body_start: int
    context: str = ""
    label: str = ""


@dataclass
class Plan:
    """What a strategy tells the packer about one document."""

    start: int  # first offset to chunk (after an excluded front matter)
    end: int
    positions: list[int] = field(default_factory=list)  # structural boundaries, sorted
    scores: list[int] = field(default_factory=list)
    levels: tuple[TextLevel, ...] = RECURSIVE_LEVELS
    groups: list[Group] = field(default_factory=list)  # sorted by start
    overlap_floor: int = SCORE_WORD  # weakest boundary an overlapping chunk may start at
    heading_ends: dict[int, int] = field(default_factory=dict)  # forced position -> end of its heading line
    fill: float = 0.5  # prefer ends in the last (1 - fill) of the reach
    keep: list[tuple[int, int]] = field(default_factory=list)  # reviewer: keep [start, end) in one chunk
    breaks: list[int] = field(default_factory=list)  # reviewer: a chunk boundary here
    units: list[Group] = field(default_factory=list)  # more spans to keep whole when they fit (cost only)
    chunk_price: int = 100  # the segmenter's price of one more chunk (lower: more chunks, better cuts)


class Span(NamedTuple):
    """A chunk's span as the packer chose it (immutable; built once per chunk, hence a named tuple)."""

    start: int
    end: int
    size: int  # in the meter's unit
    over_budget: str = ""  # why the span exceeds the budget, when it does


_START_OF = operator.attrgetter("start")
_new_span = tuple.__new__  # ``_new_span(Span, fields)``: all four fields, without the keyword ``__new__``


# chunking/_pack.c (the findings' kernels and units' token_starts in C) when it was built and is current.
_native = native.load("_pack")
_first_non_ascii_run = _native.non_ascii_run if _native is not None else non_ascii_run


def _long_clusters(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Grapheme clusters in ``text[start:end]`` longer than ``LONG_CLUSTER`` code points, in order.

    Found once per text, in linear time: only a long run of non-ASCII code points or a Prepend character
    before an ASCII one can hold one (``_MAY_BE_IN_LONG_CLUSTER``), and each such run is segmented once from a safe origin before it (the start of its line, or the end of the
    run segmented before it, whichever is later).
    """
    if not _may_hold_long_cluster(text, start, end):
        return []
    out: list[tuple[int, int]] = []
    scanned = start
    for run in _MAY_BE_IN_LONG_CLUSTER.finditer(text, start, end):
        if run.end() <= scanned:
            continue
        # Segmented from a true cluster boundary: the end of the last segmented run, or the start of
        # the run's line (a line break always ends a cluster).
        origin = max(scanned, text.rfind("\n", scanned, run.start()) + 1)
        for match in GRAPHEME.pattern.finditer(text, origin, end):
            if match.end() - match.start() > LONG_CLUSTER:
                out.append((match.start(), match.end()))
            if match.end() >= run.end():
                scanned = match.end()
                break
    return out


class Packer:
    def __init__(
        self,
        text: str,
        plan: Plan,
        meter: Meter,
        max_size: int,
        overlap: int,
        min_size: int,
        *,
        reserve: Reserve | None = None,
    ):
        self.text = text
        # Each chunk start's prefix (``chunkyard.chunking.prefix``): with ``budget: embed_text`` max_size
        # bounds prefix + text, and the segmenter reserves the prefix from each start's allowance.
        self.reserve = reserve if reserve is not None and reserve.counts and reserve.largest else None
        self.plan = plan
        self.meter = meter
        self.max_size = max_size
        self.overlap = overlap
        self.min_size = min_size
        self._levels = plan.levels
        if has_lone_cr(text, plan.start, plan.end):
            self._levels = tuple(_LONE_CR_LEVELS.get(level, level) for level in plan.levels)
        self._group_fits: dict[int, bool] = {}
        # Reviewer constraints, sorted (most documents have none).
        self._breaks = sorted(set(plan.breaks)) if plan.breaks else []
        self._keep = sorted(set(plan.keep)) if plan.keep else []
        self._keep_fits: dict[tuple[int, int], bool] = {}
        self._indexed = False
        # Every heading, the one a chunk starts on too (the segmenter asks before ``_index``, which a
        # text that is one chunk does without).
        self._heading_starts = sorted(plan.heading_ends) if plan.heading_ends else []
        ascii_only = text.isascii()
        self._long_clusters = [] if ascii_only else _long_clusters(text, plan.start, plan.end)
        self._long_cluster_starts = [a for a, _ in self._long_clusters] if self._long_clusters else []
        # ASCII without CR: every position is a grapheme boundary (``_is_cluster_boundary``'s fast path).
        self._plain = ascii_only and "\r" not in text
        if self.reserve is not None:
            # A unit that fits alone opens its chunk with a prefix short enough to keep it whole.
            self.reserve.make_room_for_units(self._opening)

    def _index(self) -> None:
        """The lookups the Python packer makes per chunk (_pack.c builds its own from the plan)."""
        if self._indexed:
            return
        plan = self.plan
        self._indexed = True
        if not plan.positions and not plan.groups and not plan.heading_ends:
            # Nothing structural (recursive, sentence, fixed): every lookup is empty.
            self._group_starts, self._forced, self._headings = [], [], []
            self._line_group_starts, self._line_group_reach = [], []
            return
        self._group_starts = list(map(_START_OF, plan.groups))
        # Forced boundaries, and those of them that start a heading, in order: the packer looks these
        # up per chunk, and Markdown marks every line, so scanning ``plan.positions`` would be slow.
        if len(plan.positions) != len(plan.scores):
            raise ValueError(f"a plan with {len(plan.positions)} positions and {len(plan.scores)} scores")
        self._forced = list(itertools.compress(plan.positions, map(SCORE_FORCED.__le__, plan.scores)))
        self._headings = list(filter(plan.heading_ends.__contains__, self._forced))
        # Bodies of tables and code blocks, by start, with the furthest end so far: an overlapping
        # chunk starts at one of their line starts, never mid-row or mid-line.
        line_groups = sorted([(g.body_start, g.end) for g in plan.groups if g.kind in LINE_GROUPS])
        self._line_group_starts = [body for body, _ in line_groups]
        self._line_group_reach = list(itertools.accumulate([end for _, end in line_groups], max))

    # -- public -------------------------------------------------------------------------------

    def spans(self) -> list[Span]:
        levels = self.plan.levels
        # ``levels == (GRAPHEME,)``, without comparing the levels of a longer tuple field by field.
        if len(levels) == 1 and levels[0] == GRAPHEME:
            return self._greedy_spans()
        return self._segmented_spans()

    def _segmented_spans(self) -> list[Span]:
        """Spans from the global segmenter's boundaries (``chunkyard.chunking.segmenter``), then overlap."""
        plan = self.plan
        origin = self._skip_space(plan.start, plan.end)
        if origin >= plan.end:
            return []
        out: list[Span] = []
        previous = (origin, origin)  # (start, raw end) of the previous chunk
        clean = True  # the previous chunk ended at a heading, a break or a group's start: no overlap
        overlap, max_size, measure, trim_end = self.overlap, self.max_size, self.meter.size, self._trim_end
        # Each chunk starts where ``_skip_space`` puts it after the previous raw end (the segmenter
        # found those starts for its search; a text that is one chunk is not searched, nor indexed).
        chunks = Segmenter(self).ends(origin)
        if not overlap and type(self.meter) is CharMeter:
            # Characters without overlap: every chunk as the loop below makes it, its end trimmed by
            # the kernel (back to the origin, then not below its start) and its size the difference.
            # With prefixes a chunk's embed_text measures its size plus its start's prefix, at most
            # the largest: only a chunk over ``room`` is measured with it.
            reserve = self.reserve
            room = max_size - reserve.largest if reserve is not None else max_size
            budget_size = self.budget_size
            tails = segment_kernel.trim_ends(self.text, [end for _, end, _ in chunks], origin)
            for (start, _, _), tail in zip(chunks, tails, strict=True):
                if tail > start:
                    size = tail - start
                    over = size > room and (reserve is None or budget_size(start, tail) > max_size)
                    reason = self._over_budget_reason(start, tail) if over else ""
                    out.append(_new_span(Span, (start, tail, size, reason)))
            return out
        if overlap and len(chunks) > 1:
            self._index()
            group_starts = set(self._group_starts)
        else:
            group_starts = set()  # ``clean`` is read only before an overlapping chunk
        for start, end, score in chunks:
            if overlap and not clean:
                shared = self._skip_space(self._overlap_start(*previous), plan.end)
                if shared < start and self.budget_size(shared, trim_end(shared, end)) <= max_size:
                    start = shared
            trimmed = trim_end(start, end)
            if trimmed > start:
                size = measure(start, trimmed)
                over = (self.budget_size(start, trimmed) if self.reserve else size) > max_size
                reason = self._over_budget_reason(start, trimmed) if over else ""
                out.append(_new_span(Span, (start, trimmed, size, reason)))
            previous = (start, end)
            clean = score >= SCORE_FORCED or end in group_starts
        return out

    def budget_size(self, start: int, end: int) -> int:
        """What max_size bounds for a chunk [start, end): its embed_text with a reserve, else its text."""
        if self.reserve is None:
            return self.meter.size(start, end)
        return self.reserve.budget_size(start, end)

    def _greedy_spans(self) -> list[Span]:
        """The greedy packer's spans; with a reserve (``fixed`` has one prefix everywhere: the title), it
        packs the text to ``max_size`` less the largest reserve, then measures every embed_text and
        packs again with less room while one is over (tokens of a concatenation are not additive)."""
        if self.reserve is None:
            return self._spans()
        max_size = self.max_size
        room = max(1, max_size - self.reserve.largest)
        try:
            for _ in range(8):
                self.max_size = room
                spans = self._spans()
                self.max_size = max_size
                sizes = [self.budget_size(s.start, s.end) for s in spans]
                excess = max(
                    (size - max_size for size, s in zip(sizes, spans, strict=True) if s.size <= room),
                    default=0,
                )
                if excess <= 0 or room == 1:
                    break
                room = max(1, room - excess - max(1, room // 50))
        finally:
            self.max_size = max_size
        return [
            span._replace(
                over_budget=(span.over_budget or self._over_budget_reason(span.start, span.end))
                if size > max_size
                else ""
            )
            for span, size in zip(spans, sizes, strict=True)
        ]

    def _spans(self) -> list[Span]:
        """The greedy method (the module docstring), in Python: ``fixed`` and its reviewer constraints."""
        self._index()
        plan = self.plan
        out: list[Span] = []
        start = self._skip_space(plan.start, plan.end)
        prev_end = start
        last_end = start  # raw end of the previous chunk
        while start < plan.end:
            end, clean, size = self._choose_verified_end(start, prev_end)
            if start < last_end and out and (size > self.max_size or self._mid_line_of_group(end)):
                # An oversized unit follows, or a table row or code line that does not fit beside the
                # overlap: do not weigh it down with overlap as well.
                start = max(start, self._next_text(last_end))
                end, clean, size = self._choose_verified_end(start, max(prev_end, start))
            trimmed_end = self._trim_end(start, end)
            if trimmed_end > start:
                reason = self._over_budget_reason(start, trimmed_end) if size > self.max_size else ""
                out.append(Span(start, trimmed_end, size, reason))
            if end >= plan.end or self._skip_space(end, plan.end) >= plan.end:
                break
            last_end = end
            next_start = end if clean or self.overlap == 0 else self._overlap_start(start, end)
            start = self._skip_space(next_start, plan.end)
            # The next chunk must reach past the first non-space character after this one, or it
            # would add nothing new (an overlapping chunk lying inside this one).
            prev_end = max(self._next_text(end), start)
        return out

    # -- choosing ends --------------------------------------------------------------------------

    def _choose_verified_end(self, start: int, prev_end: int) -> tuple[int, bool, int]:
        budget = self.max_size
        for _ in range(12):
            reach = self.meter.advance(start, budget)
            reach = max(reach, start + 1)
            if reach <= prev_end:
                reach = prev_end + 1
            # Whitespace after the reach is trimmed off a chunk, so a boundary just past it fits too.
            limit = min(self.plan.end, reach + 64)
            while reach < limit and self.text[reach].isspace():
                reach += 1
            end, clean = self._choose_end(start, min(reach, self.plan.end), prev_end)
            trimmed = self._trim_end(start, end)
            size = self.meter.size(start, trimmed)
            if size <= self.max_size:
                return end, clean, size
            if end <= prev_end + 1:
                break
            budget = max(1, budget - (size - self.max_size) - max(1, budget // 50))
            if self.meter.advance(start, budget) <= prev_end:
                break
        # Nothing fits: the smallest unit after prev_end is larger than the budget.
        end = self._smallest_end(start, prev_end)
        return end, False, self.meter.size(start, self._trim_end(start, end))

    def _choose_end(self, start: int, reach: int, prev_end: int) -> tuple[int, bool]:
        """Pick the end in (prev_end, reach]; return (end, clean) where clean means no overlap."""
        plan = self.plan
        reach = min(reach, plan.end)
        if self._breaks:
            first_break = self._first_break(start, prev_end, reach)
            if first_break is not None:
                reach = first_break  # nothing may cross a break; the break itself is the latest end
        structural = [
            pos
            for pos in (
                self._first_forced(start, prev_end, reach),
                self._kept_group_start(start, prev_end, reach),
                self._kept_span_start(start, prev_end, reach),
            )
            if pos is not None
        ]
        if structural:
            return self._honour_keep(start, prev_end, reach, min(structural), True)
        if reach >= plan.end or reach in self._breaks:
            return reach, True
        fill_from = max(prev_end + 1, start + int((reach - start) * plan.fill))
        early_from = max(prev_end + 1, start + int((reach - start) * plan.fill * 0.4))
        for low in (fill_from, prev_end + 1):
            if low > reach:
                continue
            best, score = self._best(low, reach, last=True)
            if (
                low == fill_from
                and early_from < fill_from
                and score + 10 <= self._ceiling(early_from, fill_from - 1)
            ):
                # A clearly stronger boundary a little earlier (a line end before word gaps) wins.
                early, early_score = self._best(early_from, fill_from - 1, last=True)
                if early is not None and early_score >= score + 10:
                    best, score = early, early_score
            if best is not None:
                best = self._whole_line_end(start, prev_end, best)
                heading = self._trailing_heading(start, best)
                if heading is not None and heading > prev_end and self._has_body(start, heading):
                    return self._honour_keep(start, prev_end, reach, heading, True)  # not on a heading
                return self._honour_keep(start, prev_end, reach, best, False)
        return self._smallest_end(start, prev_end), False

    def _trailing_heading(self, start: int, end: int) -> int | None:
        """Start of a heading that [start, end) ends with (nothing but space after it), if any."""
        headings = self._headings
        k = bisect.bisect_left(headings, end) - 1
        if k < 0 or headings[k] <= start:
            return None
        pos = headings[k]
        return None if _NON_SPACE.search(self.text, self.plan.heading_ends[pos], end) else pos

    @functools.cached_property
    def _level_top(self) -> int:
        """The highest score of the textual levels (the greedy method's ``_ceiling`` only)."""
        return max((level.score for level in self._levels), default=-1)

    def _ceiling(self, low: int, high: int) -> int:
        """The highest score any boundary in [low, high] can have (a bound for ``_best``)."""
        plan = self.plan
        i = bisect.bisect_left(plan.positions, low)
        j = bisect.bisect_right(plan.positions, high)
        return max(self._level_top, max(plan.scores[i:j], default=-1))

    def _best_boundary(self, low: int, high: int, *, last: bool, floor: int = 0) -> int | None:
        """The best-scored boundary in [low, high]: the last one if ``last``, else the first."""
        return self._best(low, high, last=last, floor=floor)[0]

    def _best(self, low: int, high: int, *, last: bool, floor: int = 0) -> tuple[int | None, int]:
        """Like ``_best_boundary``, with the boundary's score (-1 when there is none)."""
        plan = self.plan
        best_score, best_pos = -1, None
        i = bisect.bisect_left(plan.positions, low)
        j = bisect.bisect_right(plan.positions, high)
        for k in range(i, j):
            score = plan.scores[k]
            if score > best_score or (score == best_score and last):
                best_score, best_pos = score, plan.positions[k]
        for level in self._levels:
            if level.score <= best_score or level.score < floor:
                continue
            pos = self._find_level(level, low, high, last=last)
            if pos is not None:
                return pos, level.score
        return (best_pos, best_score) if best_score >= floor and best_pos is not None else (None, -1)

    def _find_level(self, level: TextLevel, low: int, high: int, *, last: bool) -> int | None:
        """The last (or first) boundary of ``level`` in [low, high] that is also a grapheme boundary."""
        if level is GRAPHEME:
            return self._cluster_boundary(low, high, last=last)
        text = self.text
        if last:
            # A boundary is a match end; allow a match to begin before `low` as long as it ends in range.
            match = level.reverse.search(text, max(0, low - 1), high)
            while match is not None:
                if match.end() < low:
                    return None
                if match.end() <= high and self._is_cluster_boundary(match.end()):
                    return match.end()
                if match.start() <= max(0, low - 1):
                    return None
                match = level.reverse.search(text, max(0, low - 1), match.start())
            return None
        clean = level.unless is None or level.unless.search(text, max(0, low - 2), high) is None
        if level.same is None and level.lead is not None and (clean or level.also is not None):
            # Tried at its leads, found in linear time (a run of 4,000 stops took a second by search).
            for pos in lead_match_ends(level, text, [low, high], inclusive=True, clean=clean):
                if self._is_cluster_boundary(pos):
                    return pos
            return None
        match = level.pattern.search(text, max(0, low - 1), high)
        while match is not None:
            if low <= match.end() <= high and self._is_cluster_boundary(match.end()):
                return match.end()
            match = level.pattern.search(
                text, match.end() if match.end() > match.start() else match.end() + 1, high
            )
        return None

    # -- graphemes ---------------------------------------------------------------------------------

    def _long_cluster_at(self, pos: int) -> tuple[int, int] | None:
        """The long cluster (see ``_long_clusters``) that ``pos`` lies strictly inside, if any."""
        k = bisect.bisect_left(self._long_cluster_starts, pos) - 1
        if k >= 0 and pos < self._long_clusters[k][1]:
            return self._long_clusters[k]
        return None

    def _safe_origin(self, pos: int) -> int:
        """A position at or before ``pos`` that is certainly a grapheme boundary to scan from.

        After a line feed always is, and before a CR (UAX #29 GB4, GB5); otherwise step back over
        characters that may continue a cluster (combining marks, joiners, selectors, regional
        indicators, skin tones) so that pairs and sequences are segmented from their beginning.
        """
        text = self.text
        if self._long_clusters:
            k = bisect.bisect_right(self._long_cluster_starts, pos) - 1
            if k >= 0 and pos <= self._long_clusters[k][1]:
                return (
                    self._long_clusters[k][0]
                    if pos == self._long_clusters[k][0]
                    else self._long_clusters[k][1]
                )
        floor = max(0, pos - 128)
        newline = text.rfind("\n", floor, pos)
        cr = text.rfind("\r", newline + 1 if newline != -1 else floor, pos)
        if cr != -1:
            return cr
        if newline != -1:
            return newline + 1
        origin = floor
        limit = max(0, floor - 4096)
        while origin > limit and _CONTINUES.match(text, origin):
            origin -= 1
        return origin

    def _clusters(self, low: int, high: int) -> list[int]:
        """Grapheme boundaries in [low, high], found by scanning whole clusters from a safe origin."""
        text = self.text
        origin = self._safe_origin(low)
        if origin > high:  # [low, high] lies inside one long cluster
            return []
        stop = min(len(text), high + 64)  # let the cluster that straddles `high` finish
        out = [origin] if origin >= low else []
        for match in GRAPHEME.pattern.finditer(text, origin, stop):
            end = match.end()
            if end > high:
                break
            if end >= low:
                out.append(end)
        return out

    def _is_cluster_boundary(self, pos: int) -> bool:
        if pos <= 0 or pos >= len(self.text):
            return True
        if ascii_settled(self.text, pos):
            return True  # ASCII on both sides and not inside CR LF
        char, before = self.text[pos], self.text[pos - 1]
        if before == "\r":  # a CR ends its cluster but before an LF (UAX #29 GB3, GB4)
            return char != "\n"
        if not _CONTINUES.match(char) and not _CONTINUES.match(before) and char != "\n":
            return True  # fast path: neither side can join a cluster
        if self._long_clusters and self._long_cluster_at(pos) is not None:
            return False
        return pos in self._clusters(pos, pos)

    def _cluster_boundary(self, low: int, high: int, *, last: bool) -> int | None:
        if last and high - low > 512:
            low = high - 512  # clusters are short: only the tail matters
        if not last and high - low > 512:
            high = low + 512
        if self._plain:  # every position is a boundary
            low, high = max(low, 0), min(high, len(self.text))
            return None if low > high else high if last else low
        found = self._clusters(low, high)
        if not found:
            return None
        return found[-1] if last else found[0]

    def _smallest_end(self, start: int, prev_end: int) -> int:
        """The end of the first grapheme that ends after ``prev_end`` (used when nothing fits)."""
        inside = self._long_cluster_at(prev_end + 1) if self._long_clusters else None
        if inside is not None:
            return min(self.plan.end, max(inside[1], start + 1))  # one cluster longer than the budget
        after = self._cluster_boundary(prev_end + 1, min(self.plan.end, prev_end + 512), last=False)
        end = after if after is not None else min(self.plan.end, prev_end + 1)
        return max(end, start + 1)

    def _first_forced(self, start: int, prev_end: int, reach: int) -> int | None:
        forced = self._forced
        if not forced:
            return None
        end = self.plan.end
        i = bisect.bisect_right(forced, prev_end)
        j = bisect.bisect_right(forced, reach)
        for pos in forced[i:j]:
            if pos < end and self._has_body(start, pos) and self._trailing_heading(start, pos) is None:
                if self.min_size == 0 or self.meter.size(start, self._trim_end(start, pos)) >= self.min_size:
                    return pos
        return None

    def _has_body(self, start: int, end: int) -> bool:
        """Whether [start, end) holds more than headings: a heading alone must not be a chunk."""
        heading_ends, text, headings = self.plan.heading_ends, self.text, self._headings
        cursor = heading_ends.get(start, start)
        i = bisect.bisect_right(headings, start)
        while i < len(headings) and headings[i] < end:
            pos = headings[i]
            if _NON_SPACE.search(text, cursor, pos):
                return True
            cursor = max(cursor, heading_ends[pos])
            i += 1
        return _NON_SPACE.search(text, cursor, end) is not None

    def _kept_group_start(self, start: int, prev_end: int, reach: int) -> int | None:
        """Start of the outermost group that begins in (prev_end, reach), runs past reach and fits."""
        groups = self.plan.groups
        i = bisect.bisect_right(self._group_starts, max(start, prev_end))
        for k in range(i, len(groups)):
            group = groups[k]
            if group.start >= reach:
                break
            if group.end <= reach or group.start <= start:
                continue
            if not self._group_fits_alone(k):
                continue
            if self.min_size and self.meter.size(start, self._trim_end(start, group.start)) < self.min_size:
                continue
            if _NON_SPACE.search(self.text, start, group.start):
                return group.start  # groups are sorted by start: the first that qualifies is outermost
        return None

    def _group_fits_alone(self, k: int) -> bool:
        fits = self._group_fits.get(k)
        if fits is None:
            group = self.plan.groups[k]
            begin = self._skip_space(group.start, group.end)
            end = self._trim_end(begin, group.end)
            # The estimate rules out groups far over budget without encoding them.
            fits = (
                self.meter.estimate(begin, end) <= self.max_size * 1.25 + 4
                and self.meter.size(begin, end) <= self.max_size
            )
            self._group_fits[k] = fits
        return fits

    # -- reviewer constraints ---------------------------------------------------------------------

    def _first_break(self, start: int, prev_end: int, reach: int) -> int | None:
        """The first break in (prev_end, reach] with text before it in this chunk."""
        i = bisect.bisect_right(self._breaks, max(start, prev_end))
        for pos in self._breaks[i:]:
            if pos > reach:
                return None
            if self.text[start:pos].strip():
                return pos
        return None

    def _kept_span_start(self, start: int, prev_end: int, reach: int) -> int | None:
        """Start of the first fitting keep span that begins in (prev_end, reach) and runs past reach."""
        for keep_start, keep_end in self._keep:
            if keep_start >= reach:
                break
            if keep_start <= max(start, prev_end) or keep_end <= reach:
                continue
            if self._keep_span_fits(keep_start, keep_end) and self.text[start:keep_start].strip():
                return keep_start
        return None

    def _honour_keep(self, start: int, prev_end: int, reach: int, end: int, clean: bool) -> tuple[int, bool]:
        """Move an end that falls strictly inside a fitting keep span to the span's end or start."""
        if not self._keep or end in self._breaks:
            return end, clean
        for _ in range(len(self._keep) + 1):  # nested or chained spans: each move is checked again
            inside = next(((a, b) for a, b in self._keep if a < end < b and self._keep_span_fits(a, b)), None)
            if inside is None:
                return end, clean
            keep_start, keep_end = inside
            if keep_end <= reach:
                end, clean = keep_end, True
            elif keep_start > max(start, prev_end) and self.text[start:keep_start].strip():
                end, clean = keep_start, True
            else:
                return end, clean  # cannot be met from this start; check_spans reports it
        return end, clean

    def _keep_span_fits(self, keep_start: int, keep_end: int) -> bool:
        key = (keep_start, keep_end)
        fits = self._keep_fits.get(key)
        if fits is None:
            begin = self._skip_space(keep_start, keep_end)
            end = self._trim_end(begin, keep_end)
            fits = (
                self.meter.estimate(begin, end) <= self.max_size * 1.25 + 4
                and self.budget_size(begin, end) <= self.max_size
            )
            self._keep_fits[key] = fits
        return fits

    # -- overlap ----------------------------------------------------------------------------------

    def _overlap_start(self, start: int, end: int) -> int:
        low = max(self.meter.back(end, self.overlap), start + 1)
        if low >= end:
            return end
        pos = self._best_boundary(low, end - 1, last=False, floor=self.plan.overlap_floor)
        # `back` estimates (tokens): check the shared text on its own and move on while it is too big.
        trimmed_end = self._trim_end(start, end)
        for _ in range(16):
            if pos is None or pos <= start or pos >= end:
                return end
            if self.meter.size(self._skip_space(pos, end), trimmed_end) <= self.overlap:
                break
            pos = self._best_boundary(pos + 1, end - 1, last=False, floor=self.plan.overlap_floor)
        else:
            return end
        if self._mid_line_of_group(pos):  # a table row or code line: start at the next line instead
            newline = self.text.find("\n", pos, end)
            if newline == -1 or newline + 1 >= end:
                return end
            pos = newline + 1
        k = bisect.bisect_left(self._heading_starts, pos) - 1
        if k >= 0 and pos < self.plan.heading_ends[self._heading_starts[k]]:  # inside a heading's line(s)
            pos = self.plan.heading_ends[self._heading_starts[k]]
            if self._skip_space(pos, end) >= end:
                return end
        # Never reach back across a forced boundary.
        k = bisect.bisect_right(self._forced, pos)
        if k < len(self._forced) and self._forced[k] < end:
            return self._forced[k]
        # Nor across a reviewer's break (the nearest one before the end).
        k = bisect.bisect_left(self._breaks, end) - 1
        if k >= 0 and self._breaks[k] > pos:
            return self._breaks[k]
        return pos

    def _whole_line_end(self, start: int, prev_end: int, end: int) -> int:
        """An end inside a table row or code line moves back to that line's start, when the chunk still
        holds text before it: a row or a line is cut only when it cannot fit in a chunk of its own."""
        if not self._mid_line_of_group(end):
            return end
        newline = self.text.rfind("\n", max(start, prev_end), end)
        if newline == -1 or not _NON_SPACE.search(self.text, start, newline + 1):
            return end
        return newline + 1

    def _mid_line_of_group(self, pos: int) -> bool:
        """Whether ``pos`` is inside a line of a table's or code block's body (not at its start)."""
        k = bisect.bisect_left(self._line_group_starts, pos) - 1  # groups whose body starts before pos
        return k >= 0 and pos < self._line_group_reach[k] and self.text[pos - 1] != "\n"

    # -- whitespace -------------------------------------------------------------------------------

    def _skip_space(self, pos: int, limit: int) -> int:
        """Move past whitespace, but keep the indentation of the line the chunk starts on."""
        text = self.text
        found = _NON_SPACE.search(text, pos, limit)
        first = found.start() if found is not None else max(pos, limit)
        if first >= limit:
            return first
        if first == pos:
            return (
                first
                if self._is_cluster_boundary(first)
                else self._cluster_boundary(max(0, first - 64), first, last=True) or first
            )
        if not self._is_cluster_boundary(first):
            return first - 1  # the space before a combining mark belongs to its cluster
        newline = text.rfind("\n", pos, first)
        line_start = newline + 1 if newline != -1 else (pos if pos == 0 or text[pos - 1] == "\n" else first)
        if line_start < first and (
            first - line_start > 32 or self.meter.size(line_start, first) * 2 > self.max_size
        ):
            return first
        return line_start

    def _opening(self, start: int, end: int) -> int:
        """Where a chunk that opens with the span [start, end) starts: at its first character (the
        scanner puts a boundary there when the line's start is one, so the line's indentation, which
        ``_skip_space`` keeps, is not in the chunk)."""
        # ``_skip_space`` of the first non-space at or after ``start`` is that position when it lies
        # before ``end`` at a grapheme boundary settled without the grapheme rules (one search, not
        # two, and no call: half the cost, issue 22).
        text = self.text
        found = _NON_SPACE.search(text, start, self.plan.end)
        first = found.start() if found is not None else max(start, self.plan.end)
        if first < end and (self._plain or first <= 0 or ascii_settled(text, first)):
            return first
        return self._skip_space(first, end)

    def _next_text(self, pos: int) -> int:
        """The first non-space position at or after ``pos`` (the end of the text when none)."""
        text, limit = self.text, self.plan.end
        while pos < limit and text[pos].isspace():
            pos += 1
        return pos

    def _trim_end(self, start: int, end: int) -> int:
        text = self.text
        while end > start and text[end - 1].isspace():
            end -= 1
        return end

    def _over_budget_reason(self, start: int, end: int) -> str:
        if self.reserve is not None and self.meter.size(start, end) <= self.max_size:
            prefix = self.reserve.at(start)
            return (
                f"no boundary fits the budget beside the embed_text prefix ({prefix.size} {self.meter.unit})"
            )
        if (start, end) in self._long_clusters or (
            end - start <= 64 and self._clusters(start, end) in ([end], [start, end])
        ):
            return "a single grapheme is larger than the budget"
        return "no boundary fits the budget"
