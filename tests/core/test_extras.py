"""Optional extras (pyproject.toml: eval, office, code): without one, each feature that needs it fails
with one line naming the extra to install, and a run skips the file with that reason.

Each case runs in a fresh interpreter where the extra's module is blocked (``sys.modules[name] = None``
makes ``import name`` raise ImportError), as if it were not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_without(modules: list[str], body: str, tmp_path: Path) -> dict:
    """Run ``body`` (which sets ``out``) with ``modules`` blocked; return ``out`` (JSON)."""
    script = "import json, sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    script += textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_pdf_and_docx_without_the_office_extra_are_skipped_with_one_line(tmp_path):
    out = run_without(
        ["pypdf", "docx"],
        """
        from pathlib import Path
        from chunkyard.chunking.documents import read_document
        Path("a.pdf").write_bytes(b"%PDF-1.4\\n%%EOF\\n")
        Path("b.docx").write_bytes(b"PK\\x03\\x04 not really")
        out = {}
        for name in ("a.pdf", "b.docx"):
            skip = read_document(Path(name), name)
            out[name] = [type(skip).__name__, skip.reason, skip.keep_previous]
    """,
        tmp_path,
    )
    assert out["a.pdf"] == [
        "Skipped",
        "PDF support needs the office extra: pip install 'chunkyard[office]'",
        True,
    ]
    assert out["b.docx"] == [
        "Skipped",
        "DOCX support needs the office extra: pip install 'chunkyard[office]'",
        True,
    ]


def test_code_without_grammars_names_the_code_extra_and_python_still_chunks(tmp_path):
    out = run_without(
        ["tree_sitter", "tree_sitter_javascript"],
        """
        from chunkyard import chunk_document
        from chunkyard.chunking.errors import MissingExtra
        settings = {"strategy": "code", "unit": "chars", "max_size": 200}
        python = chunk_document("def f():\\n    return 1\\n\\n\\nclass A:\\n    pass\\n", settings, "tool.py")
        try:
            chunk_document("function f() { return 1; }\\n", settings, "app.js")
            message = None
        except MissingExtra as exc:
            message = str(exc)
        out = {"python": [c.section_path for c in python], "js": message}
    """,
        tmp_path,
    )
    assert out["js"] == "The code strategy for javascript needs the code extra: pip install 'chunkyard[code]'"
    # The file fits one chunk, holding f and A: its path is their common section, the module.
    assert out["python"] == [["tool"]]


def test_a_run_skips_a_file_whose_extra_is_missing_and_chunks_the_rest(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.js").write_text("function f() { return 1; }\n", encoding="utf-8")
    (tmp_path / "src" / "notes.md").write_text("# Notes\n\nPlain text.\n", encoding="utf-8")
    (tmp_path / "kb.yaml").write_text(
        "name: kb\nversion: 1\nsource: {path: src}\noutput: {path: out}\n"
        "chunker: {unit: chars, max_size: 200}\n",
        encoding="utf-8",
    )
    out = run_without(
        ["tree_sitter"],
        """
        from chunkyard import load_config
        from chunkyard.chunking.documents import SourceFile
        from chunkyard.chunking.pipeline import chunk_files, discover_files, prepare_run
        config = load_config("kb.yaml")
        files = [f for f in discover_files(prepare_run(config)) if isinstance(f, SourceFile)]
        result = chunk_files(config, files, {})
        out = {"chunked": result.chunked,
               "skipped": [[s.doc_id, s.reason, s.keep_previous] for s in result.skipped]}
    """,
        tmp_path,
    )
    assert out["chunked"] == ["notes.md"]
    assert out["skipped"] == [
        [
            "app.js",
            "The code strategy for javascript needs the code extra: pip install 'chunkyard[code]'",
            True,
        ]
    ]


@pytest.mark.parametrize(
    ("blocked", "call", "message"),
    [
        (
            "wordllama",
            "chunk_document('One. Two.', {'strategy': 'semantic', 'unit': 'chars', 'max_size': 50})",
            "The semantic strategy needs the eval extra: pip install 'chunkyard[eval]'",
        ),
        (
            "bm25s",
            "BM25Retriever(['a text'])",
            "The bm25 retriever needs the eval extra: pip install 'chunkyard[eval]'",
        ),
        (
            "wordllama",
            "load_wordllama()",
            "The dense retriever needs the eval extra: pip install 'chunkyard[eval]'",
        ),
        (
            "matplotlib",
            "write_chart([], Path('chart.png'))",
            "The evaluation chart needs the eval extra: pip install 'chunkyard[eval]'",
        ),
    ],
)
def test_eval_features_without_the_eval_extra_name_it(tmp_path, blocked, call, message):
    out = run_without(
        [blocked],
        f"""
        from pathlib import Path
        from chunkyard import chunk_document
        from chunkyard.chunking.errors import MissingExtra
        from chunkyard.chunking.evaluation.report import write_chart
        from chunkyard.chunking.evaluation.retrievers import BM25Retriever, load_wordllama
        try:
            {call}
            out = None
        except MissingExtra as exc:
            out = str(exc)
    """,
        tmp_path,
    )
    assert out == message
