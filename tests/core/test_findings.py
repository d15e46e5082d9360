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
# The Debian Reference as pypdf extracts it (its word gaps are drawn by glyph positioning), and spaced.
GLUED_SPACED = (
    "When moving to a new release etc, you should consider to perform a clean installation of new system "
    "even though Debian is upgradable as described below. This provides you a chance to remove garbages "
    "collected and exposes you to the best combination of latest packages."
)
GLUED = "\n".join(line.replace(" ", "") for line in GLUED_SPACED.split(". "))
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
    # text extracted from a PDF whose word gaps were lost; the same words with their spaces are clean
    "words_run_together": (
        Case(GLUED, {"strategy": "document", "unit": "chars", "max_size": 1000}),
        Case(GLUED_SPACED, {"strategy": "document", "unit": "chars", "max_size": 1000}),
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


# -- what the rules ask of the kernels (chunking/findings.py, Method) -----------------------------------


def test_the_class_table_is_str_isspace_and_the_named_characters() -> None:
    """Every code point, the astral planes too (the table stops before them: no class there)."""
    from chunkyard.chunking import findings

    table = findings._class_table()
    for code in range(0x110000):
        char = chr(code)
        classes = table[code] if code < len(table) else 0
        assert bool(classes & findings._INLINE_SPACE) == (char.isspace() and char != "\n"), hex(code)
        assert bool(classes & findings._LINE_FEED) == (char == "\n"), hex(code)
        assert bool(classes & findings._ATX_FIRST) == (char in " #"), hex(code)
    # The finding's other white-space test (re's \S, as str.strip) agrees with str.isspace.
    assert all((findings._NON_SPACE.match(chr(c)) is None) == chr(c).isspace() for c in range(0x110000))


@settings(max_examples=300, deadline=None)
@given(line=st.text(st.sampled_from(" \t#x=é"), max_size=12))
def test_an_atx_line_begins_with_a_character_of_its_class(line: str) -> None:
    """heading_at_end asks ATX_LAST_LINE only of last lines whose first character is of _ATX_FIRST."""
    from chunkyard.chunking import findings

    if findings._ATX_LINE.search(line):
        assert line[0] in " #"


@pytest.mark.parametrize("mask", [1, 2, 4, 3])
@pytest.mark.parametrize("over", [True, False])
@pytest.mark.parametrize("backward", [True, False])
def test_the_python_scan_pattern_is_the_table(mask: int, over: bool, backward: bool) -> None:
    """The Python twin of scan runs over a pattern built from the table: the same characters."""
    from chunkyard.chunking import findings

    table = findings._class_table()
    run = findings._run_pattern(table, mask, over, backward)
    for code in [*range(0x3100), 0xFFFF, 0x10000, 0x1F600, 0x10FFFF]:
        passes = bool(code < len(table) and table[code] & mask) == over
        assert (run.fullmatch(chr(code)) is not None) == passes, hex(code)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=markdownish(),
    strategy=st.sampled_from(["fixed", "sentence", "recursive", "markdown"]),
    max_size=st.integers(10, 300),
    overlap=st.integers(0, 9),
)
def test_findings_are_the_rules_asked_of_each_chunk(
    text: str, strategy: str, max_size: int, overlap: int
) -> None:
    """The rules of the Method, asked chunk by chunk with plain string operations, give the same
    sentence and heading findings as the kernels' answers (the kernels in use: C when built)."""
    import bisect

    from chunkyard.chunking import findings
    from chunkyard.chunking.config import parse_settings
    from chunkyard.chunking.packer import Packer
    from chunkyard.chunking.strategies import get_strategy
    from chunkyard.chunking.units import make_meter

    config = parse_settings({"strategy": strategy, "unit": "chars", "max_size": max_size, "overlap": overlap})
    layout = get_strategy(strategy)(text, config, None)
    spans = Packer(text, layout.plan, make_meter(text, "chars"), max_size, overlap, 0).spans()
    got = findings.check_spans(text, spans, layout, 0)
    doc_start, last = layout.plan.start, len(spans) - 1
    for index, span in enumerate(spans):
        start, end = span.start, span.end
        if index:
            pos = start
            while pos > doc_start and text[pos - 1].isspace() and text[pos - 1] != "\n":
                pos -= 1
            clean = (
                pos <= doc_start
                or text[pos - 1] == "\n"
                or (
                    pos < start < len(text)
                    and findings._PHRASE_LETTER.match(text, pos - 1)
                    and findings._PHRASE_LETTER.match(text, start)
                )
                or findings._SENTENCE_END.search(text[max(doc_start, pos - 4) : pos])
            )
            assert ("mid_sentence_start" in got[index]) == (not clean), (index, span)
        if index != last:
            newline = text.find("\n", end, end + 200)
            clean = (newline != -1 and not text[end:newline].strip()) or findings._SENTENCE_END.search(
                text[max(0, end - 4) : end]
            )
            if not clean and "mid_sentence_end" not in got[index]:  # only the Thai/Lao phrase gap is left
                assert findings._PHRASE_LETTER.match(text, end - 1), (index, span)
            if clean:
                assert "mid_sentence_end" not in got[index], (index, span)
            starts = layout.heading_starts
            if starts:
                i = bisect.bisect_right(starts, end) - 1
                heading = False
                if i >= 0 and start < starts[i] < end:
                    line_end = text.find("\n", starts[i], end)
                    underline = "" if line_end == -1 else text[line_end:end].strip()
                    heading = not underline or set(underline) <= set("=-")
            else:
                tail = text[max(start, end - 300) : end]
                heading = bool(findings._ATX_LINE.search(tail)) and end - start > len(
                    tail.rsplit("\n", 1)[-1]
                )
            assert ("heading_at_end" in got[index]) == heading, (index, span)


