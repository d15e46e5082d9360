"""Errors chunkyard raises for people: each says what was wrong, where, and what to do."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


class ChunkyardError(Exception):
    """Base class: an error whose message is fit to show a user as one line."""


class UsageError(ChunkyardError):
    """A command given something it cannot work with, refused before any work (the CLI exits 2)."""

    usage = True


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found in a config file, located by file, line and dotted field."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class ConfigError(ChunkyardError):
    """A config that cannot be used; carries every issue found, not just the first."""

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


class TokenizerError(ChunkyardError):
    """A tokenizer that is unknown or cannot be loaded offline."""


class DatasetError(ChunkyardError):
    """A dataset path that holds no snapshot, or a snapshot that cannot be read."""


class DatasetPathError(DatasetError, UsageError):
    """A path given for a dataset that names none (missing, a file, no published snapshot, several
    datasets, not local where it must be): refused before any work, so the CLI exits 2."""


class MissingExtra(ChunkyardError):
    """A feature whose optional dependencies (a pip extra of chunkyard) are not installed.

    One line naming the extra to install, e.g. "PDF support needs the office extra: pip install
    'chunkyard[office]'". The extras are declared in pyproject.toml: ``eval`` (bm25s, wordllama,
    matplotlib), ``office`` (pypdf, python-docx), ``code`` (tree-sitter grammars), ``gui`` (PySide6).
    """

    def __init__(self, feature: str, extra: str):
        self.feature, self.extra = feature, extra
        super().__init__(f"{feature} needs the {extra} extra: pip install 'chunkyard[{extra}]'")


def import_extra(module: str, feature: str, extra: str) -> Any:
    """Import ``module`` of the ``extra`` that ``feature`` needs; raise ``MissingExtra`` when it is not
    installed (the one place that turns a missing optional dependency into that message)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(feature, extra) from None
