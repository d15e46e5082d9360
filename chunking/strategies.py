"""Strategies: each turns a document into a packer plan plus what chunk metadata needs.

A strategy is one function registered under its ``strategy:`` name. It describes the document
(boundaries, groups, headings); the one packer in ``chunkyard.chunking.packer`` makes the spans. So every
strategy shares the same exactness, coverage, budget and overlap behaviour.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from chunkyard.chunking.code import CODE_SUFFIXES, detect_language, scan_code
from chunkyard.chunking.config import ChunkerBase
from chunkyard.chunking.markdown import Structure, scan
from chunkyard.chunking.packer import (
    GRAPHEME,
    RECURSIVE_LEVELS,
    SCORE_SENTENCE,
    SENTENCE,
    SENTENCE_OR_PARAGRAPH,
    WORD,
    Group,
    Plan,
)
from chunkyard.chunking.rst import RST_SUFFIXES, scan_rst


@dataclass
class Layout:
    """A strategy's view of one document: the packer plan and the context for metadata."""

    plan: Plan
    strategy: str
    title: str = ""
    heading_starts: list[int] = field(default_factory=list)
    heading_paths: list[tuple[str, ...]] = field(default_factory=list)
    exclusions: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, reason)
    metadata: dict = field(default_factory=dict)
    _indexes: dict = field(default_factory=dict, repr=False)

    def section_path(self, pos: int) -> tuple[str, ...]:
        i = bisect.bisect_right(self.heading_starts, pos) - 1
        return self.heading_paths[i] if i >= 0 else ()

    def groups_around(self, start: int) -> list[Group]:
        """Groups that began before ``start`` and are still open at it (their pieces need context).

        A piece that starts right at the first item still needs the lead-in, so the test is against
        the group's start (lead-in included), not its body.
        """
        return [g for g in self._overlapping(start, start + 1, "context") if g.start < start < g.end]

    def code_label(self, start: int, end: int) -> str:
        """The language of the first code block the span [start, end) overlaps ("" when none)."""
        for group in self._overlapping(start, end, "code"):
            return group.label
        return ""

    def contexts_at(self, starts: list[int]) -> list[tuple[str, ...]]:
        """``tuple(g.context for g in self.groups_around(s))`` for each of ``starts``: one sweep when the
        starts do not decrease (a packer's chunks), as a run builds every chunk's ``embed_text``."""
        chosen = self._index("context")[1]
        if not chosen:
            return [()] * len(starts)
        if any(b < a for a, b in itertools.pairwise(starts)):
            return [tuple(g.context for g in self.groups_around(s)) for s in starts]
        out: list[tuple[str, ...]] = []
        active: list[Group] = []  # began before the current start, in (start, end) order
        k, n = 0, len(chosen)
        for start in starts:
            while k < n and chosen[k].start < start:
                active.append(chosen[k])
                k += 1
            if active:
                active = [g for g in active if g.end > start]
            out.append(tuple(g.context for g in active))
        return out

    def labels_of(self, spans: list[tuple[int, int]]) -> list[str]:
        """``self.code_label(start, end)`` for each (start, end): one sweep when neither starts nor ends
        decrease (a packer's chunks)."""
        chosen = self._index("code")[1]
        if not chosen:
            return [""] * len(spans)
        if any(b[0] < a[0] or b[1] < a[1] for a, b in itertools.pairwise(spans)):
            return [self.code_label(start, end) for start, end in spans]
        out: list[str] = []
        active: list[Group] = []  # began before the current end, in (start, end) order
        k, n = 0, len(chosen)
        for start, end in spans:
            while k < n and chosen[k].start < end:
                active.append(chosen[k])
                k += 1
            if active:
                active = [g for g in active if g.end > start]
            out.append(active[0].label if active else "")
        return out

    def _index(self, which: str) -> tuple[list[int], list[Group], int]:
        """Groups that give context (``which="context"``) or a code label (``"code"``), sorted, built once."""
        index = self._indexes.get(which)
        if index is None:
            if which == "context":
                chosen = [g for g in self.plan.groups if g.kind != "section" and g.context]
            else:
                chosen = [g for g in self.plan.groups if g.kind == "code" and g.label]
            chosen.sort(key=lambda g: (g.start, g.end))
            longest = max((g.end - g.start for g in chosen), default=0)
            index = self._indexes[which] = ([g.start for g in chosen], chosen, longest)
        return index

    def _overlapping(self, start: int, end: int, which: str) -> list[Group]:
        """Groups of one kind overlapping [start, end), in order, via an index built once."""
        starts, chosen, longest = self._index(which)
        first = bisect.bisect_left(starts, start - longest)
        last = bisect.bisect_left(starts, end)
        return [g for g in chosen[first:last] if g.end > start]


StrategyFn = Callable[[str, ChunkerBase, str | None], Layout]
_REGISTRY: dict[str, StrategyFn] = {}


