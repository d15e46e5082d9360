"""Fixtures for every test group: ``--update-golden``, ``check_chunks``, ``corpora_dir``, hypothesis profiles.

``check_chunks(text, settings, path=None)`` runs ``split_document`` and asserts the chunk invariants of
docs/design.md with *independent* recounts (``support.checks``), so any test can assert them in one line::

    def test_something(check_chunks):
        result = check_chunks(text, {"strategy": "recursive", "unit": "chars", "max_size": 200})

Imports neither Prefect nor Qt: the core group runs without them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from chunkyard.chunking.api import ChunkedDocument

from support.checks import CORPORA_DIR, run_and_check

# A fixed seed in CI, so a failure there is the same failure on the next run; random draws locally
# (HYPOTHESIS_PROFILE=hunt for many more of them).
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev")
settings.register_profile("hunt", max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# A command run by a test starts a private Prefect server and stops it on exit: no test leaves the
# shared per-user server (chunkyard.flows.server.shared_server) running; its own tests ask for it.
os.environ.setdefault("CHUNKYARD_PREFECT_SERVER", "private")
# The reviewer's column cache (chunking.dataset.Snapshot.whole_columns) of every test goes into one
# temporary folder, never the user's ~/.cache; the cache's own tests set their folders.
if "CHUNKYARD_CACHE_DIR" not in os.environ:
    os.environ["CHUNKYARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="chunkyard-test-cache-")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.json from the current output instead of comparing against them",
    )


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def check_chunks() -> Callable[..., ChunkedDocument]:
    """``check_chunks(text, settings, path=None, *, base_dir=None, graphemes=True, twice=True, tolerate=())``."""
    return run_and_check


@pytest.fixture(scope="session")
def corpora_dir() -> Path:
    if not CORPORA_DIR.is_dir():
        pytest.skip(f"real corpora not found at {CORPORA_DIR} (they live in ../shared/corpora)")
    return CORPORA_DIR
