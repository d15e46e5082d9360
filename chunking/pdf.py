"""PDF → Markdown-like text with page boundaries: the text that PDF documents are chunked and stored as.

Method. ``pypdf`` (BSD) reads the file and extracts the text layer of each page in content-stream
order (``page.extract_text()``, plain mode). Each page's text is normalised (CRLF → LF, trailing
spaces and NUL removed, leading bullets ``•``/``◦``/``▪`` written as ``-`` so the Markdown scanner
sees lists) and the pages are joined with a blank line. ``page_starts[i]`` is the offset in the
joined text where page ``i + 1`` begins, so the page of any offset is a bisection away.

Headings come from the outline (bookmarks): each entry's nesting depth is its level (capped at 6)
and its destination is its page. On that page the entry's title is looked for line by line, in
outline order: a line equal to the title (whitespace and case folded, a section number such as
``2.1`` allowed ahead) becomes the ATX heading; a line starting with it is split into the heading
and the rest; an entry not found is inserted at the top of the page (or, after an entry that was
found, before the next one found or at the page end, keeping outline order). Lines the Markdown
scanner would misread (``#``, fences, setext underlines) are escaped with a backslash, as for HTML.

Failures are reasons, not exceptions: ``PdfUnusable`` says whether the file is broken, encrypted
(a user password is needed; an empty one is tried) or has no text layer (scanned).
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from chunkyard.chunking.config import LimitsConfig
from chunkyard.chunking.errors import MissingExtra
from chunkyard.chunking.words import plural

_MAX_LEVEL = 6
_BULLET = re.compile(r"^([ \t]*)[\u2022\u25e6\u25aa\u2023\u2043\u25cf\u25a0\u00b7][ \t]+")
_MD_LINE_START = re.compile(r"#{1,6}(?:[ \t]|$)|`{3}|~{3}|[=-]+[ \t]*$")
_SPACES = re.compile(r"\s+")
# A section number ahead of a title on the page ("2", "2.1", "A.", "IV"), which outlines often omit.
_SECTION_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.|[IVXLC]+\.?)\s+")


class PdfUnusable(Exception):
    """The PDF cannot be used; ``str(exc)`` is the reason recorded in the manifest."""


@dataclass
class PdfExtraction:
    """The extracted text of one PDF, where each page starts in it, and what was found."""

    text: str
    page_starts: list[int]
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _OutlineEntry:
    title: str
    level: int
    page: int  # 0-based


def extract_pdf(raw: bytes, limits: LimitsConfig | None = None) -> PdfExtraction:
    """Extract the text of a PDF page by page, with outline headings; raise ``PdfUnusable`` if it cannot.

    Bounded work: before any text is extracted (pypdf parses content streams at 0.3–1 MB/s), every
    page's content streams are decoded and their sizes added up; past ``limits.max_inflated_mb``, or
    past ``limits.max_text_mb`` of extracted text, the PDF is refused with that limit.
    """
    limits = limits or LimitsConfig()
    try:
        from pypdf import PdfReader
        from pypdf.errors import DependencyError
    except ImportError:  # pypdf is in the office extra
        raise MissingExtra("PDF support", "office") from None
    _quiet_pypdf()
    try:
        reader = PdfReader(io.BytesIO(raw), strict=False)
        encrypted = reader.is_encrypted
    except Exception as exc:
        raise PdfUnusable(f"broken PDF: {_describe(exc)}") from None
    if encrypted:
        try:
            opened = reader.decrypt("")
        except DependencyError:
            raise PdfUnusable("encrypted PDF (AES; cannot be opened without a password library)") from None
        except Exception as exc:
            raise PdfUnusable(f"encrypted PDF that cannot be opened: {_describe(exc)}") from None
        if not opened:
            raise PdfUnusable("encrypted PDF (a password is required)")
    pages: list[str] = []
    inflated = characters = 0
    max_inflated, max_text = limits.max_inflated_mb * 1_000_000, limits.max_text_mb * 1_000_000
    try:
        # All the pages' streams first (decoding is fast; parsing them for text is not), so a PDF over
        # the limit is refused before any text is extracted.
        for number, page in enumerate(reader.pages, start=1):
            inflated += _content_size(page)
            if inflated > max_inflated:
                raise PdfUnusable(
                    f"page content streams of more than {inflated / 1e6:.1f} MB decoded (by page "
                    f"{number}) are over limits.max_inflated_mb ({limits.max_inflated_mb:g} MB)"
                )
        for page in reader.pages:
            pages.append(_clean_page(page.extract_text() or ""))
            characters += len(pages[-1])
            if characters > max_text:
                raise PdfUnusable(
                    f"extracted text of more than {characters / 1e6:.1f} million characters (by page "
                    f"{len(pages)}) is over limits.max_text_mb ({limits.max_text_mb:g})"
                )
    except PdfUnusable:
        raise
    except Exception as exc:
        raise PdfUnusable(f"broken PDF: {_describe(exc)}") from None
    if not pages:
        raise PdfUnusable("broken PDF: no pages")
    if not any(page.strip() for page in pages):
        raise PdfUnusable(f"no text layer (scanned or image-only PDF, {plural(len(pages), 'page')})")
    outline = _outline(reader)
    located = 0
    by_page: dict[int, list[_OutlineEntry]] = {}
    for entry in outline:
        if 0 <= entry.page < len(pages):
            by_page.setdefault(entry.page, []).append(entry)
    for index, entries in by_page.items():
        pages[index], found = _place_headings(pages[index], entries)
        located += found
    parts: list[str] = []
    page_starts: list[int] = []
    offset = 0
    for page in pages:
        if parts:
            parts.append("\n")
            offset += 1
        page_starts.append(offset)
        parts.append(page)
        offset += len(page)
    text = "".join(parts)
    metadata: dict[str, Any] = {"pages": len(pages)}
    if outline:
        metadata["outline_headings"] = len(outline)
        metadata["outline_headings_located"] = located
    title = ""
    try:
        info = reader.metadata
        title = " ".join(str(info.title).split()) if info is not None and info.title else ""
    except Exception:
        title = ""
    return PdfExtraction(text, page_starts, title, metadata)


def _content_size(page: Any) -> int:
    """Bytes of a page's decoded content streams (pypdf caps each stream's decoding at 75 MB)."""
    contents = page.get("/Contents")
    if contents is None:
        return 0
    contents = contents.get_object()
    streams = contents if isinstance(contents, list) else [contents]
    total = 0
    for stream in streams:
        stream = stream.get_object()
        get_data = getattr(stream, "get_data", None)
        if get_data is not None:
            total += len(get_data())
    return total


def page_of(page_starts: list[int], offset: int) -> int:
    """The 1-based page holding ``offset`` (an empty page shares its start with the next one)."""
    import bisect

    return max(1, bisect.bisect_right(page_starts, offset))


def _quiet_pypdf() -> None:
    """pypdf logs a warning for every repaired defect; the skip reason (or nothing) says enough,
    and thousands of files would bury the run's own output."""
    logger = logging.getLogger("pypdf")
    if logger.level < logging.ERROR:
        logger.setLevel(logging.ERROR)


