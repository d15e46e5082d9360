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

from chunkyard.chunking.config import LimitsConfig, glob_match
from chunkyard.chunking.errors import MissingExtra
from chunkyard.chunking.layout import path_suffix
from chunkyard.chunking.rst import RST_SUFFIXES
from chunkyard.chunking.strategies import DOCUMENT_SUFFIXES, HTML_SUFFIXES, MARKDOWN_SUFFIXES

CODE_SUFFIXES = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".rb": "ruby",
    ".sh": "bash",
}


@dataclass
class SourceFile:
    """A file found by discovery, not yet read."""

    doc_id: str
    path: Path  # the file to open: for a followed link, its resolved target
    size: int
    # (device, inode) found by discovery: the file opened for reading must be this one, so a file
    # swapped for another, a FIFO or a link in between is skipped, never read or waited on.
    identity: tuple[int, int] | None = None


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


def discover(
    source_dir: Path,
    include: list[str],
    exclude: list[str],
    skip_dirs: tuple[Path, ...] = (),
    follow_links: str = "inside",
) -> Iterator[SourceFile | Skipped]:
    """Walk ``source_dir`` in sorted order, yielding matching files as they are found.

    Streams: no list of every path is built. Directory symlinks are not followed (no loops);
    hidden folders (``.git``) and ``skip_dirs`` are not entered. A symlink to a file is resolved:
    followed when its target is a regular file inside the source folder and ``follow_links`` is
    ``inside``, else skipped with the reason (a target outside the source is never read); FIFOs,
    devices and sockets are skipped as ``not a regular file``.
    """
    root = os.path.realpath(source_dir)
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
            return Skipped(
                rel or ".", f"unreadable folder: {exc.strerror or exc}", keep_previous=True, folder=True
            )

    # An explicit stack, not recursion: a folder tree thousands of levels deep must not raise
    # RecursionError. Same order as a recursive walk (depth first, names sorted).
    first = listing(Path(root), "")
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
            if not (
                any(glob_match(p, doc_id) for p in include)
                and not any(glob_match(p, doc_id) for p in exclude)
            ):
                continue
            try:
                info = entry.stat(follow_symlinks=True)
            except OSError as exc:
                broken = exc.errno == errno.ENOENT and entry.is_symlink()
                yield (
                    Skipped(doc_id, "broken symbolic link (its target does not exist)")
                    if broken
                    else _os_skip(doc_id, exc)
                )
                continue
            if stat.S_ISDIR(info.st_mode):
                continue  # a symlink to a folder: not followed
            path = entry.path
            if entry.is_symlink():
                path = os.path.realpath(entry.path)
                if os.path.commonpath([root, path]) != root:
                    yield Skipped(doc_id, f"symbolic link to {path}, outside the source folder (not read)")
                    continue
                # Inside, but at a file the config leaves out (hidden, excluded): not read through a link either.
                target = PurePosixPath(os.path.relpath(path, root)).as_posix()
                if any(part.startswith(".") for part in target.split("/")):
                    yield Skipped(doc_id, f"symbolic link to the hidden file {target} (not read)")
                    continue
                if any(glob_match(p, target) for p in exclude):
                    yield Skipped(
                        doc_id, f"symbolic link to {target}, which source.exclude leaves out (not read)"
                    )
                    continue
                if follow_links != "inside":
                    yield Skipped(doc_id, "symbolic link (not read: source.follow_links is never)")
                    continue
            if not stat.S_ISREG(info.st_mode):
                yield Skipped(doc_id, "not a regular file")
                continue
            yield SourceFile(doc_id, Path(path), info.st_size, (info.st_dev, info.st_ino))
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
    suffix = path_suffix(doc_id).lower()
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


DEFAULT_LIMITS = LimitsConfig()
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class _Refused(Exception):
    """The opened file is not the one to read (``str(exc)`` is the reason)."""

    def __init__(self, reason: str, keep_previous: bool) -> None:
        super().__init__(reason)
        self.keep_previous = keep_previous


