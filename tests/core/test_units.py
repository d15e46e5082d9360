"""Size units: meters measure spans exactly; budgets reach no further than they may; tokenizers are offline."""

from __future__ import annotations

import importlib.util
import socket
import time
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking import split_document, units
from chunkyard.chunking.errors import TokenizerError
from chunkyard.chunking.units import (
    _CL100K_PATTERN,
    _SYNC,
    _SYNC_REVERSE,
    CharMeter,
    SyncPoints,
    TiktokenTokenizer,
    TokenMeter,
    WordMeter,
    get_tokenizer,
    make_meter,
)

from support.checks import assert_chunk_invariants, cl100k_encoding, recount

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
prose = st.lists(
    st.sampled_from(
        [
            "refund",
            "the",
            "order",
            " ",
            "  ",
            "\n",
            "\n\n",
            "café",
            "👍🏽",
            "日本語",
            "e\u0301",
            ".",
            ",",
            "\t",
            "x",
        ]
    ),
    max_size=80,
).map("".join)
any_text = st.one_of(texts, prose)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def span(data: st.DataObject, text: str) -> tuple[int, int]:
    start = data.draw(st.integers(0, len(text)), label="start")
    end = data.draw(st.integers(start, len(text)), label="end")
    return start, end


@pytest.mark.parametrize("unit", ["chars", "words", "tokens"])
@FAST
@given(data=st.data())
def test_size_is_the_size_of_the_span_on_its_own(unit: str, data: st.DataObject) -> None:
    text = data.draw(any_text, label="text")
    meter = make_meter(text, unit)
    start, end = span(data, text)
    assert meter.size(start, end) == recount(text[start:end], unit)


@pytest.mark.parametrize("unit", ["chars", "words"])
@FAST
@given(data=st.data())
def test_advance_and_back_stay_within_the_budget(unit: str, data: st.DataObject) -> None:
    """Exact units: ``advance`` reaches as far as the budget allows and no further; so does ``back``."""
    text = data.draw(any_text, label="text")
    meter = make_meter(text, unit)
    budget = data.draw(st.integers(1, 50), label="budget")
    start = data.draw(st.integers(0, len(text)), label="start")
    reach = meter.advance(start, budget)
    assert start <= reach <= len(text)
    assert meter.size(start, reach) <= budget
    if reach < len(text):  # stopped early: because the budget is used up
        assert meter.size(start, reach) == budget
    low = meter.back(start, budget)
    assert 0 <= low <= start
    assert meter.size(low, start) <= budget


ascii_prose = st.lists(
    st.sampled_from(["refund", "the", "order", " ", "  ", "\n", "\n\n", ".", ",", "\t", "x", "2%", "#4521"]),
    max_size=80,
).map("".join)


@FAST
@given(data=st.data())
def test_token_advance_estimate_is_close(data: st.DataObject) -> None:
    """Tokens: ``advance`` estimates from the whole-text encoding (the packer verifies every chunk);
    on ASCII prose it stays within the budget by that encoding and within a few tokens on its own."""
    text = data.draw(ascii_prose, label="text")
    meter = make_meter(text, "tokens")
    budget = data.draw(st.integers(1, 60), label="budget")
    start = data.draw(st.integers(0, len(text)), label="start")
    reach = meter.advance(start, budget)
    assert start <= reach <= len(text)
    assert meter.size(start, reach) <= budget + 4
    assert meter.estimate(start, reach) <= budget


def test_char_meter() -> None:
    meter = CharMeter("héllo 👍🏽")
    assert meter.size(0, 8) == 8  # code points: the emoji with its skin tone is two
    assert meter.advance(0, 3) == 3 and meter.advance(5, 100) == 8
    assert meter.back(8, 3) == 5 and meter.back(2, 10) == 0


def test_word_meter_counts_a_word_the_span_starts_or_ends_in() -> None:
    text = "alpha beta  gamma\ndelta"
    meter = WordMeter(text)
    assert meter.size(0, len(text)) == 4
    assert meter.size(2, 8) == 2  # "pha be": parts of two words count as two
    assert meter.size(5, 6) == 0  # one space
    assert meter.advance(0, 2) == text.index("gamma")
    assert meter.advance(text.index("delta"), 5) == len(text)
    assert meter.back(len(text), 1) == text.index("gamma") + len("gamma")


def test_word_meter_whitespace_is_unicode_white_space() -> None:
    meter = WordMeter("a\u3000b\u00a0c\u2003d")
    assert meter.size(0, 7) == 4


