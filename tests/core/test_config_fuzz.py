"""Issue 9, point 3: config fuzzing. Random and mutated YAML never raises anything but a located
ConfigError: every issue names the file, a line (``None`` only for whole-file problems) and says what
is wrong; or the config is accepted."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chunkyard.chunking.config import Config, load_config_text
from chunkyard.chunking.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
DEFAULT = (REPO / "config" / "default.yaml").read_text(encoding="utf-8")
LINES = DEFAULT.splitlines()
PATH = REPO / "config" / "fuzzed.yaml"  # never written: relative paths resolve against config/

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(
        [
            "[",
            "]",
            "{",
            "}",
            "&a",
            "*a",
            "!!python/object:os.system",
            "!!binary x",
            "- ",
            ": ",
            "'",
            '"',
            "|",
            ">",
            "%TAG",
            "---",
            "...",
            "~",
            ".inf",
            "0x1F",
            "1e999",
            "<<: *a",
            "\t",
            "\x00",
            "\ufeff",
        ]
    ),
)


def check(text: str) -> None:
    """Loading ``text`` returns a Config or raises a ConfigError with located issues; nothing else."""
    try:
        config = load_config_text(text, PATH)
    except ConfigError as exc:
        assert exc.issues, "a ConfigError with no issue"
        for issue in exc.issues:
            assert issue.file == str(PATH), issue
            assert issue.line is None or (isinstance(issue.line, int) and issue.line >= 1), issue
            assert isinstance(issue.message, str) and issue.message.strip(), issue
            assert isinstance(issue.field, str), issue
            str(issue)  # printable
        return
    assert isinstance(config, Config)
    assert config.hash  # a config that loads can be hashed


def test_default_config_loads() -> None:
    check(DEFAULT)


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    check(text)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_decoded_leniently(data: bytes) -> None:
    check(data.decode("utf-8", errors="replace"))


@st.composite
def mutated(draw: st.DrawFn) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "value", "indent", "insert", "truncate"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "value":
            head, sep, _ = lines[i].partition(":")
            value = draw(VALUES)
            lines[i] = f"{head}{sep or ':'} {value!s}" if not isinstance(value, str) else f"{head}: {value}"
        elif op == "indent":
            lines[i] = " " * draw(st.integers(0, 6)) + lines[i].lstrip()
        elif op == "insert":
            lines.insert(i, draw(st.text(max_size=30)))
        else:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    return "\n".join(lines) + "\n"


@FUZZ
@given(mutated())
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {max_size: 1e999}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {max_size: .inf}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nrules: [{match: 1, chunker: {}}]\n")
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {tokenizer: [1]}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {strategy: [auto]}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {strategy: {a: 1}}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {? [a, b] : 1}\n")
@example("{[1, 2]: x, name: x}\n")
@example("name: !!binary aGk=\nversion: 1\nsource: {path: .}\n")
@example("name: !!python/object:os.system x\n")
@example("a: &a [*a]\n")
@example("name: &n {a: *n}\n")
@example("chunker: " + "[" * 5000 + "]" * 5000 + "\n")
@example("name: x\nversion: 1\nsource: {path: .}\nname: y\n")
@example("name: x\x00\n")
@example("name: x\nversion: 1\nsource: {path: .}\nschedule: {cron: 1, timezone: 2}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nschedule: {cron: '* * * * *', timezone: '../../etc'}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nschedule: {cron: '* * * * *', timezone: 'a\\x00'}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nchunker: {unit: tokens, tokenizer: 1.json}\n")
@example("name: x\nversion: 1\nsource: {path: .}\nrules: [{match: 'a', chunker: {strategy: nope}}]\n")
def test_mutated_default_config(text: str) -> None:
    check(text)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            ["name", "version", "source", "output", "chunker", "rules", "schedule", "reviewer", "extra"]
        ),
        st.recursive(
            VALUES,
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=6,
    )
)
def test_random_structures(data: dict) -> None:
    import yaml

    check(yaml.safe_dump(data, allow_unicode=True))
