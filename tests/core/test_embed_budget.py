"""The budget covers what is embedded (``budget: embed_text``, the default) or the text alone (``text``).

``run_and_check`` (support.checks) recounts every chunk's embed_text independently under the default
budget, so every property test of the invariants checks it too; here: the prefix reserve against a
brute force, the shortening rule, the exact token measure of a concatenation, ``budget: text`` as the
old meaning, and real corpus text at budgets small enough to make prefixes matter.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking import prefix as prefix_module
from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.packer import Packer
from chunkyard.chunking.prefix import Reserve, prefixer, shorten, sized_shorten
from chunkyard.chunking.strategies import get_strategy
from chunkyard.chunking.units import get_tokenizer, make_meter

from support.checks import CORPORA_DIR, assert_chunk_invariants, recount, run_and_check
from support.strategies import markdownish, sizes, tolerated

QUICK = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
STRATEGIES = ("fixed", "sentence", "recursive", "markdown")
UNITS = ("chars", "words", "tokens")

NESTED = """\
# Returns handbook

## Refunds for damaged goods

To issue a refund for an item that arrived damaged, follow these steps in order:

1. Open the order in the admin panel and find the damaged line.
2. Click the refund button at the top of the page.
   - Choose the reason damaged on arrival from the list.
   - Attach the customer's photo when there is one.
3. Confirm the refund and notify the customer by mail.

| Zone | Rate | Days |
|------|------|------|
| North | 4 | 2 |
| South | 5 | 3 |
| East | 6 | 3 |
"""


def _brute_prefix(text: str, config: dict, path: str, pos: int) -> str:
    """The prefix of a chunk starting at ``pos``, from the layout's own per-position lookups."""
    settings = parse_settings(config)
    layout = get_strategy(settings.strategy)(text, settings, path)
    contexts = tuple(g.context for g in layout.groups_around(pos))
    return prefixer(settings, layout.title)(layout.section_path(pos), contexts)


@pytest.mark.parametrize("strategy", ["markdown", "recursive"])
@QUICK
@given(text=markdownish())
def test_reserve_intervals_equal_the_prefix_at_every_start(strategy: str, text: str) -> None:
    """The intervals hold, at every position, the prefix the layout gives there (``budget: text``, so
    nothing is shortened)."""
    config = {"strategy": strategy, "unit": "chars", "max_size": 100, "budget": "text"}
    settings = parse_settings(config)
    layout = get_strategy(strategy)(text, settings, "notes/returns-guide.md")
    reserve = Reserve(text, layout, settings, layout.title, make_meter(text, "chars"))
    contexts = layout.contexts_at(list(range(layout.plan.start, len(text) + 1)))
    make = prefixer(settings, layout.title)
    for pos in range(layout.plan.start, len(text) + 1):
        expected = make(layout.section_path(pos), contexts[pos - layout.plan.start])
        assert reserve.at(pos).text == expected, pos
        assert reserve.sizes_at([pos]) == [0]


