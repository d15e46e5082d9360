"""Strategies: each turns a document into a packer plan plus what chunk metadata needs.

A strategy is one entry of the registry ``STRATEGIES``: its ``strategy:`` name, its settings model
(``chunkyard.chunking.settings``) and its layout function, declared together with ``@register``. The
config loader's settings union, ``config.STRATEGY_NAMES`` and the message for an unknown strategy
derive from it, so a strategy is declared once (docs/design.md, "Strategies"). A layout function
describes the document (boundaries, groups, headings); the one packer in ``chunkyard.chunking.packer``
makes the spans, so every strategy shares the same exactness, coverage, budget and overlap behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chunkyard.chunking.code import CODE_SUFFIXES, detect_language, scan_code
from chunkyard.chunking.layout import (
    DOCUMENT_SUFFIXES,
    HTML_SUFFIXES,
    MARKDOWN_SUFFIXES,
    Layout,
    file_title,
    path_suffix,
)
from chunkyard.chunking.markdown import Structure, scan
from chunkyard.chunking.packer import (
    GRAPHEME,
    RECURSIVE_LEVELS,
    SCORE_SENTENCE,
    SENTENCE,
    SENTENCE_OR_PARAGRAPH,
    WORD,
    Plan,
)
from chunkyard.chunking.rst import RST_SUFFIXES, scan_rst
from chunkyard.chunking.settings import (
    AutoSettings,
    ChunkerBase,
    CodeSettings,
    DocumentSettings,
    FixedSettings,
    HtmlSettings,
    MarkdownSettings,
    RecursiveSettings,
    RstSettings,
    SemanticSettings,
    SentenceSettings,
)

# Re-exported: chunkyard.chunking.documents picks the reader by these suffix sets.
__all__ = [
    "DOCUMENT_SUFFIXES",
    "HTML_SUFFIXES",
    "MARKDOWN_SUFFIXES",
    "STRATEGIES",
    "Strategy",
    "auto_strategy",
    "get_strategy",
    "register",
]

StrategyFn = Callable[[str, ChunkerBase, str | None], Layout]


@dataclass(frozen=True)
class Strategy:
    """One registry entry: the ``strategy:`` name, its settings model and its layout function."""

    name: str
    settings: type[ChunkerBase]
    layout: StrategyFn


STRATEGIES: dict[str, Strategy] = {}  # in registration order


def register(name: str, settings: type[ChunkerBase]) -> Callable[[StrategyFn], StrategyFn]:
    """Register ``fn`` as strategy ``name``, configured by ``settings`` (whose ``strategy`` is ``name``)."""

    def decorate(fn: StrategyFn) -> StrategyFn:
        if name in STRATEGIES:
            raise ValueError(f"strategy {name!r} registered twice")
        tag = settings.model_fields["strategy"].default
        if tag != name:
            raise ValueError(f"strategy {name!r}: its settings model {settings.__name__} says {tag!r}")
        STRATEGIES[name] = Strategy(name, settings, fn)
        return fn

    return decorate


def get_strategy(name: str) -> StrategyFn:
    try:
        return STRATEGIES[name].layout
    except KeyError:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})") from None


def auto_strategy(path: str | None) -> str:
    """The strategy ``auto`` uses for a file: by suffix, recursive when unknown."""
    suffix = path_suffix(path).lower() if path else ""
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in DOCUMENT_SUFFIXES:
        return "document"
    if suffix in RST_SUFFIXES:
        return "rst"
    if suffix in CODE_SUFFIXES:
        return "code"
    return "recursive"


@register("fixed", FixedSettings)
def fixed(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    plan = Plan(0, len(text), levels=(GRAPHEME,), overlap_floor=0, fill=1.0)
    return Layout(plan, "fixed", title=file_title(path))


@register("sentence", SentenceSettings)
def sentence(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # One level for sentence ends and paragraph breaks, and fill=0: the furthest one that fits wins,
    # so as many whole sentences as fit are packed; words and graphemes only for a giant sentence.
    plan = Plan(
        0, len(text), levels=(SENTENCE_OR_PARAGRAPH, WORD, GRAPHEME), overlap_floor=SCORE_SENTENCE, fill=0.0
    )
    return Layout(plan, "sentence", title=file_title(path))


@register("recursive", RecursiveSettings)
def recursive(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    plan = Plan(0, len(text), levels=RECURSIVE_LEVELS)
    return Layout(plan, "recursive", title=file_title(path))


@register("markdown", MarkdownSettings)
def markdown(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    return _markdown_layout(text, settings, path, "markdown")


@register("html", HtmlSettings)
def html(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # ``text`` is the already extracted text (chunkyard.chunking.html.extract_html, run when documents are
    # read), so offsets refer to the text stored in the dataset. It is written as Markdown, so
    # the markdown scanner finds its headings, procedures, tables and code blocks.
    return _markdown_layout(text, settings, path, "html")


@register("document", DocumentSettings)
def document(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # PDF and DOCX: ``text`` is the extracted text (chunkyard.chunking.pdf / chunkyard.chunking.word, run when documents
    # are read), written as Markdown with headings from the PDF outline or the Word heading styles.
    return _markdown_layout(text, settings, path, "document")


@register("rst", RstSettings)
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
        title=structure.title or file_title(path),
        heading_starts=[h.start for h in structure.headings],
        heading_paths=structure.paths,
        exclusions=exclusions,
        metadata=structure.metadata,
    )


@register("code", CodeSettings)
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


@register("semantic", SemanticSettings)
def semantic(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    # Imported here: the embedding model loads only when a config asks for this strategy.
    from chunkyard.chunking.semantic import semantic_layout

    return semantic_layout(text, settings, path)


@register("auto", AutoSettings)
def auto(text: str, settings: ChunkerBase, path: str | None) -> Layout:
    return get_strategy(auto_strategy(path))(text, settings, path)
