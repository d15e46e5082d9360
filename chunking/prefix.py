"""What ``embed_text`` puts before a chunk's text, and the part of the budget it takes.

A chunk's *prefix* is the document title, its heading breadcrumb, and the context of each group it
continues (a list's lead-in sentence, a table's header): each on its own line, then a blank line,
then the text. It depends only on where the chunk starts: the heading path at that start, and the
groups (with a context, sections aside) that began before it and are still open (``Layout.contexts_at``).
With ``budget: embed_text``, a title that is only the file name (no title in the document's
metadata and no level-1 heading: ``layout.file_title``) is left out where a heading path follows:
the headings name the topic, and the file name ("ch03 05 control flow") would take room from the
text (with ``budget: text`` it takes none, and stays). So over the start positions
of a document the prefix is piecewise constant, changing only at heading starts, just after a
group's start and at a group's end; ``Reserve`` holds it as intervals ``[lo, hi)`` of
start positions, each with its prefix and the prefix's size in the config's unit. It is built once
per document: the prefix of each section (no group continued) in one pass over the headings, the
contexts looked up only at the points where they change, each distinct prefix measured once and put
through the shortening steps only when over the cap below; ``Reserve.of_chunks`` then gives every
chunk's prefix in one pass.

With ``budget: embed_text`` (the default) ``max_size`` bounds the whole ``embed_text``: the segmenter
gives a chunk starting at ``s`` an allowance of ``max_size - reserve(s)`` for its text, then measures
every chunk's real ``embed_text`` (for tokens, the tokens of a concatenation are not the sum of the
parts) and searches again from a start whose chunk is over. With ``budget: text`` the prefix is
built the same way and not counted (the behaviour before the switch, for pipelines that embed the
text alone).

Shortening rule (``budget: embed_text`` only). A prefix may take at most half of ``max_size``
(``max_size // 2`` units), so at least half the budget is left for text. A longer one is shortened
by the first of these steps whose result fits:

1. drop the title;
2. drop outer heading levels, one at a time, down to the innermost heading;
3. drop the contexts of outer groups, down to the innermost group's (the one the chunk is in);
4. with a context left, drop the heading too (a table piece's header row, or a step's lead-in, says
   more about it than the heading);
5. cut what is left (the context, else the innermost heading) at its last word gap that fits;
6. no prefix at all.

Where a unit starts (``UNIT_KINDS``: a procedure, list, table or fenced code block, as the plan's
groups and units delimit it) whose text fits the budget alone but not beside its prefix, the prefix
of a chunk starting exactly there is shortened by the same steps to what the unit leaves
(``max_size`` less the unit's size, and at most the cap above), so the unit can be kept whole in the
chunk it opens; a unit that fits nowhere else is embedded with less context rather than cut. The
same holds at the start of each heading right before such a unit (only white space, or other such
headings, between): there the first step drops the heading itself from the breadcrumb (the chunk's
text opens with it), then the steps above follow for the path above it. A chunk whose prefix was
shortened has the finding ``prefix_shortened``.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import regex

from chunkyard.chunking.units import _SYNC, CharMeter, Meter, TokenMeter, WordMeter

if TYPE_CHECKING:
    from chunkyard.chunking.layout import Layout
    from chunkyard.chunking.settings import ChunkerBase

BUDGETS = ("embed_text", "text")
# The kinds of unit a prefix makes room for at its start (the segmenter's PRICE_SPLIT, sections aside).
UNIT_KINDS = ("procedure", "list", "table", "code")
_UNIT_KIND_SET = frozenset(UNIT_KINDS)
# A prefix takes at most max_size // PREFIX_SHARE (the rest, at least half, is the text's).
PREFIX_SHARE = 2  # max_size // PREFIX_SHARE

_WORD = regex.compile(r"\S+")
_GAP = regex.compile(r"\s+")
_SYNC_WINDOW = 256
_NON_SPACE = re.compile(r"\S")  # the packer's: ``str.isspace`` is ``re``'s ``\s``


def least_text_room(settings: ChunkerBase) -> int:
    """The least of ``max_size`` a chunk's text is sure to get beside its prefix (a prefix takes at most
    ``max_size // PREFIX_SHARE``): strategies that add inner boundaries only to units that may not
    fit (``chunkyard.chunking.oversize``) measure against it."""
    if settings.budget != "embed_text":
        return settings.max_size
    return max(1, settings.max_size - settings.max_size // PREFIX_SHARE)


class Prefix(NamedTuple):
    text: str  # what embed_text puts before the chunk text ("" when nothing)
    size: int  # its size in the unit (0 with ``budget: text``)
    shortened: bool = False  # shortened by the rule of the module docstring


def _parts(
    settings: ChunkerBase, title: str, file_named: bool = False
) -> Callable[[tuple[str, ...], tuple[str, ...]], tuple[str | None, tuple[str, ...], tuple[str, ...]]]:
    """(title line or None, heading path, contexts) that a chunk's prefix is made of. A title that is
    only the file name (``file_named``) is left out before a heading path (module docstring)."""
    use_headings = settings.context.headings
    use_title = bool(settings.context.title and title)
    title_key = title.strip().lower()

    def parts(section_path: tuple[str, ...], contexts: tuple[str, ...]):
        path = section_path if use_headings else ()
        show_title = use_title and not (path and (file_named or path[0].strip().lower() == title_key))
        return (title if show_title else None), path, contexts

    return parts


_new_prefix = (
    tuple.__new__
)  # ``_new_prefix(Prefix, (text, size, shortened))``, without the keyword ``__new__``
_NO_PREFIX = Prefix("", 0, False)
_SIZE = operator.itemgetter(1)  # ``Prefix.size``, through ``map``


def _join(title: str | None, path: tuple[str, ...], contexts: tuple[str, ...]) -> str:
    lines: list[str] = []
    if title is not None:
        lines.append(title)
    if path:
        lines.append(" > ".join(path))
    lines.extend(contexts)
    return "\n".join(lines) + "\n\n" if lines else ""


def prefixer(
    settings: ChunkerBase, title: str, file_named: bool = False
) -> Callable[[tuple[str, ...], tuple[str, ...]], str]:
    """What ``embed_text`` puts before a chunk's text, given its section path and the contexts of the
    groups it continues ("" when nothing): the title, the heading breadcrumb, the lead-in or header.

    A piece of a procedure or table that began in an earlier chunk repeats its lead-in sentence or
    header row, so "step 4" is never retrieved alone.
    """
    parts = _parts(settings, title, file_named)
    return lambda section_path, contexts: _join(*parts(section_path, contexts))


def string_size(meter: Meter) -> Callable[[str], int]:
    """How the meter's unit measures a string on its own."""
    if isinstance(meter, CharMeter):
        return len
    if isinstance(meter, WordMeter):
        return lambda s: sum(1 for _ in _WORD.finditer(s))
    if isinstance(meter, TokenMeter):
        return meter.tokenizer.count
    raise TypeError(f"no string measure for {type(meter).__name__}")


