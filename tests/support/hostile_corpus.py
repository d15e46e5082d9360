"""Generate the hostile corpus of issue 9: files real corpora contain that a chunker must survive.

Nothing binary is committed: every file is built here, deterministically, from code. Use it from a
test (``build_hostile_corpus(tmp_path / "src")``) or by hand::

    python tests/support/hostile_corpus.py /tmp/hostile [--large-mb 50 --line-mb 10 --script-mb 5]

The result says what should happen to each file: ``good`` maps the doc_id of every file that must
reach the dataset to the exact text expected there (``None`` where the text is extracted, e.g.
HTML), ``bad`` maps the doc_id of every file that must be skipped to the exact reason (or a prefix
of it ending in ``*``) the manifest must give.

Sizes are parameters: CI uses a few MB (issue 9 asks for a 50 MB file and a 10 MB line; pass
``--large-mb 50 --line-mb 10`` to try those). ``unreadable`` is only generated when the process
cannot read a ``chmod 000`` file, i.e. not as root (root reads it anyway); the result records why
it was left out.
"""

from __future__ import annotations

import argparse
import codecs
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

MB = 1_000_000


@dataclass
class HostileCorpus:
    root: Path
    good: dict[str, str | None] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)
    not_generated: dict[str, str] = field(default_factory=dict)  # case -> why it was left out

    def reason_matches(self, doc_id: str, reason: str) -> bool:
        expected = self.bad[doc_id]
        return reason.startswith(expected[:-1]) if expected.endswith("*") else reason == expected


def _paragraphs(n_bytes: int, seed: str) -> str:
    """Readable prose of about ``n_bytes`` UTF-8 bytes, deterministic, with paragraph breaks."""
    words = (
        "chunk",
        "boundary",
        "review",
        "ledger",
        "snapshot",
        "corpus",
        "token",
        "budget",
        "heading",
        "procedure",
        "table",
        "overlap",
        "retrieval",
        "vector",
        "Zürich",
        "naïve",
        "café",
    )
    out: list[str] = []
    size, i = 0, len(seed)
    while size < n_bytes:
        sentence = " ".join(words[(i * 7 + k * 3) % len(words)] for k in range(12)).capitalize() + "."
        out.append(sentence)
        size += len(sentence.encode("utf-8")) + 1
        i += 1
        if i % 6 == 0:
            out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n") + "\n"


def _write(
    corpus: HostileCorpus,
    rel: str,
    data: bytes,
    *,
    good: str | None = None,
    text: bool = True,
    bad: str | None = None,
) -> Path:
    path = corpus.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if bad is not None:
        corpus.bad[rel] = bad
    else:
        corpus.good[rel] = good if good is not None or not text else data.decode("utf-8")
    return path


def make_deep(root: Path, depth: int) -> Path:
    """``root/d/d/.../d`` (``depth`` levels), made one level at a time: ``Path.mkdir(parents=True)``
    and ``os.makedirs`` recurse and raise RecursionError this deep."""
    folder = root
    for _ in range(depth):
        folder = folder / "d"
        folder.mkdir(exist_ok=True)
    return folder


