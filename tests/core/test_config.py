"""Config loading as ``chunkyard validate`` reports it: every problem with file, line and dotted field.

Also rule merging and the config hash (what it covers and what it ignores). The command line's side:
tests/flows/test_validate_cli.py.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from chunkyard.chunking.config import load_config
from chunkyard.chunking.errors import ConfigError, ConfigIssue

from support.configs import BASE, write


def issues_of(path: Path) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value.issues


def messages(path: Path) -> list[str]:
    return [str(issue) for issue in issues_of(path)]


def test_valid_config_loads(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE))
    assert (config.name, config.version) == ("kb", 1)
    assert (config.chunker.strategy, config.chunker.unit, config.chunker.max_size) == (
        "recursive",
        "chars",
        800,
    )
    assert config.source_dir == (tmp_path / "docs").resolve()


def test_malformed_yaml_names_the_line_and_where_an_unclosed_bracket_was_opened(tmp_path: Path) -> None:
    """The parser notices the missing '}' on a later line; the message named only that line
    ('4: invalid YAML: expected ',' or '}', but got ':''), not line 3 where the mapping is open."""
    path = write(
        tmp_path,
        """\
        name: kb
        version: 1
        source: {path: docs
        chunker:
          max_size: 100
        """,
    )
    [issue] = issues_of(path)
    assert str(issue) == (
        f"{path}:4: invalid YAML: expected ',' or '}}', but got ':' (while parsing a flow "
        "mapping that starts on line 3)"
    )


def test_tab_indentation_is_invalid_yaml_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: kb\nversion: 1\nsource:\n\tpath: docs\n")
    [issue] = issues_of(path)
    assert issue.line == 4 and "invalid YAML" in issue.message


@pytest.mark.parametrize(
    ("extra", "line", "field"),
    [
        ("colour: blue\n", 9, "colour"),
        ("  wibble: 3\n", 9, "chunker.wibble"),
        ("  context: {title: true, colour: red}\n", 9, "chunker.context.colour"),
        (
            "rules:\n  - match: 'legal/**'\n    chunker: {max_size: 1024, frobnicate: true}\n",
            11,
            "rules[0].chunker.frobnicate",
        ),
        (
            "rules:\n  - match: 'legal/**'\n    chunker: {max_size: 1024}\n    priority: 2\n",
            12,
            "rules[0].priority",
        ),
        ("output: {path: out, format: csv}\n", 9, "output.format"),
    ],
    ids=["top-level", "chunker", "chunker.context", "rule.chunker", "rule", "output"],
)
def test_unknown_key_names_line_and_dotted_field(tmp_path: Path, extra: str, line: int, field: str) -> None:
    path = write(tmp_path, BASE + extra)
    assert messages(path) == [f"{path}:{line}: {field}: unknown key"]


def test_overlap_not_smaller_than_max_size(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: kb
        version: 1
        source: {path: docs}
        chunker:
          strategy: recursive
          unit: chars
          overlap: 900
          max_size: 800
        """,
    )
    assert messages(path) == [f"{path}:7: chunker.overlap: must be smaller than max_size (got 900 ≥ 800)"]


def test_min_size_not_smaller_than_max_size(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "  min_size: 800\n")
    assert messages(path) == [f"{path}:9: chunker.min_size: must be smaller than max_size (got 800 ≥ 800)"]


@pytest.mark.parametrize(
    ("old", "new", "line", "field"),
    [
        ("max_size: 800", "max_size: on", 7, "chunker.max_size"),
        ("overlap: 100", "overlap: no", 8, "chunker.overlap"),
        ("version: 1", "version: yes", 2, "version"),
        ("overlap: 100", "overlap: 100\n  min_size: true", 9, "chunker.min_size"),
        ("strategy: recursive", "strategy: semantic\n  window: true", 6, "chunker.window"),
    ],
)
def test_true_or_false_is_not_taken_for_a_number(
    tmp_path: Path, old: str, new: str, line: int, field: str
) -> None:
    """YAML reads on/off/yes/no/true/false as booleans, and pydantic's lax mode took them for 1 and 0:
    'max_size: on' was a valid config of 1-character chunks."""
    path = write(tmp_path, BASE.replace(old, new))
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (line, field)
    assert issue.message in (
        "expected a whole number, got true (YAML reads yes/no/on/off as true/false)",
        "expected a whole number, got false (YAML reads yes/no/on/off as true/false)",
    )


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_size_must_be_positive(tmp_path: Path, value: str) -> None:
    path = write(
        tmp_path, BASE.replace("max_size: 800", f"max_size: {value}").replace("  overlap: 100\n", "")
    )
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (7, "chunker.max_size")
    assert "greater than 0" in issue.message


