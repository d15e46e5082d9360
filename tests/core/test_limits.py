"""Issue 20: what one document may cost. Inflation and text limits for DOCX and PDF, the per-document
deadline, and a failure of any exception type isolated to its document."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from chunkyard.chunking.config import LimitsConfig, load_config_text
from chunkyard.chunking.deadline import DocumentTimeout, deadline_at
from chunkyard.chunking.documents import Document, Skipped, SourceFile, discover, document_from_bytes
from chunkyard.chunking.pipeline import chunk_files

from support.attack_corpus import docx_bytes, pdf_bytes


def test_a_docx_that_inflates_past_the_limit_is_refused_before_it_is_inflated() -> None:
    """A 61 KB DOCX holding 20 MB of paragraphs took 40 s and 476 MB; the zip directory says so first."""
    raw = docx_bytes(inflate_mb=20)
    assert len(raw) < 200_000
    started = time.perf_counter()
    result = document_from_bytes(raw, "bomb.docx")
    assert time.perf_counter() - started < 5  # milliseconds; minutes when inflated
    assert isinstance(result, Skipped) and result.reason.startswith("DOCX inflates to 20.")
    assert result.reason.endswith("MB of XML, over limits.max_inflated_mb (16 MB); not read")
    assert isinstance(document_from_bytes(docx_bytes(["Fine."]), "ok.docx"), Document)


def test_the_docx_limit_counts_xml_members_and_all_members_against_max_file_mb() -> None:
    raw = docx_bytes(inflate_mb=3)
    reason = document_from_bytes(raw, "a.docx", LimitsConfig(max_inflated_mb=100, max_file_mb=2)).reason
    assert reason.startswith("DOCX inflates to 3.") and reason.endswith(
        "MB, over limits.max_file_mb (2 MB); not read"
    )


def test_a_pdf_whose_content_streams_decode_past_the_limit_is_refused_before_any_text_is_extracted() -> None:
    """20 pages × 1 MB content streams in a 26 KB PDF took 27.6 s on main (pypdf parses them for text)."""
    raw = pdf_bytes(20, stream_mb=1)
    assert len(raw) < 100_000
    result = document_from_bytes(raw, "bomb.pdf")
    assert isinstance(result, Skipped)
    assert result.reason.startswith("page content streams of more than 16.")
    assert result.reason.endswith("are over limits.max_inflated_mb (16 MB)")
    small = document_from_bytes(pdf_bytes(2, text="Small PDF"), "ok.pdf")
    assert isinstance(small, Document) and "Small PDF 2." in small.text


def test_a_pdf_over_the_text_limit_is_refused() -> None:
    raw = pdf_bytes(3, text="x" * 400)
    result = document_from_bytes(raw, "a.pdf", LimitsConfig(max_text_mb=0.0005))
    assert isinstance(result, Skipped) and result.reason.startswith("extracted text of more than 0.0")
    assert "is over limits.max_text_mb (0.0005)" in result.reason


def test_limits_are_settable_in_the_config_and_refused_when_not_positive() -> None:
    from chunkyard.chunking.errors import ConfigError

    base = "name: kb\nversion: 1\nsource: {path: .}\n"
    config = load_config_text(base + "limits: {max_inflated_mb: 2, document_seconds: 5}\n")
    assert config.model.limits.max_inflated_mb == 2 and config.model.limits.document_seconds == 5
    assert config.model.limits.max_file_mb == 256  # the documented defaults
    with pytest.raises(ConfigError) as caught:
        load_config_text(base + "limits:\n  document_seconds: 0\n")
    [issue] = caught.value.issues
    assert issue.line == 5 and issue.field == "limits.document_seconds"
    # Limits are not part of the config hash: they decide whether a document is used, not its chunks.
    assert config.hash == load_config_text(base).hash


# -- the deadline ------------------------------------------------------------------------------


def _spin_forever() -> None:
    while True:
        try:
            sum(range(100))
        except Exception:  # a library's broad handler does not swallow the timeout
            pass


@pytest.mark.parametrize("in_thread", [False, True])
def test_a_deadline_abandons_python_code_wherever_it_is_and_leaves_nothing_behind(in_thread: bool) -> None:
    outcome: list[str] = []

    def job() -> None:
        started = time.monotonic()
        try:
            with deadline_at(time.monotonic() + 0.3):
                _spin_forever()
        except DocumentTimeout:
            outcome.append(f"abandoned after {time.monotonic() - started:.1f}")
        for _ in range(200):  # many short blocks after it: no stray DocumentTimeout
            with deadline_at(time.monotonic() + 0.01):
                pass
        time.sleep(0.3)
        outcome.append("went on")

    if in_thread:
        worker = threading.Thread(target=job)
        worker.start()
        worker.join(10)
    else:
        job()
    assert len(outcome) == 2 and outcome[0].startswith("abandoned after 0.") and outcome[1] == "went on", (
        outcome
    )


def test_a_deadline_earlier_than_the_watchdogs_next_wake_still_wakes_it() -> None:
    """The watchdog is woken only for a deadline before its next wake-up: a short one added while it
    sleeps towards a long one (another thread's document) is still kept."""
    holding, release = threading.Event(), threading.Event()

    def long_document() -> None:
        with deadline_at(time.monotonic() + 600):
            holding.set()
            release.wait(30)

    other = threading.Thread(target=long_document)
    other.start()
    try:
        assert holding.wait(10)
        time.sleep(0.05)  # the watchdog is asleep until the 600 s deadline
        started = time.monotonic()
        with pytest.raises(DocumentTimeout):
            with deadline_at(started + 0.2):
                while time.monotonic() - started < 20:  # not woken: no timeout until the long one's
                    sum(range(100))
    finally:
        release.set()
        other.join(10)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_timeout_lost_in_a_destructor_is_raised_again() -> None:
    """An exception delivered inside ``__del__`` (or a gc callback: hypothesis installs one) is printed as
    ignored and lost; the watchdog raises it again until the block is left."""

    class Slow:
        def __del__(self) -> None:
            sum(range(20_000))  # half the time is spent here, where a raise is lost

    def churn() -> None:
        while True:
            Slow()
            sum(range(20_000))

    started = time.monotonic()
    with pytest.raises(DocumentTimeout):
        with deadline_at(time.monotonic() + 0.2):
            churn()
    assert time.monotonic() - started < 30


def _config(tmp_path: Path, limits: str = "") -> object:
    return load_config_text(
        f"name: kb\nversion: 1\nsource: {{path: {tmp_path}}}\nchunker: {{strategy: auto, "
        f"unit: chars, max_size: 400}}\n{limits}",
        tmp_path / "config.yaml",
    )


def _files(root: Path) -> list[SourceFile]:
    return [item for item in discover(root, ["**/*"], []) if isinstance(item, SourceFile)]


def test_a_document_past_document_seconds_is_abandoned_and_the_batch_goes_on(tmp_path: Path) -> None:
    """A DOCX under the inflation limit that python-docx needs far longer than the limit for (6 MB of
    paragraphs) is abandoned; the document after it in the batch is chunked, the batch's tables are whole."""
    (tmp_path / "a-slow.docx").write_bytes(docx_bytes(inflate_mb=6))
    (tmp_path / "b-fine.md").write_text("# Fine\n\nA fine document.\n", encoding="utf-8")
    config = _config(tmp_path, "limits: {document_seconds: 1}\n")
    started = time.monotonic()
    result = chunk_files(config, _files(tmp_path), {})
    assert time.monotonic() - started < 10  # the DOCX alone takes 15–30 s here
    assert result.skipped == [
        Skipped(
            "a-slow.docx",
            "abandoned: still being read or chunked after 1 s (limits.document_seconds)",
            keep_previous=True,
        )
    ]
    assert result.chunked == ["b-fine.md"] and result.documents.num_rows == 1 and result.chunks.num_rows >= 1


def test_an_exception_of_any_type_while_chunking_is_the_documents_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# B\n\ntext\n", encoding="utf-8")
    from chunkyard.chunking import pipeline

    real = pipeline.split_document

    def flaky(text, settings, doc_id, **kwargs):
        if doc_id == "a.md":
            raise MemoryError("no memory for this one")
        return real(text, settings, doc_id, **kwargs)

    monkeypatch.setattr(pipeline, "split_document", flaky)
    result = chunk_files(_config(tmp_path), _files(tmp_path), {})
    assert result.skipped == [
        Skipped("a.md", "chunking failed: MemoryError: no memory for this one", keep_previous=True)
    ]
    assert result.chunked == ["b.md"]

    def unreadable(*args, **kwargs):
        raise LookupError("unknown encoding: rot13")

    monkeypatch.setattr(pipeline, "read_document", unreadable)
    result = chunk_files(_config(tmp_path), _files(tmp_path), {})
    assert [s.reason for s in result.skipped] == ["failed: LookupError: unknown encoding: rot13"] * 2
