"""The global segmenter (chunking/segmenter.py): its optimiser finds the cheapest segmentation.

On generated documents small enough to enumerate every segmentation (every subset of the candidate
cuts), the cost of the path ``best_predecessors`` chooses equals the brute-force minimum of the cost
written out here from the module docstring, and that path obeys the hard constraints. The cut prices,
which the segmenter builds as data per unit (intervals, keep spans, per-unit checks), equal the cost
table read candidate by candidate (``prices_per_candidate``, the segmenter as first written), and the
candidates equal those of the level-by-level search over the whole text (``candidates_per_level``).
Each C kernel (chunking/_segment.c) equals its Python twin.
"""

from __future__ import annotations

import bisect
import itertools
import time
from unittest import mock

import pytest
import regex
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from chunkyard.chunking import levels, native, packer, segmenter
from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.packer import SENTENCE, SENTENCE_OR_PARAGRAPH, Packer, find_ends
from chunkyard.chunking.prefix import Reserve
from chunkyard.chunking.segmenter import (
    PRICE_HEADING_AT_END,
    PRICE_MID_ROW,
    PRICE_MID_SENTENCE,
    PRICE_NO_OVERLAP,
    PRICE_OVER_BUDGET,
    PRICE_SPLIT,
    PRICE_SPLIT_BLOCK_CHUNKS,
    PRICE_UNDERSIZED,
    SCORE_BLOCK,
    SCORE_BREAK,
    Problem,
    Segmenter,
    best_predecessors,
    cut_candidates,
    lookup,
    score_price,
    skip_spaces,
    text_spans,
    trim_ends,
)
from chunkyard.chunking.strategies import get_strategy
from chunkyard.chunking.units import make_meter

PIECES = [
    "# Title\n\n",
    "## Part\n\n",
    "Some words here. ",
    "More text follows",
    ".\n",
    "\n\n",
    "- item one\n",
    "1. step\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "```\ncode line\n```\n",
    "Short. ",
    "tail words ",
]


# -- the segmenter as first written: prices per candidate, levels over all candidates ---------------


def candidates_per_level(self, origin: int) -> tuple[list[int], list[int]]:
    """The candidates as first written: each level searched in the gaps of all candidates so far."""
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


def prices_per_candidate(self, positions: list[int], scores: list[int]) -> list[int | None]:
    """Each candidate's cut price as the module docstring's table reads, candidate by candidate (None: a
    cut there is forbidden)."""
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
    # Blocks: between consecutive block boundaries (the plan's start, candidates scored SCORE_BLOCK or
    # more, where the text after each heading begins).
    bounds = {
        plan.start,
        *(pos for pos, score in zip(positions, scores, strict=True) if score >= SCORE_BLOCK),
    }
    bounds |= {min(pk._next_text(heading_ends[h]), plan.end) for h in heading_starts}
    bounds = sorted(bounds)
    block_price = plan.chunk_price * PRICE_SPLIT_BLOCK_CHUNKS
    # ATX headings inside list items or block quotes, outside table and code bodies: (line start, the
    # text after it).
    contained = []
    for match in segmenter._CONTAINED_HEADING.finditer(text, plan.start, plan.end):
        k = bisect.bisect_right(line_group_starts, match.start()) - 1
        if not (k >= 0 and match.start() < line_group_reach[k]):
            contained.append((match.start(), min(pk._next_text(match.end()), plan.end)))
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
            price += (
                PRICE_HEADING_AT_END  # a plan without headings (recursive): a '#' line, as findings see it
            )
        if any(start < pos <= reach for start, reach in contained):
            price += PRICE_HEADING_AT_END  # inside a contained heading, or right after one
        while g < len(groups) and groups[g][0] < pos:
            active.append(groups[g])
            g += 1
        if active:
            active = [item for item in active if item[1] > pos]
            for start, end, first, last, split_price in active:
                if first < pos and after < last and self._fits(start, end):
                    price += split_price
        k = bisect.bisect_left(bounds, pos) - 1
        if block_price > 0 and 0 <= k < len(bounds) - 1 and bounds[k + 1] > pos:
            a, b = bounds[k], bounds[k + 1]
            if pk._next_text(a) < pos and after < pk._trim_end(a, b) and self._fits(a, b):
                price += block_price
        if keeps and any(a < pos and after < b for a, b in keeps):
            out.append(None)
            continue
        out.append(price)
    return out


def cuts_per_candidate(segmenter, positions, scores, prices):
    """The first written merge: one cut per run of candidates with only white space between them."""
    cuts, cut_prices, cut_scores = [], [], []
    for pos, score, price in zip(positions, scores, prices, strict=True):
        if price is None:
            continue
        if cuts and not segmenter.text[cuts[-1] : pos].strip():
            if cut_scores[-1] >= SCORE_BREAK or (score < SCORE_BREAK and price > cut_prices[-1]):
                continue
            cuts[-1], cut_prices[-1], cut_scores[-1] = pos, price, score
            continue
        cuts.append(pos)
        cut_prices.append(price)
        cut_scores.append(score)
    if not cuts or cuts[-1] != segmenter.plan.end:
        cuts.append(segmenter.plan.end)
        cut_prices.append(0)
        cut_scores.append(1000)
    return cuts, cut_prices, cut_scores


def chunk_cost(problem: Problem, i: int, j: int) -> int | None:
    """The cost of a chunk from candidate i to j as the module docstring defines it (None: not allowed)."""
    size = problem.tails[j] - problem.heads[i]
    if i < problem.floors[j]:
        return None
    cost = problem.chunk_price + problem.prices[j] + problem.inside_tail[j] - problem.inside_head[i]
    if size > problem.allowances[i]:
        if size > problem.fulls[i]:
            return cost + PRICE_OVER_BUDGET if j == i + 1 else None
        cost += PRICE_NO_OVERLAP
    if size < problem.min_size:
        cost += PRICE_UNDERSIZED
    return cost


def path_cost(problem: Problem, path: list[int]) -> int | None:
    total = 0
    for i, j in itertools.pairwise(path):
        cost = chunk_cost(problem, i, j)
        if cost is None:
            return None
        total += cost
    return total


def brute_force(problem: Problem) -> int:
    n = len(problem.points)
    best = None
    for mask in range(1 << (n - 2)):
        path = [0] + [k + 1 for k in range(n - 2) if mask >> k & 1] + [n - 1]
        cost = path_cost(problem, path)
        if cost is not None and (best is None or cost < best):
            best = cost
    assert best is not None
    return best


def solve(text: str, strategy: str, unit: str, max_size: int, overlap: int, min_size: int) -> Problem | None:
    config = parse_settings(
        {
            "strategy": strategy,
            "unit": unit,
            "max_size": max_size,
            "overlap": overlap,
            "min_size": min_size,
            "front_matter": "keep",
        }
    )
    plan = get_strategy(strategy)(text, config, None).plan
    packer = Packer(text, plan, make_meter(text, unit), max_size, overlap, min_size)
    packer._index()
    origin = packer._skip_space(plan.start, plan.end)
    if origin >= plan.end:
        return None
    segmenter = Segmenter(packer)
    segmenter.ends(origin, whole=False)
    return segmenter.problem


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=12),
    strategy=st.sampled_from(["markdown", "recursive", "sentence"]),
    unit=st.sampled_from(["chars", "words"]),
    max_size=st.integers(8, 90),
    overlap_share=st.sampled_from([0, 0, 20]),
    min_size=st.sampled_from([0, 0, 6]),
)
def test_the_optimiser_finds_the_brute_force_minimum(
    pieces, strategy, unit, max_size, overlap_share, min_size
):
    text = "".join(pieces)
    problem = solve(
        text, strategy, unit, max_size, max_size * overlap_share // 100, min(min_size, max_size - 1)
    )
    if problem is None or len(problem.points) > 15:
        return
    assert path_cost(problem, problem.chosen) == brute_force(problem)


