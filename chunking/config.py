"""Config models: YAML in, validated pydantic models out, every error located by file, line and field.

The chunker settings are a discriminated union on ``strategy``; per-path ``rules`` override the
defaults (first match wins) and are validated at load time as complete settings. The *config hash*
covers everything that changes chunk output: the resolved chunker settings of the defaults and of
every rule, the content of a tokenizer file, and the chunking algorithm version.
"""

from __future__ import annotations

import codecs
import copy
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from chunkyard.chunking import yamlbound
from chunkyard.chunking.errors import ConfigError, ConfigIssue
from chunkyard.chunking.settings import ChunkerBase, WholeNumber, _Strict
from chunkyard.chunking.storage import Location, is_uri, location, require_local
from chunkyard.chunking.strategies import STRATEGIES

# Bump when a change to the chunking code changes output for the same settings: it is part of the
# config hash, so datasets made by older code are never mistaken for current ones.
ALGORITHM_VERSION = "11"
# 11: the ``words_run_together`` finding on text extracted from PDF or DOCX (chunk boundaries unchanged)
# 10: a cut inside a block (a paragraph, mostly) that fits whole costs one chunk price; a heading inside a
#    list item or block quote (``- #### Why?``) is priced as a heading left at a chunk's end
# 9: a unit fits when it fits from its first character (``Packer._opening``: the scanner puts a boundary
#    there), not from its line's start with the indentation
# 8: with budget: embed_text, a unit that fits alone opens its chunk beside a prefix shortened to what it
#    leaves (``Reserve.make_room_for_units``); a unit's fit counts the prefix where it starts; a title
#    that is only the file name is left out of embed_text before a heading path (budget: embed_text);
#    the lists inside block quotes are units (``markdown.quoted_lists``); a boundary at the first
#    character of a unit on an indented line; a fenced code body starts at its fence
# 7: max_size bounds embed_text (prefix + text) by default (``budget: embed_text``): each chunk's prefix
#    is reserved from its budget and shortened when it would take more than half of it
# 6: every boundary of a document chosen at once by the global segmenter (chunking/segmenter.py) for
#    every strategy but fixed
# 5: sentence ends in Devanagari, Arabic, Urdu, Armenian, Ethiopic, Khmer, Myanmar; Thai/Lao phrase gaps;
#    a grapheme cluster longer than the budget is one over_budget chunk
# 4: table rows and code lines kept whole, also where an overlapping chunk starts; HTML and DOCX text no
#    longer lost (rowspan, late or legacy charsets, content controls, nested tables, tracked insertions,
#    footnotes and endnotes); lone-CR line ends are lines
# 3: PDF, DOCX and reStructuredText extraction and strategies

# What a config's YAML may expand to through its aliases (nodes + scalar characters, ``yamlbound``): a
# real config is a few hundred; a 590-byte 9 × 9 alias fan-out is 387 million.
CONFIG_MAX_EXPANSION = 100_000

# The chunker settings: a union of every registered strategy's model, told apart by ``strategy``.
ChunkerSettings = Annotated[
    Union[tuple(s.settings for s in STRATEGIES.values())],  # noqa: UP007
    Field(discriminator="strategy"),
]
_settings_adapter: TypeAdapter[Any] = TypeAdapter(ChunkerSettings)
STRATEGY_NAMES = tuple(STRATEGIES)


def parse_settings(raw: Mapping[str, Any] | ChunkerBase) -> ChunkerBase:
    """Validate a plain mapping of chunker settings (strategy defaults to ``auto``)."""
    if isinstance(raw, ChunkerBase):
        return raw
    data = dict(raw)
    data.setdefault("strategy", "auto")
    return _settings_adapter.validate_python(data)


