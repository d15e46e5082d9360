"""The first second of a run: a warm ``chunkyard run`` of the bundled sample against Prefect's own
hello-world flow, side by side, interleaved.

    .venv/bin/python benchmarks/startup.py [--repeats 5] [--write-readme]

Both sides are fresh processes, timed from spawn to exit (wall clock):

- **Prefect hello world**: a one-task ``@flow`` (``hello_task`` returning a string) run with
  Prefect's defaults (no ``PREFECT_API_URL``: Prefect starts its temporary server) and a warm
  Prefect home (one run before the timed ones, so its database exists). Analytics are off on
  both sides (this machine is offline), and the temporary server's startup timeout is raised (the
  first start creates the database, which under load took longer than the default 20 s).
- **chunkyard run**: ``chunkyard run config/default.yaml`` into a temporary output, with the shared
  loopback server already running (``chunkyard.flows.server.shared_server``, started by a first
  untimed run) and its per-user home in a temporary ``CHUNKYARD_HOME``.

Parts of a chunkyard run, measured alone the same way: ``python -c pass``; importing
``chunkyard.flows.run`` (Prefect and the flow); chunking the sample in process (no Prefect).
The shared server started here is stopped at the end (``stop_shared_server``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from readme_section import write_section

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- startup:begin -->", "<!-- startup:end -->"
CHUNKYARD = Path(sys.executable).with_name("chunkyard")

HELLO = """
from prefect import flow, task

@task
def hello_task():
    return "hello"

@flow
def hello_flow():
    return hello_task()

assert hello_flow() == "hello"
"""

CHUNK_SAMPLE = """
import time
started = time.process_time()
from chunkyard import load_config
from chunkyard.chunking.pipeline import chunk_files, discover_files, make_batches, prepare_run
config = load_config({config!r})
context = prepare_run(config)
for files, _ in make_batches(discover_files(context)):
    chunk_files(config, files, {{}})
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(command[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args(argv)
    quiet = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "CHUNKYARD_"))}
    with tempfile.TemporaryDirectory() as tmp:
        # The startup timeout only lets the first start (which creates the database) finish under load.
        hello_env = {
            **base,
            **quiet,
            "PREFECT_HOME": str(Path(tmp) / "hello-home"),
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        }
        chunkyard_env = {
            **base,
            "CHUNKYARD_HOME": str(Path(tmp) / "chunkyard-home"),
            "CHUNKYARD_PREFECT_SERVER": "shared",
        }
        config = str(ROOT / "config" / "default.yaml")
        out = Path(tmp) / "out"
        runs = {
            "Prefect hello world (one task, Prefect's defaults, warm home)": lambda: timed(
                [sys.executable, "-c", HELLO], hello_env
            ),
            "chunkyard run config/default.yaml (shared server running)": lambda: timed(
                [str(CHUNKYARD), "run", config, "--output", str(out)], chunkyard_env
            ),
        }
        parts = {
            "python -c pass": lambda: timed([sys.executable, "-c", "pass"], base),
            "python -c 'import chunkyard.flows.run' (Prefect + the flow)": lambda: timed(
                [sys.executable, "-c", "import chunkyard.flows.run"], chunkyard_env
            ),
            "chunk the sample in process, no Prefect (incl. python start)": lambda: timed(
                [sys.executable, "-c", CHUNK_SAMPLE.format(config=config)], base
            ),
        }
        try:
            print("warming up (Prefect's database, the shared server)...", file=sys.stderr, flush=True)
            for run in runs.values():
                run()
            times: dict[str, list[float]] = {name: [] for name in [*runs, *parts]}
            for repeat in range(args.repeats):
                order = list(runs.items()) + list(parts.items())
                order = order[repeat % len(order) :] + order[: repeat % len(order)]
                for name, run in order:
                    times[name].append(run())
                print(f"  repeat {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
        finally:
            stop = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from chunkyard.flows.server import stop_shared_server as s; "
                    "raise SystemExit(0 if s() else 1)",
                ],
                env=chunkyard_env,
            )
            if stop.returncode:
                print("warning: the shared server did not stop", file=sys.stderr)
    hello = statistics.median(times[next(iter(runs))])
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end, Python {platform.python_version()}, prefect "
        f"{metadata.version('prefect')}; {args.repeats} interleaved repeats, median wall seconds. "
        f"Run {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M')} UTC.",
        "",
        "| what | wall s (median) | min | max | ÷ Prefect hello world |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in times.items():
        lines.append(
            f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | "
            f"{statistics.median(values) / hello:.2f} |"
        )
    ratios = [c / h for h, c in zip(times[next(iter(runs))], times[list(runs)[1]], strict=True)]
    lines += [
        "",
        f"chunkyard run ÷ hello world, per repeat: {', '.join(f'{r:.2f}' for r in ratios)} (goal ≤ 0.30).",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        write_section(README, BEGIN, END, text, "Start-up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
