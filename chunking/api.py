"""The one chunking entry point: text and settings in, exact chunks out.

``chunk_document`` serves ``chunkyard preview``, the batch flow, the reviewer and users' scripts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.constraints import Placement, apply_placements
from chunkyard.chunking.findings import check_spans
from chunkyard.chunking.layout import Layout, file_title
from chunkyard.chunking.packer import Packer, Span
from chunkyard.chunking.prefix import Reserve
from chunkyard.chunking.settings import ChunkerBase
from chunkyard.chunking.strategies import get_strategy
from chunkyard.chunking.units import KNOWN_ENCODINGS, get_tokenizer, make_meter


class Chunk(NamedTuple):
    """One chunk: ``text == document_text[start:end]`` (code points, half-open).

    Immutable. A named tuple rather than a frozen dataclass: a run builds one per chunk, and a frozen
    dataclass with these thirteen fields costs ≈3 µs more each (a fifth of recursive chunking in chars).
    """

    index: int
    start: int
    end: int
    text: str
    embed_text: str
    section_path: tuple[str, ...]
    size: int  # in the settings' unit
    n_chars: int
    n_tokens: int | None  # None when not counted (``count_tokens: false`` with chars or words)
    strategy: str
    findings: tuple[str, ...] = ()
    label: str = ""  # e.g. the language of the code block the chunk starts in
    over_budget_reason: str = ""  # why the chunk exceeds max_size, when it does


_new_chunk = tuple.__new__  # ``_new_chunk(Chunk, fields)``: all thirteen fields, in order


@dataclass
class ChunkedDocument:
    """Chunks of one document plus what the strategy learned about it."""

    chunks: list[Chunk]
    strategy: str
    title: str = ""
    exclusions: list[tuple[int, int, str]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def chunk_document(
    text: str,
    settings: ChunkerBase | Mapping[str, Any],
    path: str | None = None,
    *,
    base_dir: Path | None = None,
) -> list[Chunk]:
    """Split ``text`` into chunks as ``settings`` say (a settings model or a plain mapping)."""
    return split_document(text, settings, path, base_dir=base_dir).chunks


def split_document(
    text: str,
    settings: ChunkerBase | Mapping[str, Any],
    path: str | None = None,
    *,
    base_dir: Path | None = None,
    title: str | None = None,
    constraints: Iterable[Placement] | None = None,
) -> ChunkedDocument:
    """Like ``chunk_document``, also returning the title, exclusions and metadata found.

    ``constraints`` are reviewer decisions placed on this text (``chunkyard.chunking.constraints``): keep
    spans and breaks the packer honours; one it cannot meet gives its chunk ``constraint_unmet``.
    """
    if not isinstance(settings, ChunkerBase):
        settings = parse_settings(settings)
    layout = get_strategy(settings.strategy)(text, settings, path)
    if constraints:
        apply_placements(layout.plan, text, constraints)
    meter = make_meter(text, settings.unit, settings.tokenizer, base_dir)
    doc_title = title if title is not None else layout.title
    # Each chunk's prefix by where it starts: the segmenter reserves it from the budget (``budget:
    # embed_text``), and embed_text is built from it.
    reserve = Reserve(
        text, layout, settings, doc_title, meter, file_named=title is None and doc_title == file_title(path)
    )
    spans = Packer(
        text, layout.plan, meter, settings.max_size, settings.overlap, settings.min_size, reserve=reserve
    ).spans()
    findings = check_spans(text, spans, layout, settings.min_size)
    token_counter = meter if settings.unit == "tokens" else None
    # With chars or words the tokenizer is not checked at load (only the unit tokens needs it), so
    # n_tokens counts with it only when it is a known encoding, else with cl100k (as for a tokenizer.json).
    tokenizer = (
        None
        if token_counter or not settings.count_tokens
        else get_tokenizer(settings.tokenizer if settings.tokenizer in KNOWN_ENCODINGS else "cl100k_base")
    )
    chunks = _chunks(text, spans, layout, findings, reserve, token_counter, tokenizer)
    return ChunkedDocument(chunks, layout.strategy, doc_title, layout.exclusions, layout.metadata)


def _chunks(
    text: str,
    spans: list[Span],
    layout: Layout,
    findings: list[list[str]],
    reserve: Reserve,
    token_counter: Any,
    tokenizer: Any,
) -> list[Chunk]:
    """The ``Chunk`` of each span, in order (the per-chunk loop of ``split_document``)."""
    bounds = [(span.start, span.end) for span in spans]
    labels = layout.labels_of(bounds)
    paths = layout.chunk_section_paths(bounds)
    starts = [span.start for span in spans]
    prefixes = reserve.of_chunks(starts, paths)
    strategy = layout.strategy
    chunks = []
    append = chunks.append
    for index, (start, end, size, over_budget), path_here, (prefix, _, shortened), codes, label in zip(
        range(len(spans)), spans, paths, prefixes, findings, labels, strict=True
    ):
        chunk_text = text[start:end]
        if shortened:
            codes.append("prefix_shortened")
        n_tokens = size if token_counter else tokenizer.count(chunk_text) if tokenizer else None
        # In the field order of ``Chunk``, built without its keyword ``__new__`` (a sixth of the cost).
        append(
            _new_chunk(
                Chunk,
                (
                    index,
                    start,
                    end,
                    chunk_text,
                    prefix + chunk_text if prefix else chunk_text,
                    path_here,
                    size,
                    end - start,
                    n_tokens,
                    strategy,
                    tuple(codes),
                    label,
                    over_budget,
                ),
            )
        )
    return chunks


def chunk_id(doc_id: str, start: int, end: int, config_hash: str) -> str:
    """Stable id of a chunk: a hash of the document id, the span and the config hash."""
    digest = hashlib.sha256(f"{doc_id}\x00{start}\x00{end}\x00{config_hash}".encode()).hexdigest()
    return digest[:24]
