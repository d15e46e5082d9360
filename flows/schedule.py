"""Scheduled rechunking: the chunking flow served as a Prefect deployment on the config's cron.

``chunkyard schedule CONFIG`` builds a deployment of ``scheduled_run`` with the config's
``schedule.cron`` and ``timezone`` and serves it against a real Prefect server (cron schedules do
not fire on the temporary in-process server). Each run re-reads the config file, so it is an
ordinary incremental run: unchanged documents are carried over, and a config changed under the
same version is refused rather than silently mixed into the dataset.
"""

from __future__ import annotations

import sys
from pathlib import Path

from prefect import flow
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron

from chunkyard.chunking.config import Config, load_config
from chunkyard.chunking.errors import ChunkyardError
from chunkyard.flows.console import one_line_prefect_errors


@flow(name="chunkyard-scheduled", flow_run_name="scheduled {config_path}")
def scheduled_run(config_path: str) -> dict:
    """One scheduled run: chunk the config's source into the next snapshot; returns the counts.

    The console of ``chunkyard schedule`` (which shows this process's output) gets one line per run:
    what was written, or why the run failed; the tracebacks stay in Prefect's records of the run.
    """
    from chunkyard.flows.run import chunk_corpus
    from chunkyard.flows.workers import end_with_parent

    # A `chunkyard schedule` killed with kill -9 takes the run with it (nothing is published; the
    # staging folder goes at the next run) rather than leaving it to publish and retry a dead server.
    end_with_parent()
    one_line_prefect_errors()
    try:
        config = load_config(config_path)
        result = chunk_corpus(config.text, str(config.path), config_name=f"{config.name} v{config.version}")
    except Exception as exc:
        print(f"chunkyard: scheduled run of {config_path} failed: {exc}", file=sys.stderr, flush=True)
        raise
    manifest, counts = result.manifest, result.manifest["counts"]
    if not result.published:
        print(
            f"No change since {result.snapshot}: nothing new, changed or removed; no snapshot published",
            flush=True,
        )
        return {"snapshot": str(result.snapshot), "counts": counts, "published": False}
    print(
        f"Wrote {result.snapshot} ({manifest['kind']} snapshot {manifest['snapshot']} of {manifest['name']} "
        f"v{manifest['version']}): {counts['documents']} documents ({counts['new']} new, {counts['changed']} "
        f"changed, {counts['reused']} reused, {counts['removed']} removed, {counts['skipped']} skipped), "
        f"{counts['chunks']} chunks",
        flush=True,
    )
    return {"snapshot": str(result.snapshot), "counts": counts}


def deployment_name(config: Config) -> str:
    return f"{config.name}-v{config.version}"


def build_deployment(config: Config) -> RunnerDeployment:
    """The deployment for a config; it must have a ``schedule`` section."""
    if config.model.schedule is None or config.path is None:
        raise ChunkyardError(
            f'{config.path or "config"}: no schedule: add `schedule: {{cron: "0 2 * * *", timezone: UTC}}`'
        )
    schedule = config.model.schedule
    return scheduled_run.to_deployment(
        name=deployment_name(config),
        schedules=[Cron(schedule.cron, timezone=schedule.timezone)],
        parameters={"config_path": str(Path(config.path).resolve())},
        description=f"Rechunk {config.name} v{config.version} on '{schedule.cron}' ({schedule.timezone})",
        tags=["chunkyard"],
    )


def serve(config: Config) -> None:
    """Serve the config's deployment until interrupted (blocks)."""
    from prefect import serve as prefect_serve

    # Not Prefect's banner: it links to a UI that chunkyard's server runs without, and its
    # `prefect deployment run` reaches this server only with PREFECT_API_URL (the CLI prints that line).
    prefect_serve(build_deployment(config), print_starting_message=False)