@pytest.mark.parametrize("unit", ["chars", "words"])
@QUICK
@given(text=markdownish(), max_size=st.integers(8, 120), file_named=st.booleans())
def test_reserve_intervals_equal_the_shortened_prefix_at_every_start(
    unit: str, text: str, max_size: int, file_named: bool
) -> None:
    """With ``budget: embed_text`` (before any room is made) each start's prefix is the one
    ``sized_shorten`` gives for the layout's parts there, measured on its own; and the per-chunk
    lookups done for every chunk at once equal those done one chunk at a time."""
    settings_ = parse_settings({"strategy": "markdown", "unit": unit, "max_size": max_size})
    layout = get_strategy("markdown")(text, settings_, "notes/returns-guide.md")
    meter = make_meter(text, unit)
    title = layout.title or "Returns guide"
    reserve = Reserve(text, layout, settings_, title, meter, file_named=file_named)
    parts = prefix_module._parts(settings_, title, file_named)
    size = prefix_module.string_size(meter)
    positions = list(range(layout.plan.start, len(text) + 1))
    for pos, context in zip(positions, layout.contexts_at(positions), strict=True):
        expected = prefix_module.Prefix(
            *sized_shorten(*parts(layout.section_path(pos), context), max_size // 2, size)
        )
        assert reserve.at(pos) == expected, pos
    spans = [(a, b) for a in positions[::3] for b in positions[a % 5 :: 7] if a < b]
    spans.sort()
    paths = layout.chunk_section_paths(spans)
    assert paths == [layout.chunk_section_path(a, b) for a, b in spans]
    starts = [a for a, _ in spans]
    assert reserve.of_chunks(starts, paths) == [
        reserve.of_chunk(a, path) for a, path in zip(starts, paths, strict=True)
    ]


def test_reserve_changes_only_at_headings_and_group_edges() -> None:
    settings = parse_settings({"strategy": "markdown", "unit": "chars", "max_size": 400})
    layout = get_strategy("markdown")(NESTED, settings, "handbook/returns.md")
    reserve = Reserve(NESTED, layout, settings, layout.title, make_meter(NESTED, "chars"))
    edges = set(layout.heading_starts) | {layout.plan.start}
    for group in layout.plan.groups:
        if group.kind != "section" and group.context:
            edges |= {group.start + 1, group.end}
    assert set(reserve.lows) <= edges
    assert len(reserve.lows) >= 3  # title and headings, the procedure's lead-in, the table's header
    inside_table = NESTED.index("| South")
    assert "| Zone | Rate | Days |" in reserve.at(inside_table).text
    assert reserve.sizes_at([inside_table]) == [len(reserve.at(inside_table).text)]


@pytest.mark.parametrize(("strategy", "unit"), [(s, u) for s in STRATEGIES for u in UNITS])
@QUICK
@given(data=st.data())
def test_embed_text_within_the_budget_on_adversarial_text(
    strategy: str, unit: str, data: st.DataObject
) -> None:
    """Default budget: embed_text (recounted independently) ≤ max_size unless over_budget; exact spans,
    coverage and overlap as ever (``run_and_check``). A path gives every chunk a title to carry."""
    text = data.draw(markdownish(), label="text")
    config = {"strategy": strategy, "unit": unit, **data.draw(sizes(unit), label="sizes")}
    path = data.draw(st.sampled_from(["a.md", "guides/returns-and-refunds-for-damaged-goods.md"]))
    result = run_and_check(text, config, path, tolerate=tolerated(strategy, unit))
    for chunk in result.chunks:
        assert chunk.embed_text.endswith(chunk.text)
        if "over_budget" in chunk.findings:
            # Only a unit that cannot fit: its text alone is over, or no cut is left inside it.
            assert chunk.over_budget_reason


@pytest.mark.parametrize("unit", UNITS)
@QUICK
@given(data=st.data())
def test_budget_text_ignores_the_prefix(unit: str, data: st.DataObject) -> None:
    """``budget: text``: the spans do not depend on the prefix (same with or without title and headings),
    the text alone is bounded, and the prefix is never shortened."""
    text = data.draw(markdownish(), label="text")
    config = {"strategy": "markdown", "unit": unit, "budget": "text", **data.draw(sizes(unit), label="sizes")}
    long_path = "guides/a-very-long-title-of-a-document-about-returns-and-refunds-for-damaged-goods.md"
    with_prefix = run_and_check(text, config, long_path, tolerate=tolerated("markdown", unit))
    bare = split_document(text, {**config, "context": {"title": False, "headings": False}}, long_path)
    assert [(c.start, c.end) for c in with_prefix.chunks] == [(c.start, c.end) for c in bare.chunks]
    settings = parse_settings(config)
    layout = get_strategy("markdown")(text, settings, long_path)
    make = prefixer(settings, layout.title)
    for chunk in with_prefix.chunks:
        assert "prefix_shortened" not in chunk.findings
        contexts = tuple(g.context for g in layout.groups_around(chunk.start))
        assert chunk.embed_text == make(chunk.section_path, contexts) + chunk.text


def test_default_budget_reserves_the_prefix_and_text_budget_does_not() -> None:
    config = {"strategy": "markdown", "unit": "chars", "max_size": 160}
    new = run_and_check(NESTED, config, "handbook/returns.md").chunks
    old = run_and_check(NESTED, {**config, "budget": "text"}, "handbook/returns.md").chunks
    assert all(len(c.embed_text) <= 160 for c in new)
    assert any(len(c.embed_text) > 160 for c in old)
    assert all(len(c.text) <= 160 for c in old)


# -- the shortening rule --------------------------------------------------------------------------


def test_shorten_drops_title_then_outer_headings_then_outer_contexts_then_cuts() -> None:
    title, path = "Returns handbook", ("Returns handbook v2", "Refunds", "Damaged goods")
    contexts = ("To issue a refund:", "| Zone | Rate |")
    full = "Returns handbook\nReturns handbook v2 > Refunds > Damaged goods\nTo issue a refund:\n| Zone | Rate |\n\n"
    assert shorten(title, path, contexts, 500, len) == (full, False)
    steps = [
        "Returns handbook v2 > Refunds > Damaged goods\nTo issue a refund:\n| Zone | Rate |\n\n",
        "Refunds > Damaged goods\nTo issue a refund:\n| Zone | Rate |\n\n",
        "Damaged goods\nTo issue a refund:\n| Zone | Rate |\n\n",
        "Damaged goods\n| Zone | Rate |\n\n",
    ]
    for step in steps:
        assert shorten(title, path, contexts, len(step), len) == (step, True)
    # Then the heading goes (the table header says more), and the rest is cut at its last word gap.
    assert shorten(title, path, contexts, len("| Zone | Rate |\n\n"), len) == ("| Zone | Rate |\n\n", True)
    assert shorten(title, path, contexts, len("| Zone |\n\n"), len) == ("| Zone |\n\n", True)
    # Without a context the innermost heading is what is cut.
    assert shorten(title, path, (), len("Damaged\n\n"), len) == ("Damaged\n\n", True)
    # And no prefix at all when not even the first word fits.
    assert shorten(title, path, contexts, 2, len) == ("", True)


@given(
    st.lists(st.text(min_size=1, max_size=30), max_size=4),
    st.lists(st.text(min_size=1, max_size=60), max_size=3),
    st.integers(0, 120),
    st.sampled_from(["chars", "words", "tokens"]),
)
@settings(deadline=None)
def test_a_shortened_prefix_fits_its_cap(path: list[str], contexts: list[str], cap: int, unit: str) -> None:
    size = len if unit == "chars" else (lambda s: recount(s, unit))
    shown, shortened = shorten("A title", tuple(path), tuple(contexts), cap, size)
    assert size(shown) <= cap
    if not shortened:
        assert shown == shorten("A title", tuple(path), tuple(contexts), 10**6, size)[0]


@given(
    st.sampled_from([None, "A title"]),
    st.lists(st.text(max_size=30), max_size=4),
    st.lists(st.text(max_size=60), max_size=3),
    st.integers(0, 120),
    st.sampled_from(["chars", "words", "tokens"]),
)
@settings(deadline=None)
def test_the_sized_shortening_measures_the_prefix_it_gives(
    title: str | None, path: list[str], contexts: list[str], cap: int, unit: str
) -> None:
    """``sized_shorten`` (which ``shorten`` is) gives the size of the prefix it gives, so that the reserve
    need not measure it again: 0 for no prefix."""
    size = len if unit == "chars" else (lambda s: recount(s, unit))
    shown, measured, _ = sized_shorten(title, tuple(path), tuple(contexts), cap, size)
    assert measured == (size(shown) if shown else 0)


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("max_size", [8, 30, 60])
def test_prefix_never_takes_more_than_half_the_budget(unit: str, max_size: int) -> None:
    text = "# " + "Refunds and returns of damaged goods " * 4 + "\n\n" + "Body sentence here. " * 30
    config = {"strategy": "markdown", "unit": unit, "max_size": max_size}
    result = run_and_check(text, config, "guides/the-long-title-of-a-returns-guide.md")
    old = split_document(text, {**config, "budget": "text"}, "guides/the-long-title-of-a-returns-guide.md")
    full = old.chunks[0].embed_text[: -len(old.chunks[0].text)]
    for chunk in result.chunks:
        prefix = chunk.embed_text[: len(chunk.embed_text) - len(chunk.text)]
        assert recount(prefix, unit) <= max_size // 2
        assert ("prefix_shortened" in chunk.findings) == (recount(full, unit) > max_size // 2)
        if "prefix_shortened" in chunk.findings:
            assert prefix != full


# -- the exact token measure of prefix + text ----------------------------------------------------

PIECES = ["word", " ", "  ", "\n", "\n\n", "'s", "42", "123456", "é", "日本", "👍🏽", "!", "...", "\t", "x"]


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=200), st.text(max_size=20), st.data())
@settings(deadline=None, max_examples=200)
def test_embed_token_size_is_the_size_of_the_concatenation(pieces: list[str], head: str, data) -> None:
    text = "".join(pieces)
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    settings_ = parse_settings({"strategy": "recursive", "unit": "tokens", "max_size": 100})
    layout = get_strategy("recursive")(text, settings_, None)
    meter = make_meter(text, "tokens")
    reserve = Reserve(text, layout, settings_, head, meter)
    prefix = reserve.at(start).text
    expected = get_tokenizer("cl100k_base").count(prefix + text[start:end])
    assert reserve.budget_size(start, end) == expected == recount(prefix + text[start:end], "tokens")