def test_max_size_must_be_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("max_size: 800", "max_size: lots"))
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (7, "chunker.max_size")


def test_unknown_strategy(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("strategy: recursive", "strategy: paragraphs"))
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (5, "chunker.strategy")
    assert issue.message.startswith("unknown strategy 'paragraphs' (use one of: ")
    for name in ("fixed", "sentence", "recursive", "markdown", "auto"):
        assert name in issue.message


def test_unknown_unit(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("unit: chars", "unit: bytes"))
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (6, "chunker.unit")


def test_budget_is_embed_text_by_default_or_text(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, BASE)).chunker.budget == "embed_text"
    path = write(tmp_path, BASE + "  budget: text\n", "text.yaml")
    assert load_config(path).chunker.budget == "text"


@pytest.mark.parametrize("value", ["tokens", "prefix", "true"])
def test_unknown_budget_names_its_line_and_field(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, BASE + f"  budget: {value}\n")
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (9, "chunker.budget")
    assert "embed_text" in issue.message and "text" in issue.message


def test_unknown_budget_in_a_rule_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + 'rules:\n  - match: "a/**"\n    chunker: {budget: texts}\n')
    [issue] = issues_of(path)
    assert issue.line == 11 and issue.field.endswith("budget"), issue


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_unknown_tokenizer_is_reported_without_download(tmp_path: Path, no_network: None) -> None:
    path = write(tmp_path, BASE.replace("unit: chars", "unit: tokens\n  tokenizer: bert-base-uncased"))
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (7, "chunker.tokenizer")
    assert issue.message.startswith("unknown tokenizer 'bert-base-uncased'")
    assert "cl100k_base" in issue.message and "tokenizer.json" in issue.message


def test_unknown_tokenizer_at_chunk_time_raises_without_download(no_network: None) -> None:
    from chunkyard.chunking import chunk_document
    from chunkyard.chunking.errors import TokenizerError

    with pytest.raises(TokenizerError, match="unknown tokenizer 'o200k_base'"):
        chunk_document("Some text.", {"unit": "tokens", "tokenizer": "o200k_base", "max_size": 10})


def test_tokenizer_is_only_checked_when_the_unit_is_tokens(tmp_path: Path) -> None:
    load_config(write(tmp_path, BASE + "  tokenizer: bert-base-uncased\n"))


def test_a_config_that_loads_with_an_unchecked_tokenizer_also_chunks(
    tmp_path: Path, no_network: None
) -> None:
    """With unit chars the tokenizer is not checked at load, so chunking must not need it either:
    ``n_tokens`` (count_tokens) is the cl100k count, as it already was for a tokenizer.json. It used to
    pass ``chunkyard validate`` and then fail every document of ``run`` with 'unknown tokenizer'."""
    from chunkyard.chunking import chunk_document
    from chunkyard.chunking.units import get_tokenizer

    config = load_config(write(tmp_path, BASE + "  tokenizer: bert-base-uncased\n"))
    [chunk] = chunk_document("Some text. More text here.", config.chunker)
    assert chunk.n_tokens == get_tokenizer("cl100k_base").count(chunk.text)


def test_missing_tokenizer_json(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("unit: chars", "unit: tokens\n  tokenizer: models/tokenizer.json"))
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (7, "chunker.tokenizer")
    assert issue.message == f"tokenizer file not found: {(tmp_path / 'models' / 'tokenizer.json').resolve()}"


def test_missing_tokenizer_json_in_a_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path, BASE + "rules:\n  - match: 'a/**'\n    chunker: {unit: tokens, tokenizer: x/tok.json}\n"
    )
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (11, "rules[0].chunker.tokenizer")


def test_duplicate_key(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "  max_size: 900\n")
    assert messages(path) == [f"{path}:9: chunker.max_size: duplicate key"]


def test_duplicate_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "name: other\n")
    assert messages(path) == [f"{path}:9: name: duplicate key"]


def test_missing_required_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "name: kb\nchunker: {max_size: 10}\n")
    found = {(issue.field, issue.message) for issue in issues_of(path)}
    assert ("version", "required key is missing") in found
    assert ("source", "required key is missing") in found


