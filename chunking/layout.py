"""What every strategy produces and shares: the ``Layout`` of one document, the file-type suffix sets
and the title a file's name gives.

Its own module so that strategies living elsewhere (``chunkyard.chunking.semantic``) and the
registry in ``chunkyard.chunking.strategies`` both import it, with no import circle.
"""

from __future__ import annotations

import bisect
import operator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from chunkyard.chunking.packer import Group, Plan

MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
# Binary formats whose extracted text is written as Markdown (chunkyard.chunking.pdf, chunkyard.chunking.word).
DOCUMENT_SUFFIXES = {".pdf": "pdf", ".docx": "docx"}


def file_title(path: str | None) -> str:
    return path_stem(path).replace("-", " ").replace("_", " ") if path else ""


def path_suffix(path: str) -> str:
    """``PurePosixPath(path).suffix`` without building the path (per document, three times)."""
    name = path.rpartition("/")[2]
    if name in ("", "."):  # a trailing slash or dot: the last named part is further back
        return PurePosixPath(path).suffix
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def path_stem(path: str) -> str:
    """``PurePosixPath(path).stem`` without building the path."""
    name = path.rpartition("/")[2]
    if name in ("", "."):
        return PurePosixPath(path).stem
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


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
            if other[: len(path)] == path:
                continue  # a heading under the path (the common case): the path holds
            common = 0
            for a, b in zip(path, other, strict=False):
                if a != b:
                    break
                common += 1
            path = path[:common]
            if not path:
                break
        return path

    def chunk_section_paths(self, spans: list[tuple[int, int]]) -> list[tuple[str, ...]]:
        """``chunk_section_path(start, end)`` for each (start, end) (a run builds every chunk's): a
        chunk with no heading after its start's inside it (most) takes its start's section path."""
        starts, paths = self.heading_starts, self.heading_paths
        if not starts:
            return [()] * len(spans)
        count, first = len(starts), starts[0]
        out: list[tuple[str, ...]] = []
        for start, end in spans:
            i = bisect.bisect_right(starts, start)  # the next heading after the start's own
            if i < count and starts[i] < end:
                out.append(self.chunk_section_path(start, end))
            else:
                out.append(paths[i - 1] if start >= first else ())
        return out

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
        if starts != sorted(starts):  # some start decreases (sorting in C costs less than a Python scan)
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
                # A list, not a generator, into tuple(): a third of the cost on a short page.
                out.append(tuple([g.context for g in active]) if active else ())
            else:
                out.append(())
        return out

    def context_groups(self) -> list[Group]:
        """The groups that give context (sections aside), sorted by (start, end): the index's own list
        (``_index``), not to be changed."""
        return self._index("context")[1] if self.plan.groups else []

    def labels_of(self, spans: list[tuple[int, int]]) -> list[str]:
        """``self.code_label(start, end)`` for each (start, end): one sweep when neither starts nor ends
        decrease (a packer's chunks)."""
        if not self.plan.groups:
            return [""] * len(spans)
        chosen = self._index("code")[1]
        if not chosen:
            return [""] * len(spans)
        # Some start or end decreases: a stable sort by either would change the order.
        if spans != sorted(spans, key=_START) or spans != sorted(spans, key=_END):
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

        Both at the first call: a run asks for both for every document.
        """
        index = self._indexes.get(which)
        if index is None:
            groups = self.plan.groups
            context = [g for g in groups if g.context and g.kind != "section"]
            code = [g for g in groups if g.label and g.kind == "code"]
            for kind, chosen in (("context", context), ("code", code)):
                if chosen:
                    chosen.sort(key=_START_END)
                    self._indexes[kind] = (
                        [g.start for g in chosen],
                        chosen,
                        max([g.end - g.start for g in chosen]),
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


_START_END = operator.attrgetter("start", "end")
_START, _END = operator.itemgetter(0), operator.itemgetter(1)
