"""Boundary findings: for every code in ``FINDINGS``, one document that triggers it and one that must not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking.api import Chunk, split_document
from chunkyard.chunking.findings import FINDINGS, explain

from support.checks import run_and_check
from support.strategies import markdownish, tolerated

PROSE = "The store opens at nine. Staff arrive at half past eight to count the tills. Deliveries come on Tuesdays."
PROCEDURE = """\
To issue a refund:

1. Open the order in the admin panel.
2. Click the refund button at the top.
3. Choose the items to refund and the reason.
4. Confirm the refund and notify the customer.
"""
BULLETS = "Packing list:\n\n" + "\n".join(f"- item number {i} with words" for i in range(10)) + "\n"
TABLE = (
    "| Zone | Rate | Days |\n|------|------|------|\n"
    + "\n".join(f"| {z} | ${n} | {n // 2} |" for n, z in enumerate("ABCDEFGH", 4))
    + "\n"
)
CODE = (
    "Run this:\n\n```python\n"
    + "\n".join(f"value_{i} = compute({i}, factor={i * 3})" for i in range(12))
    + "\n```\n"
)
HEADED = "Intro para that is long enough to fill it.\n# Heading One\nBody text that is rather long here."
LONG_HEADING = "# Reference for every option of the command line\n\nThe tool reads its config at start. It exits on errors.\n"
SMALL_LAST = "Short one.\n\nA paragraph that is long enough to be a real chunk of text here, more than fifty characters."


@dataclass
class Case:
    text: str
    settings: dict[str, Any]
    constraints: list[Any] = field(default_factory=list)


def _keep(start: int, end: int) -> list[Any]:
    from chunkyard.chunking.constraints import KEEP, Placement

    return [Placement(KEEP, start, end)]


def md(**kw: Any) -> dict[str, Any]:
    return {"strategy": "markdown", "unit": "chars", "overlap": 0, **kw}


def rec(**kw: Any) -> dict[str, Any]:
    return {"strategy": "recursive", "unit": "chars", "overlap": 0, **kw}


# code -> (a case that triggers it, a case that must not)
CASES: dict[str, tuple[Case, Case]] = {
    "over_budget": (
        Case("👩‍👩‍👧‍👦", rec(unit="tokens", max_size=2)),  # one grapheme of 18 tokens
        Case("👩‍👩‍👧‍👦 and words", rec(unit="tokens", max_size=20)),
    ),
    "mid_sentence_start": (
        Case(PROSE, {"strategy": "fixed", "unit": "chars", "max_size": 30}),
        Case(PROSE, {"strategy": "sentence", "unit": "chars", "max_size": 60}),
    ),
    "mid_sentence_end": (
        Case(PROSE, {"strategy": "fixed", "unit": "chars", "max_size": 30}),
        Case(PROSE, {"strategy": "sentence", "unit": "chars", "max_size": 60}),
    ),
    "split_procedure": (Case(PROCEDURE, md(max_size=100)), Case(PROCEDURE, md(max_size=250))),
    "split_list": (Case(BULLETS, md(max_size=100)), Case(BULLETS, md(max_size=400))),
    "split_table": (Case(TABLE, md(max_size=80)), Case(TABLE, md(max_size=400))),
    "split_code": (Case(CODE, md(max_size=120)), Case(CODE, md(max_size=600))),
    # fixed windows ignore structure: a window that ends right after the heading line leaves it there
    # (the segmenter, even for recursive, prices that cut out).
    "heading_at_end": (
        Case(HEADED, {"strategy": "fixed", "unit": "chars", "max_size": HEADED.index("\nBody")}),
        Case(HEADED, rec(max_size=60)),
    ),
    "undersized": (Case(SMALL_LAST, rec(max_size=100, min_size=50)), Case(SMALL_LAST, rec(max_size=100))),
    "high_overlap": (
        Case(PROSE, {"strategy": "fixed", "unit": "chars", "max_size": 30, "overlap": 20}),
        Case(PROSE, {"strategy": "fixed", "unit": "chars", "max_size": 30, "overlap": 5}),
    ),
    # a heading path longer than half the budget: embed_text's prefix is shortened
    "prefix_shortened": (
        Case(LONG_HEADING, md(max_size=60)),
        Case(LONG_HEADING, md(max_size=200)),
    ),
    "constraint_unmet": (
        Case(PROSE, rec(max_size=40), _keep(0, 75)),  # a kept span longer than the budget
        Case(PROSE, rec(max_size=40), _keep(25, 60)),  # one that fits is met
    ),
}


def findings_of(case: Case) -> list[Chunk]:
    if case.constraints:
        result = split_document(case.text, case.settings, constraints=case.constraints)
    else:
        result = run_and_check(case.text, case.settings)
    return result.chunks


def test_every_finding_code_has_cases() -> None:
    assert set(CASES) == set(FINDINGS), "add a triggering and a clean case for each new finding code"


@pytest.mark.parametrize("code", sorted(CASES))
def test_finding_is_triggered(code: str) -> None:
    chunks = findings_of(CASES[code][0])
    assert any(code in c.findings for c in chunks), [(c.text, c.findings) for c in chunks]


@pytest.mark.parametrize("code", sorted(CASES))
def test_finding_is_not_triggered(code: str) -> None:
    chunks = findings_of(CASES[code][1])
    assert not any(code in c.findings for c in chunks), [(c.text, c.findings) for c in chunks]


def test_over_budget_for_a_grapheme_larger_than_a_char_budget() -> None:
    """A cluster of five code points and a budget of two chars: kept whole and flagged, nothing cut."""
    text = "e\u0301\u0302\u0303\u0304 x"
    chunks = split_document(text, rec(max_size=2)).chunks
    assert chunks[0].text == "e\u0301\u0302\u0303\u0304" and "over_budget" in chunks[0].findings


def test_over_budget_never_for_words() -> None:
    """A word cannot exceed a words budget: a single long word is one word."""
    chunks = run_and_check("supercalifragilisticexpialidocious " * 3, rec(unit="words", max_size=1)).chunks
    assert len(chunks) == 3 and not any("over_budget" in c.findings for c in chunks)


def test_split_procedure_only_on_pieces_that_end_inside_it() -> None:
    chunks = findings_of(CASES["split_procedure"][0])
    assert [("split_procedure" in c.findings) for c in chunks] == [True] * (len(chunks) - 1) + [False]


def test_undersized_needs_more_than_one_chunk() -> None:
    chunks = run_and_check("Tiny.", rec(max_size=100, min_size=50)).chunks
    assert len(chunks) == 1 and chunks[0].findings == ()


def test_findings_have_meaning_and_fix() -> None:
    for code, (meaning, fix) in FINDINGS.items():
        assert meaning.endswith(".") and fix.endswith("."), code
        assert explain(code) == f"{meaning} {fix}"
    assert explain("nonsense") == "Unknown finding."


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=markdownish(),
    strategy=st.sampled_from(["fixed", "sentence", "recursive", "markdown"]),
    max_size=st.integers(10, 300),
    min_size=st.integers(0, 9),
)
def test_only_known_codes_and_each_once(text: str, strategy: str, max_size: int, min_size: int) -> None:
    config = {"strategy": strategy, "unit": "chars", "max_size": max_size, "min_size": min_size}
    for chunk in run_and_check(text, config, twice=False, tolerate=tolerated(strategy, "chars")).chunks:
        assert set(chunk.findings) <= set(FINDINGS)
        assert len(set(chunk.findings)) == len(chunk.findings)
