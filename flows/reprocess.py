"""The reprocess flow: open flags → constraints → the flagged documents rechunked → the next snapshot.

Thin orchestration over ``chunkyard.chunking.reprocess.reprocess_snapshot`` (the method is in that module's
docstring). The rechunking runs as a Prefect task that receives the config as text and the
constraints as parameters, like the chunking flow's batches; every other document is copied from
the parent snapshot row for row.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, task

from chunkyard.chunking.config import Config
from chunkyard.chunking.constraints import Constraint
from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.pipeline import BatchResult, rechunk_stored
from chunkyard.chunking.reprocess import reprocess_snapshot
from chunkyard.flows.run import RunResult, config_from_text


@task(name="rechunk flagged documents", retries=2, retry_delay_seconds=1)
def rechunk_documents(
    config_text: str,
    config_path: str | None,
    snapshot_path: str,
    doc_ids: list[str],
    constraints: dict[str, list[Constraint]],
) -> BatchResult:
    config = config_from_text(config_text, config_path)
    return rechunk_stored(config, Snapshot.open(snapshot_path), doc_ids, constraints)


@flow(name="chunkyard-reprocess", flow_run_name="reprocess {config_name}", log_prints=True)
def reprocess_corpus(
    config_text: str, config_path: str | None = None, config_name: str = "", output: str | None = None
) -> RunResult:
    """Write the next snapshot of the config's version with the review decisions applied."""
    config = config_from_text(config_text, config_path)

    def rechunk(
        parent: Snapshot, doc_ids: list[str], constraints: dict[str, list[Constraint]]
    ) -> BatchResult:
        return rechunk_documents.submit(
            config_text, config_path, str(parent.path), doc_ids, constraints
        ).result()

    result = reprocess_snapshot(config, Path(output) if output else None, rechunk)
    return RunResult(result.snapshot, result.manifest, result.stats)


def reprocess(config: Config, output: Path | None = None) -> RunResult:
    """Run the reprocess flow once (in-process: it rechunks only the flagged documents)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        return reprocess_corpus(
            config.text,
            str(config.path) if config.path else None,
            config_name=f"{config.name} v{config.version}",
            output=str(output) if output else None,
        )