def test_every_problem_is_reported(tmp_path: Path) -> None:
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
          max_size: 800
          overlap: 900
        rules:
          - match: "x/**"
            chunker: {strategy: nonsense}
        """,
    )
    found = {(issue.line, issue.field) for issue in issues_of(path)}
    assert {(4, "colour"), (9, "chunker.overlap"), (12, "rules[0].chunker.strategy")} <= found


def test_two_errors_give_two_issues(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("max_size: 800", "max_size: 800\n  wibble: 1") + "colour: blue\n")
    assert sorted(messages(path)) == sorted(
        [f"{path}:10: colour: unknown key", f"{path}:8: chunker.wibble: unknown key"]
    )


def test_problem_in_defaults_is_reported_once_at_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path, BASE + "  wibble: 3\nrules:\n  - match: 'legal/**'\n    chunker: {max_size: 500}\n"
    )
    assert messages(path) == [f"{path}:9: chunker.wibble: unknown key"]


def test_empty_and_non_mapping_configs(tmp_path: Path) -> None:
    assert [i.message for i in issues_of(write(tmp_path, "", "empty.yaml"))] == ["the config is empty"]
    assert [i.message for i in issues_of(write(tmp_path, "- a\n- b\n", "list.yaml"))] == [
        "the config must be a mapping of keys to values"
    ]


def test_missing_config_file(tmp_path: Path) -> None:
    [issue] = issues_of(tmp_path / "nope.yaml")
    assert issue.message == "no such config file"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_config_saved_as_utf16_with_a_bom_loads(tmp_path: Path, encoding: str) -> None:
    """Windows PowerShell 5 writes UTF-16 with a BOM by default (``... > config.yaml``), and YAML
    allows it; such a config failed with "cannot read config: 'utf-8' codec can't decode byte 0xff"."""
    import codecs

    path = tmp_path / "config.yaml"
    bom = {"utf-16-be": codecs.BOM_UTF16_BE}.get(encoding, b"")
    path.write_bytes(bom + BASE.encode(encoding))
    assert load_config(path).chunker.max_size == 800
    path.write_bytes(bom + BASE.replace("max_size: 800", "max_size: 0").encode(encoding))
    assert messages(path) == [f"{path}:7: chunker.max_size: Input should be greater than 0"]


def test_a_config_in_another_encoding_says_which_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(BASE.replace("version: 1", "version: 1 # caf\xe9").encode("latin-1"))
    assert messages(path) == [f"{path}:2: cannot read config: not valid UTF-8 at byte 25 (save it as UTF-8)"]


def test_rule_override_keeps_the_other_defaults(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            BASE
            + """\
          min_size: 20
          context: {title: false, headings: true}
        rules:
          - match: "legal/**"
            chunker: {max_size: 1024, context: {headings: false}}
          - match: ["notes/**", "*.txt"]
            chunker: {strategy: sentence}
        """.replace("        ", ""),
        )
    )
    legal = config.settings_for("legal/terms.md")
    assert legal.max_size == 1024
    assert (legal.strategy, legal.unit, legal.overlap, legal.min_size) == ("recursive", "chars", 100, 20)
    assert (legal.context.title, legal.context.headings) == (False, False)  # merged key by key
    notes = config.settings_for("notes/a.md")
    assert (notes.strategy, notes.max_size, notes.unit) == ("sentence", 800, "chars")
    assert config.settings_for("top.txt").strategy == "sentence"
    assert config.settings_for("guides/a.md") == config.chunker
    assert config.settings_for("legal.md") == config.chunker  # "legal/**" needs the folder


def test_first_matching_rule_wins(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            BASE
            + """\
        rules:
          - match: "a/**"
            chunker: {max_size: 100, overlap: 0}
          - match: "a/b/**"
            chunker: {max_size: 200, overlap: 0}
        """.replace("        ", ""),
        )
    )
    assert config.settings_for("a/b/c.md").max_size == 100


def test_rule_is_validated_as_complete_settings(tmp_path: Path) -> None:
    """A rule that lowers max_size under the default overlap is an error in that rule."""
    path = write(tmp_path, BASE + "rules:\n  - match: 'x/**'\n    chunker: {max_size: 50}\n")
    [issue] = issues_of(path)
    assert (issue.line, issue.field) == (11, "rules[0].chunker.overlap")
    assert issue.message == "must be smaller than max_size (got 100 ≥ 50)"


# ---------------------------------------------------------------------------------------------
# Config hash


HASHED = """\
name: kb
version: 1
source: {path: docs, include: ["**/*.md"]}
output: {path: out}
chunker:
  strategy: markdown
  unit: tokens
  max_size: 512
  overlap: 64
rules:
  - match: "legal/**"
    chunker: {max_size: 1024}
"""


def hash_of(tmp_path: Path, text: str) -> str:
    return load_config(write(tmp_path, text, f"c{abs(hash(text))}.yaml")).hash


def test_hash_is_stable_across_key_order_whitespace_and_comments(tmp_path: Path) -> None:
    reordered = """\
# a comment
version: 1
chunker:        # defaults
  overlap: 64
  max_size:   512
  unit: tokens
  strategy: markdown


