"""The code scanner: where a source file may be split, and which definitions stay whole.

Method. The file is parsed once: Python with the standard library's ``ast``, JavaScript,
TypeScript, Go, Rust and Java with tree-sitter grammars shipped in their wheels (imported only when
such a file is chunked). Every class, function and method becomes a keep-whole group that starts
at its first decorator, attribute or annotation and at the comment lines directly above it, so a
definition that fits the budget is never cut and keeps its docs. Boundaries are line starts only:
before a top-level definition 70, before a method or nested definition 50 (the first statement
after a definition scores as the definition), after a blank line 35 (40 at column 0), any other
line 22, a line that continues a statement, sits between a decorator and its ``def`` or starts
with a closing bracket 15. Sentence, word and grapheme gaps exist only inside a single line that
may exceed the budget (see ``chunkyard.chunking.oversize``). A piece of a split definition carries its
signature as group context (so ``embed_text`` repeats it).

The section path of a position is the qualified name of the innermost definition around it,
module (file stem) first: ``("inventory_sync", "WMSClient", "stock_levels")``; Go methods are
qualified by their receiver type, Rust ``impl`` blocks by their type. A Python module's title is
its docstring's summary line. A Python file that does not parse, or a file of an unknown language,
is split on lines alone; a parse error is reported in the metadata with its line number
(tree-sitter recovers from errors, so its definitions are still used and the error reported).
"""

from __future__ import annotations

import ast
import bisect
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import regex

from chunkyard.chunking.errors import import_extra
from chunkyard.chunking.oversize import BudgetProbe, fallback_boundaries
from chunkyard.chunking.packer import Group, Plan
from chunkyard.chunking.settings import ChunkerBase

# Boundary scores (see chunkyard.chunking.packer for the scale).
TOP_DEFINITION = 70
NESTED_DEFINITION = 50
BLANK_TOP = 40
BLANK = 35
LINE = 22
WEAK_LINE = 15

# Suffix -> language; the names are also the values of the ``language`` setting.
LANGUAGE_BY_SUFFIX: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}
CODE_SUFFIXES = frozenset(LANGUAGE_BY_SUFFIX)
LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java")

_NEWLINE = regex.compile(r"\r\n|\r|\n")
_CLOSER = regex.compile(r"[^\S\r\n]*[\}\)\]]")
_HEADER_END = regex.compile(r":\s*(?:#.*)?$")
_HEADER_LIMIT = 300  # characters of a signature kept as the context of a split definition


@dataclass
class Definition:
    """A class or function: rows are 0-based lines of the file."""

    name: str
    kind: str  # "class" or "function"
    start_row: int  # first decorator / attribute / comment line above it
    def_row: int  # the line of the keyword
    end_row: int
    body_row: int  # first line of the body (== def_row + 1 when the body follows on the same line)
    header: str  # the signature, whitespace-normalized
    path: tuple[str, ...]  # qualified name without the module
    depth: int  # 0 for a top-level definition