def test_the_kernel_prefers_fewer_chunks_and_cheaper_cuts() -> None:
    # Candidates at 0, 4, 8, 12 (sizes are offsets); budget 8: 0-8-12 or 0-4-12 (two chunks each),
    # and the cut at 8 is cheaper.
    heads = tails = [0, 4, 8, 12]
    prices = [0, 50, 5, 0]
    zeros = [0] * 4
    chosen = best_predecessors(heads, tails, prices, zeros, zeros, zeros, [8] * 4, [8] * 4, 8, 0, 100)
    assert chosen[3] == 2 and chosen[2] == 0


def test_a_reviewer_break_is_a_floor() -> None:
    heads = tails = [0, 4, 8, 12]
    zeros = [0] * 4
    floors = [0, 0, 0, 1]  # candidate 1 is a break: no chunk may start before it and end after it
    chosen = best_predecessors(
        heads, tails, [0, 0, 0, 0], zeros, zeros, floors, [12] * 4, [12] * 4, 12, 0, 100
    )
    assert chosen[3] >= 1 and chosen[1] == 0


@pytest.mark.skipif(
    segmenter._native is None, reason=f"chunkyard.chunking._segment: {native.status().get('_segment')}"
)
@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(1, 40))
def test_the_c_kernel_equals_its_python_twin(data, n):
    ints = st.integers(0, 60)
    steps = data.draw(st.lists(ints, min_size=n, max_size=n))
    heads = list(itertools.accumulate(steps))
    tails = [h + data.draw(st.integers(0, 5)) for h in heads]
    tails = list(itertools.accumulate(tails, max))
    prices = data.draw(st.lists(st.integers(0, 3000), min_size=n, max_size=n))
    inside = list(
        itertools.accumulate(data.draw(st.lists(st.sampled_from([0, 0, 30, 3000]), min_size=n, max_size=n)))
    )
    floors = list(
        itertools.accumulate(data.draw(st.lists(st.sampled_from([0, 0, 0, 1]), min_size=n, max_size=n)))
    )
    floors = [min(f, j - 1) if j else 0 for j, f in enumerate(floors)]
    allowances = data.draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    fulls = [a + data.draw(st.integers(0, 30)) for a in allowances]
    max_allowance, min_size = max(fulls), data.draw(st.integers(0, 20))
    chunk_price = data.draw(st.sampled_from([0, 2, 100]))
    args = (
        heads,
        tails,
        prices,
        inside,
        inside,
        floors,
        allowances,
        fulls,
        max_allowance,
        min_size,
        chunk_price,
    )
    assert segmenter._native.best_predecessors(
        *args, segmenter.PRICE_NO_OVERLAP, segmenter.PRICE_UNDERSIZED, segmenter.PRICE_OVER_BUDGET
    ) == best_predecessors(*args)


# -- the price data and the candidates against the segmenter as first written -----------------------

MORE_PIECES = [
    *PIECES,
    "#notaheading\n",
    "   # indented\n",
    "e\u0301t\u00e9 caf\u00e9. ",
    "Thai ข้าว ดีมาก ",
    "long" * 12,
    "\r\n",
    "  code\n",
    "> quote. Next\n",
    "é\n",
    "- #### Why not?\n",
    "> ## Note\n",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(MORE_PIECES), min_size=1, max_size=30),
    strategy=st.sampled_from(["markdown", "recursive", "sentence"]),
    unit=st.sampled_from(["chars", "chars", "words", "tokens"]),
    max_size=st.integers(6, 120),
    data=st.data(),
)
def test_the_price_data_equals_the_cost_table_per_candidate(pieces, strategy, unit, max_size, data):
    text = "".join(pieces)
    config = parse_settings(
        {"strategy": strategy, "unit": unit, "max_size": max_size, "front_matter": "keep"}
    )
    plan = get_strategy(strategy)(text, config, None).plan
    offsets = st.integers(0, len(text))
    plan.breaks = data.draw(st.lists(offsets, max_size=2))
    plan.keep = [tuple(sorted(pair)) for pair in data.draw(st.lists(st.tuples(offsets, offsets), max_size=2))]
    pk = Packer(text, plan, make_meter(text, unit), max_size, 0, 0)
    pk._index()
    origin = pk._skip_space(plan.start, plan.end)
    if origin >= plan.end:
        return
    seg = Segmenter(pk)
    positions, scores = seg._candidates(origin)
    assert (positions, scores) == candidates_per_level(seg, origin)
    expected = cuts_per_candidate(seg, positions, scores, prices_per_candidate(seg, positions, scores))
    extra, intervals, forbidden = seg._prices(positions, scores)
    args = (
        text,
        positions,
        scores,
        extra,
        segmenter._SCORE_PRICES,
        intervals,
        forbidden,
        SCORE_BREAK,
        plan.end,
    )
    assert cut_candidates(*args) == expected
    assert tuple(segmenter.kernel.cut_candidates(*args)) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(MORE_PIECES), min_size=1, max_size=12),
    strategy=st.sampled_from(["markdown", "recursive", "sentence"]),
    unit=st.sampled_from(["chars", "words", "tokens"]),
    max_size=st.integers(6, 400),
    min_size=st.sampled_from([0, 0, 50]),
    data=st.data(),
)
def test_a_text_that_is_one_chunk_skips_the_search_for_the_same_ends(
    pieces, strategy, unit, max_size, min_size, data
):
    text = "".join(pieces)
    config = parse_settings(
        {"strategy": strategy, "unit": unit, "max_size": max_size, "front_matter": "keep"}
    )
    plan = get_strategy(strategy)(text, config, None).plan
    plan.breaks = data.draw(st.lists(st.integers(0, len(text)), max_size=1))
    pk = Packer(text, plan, make_meter(text, unit), max_size, 0, min(min_size, max_size - 1))
    pk._index()
    origin = pk._skip_space(plan.start, plan.end)
    if origin >= plan.end:
        return
    assert Segmenter(pk).ends(origin) == Segmenter(pk).ends(origin, whole=False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from([*MORE_PIECES, "# A\n", "## B\n## C\n", "Setext\n===\n"]), max_size=14),
    unit=st.sampled_from(["chars", "words", "tokens"]),
    max_size=st.integers(20, 600),
    budget=st.sampled_from(["embed_text", "text"]),
    min_size=st.sampled_from([0, 0, 40]),
)
def test_a_page_with_headings_that_is_one_chunk_gets_the_chunks_of_the_search(
    pieces, unit, max_size, budget, min_size
):
    # ``Segmenter._whole`` skips the search for a text that fits whole, headings inside too (its
    # docstring): split_document's chunks, prefixes and findings are those of the search.
    text = "".join(pieces)
    config = parse_settings(
        {
            "strategy": "markdown",
            "unit": unit,
            "max_size": max_size,
            "min_size": min(min_size, max_size - 1),
            "budget": budget,
            "front_matter": "keep",
        }
    )
    skipped = split_document(text, config, "docs/a-page.md")
    searching = Segmenter.ends
    try:
        Segmenter.ends = lambda self, origin, whole=True: searching(self, origin, whole=False)
        searched = split_document(text, config, "docs/a-page.md")
    finally:
        Segmenter.ends = searching
    assert skipped.chunks == searched.chunks


def test_the_price_table_by_score_is_score_price() -> None:
    table = segmenter._SCORE_PRICES
    for score in range(-3, 2000):
        assert table[max(0, min(score, len(table) - 1))] == score_price(score)


