"""``chunkyard preview CONFIG FILE`` as a user runs it: a file argument that is not a readable file
is one clear line and exit 2 (never a hang, never a wrong reason), and a reader that stops early
(``| head``) ends the command quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def preview(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.yaml"
    if not config.exists():
        (tmp_path / "docs").mkdir(exist_ok=True)
        config.write_text(
            "name: kb\nversion: 1\nsource: {path: docs}\n"
            "chunker: {strategy: auto, unit: chars, max_size: 200}\n",
            encoding="utf-8",
        )
    return subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "preview", str(config), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def test_preview_of_a_missing_file_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "docs" / "missing.md"
    result = preview(tmp_path, str(missing))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"chunkyard: error: {missing}: no such file"


def test_preview_of_a_folder_says_it_needs_a_file(tmp_path: Path) -> None:
    result = preview(tmp_path, str(tmp_path / "docs"))
    assert result.returncode == 2, result.stderr
    assert "is a folder" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_preview_of_a_fifo_does_not_block(tmp_path: Path) -> None:
    """``run`` skips a FIFO without opening it; preview used to open it and wait for a writer forever."""
    fifo = tmp_path / "docs" / "pipe.md"
    (tmp_path / "docs").mkdir()
    os.mkfifo(fifo)
    result = preview(tmp_path, str(fifo), timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"chunkyard: error: {fifo}: not a regular file"


def test_preview_into_a_reader_that_stops_early_is_quiet(tmp_path: Path) -> None:
    """``chunkyard preview ... | head -1``: no 'broken pipe (nothing was published ...)' error."""
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "long.md"
    doc.write_text(
        "".join(f"# Part {i}\n\n" + "Some words in a sentence. " * 20 + "\n\n" for i in range(400)),
        encoding="utf-8",
    )
    preview(tmp_path, "--help")  # writes the config
    command = [
        sys.executable,
        "-m",
        "chunkyard.flows.cli",
        "preview",
        str(tmp_path / "config.yaml"),
        str(doc),
        "--text",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read().decode()
        process.wait(timeout=60)
    assert stderr == ""
    assert process.returncode != 0


def test_preview_of_a_good_file_still_works(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "a.md"
    doc.write_text("# Title\n\nSome text.\n", encoding="utf-8")
    result = preview(tmp_path, str(doc), "--json")
    assert result.returncode == 0, result.stderr
    assert '"section_path": ["Title"]' in result.stdout


def test_preview_says_when_a_run_would_not_chunk_the_file(tmp_path: Path) -> None:
    """preview chunks any file it is given; for one the config leaves out (or outside the source folder)
    it now says so, so that a preview is not mistaken for what the dataset holds."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "config.yaml").write_text(
        "name: kb\nversion: 1\nsource: {path: docs, exclude: ['drafts/**']}\n"
        "chunker: {strategy: auto, unit: chars, max_size: 200}\n",
        encoding="utf-8",
    )
    (tmp_path / "docs" / "drafts").mkdir()
    for path in (tmp_path / "docs" / "drafts" / "a.md", tmp_path / "docs" / "b.md", tmp_path / "c.md"):
        path.write_text("# Title\n\nSome text.\n", encoding="utf-8")
    left_out = preview(tmp_path, str(tmp_path / "docs" / "drafts" / "a.md"))
    assert left_out.returncode == 0 and "drafts/a.md is not in the dataset" in left_out.stderr
    included = preview(tmp_path, str(tmp_path / "docs" / "b.md"))
    assert included.returncode == 0 and included.stderr == ""
    outside = preview(tmp_path, str(tmp_path / "c.md"))
    assert outside.returncode == 0 and "is outside the source folder" in outside.stderr
