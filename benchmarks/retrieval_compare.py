"""Retrieval quality side by side: chunkyard and the peers chunk the same documents at the same budget,
the same retrievers search each splitter's chunks for the same questions, and the same
character-level metrics score what they return.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/retrieval_compare.py [--set rust-book|hugo-docs|k8s-enhancements]
        [--corpus DIR] [--include 'src/*.md'] [--questions eval/rust-book-questions.jsonl]
        [--distractors N --seed S] [--peer-front-matter keep|strip] [--max-size 1000] [--k 1,5,10]
        [--retriever bm25|dense|both] [--only NAME,NAME] [--dump FILE.json] [--write-readme]
    .venv/bin/python benchmarks/retrieval_compare.py --summary FILE.json [FILE.json ...] [--k 5]

``--set NAME`` picks a shared corpus with its include globs and its held-out questions (``SETS``
below; ``eval/README.md`` says how each set was made); ``--corpus``, ``--include`` and ``--questions``
override its parts. ``--distractors N`` keeps only the documents the questions cite plus a seeded
random sample of N other documents (for a corpus too large to run whole; the table says so).

Method. Every splitter gets each document's text as ``chunkyard run`` extracts it
(``chunkyard.chunking.documents.read_document``), with ``max_size`` characters and no overlap. The questions'
reference passages are located in those texts (``chunkyard.chunking.evaluation.locate_questions``). Each
splitter's chunks are indexed by BM25 (bm25s) and by dense retrieval (WordLlama embeddings that ship
in the package, cosine), exactly as ``chunkyard eval`` indexes a snapshot; the top k chunks of each
question are scored by ``chunkyard.chunking.evaluation.metrics.score_retrieval`` (recall, precision, IoU over
characters; hit rate; MRR). chunkyard is indexed twice: by ``embed_text`` (title, heading path and a
split group's lead-in ahead of the text: what a run sends to the embedder) and by the chunk text alone,
so the effect of its boundaries and of its context can be told apart. Peers index their chunk text.
chunkyard's default budget bounds ``embed_text`` (prefix + text) by ``max_size``, as the peers' bound
what they embed; the row ``chunkyard markdown, budget: text`` bounds the text alone, as the peers'
budgets do (its embed_text is longer).

Front matter. Every splitter is given the same document text, front matter included (what a user's
pipeline hands a peer). chunkyard's Markdown scanner excludes YAML front matter from its chunks (an
exclusion of the snapshot) and uses its ``title`` in ``embed_text``; the peers chunk the front matter
like any text. ``--peer-front-matter strip`` gives the peers the text after the front matter instead
(offsets shifted back, so the spans still index the same document), to show what that costs or gains
them. The reference passages never lie in front matter.

The question sets are small (57 to 80 questions a corpus), so each row also gives the paired
difference to chunkyard markdown (embed_text) with a 95% bootstrap interval over questions: an
interval that contains 0 is no evidence either way. Peers are optional (the ``bench`` extra); a
missing one is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import parse_settings
from chunkyard.chunking.documents import Skipped, discover, read_document
from chunkyard.chunking.errors import ChunkyardError
from chunkyard.chunking.evaluation.metrics import QuestionScore, score_retrieval, summarize
from chunkyard.chunking.evaluation.questions import LocatedQuestion, Span, load_questions, locate_questions
from chunkyard.chunking.evaluation.retrievers import BM25Retriever, DenseRetriever, embed
from chunkyard.chunking.evaluation.runner import parse_ks
from chunkyard.chunking.markdown import front_matter_span

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpora import CORPORA
from speed import chonkie_splitter, langchain, semchunk_splitter, text_splitter, versions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- retrieval:begin -->", "<!-- retrieval:end -->"
# name -> (corpus folder, include globs, question set): the shared corpora with a held-out question set.
SETS = {
    "rust-book": (CORPORA / "rust-book", ["src/*.md"], ROOT / "eval" / "rust-book-questions.jsonl"),
    "hugo-docs": (CORPORA / "hugo-docs", ["**/*.md"], ROOT / "eval" / "hugo-docs-questions.jsonl"),
    "k8s-enhancements": (
        CORPORA / "k8s-enhancements",
        ["**/*.md"],
        ROOT / "eval" / "k8s-enhancements-questions.jsonl",
    ),
}
DEFAULT_SET = "rust-book"
REFERENCE = "chunkyard markdown"
BOOTSTRAP = 5000


@dataclass
class Indexed:
    """One splitter's chunks over the corpus: spans for scoring, texts for the retrievers."""

    name: str
    spans: list[Span]
    texts: list[str]
    note: str = ""
    scores: dict[tuple[str, int], list[QuestionScore]] = field(default_factory=dict)