@dataclass
class CodeStructure:
    """What the scanner found in one source file."""

    plan: Plan
    title: str
    heading_starts: list[int] = field(default_factory=list)
    heading_paths: list[tuple[str, ...]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


class _Lines:
    """Line starts and ends (without the terminator) of a text; ``\\r\\n``, ``\\r`` and ``\\n`` end a line."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        self.ends: list[int] = []
        for match in _NEWLINE.finditer(text):
            self.ends.append(match.start())
            self.starts.append(match.end())
        self.ends.append(len(text))

    def __len__(self) -> int:
        return len(self.starts)

    def row_of(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) - 1

    def is_blank(self, row: int) -> bool:
        return not self.text[self.starts[row] : self.ends[row]].strip()

    def indent(self, row: int) -> int:
        line = self.text[self.starts[row] : self.ends[row]]
        return len(line) - len(line.lstrip())

    def starts_line(self, pos: int) -> bool:
        """Only whitespace lies between the start of ``pos``'s line and ``pos``."""
        row = self.row_of(pos)
        return not self.text[self.starts[row] : pos].strip()


def detect_language(path: str | None, override: str | None = None) -> str | None:
    """The language of a file: the override if given, else by suffix; None when unknown."""
    if override:
        return override
    suffix = PurePosixPath(path).suffix.lower() if path else ""
    return LANGUAGE_BY_SUFFIX.get(suffix)


def scan_code(text: str, settings: ChunkerBase, path: str | None, language: str | None) -> CodeStructure:
    """Scan a source file (``language`` None: lines only) into a plan and qualified names."""
    lines = _Lines(text)
    module = PurePosixPath(path).stem if path else ""
    metadata: dict[str, Any] = {}
    if language:
        metadata["language"] = language
    definitions: list[Definition] = []
    weak_rows: set[int] = set()
    title = ""
    if language == "python":
        parsed = _scan_python(text, lines)
        if isinstance(parsed, _ParseError):
            metadata["parse_error"] = {"line": parsed.line, "message": parsed.message}
        else:
            definitions, weak_rows, title = parsed
    elif language in _TREE_SITTER_GRAMMARS:
        definitions, error = _scan_tree_sitter(text, lines, language)
        if error is not None:
            # tree-sitter recovers from errors, so its definitions are still used.
            metadata["parse_error"] = {"line": error.line, "message": error.message}
    metadata["definitions"] = len(definitions)
    plan = _plan(text, lines, definitions, weak_rows, settings, language or "")
    starts, paths = _section_paths(lines, definitions, (module,) if module else ())
    return CodeStructure(plan, title or module, starts, paths, metadata)


# ---------------------------------------------------------------------------------------------
# The plan


def _plan(
    text: str,
    lines: _Lines,
    definitions: list[Definition],
    weak_rows: set[int],
    settings: ChunkerBase,
    language: str,
) -> Plan:
    boundaries: dict[int, int] = {}
    n = len(text)

    def mark(pos: int, score: int) -> None:
        if 0 < pos < n and boundaries.get(pos, -1) < score:
            boundaries[pos] = score

    # Between a definition's first comment or decorator and its keyword is no place to cut.
    weak_rows = weak_rows.union(*(range(d.start_row + 1, d.def_row + 1) for d in definitions))
    probe = BudgetProbe(text, settings)
    previous_blank = True
    for row in range(len(lines)):
        start, end = lines.starts[row], lines.ends[row]
        if lines.is_blank(row):
            previous_blank = True
            continue
        if row in weak_rows or _CLOSER.match(text, start, end):
            score = WEAK_LINE
        elif previous_blank:
            score = BLANK_TOP if lines.indent(row) == 0 else BLANK
        else:
            score = LINE
        mark(start, score)
        previous_blank = False
        fallback_boundaries(probe, start, end, boundaries)

    groups = []
    for definition in definitions:
        score = TOP_DEFINITION if definition.depth == 0 else NESTED_DEFINITION
        start = lines.starts[definition.start_row]
        mark(start, score)
        # The first statement after a definition is as good a place to start as a definition.
        after = definition.end_row + 1
        while after < len(lines) and lines.is_blank(after):
            after += 1
        if after < len(lines) and after not in weak_rows and not _CLOSER.match(text, lines.starts[after]):
            mark(lines.starts[after], score)
        end = lines.ends[definition.end_row]
        body_start = min(lines.starts[min(definition.body_row, len(lines) - 1)], end)
        groups.append(
            Group("code", start, end, max(body_start, start), context=definition.header, label=language)
        )
    groups.sort(key=lambda g: (g.start, -g.end))
    positions = sorted(boundaries)
    # Lines are the finest structural unit: no textual level, so a line that fits is never cut.
    return Plan(
        0,
        n,
        positions=positions,
        scores=[boundaries[p] for p in positions],
        levels=(),
        groups=groups,
        overlap_floor=LINE,
    )


def _section_paths(
    lines: _Lines, definitions: list[Definition], module: tuple[str, ...]
) -> tuple[list[int], list[tuple[str, ...]]]:
    """Positions where the qualified name changes, and the name from there on."""
    events: list[tuple[int, int, tuple[str, ...]]] = [(0, 0, module)]
    order = 1
    # Definitions come in source order, parents before children; a stack gives the enclosing name.
    stack: list[tuple[int, int, tuple[str, ...]]] = []  # (end offset, start offset, path)
    for definition in sorted(definitions, key=lambda d: (d.start_row, -d.end_row)):
        start = lines.starts[definition.start_row]
        while stack and stack[-1][0] < start:
            end, _, _ = stack.pop()
            events.append((end, order, stack[-1][2] if stack else module))
            order += 1
        # A definition on its parent's first line (``class A { void m() {} }``): a chunk starting
        # there starts in the parent.
        if not stack or stack[-1][1] != start:
            events.append((start, order, module + definition.path))
            order += 1
        stack.append((lines.ends[definition.end_row], start, module + definition.path))
    while stack:
        end, _, _ = stack.pop()
        events.append((end, order, stack[-1][2] if stack else module))
        order += 1
    events.sort()
    return [pos for pos, _, _ in events], [path for _, _, path in events]


def _normalize(header: str) -> str:
    header = " ".join(header.split())
    return header if len(header) <= _HEADER_LIMIT else header[: _HEADER_LIMIT - 1] + "…"


@dataclass(frozen=True)
class _ParseError:
    line: int
    message: str


# ---------------------------------------------------------------------------------------------
# Python, through ast


def _scan_python(text: str, lines: _Lines) -> tuple[list[Definition], set[int], str] | _ParseError:
    # ast rejects a byte order mark; dropping it keeps every line number.
    source = text[1:] if text.startswith("\ufeff") else text
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return _ParseError(exc.lineno or 1, exc.msg or "invalid syntax")
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return _ParseError(1, str(exc) or type(exc).__name__)
    definitions: list[Definition] = []
    weak_rows: set[int] = set()
    for node, parents in _python_statements(tree.body, ()):
        _mark_continuations(node, weak_rows)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            definitions.append(_python_definition(node, parents, lines))
    title = ""
    docstring = ast.get_docstring(tree, clean=True)
    if docstring and docstring.strip():
        title = _normalize(docstring.strip().split("\n", 1)[0])  # PEP 257's summary line
    return definitions, weak_rows, title


def _python_statements(
    body: list[ast.stmt], parents: tuple[str, ...]
) -> Iterator[tuple[ast.stmt, tuple[str, ...]]]:
    """Every statement with the names of the definitions around it (if/try/with blocks are open)."""
    for node in body:
        yield node, parents
        inner = (
            parents + (node.name,)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            else parents
        )
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                yield from _python_statements(block, inner)
        for handler in getattr(node, "handlers", ()):
            yield from _python_statements(handler.body, inner)
        for case in getattr(node, "cases", ()):
            yield from _python_statements(case.body, inner)


def _mark_continuations(node: ast.stmt, weak_rows: set[int]) -> None:
    """Rows (0-based) inside a statement that spans lines: poor places to start a chunk."""
    body = getattr(node, "body", None)
    if isinstance(body, list) and body:
        # A compound statement: only its header (and its decorators) can continue over lines.
        last_header_row = body[0].lineno - 2
        for decorator in getattr(node, "decorator_list", ()):
            weak_rows.update(range(decorator.lineno, (decorator.end_lineno or decorator.lineno)))
    else:
        last_header_row = (node.end_lineno or node.lineno) - 1
    weak_rows.update(range(node.lineno, last_header_row + 1))


def _python_definition(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, parents: tuple[str, ...], lines: _Lines
) -> Definition:
    def_row = node.lineno - 1
    start_row = min([def_row] + [d.lineno - 1 for d in node.decorator_list])
    start_row = _comments_above(lines, start_row, ("#",))
    end_row = (node.end_lineno or node.lineno) - 1
    body_row = max(node.body[0].lineno - 1, def_row + 1)
    header_lines = []
    for row in range(def_row, max(node.body[0].lineno - 1, def_row + 1)):
        header_lines.append(lines.text[lines.starts[row] : lines.ends[row]])
        if _HEADER_END.search(header_lines[-1]):
            break  # the signature ends here; comment lines before the body are not part of it
    header = " ".join(header_lines)
    return Definition(
        name=node.name,
        kind="class" if isinstance(node, ast.ClassDef) else "function",
        start_row=start_row,
        def_row=def_row,
        end_row=end_row,
        body_row=body_row,
        header=_normalize(header),
        path=parents + (node.name,),
        depth=len(parents),
    )


def _comments_above(lines: _Lines, row: int, prefixes: tuple[str, ...]) -> int:
    """The first row of the comment lines directly above ``row`` (``row`` itself when none)."""
    while row > 0:
        above = lines.text[lines.starts[row - 1] : lines.ends[row - 1]].lstrip()
        if not above.startswith(prefixes):
            break
        row -= 1
    return row


# ---------------------------------------------------------------------------------------------
# Other languages, through tree-sitter


@dataclass(frozen=True)
class _Grammar:
    module: str
    function: str
    definitions: dict[str, str]  # node type -> "class" | "function"


_JS_DEFINITIONS = {
    "class_declaration": "class",
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "method_definition": "function",
}
_TS_DEFINITIONS = {
    **_JS_DEFINITIONS,
    "abstract_class_declaration": "class",
    "interface_declaration": "class",
    "enum_declaration": "class",
    "internal_module": "class",
    "module": "class",
    "type_alias_declaration": "class",
    "function_signature": "function",
    "method_signature": "function",
    "abstract_method_signature": "function",
}
_TREE_SITTER_GRAMMARS: dict[str, _Grammar] = {
    "javascript": _Grammar("tree_sitter_javascript", "language", _JS_DEFINITIONS),
    "typescript": _Grammar("tree_sitter_typescript", "language_typescript", _TS_DEFINITIONS),
    "tsx": _Grammar("tree_sitter_typescript", "language_tsx", _TS_DEFINITIONS),
    "go": _Grammar(
        "tree_sitter_go",
        "language",
        {
            "function_declaration": "function",
            "method_declaration": "function",
            "type_declaration": "class",
        },
    ),
    "rust": _Grammar(
        "tree_sitter_rust",
        "language",
        {
            "function_item": "function",
            "function_signature_item": "function",
            "struct_item": "class",
            "enum_item": "class",
            "union_item": "class",
            "trait_item": "class",
            "impl_item": "class",
            "mod_item": "class",
            "macro_definition": "function",
        },
    ),
    "java": _Grammar(
        "tree_sitter_java",
        "language",
        {
            "class_declaration": "class",
            "interface_declaration": "class",
            "enum_declaration": "class",
            "record_declaration": "class",
            "annotation_type_declaration": "class",
            "method_declaration": "function",
            "constructor_declaration": "function",
            "compact_constructor_declaration": "function",
        },
    ),
}
# Nodes that can hold definitions; expressions are not entered, which keeps the walk short.
_CONTAINERS = frozenset(
    {
        "program",
        "source_file",
        "statement_block",
        "block",
        "statement_list",
        "class_body",
        "interface_body",
        "enum_body",
        "enum_body_declarations",
        "declaration_list",
        "constructor_body",
        "switch_body",
        "switch_block",
        "switch_case",
        "switch_default",
        "else_clause",
        "catch_clause",
        "finally_clause",
        "ambient_declaration",
        "export_statement",
        "expression_statement",
    }
)
# Siblings directly above a definition that belong to it.
_ATTACHED = frozenset(
    {
        "comment",
        "line_comment",
        "block_comment",
        "decorator",
        "attribute_item",
        "annotation",
        "marker_annotation",
    }
)
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function", "class", "class_expression"}
)

