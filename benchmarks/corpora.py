"""Where the shared corpora are, said once for every benchmark.

``$CHUNKYARD_CORPORA`` when set, else ``../shared/corpora`` beside the checkout. A benchmark that
reads a corpus asks ``markdown_files``, which fails naming the folder and the variable when it holds
no Markdown: a missing corpus is an error, never a row of zero seconds (as it was from a git worktree,
whose ``..`` is not the checkout's).
"""

from __future__ import annotations

import os
from pathlib import Path

CORPORA_ENV = "CHUNKYARD_CORPORA"
MARKDOWN_CORPORA = ("rust-book", "k8s-enhancements", "hugo-docs")  # the shared Markdown corpora
HTML_CORPUS = "httpd-manual"


def shared_corpora() -> Path:
    """The folder of the shared corpora (not checked: see ``markdown_files``)."""
    configured = os.environ.get(CORPORA_ENV, "").strip()
    return (
        Path(configured) if configured else Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
    )


CORPORA = shared_corpora()


def markdown_files(folder: Path) -> list[Path]:
    """Every ``*.md`` file under ``folder`` outside hidden folders, sorted; SystemExit if there is none."""
    files = [
        path
        for path in sorted(folder.rglob("*.md"))
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    ]
    if not files:
        raise SystemExit(
            f"no Markdown files under {folder}: the shared corpora are looked for at {CORPORA} "
            f"(set {CORPORA_ENV} to where they are)"
        )
    return files


def corpus_folder(path: Path) -> Path:
    """``path`` itself when it is a folder, else the shared corpus of that name (``k8s-enhancements``)."""
    return path if path.is_dir() or path.is_absolute() else CORPORA / path
