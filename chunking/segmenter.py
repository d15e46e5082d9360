"""The global segmenter: every chunk boundary of a document chosen at once, by dynamic programming.

Method (in the manner of Knuth–Plass line breaking). The strategy's plan is the cost model. Its
structural boundaries (headings, block and list-item starts, table rows, code lines, wrapped lines),
the end of the text and the reviewer's breaks are the *candidates*; textual levels (paragraph, line,
sentence, word, grapheme) are added lazily, only inside gaps wider than a quarter of the budget
between the candidates at least as strong as the level (words and graphemes sampled every sixteenth of a budget), so a 10 MB line or a 1 MB
table stays linear. Candidates that differ only by white space are one cut (the cheapest).

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
trimmed text is within the budget (measured additively — exact for characters and words, the
whole-document token estimate for tokens, then every chosen chunk is measured exactly and the search
repeated with a smaller allowance from that start until all fit); no chunk spans a reviewer's break;
no cut inside a reviewer's keep span that fits. A unit that cannot fit (no candidate inside it) is one
chunk over budget. The optimiser itself (``best_predecessors``) is a small kernel over integer arrays
with no rule of its own.

Overlap is applied after the boundaries are chosen (``Packer``): each chunk after the first gets
``overlap`` units less allowance (or the full budget for PRICE_NO_OVERLAP = 300, and then no overlap),
and then starts at the packer's overlap start before its boundary when the chunk still fits.
"""

from __future__ import annotations

import bisect
import itertools
from typing import TYPE_CHECKING, NamedTuple

from chunkyard.chunking import native
from chunkyard.chunking.units import CharMeter, TokenMeter, WordMeter

if TYPE_CHECKING:
    from chunkyard.chunking.packer import Packer, Plan

PRICE_CHUNK = 100
# A chunk that runs across a heading (not at its start), by the heading's depth in the section tree
# (1: a top-level heading of the document; deeper ones after the last entry take it). Below
# PRICE_CHUNK, so small sections that fit together share a chunk (fewer chunks), and rising towards the
# top, so the chunks that span headings span the deepest; free for a heading right after another
# heading (a heading alone is never a chunk). A heading without a section (no section groups in the
# plan) takes the depth-1 price.
PRICE_SPANS_HEADING = (90, 70, 50, 30)
PRICE_UNDERSIZED = 5000
PRICE_MID_SENTENCE = 400
PRICE_MID_ROW = 1000
PRICE_HEADING_AT_END = 2000
PRICE_SPLIT = {"procedure": 3000, "list": 3000, "table": 3000, "code": 3000, "section": 40}
# (lowest score, price) of a cut by the boundary's score, best first; linear in between.
PRICE_BY_SCORE = ((90, 0), (60, 5), (30, 15), (20, 25), (12, 40), (10, 60), (0, 1000))
PRICE_NO_OVERLAP = 300  # a chunk that needs the room reserved for overlap: it gets none
PRICE_OVER_BUDGET = 10**9  # a chunk that cannot fit: allowed only between adjacent candidates
SCORE_BREAK = 10**6  # a reviewer's break
_UNREACHABLE = 1 << 62

# The optimiser in C (chunking/_segment.c) when it was built and is current; ``best_predecessors`` is
# the reference.
_native = native.load("_segment")


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