def shorten(
    title: str | None, path: tuple[str, ...], contexts: tuple[str, ...], cap: int, size: Callable[[str], int]
) -> tuple[str, bool]:
    """The prefix of these parts, shortened by the module docstring's rule to at most ``cap`` units."""
    shown, _, shortened = sized_shorten(title, path, contexts, cap, size)
    return shown, shortened


def _steps(path: tuple[str, ...], contexts: tuple[str, ...]) -> Iterator[str]:
    """The prefixes of steps 1 to 4 of the module docstring's rule, in order."""
    yield _join(None, path, contexts)
    for k in range(1, len(path)):
        yield _join(None, path[k:], contexts)
    inner_path = path[-1:]
    for k in range(1, len(contexts)):
        yield _join(None, inner_path, contexts[k:])
    if contexts:  # step 4: the innermost group's context says more than the heading
        yield _join(None, (), contexts[-1:])


def sized_shorten(
    title: str | None, path: tuple[str, ...], contexts: tuple[str, ...], cap: int, size: Callable[[str], int]
) -> tuple[str, int, bool]:
    """``shorten``, with the size of the prefix it gives (measured once: for tokens, an encoding)."""
    full = _join(title, path, contexts)
    if not full:
        return "", 0, False
    measured = size(full)
    if measured <= cap:
        return full, measured, False
    for candidate in _steps(path, contexts):  # each built only when the one before is over the cap
        measured = size(candidate) if candidate else 0
        if measured <= cap:
            return candidate, measured, True
    # What step 5 cuts: the innermost context alone (step 4 dropped the heading), else the innermost heading.
    inner_path = () if contexts else path[-1:]
    # Step 5: cut the rest at the last word gap that fits (the sizes grow with the cut: bisect).
    rest = _join(None, inner_path, contexts[-1:])[:-2]
    if size is len:
        # In characters the cut at a gap ``g`` measures ``g + 2``, so only the gaps at or before
        # ``cap - 2`` can fit: the search stops there (a gap starts where white space follows a
        # non-space, wherever the search ends). The last of them fits, and the bisection takes it.
        gaps = [m.start() for m in _GAP.finditer(rest, 0, max(cap - 1, 0)) if m.start() > 0]
    else:
        gaps = [m.start() for m in _GAP.finditer(rest) if m.start() > 0]
    low, high = 0, len(gaps)  # gaps[:low] fit
    while low < high:
        middle = (low + high + 1) // 2
        if size(rest[: gaps[middle - 1]] + "\n\n") <= cap:
            low = middle
        else:
            high = middle - 1
    while low > 0:  # a token count is not strictly monotone: step back until it fits
        cut = rest[: gaps[low - 1]].rstrip()
        if cut and (measured := size(cut + "\n\n")) <= cap:
            return cut + "\n\n", measured, True
        low -= 1
    return "", 0, True  # step 6


