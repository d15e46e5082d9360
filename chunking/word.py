"""DOCX → Markdown-like text: the text that Word documents are chunked and stored as.

Method. ``python-docx`` opens the package; the body's paragraphs and tables are walked in document
order, also inside content controls (``w:sdt``; not Word's generated table of contents), and written
as Markdown, so the Markdown scanner (``chunkyard.chunking.markdown.scan``) finds sections, procedures, lists,
tables and code in the result. A paragraph's text is every run Word shows (tracked insertions, smart
tags, fields and inline content controls included; deleted text, text boxes and ruby annotations
not):

* a paragraph styled ``Title`` or ``Heading 1``..``Heading 9`` becomes an ATX heading: ``Heading n``
  is level n, or n + 1 when the document has a ``Title`` paragraph, which is then level 1 (capped
  at 6); the ``Title`` paragraph (else the core property ``title``) is the document title;
* a list paragraph (numbering ``numPr`` on the paragraph or its style, or a ``List Number`` /
  ``List Bullet`` style) becomes ``1.`` or ``-`` item: the numbering definition's ``numFmt`` decides
  ordered or bulleted, the level (``ilvl``, else the style's trailing digit) indents it by 3 spaces
  per level; ordered items are counted per list and level, as Word numbers them; consecutive items
  are written on consecutive lines (a tight list);
* a table becomes a pipe table with its first row as the header (cell text, with the text of tables
  nested in the cell, on one line, ``|`` escaped; a merged cell written once, the positions it
  covers empty); an empty table is dropped;
* paragraphs in code-like styles (a style name holding ``Code``, ``Source`` or ``Preformatted``)
  are gathered into one fenced code block;
* other paragraphs are written as they are, blocks separated by a blank line; a line the Markdown
  scanner would misread (``#``, fences, setext underlines) is escaped with a backslash;
* footnotes and endnotes follow the body under a ``Footnotes`` / ``Endnotes`` heading (at the level
  of the top headings), one ``[^3]: text`` paragraph each; a reference in the text is its marker
  (``[^3]``, ``[^e3]`` for an endnote). Headers, footers and comments are left out.

Failures are reasons: ``DocxUnusable`` says the file is not a readable Word document.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any

from chunkyard.chunking.config import LimitsConfig
from chunkyard.chunking.errors import MissingExtra

_MAX_LEVEL = 6
_HEADING_STYLE = re.compile(r"^heading ([1-9])$", re.IGNORECASE)
_TRAILING_DIGIT = re.compile(r"\s([2-9])$")
_CODE_STYLE = re.compile(r"code|source|preformatted", re.IGNORECASE)
_MD_LINE_START = re.compile(r"#{1,6}(?:[ \t]|$)|`{3}|~{3}|[=-]+[ \t]*$")
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


class DocxUnusable(Exception):
    """The DOCX cannot be used; ``str(exc)`` is the reason recorded in the manifest."""


@dataclass
class DocxExtraction:
    """The extracted text of one Word document and what was found in it."""

    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def extract_docx(raw: bytes, limits: LimitsConfig | None = None) -> DocxExtraction:
    """Extract the Markdown-like text of a DOCX; raise ``DocxUnusable`` when it cannot be read.

    Bounded work: the zip's directory is read first and the package refused when its XML members
    would inflate past ``limits.max_inflated_mb`` or all its members past ``limits.max_file_mb`` (a
    61 KB DOCX can hold 20 MB of paragraphs); ``zipfile`` never inflates a member past the size its
    directory declares, so the check holds for a package that lies about its sizes.
    """
    _check_inflated_size(raw, limits or LimitsConfig())
    try:
        import docx
        from docx.table import Table
    except ImportError:  # python-docx is in the office extra
        raise MissingExtra("DOCX support", "office") from None
    try:
        document = docx.Document(io.BytesIO(raw))
        items = list(_block_items(document.element.body, document))
    except Exception as exc:
        message = " ".join(str(exc).split())
        raise DocxUnusable(
            f"broken DOCX: {type(exc).__name__}: {message}"
            if message
            else f"broken DOCX: {type(exc).__name__}"
        ) from None
    writer = _Writer(_Numbering(document))
    title = ""
    # With a Title paragraph, the title is the one level-1 heading and Heading n is level n + 1,
    # so the title heads every section path as in Markdown.
    shift = int(any(not isinstance(item, Table) and _style_name(item).lower() == "title" for item in items))
    counts = {"headings": 0, "list_items": 0, "tables": 0}
    for item in items:
        if isinstance(item, Table):
            rows = _table_rows(item)
            if rows:
                writer.block(_pipe_table(rows))
                counts["tables"] += 1
            continue
        style = _style_name(item)
        text = _paragraph_text(item).replace("\r", "")
        heading = _HEADING_STYLE.match(style)
        if style.lower() == "title" or heading:
            line = " ".join(text.split())
            if not line:
                continue
            level = 1 if heading is None else min(int(heading.group(1)) + shift, _MAX_LEVEL)
            if style.lower() == "title" and not title:
                title = line
            writer.block(["#" * level + " " + line])
            counts["headings"] += 1
            continue
        if _CODE_STYLE.search(style):
            writer.code(text)
            continue
        marker = writer.numbering.marker(item, style)
        if not text.strip():
            continue
        if marker is not None:
            level, prefix = marker
            writer.item(level, prefix, text)
            counts["list_items"] += 1
            continue
        writer.block([_escape(line.rstrip()) for line in text.split("\n")])
    for kind, notes in _notes(document):
        writer.block(["#" * min(1 + shift, _MAX_LEVEL) + " " + kind.capitalize()])
        for label, note in notes:
            writer.block([f"[^{label}]: {note}"])
        counts[kind] = len(notes)
    if not title:
        try:
            title = " ".join((document.core_properties.title or "").split())
        except Exception:
            title = ""
    text = writer.finish()
    return DocxExtraction(text, title, {key: value for key, value in counts.items() if value})


_MAX_MEMBERS = 10_000


def _check_inflated_size(raw: bytes, limits: LimitsConfig) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # not a zip: python-docx says why below
    if len(members) > _MAX_MEMBERS:
        raise DocxUnusable(f"DOCX package of {len(members):,} parts (more than {_MAX_MEMBERS:,}); not read")
    xml = sum(m.file_size for m in members if m.filename.lower().endswith((".xml", ".rels")))
    if xml > limits.max_inflated_mb * 1_000_000:
        raise DocxUnusable(
            f"DOCX inflates to {xml / 1e6:.1f} MB of XML, over limits.max_inflated_mb "
            f"({limits.max_inflated_mb:g} MB); not read"
        )
    total = sum(m.file_size for m in members)
    if total > limits.max_file_mb * 1_000_000:
        raise DocxUnusable(
            f"DOCX inflates to {total / 1e6:.1f} MB, over limits.max_file_mb "
            f"({limits.max_file_mb:g} MB); not read"
        )


# python-docx looks a paragraph's style up by scanning every style of the document (for the default
# style, at each paragraph without one): ≈3.5 ms a paragraph here, 177 s for a 4 MB body. One lookup
# per style id and part instead (kept on the part, so it goes with the document).
def _paragraph_style(paragraph: Any) -> Any:
    part = paragraph.part
    styles = getattr(part, "_chunkyard_styles", None)
    if styles is None:
        styles = {}
        part._chunkyard_styles = styles
    key = paragraph._p.style
    if key not in styles:
        styles[key] = paragraph.style
    return styles[key]


def _style_name(paragraph: Any) -> str:
    try:
        style = _paragraph_style(paragraph)
        return (style.name or "") if style is not None else ""
    except Exception:
        return ""


def _escape(line: str) -> str:
    stripped = line.lstrip(" ")
    if stripped and len(line) - len(stripped) <= 3 and _MD_LINE_START.match(stripped):
        return line[: len(line) - len(stripped)] + "\\" + stripped
    return line


def _table_rows(table: Any) -> list[list[str]]:
    rows: list[list[str]] = []
    seen: set[Any] = set()
    for row in table.rows:
        cells = [
            " ".join(_cell_text(cell).split()).replace("|", "\\|") if cell is not None else ""
            for cell in _once(row.cells, seen)
        ]
        if any(cells):
            rows.append(cells)
    return rows


def _once(cells: list[Any], seen: set[Any]) -> list[Any]:
    """The row's cells with None for a grid position a merged cell already covers (python-docx gives
    a merged cell once per column and row it spans): its text is written once, as HTML's spans are.
    ``seen`` holds the ``w:tc`` elements themselves (identity; kept alive so lxml keeps their proxies)."""
    out = []
    for cell in cells:
        out.append(None if cell._tc in seen else cell)
        seen.add(cell._tc)
    return out


def _block_items(element: Any, parent: Any) -> Any:
    """The paragraphs and tables of a body or cell in document order, also those inside block-level
    content controls (``w:sdt``) and custom XML, which python-docx's ``iter_inner_content`` skips."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for child in element.iterchildren():
        if not isinstance(child.tag, str):
            continue  # an XML comment or processing instruction
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            yield Paragraph(child, parent)
        elif tag == "tbl":
            yield Table(child, parent)
        elif tag == "sdt":
            if _is_table_of_contents(child):
                continue  # generated from the headings (with page numbers), like HTML's <nav>
            for content in child.iterchildren(f"{_W}sdtContent"):
                yield from _block_items(content, parent)
        elif tag == "customXml":
            yield from _block_items(child, parent)


