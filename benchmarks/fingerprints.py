"""The output check of a speed change: a fingerprint of ``split_document``'s result for every file of the
shared Markdown corpora under several configurations, saved once and compared after the change.

    .venv/bin/python benchmarks/fingerprints.py --save DIR        # before the change (or on the base commit)
    .venv/bin/python benchmarks/fingerprints.py --compare DIR     # after it: exit 1 if any differs
    CHUNKYARD_PURE_PYTHON=1 .venv/bin/python benchmarks/fingerprints.py --compare DIR   # the Python twins

A fingerprint is a SHA-256 over every field of every chunk (spans, embed_text, section path, sizes,
token counts, findings, label, over-budget reason) plus the title and exclusions, per (file,
configuration). ``--quick`` takes every fifth file. A speed change must leave every fingerprint equal,
compiled and pure Python; a change of output is a change of ``ALGORITHM_VERSION`` and the goldens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from corpora import MARKDOWN_CORPORA, corpus_folder, markdown_files

# Each configuration the check runs: the strategies the segmenter serves, every unit, overlap, both
# budget meanings, a small budget (many cuts per document) and min_size.
CONFIGURATIONS: dict[str, dict[str, object]] = {
    "recursive-1000": {"strategy": "recursive", "unit": "chars", "max_size": 1000, "count_tokens": False},
    "markdown-1000": {"strategy": "markdown", "unit": "chars", "max_size": 1000, "count_tokens": False},
    "recursive-400-overlap": {"strategy": "recursive", "unit": "chars", "max_size": 400, "overlap": 60},
    "markdown-400-text": {"strategy": "markdown", "unit": "chars", "max_size": 400, "budget": "text"},
    "recursive-tokens": {"strategy": "recursive", "unit": "tokens", "max_size": 512, "overlap": 64},
    "markdown-tokens": {"strategy": "markdown", "unit": "tokens", "max_size": 512},
    "markdown-words-min": {"strategy": "markdown", "unit": "words", "max_size": 200, "min_size": 40},
    "sentence-600": {"strategy": "sentence", "unit": "chars", "max_size": 600},
    "markdown-strip-fm": {"strategy": "markdown", "unit": "chars", "max_size": 800, "front_matter": "keep"},
}


def fingerprint(document: object) -> str:
    """SHA-256 of everything ``split_document`` returned for one document."""
    digest = hashlib.sha256()
    digest.update(repr((document.title, document.exclusions)).encode("utf-8", "surrogatepass"))
    for chunk in document.chunks:
        digest.update(repr(tuple(chunk)).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def fingerprints(corpora: list[str], quick: bool) -> dict[str, str]:
    """``{"corpus/file|configuration": fingerprint}`` over the corpora (names or folders)."""
    from chunkyard.chunking.api import split_document
    from chunkyard.chunking.config import parse_settings

    result = {}
    for corpus in corpora:
        folder = corpus_folder(Path(corpus))
        files = markdown_files(folder)[:: 5 if quick else 1]
        texts = [
            (f"{folder.name}/{path.relative_to(folder)}", path.read_text("utf-8", errors="replace"))
            for path in files
        ]
        for name, raw in CONFIGURATIONS.items():
            settings = parse_settings(raw)
            for key, text in texts:
                result[f"{key}|{name}"] = fingerprint(split_document(text, settings, key))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path, metavar="DIR")
    action.add_argument("--compare", type=Path, metavar="DIR")
    parser.add_argument("--quick", action="store_true", help="every fifth file")
    parser.add_argument(
        "--corpora", default=",".join(MARKDOWN_CORPORA), help="names or folders, comma-separated"
    )
    args = parser.parse_args(argv)
    name = "fingerprints-quick.json" if args.quick else "fingerprints.json"
    current = fingerprints(args.corpora.split(","), args.quick)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        (args.save / name).write_text(json.dumps(current, indent=0, sort_keys=True), encoding="utf-8")
        print(f"{len(current):,} fingerprints saved to {args.save / name}")
        return 0
    saved = json.loads((args.compare / name).read_text(encoding="utf-8"))
    differ = sorted(key for key in saved.keys() | current.keys() if saved.get(key) != current.get(key))
    for key in differ[:20]:
        print(f"differs: {key}")
    print(f"{len(current):,} fingerprints, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
