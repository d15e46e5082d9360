"""The argument parser, built from ``COMMANDS``: the one list of ``chunkyard`` subcommands."""

from __future__ import annotations

import argparse

from chunkyard.flows.cli import dataset, evaluate, preview, review, run, sync
from chunkyard.flows.cli.command import Command

# In the order ``chunkyard --help`` lists them. A new command: its module, then one entry here.
COMMANDS: tuple[Command, ...] = (
    run.RUN,
    run.SCHEDULE,
    preview.VALIDATE,
    preview.PREVIEW,
    review.REVIEW,
    dataset.FLAG,
    dataset.LEDGER,
    run.REPROCESS,
    dataset.DIFF,
    dataset.EXPORT,
    evaluate.EVAL,
    sync.SYNC,
    sync.PRUNE,
)


def build_parser(
    commands: tuple[Command, ...] = COMMANDS,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The program's parser, and each command's own parser by name."""
    names = [command.name for command in commands]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f"commands registered twice: {', '.join(duplicated)}")
    parser = argparse.ArgumentParser(
        prog="chunkyard", description="Chunk document corpora into versioned Parquet datasets."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parsers = {}
    for command in commands:
        parsers[command.name] = command_parser = sub.add_parser(command.name, help=command.help)
        command.arguments(command_parser)
        if command.handler is not None:
            command_parser.set_defaults(handler=command.handler)
    return parser, parsers


def parse(argv: list[str] | None, commands: tuple[Command, ...] = COMMANDS) -> argparse.Namespace | None:
    """The parsed arguments, or None (after printing the help) when no command was given.

    Bad usage exits here with argparse's message and code 2, as does a command's ``check``.
    """
    parser, parsers = build_parser(commands)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return None
    command = next(command for command in commands if command.name == args.command)
    if command.check is not None:
        command.check(args, parsers[command.name])
    return args
