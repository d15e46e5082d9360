"""``chunkyard eval``: score configs by retrieval quality on a question set."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from chunkyard.chunking.config import Config
from chunkyard.chunking.errors import ChunkyardError, UsageError
from chunkyard.chunking.words import plural
from chunkyard.flows.cli.command import EXIT_OK, EXIT_USAGE, Command, load_for_chunking
from chunkyard.flows.cli.session import Session


def _k_values(text: str) -> tuple[int, ...]:
    from chunkyard.chunking.evaluation.runner import parse_ks

    try:
        return parse_ks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", type=Path, nargs="+", metavar="CONFIG")
    parser.add_argument("--questions", type=Path, required=True, help="JSONL question set with references")
    parser.add_argument(
        "--k",
        type=_k_values,
        default=(5,),
        metavar="K[,K...]",
        help="how many chunks to retrieve; several at once, e.g. 1,5,10 (default 5)",
    )
    parser.add_argument(
        "--retriever",
        choices=["bm25", "dense", "both"],
        default="both",
        help="BM25 (bm25s), dense (WordLlama, offline) or both (default)",
    )
    parser.add_argument("--out", type=Path, help="results folder (default: ./evaluations/<UTC time>)")
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="run the chunking flow even when a snapshot with the config's hash exists",
    )


def eval_labels(paths: list[Path]) -> list[str]:
    """Short, distinct names for the configs: file stems, with the folder when stems repeat."""
    stems = [path.stem for path in paths]
    labels = [
        stem if stems.count(stem) == 1 else f"{path.resolve().parent.name}/{stem}"
        for stem, path in zip(stems, paths, strict=True)
    ]
    return [
        label if labels.count(label) == 1 else str(path) for label, path in zip(labels, paths, strict=True)
    ]


def cmd_eval(args: argparse.Namespace, session: Session) -> int:
    """Score configs by retrieval quality: snapshot per config (reused or chunked), retrieve, compare."""
    # The evaluation package is imported here: `chunkyard eval` is the only command that needs it.
    from chunkyard.chunking.evaluation import (
        QuestionSetError,
        evaluate_snapshot,
        load_questions,
        record_evaluation,
        reusable_snapshot,
        write_results,
    )
    from chunkyard.chunking.evaluation.questions import locate_questions, source_text_reader
    from chunkyard.chunking.evaluation.report import format_table

    unique: dict[Path, Path] = {}
    for path in args.configs:  # a config listed twice (cfg.yaml ./cfg.yaml, a glob and a name) counts once
        if path.resolve() in unique:
            print(f"{path}: listed twice; evaluated once", file=sys.stderr)
        unique.setdefault(path.resolve(), path)
    args.configs = list(unique.values())
    configs = [load_for_chunking(path) for path in args.configs]
    labels = eval_labels(list(args.configs))
    retrievers = ("bm25", "dense") if args.retriever == "both" else (args.retriever,)
    out_dir = args.out or Path("evaluations") / time.strftime("%Y%m%d-%H%M%S", time.gmtime())

    def note(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    _check_eval_configs(list(args.configs), configs, refresh=args.refresh)
    _check_out_folder(out_dir)
    try:
        questions = load_questions(args.questions)
        snapshots = []
        for path, config in zip(args.configs, configs, strict=True):
            snapshot = None if args.refresh else reusable_snapshot(config)
            if snapshot is None:  # check the references before spending time on chunking
                locate_questions(
                    questions,
                    source_text_reader(config.source_dir, config.is_included),
                    f"the source of {path} (include: {', '.join(config.model.source.include)})",
                )
            snapshots.append(snapshot)
        note(
            f"{args.questions}: {plural(len(questions.questions), 'question')}; "
            f"retrievers: {', '.join(retrievers)}; k = {', '.join(map(str, args.k))}"
        )
        evaluations = []
        for index, (config, label, snapshot) in enumerate(
            zip(configs, labels, snapshots, strict=True), start=1
        ):
            prefix = f"[{index}/{len(configs)}] {label}"
            if snapshot is None:
                note(
                    f"{prefix}: chunking {config.source_dir} into {config.name} v{config.version} "
                    f"(config hash {config.hash})"
                )
                started = time.perf_counter()
                snapshot = _eval_chunk(config, session)
                note(f"{prefix}: wrote {snapshot} in {time.perf_counter() - started:.1f} s")
            else:
                note(f"{prefix}: reusing {snapshot} (same config hash {config.hash})")
            evaluation = evaluate_snapshot(
                snapshot,
                questions,
                ks=args.k,
                retrievers=retrievers,
                label=label,
                log=lambda message, prefix=prefix: note(f"{prefix}: {message}"),
            )
            evaluations.append(evaluation)
    except QuestionSetError as exc:
        for issue in exc.issues:
            print(f"chunkyard: {issue}", file=sys.stderr)
        return EXIT_USAGE

    print(format_table(evaluations))
    paths = write_results(evaluations, questions, out_dir)
    recorded = [record_evaluation(e, questions, compared_with=labels, out_dir=out_dir) for e in evaluations]
    print(f"\nResults in {out_dir}: " + ", ".join(path.name for path in paths.values()))
    for evaluation, record in zip(evaluations, recorded, strict=True):
        if record is None:
            note(f"  note: could not record the evaluation beside {evaluation.snapshot_path} (not writable)")
    print(
        "Metrics are character-level (Chroma's method): recall = share of reference characters retrieved; "
        "precision = share of retrieved characters that are reference; IoU = overlap ÷ union; "
        "hit rate = share of questions with a reference in the top k; MRR = mean 1/rank of the first hit."
    )
    return EXIT_OK


def _check_eval_configs(paths: list[Path], configs: list[Config], *, refresh: bool) -> None:
    """Refuse, before anything is evaluated or chunked, configs whose chunking would be refused: two
    that write one dataset version with different settings, or one changed under an existing version."""
    from chunkyard.chunking.evaluation import reusable_snapshot
    from chunkyard.chunking.pipeline import prepare_run

    writers: dict[tuple[str, str, int], tuple[Path, str]] = {}
    for path, config in zip(paths, configs, strict=True):
        key = (str(config.output_location), config.name, config.version)
        other = writers.setdefault(key, (path, config.hash))
        if other[1] != config.hash:
            raise UsageError(
                f"{other[0]} and {path} both write {config.name} v{config.version} in "
                f"{config.output_location} with different chunking settings: give one another name "
                "or version"
            )
    for config in configs:
        if refresh or reusable_snapshot(config) is None:
            prepare_run(
                config
            )  # raises RunRefused: a missing folder, a changed config under its version, ...


def _check_out_folder(out_dir: Path) -> None:
    """Refuse an --out that cannot become a results folder before anything is evaluated."""
    folder = out_dir
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent  # the nearest existing folder: where the results folder would be made
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            f"--out {out_dir}: {folder} is a file; --out must name a folder (created if missing)"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out_dir}: {folder} is not writable")


def _eval_chunk(config: Config, session: Session) -> Any:
    """Run the chunking flow for one config (as ``chunkyard run`` does) and return its snapshot."""
    session.server.ensure()
    from chunkyard.flows import run as run_module  # Prefect: only when a config must be chunked

    with session.progress.bar() as progress:
        result = run_module.run(config, progress=progress.update)
    if result.snapshot is None:
        raise ChunkyardError(f"chunking {config.name} v{config.version} published no snapshot")
    return result.snapshot


EVAL = Command("eval", "score configs by retrieval quality on a question set", _arguments, cmd_eval)
