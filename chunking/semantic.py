"""Semantic strategy: chunks end where the topic changes, found with sentence embeddings.

Method. The text is cut into units with exact offsets: sentences, paragraphs, and lines that start
a list item, a heading or a table row (hard-wrapped lines are not units). Every unit is embedded
with wordllama's static 256-d embeddings, which ship inside its wheel (loaded once per process,
never downloaded), in one batched call per document. At each gap between units the mean embedding
of the ``window`` units before is compared with the mean of the ``window`` units after (cosine).
Gaps whose similarity is among the lowest ``threshold`` fraction of the document's gaps are topic
shifts and score 61–89, lower similarity higher, so they outrank paragraph breaks (60). The other
gaps keep their kind's band, again graded by dissimilarity: paragraph breaks 40–59, sentence and
line gaps 20–29. The packer then picks, within the budget, the best-scored gap in the last three
quarters of each chunk's reach: unlike the peer semantic splitters ours always keeps ``max_size``.

In a Markdown file (or HTML, whose extracted text is Markdown) the scanner's structure stays in
charge: headings open chunks, code blocks, tables and lists are kept whole when they fit, and
code blocks and tables are not embedded. Word and grapheme gaps exist only inside a unit larger
than the budget (``chunkyard.chunking.oversize``).

Measured on 60 documents glued from four unrelated prose passages each (rust-book and KEP
paragraphs, 256-token budget), the junctions became chunk boundaries 56% of the time with the
defaults (window 3, quantile 0.2, last three quarters of the reach), against 13% for ``sentence``
and ``recursive``; window 1 gave 44%, window 2 51%; fill 0.5 gave 45%.

``threshold`` is a quantile rather than an absolute cosine because the static embeddings' cosines
depend on the text: on the sample corpus, adjacent two-sentence windows have a median similarity
of about 0.2 (window 2), and an absolute cut that suits one document marks every gap of another.
Scores are graded, so the threshold matters less than the window: 0.05 to 0.3 gave the same recall.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import regex

from chunkyard.chunking.errors import ChunkyardError, import_extra
from chunkyard.chunking.layout import HTML_SUFFIXES, MARKDOWN_SUFFIXES, Layout, file_title
from chunkyard.chunking.markdown import scan
from chunkyard.chunking.oversize import BudgetProbe, fallback_boundaries
from chunkyard.chunking.packer import Plan
from chunkyard.chunking.settings import ChunkerBase, SemanticSettings

TOPIC_LOW, TOPIC_HIGH = 61, 89
PARAGRAPH_LOW, PARAGRAPH_HIGH = 40, 59
SENTENCE_LOW, SENTENCE_HIGH = 20, 29
FILL = 0.25  # chunks may end anywhere in the last three quarters of the reach
# The segmenter's price of one more chunk: low, so cutting at a topic shift (price 0–5) rather than at a
# sentence gap (16–25) is worth a chunk more.
CHUNK_PRICE = 2

MAX_EMBED_CHARS = 2000  # wordllama does not truncate; a giant unit would pad the whole batch
EMBEDDING_DIM = 256  # the bundled wordllama model's dimension
BATCH_SIZE = 64

_PARAGRAPH_BREAK = regex.compile(r"\n[^\S\n]*\n\s*")
_SENTENCE_END = regex.compile(
    r"[.!?…]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[\p{Lu}\p{N}\p{Lo}])|[。！？]+[\"'”’)\]」』]*\s*"
)
_LINE = regex.compile(r"\r\n|\r|\n")
# A line that begins a unit of its own even without a blank line before it.
_ITEM_START = regex.compile(r"[^\S\n]*(?:[-*+•‣◦]\s|\d{1,9}[.)]\s|#{1,6}\s|>|\||(?i:step)\s+\d)")
_UNIT_END = regex.compile(r"[.!?…:;。！？][\"'”’)\]]*[^\S\n]*$")
_HEADING_LINE = regex.compile(r"[^\S\n]{0,3}#{1,6}\s")
# A period after these does not end a sentence: list numbers ("3. Setup"), initials, abbreviations.
_NOT_A_SENTENCE = regex.compile(
    r"(?:^|\s)(?:\d{1,9}|\p{L}|(?i:mr|mrs|ms|dr|prof|sr|jr|st|vs|etc|e\.g|i\.e|cf|no|fig|approx|inc|ltd|co))$"
)


class EmbeddingModelError(ChunkyardError):
    """The sentence embedding model is missing or cannot be loaded offline."""


@dataclass(frozen=True, slots=True)
class Unit:
    start: int
    end: int
    gap: str  # kind of the gap before it: "paragraph", "sentence" or "line" ("" for the first)


# ---------------------------------------------------------------------------------------------
# The model


_model: Any = None
_model_lock = threading.Lock()


def load_model() -> Any:
    """wordllama's bundled 256-d model, loaded once per process from the wheel (thread-safe)."""
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                wordllama = import_extra("wordllama", "The semantic strategy", "eval")
                WordLlama = wordllama.WordLlama  # noqa: N806 - the library's class
                try:
                    # load() looks for the weights in the wrong folder; they ship beside the package.
                    _model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
                except (OSError, ValueError) as exc:
                    raise EmbeddingModelError(f"cannot load the wordllama model offline: {exc}") from None
    return _model


