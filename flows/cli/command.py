"""What every command module shares: ``Command`` (one entry of the command list), the exit codes,
and the argument types and config loading more than one command uses."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from chunkyard.chunking.config import Config, load_config, tokenizer_load_issues
from chunkyard.chunking.errors import ConfigError
from chunkyard.chunking.storage import is_uri, location

if TYPE_CHECKING:
    from chunkyard.flows.cli.session import Session

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# A command's work: the parsed arguments and the session in, an exit code out.
Handler = Callable[[argparse.Namespace, "Session"], int]


@dataclasses.dataclass(frozen=True)
class Command:
    """One ``chunkyard NAME`` subcommand.

    ``arguments`` adds the command's arguments to its parser. ``handler`` runs it; a command with
    actions of its own (``ledger export``/``ledger import``) leaves it None and has ``arguments`` set
    a handler on each action's parser (``set_defaults(handler=...)``). ``check`` runs right after
    parsing, before anything else, and may refuse the combination of arguments with ``parser.error``
    (exit 2).
    """

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Handler | None = None
    check: Callable[[argparse.Namespace, argparse.ArgumentParser], None] | None = None


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def local_path(command: str) -> Callable[[str], Path]:
    """An argparse type: a local path, or a usage error for a URI (the command reads local datasets only)."""

    def parse(text: str) -> Path:
        if is_uri(text) and not text.lower().startswith("file://"):
            raise argparse.ArgumentTypeError(
                f"{text.split('?', 1)[0]}: `chunkyard {command}` works on local datasets only (the review ledger "
                "is a local file); copy the dataset to this machine first"
            )
        if text.lower().startswith("file://"):
            return location(text)
        return Path(text)

    return parse


def load_for_chunking(path: Path) -> Config:
    """A config for a command that chunks: validated, and its tokenizer files loadable."""
    config = load_config(path)
    issues = tokenizer_load_issues(config)
    if issues:  # named as the user wrote the config's path, like load_config's issues
        raise ConfigError([dataclasses.replace(issue, file=str(path)) for issue in issues])
    return config
