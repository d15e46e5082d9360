"""``python -m chunkyard.flows.cli``: the ``chunkyard`` program."""

from chunkyard.flows.cli.program import entry

entry()