# A splitter takes (doc_id, text, title) and returns (start, end, text to index) per chunk.
Splitter = Callable[[str, str, str], list[tuple[int, int, str]]]


def chunkyard_splitter(
    strategy: str, max_size: int, *, embed_text: bool, budget: str = "embed_text"
) -> Splitter:
    settings = parse_settings(
        {
            "strategy": strategy,
            "unit": "chars",
            "max_size": max_size,
            "overlap": 0,
            "context": {"title": True, "headings": True},
            "budget": budget,
        }
    )

    def split(doc_id: str, text: str, title: str) -> list[tuple[int, int, str]]:
        chunks = split_document(text, settings, doc_id, title=title or None).chunks
        return [(c.start, c.end, c.embed_text if embed_text else c.text) for c in chunks]

    return split


def peer(
    make: Callable[[], Callable[[str], list[tuple[int, int, str]]] | None], strip_front_matter: bool = False
) -> Splitter | None:
    """A speed.py peer (text in, (start, end, text) out) as a Splitter; None when not installed.

    With ``strip_front_matter`` the peer is given the text after a YAML front matter, and its offsets
    are shifted back to the document's."""
    split = make()
    if split is None:
        return None
    if not strip_front_matter:
        return lambda doc_id, text, title: split(text)

    def stripped(doc_id: str, text: str, title: str) -> list[tuple[int, int, str]]:
        found = front_matter_span(text)
        offset = found[1] if found else 0
        return [
            (start + offset if start >= 0 else start, end + offset if start >= 0 else end, chunk)
            for start, end, chunk in split(text[offset:])
        ]

    return stripped


def splitters(max_size: int, strip_front_matter: bool = False) -> list[tuple[str, Splitter | None, str]]:
    def p(make: Callable[[], Callable[[str], list[tuple[int, int, str]]] | None]) -> Splitter | None:
        return peer(make, strip_front_matter)

    return [
        (REFERENCE, chunkyard_splitter("markdown", max_size, embed_text=True), "embed_text"),
        (
            "chunkyard markdown, text only",
            chunkyard_splitter("markdown", max_size, embed_text=False),
            "chunk text",
        ),
        (
            "chunkyard markdown, budget: text",
            chunkyard_splitter("markdown", max_size, embed_text=True, budget="text"),
            "embed_text",
        ),
        ("chunkyard recursive", chunkyard_splitter("recursive", max_size, embed_text=True), "embed_text"),
        (
            "chunkyard recursive, text only",
            chunkyard_splitter("recursive", max_size, embed_text=False),
            "chunk text",
        ),
        ("semantic-text-splitter MarkdownSplitter", p(lambda: text_splitter("markdown", max_size, 0)), ""),
        ("semantic-text-splitter TextSplitter", p(lambda: text_splitter("text", max_size, 0)), ""),
        ("LangChain MarkdownTextSplitter", p(lambda: langchain("markdown", max_size, 0)), ""),
        ("LangChain RecursiveCharacterTextSplitter", p(lambda: langchain("text", max_size, 0)), ""),
        ("semchunk", p(lambda: semchunk_splitter(max_size, 0, len)), ""),
        ("chonkie RecursiveChunker", p(lambda: chonkie_splitter(max_size, "character")), ""),
    ]