_languages: dict[str, Any] = {}
_languages_lock = threading.Lock()


def _language(name: str) -> Any:
    with _languages_lock:
        language = _languages.get(name)
        if language is None:
            feature = f"The code strategy for {name}"
            tree_sitter = import_extra("tree_sitter", feature, "code")
            grammar = _TREE_SITTER_GRAMMARS[name]
            module = import_extra(grammar.module, feature, "code")
            language = _languages[name] = tree_sitter.Language(getattr(module, grammar.function)())
        return language


class _Offsets:
    """tree-sitter reports UTF-8 byte offsets; the document model counts code points."""

    def __init__(self, text: str, data: bytes):
        self.identity = len(data) == len(text)
        if not self.identity:
            import numpy as np

            raw = np.frombuffer(data, dtype=np.uint8)
            self.char_of_byte = np.cumsum((raw & 0xC0) != 0x80) - 1
            self.n_bytes, self.n_chars = len(data), len(text)

    def char(self, byte: int) -> int:
        if self.identity:
            return byte
        return self.n_chars if byte >= self.n_bytes else int(self.char_of_byte[byte])


def _scan_tree_sitter(text: str, lines: _Lines, language: str) -> tuple[list[Definition], _ParseError | None]:
    language_object = _language(language)  # raises MissingExtra without the code extra
    import tree_sitter

    data = text.encode("utf-8", "surrogatepass")
    tree = tree_sitter.Parser(language_object).parse(data)
    walker = _Walker(text, data, lines, _TREE_SITTER_GRAMMARS[language], language)
    walker.walk(tree.root_node)
    error = None
    if tree.root_node.has_error:
        node = _first_error(tree.root_node)
        row = lines.row_of(walker.offsets.char(node.start_byte)) if node is not None else 0
        error = _ParseError(
            row + 1, "syntax error" if node is None or node.is_error else f"missing {node.type}"
        )
    return walker.definitions, error


