"""Child processes started as a terminal starts them, whatever the launcher of the tests did with SIGINT.

``nohup``, some CI runners and ``trap '' INT`` start pytest with SIGINT ignored, and an ignored signal
stays ignored in every child: Python then never installs its KeyboardInterrupt handler, and a test
that sends Ctrl+C to a child saw nothing happen. ``with_ctrl_c`` puts SIGINT back to its default in the
child just before it becomes the command (an ``exec``, so nothing else of the wrapper remains).
"""

from __future__ import annotations

import sys

_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def with_ctrl_c(*args: str) -> list[str]:
    """``[python, *args]`` for ``subprocess``, started with SIGINT at its default disposition."""
    return [sys.executable, "-c", _DEFAULT_SIGINT, *args]
