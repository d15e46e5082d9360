"""Review logic without Qt: offsets code points ↔ UTF-16, the index, queues, progress, statistics."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from chunkyard.chunking.errors import ChunkyardError, DatasetError
from chunkyard.chunking.ledger import Ledger, ledger_path
from chunkyard.chunking.review import (
    OffsetMap,
    ReviewIndex,
    ReviewPace,
    display_text,
    elide_path,
    format_duration,
)

from support.parts import only_part, reseal
from support.review_fixtures import EMOJI_DOC, REPO, build_dataset


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("review"))


@pytest.fixture
def dataset(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "fixture-kb"
    shutil.copytree(built, copy)
    return copy


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ascii",
        EMOJI_DOC,
        "中文日本語한국어",
        "😀",
        "a😀b😀😀c",
        "👨‍👩‍👧 family",
        "🇳🇴🇯🇵",
        "e\u0301 combining",
        "\U0001f600" * 50 + "x",
        "lone \ud800 surrogate",
    ],
)
def test_offset_map_matches_utf16_on_emoji_and_cjk(text: str) -> None:
    offsets = OffsetMap(text)
    for position in range(len(text) + 1):
        utf16 = offsets.to_utf16(position)
        assert utf16 == _utf16(text[:position]) if "\ud800" not in text else utf16 == position
        assert offsets.to_code_point(utf16) == position
    assert offsets.utf16_length == (len(text) if "\ud800" in text else _utf16(text))


def test_offset_map_inside_a_surrogate_pair_rounds_to_the_character() -> None:
    offsets = OffsetMap("a😀b")
    assert [offsets.to_code_point(p) for p in range(5)] == [0, 1, 1, 2, 3]
    assert offsets.to_utf16(-5) == 0 and offsets.to_utf16(99) == 4  # clamped, never out of range


def test_offset_map_random_text() -> None:
    rng = random.Random(4)
    alphabet = ["a", " ", "\n", "é", "中", "😀", "🏕", "\u200d", "\ufe0f", "𠀀"]
    for _ in range(50):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        offsets = OffsetMap(text)
        for position in rng.sample(range(len(text) + 1), min(20, len(text) + 1)):
            assert offsets.to_utf16(position) == _utf16(text[:position])


def test_display_text_keeps_positions() -> None:
    assert display_text("a\r\nb") == "a \nb"
    assert len(display_text("x\r\n" * 5)) == len("x\r\n" * 5)


def test_index_reads_ids_and_offsets_and_orders_rows(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    assert index.doc_ids == sorted(index.doc_ids)
    assert index.n_chunks == int(np.diff(index.doc_first).sum())
    for doc in range(index.n_documents):
        rows = index.doc_rows(doc)
        assert list(index.chunk_index[rows.start : rows.stop]) == list(range(len(rows)))
        text = index.document_text(doc)
        details = index.chunk_details(doc)
        assert len(details) == len(rows)
        assert all(int(index.end[row]) <= len(text) for row in rows)
    assert index.config_reviewer == "test-reviewer"
    assert [b.max_size for b in index.budgets] == [420]
    counts, edges = index.size_histogram(10)
    assert counts.sum() == index.n_chunks and edges[-1] >= 420


def test_queues_progress_and_next_suspicious(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    suspicious = np.flatnonzero(index.suspicious)
    assert len(suspicious) > 3
    assert index.next_suspicious(None) == suspicious[0]
    assert index.next_suspicious(int(suspicious[0])) == suspicious[1]
    assert index.next_suspicious(int(suspicious[1]), -1) == suspicious[0]
    assert index.next_suspicious(int(suspicious[-1])) is None
    assert index.progress_text() == f"0 of {index.n_chunks:,} reviewed · 0 flagged"
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        ledger.flag(index.target(int(suspicious[0])), "mid_sentence", reviewer="ann")
        ledger.mark_ok(index.target(int(suspicious[1])), reviewer="ann")
        ledger.flag(index.target(int(suspicious[2]), boundary=True), "split_procedure", reviewer="bob")
        index.reload_state(ledger)
    assert index.progress() == (3, index.n_chunks, 2)
    assert np.flatnonzero(index.queue_mask("Flagged")).tolist() == [suspicious[0], suspicious[2]]
    assert np.flatnonzero(index.queue_mask("OK")).tolist() == [suspicious[1]]
    assert index.queue_mask("Unreviewed").sum() == index.n_chunks - 3
    assert index.state(int(suspicious[2])).boundary_reasons == ["split_procedure"]
    stats = index.document_stats()
    assert stats["flagged"].sum() == 2 and stats["reviewed"].sum() == 3
    assert stats["suspicious"].sum() == len(suspicious)
    assert sum(index.finding_counts().values()) >= len(suspicious)


def test_chunk_at_prefers_the_selected_chunk_in_an_overlap(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    doc = 0
    rows = index.doc_rows(doc)
    for row in rows:
        middle = (int(index.start[row]) + int(index.end[row])) // 2
        assert index.start[index.chunk_at(doc, middle)] <= middle < index.end[index.chunk_at(doc, middle)]
    overlap = next(r for r in rows[1:] if index.start[r] < index.end[r - 1])
    position = int(index.start[overlap])
    assert index.chunk_at(doc, position, prefer=overlap - 1) == overlap - 1
    assert index.chunk_at(doc, position) == overlap


def test_malformed_parquet_is_a_clear_error(dataset: Path) -> None:
    snapshot = next(dataset.glob("v1/0*"))
    chunks = only_part(snapshot, "chunks.parquet")
    chunks.chmod(0o644)
    chunks.write_bytes(b"PAR1 not really parquet PAR1")
    with pytest.raises(DatasetError, match="cannot read"):
        ReviewIndex.load(dataset)


def test_offsets_outside_the_document_are_refused(dataset: Path) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    snapshot = next(dataset.glob("v1/0*"))
    path = only_part(snapshot, "chunks.parquet")
    table = pq.read_table(path)
    end = pc.add(table.column("end"), 10_000)
    table = table.set_column(table.schema.get_field_index("end"), "end", end)
    path.chmod(0o644)
    pq.write_table(table, path)
    reseal(snapshot)
    with pytest.raises(ChunkyardError, match="outside its document"):
        ReviewIndex.load(dataset)


def test_review_modules_import_neither_qt_nor_prefect() -> None:
    script = textwrap.dedent("""
        import sys
        import chunkyard.chunking.ledger, chunkyard.chunking.review
        print(",".join(sorted(n for n in sys.modules
                             if n.split(".")[0] in ("PySide6", "prefect") or n.startswith(("chunkyard.gui", "chunkyard.flows")))))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_elide_path_drops_top_folders_first_and_keeps_the_beginning_of_names() -> None:
    width = len  # one unit per character
    kep = "keps/sig-node/2400-node-swap/README.md"
    assert elide_path(kep, 100, width) == kep
    assert elide_path(kep, 30, width) == "…/2400-node-swap/README.md"
    assert elide_path(kep, 20, width) == "…/2400-node-swap/RE…"  # README says less than its folder
    assert elide_path("handbook/12-returns-and-refunds.md", 18, width) == "…/12-returns-and-…"
    assert elide_path("12-returns-and-refunds.md", 10, width) == "12-return…"
    assert elide_path("a/b", 0, width) == "…/…"
    assert elide_path("guides/README.md", 10, width) == "guides/RE…"
    ids = [
        "keps/sig-api-machinery/5073-declarative-validation-with-validation-gen/README.md",
        "keps/sig-api-machinery/4020-unknown-version-interoperability-proxy/README.md",
        "keps/sig-apps/1847-autoremove-statefulset-pvcs/README.md",
        "keps/sig-node/2400-node-swap/README.md",
    ]
    for room in (12, 20, 40):
        shown = [elide_path(doc_id, room, width) for doc_id in ids]
        assert all(len(text) <= room for text in shown)
        assert len(set(shown)) == len(ids), shown  # told apart at every width
        # The leading number in view wherever folders were dropped.
        assert all(text.lstrip("…/")[:4].isdigit() for text in shown if text.startswith("…")), shown


