"""The alias-expansion bound of ``chunkyard.chunking.yamlbound``, and the walk it lets front matter skip.

``bounded_by_text`` skips the expansion walk for YAML without ``*`` whose length times
``ALIAS_FREE_FACTOR`` is within the bound; the property below holds the factor to what random
alias-free YAML (built of the indicators that make nodes) really expands to, with both loaders.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkyard.chunking import yamlbound

LOADERS = [yaml.SafeLoader] + ([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])
# The characters that make nodes (indicators, separators, a letter, quotes, a tag and an anchor).
YAML_PIECES = list("-?:,[]{} \n\ta'\"!&|>#") + ["- ", ": ", "? ", "\n  ", "!!str", "&x ", "\\x41", '"\\n"']


def composed(text: str, loader: type) -> yaml.Node | None:
    parser = loader(text)
    try:
        return parser.get_single_node()
    finally:
        parser.dispose()


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(YAML_PIECES), min_size=1, max_size=40))
def test_alias_free_yaml_expands_to_at_most_factor_times_its_length(loader: type, pieces: list[str]) -> None:
    text = "".join(pieces)
    assert "*" not in text
    try:
        node = composed(text, loader)
    except yaml.YAMLError:
        return
    if node is not None:
        assert yamlbound.expanded_size(node) <= yamlbound.ALIAS_FREE_FACTOR * len(text)


@pytest.mark.parametrize("text", ["?", "-", "[?]", "{?}", "- - -", "? ? ?", "a:\nb:\n? c\n", "-\n-\n-"])
def test_the_densest_small_documents_stay_within_the_factor(text: str) -> None:
    node = composed(text, LOADERS[-1])
    assert node is not None
    assert yamlbound.expanded_size(node) <= yamlbound.ALIAS_FREE_FACTOR * len(text)


def test_the_walk_is_skipped_only_without_aliases_and_within_the_length() -> None:
    assert yamlbound.bounded_by_text("title: x\n", 65_536)
    assert not yamlbound.bounded_by_text("a: &a [1]\nb: *a\n", 65_536)  # an alias: walked
    assert not yamlbound.bounded_by_text("x" * 16_385, 65_536)  # too long to be bounded by its length
    assert yamlbound.bounded_by_text("x" * 16_384, 65_536)


BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [
        f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    ]
)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_an_alias_bomb_is_still_refused(loader: type) -> None:
    assert len(BOMB) * yamlbound.ALIAS_FREE_FACTOR < 65_536  # short enough to be skipped, but for its `*`
    with pytest.raises(yamlbound.YamlTooLarge) as caught:
        yamlbound.load(BOMB, 65_536, loader)
    assert caught.value.line == 5
    with pytest.raises(yamlbound.YamlTooLarge):
        yamlbound.compose(BOMB, 65_536, loader)


def test_a_long_alias_free_document_is_still_walked_and_refused() -> None:
    text = "".join(f"k{i}: {'v' * 40}\n" for i in range(2_000))  # 94 KB, 96,000+ once expanded
    with pytest.raises(yamlbound.YamlTooLarge):
        yamlbound.load(text, 65_536)
    assert len(yamlbound.load(text, 10**6)) == 2_000


# Scalars of every safe-schema type, tags, merge and value keys, flow and block collections.
SCALAR_PIECES = ["x", "yes", "No", "~", "null", "12", "0x1f", "1_000", "1:20", "-.inf", ".NaN", "3.5e2"]
SCALAR_PIECES += ["2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-02-30", "'q'", '"\\u00e9"', "''"]
SCALAR_PIECES += ["!!str 5", "!!int 7", "!!binary aGk=", "!!set {a}", "!!omap [a: 1]", "!foo x", "!!map x"]
TREE_PIECES = SCALAR_PIECES + ["<<: {m: 1}", "=: v", "[", "]", "{", "}", ", ", ": ", "- ", "? ", "\n", "\n  "]


def outcome(build) -> tuple[str, str]:
    try:
        return "ok", repr(build())
    except Exception as exc:  # noqa: BLE001 - the same failure is the expected outcome
        return "error", type(exc).__name__


def both_ways(text: str, loader: type) -> tuple[tuple[str, str], tuple[str, str]]:
    def pyyaml():
        return yaml.load(text, Loader=loader)

    def ours():
        parser = loader(text)
        try:
            node = parser.get_single_node()
            if node is None:
                return None
            try:
                return yamlbound.construct_tree(parser, node)
            except yamlbound._NotPlain:
                return parser.construct_document(node)
        finally:
            parser.dispose()

    return outcome(pyyaml), outcome(ours)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(TREE_PIECES), min_size=1, max_size=30))
def test_construct_tree_builds_what_pyyaml_builds_from_random_yaml(loader: type, pieces: list[str]) -> None:
    text = "".join(pieces)
    expected, got = both_ways(text, loader)
    assert got == expected


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@settings(max_examples=200, deadline=None)
@given(
    data=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.dates(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=20,
    ),
    flow=st.sampled_from([None, True, False]),
)
def test_construct_tree_builds_what_pyyaml_builds_from_dumped_data(loader: type, data, flow) -> None:
    text = yaml.safe_dump({"front": data}, default_flow_style=flow, allow_unicode=True)
    expected, got = both_ways(text, loader)
    assert got == expected and expected[0] == "ok"


def test_trees_it_leaves_to_pyyaml_are_still_built_by_it() -> None:
    for text in ["a: !!set {x}\n", "<<: {m: 1}\nb: 2\n", "[a, b]: 1\n", "a: !!omap [x: 1]\n"]:
        parser = yaml.SafeLoader(text)
        with pytest.raises(yamlbound._NotPlain):
            yamlbound.construct_tree(parser, parser.get_single_node())
        assert outcome(lambda text=text: yamlbound.load(text, 65_536)) == outcome(
            lambda text=text: yaml.safe_load(text)
        )
    deep = "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)) + "  " * 80 + "end: 1\n"
    assert yamlbound.load(deep, 65_536) == yaml.safe_load(deep)


@settings(max_examples=1000, deadline=None)
@given(
    value=st.one_of(
        st.sampled_from(SCALAR_PIECES), st.text(alphabet="0123456789-+.:_eExXoObB~nNyYtTfF<= ", max_size=12)
    ),
    implicit=st.tuples(st.booleans(), st.booleans()),
    kind=st.sampled_from([yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode]),
)
def test_the_resolver_without_paths_gives_pyyamls_tags(value: str, implicit, kind) -> None:
    loader = yamlbound.FAST_LOADER("")
    try:
        assert yamlbound.resolve_without_paths(loader, kind, value, implicit) == loader.resolve(
            kind, value, implicit
        )
    finally:
        loader.dispose()


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(TREE_PIECES), min_size=1, max_size=30))
def test_load_reads_what_safe_load_reads_from_random_yaml(pieces: list[str]) -> None:
    """``load`` (the quick loader: its resolver, no path-resolver steps) against PyYAML's own."""
    text = "".join(pieces)
    assert outcome(lambda: yamlbound.load(text, 10**6)) == outcome(
        lambda: yaml.load(text, Loader=yamlbound.FAST_LOADER)
    )


