"""YAML with a bound on alias expansion: configs and front matter are parsed through this module.

PyYAML (and libyaml) compose aliases as shared nodes, so composing a document is linear in its size;
the cost comes later, when the data is walked, copied or serialised (a 500-byte document of nested
``&a``/``*a`` lists expands to millions of nodes). ``load`` composes the node graph, measures what
it would expand to (each node counts 1, a scalar also its length; shared nodes counted every time
they are reached, in one linear pass over the graph) and refuses it past ``max_size`` with the line of the
first node that reaches the bound, before anything is constructed.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import yaml

# libyaml's loader when the wheel ships it (it does on PyPI): about 10× faster than the pure-Python
# scanner on front matter, where one block per page is parsed (issue 22).
FAST_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def resolve_without_paths(self: Any, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
    """``BaseResolver.resolve`` for a loader without path resolvers: the same implicit resolvers (the
    loader's own table, tried for the value's first character, then the wildcard ones) and the same
    default tags, without the list it builds per scalar. The composer calls it for every node, from
    C too (a seventh of reading front matter, issue 22); tests/core/test_yamlbound.py holds it equal."""
    if kind is yaml.ScalarNode:
        if implicit[0]:
            resolvers = self.yaml_implicit_resolvers
            for found in (resolvers.get(value[:1]), resolvers.get(None)):
                if found:
                    for tag, regexp in found:
                        if regexp.match(value):
                            return tag
        return self.DEFAULT_SCALAR_TAG
    if kind is yaml.SequenceNode:
        return self.DEFAULT_SEQUENCE_TAG
    return self.DEFAULT_MAPPING_TAG


class _QuickLoader(FAST_LOADER):
    """``FAST_LOADER`` with ``resolve_without_paths``; used while that loader has no path resolvers,
    whose steps (``descend_resolver``, ``ascend_resolver``: the composer calls them around every
    node) then do nothing: here they are C callables that take the same arguments and do nothing."""

    resolve = resolve_without_paths
    descend_resolver = operator.is_  # (parent, index) -> ignored
    ascend_resolver = tuple  # () -> ignored


def _quick(loader: type) -> type:
    """``_QuickLoader`` in place of ``FAST_LOADER`` when its path-resolver steps are no-ops."""
    return _QuickLoader if loader is FAST_LOADER and not FAST_LOADER.yaml_path_resolvers else loader


class YamlTooLarge(yaml.YAMLError):
    """The document's aliases expand beyond the bound; ``line`` is 1-based in the YAML text."""

    def __init__(self, line: int, max_size: int) -> None:
        self.line = line
        self.max_size = max_size
        self.problem = (
            f"YAML aliases expand this to more than {max_size:,} nodes and characters "
            "(an alias bomb?); refused"
        )
        super().__init__(f"line {line}: {self.problem}")


def compose(text: str, max_size: int, loader: type = yaml.SafeLoader) -> yaml.Node | None:
    """The node graph of one YAML document, refused (``YamlTooLarge``) when it expands beyond ``max_size``."""
    parser = loader(text)
    try:
        node = parser.get_single_node()
    finally:
        parser.dispose()
    if node is not None and not bounded_by_text(text, max_size):
        check_expansion(node, max_size)
    return node


def load(text: str, max_size: int, loader: type = FAST_LOADER) -> Any:
    """``yaml.safe_load`` with the expansion bound (``YamlTooLarge``); other errors as PyYAML raises them."""
    if loader is FAST_LOADER and bounded_by_text(text, max_size):
        simple = read_simple(text)
        if simple is not _NOT_SIMPLE:
            return simple
    parser = _quick(loader)(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        if not bounded_by_text(text, max_size):
            check_expansion(node, max_size)
        if "*" not in text:  # no alias, so a tree: built here, PyYAML's constructor for the rest
            try:
                return construct_tree(parser, node)
            except _NotPlain:
                pass
        return parser.construct_document(node)
    finally:
        parser.dispose()


# -- the simplest front matter, read without PyYAML -------------------------------------------------

_NOT_SIMPLE = object()
# Characters YAML reads as they are (printable, no tab, no CR, no line break but LF, no BOM, BMP only).
_SIMPLE_CHARS = re.compile(r"[\n -~\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*")
# One line: indentation, a key, ':' and a value (or none): ``[]``, a flow list of words (``|`` may
# join them: ``[MAP|SLICE KEY]``), a flow list of one single-quoted string without quotes
# (``['fmt.Printf FORMAT [INPUT]']``), a quoted string without escapes, or a plain scalar that
# starts with a word character and ends neither with ':' nor a blank (and has no ``': '``:
# ``read_simple``; no text with ``' #'``, a comment, gets here).
_ITEM = r"[A-Za-z0-9/_.](?:[A-Za-z0-9/_. |-]*[A-Za-z0-9/_.|-])?"
_SIMPLE_LINE = re.compile(
    r"( *)([A-Za-z_][A-Za-z0-9_]{0,127}):"  # a key of 1024 characters and more is an error
    r"(?: +(?:(\[\])|\[(" + _ITEM + r"(?:, *" + _ITEM + r")*)\]"
    r"|\"([^\"\\\n]*)\"|'([^'\n]*)'|([A-Za-z0-9/_(](?:[^\n]*[^\n :])?)|\['([^'\n]*)'\]))?"
)
_FLOW_SPLIT = re.compile(r", *")
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


# Short plain scalars read before, and their values: keys (``title``, ``weight``) and short values
# (``true``, ``10``, ``[]``'s items) recur from page to page; a title or description, unique, is not
# kept. Every value the safe schema gives a plain scalar is immutable (str, None, bool, int, float,
# date, datetime), so one may be shared; one a constructor refuses raises and is not remembered.
_PLAIN_READ: dict[str, Any] = {}
_PLAIN_READ_MOST = 1 << 12
_PLAIN_READ_LONGEST = 24


def _plain(value: str) -> Any:
    """A plain scalar's value: the tag the safe loader's resolver gives it, built by its constructor."""
    built = _PLAIN_READ.get(value, _NOT_SIMPLE)
    if built is not _NOT_SIMPLE:
        return built
    tag = resolve_without_paths(FAST_LOADER, yaml.ScalarNode, value, (True, False))
    built = (
        value
        if tag == _STR
        else FAST_LOADER.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, value))
    )
    if len(value) <= _PLAIN_READ_LONGEST:
        if len(_PLAIN_READ) >= _PLAIN_READ_MOST:
            _PLAIN_READ.clear()
        _PLAIN_READ[value] = built
    return built


