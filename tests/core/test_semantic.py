"""The ``semantic`` strategy: topic shifts become boundaries, the budget and the invariants still hold.

The model is wordllama's bundled one, loaded offline once per process; every chunking call goes
through ``check_chunks`` (conftest), which asserts the invariants of docs/design.md and determinism.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.semantic import gap_scores, gap_similarities, load_model, split_units

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"

BREAD = (
    "Sourdough bread starts with a starter of wild yeast and flour. Bakers feed the starter with water and "
    "flour every day. The dough rises slowly overnight in a cool kitchen. A hot oven gives the loaf a dark, "
    "crackling crust. Rye and whole wheat flour add a sour, nutty taste to the crumb. Let the bread cool "
    "before slicing it."
)
FOOTBALL = (
    "The goalkeeper dived to his left and saved the penalty kick. The home team pressed forward in the "
    "final minutes of the match. Their striker scored with a header from a corner. The referee added four "
    "minutes of stoppage time. Fans sang in the stadium until the final whistle. The league title will be "
    "decided next weekend."
)
VOLCANO = (
    "A volcano erupts when magma rises through cracks in the crust. Ash clouds can ground flights for days. "
    "Lava flows destroy roads and farms on the slopes. Geologists measure gas and ground swelling to warn "
    "nearby towns. Old eruptions left layers of basalt across the island."
)


def semantic(max_size: int, unit: str = "tokens", **extra: object) -> dict[str, object]:
    return {"strategy": "semantic", "unit": unit, "max_size": max_size, **extra}


# ---------------------------------------------------------------------------------------------
# Topic shifts


@pytest.mark.parametrize("separator", [" ", "\n", "\n\n"])
@pytest.mark.parametrize("max_size", [90, 110, 130])
def test_two_topics_split_between_them(check_chunks, separator, max_size):
    # Each topic fits the budget, both together do not: the split must fall on the topic change,
    # not at the furthest sentence that fits.
    text = BREAD + separator + FOOTBALL
    result = check_chunks(text, semantic(max_size))
    junction = len(BREAD) + len(separator)
    assert [c.start for c in result.chunks] == [0, junction]
    assert result.metadata["semantic"]["topic_shifts"] >= 1


def test_three_topics_in_one_paragraph(check_chunks):
    text = " ".join([BREAD, VOLCANO, FOOTBALL])
    result = check_chunks(text, semantic(100))
    starts = {c.start for c in result.chunks}
    assert len(BREAD) + 1 in starts
    assert len(BREAD) + 1 + len(VOLCANO) + 1 in starts


def test_sentence_strategy_does_not_find_the_topic_change(check_chunks):
    # The contrast that makes the strategy worth having: packing whole sentences ignores topics.
    text = BREAD + " " + FOOTBALL
    packed = check_chunks(text, {"strategy": "sentence", "unit": "tokens", "max_size": 110})
    assert len(BREAD) + 1 not in {c.start for c in packed.chunks}


def test_higher_threshold_marks_more_topic_shifts():
    text = " ".join([BREAD, VOLCANO, FOOTBALL])
    shifts = [
        split_document(text, semantic(100, threshold=threshold)).metadata["semantic"]["topic_shifts"]
        for threshold in (0.05, 0.2, 0.5, 0.9)
    ]
    assert shifts == sorted(shifts) and shifts[0] < shifts[-1]


# ---------------------------------------------------------------------------------------------
# Budget, spans, coverage, determinism


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLE.rglob("*") if p.suffix in (".md", ".txt"))


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
@pytest.mark.parametrize(
    ("unit", "max_size", "overlap"),
    [("tokens", 128, 0), ("chars", 700, 100), ("words", 90, 0), ("tokens", 40, 8)],
)
def test_sample_corpus_invariants(check_chunks, path, unit, max_size, overlap):
    text = path.read_text(encoding="utf-8")
    tolerate = ("token_overlap",) if unit == "tokens" and overlap else ()
    result = check_chunks(
        text, semantic(max_size, unit, overlap=overlap), path=str(path.relative_to(SAMPLE)), tolerate=tolerate
    )
    assert result.strategy == "semantic"
    # No text is over the budget; at 40 tokens a heading path and a lead-in can take up to half of it,
    # and then a code line that does not fit beside them is over_budget, saying so (a recorded finding).
    for chunk in result.chunks:
        if "over_budget" in chunk.findings:
            assert max_size == 40 and chunk.size <= max_size, chunk
            assert "beside the embed_text prefix" in chunk.over_budget_reason, chunk


def test_markdown_structure_is_kept(check_chunks):
    path = SAMPLE / "runbooks" / "database-failover.md"
    text = path.read_text(encoding="utf-8")
    result = check_chunks(text, semantic(256), path="runbooks/database-failover.md")
    assert not any("heading_at_end" in c.findings for c in result.chunks)
    headed = [c for c in result.chunks if c.section_path]
    assert headed, "section paths come from the Markdown headings"
    # Every chunk that starts a section starts at its heading.
    for chunk in result.chunks:
        assert not chunk.text.rstrip().endswith(tuple(f"\n{'#' * n}" for n in range(1, 7)))


@pytest.mark.parametrize("path", ["guide.md", "page.html"])
def test_code_blocks_are_not_embedded_and_stay_whole(check_chunks, path):
    code = "```python\n" + "\n".join(f"print({i})" for i in range(12)) + "\n```"
    text = f"# Setup\n\n{BREAD}\n\n{code}\n\n{FOOTBALL}\n"
    units = split_units(text, skip=[(text.index("```"), text.index("```", text.index("```") + 3) + 3)])
    assert not any("print(" in text[u.start : u.end] for u in units)
    result = check_chunks(text, semantic(120), path=path)
    assert result.chunks[0].section_path == ("Setup",)
    block_start = text.index("```")
    block_end = text.rindex("```") + 3
    assert any(c.start <= block_start and block_end <= c.end for c in result.chunks)


def test_giant_sentence_is_split_at_lines_then_words(check_chunks):
    lines = [" ".join(["lorem"] * 12) for _ in range(30)]
    text = "\n".join(lines)  # no sentence end anywhere, hard-wrapped
    result = check_chunks(text, semantic(60, "words"))
    for chunk in result.chunks[:-1]:
        assert text[chunk.end] == "\n", "a line break fits in every chunk, so no word split"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n ",
        "One sentence only.",
        "日本語の文です。次の文です！最後。",
        "👩‍👩‍👧‍👦 " * 50,
        "a" * 3000,
        "\ufeffHello there. General Kenobi.",
    ],
)
def test_odd_inputs(check_chunks, text):
    check_chunks(text, semantic(30))
    check_chunks(text, semantic(30, "chars"))


random_prose = st.lists(
    st.one_of(
        st.sampled_from(
            [
                BREAD,
                FOOTBALL,
                VOLCANO,
                "\n\n",
                "\n",
                "- item one\n- item two\n",
                "1. First.\n2. Next.\n",
                "e.g. Dr. Who met St. John. ",
                "日本語。",
                "👍🏽 ",
                "x" * 200,
            ]
        ),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
    ),
    max_size=10,
).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=random_prose,
    unit=st.sampled_from(["chars", "words", "tokens"]),
    max_size=st.integers(3, 200),
    overlap=st.integers(0, 30),
    markdown=st.booleans(),
)
def test_invariants_hold_on_generated_text(text, unit, max_size, overlap, markdown):
    from support.checks import run_and_check

    tolerate = {"token_overlap"} if unit == "tokens" else set()
    run_and_check(
        text,
        semantic(max_size, unit, overlap=min(overlap, max_size - 1)),
        "doc.md" if markdown else "doc.txt",
        tolerate=tolerate | {"bom_front_matter"},
    )


def test_same_chunks_in_another_process():
    text = " ".join([BREAD, VOLCANO, FOOTBALL]) * 3
    script = textwrap.dedent(f"""
        import json
        from chunkyard.chunking.api import chunk_document
        chunks = chunk_document({text!r}, {semantic(80)!r})
        print(json.dumps([[c.start, c.end] for c in chunks]))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    here = [[c.start, c.end] for c in split_document(text, semantic(80)).chunks]
    assert json.loads(out.stdout) == here