def _first_error(root: Any) -> Any:
    """The first ERROR or MISSING node in source order (iterative: trees can be very deep)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    return None


class _Walker:
    def __init__(self, text: str, data: bytes, lines: _Lines, grammar: _Grammar, language: str):
        self.text = text
        self.data = data
        self.lines = lines
        self.grammar = grammar
        self.language = language
        self.offsets = _Offsets(text, data)
        self.definitions: list[Definition] = []
        self._pending: list[tuple[Any, tuple[str, ...], int]] = []

    def walk(self, root: Any) -> None:
        """Visit the tree from ``root`` with a work list, not recursion: nesting can be thousands deep."""
        self._pending.append((root, (), 0))
        while self._pending:
            self._visit_children(*self._pending.pop())

    def visit(self, node: Any, path: tuple[str, ...], depth: int) -> None:
        self._pending.append((node, path, depth))

    def _visit_children(self, node: Any, path: tuple[str, ...], depth: int) -> None:
        for child in node.named_children:
            kind = self.grammar.definitions.get(child.type)
            if kind is not None:
                self._definitions_in(child, child, kind, path, depth)
            elif child.type in (
                "lexical_declaration",
                "variable_declaration",
                "public_field_definition",
                "field_definition",
            ):
                self._function_values(child, path, depth)
            elif child.type == "export_statement":
                self._export(child, path, depth)
            elif child.type in _CONTAINERS or child.type.endswith("_statement"):
                self.visit(child, path, depth)

    def _export(self, node: Any, path: tuple[str, ...], depth: int) -> None:
        """``export [default] class|function|const ...``: the definition starts at ``export``."""
        for child in node.named_children:
            kind = self.grammar.definitions.get(child.type)
            if kind is not None:
                self._definitions_in(child, node, kind, path, depth)
                return
            if child.type in ("lexical_declaration", "variable_declaration"):
                self._function_values(child, path, depth, outer=node)
                return
        self.visit(node, path, depth)

    def _function_values(self, node: Any, path: tuple[str, ...], depth: int, outer: Any = None) -> None:
        """``const f = () => ...``, ``handler = function () ...``: named by the variable or field."""
        declarators = (
            [node]
            if node.type.endswith("field_definition")
            else [c for c in node.named_children if c.type == "variable_declarator"]
        )
        if len(declarators) != 1:
            return
        value = declarators[0].child_by_field_name("value")
        name_node = declarators[0].child_by_field_name("name") or declarators[0].child_by_field_name(
            "property"
        )
        if value is None or name_node is None or value.type not in _FUNCTION_VALUES:
            return
        kind = "class" if value.type.startswith("class") else "function"
        self._add(outer or node, node, value, self._text(name_node), kind, path, depth)

    def _definitions_in(self, node: Any, outer: Any, kind: str, path: tuple[str, ...], depth: int) -> None:
        if node.type == "type_declaration":  # Go: type X struct {...}, or a group of specs
            specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
            if len(specs) == 1:
                self._add(outer, node, specs[0], self._name(specs[0]), "class", path, depth)
                return
            # type ( A ...; B ... ): the block is kept whole, each spec is a definition inside it.
            self._add(outer, node, node, None, "class", path, depth, visit=False)
            for spec in specs:
                self._add(spec, spec, spec, self._name(spec), "class", path, depth + 1)
            return
        qualifier: tuple[str, ...] = ()
        if node.type == "method_declaration" and self.language == "go":
            receiver = node.child_by_field_name("receiver")
            receiver_type = _go_receiver_type(self._text(receiver)) if receiver is not None else ""
            qualifier = (receiver_type,) if receiver_type else ()
        self._add(outer, node, node, self._name(node), kind, path + qualifier, depth)

    def _add(
        self,
        outer: Any,
        node: Any,
        inner: Any,
        name: str | None,
        kind: str,
        path: tuple[str, ...],
        depth: int,
        *,
        visit: bool = True,
    ) -> None:
        """Record a definition (``name`` None: a block without a name of its own, path unchanged)."""
        lines, offsets = self.lines, self.offsets
        first = self._attached_start(outer)
        start_row = lines.row_of(offsets.char(first.start_byte))
        def_row = lines.row_of(offsets.char(node.start_byte))
        end_char = offsets.char(outer.end_byte)
        end_row = lines.row_of(max(end_char - 1, offsets.char(outer.start_byte)))
        body = inner.child_by_field_name("body")
        if body is None:
            header_end = min(lines.ends[def_row], offsets.char(node.end_byte))
            body_row = def_row + 1
        else:
            body_char = offsets.char(body.start_byte)
            header_end = body_char
            body_row = lines.row_of(body_char) + 1
        header_start = offsets.char(node.start_byte)
        header = self.text[header_start : max(header_start, header_end)]
        full_path = path if name is None else path + (name or "<anonymous>",)
        definition = Definition(
            full_path[-1] if full_path else "",
            kind,
            start_row,
            def_row,
            max(end_row, def_row),
            min(body_row, end_row + 1),
            _normalize(header),
            full_path,
            depth,
        )
        self.definitions.append(definition)
        if visit:
            # Methods and nested definitions: look inside the body (or the whole node without one).
            self.visit(body if body is not None else inner, definition.path, depth + 1)

    def _attached_start(self, node: Any) -> Any:
        """The first of the comments, decorators and attributes directly above ``node``."""
        first = node
        sibling = node.prev_named_sibling
        while sibling is not None and sibling.type in _ATTACHED:
            sibling_start = self.offsets.char(sibling.start_byte)
            sibling_end_row = self.lines.row_of(max(self.offsets.char(sibling.end_byte) - 1, sibling_start))
            first_row = self.lines.row_of(self.offsets.char(first.start_byte))
            if sibling_end_row < first_row - 1 or not self.lines.starts_line(sibling_start):
                break
            first = sibling
            sibling = sibling.prev_named_sibling
        return first

    def _name(self, node: Any) -> str:
        name = node.child_by_field_name("name")
        if name is None and node.type == "impl_item":
            name = node.child_by_field_name("type")
            return _rust_type_name(self._text(name)) if name is not None else ""
        return self._text(name) if name is not None else ""

    def _text(self, node: Any) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


def _go_receiver_type(receiver: str) -> str:
    """``(s *Server[T])`` -> ``Server``."""
    match = regex.search(r"\*?\s*([\p{L}_][\p{L}\p{N}_]*)\s*(?:\[[^\]]*\])?\s*\)?\s*$", receiver)
    return match.group(1) if match else ""


def _rust_type_name(type_text: str) -> str:
    """``std::fmt::Wrapper<T>`` -> ``Wrapper``."""
    base = type_text.split("<", 1)[0].strip()
    return base.rsplit("::", 1)[-1].strip("&* ") or type_text
