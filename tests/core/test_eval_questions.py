"""Question sets: validation with line numbers, and locating references in extracted text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkyard.chunking.config import load_config
from chunkyard.chunking.evaluation.questions import (
    QuestionSetError,
    Span,
    find_passage,
    load_questions,
    locate_questions,
    parse_questions,
    source_text_reader,
)

REPO = Path(__file__).resolve().parents[2]


def line(**item) -> str:
    return json.dumps(item)


GOOD = line(question="What?", references=[{"doc_id": "a.md", "text": "alpha"}])


def issues_of(text: str) -> list[str]:
    with pytest.raises(QuestionSetError) as caught:
        parse_questions(text, "q.jsonl")
    return [str(issue) for issue in caught.value.issues]


def test_valid_file_with_blank_lines_and_both_reference_kinds():
    text = "\n".join(
        [
            GOOD,
            "",
            line(id="two", question="Where?", references=[{"doc_id": "b.md", "start": 3, "end": 9}]),
        ]
    )
    qs = parse_questions(text, "q.jsonl")
    assert [q.id for q in qs.questions] == ["line-1", "two"]
    assert [q.line for q in qs.questions] == [1, 3]
    assert qs.questions[1].references[0].start == 3
    assert qs.doc_ids == {"a.md", "b.md"}


def test_every_bad_line_is_reported_with_its_number():
    text = "\n".join(
        [
            GOOD,  # 1 ok
            "{not json",  # 2
            "[1, 2]",  # 3
            line(question="", references=[{"doc_id": "a.md", "text": "x"}]),  # 4
            line(question="Q", references=[]),  # 5
            line(question="Q", references=[{"doc_id": "a.md"}]),  # 6
            line(question="Q", references=[{"doc_id": "a.md", "start": 9, "end": 3}]),  # 7
            line(question="Q", references=[{"doc_id": "a.md", "text": "x", "start": 1, "end": 2}]),  # 8
            line(question="Q", refs=[]),  # 9
            line(question="Q", references=[{"doc": "a.md", "text": "x"}]),  # 10
            line(question="Q", references=[{"doc_id": "a.md", "start": "1", "end": 2}]),  # 11
        ]
    )
    found = issues_of(text)
    numbers = [int(issue.split(":")[1]) for issue in found]
    assert 1 not in numbers
    for number in range(2, 12):
        assert number in numbers, f"line {number} not reported: {found}"
    assert any("q.jsonl:2: not valid JSON" in issue for issue in found)
    assert any("q.jsonl:3: expected a JSON object" in issue for issue in found)
    assert any("q.jsonl:7:" in issue and "start < end" in issue for issue in found)
    assert any("q.jsonl:9:" in issue and "unknown key 'refs'" in issue for issue in found)


def test_duplicate_ids_name_the_first_line():
    found = issues_of(
        "\n".join(
            [
                line(id="x", question="A", references=[{"doc_id": "a", "text": "t"}]),
                line(id="x", question="B", references=[{"doc_id": "a", "text": "t"}]),
            ]
        )
    )
    assert found == ["q.jsonl:2: duplicate id 'x' (first on line 1)"]


def test_empty_file_is_an_error():
    assert issues_of("\n\n") == ["q.jsonl: no questions in the file"]


def test_missing_file(tmp_path):
    with pytest.raises(QuestionSetError, match="no such question file"):
        load_questions(tmp_path / "absent.jsonl")


def test_find_passage_verbatim_then_across_line_breaks():
    document = "The quick brown\nfox jumps over\n  the lazy dog."
    assert find_passage(document, "brown\nfox") == [(10, 19)]
    start, end = find_passage(document, "quick brown fox jumps over the lazy")[0]
    assert document[start:end] == "quick brown\nfox jumps over\n  the lazy"
    assert find_passage(document, "cat") == []


def test_locate_reports_not_found_ambiguous_missing_doc_and_bounds():
    documents = {"a.md": "one two three. one two three. four five six.", "b.md": "short"}
    text = "\n".join(
        [
            line(question="ok", references=[{"doc_id": "a.md", "text": "four  five\nsix"}]),  # 1 found
            line(question="nf", references=[{"doc_id": "a.md", "text": "seven"}]),  # 2
            line(question="amb", references=[{"doc_id": "a.md", "text": "one two"}]),  # 3
            line(question="doc", references=[{"doc_id": "c.md", "text": "x"}]),  # 4
            line(question="oob", references=[{"doc_id": "b.md", "start": 0, "end": 50}]),  # 5
            line(question="span", references=[{"doc_id": "b.md", "start": 1, "end": 4}]),  # 6 ok
        ]
    )
    qs = parse_questions(text, "q.jsonl")
    with pytest.raises(QuestionSetError) as caught:
        locate_questions(qs, documents.get, "dataset X")
    found = [str(issue) for issue in caught.value.issues]
    assert len(found) == 4
    assert found[0].startswith("q.jsonl:2: reference 1: passage not found in a.md (dataset X)")
    assert found[1].startswith(
        "q.jsonl:3: reference 1: passage is ambiguous: found 2 times in a.md (at offsets 0, 15)"
    )
    assert found[2] == "q.jsonl:4: reference 1: no document 'c.md' in dataset X"
    assert found[3] == "q.jsonl:5: reference 1: end 50 is past the end of b.md (5 characters)"

    good = parse_questions("\n".join(text.splitlines()[i] for i in (0, 5)), "q.jsonl")
    located = locate_questions(good, documents.get, "dataset X")
    assert located[0].spans == (Span("a.md", 30, 43),)
    assert documents["a.md"][30:43] == "four five six"
    assert located[1].spans == (Span("b.md", 1, 4),)


def test_bundled_kb_questions_locate_in_the_sample_corpus():
    config = load_config(REPO / "config" / "default.yaml")
    qs = load_questions(REPO / "eval" / "kb-questions.jsonl")
    assert len(qs.questions) >= 10
    located = locate_questions(qs, source_text_reader(config.source_dir, config.is_included), "examples/kb")
    assert len(located) == len(qs.questions)


@pytest.mark.corpus
def test_bundled_rust_book_questions_locate_in_the_corpus(corpora_dir):
    config = load_config(REPO / "config" / "eval" / "recursive-200-0.yaml")
    if not config.source_dir.is_dir():
        pytest.skip(f"rust-book corpus not found at {config.source_dir}")
    qs = load_questions(REPO / "eval" / "rust-book-questions.jsonl")
    assert len(qs.questions) >= 40
    located = locate_questions(qs, source_text_reader(config.source_dir, config.is_included), "rust-book")
    assert all(span.doc_id.startswith("src/") for q in located for span in q.spans)
