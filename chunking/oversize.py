"""Fallback boundaries inside units that are larger than the budget (a giant line, a giant sentence).

Strategies that describe a document completely with structural boundaries (``code``, ``semantic``)
give the packer no textual levels: a textual level such as "word" would be found in the second
half of a chunk's reach even where a whole line or sentence fits, and cut it. Instead they ask this
module for sentence, line and word gaps *only inside units that may exceed the budget*, and for
grapheme gaps only inside runs of non-space text that may exceed it. Everywhere else a chunk ends
between whole units.

"May exceed" is decided cheaply and conservatively: characters and words are counted exactly; for
tokens a span whose UTF-8 length is within the budget cannot exceed it (a token is at least one
byte), and longer spans are counted with the tokenizer when it can be loaded here.
"""

from __future__ import annotations

import regex

from chunkyard.chunking.errors import TokenizerError
from chunkyard.chunking.packer import SCORE_GRAPHEME, SCORE_SENTENCE, SCORE_WORD, SENTENCE
from chunkyard.chunking.prefix import least_text_room
from chunkyard.chunking.segmenter import match_ends
from chunkyard.chunking.settings import ChunkerBase
from chunkyard.chunking.units import Tokenizer, get_tokenizer

SCORE_INNER_LINE = 15  # a line break inside an over-long sentence: better than a word gap

_WORD_GAP = regex.compile(r"\s+")
_RUN = regex.compile(r"\S+")
_NEWLINE = regex.compile(r"\r\n|\r|\n")
_GRAPHEME = regex.compile(r"\X")


class BudgetProbe:
    """Answers "may this span be larger than ``max_size``?" for one document and settings."""

    def __init__(self, text: str, settings: ChunkerBase):
        self.text = text
        self.unit = settings.unit
        # With ``budget: embed_text`` a text may get as little as half the budget beside its prefix.
        self.max_size = least_text_room(settings)
        self._tokenizer_name = settings.tokenizer
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_failed = False

    def may_exceed(self, start: int, end: int) -> bool:
        n_chars = end - start
        if self.unit == "chars":
            return n_chars > self.max_size
        if self.unit == "words":
            # Every word but the last needs a separator, so a span has at most (n + 1) / 2 words.
            if (n_chars + 1) // 2 <= self.max_size:
                return False
            return sum(1 for _ in _RUN.finditer(self.text, start, end)) > self.max_size
        # Tokens: at most one per UTF-8 byte, at most four bytes per code point.
        if n_chars * 4 <= self.max_size:
            return False
        piece = self.text[start:end]
        if len(piece.encode("utf-8", "surrogatepass")) <= self.max_size:
            return False
        tokenizer = self._load_tokenizer()
        return tokenizer is None or tokenizer.count(piece) > self.max_size

    def _load_tokenizer(self) -> Tokenizer | None:
        if self._tokenizer is None and not self._tokenizer_failed:
            try:
                self._tokenizer = get_tokenizer(self._tokenizer_name)
            except (TokenizerError, OSError):
                # A relative tokenizer.json cannot be resolved here; the byte bound stays safe.
                self._tokenizer_failed = True
        return self._tokenizer


def fallback_boundaries(
    probe: BudgetProbe,
    start: int,
    end: int,
    out: dict[int, int],
    *,
    sentences: bool = True,
    lines: bool = False,
) -> None:
    """Add gaps inside ``text[start:end]`` to ``out`` (position -> score) if the span may exceed.

    Sentence ends (when ``sentences``), line starts (when ``lines``) and word gaps inside the span;
    grapheme gaps inside each run of non-space text that may itself exceed the budget. Scores are
    only raised, never lowered.
    """
    if end - start <= 1 or not probe.may_exceed(start, end):
        return
    text = probe.text

    def mark(pos: int, score: int) -> None:
        if start < pos < end and out.get(pos, -1) < score:
            out[pos] = score

    if sentences:
        for pos in match_ends(SENTENCE, text, start, end):
            mark(pos, SCORE_SENTENCE)
    if lines:
        for match in _NEWLINE.finditer(text, start, end):
            mark(match.end(), SCORE_INNER_LINE)
    for match in _WORD_GAP.finditer(text, start, end):
        mark(match.end(), SCORE_WORD)
    # A gap every few graphemes is enough inside a giant run and keeps a minified megabyte small.
    step = 1 if probe.max_size < 64 else 8
    for run in _RUN.finditer(text, start, end):
        if run.end() - run.start() > 1 and probe.may_exceed(run.start(), run.end()):
            for index, grapheme in enumerate(_GRAPHEME.finditer(text, run.start(), run.end()), 1):
                if index % step == 0:
                    mark(grapheme.end(), SCORE_GRAPHEME)