def test_the_interval_prices_add_up_and_forbid() -> None:
    text = "aa bb\n\ncc dd ee"
    positions, scores = [3, 5, 7, 10, 13, 15], [10, 30, 60, 10, 10, 1000]
    extra = [0, 0, 0, 7, 0, 0]
    intervals = [3, 8, 100, 7, 11, 5]  # [3, 8) and [7, 11)
    forbidden = [13, 14]
    cuts = cut_candidates(
        text, positions, scores, extra, segmenter._SCORE_PRICES, intervals, forbidden, 10**6, 15
    )
    # 5 and 7 have only white space between them: one cut, the cheaper (7: 5 + 100 + 5 against 15 + 100).
    assert cuts == ([3, 7, 10, 15], [60 + 100, 5 + 105, 60 + 7 + 5, 0], [10, 60, 10, 1000])


# -- the C kernels against their Python twins ---------------------------------------------------------

needs_kernel = pytest.mark.skipif(
    segmenter._native is None, reason=f"chunkyard.chunking._segment: {native.status().get('_segment')}"
)
spacey = st.text(st.sampled_from("ab \n\t\u00a0\u2003\x1c.é\r"), max_size=60)


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(text=spacey, data=st.data())
def test_the_c_cut_kernel_equals_its_python_twin(text, data):
    n = len(text)
    positions = sorted(set(data.draw(st.lists(st.integers(0, n), max_size=20))))
    if n not in positions:
        positions.append(n)
    k = len(positions)
    scores = data.draw(
        st.lists(st.sampled_from([0, 5, 10, 15, 20, 30, 60, 90, 1000, SCORE_BREAK]), min_size=k, max_size=k)
    )
    extra = data.draw(st.lists(st.sampled_from([0, 0, 400, 1000]), min_size=k, max_size=k))
    triples = data.draw(
        st.lists(st.tuples(st.integers(0, n + 1), st.integers(0, n + 2), st.integers(0, 2000)), max_size=4)
    )
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n + 1), st.integers(0, n + 2)), max_size=3))
    intervals = [v for triple in triples for v in triple]
    forbidden = [v for pair in pairs for v in pair]
    end = data.draw(st.sampled_from([n, max(0, n - 1)]))
    args = (text, positions, scores, extra, segmenter._SCORE_PRICES, intervals, forbidden, SCORE_BREAK, end)
    assert tuple(segmenter._native.cut_candidates(*args)) == cut_candidates(*args)


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(text=spacey, data=st.data())
def test_the_c_trim_and_lookup_kernels_equal_their_python_twins(text, data):
    positions = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    low = data.draw(st.integers(0, len(text)))
    assert segmenter._native.trim_ends(text, positions, low) == trim_ends(text, positions, low)
    keys = sorted(data.draw(st.lists(st.integers(0, 50), max_size=10)))
    values = data.draw(st.lists(st.integers(-5, 5000), min_size=len(keys) + 1, max_size=len(keys) + 1))
    queries = data.draw(st.lists(st.integers(-2, 55), max_size=20))
    for right in (False, True):
        assert segmenter._native.lookup(keys, values, queries, right) == lookup(keys, values, queries, right)
        indices = list(range(len(keys) + 1))
        assert segmenter._native.lookup(keys, None, queries, right) == lookup(keys, indices, queries, right)
        assert lookup(keys, None, queries, right) == lookup(keys, indices, queries, right)


# -- the textual levels: find_ends is finditer -------------------------------------------------------

LEVEL_PIECES = [
    "Word",
    "word",
    " ",
    "\n",
    "\n\n",
    ". ",
    ".",
    "? ",
    "e.g. ",
    "Dr. ",
    "3. ",
    "(a. ",
    "“Q.” ",
    "中文。",
    "है। ",
    "؟ ",
    "ነው። ",
    "ข้าว ",
    "ดีมาก",
    "ສະບາຍດີ ",
    "\u00a0",
    "…",
    "A",
    "1",
    "\x1c",
    "\x1f\n",
    "\n \n",
    "\u2003",
]


def test_re_and_regex_white_space_differ_only_where_the_levels_say() -> None:
    differ = packer.regex.compile(packer._SPACE_DIFFERS)
    ours, theirs = packer.re.compile(r"\s"), packer.regex.compile(r"\s")
    for code in range(0x110000):
        char = chr(code)
        if bool(ours.match(char)) != bool(theirs.match(char)):
            assert differ.match(char), hex(code)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(LEVEL_PIECES), max_size=40).map("".join),
    level=st.sampled_from([SENTENCE, SENTENCE_OR_PARAGRAPH, packer.LINE, packer.PARAGRAPH, packer.WORD]),
    data=st.data(),
    clean=st.booleans(),
)
def test_find_ends_is_finditer(text, level, data, clean):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    if clean and level.unless is not None and level.unless.search(text):
        clean = False  # "clean" is the caller's promise that the text has no such character
    expected = [match.end() for match in level.pattern.finditer(text, start, end)]
    assert list(find_ends(level, text, start, end, clean=clean)) == expected


def _use_python_kernels(monkeypatch) -> None:
    """Every kernel of the segmenter as its Python twin, as when ``_segment.c`` is not built."""
    monkeypatch.setattr(segmenter, "_native", None)
    monkeypatch.setattr(segmenter, "kernel", segmenter.twins)
    monkeypatch.setattr(packer, "segment_kernel", segmenter.twins)


def _search_loop_ends(level, text, gaps, inclusive):
    """The reference of ``lead_match_ends``: the pattern searched from the window's start again and
    again, each search from the end of the match before (``Packer._find_level`` did this)."""
    out = []
    for low, high in zip(gaps[::2], gaps[1::2], strict=True):
        match = level.pattern.search(text, max(0, low - 1), high)
        while match is not None:
            end = match.end()
            if low < end < high or (inclusive and low <= end <= high):
                out.append(end)
            match = level.pattern.search(text, end if end > match.start() else end + 1, high)
    return out


# The levels with a lead (those of a text with lone CRs too), and text pieces with lone CRs beside
# the levels' pieces (Thai and Lao letters among them: the levels' ``unless``).
LEAD_LEVELS = [SENTENCE, SENTENCE_OR_PARAGRAPH, levels._LONE_CR_LEVELS[SENTENCE_OR_PARAGRAPH]]
LEAD_PIECES = [
    *LEVEL_PIECES,
    *["\r", "\r\n", "x\r", ".\r", " \r \r", "ก\u2003ข"],
    *["...", ".!?", "….", "\n`", "`", " ©", "e.g", "(i", "Mr"],  # runs of stops and what may follow them
]


def _all_kernels() -> list:
    return [segmenter.twins] if segmenter.kernel is segmenter.twins else [segmenter.kernel, segmenter.twins]


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(st.sampled_from(LEAD_PIECES), max_size=40).map("".join),
    level=st.sampled_from(LEAD_LEVELS),
    data=st.data(),
    inclusive=st.booleans(),
)
def test_lead_match_ends_are_the_ends_searched_one_by_one(text, level, data, inclusive):
    bounds = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    gaps = bounds[: len(bounds) // 2 * 2]
    clean = level.unless.search(text) is None  # else the matches of ``also`` are leads too
    expected = _search_loop_ends(level, text, gaps, inclusive)
    for chosen in _all_kernels():
        with mock.patch.object(segmenter, "kernel", chosen):
            found = segmenter.lead_match_ends(level, text, gaps, inclusive=inclusive, clean=clean)
            assert found == expected


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(st.sampled_from(LEAD_PIECES), max_size=40).map("".join),
    level=st.sampled_from([*LEAD_LEVELS, packer.LINE, packer.PARAGRAPH, packer.WORD, packer.GRAPHEME]),
    data=st.data(),
)
def test_match_ends_is_finditer(text, level, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    expected = [match.end() for match in level.pattern.finditer(text, start, end)]
    for chosen in _all_kernels():
        with mock.patch.object(segmenter, "kernel", chosen):
            assert segmenter.match_ends(level, text, start, end) == expected


def _run_holds(level, text: str, high: int) -> None:
    """``TextLevel.run``: where a start after a character of the run (and at one) finds no match in
    ``text[:high]``, no later start in that run does."""
    for at in range(1, high):
        rest = level.run.match(text, at - 1, high)
        if rest is None or rest.end() <= at or level.pattern.match(text, at, high) is not None:
            continue
        later = [k for k in range(at + 1, rest.end()) if level.pattern.match(text, k, high) is not None]
        assert not later, (text, high, at, later)


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(st.sampled_from(LEAD_PIECES), max_size=40).map("".join),
    level=st.sampled_from(LEAD_LEVELS),
    data=st.data(),
)
def test_a_match_failing_inside_a_run_fails_for_the_rest_of_it(text, level, data):
    _run_holds(level, text, data.draw(st.integers(0, len(text))))