def test_next_to_review_passes_over_decided_chunks_and_resume_picks_up_after_the_last(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    suspicious = [int(r) for r in np.flatnonzero(index.suspicious)]
    assert index.resume_row([], "ann") == suspicious[0]  # nothing decided: the first chunk to review
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        ledger.flag(index.target(suspicious[1]), "mid_sentence", reviewer="ann")
        ledger.mark_ok(index.target(suspicious[2]), reviewer="ann")
        ledger.mark_ok(index.target(suspicious[0]), reviewer="bob")
        index.reload_state(ledger)
        events = ledger.events()
    # N from the first suspicious chunk skips the flagged and the OK one; P from beyond comes back past them.
    assert index.next_to_review(suspicious[0]) == suspicious[3]
    assert index.next_to_review(suspicious[3], -1) is None  # suspicious[0..2] are all decided
    assert index.next_suspicious(suspicious[0]) == suspicious[1]  # the plain order is unchanged
    # ann stopped at suspicious[2]: she resumes at the next chunk to review after it; bob after his.
    assert index.resume_row(events, "ann") == suspicious[3]
    assert index.resume_row(events, "bob") == suspicious[3]
    assert index.resume_row(events, "carol") == suspicious[3]  # no decisions of hers: after anyone's latest
    assert index.row_of_chunk_id(index.chunk_id(5)) == 5 and index.row_of_chunk_id("nope") is None


def test_finding_queues_and_their_progress(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    code, count = next(iter(index.finding_counts().items()))
    queue = f"finding:{code}"
    assert (queue, count) == index.finding_queues()[0]
    rows = [int(r) for r in np.flatnonzero(index.finding_mask(code))]
    assert len(rows) == count and all(code in index.findings(r) for r in rows)
    assert index.queue_progress(queue) == (0, count)
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        ledger.mark_ok(index.target(rows[0]), reviewer="ann")
        index.reload_state(ledger)
    assert index.queue_progress(queue) == (1, count)
    assert index.next_row(index.queue_mask(queue), None) == rows[1]  # decided ones leave the queue
    assert not index.finding_mask("no_such_finding").any()


def test_review_pace_counts_recent_decisions_and_skips_pauses() -> None:
    pace = ReviewPace(window=3, pause_s=60)
    assert pace.per_minute() is None and pace.time_left_s(10) is None
    pace.record(0)
    pace.record(1)
    assert pace.per_minute() is None  # two quick keys are no pace yet
    pace.times.clear()
    for t in (0, 10, 20):
        pace.record(t)
    assert pace.per_minute() == 6.0 and pace.time_left_s(12) == 120.0
    pace.record(1000)  # a long pause counts as 60 s, not 980
    assert pace.per_minute() == 3 * 60 / (10 + 10 + 60)
    assert format_duration(20) == "under a minute" and format_duration(125 * 60) == "2 h 05 min"


def test_section_titles_and_bulk_masks_follow_the_rows(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    titles = index.section_titles()
    for doc in range(index.n_documents):
        details = index.chunk_details(doc)
        for row, detail in zip(index.doc_rows(doc), details, strict=True):
            assert titles[row] == (detail.section_path[-1] if detail.section_path else "")
    row = next(r for r in range(index.n_chunks) if titles[r] and index.findings(r))
    assert index.same_section_mask(row)[row] and all(
        titles[r] == titles[row] for r in np.flatnonzero(index.same_section_mask(row))
    )
    same = np.flatnonzero(index.same_findings_mask(row))
    assert all(set(index.findings(row)) <= set(index.findings(int(r))) for r in same)
    assert np.flatnonzero(index.range_mask(7, 3)).tolist() == [3, 4, 5, 6, 7]


def test_question_box_ranks_by_bm25_and_dense_like_the_evaluation(dataset: Path) -> None:
    from chunkyard.chunking.evaluation.retrievers import BM25Retriever
    from chunkyard.chunking.review import QuestionBox

    index = ReviewIndex.load(dataset)
    box = QuestionBox(index)
    answers = box.ask("How many days do I have to return a tent?", 4)
    assert set(answers) == {"bm25", "dense"}
    texts = box.texts()
    details = [d.embed_text for doc in range(index.n_documents) for d in index.chunk_details(doc)]
    assert texts == details  # embed_text, in row order
    expected = BM25Retriever(texts).search(["How many days do I have to return a tent?"], 4)[0]
    assert [a.row for a in answers["bm25"]] == expected
    for ranked in answers.values():
        assert [a.rank for a in ranked] == [1, 2, 3, 4]
        assert [a.score for a in ranked] == sorted((a.score for a in ranked), reverse=True)
    assert index.doc_ids[int(index.chunk_doc[answers["dense"][0].row])] == "handbook/returns-and-refunds.md"
    assert box.ask("   ", 4) == {"bm25": [], "dense": []}


def test_text_search_and_go_to(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    hits = np.flatnonzero(index.text_matches("TENTS"))
    assert len(hits) > 0
    for row in range(index.n_chunks):
        doc = int(index.chunk_doc[row])
        text = index.document_text(doc)[int(index.start[row]) : int(index.end[row])]
        assert ("tents" in text.lower()) == (row in hits)
    assert not index.text_matches("").any()
    doc = index.doc_number("notes/emoji.md")
    # notes/emoji.md is one chunk (its small sections share it), chunk 0; the next document has more.
    assert index.go_to("0", doc) == (doc, index.row_of(doc, 0), "")
    assert index.go_to("notes/emoji.md#0") == (doc, index.row_of(doc, 0), "")
    assert index.go_to("emoji 0") == (doc, index.row_of(doc, 0), "")
    other = next(d for d in range(len(index.doc_ids)) if index.row_of(d, 2) is not None)
    assert index.go_to("2", other) == (other, index.row_of(other, 2), "")
    assert index.go_to(f"{index.doc_ids[other]}#1") == (other, index.row_of(other, 1), "")
    assert index.go_to("emoji") == (doc, None, "")
    assert index.go_to("notes/emoji.md#99")[2].startswith("notes/emoji.md has no chunk 99 (chunks 0–")
    assert index.go_to("nope.md") == (None, None, "no document 'nope.md'")
    assert index.go_to(".md")[2].startswith("4 documents match '.md'")
    assert index.go_to("3")[2].startswith("open a document first")


def test_two_reviewers_disagreements_are_a_queue_with_each_verdict(dataset: Path) -> None:
    index = ReviewIndex.load(dataset)
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        ledger.flag(index.target(3), "mid_sentence", reviewer="ann")
        ledger.mark_ok(index.target(3), reviewer="bob")  # the combined state says OK: bob's is the latest
        ledger.flag(index.target(5), "split_table", reviewer="ann")
        ledger.flag(index.target(5), "split_table", reviewer="bob")  # they agree
        ledger.flag(index.target(7), "too_small", reviewer="ann")
        ledger.flag(index.target(7), "other", reviewer="bob")
        undone = ledger.mark_ok(index.target(9), reviewer="bob")
        ledger.flag(index.target(9), "other", reviewer="ann")
        ledger.retract(undone, reviewer="bob")  # bob took his back: no disagreement left
        index.reload_state(ledger)
        assert index.state(3).verdict == "ok"
        assert np.flatnonzero(index.queue_mask("Disagreements")).tolist() == [3, 7]
        assert index.verdicts_by_reviewer[3] == {"ann": "flagged: mid_sentence", "bob": "OK"}
        assert index.verdicts_by_reviewer[7] == {"ann": "flagged: too_small", "bob": "flagged: other"}
        assert index.queue_progress("Disagreements") == (2, 2)
        ledger.flag(index.target(3), "mid_sentence", reviewer="bob")  # bob comes round: they agree on a flag
        index.reload_state(ledger, [int(index.chunk_doc[3])])
    assert np.flatnonzero(index.disagree).tolist() == [7] and 3 not in index.verdicts_by_reviewer
