"""retrieval_compare's corpus options: the named sets, the distractor sample, the peers' front matter,
and the summary over dumps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
compare = pytest.importorskip("retrieval_compare")
REPO = Path(__file__).resolve().parents[2]


def test_every_named_set_has_its_question_file():
    for name, (corpus, include, questions) in compare.SETS.items():
        assert corpus.name == name and include and questions.is_file(), name


def test_a_peer_given_the_text_after_the_front_matter_still_indexes_the_document():
    text = "---\ntitle: T\n---\n\nBody one.\n\nBody two.\n"

    def halves(body: str):
        middle = len(body) // 2
        return [(0, middle, body[:middle]), (middle, len(body), body[middle:])]

    kept = compare.peer(lambda: halves)("a.md", text, "")
    stripped = compare.peer(lambda: halves, strip_front_matter=True)("a.md", text, "")
    assert kept[0][0] == 0 and "title" in kept[0][2]
    body = len("---\ntitle: T\n---\n")  # the front matter ends with its closing line's newline
    assert stripped[0][0] == body and stripped[-1][1] == len(text)
    assert all(text[start:end] == chunk for start, end, chunk in stripped)
    assert all("title" not in chunk for _, _, chunk in stripped)


def test_the_distractor_sample_keeps_the_cited_documents_and_is_seeded():
    documents = {f"d{i:03d}.md": (f"text {i}", "") for i in range(200)}
    one = compare.keep_distractors(documents, {"d007.md", "d150.md"}, 20, seed=1)
    assert {"d007.md", "d150.md"} <= set(one) and len(one) == 22
    assert one == compare.keep_distractors(documents, {"d007.md", "d150.md"}, 20, seed=1)
    assert set(one) != set(compare.keep_distractors(documents, {"d007.md", "d150.md"}, 20, seed=2))
    assert len(compare.keep_distractors(documents, {"d007.md"}, 500, seed=1)) == 200


def test_the_summary_names_the_best_peer_and_says_whether_chunkyard_is_ahead():
    def entry(name: str, recall: list[float], iou: list[float]) -> dict:
        return {"name": name, "chunks": 1, "scores": {"bm25@5": {"recall": recall, "iou": iou}}}

    dump = {
        "set": "x",
        "max_size": 400,
        "retrievers": ["bm25"],
        "entries": [
            entry("chunkyard markdown", [0.5] * 10, [0.2] * 10),
            entry("chunkyard recursive", [1.0] * 10, [1.0] * 10),  # chunkyard's own rows are no peer
            entry("peer a", [0.6] * 10, [0.1] * 10),
            entry("peer b", [0.4] * 10, [0.15] * 10),
        ],
    }
    recall, iou = compare.summary_rows([dump], 5)[2:]
    assert (
        "| recall | 0.500 | peer a 0.600 | +0.100 [+0.100, +0.100] | **not met** (1 of 2 peers ahead"
        in recall
    )
    assert "interval excludes 0" in recall
    assert "| IoU | 0.200 | peer b 0.150 | -0.050 [-0.050, -0.050] | met |" in iou


def test_a_dump_of_the_sample_corpus_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "kb.json"
    corpus = ["--corpus", str(REPO / "examples" / "kb")]
    corpus += [arg for glob in ("**/*.md", "**/*.html", "**/*.txt") for arg in ("--include", glob)]
    questions = ["--questions", str(REPO / "eval" / "kb-questions.jsonl"), "--k", "5", "--retriever", "bm25"]
    assert compare.main([*corpus, *questions, "--only", "TextSplitter", "--dump", str(dump)]) == 0
    data = json.loads(dump.read_text())
    assert data["entries"][0]["name"] == "chunkyard markdown"
    asked = (REPO / "eval" / "kb-questions.jsonl").read_text().strip().splitlines()
    assert len(data["entries"][0]["scores"]["bm25@5"]["recall"]) == len(asked)
    capsys.readouterr()
    assert compare.main(["--summary", str(dump), "--k", "5"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| kb | 1000 | bm25 |")]
    assert len(rows) == 2  # recall and IoU, named by the corpus folder (--corpus overrides the set)


def test_the_pooled_summary_weighs_every_question_of_every_corpus_once():
    def dump(name: str, ours: list[float], theirs: list[float]) -> dict:
        scores = lambda values: {"bm25@5": {"recall": values, "iou": values}}  # noqa: E731
        entries = [
            {"name": "chunkyard markdown", "chunks": 1, "scores": scores(ours)},
            {"name": "peer", "chunks": 1, "scores": scores(theirs)},
        ]
        return {"set": name, "max_size": 400, "retrievers": ["bm25"], "entries": entries}

    rows = compare.pooled_rows([dump("a", [0.0] * 10, [1.0] * 10), dump("b", [0.5] * 30, [0.5] * 30)], 5)
    recall = rows[2]
    assert "| 400 | bm25 | recall | a (10), b (30) | 0.375 | peer 0.625 | +0.250 [" in recall