@pytest.mark.parametrize("level", LEAD_LEVELS, ids=["sentence", "sentence or paragraph", "lone CR"])
def test_a_match_failing_inside_a_run_fails_for_the_rest_of_it_before_each_tail(level) -> None:
    """Every short run of stops after each kind of word an exception ends with, before each kind of
    text that may follow a sentence's end."""
    befores = ["", " ", "(i", "e.g", "i.e", " Dr", "etc", " a", "1", "123", "(a", "x", "\n"]
    runs = [".", "..", "...", "....", ".!", "?..", "…", "….", "!?!"]
    tails = [" Word", " word", "\n`", " ©", "", " (A", "” X", ".\n", "\n\n", " 1", " 中"]
    for text in (b + r + t for b in befores for r in runs for t in tails):
        for high in range(len(text) + 1):
            _run_holds(level, text, high)


def test_also_holds_every_start_of_the_sentence_patterns_last_branch() -> None:
    """A Thai or Lao phrase break begins at white space (not a line feed) after a letter of those
    scripts: ``also`` matches wherever the branch's ``regex`` class does."""
    theirs = regex.compile(r"[^\S\n]")
    letter = "\u0e01"
    for code in range(0x110000):
        char = chr(code)
        if theirs.match(char):
            assert SENTENCE.also.match(letter + char, 1), hex(code)


@pytest.mark.parametrize("before", ["", "\u0e01 ", "a\rb"], ids=["plain", "thai", "lone-cr"])
@pytest.mark.parametrize("native_kernels", [True, False], ids=["c", "python"])
@pytest.mark.parametrize("strategy", ["recursive", "markdown", "sentence"])
def test_an_overlap_window_of_stops_is_read_in_linear_time(
    strategy: str, native_kernels: bool, before: str, monkeypatch
) -> None:
    """The overlap's start was found by searching the sentence pattern from each stop of its window,
    each search reading the rest of the run: 100,000 stops at 40,000 characters with 20,000 of overlap
    took 18 s, and this took minutes."""
    if native_kernels and segmenter._native is None:
        pytest.skip("no compiled kernel")
    if not native_kernels:
        _use_python_kernels(monkeypatch)
    # Ahead of the stops: a Thai letter (the levels' ``unless``: the lead's other branch) or a lone CR
    # (the levels of such a text), which once sent the search to ``regex`` from each stop (40,000
    # stops took 34 s), or nothing.
    text = before + "." * (1_000_000 if native_kernels else 200_000) + " Next. Then."
    config = {"strategy": strategy, "unit": "chars", "max_size": 100_000, "overlap": 50_000}
    started = time.process_time()
    result = split_document(text, config)
    elapsed = time.process_time() - started
    assert all(c.text == text[c.start : c.end] and c.size <= 100_000 for c in result.chunks)
    assert result.chunks[0].start == 0 and result.chunks[-1].end == len(text)
    # Nothing but white space is left between chunks.
    assert all(not text[a.end : b.start].strip() for a, b in itertools.pairwise(result.chunks))
    assert elapsed < 30, f"{elapsed:.1f} s"


# -- character classes: the levels' ``unless`` patterns as code point ranges -------------------------

ALL_LEVELS = sorted(
    {
        level
        for levels in (
            packer.RECURSIVE_LEVELS,
            (SENTENCE_OR_PARAGRAPH, packer.WORD, packer.GRAPHEME),
            tuple(packer._LONE_CR_LEVELS.values()),
        )
        for level in levels
    },
    key=lambda level: (level.name, level.pattern.pattern),
)


def test_every_levels_unless_class_is_its_code_point_ranges() -> None:
    patterns = {level.unless.pattern: level.unless for level in ALL_LEVELS if level.unless is not None}
    assert len(patterns) >= 2  # the unless patterns of the levels, each a class class_ranges reads
    for pattern in patterns.values():
        ranges = segmenter.class_ranges(pattern)
        assert ranges is not None, pattern.pattern
        pairs = list(zip(ranges[::2], ranges[1::2], strict=True))
        for code in range(0x110000):
            inside = any(lo <= code <= hi for lo, hi in pairs)
            assert inside == bool(pattern.match(chr(code))), (pattern.pattern, hex(code))
    assert segmenter.class_ranges(packer.regex.compile(r"[^a]")) is None
    assert segmenter.class_ranges(packer.regex.compile(r"\s+")) is None
    assert segmenter.class_ranges(packer.regex.compile(r"[ab]")) == [97, 97, 98, 98]


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(
    text=st.text(st.sampled_from("ab \n\x1c\x1f\x1eé\u0e01\u0e5b\u0e5c\u0ed0😀"), max_size=40),
    data=st.data(),
)
def test_the_c_class_kernel_equals_its_python_twin(text, data):
    ranges = data.draw(
        st.sampled_from(
            [
                [28, 31],
                [0xE01, 0xE5B, 0xE81, 0xEDF],
                [97, 97],
                [0x1F600, 0x1F600],
                [],
                [28, 28, 31, 31, 0xE01, 0xE5B, 0x1F600, 0x1F600],  # more than two ranges
            ]
        )
    )
    start = data.draw(st.integers(-2, len(text) + 2))
    end = data.draw(st.integers(-2, len(text) + 2))
    expected = segmenter.first_in_ranges(text, ranges, start, end)
    assert segmenter._native.first_in_ranges(text, ranges, start, end) == expected


# -- chunk starts: skip_spaces settles what the characters settle, the packer the rest ---------------


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["a", "b", " ", " " * 40, "\n", "\t", "\u00a0", "\r", "é", "\u0301", "\x7f"]),
        max_size=30,
    ).map("".join),
    unit=st.sampled_from(["chars", "words", "tokens"]),
    max_size=st.sampled_from([10, 40, 64, 1000]),
    data=st.data(),
)
def test_the_chunk_starts_are_the_packers(text, unit, max_size, data):
    plan = get_strategy("recursive")(text, parse_settings({"strategy": "recursive"}), None).plan
    pk = Packer(text, plan, make_meter(text, unit), max_size, 0, 0)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    end = plan.end
    expected = [
        p if p < end and not text[p].isspace() and pk._is_cluster_boundary(p) else pk._skip_space(p, end)
        for p in cuts
    ]
    assert Segmenter(pk)._starts(cuts) == expected


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(text=spacey, data=st.data())
def test_the_c_skip_kernel_equals_its_python_twin(text, data):
    positions = data.draw(st.lists(st.integers(0, len(text) + 2), max_size=20))
    limit = data.draw(st.integers(0, len(text) + 3))
    for max_indent in (0, 3, 32):
        for plain, verify in itertools.product((False, True), repeat=2):
            args = (text, positions, limit, max_indent, plain, verify)
            assert tuple(segmenter._native.skip_spaces(*args)) == segmenter.skip_spaces(*args)


