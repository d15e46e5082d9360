"""Reviewer constraints: what a review decision asks of the chunker, anchored so it survives edits.

A constraint is *keep together* (a span ``[start, end)`` must lie inside one chunk) or *break here*
(a chunk boundary at ``start``). It comes from a flag (``constraint_for_flag``) or is set explicitly
by a reviewer, and is stored in the review ledger as a ``constraint`` event: the kind in ``reason``,
the offset in ``boundary``, and the anchor as a JSON object in ``note`` (the ledger has no columns
for spans; the JSON carries a ``chunkyard_constraint`` version key).

Anchoring. A constraint records the sha256 of the document it was placed on and the text around
it: for a keep, the span's text plus up to ``CONTEXT`` characters on each side; for a break, the
context on each side. ``place`` puts it on a document: on the same bytes the stored offsets are
used as they are; on changed bytes it is *re-anchored* by its text — the span text found exactly
once (disambiguated by its context when it repeats), else the span's first and last ``EDGE``
characters (a third of a short span) each found once and in order (so an edit inside a kept procedure keeps the constraint).
When the text is gone or ambiguous the constraint is *stale*: it is reported, never applied blindly.

Flags become constraints (``constraint_for_flag``): a flagged boundary keeps the unit it cut — the
procedure, list, table or code block around it (the strategy's ``Layout`` groups; for a strategy
without groups, those the Markdown line scanner finds in the text), a heading with
its first block (also for a cut right before a heading: the sentences on both sides would join the
heading to the text before it), else the sentences on both sides; a chunk flagged ``too_small`` is kept with its
smaller neighbour; ``too_large`` breaks at its best-scored inner boundary nearest the middle; the
other chunk reasons about cuts (``split_*``, ``mid_sentence``, ``heading_at_end``) are about the
chunk's end boundary. ``wrong_section`` and ``other`` say nothing the chunker can act on.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from chunkyard.chunking.markdown import scan
from chunkyard.chunking.packer import SENTENCE_OR_PARAGRAPH, Plan
from chunkyard.chunking.segmenter import match_ends

KEEP, BREAK = "keep_together", "break_here"
KINDS = (KEEP, BREAK)
CONTEXT = 48  # characters of context stored on each side of a constraint
EDGE = 64  # characters at each end of a keep span used to re-anchor an edited span
FORMAT_VERSION = 1
# How far from a flagged boundary the sentences around it are looked for (_sentences_around).
_SENTENCE_REACH = 4000

# Flag reasons about a cut: the unit kinds a flagged boundary with that reason most likely cut.
_REASON_KINDS: dict[str, tuple[str, ...]] = {
    "split_procedure": ("procedure", "list"),
    "split_table": ("table",),
    "split_code": ("code",),
}
_CUT_REASONS = ("split_procedure", "split_table", "split_code", "mid_sentence", "heading_at_end")


@dataclass(frozen=True, slots=True)
class Placement:
    """A constraint placed on one text: what the packer gets (``end == start`` for a break)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Constraint:
    """A constraint as recorded: where it was placed, on which bytes, and the text that anchors it."""

    kind: str
    doc_id: str
    doc_sha256: str
    start: int
    end: int
    before: str = ""
    text: str = ""
    after: str = ""
    origin: str = "explicit"  # "explicit", or "flag" when derived from flag event ``flag_event``
    flag_event: int | None = None
    id: int = 0  # the ledger event id once recorded

    def payload(self) -> str:
        """The JSON stored in the constraint event's ``note``."""
        data = {
            key: value
            for key, value in asdict(self).items()
            if key not in ("id", "kind", "doc_id", "doc_sha256")
        }
        return json.dumps(
            {"chunkyard_constraint": FORMAT_VERSION, **data}, ensure_ascii=False, sort_keys=True
        )

    def summary(self) -> dict:
        """What manifests list about a constraint (no anchor text)."""
        return {
            "id": self.id,
            "doc_id": self.doc_id,
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "origin": self.origin,
            "flag_event": self.flag_event,
        }


def anchor(
    text: str,
    doc_id: str,
    doc_sha256: str,
    kind: str,
    start: int,
    end: int | None = None,
    *,
    origin: str = "explicit",
    flag_event: int | None = None,
) -> Constraint:
    """A constraint on ``text`` with its anchor; keep spans are trimmed of surrounding whitespace."""
    if kind not in KINDS:
        raise ValueError(f"unknown constraint {kind!r} (one of {', '.join(KINDS)})")
    end = start if kind == BREAK or end is None else end
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"constraint span [{start}:{end}] is outside the document ({len(text)} characters)")
    if kind == KEEP:
        start, end = _trim(text, start, end)
        if start >= end:
            raise ValueError("a keep-together span must hold some text")
    return Constraint(
        kind,
        doc_id,
        doc_sha256,
        start,
        end,
        before=text[max(0, start - CONTEXT) : start],
        text=text[start:end] if kind == KEEP else "",
        after=text[end : end + CONTEXT],
        origin=origin,
        flag_event=flag_event,
    )