# How far before a unit's start a chunk opening with it may start (``Packer._opening`` steps back
# into a grapheme cluster it splits, looking 64 characters back at most); tests/core hold it.
OPENING_BACK = 64
# Whether ``make_room_for_units`` passes over the units it can tell need no room without measuring
# them (off: every unit measured; tests/core/test_embed_budget.py holds the two equal).
SKIP_ROOMY_UNITS = True


def _next_non_space(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not white space (``len(text)`` when none; ``\\s``
    of ``re`` is ``str.isspace``)."""
    found = _NON_SPACE.search(text, pos)
    return found.start() if found is not None else max(pos, len(text))


class Reserve:
    """The prefix of every chunk start of one document, as intervals of start positions (see the
    module docstring), and the exact size of a chunk's ``embed_text``."""

    # The points where the contexts change and the contexts from each on (``_contexts_at``); none
    # unless ``__init__`` finds a group with a context.
    _changes: list[int] | tuple[()] = ()
    _contexts: list[tuple[str, ...]] | tuple[tuple[()]] = ((),)

    def __init__(
        self,
        text: str,
        layout: Layout,
        settings: ChunkerBase,
        title: str,
        meter: Meter,
        *,
        file_named: bool = False,
    ):
        self.text = text
        self.meter = meter
        self.counts = settings.budget == "embed_text"
        self.max_size = settings.max_size
        parts = _parts(settings, title, file_named and self.counts)
        # What ``parts`` decides the title by (``_section_prefixes`` works it out in its own loop).
        use_title = bool(settings.context.title and title)
        self._use_headings = settings.context.headings
        self._title = (title if use_title else None, title.strip().lower(), file_named and self.counts)
        self._size = string_size(meter)
        self._known: dict[tuple[int, int], int] = {}  # token sizes of embed_texts measured before
        plan = layout.plan
        self._layout, self._parts = layout, parts
        self._cap = self.max_size // PREFIX_SHARE
        self._made: dict[tuple, Prefix] = {}
        self._room_made = False
        groups = layout.context_groups() if plan.groups else ()  # no call for recursive, sentence, fixed
        if not groups and not layout.heading_starts:
            # No heading and no group with a context (recursive, sentence, fixed; a page of paragraphs
            # and code blocks): one prefix everywhere, the title's.
            prefix = self._prefix((), ())
            self.lows, self.prefixes = [plan.start], [prefix]
            self.constant, self.largest = True, prefix.size
            return  # no context anywhere: the class's ``_changes`` and ``_contexts``
        # The contexts change only just after a group's start and at its end: the contexts at those
        # points (one sweep) hold up to the next one (kept for ``_contexts_at``). Each heading's path
        # lines are built once, and each distinct prefix is measured once (``_built``).
        changes = sorted({pos for group in groups for pos in (group.start + 1, group.end)}) if groups else []
        # The contexts at ``pos`` are ``contexts[bisect_right(changes, pos)]`` (index 0: before the first
        # change, none open).
        contexts = [(), *layout.contexts_at(changes)] if changes else [()]
        self._changes, self._contexts = changes, contexts
        heading_starts = layout.heading_starts
        starts = sorted({plan.start, *heading_starts, *changes})
        if starts[0] < plan.start:
            starts = starts[starts.index(plan.start) :]
        # The prefix of each section with no context (index 0: before the first heading).
        plain = self._section_prefixes(((), *layout.heading_paths))
        # The prefix at each start (its section's, with the contexts of the last change at or before
        # it), kept where it differs from the one before: one loop.
        lows: list[int] = []
        prefixes: list[Prefix] = []
        last = None
        find = bisect.bisect_right
        if changes:
            with_context = self._with_context
            for start in starts:
                section = find(heading_starts, start)
                context = contexts[find(changes, start)]
                prefix = with_context(section, context, plain[section]) if context else plain[section]
                if prefix is not last and prefix != last:
                    lows.append(start)
                    prefixes.append(prefix)
                    last = prefix
        else:
            for start in starts:
                prefix = plain[find(heading_starts, start)]
                if prefix is not last and prefix != last:
                    lows.append(start)
                    prefixes.append(prefix)
                    last = prefix
        self.lows, self.prefixes = lows, prefixes
        sizes = [prefix.size for prefix in prefixes]
        self.largest = max(sizes)
        self.constant = min(sizes) == self.largest  # the same reserve everywhere

    def _contexts_at(self, starts: list[int]) -> list[tuple[str, ...]]:
        """``Layout.contexts_at(starts)``, looked up in the contexts at the points where they change
        (``__init__``): before the first such point no group is open."""
        changes, contexts = self._changes, self._contexts
        if not changes:
            return [()] * len(starts)
        find = bisect.bisect_right
        return [contexts[find(changes, start)] for start in starts]

    def _prefix(self, path: tuple[str, ...], context: tuple[str, ...]) -> Prefix:
        key = (path, context)
        prefix = self._made.get(key)
        if prefix is None:
            title_line, shown_path, groups = self._parts(path, context)
            prefix = self._made[key] = self._built(
                title_line, shown_path, groups, _join(title_line, shown_path, groups)
            )
        return prefix

    def _section_prefixes(self, paths: tuple[tuple[str, ...], ...]) -> list[Prefix]:
        """The prefix of a chunk in the section of each heading path of ``paths`` that continues no
        group: ``_built(*parts(path, ()), _join(*parts(path, ())))``, with the parts worked out here in
        one loop (a document has a prefix per heading)."""
        settings_title, title_key, file_named = self._title
        use_headings, counts, size_of, cap = self._use_headings, self.counts, self._size, self._cap
        alone = settings_title + "\n\n" if settings_title is not None else ""  # the title's line, if any
        out: list[Prefix] = []
        top, titled = None, False  # the last path's first heading, and whether it is the title
        for path in paths:
            if not use_headings or not path:
                text = alone
            elif settings_title is None or file_named:
                text = f"{' > '.join(path)}\n\n"
            else:
                if path[0] is not top:  # sections under one top heading share its string
                    top = path[0]
                    titled = top.strip().lower() == title_key
                text = f"{' > '.join(path)}\n\n" if titled else f"{settings_title}\n{' > '.join(path)}\n\n"
            if not counts:
                out.append(_new_prefix(Prefix, (text, 0, False)))
            elif not text:
                out.append(_NO_PREFIX)
            elif (size := size_of(text)) <= cap:
                out.append(_new_prefix(Prefix, (text, size, False)))
            else:
                out.append(self._built(*self._parts(path, ()), text))
        return out

    def _with_context(self, section: int, context: tuple[str, ...], plain: Prefix) -> Prefix:
        """The prefix in the ``section``-th section (0: before the first heading) with the contexts
        ``context`` (``_prefix``). ``plain`` is the section's prefix without one (``_section_prefixes``):
        unless shortened it is ``_join`` of the same title line and path, so the contexts are lines
        added after it; only a prefix over the cap is built by ``_prefix``."""
        path = self._layout.heading_paths[section - 1] if section else ()
        key = (path, context)
        prefix = self._made.get(key)
        if prefix is not None:
            return prefix
        if plain.shortened:
            return self._prefix(path, context)
        full = (plain.text[:-1] if plain.text else "") + "\n".join(context) + "\n\n"
        measured = self._size(full) if self.counts else 0
        if measured > self._cap:
            return self._prefix(path, context)
        prefix = self._made[key] = _new_prefix(Prefix, (full, measured, False))
        return prefix

    def _built(
        self, title_line: str | None, path: tuple[str, ...], contexts: tuple[str, ...], full: str
    ) -> Prefix:
        """The prefix of these parts, whose unshortened text ``full`` is ``_join`` of them: measured
        once, and shortened (``sized_shorten``) only when over the cap."""
        if not self.counts:
            return _new_prefix(Prefix, (full, 0, False))
        if not full:
            return _NO_PREFIX
        measured = self._size(full)
        if measured <= self._cap:
            return _new_prefix(Prefix, (full, measured, False))
        return _new_prefix(Prefix, sized_shorten(title_line, path, contexts, self._cap, self._size))

    def make_room_for_units(self, begin_of: Callable[[int, int], int]) -> None:
        """Shorten the prefix at the start of each unit that fits alone but not beside it, and at the
        headings right before such a unit (module docstring): intervals ``[pos, pos + 1)``. A unit
        ``[start, end)`` starts where a chunk cut at ``start`` would: ``begin_of(start, end)`` (the
        packer's ``_opening``: the unit's first character). With ``budget: embed_text`` only; once."""
        if not self.counts or self._room_made:
            return
        self._room_made = True
        layout, text, budget = self._layout, self.text, self.max_size
        if SKIP_ROOMY_UNITS and isinstance(self.meter, CharMeter) and len(text) + self.largest <= budget:
            return  # in characters a unit measures at most the text's length: each fits beside any prefix
        plan = layout.plan
        heading_ends = plan.heading_ends
        heading_starts = sorted(heading_ends)
        room: dict[int, int] = {}  # start -> the most its prefix may take
        # In characters a unit measures at most ``end - begin``: one that fits beside the largest
        # prefix needs no room at its start, and none at a heading unless one ends right before it
        # (only white space between): the first step of the loop below, taken without measuring
        # (most units, issue 22). Before ``begin_of`` is asked (a third of the cost): ``begin`` is at
        # least ``start - OPENING_BACK`` and below ``end`` (else the unit is empty), and white space
        # alone lies between a heading's end ``h`` and ``begin`` only when ``begin <= after[h]``, its
        # first non-space; ``after`` rises with ``h``, so the last heading ending before ``end`` decides.
        # And ``begin`` is at most the unit's first non-space ``first`` (at or after ``start``): a unit
        # whose trimmed text from ``first`` is over the budget is over it from ``begin``, unmeasured.
        chars = SKIP_ROOMY_UNITS and isinstance(self.meter, CharMeter)
        roomy = budget - self.largest
        back = OPENING_BACK
        find_left, find_right, kinds = bisect.bisect_left, bisect.bisect_right, _UNIT_KIND_SET
        # Each span once (the order does not matter: ``room`` keeps the least of what each asks).
        units = itertools.chain(plan.groups, plan.units)
        if chars:
            # The headings' ends in the order of their starts (they do not overlap, so sorted too):
            # ``after[k]`` is the first non-space after the end of the heading at ``heading_starts[k]``.
            ends = list(map(heading_ends.__getitem__, heading_starts))
            if ends != sorted(ends):  # never (headings are lines): every unit measured, as below
                chars = False
        if chars:
            search, stop = _NON_SPACE.search, len(text)  # ``_next_non_space`` of each, inline
            after = [found.start() if (found := search(text, h)) is not None else max(h, stop) for h in ends]
            # The test of the last heading ending before ``end`` (index ``find_left(ends, end) - 1``) as
            # one look-up: ``reach[find_left(ends, end)] >= start``, with ``after[k] + back`` at ``k + 1``
            # and, at 0 (no heading before), -1: below every start.
            reach = [-1, *[a + back for a in after]]
            slack = roomy - back
            # A ``Group`` unpacked (its fields read by name cost more, and this runs for every unit).
            spans = {
                (start, end)
                for kind, start, end, _body, _context, _label in units
                if kind in kinds and (end - start > slack or reach[find_left(ends, end)] >= start)
            }
        else:
            spans = {(unit.start, unit.end) for unit in units if unit.kind in kinds}
        lows, limit, unit_size = self.lows, plan.end, self._unit_size
        reserved = [self.prefixes[0].size, *map(_SIZE, self.prefixes)]  # by ``find_right``
        if chars:
            # The loop of the ``else`` in characters: a unit's size is ``finish - begin``, and only
            # white space lies between a heading's end and ``at`` when ``after[k] >= at``.
            for start, end in spans:
                found = search(text, start, limit)
                first = found.start() if found is not None else max(start, limit)
                if first >= end:
                    continue  # empty from ``begin`` too
                finish = end
                while text[finish - 1].isspace():  # stops at ``first`` at the latest
                    finish -= 1
                if finish - first > budget:
                    continue
                begin = begin_of(start, end)
                k = find_left(heading_starts, begin) - 1  # the heading before ``begin``, if any
                if end - begin <= roomy and (k < 0 or ends[k] > begin or after[k] < begin):
                    continue
                # ``finish`` as above: its trim stopped at ``first``, at or after ``begin``.
                size = finish - begin
                if size > budget:
                    continue
                at = begin
                while True:
                    if reserved[find_right(lows, at)] + size > budget:  # ``at(at).size``
                        room[at] = min(room.get(at, budget), budget - size)
                    if k < 0 or ends[k] > at or after[k] < at:
                        break
                    at = heading_starts[k]
                    size = finish - at
                    if size > budget:
                        break
                    k -= 1
        else:
            for start, end in spans:
                begin = begin_of(start, end)
                k = find_left(heading_starts, begin) - 1  # the heading before ``begin``, if any
                finish = end
                while finish > begin and text[finish - 1].isspace():
                    finish -= 1
                if finish <= begin:
                    continue
                size = unit_size(begin, finish)
                if size > budget:
                    continue
                at = begin
                while True:
                    if reserved[find_right(lows, at)] + size > budget:  # ``at(at).size``
                        room[at] = min(room.get(at, budget), budget - size)
                    # The heading right before (only white space between), if any: its start, with the
                    # heading in the text.
                    if k < 0:
                        break
                    heading = heading_starts[k]
                    heading_end = heading_ends.get(heading, heading)
                    if heading_end > at or text[heading_end:at].strip():
                        break
                    size = unit_size(heading, finish)
                    if size > budget:
                        break
                    at, k = heading, k - 1
        if not room:
            return
        # Where the section path's last entry is the heading: ``pos`` in ``layout.heading_starts`` (sorted).
        section_starts = layout.heading_starts
        section_count = len(section_starts)
        contexts = self._contexts_at(sorted(room))
        # The intervals rebuilt in one merge of the old points with the new ones (both sorted): each
        # ``pos`` gets its shortened prefix, and ``pos + 1`` the old prefix there unless it is a point
        # already (an old one, or the next ``pos``, which replaces it).
        old_lows, old_prefixes = self.lows, self.prefixes
        lows: list[int] = []
        prefixes: list[Prefix] = []
        i, count = 0, len(old_lows)
        for (pos, cap), context in zip(sorted(room.items()), contexts, strict=True):
            title_line, path, groups = self._parts(layout.section_path(pos), context)
            if path and (h := find_left(section_starts, pos)) < section_count and section_starts[h] == pos:
                path = path[:-1]  # the heading opens the chunk's text
            shown, measured, _ = sized_shorten(title_line, path, groups, min(self._cap, cap), self._size)
            j = find_left(old_lows, pos, i)  # the old points below ``pos``, kept
            lows += old_lows[i:j]
            prefixes += old_prefixes[i:j]
            if j < count and old_lows[j] == pos:
                j += 1  # replaced
            i = j
            shortened = Prefix(shown, measured, True)
            if lows and lows[-1] == pos:  # the last one's ``pos + 1``
                prefixes[-1] = shortened
            else:
                lows.append(pos)
                prefixes.append(shortened)
            if i == count or old_lows[i] != pos + 1:  # ``self.at(pos + 1)``: the old interval's
                lows.append(pos + 1)
                prefixes.append(old_prefixes[max(i - 1, 0)])
        lows += old_lows[i:]
        prefixes += old_prefixes[i:]
        self.lows, self.prefixes = lows, prefixes
        sizes = list(map(_SIZE, prefixes))  # one at least
        self.largest = max(sizes)
        self.constant = min(sizes) == self.largest

    def _unit_size(self, begin: int, finish: int) -> int:
        """A unit's size, as the segmenter measures it: exactly, and for tokens and words its additive
        estimate too (the larger: a unit given room by one must fit by both); the estimate alone when
        it is far over the budget (as ``Segmenter._fits`` rules those out)."""
        if isinstance(self.meter, CharMeter):
            return finish - begin
        estimate = self.meter.estimate(begin, finish)
        if estimate > self.max_size * 1.25 + 4:
            return estimate  # far too big: not measured exactly (a long unit costs its length to count)
        return max(self.meter.size(begin, finish), estimate)

    def of_chunk(self, start: int, path: tuple[str, ...]) -> Prefix:
        """The prefix of a chunk that starts at ``start`` and whose section path is ``path``
        (``Layout.chunk_section_path``: the deepest section holding all of it, so for a chunk that runs
        across headings an ancestor of the start's section). The reserve was taken for the start's own
        path; the chunk gets the prefix of ``path`` when that measures no more (it nearly always does:
        an ancestor's path is shorter), else the start's, so embed_text stays within what was reserved."""
        reserved = self.at(start)
        if path == self._layout.section_path(start):
            return reserved
        prefix = self._prefix(path, self._contexts_at([start])[0])
        return prefix if prefix.size <= reserved.size else reserved

    def of_chunks(self, starts: list[int], paths: list[tuple[str, ...]]) -> list[Prefix]:
        """``of_chunk(start, path)`` for each start and chunk section path, in one pass (the contexts of
        the few starts whose chunk path is not their own looked up together)."""
        layout = self._layout
        heading_starts, heading_paths = layout.heading_starts, layout.heading_paths
        lows, prefixes = self.lows, self.prefixes
        if len(prefixes) == 1 and not heading_starts and not any(paths):
            # One prefix everywhere and no heading (recursive, sentence, fixed): every chunk's path is
            # its start's, ``()``.
            return prefixes * len(starts)
        if len(starts) != len(paths):
            raise ValueError("of_chunks: a section path for each start")
        if not starts:
            return []
        # Looked up through ``map`` (no Python-level loop): ``bisect_right(lows, start)`` indexes the
        # prefixes with the first repeated (``at``'s ``max(k, 0)``), and ``bisect_right(heading_starts,
        # start)`` the heading paths after ``()`` (before the first heading).
        find = bisect.bisect_right
        out = list(map([prefixes[0], *prefixes].__getitem__, map(find, itertools.repeat(lows), starts)))
        owns = list(
            map([(), *heading_paths].__getitem__, map(find, itertools.repeat(heading_starts), starts))
        )
        # The indexes of chunks whose path is not their start's (nearly always the same tuple).
        other = [
            index
            for index in itertools.compress(itertools.count(), map(operator.is_not, paths, owns))
            if paths[index] != owns[index]
        ]
        if other:
            contexts = self._contexts_at([starts[index] for index in other])
            for index, context in zip(other, contexts, strict=True):
                prefix = self._prefix(paths[index], context)
                if prefix.size <= out[index].size:
                    out[index] = prefix
        return out

    def at(self, pos: int) -> Prefix:
        """The prefix of a chunk that starts at ``pos``."""
        k = bisect.bisect_right(self.lows, pos) - 1
        return self.prefixes[max(k, 0)] if self.prefixes else Prefix("", 0)

    def sizes_at(self, starts: list[int]) -> list[int]:
        """The reserve (prefix size) of each start; 0 everywhere with ``budget: text``."""
        if not self.counts or self.largest == 0:
            return [0] * len(starts)
        lows, prefixes = self.lows, self.prefixes
        return [prefixes[max(bisect.bisect_right(lows, s) - 1, 0)].size for s in starts]

    def budget_size(self, start: int, end: int) -> int:
        """What ``max_size`` bounds for the chunk ``text[start:end]``: its ``embed_text`` (exactly, as
        if encoded on its own) with ``budget: embed_text``, else its text."""
        meter = self.meter
        if not self.counts:
            return meter.size(start, end)
        shown = self.prefixes[max(bisect.bisect_right(self.lows, start) - 1, 0)]  # ``self.at(start)``
        if not shown.text:
            return meter.size(start, end)
        if not isinstance(meter, TokenMeter):
            # Additive: chars, and words (the prefix ends in white space).
            return shown.size + meter.size(start, end)
        if getattr(meter.tokenizer, "piece_local", False) and start < end and not self.text[start].isspace():
            # cl100k: the prefix's last piece ends with its closing newlines and the text's first piece
            # starts at its first (non-space) character whatever precedes it, so the parts add up.
            return shown.size + meter.size(start, end)
        known = self._known.get((start, end))
        if known is None:
            known = self._known[start, end] = self._token_size(shown.text, start, end)
        return known

    def _token_size(self, prefix: str, start: int, end: int) -> int:
        """Tokens of ``prefix + text[start:end]``. With cl100k, split at the first sync point q after
        ``start`` (a piece boundary whatever precedes it, ``units.TokenMeter``): tokens of
        ``prefix + text[start:q]`` plus the span [q, end) measured by the meter, so a long chunk is
        not encoded again. Otherwise the concatenation is encoded whole."""
        meter, text = self.meter, self.text
        tokenizer = meter.tokenizer
        if getattr(tokenizer, "piece_local", False) and end - start > 96:
            sync = _SYNC.search(text, start + 1, min(end, start + _SYNC_WINDOW))
            if sync is not None:
                q = sync.start()
                return tokenizer.count(prefix + text[start:q]) + meter.size(q, end)
        return tokenizer.count(prefix + text[start:end])