def build_hostile_corpus(
    root: Path,
    *,
    large_mb: float = 8,
    line_mb: float = 4,
    script_mb: float = 5,
    depth: int = 1200,
    headings: int = 10_000,
) -> HostileCorpus:
    """Write the hostile corpus under ``root`` (created) and say what must become of each file."""
    root.mkdir(parents=True, exist_ok=True)
    corpus = HostileCorpus(root)

    # A plain good file, so the run has something ordinary too.
    _write(corpus, "good.md", b"# Good\n\nAn ordinary page that chunks without trouble.\n")

    # Encodings.
    head = b"# Mixed\n\nValid text first, then one bad byte.\n"
    _write(
        corpus,
        "invalid-utf8-mid.md",
        head + b"\xff\xfe broken\n" + b"more text\n" * 100,
        bad=f"not valid UTF-8 at byte {len(head)}",
    )
    utf16 = "Ünïcödé text in UTF-16 with a byte-order mark.\n\nSecond paragraph: 日本語.\n"
    _write(corpus, "utf16-bom.txt", codecs.BOM_UTF16_LE + utf16.encode("utf-16-le"), good=utf16)
    _write(
        corpus,
        "latin1.txt",
        "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"),
        bad="not valid UTF-8 at byte 3",
    )
    _write(corpus, "nul-bytes.txt", b"text\x00with\x00NULs\n", bad="binary file (NUL bytes)")
    # NUL bytes after the 8 kB sniffing window are caught after decoding.
    _write(corpus, "late-nul.txt", b"a" * 9000 + b"\x00tail\n", bad="binary file (NUL bytes)")
    _write(corpus, "empty.md", b"", bad="empty file")
    _write(
        corpus, "whitespace.txt", b" \n\t\n  \n", bad="no text (empty or whitespace only after extraction)"
    )

    # Size.
    _write(corpus, "large.txt", _paragraphs(int(large_mb * MB), "large").encode())
    _write(corpus, "one-line.txt", (("word " * (int(line_mb * MB) // 5)).rstrip() + "\n").encode())

    # Names.
    _write(corpus, "name with spaces ünïcödé 🦆.md", b"# Spaces\n\nA file with a hostile name.\n")
    try:
        _write(corpus, "line\nbreak.md", b"# Newline\n\nA newline in the file name.\n")
    except OSError as exc:  # pragma: no cover - filesystems that refuse newlines in names
        corpus.not_generated["newline-name"] = f"filesystem refused it: {exc}"

    # Links, permissions, special files.
    (root / "loop.md").symlink_to(root / "loop.md")
    corpus.bad["loop.md"] = "symlink loop"
    (root / "loop-a.md").symlink_to(root / "loop-b.md")
    (root / "loop-b.md").symlink_to(root / "loop-a.md")
    corpus.bad["loop-a.md"] = corpus.bad["loop-b.md"] = "symlink loop"
    (root / "dangling.md").symlink_to(root / "no-such-target.md")
    corpus.bad["dangling.md"] = "broken symbolic link (its target does not exist)"
    (root / "folder-link").symlink_to(root, target_is_directory=True)  # a folder loop: not followed
    locked = root / "unreadable.md"
    locked.write_text("# Locked\n\nchmod 000\n", encoding="utf-8")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads it anyway: not a test of anything, leave it out
        locked.unlink()
        corpus.not_generated["unreadable"] = "running as root: chmod 000 does not stop root from reading"
    else:
        corpus.bad["unreadable.md"] = "permission denied"
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "pipe.txt")
        corpus.bad["pipe.txt"] = "not a regular file"

    # Folders.
    _write(corpus, "notes.md/inside.txt", b"A file inside a folder named like a Markdown file.\n")
    # Deeper than Python's recursion limit (a recursive walk raised RecursionError), short names so
    # the path stays under PATH_MAX.
    make_deep(root, depth)
    _write(corpus, "/".join(["d"] * depth) + "/bottom.md", b"# Bottom\n\nFound at the bottom.\n")

    # Structure that stresses the chunkers.
    _write(
        corpus,
        "many-headings.md",
        "".join(f"{'#' * (1 + i % 6)} Heading {i}\n\nBody {i}.\n\n" for i in range(headings)).encode(),
    )
    script = "var x = '" + "s" * int(script_mb * MB) + "';"
    html = (
        "<html><head><title>Unclosed</title><script>" + script + "</script></head><body>"
        "<h1>Unclosed tags<p>First paragraph <b>bold <i>italic<div>stray div<ul><li>one<li>two"
        "<table><tr><td>cell</table><p>Last words"
    )
    _write(corpus, "unclosed.html", html.encode(), good=None, text=False)
    _write(corpus, "syntax-error.py", b"def broken(:\n    return 1\n\nclass Fine:\n    x = 1\n")
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--large-mb", type=float, default=8)
    parser.add_argument("--line-mb", type=float, default=4)
    parser.add_argument("--script-mb", type=float, default=5)
    parser.add_argument("--depth", type=int, default=1200)
    args = parser.parse_args(argv)
    corpus = build_hostile_corpus(
        args.root, large_mb=args.large_mb, line_mb=args.line_mb, script_mb=args.script_mb, depth=args.depth
    )
    print(f"{args.root}: {len(corpus.good)} good, {len(corpus.bad)} bad files")
    for case, why in corpus.not_generated.items():
        print(f"  not generated: {case}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
