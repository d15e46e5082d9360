"""The ``chunkyard`` command line: one entry point, one clear line on failure.

Exit codes: 0 success; 1 failure; 2 bad usage, an invalid or refused config (nothing was done);
3 the run completed but skipped some files (listed in the manifest); 130 interrupted (Ctrl+C).

The package:

- ``program``: ``main(argv) -> int`` and ``entry()`` (the console script): parse, run the command in a
  ``Session``, turn every failure into one line and an exit code.
- ``parser``: the argument parser, built from ``COMMANDS``, the one list of subcommands.
- ``command``: ``Command``, the exit codes, shared argument types and config loading.
- ``session``: ``Session``, made by ``main`` for one command and passed to its handler: the Prefect
  server handle (``PrefectServer``, started by the first flow and stopped when the command ends), the
  progress display (``ProgressDisplay``) and whether Ctrl+C was pressed. There is no module state.
- one module per group of commands: ``run`` (run, reprocess, schedule), ``preview`` (validate,
  preview), ``review``, ``dataset`` (flag, ledger, diff, export), ``evaluate`` (eval).

Adding a command, e.g. ``chunkyard sync``:

1. write ``flows/cli/sync.py``::

       def _arguments(parser: argparse.ArgumentParser) -> None:
           parser.add_argument("config", type=Path)

       def cmd_sync(args: argparse.Namespace, session: Session) -> int:
           ...                     # raise a ChunkyardError (UsageError for exit 2) to fail in one line
           return EXIT_OK

       SYNC = Command("sync", "one line for --help", _arguments, cmd_sync)

2. add ``sync.SYNC`` to ``COMMANDS`` in ``parser.py`` (its place there is its place in ``--help``).

A handler that runs a flow calls ``session.server.ensure()`` first (``start()`` earlier, to let the
server start while it imports Prefect) and imports its ``chunkyard.flows`` flow module inside the
handler: Prefect takes about a second to import and the other commands never need it.
"""

from chunkyard.flows.cli.command import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_SKIPPED, EXIT_USAGE
from chunkyard.flows.cli.program import entry, main

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_SKIPPED", "EXIT_USAGE", "entry", "main"]