def read_corpus(corpus: Path, include: list[str]) -> dict[str, tuple[str, str]]:
    """doc_id -> (text, title), as a run reads and extracts the files."""
    documents = {}
    for item in discover(corpus, include, []):
        if isinstance(item, Skipped):
            continue
        document = read_document(item.path, item.doc_id)
        if not isinstance(document, Skipped):
            documents[document.doc_id] = (document.text, document.title)
    return documents


def index(name: str, split: Splitter, documents: dict[str, tuple[str, str]], note: str) -> Indexed:
    spans, texts = [], []
    for doc_id, (text, title) in documents.items():
        for start, end, indexed in split(doc_id, text, title):
            if start < 0 or not text[start:end].strip():
                continue  # not located (cannot be scored), or white space only
            spans.append(Span(doc_id, start, end))
            texts.append(indexed)
    return Indexed(name, spans, texts, note)


def evaluate(
    entry: Indexed, questions: list[LocatedQuestion], retrievers: list[str], ks: tuple[int, ...]
) -> None:
    queries = [q.question for q in questions]
    for name in retrievers:
        retriever = BM25Retriever(entry.texts) if name == "bm25" else DenseRetriever(embed(entry.texts))
        rankings = retriever.search(queries, ks[-1])
        for k in ks:
            entry.scores[name, k] = [
                score_retrieval(q.spans, [entry.spans[i] for i in ranking[:k]])
                for q, ranking in zip(questions, rankings, strict=True)
            ]


