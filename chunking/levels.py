"""Textual boundaries: the scores of the boundary scale, the textual levels (paragraph, line,
sentence, word, grapheme) with their patterns and fast finders, and the sentence and heading tests
that findings and the segmenter's prices share. The packer, the segmenter and the findings build on
this module; it builds on none of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import regex

# Scores of textual boundaries. Structural scores from strategies use the same scale.
SCORE_END = 1000  # end of the text
SCORE_FORCED = 90  # at or above: a forced boundary (headings)
SCORE_PARAGRAPH = 60
SCORE_LINE = 30
SCORE_SENTENCE = 20
SCORE_WORD = 10
SCORE_GRAPHEME = 1


def ascii_settled(text: str, pos: int) -> bool:
    """Whether a grapheme cluster boundary at ``pos`` (0 < pos < len(text)) is settled by the two
    characters around it alone: ASCII on both sides and not inside CR LF (the others ask the grapheme
    rules). The C kernels' ``settled`` is the same test."""
    return text[pos] < "\x7f" and text[pos - 1] < "\x7f" and text[pos - 1] != "\r"


# Groups whose lines are the units (table rows, code lines): an overlapping chunk starts at a line.
LINE_GROUPS = frozenset({"table", "code"})


@dataclass(frozen=True, slots=True)
class TextLevel:
    """A kind of textual boundary, found by a pattern whose match *end* is the boundary."""

    name: str
    score: int
    pattern: regex.Pattern[str]
    reverse: regex.Pattern[str]
    # Faster ways to find the same matches (``find_ends``), in a window without a character of
    # ``unless``: ``same``, the pattern itself in ``re`` (some three times faster than ``regex``), or
    # ``lead``, an ``re`` pattern taking one character wherever a match can begin (a class, or classes
    # one of which has a lookahead).
    same: re.Pattern[str] | None = None
    lead: re.Pattern[str] | None = None
    unless: regex.Pattern[str] | None = None
    # Where else a match can begin in a text with a character of ``unless``: an ``re`` pattern found
    # in linear time (``segmenter.lead_match_ends`` takes its matches beside the lead's), so such a
    # text is not searched by ``pattern`` from every stop of a run (quadratic).
    also: re.Pattern[str] | None = None
    # A run of characters at which a match that fails after one of them fails at each later one of the
    # run too (``segmenter.lead_match_ends`` passes over the rest of the run): the stops of a sentence's
    # end, where each start would read the whole run again (tests/core/test_segmenter.py checks it).
    run: re.Pattern[str] | None = None


def _level(
    name: str,
    score: int,
    pattern: str,
    *,
    same: bool = False,
    lead: str | None = None,
    unless: str | None = None,
    also: str | None = None,
    run: str | None = None,
) -> TextLevel:
    return TextLevel(
        name,
        score,
        regex.compile(pattern),
        regex.compile(pattern, regex.REVERSE),
        re.compile(pattern) if same else None,
        None if lead is None else re.compile(lead),
        None if unless is None else regex.compile(unless),
        None if also is None else re.compile(also),
        None if run is None else re.compile(run),
    )


# ``re``'s \s is ``regex``'s \s but for these four (information separators: str.isspace() says yes,
# Unicode's White_Space no); tests/core/test_segmenter.py checks every code point.
_SPACE_DIFFERS = r"[\x1c-\x1f]"


def find_ends(level: TextLevel, text: str, start: int, end: int, *, clean: bool = False) -> Iterator[int]:
    """The ends of ``level.pattern.finditer(text, start, end)``, in order (lazily: a 10 MB line has
    a million word gaps).

    Without a character of ``level.unless`` in the window (``clean``: the caller knows the text has
    none), by ``level.same``, or by trying the pattern only where ``level.lead`` matches; else by
    ``finditer``.
    """
    if (level.same is None and level.lead is None) or (
        not clean
        and level.unless is not None
        and level.unless.search(text, max(0, start - 1), end) is not None
    ):
        return (match.end() for match in level.pattern.finditer(text, start, end))
    if level.same is not None:
        return (match.end() for match in level.same.finditer(text, start, end))
    return _lead_ends(level, text, start, end)


def _lead_ends(level: TextLevel, text: str, start: int, end: int) -> Iterator[int]:
    pattern, scanned = level.pattern, start
    for first in level.lead.finditer(text, start, end):
        at = first.start()
        if at < scanned:
            continue
        match = pattern.match(text, at, end)
        if match is not None:
            yield match.end()
            scanned = match.end() if match.end() > at else at + 1


