"""Reading documents: strict decoding, specific skip reasons, discovery with globs, symlinks, races."""

from __future__ import annotations

import codecs
import os
import threading
import time
from pathlib import Path

import pytest

from chunkyard.chunking import documents as documents_module
from chunkyard.chunking.documents import (
    Document,
    Skipped,
    SourceFile,
    decode_text,
    detect_format,
    discover,
    document_from_bytes,
    read_document,
)

# ---------------------------------------------------------------------------------------------
# Decoding


def test_plain_utf8() -> None:
    assert decode_text("héllo 👍🏽 日本".encode()) == "héllo 👍🏽 日本"


def test_utf8_bom_is_removed() -> None:
    assert decode_text(codecs.BOM_UTF8 + b"# Title\n") == "# Title\n"
    document = document_from_bytes(codecs.BOM_UTF8 + b"# Title\n", "a.md")
    assert isinstance(document, Document) and document.text == "# Title\n"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_utf16_and_utf32_with_bom(encoding: str) -> None:
    bom = {
        "utf-16-le": codecs.BOM_UTF16_LE,
        "utf-16-be": codecs.BOM_UTF16_BE,
        "utf-32-le": codecs.BOM_UTF32_LE,
        "utf-32-be": codecs.BOM_UTF32_BE,
    }[encoding]
    text = "Grüße 👍🏽\nzweite Zeile\n"
    assert decode_text(bom + text.encode(encoding)) == text


def test_utf16_without_bom_is_binary() -> None:
    """No BOM: UTF-16 is not guessed; its NUL bytes make it binary."""
    document = document_from_bytes("plain ascii".encode("utf-16-le"), "a.txt")
    assert document == Skipped("a.txt", "binary file (NUL bytes)")


@pytest.mark.parametrize(
    ("raw", "offset"),
    [
        (b"\xff", 0),
        (b"abc\xffdef", 3),
        ("héllo".encode() + b"\xc3", 6),  # truncated two-byte sequence at the end
        ("日本".encode() + b"\xe6\x97" + b"x", 6),  # truncated three-byte sequence
        (b"caf\xe9 latin-1", 3),
        (b"ok\xed\xa0\x80", 2),  # an encoded surrogate is not UTF-8
    ],
)
def test_invalid_utf8_names_the_byte(raw: bytes, offset: int) -> None:
    assert document_from_bytes(raw, "bad.md") == Skipped("bad.md", f"not valid UTF-8 at byte {offset}")


def test_invalid_utf16_after_bom_names_the_byte() -> None:
    raw = codecs.BOM_UTF16_LE + "ab".encode("utf-16-le") + b"\x00\xd8"  # lone high surrogate at the end
    result = document_from_bytes(raw, "x.txt")
    assert isinstance(result, Skipped) and result.reason.startswith("not valid UTF-16-LE at byte ")


