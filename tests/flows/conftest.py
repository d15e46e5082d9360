"""Fixtures for the flow tests: one Prefect test server for the session."""

from __future__ import annotations

from typing import Any

import pytest


def _private_random_for_websocket_pings() -> None:
    """Prefect's events client keeps a websocket open in a background thread, and websockets draws each
    keepalive ping's payload from the global ``random``. A ping during a hypothesis draw changed that
    state under hypothesis, which warned "Do not use the `random` module inside strategies" on tests
    whose strategies never touch it (and will make that an error). The pings get their own generator."""
    import random

    import websockets.asyncio.connection as connection

    connection.random = random.Random()


_private_random_for_websocket_pings()  # for every test: some run flows in this process without the fixture


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One Prefect test server for the session (it takes seconds to start); shared by every flow test."""
    import os

    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    from chunkyard.flows.settings import configure_prefect

    configure_prefect(home)
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
