"""Where ``split_document``'s time goes, phase by phase, over a folder of Markdown.

    .venv/bin/python benchmarks/phases.py [CORPUS_DIR] [--strategy recursive] [--unit tokens]
        [--max-size 512] [--overlap 64] [--no-count] [--repeats 3]

Runs the phases of ``chunkyard.chunking.api.split_document`` one after the other on every document, as
it runs them (the strategy's layout, the meter (for tokens: the one whole-document encoding), the
reserve (each chunk start's ``embed_text`` prefix), the packer with that reserve, the findings) and
then ``split_document`` itself, and prints the median CPU seconds of each over the repeats. What
``split_document`` spends beyond the five phases (building chunks, ``embed_text``, labels, token
counts in chars mode) is the last row; on short pages it is within the clock's own cost (≈1 µs a
phase a document: hugo-docs' rest comes out near 0). The packer is given the reserve as in a run:
without it, it would search other segmentations (the budget bounds ``embed_text`` by default), and
the script stops when its chunks are not split_document's. Use it to see which phase a change must
shorten, and to check that it did; ``speed.py`` compares the whole against the peers.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from corpora import CORPORA, corpus_folder, markdown_files

from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.findings import check_spans
from chunkyard.chunking.layout import file_title
from chunkyard.chunking.packer import Packer
from chunkyard.chunking.prefix import Reserve
from chunkyard.chunking.strategies import get_strategy
from chunkyard.chunking.units import make_meter

DEFAULT_CORPUS = CORPORA
PHASES = ("layout", "meter", "reserve", "pack", "findings")


def measure(texts: list[str], settings) -> dict[str, float]:
    """CPU seconds of each phase, summed over the documents, and of ``split_document`` as a whole."""
    spent = dict.fromkeys((*PHASES, "split_document"), 0.0)
    clock = time.process_time
    for text in texts:
        t0 = clock()
        layout = get_strategy(settings.strategy)(text, settings, None)
        t1 = clock()
        meter = make_meter(text, settings.unit, settings.tokenizer, None)
        t2 = clock()
        # As split_document builds it for a document without a path (its title is the layout's).
        reserve = Reserve(
            text, layout, settings, layout.title, meter, file_named=layout.title == file_title(None)
        )
        t3 = clock()
        spans = Packer(
            text, layout.plan, meter, settings.max_size, settings.overlap, settings.min_size, reserve=reserve
        ).spans()
        t4 = clock()
        check_spans(text, spans, layout, settings.min_size)
        t5 = clock()
        whole = split_document(text, settings)
        t6 = clock()
        if [(c.start, c.end) for c in whole.chunks] != [(s.start, s.end) for s in spans]:
            raise SystemExit("the phases chunk otherwise than split_document: they no longer measure it")
        for name, took in zip(
            (*PHASES, "split_document"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5), strict=True
        ):
            spent[name] += took
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--strategy", default="recursive")
    parser.add_argument("--unit", default="tokens", choices=("tokens", "chars", "words"))
    parser.add_argument("--max-size", type=int, default=512)
    parser.add_argument("--overlap", type=int, default=64)
    parser.add_argument("--no-count", action="store_true", help="count_tokens: false")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    files = markdown_files(corpus_folder(args.corpus))
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in files]
    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
    settings = parse_settings(
        {
            "front_matter": "keep",
            "strategy": args.strategy,
            "unit": args.unit,
            "max_size": args.max_size,
            "overlap": args.overlap,
            "count_tokens": not args.no_count,
        }
    )
    runs = [measure(texts, settings) for _ in range(args.repeats)]
    median = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
    whole = median["split_document"]
    print(
        f"{args.strategy} {args.unit} {args.max_size}/{args.overlap} on {len(files)} files, {megabytes:.1f} MB; "
        f"median CPU s of {args.repeats} repeats"
    )
    print("| phase | CPU s | share of split_document |")
    print("|---|---:|---:|")
    for name in PHASES:
        print(f"| {name} | {median[name]:.3f} | {median[name] / whole:.0%} |")
    rest = whole - sum(median[name] for name in PHASES)
    print(f"| rest (chunks, embed_text, labels, counts) | {rest:.3f} | {rest / whole:.0%} |")
    print(f"| split_document | {whole:.3f} | {megabytes / whole:.1f} MB/s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
