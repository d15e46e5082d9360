"""Counts in messages: "1 chunk", "2 chunks" (what users read in the CLI, the reviewer and reports)."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural (``many``, else ``noun + "s"``) unless count is 1;
    thousands separated: ``plural(1200, "chunk")`` is ``"1,200 chunks"``."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"