def _is_table_of_contents(sdt: Any) -> bool:
    gallery = sdt.find(f"{_W}sdtPr/{_W}docPartObj/{_W}docPartGallery")
    return gallery is not None and gallery.get(f"{_W}val", "").lower() == "table of contents"


# Every run of a paragraph as Word shows it: also those in tracked insertions, smart tags, simple fields
# and inline content controls (python-docx's ``Paragraph.text`` reads only ``w:r`` and ``w:hyperlink``
# children); not deleted or moved-away text, text boxes (a paragraph of their own), the fallback copy
# of alternate content, or ruby annotations.
_VISIBLE_RUNS = (
    ".//w:r[not(ancestor::w:del) and not(ancestor::w:moveFrom) and not(ancestor::w:txbxContent)"
    " and not(ancestor::*[local-name()='Fallback']) and not(ancestor::w:rt)]"
)


def _paragraph_text(paragraph: Any) -> str:
    return "".join(_run_text(run) for run in paragraph._p.xpath(_VISIBLE_RUNS))


def _run_text(run: Any) -> str:
    """python-docx's run text, with a page or column break as a line break (python-docx gives '',
    which glued the words on both sides of it together), and a footnote or endnote reference as its
    Markdown marker (``[^3]``, ``[^e3]``; the notes follow the body, see ``_notes``)."""
    reference = run.find(f"{_W}footnoteReference")
    if reference is None:
        reference = run.find(f"{_W}endnoteReference")
    if reference is not None:
        return f"[^{_note_label(reference.tag.endswith('endnoteReference'), reference.get(f'{_W}id'))}]"
    if run.find(f"{_W}br") is None:
        return run.text
    return "".join(
        "\n" if child.tag == f"{_W}br" else str(child)
        for child in run.xpath("w:br | w:cr | w:noBreakHyphen | w:ptab | w:t | w:tab")
    )