def place(constraint: Constraint, text: str, doc_sha256: str) -> Placement | None:
    """The constraint on this text: as recorded on the same bytes, re-anchored by text, or None (stale)."""
    if doc_sha256 == constraint.doc_sha256 and constraint.end <= len(text):
        return Placement(constraint.kind, constraint.start, constraint.end)
    if constraint.kind == KEEP:
        span = _find_keep(constraint, text)
    else:
        span = _find_break(constraint, text)
    return None if span is None else Placement(constraint.kind, span[0], span[1])


def apply_placements(plan: Plan, text: str, placements: Iterable[Placement]) -> None:
    """Put placed constraints on a strategy's plan (what ``split_document`` does with them)."""
    keep: list[tuple[int, int]] = []
    breaks: list[int] = []
    for placement in placements:
        if placement.kind == KEEP:
            start, end = _trim(text, max(placement.start, plan.start), min(placement.end, plan.end))
            if start < end:
                keep.append((start, end))
        elif plan.start < placement.start < plan.end:
            breaks.append(placement.start)
    plan.keep = sorted(set(plan.keep) | set(keep))
    plan.breaks = sorted(set(plan.breaks) | set(breaks))


# ---------------------------------------------------------------------------------------------
# Re-anchoring


def _unique(text: str, needle: str) -> int | None:
    if not needle:
        return None
    first = text.find(needle)
    if first == -1 or text.find(needle, first + 1) != -1:
        return None
    return first


