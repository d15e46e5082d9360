"""The held-out question sets of the shared corpora (eval/README.md): well formed, every reference an
exact passage of its corpus file, found once, outside the front matter, and drawn from the seeded
sample that ``eval/sample_passages.py`` prints (so nobody chose the passages by hand)."""

from __future__ import annotations

import importlib.util
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from chunkyard.chunking.documents import Skipped, read_document
from chunkyard.chunking.evaluation.questions import load_questions, locate_questions
from chunkyard.chunking.markdown import front_matter_span

REPO = Path(__file__).resolve().parents[2]

# question file stem -> the sampler's arguments that drew its passages (eval/README.md)
SETS = {
    "hugo-docs": ["--seed", "1", "--n", "120", "--exclude", "LICENSE.md"],
    "k8s-enhancements": ["--seed", "1", "--n", "80"],
}


def sampler():
    spec = importlib.util.spec_from_file_location("sample_passages", REPO / "eval" / "sample_passages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(name: str) -> list[dict]:
    path = REPO / "eval" / f"{name}-questions.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(SETS))
def test_question_set_is_well_formed(name):
    items = rows(name)
    assert len(items) >= 60
    assert len({item["id"] for item in items}) == len(items)
    assert len({item["question"] for item in items}) == len(items)
    assert len(load_questions(REPO / "eval" / f"{name}-questions.jsonl").questions) == len(items)
    for item in items:
        assert item["question"].strip().endswith("?"), item["id"]
        for ref in item["references"]:
            assert 80 <= len(ref["text"]) <= 600, item["id"]
            assert not ref["doc_id"].startswith("/") and ".." not in Path(ref["doc_id"]).parts


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(SETS))
def test_every_reference_is_an_exact_passage_of_its_corpus_file(corpora_dir, name):
    corpus = corpora_dir / name
    if not corpus.is_dir():
        pytest.skip(f"{name} corpus not found at {corpus}")
    texts = {}
    for item in rows(name):
        for ref in item["references"]:
            path = corpus / ref["doc_id"]
            assert path.is_file(), f"{item['id']}: no file {ref['doc_id']} in {corpus}"
            text = texts.setdefault(ref["doc_id"], path.read_text(encoding="utf-8"))
            assert text.count(ref["text"]) == 1, f"{item['id']}: not exactly once in {ref['doc_id']}"
            front = front_matter_span(text)
            assert front is None or text.index(ref["text"]) >= front[1], f"{item['id']}: in front matter"

    # and located at the same place in the text a run extracts (what retrieval_compare scores against)
    def text_of(doc_id: str) -> str | None:
        document = read_document(corpus / doc_id, doc_id)
        return None if isinstance(document, Skipped) else document.text

    question_set = load_questions(REPO / "eval" / f"{name}-questions.jsonl")
    located = locate_questions(question_set, text_of, name)
    for question, item in zip(located, rows(name), strict=True):
        (span,) = question.spans
        assert texts[span.doc_id][span.start : span.end] == item["references"][0]["text"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(SETS))
def test_every_reference_comes_from_the_seeded_sample(corpora_dir, name):
    corpus = corpora_dir / name
    if not corpus.is_dir():
        pytest.skip(f"{name} corpus not found at {corpus}")
    out = io.StringIO()
    with redirect_stdout(out):
        assert sampler().main(["--corpus", str(corpus), *SETS[name]]) == 0
    sampled = {
        (row["doc_id"], row["text"]) for row in map(json.loads, out.getvalue().splitlines()) if row["text"]
    }
    references = [(ref["doc_id"], ref["text"]) for item in rows(name) for ref in item["references"]]
    assert set(references) <= sampled
    assert len(set(references)) == len(references)  # one question per sampled passage


def test_prose_blocks_leave_out_front_matter_code_comments_tables_and_shortcodes():
    blocks = sampler().prose_blocks
    prose = "This sentence is long enough to be a candidate passage for a question, it has a period."
    text = "\n".join(
        [
            "---",
            f"title: {prose}",
            "---",
            "",
            "# Heading",
            "",
            "```",
            prose.replace("This", "Code"),
            "```",
            "",
            "<!--",
            prose.replace("This", "Comment"),
            "-->",
            "",
            "| a | b |",
            "|---|---|",
            f"| {prose} | x |",
            "",
            "{{< note >}}",
            prose.replace("This", "Shortcode"),
            "{{< /note >}}",
            "",
            "short.",
            "",
            prose,
            "",
        ]
    )
    assert blocks(text) == [("Heading", prose)]
