"""Paths in configs behave predictably: relative to the config file, POSIX or Windows-style, never outside."""

from __future__ import annotations

import textwrap
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkyard.chunking.config import load_config
from chunkyard.chunking.errors import ConfigError
from chunkyard.chunking.layout import path_stem, path_suffix
from chunkyard.chunking.pipeline import RunRefused, discover_files, prepare_run


def write(folder: Path, source: str, output: str = "out", extra: str = "") -> Path:
    path = folder / "cfg" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        textwrap.dedent(f"""\
        name: paths
        version: 1
        source: {{path: '{source}', include: ["**/*.md"]}}
        output: {{path: '{output}'}}
        """)
        + extra,
        encoding="utf-8",
    )
    return path


def messages(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return [str(issue) for issue in caught.value.issues]


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "docs").mkdir()
    config = load_config(write(tmp_path, "../docs", "../out"))
    monkeypatch.chdir("/")  # the working directory does not matter
    assert config.source_dir == (tmp_path / "docs").resolve()
    assert config.output_dir == (tmp_path / "out").resolve()


def test_windows_style_separators_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "docs" / "legal").mkdir(parents=True)
    (tmp_path / "docs" / "legal" / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    config = load_config(
        write(tmp_path, "..\\docs", extra="rules:\n  - match: 'legal\\**'\n    chunker: {max_size: 100}\n")
    )
    assert config.source_dir == (tmp_path / "docs").resolve()
    assert config.settings_for("legal/a.md").max_size == 100
    context = prepare_run(config)
    assert [f.doc_id for f in discover_files(context)] == ["legal/a.md"]


def test_a_windows_drive_path_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "C:\\docs")
    [message] = messages(path)
    assert message.startswith(f"{path}:3: source.path: ") and "Windows path" in message


@pytest.mark.parametrize("pattern", ["../secret/**", "docs/../../x.md", "/etc/**"])
def test_patterns_that_can_never_match_are_refused(tmp_path: Path, pattern: str) -> None:
    path = write(tmp_path, "docs", extra=f"rules:\n  - match: '{pattern}'\n    chunker: {{max_size: 100}}\n")
    [message] = messages(path)
    assert message.startswith(f"{path}:6: rules[0].match: ")
    assert ("'..' segment" in message) or ("absolute" in message)


@pytest.mark.parametrize("pattern", ["[z-a]*.md", "docs/[b-a]/**"])
def test_a_pattern_that_is_not_a_valid_glob_is_refused_with_its_line(tmp_path: Path, pattern: str) -> None:
    """A reversed range used to pass validation and end ``run``/``preview`` with an unexpected
    ``re.error`` ("bad character range") when the first document was matched."""
    path = write(tmp_path, "docs", extra=f"rules:\n  - match: '{pattern}'\n    chunker: {{max_size: 100}}\n")
    [message] = messages(path)
    assert message.startswith(f"{path}:6: rules[0].match: ")
    assert "not a valid glob" in message and "bad character range" in message
    include = tmp_path / "include.yaml"
    include.write_text(
        f"name: paths\nversion: 1\nsource: {{path: docs, include: ['{pattern}']}}\n", encoding="utf-8"
    )
    [message] = messages(include)
    assert message.startswith(f"{include}:3: source.include[0]: ") and "not a valid glob" in message


def test_every_bad_pattern_of_a_list_is_reported_at_its_own_line(tmp_path: Path) -> None:
    """``chunkyard validate`` prints every problem: a list with two bad patterns used to report only
    the first, at the line of the key rather than of the pattern."""
    path = tmp_path / "config.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: paths
        version: 1
        source:
          path: docs
          include:
            - "/abs/**"
            - "docs/*.md"
            - "../x/*.md"
          exclude: ["ok/**", "[z-a]"]
        rules:
          - match:
              - "a/**"
              - "/b/**"
            chunker: {max_size: 100}
        """),
        encoding="utf-8",
    )
    found = messages(path)
    assert [message.split(": ", 2)[:2] for message in found] == [
        [f"{path}:6", "source.include[0]"],
        [f"{path}:8", "source.include[2]"],
        [f"{path}:9", "source.exclude[1]"],
        [f"{path}:13", "rules[0].match[1]"],
    ]
    assert "absolute" in found[0] and "'..' segment" in found[1] and "not a valid glob" in found[2]


def test_source_that_is_a_file_and_output_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "docs.md").write_text("# not a folder\n", encoding="utf-8")
    with pytest.raises(RunRefused, match="is a file; source.path must name a folder"):
        prepare_run(load_config(write(tmp_path, "../docs.md")))
    (tmp_path / "docs").mkdir()
    (tmp_path / "out").write_text("a file", encoding="utf-8")
    with pytest.raises(RunRefused, match="is a file; output.path must name a folder"):
        prepare_run(load_config(write(tmp_path, "../docs", "../out")))


def test_output_inside_source_is_refused(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    with pytest.raises(RunRefused, match="inside the source folder"):
        prepare_run(load_config(write(tmp_path, "../docs", "../docs/datasets")))


@settings(max_examples=500, deadline=None)
@given(
    path=st.text(alphabet="/.a-_", max_size=12)
    | st.sampled_from(["", "/", ".", "a.md/.", "x/.hidden", "b.", "..", "d/a.tar.gz"])
)
def test_suffix_and_stem_are_pathlibs(path: str) -> None:
    """A document's suffix and stem (its format, strategy and title) are pathlib's, without a path built."""
    assert path_suffix(path) == PurePosixPath(path).suffix
    assert path_stem(path) == PurePosixPath(path).stem
