"""Prefect settings for running offline with state kept under the project, set before Prefect loads."""

from __future__ import annotations

import os
from pathlib import Path

OFFLINE_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_UI_ENABLED": "false",
}


def configure_prefect(project_dir: Path | None = None) -> None:
    """Keep Prefect's state in ``<project>/.prefect`` (not ``~``) and its analytics off.

    Values the user already exported win, so a real server (``PREFECT_API_URL``) or another home
    can be chosen from the environment.
    """
    home = (project_dir or Path.cwd()) / ".prefect"
    os.environ.setdefault("PREFECT_HOME", str(home))
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
