"""Prefect settings for running offline with state kept in one per-user place, set before Prefect loads."""

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


def configure_prefect(home: Path | None = None) -> None:
    """Keep Prefect's state in ``home``, by default the per-user ``chunkyard.flows.server.prefect_home()``
    (not ``~/.prefect``, and not a ``.prefect`` folder in whatever folder a command runs from, which
    paid a cold start in every new one); analytics off.

    Values the user already exported win, so a real server (``PREFECT_API_URL``) or another home
    can be chosen from the environment.
    """
    from chunkyard.flows.server import prefect_home

    os.environ.setdefault("PREFECT_HOME", str(home or prefect_home()))
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