def test_threads_share_one_model_and_agree():
    texts = [" ".join([BREAD, VOLCANO, FOOTBALL][i % 3 :] + [BREAD]) for i in range(12)]
    expected = [split_document(t, semantic(90)).chunks for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda t: split_document(t, semantic(90)).chunks, texts))
    assert got == expected
    assert load_model() is load_model()


# ---------------------------------------------------------------------------------------------
# Pieces


def test_units_have_exact_trimmed_offsets():
    text = (
        "  Agenda:\n  1. Numbers\n  2. Backlog\n\nDr. Smith met J. Doe at 5 p.m. on Main St. today. "
        "It rained!  Then it stopped\nand the wrapped line continues.\n\n日本語です。次です。"
    )
    units = split_units(text)
    pieces = [text[u.start : u.end] for u in units]
    assert pieces == [
        "Agenda:",
        "1. Numbers",
        "2. Backlog",
        "Dr. Smith met J. Doe at 5 p.m. on Main St. today.",
        "It rained!",
        "Then it stopped\nand the wrapped line continues.",
        "日本語です。",
        "次です。",
    ]
    assert [u.gap for u in units] == [
        "",
        "line",
        "line",
        "paragraph",
        "sentence",
        "sentence",
        "paragraph",
        "sentence",
    ]


def test_gap_similarity_compares_windows():
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    vectors = np.array([a, a, a, b, b, b])
    sims = gap_similarities(vectors, 2)
    assert sims.shape == (5,)
    assert sims.argmin() == 2  # between the third and fourth vector
    assert sims[0] == pytest.approx(1.0)
    scores, cutoff = gap_scores(sims, ["sentence"] * 5, 0.3)
    assert scores[2] == max(scores) and scores[2] >= 61
    assert all(s <= 29 for i, s in enumerate(scores) if i != 2 and sims[i] >= cutoff)


def test_settings_are_validated():
    parsed = parse_settings({"strategy": "semantic"})
    assert parsed.threshold == 0.2 and parsed.window == 3
    for bad in ({"threshold": 0}, {"threshold": 1}, {"window": 0}, {"model": "x"}):
        with pytest.raises(ValidationError):
            parse_settings({"strategy": "semantic", **bad})
