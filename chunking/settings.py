"""Chunker settings: one validated pydantic model per strategy, all sharing ``ChunkerBase``.

The models say what a ``chunker:`` block of a config may hold. Which model belongs to which strategy
name is declared once, in the registry of ``chunkyard.chunking.strategies``; the config loader's
settings union and the list of strategy names derive from it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator


def _not_a_boolean(value: Any) -> Any:
    # YAML reads on/off/yes/no/true/false as booleans, and pydantic would take them for 1 and 0.
    if isinstance(value, bool):
        raise ValueError(
            f"expected a whole number, got {str(value).lower()} (YAML reads yes/no/on/off as true/false)"
        )
    return value


WholeNumber = Annotated[int, BeforeValidator(_not_a_boolean)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ContextSettings(_Strict):
    """What goes into ``embed_text`` ahead of the chunk text."""

    title: bool = True
    headings: bool = True


class ChunkerBase(_Strict):
    """The settings every strategy shares: the unit and budget, overlap, the minimum size, what goes into
    ``embed_text`` and what becomes of front matter. Each strategy's model adds its ``strategy`` tag."""

    unit: Literal["chars", "words", "tokens"] = "tokens"
    tokenizer: str = "cl100k_base"
    # Count every chunk's tokens (``n_tokens``) even when the unit is chars or words. Exact counting
    # costs a tokenizer pass over the text; false leaves n_tokens empty (null) for those units.
    count_tokens: bool = True
    max_size: WholeNumber = Field(512, gt=0)
    overlap: WholeNumber = Field(0, ge=0)
    min_size: WholeNumber = Field(0, ge=0)
    context: ContextSettings = ContextSettings()
    front_matter: Literal["exclude", "keep"] = "exclude"
    # What max_size bounds: the whole ``embed_text`` (title, heading path, lead-in or table header, then
    # the text; the segmenter reserves each chunk's prefix, see ``chunkyard.chunking.prefix``), or the
    # text alone (``text``: for pipelines that embed the text only; the prefix may then exceed it).
    budget: Literal["embed_text", "text"] = "embed_text"

    @model_validator(mode="after")
    def _sizes_fit(self) -> ChunkerBase:
        if self.overlap >= self.max_size:
            raise ValueError(f"overlap: must be smaller than max_size (got {self.overlap} ≥ {self.max_size})")
        if self.min_size >= self.max_size:
            raise ValueError(
                f"min_size: must be smaller than max_size (got {self.min_size} ≥ {self.max_size})"
            )
        return self


class FixedSettings(ChunkerBase):
    """Windows of exactly ``max_size`` units, cut only between graphemes."""

    strategy: Literal["fixed"] = "fixed"


class SentenceSettings(ChunkerBase):
    """Whole sentences packed up to the budget; overlap in whole sentences."""

    strategy: Literal["sentence"] = "sentence"


class RecursiveSettings(ChunkerBase):
    """Separator hierarchy: blank lines, lines, sentences, words, graphemes."""

    strategy: Literal["recursive"] = "recursive"


class MarkdownSettings(ChunkerBase):
    """Section-aware: headings open chunks; lists, tables and code kept whole when they fit."""

    strategy: Literal["markdown"] = "markdown"


class HtmlSettings(ChunkerBase):
    """Markdown-style chunking of the text extracted from HTML (headings, lists, tables, code)."""

    strategy: Literal["html"] = "html"


class DocumentSettings(ChunkerBase):
    """Markdown-style chunking of the text extracted from PDF (outline headings, pages) and DOCX."""

    strategy: Literal["document"] = "document"


class RstSettings(ChunkerBase):
    """reStructuredText: section titles, literal blocks, directives, lists and tables kept whole."""

    strategy: Literal["rst"] = "rst"


class CodeSettings(ChunkerBase):
    """Source code split between functions and classes (Python, JavaScript, TypeScript, Go, Rust, Java).

    ``language`` overrides detection by file suffix; without either, lines are the only boundaries.
    """

    strategy: Literal["code"] = "code"
    language: Literal["python", "javascript", "typescript", "tsx", "go", "rust", "java"] | None = None


class SemanticSettings(ChunkerBase):
    """Splits where the topic changes, by sentence embeddings (wordllama), within the budget.

    ``threshold`` is a *quantile* of the document's own gap similarities, not an absolute cosine:
    gaps among the least similar ``threshold`` fraction are topic shifts and outrank paragraph
    breaks. (Absolute cosines of the static embeddings vary by document; a quantile does not.)
    ``window`` is how many sentences on each side of a gap are averaged before comparing.
    """

    strategy: Literal["semantic"] = "semantic"
    threshold: float = Field(0.2, gt=0, lt=1)
    window: WholeNumber = Field(3, ge=1, le=10)


class AutoSettings(ChunkerBase):
    """Picks markdown, html, document (PDF, DOCX), rst, code or recursive by the file's type."""

    strategy: Literal["auto"] = "auto"
