"""``chunkyard validate`` and ``preview``: a config checked, one file's chunks shown; no flow, no server."""

from __future__ import annotations

import argparse
import json
import stat
import sys
from pathlib import Path

from chunkyard.chunking.api import split_document
from chunkyard.chunking.config import field_line
from chunkyard.chunking.documents import Skipped, read_document
from chunkyard.chunking.errors import ChunkyardError, ConfigError, ConfigIssue
from chunkyard.chunking.findings import FINDINGS
from chunkyard.chunking.words import plural
from chunkyard.flows.cli.command import EXIT_OK, EXIT_USAGE, Command, load_for_chunking
from chunkyard.flows.cli.session import Session


def _validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path)


def cmd_validate(args: argparse.Namespace, session: Session) -> int:
    from chunkyard.chunking.pipeline import RunRefused, check_run  # ≈0.2 s of imports preview does without

    config = load_for_chunking(args.config)
    try:  # what `run` would refuse before any work: the folders, and the datasets already written
        check_run(config)  # (a config changed under a version that has snapshots)
    except RunRefused as exc:
        line = field_line(config.text, exc.field) if exc.field else None
        raise ConfigError([ConfigIssue(str(args.config), line, exc.field, str(exc))]) from None
    from chunkyard.chunking.embeddings import EmbeddingError, embedder_for

    sink_issues = []
    for index, sink in enumerate(
        config.model.sinks
    ):  # what `sync` would refuse: a model folder that is not there
        try:
            embedder_for(sink.embedder, config.base_dir)
        except EmbeddingError as exc:
            sink_issues.append(
                ConfigIssue(
                    str(args.config), field_line(config.text, "sinks"), f"sinks[{index}].embedder", str(exc)
                )
            )
    if sink_issues:
        raise ConfigError(sink_issues)
    rules = len(config.rule_settings)
    print(
        f"{args.config}: ok — dataset {config.name} v{config.version}, strategy {config.chunker.strategy}, "
        f"{config.chunker.max_size} {config.chunker.unit} (overlap {config.chunker.overlap}), "
        f"{rules} rule{'s' if rules != 1 else ''}, config hash {config.hash}"
    )
    return EXIT_OK


def _preview_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path)
    parser.add_argument("file", type=Path)
    parser.add_argument("--text", action="store_true", help="print each chunk's full text")
    parser.add_argument("--json", action="store_true", help="print the chunks as JSON lines")


def cmd_preview(args: argparse.Namespace, session: Session) -> int:
    config = load_for_chunking(args.config)
    problem = not_a_file(args.file)
    if problem:
        print(f"chunkyard: error: {args.file}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    path = args.file.resolve()
    try:
        doc_id = path.relative_to(config.source_dir).as_posix()
    except ValueError:
        doc_id = path.name
        print(
            f"chunkyard: note: {args.file} is outside the source folder {config.source_dir}; previewed as "
            f"{doc_id!r}",
            file=sys.stderr,
        )
    else:
        if not config.is_included(doc_id):
            print(
                f"chunkyard: note: {doc_id} is not in the dataset (source.include/exclude leave it out); "
                "a run would not chunk it",
                file=sys.stderr,
            )
    document = read_document(path, doc_id, config.model.limits)
    if isinstance(document, Skipped):
        raise ChunkyardError(f"{args.file}: skipped: {document.reason}")
    settings = config.settings_for(doc_id)
    result = split_document(
        document.text, settings, doc_id, base_dir=config.base_dir, title=document.title or None
    )
    if args.json:
        for chunk in result.chunks:
            print(
                json.dumps(
                    {
                        "index": chunk.index,
                        "start": chunk.start,
                        "end": chunk.end,
                        "size": chunk.size,
                        "unit": settings.unit,
                        "n_tokens": chunk.n_tokens,
                        "section_path": list(chunk.section_path),
                        "findings": list(chunk.findings),
                        "text": chunk.text,
                        "embed_text": chunk.embed_text,
                    },
                    ensure_ascii=False,
                )
            )
        return EXIT_OK
    print(
        f"{doc_id}: {result.strategy}, {len(result.chunks)} chunks, max {settings.max_size} {settings.unit}, "
        f"overlap {settings.overlap}; title: {result.title or '—'}"
    )
    for start, end, reason in result.exclusions:
        print(f"  excluded [{start}:{end}] {reason}")
    for chunk in result.chunks:
        section = " > ".join(chunk.section_path) or "—"
        print(
            f"\n#{chunk.index}  [{chunk.start}:{chunk.end}]  {chunk.size} {settings.unit}  "
            f"({chunk.n_chars} chars{'' if chunk.n_tokens is None else f', {chunk.n_tokens} tokens'})  § {section}"
        )
        for code in chunk.findings:
            print(f"   ! {code}: {FINDINGS.get(code, ('',))[0]}")
        if args.text:
            for line in chunk.text.splitlines():
                print(f"   | {line}")
        else:
            lines = chunk.text.splitlines()
            print(f"   | {_clip(lines[0])}")
            if len(lines) > 2:
                print(f"   | … {plural(len(lines) - 2, 'more line')}")
            if len(lines) > 1:
                print(f"   | {_clip(lines[-1])}")
    return EXIT_OK


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be previewed as one file (missing, a folder, a FIFO, ...), or None.

    Checked before reading: opening a FIFO would wait for a writer forever (``run`` never opens one).
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return "broken symbolic link (its target does not exist)" if path.is_symlink() else "no such file"
    except OSError:
        return None  # read_document gives the reason (permission denied, symlink loop, ...)
    if stat.S_ISDIR(info.st_mode):
        return "is a folder; preview takes one file"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    return None


def _clip(line: str, width: int = 100) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


VALIDATE = Command(
    "validate", "check a config and print every problem with its line", _validate_arguments, cmd_validate
)
PREVIEW = Command(
    "preview", "print the chunks of one file with spans, sizes and findings", _preview_arguments, cmd_preview
)