@pytest.mark.parametrize("raw", [b"\x00", b"text\x00more", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"])
def test_nul_bytes_mean_binary(raw: bytes) -> None:
    assert document_from_bytes(raw, "f.md") == Skipped("f.md", "binary file (NUL bytes)")


def test_nul_byte_late_in_a_large_file_is_still_binary() -> None:
    raw = b"a" * 20_000 + b"\x00"
    assert document_from_bytes(raw, "f.txt") == Skipped("f.txt", "binary file (NUL bytes)")


def test_empty_file_is_skipped() -> None:
    assert document_from_bytes(b"", "e.md") == Skipped("e.md", "empty file")


@pytest.mark.parametrize("raw", [b" ", b"\n\n\t \r\n", "\u3000\u2003".encode(), codecs.BOM_UTF8 + b"  \n"])
def test_whitespace_only_is_skipped(raw: bytes) -> None:
    result = document_from_bytes(raw, "w.md")
    assert isinstance(result, Skipped) and result.reason.startswith("no text")


def test_document_fields() -> None:
    import hashlib

    raw = "# T\n\nBody 👍🏽\n".encode()
    document = document_from_bytes(raw, "guides/t.md")
    assert isinstance(document, Document)
    assert (document.doc_id, document.path, document.format) == ("guides/t.md", "guides/t.md", "markdown")
    assert document.sha256 == hashlib.sha256(raw).hexdigest() and document.n_bytes == len(raw)


@pytest.mark.parametrize(
    ("doc_id", "fmt"),
    [
        ("a.md", "markdown"),
        ("b/C.MARKDOWN", "markdown"),
        ("x.html", "html"),
        ("x.htm", "html"),
        ("tool.py", "code"),
        ("notes.txt", "text"),
        ("README", "text"),
    ],
)
def test_detect_format(doc_id: str, fmt: str) -> None:
    assert detect_format(doc_id) == fmt


# ---------------------------------------------------------------------------------------------
# Discovery


def make_tree(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        path.write_bytes(content)


def found(root: Path, include: list[str], exclude: list[str] | None = None) -> list[str]:
    return [item.doc_id for item in discover(root, include, exclude or []) if isinstance(item, SourceFile)]


def test_discovery_with_include_and_exclude_globs(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "a.md": "a",
            "b.txt": "b",
            "guides/c.md": "c",
            "guides/deep/d.md": "d",
            "drafts/e.md": "e",
            "drafts/sub/f.md": "f",
            "guides/drafts/g.md": "g",
            "img.png": b"\x89PNG",
        },
    )
    assert found(tmp_path, ["**/*.md"]) == [
        "a.md",
        "drafts/e.md",
        "drafts/sub/f.md",
        "guides/c.md",
        "guides/deep/d.md",
        "guides/drafts/g.md",
    ]
    assert found(tmp_path, ["**/*.md"], ["drafts/**"]) == [
        "a.md",
        "guides/c.md",
        "guides/deep/d.md",
        "guides/drafts/g.md",
    ]
    assert found(tmp_path, ["*.md"]) == ["a.md"]  # "*" does not cross folders
    assert found(tmp_path, ["guides/**"], ["**/drafts/**"]) == ["guides/c.md", "guides/deep/d.md"]
    assert found(tmp_path, ["**/*.md", "**/*.txt"], ["**/deep/*"]) == [
        "a.md",
        "b.txt",
        "drafts/e.md",
        "drafts/sub/f.md",
        "guides/c.md",
        "guides/drafts/g.md",
    ]


def test_discovery_is_sorted_and_posix(tmp_path: Path) -> None:
    make_tree(tmp_path, {"z.md": "z", "B/a.md": "a", "a/b.md": "b", "a.md": "a"})
    # Folder by folder, entries in code point order: deterministic on every platform.
    assert found(tmp_path, ["**/*"]) == ["B/a.md", "a/b.md", "a.md", "z.md"]


def test_hidden_folders_and_files_are_skipped(tmp_path: Path) -> None:
    make_tree(
        tmp_path, {".git/config.md": "x", ".hidden.md": "x", "docs/.cache/a.md": "x", "docs/ok.md": "ok"}
    )
    assert found(tmp_path, ["**/*"]) == ["docs/ok.md"]


def test_skip_dirs_are_not_entered(tmp_path: Path) -> None:
    make_tree(tmp_path, {"docs/a.md": "a", "datasets/x.md": "x"})
    items = discover(tmp_path, ["**/*"], [], skip_dirs=(tmp_path / "datasets",))
    assert [i.doc_id for i in items] == ["docs/a.md"]


def _discover_with_timeout(root: Path, seconds: float = 10) -> list[SourceFile | Skipped]:
    result: list[SourceFile | Skipped] = []
    worker = threading.Thread(target=lambda: result.extend(discover(root, ["**/*"], [])), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "discovery did not finish: it follows a symlink loop"
    return result


def test_directory_symlink_loop_does_not_hang(tmp_path: Path) -> None:
    make_tree(tmp_path, {"docs/a.md": "a"})
    os.symlink(tmp_path / "docs", tmp_path / "docs" / "loop")  # docs/loop -> docs
    os.symlink(tmp_path, tmp_path / "docs" / "up")  # docs/up -> root
    items = _discover_with_timeout(tmp_path)
    assert [i.doc_id for i in items if isinstance(i, SourceFile)] == ["docs/a.md"]


def test_file_symlink_loop_is_skipped_with_a_reason(tmp_path: Path) -> None:
    make_tree(tmp_path, {"ok.md": "fine"})
    os.symlink(tmp_path / "b.md", tmp_path / "a.md")
    os.symlink(tmp_path / "a.md", tmp_path / "b.md")
    items = _discover_with_timeout(tmp_path)
    assert Skipped("a.md", "symlink loop") in items and Skipped("b.md", "symlink loop") in items
    assert [i.doc_id for i in items if isinstance(i, SourceFile)] == ["ok.md"]


def test_dangling_symlink_is_skipped_as_broken(tmp_path: Path) -> None:
    os.symlink(tmp_path / "gone.md", tmp_path / "link.md")
    items = list(discover(tmp_path, ["**/*"], []))
    assert items == [Skipped("link.md", "broken symbolic link (its target does not exist)")]


def test_symlinked_file_is_read(tmp_path: Path) -> None:
    make_tree(tmp_path, {"real/a.md": "# A\n"})
    os.symlink(tmp_path / "real" / "a.md", tmp_path / "alias.md")
    assert found(tmp_path, ["*.md"]) == ["alias.md"]


def test_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    assert list(discover(tmp_path, ["**/*"], [])) == [Skipped("pipe.md", "not a regular file")]


def test_unreadable_file_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.md"
    path.write_text("# secret\n")
    if os.geteuid() != 0:
        path.chmod(0)
        try:
            assert read_document(path, "secret.md") == Skipped(
                "secret.md", "permission denied", keep_previous=True
            )
        finally:
            path.chmod(0o644)

    # As root chmod 000 does not stop reading, so make the read itself fail the way it would.
    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(documents_module, "_read_checked", lambda path, identity, limits: denied(path))
    assert read_document(path, "secret.md") == Skipped("secret.md", "permission denied", keep_previous=True)


def test_unreadable_folder_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(tmp_path, {"open/a.md": "a", "locked/b.md": "b"})
    real_scandir = os.scandir

    def scandir(path: os.PathLike[str] | str) -> object:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    items = list(discover(tmp_path, ["**/*"], []))
    assert ("open/a.md", tmp_path / "open" / "a.md", 1) in [
        (i.doc_id, i.path, i.size) for i in items if isinstance(i, SourceFile)
    ]
    assert Skipped("locked", "unreadable folder: Permission denied", keep_previous=True, folder=True) in items


def test_file_deleted_between_discovery_and_reading(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.md": "# A\n", "b.md": "# B\n"})
    items = [i for i in discover(tmp_path, ["**/*"], []) if isinstance(i, SourceFile)]
    (tmp_path / "a.md").unlink()
    assert read_document(items[0].path, items[0].doc_id) == Skipped(
        "a.md", "file vanished before it could be read"
    )
    assert isinstance(read_document(items[1].path, items[1].doc_id), Document)


def test_file_deleted_while_discovery_streams(tmp_path: Path) -> None:
    """Discovery is a generator: files that disappear before it reaches them are not reported."""
    make_tree(tmp_path, {"a.md": "a", "b.md": "b", "c.md": "c"})
    stream = discover(tmp_path, ["**/*"], [])
    first = next(stream)
    (tmp_path / "c.md").unlink()
    rest = list(stream)
    assert first.doc_id == "a.md"
    assert [i.doc_id for i in rest if isinstance(i, SourceFile)] == ["b.md"]
    assert all(isinstance(i, SourceFile) or "vanished" in i.reason for i in rest)


def test_read_document_end_to_end(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "bom.md": codecs.BOM_UTF8 + "# Título\n".encode(),
            "bad.md": b"\xff\xfe\x00\xd8",
            "empty.md": b"",
            "bin.md": b"ab\x00cd",
            "latin.md": b"caf\xe9",
        },
    )
    results = {p.name: read_document(p, p.name) for p in sorted(tmp_path.iterdir())}
    assert isinstance(results["bom.md"], Document) and results["bom.md"].text == "# Título\n"
    assert results["empty.md"] == Skipped("empty.md", "empty file")
    assert results["bin.md"] == Skipped("bin.md", "binary file (NUL bytes)")
    assert results["latin.md"] == Skipped("latin.md", "not valid UTF-8 at byte 3")
    assert results["bad.md"] == Skipped("bad.md", "not valid UTF-16-LE at byte 2")  # BOM + lone surrogate


def test_a_transient_read_error_is_retried(tmp_path, monkeypatch):
    import errno as _errno

    from chunkyard.chunking import documents

    path = tmp_path / "flaky.md"
    path.write_text("# Flaky\n\nRead on the second try.\n", encoding="utf-8")
    calls = []
    real = Path.read_bytes

    def flaky(self):
        calls.append(self)
        if len(calls) == 1:
            raise OSError(_errno.EIO, "Input/output error", str(self))
        return real(self)

    monkeypatch.setattr(documents_module, "_read_checked", lambda path, identity, limits: flaky(path))
    document = documents.read_document(path, "flaky.md")
    assert not isinstance(document, documents.Skipped) and len(calls) == 2


def test_a_persistent_read_error_is_skipped_with_the_attempts(tmp_path, monkeypatch):
    import errno as _errno

    from chunkyard.chunking import documents

    path = tmp_path / "broken.md"
    path.write_text("x", encoding="utf-8")

    def broken(self):
        raise OSError(_errno.EIO, "Input/output error", str(self))

    monkeypatch.setattr(documents_module, "_read_checked", lambda path, identity, limits: broken(path))
    monkeypatch.setattr(documents.time, "sleep", lambda seconds: None)
    skipped = documents.read_document(path, "broken.md")
    assert isinstance(skipped, documents.Skipped)
    assert skipped.reason == "unreadable: Input/output error (after 3 attempts)"


@pytest.mark.parametrize(
    ("code", "keep"), [("EIO", True), ("EACCES", True), ("EISDIR", True), ("ENOENT", False), ("ELOOP", False)]
)
def test_a_file_that_could_not_be_read_keeps_its_previous_chunks_unless_it_is_gone(
    tmp_path, monkeypatch, code, keep
):
    """Read errors leave the file's content unknown: its previous chunks are kept (``keep_previous``).
    A vanished file or a symlink loop is gone as a document; content verdicts (empty, binary) too."""
    import errno as _errno

    from chunkyard.chunking import documents

    path = tmp_path / "doc.md"
    path.write_text("x", encoding="utf-8")

    def failing(self):
        raise OSError(getattr(_errno, code), "failed", str(self))

    monkeypatch.setattr(documents_module, "_read_checked", lambda path, identity, limits: failing(path))
    monkeypatch.setattr(documents.time, "sleep", lambda seconds: None)
    skipped = documents.read_document(path, "doc.md")
    assert isinstance(skipped, documents.Skipped) and skipped.keep_previous is keep
    monkeypatch.undo()
    path.write_bytes(b"")
    assert documents.read_document(path, "doc.md").keep_previous is False


# ---------------------------------------------------------------------------------------------
# Issue 20: nothing from outside the source, nothing that blocks


def _read_all(items: list[SourceFile | Skipped]) -> dict[str, Document | Skipped]:
    return {
        item.doc_id: (
            item
            if isinstance(item, Skipped)
            else read_document(item.path, item.doc_id, identity=item.identity)
        )
        for item in items
    }


def test_links_out_of_the_source_and_to_special_files_are_skipped_never_read(tmp_path: Path) -> None:
    source, outside = tmp_path / "src", tmp_path / "outside"
    make_tree(source, {"real/a.md": "# A\n"})
    make_tree(outside, {"secret.md": "SECRET"})
    links = {
        "passwd.txt": Path("/etc/passwd"),
        "s.md": outside / "secret.md",
        "zero.txt": Path("/dev/zero"),
        "kmsg.txt": Path("/proc/kmsg"),
        "maps.txt": Path("/proc/self/maps"),
        "inside.md": source / "real" / "a.md",
        "up.md": Path("../outside/secret.md"),
    }
    for name, target in links.items():
        (source / name).symlink_to(target)
    items = _discover_with_timeout(source)
    results = _read_all(items)
    for name in ("passwd.txt", "s.md", "zero.txt", "maps.txt", "up.md"):
        result = results[name]
        assert (
            isinstance(result, Skipped)
            and result.reason.startswith("symbolic link to /")
            and result.reason.endswith(", outside the source folder (not read)")
            and not result.keep_previous
        ), name
    assert (
        results["s.md"].reason
        == f"symbolic link to {outside / 'secret.md'}, outside the source folder (not read)"
    )
    assert isinstance(results["kmsg.txt"], Skipped)  # outside, or a broken link where /proc/kmsg is absent
    inside = results["inside.md"]
    assert isinstance(inside, Document) and inside.text == "# A\n" and inside.doc_id == "inside.md"


def test_follow_links_never_skips_every_file_link(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.md": "# A\n"})
    (tmp_path / "alias.md").symlink_to(tmp_path / "a.md")
    items = list(discover(tmp_path, ["**/*"], [], follow_links="never"))
    assert Skipped("alias.md", "symbolic link (not read: source.follow_links is never)") in items
    assert [i.doc_id for i in items if isinstance(i, SourceFile)] == ["a.md"]


def test_special_files_inside_the_source_are_never_opened(tmp_path: Path) -> None:
    import socket
    import stat as stat_module

    os.mkfifo(tmp_path / "fifo.md")
    expected = {"fifo.md"}
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(tmp_path / "sock.md"))
        expected.add("sock.md")
    except OSError:
        pass
    finally:
        server.close()
    try:
        os.mknod(tmp_path / "zero.md", stat_module.S_IFCHR | 0o600, os.makedev(1, 5))
        expected.add("zero.md")
    except OSError:  # not root
        pass
    items = _discover_with_timeout(tmp_path)
    assert {i.doc_id: i.reason for i in items} == dict.fromkeys(expected, "not a regular file")


def _read_with_timeout(item: SourceFile, seconds: float = 5) -> Document | Skipped:
    result: list[Document | Skipped] = []
    worker = threading.Thread(
        target=lambda: result.append(read_document(item.path, item.doc_id, identity=item.identity)),
        daemon=True,
    )
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "reading waited on the file"
    return result[0]


def test_a_file_swapped_for_a_fifo_after_discovery_is_skipped_never_waited_on(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.md": "# A\n"})
    [item] = list(discover(tmp_path, ["**/*"], []))
    (tmp_path / "a.md").unlink()
    os.mkfifo(tmp_path / "a.md")
    assert _read_with_timeout(item) == Skipped(
        "a.md", "not a regular file (it was replaced after discovery)", keep_previous=True
    )


def test_a_file_swapped_for_a_link_or_another_file_after_discovery_is_skipped(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_tree(source, {"a.md": "# A\n", "b.md": "# B\n", "docs/c.md": "# C\n"})
    make_tree(tmp_path, {"secret.md": "SECRET"})
    items = {i.doc_id: i for i in discover(source, ["**/*"], []) if isinstance(i, SourceFile)}
    (source / "a.md").unlink()
    (source / "a.md").symlink_to(tmp_path / "secret.md")  # O_NOFOLLOW: never opened through the link
    assert _read_with_timeout(items["a.md"]) == Skipped(
        "a.md", "became a symbolic link between discovery and reading (not read)", keep_previous=True
    )
    (source / "b.new").write_text("other text")  # written while b.md exists: another inode
    os.replace(source / "b.new", source / "b.md")
    assert (
        _read_with_timeout(items["b.md"]).reason
        == "replaced by another file between discovery and reading (not read)"
    )
    # A folder on the path replaced by a link to the same folder: same inode, another path.
    (source / "docs").rename(source / "docs2")
    (source / "docs").symlink_to(source / "docs2", target_is_directory=True)
    result = _read_with_timeout(items["docs/c.md"])
    assert isinstance(result, Skipped) and result.reason.startswith(
        "moved, or a folder on its path was replaced"
    )


def test_a_file_flipped_between_regular_file_fifo_and_link_never_hangs_or_leaks(tmp_path: Path) -> None:
    """The race script of the issue: a thread replaces the file again and again (a regular file, a FIFO,
    a link to a secret) while it is discovered and read; every read ends at once with the file's own
    text or a skip, never the secret."""
    source = tmp_path / "src"
    source.mkdir()
    (tmp_path / "secret.md").write_text("SECRET")
    target = source / "flip.md"
    target.write_text("# Own text\n")
    stop = threading.Event()

    def flipper() -> None:
        step = 0
        while not stop.is_set():
            spare = source / f".spare-{step}"
            try:
                if step % 3 == 0:
                    spare.write_text("# Own text\n")
                elif step % 3 == 1:
                    os.mkfifo(spare)
                else:
                    spare.symlink_to(tmp_path / "secret.md")
                os.replace(spare, target)
            except OSError:
                pass
            step += 1

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    try:
        outcomes: set[str] = set()
        rounds, give_up = 0, time.monotonic() + 20
        while (rounds < 300 or len(outcomes) < 3) and time.monotonic() < give_up:
            rounds += 1
            time.sleep(0.0005)  # let the flipper run between rounds
            for item in discover(source, ["*.md"], []):
                result = item if isinstance(item, Skipped) else _read_with_timeout(item)
                if isinstance(result, Document):
                    assert result.text == "# Own text\n"
                    outcomes.add("document")
                else:
                    assert "SECRET" not in result.reason
                    outcomes.add(result.reason)
    finally:
        stop.set()
        thread.join(5)
    assert "document" in outcomes and len(outcomes) > 1, outcomes


def test_only_what_fstat_promised_is_read_and_max_file_mb_is_checked_first(tmp_path: Path) -> None:
    from chunkyard.chunking.config import LimitsConfig

    make_tree(tmp_path, {"big.md": "x" * 2_000_001, "ok.md": "# ok\n"})
    limits = LimitsConfig(max_file_mb=2)
    items = {i.doc_id: i for i in discover(tmp_path, ["**/*"], [])}
    assert read_document(items["big.md"].path, "big.md", limits, items["big.md"].identity) == Skipped(
        "big.md", "file of 2.0 MB is over limits.max_file_mb (2 MB)"
    )
    assert isinstance(read_document(items["ok.md"].path, "ok.md", limits, items["ok.md"].identity), Document)
    text = read_document(tmp_path / "big.md", "big.md", LimitsConfig(max_text_mb=1))
    assert text == Skipped(
        "big.md", "extracted text of 2.0 million characters is over limits.max_text_mb (1)"
    )


def test_an_exception_of_any_type_in_extraction_is_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(tmp_path, {"page.html": "<p>x</p>"})

    def broken(text: str) -> None:
        raise LookupError("unknown encoding: rot13")

    monkeypatch.setattr("chunkyard.chunking.html.extract_html", broken)
    result = read_document(tmp_path / "page.html", "page.html")
    assert result == Skipped(
        "page.html", "extraction failed: LookupError: unknown encoding: rot13", keep_previous=True
    )


def test_a_link_inside_the_source_to_a_hidden_or_excluded_file_is_not_read(tmp_path: Path) -> None:
    """Hidden files and excluded paths are never read: not through a link either."""
    make_tree(
        tmp_path, {".git/config": "[remote] token=SECRET", "drafts/secret.md": "SECRET", "ok.md": "# ok"}
    )
    (tmp_path / "git.md").symlink_to(tmp_path / ".git" / "config")
    (tmp_path / "draft.md").symlink_to(tmp_path / "drafts" / "secret.md")
    (tmp_path / "alias.md").symlink_to(tmp_path / "ok.md")
    items = {i.doc_id: i for i in discover(tmp_path, ["**/*"], ["drafts/**"])}
    assert items["git.md"] == Skipped("git.md", "symbolic link to the hidden file .git/config (not read)")
    assert items["draft.md"] == Skipped(
        "draft.md", "symbolic link to drafts/secret.md, which source.exclude leaves out (not read)"
    )
    assert isinstance(items["alias.md"], SourceFile) and items["alias.md"].path == tmp_path / "ok.md"