def heading_span_prices(plan: Plan, heading_starts: list[int], text: str) -> list[int]:
    """The price of a chunk running across each heading of ``heading_starts`` (sorted): PRICE_SPANS_HEADING
    by the heading's depth among the plan's ``section`` groups, 0 right after another heading."""
    sections = sorted((g.start, -g.end) for g in plan.groups if g.kind == "section")
    depth_at: dict[int, int] = {}
    open_ends: list[int] = []
    for start, neg_end in sections:
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        open_ends.append(-neg_end)
        depth_at.setdefault(start, len(open_ends))
    heading_ends = plan.heading_ends
    return [
        0
        if k > 0 and not text[heading_ends[heading_starts[k - 1]] : start].strip()
        else PRICE_SPANS_HEADING[min(depth_at.get(start, 1), len(PRICE_SPANS_HEADING)) - 1]
        for k, start in enumerate(heading_starts)
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


def optimise(
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
    """``best_predecessors``, in C when chunking/_segment.c is built."""
    if _native is not None:
        return _native.best_predecessors(
            heads,
            tails,
            prices,
            inside_head,
            inside_tail,
            floors,
            allowances,
            fulls,
            max_allowance,
            min_size,
            chunk_price,
            PRICE_NO_OVERLAP,
            PRICE_UNDERSIZED,
            PRICE_OVER_BUDGET,
        )
    return best_predecessors(
        heads,
        tails,
        prices,
        inside_head,
        inside_tail,
        floors,
        allowances,
        fulls,
        max_allowance,
        min_size,
        chunk_price,
    )


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


class Segmenter:
    """Chooses the raw chunk ends of one packer's document (see the module docstring)."""

    def __init__(self, packer: Packer):
        self.pk = packer
        self.text = packer.text
        self.plan = packer.plan
        self._fit: dict[tuple[int, int], bool] = {}

    # -- candidates ---------------------------------------------------------------------------------

    def _candidates(self, origin: int) -> tuple[list[int], list[int]]:
        pk, plan = self.pk, self.plan
        end = plan.end
        found: dict[int, int] = {}
        for pos, score in zip(plan.positions, plan.scores, strict=True):
            if origin < pos < end and found.get(pos, -1) < score:
                found[pos] = score
        for pos in pk._breaks:
            if origin < pos < end:
                found[pos] = SCORE_BREAK
        found[end] = max(found.get(end, 0), 1000)
        budget = pk.max_size
        meter = pk.meter
        for level in pk._levels:
            # Gaps between the candidates at least as strong as this level: a paragraph cut at its
            # wrapped lines only still gets its sentence ends.
            positions = sorted(pos for pos, score in found.items() if score >= level.score)
            gaps = []
            previous = origin
            for pos in positions:
                if meter.estimate(previous, pos) * 4 > budget:
                    gaps.append((previous, pos))
                previous = pos
            if not gaps:
                break
            is_grapheme = level.pattern.pattern == r"\X"
            sampled = is_grapheme or level.pattern.pattern == r"\s+"
            for low, high in gaps:
                size = max(1, meter.estimate(low, high))
                step = max(1, (high - low) * budget // (16 * size)) if sampled else 0
                if is_grapheme:
                    if meter.estimate(low, high) * 8 <= budget:
                        continue
                    x = low + step
                    while x < high:
                        pos = (
                            x
                            if pk._is_cluster_boundary(x)
                            else pk._cluster_boundary(max(low + 1, x - 64), x, last=True)
                        )
                        if pos is not None and low < pos < high and pos not in found:
                            found[pos] = level.score
                        x += step
                    continue
                kept = low
                for match in level.pattern.finditer(self.text, max(0, low - 1), high):
                    pos = match.end()
                    if not low < pos < high or pos - kept < step:
                        continue
                    if pos not in found and pk._is_cluster_boundary(pos):
                        found[pos] = level.score
                        kept = pos
        positions = sorted(found)
        return positions, [found[p] for p in positions]

    # -- prices -------------------------------------------------------------------------------------

    def _prices(self, positions: list[int], scores: list[int]) -> list[int | None]:
        """Each candidate's cut price (None: a cut there is forbidden)."""
        from chunkyard.chunking.findings import _ATX_LINE, _SENTENCE_END

        pk, plan, text = self.pk, self.plan, self.text
        pk._index()
        heading_starts = pk._heading_starts
        heading_ends = plan.heading_ends
        line_group_starts, line_group_reach = pk._line_group_starts, pk._line_group_reach
        # Each unit once: its text's first and last non-space positions and its price when it fits.
        seen: set[tuple[int, int, str]] = set()
        groups = []
        for unit in (*plan.groups, *plan.units):
            key = (unit.start, unit.end, unit.kind)
            if unit.kind in PRICE_SPLIT and key not in seen:
                seen.add(key)
                groups.append(
                    (
                        unit.start,
                        unit.end,
                        pk._next_text(unit.start),
                        pk._trim_end(unit.start, unit.end),
                        PRICE_SPLIT[unit.kind],
                    )
                )
        groups.sort()
        keeps = [(a, b) for a, b in pk._keep if pk._keep_span_fits(a, b)]
        out: list[int | None] = []
        g, active = 0, []
        for pos, score in zip(positions, scores, strict=True):
            if score >= SCORE_BREAK or pos >= plan.end:
                out.append(0)
                continue
            price = score_price(score)
            trimmed = pk._trim_end(plan.start, pos)
            after = pk._next_text(pos)
            k = bisect.bisect_left(line_group_starts, pos) - 1
            in_rows = k >= 0 and pos < line_group_reach[k]
            if score < 30 and not in_rows and not _SENTENCE_END.search(text[max(0, trimmed - 4) : trimmed]):
                price += PRICE_MID_SENTENCE
            if pk._mid_line_of_group(pos):
                price += PRICE_MID_ROW
            k = bisect.bisect_left(heading_starts, pos) - 1
            if k >= 0:
                heading_end = heading_ends[heading_starts[k]]
                if heading_end > pos or not text[heading_end:pos].strip():
                    price += PRICE_HEADING_AT_END  # inside a heading, or right after one
            elif not heading_starts and _ATX_LINE.search(text, max(0, trimmed - 300), trimmed):
                price += PRICE_HEADING_AT_END  # a plan without headings (recursive): a '#' line, as findings see it
            while g < len(groups) and groups[g][0] < pos:
                active.append(groups[g])
                g += 1
            if active:
                active = [item for item in active if item[1] > pos]
                for start, end, first, last, split_price in active:
                    if first < pos and after < last and self._fits(start, end):
                        price += split_price
            if keeps and any(a < pos and after < b for a, b in keeps):
                out.append(None)
                continue
            out.append(price)
        return out

    def _fits(self, start: int, end: int) -> bool:
        """Whether [start, end), trimmed, fits the budget on its own (the estimate rules out far too big)."""
        key = (start, end)
        fits = self._fit.get(key)
        if fits is None:
            pk = self.pk
            begin = pk._skip_space(start, end)
            finish = pk._trim_end(begin, end)
            fits = self._fit[key] = (
                pk.meter.estimate(begin, finish) <= pk.max_size * 1.25 + 4
                and pk.meter.size(begin, finish) <= pk.max_size
            )
        return fits

    # -- sizes --------------------------------------------------------------------------------------

    def _prefixes(self, starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
        """Additive size prefixes: a chunk [starts[i], ends[j]) measures ``tails[j] - heads[i]``."""
        meter = self.pk.meter
        if isinstance(meter, CharMeter):
            return list(starts), list(ends)
        if isinstance(meter, WordMeter):
            return (
                [bisect.bisect_right(meter.ends, s) for s in starts],
                [bisect.bisect_left(meter.starts, e) for e in ends],
            )
        if isinstance(meter, TokenMeter):
            return (meter.starts.searchsorted(starts).tolist(), meter.starts.searchsorted(ends).tolist())
        # Another meter: measure from the origin (an estimate, verified below like tokens).
        origin = starts[0]
        return ([meter.estimate(origin, s) for s in starts], [meter.estimate(origin, e) for e in ends])

    # -- the search ---------------------------------------------------------------------------------

    def ends(self, origin: int) -> list[tuple[int, int]]:
        """The raw chunk ends with their boundary scores, in order (the last is the plan's end)."""
        pk, plan = self.pk, self.plan
        positions, scores = self._candidates(origin)
        prices = self._prices(positions, scores)
        # One cut per run of candidates with only white space between them: the cheapest (a break wins).
        cuts: list[int] = []
        cut_prices: list[int] = []
        cut_scores: list[int] = []
        for pos, score, price in zip(positions, scores, prices, strict=True):
            if price is None:
                continue
            if cuts and not self.text[cuts[-1] : pos].strip():
                if cut_scores[-1] >= SCORE_BREAK or (score < SCORE_BREAK and price > cut_prices[-1]):
                    continue
                cuts[-1], cut_prices[-1], cut_scores[-1] = pos, price, score
                continue
            cuts.append(pos)
            cut_prices.append(price)
            cut_scores.append(score)
        if not cuts or cuts[-1] != plan.end:
            cuts.append(plan.end)
            cut_prices.append(0)
            cut_scores.append(1000)
        points = [origin, *cuts]
        starts = [origin] + [pk._skip_space(p, plan.end) for p in cuts]
        ends = [origin] + [pk._trim_end(origin, p) for p in cuts]
        heads, tails = self._prefixes(starts, ends)
        heading_starts = pk._heading_starts
        # Prefix sums of the price of running across each heading.
        spanned = list(itertools.accumulate(heading_span_prices(plan, heading_starts, self.text), initial=0))
        inside_head = [spanned[bisect.bisect_right(heading_starts, s)] for s in starts]
        inside_tail = [spanned[bisect.bisect_left(heading_starts, e)] for e in ends]
        floors, floor = [], 0
        for index, score in enumerate([1000, *cut_scores]):
            floors.append(floor)
            if score >= SCORE_BREAK:
                floor = index
        prices_all = [0, *cut_prices]
        # Room for overlap: chunks after the first get ``overlap`` less, or the full budget at a price.
        reserve = min(pk.overlap, pk.max_size - 1) if pk.overlap else 0
        limits = [pk.max_size] + [pk.max_size - reserve] * len(cuts)
        allowances, fulls = list(limits), [pk.max_size] * len(points)
        exact = isinstance(pk.meter, CharMeter | WordMeter)
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
                size = pk.meter.size(starts[i], ends[j])
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
        return [(points[k], scores_all[k]) for k in chosen[1:]]