PARAGRAPH = _level("paragraph", SCORE_PARAGRAPH, r"\n[^\S\n]*\n", same=True, unless=_SPACE_DIFFERS)
LINE = _level("line", SCORE_LINE, r"\n", same=True)
# Where a sentence ends (the one rule; oversize, constraints and the findings' marks use it):
# - at . ! ? … (then closing quotes/brackets) before white space and a capital, a digit or a letter of
#   a caseless script (\p{Lo}); not after a list number ("1.") or a common abbreviation ("Dr.", "e.g.");
# - right after CJK 。！？ (no space follows them);
# - after a mark that only ends sentences in its script (then closers and white space): Devanagari
#   danda । and double danda ॥, Arabic question mark ؟, Urdu full stop ۔, Armenian full stop ։,
#   Ethiopic full stop ። question mark ፧ and paragraph separator ፨, Khmer khan ។ and ៕, Myanmar ။;
# - Thai and Lao have no sentence punctuation and no spaces between words; a space between two
#   letters of those scripts separates phrases or sentences, so it is taken as the sentence end.
#   Thai or Lao text without any space has no sentence ends: words and graphemes are the fallback.
SENTENCE_MARKS = "।॥؟۔։።፧፨។៕။"
PHRASE_SPACED = "\u0e01-\u0e5b\u0e81-\u0edf"  # Thai and Lao letters, marks and signs (a class body)
# A text whose tail ends a sentence, and a text whose last line is an ATX heading: the questions the
# findings (chunkyard.chunking.findings) and the segmenter's prices both ask, written once here.
SENTENCE_END_MARKS = (
    ".!?…。！？:;" + SENTENCE_MARKS
)  # a text ending in one of them (then closers) ends a sentence
SENTENCE_ENDED = regex.compile(r"[" + SENTENCE_END_MARKS + r"]['\"”’)\]]*$|^\s*$")
ATX_LAST_LINE = regex.compile(r"(?m)^ {0,3}#{1,6}(?:[ \t]|$)[^\n]*\Z")
_NOT_AN_END = r"(?<!(?:^|[\s(])(?:\d{1,3}|[A-Za-z]|Mr|Mrs|Ms|Dr|Prof|St|vs|No|Fig|approx|e\.g|i\.e|cf|etc))"
# The pieces of the sentence pattern (class bodies): the stops, the closers after them, the openers
# before the next sentence's first character, and what that character may be; ``_CAPITALS_WITHIN`` is
# an ``re`` class body holding every character of ``_CAPITALS`` and none of ``_OPENERS``
# (tests/core/test_segmenter.py checks every code point), for the lead below.
_STOPS = r".!?…"
_CLOSERS = r"\"'”’)\]"
_OPENERS = r"\"'“‘(\["
_CAPITALS = r"\p{Lu}\p{N}\p{Lo}"
_CAPITALS_WITHIN = r"^\sa-z" + _OPENERS
# A sentence match begins at one of its marks, or (Thai, Lao) at a space after a letter of those scripts:
# the lead, in a window without such letters. At a stop it is the pattern's first branch without its
# lookbehind, ``re``'s white space for ``regex``'s (a superset) and _CAPITALS_WITHIN for _CAPITALS:
# every match begins where the lead does, and most stops that begin none (``file.txt``) are passed over.
_SENTENCE_LEAD_MARKS = r"。！？" + SENTENCE_MARKS
_SENTENCE_LEAD_STOP = (
    f"[{_STOPS}](?=[{_STOPS}]*[{_CLOSERS}]*\\s+[{_OPENERS}]?[{_CAPITALS_WITHIN}])|[{_SENTENCE_LEAD_MARKS}"
)
_SENTENCE_LEAD = _SENTENCE_LEAD_STOP + "]"
# In a text with a Thai or Lao letter a match also begins at white space after one (``re``'s white
# space holds ``regex``'s): the pattern's last branch.
_SENTENCE_ALSO = r"(?<=[" + PHRASE_SPACED + r"])[^\S\n]"
# At a stop only the first branch can match. Its stops run to the end of their run (the items after
# them take none), so from a start after a stop what follows the run decides, and the lookbehind
# holds there (no exception ends with a stop): a match that fails there fails for the rest of the run.
_SENTENCE_RUN = f"[{_STOPS}]+"
SENTENCE = _level(
    "sentence",
    SCORE_SENTENCE,
    f"(?:{_NOT_AN_END}[{_STOPS}]+[{_CLOSERS}]*\\s+(?=[{_OPENERS}]?[{_CAPITALS}])|[。！？]+"
    r"|[" + SENTENCE_MARKS + f"]+[{_CLOSERS}]*\\s*"
    r"|(?<=[" + PHRASE_SPACED + r"])[^\S\n]+(?=[" + PHRASE_SPACED + r"]))",
    lead=_SENTENCE_LEAD,
    unless=f"[{PHRASE_SPACED}]",
    also=_SENTENCE_ALSO,
    run=_SENTENCE_RUN,
)
SENTENCE_OR_PARAGRAPH = _level(
    "sentence",
    SCORE_SENTENCE,
    SENTENCE.pattern.pattern + r"|\n[^\S\n]*\n",
    lead=_SENTENCE_LEAD_STOP + r"\n]",
    unless=f"[{PHRASE_SPACED}]",
    also=_SENTENCE_ALSO,
    run=_SENTENCE_RUN,
)
WORD = _level("word", SCORE_WORD, r"\s+", same=True, unless=_SPACE_DIFFERS)
GRAPHEME = _level("grapheme", SCORE_GRAPHEME, r"\X")

RECURSIVE_LEVELS = (PARAGRAPH, LINE, SENTENCE, WORD, GRAPHEME)

# The same levels for a text whose lines end with a lone CR (classic Mac OS), used instead when the
# text has one; on any other text they find exactly what the originals find.
_BREAK, _BLANKS = r"(?:\n|\r(?!\n))", r"[^\S\r\n]*(?:\r?\n|\r)"
_LONE_CR_LEVELS = {
    PARAGRAPH: _level("paragraph", SCORE_PARAGRAPH, _BREAK + _BLANKS),
    LINE: _level("line", SCORE_LINE, _BREAK),
    SENTENCE_OR_PARAGRAPH: _level(
        "sentence",
        SCORE_SENTENCE,
        SENTENCE.pattern.pattern + "|" + _BREAK + _BLANKS,
        lead=_SENTENCE_LEAD_STOP + r"\n\r]",
        unless=f"[{PHRASE_SPACED}]",
        also=_SENTENCE_ALSO,
        run=_SENTENCE_RUN,
    ),
}