RESERVED: list[int] = []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from([*PIECES, "é ", "  indented\n", "\u0301"]), min_size=1, max_size=25),
    strategy=st.sampled_from(["markdown", "recursive"]),
    unit=st.sampled_from(["chars", "words"]),
    max_size=st.sampled_from([12, 40, 120]),
    data=st.data(),
)
def test_the_fits_and_reserves_by_arrays_are_the_packers(pieces, strategy, unit, max_size, data):
    text = "".join(pieces)
    config = parse_settings(
        {"strategy": strategy, "unit": unit, "max_size": max_size, "front_matter": "keep"}
    )
    layout = get_strategy(strategy)(text, config, None)
    meter = make_meter(text, unit)
    reserve = Reserve(text, layout, config, "A title", meter)
    pk = Packer(text, layout.plan, meter, max_size, 0, 0, reserve=reserve)
    pk._index()
    seg = Segmenter(pk)
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, len(text))).map(sorted), max_size=12)
    )
    starts, ends = [a for a, _ in pairs], [b for _, b in pairs]
    assert seg._fit_all(starts, ends) == [Segmenter(pk)._fits(a, b) for a, b in pairs]
    if pk.reserve is not None:  # a prefix to reserve (most texts: the title at least)
        RESERVED.append(1)
        assert seg._reserve_lookup(starts) == reserve.sizes_at(starts)
        assert seg._reserve_lookup(starts, max_size) == [
            max(1, max_size - r) for r in reserve.sizes_at(starts)
        ]
    assert seg._next_texts(starts, len(text)) == [pk._next_text(a) for a in starts]
    if pk._heading_starts:  # right after another heading: by the reaches as by the search
        plan = layout.plan
        reaches = seg._next_texts([plan.heading_ends[s] for s in pk._heading_starts], plan.end)
        assert segmenter.heading_span_prices(plan, pk._heading_starts, text, reaches) == (
            segmenter.heading_span_prices(plan, pk._heading_starts, text)
        )


def test_the_reserve_lookup_was_tried() -> None:
    RESERVED.clear()
    test_the_fits_and_reserves_by_arrays_are_the_packers()
    assert len(RESERVED) > 20


# -- levels at once: class_ends is finditer over each gap, wide_gaps the gaps, by level as by gap ----

SPEC_LEVELS = [packer.PARAGRAPH, packer.LINE, packer.WORD]


def test_the_class_levels_have_specs_and_the_others_none() -> None:
    assert [segmenter.level_spec(level.same) is not None for level in SPEC_LEVELS] == [True, True, True]
    for pattern in (r"\n\r|\r", r"a*a", r"\s*x", r"(?i)a", r"\s+(?=A)", r"[\w]"):
        assert segmenter.level_spec(packer.re.compile(pattern)) is None, pattern


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(LEVEL_PIECES), max_size=40).map("".join),
    level=st.sampled_from(SPEC_LEVELS),
    data=st.data(),
    plain=st.booleans(),
)
def test_class_ends_is_finditer_in_each_gap(text, level, data, plain):
    bounds = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=8))))
    gaps = [v for a, b in itertools.pairwise(bounds) for v in (a, b)]
    taken = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))))
    expected: list[int] = []
    for low, high in itertools.pairwise(bounds):
        expected += [
            m.end() for m in level.same.finditer(text, max(0, low - 1), high) if low < m.end() < high
        ]
    expected = [pos for pos in expected if pos not in taken]
    spec = segmenter.level_spec(level.same)
    ends, unsure = segmenter.class_ends(text, gaps, spec, taken, plain, 0)
    assert ends == expected
    settled = [plain or (text[p] < "\x7f" and text[p - 1] < "\x7f" and text[p - 1] != "\r") for p in ends]
    assert unsure == [k for k, ok in enumerate(settled) if not ok]
    # Sampled: each kept end ``step`` or more after the one kept before it in its gap (the gap's low).
    step = data.draw(st.integers(1, 12))
    sampled: list[int] = []
    for low, high in itertools.pairwise(bounds):
        kept = low
        for pos in expected:
            if low < pos < high and pos - kept >= step:
                sampled.append(pos)
                kept = pos
    assert segmenter.class_ends(text, gaps, spec, taken, True, step) == (sampled, [])
    if segmenter._native is not None:
        assert tuple(segmenter._native.class_ends(text, gaps, spec, taken, plain, 0)) == (ends, unsure)
        assert tuple(segmenter._native.class_ends(text, gaps, spec, taken, True, step)) == (sampled, [])


@seed(20261202)
@settings(max_examples=400, deadline=None)
@given(text=spacey, data=st.data())
def test_text_spans_kernel_equals_its_twin_and_the_arrays(text, data):
    """``text_spans`` (C and Python) against the array work it stands for: each span between the
    bounds, its first non-space (``skip_spaces``) and trimmed end, a position strictly inside, and the
    size with the looked-up addend within the budget (or asked)."""
    n = len(text)
    positions = sorted(set(data.draw(st.lists(st.integers(0, n), max_size=20)) + [n]))
    scores = data.draw(
        st.lists(st.sampled_from([10, 30, 60, 90]), min_size=len(positions), max_size=len(positions))
    )
    more = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    start = data.draw(st.integers(0, min(n, 3)))
    end = data.draw(st.integers(max(start, n - 3), n))
    price, budget = data.draw(st.sampled_from([1, 100])), data.draw(st.sampled_from([-1, 0, 5, 20, 60]))
    keys = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    values = data.draw(st.lists(st.integers(0, 10), min_size=len(keys) + 1, max_size=len(keys) + 1))
    plain = data.draw(st.booleans())
    args = (text, positions, scores, 60, more, start, end, price, budget, keys, values, plain)
    sure, asked = text_spans(*args)
    bounds = sorted({start, *(p for p, s in zip(positions, scores, strict=True) if s >= 60), *more})
    want_sure, want_asked = [], []
    for low, high in itertools.pairwise(bounds):
        first = skip_spaces(text, [low], end, -1, True, False)[0][0]
        last = max(low, trim_ends(text, [high], 0)[0])
        if not any(first < p < last for p in positions):
            continue
        settled = first == 0 or (
            text[first] < "\x7f" and text[first - 1] < "\x7f" and text[first - 1] != "\r"
        )
        if budget < 0 or not (plain or settled):
            want_asked += (low, high, first, last)
        elif last - first + values[bisect.bisect_right(keys, first)] <= budget:
            want_sure += (first + 1, last, price)
    assert (sure, asked) == (want_sure, want_asked)
    if segmenter._native is not None:
        assert segmenter._native.text_spans(*args) == (sure, asked)


def _twin_and_kernel_give(name: str, args: tuple, want: object) -> None:
    """The Python twin ``segmenter.<name>`` and, when built, its C kernel both return ``want``."""
    assert getattr(segmenter, name)(*args) == want
    if segmenter._native is not None:
        assert getattr(segmenter._native, name)(*args) == want


@seed(20261203)
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_live_spans_kernel_equals_its_twin_and_the_arrays(data):
    """``live_spans`` (C and Python) against what it stands for: the spans with a position strictly
    inside [first, max(low, tail)), and those lasts."""
    positions = sorted(set(data.draw(st.lists(st.integers(0, 50), max_size=20))))
    n = data.draw(st.integers(0, 8))
    lows = data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    firsts = [low + data.draw(st.integers(0, 5)) for low in lows]
    tails = data.draw(st.lists(st.integers(0, 55), min_size=n, max_size=n))
    args = (positions, lows, firsts, tails)
    want_live = [u for u in range(n) if any(firsts[u] < p < max(lows[u], tails[u]) for p in positions)]
    want = (want_live, [max(lows[u], tails[u]) for u in want_live])
    _twin_and_kernel_give("live_spans", args, want)


