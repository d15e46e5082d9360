"""Exit codes across the command line (README, "Exit codes"): 2 for bad usage or an invalid or refused
config, when nothing was done; 1 for a failure of the work itself.

`chunkyard flag --doc UNKNOWN`, a path that names no dataset, an export into a published snapshot, a
ledger import into a ledger that already holds events, a config without a schedule for
`chunkyard schedule`, ... exited 1, as if something had failed while working. The refusals of
`chunkyard run`, `reprocess` and `eval` (changed config under its version, missing source folder, ...)
are in tests/test_flow.py, test_reprocess.py and test_eval_end_to_end.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.ledger import Ledger, Target, ledger_path
from chunkyard.flows.cli import EXIT_FAILED, EXIT_USAGE, main


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.review_fixtures import build_dataset

    return build_dataset(tmp_path_factory.mktemp("exit-codes"))


def _with_events(dataset: Path, tmp_path: Path) -> Path:
    """A ledger holding one event, beside a copy of nothing else (``tmp_path/kb/review.sqlite``)."""
    snapshot = Snapshot.open(dataset)
    folder = tmp_path / "kb"
    folder.mkdir()
    with Ledger(folder / "review.sqlite") as ledger:
        ledger.flag(
            Target(snapshot.name, snapshot.version, snapshot.number, "notes/emoji.md", "sha", "id", 0),
            "other",
            reviewer="ann",
        )
    return folder


CASES = {
    "flag: unknown document": (
        ["flag", "{dataset}", "--doc", "nope.md", "--chunk", "0", "--reason", "other"],
        "no document 'nope.md'",
    ),
    "flag: no such chunk": (
        ["flag", "{dataset}", "--doc", "notes/emoji.md", "--chunk", "999", "--reason", "other"],
        "has no chunk 999",
    ),
    "flag: boundary after the last chunk": (
        [
            "flag",
            "{dataset}",
            "--doc",
            "notes/emoji.md",
            "--chunk",
            "{last}",
            "--reason",
            "other",
            "--boundary",
        ],
        "there is no boundary after it",
    ),
    "flag: empty reviewer": (
        [
            "flag",
            "{dataset}",
            "--doc",
            "notes/emoji.md",
            "--chunk",
            "0",
            "--reason",
            "other",
            "--reviewer",
            "",
        ],
        "a reviewer name is required",
    ),
    "flag: no dataset there": (
        ["flag", "{tmp}/nowhere", "--doc", "a.md", "--chunk", "0", "--reason", "other"],
        "no such dataset folder",
    ),
    "diff: no dataset there": (["diff", "{dataset}", "{tmp}/nowhere"], "no such dataset folder"),
    "diff: an empty version folder": (["diff", "{dataset}", "{tmp}/v1"], "no published snapshot"),
    "export: into a published snapshot": (
        ["export", "{dataset}", "--format", "jsonl", "--out", "{snapshot}/export.jsonl"],
        "published snapshot",
    ),
    "export: --since a file": (
        ["export", "{dataset}", "--format", "jsonl", "--out", "{tmp}/e.jsonl", "--since", "{tmp}/file.txt"],
        "a file, not a dataset folder",
    ),
    "export: --out in a missing folder": (
        ["export", "{dataset}", "--format", "jsonl", "--out", "{tmp}/missing/e.jsonl"],
        "no such folder for the export",
    ),
    "ledger export: no ledger there": (
        ["ledger", "export", "{tmp}", "--out", "{tmp}/e.jsonl"],
        "no review ledger here",
    ),
    "ledger export: --out is the ledger": (
        ["ledger", "export", "{ledger}", "--out", "{ledger}/review.sqlite"],
        "the review ledger itself",
    ),
    "ledger import: into a ledger with events": (
        ["ledger", "import", "{ledger}", "{tmp}/events.jsonl"],
        "already holds events",
    ),
    "ledger import: a bad line": (["ledger", "import", "{tmp}/new", "{tmp}/file.txt"], "not a ledger event"),
    "ledger import: no events file": (
        ["ledger", "import", "{tmp}/new", "{tmp}/missing.jsonl"],
        "cannot read the events file",
    ),
    "schedule: no schedule in the config": (["schedule", "{tmp}/config.yaml"], "no schedule"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refusals_before_any_work_exit_2(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture, case: str
) -> None:
    args, expected = CASES[case]
    snapshot = Snapshot.open(dataset)
    last = snapshot.chunks(["doc_id"], ["notes/emoji.md"]).num_rows - 1
    (tmp_path / "file.txt").write_text("not an event\n", encoding="utf-8")
    (tmp_path / "v1").mkdir()
    ledger = _with_events(dataset, tmp_path)
    main(["ledger", "export", str(ledger), "--out", str(tmp_path / "events.jsonl")])
    (tmp_path / "config.yaml").write_text(
        f"name: kb\nversion: 1\nsource: {{path: {tmp_path}}}\noutput: {{path: {tmp_path / 'out'}}}\n",
        encoding="utf-8",
    )
    before = ledger_path(snapshot.path).exists()
    capsys.readouterr()
    values = {"dataset": dataset, "snapshot": snapshot.path, "tmp": tmp_path, "ledger": ledger, "last": last}
    code = main([arg.format(**values) for arg in args])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, (code, err)
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err
    assert ledger_path(snapshot.path).exists() == before, "nothing was recorded"


def test_a_damaged_snapshot_is_still_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Exit 2 is for what the user gave; a dataset that cannot be read is a failure (1)."""
    from support.review_fixtures import build_dataset

    snapshot = Snapshot.open(build_dataset(tmp_path)).path
    from support.parts import only_part

    chunks = only_part(snapshot, "chunks.parquet")
    chunks.chmod(0o644)
    chunks.write_bytes(b"PAR1 not really parquet PAR1")
    code = main(["diff", str(snapshot), str(snapshot)])
    err = capsys.readouterr().err
    assert code == EXIT_FAILED and "cannot read" in err, err