name: kb
rules:
  - chunker:
      max_size: 1024
    match: "legal/**"
output:
  path: out
source:
  include: ['**/*.md']
  path: docs
"""
    assert hash_of(tmp_path, HASHED) == hash_of(tmp_path, reordered)


def test_hash_same_when_defaults_are_written_out(tmp_path: Path) -> None:
    explicit = HASHED.replace(
        "  overlap: 64\n",
        "  overlap: 64\n  min_size: 0\n  tokenizer: cl100k_base\n  count_tokens: true\n  budget: embed_text\n",
    )
    assert hash_of(tmp_path, HASHED) == hash_of(tmp_path, explicit)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("max_size: 512", "max_size: 500"),
        ("overlap: 64", "overlap: 32"),
        ("strategy: markdown", "strategy: recursive"),
        ("unit: tokens", "unit: words"),
        ("chunker: {max_size: 1024}", "chunker: {max_size: 2048}"),
        ('match: "legal/**"', 'match: "law/**"'),
        ("overlap: 64\n", "overlap: 64\n  context: {title: false}\n"),
        ("overlap: 64\n", "overlap: 64\n  front_matter: keep\n"),
        ("overlap: 64\n", "overlap: 64\n  count_tokens: false\n"),
        ("overlap: 64\n", "overlap: 64\n  budget: text\n"),
        ("chunker: {max_size: 1024}", "chunker: {max_size: 1024, budget: text}"),
    ],
)
def test_hash_changes_with_chunking_settings(tmp_path: Path, old: str, new: str) -> None:
    assert old in HASHED
    assert hash_of(tmp_path, HASHED) != hash_of(tmp_path, HASHED.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("name: kb", "name: other-kb"),
        ("output: {path: out}", "output: {path: elsewhere}"),
        ("output: {path: out}", "output: {path: out}\nschedule: {cron: '0 2 * * *', timezone: UTC}"),
        ("output: {path: out}", "output: {path: out}\nreviewer: dana"),
        ('include: ["**/*.md"]', 'include: ["**/*.md", "**/*.txt"], exclude: ["drafts/**"]'),
    ],
)
def test_hash_ignores_what_does_not_change_chunks(tmp_path: Path, old: str, new: str) -> None:
    assert old in HASHED
    assert hash_of(tmp_path, HASHED) == hash_of(tmp_path, HASHED.replace(old, new))


def test_hash_covers_tokenizer_file_content(tmp_path: Path) -> None:
    config_text = BASE.replace("unit: chars", "unit: tokens\n  tokenizer: tok.json")
    (tmp_path / "tok.json").write_text('{"a": 1}')
    first = load_config(write(tmp_path, config_text)).hash
    (tmp_path / "tok.json").write_text('{"a": 2}')
    assert load_config(write(tmp_path, config_text)).hash != first


@pytest.mark.parametrize(
    "cron, problem",
    [
        ("61 * * * *", "minute 61 is out of range 0-59"),
        ("0 24 * * *", "hour 24 is out of range 0-23"),
        ("0 2 0 * *", "day of month 0 is out of range 1-31"),
        ("0 2 * 13 *", "month 13 is out of range 1-12"),
        ("0 2 * * 8", "day of week 8 is out of range 0-7"),
        ("*/0 * * * *", "minute step 0 must be at least 1"),
        ("0 5-70 * * *", "hour 70 is out of range 0-23"),
        ("foo 2 * * *", "minute 'foo' is not a number"),
        ("0 2 * * FOO", "day of week 'FOO' is not a number or a name"),
    ],
)
def test_a_cron_out_of_range_is_refused_with_its_line(tmp_path, cron, problem):
    """``61 * * * *`` passed `validate` (only the shape was checked); `chunkyard schedule` then started a
    Prefect server, printed "Serving ... Ctrl+C stops it" and failed with "unexpected error: ValueError:
    Invalid cron string" (exit 1)."""
    path = write(tmp_path, BASE + f"schedule: {{cron: '{cron}', timezone: UTC}}\n")
    found = messages(path)
    assert len(found) == 1 and ":9: schedule" in found[0] and problem in found[0], found


@pytest.mark.parametrize(
    "cron",
    [
        "0 2 * * *",
        "*/15 0-23/2 1,15 JAN-DEC MON-FRI",
        "0 0 L * *",
        "0 0 * * 7",
        "59 23 31 12 0",
        "0 0 ? * SUN",
        "30 4 1-7 */3 *",
    ],
)
def test_valid_crons_are_accepted(tmp_path, cron):
    config = load_config(write(tmp_path, BASE + f"schedule: {{cron: '{cron}', timezone: UTC}}\n"))
    assert config.model.schedule.cron == cron
