"""``chunkyard validate`` on the command line: every problem on its own line with file, line and field,
exit 2, no traceback (the loading itself: tests/core/test_config.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chunkyard.chunking.config import load_config
from chunkyard.chunking.errors import ConfigError, ConfigIssue

from support.configs import BASE, write

ROOT = Path(__file__).resolve().parents[2]


def issues_of(path: Path) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value.issues


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_cli_validate_reports_every_issue_on_its_own_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: kb
        version: 1
        source: {path: docs}
        colour: blue
        chunker:
          strategy: recursive
          unit: chars
          overlap: 900
          max_size: 800
        """,
    )
    result = validate(path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert sorted(lines) == sorted(
        [
            f"chunkyard: {path}:4: colour: unknown key",
            f"chunkyard: {path}:8: chunker.overlap: must be smaller than max_size (got 900 ≥ 800)",
        ]
    )


@pytest.mark.parametrize(
    ("source", "output", "line", "field", "problem"),
    [
        ("docs", "docs/datasets", 4, "output.path", "is inside the source folder"),
        ("missing", "out", 3, "source.path", "source folder not found"),
        ("notes.md", "out", 3, "source.path", "is a file; source.path must name a folder"),
    ],
)
def test_cli_validate_reports_folders_run_would_refuse(
    tmp_path: Path, source: str, output: str, line: int, field: str, problem: str
) -> None:
    """README: an output folder inside the source folder is refused like a bad pattern; validate used
    to say 'ok' and only `run` refused it (without a line)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "notes.md").write_text("# a file\n", encoding="utf-8")
    path = write(tmp_path, f"name: kb\nversion: 1\nsource: {{path: {source}}}\noutput: {{path: {output}}}\n")
    result = validate(path)
    assert result.returncode == 2, result.stdout
    [message] = result.stderr.strip().splitlines()
    assert message.startswith(f"chunkyard: {path}:{line}: {field}: ") and problem in message


@pytest.mark.parametrize(
    ("source", "output", "line", "field", "problem"),
    [
        ("docs", "/", 4, "output.path", "is the root of the filesystem"),
        ("/proc", "out", 3, "source.path", "is on the proc pseudo-filesystem"),
        ("/sys", "out", 3, "source.path", "is on the sysfs pseudo-filesystem"),
        ("docs", "/proc/self", 4, "output.path", "is on the proc pseudo-filesystem"),
        ("datasets/docs", "datasets", 3, "source.path", "is inside the output folder"),
        ("pipe", "out", 3, "source.path", "is not a folder (a FIFO, device or socket)"),
    ],
)
def test_cli_validate_and_run_refuse_dangerous_folders(
    tmp_path: Path, source: str, output: str, line: int, field: str, problem: str
) -> None:
    """Issue 20: ``output.path: /``, ``source.path: /proc``, a source inside the output and a FIFO as the
    source (it said "not found") are refused with the line by ``validate``, and by ``run`` (exit 2)."""
    import os

    (tmp_path / "docs").mkdir()
    (tmp_path / "datasets" / "docs").mkdir(parents=True)
    os.mkfifo(tmp_path / "pipe")
    path = write(tmp_path, f"name: kb\nversion: 1\nsource: {{path: {source}}}\noutput: {{path: {output}}}\n")
    result = validate(path)
    assert result.returncode == 2, result.stdout
    [message] = result.stderr.strip().splitlines()
    assert message.startswith(f"chunkyard: {path}:{line}: {field}: ") and problem in message, message
    run = subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "run", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and problem in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def _alias_bomb(fan_out: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghi"
    for previous, name in zip(names, names[1:fan_out], strict=False):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_config_is_refused_at_once_with_its_line(tmp_path: Path) -> None:
    """A 590-byte config whose aliases fan out 9 × 9 ran ``validate`` past 90 s (6.56 GB and MemoryError
    when a rule referenced it); its expansion is measured on the node graph and refused with the line."""
    import time

    bomb = _alias_bomb()
    text = "name: kb\nversion: 1\nsource: {path: docs}\nx:\n" + textwrap.indent(bomb, "  ")
    path = write(tmp_path, text)
    started = time.perf_counter()
    issues = issues_of(path)
    assert time.perf_counter() - started < 0.5
    [issue] = issues
    assert issue.line == 9 and "YAML aliases expand this to more than 100,000" in issue.message
    # Referenced from a rule, where it would be deep-merged into the settings.
    rule = text + "rules:\n  - match: '*.md'\n    chunker: {extra: *i}\n"
    [issue] = issues_of(write(tmp_path, rule))
    assert issue.line == 9
    result = validate(path)
    assert result.returncode == 2 and f"{path}:9: invalid YAML: YAML aliases expand" in result.stderr
    # Aliases used as intended still load.
    fine = text.replace(
        "x:\n" + textwrap.indent(bomb, "  "),
        "chunker: &d {strategy: recursive, unit: chars}\nrules: [{match: '*.md', chunker: *d}]\n",
    )
    assert load_config(write(tmp_path, fine)).settings_for("a.md").strategy == "recursive"


def test_cli_validate_malformed_yaml(tmp_path: Path) -> None:
    result = validate(write(tmp_path, "name: [kb\nversion: 1\n"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "invalid YAML" in result.stderr


def test_cli_validate_missing_file(tmp_path: Path) -> None:
    result = validate(tmp_path / "missing.yaml")
    assert (
        result.returncode == 2 and "no such config file" in result.stderr and "Traceback" not in result.stderr
    )


def test_the_program_flushes_runs_atexit_handlers_and_keeps_the_exit_code(tmp_path: Path) -> None:
    """``entry`` skips the interpreter's teardown: nothing printed or registered may be lost on the way."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "from chunkyard.flows.cli import entry\n"
        "sys.argv = ['chunkyard', 'validate', sys.argv[1]]\n"
        "entry()\n"
    )
    good = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "config" / "default.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout.rstrip().endswith("atexit ran") and len(good.stdout.splitlines()) > 1
    bad = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert bad.returncode == 2 and "no such config file" in bad.stderr and "atexit ran" in bad.stdout