def _find_keep(constraint: Constraint, text: str) -> tuple[int, int] | None:
    body = constraint.text
    if not body.strip():
        return None
    length = len(body)
    # The whole span, disambiguated by ever more context when it occurs more than once.
    for prefix, suffix in (
        ("", ""),
        (constraint.before[-16:], ""),
        ("", constraint.after[:16]),
        (constraint.before, constraint.after),
    ):
        found = _unique(text, prefix + body + suffix)
        if found is not None:
            start = found + len(prefix)
            return start, start + length
    # The span was edited inside: its two ends, each found once and in order, bound it again.
    if length < 36:
        return None  # too short to have two ends that identify it
    edge = min(EDGE, length // 3)  # each end a third at most, so an edit in the middle spares both
    head, tail = body[:edge], body[-edge:]
    start = _unique(text, head)
    tail_at = _unique(text, tail)
    if start is None or tail_at is None or tail_at < start:
        return None
    end = tail_at + len(tail)
    if end - start > 2 * length + EDGE:
        return None  # the ends are far apart: not the same unit any more
    return start, end


def _find_break(constraint: Constraint, text: str) -> tuple[int, int] | None:
    before, after = constraint.before, constraint.after
    found = _unique(text, before + after)
    if found is not None:
        return found + len(before), found + len(before)
    if len(before.strip()) >= 16 and (found := _unique(text, before)) is not None:
        return found + len(before), found + len(before)
    if len(after.strip()) >= 16 and (found := _unique(text, after)) is not None:
        return found, found
    return None


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# ---------------------------------------------------------------------------------------------
# From flags


def constraint_for_flag(
    reason: str,
    boundary: int | None,
    chunk_index: int,
    spans: list[tuple[int, int]],
    text: str,
    layout,
    doc_id: str,
    doc_sha256: str,
    flag_event: int | None = None,
) -> Constraint | None:
    """The constraint a flag asks for, on the text and chunks the flag was made on (None: nothing to do).

    ``spans`` are the document's chunks in order (``chunk_index`` indexes them); ``layout`` is the
    strategy's ``chunkyard.chunking.strategies.Layout`` of ``text``.
    """
    if not 0 <= chunk_index < len(spans):
        return None
    chunk_start, chunk_end = spans[chunk_index]

    def made(kind: str, start: int, end: int | None = None) -> Constraint | None:
        try:
            return anchor(text, doc_id, doc_sha256, kind, start, end, origin="flag", flag_event=flag_event)
        except ValueError:
            return None

    if boundary is None:
        if reason == "too_small" and len(spans) > 1:
            neighbours = [i for i in (chunk_index - 1, chunk_index + 1) if 0 <= i < len(spans)]
            # The smaller neighbour: the merged span is the likeliest to fit the budget.
            other = min(neighbours, key=lambda i: (spans[i][1] - spans[i][0], -i))
            return made(KEEP, min(chunk_start, spans[other][0]), max(chunk_end, spans[other][1]))
        if reason == "too_large":
            position = best_inner_boundary(text, layout.plan, chunk_start, chunk_end)
            return made(BREAK, position) if position is not None else None
        if reason not in _CUT_REASONS:
            return None
        # A chunk flagged for a cut: the cut at its end, or at its start for the last chunk.
        if chunk_index < len(spans) - 1:
            boundary = chunk_end
        elif chunk_index > 0:
            boundary = chunk_start
        else:
            return None
    span = unit_around(text, layout, boundary, reason)
    return made(KEEP, *span) if span is not None else None


def unit_around(text: str, layout, boundary: int, reason: str = "") -> tuple[int, int] | None:
    """The unit a cut at ``boundary`` splits: a group of the layout, a heading's block, or sentences."""
    structural = [g for g in layout.plan.groups if g.kind != "section"]
    if not structural:
        # Strategies without structure (recursive, sentence, fixed) still cut procedures and tables:
        # find the units with the Markdown line scanner, which recognises them in plain text too.
        structural = [g for g in scan(text).groups if g.kind != "section"]
    groups = [g for g in structural if g.start < boundary < _trim(text, g.start, g.end)[1]]
    preferred = [g for g in groups if g.kind in _REASON_KINDS.get(reason, ())]
    if preferred:
        outer = min(preferred, key=lambda g: (g.start, -g.end))  # the whole procedure, not a nested list
        return _trim(text, outer.start, outer.end)
    if groups:
        inner = min(groups, key=lambda g: (g.end - g.start, g.start))
        return _trim(text, inner.start, inner.end)
    right = boundary
    while right < len(text) and text[right].isspace():
        right += 1
    opens_heading = right in set(layout.heading_starts)
    if (reason == "heading_at_end" or opens_heading) and layout.heading_starts:
        # A cut right before a heading cuts no sentence: what it may cut is the heading from its block.
        i = bisect.bisect_right(layout.heading_starts, right) - 1
        if i >= 0:
            heading = layout.heading_starts[i]
            block_end = text.find("\n\n", text.find("\n", boundary if boundary > heading else heading) + 1)
            return _trim(text, heading, len(text) if block_end == -1 else block_end)
    return _sentences_around(text, boundary)


def _sentences_around(text: str, boundary: int) -> tuple[int, int] | None:
    left = boundary - 1
    while left >= 0 and text[left].isspace():
        left -= 1
    right = boundary
    while right < len(text) and text[right].isspace():
        right += 1
    if left < 0 or right >= len(text):
        return None
    low, high = max(0, left - _SENTENCE_REACH), min(len(text), right + _SENTENCE_REACH)
    starts = [low, *match_ends(SENTENCE_OR_PARAGRAPH, text, low, high), high]
    start = starts[bisect.bisect_right(starts, left) - 1]
    end = (
        starts[bisect.bisect_right(starts, right)]
        if bisect.bisect_right(starts, right) < len(starts)
        else high
    )
    start, end = _trim(text, start, end)
    return (start, end) if start < boundary < end else None


def best_inner_boundary(text: str, plan: Plan, start: int, end: int) -> int | None:
    """The best-scored boundary in the middle half of [start, end), nearest the middle among equals."""
    low, high = start + (end - start) // 4, end - (end - start) // 4
    if high <= low:
        return None
    middle = (start + end) / 2
    candidates: list[tuple[int, int]] = []  # (score, position)
    i, j = bisect.bisect_left(plan.positions, low), bisect.bisect_right(plan.positions, high)
    candidates.extend((plan.scores[k], plan.positions[k]) for k in range(i, j))
    for level in plan.levels:
        if level.name == "grapheme" and candidates:
            continue
        for pos in match_ends(level, text, max(0, low - 1), high):
            if low <= pos <= high:
                candidates.append((level.score, pos))
    candidates = [
        (score, pos) for score, pos in candidates if text[start:pos].strip() and text[pos:end].strip()
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda item: (item[0], -abs(item[1] - middle), -item[1]))[1]


__all__ = [
    "BREAK",
    "KEEP",
    "KINDS",
    "Constraint",
    "Placement",
    "anchor",
    "apply_placements",
    "best_inner_boundary",
    "constraint_for_flag",
    "place",
    "unit_around",
]
