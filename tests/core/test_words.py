"""Counts in messages read as English: "1 chunk", "2 chunks", "1 more line"."""

from __future__ import annotations

from chunkyard.chunking.words import plural


def test_plural_counts() -> None:
    assert plural(1, "chunk") == "1 chunk"
    assert plural(0, "chunk") == "0 chunks"
    assert plural(1200, "question") == "1,200 questions"
    assert plural(1, "more line") == "1 more line"
    assert plural(3, "more line") == "3 more lines"
    assert plural(2, "entry", "entries") == "2 entries"
