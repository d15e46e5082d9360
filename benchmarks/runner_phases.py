"""Where a run's wall time goes, per task runner: flow start, first and last batch, return.

    .venv/bin/python benchmarks/runner_phases.py CONFIG [--runs process:1,process:2] [--repeats 3]

``process+flow-writes:N`` runs the process pool with the flow process writing every batch's Parquet
(the design before workers wrote parts), for comparison.

Starts one loopback Prefect server (or uses ``PREFECT_API_URL``) and the preloaded forkserver,
then runs the chunking flow in this process (``chunkyard.flows.run.run``) for each runner in turn, interleaved,
into a temporary output, and prints, in seconds from the call: when the flow began surveying the
source (Prefect's flow start before it), when the first and the last batch result were recorded, and
when the run returned (publishing and Prefect's shutdown after the last batch), and the CPU time of
the flow's process (its threads; not the workers'). Python start-up and
imports are not in these figures; ``chunkyard run`` adds them to every runner alike.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def measure(
    config_path: Path, runner: str, workers: int, output: Path, flow_writes: bool = False
) -> dict[str, float]:
    import chunkyard.flows.run as flow_module
    from chunkyard.chunking.config import load_config

    marks: list[float] = []
    survey_started: list[float] = []
    original_survey = flow_module.survey

    def survey(context):
        survey_started.append(time.perf_counter())
        return original_survey(context)

    flow_module.survey = survey
    original_writer = flow_module.snapshot_writer
    if flow_writes:  # as before worker parts: the flow process receives every batch and writes it
        flow_module.snapshot_writer = lambda path, *a, parts=False, **k: original_writer(path, *a, **k)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        flow_module.run(
            load_config(config_path),
            output=output,
            task_runner=runner,
            workers=workers,
            kind="full",
            progress=lambda docs, *_: marks.append(time.perf_counter()) if docs else None,
        )
        returned, cpu = time.perf_counter(), time.process_time() - cpu
    finally:
        flow_module.survey = original_survey
        flow_module.snapshot_writer = original_writer
    return {
        "flow start": survey_started[0] - started,
        "first batch": marks[0] - started,
        "last batch": marks[-1] - started,
        "returned": returned - started,
        "flow CPU": cpu,
        "batches": len(marks),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--runs", default="process:1,process:2", help="runner:workers, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    runs = [(spec.split(":")[0], int(spec.split(":")[1])) for spec in args.runs.split(",")]
    # "process+flow-writes": the process runner with the flow writing every batch (the design before
    # workers wrote Parquet parts), for comparison.
    from chunkyard.flows.server import prefect_server
    from chunkyard.flows.workers import start_forkserver

    with tempfile.TemporaryDirectory() as tmp, prefect_server(Path(tmp) / "prefect"):
        start_forkserver()
        results: dict[tuple[str, int], list[dict[str, float]]] = {run: [] for run in runs}
        for repeat in range(args.repeats):
            for runner, workers in runs:
                output = Path(tmp) / f"out-{runner}-{workers}-{repeat}"
                results[(runner, workers)].append(
                    measure(
                        args.config.resolve(),
                        runner.split("+")[0],
                        workers,
                        output,
                        flow_writes=runner.endswith("+flow-writes"),
                    )
                )
    print("| runner | flow start | first batch | last batch | returned | flow process CPU s | batches |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (runner, workers), rows in results.items():
        cells = [
            f"{statistics.median(row[key] for row in rows):.2f}"
            for key in ("flow start", "first batch", "last batch", "returned", "flow CPU")
        ]
        print(f"| {runner} ×{workers} | " + " | ".join(cells) + f" | {rows[0]['batches']:.0f} |")
    return 0


if __name__ == "__main__":  # the forkserver's workers import this module: run nothing then
    raise SystemExit(main())
