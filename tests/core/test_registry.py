"""One registry entry per strategy: the settings union and the names derive from it (docs/design.md,
"Strategies"). That no import circle is left is tests/flows/test_import_graph.py's."""

from __future__ import annotations

import typing

import pytest

from chunkyard.chunking import config
from chunkyard.chunking.settings import ChunkerBase, FixedSettings
from chunkyard.chunking.strategies import STRATEGIES, get_strategy, register


def test_names_and_union_come_from_the_registry():
    assert config.STRATEGY_NAMES == tuple(STRATEGIES)
    union = typing.get_args(typing.get_args(config.ChunkerSettings)[0])
    assert union == tuple(entry.settings for entry in STRATEGIES.values())
    for name, entry in STRATEGIES.items():
        assert entry.name == name
        assert issubclass(entry.settings, ChunkerBase)
        assert config.parse_settings({"strategy": name}).__class__ is entry.settings
        assert get_strategy(name) is entry.layout


def test_register_refuses_a_twice_used_name_and_a_mismatched_model():
    with pytest.raises(ValueError, match="registered twice"):
        register("fixed", FixedSettings)(lambda text, settings, path: None)
    with pytest.raises(ValueError, match="FixedSettings says 'fixed'"):
        register("fixed2", FixedSettings)(lambda text, settings, path: None)
    assert "fixed2" not in STRATEGIES


def test_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown strategy 'paragraphs' .known: fixed, sentence"):
        get_strategy("paragraphs")
