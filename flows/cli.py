"""The ``chunkyard`` command line: one entry point, one clear line on failure.

Exit codes: 0 success; 1 failure; 2 bad usage or invalid config (nothing was done);
3 the run completed but skipped some files (listed in the manifest).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIPPED = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("chunkyard: interrupted; no snapshot was published", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure is one clear line unless --debug
        from chunking.errors import ChunkyardError, ConfigError

        if getattr(args, "debug", False):
            raise
        if isinstance(exc, ConfigError):
            for issue in exc.issues:
                print(f"chunkyard: {issue}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, ChunkyardError):
            print(f"chunkyard: error: {exc}", file=sys.stderr)
            return EXIT_FAILED if not getattr(exc, "usage", False) else EXIT_USAGE
        print(f"chunkyard: unexpected error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
              file=sys.stderr)
        return EXIT_FAILED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chunkyard", description="Chunk document corpora into versioned Parquet datasets.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="chunk the config's source folder into the next snapshot")
    run.add_argument("config", type=Path)
    run.add_argument("--source", type=Path, help="source folder (default: the config's source.path)")
    run.add_argument("--output", type=Path, help="output folder (default: the config's output.path)")
    run.add_argument("--task-runner", choices=["thread"], default="thread")
    run.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    run.set_defaults(handler=cmd_run)

    validate = sub.add_parser("validate", help="check a config and print every problem with its line")
    validate.add_argument("config", type=Path)
    validate.set_defaults(handler=cmd_validate)

    preview = sub.add_parser("preview", help="print the chunks of one file with spans, sizes and findings")
    preview.add_argument("config", type=Path)
    preview.add_argument("file", type=Path)
    preview.add_argument("--text", action="store_true", help="print each chunk's full text")
    preview.add_argument("--json", action="store_true", help="print the chunks as JSON lines")
    preview.set_defaults(handler=cmd_preview)
    return parser


# ---------------------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from chunking.config import load_config

    config = load_config(args.config)
    rules = len(config.rule_settings)
    print(f"{args.config}: ok — dataset {config.name} v{config.version}, strategy {config.chunker.strategy}, "
          f"{config.chunker.max_size} {config.chunker.unit} (overlap {config.chunker.overlap}), "
          f"{rules} rule{'s' if rules != 1 else ''}, config hash {config.hash}")
    return EXIT_OK


def cmd_preview(args: argparse.Namespace) -> int:
    from chunking.api import split_document
    from chunking.documents import Skipped, read_document
    from chunking.errors import ChunkyardError
    from chunking.findings import FINDINGS

    config = _load(args.config)
    path = args.file.resolve()
    try:
        doc_id = path.relative_to(config.source_dir).as_posix()
    except ValueError:
        doc_id = path.name
    document = read_document(path, doc_id)
    if isinstance(document, Skipped):
        raise ChunkyardError(f"{args.file}: skipped: {document.reason}")
    settings = config.settings_for(doc_id)
    result = split_document(document.text, settings, doc_id, base_dir=config.base_dir,
                            title=document.title or None)
    if args.json:
        for chunk in result.chunks:
            print(json.dumps({
                "index": chunk.index, "start": chunk.start, "end": chunk.end, "size": chunk.size,
                "unit": settings.unit, "n_tokens": chunk.n_tokens, "section_path": list(chunk.section_path),
                "findings": list(chunk.findings), "text": chunk.text, "embed_text": chunk.embed_text,
            }, ensure_ascii=False))
        return EXIT_OK
    print(f"{doc_id}: {result.strategy}, {len(result.chunks)} chunks, max {settings.max_size} {settings.unit}, "
          f"overlap {settings.overlap}; title: {result.title or '—'}")
    for start, end, reason in result.exclusions:
        print(f"  excluded [{start}:{end}] {reason}")
    for chunk in result.chunks:
        section = " > ".join(chunk.section_path) or "—"
        print(f"\n#{chunk.index}  [{chunk.start}:{chunk.end}]  {chunk.size} {settings.unit}  "
              f"({chunk.n_chars} chars, {chunk.n_tokens} tokens)  § {section}")
        for code in chunk.findings:
            print(f"   ! {code}: {FINDINGS.get(code, ('',))[0]}")
        if args.text:
            for line in chunk.text.splitlines():
                print(f"   | {line}")
        else:
            lines = chunk.text.splitlines()
            print(f"   | {_clip(lines[0])}")
            if len(lines) > 2:
                print(f"   | … {len(lines) - 2} more lines")
            if len(lines) > 1:
                print(f"   | {_clip(lines[-1])}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    config = _load(args.config)
    from flows.settings import configure_prefect

    configure_prefect(Path.cwd())
    from flows import run as run_module

    started = time.perf_counter()
    with _Progress() as progress:
        run_module.progress_hook = progress.update
        try:
            result = run_module.run(config, args.source, args.output, task_runner=args.task_runner)
        finally:
            run_module.progress_hook = None
    elapsed = time.perf_counter() - started
    manifest = result.manifest
    if args.json:
        print(json.dumps({k: manifest[k] for k in ("name", "version", "snapshot", "kind", "counts",
                                                   "findings", "size_statistics", "skipped")}
                         | {"path": str(result.snapshot), "seconds": round(elapsed, 3)}, ensure_ascii=False))
    else:
        _print_summary(result.snapshot, manifest, elapsed)
    return EXIT_SKIPPED if manifest["counts"]["skipped"] else EXIT_OK


def _load(path: Path):
    from chunking.config import load_config

    return load_config(path)


def _print_summary(snapshot: Path | None, manifest: dict[str, Any], elapsed: float) -> None:
    counts = manifest["counts"]
    mb = counts["bytes"] / 1e6
    print(f"Wrote {snapshot} ({manifest['kind']} snapshot {manifest['snapshot']} of "
          f"{manifest['name']} v{manifest['version']}) in {elapsed:.1f} s")
    print(f"  documents: {counts['documents']} ({counts['new']} new, {counts['changed']} changed, "
          f"{counts['reused']} reused, {counts['removed']} removed), {mb:.1f} MB")
    print(f"  chunks:    {counts['chunks']}")
    if counts["skipped"]:
        print(f"  skipped:   {counts['skipped']} (reasons in manifest.json)")
        for item in manifest["skipped"][:10]:
            print(f"    {item['doc_id']}: {item['reason']}")
        if counts["skipped"] > 10:
            print(f"    … {counts['skipped'] - 10} more")
    rows = manifest["size_statistics"]
    if rows:
        codes = sorted({code for row in rows for code in row["findings"]})
        header = f"  {'strategy':<10} {'docs':>5} {'chunks':>7} {'p5':>6} {'p50':>6} {'p95':>6}"
        header += "".join(f" {_short(code):>9}" for code in codes)
        print("\n" + header)
        for row in rows:
            line = (f"  {row['strategy']:<10} {row['documents']:>5} {row['chunks']:>7} {row['size_p5']:>6} "
                    f"{row['size_p50']:>6} {row['size_p95']:>6}")
            for code in codes:
                share = row["findings"].get(code, {}).get("share", 0.0)
                line += f" {share * 100:>8.1f}%"
            print(line)
        if codes:
            print("  (finding columns: share of chunks; see `chunkyard preview` for details)")


def _short(code: str) -> str:
    return {"mid_sentence_start": "mid_start", "mid_sentence_end": "mid_end", "split_procedure": "split_proc",
            "heading_at_end": "head_end"}.get(code, code)[:9]


def _clip(line: str, width: int = 100) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


class _Progress:
    """A progress bar on stderr while a run is going (only on a terminal)."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty() and os.environ.get("CI") != "true"
        self._progress = None
        self._task = None
        self._started = time.perf_counter()

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("chunking"), BarColumn(), MofNCompleteColumn(), TextColumn("docs"),
                TextColumn("{task.fields[mb]:.1f} MB · {task.fields[rate]:.1f} MB/s"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("chunking", total=None, mb=0.0, rate=0.0)
        return self

    def update(self, docs: int, n_bytes: int, finished_discovering: bool, found: int) -> None:
        if self._progress is None:
            return
        elapsed = max(1e-6, time.perf_counter() - self._started)
        self._progress.update(self._task, completed=docs, total=found if found else None,
                              mb=n_bytes / 1e6, rate=n_bytes / 1e6 / elapsed)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


if __name__ == "__main__":
    sys.exit(main())