def _describe(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _clean_page(text: str) -> str:
    """One page's text: LF line ends, no trailing blanks, bullets as ``-``, ends with one newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    lines = []
    for line in text.split("\n"):
        line = _BULLET.sub(r"\1- ", line.rstrip())
        lines.append(_escape(line))
    body = "\n".join(lines).strip("\n")
    return body + "\n" if body else ""


def _escape(line: str) -> str:
    stripped = line.lstrip(" ")
    if stripped and len(line) - len(stripped) <= 3 and _MD_LINE_START.match(stripped):
        return "\\" + line
    return line


def _outline(reader: Any) -> list[_OutlineEntry]:
    """Outline entries in document order with their depth (1 = top) and 0-based page."""
    entries: list[_OutlineEntry] = []
    try:
        outline = reader.outline
    except Exception:
        return entries
    stack: list[tuple[list[Any], int, int]] = [(outline, 0, 1)]
    while stack:
        items, index, level = stack.pop()
        if index >= len(items):
            continue
        stack.append((items, index + 1, level))
        item = items[index]
        if isinstance(item, list):
            stack.append((item, 0, level + 1))
            continue
        try:
            title = " ".join(str(item.title or "").split())
            page = reader.get_destination_page_number(item)
        except Exception:
            continue
        if title and page is not None and page >= 0:
            entries.append(_OutlineEntry(title, min(level, _MAX_LEVEL), page))
    return entries


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def _place_headings(page: str, entries: list[_OutlineEntry]) -> tuple[str, int]:
    """Write the page's outline entries into it as ATX headings; return the page and how many were found.

    Entries are looked for in outline order, each after the previous one found. An entry not found
    goes to the top of the page when no earlier entry of the page was found (a bookmark usually
    points at the top), else right before the next entry found, or at the end of the page, so
    headings stay in outline order and never take over the text of the heading before them.
    """
    lines = page.split("\n") if page else []
    cursor = 0
    hits: list[int | None] = []
    for entry in entries:
        wanted = _fold(entry.title)
        hit = None
        for index in range(cursor, len(lines)):
            line = lines[index].lstrip("\\").strip()
            folded = _fold(line)
            if (
                folded == wanted
                or _fold(_SECTION_NUMBER.sub("", line, count=1)) == wanted
                or (
                    folded.startswith(wanted)
                    and len(folded) > len(wanted)
                    and not folded[len(wanted)].isalnum()
                )
            ):
                hit = index
                break
        hits.append(hit)
        if hit is not None:
            cursor = hit + 1
    before: dict[int, list[str]] = {}  # line index -> headings inserted before it (len(lines): at the end)
    replaced: dict[int, list[str]] = {}
    for number, (entry, hit) in enumerate(zip(entries, hits, strict=True)):
        marker = "#" * entry.level + " "
        if hit is None:
            if not any(h is not None for h in hits[:number]):
                where = 0
            else:
                where = next((h for h in hits[number + 1 :] if h is not None), len(lines))
            before.setdefault(where, []).append(marker + entry.title)
            continue
        line = lines[hit].lstrip("\\").strip()
        numbered = _fold(_SECTION_NUMBER.sub("", line, count=1)) == _fold(entry.title)
        rest = "" if numbered else line[len(entry.title) :].strip()
        if rest and _fold(line[: len(entry.title)]) == _fold(entry.title):
            replaced[hit] = [marker + line[: len(line) - len(rest)].strip(), rest]
        else:
            replaced[hit] = [marker + line]
    out: list[str] = []

    def add(line: str, heading: bool) -> None:
        # A heading is its own block: blank lines around it keep the next text out of its line.
        if heading and out and out[-1] != "":
            out.append("")
        out.append(line)
        if heading:
            out.append("")

    for index in range(len(lines) + 1):
        for heading in before.get(index, ()):
            add(heading, True)
        if index == len(lines):
            break
        if index in replaced:
            first, *rest_lines = replaced[index]
            add(first, True)
            for line in rest_lines:
                add(line, False)
        else:
            add(lines[index], False)
    while out and out[-1] == "":
        out.pop()
    return ("\n".join(out) + "\n" if out else ""), sum(hit is not None for hit in hits)