# -- real corpus text -----------------------------------------------------------------------------


def _corpus_files() -> list[Path]:
    files = []
    for name in ("rust-book", "k8s-enhancements", "hugo-docs"):
        files += sorted((CORPORA_DIR / name).rglob("*.md"))
    return [f for f in files if zlib.crc32(f.as_posix().encode()) % 40 == 0]


@pytest.mark.corpus
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_embed_text_within_the_budget_on_real_corpus_text(data: st.DataObject) -> None:
    files = _corpus_files()
    if len(files) < 10:
        pytest.skip(f"the Markdown corpora are not under {CORPORA_DIR}")
    path = data.draw(st.sampled_from(files), label="file")
    text = path.read_text(encoding="utf-8")
    if len(text) > 60_000:
        offset = data.draw(st.integers(0, len(text) - 60_000), label="offset")
        text = text[offset : offset + 60_000]
    unit = data.draw(st.sampled_from(UNITS), label="unit")
    max_size = data.draw(
        st.integers(16, {"chars": 1200, "words": 200, "tokens": 600}[unit]), label="max_size"
    )
    overlap = data.draw(st.sampled_from([0, max_size // 8]), label="overlap")
    strategy = data.draw(st.sampled_from(["markdown", "recursive"]), label="strategy")
    config = {"strategy": strategy, "unit": unit, "max_size": max_size, "overlap": overlap}
    result = split_document(text, config, path.name)
    assert_chunk_invariants(text, config, result, tolerate=tolerated(strategy, unit) - {"grapheme_cut"})


def test_default_budget_splits_a_procedure_between_steps_and_repeats_its_lead_in() -> None:
    steps = "\n".join(f"{i}. Step number {i} of the refund is done here." for i in range(1, 9))
    text = f"# Refunds\n\nTo issue a refund:\n\n{steps}\n"
    config = {"strategy": "markdown", "unit": "chars", "max_size": 160}
    chunks = run_and_check(text, config, "guides/returns.md").chunks
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(chunk.embed_text) <= 160
        assert chunk.text.rstrip().endswith("here.") or chunk.text.rstrip().endswith("refund:")
        if chunk.text.lstrip()[:1].isdigit():
            assert "To issue a refund:" in chunk.embed_text and "Refunds" in chunk.embed_text


def _room_document(code_lines: int) -> str:
    code = "\n".join(f"let value_{i} = compute_the_next_value({i});" for i in range(code_lines))
    return (
        "# A rather long handbook title for the tests\n\n"
        "## A section with a long heading that goes on\n\n"
        "Some words before the section below, long enough to share a chunk with what follows.\n\n"
        "### The block below and its own long heading\n\n"
        f"```rust\n{code}\n```\n\n"
        "Closing words after the block.\n"
    )


@pytest.mark.parametrize("unit", ["chars", "tokens"])
def test_a_unit_that_fits_alone_is_kept_whole_beside_a_shortened_prefix(unit: str) -> None:
    """A code block that fits the budget alone but not beside the prefix of its heading path opens its
    chunk, with the heading before it, under a prefix shortened to what the two leave; the heading
    opens the text, so the breadcrumb does not repeat it."""
    max_size = 400 if unit == "chars" else 100
    text = _room_document(7 if unit == "chars" else 6)
    fence = text.index("```rust")
    block = text[fence : text.index("```\n\n", fence + 3) + 3]
    heading = text.index("### The block")
    config = {"strategy": "markdown", "unit": unit, "max_size": max_size, "overlap": 0, "min_size": 0}
    size = len if unit == "chars" else get_tokenizer("cl100k_base").count
    full_prefix = "A rather long handbook title for the tests > A section with a long heading that goes on > "
    full_prefix += "The block below and its own long heading\n\n"
    assert size(block) <= max_size < size(full_prefix + block)  # fits alone, not beside its prefix
    chunks = run_and_check(text, config, "guides/long.md").chunks
    holding = [c for c in chunks if c.start <= fence < c.end]
    assert len(holding) == 1
    chunk = holding[0]
    assert chunk.end >= fence + len(block), "the block is cut"
    assert chunk.start == heading, "the heading is left at the end of the chunk before"
    prefix = chunk.embed_text[: len(chunk.embed_text) - len(chunk.text)]
    assert "The block below" not in prefix
    assert "prefix_shortened" in chunk.findings
    assert size(chunk.embed_text) <= max_size


def test_room_for_a_unit_only_where_it_starts_and_only_with_the_embed_text_budget() -> None:
    text = _room_document(7)
    heading = text.index("### The block")
    fence = text.index("```rust")
    for budget in ("embed_text", "text"):
        config = {"strategy": "markdown", "unit": "chars", "max_size": 400, "budget": budget}
        result = split_document(text, config, "guides/long.md")
        shortened = [c for c in result.chunks if "prefix_shortened" in c.findings]
        if budget == "text":
            assert not shortened
            continue
        assert [c.start for c in shortened] == [heading]
        settings_ = parse_settings(config)
        layout = get_strategy("markdown")(text, settings_, "guides/long.md")
        reserve = Reserve(text, layout, settings_, layout.title, make_meter(text, "chars"))
        before = {pos: reserve.at(pos) for pos in range(len(text) + 1)}
        Packer(text, layout.plan, make_meter(text, "chars"), 400, 0, 0, reserve=reserve)
        changed = [pos for pos in range(len(text) + 1) if reserve.at(pos) != before[pos]]
        assert changed == [heading, fence] or changed == [heading], changed
        assert all(reserve.at(pos).shortened and reserve.at(pos).size < before[pos].size for pos in changed)


def test_room_is_made_for_the_kinds_the_segmenter_keeps_whole() -> None:
    from chunkyard.chunking.prefix import UNIT_KINDS
    from chunkyard.chunking.segmenter import PRICE_SPLIT

    assert set(UNIT_KINDS) == set(PRICE_SPLIT) - {"section"}


def _reserve_after_room(text: str, max_size: int, monkeypatch, skip: bool) -> list:
    monkeypatch.setattr(prefix_module, "SKIP_ROOMY_UNITS", skip)
    settings_ = parse_settings({"strategy": "markdown", "unit": "chars", "max_size": max_size})
    layout = get_strategy("markdown")(text, settings_, "guides/long.md")
    meter = make_meter(text, "chars")
    reserve = Reserve(text, layout, settings_, layout.title, meter)
    Packer(text, layout.plan, meter, max_size, 0, 0, reserve=reserve)
    return list(zip(reserve.lows, reserve.prefixes, strict=True))


# Indented units and headings right before them, and marks that join the space before them.
ROOM_PIECES = ["# Title\n", "## A long heading here\n", "\n", "\n\n", "   ", "\t", "- item one\n"]
ROOM_PIECES += [
    "1. step\n",
    "  - nested item\n",
    "```\ncode line\n```\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
]
ROOM_PIECES += ["Words of a paragraph that runs on.\n", " \u0301x", "\u200d", "e\u0301 ", "\r\n"]
ROOM_PIECES += [
    "### " + "a heading that goes on " * 4 + "\n\n",
    "```\n" + "let value = next(value);\n" * 5 + "```\n",
]


@st.composite
def _headed_units(draw: st.DrawFn) -> str:
    """Headings of any length right before units of any size (where room at the heading matters)."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        out.append("#" * draw(st.integers(1, 4)) + " " + "long heading " * draw(st.integers(1, 14)) + "\n")
        out.append(draw(st.sampled_from(["\n", "\n\n", "", "  \n"])))
        lines = draw(st.integers(1, 12))
        unit = draw(st.sampled_from(["```\n{}```\n", "{}", "Lead in:\n\n{}"]))
        line = draw(st.sampled_from(["let value = next(value);\n", "- an item of the list\n", "1. a step\n"]))
        out.append(unit.format(line * lines) + "\n")
        out.extend(draw(st.lists(st.sampled_from(ROOM_PIECES), max_size=3)))
    return "".join(out)


@QUICK
@given(
    text=st.one_of(st.lists(st.sampled_from(ROOM_PIECES), max_size=30).map("".join), _headed_units()),
    max_size=st.integers(20, 600),
)
def test_room_for_units_is_the_same_when_units_that_fit_are_passed_over(text: str, max_size: int) -> None:
    """``make_room_for_units`` passes over the units it can tell need no room without measuring them;
    the reserve is the one measuring every unit gives."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        skipped = _reserve_after_room(text, max_size, monkeypatch, True)
        measured = _reserve_after_room(text, max_size, monkeypatch, False)
    assert skipped == measured


@QUICK
@given(pieces=st.lists(st.sampled_from(ROOM_PIECES + ["\u0301" * 70, " \u0301", "a"]), max_size=30))
def test_a_chunk_opening_with_a_unit_starts_at_most_opening_back_before_it(pieces) -> None:
    """What ``make_room_for_units`` relies on to pass over units unmeasured: ``Packer._opening``
    never starts a chunk more than ``OPENING_BACK`` characters before the span it opens with, nor
    after the span's first non-space character."""
    text = "".join(pieces)
    settings_ = parse_settings({"strategy": "markdown", "unit": "chars", "max_size": 200})
    layout = get_strategy("markdown")(text, settings_, "guides/long.md")
    packer = Packer(text, layout.plan, make_meter(text, "chars"), 200, 0, 0)
    for start in range(layout.plan.start, len(text)):
        begin = packer._opening(start, len(text))
        assert begin >= start - prefix_module.OPENING_BACK
        first = start
        while first < layout.plan.end and text[first].isspace():
            first += 1
        assert begin <= first


def test_a_title_from_the_file_name_is_left_out_before_a_heading_path() -> None:
    """No metadata title and no level-1 heading: the title is the file name, and where a heading path
    follows it says nothing the headings do not, so with ``budget: embed_text`` it takes no room; with
    no heading it stays, a title the caller gives stays, and with ``budget: text`` it stays."""
    body = "## Control Flow\n\nRunning code depending on a condition is a building block.\n"
    config = {"strategy": "markdown", "unit": "chars", "max_size": 400}
    chunk = split_document(body, config, "src/ch03-05-control-flow.md").chunks[0]
    assert chunk.embed_text == "Control Flow\n\n" + chunk.text
    given_title = split_document(body, config, "src/ch03-05-control-flow.md", title="The Book").chunks[0]
    assert given_title.embed_text.startswith("The Book\nControl Flow\n\n")
    plain = "Running code depending on a condition is a building block.\n"
    bare = split_document(plain, config, "src/ch03-05-control-flow.md").chunks[0]
    assert bare.embed_text.startswith("ch03 05 control flow\n\n")
    text_budget = split_document(body, {**config, "budget": "text"}, "src/ch03-05-control-flow.md").chunks[0]
    assert text_budget.embed_text.startswith("ch03 05 control flow\nControl Flow\n\n")  # it takes no room