def test_token_meter_matches_tiktoken() -> None:
    text = "The customer asked for a refund of order #4521 — twice. 日本語のテキスト 👩‍👩‍👧‍👦"
    meter = make_meter(text, "tokens")
    assert isinstance(meter, TokenMeter)
    assert meter.size(0, len(text)) == len(cl100k_encoding().encode_ordinary(text))
    assert meter.estimate(0, len(text)) == meter.size(0, len(text))


def test_token_starts_are_character_offsets() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    for text in ["plain ascii text, with punctuation.", "naïve café 日本語 👍🏽 done", ""]:
        starts = tokenizer.token_starts(text)
        assert len(starts) == len(cl100k_encoding().encode_ordinary(text))
        if len(starts):
            assert starts[0] == 0 and np.all(np.diff(starts) >= 0) and starts[-1] < len(text)
    ascii_text = "plain ascii text, with punctuation."
    pieces = [cl100k_encoding().decode([t]) for t in cl100k_encoding().encode_ordinary(ascii_text)]
    assert list(tokenizer.token_starts(ascii_text)) == list(np.cumsum([0] + [len(p) for p in pieces[:-1]]))


def test_cl100k_loads_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: nothing to fall back on
    tokenizer = TiktokenTokenizer("cl100k_base")
    assert tokenizer.count("hello world") == 2
    assert tokenizer.encoding.encode_ordinary("hello world") == cl100k_encoding().encode_ordinary(
        "hello world"
    )


@pytest.mark.skipif(
    importlib.util.find_spec("bpe_openai") is None, reason="no bpe-openai wheel here (Intel macOS)"
)
def test_cl100k_uses_the_fast_encoder() -> None:
    """bpe-openai is a dependency where it has wheels: a broken install would silently halve token speed."""
    assert get_tokenizer("cl100k_base").backend.startswith("bpe-openai ")


pieces = st.lists(
    st.sampled_from(
        [
            "'s",
            "'LL",
            "don't",
            " ",
            "  ",
            "   ",
            "\t",
            "\n",
            "\r\n",
            "\n\n  ",
            "\u00a0",
            "\u3000",
            "123",
            "4567",
            "½",
            "٣",
            "x",
            "Word",
            "é",
            "e\u0301",
            "中文",
            "😀",
            "👍🏽",
            "<|endoftext|>",
            ".",
            "!?",
            "==>",
            "_",
            "\u200b",
            "\ufeff",
            "ﬁ",
        ]
    ),
    max_size=60,
).map("".join)


@FAST
@given(st.one_of(texts, pieces))
def test_fast_encoder_equals_tiktoken(text: str) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    expected = cl100k_encoding().encode_ordinary(text)
    assert tokenizer.count(text) == len(expected)
    assert tokenizer._encode(text) == expected


def test_fast_encoder_equals_tiktoken_on_the_corpora(corpora_dir: Path) -> None:
    """Every fifth file of every corpus (Markdown, HTML, code, text; several languages)."""
    tokenizer = get_tokenizer("cl100k_base")
    files = sorted(p for p in corpora_dir.rglob("*") if p.is_file() and p.stat().st_size < 2_000_000)[::5]
    assert len(files) > 200
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        assert tokenizer._encode(text) == cl100k_encoding().encode_ordinary(text), path


def test_lone_surrogates_count_as_tiktoken_does() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    assert tokenizer.count("a\ud800b") == len(cl100k_encoding().encode_ordinary("a\ud800b")) == 3


def test_a_fast_encoder_that_disagrees_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from chunkyard.chunking import units

    class Wrong:
        def encode(self, text: str) -> list[int]:
            return [0]

        def count(self, text: str) -> int:
            return 1

    class Bindings:
        @staticmethod
        def tokenizer_for_encoding(name: str) -> Wrong:
            return Wrong()

    monkeypatch.setattr(units, "_bpe_openai_bindings", lambda: Bindings())
    tokenizer = TiktokenTokenizer("cl100k_base")
    assert tokenizer.backend.startswith("tiktoken ")
    assert tokenizer.count("hello world") == 2


@pytest.mark.parametrize("name", ["gpt2", "o200k_base", "bert-base-uncased", "cl100k"])
def test_unknown_tokenizer_names(name: str) -> None:
    with pytest.raises(TokenizerError, match=f"unknown tokenizer '{name}'"):
        get_tokenizer(name)


def test_missing_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="tokenizer file not found"):
        get_tokenizer("missing.json", tmp_path)


