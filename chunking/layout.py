"""What every strategy produces and shares: the ``Layout`` of one document, the file-type suffix sets
and the title a file's name gives.

Its own module so that strategies living elsewhere (``chunkyard.chunking.semantic``) and the
registry in ``chunkyard.chunking.strategies`` both import it, with no import circle.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from chunkyard.chunking.packer import Group, Plan

MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
# Binary formats whose extracted text is written as Markdown (chunkyard.chunking.pdf, chunkyard.chunking.word).
DOCUMENT_SUFFIXES = {".pdf": "pdf", ".docx": "docx"}


def file_title(path: str | None) -> str:
    return PurePosixPath(path).stem.replace("-", " ").replace("_", " ") if path else ""


@dataclass
class Layout:
    """A strategy's view of one document: the packer plan and the context for metadata."""

    plan: Plan
    strategy: str
    title: str = ""
    heading_starts: list[int] = field(default_factory=list)
    heading_paths: list[tuple[str, ...]] = field(default_factory=list)
    exclusions: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, reason)
    metadata: dict = field(default_factory=dict)
    _indexes: dict = field(default_factory=dict, repr=False)

    def section_path(self, pos: int) -> tuple[str, ...]:
        """The heading path of the section ``pos`` lies in."""
        i = bisect.bisect_right(self.heading_starts, pos) - 1
        return self.heading_paths[i] if i >= 0 else ()

    def chunk_section_path(self, start: int, end: int) -> tuple[str, ...]:
        """A chunk's section path: the deepest section that holds all of [start, end), i.e. the longest
        common prefix of the path at ``start`` and the paths of the headings inside the chunk.

        A chunk inside one section (most) gets that section's path. A chunk that runs across headings
        (small sections share a chunk) gets their nearest common ancestor, so the path, which
        ``embed_text`` puts before the text, is true of every part of the chunk; the headings it holds
        are in its text.
        """
        starts = self.heading_starts
        i = bisect.bisect_right(starts, start) - 1
        path = self.heading_paths[i] if i >= 0 else ()
        for k in range(i + 1, bisect.bisect_left(starts, end)):
            other = self.heading_paths[k]
            common = 0
            for a, b in zip(path, other, strict=False):
                if a != b:
                    break
                common += 1
            path = path[:common]
            if not path:
                break
        return path

    def groups_around(self, start: int) -> list[Group]:
        """Groups that began before ``start`` and are still open at it (their pieces need context).

        A piece that starts right at the first item still needs the lead-in, so the test is against
        the group's start (lead-in included), not its body.
        """
        return [g for g in self._overlapping(start, start + 1, "context") if g.start < start < g.end]

    def code_label(self, start: int, end: int) -> str:
        """The language of the first code block the span [start, end) overlaps ("" when none)."""
        for group in self._overlapping(start, end, "code"):
            return group.label
        return ""

    def contexts_at(self, starts: list[int]) -> list[tuple[str, ...]]:
        """``tuple(g.context for g in self.groups_around(s))`` for each of ``starts``: one sweep when the
        starts do not decrease (a packer's chunks), as a run builds every chunk's ``embed_text``."""
        if (
            not self.plan.groups
        ):  # recursive, sentence, fixed: nothing to look up (a short page pays per call)
            return [()] * len(starts)
        chosen = self._index("context")[1]
        if not chosen:
            return [()] * len(starts)
        if any(b < a for a, b in itertools.pairwise(starts)):
            return [tuple(g.context for g in self.groups_around(s)) for s in starts]
        out: list[tuple[str, ...]] = []
        active: list[Group] = []  # began before the current start, in (start, end) order
        k, n = 0, len(chosen)
        for start in starts:
            while k < n and chosen[k].start < start:
                active.append(chosen[k])
                k += 1
            if active:
                active = [g for g in active if g.end > start]
            out.append(tuple(g.context for g in active))
        return out

    def labels_of(self, spans: list[tuple[int, int]]) -> list[str]:
        """``self.code_label(start, end)`` for each (start, end): one sweep when neither starts nor ends
        decrease (a packer's chunks)."""
        if not self.plan.groups:
            return [""] * len(spans)
        chosen = self._index("code")[1]
        if not chosen:
            return [""] * len(spans)
        if any(b[0] < a[0] or b[1] < a[1] for a, b in itertools.pairwise(spans)):
            return [self.code_label(start, end) for start, end in spans]
        out: list[str] = []
        active: list[Group] = []  # began before the current end, in (start, end) order
        k, n = 0, len(chosen)
        for start, end in spans:
            while k < n and chosen[k].start < end:
                active.append(chosen[k])
                k += 1
            if active:
                active = [g for g in active if g.end > start]
            out.append(active[0].label if active else "")
        return out

    def _index(self, which: str) -> tuple[list[int], list[Group], int]:
        """Groups that give context (``which="context"``) or a code label (``"code"``), sorted, built once.

        Both in one pass over the groups, at the first call: a run asks for both for every document.
        """
        index = self._indexes.get(which)
        if index is None:
            context: list[Group] = []
            code: list[Group] = []
            for g in self.plan.groups:
                if g.kind != "section" and g.context:
                    context.append(g)
                if g.kind == "code" and g.label:
                    code.append(g)
            for kind, chosen in (("context", context), ("code", code)):
                if chosen:
                    chosen.sort(key=_start_end)
                    self._indexes[kind] = (
                        [g.start for g in chosen],
                        chosen,
                        max(g.end - g.start for g in chosen),
                    )
                else:
                    self._indexes[kind] = ([], chosen, 0)
            index = self._indexes[which]
        return index

    def _overlapping(self, start: int, end: int, which: str) -> list[Group]:
        """Groups of one kind overlapping [start, end), in order, via an index built once."""
        starts, chosen, longest = self._index(which)
        first = bisect.bisect_left(starts, start - longest)
        last = bisect.bisect_left(starts, end)
        return [g for g in chosen[first:last] if g.end > start]


def _start_end(group: Group) -> tuple[int, int]:
    return group.start, group.end
