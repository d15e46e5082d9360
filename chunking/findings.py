"""Boundary findings: a pure checker that says what is suspicious about each chunk.

The codes are stored in the ``findings`` column and counted in the manifest; ``FINDINGS`` gives
each one's meaning and the config change that fixes it. The reviewer puts them in front of people.
"""

from __future__ import annotations

import bisect

import regex

from chunkyard.chunking import packer
from chunkyard.chunking.packer import ATX_LAST_LINE as _ATX_LINE
from chunkyard.chunking.packer import PHRASE_SPACED, Span
from chunkyard.chunking.packer import SENTENCE_ENDED as _SENTENCE_END

FINDINGS: dict[str, tuple[str, str]] = {
    "over_budget": (
        "The chunk is larger than max_size because no boundary fits inside the budget.",
        "Raise max_size, or use a finer unit; the chunk keeps the text whole rather than drop it.",
    ),
    "mid_sentence_start": (
        "The chunk starts in the middle of a sentence.",
        "Raise max_size or overlap, or use the sentence/markdown strategy.",
    ),
    "mid_sentence_end": (
        "The chunk ends in the middle of a sentence.",
        "Raise max_size, or use the sentence/markdown strategy.",
    ),
    "split_procedure": (
        "A numbered procedure is cut between this chunk and the next.",
        "Raise max_size so the procedure fits, or rely on the lead-in carried in embed_text.",
    ),
    "split_list": (
        "A bullet list is cut between this chunk and the next.",
        "Raise max_size so the list fits.",
    ),
    "split_table": (
        "A table is cut between this chunk and the next (its header is repeated in embed_text).",
        "Raise max_size so the table fits.",
    ),
    "split_code": (
        "A code block is cut between this chunk and the next.",
        "Raise max_size for code files, e.g. with a rule matching them.",
    ),
    "heading_at_end": (
        "The chunk ends with a heading whose content is in the next chunk.",
        "Use the markdown strategy, which opens chunks with headings.",
    ),
    "undersized": (
        "The chunk is smaller than min_size.",
        "Lower min_size, or raise it on purpose to merge small sections.",
    ),
    "high_overlap": (
        "More than half of the chunk repeats the previous chunk.",
        "Lower overlap relative to max_size.",
    ),
    "prefix_shortened": (
        "The chunk's embed_text prefix (title, heading path, lead-in or table header) would take more than "
        "half of max_size, so it was shortened: the title dropped, then outer headings, then outer "
        "lead-ins, then the heading, then the rest cut at a word gap (chunkyard.chunking.prefix).",
        "Raise max_size, shorten the headings or lead-ins, turn off context.title or context.headings, "
        "or set budget: text if you embed the text alone.",
    ),
    "constraint_unmet": (
        "A reviewer's constraint (keep this span together / break here) could not be met within the budget.",
        "Raise max_size so the kept span fits, or retract the constraint in the reviewer.",
    ),
}

# A chunk edge is clean after a sentence end (the packer's marks, and : ;), or, in Thai and Lao,
# at a space between two letters (see ``packer.SENTENCE``).
_PHRASE_LETTER = regex.compile("[" + PHRASE_SPACED + "]")

_GROUP_CODES = {
    "procedure": "split_procedure",
    "list": "split_list",
    "table": "split_table",
    "code": "split_code",
}


def check_spans(text: str, spans: list[Span], layout, min_size: int) -> list[list[str]]:
    """Finding codes for each span, in order. ``layout`` is a ``chunkyard.chunking.strategies.Layout``."""
    plan = layout.plan
    if packer._native is not None:  # the same checks in C (chunking/_pack.c); _check_spans is the reference
        results = packer._native.check_spans(
            text,
            spans if isinstance(spans, list) else list(spans),
            layout.heading_starts,
            plan.groups,
            plan.start,
            min_size,
            packer._char_classes,
        )
    else:
        results = _check_spans(text, spans, layout, min_size)
    if plan.keep or plan.breaks:  # reviewer constraints (most documents have none)
        for index in unmet_constraint_chunks(text, spans, plan.keep, plan.breaks):
            if "constraint_unmet" not in results[index]:
                results[index].append("constraint_unmet")
    return results


def _check_spans(text: str, spans: list[Span], layout, min_size: int) -> list[list[str]]:
    """The findings of ``check_spans`` but ``constraint_unmet``, in Python."""
    results: list[list[str]] = [[] for _ in spans]
    plan = layout.plan
    split_groups = [g for g in plan.groups if g.kind in _GROUP_CODES]
    cut = _GroupCuts(text, spans, split_groups)
    for index, span in enumerate(spans):
        codes = results[index]
        if span.over_budget:
            codes.append("over_budget")
        is_last = index == len(spans) - 1
        if index > 0 and not _clean_start(text, span.start, plan.start):
            codes.append("mid_sentence_start")
        if not is_last and not _clean_end(text, span.end):
            codes.append("mid_sentence_end")
        if not is_last:
            for code in cut.codes(span.end):
                if code not in codes:
                    codes.append(code)
            if _ends_with_heading(text, span, layout):
                codes.append("heading_at_end")
        if min_size and span.size < min_size and len(spans) > 1:
            codes.append("undersized")
        if index > 0:
            previous = spans[index - 1]
            shared = previous.end - span.start
            if shared > 0 and shared * 2 > span.end - span.start:
                codes.append("high_overlap")
    return results


def keep_met(spans: list[Span], start: int, end: int) -> bool:
    """Whether some chunk holds all of [start, end)."""
    return any(span.start <= start and span.end >= end for span in spans)


def break_met(text: str, spans: list[Span], position: int) -> bool:
    """Whether no chunk holds text on both sides of ``position``."""
    return not any(
        span.start < position < span.end
        and text[span.start : position].strip()
        and text[position : span.end].strip()
        for span in spans
    )