def register(name: str) -> Callable[[StrategyFn], StrategyFn]:
    def decorate(fn: StrategyFn) -> StrategyFn:
        if name in _REGISTRY:
            raise ValueError(f"strategy {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn

    return decorate


def get_strategy(name: str) -> StrategyFn:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


def strategy_names() -> list[str]:
    return sorted(_REGISTRY)


MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
# Binary formats whose extracted text is written as Markdown (chunkyard.chunking.pdf, chunkyard.chunking.word).
DOCUMENT_SUFFIXES = {".pdf": "pdf", ".docx": "docx"}


def auto_strategy(path: str | None) -> str:
    """The strategy ``auto`` uses for a file: by suffix, recursive when unknown."""
    suffix = PurePosixPath(path).suffix.lower() if path else ""
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in HTML_SUFFIXES and "html" in _REGISTRY:
        return "html"
    if suffix in HTML_SUFFIXES:
        return "markdown"  # extracted HTML text is written as Markdown
    if suffix in DOCUMENT_SUFFIXES:
        return "document"
    if suffix in RST_SUFFIXES:
        return "rst"
    if suffix in CODE_SUFFIXES:
        return "code"
    return "recursive"


def _file_title(path: str | None) -> str:
    return PurePosixPath(path).stem.replace("-", " ").replace("_", " ") if path else ""


@register("fixed")
def fixed(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    plan = Plan(0, len(text), levels=(GRAPHEME,), overlap_floor=0, fill=1.0)
    return Layout(plan, "fixed", title=_file_title(path))


@register("sentence")
def sentence(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # One level for sentence ends and paragraph breaks, and fill=0: the furthest one that fits wins,
    # so as many whole sentences as fit are packed; words and graphemes only for a giant sentence.
    plan = Plan(0, len(text), levels=(SENTENCE_OR_PARAGRAPH, WORD, GRAPHEME), overlap_floor=SCORE_SENTENCE,
                fill=0.0)
    return Layout(plan, "sentence", title=_file_title(path))


@register("recursive")
def recursive(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    plan = Plan(0, len(text), levels=RECURSIVE_LEVELS)
    return Layout(plan, "recursive", title=_file_title(path))


@register("markdown")
def markdown(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    return _markdown_layout(text, settings, path, "markdown")


@register("html")
def html(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # ``text`` is the already extracted text (chunkyard.chunking.html.extract_html, run when documents are
    # read), so offsets refer to the text stored in the dataset. It is written as Markdown, so
    # the markdown scanner finds its headings, procedures, tables and code blocks.
    return _markdown_layout(text, settings, path, "html")


@register("document")
def document(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # PDF and DOCX: ``text`` is the extracted text (chunkyard.chunking.pdf / chunkyard.chunking.word, run when documents
    # are read), written as Markdown with headings from the PDF outline or the Word heading styles.
    return _markdown_layout(text, settings, path, "document")


@register("rst")
def rst(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # reStructuredText is chunked as it is: its own scanner finds titles, literal blocks, directives.
    return _structure_layout(scan_rst(text), text, path, "rst")


def _markdown_layout(text: str, settings: ChunkerBase, path: str | None, strategy: str) -> Layout:
    structure = scan(text, exclude_front_matter=settings.front_matter == "exclude")
    return _structure_layout(structure, text, path, strategy)


def _structure_layout(structure: Structure, text: str, path: str | None, strategy: str) -> Layout:
    start = structure.front_matter[1] if structure.front_matter else 0
    plan = Plan(
        start,
        len(text),
        positions=structure.positions,
        scores=structure.scores,
        levels=(SENTENCE, WORD, GRAPHEME),
        groups=structure.groups,
        units=structure.units,
        heading_ends={h.start: h.end for h in structure.headings},
    )
    exclusions = []
    if structure.front_matter:
        exclusions.append((structure.front_matter[0], structure.front_matter[1], "front_matter"))
    return Layout(
        plan,
        strategy,
        title=structure.title or _file_title(path),
        heading_starts=[h.start for h in structure.headings],
        heading_paths=structure.paths,
        exclusions=exclusions,
        metadata=structure.metadata,
    )


@register("code")
def code(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    language = detect_language(path, getattr(settings, "language", None))
    structure = scan_code(text, settings, path, language)
    return Layout(
        structure.plan,
        "code",
        title=structure.title,
        heading_starts=structure.heading_starts,
        heading_paths=structure.heading_paths,
        metadata=structure.metadata,
    )


@register("semantic")
def semantic(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # Imported here: the embedding model loads only when a config asks for this strategy.
    from chunkyard.chunking.semantic import semantic_layout

    return semantic_layout(text, settings, path)


@register("auto")
def auto(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    return get_strategy(auto_strategy(path))(text, settings, path)
