"""Generate the attack corpus of issue 20: files crafted to leak data into a dataset, or to stop or stall a run.

Like ``hostile_corpus.py``, nothing binary is committed: every file is built here from code. Use it from
a test (``build_attack_corpus(tmp_path)``) or by hand::

    python tests/support/attack_corpus.py /tmp/attack [--docx-mb 20 --pdf-pages 20]

It makes ``ROOT/src`` (the source folder) and ``ROOT/outside`` (a folder next to it holding
``secret.md`` with ``corpus.secret``, a unique string that must never reach a dataset). ``good`` maps
each doc_id that must reach the dataset to its exact stored text (``None`` where the text is
extracted), ``bad`` each doc_id that must be skipped to its reason (or a prefix ending in ``*``).
The reasons assume ``LIMITS`` (``corpus.limits_yaml``, the config's ``limits:`` section); the defaults
are larger, as the README says.

Cases: symlinks to ``/etc/passwd``, to the outside secret, to ``/proc/self/maps``, ``/proc/kmsg`` and
``/dev/zero`` (never read, so never hang); a link inside the source (read); a FIFO, a socket and a
character device inside the source; HTML pages declaring codecs that are not text encodings (rot13,
bz2, zlib, base64, hex, uu, quopri, unicode_escape); front matter alias bombs (9 × 9 and 6 × 9 fan-out, as the 461- and 323-byte ones of the issue:
metadata dropped with ``front_matter_error``); a DOCX that inflates past ``max_inflated_mb`` (61 KB →
20 MB in the issue); a PDF whose page content streams decode past it (20 pages × 1 MB); a DOCX under
the inflation limit that takes far longer than ``document_seconds`` to extract (abandoned); text over
``max_text_mb`` and a file over ``max_file_mb``.
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import stat
import sys
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

MB = 1_000_000
LIMITS = {"max_file_mb": 10, "max_text_mb": 2, "max_inflated_mb": 8, "document_seconds": 3}
CODECS = ("rot13", "bz2", "zlib", "base64", "hex", "uu", "quopri", "unicode_escape")


@dataclass
class AttackCorpus:
    root: Path  # the source folder
    outside: Path  # a folder next to it, never to be read
    secret: str  # a unique string in ``outside/secret.md``
    good: dict[str, str | None] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)
    not_generated: dict[str, str] = field(default_factory=dict)  # case -> why it was left out
    front_matter_bombs: list[str] = field(default_factory=list)

    @property
    def limits_yaml(self) -> str:
        return "limits: {" + ", ".join(f"{key}: {value}" for key, value in LIMITS.items()) + "}\n"

    def reason_matches(self, doc_id: str, reason: str) -> bool:
        expected = self.bad[doc_id]
        return reason.startswith(expected[:-1]) if expected.endswith("*") else reason == expected


def _prose(n_chars: int) -> str:
    words = ("chunk", "boundary", "review", "ledger", "snapshot", "corpus", "token", "budget", "heading")
    out, size, i = [], 0, 0
    while size < n_chars:
        sentence = " ".join(words[(i * 5 + k) % len(words)] for k in range(10)).capitalize() + "."
        out.append(sentence)
        size += len(sentence) + 1
        i += 1
    return " ".join(out) + "\n"


def docx_bytes(paragraphs: list[str] | None = None, *, inflate_mb: float = 0) -> bytes:
    """A real DOCX (made by python-docx), optionally with its body replaced by ``inflate_mb`` MB of
    repeated paragraphs: a few kB compressed, ``inflate_mb`` MB of XML inflated."""
    import docx

    document = docx.Document()
    for text in paragraphs or ["Attack corpus"]:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    if not inflate_mb:
        return buffer.getvalue()
    paragraph = (
        "<w:p><w:r><w:t>A paragraph repeated to inflate the package, again and again.</w:t></w:r></w:p>"
    )
    body = paragraph * int(inflate_mb * MB / len(paragraph))
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target,
    ):
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "word/document.xml":
                text = data.decode("utf-8")
                start = text.index("<w:body>") + len("<w:body>")
                data = (text[:start] + body + text[start:]).encode("utf-8")
            target.writestr(item, data, compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def pdf_bytes(pages: int, stream_mb: float = 0, text: str = "Attack corpus page") -> bytes:
    """A PDF of ``pages`` pages, each showing ``text`` and padded with ``stream_mb`` MB of (cheap to
    compress) drawing operators in its Flate content stream."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    font_ref = writer._add_object(font)
    padding = b"q Q\n" * int(stream_mb * MB / 4)
    for number in range(1, pages + 1):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref})}
        )
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text} {number}.) Tj ET\n".encode() + padding)
        page[NameObject("/Contents")] = writer._add_object(stream)
        page.compress_content_streams()
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _alias_bomb_front_matter(levels: int, fan_out: int) -> str:
    names = "abcdefghij"
    lines = [f"{names[0]}: &{names[0]} [" + ",".join(['"lol"'] * fan_out) + "]"]
    for previous, name in zip(names, names[1:levels], strict=False):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * fan_out) + "]")
    return "---\n" + "\n".join(lines) + "\n---\n# Bomb\n\nThe body is fine.\n"


