"""Prefect's log lines on chunkyard's console: its errors kept, their tracebacks and repeats dropped.

chunkyard prints one clear line for a failure; the traceback stays available with ``--debug`` (and in
the Prefect UI when a real server is used). Used by the command line and by scheduled runs.
"""

from __future__ import annotations

import logging

# The loggers whose console handlers get the filter.
PREFECT_LOGGERS = ("", "prefect", "prefect.flow_runs", "prefect.task_runs")


class NoTraceback(logging.Filter):
    """A logging filter that keeps Prefect's error lines but drops their tracebacks on the console,
    and drops the flow-run lines that only repeat the failure chunkyard reports (``SAID_BY_CHUNKYARD``)."""

    # Prefect's flow-run logger reports the exception that ends the flow ("Encountered exception
    # during execution: RunRefused(...)") and a Ctrl+C ("Crash detected! Execution was aborted by an
    # interrupt signal."); chunkyard prints each of these itself, in one line.
    SAID_BY_CHUNKYARD = (
        "Encountered exception during execution",
        "Crash detected! Execution was aborted by an interrupt signal",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.name.startswith("prefect.flow_runs")
            and isinstance(record.msg, str)
            and record.msg.startswith(self.SAID_BY_CHUNKYARD)
        ):
            return False
        if record.exc_info or record.exc_text:
            record.exc_info, record.exc_text = None, None
        return True


def one_line_prefect_errors() -> None:
    """Add ``NoTraceback`` to the console handlers of Prefect's loggers (once each)."""
    for name in PREFECT_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            console = isinstance(handler, logging.StreamHandler) or "Console" in type(handler).__name__
            if console and not any(isinstance(f, NoTraceback) for f in handler.filters):
                handler.addFilter(NoTraceback())