_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def normalize_pattern(pattern: str) -> str:
    """A path glob as documents are named: forward slashes (Windows-style ``\\`` accepted), no ``./``.

    Raises ValueError for patterns that can never match a document id (ids are POSIX paths inside
    the source folder): absolute patterns and ``..`` segments.
    """
    normalized = pattern.replace("\\", "/")
    while normalized.startswith("./"):
        normalized = normalized[2:]
    if normalized.startswith("/") or _DRIVE.match(pattern):
        raise ValueError(f"{pattern!r} is absolute; patterns match paths relative to the source folder")
    if ".." in normalized.split("/"):
        raise ValueError(f"{pattern!r} has a '..' segment; document paths never leave the source folder")
    try:
        re.compile(_glob_to_regex(normalized))
    except re.error as exc:  # a reversed range such as [z-a]
        raise ValueError(f"{pattern!r} is not a valid glob: {exc.msg}") from None
    return normalized


def normalize_path(path: str) -> str:
    """A folder path from a config: ``\\`` becomes ``/``; a Windows drive path is refused on POSIX."""
    if os.name == "nt":
        return path
    if _DRIVE.match(path):
        raise ValueError(
            f"{path!r} is a Windows path; write a path of this machine (relative paths are "
            "resolved against the config file's folder)"
        )
    return path.replace("\\", "/")


class SourceConfig(_Strict):
    path: str
    include: list[str] = ["**/*"]
    exclude: list[str] = []
    # A symbolic link to a file is read when its target stays inside the source folder (``inside``), or
    # never (``never``); a target outside the source is always skipped with the reason.
    follow_links: Literal["inside", "never"] = "inside"

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if is_uri(value):
            raise ValueError(
                f"{value!r} is a URI; source.path must be a folder of this machine "
                "(URIs such as s3://bucket/prefix are for output.path)"
            )
        return normalize_path(value)

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return [_safe_pattern(p) for p in value]  # load_config refuses bad ones, each at its line


class OutputConfig(_Strict):
    # A folder (relative to the config's folder) or a URI pyarrow opens: s3://bucket/prefix, file:///abs, ...
    path: str = "./datasets"
    # A run that would remove more than this share of the previous snapshot's documents publishes
    # nothing unless told to (``--allow-mass-removal``): an emptied source is an unmounted share or a
    # failed sync far more often than a deliberate deletion (``chunkyard.chunking.pipeline.check_removals``).
    max_removed_share: float = Field(0.5, ge=0.0, le=1.0)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return value if is_uri(value) else normalize_path(value)


class RuleConfig(_Strict):
    match: str | list[str]
    chunker: dict[str, Any]

    @field_validator("match")
    @classmethod
    def _patterns(cls, value: str | list[str]) -> str | list[str]:
        # load_config refuses bad patterns, each at its own line and field.
        return _safe_pattern(value) if isinstance(value, str) else [_safe_pattern(p) for p in value]

    @property
    def patterns(self) -> list[str]:
        return [self.match] if isinstance(self.match, str) else list(self.match)


_CRON_ITEM = r"(?:\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/[0-9]+)?"
_CRON_FIELD = re.compile(rf"^{_CRON_ITEM}(?:,{_CRON_ITEM})*$")


# Per cron field: its name, its range, and the names it accepts (months, week days; L = last day).
_CRON_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {"L": None}),
    (
        "month",
        1,
        12,
        {
            name: number
            for number, name in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), start=1)
        },
    ),
    (
        "day of week",
        0,
        7,
        {name: number for number, name in enumerate("SUN MON TUE WED THU FRI SAT".split())},
    ),
)


def _cron_field_problem(index: int, text: str) -> str | None:
    """What is wrong with one field of a cron expression whose shape is right (``_CRON_FIELD``), or None.

    The shape alone let ``61 * * * *`` through to Prefect, which refused it only when a deployment
    was served."""
    label, low, high, names = _CRON_FIELDS[index]
    for item in text.split(","):
        values, _, step = item.partition("/")
        if step and int(step) < 1:
            return f"{label} step {step} must be at least 1"
        if values in ("*", "?"):
            continue
        for value in values.split("-"):
            if value.upper() in names:
                continue
            if not value.isdigit():
                kind = "a number or a name" if len(names) > 1 else "a number"
                return f"{label} {value!r} is not {kind}"
            if not low <= int(value) <= high:
                return f"{label} {int(value)} is out of range {low}-{high}"
    return None


