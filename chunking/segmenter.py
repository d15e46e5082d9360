"""The global segmenter: every chunk boundary of a document chosen at once, by dynamic programming.

Method (in the manner of Knuth–Plass line breaking). The strategy's plan is the cost model. Its
structural boundaries (headings, block and list-item starts, table rows, code lines, wrapped lines),
the end of the text and the reviewer's breaks are the *candidates*; textual levels (paragraph, line,
sentence, word, grapheme) are added lazily, only inside gaps wider than a quarter of the budget
between the candidates at least as strong as the level (words and graphemes sampled every sixteenth
of a budget), so a 10 MB line or a 1 MB table stays linear. A level's gaps lie inside the previous
level's (candidates are only added), so each level looks only there (``packer.find_ends`` finds its
matches). Candidates that differ only by white space are one cut (the cheapest).

The rules are written once, here, in Python, and expressed as *data per unit*, not per candidate
(``Segmenter._prices``): a price by score (``_SCORE_PRICES``, from PRICE_BY_SCORE); an interval
``[lo, hi)`` with a price for each heading (inside it or right after it) and for each procedure, list,
table, code block, section and block (``_blocks``) that fits; a forbidden interval for each keep span that fits; and, per
candidate, the few prices a unit decides by looking at its text (mid-sentence: findings'
_SENTENCE_END on the four characters before the cut, remembered per window; mid-row: not at a line
start inside a table or code body; a '#' line before the cut in a plan without headings: findings'
_ATX_LINE, evaluated only for the candidates on such a line, remembered by the line's text). The
generic work is done by kernels over arrays with no rule of their own, in C (chunking/_segment.c) and
held equal to their Python twins here (tests/core/test_segmenter.py): ``cut_candidates`` (sums the
interval prices by a sweep, drops forbidden candidates, keeps one cut per white-space run),
``trim_ends``, ``lookup`` (the heading-span prefix sums at each cut, the reserves by prefix, indices),
``skip_spaces`` (chunk starts and first characters where the characters settle
``Packer._skip_space``; the packer decides the rest), ``window_extra`` (the mid-sentence extras from
the per-window memo, without a look where the window's last character is none _SENTENCE_END can end
with, read from it by ``ending_terms``), the level finders ``wide_gaps`` (a level's gaps, all at
once), ``class_ends`` (the ends of a level whose pattern is character classes, read from its ``re``
pattern by ``level_spec``: paragraph, line, and in characters words kept every sixteenth of a budget),
``class_positions`` (where a level's ``lead`` matches: classes as code point ranges, one of them
checked by its lookahead, read from the ``re`` pattern by ``lead_classes``; the sentence pattern is
then tried there only) and ``first_in_ranges`` (whether the text has a level's ``unless``
character), ``line_heads`` (the cuts whose trimmed text ends a line _ATX_LINE may begin, each line
read once and looked up in the per-line memo), ``merge_levels`` (the plan's positions and each level's
finds merged into one sorted candidate list, a duplicate keeping its best score), ``text_spans`` (the
spans between consecutive bounds with a candidate inside their trimmed text, and those whose size
settles the fit: the blocks, ``_blocks``), ``live_spans`` (the units with a candidate inside their
text), ``fit_sizes`` (sizes plus a looked-up reserve within the budget, ``_fit_all``),
``capped_intervals`` (each heading's interval to its text, capped at the next heading), and the optimiser
``best_predecessors``. The additive size prefixes are the cut offsets
for characters and come from the meter's arrays for words and tokens (whose gaps ``wide_gaps`` gives
unmeasured, measured then by the prefixes in one lookup per level).

A segmentation is a sequence of cuts; its cost is

    Σ over chunks  PRICE_CHUNK + Σ PRICE_SPANS_HEADING[depth] over the headings inside it (not at its start)
                   + PRICE_UNDERSIZED if the chunk is smaller than min_size
    + Σ over cuts  price of the cut (below).

The price of a cut at position p is the sum of:

| what the cut does                                                   | price |
|---------------------------------------------------------------------|------:|
| ends at a heading or at the end of the text (score >= 90)           |     0 |
| ends at a block boundary, paragraph break (score 60–89)             |     5 |
| ends at a list item, table row, line (score 30–59)                  |    15 |
| ends at a lead-in, code line, sentence end (score 20–29)            |    25 |
| ends at a wrapped line, first table row, list continuation, the     |    40 |
|   first block after a heading (12–19)                               |       |
| ends at a word gap (score 10–11)                                    |    60 |
| ends inside a word (grapheme, score < 10)                           |  1000 |
| mid-sentence: score < 30, not in a table or code body, and the text  |   400 |
|   before the cut does not end a sentence                            |       |
| inside a table row or code line (mid-line of a line group)          |  1000 |
| inside each procedure, list, table or code block that fits whole    |  3000 |
| inside each block that fits whole (a paragraph, mostly: between two |   100 |
|   block boundaries, which are the cuts scored 60 or more and where  |       |
|   the text after a heading begins; PRICE_SPLIT_BLOCK_CHUNKS chunk   |       |
|   prices): a fitting paragraph is cut only where one more chunk, or |       |
|   a cut at a paragraph break, would cost more                       |       |
| inside each section that fits whole                                 |    40 |
| leaves a heading at the chunk's end, or cuts inside a heading       |  2000 |
|   (below a fitting unit's split: where a heading and the unit after  |       |
|   it do not fit together, the unit stays whole)                     |       |

with PRICE_CHUNK = 100 (``Plan.chunk_price``; the size term: fewer, fuller chunks) and PRICE_UNDERSIZED = 5000.
A heading inside a chunk costs by its depth in the section tree (``heading_span_prices``):

| heading run across (not at the chunk's start)               | price |
|--------------------------------------------------------------|------:|
| depth 1 (a top-level section of the document)                |    90 |
| depth 2                                                      |    70 |
| depth 3                                                      |    50 |
| depth 4 and deeper                                           |    30 |
| right after another heading (only white space between)       |     0 |

All below PRICE_CHUNK, so small sections that fit together share a chunk (fewer chunks than one per
heading), and the chunks that span headings span the deepest; a cut at a heading stays free, so a
section that does not fit with its neighbours still opens its chunk. Hard constraints: a chunk's
trimmed text is within the budget less its start's ``embed_text`` prefix (with ``budget: embed_text``;
``chunkyard.chunking.prefix``), measured additively — exact for characters and words, the
whole-document token estimate for tokens, then every chosen chunk (prefix + text) is measured exactly and the search
repeated with a smaller allowance from that start until all fit); no chunk spans a reviewer's break;
no cut inside a reviewer's keep span that fits. A unit that cannot fit (no candidate inside it) is one
chunk over budget. Each chunk's allowance is an input per start (``allowances``, ``fulls``), so a
per-start reserve (for an embedded prefix, say) is a change of those arrays only.

Overlap is applied after the boundaries are chosen (``Packer``): each chunk after the first gets
``overlap`` units less allowance (or the full budget for PRICE_NO_OVERLAP = 300, and then no overlap),
and then starts at the packer's overlap start before its boundary when the chunk still fits.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

import regex

from chunkyard.chunking import native
from chunkyard.chunking.levels import ATX_LAST_LINE as _ATX_LINE
from chunkyard.chunking.levels import SCORE_PARAGRAPH, ascii_settled, find_ends
from chunkyard.chunking.levels import SENTENCE_ENDED as _SENTENCE_END
from chunkyard.chunking.units import CharMeter, TokenMeter, WordMeter

try:  # re's parser reads the levels' patterns as data (class_ranges, level_spec, lead_classes, ending_terms)
    import re._parser as _re_parser
    from re._constants import ASSERT as _ASSERT
    from re._constants import AT as _AT
    from re._constants import AT_BEGINNING as _AT_BEGINNING
    from re._constants import AT_END as _AT_END
    from re._constants import BRANCH as _BRANCH
    from re._constants import CATEGORY as _CATEGORY
    from re._constants import CATEGORY_NOT_SPACE as _CATEGORY_NOT_SPACE
    from re._constants import CATEGORY_SPACE as _CATEGORY_SPACE
    from re._constants import IN as _IN
    from re._constants import LITERAL as _LITERAL
    from re._constants import MAX_REPEAT as _MAX_REPEAT
    from re._constants import MAXREPEAT as _MAXREPEAT
    from re._constants import NEGATE as _NEGATE
    from re._constants import RANGE as _RANGE
except ImportError:  # pragma: no cover - a Python whose re has another layout
    _re_parser = None

if TYPE_CHECKING:
    from collections.abc import Container

    from chunkyard.chunking.levels import TextLevel
    from chunkyard.chunking.packer import Packer, Plan

PRICE_CHUNK = 100
# A chunk that runs across a heading (not at its start), by the heading's depth in the section tree
# (1: a top-level heading of the document; deeper ones after the last entry take it). Below
# PRICE_CHUNK, so small sections that fit together share a chunk (fewer chunks), and rising towards the
# top, so the chunks that span headings span the deepest; free for a heading right after another
# heading (a heading alone is never a chunk). A heading without a section (no section groups in the
# plan) takes the depth-1 price.
PRICE_SPANS_HEADING = (90, 70, 50, 30)
# Below the chunk price, so ``Segmenter._whole`` may skip the search for a page with headings.
_MOST_HEADING_PRICE = max(PRICE_SPANS_HEADING)
PRICE_UNDERSIZED = 5000
PRICE_MID_SENTENCE = 400
SCORE_MID_SENTENCE_BELOW = 30  # cuts scored below this (below a line) may be mid-sentence
PRICE_MID_ROW = 1000
PRICE_HEADING_AT_END = 2000
PRICE_SPLIT = {"procedure": 3000, "list": 3000, "table": 3000, "code": 3000, "section": 40}
# A cut inside a block (a paragraph, mostly: between two boundaries scored SCORE_BLOCK or more) that
# fits whole costs this many chunk prices (``Plan.chunk_price``): a fitting paragraph is cut only where
# keeping it whole would cost more than one more chunk.
PRICE_SPLIT_BLOCK_CHUNKS = 1
SCORE_BLOCK = (
    SCORE_PARAGRAPH  # a block boundary: a paragraph break or block start, a heading, a break, the end
)
# (lowest score, price) of a cut by the boundary's score, best first; linear in between.
PRICE_BY_SCORE = ((90, 0), (60, 5), (30, 15), (20, 25), (12, 40), (10, 60), (0, 1000))
PRICE_NO_OVERLAP = 300  # a chunk that needs the room reserved for overlap: it gets none
PRICE_OVER_BUDGET = 10**9  # a chunk that cannot fit: allowed only between adjacent candidates
SCORE_BREAK = 10**6  # a reviewer's break
_UNREACHABLE = 1 << 62
_DEFAULT_FLAGS = regex.compile("").flags
_RE_DEFAULT_FLAGS = re.compile("").flags
_INDENT_KEPT = 32  # Packer._skip_space: a chunk keeps at most this much of its line's indentation
_NON_SPACE = re.compile(r"\S")
# Whether the text before a cut (its last four characters) ends a sentence (findings' _SENTENCE_END),
# remembered per window: the same few endings recur.
_ENDS_SENTENCE: dict[str, bool] = {}
# Lines that may be ATX headings (findings' _ATX_LINE decides): '#' after at most three spaces.
_ATX_AT_START = re.compile(r" {0,3}#")
_ATX_WINDOW = 300  # findings look for the heading line in the 300 characters before the cut
# An ATX heading inside list items or block quotes ("- #### Why?", "> ## Note"): one line, its
# container markers first.
_HASH_AFTER_GAP = re.compile(r"#(?<=[ \t>]#)")  # a '#' such a line has (first a literal: a fast search)
_CONTAINED_HEADING = re.compile(r"(?m)^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+|>[ \t]?)+#{1,6}(?:[ \t][^\n]*)?$")

# The optimiser in C (chunking/_segment.c) when it was built and is current; ``best_predecessors`` is
# the reference.
_native = native.load("_segment")
# A Group's (start, end, kind), the key ``_prices`` keeps one unit per.
_SPAN_OF = operator.itemgetter(1, 2, 0)


_CLASSES: dict[tuple[str, bool], list[int] | None] = {}


def class_ranges(pattern: regex.Pattern[str]) -> list[int] | None:
    """The code points a pattern that is one character class of literals and ranges matches (flat
    pairs lo, hi, inclusive; tests/core/test_segmenter.py checks every code point), else None."""
    key = (pattern.pattern, isinstance(pattern, re.Pattern))
    if key not in _CLASSES:
        ranges: list[int] | None = None
        try:
            default = _RE_DEFAULT_FLAGS if isinstance(pattern, re.Pattern) else _DEFAULT_FLAGS
            usable = _re_parser is not None and pattern.flags == default
            parsed = list(_re_parser.parse(key[0])) if usable else []
        except re.error:
            parsed = []
        if len(parsed) == 1 and parsed[0][0] is _IN:
            ranges = []
            for op, arg in parsed[0][1]:
                if op is _LITERAL:
                    ranges += (arg, arg)
                elif op is _RANGE:
                    ranges += arg
                else:
                    ranges = None
                    break
        _CLASSES[key] = ranges
    return _CLASSES[key]


def first_in_ranges(text: str, ranges: list[int], start: int, end: int) -> int:
    """The first index in [start, end) whose code point lies in one of ``ranges`` (flat pairs lo, hi,
    inclusive), else -1."""
    pairs = list(zip(ranges[::2], ranges[1::2], strict=True))
    for k in range(max(0, start), min(end, len(text))):
        code = ord(text[k])
        if any(lo <= code <= hi for lo, hi in pairs):
            return k
    return -1


def ends_in_atx_line(text: str, pos: int) -> bool:
    """Whether ``_ATX_LINE.search(text, max(0, pos - 300), pos)`` finds the text before ``pos`` to end
    in an ATX heading line, as findings ask: only the window's last line can match (``\\Z`` after
    ``[^\\n]*``, and ``^`` only at a line start), so the pattern is tried there alone."""
    low = max(0, pos - _ATX_WINDOW)
    return _ATX_LINE.match(text, max(low, text.rfind("\n", low, pos) + 1), pos) is not None


# ``ends_in_atx_line`` by the text of the line before the cut, when that starts at a line start: the
# pattern has no lookbehind and its ``^`` holds there, so the answer is the line's (headings recur).
_ENDS_IN_ATX: dict[str, bool] = {}


def ends_in_atx_lines(text: str, positions: list[int]) -> list[bool]:
    """``ends_in_atx_line(text, pos)`` for each position, remembered by line text in ``_ENDS_IN_ATX``."""
    memo = _ENDS_IN_ATX
    if len(memo) > 1 << 16:
        memo.clear()
    out = []
    rfind, match = text.rfind, _ATX_LINE.match
    for pos in positions:
        low = pos - _ATX_WINDOW if pos > _ATX_WINDOW else 0
        line = rfind("\n", low, pos) + 1
        if line == 0 and low > 0:  # the window starts inside its line: ``^`` does not hold there
            out.append(match(text, low, pos) is not None)
            continue
        key = text[line:pos]
        ends = memo.get(key)
        if ends is None:
            ends = memo[key] = match(text, line, pos) is not None
        out.append(ends)
    return out


def line_heads(
    text: str,
    positions: list[int],
    scores: list[int],
    below: int,
    end: int,
    low: int,
    width: int,
    spec: list[int],
    memo: dict[str, bool],
) -> tuple[list[int], list[int], list[int]]:
    """The candidates scored below ``below`` and before ``end`` whose position, moved back over white
    space (not below ``low``) to t, ends a line that ``spec`` (``_items`` data, matched greedily, within
    the line up to t) begins: the last line of the window ``[max(0, t - width), t)``, where ``^`` holds
    (a line start; not a window starting inside its line). Each such line's text up to t is looked up
    in ``memo``: ``hits``, the indices where it says True; ``missing``, those it does not hold, with
    their t in ``trimmed``."""
    items = _items(spec)
    hits: list[int] = []
    missing: list[int] = []
    trimmed: list[int] = []
    memo_trim = [-1, 0]
    for k, (pos, score) in enumerate(zip(positions, scores, strict=True)):
        if score >= below or pos >= end:
            continue
        pos = _trim_back(text, pos, low, memo_trim)
        window = pos - width if pos > width else 0
        line = text.rfind("\n", window, pos) + 1
        if line == 0 and window > 0:
            if text[window - 1] != "\n":
                continue
            line = window
        if _match_at(items, text, line, pos) < 0:
            continue
        value = memo.get(text[line:pos])
        if value is None:
            missing.append(k)
            trimmed.append(pos)
        elif value:
            hits.append(k)
    return hits, missing, trimmed


def score_price(score: int) -> int:
    """The price of a cut at a boundary of this score: PRICE_BY_SCORE, linear between its rows (so the
    graded scores of a strategy, such as the semantic one's, keep their order)."""
    if score >= PRICE_BY_SCORE[0][0]:
        return 0
    for (high, high_price), (low, low_price) in itertools.pairwise(PRICE_BY_SCORE):
        if score >= low:
            if low_price >= PRICE_MID_ROW:  # below a word gap: inside a word
                return low_price
            return high_price + (low_price - high_price) * (high - score) // (high - low)
    return PRICE_BY_SCORE[-1][1]


# score_price for every score up to the first free row; higher scores take the last entry (0).
_SCORE_PRICES = [score_price(score) for score in range(PRICE_BY_SCORE[0][0] + 1)]


def heading_span_prices(
    plan: Plan, heading_starts: list[int], text: str, reaches: list[int] | None = None
) -> list[int]:
    """The price of a chunk running across each heading of ``heading_starts`` (sorted): PRICE_SPANS_HEADING
    by the heading's depth among the plan's ``section`` groups, 0 right after another heading (only white
    space from its end; ``reaches``, when given: the first non-space position from each heading's end,
    ``Packer._next_text``, so that the next heading is right after it when it starts there or before)."""
    sections = sorted((g.start, -g.end) for g in plan.groups if g.kind == "section")
    depth_at: dict[int, int] = {}
    open_ends: list[int] = []
    for start, neg_end in sections:
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        open_ends.append(-neg_end)
        depth_at.setdefault(start, len(open_ends))
    heading_ends = plan.heading_ends
    if reaches is None:
        after = [
            k > 0 and _NON_SPACE.search(text, heading_ends[heading_starts[k - 1]], start) is None
            for k, start in enumerate(heading_starts)
        ]
    else:
        after = [False] + [
            reach >= start for reach, start in zip(reaches[:-1], heading_starts[1:], strict=True)
        ]
    # The price by depth (1 up to the most sections that can be open), the deepest row past its end,
    # so that each heading's is one lookup.
    by_depth = [
        0,
        *PRICE_SPANS_HEADING,
        *[PRICE_SPANS_HEADING[-1]] * (len(sections) - len(PRICE_SPANS_HEADING)),
    ]
    depth = depth_at.get
    return [
        0 if right_after else by_depth[depth(start, 1)]
        for start, right_after in zip(heading_starts, after, strict=True)
    ]


def best_predecessors(
    heads: list[int],
    tails: list[int],
    prices: list[int],
    inside_head: list[int],
    inside_tail: list[int],
    floors: list[int],
    allowances: list[int],
    fulls: list[int],
    max_allowance: int,
    min_size: int,
    chunk_price: int,
) -> list[int]:
    """The optimiser: for candidates 0..n-1 (0 the origin), the predecessor of each on a cheapest path.

    A chunk from candidate i to j has size ``tails[j] - heads[i]`` (non-decreasing arrays) and costs
    ``chunk_price + prices[j] + inside_tail[j] - inside_head[i]`` (prefix sums of the prices of the
    headings it runs across), + PRICE_UNDERSIZED below ``min_size``. It is allowed when ``i >= floors[j]``
    and its size is at most ``allowances[i]``, or at most ``fulls[i]`` for PRICE_NO_OVERLAP more (a chunk
    that then gets no overlap). When no i is allowed, the chunk from j - 1 is taken at PRICE_OVER_BUDGET.
    Ties go to the later i.
    """
    n = len(heads)
    best = [_UNREACHABLE] * n
    previous = [-1] * n
    best[0] = 0
    for j in range(1, n):
        tail, inside, floor = tails[j], inside_tail[j], floors[j]
        here = chunk_price + prices[j]
        chosen, cost = -1, _UNREACHABLE
        i = j - 1
        while i >= floor:
            size = tail - heads[i]
            if size > max_allowance:
                break
            if best[i] < _UNREACHABLE and (size <= allowances[i] or size <= fulls[i]):
                total = best[i] + here + inside - inside_head[i]
                if size > allowances[i]:
                    total += PRICE_NO_OVERLAP
                if size < min_size:
                    total += PRICE_UNDERSIZED
                if total < cost:
                    chosen, cost = i, total
            i -= 1
        if chosen < 0 and j - 1 >= floor and best[j - 1] < _UNREACHABLE:
            chosen, cost = j - 1, best[j - 1] + here + PRICE_OVER_BUDGET
        best[j], previous[j] = cost, chosen
    return previous


def optimise(*problem: int | list[int]) -> list[int]:
    """``best_predecessors(*problem)`` (the same arguments, in order), in C when chunking/_segment.c is
    built; the C kernel takes the three prices the Python reads from this module as arguments."""
    if _native is not None:
        return _native.best_predecessors(*problem, PRICE_NO_OVERLAP, PRICE_UNDERSIZED, PRICE_OVER_BUDGET)
    return best_predecessors(*problem)


class Problem(NamedTuple):
    """One document's search, as ``best_predecessors`` saw it last, and the path it chose (for tests)."""

    points: list[int]
    heads: list[int]
    tails: list[int]
    prices: list[int]
    inside_head: list[int]
    inside_tail: list[int]
    floors: list[int]
    allowances: list[int]
    fulls: list[int]
    max_allowance: int
    min_size: int
    chunk_price: int
    chosen: list[int]


def cut_candidates(
    text: str,
    positions: list[int],
    scores: list[int],
    extra: list[int],
    score_prices: list[int],
    intervals: list[int],
    forbidden: list[int],
    free_score: int,
    end: int,
) -> tuple[list[int], list[int], list[int]]:
    """The cuts and their prices, from the candidates (sorted positions, scores) and the price data.

    A candidate at ``end`` or scored ``free_score`` or more costs 0 and is never forbidden. Any other
    costs ``score_prices[score]`` (the last entry for higher scores) + ``extra[k]`` + the price of
    each interval ``lo <= pos < hi`` (``intervals``: flat triples lo, hi, price); one inside a
    ``forbidden`` interval (flat pairs lo, hi) is dropped. Of a run of candidates with only white
    space between them one cut is kept: a free one, else the cheapest (the later among equals).
    ``end`` closes the list.
    """
    n = len(positions)
    add = [0] * (n + 1)
    ban = [0] * (n + 1)
    for k in range(0, len(intervals), 3):
        a = bisect.bisect_left(positions, intervals[k])
        b = bisect.bisect_left(positions, intervals[k + 1])
        if a < b:
            add[a] += intervals[k + 2]
            add[b] -= intervals[k + 2]
    for k in range(0, len(forbidden), 2):
        a = bisect.bisect_left(positions, forbidden[k])
        b = bisect.bisect_left(positions, forbidden[k + 1])
        if a < b:
            ban[a] += 1
            ban[b] -= 1
    top = len(score_prices) - 1
    cuts: list[int] = []
    prices: list[int] = []
    kept_scores: list[int] = []
    running = banned = clean = 0
    for k in range(n):
        running += add[k]
        banned += ban[k]
        pos, score = positions[k], scores[k]
        free = score >= free_score or pos >= end
        if free:
            price = 0
        elif banned:
            continue
        else:
            price = score_prices[max(0, min(score, top))] + extra[k] + running
        # [last cut, clean) is white space already seen: a long run of candidates is read once.
        if cuts and _NON_SPACE.search(text, clean, pos) is None:
            clean = pos
            if kept_scores[-1] >= free_score or (score < free_score and price > prices[-1]):
                continue
            cuts[-1], prices[-1], kept_scores[-1] = pos, price, score
            continue
        clean = pos
        cuts.append(pos)
        prices.append(price)
        kept_scores.append(score)
    if not cuts or cuts[-1] != end:
        cuts.append(end)
        prices.append(0)
        kept_scores.append(1000)
    return cuts, prices, kept_scores


def _trim_back(text: str, pos: int, low: int, memo: list[int]) -> int:
    """``pos`` moved back over white space, not below ``low``; a walk that reaches the position the
    previous walk (``memo``: [raw, trimmed], same low) started from takes its answer, so positions in
    order inside one long run of white space cost the run once, not once each."""
    raw = pos
    while pos > low:
        if pos == memo[0]:
            pos = memo[1]
            break
        if not text[pos - 1].isspace():
            break
        pos -= 1
    memo[0], memo[1] = raw, pos
    return pos


def trim_ends(text: str, positions: list[int], low: int) -> list[int]:
    """Each position moved back over white space, not below ``low`` (``Packer._trim_end``)."""
    memo = [-1, 0]
    return [_trim_back(text, pos, low, memo) for pos in positions]


def lookup(keys: list[int], values: list[int] | None, queries: list[int], right: bool) -> list[int]:
    """``values[bisect(keys, q)]`` for each query (bisect_right when ``right``, else bisect_left); with
    ``values`` None, ``bisect(keys, q)``."""
    find = bisect.bisect_right if right else bisect.bisect_left
    if values is None:
        return [find(keys, q) for q in queries]
    return [values[find(keys, q)] for q in queries]


def _last_run_newline(text: str, first: int) -> int:
    """The last line feed of the white space that ends at ``first``, else -1."""
    x = first - 1
    while x >= 0 and text[x] != "\n" and text[x].isspace():
        x -= 1
    return x if x >= 0 and text[x] == "\n" else -1


def skip_spaces(
    text: str, positions: list[int], limit: int | list[int], max_indent: int, plain: bool, verify_indent: bool
) -> tuple[list[int], list[int]]:
    """Each position moved past white space (up to ``limit``, one or one per position) as
    ``Packer._skip_space`` moves a chunk start, where the characters settle it: back to the line start
    when the indentation skipped is at most ``max_indent`` characters. ``unsure``: the indices the
    caller decides itself (a cluster boundary not settled by ASCII, unless ``plain``; a kept
    indentation when ``verify_indent``). With ``max_indent`` -1 and ``plain`` it is
    ``Packer._next_text`` up to the limit."""
    n = len(text)
    limits = [limit] * len(positions) if isinstance(limit, int) else limit
    starts: list[int] = []
    unsure: list[int] = []
    raw, reached = -1, 0
    run_first, run_newline = -1, -1
    for k, (pos, limit) in enumerate(zip(positions, limits, strict=True)):
        bound = min(limit, n)
        if pos < bound and not text[pos].isspace():
            first = pos
        else:
            # [raw, reached) of the last walk is white space: a walk from inside it starts at its end.
            begin = min(reached, bound) if pos < bound and raw <= pos < reached else pos
            found = _NON_SPACE.search(text, begin, bound)  # re's \S: not str.isspace
            first = found.start() if found is not None else max(begin, bound)
            raw, reached = pos, first
        if first >= limit or first >= n:
            start = max(pos, limit)
            if first < limit:  # the text ends before the limit: only white space
                start = first
                unsure.append(k)
        elif not plain and not (first == 0 or ascii_settled(text, first)):
            start = first
            unsure.append(k)
        elif first == pos:
            start = pos
        else:
            if first != run_first:  # the last line feed of the white space before first, once per first
                run_first, run_newline = first, _last_run_newline(text, first)
            newline = run_newline if run_newline >= pos else -1
            line_start = (
                newline + 1 if newline != -1 else (pos if pos == 0 or text[pos - 1] == "\n" else first)
            )
            start = line_start if line_start < first and first - line_start <= max_indent else first
            if start < first and verify_indent:
                unsure.append(k)
        starts.append(start)
    return starts, unsure


def _in_class(item: tuple[int, int, int, list[int]], char: str) -> bool:
    _, _, negate, terms = item
    code = ord(char)
    inside = any(
        (lo <= code <= hi) if kind == 0 else char.isspace() == (kind == 1)
        for kind, lo, hi in zip(terms[::3], terms[1::3], terms[2::3], strict=True)
    )
    return inside != bool(negate)


def _items(spec: list[int]) -> list[tuple[int, int, int, list[int]]]:
    items, at = [], 1
    for _ in range(spec[0]):
        low, high, negate, count = spec[at : at + 4]
        items.append((low, high, negate, spec[at + 4 : at + 4 + 3 * count]))
        at += 4 + 3 * count
    return items


def _match_at(items: list[tuple[int, int, int, list[int]]], text: str, pos: int, high: int) -> int:
    """The end of the greedy match of ``items`` at ``pos`` (not past ``high``), or -1."""
    for item in items:
        count = 0
        while (item[1] < 0 or count < item[1]) and pos < high and _in_class(item, text[pos]):
            pos += 1
            count += 1
        if count < item[0]:
            return -1
    return pos


def _match_memo(
    items: list[tuple[int, int, int, list[int]]], text: str, pos: int, high: int, memo: list[int]
) -> int:
    """``_match_at`` for positions in order (``class_positions`` tries every character of a run): when
    the first item repeats without a bound, a match from inside the run the last one's first item took
    (``memo``: [from, run end, high, result]), leaving it at least its minimum, takes the same way from
    the run's end, so its answer is that match's."""
    if not items or items[0][1] >= 0:
        return _match_at(items, text, pos, high)
    first = items[0]
    if memo[0] >= 0 and memo[2] == high and memo[0] <= pos <= memo[1] and memo[1] - pos >= first[0]:
        return memo[3]
    run_end = pos
    while run_end < high and _in_class(first, text[run_end]):
        run_end += 1
    result = -1 if run_end - pos < first[0] else _match_at(items[1:], text, run_end, high)
    memo[:] = [pos, run_end, high, result]
    return result


def class_ends(
    text: str, gaps: list[int], spec: list[int], taken: list[int], plain: bool, step: int
) -> tuple[list[int], list[int]]:
    """The ends of the matches of ``spec`` (``level_spec``: classes repeated greedily) as ``finditer``
    finds them in each gap's window ``[low - 1, high)`` (flat pairs), strictly inside the gap, ``step``
    or more after the end kept before it in the gap (the gap's low at first) and not in ``taken``
    (sorted), in order; ``unsure``: the indices of those whose grapheme boundary the characters do not
    settle (unless ``plain``)."""
    items = _items(spec)
    taken_set = set(taken)
    ends: list[int] = []
    unsure: list[int] = []
    for low, high in zip(gaps[::2], gaps[1::2], strict=True):
        high = min(high, len(text))
        pos, kept = max(0, low - 1), low
        while pos < high:
            end = _match_at(items, text, pos, high)
            if end < 0:
                pos += 1
                continue
            if low < end < high and end - kept >= step and end not in taken_set:
                kept = end
                if not plain and not (end >= len(text) or ascii_settled(text, end)):
                    unsure.append(len(ends))
                ends.append(end)
            pos = max(end, pos + 1)
    return ends, unsure


def merge_levels(
    positions: list[int], scores: list[int], finds: list[list[int]], find_scores: list[int]
) -> tuple[list[int], list[int]]:
    """The candidates, sorted, with their scores: ``positions`` (sorted; a position given twice takes
    its best score), then each list of ``finds`` (sorted) with its score from ``find_scores``, which
    replaces the score of a position found before."""
    found: dict[int, int] = {}
    for pos, score in zip(positions, scores, strict=True):
        if found.get(pos, -1) < score:
            found[pos] = score
    for more, score in zip(finds, find_scores, strict=True):
        found.update(dict.fromkeys(more, score))
    ordered = sorted(found)
    return ordered, [found[pos] for pos in ordered]


def wide_gaps(
    gaps: list[int], positions: list[int], scores: list[int], min_score: int, found: list[int], budget: int
) -> list[int]:
    """Inside each gap (low, high) (flat pairs, sorted, disjoint): the points, the ``positions`` scored
    ``min_score`` or more and the ``found`` (both sorted), with low and high; of each two consecutive
    points a, b, the pair when ``(b - a) * 4 > budget`` (flat)."""
    out: list[int] = []
    for low, high in zip(gaps[::2], gaps[1::2], strict=True):
        i, j = bisect.bisect_right(positions, low), bisect.bisect_left(positions, high)
        strong = [p for p, s in zip(positions[i:j], scores[i:j], strict=True) if s >= min_score]
        inside = found[bisect.bisect_right(found, low) : bisect.bisect_left(found, high)]
        points = [low, *sorted(strong + inside), high]
        for a, b in itertools.pairwise(points):
            if (b - a) * 4 > budget:
                out += (a, b)
    return out


@functools.cache
def _ranges_class(ranges: tuple[int, ...]) -> re.Pattern[str]:
    return re.compile(
        "["
        + "".join(
            f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
            for lo, hi in zip(ranges[::2], ranges[1::2], strict=True)
        )
        + "]"
    )


def _ranges_pattern(ranges: list[int]) -> re.Pattern[str]:
    """One character in any of ``ranges`` (flat pairs lo, hi, inclusive), as an ``re`` class (none: never)."""
    return _ranges_class(tuple(ranges)) if ranges else re.compile(r"(?!)")


def class_positions(
    text: str, gaps: list[int], ranges: list[int], checked: list[int], spec: list[int]
) -> tuple[list[int], list[int]]:
    """The indices of the characters in ``ranges`` (flat pairs lo, hi, inclusive) inside each gap's
    window ``[low - 1, high)`` (flat pairs, in order), those also in ``checked`` only where ``spec``
    (``level_spec`` data) matches from the next character, within the window; and the offset where each
    gap's begin in them (one more than the gaps: the end)."""
    checks = list(zip(checked[::2], checked[1::2], strict=True))
    items = _items(spec) if spec else []
    out: list[int] = []
    offsets: list[int] = []
    memo = [-1, 0, 0, 0]
    search = _ranges_pattern(ranges).finditer  # the characters in the ranges, found by re's C loop
    for low, high in zip(gaps[::2], gaps[1::2], strict=True):
        offsets.append(len(out))
        high = min(high, len(text))
        for found in search(text, max(0, low - 1), high):
            k = found.start()
            code = ord(text[k])
            if (
                not any(lo <= code <= hi for lo, hi in checks)
                or _match_memo(items, text, k + 1, high, memo) >= 0
            ):
                out.append(k)
    offsets.append(len(out))
    return out, offsets


def window_extra(
    text: str,
    positions: list[int],
    scores: list[int],
    below: int,
    row_starts: list[int],
    row_reaches: list[int],
    low: int,
    width: int,
    memo: dict[str, bool],
    price: int,
    ending: list[int],
) -> tuple[list[int], list[int]]:
    """For each candidate scored below ``below`` and not inside a row (the reach of the last row that
    starts before it, if any, is at or before it): its position moved back over white space (not below
    ``low``), and the ``width`` characters before that looked up in ``memo``: ``price`` when it says
    False, 0 when True, and its index in ``missing`` when it has no such key; ``price`` without a look
    when those characters are some and the last is in no term of ``ending`` (class terms, ``_items``;
    none: always look)."""
    extra = [0] * len(positions)
    missing: list[int] = []
    last = (1, 1, 0, ending)
    memo_trim = [-1, 0]
    for k, (pos, score) in enumerate(zip(positions, scores, strict=True)):
        if score >= below:
            continue
        row = bisect.bisect_left(row_starts, pos)
        if row > 0 and pos < row_reaches[row - 1]:
            continue
        pos = _trim_back(text, pos, low, memo_trim)
        if ending and pos > 0 and width > 0 and not _in_class(last, text[pos - 1]):
            extra[k] = price
            continue
        value = memo.get(text[max(0, pos - width) : pos])
        if value is None:
            missing.append(k)
        elif not value:
            extra[k] = price
    return extra, missing


def text_spans(
    text: str,
    positions: list[int],
    scores: list[int],
    min_score: int,
    more: list[int],
    start: int,
    end: int,
    price: int,
    budget: int,
    keys: list[int],
    values: list[int],
    plain: bool,
) -> tuple[list[int], list[int]]:
    """The spans between consecutive bounds (``start``, the ``positions`` (sorted) scored ``min_score`` or
    more, and ``more`` (sorted); once each), each as its text [first, last): first, the first non-space
    at or after its start, up to ``end`` (``skip_spaces`` without indentation); last, its end moved back
    over white space, not below its start. A span is kept when a position lies strictly inside its
    text. ``sure``: (first + 1, last, price) of each kept span with ``last - first`` plus
    ``values[bisect_right(keys, first)]`` at most ``budget`` (flat); ``asked`` instead: (start, stop,
    first, last) of each kept span (flat) when ``budget`` < 0, or, unless ``plain``, whose first is a
    grapheme boundary the characters do not settle (as ``skip_spaces``)."""
    strong = [pos for pos, score in zip(positions, scores, strict=True) if score >= min_score]
    bounds = sorted({start, *strong, *more})
    firsts = skip_spaces(text, bounds[:-1], end, -1, True, False)[0]
    sure: list[int] = []
    asked: list[int] = []
    for low, high, first in zip(bounds, bounds[1:], firsts, strict=False):
        last = trim_ends(text, [high], low)[0]  # max(low, the end moved back over white space)
        if bisect.bisect_right(positions, first) >= bisect.bisect_left(positions, last):
            continue
        settled = first == 0 or ascii_settled(text, first)
        if budget < 0 or not (plain or settled):
            asked += (low, high, first, last)
        elif last - first + values[bisect.bisect_right(keys, first)] <= budget:
            sure += (first + 1, last, price)
    return sure, asked


def live_spans(
    positions: list[int], lows: list[int], firsts: list[int], tails: list[int]
) -> tuple[list[int], list[int]]:
    """The spans with a position (``positions`` sorted) strictly inside their text [first, last), last
    being the tail not below the span's low: their indices and their lasts."""
    live: list[int] = []
    lasts: list[int] = []
    right, left = bisect.bisect_right, bisect.bisect_left
    for u, (low, first, tail) in enumerate(zip(lows, firsts, tails, strict=True)):
        last = max(low, tail)
        if right(positions, first) < left(positions, last):
            live.append(u)
            lasts.append(last)
    return live, lasts


def fit_sizes(
    begins: list[int], tails: list[int], keys: list[int], values: list[int], budget: int
) -> list[bool]:
    """Whether each span [begin, tail), empty when the tail is below its begin, plus
    ``values[bisect_right(keys, begin)]`` is at most ``budget``."""
    find = bisect.bisect_right
    return [
        max(begin, tail) - begin + values[find(keys, begin)] <= budget
        for begin, tail in zip(begins, tails, strict=True)
    ]


def capped_intervals(starts: list[int], reaches: list[int], price: int) -> list[int]:
    """(start + 1, reach + 1, price) of each start (sorted) whose reach, capped at the next start, lies
    past it (flat)."""
    out: list[int] = []
    n = len(starts)
    for k, (start, reach) in enumerate(zip(starts, reaches, strict=True)):
        if k + 1 < n:
            reach = min(reach, starts[k + 1])
        if reach > start:
            out += (start + 1, reach + 1, price)
    return out


_SPECS: dict[str, list[int] | None] = {}


def level_spec(pattern: re.Pattern[str]) -> list[int] | None:
    """A level's ``re`` pattern as the data ``class_ends`` matches, when it is a sequence of character
    classes (literals, ranges, white space, negated) each repeated a fixed or unbounded number of times,
    where greedy matching cannot need to give a character back (``_greedy_spec``), and it cannot match
    the empty string (its first item is required). None for any other pattern."""
    key = pattern.pattern
    if key not in _SPECS:
        spec = _greedy_spec(_parsed(pattern))
        _SPECS[key] = spec if spec is not None and spec[1] >= 1 else None
    return _SPECS[key]


def _parsed(pattern: re.Pattern[str]) -> list:
    """The pattern as ``re``'s parser reads it (empty when it cannot: other flags, another parser)."""
    try:
        usable = _re_parser is not None and pattern.flags == _RE_DEFAULT_FLAGS
        return list(_re_parser.parse(pattern.pattern)) if usable else []
    except re.error:
        return []


def _greedy_spec(parsed: list) -> list[int] | None:
    """A parsed sequence of character classes, each repeated, as spec data (``_items`` reads it), when
    matching each greedily cannot need to give a character back: a repeat (fewer and more times allowed)
    shares no character with any item after it up to the next required one (with none required after
    it, the greedy way is the first the backtracking tries, and it succeeds). None for another
    sequence, or one where that is not shown."""
    items: list[tuple[int, int, int, list[int]]] = []
    for op, arg in parsed:
        low = high = 1
        if op is _MAX_REPEAT and len(arg[2]) == 1:
            low, high = arg[0], -1 if arg[1] == _MAXREPEAT else arg[1]
            op, arg = list(arg[2])[0]
        item = _class_item(op, arg, low, high)
        if item is None:
            return None
        items.append(item)
    if not items:
        return None
    for k, item in enumerate(items):
        if item[0] != item[1]:
            for after in items[k + 1 :]:
                if not _disjoint(item, after):
                    return None
                if after[0] >= 1:
                    break
    spec = [len(items)]
    for low, high, negate, terms in items:
        spec += (low, high, negate, len(terms) // 3, *terms)
    return spec


_ATX_START_SPEC: list[list[int]] = []


def _atx_start_spec() -> list[int]:
    """``_ATX_AT_START`` as ``line_heads`` data (``_greedy_spec``), or, where ``re``'s parser cannot read
    it, a spec that matches at every line start (every candidate is then asked)."""
    if not _ATX_START_SPEC:
        _ATX_START_SPEC.append(_greedy_spec(_parsed(_ATX_AT_START)) or [1, 0, 0, 0, 0])
    return _ATX_START_SPEC[0]


def _disjoint(a: tuple[int, int, int, list[int]], b: tuple[int, int, int, list[int]]) -> bool:
    """Whether two classes (``_class_item``) are shown to share no character: one is a plain class whose
    terms are all excluded by the other (negated), or whose few code points the other has none of."""
    for x, y in ((a, b), (b, a)):
        x_terms = list(zip(x[3][::3], x[3][1::3], x[3][2::3], strict=True))
        y_terms = list(zip(y[3][::3], y[3][1::3], y[3][2::3], strict=True))
        if x[2]:
            continue
        if y[2] and all(
            any(k == kind and (kind != 0 or (lo <= low and high <= hi)) for k, lo, hi in y_terms)
            for kind, low, high in x_terms
        ):
            return True
        if all(kind == 0 for kind, _, _ in x_terms) and sum(hi - lo + 1 for _, lo, hi in x_terms) <= 4096:
            if not any(_in_class(y, chr(code)) for _, lo, hi in x_terms for code in range(lo, hi + 1)):
                return True
    return False


_LEADS: dict[str, tuple[list[int], list[int], list[int]] | None] = {}


def lead_classes(pattern: re.Pattern[str]) -> tuple[list[int], list[int], list[int]] | None:
    """A level's ``lead`` as the data ``class_positions`` finds (ranges, checked, spec), when it is one
    character class (literals, ranges), or an alternation of such classes of which one may be followed
    by a lookahead ``_greedy_spec`` reads (``checked``: that class, sharing no code point with the
    others; ``spec``: its lookahead). Each alternative takes one character, so ``finditer`` tries every
    position and finds those. None for any other pattern."""
    key = pattern.pattern
    if key in _LEADS:
        return _LEADS[key]
    parsed = _parsed(pattern)
    branches = list(parsed[0][1][1]) if len(parsed) == 1 and parsed[0][0] is _BRANCH else [parsed]
    ranges: list[int] = []
    checked: list[int] = []
    spec: list[int] = []
    others: list[int] = []
    found: tuple[list[int], list[int], list[int]] | None = None
    for branch in branches:
        branch = list(branch)
        first = _plain_class(branch[0]) if branch else None
        if first is None:
            break
        if len(branch) == 2 and branch[1][0] is _ASSERT and branch[1][1][0] == 1 and not checked:
            look = _greedy_spec(list(branch[1][1][1]))
            if look is None:
                break
            checked, spec = first, look
        elif len(branch) == 1:
            others += first
        else:
            break
        ranges += first
    else:
        overlap = any(
            lo <= other_hi and other_lo <= hi
            for lo, hi in zip(checked[::2], checked[1::2], strict=True)
            for other_lo, other_hi in zip(others[::2], others[1::2], strict=True)
        )
        if ranges and not overlap:
            found = (ranges, checked, spec)
    _LEADS[key] = found
    return found


_ENDINGS: dict[str, list[int] | None] = {}


def ending_terms(pattern: regex.Pattern[str]) -> list[int] | None:
    """The characters a non-empty text can end with when ``pattern.search`` finds it to end as the
    pattern says (the pattern: alternatives each ending in ``$``), as class terms (kind, lo, hi; ``_items``):
    per alternative, the classes before its ``$`` back to the first required one, or to a ``^``, and
    the line feed ``$`` may stand before. None when that is not shown (any character may end it)."""
    key = pattern.pattern
    if key in _ENDINGS:
        return _ENDINGS[key]
    found: list[int] | None = None
    try:
        default = _RE_DEFAULT_FLAGS if isinstance(pattern, re.Pattern) else _DEFAULT_FLAGS
        parsed = list(_re_parser.parse(key)) if _re_parser is not None and pattern.flags == default else []
    except re.error:
        parsed = []
    branches = list(parsed[0][1][1]) if len(parsed) == 1 and parsed[0][0] is _BRANCH else [parsed]
    terms = [0, 10, 10]  # the line feed ``$`` matches before
    for branch in branches:
        branch = list(branch)
        if not branch or branch[-1] != (_AT, _AT_END):
            break
        for op, arg in reversed(branch[:-1]):
            if op is _AT and arg is _AT_BEGINNING:
                break  # only the empty text, or what the items after it end with
            low = 1
            if op is _MAX_REPEAT and len(arg[2]) == 1:
                low = arg[0]
                op, arg = list(arg[2])[0]
            item = _class_item(op, arg, 1, 1)
            if item is None or item[2]:
                terms = []
                break
            terms += item[3]
            if low >= 1:
                break
        else:
            terms = []  # every item optional: any character before the alternative
        if not terms:
            break
    else:
        found = terms if branches and branches[0] else None
    _ENDINGS[key] = found
    return found


def _plain_class(node) -> list[int] | None:
    """A parsed literal or class of literals and ranges as code point ranges (flat pairs), else None."""
    op, arg = node
    if op is _LITERAL:
        return [arg, arg]
    if op is not _IN:
        return None
    ranges: list[int] = []
    for kind, value in arg:
        if kind is _LITERAL:
            ranges += (value, value)
        elif kind is _RANGE:
            ranges += value
        else:
            return None
    return ranges


def _class_item(op, arg, low: int, high: int) -> tuple[int, int, int, list[int]] | None:
    if op is _LITERAL:
        return (low, high, 0, [0, arg, arg])
    if op is not _IN:
        return None
    negate, terms = 0, []
    for k, (kind, value) in enumerate(arg):
        if kind is _NEGATE and k == 0:
            negate = 1
        elif kind is _LITERAL:
            terms += (0, value, value)
        elif kind is _RANGE:
            terms += (0, *value)
        elif kind is _CATEGORY and value is _CATEGORY_SPACE:
            terms += (1, 0, 0)
        elif kind is _CATEGORY and value is _CATEGORY_NOT_SPACE:
            terms += (2, 0, 0)
        else:
            return None
    return (low, high, negate, terms)


# The Python twins above, and the kernels used: in C when chunking/_segment.c is built and current,
# else the twins.
twins = SimpleNamespace(
    **{
        twin.__name__: twin
        for twin in (
            cut_candidates,
            trim_ends,
            lookup,
            skip_spaces,
            wide_gaps,
            class_positions,
            window_extra,
            line_heads,
            merge_levels,
            text_spans,
            live_spans,
            fit_sizes,
            capped_intervals,
        )
    }
)
kernel = _native if _native is not None else twins


def lead_match_ends(
    level: TextLevel, text: str, gaps: list[int], *, inclusive: bool, clean: bool = True
) -> list[int]:
    """The ends of ``level.pattern``'s matches in each gap's window ``[low - 1, high)`` (flat pairs, in
    order) that lie inside the gap (``low <= end <= high`` when ``inclusive``, else ``low < end <
    high``), in order: the pattern tried where its ``lead`` matches and not inside the match before, as
    ``levels.find_ends`` does in a text without a character of ``level.unless`` (``clean``: the caller
    knows), and where ``level.also`` matches too in a text with one. The leads are found by the kernel
    ``class_positions`` in one call when ``lead_classes`` reads the lead (the Python twin too: ``re``'s
    lookahead from every stop of a run is quadratic), else by the lead's ``finditer``; so a run of stops
    is read once, not once per stop."""
    classes = lead_classes(level.lead)
    if classes is not None:
        leads, offsets = kernel.class_positions(text, gaps, *classes)
    else:
        leads, offsets = [], []
        for low, high in zip(gaps[::2], gaps[1::2], strict=True):
            offsets.append(len(leads))
            leads += [found.start() for found in level.lead.finditer(text, max(0, low - 1), high)]
        offsets.append(len(leads))
    if not clean:  # and where ``also`` matches, merged in order gap by gap
        if level.also is None:
            raise ValueError(f"the {level.name} level has no lead for a text with {level.unless.pattern}")
        merged: list[int] = []
        bounds: list[int] = []
        for low, high, first, stop in zip(gaps[::2], gaps[1::2], offsets, offsets[1:], strict=False):
            bounds.append(len(merged))
            more = [found.start() for found in level.also.finditer(text, max(0, low - 1), high)]
            merged += sorted({*leads[first:stop], *more}) if more else leads[first:stop]
        bounds.append(len(merged))
        leads, offsets = merged, bounds
    # One pass over the gaps, those without a lead skipped; after a failed match past the first
    # character of a ``level.run``, the rest of that run too.
    match, run = level.pattern.match, level.run
    ends: list[int] = []
    for low, high, first, stop in zip(gaps[::2], gaps[1::2], offsets, offsets[1:], strict=False):
        if first == stop:
            continue
        scanned = low - 1  # a lead lies at or after max(0, low - 1)
        for at in leads[first:stop]:
            if at < scanned:
                continue
            found = match(text, at, high)
            if found is not None:
                pos = found.end()
                scanned = pos if pos > at else at + 1
                if low < pos < high or (inclusive and low <= pos <= high):
                    ends.append(pos)
            elif run is not None and at > 0 and (rest := run.match(text, at - 1, high)) is not None:
                scanned = rest.end()
    return ends


def match_ends(level: TextLevel, text: str, start: int, end: int) -> list[int]:
    """The ends of ``level.pattern.finditer(text, start, end)``, in order (the level's matches take a
    character at least): by ``lead_match_ends`` where the level has a lead, in linear time, else by
    ``finditer``."""
    if level.same is None and level.lead is not None:
        clean = level.unless is None or level.unless.search(text, max(0, start - 1), end) is None
        if clean or level.also is not None:
            return lead_match_ends(level, text, [start + 1, end], inclusive=True, clean=clean)
    return [match.end() for match in level.pattern.finditer(text, start, end)]


class Segmenter:
    """Chooses the raw chunk ends of one packer's document (see the module docstring)."""

    # The meters whose additive sizes are exact (a chunk measures ``tails[j] - heads[i]``).
    _EXACT = (CharMeter, WordMeter)

    def __init__(self, packer: Packer):
        self.pk = packer
        self.text = packer.text
        self.plan = packer.plan
        self._fit: dict[tuple[int, int], bool] = {}
        # Every position is a grapheme boundary (ASCII without CR): the cluster checks are skipped.
        self._plain = packer._plain
        # Per level (by identity: hashing a level hashes its patterns): the text has no ``unless`` character.
        self._clean: dict[int, bool] = {}
        self._lacking: dict[str, bool] = {}
        self._reserve_tables: dict[int, list[int]] = {}
        self._heading_reaches: list[int] | None = None  # _prices: Packer._next_text after each heading
        # The candidates gap by gap, for every meter (the way for words and tokens; for tests).
        self._by_gap = False
        self.problem: Problem | None = None  # the last search's (``ends``), for tests

    # -- sizes --------------------------------------------------------------------------------------

    def _prefixes(self, starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
        """Additive size prefixes: a chunk [starts[i], ends[j]) measures ``tails[j] - heads[i]``."""
        meter = self.pk.meter
        if isinstance(meter, CharMeter):
            return list(starts), list(ends)
        if isinstance(meter, WordMeter):
            word_ends, word_starts = self._word_arrays()
            return (
                word_ends.searchsorted(starts, "right").tolist(),
                word_starts.searchsorted(ends).tolist(),
            )
        if isinstance(meter, TokenMeter):
            return meter.prefix(starts), meter.prefix(ends)
        # Another meter: measure from the origin (an estimate, verified below like tokens).
        origin = starts[0] if starts else 0
        return ([meter.estimate(origin, s) for s in starts], [meter.estimate(origin, e) for e in ends])

    def _word_arrays(self):
        arrays = getattr(self.pk.meter, "_segmenter_arrays", None)
        if arrays is None:
            import numpy as np

            arrays = (
                np.asarray(self.pk.meter.ends, dtype=np.int64),
                np.asarray(self.pk.meter.starts, dtype=np.int64),
            )
            self.pk.meter._segmenter_arrays = arrays
        return arrays

    def _starts(self, cuts: list[int]) -> list[int]:
        """Where a chunk after each cut starts (``Packer._skip_space``): by the kernel ``skip_spaces``
        where the characters settle it, else by the packer."""
        pk, text, end = self.pk, self.text, self.plan.end
        chars = isinstance(pk.meter, CharMeter)
        # Packer._skip_space keeps an indentation of at most _INDENT_KEPT characters and half the budget.
        max_indent = min(_INDENT_KEPT, pk.max_size // 2) if chars else _INDENT_KEPT
        # Other units: the packer measures each indentation kept, unless none of at most _INDENT_KEPT
        # characters can reach half the budget (``most_per_char`` units a character, units.py).
        most = getattr(pk.meter, "most_per_char", None)
        verify = not chars and (most is None or 2 * most * _INDENT_KEPT > pk.max_size)
        starts, unsure = kernel.skip_spaces(text, cuts, end, max_indent, self._plain, verify)
        skip, is_boundary = pk._skip_space, pk._is_cluster_boundary
        for k in unsure:
            p = cuts[k]
            starts[k] = p if p < end and not text[p].isspace() and is_boundary(p) else skip(p, end)
        return starts

    # -- candidates ---------------------------------------------------------------------------------

    def _candidates(self, origin: int) -> tuple[list[int], list[int]]:
        """The candidate cuts after ``origin``, sorted, with their scores.

        The plan's positions, the reviewer's breaks and the end; then each textual level, strongest
        first, inside the gaps (wider than a quarter of the budget) between the candidates at least
        as strong as it. The gaps of a level lie inside those of the level before (a candidate is
        only ever added), so each level looks only inside the previous level's gaps.
        """
        pk, plan = self.pk, self.plan
        end = plan.end
        plan_positions, plan_scores = plan.positions, plan.scores
        i = bisect.bisect_right(plan_positions, origin)
        j = bisect.bisect_left(plan_positions, end)
        breaks = [pos for pos in pk._breaks if origin < pos < end]
        positions, scores = kernel.merge_levels(
            plan_positions[i:j], plan_scores[i:j], [breaks, [end]], [SCORE_BREAK, 1000]
        )
        levels = pk._levels
        if not levels:
            return positions, scores
        if not self._by_gap:
            return self._candidates_by_level(origin, positions, scores)
        found = dict(zip(positions, scores, strict=True))
        budget = pk.max_size
        # The gaps of the level before, each with what that level found inside it (the gaps of the
        # first level are searched for in the whole text).
        searched: list[tuple[int, int, list[int]]] = [(origin, end, [])]
        grown = False
        chars = isinstance(pk.meter, CharMeter)
        bare = len(positions) == 1  # no candidate but the end yet: each gap holds only what was found
        for level in levels:
            score = level.score
            gaps = []
            for low, high, inside in searched:
                if bare:
                    strong = inside
                else:
                    a = bisect.bisect_right(positions, low)
                    b = bisect.bisect_left(positions, high)
                    strong = [p for p, s in zip(positions[a:b], scores[a:b], strict=True) if s >= score]
                    if inside:
                        strong = sorted(strong + inside) if strong else inside
                points = [low, *strong, high]
                if chars:
                    gaps += [(a, b, b - a) for a, b in itertools.pairwise(points) if (b - a) * 4 > budget]
                    continue
                heads, tails = self._prefixes(points, points)
                gaps += [
                    (points[k], points[k + 1], tails[k + 1] - heads[k])
                    for k in range(len(points) - 1)
                    if (tails[k + 1] - heads[k]) * 4 > budget
                ]
            if not gaps:
                break
            searched = []
            for low, high, size in gaps:
                new = self._find(level, low, high, found, max(1, size))
                if new:
                    found.update(dict.fromkeys(new, score))
                    grown = True
                searched.append((low, high, new))
        if not grown:
            return positions, scores
        positions = sorted(found)
        return positions, [found[p] for p in positions]

    def _candidates_by_level(
        self, origin: int, positions: list[int], scores: list[int]
    ) -> tuple[list[int], list[int]]:
        """``_candidates``, each level at once over all its gaps: the gaps by the kernel ``wide_gaps``
        (the previous level's gaps split at its finds and at the candidates as strong as this level;
        for words and tokens every piece, then those wider than a quarter of the budget by the size
        prefixes, in one lookup per level), the finds by the kernel ``class_ends`` for a level whose
        pattern is classes (``level_spec``; paragraph, line, and in characters words sampled as
        ``_find`` does in a text whose every position is a grapheme boundary) in a text without its
        ``unless`` characters, else by ``_find`` gap by gap. A level's finds are never taken already,
        but by the plan's positions: those of the levels before lie on the bounds of its gaps; they
        join the candidates at the end, by the kernel ``merge_levels``."""
        pk, text = self.pk, self.text
        budget = pk.max_size
        chars = isinstance(pk.meter, CharMeter)
        gaps = [origin, self.plan.end]
        sizes: list[int] = []  # of each gap, in the meter's unit (words and tokens)
        inside: list[int] = []
        # Each level's finds, and its score: never a candidate already (they lie strictly inside the
        # gaps, whose bounds are the finds of the levels before), but for the plan's positions, which
        # ``taken`` holds for the levels found in Python.
        finds: list[list[int]] = []
        find_scores: list[int] = []
        taken: set[int] | None = None
        for level in pk._levels:
            if chars:
                gaps = kernel.wide_gaps(gaps, positions, scores, level.score, inside, budget)
            else:
                pieces = kernel.wide_gaps(gaps, positions, scores, level.score, inside, 0)
                heads, tails = self._prefixes(pieces[::2], pieces[1::2])
                gaps, sizes = [], []
                for k, (head, tail) in enumerate(zip(heads, tails, strict=True)):
                    if (tail - head) * 4 > budget:
                        gaps += (pieces[2 * k], pieces[2 * k + 1])
                        sizes.append(tail - head)
            if not gaps:
                break
            spec = None
            sampled = level.pattern.pattern == r"\s+"  # words: every sixteenth of a budget (``_find``)
            if _native is not None and level.same is not None:
                clean = self._clean.get(id(level))
                if clean is None:
                    clean = self._clean[id(level)] = self._lacks(level.unless)
                spec = level_spec(level.same) if clean or level.unless is None else None
                if sampled and not chars:  # the sample step is a sixteenth of the gap's size in the unit
                    spec = None
            if spec is not None:
                step = max(1, budget // 16) if sampled else 0
                inside, unsure = _native.class_ends(text, gaps, spec, positions, self._plain, step)
                if unsure:
                    is_boundary = pk._is_cluster_boundary
                    bad = {k for k in unsure if not is_boundary(inside[k])}
                    if bad and sampled:  # an end not kept moves the next ones: gap by gap below
                        spec = None
                    elif bad:
                        inside = [pos for k, pos in enumerate(inside) if k not in bad]
            if spec is None:
                if taken is None:
                    taken = set(positions)
                if self._leads(level):
                    inside = self._lead_ends(level, gaps, taken)
                else:
                    inside = []
                    for g, (low, high) in enumerate(zip(gaps[::2], gaps[1::2], strict=True)):
                        size = high - low if chars else sizes[g]
                        inside += self._find(level, low, high, taken, max(1, size))
            if inside:
                finds.append(inside)
                find_scores.append(level.score)
        if not finds:
            return positions, scores
        return kernel.merge_levels(positions, scores, finds, find_scores)

    def _leads(self, level: TextLevel) -> bool:
        """Whether ``find_ends`` tries ``level``'s pattern only at its ``lead`` matches in this text (no
        character of the level's ``unless`` in it)."""
        return (
            level.same is None and level.lead is not None and (level.also is not None or self._cleaned(level))
        )

    def _cleaned(self, level: TextLevel) -> bool:
        """Whether the text has no character of the level's ``unless`` (remembered per level)."""
        clean = self._clean.get(id(level))
        if clean is None:
            clean = self._clean[id(level)] = self._lacks(level.unless)
        return clean

    def _lead_ends(self, level: TextLevel, gaps: list[int], taken: Container[int]) -> list[int]:
        """``_find`` of a level matched at its leads (``lead_match_ends``) in every gap, strictly inside
        it, those taken or not on a cluster boundary left out."""
        text, pk = self.text, self.pk
        ends = lead_match_ends(level, text, gaps, inclusive=False, clean=self._cleaned(level))
        if self._plain:
            return [pos for pos in ends if pos not in taken]
        is_boundary = pk._is_cluster_boundary
        return [pos for pos in ends if pos not in taken and (ascii_settled(text, pos) or is_boundary(pos))]

    def _find(self, level: TextLevel, low: int, high: int, taken: Container[int], size: int) -> list[int]:
        """The boundaries of ``level`` strictly inside (low, high) of ``size`` (estimated) that are not
        ``taken`` yet, sorted: words and graphemes every sixteenth of a budget."""
        pk, text, budget = self.pk, self.text, self.pk.max_size
        is_grapheme = level.pattern.pattern == r"\X"
        sampled = is_grapheme or level.pattern.pattern == r"\s+"
        step = max(1, (high - low) * budget // (16 * size)) if sampled else 0
        out: list[int] = []
        if is_grapheme:
            if size * 8 <= budget:
                return out
            seen: set[int] = set()
            x = low + step
            while x < high:
                pos = (
                    x
                    if pk._is_cluster_boundary(x)
                    else pk._cluster_boundary(max(low + 1, x - 64), x, last=True)
                )
                if pos is not None and low < pos < high and pos not in taken and pos not in seen:
                    seen.add(pos)
                    out.append(pos)
                x += step
            return sorted(out)
        clean = self._clean.get(id(level))
        if clean is None:
            clean = self._clean[id(level)] = self._lacks(level.unless)
        matches = find_ends(level, text, max(0, low - 1), high, clean=clean)
        if not sampled:
            if self._plain:
                return [pos for pos in matches if low < pos < high and pos not in taken]
            # Packer._is_cluster_boundary, its first fast path inline: ASCII on both sides, not after a CR.
            is_boundary = pk._is_cluster_boundary
            return [
                pos
                for pos in matches
                if low < pos < high and pos not in taken and (ascii_settled(text, pos) or is_boundary(pos))
            ]
        kept = low
        for pos in matches:
            if not low < pos < high or pos - kept < step:
                continue
            if pos not in taken and pk._is_cluster_boundary(pos):
                out.append(pos)
                kept = pos
        return out

    def _lacks(self, unless: regex.Pattern[str] | None) -> bool:
        """Whether the text has no match of a level's ``unless`` pattern, remembered per pattern (levels
        share them); a pattern that is one character class (``class_ranges``) by the kernel
        ``first_in_ranges`` (C only: in Python the pattern's search is faster than the twin)."""
        if unless is None:
            return True
        lacks = self._lacking.get(unless.pattern)
        if lacks is None:
            ranges = class_ranges(unless) if _native is not None else None
            if ranges is None:
                lacks = unless.search(self.text) is None
            else:
                lacks = _native.first_in_ranges(self.text, ranges, 0, len(self.text)) < 0
            self._lacking[unless.pattern] = lacks
        return lacks

    # -- prices -------------------------------------------------------------------------------------

    def _prices(self, positions: list[int], scores: list[int]) -> tuple[list[int], list[int], list[int]]:
        """The price data of the candidates: per-candidate extras, priced intervals (lo, hi, price)
        and forbidden intervals (lo, hi), flat, for ``cut_candidates``. Each rule is applied per unit
        (heading, group, line group, keep span) to the candidates that unit contains."""

        pk, plan, text = self.pk, self.plan, self.text
        pk._index()
        end = plan.end
        # Table and code bodies: (start, end) open intervals, merged.
        rows: list[list[int]] = []
        for body, reach in zip(pk._line_group_starts, pk._line_group_reach, strict=True):
            if rows and body < rows[-1][1]:
                rows[-1][1] = max(rows[-1][1], reach)
            else:
                rows.append([body, reach])
        # Mid-sentence: a weak cut (below a line) outside table and code bodies after text that does
        # not end a sentence (its last four characters, trimmed, remembered per window).
        memo = _ENDS_SENTENCE
        if len(memo) > 1 << 16:
            memo.clear()
        args = (
            text,
            positions,
            scores,
            SCORE_MID_SENTENCE_BELOW,
            [body for body, _ in rows],
            [reach for _, reach in rows],
            plan.start,
            4,
            memo,
            PRICE_MID_SENTENCE,
            ending_terms(_SENTENCE_END) or [],  # a window ending otherwise ends no sentence
        )
        extra, missing = kernel.window_extra(*args)
        if missing:
            trimmed = kernel.trim_ends(text, [positions[k] for k in missing], plan.start)
            for k, t in zip(missing, trimmed, strict=True):
                window = text[t - 4 : t] if t >= 4 else text[:t]
                ends_sentence = memo.get(window)
                if ends_sentence is None:
                    ends_sentence = memo[window] = _SENTENCE_END.search(window) is not None
                if not ends_sentence:
                    extra[k] = PRICE_MID_SENTENCE
        # Mid-row: inside a table row or code line (not at a line start).
        for body, reach in rows:
            for k in range(bisect.bisect_right(positions, body), bisect.bisect_left(positions, reach)):
                if text[positions[k] - 1] != "\n":
                    extra[k] += PRICE_MID_ROW
        intervals: list[int] = []
        heading_starts = pk._heading_starts
        if heading_starts:
            # Inside a heading, or after it with only white space between: [start + 1, that + 1).
            heading_ends = plan.heading_ends
            reaches = self._heading_reaches = self._next_texts([heading_ends[s] for s in heading_starts], end)
            intervals += kernel.capped_intervals(heading_starts, reaches, PRICE_HEADING_AT_END)
        else:
            # A plan without headings (recursive): a '#' line before the cut, as findings see it. Only a
            # cut whose trimmed text ends a line that may be one (a '#' after at most three spaces at
            # its start, where ``^`` holds in the window) can be: the kernel ``line_heads`` finds them.
            memo_atx = _ENDS_IN_ATX
            if len(memo_atx) > 1 << 16:
                memo_atx.clear()
            hits, missing, trimmed = kernel.line_heads(
                text,
                positions,
                scores,
                SCORE_BREAK,
                end,
                plan.start,
                _ATX_WINDOW,
                _atx_start_spec(),
                memo_atx,
            )
            if missing:  # asked once per line text (``ends_in_atx_lines`` remembers it)
                hits += [k for k, ends in zip(missing, ends_in_atx_lines(text, trimmed), strict=True) if ends]
            for k in hits:
                extra[k] += PRICE_HEADING_AT_END
        intervals += self._contained_headings(rows)
        # For characters in plain text a unit's trimmed text starts between its start and its first
        # non-space character, so its size is known to fit, or not, from those two bounds (without a
        # reserve: with one, the prefix where the unit starts counts too, ``_fits``).
        bounded = self._plain and isinstance(pk.meter, CharMeter) and pk.reserve is None
        # Each procedure, list, table, code block and section that fits: (first, last) of its text.
        # (Deduplicated before the kinds are read: ``_SPAN_OF`` makes the keys in C.)
        units = [
            key
            for key in dict.fromkeys(map(_SPAN_OF, itertools.chain(plan.groups, plan.units)))
            if key[2] in PRICE_SPLIT
        ]
        if units:
            unit_starts, unit_stops, kinds = zip(*units, strict=True)
            firsts = self._next_texts(unit_starts, end)
            # The units with a candidate inside, and the ends of their texts.
            live, lasts = kernel.live_spans(
                positions, unit_starts, firsts, kernel.trim_ends(text, unit_stops, 0)
            )
            if bounded:
                budget = pk.max_size
                fits: list[bool | None] = [None] * len(live)
                for j, u in enumerate(live):
                    if lasts[j] - unit_starts[u] <= budget:
                        fits[j] = True
                    elif lasts[j] - firsts[u] > budget:
                        fits[j] = False
                asked = [j for j, fit in enumerate(fits) if fit is None]
                if asked:
                    answers = self._fit_all(
                        [unit_starts[live[j]] for j in asked],
                        [unit_stops[live[j]] for j in asked],
                        [firsts[live[j]] for j in asked],
                        [lasts[j] for j in asked],
                    )
                    for j, fit in zip(asked, answers, strict=True):
                        fits[j] = fit
            elif live:  # every live unit asked, in order
                fits = self._fit_all(
                    list(map(unit_starts.__getitem__, live)),
                    list(map(unit_stops.__getitem__, live)),
                    list(map(firsts.__getitem__, live)),
                    lasts,
                )
            else:
                fits = []
            # (first + 1, last, price) of each unit that fits, flat: the three columns by slices.
            kept = list(itertools.compress(live, fits))
            if kept:
                flat = [0] * (3 * len(kept))
                flat[0::3] = [firsts[u] + 1 for u in kept]
                flat[1::3] = itertools.compress(lasts, fits)
                flat[2::3] = map(PRICE_SPLIT.__getitem__, map(kinds.__getitem__, kept))
                intervals += flat
        # Each block (a paragraph, mostly) that fits: between two block boundaries (a candidate scored
        # SCORE_BLOCK or more, and where the text after a heading begins).
        block_price = plan.chunk_price * PRICE_SPLIT_BLOCK_CHUNKS
        if block_price > 0:
            intervals += self._blocks(positions, scores, block_price)
        forbidden: list[int] = []
        for a, b in pk._keep:
            if pk._keep_span_fits(a, b):
                forbidden += (a + 1, pk._trim_end(a, b))
        return extra, intervals, forbidden

    def _contained_headings(self, rows: list[list[int]]) -> list[int]:
        """The priced intervals of the ATX headings inside a list item or block quote (``- #### Why?``),
        outside table and code bodies: the scanner reads such a line as an item, yet it is a heading
        (CommonMark), so a cut inside it or right after it leaves a heading at the chunk's end."""
        text, plan = self.text, self.plan
        start, end = plan.start, plan.end
        # Such a line has a '#' after a space, a tab or '>' (its marker's gap): the lines holding one are
        # found by that (``re`` skips to each '#'; a multiline ``^`` would be tried at every position),
        # then matched.
        rfind = text.rfind
        heads = {rfind("\n", 0, hit.start()) + 1 for hit in _HASH_AFTER_GAP.finditer(text, start, end)}
        bodies = [body for body, _ in rows]
        lines = []
        for line in sorted(heads):
            match = _CONTAINED_HEADING.match(text, line, end) if line >= start else None
            if match is None:
                continue
            k = bisect.bisect_right(bodies, line) - 1
            if k < 0 or line >= rows[k][1]:
                lines.append((line, match.end()))
        if not lines:
            return []
        reaches = self._next_texts([stop for _, stop in lines], plan.end)
        out: list[int] = []
        for (line, _), reach in zip(lines, reaches, strict=True):
            out += (line + 1, reach + 1, PRICE_HEADING_AT_END)
        return out

    def _blocks(self, positions: list[int], scores: list[int], price: int) -> list[int]:
        """The priced intervals of the blocks that fit: [a, b) between consecutive block boundaries,
        which are the plan's start, each candidate scored SCORE_BLOCK or more (a block or paragraph
        start, a heading, a break; the end) and, after each heading, where its text begins
        (``_heading_reaches``), so the block after a heading is one without the heading; each as a
        unit, its text [first, last) from its first non-space character, trimmed, with a candidate
        inside, by the kernel ``text_spans``. For characters a chunk the block opens starts at first
        where the characters settle that boundary (``_fit_all``: ``skip_spaces`` keeps a non-space
        position), so the block fits when ``last - first`` plus the reserve there (``_reserve_table``)
        is within the budget, and the kernel says so; ``_fit_all`` decides the others (every block
        for another meter)."""
        pk, plan = self.pk, self.plan
        more = sorted(self._heading_reaches) if pk._heading_starts and self._heading_reaches else []
        measured = isinstance(pk.meter, CharMeter)
        if pk.reserve is not None and measured:
            keys, values = pk.reserve.lows, self._reserve_table(0)
        else:
            keys, values = [], [0]
        sure, asked = kernel.text_spans(
            self.text,
            positions,
            scores,
            SCORE_BLOCK,
            more,
            plan.start,
            plan.end,
            price,
            pk.max_size if measured else -1,
            keys,
            values,
            self._plain,
        )
        if asked:
            firsts, lasts = asked[2::4], asked[3::4]
            fits = self._fit_all(asked[::4], asked[1::4], firsts, lasts)
            for fit, first, last in zip(fits, firsts, lasts, strict=True):
                if fit:
                    sure += (first + 1, last, price)
        return sure

    def _next_texts(self, positions: list[int], limit: int) -> list[int]:
        """``Packer._next_text`` of each position, up to ``limit`` (the kernel ``skip_spaces``)."""
        return kernel.skip_spaces(self.text, positions, limit, -1, True, False)[0]

    def _fit_all(
        self,
        starts: list[int],
        ends: list[int],
        opened: list[int] | None = None,
        tails: list[int] | None = None,
    ) -> list[bool]:
        """``_fits`` of each [start, end); for characters by arrays: the trimmed text from
        ``Packer._opening(start, end)`` (the kernel ``skip_spaces``, the packer where it is unsure)
        and its prefix (``budget_size`` adds them) within the budget. ``opened`` and ``tails``, when
        given: each start's ``_next_text`` up to the plan's end and each end trimmed (not below its
        start), as ``text_spans`` gives them."""
        pk = self.pk
        if not isinstance(pk.meter, CharMeter):
            return [self._fits(start, end) for start, end in zip(starts, ends, strict=True)]
        max_indent = min(_INDENT_KEPT, pk.max_size // 2)
        # A chunk the unit opens starts at its first character (the scanner puts a boundary there):
        # ``Packer._opening_line``, its ``_next_text``, by the kernel.
        if opened is None:
            opened = self._next_texts(starts, self.plan.end)
        begins, unsure = kernel.skip_spaces(self.text, opened, ends, max_indent, self._plain, False)
        for k in unsure:
            begins[k] = pk._skip_space(opened[k], ends[k])
        if tails is None:
            tails = kernel.trim_ends(self.text, ends, 0)
        # Each size plus the reserve at its begin (``_reserve_lookup``) within the budget.
        if pk.reserve is not None:
            keys, values = pk.reserve.lows, self._reserve_table(0)
        else:
            keys, values = [], [0]
        return kernel.fit_sizes(begins, tails, keys, values, pk.max_size)

    def _reserve_lookup(self, starts: list[int], offset: int = 0) -> list[int]:
        """``max(1, offset - r)`` for each start's reserve r (``Reserve.sizes_at``), or r itself when
        ``offset`` is 0, by the kernel ``lookup`` over the reserve's few distinct prefixes."""
        return kernel.lookup(self.pk.reserve.lows, self._reserve_table(offset), starts, True)

    def _reserve_table(self, offset: int) -> list[int]:
        """The values ``_reserve_lookup`` looks up by the reserve's lows (one more: before the first)."""
        table = self._reserve_tables.get(offset)
        if table is None:
            sizes = [prefix.size for prefix in self.pk.reserve.prefixes]
            sizes = [sizes[0], *sizes]  # before the first low: the first prefix
            if offset:
                sizes = [max(1, offset - size) for size in sizes]
            table = self._reserve_tables[offset] = sizes
        return table

    def _fits(self, start: int, end: int) -> bool:
        """Whether [start, end), trimmed, fits the budget in a chunk it opens (with a reserve, beside the
        prefix there: ``Reserve.make_room_for_units`` shortened it where the unit fits alone); the
        estimate rules out far too big."""
        key = (start, end)
        fits = self._fit.get(key)
        if fits is None:
            pk = self.pk
            begin = pk._opening(start, end)
            finish = pk._trim_end(begin, end)
            fits = self._fit[key] = (
                pk.meter.estimate(begin, finish) <= pk.max_size * 1.25 + 4
                and pk.budget_size(begin, finish) <= pk.max_size
            )
        return fits

    # -- the search ---------------------------------------------------------------------------------

    def _whole(self, origin: int) -> bool:
        """Whether the text from ``origin`` is the cheapest segmentation on its own: it fits (beside its
        embed_text prefix, with a reserve) and no break is inside. Then it costs the chunk price
        (+ PRICE_UNDERSIZED) plus the price of each heading it runs across, and any other segmentation
        has k >= 1 cuts more, each a chunk price more, at no negative price, its chunks as undersized
        when it is, and runs across the same headings but those lying in a cut's white space (from a
        chunk's trimmed end to the next one's start, both ends included). No two headings lie in one
        run of white space when some non-space character lies between each heading start and the next
        (checked below, where a heading is inside), so a cut spares at most one heading, at most
        max(PRICE_SPANS_HEADING): with a chunk price above that, any other segmentation costs strictly
        more. The search is skipped (a short document, most often; a short page with headings too)."""
        pk, plan = self.pk, self.plan
        if plan.chunk_price <= 0:
            return False  # free chunks: a split may tie, and ties go to the later cut
        if pk._breaks and any(origin < pos < plan.end for pos in pk._breaks):
            return False
        finish = pk._trim_end(origin, plan.end)
        heads, tails = self._prefixes([origin], [finish])
        reserve = pk.reserve.sizes_at([origin])[0] if pk.reserve is not None else 0
        if tails[0] - heads[0] + reserve > pk.max_size:
            return False  # it does not fit beside its embed_text prefix
        if not isinstance(pk.meter, self._EXACT) and pk.budget_size(origin, finish) > pk.max_size:
            return False  # the search would retry with a smaller allowance
        heading_starts = pk._heading_starts
        k = bisect.bisect_right(heading_starts, origin)
        if k == len(heading_starts) or heading_starts[k] >= finish:
            return True  # no heading inside
        # Headings inside: each run across costs less than a chunk, and a cut spares at most one when
        # a non-space character lies between each heading start and the next (the docstring), from
        # the one at the origin (if any) to the one at the end.
        if plan.chunk_price <= _MOST_HEADING_PRICE:
            return False
        text, search = self.text, _NON_SPACE.search
        first = k - 1 if heading_starts[k - 1 : k] == [origin] else k
        last = bisect.bisect_right(heading_starts, finish)
        for low, high in itertools.pairwise(heading_starts[first:last]):
            if search(text, low, high) is None:
                return False
        return True

    def ends(self, origin: int, *, whole: bool = True) -> list[tuple[int, int, int]]:
        """The raw chunks in order: (start, raw end, the end's boundary score) of each. The first starts
        at ``origin``, each other where ``Packer._skip_space`` puts it after the previous raw end, and
        the last ends at the plan's end. ``whole=False``: search even when the text is one chunk
        (``_whole``; for tests)."""
        pk, plan, text = self.pk, self.plan, self.text
        if whole and self._whole(origin):
            return [(origin, plan.end, 1000)]  # no search, no ``problem``
        pk._index()
        positions, scores = self._candidates(origin)
        extra, intervals, forbidden = self._prices(positions, scores)
        cuts, cut_prices, cut_scores = kernel.cut_candidates(
            text, positions, scores, extra, _SCORE_PRICES, intervals, forbidden, SCORE_BREAK, plan.end
        )
        points = [origin, *cuts]
        starts = [origin, *self._starts(cuts)]
        ends = [origin, *kernel.trim_ends(text, cuts, origin)]
        heads, tails = self._prefixes(starts, ends)
        heading_starts = pk._heading_starts
        if heading_starts:
            # Prefix sums of the price of running across each heading.
            span_prices = heading_span_prices(plan, heading_starts, text, self._heading_reaches)
            spanned = list(itertools.accumulate(span_prices, initial=0))
            inside_head = kernel.lookup(heading_starts, spanned, starts, True)
            inside_tail = kernel.lookup(heading_starts, spanned, ends, False)
        else:
            inside_head = inside_tail = [0] * len(points)
        if pk._breaks:
            floors, floor = [], 0
            for index, score in enumerate([1000, *cut_scores]):
                floors.append(floor)
                if score >= SCORE_BREAK:
                    floor = index
        else:
            floors = [0] * len(points)
        prices_all = [0, *cut_prices]
        # Room for overlap: chunks after the first get ``overlap`` less, or the full budget at a price.
        reserve = min(pk.overlap, pk.max_size - 1) if pk.overlap else 0
        limits = [pk.max_size] + [pk.max_size - reserve] * len(cuts)
        if pk.reserve is None:
            allowances, fulls = list(limits), [pk.max_size] * len(points)
        else:
            # Room for each start's embed_text prefix (``chunkyard.chunking.prefix``): taken off both,
            # and each chosen chunk is measured with its prefix below.
            fulls = self._reserve_lookup(starts, pk.max_size)
            allowances = self._reserve_lookup(starts, pk.max_size - reserve) if reserve else list(fulls)
            allowances[0] = fulls[0]
        measure = pk.budget_size
        exact = isinstance(pk.meter, self._EXACT)
        chunk_price = plan.chunk_price
        for _ in range(12):
            previous = optimise(
                heads,
                tails,
                prices_all,
                inside_head,
                inside_tail,
                floors,
                allowances,
                fulls,
                pk.max_size,
                pk.min_size,
                chunk_price,
            )
            chosen = [len(points) - 1]
            while chosen[-1] > 0:
                chosen.append(previous[chosen[-1]])
            chosen.reverse()
            if exact:
                break
            retry = False
            for i, j in itertools.pairwise(chosen):
                estimate = tails[j] - heads[i]
                if estimate > fulls[i]:
                    continue  # a unit that cannot fit: over budget by construction
                size = measure(starts[i], ends[j])
                if estimate <= allowances[i] and size > limits[i]:
                    allowances[i] = max(1, allowances[i] - (size - limits[i]) - max(1, limits[i] // 50))
                    retry = True
                elif estimate > allowances[i] and size > pk.max_size:
                    fulls[i] = max(1, fulls[i] - (size - pk.max_size) - max(1, pk.max_size // 50))
                    retry = True
            if not retry:
                break
        self.problem = Problem(
            points,
            heads,
            tails,
            prices_all,
            inside_head,
            inside_tail,
            floors,
            allowances,
            fulls,
            pk.max_size,
            pk.min_size,
            chunk_price,
            chosen,
        )
        scores_all = [1000, *cut_scores]
        return [(starts[i], points[j], scores_all[j]) for i, j in itertools.pairwise(chosen)]
