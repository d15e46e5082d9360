"""Instructions of one pass of ``split_document`` over a corpus, counted by callgrind: a measure of a
change that this machine's clock, which swings by ±30 % idle or not, does not move.

    .venv/bin/python benchmarks/instructions.py [--corpora rust-book,hugo-docs,k8s-enhancements]
        [--strategies markdown,recursive] [--other OTHER_VENV/bin/python]

Needs valgrind (``apt-get install valgrind``). Each (corpus, strategy) runs in a fresh process under
``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce``: the process reads the
corpus and chunks it once (imports, memos), then once more inside ``functools.reduce``, which is all that
is counted (1000 characters, no overlap, ``count_tokens: false``, as ``speed.py``'s character groups).
With ``--other``, the same under another interpreter (a base commit's venv, whose checkout has its own
chunkyard) and the ratio. Callgrind runs code about 50 times slower: k8s-enhancements takes about 4
minutes a strategy, hugo-docs and rust-book about 30 seconds. Instructions are not time (a cache miss
costs more than an add), so a change is confirmed by ``ab_corpus.py`` or ``speed.py`` too.
"""

from __future__ import annotations

import argparse
import functools
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from corpora import CORPORA, MARKDOWN_CORPORA, corpus_folder, markdown_files

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def one_pass(corpus: str, strategy: str) -> int:
    """Chunk the corpus twice, the second time inside ``functools.reduce``; the number of chunks."""
    from chunkyard.chunking.api import split_document
    from chunkyard.chunking.config import parse_settings

    texts = [
        p.read_text(encoding="utf-8", errors="replace") for p in markdown_files(corpus_folder(Path(corpus)))
    ]
    settings = parse_settings(
        {
            "front_matter": "keep",
            "strategy": strategy,
            "unit": "chars",
            "max_size": 1000,
            "overlap": 0,
            "count_tokens": False,
        }
    )
    for text in texts:
        split_document(text, settings)
    return functools.reduce(lambda count, text: count + len(split_document(text, settings).chunks), texts, 0)


def instructions(python: str, corpus: str, strategy: str) -> int:
    """The instructions callgrind counts inside the second pass, run by ``python``."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={Path(folder) / 'callgrind.out'}",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                python,
                __file__,
                "--pass",
                corpus,
                strategy,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(
            f"{python} on {corpus} {strategy} failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default=",".join(MARKDOWN_CORPORA))
    parser.add_argument("--strategies", default="markdown,recursive")
    parser.add_argument("--other", help="another interpreter (e.g. a base commit's venv) to compare with")
    parser.add_argument(
        "--pass", dest="one_pass", nargs=2, metavar=("CORPUS", "STRATEGY"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.one_pass:
        one_pass(*args.one_pass)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    print(f"Corpora: {CORPORA}; one pass of split_document, chars 1000, count_tokens: false; callgrind Ir")
    print("| corpus | strategy | this | " + ("other | this ÷ other |" if args.other else ""))
    print("|---|---|---:|" + ("---:|---:|" if args.other else ""))
    for corpus in args.corpora.split(","):
        for strategy in args.strategies.split(","):
            this = instructions(sys.executable, corpus, strategy)
            row = f"| {corpus} | {strategy} | {this / 1e6:,.1f}M |"
            if args.other:
                other = instructions(args.other, corpus, strategy)
                row += f" {other / 1e6:,.1f}M | {this / other:.3f} |"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