def unmet_constraint_chunks(
    text: str, spans: list[Span], keep: list[tuple[int, int]], breaks: list[int]
) -> list[int]:
    """Indexes of the chunks that cut a keep span or cross a break (the first such chunk each)."""
    found: list[int] = []
    for start, end in keep:
        if spans and not keep_met(spans, start, end):
            # The chunk where the span begins is the one that failed to hold it.
            found.append(next((i for i, s in enumerate(spans) if s.end > start), len(spans) - 1))
    for position in breaks:
        if not break_met(text, spans, position):
            found.append(next(i for i, s in enumerate(spans) if s.start < position < s.end))
    return found


class _GroupCuts:
    """Which kept groups a chunk end cuts, in time linear in chunks and groups.

    A group is cut at ``pos`` when ``body_start < pos < end`` with text after ``pos`` in it, unless
    some chunk holds the whole group (it was split on purpose, e.g. repeated by overlap) or ``pos``
    lies between the members of a code group (a class split between its methods). Chunk ends are
    visited in increasing order, so the groups containing the current end are swept in once and
    dropped once; a chunk holding a whole group is found by bisecting the chunk starts.
    """

    def __init__(self, text: str, spans: list[Span], groups: list):
        self.text = text
        # (position in the plan, group), swept in by body_start; codes keep the plan's order.
        self.groups = sorted(enumerate(groups), key=lambda item: (item[1].body_start, item[0]))
        self.next = 0
        self.active: list = []
        self.last_pos = -1
        order = sorted(range(len(spans)), key=lambda i: spans[i].start)
        self.span_starts = [spans[i].start for i in order]
        self.reach: list[int] = []  # furthest end among the chunks starting at or before each start
        furthest = -1
        for i in order:
            furthest = max(furthest, spans[i].end)
            self.reach.append(furthest)
        code = sorted((g for g in groups if g.kind == "code"), key=lambda g: g.start)
        self.code_starts = [g.start for g in code]
        self.code = code

    def codes(self, pos: int) -> list[str]:
        if pos < self.last_pos:  # ends out of order (a peer's spans): start the sweep again
            self.next, self.active = 0, []
        self.last_pos = pos
        groups = self.groups
        while self.next < len(groups) and groups[self.next][1].body_start < pos:
            self.active.append(groups[self.next])
            self.next += 1
        self.active = [item for item in self.active if item[1].end > pos]
        found = []
        for _, group in sorted(self.active, key=lambda item: item[0]):
            if (
                self.text[pos : group.end].strip()
                and not self._between_members(group, pos)
                and not self._held_whole(group)
            ):
                found.append(_GROUP_CODES[group.kind])
        return found

    def _held_whole(self, group) -> bool:
        k = bisect.bisect_right(self.span_starts, group.start)
        return k > 0 and self.reach[k - 1] >= _content_end(self.text, group.end)

    def _between_members(self, group, pos: int) -> bool:
        """``pos`` lies between nested definitions (code groups inside ``group``) and inside none."""
        if group.kind != "code":
            return False
        i = bisect.bisect_left(self.code_starts, group.start)
        j = bisect.bisect_right(self.code_starts, group.end)
        members = [g for g in self.code[i:j] if g is not group and g.end <= group.end]
        if not members or pos < min(m.start for m in members):
            return False
        return not any(m.start < pos < m.end for m in members)


def _content_end(text: str, end: int) -> int:
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _clean_start(text: str, start: int, doc_start: int) -> bool:
    pos = start
    while pos > doc_start and text[pos - 1].isspace():
        if text[pos - 1] == "\n":
            return True
        pos -= 1
    if pos <= doc_start:
        return True
    if pos < start < len(text) and _PHRASE_LETTER.match(text, pos - 1) and _PHRASE_LETTER.match(text, start):
        return True
    return _SENTENCE_END.search(text[max(doc_start, pos - 4) : pos]) is not None


# Characters looked at past a chunk's end for the rest of its line (a chunk ending a line ends cleanly),
# and at the end of a chunk for a heading line when the strategy recorded no headings.
_CLEAN_END_LOOKAHEAD = 200
_HEADING_TAIL = 300


def _clean_end(text: str, end: int) -> bool:
    if _SENTENCE_END.search(text[max(0, end - 4) : end]):
        return True
    if 0 < end < len(text) and _PHRASE_LETTER.match(text, end - 1):
        after, stop = end, min(len(text), end + _CLEAN_END_LOOKAHEAD)
        while after < stop and text[after] != "\n" and text[after].isspace():
            after += 1
        if after > end and after < len(text) and _PHRASE_LETTER.match(text, after):
            return True
    newline = text.find("\n", end, end + _CLEAN_END_LOOKAHEAD)
    return newline != -1 and not text[end:newline].strip()


def _ends_with_heading(text: str, span: Span, layout) -> bool:
    starts = layout.heading_starts
    if starts:
        import bisect

        i = bisect.bisect_right(starts, span.end) - 1
        if i >= 0 and span.start < starts[i] < span.end:
            # The heading's line runs to the chunk end: nothing after it in this chunk.
            line_end = text.find("\n", starts[i], span.end)
            rest = "" if line_end == -1 else text[line_end : span.end]
            underline = rest.strip()
            return not underline or set(underline) <= set("=-")
        return False
    tail = text[max(span.start, span.end - _HEADING_TAIL) : span.end]
    return _ATX_LINE.search(tail) is not None and span.end - span.start > len(tail.rsplit("\n", 1)[-1])


def explain(code: str) -> str:
    meaning, fix = FINDINGS.get(code, ("Unknown finding.", ""))
    return f"{meaning} {fix}".strip()