def test_cli_validate_default_config_is_ok() -> None:
    result = validate(ROOT / "config" / "default.yaml")
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout and "northwind-kb" in result.stdout


def test_a_tokenizer_json_that_cannot_be_loaded_is_reported_by_the_cli(tmp_path: Path) -> None:
    """Only the file's existence was checked: validate said ok, and run then skipped every document
    with 'chunking failed: TokenizerError: cannot load tokenizer file ...' (exit 3). load_config
    itself still only checks that the file exists (test_hash_covers_tokenizer_file_content)."""
    from chunkyard.chunking.config import tokenizer_load_issues

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tokenizer.json").write_text('{"not": "a tokenizer"}', encoding="utf-8")
    path = write(
        tmp_path,
        BASE.replace("unit: chars", "unit: tokens\n  tokenizer: models/tokenizer.json")
        + "rules:\n  - match: 'a/**'\n    chunker: {max_size: 300}\n",
    )
    tokenizer = (tmp_path / "models" / "tokenizer.json").resolve()
    [first] = tokenizer_load_issues(load_config(path))  # the rule inherits it: reported once
    assert (first.line, first.field) == (7, "chunker.tokenizer")
    assert first.message.startswith(f"cannot load tokenizer file {tokenizer}")
    result = validate(path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[0].startswith(
        f"chunkyard: {path}:7: chunker.tokenizer: cannot load tokenizer file"
    )


def test_validate_cli_never_shows_a_traceback(tmp_path: Path, capsys) -> None:
    """Fuzzed configs that once broke loading (tests/core/test_config_fuzz.py) exit 0 or 2 with located lines."""
    from chunkyard.flows.cli import main

    for text in (
        "chunker: [",
        "name: x\nversion: 1\nsource: {path: .}\nchunker: {max_size: 1e999}\n",
        "\x00\x01",
        "- a\n- b\n",
        "name: x\nversion: 1\nsource: {path: .}\nrules: [{match: 1}]\n",
    ):
        path = tmp_path / "c.yaml"
        path.write_text(text, encoding="utf-8")
        code = main(["validate", str(path)])
        out, err = capsys.readouterr()
        assert code in (0, 2), (text, code, err)
        assert "Traceback" not in err and "unexpected error" not in err, err
        if code == 2:
            assert all(line.startswith(f"chunkyard: {path}") for line in err.strip().splitlines()), err
    (tmp_path / "bad.yaml").write_bytes(b"name: \xff\xfe\n")
    assert main(["validate", str(tmp_path / "bad.yaml")]) == 2
    assert "Traceback" not in capsys.readouterr().err
