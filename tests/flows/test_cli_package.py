"""The command-line package: one list of commands, no module state, Prefect imported only by the flows."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chunkyard.flows.cli import EXIT_OK, main
from chunkyard.flows.cli.command import Command
from chunkyard.flows.cli.parser import COMMANDS, build_parser, parse
from chunkyard.flows.cli.session import ProgressBar, ProgressDisplay, Session

REPO = Path(__file__).resolve().parents[2]


def test_every_command_is_listed_once_with_a_handler():
    names = [command.name for command in COMMANDS]
    assert names == [
        "run",
        "schedule",
        "validate",
        "preview",
        "review",
        "flag",
        "ledger",
        "reprocess",
        "diff",
        "export",
        "eval",
        "sync",
        "prune",
    ]
    _, parsers = build_parser()
    for name, command_parser in parsers.items():
        if name == "ledger":  # its actions carry the handlers
            for action in ("export", "import"):
                args = command_parser.parse_args(
                    [action, "x", *(["--out", "y"] if action == "export" else ["y"])]
                )
                assert callable(args.handler), action
        else:
            assert callable(command_parser.get_default("handler")), name


def test_a_new_command_is_one_entry_in_the_list(capsys):
    """What ``sync`` and ``prune`` did: a Command with its arguments, handler and check (here ``mirror``)."""
    calls = []

    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target")
        parser.add_argument("--dry-run", action="store_true")

    def check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
        if args.target == "nowhere":
            parser.error("nowhere is not a target")

    def handler(args: argparse.Namespace, session: Session) -> int:
        calls.append((args.target, args.dry_run))
        return EXIT_OK

    commands = (*COMMANDS, Command("mirror", "copy a dataset somewhere", arguments, handler, check=check))
    args = parse(["mirror", "bucket", "--dry-run"], commands)
    assert args.handler(args, Session()) == EXIT_OK and calls == [("bucket", True)]
    with pytest.raises(SystemExit) as exit_info:
        parse(["mirror", "nowhere"], commands)
    assert exit_info.value.code == 2 and "nowhere is not a target" in capsys.readouterr().err
    with pytest.raises(ValueError, match="registered twice: mirror"):
        build_parser((*commands, Command("mirror", "again", arguments, handler)))


def test_no_command_prints_the_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_sessions_share_nothing():
    first, second = Session(), Session()
    assert first.server is not second.server
    assert not ProgressDisplay(False).bar().enabled and ProgressDisplay(True).bar().enabled
    with ProgressBar(False) as bar:
        bar.update(1, 10, 2, 20)  # not on a terminal: nothing drawn, nothing raised


def test_the_command_line_imports_neither_prefect_nor_qt_until_a_command_needs_them():
    """`chunkyard validate`, `diff` and the rest do not pay for Prefect's import (≈1 s) or rich's."""
    script = textwrap.dedent("""
        import sys
        from chunkyard.flows.cli import main
        from chunkyard.flows.cli.parser import build_parser
        build_parser()
        code = main(["validate", sys.argv[1]])
        heavy = sorted(name for name in sys.modules if name.split(".")[0] in ("prefect", "PySide6", "rich", "dask")
                       or name in ("chunkyard.flows.run", "chunkyard.flows.reprocess", "chunkyard.flows.schedule",
                                   "chunkyard.flows.server", "chunkyard.flows.workers"))
        print(code, ",".join(heavy))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "config" / "default.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "0 ", result.stdout


def test_python_dash_m_runs_the_program():
    result = subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "validate", str(REPO / "missing.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "no such config file" in result.stderr