@seed(20261203)
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_fit_sizes_kernel_equals_its_twin_and_the_arrays(data):
    """``fit_sizes`` (C and Python) against the sizes it stands for: [begin, tail), empty below its
    begin, plus the value looked up by its begin, within the budget."""
    n = data.draw(st.integers(0, 8))
    begins = data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    tails = data.draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    keys = sorted(data.draw(st.lists(st.integers(0, 50), max_size=3)))
    values = data.draw(st.lists(st.integers(0, 10), min_size=len(keys) + 1, max_size=len(keys) + 1))
    budget = data.draw(st.integers(-1, 40))
    args = (begins, tails, keys, values, budget)
    want = [
        max(0, tail - begin) + values[sum(1 for key in keys if key <= begin)] <= budget
        for begin, tail in zip(begins, tails, strict=True)
    ]
    _twin_and_kernel_give("fit_sizes", args, want)


@seed(20261203)
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_capped_intervals_kernel_equals_its_twin_and_the_arrays(data):
    """``capped_intervals`` (C and Python) against the intervals it stands for: each start to its
    reach, capped at the next start, when that lies past it."""
    starts = sorted(set(data.draw(st.lists(st.integers(0, 50), max_size=8))))
    reaches = [start + data.draw(st.integers(-2, 20)) for start in starts]
    price = data.draw(st.sampled_from([0, 7, 400]))
    want: list[int] = []
    for k, start in enumerate(starts):
        reach = min([reaches[k], *starts[k + 1 : k + 2]])
        if reach > start:
            want += (start + 1, reach + 1, price)
    _twin_and_kernel_give("capped_intervals", (starts, reaches, price), want)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_wide_gaps_kernel_equals_its_twin(data):
    bounds = sorted(set(data.draw(st.lists(st.integers(0, 400), max_size=8))))
    gaps = [v for a, b in itertools.pairwise(bounds[::2]) for v in (a, b)]
    positions = sorted(set(data.draw(st.lists(st.integers(0, 400), max_size=20))))
    scores = data.draw(
        st.lists(st.sampled_from([1, 10, 20, 30, 60]), min_size=len(positions), max_size=len(positions))
    )
    found = sorted(set(data.draw(st.lists(st.integers(0, 400), max_size=10))) - set(positions))
    min_score, budget = data.draw(st.sampled_from([10, 30, 60])), data.draw(st.sampled_from([4, 40, 200]))
    args = (gaps, positions, scores, min_score, found, budget)
    expected = segmenter.wide_gaps(*args)
    points_checked = all((b - a) * 4 > budget for a, b in zip(expected[::2], expected[1::2], strict=True))
    assert points_checked
    if segmenter._native is not None:
        assert segmenter._native.wide_gaps(*args) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(
        st.sampled_from([*PIECES, *LEVEL_PIECES, "x" * 30 + " ", "\n" * 3, "\r", "e\u0301\n"]),
        min_size=1,
        max_size=40,
    ),
    strategy=st.sampled_from(["recursive", "markdown", "sentence", "rst"]),
    max_size=st.sampled_from([8, 30, 80, 200]),
    unit=st.sampled_from(["chars", "words", "tokens"]),
)
def test_the_candidates_by_level_are_those_by_gap(pieces, strategy, max_size, unit):
    text = "".join(pieces)
    if unit != "chars":
        max_size = max(2, max_size // 4)
    config = parse_settings(
        {"strategy": strategy, "max_size": max_size, "front_matter": "keep", "unit": unit}
    )
    plan = get_strategy(strategy)(text, config, None).plan
    pk = Packer(text, plan, make_meter(text, unit), max_size, 0, 0)
    pk._index()
    origin = pk._skip_space(plan.start, plan.end)
    if origin >= plan.end:
        return
    by_gap = Segmenter(pk)
    by_gap._by_gap = True
    assert Segmenter(pk)._candidates(origin) == by_gap._candidates(origin)


LEAD_LEVELS = [level for level in ALL_LEVELS if level.lead is not None]
LEAD_TEXT = st.text(st.sampled_from(".!?…\"'”’)]“‘([ \n\x1c\u3000Aaé1中。।\u0e01"), max_size=40)


def test_every_levels_lead_is_read_as_classes_with_a_lookahead() -> None:
    assert len(LEAD_LEVELS) >= 2
    for level in LEAD_LEVELS:
        ranges, checked, spec = segmenter.lead_classes(level.lead)
        assert ranges and checked and spec, level.lead.pattern
    # The lead's stand-in for the pattern's capitals holds every one of them (a superset: every match
    # begins where the lead does).
    capitals = packer.regex.compile(f"[{levels._CAPITALS}]")
    within = packer.re.compile(f"[{levels._CAPITALS_WITHIN}]")
    for code in range(0x110000):
        if capitals.match(chr(code)):
            assert within.match(chr(code)), hex(code)
    for pattern in (r"[ab](?=c)|[bc]", r"ab", r"[ab](?<=a)", r"[ab](?=a*a)", r"[a](?=b)|[c](?=d)", r"\w"):
        assert segmenter.lead_classes(packer.re.compile(pattern)) is None, pattern
    assert segmenter.lead_classes(packer.re.compile(r"[ab]")) == ([97, 97, 98, 98], [], [])


@settings(max_examples=400, deadline=None)
@given(text=LEAD_TEXT, level=st.sampled_from(LEAD_LEVELS), data=st.data())
def test_class_positions_of_a_lead_are_its_finditer_in_each_gap(text, level, data):
    bounds = sorted(set(data.draw(st.lists(st.integers(0, len(text) + 1), max_size=8))))
    gaps = [v for a, b in itertools.pairwise(bounds) for v in (a, b)]
    expected: list[int] = []
    for low, high in itertools.pairwise(bounds):
        expected += [m.start() for m in level.lead.finditer(text, max(0, low - 1), high)]
    positions, offsets = segmenter.class_positions(text, gaps, *segmenter.lead_classes(level.lead))
    assert positions == expected
    assert offsets[-1] == len(positions)


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(text=LEAD_TEXT, data=st.data())
def test_the_c_class_positions_kernel_equals_its_twin(text, data):
    bounds = sorted(set(data.draw(st.lists(st.integers(0, len(text) + 1), max_size=8))))
    gaps = [v for a, b in itertools.pairwise(bounds) for v in (a, b)]
    classes = data.draw(
        st.sampled_from(
            [
                segmenter.lead_classes(SENTENCE.lead),
                segmenter.lead_classes(SENTENCE_OR_PARAGRAPH.lead),
                ([10, 10], [], []),
                ([28, 31, 0x4E00, 0x9FFF], [0x4E00, 0x9FFF], segmenter.level_spec(packer.PARAGRAPH.same)),
            ]
        )
    )
    expected = segmenter.class_positions(text, gaps, *classes)
    assert expected[1][-1] == len(expected[0])
    assert tuple(segmenter._native.class_positions(text, gaps, *classes)) == expected


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(LEVEL_PIECES), max_size=30).map("".join), data=st.data())
def test_the_c_window_kernel_equals_its_twin(text, data):
    positions = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=15))))
    scores = data.draw(
        st.lists(st.sampled_from([1, 10, 20, 29, 30, 60]), min_size=len(positions), max_size=len(positions))
    )
    starts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=3))))
    reaches = [start + data.draw(st.integers(0, 10)) for start in starts]
    low = data.draw(st.integers(0, len(text)))
    windows = {text[max(0, p - 4) : p] for p in range(len(text) + 1)}
    memo = {w: data.draw(st.booleans()) for w in sorted(windows) if data.draw(st.booleans())}
    ending = data.draw(st.sampled_from([[], segmenter.ending_terms(segmenter._SENTENCE_END), [0, 97, 122]]))
    args = (text, positions, scores, 30, starts, reaches, low, 4, memo, 400, ending)
    assert tuple(segmenter._native.window_extra(*args)) == segmenter.window_extra(*args)