def test_words_run_together_counts_long_lower_case_runs_only() -> None:
    from chunkyard.chunking.findings import _glued

    assert _glued(GLUED) and not _glued(GLUED_SPACED)
    # identifiers put a capital every few letters; one long compound in prose is not a quarter of it
    assert not _glued("Call RegisterDynamicBackgroundWorker and BackgroundWorkerInitializeConnection. " * 5)
    assert not _glued(GLUED_SPACED + " Donaudampfschifffahrtsgesellschaft.")
    assert not _glued("movingtoanewrelease")  # fewer than 40 glued letters: too little to judge


def test_words_run_together_only_for_extracted_documents() -> None:
    # Markdown and code have long lower-case runs of their own (URLs, log lines); the finding is about a
    # text layer, which only the ``document`` strategy (PDF, DOCX) reads.
    for strategy in ("markdown", "recursive", "sentence", "fixed"):
        chunks = split_document(GLUED, {"strategy": strategy, "unit": "chars", "max_size": 1000}).chunks
        assert not any("words_run_together" in chunk.findings for chunk in chunks), strategy


def test_a_pdf_whose_text_layer_lost_its_word_gaps_says_so() -> None:
    """A PDF that draws its word gaps by ``TJ`` offsets in a font whose code 32 is wide: pypdf's text
    has no spaces, and every chunk of it has the finding; the same page with narrow spaces has none."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, NumberObject

    from chunkyard.chunking.documents import document_from_bytes

    def pdf(space_width: int) -> bytes:
        writer = PdfWriter()
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/FirstChar"): NumberObject(32),
                NameObject("/LastChar"): NumberObject(126),
                NameObject("/Widths"): ArrayObject([NumberObject(space_width)] + [NumberObject(500)] * 94),
            }
        )
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        lines = [sentence.split() for sentence in GLUED_SPACED.split(". ")]
        shown = " ".join(f"[{' -250 '.join(f'({word})' for word in words)}] TJ 0 -14 Td" for words in lines)
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 10 Tf 72 720 Td {shown} ET\n".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
        buffer = io.BytesIO()
        writer.write(buffer)
        return buffer.getvalue()

    settings = {"strategy": "document", "unit": "chars", "max_size": 120}
    glued = document_from_bytes(pdf(1000), "glued.pdf")
    assert "whenmovingtoanewrelease" in glued.text.lower()
    chunks = run_and_check(glued.text, settings, "glued.pdf").chunks
    assert len(chunks) > 1 and all("words_run_together" in chunk.findings for chunk in chunks)
    spaced = document_from_bytes(pdf(278), "spaced.pdf")
    assert "When moving to a new release" in spaced.text
    assert not any("words_run_together" in c.findings for c in run_and_check(spaced.text, settings).chunks)
