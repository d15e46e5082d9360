"""The global segmenter (chunking/segmenter.py): its optimiser finds the cheapest segmentation.

On generated documents small enough to enumerate every segmentation (every subset of the candidate
cuts), the cost of the path ``best_predecessors`` chooses equals the brute-force minimum of the cost
written out here from the module docstring, and that path obeys the hard constraints.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking import native, segmenter
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.packer import Packer
from chunkyard.chunking.segmenter import (
    PRICE_NO_OVERLAP,
    PRICE_OVER_BUDGET,
    PRICE_UNDERSIZED,
    Problem,
    Segmenter,
    best_predecessors,
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
    segmenter.ends(origin)
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