def embed(texts: list[str]) -> np.ndarray:
    """Unit-length embeddings of ``texts`` (rows in input order), batched by length."""
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    model = load_model()
    clipped = [text[:MAX_EMBED_CHARS] for text in texts]
    # Sorting by length keeps padding small; a stable sort keeps the result deterministic.
    order = sorted(range(len(clipped)), key=lambda i: len(clipped[i]))
    vectors = model.embed([clipped[i] for i in order], norm=False, batch_size=BATCH_SIZE)
    out = np.empty_like(vectors)
    out[order] = vectors
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


# ---------------------------------------------------------------------------------------------
# Units and gaps


def split_units(
    text: str, start: int = 0, end: int | None = None, skip: list[tuple[int, int]] | None = None
) -> list[Unit]:
    """Sentences, paragraphs and item lines of ``text[start:end]``, trimmed, outside ``skip`` spans."""
    end = len(text) if end is None else end
    pieces: list[tuple[int, int, str]] = []  # (start, end, gap kind before)
    cuts = sorted(skip or [])
    cursor = start
    regions: list[tuple[int, int]] = []
    for skip_start, skip_end in cuts:
        if skip_end <= cursor or skip_start >= end:
            continue
        if skip_start > cursor:
            regions.append((cursor, skip_start))
        cursor = max(cursor, skip_end)
    if cursor < end:
        regions.append((cursor, end))
    for region_start, region_end in regions:
        gap = "paragraph"  # a skipped block or the document start counts as a paragraph break
        para_start = region_start
        for match in _PARAGRAPH_BREAK.finditer(text, region_start, region_end):
            _split_paragraph(text, para_start, match.start(), gap, pieces)
            para_start = match.end()
        _split_paragraph(text, para_start, region_end, gap, pieces)
    units = []
    for piece_start, piece_end, gap in pieces:
        # Trim, so a unit's start is where its text starts (positions move to the line start later).
        while piece_start < piece_end and text[piece_start].isspace():
            piece_start += 1
        while piece_end > piece_start and text[piece_end - 1].isspace():
            piece_end -= 1
        if piece_end > piece_start:
            units.append(Unit(piece_start, piece_end, gap if units else ""))
    return units


def _split_paragraph(text: str, start: int, end: int, gap: str, out: list[tuple[int, int, str]]) -> None:
    if not text[start:end].strip():
        return
    kind = gap
    line_start = start
    previous: tuple[int, int] | None = None
    for line_begin, line_end in _line_spans(text, start, end):
        if previous is not None and _starts_unit(text, previous, line_begin, line_end):
            _split_sentences(text, line_start, previous[1], kind, out)
            line_start, kind = line_begin, "line"
        previous = (line_begin, line_end)
    _split_sentences(text, line_start, end, kind, out)


def _line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    pos = start
    for match in _LINE.finditer(text, start, end):
        spans.append((pos, match.start()))
        pos = match.end()
    spans.append((pos, end))
    return spans


def _starts_unit(text: str, previous: tuple[int, int], begin: int, end: int) -> bool:
    """Whether a line starts a unit: an item, a heading or a table row, or after a finished line."""
    if _ITEM_START.match(text, begin, end):
        return True
    prev_text = text[previous[0] : previous[1]]
    return _UNIT_END.search(prev_text) is not None or _HEADING_LINE.match(prev_text) is not None


def _split_sentences(text: str, start: int, end: int, gap: str, out: list[tuple[int, int, str]]) -> None:
    kind = gap
    pos = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if match.end() >= end:
            break
        line_start = max(text.rfind("\n", 0, match.start()) + 1, match.start() - 40)
        if text[match.start()] == "." and _NOT_A_SENTENCE.search(text[line_start : match.start()]):
            continue
        out.append((pos, match.end(), kind))
        pos, kind = match.end(), "sentence"
    out.append((pos, end, kind))


def gap_similarities(vectors: np.ndarray, window: int) -> np.ndarray:
    """Cosine between the mean of ``window`` vectors before each gap and of ``window`` after it."""
    n = len(vectors)
    if n < 2:
        return np.zeros(0, dtype=np.float64)
    sums = np.vstack([np.zeros((1, vectors.shape[1])), np.cumsum(vectors.astype(np.float64), axis=0)])
    gaps = np.arange(1, n)
    left = sums[gaps] - sums[np.maximum(gaps - window, 0)]
    right = sums[np.minimum(gaps + window, n)] - sums[gaps]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    dots = np.einsum("ij,ij->i", left, right)
    return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 1.0)


