"""Both cores: ``chunkyard run --task-runner process`` with 2 workers against 1, on ≥ 50 MB of Markdown.

    .venv/bin/python benchmarks/two_workers.py [--copies 3] [--repeats 3] [--write-readme]

The corpus is every Markdown file of ``../shared/corpora`` copied ``--copies`` times into a temporary
folder (3 copies: ≈83 MB, 6,450 files). The config is markdown, 512/64 cl100k tokens. Each command
is a fresh ``chunkyard run`` process, timed from spawn to exit, with the shared loopback Prefect
server already running (``chunkyard.flows.server``; stopped at the end) so that neither side waits
for one. Runs are interleaved (1, 2, 1, 2, ...). Every output is checked against a thread-runner
run of the same corpus: the same chunk ids in the same row order, and the same part files (the
manifest's part entries: keys, rows, bytes, SHA-256).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import pyarrow.parquet as pq
from corpora import CORPORA, markdown_files
from readme_section import write_section

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- workers:begin -->", "<!-- workers:end -->"
CHUNKYARD = Path(sys.executable).with_name("chunkyard")


def build_corpus(target: Path, copies: int) -> tuple[int, float]:
    files = markdown_files(CORPORA)
    for copy in range(copies):
        for path in files:
            destination = target / f"copy{copy}" / path.relative_to(CORPORA)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    return len(files) * copies, sum(p.stat().st_size for p in files) * copies / 1e6


def idle_share(seconds: float = 2.0) -> float:
    """The machine's idle share of CPU time over ``seconds`` (``/proc/stat``)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return fields[3] + fields[4], sum(fields)

    idle, total = sample()
    time.sleep(seconds)
    idle2, total2 = sample()
    return (idle2 - idle) / max(1, total2 - total)


def wait_quiet(limit: float) -> bool:
    """Wait until the machine has been ≥ 90 % idle for 2 s, at most ``limit`` seconds: other jobs on
    a shared machine take the second core from the second worker. False if it never was."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if idle_share() >= 0.9:
            return True
    return False


def run(config: Path, output: Path, env: dict[str, str], *extra: str) -> tuple[float, Path]:
    started = time.perf_counter()
    done = subprocess.run(
        [str(CHUNKYARD), "run", str(config), "--output", str(output), *extra],
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 3):
        raise SystemExit(f"chunkyard run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed, Path(done.stdout.split()[1])


def chunk_ids(snapshot: Path) -> list[str]:
    return pq.read_table(snapshot / "chunks.parquet", columns=["chunk_id"]).column("chunk_id").to_pylist()


def part_files(snapshot: Path) -> list[dict]:
    """The manifest's part entries: each part's key, and each file's name, rows, bytes and SHA-256."""
    return json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))["parts"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-readme", action="store_true")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=0,
        help="before each run, wait up to this many s for an idle machine",
    )
    args = parser.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "CHUNKYARD_"))}
    with tempfile.TemporaryDirectory() as tmp:
        files, mb = build_corpus(Path(tmp) / "corpus", args.copies)
        config = Path(tmp) / "big.yaml"
        config.write_text(
            f"name: big\nversion: 1\nsource: {{path: {Path(tmp) / 'corpus'}, include: ['**/*.md']}}\n"
            f"output: {{path: {Path(tmp) / 'out'}}}\n"
            "chunker: {strategy: markdown, unit: tokens, max_size: 512, overlap: 64}\n",
            encoding="utf-8",
        )
        env = {**base, "CHUNKYARD_HOME": str(Path(tmp) / "home"), "CHUNKYARD_PREFECT_SERVER": "shared"}
        try:
            print(
                f"{files} files, {mb:.1f} MB; thread run (reference, warms the shared server)...",
                file=sys.stderr,
            )
            thread_seconds, snapshot = run(config, Path(tmp) / "out-thread", env)
            reference, reference_parts = chunk_ids(snapshot), part_files(snapshot)
            shutil.rmtree(Path(tmp) / "out-thread")
            times: dict[int, list[float]] = {1: [], 2: []}
            noisy = 0
            for repeat in range(args.repeats):
                for workers in (1, 2) if repeat % 2 == 0 else (2, 1):
                    output = Path(tmp) / f"out-{workers}-{repeat}"
                    if args.quiet_wait and not wait_quiet(args.quiet_wait):
                        noisy += 1
                    seconds, snapshot = run(
                        config, output, env, "--task-runner", "process", "--workers", str(workers)
                    )
                    if chunk_ids(snapshot) != reference:
                        raise SystemExit(
                            f"process ×{workers}: chunk ids or their order differ from the thread runner's"
                        )
                    if part_files(snapshot) != reference_parts:
                        raise SystemExit(f"process ×{workers}: part files differ from the thread runner's")
                    shutil.rmtree(output)
                    times[workers].append(seconds)
                    print(f"  repeat {repeat + 1}: ×{workers} {seconds:.2f} s", file=sys.stderr, flush=True)
        finally:
            subprocess.run(
                [sys.executable, "-c", "from chunkyard.flows.server import stop_shared_server as s; s()"],
                env=env,
            )
    one, two = statistics.median(times[1]), statistics.median(times[2])
    ratios = [a / b for a, b in zip(times[1], times[2], strict=True)]
    lines = [
        f"Corpus: the shared corpora's Markdown ×{args.copies} ({files:,} files, {mb:.1f} MB); markdown, "
        f"512/64 cl100k tokens. Machine: {platform.machine()}, {os.cpu_count()} cores (shared: load average "
        f"{os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}, prefect "
        f"{metadata.version('prefect')}, pyarrow {metadata.version('pyarrow')}; {args.repeats} interleaved "
        f"repeats, wall seconds of `chunkyard run` with the shared server running"
        + (
            f", each started once the machine was ≥ 90 % idle for 2 s (waiting up to {args.quiet_wait:g} s; "
            f"{noisy} of {2 * args.repeats} started without)"
            if args.quiet_wait
            else ""
        )
        + ". "
        f"Run {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M')} UTC.",
        "",
        "| run | wall s per repeat | median |",
        "|---|---|---:|",
        f"| --task-runner thread (reference) | {thread_seconds:.2f} | |",
        f"| --task-runner process --workers 1 | {', '.join(f'{t:.2f}' for t in times[1])} | {one:.2f} |",
        f"| --task-runner process --workers 2 | {', '.join(f'{t:.2f}' for t in times[2])} | {two:.2f} |",
        "",
        f"2 workers ÷ 1: **{one / two:.2f}×** by the medians; per repeat {', '.join(f'{r:.2f}' for r in ratios)} "
        "(goal ≥ 1.6×). Every output had the thread runner's chunk ids in its row order and its part "
        f"files ({len(reference_parts):,} parts: the same keys, bytes and SHA-256).",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        write_section(README, BEGIN, END, text, "Two workers against one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
