"""The ``code`` strategy: splits between definitions, keeps decorators/docs with them, qualified names.

Fixtures in tests/fixtures/code hold one small file per language; the sample corpus's
examples/kb/tools/inventory_sync.py is the realistic case. Every chunking call goes through
``check_chunks`` (conftest), which asserts the invariants of docs/design.md on the way.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkyard.chunking.api import split_document
from chunkyard.chunking.code import LANGUAGE_BY_SUFFIX, LANGUAGES, detect_language
from chunkyard.chunking.config import load_config_text, parse_settings
from chunkyard.chunking.errors import ConfigError
from chunkyard.chunking.settings import CodeSettings
from chunkyard.chunking.strategies import auto_strategy, get_strategy

from support.checks import spanned_section_path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "code"
INVENTORY = REPO / "examples" / "kb" / "tools" / "inventory_sync.py"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def code_settings(max_size: int, unit: str = "chars", **extra: object) -> dict[str, object]:
    # These tests place definitions against the text's size (``budget: text``); the default budget
    # (embed_text: the qualified name ahead of the text) is checked in test_embed_budget.py.
    return {"strategy": "code", "unit": unit, "max_size": max_size, "budget": "text", **extra}


def span_of(text: str, first: str, last: str) -> tuple[int, int]:
    """The span from the line holding ``first`` to the end of ``last`` (after ``first``)."""
    start = text.index(first)
    start = text.rfind("\n", 0, start) + 1
    end = text.index(last, start) + len(last)
    return start, end


def chunk_holding(chunks, start: int, end: int):
    for chunk in chunks:
        if chunk.start <= start and end <= chunk.end:
            return chunk
    return None


def assert_line_starts(text: str, chunks) -> None:
    """Every chunk starts at the beginning of a line (possibly after its indentation)."""
    for chunk in chunks:
        line_start = text.rfind("\n", 0, chunk.start) + 1
        assert not text[line_start : chunk.start].strip(), f"chunk {chunk.index} starts mid-line"


# ---------------------------------------------------------------------------------------------
# Python


def test_python_definitions_stay_whole_with_decorators_comments_and_docstrings(check_chunks):
    text = read("warehouse.py")
    result = check_chunks(text, code_settings(450), path="src/warehouse.py")
    assert result.strategy == "code"
    assert result.metadata["language"] == "python"
    assert_line_starts(text, result.chunks)
    wholes = {
        "cached": ("def cached(func):", "    return wrapper"),
        "Bin.free": (
            "    # Comments above a method travel with it.",
            "return self.capacity - len(self.items)",
        ),
        "Bin.describe": ("    @staticmethod", 'return f"bin {number}"'),
        "restock": ("async def restock(", "    return placed"),
    }
    for name, (first, last) in wholes.items():
        start, end = span_of(text, first, last)
        assert chunk_holding(result.chunks, start, end) is not None, f"{name} was cut"
    # A definition that fits starts its own chunk, together with its decorators and comments.
    starts = {text[c.start : c.end].lstrip().split("\n", 1)[0] for c in result.chunks}
    assert "# Bins are numbered from the dock door." in starts or "def cached(func):" in starts


def test_python_class_that_fits_is_one_chunk(check_chunks):
    text = read("warehouse.py")
    result = check_chunks(text, code_settings(1000), path="warehouse.py")
    start, end = span_of(text, "# Bins are numbered from the dock door.", "return self.number < other.number")
    holder = chunk_holding(result.chunks, start, end)
    assert holder is not None and holder.start == start, "the class with its comments should open a chunk"


def test_python_section_paths_are_qualified_names(check_chunks):
    text = read("warehouse.py")
    result = check_chunks(text, code_settings(160), path="pkg/warehouse.py")
    paths = {c.text.strip().split("\n")[0].strip(): c.section_path for c in result.chunks}
    assert result.chunks[0].section_path == ("warehouse",)
    assert ("warehouse", "Bin", "describe") in set(paths.values())
    assert ("warehouse", "restock") in set(paths.values()) or ("warehouse", "restock", "emptiest") in set(
        paths.values()
    )
    for chunk in result.chunks:
        if chunk.text.lstrip().startswith("def __init__"):
            assert chunk.section_path == ("warehouse", "Bin", "__init__")
        if chunk.text.lstrip().startswith('if __name__ == "__main__":'):
            assert chunk.section_path == ("warehouse",)
    assert all(path[0] == "warehouse" for path in paths.values())


def test_split_definition_repeats_its_signature_in_embed_text(check_chunks):
    body = "\n".join(f"    total += {i}  # step {i}" for i in range(60))
    text = f"def long_sum(values: list[int]) -> int:\n    total = 0\n{body}\n    return total\n"
    result = check_chunks(text, code_settings(300), path="calc.py")
    assert len(result.chunks) > 2
    for chunk in result.chunks[1:]:
        assert "def long_sum(values: list[int]) -> int:" in chunk.embed_text
        assert chunk.section_path == ("calc", "long_sum")
        assert chunk.label == "python"
    assert_line_starts(text, result.chunks)
    for chunk in result.chunks[:-1]:
        assert text[chunk.end] == "\n", "a chunk inside a function ends at a line end"


def test_python_syntax_error_falls_back_to_lines(check_chunks):
    text = "def ok():\n    return 1\n\n\ndef broken(:\n    pass\n\n" + "x = 1\n" * 80
    result = check_chunks(text, code_settings(120), path="broken.py")
    assert result.metadata["parse_error"]["line"] == 5
    assert result.metadata["definitions"] == 0
    assert {c.section_path for c in result.chunks} == {("broken",)}
    assert_line_starts(text, result.chunks)


@pytest.mark.parametrize(
    "text",
    [
        "\x00 = 1\n",  # null byte: ValueError from ast
        "\ufeffdef f():\n    return 1\n",  # byte order mark
        "def f():\r    return 1\r\rclass C:\r    pass\r",  # old Mac line ends
        "",
        "\n\n   \n",
        "(" * 300 + ")" * 300 + "\n",  # too deeply nested for the parser
    ],
)
def test_python_odd_inputs_do_not_crash(check_chunks, text):
    check_chunks(text, code_settings(40), path="odd.py")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("deep.js", "function f() {\n" + "{\n" * 3000 + "}\n" * 3000 + "}\n"),
        ("open.js", "function f() {\n" + "if (x) {\n  function g() {}\n" * 2000),
        (
            "deep.py",
            "".join("    " * i + "if x:\n" for i in range(99))
            + "    " * 99
            + "def f():\n"
            + "    " * 100
            + "pass\n",
        ),
        ("deep.rs", "fn main() {\n" + "(" * 2000 + ")" * 2000 + ";\n}\n"),
    ],
)
def test_deeply_nested_code_does_not_crash(check_chunks, path, text):
    result = check_chunks(text, code_settings(200), path=path, twice=False)
    assert result.chunks


def test_old_mac_line_ends_map_python_lines(check_chunks):
    text = "import os\r\r\rdef f():\r    return 1\r\r\rclass C:\r    def m(self):\r        pass\r"
    result = check_chunks(text, code_settings(30), path="mac.py")
    by_start = {c.text.split("\r")[0].strip(): c.section_path for c in result.chunks}
    assert by_start["def f():"] == ("mac", "f")
    assert by_start["class C:"] == ("mac", "C")


def test_inventory_sync_chunks_nicely(check_chunks):
    text = INVENTORY.read_text(encoding="utf-8")
    result = check_chunks(
        text, {"strategy": "auto", "unit": "tokens", "max_size": 256}, path="tools/inventory_sync.py"
    )
    assert result.strategy == "code"
    assert result.title.startswith("Sync on-hand inventory")
    assert_line_starts(text, result.chunks)
    assert not any("over_budget" in c.findings or "mid_sentence_start" in c.findings for c in result.chunks)
    # Every top-level function fits in 256 tokens, so each lies whole in one chunk.
    for name in ("retry", "parse_args", "main"):
        start, end = span_of(text, f"def {name}(", "\n\n\n")
        end = text.rindex("\n\n\n", start, end) if "\n\n\n" in text[start:end] else end
        holder = chunk_holding(result.chunks, start, end - 3)
        assert holder is not None, f"{name} was cut"
        # A chunk's path is the deepest definition holding all of it: the function's when the chunk
        # holds nothing outside it, else an enclosing one (the module).
        outside = holder.start < start or bool(text[end : holder.end].strip())
        assert holder.section_path[:2] == ("inventory_sync", name) or (
            outside and ("inventory_sync", name)[: len(holder.section_path)] == holder.section_path
        )
    layout = get_strategy("code")(text, parse_settings({"unit": "tokens", "max_size": 256}), INVENTORY.name)
    for chunk in result.chunks:
        assert chunk.section_path == spanned_section_path(layout, text, chunk.start, chunk.end)
    paths = {c.section_path for c in result.chunks}
    # WMSClient.stock_levels fits, so it lies whole in one chunk, whose path holds it: the method's own
    # when the chunk holds nothing else, else an ancestor's (with the default budget the prefix takes
    # room, and the method shares a chunk with the code after it).
    start = text.index("    def stock_levels(")
    end = text.index("                break\n", start) + len("                break")
    holder = chunk_holding(result.chunks, start, end)
    assert holder is not None, "stock_levels was cut"
    assert ("inventory_sync", "WMSClient", "stock_levels")[: len(holder.section_path)] == holder.section_path
    assert all(p[0] == "inventory_sync" for p in paths)
    # The module docstring and the imports come first, alone.
    assert result.chunks[0].section_path == ("inventory_sync",)
    assert "def " not in result.chunks[0].text


def test_inventory_sync_with_default_budget_is_one_chunk_per_few_functions(check_chunks):
    text = INVENTORY.read_text(encoding="utf-8")
    result = check_chunks(text, {"strategy": "code"}, path="tools/inventory_sync.py")
    assert 2 <= len(result.chunks) <= 5
    assert_line_starts(text, result.chunks)


# ---------------------------------------------------------------------------------------------
# Other languages (tree-sitter)

LANGUAGE_CASES = {
    "shelf.ts": (
        "typescript",
        ("shelf", "Rack", "add"),
        ["add(shelf: Shelf)", "count(): number", "totalWeight"],
    ),
    "picker.js": (
        "javascript",
        ("picker", "Picker", "pick"),
        ["pick(item)", "function route", "const summary"],
    ),
    "dock.go": (
        "go",
        ("dock", "Door", "Label"),
        ["func (d *Door) Toggle", "func (d Door) Label", "func Schedule"],
    ),
    "pallet.rs": ("rust", ("pallet", "Pallet"), ["pub fn new", "pub fn load", "pub fn heaviest"]),
    "Forklift.java": (
        "java",
        ("Forklift", "Forklift", "toString"),
        ["public void lift", "public String toString", "int charge()"],
    ),
}


@pytest.mark.parametrize("name", sorted(LANGUAGE_CASES))
def test_other_languages_split_between_definitions(check_chunks, name):
    language, qualified, signatures = LANGUAGE_CASES[name]
    text = read(name)
    result = check_chunks(text, code_settings(200), path=f"src/{name}")
    assert result.metadata["language"] == language
    assert "parse_error" not in result.metadata
    assert result.metadata["definitions"] >= 3
    assert_line_starts(text, result.chunks)
    # Chunks begin only before a definition (with its comments) or after a blank line.
    layout = _layout(text, name, 200)
    score_at = dict(zip(layout.plan.positions, layout.plan.scores, strict=True))
    for chunk in result.chunks[1:]:
        line_start = text.rfind("\n", 0, chunk.start) + 1
        assert score_at.get(line_start, 0) >= 35, f"chunk {chunk.index} starts at a weak line"
    for signature in signatures:
        pos = text.index(signature)
        assert any(c.start <= pos < c.end for c in result.chunks)
    # Small definitions share chunks; a chunk's path is the deepest definition holding all of it, so the
    # chunk holding the method has its path or an ancestor of it, and labels are those of code chunks.
    line_starts = [0, *(i + 1 for i, ch in enumerate(text) if ch == "\n")]
    assert qualified in {layout.section_path(pos) for pos in line_starts}
    for chunk in result.chunks:
        assert chunk.section_path == spanned_section_path(layout, text, chunk.start, chunk.end)
    assert all(c.label == language for c in result.chunks if c.section_path != (Path(name).stem,))


@pytest.mark.parametrize("name", sorted(LANGUAGE_CASES))
def test_other_languages_keep_each_method_whole(check_chunks, name):
    text = read(name)
    result = check_chunks(text, code_settings(200), path=name)
    from chunkyard.chunking.code import _Lines, _scan_tree_sitter

    lines = _Lines(text)
    definitions, error = _scan_tree_sitter(text, lines, LANGUAGE_CASES[name][0])
    assert error is None
    for definition in definitions:
        start, end = lines.starts[definition.start_row], lines.ends[definition.end_row]
        if end - start <= 200:
            assert chunk_holding(result.chunks, start, end) is not None, definition.path


@pytest.mark.parametrize(
    ("name", "signature", "qualified"),
    [
        ("pallet.rs", "pub fn load", ("pallet", "Pallet", "load")),
        ("pallet.rs", "fn fmt(", ("pallet", "Pallet", "fmt")),
        ("Forklift.java", "int charge()", ("Forklift", "Forklift", "Battery", "charge")),
        ("dock.go", "func (d *Door) Toggle", ("dock", "Door", "Toggle")),
        ("shelf.ts", "export const heaviest", ("shelf", "heaviest")),
        ("picker.js", "const summary", ("picker", "summary")),
    ],
)
def test_methods_get_qualified_names(check_chunks, name, signature, qualified):
    text = read(name)
    layout = _layout(text, name)
    pos = text.index(signature)
    assert layout.section_path(pos) == qualified
    assert layout.section_path(text.rfind("\n", 0, pos) + 1) == qualified  # from the line start on
    result = check_chunks(text, code_settings(40), path=name)
    holder = [c for c in result.chunks if c.start <= pos < c.end][0]
    assert holder.section_path == qualified


def test_doc_comments_and_attributes_belong_to_the_definition():
    text = read("pallet.rs")
    layout_groups = _groups(text, "pallet.rs")
    starts = {text[g.start : g.end].split("\n")[0] for g in layout_groups}
    assert "/// A pallet on the floor." in starts
    assert "    /// A new empty pallet." in starts
    text = read("shelf.ts")
    starts = {text[g.start : g.end].split("\n")[0] for g in _groups(text, "shelf.ts")}
    assert "/** A rack of shelves. */" in starts
    assert "  // Adds a shelf at the bottom." in starts


def _layout(text: str, path: str, max_size: int = 100):
    from chunkyard.chunking.strategies import get_strategy

    return get_strategy("code")(text, parse_settings(code_settings(max_size)), path)


def _groups(text: str, path: str):
    return _layout(text, path).plan.groups


def test_tree_sitter_syntax_error_is_reported_not_fatal(check_chunks):
    text = "function ok() {\n  return 1;\n}\n\nfunction broken( {\n  return ;\n\nclass A { m() {} }\n"
    result = check_chunks(text, code_settings(40), path="bad.js")
    assert result.metadata["parse_error"]["line"] >= 1
    assert result.chunks


def test_unicode_offsets_follow_code_points(check_chunks):
    text = 'const greeting = "héllo 👋 wörld";\n\n// Grüße\nfunction grüß(name) {\n  return `¡hola ${name}!`;\n}\n'
    result = check_chunks(text, code_settings(60), path="u.js")
    function = [c for c in result.chunks if "function grüß" in c.text]
    assert function and function[0].text.startswith("// Grüße")
    assert function[0].section_path == ("u", "grüß")


# ---------------------------------------------------------------------------------------------
# Lines, long lines, unknown languages


def test_long_line_is_the_only_place_words_are_split(check_chunks):
    long_line = "    message = '" + " ".join(f"word{i}" for i in range(120)) + "'\n"
    text = "def f():\n    a = 1\n" + long_line + "    return message\n"
    result = check_chunks(text, code_settings(200), path="long.py")
    line_start = text.index(long_line)
    line_end = line_start + len(long_line) - 1
    for chunk in result.chunks[:-1]:
        inside_long_line = line_start < chunk.end < line_end
        assert inside_long_line or text[chunk.end] == "\n", f"chunk {chunk.index} ends mid-line"
    assert not any("over_budget" in c.findings for c in result.chunks)


def test_a_line_that_fits_is_never_cut_even_when_long(check_chunks):
    # Lines of about 60% of the budget: the packer must end chunks between them, not inside.
    lines = [f"value_{i} = '{'x' * 100}'  # {i}" for i in range(12)]
    text = "\n".join(lines) + "\n"
    result = check_chunks(text, code_settings(200), path="data.py")
    for chunk in result.chunks[:-1]:
        assert text[chunk.end] == "\n"


def test_giant_token_without_spaces_is_cut_by_graphemes_with_a_finding(check_chunks):
    text = "blob = '" + "ab" * 400 + "'\n"
    result = check_chunks(text, code_settings(100), path="blob.py")
    assert len(result.chunks) >= 8
    assert all(c.size <= 100 for c in result.chunks)


@pytest.mark.parametrize("path", ["notes.txt", "Makefile", None, "script.sh"])
def test_unknown_language_is_split_on_lines(check_chunks, path):
    text = "\n".join(f"line {i} of the file" for i in range(40)) + "\n"
    result = check_chunks(text, code_settings(100), path=path)
    assert "language" not in result.metadata
    for chunk in result.chunks[:-1]:
        assert text[chunk.end] == "\n"


def test_language_override(check_chunks):
    text = read("warehouse.py")
    result = check_chunks(text, code_settings(420, language="python"), path="warehouse.txt")
    assert result.metadata["language"] == "python"
    assert ("warehouse", "Bin", "describe") in {c.section_path for c in result.chunks} or any(
        c.section_path[:2] == ("warehouse", "Bin") for c in result.chunks
    )


def test_overlap_starts_at_a_line(check_chunks):
    text = read("warehouse.py")
    result = check_chunks(text, code_settings(200, overlap=60), path="warehouse.py")
    assert_line_starts(text, result.chunks)


# ---------------------------------------------------------------------------------------------
# Settings, detection, auto


def test_suffixes_map_to_languages_and_auto_picks_code():
    for suffix in (".py", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java"):
        assert suffix in LANGUAGE_BY_SUFFIX
        assert auto_strategy(f"src/file{suffix}") == "code"
        assert auto_strategy(f"src/FILE{suffix.upper()}") == "code"
    assert detect_language("a.tsx") == "tsx"
    assert detect_language("a.txt") is None
    assert detect_language("a.txt", "go") == "go"
    assert auto_strategy("notes.txt") == "recursive"


def test_language_setting_matches_the_scanner():
    allowed = typing.get_args(typing.get_args(CodeSettings.model_fields["language"].annotation)[0])
    assert set(allowed) == set(LANGUAGES) == set(LANGUAGE_BY_SUFFIX.values())


def test_config_validates_code_settings():
    config = load_config_text(
        textwrap.dedent("""
        name: code
        version: 1
        source: {path: src}
        chunker: {strategy: code, unit: chars, max_size: 800}
        rules:
          - match: "legacy/**"
            chunker: {language: python}
    """)
    )
    assert config.chunker.strategy == "code"
    assert config.rule_settings[0][1].language == "python"
    with pytest.raises(ConfigError) as error:
        load_config_text(
            "name: x\nversion: 1\nsource: {path: s}\nchunker: {strategy: code, language: cobol}\n"
        )
    assert "language" in str(error.value) and ":4:" in str(error.value)


def test_core_import_stays_light():
    script = textwrap.dedent("""
        import sys
        import chunkyard.chunking
        from chunkyard.chunking.api import chunk_document
        chunk_document("def f():\\n    return 1\\n", {"strategy": "code", "unit": "chars", "max_size": 50},
                       path="a.py")
        print(",".join(sorted(n for n in sys.modules if n.split(".")[0] in ("tree_sitter", "wordllama"))))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", f"importing the core loaded: {result.stdout.strip()}"