def _note_label(endnote: bool, note_id: str | None) -> str:
    return f"e{note_id}" if endnote else str(note_id)


def _notes(document: Any) -> list[tuple[str, list[tuple[str, str]]]]:
    """The document's footnotes and endnotes, each as (label, text on one line), in their parts'
    order; Word's separator notes are not notes. Empty kinds are left out."""
    from docx.oxml.parser import parse_xml

    out = []
    for kind in ("footnotes", "endnotes"):
        part = next(
            (
                rel.target_part
                for rel in document.part.rels.values()
                if not rel.is_external and rel.reltype.endswith("/" + kind)
            ),
            None,
        )
        if part is None:
            continue
        notes = []
        for note in parse_xml(part.blob).iterchildren(f"{_W}{kind[:-1]}"):
            if note.get(f"{_W}type") in ("separator", "continuationSeparator", "continuationNotice"):
                continue
            text = " ".join(
                " ".join("".join(_run_text(run) for run in paragraph.xpath(_VISIBLE_RUNS)).split())
                for paragraph in note.iterchildren(f"{_W}p")
            )
            text = text.strip()  # the note's own mark (w:footnoteRef, its number) has no text
            if text:
                notes.append((_note_label(kind == "endnotes", note.get(f"{_W}id")), text))
        if notes:
            out.append((kind, notes))
    return out


def _cell_text(cell: Any) -> str:
    """A cell's text with the text of tables nested in it (``cell.text`` has only its own paragraphs)."""
    from docx.table import Table

    parts = []
    for item in _block_items(cell._tc, cell):
        if isinstance(item, Table):
            seen: set[Any] = set()
            parts.extend(
                _cell_text(inner)
                for row in item.rows
                for inner in _once(row.cells, seen)
                if inner is not None
            )
        else:
            parts.append(_paragraph_text(item))
    return "\n".join(parts)


def _pipe_table(rows: list[list[str]]) -> list[str]:
    width = max(len(row) for row in rows)
    padded = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + "|".join([" --- "] * width) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in padded[1:])
    return lines