class ScheduleConfig(_Strict):
    cron: str
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _valid(self) -> ScheduleConfig:
        fields = self.cron.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError(
                f"cron: not a 5-field cron expression (minute hour day month weekday): {self.cron!r}"
            )
        for index, text in enumerate(fields):
            problem = _cron_field_problem(index, text)
            if problem:
                raise ValueError(f"cron: {problem} in {self.cron!r}")
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"timezone: unknown time zone {self.timezone!r} (e.g. UTC, Europe/Paris)"
            ) from None
        return self


class LimitsConfig(_Strict):
    """What one document may cost; past a limit the document is skipped with the limit's name.

    ``max_file_mb``: bytes of a source file (never read past it), and all the members of a DOCX
    inflated; ``max_text_mb``: its extracted text, in millions of characters; ``max_inflated_mb``: the
    XML a DOCX inflates to (its ``.xml``/``.rels`` members' uncompressed sizes, checked before anything
    is inflated) and a PDF's decoded page content streams; ``document_seconds``: reading, extracting
    and chunking one document, after which it is abandoned.
    """

    max_file_mb: float = Field(default=256, gt=0)
    max_text_mb: float = Field(default=64, gt=0)
    max_inflated_mb: float = Field(default=16, gt=0)
    document_seconds: float = Field(default=120, gt=0)


_SINK_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
_TABLE_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class SinkConfig(_Strict):
    """A vector store that ``chunkyard sync`` keeps equal to a snapshot (``chunkyard.chunking.sinks``).

    ``embedder``: ``wordllama`` (offline, bundled), a local sentence-transformers model folder, or an
    OpenAI-compatible endpoint (``http(s)://HOST/v1`` or ``.../v1/embeddings``, optionally followed by
    ``#MODEL``).
    """

    name: str = Field(pattern=_SINK_NAME)
    type: Literal["lancedb", "pgvector"]
    uri: str | None = None  # lancedb: a folder (relative to the config's folder) or a LanceDB URI
    dsn: str | None = None  # pgvector: a libpq connection string or postgresql:// URL
    table: str = Field(pattern=_TABLE_NAME)
    embedder: str = "wordllama"

    @model_validator(mode="after")
    def _where(self) -> SinkConfig:
        if self.type == "lancedb" and not self.uri:
            raise ValueError("uri: a lancedb sink needs `uri` (a folder such as ./vectors)")
        if self.type == "pgvector" and not self.dsn:
            raise ValueError("dsn: a pgvector sink needs `dsn` (e.g. postgresql://localhost/rag)")
        if self.type == "lancedb" and self.dsn:
            raise ValueError("dsn: is for pgvector sinks; a lancedb sink takes `uri`")
        if self.type == "pgvector" and self.uri:
            raise ValueError("uri: is for lancedb sinks; a pgvector sink takes `dsn`")
        if not self.embedder.strip():
            raise ValueError("embedder: empty (use wordllama, a model folder or an endpoint URL)")
        return self


class RetentionConfig(_Strict):
    """How many snapshots ``chunkyard prune`` keeps per dataset version (besides protected ones)."""

    keep: WholeNumber = Field(ge=1)