def build_attack_corpus(
    root: Path,
    *,
    docx_mb: float = 20,
    pdf_pages: int = 20,
    slow_docx_mb: float = 6,
) -> AttackCorpus:
    """Build the corpus under ``root`` (``root/src``, ``root/outside``); see the module docstring."""
    source, outside = root / "src", root / "outside"
    source.mkdir(parents=True)
    outside.mkdir()
    corpus = AttackCorpus(source, outside, f"CHUNKYARD-SECRET-{uuid.uuid4().hex}")
    (outside / "secret.md").write_text(f"# Secret\n\n{corpus.secret}\n", encoding="utf-8")

    def write(
        rel: str, data: bytes | str, *, good: bool = False, text: bool = True, bad: str | None = None
    ) -> None:
        path = source / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        path.write_bytes(raw)
        if good:
            corpus.good[rel] = raw.decode("utf-8") if text else None
        if bad is not None:
            corpus.bad[rel] = bad

    # Good files, so that a run that skips everything fails the test.
    write("guide.md", "# Guide\n\n" + _prose(3000), good=True)
    write("real/target.md", "# Target\n\nRead through a link that stays inside.\n", good=True)
    write(
        "page.html",
        "<html><head><title>Page</title></head><body><h1>Page</h1><p>Fine.</p></body></html>",
        good=True,
        text=False,
    )
    write("ok.docx", docx_bytes(["A small Word document.", "It is fine."]), good=True, text=False)
    write("ok.pdf", pdf_bytes(2, text="A small PDF"), good=True, text=False)

    # 1. Links: out of the source never read; inside read (source.follow_links: inside, the default).
    (source / "inside.md").symlink_to(source / "real" / "target.md")
    corpus.good["inside.md"] = corpus.good["real/target.md"]
    links = {
        "passwd.txt": "/etc/passwd",
        "s.md": str(outside / "secret.md"),
        "maps.txt": "/proc/self/maps",
        "kmsg.txt": "/proc/kmsg",
        "zero.txt": "/dev/zero",
    }
    for name, target in links.items():
        (source / name).symlink_to(target)
        if not os.path.lexists(target) or not os.path.exists(target):
            corpus.bad[name] = "broken symbolic link (its target does not exist)"
        else:
            corpus.bad[name] = (
                f"symbolic link to {os.path.realpath(target)}, outside the source folder (not read)"
            )
    corpus.bad["maps.txt"] = "symbolic link to /proc/*"  # /proc/self resolves to the run's own pid
    (source / "up").symlink_to(outside, target_is_directory=True)  # a folder link: never followed

    # 2. Special files inside the source: never opened.
    os.mkfifo(source / "fifo.md")
    corpus.bad["fifo.md"] = "not a regular file"
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(source / "socket.md"))
        server.close()
        corpus.bad["socket.md"] = "not a regular file"
    except OSError as exc:  # a path longer than sun_path allows
        corpus.not_generated["socket"] = f"cannot bind a socket there: {exc}"
    try:
        os.mknod(source / "zero-device.txt", stat.S_IFCHR | 0o600, os.makedev(1, 5))
        corpus.bad["zero-device.txt"] = "not a regular file"
    except (OSError, AttributeError) as exc:  # not root, or no mknod
        corpus.not_generated["device"] = f"cannot create a device node: {exc}"

    # 3. HTML declaring a codec that is not a text encoding (131 bytes in the issue), not UTF-8.
    for codec in CODECS:
        raw = f'<html><head><meta charset="{codec}"><title>T</title></head><body><p>caf\xe9</p></body></html>'
        data = raw.encode("latin-1")
        at = data.index(b"\xe9")
        write(
            f"charset-{codec}.html",
            data,
            bad=f"not valid UTF-8 at byte {at}, and its declared "
            f"charset {codec!r} is unknown (not a label of the WHATWG Encoding "
            "Standard)",
        )

    # 4. Front matter alias bombs: the file is good, its metadata is dropped with the reason.
    for name, (levels, fan_out) in {"bomb-9x9.md": (9, 9), "bomb-6x9.md": (6, 9)}.items():
        write(name, _alias_bomb_front_matter(levels, fan_out), good=True)
        corpus.front_matter_bombs.append(name)

    # 5. Bounded work per document.
    inflated = docx_bytes(inflate_mb=docx_mb)
    xml_mb = (
        sum(
            i.file_size
            for i in zipfile.ZipFile(io.BytesIO(inflated)).infolist()
            if i.filename.endswith((".xml", ".rels"))
        )
        / MB
    )
    write(
        "bomb.docx",
        inflated,
        bad=f"DOCX inflates to {xml_mb:.1f} MB of XML, over limits.max_inflated_mb "
        f"({LIMITS['max_inflated_mb']} MB); not read",
    )
    write("bomb.pdf", pdf_bytes(pdf_pages, stream_mb=1), bad="page content streams of more than *")
    # Under the inflation limit, but python-docx needs far longer than document_seconds for it.
    write(
        "slow.docx",
        docx_bytes(inflate_mb=slow_docx_mb),
        bad=f"abandoned: still being read or chunked after {LIMITS['document_seconds']} s "
        "(limits.document_seconds)",
    )
    big_text = "# Big\n\n" + _prose(int(LIMITS["max_text_mb"] * MB * 1.2))
    write(
        "big-text.md",
        big_text,
        bad=f"extracted text of {len(big_text) / MB:.1f} million characters is over "
        f"limits.max_text_mb ({LIMITS['max_text_mb']})",
    )
    huge = "# Huge\n\n" + _prose(int(LIMITS["max_file_mb"] * MB * 1.1))
    write(
        "huge.md",
        huge,
        bad=f"file of {len(huge) / MB:.1f} MB is over limits.max_file_mb ({LIMITS['max_file_mb']} MB)",
    )
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--docx-mb", type=float, default=20)
    parser.add_argument("--pdf-pages", type=int, default=20)
    args = parser.parse_args(argv)
    corpus = build_attack_corpus(args.root, docx_mb=args.docx_mb, pdf_pages=args.pdf_pages)
    print(
        f"{corpus.root}: {len(corpus.good)} good, {len(corpus.bad)} bad files; limits for the config: "
        f"{corpus.limits_yaml.strip()}"
    )
    for case, why in corpus.not_generated.items():
        print(f"  not generated: {case}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
