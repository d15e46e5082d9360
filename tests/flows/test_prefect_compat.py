"""Prefect's private names are used in one module, which checks at import that they still exist."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLOWS = REPO / "flows"

# The private attributes chunkyard.flows.prefect_compat reads or sets on Prefect's objects (and on the
# standard-library futures and pools Prefect builds them from).
PRIVATE_ATTRIBUTES = {
    "_final_state",
    "_wrapped_future",
    "_process_future",
    "_resolution_future",
    "_result",
    "_executor",
    "_max_workers",
    "_initializer",
    "_initargs",
    "_processes",
}


def test_the_installed_prefect_has_every_name_used():
    from chunkyard.flows import prefect_compat

    assert prefect_compat.missing_names() == []
    prefect_compat.check_prefect()


def test_a_missing_name_is_one_clear_error_naming_the_version_and_the_name(monkeypatch):
    import prefect.task_runners
    from prefect._internal.concurrency.services import QueueService

    from chunkyard.chunking.errors import ChunkyardError
    from chunkyard.flows import prefect_compat

    monkeypatch.setattr(QueueService, "drain_all", None)  # (inherited: there is none of its own to delete)
    monkeypatch.delattr(prefect.task_runners, "_ChainedFuture")
    with pytest.raises(prefect_compat.PrefectIncompatible) as caught:
        prefect_compat.check_prefect()
    message = str(caught.value)
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, ChunkyardError)
    assert f"the installed Prefect {prefect.__version__} lacks" in message
    assert "prefect._internal.concurrency.services.QueueService.drain_all" in message
    assert "prefect.task_runners._ChainedFuture._resolution_future, ._process_future" in message
    assert "pip install 'prefect" in message and "3.10" in message  # the pin, read from chunkyard's metadata
    assert "ProcessPoolTaskRunner" not in message  # only what is missing


def test_a_process_runner_that_no_longer_has_its_executor_is_caught(monkeypatch):
    from prefect.task_runners import ProcessPoolTaskRunner

    from chunkyard.flows import prefect_compat

    original = ProcessPoolTaskRunner.__init__

    def init_without_executor(self, *args, **kwargs):
        original(self, *args, **kwargs)
        del self._executor

    monkeypatch.setattr(ProcessPoolTaskRunner, "__init__", init_without_executor)
    assert prefect_compat.missing_names() == [
        "prefect.task_runners.ProcessPoolTaskRunner._executor, ._max_workers"
    ]


def test_importing_the_flow_fails_at_once_when_prefect_lacks_a_name():
    """What an upgrade that renamed a private attribute does: the flow module does not import."""
    script = textwrap.dedent("""
        import prefect.futures
        original = prefect.futures.PrefectConcurrentFuture.__init__
        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            del self._final_state
        prefect.futures.PrefectConcurrentFuture.__init__ = init
        try:
            import chunkyard.flows.run
        except ImportError as exc:
            print(type(exc).__name__, exc)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("PrefectIncompatible the installed Prefect "), result.stdout
    assert "prefect.futures.PrefectConcurrentFuture._wrapped_future, ._final_state" in result.stdout


def _private_uses(path: Path) -> list[str]:
    """Imports of private Prefect modules and uses of the private attributes above, in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "prefect":
            names = node.module.split(".") + [alias.name for alias in node.names]
            if any(name.startswith("_") for name in names):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "prefect" and any(
                    p.startswith("_") for p in alias.name.split(".")
                ):
                    found.append(f"{path.name}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_ATTRIBUTES:  # getattr(x, "_name")
            found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_no_other_flows_module_uses_a_private_prefect_name():
    modules = sorted(FLOWS.rglob("*.py"))
    assert FLOWS / "prefect_compat.py" in modules and len(modules) > 5
    assert _private_uses(FLOWS / "prefect_compat.py")  # the scan finds them where they are
    elsewhere = [use for path in modules if path.name != "prefect_compat.py" for use in _private_uses(path)]
    assert elsewhere == []
