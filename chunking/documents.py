"""Documents: find them in a source folder, read and decode them, extract their text.

``doc_id`` is the path relative to the source folder, POSIX style. The text that chunk offsets
refer to is the *extracted* text: UTF-8 (or UTF-16 with a BOM) decoded strictly, BOM removed, HTML
converted to Markdown-like text; PDF (``chunkyard.chunking.pdf``, text per page, headings from the outline) and
DOCX (``chunkyard.chunking.word``) are not decoded but extracted to Markdown-like text; reStructuredText is kept
as it is. A file that cannot be used becomes a ``Skipped`` with a specific reason (encrypted,
scanned or broken PDFs included); reading never raises for a bad file.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from chunkyard.chunking.config import glob_match
from chunkyard.chunking.errors import MissingExtra
from chunkyard.chunking.rst import RST_SUFFIXES
from chunkyard.chunking.strategies import DOCUMENT_SUFFIXES, HTML_SUFFIXES, MARKDOWN_SUFFIXES

CODE_SUFFIXES = {
    ".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".rb": "ruby", ".sh": "bash",
}


@dataclass
class SourceFile:
    """A file found by discovery, not yet read."""

    doc_id: str
    path: Path
    size: int


@dataclass
class Document:
    doc_id: str
    path: str  # as found, relative to the source folder
    format: str  # markdown | html | pdf | docx | rst | text | code
    sha256: str  # of the raw bytes
    n_bytes: int
    text: str  # extracted text: what offsets refer to
    title: str = ""
    exclusions: list[dict[str, Any]] = field(default_factory=list)  # removed at extraction
    metadata: dict[str, Any] = field(default_factory=dict)
    # Paged formats (PDF): the offset in ``text`` where each page begins; empty otherwise.
    page_starts: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Skipped:
    """A file (or folder) a run could not use, and why.

    ``keep_previous``: the run learnt nothing about the file's content (it could not be read, or
    chunking it failed), so a document the previous snapshot holds keeps its chunks rather than
    vanishing from the vector store until the next run. Files that were read and found unusable
    (binary, undecodable, empty) or are gone (vanished, a dangling link) do not.
    """

    doc_id: str
    reason: str
    keep_previous: bool = False
    folder: bool = False  # a folder that could not be listed: ``doc_id`` is the folder's path


def discover(source_dir: Path, include: list[str], exclude: list[str],
             skip_dirs: tuple[Path, ...] = ()) -> Iterator[SourceFile | Skipped]:
    """Walk ``source_dir`` in sorted order, yielding matching files as they are found.

    Streams: no list of every path is built. Directory symlinks are not followed (no loops);
    hidden folders (``.git``) and ``skip_dirs`` are not entered.
    """
    # Folders to leave out, by identity (device, inode): ``realpath`` of every folder costs a stat per
    # path component, which is quadratic (cubic in the kernel) in a deeply nested tree.
    skip: set[tuple[int, int]] = set()
    for folder in skip_dirs:
        try:
            info = os.stat(folder)
        except OSError:
            continue
        skip.add((info.st_dev, info.st_ino))

    def listing(folder: Path, rel: str) -> Iterator[os.DirEntry[str]] | Skipped:
        try:
            with os.scandir(folder) as it:
                return iter(sorted(it, key=lambda e: e.name))
        except OSError as exc:
            return Skipped(rel or ".", f"unreadable folder: {exc.strerror or exc}", keep_previous=True, folder=True)

    # An explicit stack, not recursion: a folder tree thousands of levels deep must not raise
    # RecursionError. Same order as a recursive walk (depth first, names sorted).
    first = listing(source_dir, "")
    if isinstance(first, Skipped):
        yield first
        return
    stack: list[tuple[Iterator[os.DirEntry[str]], str]] = [(first, "")]
    while stack:
        entries, rel = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        doc_id = f"{rel}/{entry.name}" if rel else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                if entry.name.startswith("."):
                    continue
                if skip:
                    info = entry.stat(follow_symlinks=False)
                    if (info.st_dev, info.st_ino) in skip:
                        continue
                folder = listing(Path(entry.path), doc_id)
                if isinstance(folder, Skipped):
                    yield folder
                else:
                    stack.append((folder, doc_id))
                continue
            if entry.name.startswith("."):
                continue
            if not (any(glob_match(p, doc_id) for p in include)
                    and not any(glob_match(p, doc_id) for p in exclude)):
                continue
            try:
                info = entry.stat(follow_symlinks=True)
            except OSError as exc:
                broken = exc.errno == errno.ENOENT and entry.is_symlink()
                yield Skipped(doc_id, "broken symbolic link (its target does not exist)") if broken else _os_skip(
                    doc_id, exc)
                continue
            if stat.S_ISDIR(info.st_mode):
                continue  # a symlink to a folder: not followed
            if not stat.S_ISREG(info.st_mode):
                yield Skipped(doc_id, "not a regular file")
                continue
            yield SourceFile(doc_id, Path(entry.path), info.st_size)
        except OSError as exc:
            yield _os_skip(doc_id, exc)


def _os_skip(doc_id: str, exc: OSError, note: str = "") -> Skipped:
    """A file the system would not let us read: its previous chunks are kept unless it is gone
    (vanished) or a symlink loop (the link itself changed)."""
    gone = exc.errno in (errno.ENOENT, errno.ELOOP)
    return Skipped(doc_id, _os_reason(exc) + note, keep_previous=not gone)


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.ENOENT,):
        return "file vanished before it could be read"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return f"unreadable: {exc.strerror or exc}"


def detect_format(doc_id: str) -> str:
    suffix = PurePosixPath(doc_id).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in DOCUMENT_SUFFIXES:
        return DOCUMENT_SUFFIXES[suffix]
    if suffix in RST_SUFFIXES:
        return "rst"
    if suffix in CODE_SUFFIXES:
        return "code"
    return "text"


# Read errors worth another try (a flaky network filesystem, an interrupted call); the rest are final.
_TRANSIENT = {errno.EIO, errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT, errno.ESTALE}
READ_ATTEMPTS = 3


def read_document(path: Path, doc_id: str) -> Document | Skipped:
    """Read, decode and extract one file; every failure is a ``Skipped`` with a specific reason.

    A transient read error (EIO, EAGAIN, ...) is retried with a short backoff before the file is
    skipped, so one hiccup of a network filesystem does not drop a document from the snapshot.
    """
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            raw = path.read_bytes()
            break
        except OSError as exc:
            if exc.errno not in _TRANSIENT:
                return _os_skip(doc_id, exc)
            if attempt == READ_ATTEMPTS:
                return _os_skip(doc_id, exc, f" (after {READ_ATTEMPTS} attempts)")
            time.sleep(0.05 * 4 ** (attempt - 1))
    return document_from_bytes(raw, doc_id)


def document_from_bytes(raw: bytes, doc_id: str) -> Document | Skipped:
    if not raw:
        return Skipped(doc_id, "empty file")
    fmt = detect_format(doc_id)
    if fmt in ("pdf", "docx"):
        return _extract_binary(raw, doc_id, fmt)
    declared = None
    try:
        text = decode_text(raw)
    except ValueError as exc:
        # Legacy HTML says its encoding in a <meta> (or XML) declaration: decode with that, strictly.
        declared = declared_html_charset(raw) if fmt == "html" and isinstance(exc, NotUtf8) else None
        if declared is None:
            return Skipped(doc_id, str(exc) + (_undeclared_reason(raw) if fmt == "html" else ""))
        try:
            text = raw.decode(declared)
        except UnicodeDecodeError as decode_error:
            return Skipped(doc_id, f"{exc}, and not valid {declared} (its declared charset) at byte "
                                   f"{decode_error.start}")
        if "\x00" in text:
            return Skipped(doc_id, "binary file (NUL bytes)")
    sha = hashlib.sha256(raw).hexdigest()
    document = Document(doc_id=doc_id, path=doc_id, format=fmt, sha256=sha, n_bytes=len(raw), text=text)
    if fmt == "html":
        _extract_html(document)
        if declared is not None:
            document.metadata["source_encoding"] = declared
    if not document.text.strip():
        return Skipped(doc_id, "no text (empty or whitespace only after extraction)")
    return document


class NotUtf8(ValueError):
    """No BOM, no NUL byte, and not valid UTF-8 (an HTML page may declare what it is instead)."""


def decode_text(raw: bytes) -> str:
    """Decode strictly: UTF-8 (BOM removed), or UTF-16/32 when a BOM says so.

    Raises ValueError naming the byte offset of the first invalid sequence, or saying the file is
    binary (a NUL byte outside UTF-16/32).
    """
    for bom, encoding in ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
                          (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                          (codecs.BOM_UTF16_BE, "utf-16-be")):
        if raw.startswith(bom):
            try:
                return raw[len(bom):].decode(encoding)
            except UnicodeDecodeError as exc:
                raise ValueError(f"not valid {encoding.upper()} at byte {exc.start + len(bom)}") from None
    if b"\x00" in raw[:8192]:
        raise ValueError("binary file (NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8(f"not valid UTF-8 at byte {exc.start}") from None
    if "\x00" in text:
        raise ValueError("binary file (NUL bytes)")
    return text


# The HTML standard's prescan, simplified: a <meta charset> or <meta http-equiv="Content-Type"
# content="...; charset=..."> in the first 1024 bytes, or an XML declaration's encoding (XHTML);
# then, as the parser would find it, a <meta> anywhere before <body>.
_META_CHARSET = re.compile(rb"""<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_BODY = re.compile(rb"<body\b", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml\b[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)""", re.IGNORECASE)
# Codecs the standard replaces by a superset (Latin-1 and ASCII by windows-1252, GB2312 by GBK), and
# ones it ignores in a <meta>.
_SUPERSET = {"iso8859_1": "cp1252", "ascii": "cp1252", "gb2312": "gbk", "euc_kr": "cp949", "iso8859_9": "cp1254",
             "tis_620": "cp874", "iso8859_11": "cp874"}
# Labels of the Encoding Standard that Python's codec registry does not know.
_WHATWG_LABELS = {"windows-874": "cp874", "iso-8859-8-i": "iso8859_8", "x-mac-cyrillic": "mac_cyrillic",
                  "x-sjis": "shift_jis", "x-gbk": "gbk", "x-euc-jp": "euc_jp"}
_IGNORED_IN_META = {"utf_16", "utf_16_le", "utf_16_be", "utf_8"}


def _declared_label(raw: bytes) -> str | None:
    """The charset label an HTML file declares (lower case, as written), or None."""
    head = raw[:1024]
    match = _XML_ENCODING.match(head) or _META_CHARSET.search(head)
    if match is None:
        # Past the prescan, a <meta> in the head still counts: browsers re-decode the page when the
        # parser reaches it. Not one in the body.
        body = _BODY.search(raw)
        match = _META_CHARSET.search(raw, 0, body.start() if body else len(raw))
    return None if match is None else match.group(1).decode("ascii", "replace").strip().lower()


def _undeclared_reason(raw: bytes) -> str:
    """Why an HTML page that is not UTF-8 has no charset to decode it with (follows "not valid UTF-8 ...")."""
    label = _declared_label(raw)
    if label is None:
        return " and no charset is declared"
    try:
        name = _codec_name(label)
    except LookupError:
        return f", and its declared charset {label!r} is unknown"
    if name == "utf_8":
        return " (its declared charset)"
    return f", and its declared charset {label!r} is read as UTF-8 (UTF-16 needs a byte-order mark)"


def _codec_name(label: str) -> str:
    """Python's codec name for a charset label (``LookupError`` when unknown)."""
    return codecs.lookup(_WHATWG_LABELS.get(label, label)).name.replace("-", "_")


def declared_html_charset(raw: bytes) -> str | None:
    """The Python codec of the charset an HTML file declares, or None (none, unknown, or UTF-8)."""
    label = _declared_label(raw)
    if label is None:
        return None
    try:
        name = _codec_name(label)
    except LookupError:
        return None
    if name in _IGNORED_IN_META:
        return None  # it did not decode as UTF-8 already; UTF-16 would have had a BOM
    return _SUPERSET.get(name, name)


def _extract_html(document: Document) -> None:
    try:
        from chunkyard.chunking.html import extract_html
    except ImportError:  # pragma: no cover - html module is part of the package
        return
    extraction = extract_html(document.text)
    document.text = extraction.text
    document.title = extraction.title
    document.exclusions = list(extraction.exclusions)
    document.metadata = dict(extraction.metadata)


def _extract_binary(raw: bytes, doc_id: str, fmt: str) -> Document | Skipped:
    """A PDF or DOCX document, or a ``Skipped`` saying why it cannot be used."""
    sha = hashlib.sha256(raw).hexdigest()
    page_starts: list[int] = []
    if fmt == "pdf":
        from chunkyard.chunking.pdf import PdfUnusable, extract_pdf

        try:
            pdf = extract_pdf(raw)
        except PdfUnusable as exc:
            return Skipped(doc_id, str(exc))
        except MissingExtra as exc:  # not installed here: the file was not read, its chunks are kept
            return Skipped(doc_id, str(exc), keep_previous=True)
        text, title, metadata, page_starts = pdf.text, pdf.title, pdf.metadata, pdf.page_starts
    else:
        from chunkyard.chunking.word import DocxUnusable, extract_docx

        try:
            extraction = extract_docx(raw)
        except DocxUnusable as exc:
            return Skipped(doc_id, str(exc))
        except MissingExtra as exc:
            return Skipped(doc_id, str(exc), keep_previous=True)
        text, title, metadata = extraction.text, extraction.title, extraction.metadata
    if not text.strip():
        return Skipped(doc_id, "no text (empty or whitespace only after extraction)")
    return Document(doc_id=doc_id, path=doc_id, format=fmt, sha256=sha, n_bytes=len(raw), text=text,
                    title=title, metadata=dict(metadata), page_starts=page_starts)