def gap_scores(similarities: np.ndarray, kinds: list[str], threshold: float) -> tuple[list[int], float]:
    """The boundary score of each gap, and the similarity below which a gap is a topic shift."""
    if len(similarities) == 0:
        return [], 0.0
    cutoff = float(np.quantile(similarities, threshold)) if len(similarities) > 1 else float("-inf")
    lowest, highest = float(similarities.min()), float(similarities.max())
    scores = []
    for similarity, kind in zip(similarities.tolist(), kinds, strict=True):
        if similarity < cutoff:
            depth = (cutoff - similarity) / max(cutoff - lowest, 1e-9)
            scores.append(TOPIC_LOW + round((TOPIC_HIGH - TOPIC_LOW) * depth))
            continue
        low, high = (PARAGRAPH_LOW, PARAGRAPH_HIGH) if kind == "paragraph" else (SENTENCE_LOW, SENTENCE_HIGH)
        depth = (highest - similarity) / max(highest - max(cutoff, lowest), 1e-9)
        scores.append(low + round((high - low) * min(max(depth, 0.0), 1.0)))
    return scores, cutoff


# ---------------------------------------------------------------------------------------------
# The strategy


def semantic_layout(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    """The ``semantic`` strategy's layout (see the module docstring for the method)."""
    # Another strategy's settings (``auto`` never picks semantic; a direct call may): the model's defaults.
    defaults = SemanticSettings.model_fields
    window = getattr(settings, "window", defaults["window"].default)
    threshold = getattr(settings, "threshold", defaults["threshold"].default)
    # Text extracted from HTML is written as Markdown, so it gets the same structure.
    suffix = PurePosixPath(path).suffix.lower() if path else ""
    is_markdown = suffix in MARKDOWN_SUFFIXES or suffix in HTML_SUFFIXES
    boundaries: dict[int, int] = {}
    skip: list[tuple[int, int]] = []
    start = 0
    groups = []
    title = file_title(path)
    heading_starts: list[int] = []
    heading_paths: list[tuple[str, ...]] = []
    heading_ends: dict[int, int] = {}
    exclusions: list[tuple[int, int, str]] = []
    metadata: dict[str, Any] = {}
    if is_markdown:
        structure = scan(text, exclude_front_matter=settings.front_matter == "exclude")
        if structure.front_matter:
            start = structure.front_matter[1]
            exclusions.append((structure.front_matter[0], structure.front_matter[1], "front_matter"))
        boundaries.update(zip(structure.positions, structure.scores, strict=True))
        groups = structure.groups
        skip = [(g.start, g.end) for g in groups if g.kind in ("code", "table")]
        title = structure.title or title
        heading_starts = [h.start for h in structure.headings]
        heading_paths = structure.paths
        heading_ends = {h.start: h.end for h in structure.headings}
        metadata.update(structure.metadata)

    units = split_units(text, start, len(text), skip)
    vectors = embed([text[u.start : u.end] for u in units])
    similarities = gap_similarities(vectors, window)
    scores, cutoff = gap_scores(similarities, [u.gap for u in units[1:]], threshold)
    for unit, score in zip(units[1:], scores, strict=True):
        pos = _line_start_if_leading(text, unit.start)
        if start < pos < len(text) and boundaries.get(pos, -1) < score:
            boundaries[pos] = score

    probe = BudgetProbe(text, settings)
    for unit in units:
        fallback_boundaries(probe, unit.start, unit.end, boundaries, sentences=False, lines=True)
    for skip_start, skip_end in skip:
        for line_start, line_end in _line_spans(text, skip_start, skip_end):
            fallback_boundaries(probe, line_start, line_end, boundaries)

    positions = sorted(boundaries)
    plan = Plan(
        start,
        len(text),
        positions=positions,
        scores=[boundaries[p] for p in positions],
        levels=(),
        groups=groups,
        overlap_floor=SENTENCE_LOW,
        fill=FILL,
        heading_ends=heading_ends,
        chunk_price=CHUNK_PRICE,
    )
    metadata["semantic"] = {
        "units": len(units),
        "topic_shifts": sum(1 for s in scores if s >= TOPIC_LOW),
        "cutoff": round(cutoff, 4) if np.isfinite(cutoff) else None,
    }
    return Layout(
        plan,
        "semantic",
        title=title,
        heading_starts=heading_starts,
        heading_paths=heading_paths,
        exclusions=exclusions,
        metadata=metadata,
    )


def _line_start_if_leading(text: str, pos: int) -> int:
    """The start of ``pos``'s line when only indentation precedes it (the chunk keeps the indent)."""
    line_start = text.rfind("\n", 0, pos) + 1
    return line_start if not text[line_start:pos].strip() else pos