def read_simple(text: str) -> Any:
    """What ``yaml.safe_load(text)`` returns, for the front matter most pages have: lines of
    ``key: value`` (``_SIMPLE_LINE``), a key without a value opening a mapping indented under it (or
    a null); anything else returns ``_NOT_SIMPLE`` and PyYAML reads it. Plain scalars take PyYAML's
    resolver and constructors, so ``yes``, ``12`` or a date are what PyYAML makes of them, keys
    too. Composing and constructing through PyYAML cost two thirds of reading a
    short page's front matter (issue 22). ``tests/core/test_yamlbound.py`` holds it to
    ``yaml.safe_load`` on random documents of these lines and on every corpus front matter."""
    if not text or "\r" in text or " #" in text or _SIMPLE_CHARS.fullmatch(text) is None:
        return _NOT_SIMPLE
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    try:
        return _read_lines(lines)
    except Exception:  # noqa: BLE001 - a value a constructor refuses (30 February): PyYAML reads the
        return _NOT_SIMPLE  # whole text, and raises what it raises (another line's error first)


def _read_lines(lines: list[str]) -> Any:
    """``read_simple`` line by line; a constructor's error propagates."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(0, root)]  # (indent, mapping) of the open mappings
    pending: tuple[dict, Any] | None = None  # (mapping, key) of a key without a value on the line before
    # Short scalars (keys, most values) are found in ``_plain``'s memo here, without the call.
    fullmatch, memo = _SIMPLE_LINE.fullmatch, _PLAIN_READ
    for line in lines:
        match = fullmatch(line)
        if match is None:
            if not line.strip(" ") or line[0] == "#":
                continue  # a blank line, or a comment (no line here holds a scalar that goes on)
            return _NOT_SIMPLE
        spaces, name, empty, items, double, single, plain, quoted = match.groups()
        indent = len(spaces)
        if pending is not None and indent > stack[-1][0]:  # the mapping under the key before
            child: dict = {}
            pending[0][pending[1]] = child
            stack.append((indent, child))
        else:
            while indent < stack[-1][0]:
                stack.pop()
            if indent != stack[-1][0]:
                return _NOT_SIMPLE
        pending = None
        key = memo.get(name, _NOT_SIMPLE)
        if key is _NOT_SIMPLE:
            key = _plain(name)  # ``yes`` is True, as a key too
        mapping = stack[-1][1]
        if plain is not None:
            if ": " in plain:  # a mapping inside the value: an error, or more than one line says
                return _NOT_SIMPLE
            value = memo.get(plain, _NOT_SIMPLE)
            if value is _NOT_SIMPLE:
                value = _plain(plain)
        elif double is not None:
            value = double
        elif single is not None:
            value = single
        elif items is not None:
            value = [_plain(item) for item in _FLOW_SPLIT.split(items)]
        elif empty is not None:
            value = []
        elif quoted is not None:
            value = [quoted]
        else:
            value = None
            pending = (mapping, key)
        mapping[key] = value
    return root if root else _NOT_SIMPLE  # only blank lines and comments: PyYAML's None


_YAML = "tag:yaml.org,2002:"
_MAP, _SEQ, _STR = _YAML + "map", _YAML + "seq", _YAML + "str"
# The scalar tags whose SafeConstructor function returns the value at once (not a generator).
_SCALARS = frozenset(_YAML + name for name in ("null", "bool", "int", "float", "binary", "timestamp"))
_DEEPEST = 64  # deeper trees go to PyYAML's constructor, which handles any depth it can


class _NotPlain(Exception):
    """The tree has a node ``construct_tree`` leaves to PyYAML (other tags, merge keys, great depth)."""


def construct_tree(loader: Any, node: yaml.Node, depth: int = 0) -> Any:
    """What ``loader.construct_document(node)`` returns, for a tree of plain maps, lists and scalars.

    PyYAML's constructor builds every node through a generic path (a memo per node, a generator per
    collection); on front matter that cost half as much as composing. Here a map is a dict (later
    keys win, as there), a list a list, a str scalar its value, and the other scalars of the safe
    schema go to SafeConstructor's own function for their tag, so each value is PyYAML's. Anything
    else (``!!set``, ``!!omap``, an unknown tag, a ``<<`` merge or ``=`` key, a non-scalar key,
    nesting past ``_DEEPEST``) raises ``_NotPlain`` and the caller lets PyYAML construct the whole
    document. Only for a tree: a node reached twice (an alias) would be built twice.
    ``tests/core/test_yamlbound.py`` holds it equal to ``construct_document`` on random YAML."""
    tag, kind = node.tag, type(node)
    if kind is yaml.ScalarNode:
        if tag == _STR:
            return node.value
        if tag in _SCALARS:
            return loader.yaml_constructors[tag](loader, node)
        raise _NotPlain
    if tag == _MAP and kind is yaml.MappingNode:
        if depth == _DEEPEST:
            raise _NotPlain
        mapping = {}
        for key_node, value_node in node.value:
            if type(key_node) is not yaml.ScalarNode:
                raise _NotPlain
            key_tag = key_node.tag
            if key_tag == _STR:
                key = key_node.value
            elif key_tag in _SCALARS:
                key = loader.yaml_constructors[key_tag](loader, key_node)
            else:  # a ``<<`` merge, an ``=`` value key, another tag
                raise _NotPlain
            if type(value_node) is yaml.ScalarNode and value_node.tag == _STR:  # most: not called
                mapping[key] = value_node.value
            else:
                mapping[key] = construct_tree(loader, value_node, depth + 1)
        return mapping
    if tag == _SEQ and kind is yaml.SequenceNode:
        if depth == _DEEPEST:
            raise _NotPlain
        return [
            child.value
            if type(child) is yaml.ScalarNode and child.tag == _STR
            else construct_tree(loader, child, depth + 1)
            for child in node.value
        ]
    raise _NotPlain


# What one character of alias-free YAML can expand to, at most (see ``bounded_by_text``).
ALIAS_FREE_FACTOR = 4


def bounded_by_text(text: str, max_size: int) -> bool:
    """Whether ``text`` cannot expand beyond ``max_size`` whatever it holds, so the walk can be skipped.

    True when it has no ``*`` (every alias starts with one, and no escape makes one) and
    ``ALIAS_FREE_FACTOR * len(text) <= max_size``. Proof of the bound: without aliases every node is
    reached once, so the expansion is the number of nodes N plus the length S of the scalars' values.
    S <= len(text): each scalar's value comes from its own stretch of the text and no YAML rule makes a
    value longer than its source (an escape such as ``\\x41`` or ``\\n`` is shorter, a folded break is
    one character for one or two, indentation and quotes are dropped). N <= 3 * len(text): a non-empty
    scalar or a flow collection holds at least one character of its own; a block collection begins at
    its first ``-``, ``?`` or ``:``; an empty (null) scalar is left by an indicator: at most one per
    ``-``, two per ``?`` or ``:`` (key and value of one pair), and a pair's indicator may also begin its
    block mapping (``?`` alone is a mapping of two nulls: three nodes for one character). So N + S <=
    4 * len(text). ``tests/core/test_yamlbound.py`` checks the bound on random YAML built of these
    indicators and that an alias bomb is still refused. Front matter (1 to 2 KB) skips the walk,
    which cost more than composing it (issue 22)."""
    return "*" not in text and ALIAS_FREE_FACTOR * len(text) <= max_size


def expanded_size(node: yaml.Node, max_size: int | None = None) -> int:
    """What ``node`` expands to: 1 per node reached plus each scalar's length, aliases counted each
    time. Linear in the number of distinct nodes (sizes are memoised); an alias to a node that
    contains it counts once (the config loader reports it as a recursive alias). Raises
    ``YamlTooLarge`` as soon as a node's size passes ``max_size``."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    # Iterative post-order walk: a document nested thousands of levels deep must not recurse.
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        key = id(current)
        if key in sizes:
            continue
        children = _children(current)
        if not expanded:
            if key in active:
                continue
            active.add(key)
            stack.append((current, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        active.discard(key)
        size = 1 + (len(current.value) if isinstance(current, yaml.ScalarNode) else 0)
        size += sum(sizes.get(id(child), 1) for child in children)
        sizes[key] = size
        if max_size is not None and size > max_size:
            raise YamlTooLarge(current.start_mark.line + 1, max_size)
    return sizes.get(id(node), 1)


def check_expansion(node: yaml.Node, max_size: int) -> None:
    expanded_size(node, max_size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
