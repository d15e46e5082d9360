"""Imported once by the process runner's forkserver (``chunkyard.flows.workers``) so that forked workers start warm.

Prefect, its collections (loaded on a worker's first task anyway), the task's module and the default
tokenizer. Nothing here starts a thread or opens a connection: the forkserver must stay safe to fork.
"""

from __future__ import annotations

import contextlib
import os
import signal

# Ctrl+C reaches the forkserver too (the terminal's process group) and, while it imports, would print
# a KeyboardInterrupt traceback above chunkyard's one line: the flow process reports the interrupt,
# and this process ends with it (die_with_parent). The handler for forked workers is set at the end.
signal.signal(signal.SIGINT, signal.SIG_IGN)

import prefect.context  # noqa: E402, F401
import prefect.task_engine  # noqa: E402, F401
import prefect.task_runners  # noqa: E402, F401
from prefect.plugins import load_prefect_collections  # noqa: E402

import chunkyard.flows.run  # noqa: E402, F401  (the task's module; unpickling a task imports it)
from chunkyard.chunking.units import get_tokenizer  # noqa: E402
from chunkyard.flows.workers import die_with_parent, end_quietly_on_interrupt, orphaned  # noqa: E402

# The forkserver ends with the flow's process, and each worker with the forkserver (init_worker).
die_with_parent()
if orphaned():
    os._exit(1)

load_prefect_collections()
with contextlib.suppress(Exception):  # a missing tokenizer is reported by the task itself
    get_tokenizer("cl100k_base")

# Every process forked from here (process-pool workers, a local Dask cluster's workers) starts with
# the SIGINT handler in force now (the forkserver ignores SIGINT itself, then restores this one).
signal.signal(signal.SIGINT, end_quietly_on_interrupt)
