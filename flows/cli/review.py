"""``chunkyard review``: the desktop reviewer (``chunkyard.gui``, which needs the gui extra)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from chunkyard.chunking.errors import ChunkyardError
from chunkyard.flows.cli.command import Command, local_path
from chunkyard.flows.cli.session import Session


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        type=local_path("review"),
        help="OUTPUT/NAME, a version folder or a snapshot folder",
    )
    parser.add_argument("--doc", metavar="DOC_ID", help="the document to show first")
    parser.add_argument(
        "--screenshot",
        metavar="PNG",
        type=Path,
        help="render the window with the first (or --doc) document to PNG and exit",
    )


def cmd_review(args: argparse.Namespace, session: Session) -> int:
    started = time.perf_counter()
    try:  # Qt is imported only here and inside gui/
        from chunkyard.gui.app import run_review
    except ImportError as exc:
        raise ChunkyardError(f"the reviewer needs PySide6: pip install 'chunkyard[gui]' ({exc})") from None
    return run_review(args.path, screenshot=args.screenshot, doc=args.doc, started=started)


REVIEW = Command(
    "review", "open the desktop reviewer on a dataset (needs the gui extra)", _arguments, cmd_review
)