def test_load_reads_what_safe_load_reads_from_every_corpus_front_matter(corpora_dir) -> None:
    from chunkyard.chunking.markdown import _FRONT_MATTER_END

    seen = 0
    for path in sorted(corpora_dir.rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if not text.startswith("---\n"):
            continue
        closing = _FRONT_MATTER_END.search(text, 4)
        if closing is None:
            continue
        front = text[4 : closing.start()]
        assert outcome(lambda front=front: yamlbound.load(front, 10**6)) == outcome(
            lambda front=front: yaml.safe_load(front)
        )
        seen += 1
    assert seen > 900  # hugo-docs: every page has front matter


# Front matter ``read_simple`` reads (keys, nested mappings, values of every safe-schema type), then
# at most one twist near its edge (a key of another type, a value that is an error, a comment or
# more than one line, a wrong indentation): keys, values and indents drawn in turn.
SIMPLE_KEYS = ["title", "a", "_c", "k_1", "e", "y", "description"]
TWISTED_KEYS = ["yes", "No", "on", "null", "TRUE", "1a", "~", "1", "-a", "a b"]
SIMPLE_VALUES = ["x", "two words", "yes", "12", "1.5", "2001-12-14", "0x1f", "1:20", ".inf", "null", "-1"]
SIMPLE_VALUES += ["a:b", "C#", "[]", "[a, b]", "[a,b]", "[1, yes, a b]", "'s'", '"q: #x"', "(p)", "/p/#f"]
SIMPLE_VALUES += [
    "2001-02-30",
    "x\u00a0",
    "é\u00a0x",
    "_x",
    ".5",
    "0o17",
    "1_000",
    "2001-12-14 21:59:43.10 -5",
    "+1",
    "x]",
    "x{",
    "[a|b]",
    "[A B|C, d |e]",
    "[a|]",
    "[x.. y...]",
    "['x [y]']",
    "['a, b: c']",
    "['']",
    "['1']",
    "['yes']",
    "['\\n']",
]
TWISTED_VALUES = ["a: b", "x #c", "x:", "x ", "[a, b ]", "[", "]", "'it''s'", '"\\n"', "\u2028x", "a\tb"]
TWISTED_VALUES += [
    "{a: 1}",
    "~",
    "*a",
    "&a x",
    "!!str 1",
    "|",
    ">",
    "- a",
    "? a",
    "%x",
    "@x",
    "`x",
    "[a, [b]]",
    "",
    "['it''s']",
    "['a', 'b']",
    "[ 'a' ]",
    "['a'",
    "[|a]",
    "[a ?b]",
    "[a?]",
    "['a'b]",
]


@st.composite
def simple_front_matter(draw: st.DrawFn) -> str:
    lines: list[tuple[int, str, str]] = []  # (indent, key, value)
    depth = 0
    for _ in range(draw(st.integers(1, 6))):
        if lines and not lines[-1][2] and draw(st.booleans()):
            depth += 1  # the mapping under the key before
        elif depth and draw(st.booleans()):
            depth = draw(st.integers(0, depth))
        key = draw(st.sampled_from(SIMPLE_KEYS))
        value = draw(st.sampled_from([*SIMPLE_VALUES, ""]))
        lines.append((depth, key, value))
    twist = draw(st.integers(0, 4))
    at = draw(st.integers(0, len(lines) - 1))
    indent, key, value = lines[at]
    if twist == 1:
        key = draw(st.sampled_from(TWISTED_KEYS))
    elif twist == 2:
        value = draw(st.sampled_from(TWISTED_VALUES))
    elif twist == 3:
        indent = draw(st.sampled_from([indent + 1, indent + 2, max(indent - 1, 0)]))
    lines[at] = (indent, key, value)
    width = draw(st.sampled_from([1, 2, 4]))
    # Blank lines and comments (``#`` at the line start) may come before any line.
    texts = [
        draw(st.sampled_from(["", "", "", "\n", "  \n", "#c\n", "# a: b\n", "#\n\n"]))
        + " " * (width * i)
        + k
        + (": " + v if v else ":")
        for i, k, v in lines
    ]
    text = "\n".join(texts)
    return text + draw(st.sampled_from(["\n", "\n", "", "\n\n", " #c\n", "\n#c\n", "\n \n"]))


@settings(max_examples=1500, deadline=None)
@given(text=simple_front_matter())
def test_simple_front_matter_is_read_as_pyyaml_reads_it(text: str) -> None:
    """``read_simple`` (through ``load``) against the loader it stands in for, by repr (so ``True`` is
    not ``1``), the same errors included."""
    expected = outcome(lambda: yaml.load(text, Loader=yamlbound.FAST_LOADER))
    assert outcome(lambda: yamlbound.load(text, 10**6)) == expected


def test_the_front_matter_of_most_pages_is_read_without_pyyaml() -> None:
    text = (
        "title: Plain\ncategories: []\nparams:\n  fm:\n    returnType: string\n    signatures: [PAGE.Plain]\n"
    )
    assert yamlbound.read_simple(text) == yaml.safe_load(text)
    assert yamlbound.read_simple("a: b # comment\n") is yamlbound._NOT_SIMPLE
    text = "# a comment\ntitle: T\n\nparams:\n\n# under params\n  weight: 10\n  \n"
    assert yamlbound.read_simple(text) == yaml.safe_load(text) == {"title": "T", "params": {"weight": 10}}
    for text in ("\n\n", "# only a comment\n", "  \n#c\n"):  # PyYAML's None
        assert yamlbound.read_simple(text) is yamlbound._NOT_SIMPLE
    assert yamlbound.load("#c\n\n", 10**6) is None
    for length in (128, 129, 1100):  # a key of 1024 characters or more is an error in PyYAML
        text = "k" * length + ": v\n"
        assert outcome(lambda text=text: yamlbound.load(text, 10**6)) == outcome(
            lambda text=text: yaml.safe_load(text)
        )
