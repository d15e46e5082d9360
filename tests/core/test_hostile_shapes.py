"""Every chunk invariant on every hostile shape × configuration (``support.hostile_shapes``).

The shapes are the growth scan's (``benchmarks/growth_scan.py``), which times them; here each is
chunked at a size that spans several chunks and checked as the property tests check random text:
exact spans, coverage, the budget (or a finding), sizes recounted, no cut inside a grapheme cluster.
"""

from __future__ import annotations

import pytest

from support.checks import run_and_check
from support.hostile_shapes import CASES, SHAPES, prepared

SIZE = 4000  # four chunks of 1000 characters; a reader's extraction may give fewer


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_hostile_shape_keeps_every_invariant(shape: str) -> None:
    made = SHAPES[shape](SIZE)
    for case in CASES:
        text, settings, path = prepared(made, case)
        if not text:  # a reader skipped it (e.g. a ``.py`` file that is not UTF-8 text): nothing to chunk
            continue
        run_and_check(text, settings, path, twice=False)


def test_every_shape_is_about_the_size_asked_for() -> None:
    # A shape that came out empty or tiny would check nothing; nested-indent grows its lines with n.
    sizes = {name: len(make(SIZE)) for name, make in SHAPES.items()}
    assert all(size >= 900 for size in sizes.values()), sizes