# ---------------------------------------------------------------------------------------------
# Properties

_PIECES = [
    "def {n}(a, b):\n    return a + b\n",
    '@decorator\ndef {n}():\n    """Doc."""\n    pass\n',
    "# comment about {n}\nclass {n}:\n    x = 1\n\n    def method(self):\n        return self.x\n",
    "{n} = [\n    1,\n    2,\n]\n",
    "\n",
    "    \n",
    "{n} = '" + "ü" * 30 + " 👩‍👩‍👧 " + "é" * 10 + "'\n",
    "{n} = '" + " ".join(["long"] * 70) + "'\n",
    "if {n}:\n    def inner():\n        pass\n",
    "def {n}(:\n",  # a syntax error now and then
]


@st.composite
def python_like(draw: st.DrawFn) -> str:
    count = draw(st.integers(0, 14))
    parts = [draw(st.sampled_from(_PIECES)).format(n=f"name{i}") for i in range(count)]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return "".join(parts).replace("\n", newline)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=python_like(),
    unit=st.sampled_from(["chars", "words", "tokens"]),
    max_size=st.integers(5, 300),
    overlap=st.integers(0, 40),
    suffix=st.sampled_from([".py", ".js", ".txt"]),
)
def test_invariants_hold_on_generated_code(text, unit, max_size, overlap, suffix):
    from support.checks import run_and_check

    chunk_settings = code_settings(max_size, unit, overlap=min(overlap, max_size - 1))
    tolerate = ("token_overlap",) if unit == "tokens" else ()
    result = run_and_check(text, chunk_settings, f"gen{suffix}", tolerate=tolerate)
    for chunk in result.chunks:
        assert chunk.section_path[:1] == ("gen",)


def test_timing_is_reasonable(check_chunks):
    text = INVENTORY.read_text(encoding="utf-8") * 20
    import time

    began = time.perf_counter()
    split_document(text, code_settings(512, "tokens"), path="big.py")
    assert time.perf_counter() - began < 5