class _Numbering:
    """Decides whether a paragraph is a list item, its level, and its marker (``1.`` or ``-``)."""

    def __init__(self, document: Any) -> None:
        self.formats: dict[tuple[str, int], tuple[str, int]] = {}  # (numId, ilvl) -> (numFmt, start)
        try:
            root = document.part.numbering_part.element
        except Exception:
            root = None
        if root is not None:
            abstract: dict[str, dict[int, tuple[str, int]]] = {}
            for node in root.iter(f"{_W}abstractNum"):
                levels: dict[int, tuple[str, int]] = {}
                for lvl in node.iter(f"{_W}lvl"):
                    fmt = lvl.find(f"{_W}numFmt")
                    start = lvl.find(f"{_W}start")
                    levels[int(lvl.get(f"{_W}ilvl", "0"))] = (
                        fmt.get(f"{_W}val", "decimal") if fmt is not None else "decimal",
                        int(start.get(f"{_W}val", "1")) if start is not None else 1,
                    )
                abstract[node.get(f"{_W}abstractNumId", "")] = levels
            for num in root.iter(f"{_W}num"):
                ref = num.find(f"{_W}abstractNumId")
                if ref is not None:
                    for level, value in abstract.get(ref.get(f"{_W}val", ""), {}).items():
                        self.formats[(num.get(f"{_W}numId", ""), level)] = value
        self.counters: dict[str, list[int]] = {}

    def marker(self, paragraph: Any, style: str) -> tuple[int, str] | None:
        """(level, marker) for a list paragraph, None for any other paragraph."""
        num_id, ilvl = _num_pr(paragraph._p.pPr)
        if num_id is None:
            try:
                style_obj = _paragraph_style(paragraph)
                while style_obj is not None and num_id is None:
                    num_id, style_ilvl = _num_pr(style_obj.element.pPr)
                    ilvl = ilvl if ilvl is not None else style_ilvl
                    style_obj = style_obj.base_style
            except Exception:
                num_id = None
        lowered = style.lower()
        styled = lowered.startswith(("list number", "list bullet"))
        if num_id == "0" or (num_id is None and not styled):
            return None  # numId 0 switches numbering off
        if ilvl is None or (num_id is not None and not ilvl and _TRAILING_DIGIT.search(style)):
            digit = _TRAILING_DIGIT.search(style)
            ilvl = int(digit.group(1)) - 1 if digit else 0
        level = max(0, min(ilvl, 8))
        # A level the numbering does not define takes the nearest shallower level's format.
        fmt, start = next(
            (
                self.formats[(num_id or "", lvl)]
                for lvl in range(level, -1, -1)
                if (num_id or "", lvl) in self.formats
            ),
            ("", 1),
        )
        if not fmt:
            fmt = "bullet" if "bullet" in lowered or "number" not in lowered else "decimal"
        if fmt in ("bullet", "none"):
            return level, "- "
        key = num_id or lowered.rstrip(" 0123456789")
        counters = self.counters.setdefault(key, [])
        while len(counters) <= level:
            counters.append(0)
        del counters[level + 1 :]  # a shallower item restarts the deeper levels
        counters[level] = counters[level] + 1 if counters[level] else start
        return level, f"{counters[level]}. "


def _num_pr(ppr: Any) -> tuple[str | None, int | None]:
    if ppr is None:
        return None, None
    num_pr = ppr.find(f"{_W}numPr")
    if num_pr is None:
        return None, None
    num_id = num_pr.find(f"{_W}numId")
    ilvl = num_pr.find(f"{_W}ilvl")
    return (
        num_id.get(f"{_W}val") if num_id is not None else None,
        int(ilvl.get(f"{_W}val", "0")) if ilvl is not None else None,
    )


class _Writer:
    """Blocks separated by a blank line; list items on consecutive lines; code gathered into a fence."""

    def __init__(self, numbering: _Numbering) -> None:
        self.numbering = numbering
        self.out: list[str] = []
        self.in_list = False
        self.code_lines: list[str] | None = None

    def _close_code(self) -> None:
        if self.code_lines is None:
            return
        lines, self.code_lines = self.code_lines, None
        while lines and not lines[-1].strip():
            lines.pop()
        if lines:
            longest = max((len(line) - len(line.lstrip("`")) for line in lines), default=0)
            fence = "`" * max(3, longest + 1)
            self._emit([fence, *lines, fence], tight=False)

    def _emit(self, lines: list[str], *, tight: bool) -> None:
        if self.out:
            self.out.append("\n" if tight else "\n\n")
        self.out.append("\n".join(lines))

    def block(self, lines: list[str]) -> None:
        self._close_code()
        self.in_list = False
        self._emit(lines, tight=False)

    def item(self, level: int, marker: str, text: str) -> None:
        self._close_code()
        indent = "   " * level
        first, *rest = [line.rstrip() for line in text.strip("\n").split("\n")]
        lines = [indent + marker + first.strip()]
        lines.extend(indent + "   " + line.strip() for line in rest if line.strip())
        self._emit(lines, tight=self.in_list)
        self.in_list = True

    def code(self, text: str) -> None:
        if self.code_lines is None:
            self.in_list = False
            self.code_lines = []
        self.code_lines.extend(line.rstrip() for line in text.split("\n"))

    def finish(self) -> str:
        self._close_code()
        text = "".join(self.out)
        return text + "\n" if text else ""