class ConfigModel(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    version: WholeNumber = Field(gt=0)
    source: SourceConfig
    output: OutputConfig = OutputConfig()
    chunker: dict[str, Any] = {}
    rules: list[RuleConfig] = []
    schedule: ScheduleConfig | None = None
    reviewer: str | None = None
    limits: LimitsConfig = LimitsConfig()
    sinks: list[SinkConfig] = []
    retention: RetentionConfig | None = None

    @field_validator("sinks")
    @classmethod
    def _unique_sinks(cls, value: list[SinkConfig]) -> list[SinkConfig]:
        names = [sink.name for sink in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"sink names must be unique: {', '.join(twice)} appear more than once")
        return value


@dataclass
class Config:
    """A loaded, validated config with its paths resolved against the config file's folder."""

    model: ConfigModel
    path: Path | None
    text: str
    chunker: ChunkerBase
    rule_settings: list[tuple[list[str], ChunkerBase]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def version(self) -> int:
        return self.model.version

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    @property
    def source_dir(self) -> Path:
        return (self.base_dir / self.model.source.path).resolve()

    @property
    def output_location(self) -> Location:
        """Where snapshots go: a local folder, or a folder on another filesystem for a URI."""
        if is_uri(self.model.output.path):
            found = location(self.model.output.path)
            return found.resolve() if isinstance(found, Path) else found
        return (self.base_dir / self.model.output.path).resolve()

    @property
    def output_dir(self) -> Path:
        """The local output folder; a clear error for commands that need one when output.path is a URI."""
        return require_local(self.output_location, f"output.path of {self.path or 'the config'}")

    def settings_for(self, doc_id: str) -> ChunkerBase:
        """The chunker settings for a document: the first matching rule's, else the defaults."""
        for patterns, settings in self.rule_settings:
            if any(glob_match(pattern, doc_id) for pattern in patterns):
                return settings
        return self.chunker

    def rule_label(self, doc_id: str) -> str:
        """Which part of the config chunks a document: ``defaults`` or ``rules[i] (patterns)``."""
        for index, (patterns, _) in enumerate(self.rule_settings):
            if any(glob_match(pattern, doc_id) for pattern in patterns):
                return f"rules[{index}] ({', '.join(patterns)})"
        return "defaults"

    @cached_property
    def hash(self) -> str:
        return config_hash(self)

    def is_included(self, doc_id: str) -> bool:
        source = self.model.source
        return any(glob_match(p, doc_id) for p in source.include) and not any(
            glob_match(p, doc_id) for p in source.exclude
        )


def config_hash(config: Config) -> str:
    """Hash of everything that changes chunk output (not name, paths, schedule or reviewer)."""

    def describe(settings: ChunkerBase) -> dict[str, Any]:
        data = settings.model_dump(mode="json")
        if data.get("count_tokens", True):
            del data["count_tokens"]  # the default: configs written before the setting keep their hash
        if settings.unit == "tokens" and settings.tokenizer.endswith(".json"):
            tokenizer_path = resolve_tokenizer_path(settings.tokenizer, config.base_dir)
            data["tokenizer"] = "sha256:" + hashlib.sha256(tokenizer_path.read_bytes()).hexdigest()
        return data

    payload = {
        "algorithm": ALGORITHM_VERSION,
        "chunker": describe(config.chunker),
        "rules": [{"match": patterns, "chunker": describe(s)} for patterns, s in config.rule_settings],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def resolve_tokenizer_path(name: str, base_dir: Path) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()


# ---------------------------------------------------------------------------------------------
# Globs with ``**``


_glob_cache: dict[str, re.Pattern[str]] = {}


def glob_match(pattern: str, path: str) -> bool:
    """Match a POSIX relative path against a glob where ``**`` spans folders and ``*`` does not."""
    compiled = _glob_cache.get(pattern)
    if compiled is None:
        compiled = _glob_cache[pattern] = re.compile(_glob_to_regex(pattern))
    return compiled.fullmatch(path) is not None


def _glob_to_regex(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            close = pattern.find("]", i + 1)
            if close == -1:
                out.append(re.escape("["))
                i += 1
            else:
                body = pattern[i + 1 : close].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Loading with line numbers


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file; raise ConfigError naming file, line and field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError([ConfigIssue(str(path), None, "", "no such config file")]) from None
    except OSError as exc:
        raise ConfigError([ConfigIssue(str(path), None, "", f"cannot read config: {exc}")]) from None
    # UTF-8 (BOM optional), or UTF-16/32 with a BOM as YAML allows (Windows PowerShell 5 writes UTF-16).
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), "utf-8-sig")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        what = "UTF-8" if encoding == "utf-8-sig" else encoding.upper()
        line = raw.count(b"\n", 0, exc.start) + 1 if encoding == "utf-8-sig" else None
        raise ConfigError(
            [
                ConfigIssue(
                    str(path),
                    line,
                    "",
                    f"cannot read config: not valid {what} at byte {exc.start} (save it as UTF-8)",
                )
            ]
        ) from None
    return load_config_text(text.removeprefix("\ufeff"), path)


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def load_config_text(text: str, path: Path | None = None) -> Config:
    label = str(path) if path else "<config>"
    try:
        node = yamlbound.compose(text, CONFIG_MAX_EXPANSION)
    except yamlbound.YamlTooLarge as exc:  # refused before anything walks the expanded aliases
        raise ConfigError([ConfigIssue(label, exc.line, "", "invalid YAML: " + exc.problem)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_issue(exc, label, text)]) from None
    except RecursionError:  # PyYAML composes recursively: thousands of nested brackets
        raise ConfigError([ConfigIssue(label, None, "", "invalid YAML: nested too deeply")]) from None
    if node is None:
        raise ConfigError([ConfigIssue(label, 1, "", "the config is empty")])
    lines: dict[tuple[Any, ...], int] = {}
    issues: list[ConfigIssue] = []
    _index_lines(node, (), lines, issues, label, set())
    if issues:  # duplicate, non-scalar or recursive keys: reported before anything is built from them
        raise ConfigError(issues)
    try:
        data = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:  # constructor errors (bad tags, ...)
        raise ConfigError([_yaml_issue(exc, label, text)]) from None
    except RecursionError:
        raise ConfigError([ConfigIssue(label, None, "", "invalid YAML: nested too deeply")]) from None
    if not isinstance(data, dict):
        raise ConfigError([ConfigIssue(label, 1, "", "the config must be a mapping of keys to values")])
    if issues:
        raise ConfigError(issues)

    try:
        model = ConfigModel.model_validate(data)
    except ValidationError as exc:
        issues.extend(_issues_from_validation(exc, (), lines, label))
        model = None
    issues.extend(_pattern_issues(data, lines, label))

    raw_chunker = data.get("chunker") if isinstance(data.get("chunker"), dict) else {}
    chunker = _validate_settings(raw_chunker, ("chunker",), lines, label, issues)
    rule_settings: list[tuple[list[str], ChunkerBase]] = []
    raw_rules = data.get("rules") if isinstance(data.get("rules"), list) else []
    for index, rule in enumerate(raw_rules):
        if not isinstance(rule, dict) or not isinstance(rule.get("chunker"), dict):
            continue  # already reported by the model validation
        merged = _deep_merge(raw_chunker, rule["chunker"])
        rule_issues: list[ConfigIssue] = []
        settings = _validate_settings(merged, ("rules", index, "chunker"), lines, label, rule_issues)
        if chunker is None:
            # The defaults are broken and already reported: repeat only what the rule itself sets.
            prefix = f"rules[{index}].chunker."
            rule_issues = [
                i for i in rule_issues if i.field.removeprefix(prefix).split(".")[0] in rule["chunker"]
            ]
        issues.extend(rule_issues)
        match = rule.get("match")
        # A match that is not a string or a list of strings is reported by the model validation.
        patterns = (
            [match]
            if isinstance(match, str)
            else [p for p in (match if isinstance(match, list) else []) if isinstance(p, str)]
        )
        patterns = [_safe_pattern(p) for p in patterns]
        if settings is not None:
            rule_settings.append((patterns, settings))

    if model is not None and chunker is not None:
        base_dir = path.parent if path else Path.cwd()
        for where, settings in [(("chunker",), chunker)] + [
            (("rules", i, "chunker"), s) for i, (_, s) in enumerate(rule_settings)
        ]:
            if settings.unit == "tokens":
                problem = tokenizer_problem(settings.tokenizer, base_dir)
                if problem:
                    loc = where + ("tokenizer",)
                    issues.append(ConfigIssue(label, _line_for(loc, lines), _dotted(loc), problem))
    if issues:
        raise ConfigError(_dedupe(issues))
    assert model is not None and chunker is not None
    return Config(
        model=model,
        path=path.resolve() if path else None,
        text=text,
        chunker=chunker,
        rule_settings=rule_settings,
    )


def _pattern_issues(data: dict[str, Any], lines: dict[tuple[Any, ...], int], label: str) -> list[ConfigIssue]:
    """Every include, exclude and rules.match pattern that can never match, each at its own line
    (a field validator would stop at the first bad item of a list and point at the list)."""
    found: list[tuple[tuple[Any, ...], Any]] = []
    source = data.get("source")
    if isinstance(source, dict):
        for key in ("include", "exclude"):
            if isinstance(source.get(key), list):
                found += [(("source", key, i), p) for i, p in enumerate(source[key])]
    for i, rule in enumerate(data.get("rules") if isinstance(data.get("rules"), list) else []):
        match = rule.get("match") if isinstance(rule, dict) else None
        if isinstance(match, str):
            found.append((("rules", i, "match"), match))
        elif isinstance(match, list):
            found += [(("rules", i, "match", j), p) for j, p in enumerate(match)]
    issues = []
    for loc, pattern in found:
        if not isinstance(pattern, str):
            continue  # reported by the model validation
        try:
            normalize_pattern(pattern)
        except ValueError as exc:
            issues.append(ConfigIssue(label, _line_for(loc, lines), _dotted(loc), str(exc)))
    return issues


def field_line(text: str, field: str) -> int | None:
    """The line of a dotted top-level field (``source.path``) in config text, or None."""
    return _line_for(tuple(field.split(".")), _lines_of(text))


def _safe_pattern(pattern: str) -> str:
    try:
        return normalize_pattern(pattern)
    except ValueError:
        return pattern  # reported by the model validation


def tokenizer_problem(name: str, base_dir: Path) -> str | None:
    """Why a tokenizer name cannot be used offline, or None when it can."""
    from chunkyard.chunking.units import KNOWN_ENCODINGS

    if name.endswith(".json"):
        path = resolve_tokenizer_path(name, base_dir)
        if not path.is_file():
            return f"tokenizer file not found: {path}"
        return None
    if name not in KNOWN_ENCODINGS:
        known = ", ".join(sorted(KNOWN_ENCODINGS))
        return f"unknown tokenizer {name!r} (use one of: {known}, or a path to a tokenizer.json)"
    return None


def tokenizer_load_issues(config: Config) -> list[ConfigIssue]:
    """Every tokenizer.json of a loaded config (unit tokens) that exists but cannot be loaded, at the
    line that names it. ``load_config`` only checks that the file exists; commands that chunk call this
    so a broken file stops them at once instead of failing every document."""
    from chunkyard.chunking.errors import TokenizerError
    from chunkyard.chunking.units import get_tokenizer

    places: list[tuple[tuple[Any, ...], ChunkerBase]] = [(("chunker",), config.chunker)]
    for index, (rule, (_, settings)) in enumerate(
        zip(config.model.rules, config.rule_settings, strict=False)
    ):
        if "tokenizer" in rule.chunker or "unit" in rule.chunker:  # else it is the defaults' tokenizer
            places.append((("rules", index, "chunker"), settings))
    label = str(config.path) if config.path else "<config>"
    lines = _lines_of(config.text)
    issues: list[ConfigIssue] = []
    seen: set[str] = set()
    for where, settings in places:
        if settings.unit != "tokens" or not settings.tokenizer.endswith(".json"):
            continue
        path = str(resolve_tokenizer_path(settings.tokenizer, config.base_dir))
        if path in seen:
            continue
        seen.add(path)
        try:
            get_tokenizer(path)
        except TokenizerError as exc:
            loc = where + ("tokenizer",)
            issues.append(ConfigIssue(label, _line_for(loc, lines), _dotted(loc), str(exc)))
    return issues


def _lines_of(text: str) -> dict[tuple[Any, ...], int]:
    try:
        node = yamlbound.compose(text, CONFIG_MAX_EXPANSION)
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _index_lines(node, (), lines, [], "", set())
    return lines


def _validate_settings(
    raw: dict[str, Any],
    where: tuple[Any, ...],
    lines: dict[tuple[Any, ...], int],
    label: str,
    issues: list[ConfigIssue],
) -> ChunkerBase | None:
    try:
        return parse_settings(raw)
    except ValidationError as exc:
        issues.extend(_issues_from_validation(exc, where, lines, label))
        return None


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _yaml_issue(exc: yaml.YAMLError, label: str, text: str) -> ConfigIssue:
    """One located, one-line issue for a YAML syntax, reader or constructor error."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow (NUL, ...)
        line = text.count("\n", 0, max(0, exc.position)) + 1
        char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        problem = f"character #x{char:04x} is not allowed ({exc.reason})"
    else:
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        if context and isinstance(exc, yaml.constructor.ConstructorError):
            problem = f"{context}: {problem}"
        elif context and mark is not None:
            # Where the unclosed bracket or block began: the problem is often found lines later.
            opened = getattr(exc, "context_mark", None)
            if opened is not None and opened.line != mark.line:
                problem = f"{problem} ({context} that starts on line {opened.line + 1})"
    return ConfigIssue(label, line, "", "invalid YAML: " + " ".join(str(problem).split()))


def _index_lines(
    node: yaml.Node,
    path: tuple[Any, ...],
    lines: dict[tuple[Any, ...], int],
    issues: list[ConfigIssue],
    label: str,
    active: set[int],
) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in active:  # an alias to a node that contains it: ``a: &a [*a]``
        issues.append(ConfigIssue(label, node.start_mark.line + 1, _dotted(path), "recursive YAML alias"))
        return
    active.add(id(node))
    try:
        _index_children(node, path, lines, issues, label, active)
    finally:
        active.discard(id(node))


def _index_children(
    node: yaml.Node,
    path: tuple[Any, ...],
    lines: dict[tuple[Any, ...], int],
    issues: list[ConfigIssue],
    label: str,
    active: set[int],
) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                issues.append(
                    ConfigIssue(
                        label,
                        key_node.start_mark.line + 1,
                        _dotted(path),
                        "a key must be a plain name, not a list or mapping",
                    )
                )
                continue
            key = key_node.value
            if key in seen:
                issues.append(
                    ConfigIssue(label, key_node.start_mark.line + 1, _dotted(path + (key,)), "duplicate key")
                )
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _index_lines(value_node, path + (key,), lines, issues, label, active)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[path + (index,)] = item.start_mark.line + 1
            _index_lines(item, path + (index,), lines, issues, label, active)


def _issues_from_validation(
    exc: ValidationError, where: tuple[Any, ...], lines: dict[tuple[Any, ...], int], label: str
) -> list[ConfigIssue]:
    issues = []
    for error in exc.errors():
        loc = tuple(part for part in error["loc"] if part not in STRATEGY_NAMES or part == "strategy")
        # The union's tag appears in the location; drop it unless it is a real key.
        loc = where + loc
        message = error["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
            field_name, sep, rest = message.partition(": ")
            if sep and field_name.isidentifier():
                loc, message = loc + (field_name,), rest
        elif error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "union_tag_invalid":
            message = (
                f"unknown strategy {error['input'].get('strategy')!r} (use one of: "
                + ", ".join(s for s in STRATEGY_NAMES)
                + ")"
            )
            loc = loc + ("strategy",)
        elif error["type"] == "missing":
            message = "required key is missing"
        issues.append(ConfigIssue(label, _line_for(loc, lines), _dotted(loc), message))
    return issues


def _line_for(loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int | None:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _dedupe(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    seen, out = set(), []
    for issue in issues:
        if issue not in seen:
            seen.add(issue)
            out.append(issue)
    return out
