"""The speed benchmark's own checks work: a splitter that breaks exactness or the budget shows it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
speed = pytest.importorskip("speed")


def test_chunkyard_rows_are_exact_and_within_budget(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "# Title\n\n" + "Words in a sentence. " * 300 + "\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    texts = [p.read_text() for p in speed.markdown_files(tmp_path)]
    entries = [e for e in speed.run_group("chars", texts, repeats=1) if e.name.startswith("chunkyard")]
    assert [e.name for e in entries] == ["chunkyard recursive", "chunkyard recursive, count_tokens: false"]
    for entry in entries:
        assert entry.chunks > 5 and entry.exact == 1.0 and entry.over == 0.0 and len(entry.times) == 1


def test_a_splitter_that_rewrites_text_or_overflows_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def sloppy(text: str):
        return [(0, 5, text[:5].upper()), (5, len(text), text[5:])]

    monkeypatch.setattr(speed, "group_entries", lambda group: [speed.Entry("sloppy", lambda: sloppy)])
    [entry] = speed.run_group("chars", ["hello world " * 200], repeats=1)
    assert entry.chunks == 2 and entry.exact == 0.5 and entry.over == 0.5


def test_the_fixed_group_times_one_chunk_calls_against_chunkyard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speed, "FIXED_CALLS", 3)
    lines = speed.run_fixed(repeats=1)
    cells = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("| chunk")
    ]
    rows = {name: rest for name, *rest in cells}
    assert list(rows) == [
        "chunkyard recursive",
        "chunkyard recursive, count_tokens: false",
        "chunkyard markdown",
        "chunkyard markdown, count_tokens: false",
    ]
    for name in ("chunkyard recursive, count_tokens: false", "chunkyard markdown, count_tokens: false"):
        assert rows[name][1] == rows[name][3] == "1.00"  # the base of its kind's ratios
    assert all(float(cell) > 0 for cells in rows.values() for cell in cells[0::2])
    assert lines[-3].startswith("| floor: the result of one chunk built in Python |")  # the last row


def test_the_fixed_group_refuses_a_document_of_several_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speed, "FIXED_CALLS", 2)
    monkeypatch.setitem(speed.SHORT_DOCUMENTS, "long page", "A sentence of words. " * 100)
    with pytest.raises(ValueError, match="not one chunk per call: chunkyard recursive on the long page"):
        speed.run_fixed(repeats=1)


def test_hostile_documents_are_the_promised_sizes() -> None:
    docs = speed.hostile_documents()
    assert len(docs["10 MB without a newline"]) == 10_000_000 and "\n" not in docs["10 MB without a newline"]
    assert docs["100,000 one-line paragraphs"].count("\n\n") == 99_999
    assert 0.9e6 < len(docs["1 MB table"]) < 1.1e6
    assert docs["2,000,000 blank lines"].count("\n") == 2_000_001
    assert docs["1,000,000 stops"] == "." * 1_000_000


def test_phases_add_up_to_split_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    phases = pytest.importorskip("phases")
    # Headings and a title: each chunk's embed_text prefix is reserved from the budget, as in a run.
    (tmp_path / "a.md").write_text(
        "---\ntitle: A page\n---\n# Title\n\n" + "Words in a sentence. " * 400 + "\n\n## Part\n\n- an item\n"
    )
    assert (
        phases.main(
            [str(tmp_path), "--unit", "chars", "--max-size", "200", "--overlap", "0", "--repeats", "1"]
        )
        == 0
    )
    table = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert {"layout", "meter", "reserve", "pack", "findings", "split_document"} <= set(rows)


def test_phases_refuse_to_measure_other_chunks_than_split_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    phases = pytest.importorskip("phases")
    (tmp_path / "a.md").write_text("# Title\n\n" + "Words in a sentence. " * 400 + "\n")
    # A packer without the reserve (as the phases once ran it) packs otherwise than split_document.
    monkeypatch.setattr(phases, "Reserve", lambda *args, **kwargs: None)
    with pytest.raises(SystemExit, match="no longer measure it"):
        phases.main(
            [
                str(tmp_path),
                "--strategy",
                "markdown",
                "--unit",
                "chars",
                "--max-size",
                "200",
                "--overlap",
                "0",
                "--repeats",
                "1",
            ]
        )


def test_the_reviewer_benchmark_dataset_has_the_current_schema(tmp_path: Path) -> None:
    """reviewer_open.py writes its rows by hand: a column added to the schema must be added there too."""
    from chunkyard.chunking.dataset import Snapshot

    reviewer_open = pytest.importorskip("reviewer_open")
    dataset = reviewer_open.generate(tmp_path, n_chunks=600, n_docs=6)
    snapshot = Snapshot.open(dataset)
    assert snapshot.chunks().num_rows == 600 and snapshot.documents().num_rows == 6


def test_retrieval_comparison_scores_every_splitter_against_the_same_questions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the bundled sample and its questions: chunkyard's rows (and any installed peer's) are scored, and
    chunkyard markdown is the reference the others are compared with."""
    compare = pytest.importorskip("retrieval_compare")
    repo = Path(__file__).resolve().parents[2]
    assert (
        compare.main(
            [
                "--corpus",
                str(repo / "examples" / "kb"),
                "--include",
                "**/*.md",
                "--include",
                "**/*.html",
                "--include",
                "**/*.txt",
                "--questions",
                str(repo / "eval" / "kb-questions.jsonl"),
                "--max-size",
                "600",
                "--k",
                "1,3",
                "--retriever",
                "bm25",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "#### bm25, top 1" in out and "#### bm25, top 3" in out
    rows = {
        line.split("|")[1].strip(): line.split("|")
        for line in out.splitlines()
        if line.startswith("| chunkyard")
    }
    assert set(rows) >= {
        "chunkyard markdown",
        "chunkyard markdown, text only",
        "chunkyard markdown, budget: text",
        "chunkyard recursive",
    }
    recall_at_3 = float(rows["chunkyard markdown"][5])
    assert 0.0 < recall_at_3 <= 1.0  # the questions are answerable from the sample's chunks
    assert rows["chunkyard markdown"][10].strip() == "—"  # the reference row has no difference to itself


def test_retrieval_comparison_only_runs_the_named_splitters_and_the_reference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    compare = pytest.importorskip("retrieval_compare")
    repo = Path(__file__).resolve().parents[2]
    corpus = ["--corpus", str(repo / "examples" / "kb")]
    corpus += [arg for glob in ("**/*.md", "**/*.html", "**/*.txt") for arg in ("--include", glob)]
    questions = ["--questions", str(repo / "eval" / "kb-questions.jsonl"), "--k", "3", "--retriever", "bm25"]
    assert compare.main([*corpus, *questions, "--only", "chunkyard recursive,nothing by this name"]) == 0
    names = {
        line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")
    }
    assert names - {"splitter"} == {
        "chunkyard markdown",
        "chunkyard recursive",
        "chunkyard recursive, text only",
    }


def test_a_paired_interval_brackets_a_known_difference() -> None:
    compare = pytest.importorskip("retrieval_compare")
    mean, low, high = compare.paired_interval([0.0] * 40, [0.5] * 20 + [0.0] * 20)
    assert mean == pytest.approx(0.25) and low < 0.25 < high and low > 0.05
    assert compare.paired_interval([0.3] * 10, [0.3] * 10) == (0.0, 0.0, 0.0)


def test_embed_budget_benchmark_counts_embed_texts_over_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embed_budget = pytest.importorskip("embed_budget")
    corpus = tmp_path / "kb"
    corpus.mkdir()
    heading = "# A heading long enough to weigh on the budget of every chunk under it\n\n"
    (corpus / "a-rather-long-document-title.md").write_text(heading + "Words in a sentence here. " * 200)
    monkeypatch.setattr(embed_budget, "CORPORA", tmp_path)
    old = embed_budget.run("kb", 300, "chars", "text")
    new = embed_budget.run("kb", 300, "chars", "embed_text")
    assert old["over"] > 0 and old["worst"] > 300
    assert new["over"] == 0 and new["worst"] <= 300 and new["chunks"] > old["chunks"]


def test_a_corpus_folder_without_markdown_is_an_error_naming_it(tmp_path: Path) -> None:
    """A missing corpus (``..`` of a git worktree is not the checkout's) stops a benchmark, never times 0 files."""
    corpora = pytest.importorskip("corpora")
    (tmp_path / "notes.txt").write_text("no Markdown here")
    with pytest.raises(SystemExit, match=str(tmp_path)):
        corpora.markdown_files(tmp_path)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "a.md").write_text("# hidden")
    with pytest.raises(SystemExit, match="CHUNKYARD_CORPORA"):
        corpora.markdown_files(tmp_path)
    (tmp_path / "b.md").write_text("# shown")
    assert corpora.markdown_files(tmp_path) == [tmp_path / "b.md"]


def test_the_counted_pass_chunks_the_corpus_it_is_given(tmp_path: Path) -> None:
    """``instructions.py``'s pass (the part callgrind counts) chunks every document of the folder, as
    ``split_document`` does; a failed run under valgrind is an error naming the interpreter and corpus."""
    instructions = pytest.importorskip("instructions")
    from chunkyard.chunking.api import split_document
    from chunkyard.chunking.config import parse_settings

    texts = ["# A\n\n" + "Some words here. " * 100, "plain text\n" * 10]
    for k, text in enumerate(texts):
        (tmp_path / f"{k}.md").write_text(text, encoding="utf-8")
    settings = parse_settings(
        {
            "front_matter": "keep",
            "strategy": "markdown",
            "unit": "chars",
            "max_size": 1000,
            "overlap": 0,
            "count_tokens": False,
        }
    )
    want = sum(len(split_document(text, settings).chunks) for text in texts)
    assert want > 2
    assert instructions.one_pass(str(tmp_path), "markdown") == want
    if instructions.shutil.which("valgrind") is not None:
        with pytest.raises(SystemExit, match="no-such-corpus"):
            instructions.instructions(sys.executable, str(tmp_path / "no-such-corpus"), "markdown")


def test_the_output_check_finds_a_changed_chunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``fingerprints.py --compare`` passes on the output it saved and fails naming the file and
    configuration whose chunks changed."""
    fingerprints = pytest.importorskip("fingerprints")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\n" + "Some words here. " * 200, encoding="utf-8")
    (corpus / "b.md").write_text("plain text\n" * 10, encoding="utf-8")
    saved = tmp_path / "saved"
    assert fingerprints.main(["--save", str(saved), "--corpora", str(corpus)]) == 0
    assert fingerprints.main(["--compare", str(saved), "--corpora", str(corpus)]) == 0
    assert "0 differ" in capsys.readouterr().out
    (corpus / "a.md").write_text("# A\n\n" + "Some words here. " * 201, encoding="utf-8")
    assert fingerprints.main(["--compare", str(saved), "--corpora", str(corpus)]) == 1
    out = capsys.readouterr().out
    assert f"differs: {corpus.name}/a.md|markdown-1000" in out
    assert "b.md" not in out and f"{len(fingerprints.CONFIGURATIONS)} differ" in out


def _tarball(path: Path, members: dict[str, bytes]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_an_unseen_corpus_takes_only_the_markdown_under_its_folder(tmp_path: Path) -> None:
    unseen = pytest.importorskip("unseen_corpora")
    members = {
        "package/dist/docs/a.md": b"# A\n",
        "package/dist/docs/deep/b.md": b"# B\n",
        "package/dist/docs/c.js": b"code",
        "package/README.md": b"outside the folder",
        "package/dist/docs/../../../escape.md": b"never written",
    }
    tarball = _tarball(tmp_path / "pkg-1.0.0.tgz", members)
    dest = tmp_path / "out"
    assert unseen._extract(tarball, "package/dist/docs", dest) == 2
    found = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert found == ["pkg-1.0.0/package/dist/docs/a.md", "pkg-1.0.0/package/dist/docs/deep/b.md"]
    assert not (tmp_path / "escape.md").exists()


def test_an_unseen_corpus_tarball_that_is_not_the_registrys_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64
    import hashlib
    import subprocess

    unseen = pytest.importorskip("unseen_corpora")
    tarball = _tarball(tmp_path / "pkg-1.0.0.tgz", {"package/a.md": b"# A\n"})
    good = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    answers = {"pack": "pkg-1.0.0.tgz\n"}

    def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        out = answers["pack"] if argv[1] == "pack" else f'"{answers["integrity"]}"'
        return subprocess.CompletedProcess(argv, 0, stdout=out)

    monkeypatch.setattr(unseen.subprocess, "run", run)
    answers["integrity"] = good
    assert unseen._fetch("pkg@1.0.0", tmp_path) == tarball
    answers["integrity"] = "sha512-" + base64.b64encode(hashlib.sha512(b"other").digest()).decode()
    with pytest.raises(SystemExit, match="not the registry's integrity"):
        unseen._fetch("pkg@1.0.0", tmp_path)


def test_the_html_group_reads_the_folder_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "a.md").write_text("# A\n\ntext\n")
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "p.html").write_text("<html><body><h1>Title</h1><p>Some text.</p></body></html>")
    corpora, html = speed.corpora_of(tmp_path / "md", pages)
    assert list(corpora) == ["md"] and len(html) == 1 and "Some text." in html[0]
    assert speed.corpora_of(tmp_path / "md")[1] == []
    with pytest.raises(SystemExit, match="no HTML files under"):
        speed.corpora_of(tmp_path / "md", tmp_path / "md")
