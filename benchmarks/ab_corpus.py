"""CPU time to chunk a whole corpus, main's venv against this tree's, alternated in one run.

    .venv/bin/python benchmarks/ab_corpus.py --other /work/main/.venv/bin/python [--rounds 3]
        [--corpora k8s-enhancements,rust-book] [--strategies markdown,recursive] [--max-size 1000]

Each measurement is a fresh process (``--worker``) that reads every ``*.md`` of one corpus, chunks
them once to warm up, then times ``split_document`` over all of them (process CPU time, count_tokens
false). The two interpreters alternate, the order flipping each round; the table gives medians and
the ratio this tree / other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from corpora import CORPORA, markdown_files


def worker(corpus: str, strategy: str, max_size: int, repeat: int) -> None:
    from chunkyard.chunking.api import split_document
    from chunkyard.chunking.config import parse_settings

    settings = parse_settings(dict(strategy=strategy, unit="chars", max_size=max_size, count_tokens=False))
    files = markdown_files(CORPORA / corpus)
    texts = [(f.name, f.read_text(encoding="utf-8", errors="replace")) for f in files]
    for name, text in texts:
        split_document(text, settings, name)
    best = []
    for _ in range(repeat):
        t = time.process_time()
        for name, text in texts:
            split_document(text, settings, name)
        best.append(time.process_time() - t)
    print(json.dumps(min(best)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=4)
    ap.add_argument("--other", default="/work/main/.venv/bin/python")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--corpora", default="k8s-enhancements,rust-book")
    ap.add_argument("--strategies", default="markdown,recursive")
    ap.add_argument("--max-size", type=int, default=1000)
    a = ap.parse_args()
    if a.worker:
        corpus, strategy, max_size, repeat = a.worker
        worker(corpus, strategy, int(max_size), int(repeat))
        return
    pythons = {"this": sys.executable, "other": a.other}
    print(f"load: {os.getloadavg()}", flush=True)
    for corpus in a.corpora.split(","):
        for strategy in a.strategies.split(","):
            times: dict[str, list[float]] = {"this": [], "other": []}
            for r in range(a.rounds):
                order = ["other", "this"] if r % 2 == 0 else ["this", "other"]
                for who in order:
                    out = subprocess.run(
                        [
                            pythons[who],
                            __file__,
                            "--worker",
                            corpus,
                            strategy,
                            str(a.max_size),
                            str(a.repeat),
                        ],
                        capture_output=True,
                        text=True,
                    )
                    if out.returncode:
                        raise SystemExit(
                            f"{who} ({pythons[who]}) failed on {corpus} {strategy}:\n{out.stderr.strip()}"
                        )
                    times[who].append(json.loads(out.stdout))
            this, other = statistics.median(times["this"]), statistics.median(times["other"])
            ratios = [t / o for t, o in zip(times["this"], times["other"], strict=True)]
            print(
                f"{corpus:18} {strategy:10} other {other:.3f}s this {this:.3f}s  ratio {this / other:.3f}"
                f"  per-round {' '.join(f'{x:.3f}' for x in ratios)}",
                flush=True,
            )
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