@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from([*LEVEL_PIECES, ")", "”", ":", "\n", "a.\n"]), max_size=30).map("".join))
def test_the_mid_sentence_extras_by_the_ending_class_are_those_by_the_rule(text):
    """A window whose last character no alternative of findings' _SENTENCE_END can end with ends no
    sentence: with the ending terms, the extras are those of the memo the rule fills."""
    ending = segmenter.ending_terms(segmenter._SENTENCE_END)
    assert ending
    for end in range(1, len(text) + 1):
        window = text[max(0, end - 4) : end]
        if segmenter._SENTENCE_END.search(window) is not None:
            assert segmenter._in_class((1, 1, 0, ending), window[-1]), window
    positions = list(range(len(text) + 1))
    windows = {text[max(0, p - 4) : p] for p in positions}  # every window a trimmed position takes
    memo = {w: segmenter._SENTENCE_END.search(w) is not None for w in windows}
    args = (text, positions, [10] * len(positions), 30, [], [], 0, 4, memo, 400)
    assert segmenter.window_extra(*args, ending) == segmenter.window_extra(*args, [])
    if segmenter._native is not None:
        assert segmenter._native.window_extra(*args, ending) == segmenter._native.window_extra(*args, [])


@needs_kernel
@settings(max_examples=200, deadline=None)
@given(
    filler=st.sampled_from(["a", "é", "\u0e00", "中", "😀"]),
    hit=st.sampled_from(["\x1c", "\x1f", "\u0e01", "\u0edf", "\u0e81"]),
    data=st.data(),
)
def test_the_class_kernels_on_long_texts_equal_their_twins(filler, hit, data):
    length = data.draw(st.integers(0, 400))
    hits = data.draw(st.lists(st.integers(0, length - 1), max_size=3)) if length else []
    chars = [filler] * length
    for at in hits:
        chars[at] = hit
    text = "".join(chars)
    start = data.draw(st.integers(0, length))
    # Two ranges or fewer, and more (the blocks below the lowest range passed over, then compared).
    for ranges in (
        [28, 31],
        [0xE01, 0xE5B, 0xE81, 0xEDF],
        [28, 28, 31, 31, 0xE01, 0xE01],
        [0xE01, 0xE01, 0xE5B, 0xE5B, 0xE81, 0xEDF],
    ):
        expected = segmenter.first_in_ranges(text, ranges, start, length)
        assert segmenter._native.first_in_ranges(text, ranges, start, length) == expected
    spec = segmenter.level_spec(packer.LINE.same)
    lined = text.replace(hit, "\n")
    gaps = [start, length]
    assert tuple(segmenter._native.class_ends(lined, gaps, spec, [], False, 0)) == segmenter.class_ends(
        lined, gaps, spec, [], False, 0
    )


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["#", "# ", "## x", "   #", "    #", "\n", "a", " ", "\t", "#######", "x" * 120]),
        max_size=12,
    ).map("".join),
    data=st.data(),
)
def test_the_atx_test_on_the_last_line_is_the_window_search(text, data):
    pos = data.draw(st.integers(0, len(text)))
    expected = segmenter._ATX_LINE.search(text, max(0, pos - 300), pos) is not None
    assert segmenter.ends_in_atx_line(text, pos) == expected
    # Remembered by the line's text (the memo filled from other texts first): the same answers.
    others = data.draw(st.lists(st.integers(0, len(text)), max_size=4))
    segmenter.ends_in_atx_lines(text[::-1], others)
    segmenter.ends_in_atx_lines(text.replace("\n", "#"), others)
    assert segmenter.ends_in_atx_lines(text, [*others, pos]) == [
        segmenter.ends_in_atx_line(text, p) for p in [*others, pos]
    ]


ATX_PIECES = ["#", "# ", "## x", "   #", "    #", "\n", "a", " ", "\t", "#######", "x" * 120, "é", "😀"]


@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from(ATX_PIECES), max_size=14).map("".join), data=st.data())
def test_line_heads_asks_exactly_the_cuts_that_may_end_in_a_heading_line(text, data):
    """``line_heads`` with the ``_ATX_AT_START`` spec passes over only cuts whose trimmed text cannot
    end in an ATX line (the window search says no), and with an empty memo asks each other one; the C
    kernel equals the twin, for any memo."""
    positions = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=15))))
    scores = data.draw(
        st.lists(st.sampled_from([1, 10, 30, SCORE_BREAK]), min_size=len(positions), max_size=len(positions))
    )
    low = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(0, len(text) + 1))
    spec = segmenter._atx_start_spec()
    args = (text, positions, scores, SCORE_BREAK, end, low, segmenter._ATX_WINDOW, spec)
    hits, missing, trimmed = segmenter.line_heads(*args, {})
    assert hits == []
    eligible = [
        k for k, (p, s) in enumerate(zip(positions, scores, strict=True)) if s < SCORE_BREAK and p < end
    ]
    trims = dict(zip(eligible, trim_ends(text, [positions[k] for k in eligible], low), strict=True))
    for k in eligible:
        if k not in missing:
            assert not segmenter.ends_in_atx_line(text, trims[k])
    assert trimmed == [trims[k] for k in missing]
    lines = {text[max(0, t - 300) : t].rsplit("\n", 1)[-1] for t in trimmed}
    memo = {line: data.draw(st.booleans()) for line in sorted(lines) if data.draw(st.booleans())}
    expected = segmenter.line_heads(*args, memo)
    if segmenter._native is not None:
        assert tuple(segmenter._native.line_heads(*args, memo)) == expected
        every = (*args[:-1], [1, 0, 0, 0, 0], {})  # a spec matching at every line start
        assert tuple(segmenter._native.line_heads(*every)) == segmenter.line_heads(*every)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_merge_levels_is_the_dict_of_the_candidates_and_the_c_kernel_its_twin(data):
    positions = sorted(data.draw(st.lists(st.integers(0, 60), max_size=20)))
    scores = data.draw(st.lists(st.integers(0, 100), min_size=len(positions), max_size=len(positions)))
    finds = data.draw(st.lists(st.lists(st.integers(0, 60), max_size=10).map(sorted), max_size=4))
    find_scores = data.draw(st.lists(st.integers(0, 100), min_size=len(finds), max_size=len(finds)))
    found: dict[int, int] = {}
    for pos, score in zip(positions, scores, strict=True):
        found[pos] = max(found.get(pos, -1), score)
    for more, score in zip(finds, find_scores, strict=True):
        for pos in more:
            found[pos] = score
    expected = (sorted(found), [found[pos] for pos in sorted(found)])
    assert segmenter.merge_levels(positions, scores, finds, find_scores) == expected
    if segmenter._native is not None:
        assert tuple(segmenter._native.merge_levels(positions, scores, finds, find_scores)) == expected
        with pytest.raises(ValueError):
            segmenter._native.merge_levels([2, 1], [0, 0], [], [])


def test_a_unit_that_fits_only_without_its_lines_indentation_stays_whole() -> None:
    """A fenced block in a list item fits the budget from its first character, not with the three
    spaces of its line before it: the scanner puts a boundary at its fence, so it is kept whole (it was
    split when a unit was measured from its line's start)."""
    from chunkyard import chunk_document

    body = "".join(f"   line {i:02d} of the example block\n" for i in range(20))
    fence = "```text\n" + body + "   ```"
    text = "# Guide\n\nSome words before the steps.\n\n1. Run the tool:\n\n   " + fence + "\n\n2. Done.\n"
    for budget in ("text", "embed_text"):
        chunks = chunk_document(
            text,
            {
                "strategy": "markdown",
                "unit": "chars",
                "max_size": len(fence) + 1,
                "overlap": 0,
                "min_size": 0,
                "budget": budget,
                "front_matter": "exclude",
            },
        )
        start = text.index("```text")
        end = start + len(fence)
        assert any(c.start <= start and end <= c.end for c in chunks), (
            budget,
            [(c.start, c.end) for c in chunks],
        )