def test_broken_tokenizer_json(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(TokenizerError, match="cannot load tokenizer file"):
        get_tokenizer("tokenizer.json", tmp_path)


def test_tokenizer_json_word_level(tmp_path: Path) -> None:
    """A WordLevel tokenizer.json built here: one token per known word, [UNK] otherwise."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "refund": 1, "the": 2, "order": 3, ".": 4}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "words.json"))
    loaded = get_tokenizer("words.json", tmp_path)
    assert loaded.count("refund the order.") == 4
    assert loaded.count("refund the naïve order") == 4
    text = "refund  the order. unknown"
    assert list(loaded.token_starts(text)) == [0, 8, 12, 17, 19]
    meter = make_meter(text, "tokens", "words.json", tmp_path)
    assert meter.size(8, 18) == 3 and meter.advance(0, 2) == 12


def test_tokenizers_are_cached() -> None:
    assert get_tokenizer("cl100k_base") is get_tokenizer("cl100k_base")


def test_unknown_unit() -> None:
    with pytest.raises(ValueError, match="unknown unit 'bytes'"):
        make_meter("text", "bytes")


# Text that exercises the one-encoding count (``TokenMeter.size``): words with the gaps it syncs on,
# next to everything that makes the pre-tokenizer look ahead: contractions, runs of punctuation
# before line breaks, digit runs, white space of every kind, marks, emoji and CJK.
long_prose = st.lists(
    st.sampled_from(
        [
            "refund",
            "the",
            "Order",
            "café",
            "naïve",
            "日本語",
            "e\u0301",
            "👍🏽",
            "2024",
            "12345",
            "'s",
            "'ll",
            "don't",
            "’re",
            " ",
            " ",
            "  ",
            "\t",
            "\u00a0",
            "\u3000",
            "\n",
            "\r\n",
            "\n\n",
            " \n",
            ".",
            ".\n",
            "!?\n\n",
            "...",
            "(",
            ")",
            "`x`",
            "- ",
            "1. ",
            "#",
            "|",
            "\u2028",
            "\x85",
            "\x1c",
        ]
    ),
    min_size=20,
    max_size=600,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_tokens_of_a_span_from_one_encoding_are_exact(data: st.DataObject) -> None:
    text = data.draw(long_prose, label="text")
    meter = TokenMeter(text, get_tokenizer("cl100k_base"))
    start, end = span(data, text)
    assert meter.size(start, end) == recount(text[start:end], "tokens")


def test_tokens_of_spans_of_real_documents_are_exact(corpora_dir: Path) -> None:
    import random

    rng = random.Random(8)
    tokenizer = get_tokenizer("cl100k_base")
    files = sorted(corpora_dir.rglob("*.md"))
    checked = 0
    for path in rng.sample(files, 60):
        text = path.read_text(encoding="utf-8")
        if len(text) < 200:
            continue
        meter = TokenMeter(text, tokenizer)
        for _ in range(40):
            start = rng.randrange(len(text))
            end = min(len(text), start + rng.choice([120, 700, 2500, 9000]))
            assert meter.size(start, end) == recount(text[start:end], "tokens"), (path.name, start, end)
            checked += 1
    assert checked > 1000


# Code and link lists: lines with few "word word" gaps, so the meter syncs at line starts before
# non-space characters and ends spans after punctuation before a space or a tab; next to what could
# join a line break to the character after it (white space of every kind, runs of punctuation before
# line breaks, a line break alone at the text's end).
code_lines = st.lists(
    st.sampled_from(
        [
            "foo.bar();",
            "[`x`]:",
            "/functions/urls/",
            "x=1",
            "{{",
            "}}",
            "if(a){",
            "'s",
            "don't",
            "2024",
            "café",
            "日本",
            "👍🏽",
            "e\u0301",
            " ",
            "  ",
            "\t",
            "\u00a0",
            "\u3000",
            "\x1c",
            "\x85",
            "\u2028",
            "\n",
            "\n\n",
            "\r\n",
            " \n",
            "\n  ",
            "\n\t",
            ".\n",
            ");\n",
            "...",
            "word",
        ]
    ),
    min_size=20,
    max_size=500,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_tokens_of_a_span_of_code_from_one_encoding_are_exact(data: st.DataObject) -> None:
    text = data.draw(code_lines, label="text")
    meter = TokenMeter(text, get_tokenizer("cl100k_base"))
    for _ in range(6):
        start, end = span(data, text)
        assert meter.size(start, end) == recount(text[start:end], "tokens")


# Text where sync points are rare: indented list lines, runs of spaces and tabs, CJK, runs of
# punctuation, line breaks of every kind, and now and then a "word word" gap or a line start before
# non-space, so that the sync point searches cross long stretches without one and stop just before,
# at and after the end of a span.
sparse_sync = st.lists(
    st.sampled_from(
        [
            " ",
            "  ",
            " " * 7,
            " " * 40,
            "\t",
            "\u3000",
            "\u00a0",
            "\n",
            "\n\n",
            "\r\n",
            "\r",
            "\n  ",
            "\n" + " " * 30,
            "\n \r",
            "- a",
            "- ",
            "* [x] ",
            "日本語",
            "中文字符",
            "……",
            "!!!",
            "...",
            "-->",
            ");",
            "'s",
            "a",
            "1",
            "a b",
            "\nx",
            "\u2028",
            "\x85",
        ]
    ),
    min_size=10,
    max_size=400,
).map("".join)


# cl100k's pre-tokenizer as the regex module reads it (``$`` is the text's end there, as in tiktoken).
PIECES = regex.compile(_CL100K_PATTERN.replace("$", r"\Z"))


def pieces(text: str, offset: int = 0) -> list[tuple[int, int]]:
    return [(m.start() + offset, m.end() + offset) for m in PIECES.finditer(text)]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_sync_points_of_a_span_split_its_pieces(data: st.DataObject) -> None:
    """The rule itself, without the meter's check that a token of the document starts at each sync
    point: the span's own pieces are those of its head alone, the document's between the two sync
    points, and those of its tail alone."""
    text = data.draw(st.one_of(code_lines, long_prose, sparse_sync), label="text")
    meter = TokenMeter(text, get_tokenizer("cl100k_base"))
    for _ in range(6):
        start, end = span(data, text)
        if end - start < 2:
            continue
        q1 = meter._head(start, end)[0]
        q2 = meter._tail(start, end)[0]
        if not start <= q1 < q2 <= end:
            continue
        between = [(a, b) for a, b in pieces(text) if q1 <= a < q2]
        assert between and between[0][0] == q1 and between[-1][1] == q2
        expected = pieces(text[start:q1], start) + between + pieces(text[q2:end], q2)
        assert pieces(text[start:end], start) == expected


def test_spans_of_code_are_counted_from_the_one_encoding() -> None:
    """Line starts are sync points, and an end after punctuation before a space needs no tail: a span
    of link lines is encoded again only in its first and last few characters."""
    lines = "".join(f"[`name{k}`]: /functions/urls/name{k}/ x\n" for k in range(40))
    meter = TokenMeter(lines, get_tokenizer("cl100k_base"))
    end = lines.index(" x\n", 1000)
    encoded: list[str] = []
    count = meter.tokenizer._count
    meter.tokenizer._count = lambda text: encoded.append(text) or count(text)
    try:
        assert meter.size(5, end) == recount(lines[5:end], "tokens")
    finally:
        del meter.tokenizer._count
    assert sum(map(len, encoded)) < 50


def test_spans_of_indented_lines_are_counted_from_the_one_encoding() -> None:
    """Indented line starts are sync points: a span of list lines indented by 1 to 199 spaces, with a
    line start before non-space only every 200 lines, is encoded again only in its first and last
    lines, its own sync points found where the span holds the line's indentation and first character."""
    lines = "".join(" " * (i % 200) + "- a\n" for i in range(1, 120))
    meter = TokenMeter(lines, get_tokenizer("cl100k_base"))
    encoded: list[str] = []
    count = meter.tokenizer._count
    meter.tokenizer._count = lambda text: encoded.append(text) or count(text)
    try:
        for start, end in [(5, 4000), (3, lines.index("- a", 2000) - 7), (lines.index("\n", 100) + 3, 5000)]:
            assert meter.size(start, end) == recount(lines[start:end], "tokens"), (start, end)
    finally:
        del meter.tokenizer._count
    assert sum(map(len, encoded)) < 1000


def test_count_remembers_short_texts_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    monkeypatch.setattr("chunkyard.chunking.units._MEMO_SIZE", 3)
    monkeypatch.setattr(tokenizer, "_counts", {})
    texts = ["", " ", "    ", "\t\t", "don't", "日本語", "👍🏽", "x" * 32, "y" * 33, "    "]
    for _ in range(2):
        for text in texts:
            assert tokenizer.count(text) == len(cl100k_encoding().encode_ordinary(text))
    assert len(tokenizer._counts) <= 3 and all(len(text) <= 32 for text in tokenizer._counts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_token_meter_measures_many_spans_exactly(data: st.DataObject) -> None:
    """The meter remembers heads and tails per start and end: any order of spans stays exact."""
    text = data.draw(long_prose, label="text")
    meter = TokenMeter(text, get_tokenizer("cl100k_base"))
    for _ in range(12):
        start, end = span(data, text)
        assert meter.size(start, end) == recount(text[start:end], "tokens")


def spans_in_any_order(data: st.DataObject, text: str, count: int) -> list[tuple[int, int]]:
    """Spans of ``text``, long and short, in any order, some of them again, some sharing a start or
    an end with another."""
    spans: list[tuple[int, int]] = []
    for _ in range(count):
        how = data.draw(st.sampled_from(["new", "again", "same start", "same end"]), label="how")
        if spans and how == "again":
            spans.append(data.draw(st.sampled_from(spans), label="again"))
        elif spans and how == "same start":
            start = data.draw(st.sampled_from(spans), label="start of")[0]
            spans.append((start, data.draw(st.integers(start, len(text)), label="end")))
        elif spans and how == "same end":
            end = data.draw(st.sampled_from(spans), label="end of")[1]
            spans.append((data.draw(st.integers(0, end), label="start"), end))
        else:
            spans.append(span(data, text))
    return spans


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_sync_point_searches_match_the_regex(data: st.DataObject) -> None:
    """``SyncPoints`` answers every search as the regex module's search of that span alone, whatever
    it learned before, and every gap it keeps holds no sync point of the text; also when it keeps
    every gap (the smallest ``_GAP_MEMO``), so that searches meet known gaps everywhere."""
    text = data.draw(st.one_of(sparse_sync, code_lines), label="text")
    memo = data.draw(st.sampled_from([0, 1, 5, units._GAP_MEMO]), label="memo")
    saved, units._GAP_MEMO = units._GAP_MEMO, memo
    try:
        sync = SyncPoints(text)
        for start, end in spans_in_any_order(data, text, 30):
            first, last = _SYNC.search(text, start, end), _SYNC_REVERSE.search(text, start, end)
            assert sync.first(start, end) == (first and first.start()), ("first", start, end)
            assert sync.last(start, end) == (last and last.start()), ("last", start, end)
    finally:
        units._GAP_MEMO = saved
    points = [q for q in range(len(text) + 1) if _SYNC.match(text, q)]
    assert all(a < b for a, b in zip(sync._hi, sync._lo[1:], strict=False)), "gaps touch or overlap"
    for a, b in zip(sync._lo, sync._hi, strict=True):
        assert not [q for q in points if a <= q < b], (a, b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_warm_meter_measures_each_span_as_a_fresh_one(data: st.DataObject) -> None:
    """A meter that has measured many spans in any order (again, sharing starts and ends) gives for
    each span what a meter made for that span alone gives, and the exact count; its sync point
    searches answer as a fresh meter's (the regex search), with the memo warm."""
    text = data.draw(st.one_of(sparse_sync, code_lines), label="text")
    tokenizer = get_tokenizer("cl100k_base")
    memo = data.draw(st.sampled_from([0, units._GAP_MEMO]), label="memo")
    saved, units._GAP_MEMO = units._GAP_MEMO, memo
    try:
        meter = TokenMeter(text, tokenizer)
        for start, end in spans_in_any_order(data, text, 16):
            fresh = TokenMeter(text, tokenizer)
            assert meter._sync.first(start, end) == fresh._sync.first(start, end), ("first", start, end)
            assert meter._sync.last(start, end) == fresh._sync.last(start, end), ("last", start, end)
            size = meter.size(start, end)
            assert size == fresh.size(start, end) == recount(text[start:end], "tokens"), (start, end)
    finally:
        units._GAP_MEMO = saved


@pytest.mark.parametrize("strategy", ["markdown", "recursive"])
def test_deeply_indented_lines_are_measured_in_linear_time(strategy: str) -> None:
    """``_SYNC`` points 20,000 characters apart (a line start before non-space every 200 lines): each
    span's search reads only text no earlier search read, and the indented line starts between are
    sync points too, so that a span is encoded again only at its edges. Before, every span read its
    whole length again, and most were encoded whole."""
    text = "".join(" " * (i % 200) + "- a\n" for i in range(4_000))  # 414,000 characters
    config = {"strategy": strategy, "unit": "tokens", "max_size": 512, "overlap": 64}
    started = time.process_time()
    result = split_document(text, config)
    elapsed = time.process_time() - started
    assert_chunk_invariants(text, config, result)
    # About 0.1 s (markdown 4.8 s, recursive 0.5 s before) on a loaded 2-core machine: generous bound.
    assert elapsed < 3, f"{strategy}: {elapsed:.1f} s"