def paired_interval(ours: list[float], theirs: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Mean of theirs − ours over questions, with a 95% bootstrap interval."""
    diff = np.asarray(theirs, dtype=np.float64) - np.asarray(ours, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(BOOTSTRAP, diff.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


def table(entries: list[Indexed], retriever: str, k: int) -> list[str]:
    reference = next(e for e in entries if e.name == REFERENCE)
    lines = [
        f"#### {retriever}, top {k}",
        "",
        "| splitter | indexed | chunks | mean chars | recall | precision | IoU | hit rate | MRR "
        "| Δ recall vs chunkyard markdown (95% CI) | Δ IoU (95% CI) | Δ MRR (95% CI) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for entry in entries:
        scores = entry.scores[retriever, k]
        summary = summarize(scores)
        mean_chars = np.mean([s.end - s.start for s in entry.spans]) if entry.spans else 0.0
        cells = []
        for metric in ("recall", "iou", "reciprocal_rank"):
            if entry is reference:
                cells.append("—")
                continue
            mean, low, high = paired_interval(
                [getattr(s, metric) for s in reference.scores[retriever, k]],
                [getattr(s, metric) for s in scores],
            )
            cells.append(f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]")
        lines.append(
            f"| {entry.name} | {entry.note or 'chunk text'} | {len(entry.spans):,} | {mean_chars:.0f} "
            f"| {summary['recall_mean']:.3f} | {summary['precision_mean']:.3f} | {summary['iou_mean']:.3f} "
            f"| {summary['hit_rate']:.3f} | {summary['mrr']:.3f} | {' | '.join(cells)} |"
        )
    return [*lines, ""]


def keep_distractors(
    documents: dict[str, tuple[str, str]], cited: set[str], n: int, seed: int
) -> dict[str, tuple[str, str]]:
    """The cited documents plus ``n`` others drawn by ``random.Random(seed)`` from the sorted doc ids."""
    others = sorted(doc_id for doc_id in documents if doc_id not in cited)
    chosen = cited | set(random.Random(seed).sample(others, min(n, len(others))))
    return {doc_id: documents[doc_id] for doc_id in sorted(chosen) if doc_id in documents}


METRICS = (("recall", "recall"), ("iou", "IoU"))


def summary_rows(dumps: list[dict], k: int) -> list[str]:
    """One row per corpus × budget × retriever × metric: chunkyard markdown, the best peer, the paired
    Δ (best peer − chunkyard markdown) with its 95% interval, and whether chunkyard ≥ every peer."""
    lines = [
        f"| corpus | budget | retriever | metric (top {k}) | chunkyard markdown | best peer | Δ best peer − "
        "chunkyard (95% CI) | chunkyard ≥ every peer |",
        "|---|---:|---|---|---:|---|---|---|",
    ]
    for dump in dumps:
        for retriever in dump["retrievers"]:
            key = f"{retriever}@{k}"
            entries = dump["entries"]
            ours = next(e for e in entries if e["name"] == REFERENCE)["scores"][key]
            peers = [e for e in entries if not e["name"].startswith("chunkyard")]
            for metric, label in METRICS:
                mine = float(np.mean(ours[metric]))
                if not peers:
                    lines.append(
                        f"| {dump['set']} | {dump['max_size']} | {retriever} | {label} | {mine:.3f} | (no peer installed) | | |"
                    )
                    continue
                best = max(peers, key=lambda e: float(np.mean(e["scores"][key][metric])))
                theirs = best["scores"][key][metric]
                mean, low, high = paired_interval(ours[metric], theirs)
                ahead = sum(float(np.mean(e["scores"][key][metric])) > mine for e in peers)
                verdict = "met" if ahead == 0 else f"**not met** ({ahead} of {len(peers)} peers ahead"
                if ahead:
                    verdict += ", interval excludes 0)" if low > 0 else ", interval contains 0)"
                lines.append(
                    f"| {dump['set']} | {dump['max_size']} | {retriever} | {label} | {mine:.3f} "
                    f"| {best['name']} {float(np.mean(theirs)):.3f} | {mean:+.3f} [{low:+.3f}, {high:+.3f}] "
                    f"| {verdict} |"
                )
    return lines


def pooled_rows(dumps: list[dict], k: int) -> list[str]:
    """Per budget × retriever × metric, every question of every corpus in one paired sample: the mean
    over the questions of (peer − chunkyard markdown) for the peer closest to it, with its 95% interval.
    The corpora weigh by their number of questions."""
    lines = [
        f"| budget | retriever | metric (top {k}) | corpora (questions) | chunkyard markdown | closest peer "
        "| Δ peer − chunkyard (95% CI) |",
        "|---:|---|---|---|---:|---|---|",
    ]
    for size in sorted({d["max_size"] for d in dumps}):
        group = [d for d in dumps if d["max_size"] == size]
        for retriever in group[0]["retrievers"]:
            key = f"{retriever}@{k}"
            names = [e["name"] for e in group[0]["entries"] if not e["name"].startswith("chunkyard")]
            names = [n for n in names if all(any(e["name"] == n for e in d["entries"]) for d in group)]
            for metric, label in METRICS:
                ours: list[float] = []
                theirs: dict[str, list[float]] = {n: [] for n in names}
                for dump in group:
                    by_name = {e["name"]: e["scores"][key][metric] for e in dump["entries"]}
                    ours += by_name[REFERENCE]
                    for n in names:
                        theirs[n] += by_name[n]
                if not names:
                    continue
                best = max(names, key=lambda n: float(np.mean(theirs[n])))
                mean, low, high = paired_interval(ours, theirs[best])
                corpora = ", ".join(
                    f"{d['set']} ({len(d['entries'][0]['scores'][key][metric])})" for d in group
                )
                lines.append(
                    f"| {size} | {retriever} | {label} | {corpora} | {float(np.mean(ours)):.3f} "
                    f"| {best} {float(np.mean(theirs[best])):.3f} | {mean:+.3f} [{low:+.3f}, {high:+.3f}] |"
                )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set", choices=sorted(SETS), default=DEFAULT_SET, help="corpus, include and questions"
    )
    parser.add_argument("--corpus", type=Path, help="corpus folder (default: the set's)")
    parser.add_argument("--include", action="append", help="glob over doc ids (default: the set's)")
    parser.add_argument("--questions", type=Path, help="question set (default: the set's)")
    parser.add_argument(
        "--distractors",
        type=int,
        default=None,
        help="keep the cited documents and this many others, a seeded random sample (default: all)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the distractor sample")
    parser.add_argument(
        "--peer-front-matter",
        choices=("keep", "strip"),
        default="keep",
        help="give the peers the whole text (keep) or the text after the front matter (strip)",
    )
    parser.add_argument("--max-size", type=int, default=1000)
    parser.add_argument("--k", default="1,5,10")
    parser.add_argument("--retriever", choices=("bm25", "dense", "both"), default="both")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated names: run only the splitters containing one (and chunkyard markdown)",
    )
    parser.add_argument("--dump", type=Path, help="write every per-question score here (JSON)")
    parser.add_argument(
        "--summary", type=Path, nargs="+", help="print the summary table of these --dump files and exit"
    )
    parser.add_argument("--write-readme", action="store_true", help=f"rewrite the section of {README}")
    args = parser.parse_args(argv)
    if args.summary:
        dumps = [json.loads(path.read_text(encoding="utf-8")) for path in args.summary]
        k = parse_ks(args.k)[0]
        print("\n".join([*summary_rows(dumps, k), "", *pooled_rows(dumps, k)]))
        return 0
    set_corpus, set_include, set_questions = SETS[args.set]
    corpus = args.corpus or set_corpus
    include = args.include or set_include
    questions_path = args.questions or set_questions
    if not corpus.is_dir():
        print(f"corpus folder not found: {corpus}", file=sys.stderr)
        return 2
    ks = parse_ks(args.k)
    retrievers = ["bm25", "dense"] if args.retriever == "both" else [args.retriever]
    documents = read_corpus(corpus, include)
    total_documents = len(documents)
    try:
        question_set = load_questions(questions_path)
        if args.distractors is not None:
            cited = {ref.doc_id for q in question_set.questions for ref in q.references}
            documents = keep_distractors(documents, cited, args.distractors, args.seed)
        questions = locate_questions(
            question_set,
            lambda doc_id: documents.get(doc_id, (None,))[0],
            f"{corpus} ({', '.join(include)})",
        )
    except ChunkyardError as exc:
        print(f"retrieval_compare: {exc}", file=sys.stderr)
        return 2

    entries = []
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    for name, split, note in splitters(args.max_size, args.peer_front_matter == "strip"):
        if wanted and name != REFERENCE and not any(w in name for w in wanted):
            continue
        if split is None:
            print(f"  ({name}: not installed, skipped)", file=sys.stderr)
            continue
        entry = index(name, split, documents, note)
        evaluate(entry, questions, retrievers, ks)
        entries.append(entry)
        print(f"  {name}: {len(entry.spans):,} chunks", file=sys.stderr)

    size = sum(len(text) for text, _ in documents.values())
    sampled = (
        f" of {total_documents}: the {len({s.doc_id for q in questions for s in q.spans})} cited and "
        f"{args.distractors} distractors, seed {args.seed}"
        if args.distractors is not None
        else ""
    )
    out = [
        f"Corpus: {corpus} ({', '.join(include)}: {len(documents)} documents{sampled}, {size / 1e6:.1f} M "
        f"characters); questions: {questions_path.name} ({len(questions)}); {args.max_size} characters, no "
        f"overlap; peers' front matter: {args.peer_front_matter}. Versions: {versions()}.",
        "",
    ]
    for retriever in retrievers:
        for k in ks:
            out += table(entries, retriever, k)
    text = "\n".join(out).rstrip() + "\n"
    print(text)
    if args.dump:
        metrics = ("recall", "precision", "iou", "reciprocal_rank")
        args.dump.write_text(
            json.dumps(
                {
                    "set": args.set if args.corpus is None else corpus.name,
                    "max_size": args.max_size,
                    "retrievers": retrievers,
                    "header": out[0],
                    "entries": [
                        {
                            "name": e.name,
                            "chunks": len(e.spans),
                            "scores": {
                                f"{r}@{k}": {m: [getattr(s, m) for s in e.scores[r, k]] for m in metrics}
                                for r in retrievers
                                for k in ks
                            },
                        }
                        for e in entries
                    ],
                }
            ),
            encoding="utf-8",
        )
    if args.write_readme:
        current = README.read_text(encoding="utf-8")
        head, found, rest = current.partition(BEGIN)
        if not found:
            raise SystemExit(f"{README} has no {BEGIN} marker")
        _, _, tail = rest.partition(END)
        README.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