def _chunk(text: str, max_size: int) -> list[tuple[int, int]]:
    from chunkyard import chunk_document

    settings = {"strategy": "markdown", "unit": "chars", "max_size": max_size, "overlap": 0, "min_size": 0}
    return [(c.start, c.end) for c in chunk_document(text, {**settings, "budget": "text"})]


def test_a_paragraph_that_fits_is_cut_only_where_keeping_it_costs_more_than_a_chunk() -> None:
    """A paragraph that fits is kept whole at the price of one more chunk: a cut inside it costs a
    chunk price on top of its score's."""
    lead = "Short lead paragraph here, sixty characters long in total ok."
    middle = "First sentence of the middle one. Second sentence is here ok."
    last = "The last paragraph of the text, about sixty characters long."
    text = f"{lead}\n\n{middle}\n\n{last}\n"
    # Cutting the middle paragraph at its sentence end would make two chunks, not three.
    assert _chunk(text, 100) == [(0, 61), (63, 124), (126, 186)]


def test_a_heading_in_a_list_item_is_not_left_at_a_chunks_end() -> None:
    """``- #### Why?`` is a heading (CommonMark) though the scanner reads a list item: a cut right
    after it is priced as a heading left at a chunk's end."""
    answer = "Answer B sentence one is here. " * 3 + "Answer B ends here."
    text = f"- #### A?\n\n  Answer A is short.\n- #### B?\n\n  {answer}\n"
    chunks = _chunk(text, len(answer) + 5)
    assert len(chunks) > 1
    for a, b in chunks[:-1]:
        assert not text[a:b].rstrip().endswith("B?"), chunks


# -- the white-space walks: positions in one long run cost the run once ------------------------------

RUNS = st.lists(
    st.sampled_from(["a", "b.", "# x", " " * 7, "\n" * 5, " \t\n", "\u00a0\u2003", "\r\n", "é"]), max_size=14
)


def _kernels() -> list:
    return [segmenter] if segmenter._native is None else [segmenter, segmenter._native]


@settings(max_examples=300, deadline=None)
@given(text=RUNS.map("".join), data=st.data())
def test_the_walks_remembered_between_positions_answer_as_each_position_alone(text, data):
    """``trim_ends``, ``skip_spaces``, ``window_extra`` and ``line_heads`` carry the last walk over white
    space to the next position (so a run is walked once, not once per position in it); the answer for
    every position is the one it gets alone, C and Python, in any order and with repeats."""
    n = len(text)
    anywhere = data.draw(st.lists(st.integers(0, n), max_size=20))
    ordered = sorted(data.draw(st.lists(st.integers(0, n), max_size=20)))
    low = data.draw(st.integers(0, n))
    limits = data.draw(st.lists(st.integers(0, n + 2), min_size=len(anywhere), max_size=len(anywhere)))
    for kernel in _kernels():
        for positions in (anywhere, ordered):
            assert kernel.trim_ends(text, positions, low) == [
                kernel.trim_ends(text, [p], low)[0] for p in positions
            ]
        for max_indent, plain, verify in itertools.product((0, 3), (False, True), (False, True)):
            for limit in (limits, data.draw(st.integers(0, n + 2))):
                per = limit if isinstance(limit, list) else [limit] * len(anywhere)
                starts, unsure = kernel.skip_spaces(text, anywhere, limit, max_indent, plain, verify)
                alone = [
                    kernel.skip_spaces(text, [p], [b], max_indent, plain, verify)
                    for p, b in zip(anywhere, per, strict=True)
                ]
                assert list(starts) == [a[0][0] for a in alone]
                assert list(unsure) == [k for k, a in enumerate(alone) if a[1]]
        scores = [data.draw(st.sampled_from([1, 10, 60])) for _ in ordered]
        windows = {text[max(0, p - 4) : p] for p in range(n + 1)}
        memo = {w: data.draw(st.booleans()) for w in sorted(windows) if data.draw(st.booleans())}
        args = (text, ordered, scores, 30, [], [], low, 4, memo, 400, [])
        extra, missing = kernel.window_extra(*args)
        alone = [kernel.window_extra(text, [p], [s], *args[3:]) for p, s in zip(ordered, scores, strict=True)]
        assert list(extra) == [a[0][0] for a in alone]
        assert list(missing) == [k for k, a in enumerate(alone) if a[1]]
        spec = segmenter._atx_start_spec()
        lines = {text[max(0, t - 300) : t].rsplit("\n", 1)[-1] for t in range(n + 1)}
        memo = {line: data.draw(st.booleans()) for line in sorted(lines) if data.draw(st.booleans())}
        head = (SCORE_BREAK, n, low, segmenter._ATX_WINDOW, spec, memo)
        hits, missing, trimmed = kernel.line_heads(text, ordered, scores, *head)
        alone = [kernel.line_heads(text, [p], [s], *head) for p, s in zip(ordered, scores, strict=True)]
        assert list(hits) == [k for k, a in enumerate(alone) if a[0]]
        assert list(missing) == [k for k, a in enumerate(alone) if a[1]]
        assert list(trimmed) == [a[2][0] for a in alone if a[2]]


# Runs that once cost time quadratic in their length, each position of the run reading the rest of it:
# line feeds and spaces (every line feed a cut walking back over the whole run, in line_heads,
# window_extra, trim_ends, skip_spaces and text_spans: 2,000,000 took minutes), stops (the sentence
# lead's lookahead read the run from each stop: 200,000 took 18 s; after a Thai letter or a lone CR
# the sentence pattern's search did, 40,000 took 34 s; before a line that starts with no capital, every
# stop was a lead and each failed match read the run: 20,000 in a code block took 9 s) and a list
# item's indentation (cut_candidates read the run again from the kept cut for each candidate: 800,000
# took 3 s).
HOSTILE_RUNS = {
    "line feeds": lambda n: "x\n" + "\n" * n + "y",
    "spaces": lambda n: "x\n" + " " * n + "y",
    "CR LF": lambda n: "x\n" + "\r\n" * (n // 2) + "y",
    "mixed white space": lambda n: "x\n" + " \t\n" * (n // 3) + "y",
    "stops": lambda n: "." * n,
    "stops before a sentence": lambda n: "." * n + " Next",
    "stops after a Thai letter": lambda n: "\u0e01 " + "." * n,
    "stops after a lone CR": lambda n: "a\rb" + "." * n,
    "stops in a code block": lambda n: "```\n" + "." * n + "\n```\n",
    # Each position after a lone CR asked the grapheme rules from 128 characters back: 50,000 took 2 s.
    "lines ending with a lone CR": lambda n: "a.\r" * (n // 3),
    "an item's indentation": lambda n: "- a\n" + " " * n + "b",
}


@pytest.mark.parametrize("native_kernels", [True, False], ids=["c", "python"])
@pytest.mark.parametrize("strategy", ["recursive", "markdown", "sentence"])
@pytest.mark.parametrize("name", list(HOSTILE_RUNS))
def test_a_long_run_is_read_in_linear_time(
    name: str, strategy: str, native_kernels: bool, monkeypatch
) -> None:
    if native_kernels and segmenter._native is None:
        pytest.skip("no compiled kernel")
    if not native_kernels:
        _use_python_kernels(monkeypatch)
    text = HOSTILE_RUNS[name](2_000_000 if native_kernels else 200_000)
    started = time.process_time()
    result = split_document(text, {"strategy": strategy, "unit": "chars", "max_size": 1000})
    elapsed = time.process_time() - started
    assert all(c.text == text[c.start : c.end] and c.size <= 1000 for c in result.chunks)
    # No overlap: the chunks hold every character that is not white space, once.
    assert sum(len("".join(c.text.split())) for c in result.chunks) == len("".join(text.split()))
    # Linear work takes a few seconds at most here; the quadratic steps took minutes.
    assert elapsed < 30, f"{name}: {elapsed:.1f} s"