def read_document(
    path: Path, doc_id: str, limits: LimitsConfig | None = None, identity: tuple[int, int] | None = None
) -> Document | Skipped:
    """Read, decode and extract one file; every failure is a ``Skipped`` with a specific reason.

    The file is opened without following a link and without blocking (``O_NOFOLLOW | O_NONBLOCK``),
    then checked on the open descriptor: a regular file, the one discovery found (``identity``, the
    device and inode), at the path discovery found (``/proc/self/fd``, so no folder on the way was
    swapped for a link), within ``limits.max_file_mb``; only ``st_size`` bytes are read, so a file
    that never ends is never waited on. ``path`` without ``identity`` (a file named by the user) is
    resolved first. A transient read error (EIO, EAGAIN, ...) is retried with a short backoff before
    the file is skipped, so one hiccup of a network filesystem does not drop a document from the
    snapshot. Any exception of the extraction is a skip with its type and message.
    """
    limits = limits or DEFAULT_LIMITS
    if identity is None:
        path = Path(os.path.realpath(path))
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            raw = _read_checked(path, identity, limits)
            break
        except _Refused as exc:
            return Skipped(doc_id, str(exc), keep_previous=exc.keep_previous)
        except OSError as exc:
            if exc.errno == errno.ELOOP and identity is not None:
                return Skipped(
                    doc_id,
                    "became a symbolic link between discovery and reading (not read)",
                    keep_previous=True,
                )
            if exc.errno == errno.ENXIO:  # a socket, or a device without its driver
                return Skipped(doc_id, "not a regular file")
            if exc.errno not in _TRANSIENT:
                return _os_skip(doc_id, exc)
            if attempt == READ_ATTEMPTS:
                return _os_skip(doc_id, exc, f" (after {READ_ATTEMPTS} attempts)")
            time.sleep(0.05 * 4 ** (attempt - 1))
    try:
        return document_from_bytes(raw, doc_id, limits)
    except Exception as exc:  # an extractor's bug or a pathological file: this file, not the run
        return Skipped(doc_id, f"extraction failed: {describe_exception(exc)}", keep_previous=True)


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` on one line, the message cut at 300 characters."""
    message = " ".join(str(exc).split())
    if len(message) > 300:
        message = message[:300] + "…"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _read_checked(path: Path, identity: tuple[int, int] | None, limits: LimitsConfig) -> bytes:
    fd = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(
                "not a regular file"
                if identity is None
                else "not a regular file (it was replaced after discovery)",
                identity is not None,
            )
        if identity is not None:
            if (info.st_dev, info.st_ino) != identity:
                raise _Refused("replaced by another file between discovery and reading (not read)", True)
            opened = _descriptor_path(fd)
            if opened is not None and opened != os.fspath(path):
                raise _Refused(
                    "moved, or a folder on its path was replaced, between discovery and reading (not read)",
                    True,
                )
        max_bytes = int(limits.max_file_mb * 1_000_000)
        if info.st_size > max_bytes:
            raise _Refused(
                f"file of {info.st_size / 1e6:.1f} MB is over limits.max_file_mb ({limits.max_file_mb:g} MB)",
                False,
            )
        # Only what fstat promised: a file that grows while it is read (or never ends) is not followed.
        parts: list[bytes] = []
        remaining = info.st_size
        while remaining > 0:
            part = os.read(fd, min(remaining, 1 << 24))
            if not part:
                break
            parts.append(part)
            remaining -= len(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def _descriptor_path(fd: int) -> str | None:
    """The path the kernel has for an open descriptor (Linux), or None where it cannot say."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def document_from_bytes(raw: bytes, doc_id: str, limits: LimitsConfig | None = None) -> Document | Skipped:
    limits = limits or DEFAULT_LIMITS
    document = _document_from_bytes(raw, doc_id, limits)
    if isinstance(document, Document) and len(document.text) > limits.max_text_mb * 1_000_000:
        return Skipped(
            doc_id,
            f"extracted text of {len(document.text) / 1e6:.1f} million characters is over "
            f"limits.max_text_mb ({limits.max_text_mb:g})",
        )
    return document


def _document_from_bytes(raw: bytes, doc_id: str, limits: LimitsConfig) -> Document | Skipped:
    if not raw:
        return Skipped(doc_id, "empty file")
    fmt = detect_format(doc_id)
    if fmt in ("pdf", "docx"):
        return _extract_binary(raw, doc_id, fmt, limits)
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
            return Skipped(
                doc_id, f"{exc}, and not valid {declared} (its declared charset) at byte {decode_error.start}"
            )
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
    for bom, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if raw.startswith(bom):
            try:
                return raw[len(bom) :].decode(encoding)
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
# The Encoding Standard's labels (https://encoding.spec.whatwg.org/#names-and-labels), by the Python
# codec that decodes each encoding. A label not here is not a text encoding a browser would use, so a
# page declaring ``rot13``, ``base64`` or ``bz2`` (all Python codecs) is never decoded with it.
_WHATWG_CODECS = {
    "utf_8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso8859_2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
    "iso8859_3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
    "iso8859_4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
    "iso8859_5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988",
    "iso8859_6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e "
    "iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    "iso8859_7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 "
    "iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso8859_8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 "
    "iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso8859_10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso8859_13": "iso-8859-13 iso8859-13 iso885913",
    "iso8859_14": "iso-8859-14 iso8859-14 iso885914",
    "iso8859_15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso8859_16": "iso-8859-16",
    "koi8_r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8_u": "koi8-ru koi8-u",
    "mac_roman": "csmacintosh mac macintosh x-mac-roman",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "cp1250": "cp1250 windows-1250 x-cp1250",
    "cp1251": "cp1251 windows-1251 x-cp1251",
    # Latin-1 and ASCII are read as their superset windows-1252, as browsers do (likewise GB2312 as
    # GBK, EUC-KR as windows-949, ISO-8859-9 as windows-1254, TIS-620 as windows-874).
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 "
    "iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
    "cp1253": "cp1253 windows-1253 x-cp1253",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 "
    "windows-1254 x-cp1254",
    "cp1255": "cp1255 windows-1255 x-cp1255",
    "cp1256": "cp1256 windows-1256 x-cp1256",
    "cp1257": "cp1257 windows-1257 x-cp1257",
    "cp1258": "cp1258 windows-1258 x-cp1258",
    "mac_cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "gbk": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
    "gb18030": "gb18030",
    "big5": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc_jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022_jp": "csiso2022jp iso-2022-jp",
    "shift_jis": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 "
    "windows-949",
    "utf_16_be": "unicodefffe utf-16be",
    "utf_16_le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    # Encodings the standard maps to the "replacement" decoder (browsers show U+FFFD, never the text).
    "replacement": "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement",
}
_CODEC_OF_LABEL = {label: codec for codec, labels in _WHATWG_CODECS.items() for label in labels.split()}
_IGNORED_IN_META = {"utf_16_le", "utf_16_be", "utf_8"}  # it did not decode as UTF-8; UTF-16 has a BOM


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
    name = _CODEC_OF_LABEL.get(label)
    if name is None:
        return (
            f", and its declared charset {label!r} is unknown (not a label of the WHATWG Encoding Standard)"
        )
    if name == "replacement":
        return f", and its declared charset {label!r} is one browsers refuse to decode"
    if name == "utf_8":
        return " (its declared charset)"
    return f", and its declared charset {label!r} is read as UTF-8 (UTF-16 needs a byte-order mark)"


def declared_html_charset(raw: bytes) -> str | None:
    """The Python codec of the charset an HTML file declares, or None: none declared, not a label of the
    Encoding Standard (so never ``rot13``, ``bz2``, ``base64`` or another codec that is not a text
    encoding), the replacement encoding, or UTF-8/UTF-16."""
    label = _declared_label(raw)
    name = None if label is None else _CODEC_OF_LABEL.get(label)
    if name is None or name == "replacement" or name in _IGNORED_IN_META:
        return None
    return name


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


def _extract_binary(raw: bytes, doc_id: str, fmt: str, limits: LimitsConfig) -> Document | Skipped:
    """A PDF or DOCX document, or a ``Skipped`` saying why it cannot be used."""
    sha = hashlib.sha256(raw).hexdigest()
    page_starts: list[int] = []
    if fmt == "pdf":
        from chunkyard.chunking.pdf import PdfUnusable, extract_pdf

        try:
            pdf = extract_pdf(raw, limits)
        except PdfUnusable as exc:
            return Skipped(doc_id, str(exc))
        except MissingExtra as exc:  # not installed here: the file was not read, its chunks are kept
            return Skipped(doc_id, str(exc), keep_previous=True)
        text, title, metadata, page_starts = pdf.text, pdf.title, pdf.metadata, pdf.page_starts
    else:
        from chunkyard.chunking.word import DocxUnusable, extract_docx

        try:
            extraction = extract_docx(raw, limits)
        except DocxUnusable as exc:
            return Skipped(doc_id, str(exc))
        except MissingExtra as exc:
            return Skipped(doc_id, str(exc), keep_previous=True)
        text, title, metadata = extraction.text, extraction.title, extraction.metadata
    if not text.strip():
        return Skipped(doc_id, "no text (empty or whitespace only after extraction)")
    return Document(
        doc_id=doc_id,
        path=doc_id,
        format=fmt,
        sha256=sha,
        n_bytes=len(raw),
        text=text,
        title=title,
        metadata=dict(metadata),
        page_starts=page_starts,
    )
