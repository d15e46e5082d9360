"""Closing the review loop end to end, driven through the command line as a user would.

run → ``chunkyard flag`` a boundary that splits a numbered procedure → ``chunkyard reprocess`` →
the procedure is in one chunk, every other document is byte-identical to the parent, the flag is
resolved → later runs keep honouring the constraint (carried over, and re-anchored after an edit
elsewhere) → an edit that removes the procedure makes the constraint stale, listed in the manifest.
"""

from __future__ import annotations

import itertools
import shutil
import textwrap
from pathlib import Path

import pyarrow.compute as pc
import pytest

from chunkyard.chunking.dataset import Snapshot
from chunkyard.chunking.decisions import active_constraints, open_flags, resolutions
from chunkyard.chunking.ledger import Ledger, ledger_path
from chunkyard.chunking.markdown import scan

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"
DOC = "handbook/onboarding.md"


def write_config(folder: Path, source: Path, output: Path) -> Path:
    # The recursive strategy knows no procedures, so at this budget it cuts a procedure that fits:
    # exactly what a reviewer flags.
    path = folder / "config.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: kb
        version: 1
        reviewer: tester
        source: {{path: {source}, include: ["**/*.md", "**/*.txt"]}}
        output: {{path: {output}}}
        chunker:
          strategy: recursive
          unit: tokens
          max_size: 384
          overlap: 16
        """),
        encoding="utf-8",
    )
    return path


def run_cli(*args: str) -> int:
    from chunkyard.flows.cli import main

    return main(list(args))


def doc_rows(snapshot: Snapshot, doc_id: str) -> tuple[list[dict], list[dict]]:
    documents = snapshot.documents(doc_ids=[doc_id])
    chunks = snapshot.chunks(doc_ids=[doc_id])
    chunks = chunks.filter(pc.equal(chunks.column("doc_id"), doc_id))
    return documents.filter(pc.equal(documents.column("doc_id"), doc_id)).to_pylist(), chunks.to_pylist()


def spans(snapshot: Snapshot, doc_id: str) -> list[tuple[int, int]]:
    return sorted((row["start"], row["end"]) for row in doc_rows(snapshot, doc_id)[1])


def procedure(text: str) -> tuple[int, int]:
    groups = [g for g in scan(text).groups if g.kind == "procedure"]
    assert groups, "the sample document has a numbered procedure"
    group = max(groups, key=lambda g: g.end - g.start)
    return group.start, group.end


def whole(chunk_spans: list[tuple[int, int]], span: tuple[int, int], text: str) -> bool:
    start, end = span
    end = len(text[:end].rstrip())
    return any(a <= start and b >= end for a, b in chunk_spans)


def test_flag_reprocess_and_later_runs(prefect_server, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    dataset = output / "kb"

    # 1. A first run cuts the procedure.
    assert run_cli("run", str(config)) == 0
    first = Snapshot.open(dataset)
    text = first.document_text(DOC)
    proc = procedure(text)
    chunk_spans = spans(first, DOC)
    assert not whole(chunk_spans, proc, text)
    cut = next(i for i, (_, end) in enumerate(chunk_spans[:-1]) if proc[0] < end < proc[1])

    # 2. The reviewer flags the boundary that cuts it.
    assert (
        run_cli(
            "flag",
            str(dataset),
            "--doc",
            DOC,
            "--chunk",
            str(cut),
            "--reason",
            "split_procedure",
            "--boundary",
        )
        == 0
    )

    # 3. Reprocess: the procedure is kept whole, everything else is the parent's, the flag resolved.
    capsys.readouterr()
    assert run_cli("reprocess", str(config)) == 0
    assert "resolved" in capsys.readouterr().out
    second = Snapshot.open(dataset)
    manifest = second.manifest
    assert (second.number, manifest["kind"], manifest["parent_snapshot"]) == (2, "reprocess", 1)
    assert [(f["doc_id"], f["reason"], f["status"]) for f in manifest["applied_flags"]] == [
        (DOC, "split_procedure", "resolved")
    ]
    assert manifest["counts"]["changed"] == 1
    assert manifest["counts"]["reused"] == manifest["counts"]["documents"] - 1
    assert whole(spans(second, DOC), proc, text)
    assert not any("constraint_unmet" in row["findings"] for row in doc_rows(second, DOC)[1])
    for doc_id in first.documents(["doc_id"]).column("doc_id").to_pylist():
        if doc_id != DOC:
            assert doc_rows(second, doc_id) == doc_rows(first, doc_id), doc_id  # byte-identical rows
    with Ledger(ledger_path(second.path)) as ledger:
        events = ledger.events("kb", 1)
    assert open_flags(events) == []
    [resolution] = resolutions(events)
    assert resolution.snapshot == 2 and resolution.flag.doc_id == DOC
    [constraint] = active_constraints(events)[DOC]
    assert constraint.kind == "keep_together" and constraint.origin == "flag"
    assert [c["status"] for c in manifest["constraints"]] == ["applied"]
    assert run_cli("reprocess", str(config)) == 0  # nothing left to do: no new snapshot
    assert Snapshot.open(dataset).number == 2

    # 4. A later run honours it: nothing changed, so the reprocessed snapshot stays the newest (no copy).
    assert run_cli("run", str(config)) == 0
    third = Snapshot.open(dataset)
    assert third.number == 2
    assert whole(spans(third, DOC), proc, text)
    assert [c["status"] for c in third.manifest["constraints"]] == ["applied"]

    # 5. An edit elsewhere in the document: rechunked, the constraint re-anchored by its text.
    path = source / DOC
    edited = "Read this page on your first day.\n\n" + path.read_text(encoding="utf-8")
    path.write_text(edited, encoding="utf-8")
    assert run_cli("run", str(config)) == 0
    fourth = Snapshot.open(dataset)
    new_text = fourth.document_text(DOC)
    assert fourth.manifest["counts"]["changed"] == 1
    assert [c["status"] for c in fourth.manifest["constraints"]] == ["reanchored"]
    assert whole(spans(fourth, DOC), procedure(new_text), new_text)

    # 6. An edit that removes the procedure: the constraint is stale, listed, never applied blindly.
    start, end = procedure(new_text)
    path.write_text(new_text[:start] + "The steps moved to the wiki.\n" + new_text[end:], encoding="utf-8")
    assert run_cli("run", str(config)) == 0
    fifth = Snapshot.open(dataset)
    [entry] = fifth.manifest["constraints"]
    assert entry["status"] == "stale" and entry["doc_id"] == DOC and entry["placed"] is None
    assert not any("constraint_unmet" in row["findings"] for row in doc_rows(fifth, DOC)[1])


def test_a_flag_that_cannot_be_met_says_why_and_what_to_do(
    prefect_server, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A procedure larger than max_size cannot be kept in one chunk: reprocess says so and how to fix it."""
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    config.write_text(
        config.read_text(encoding="utf-8").replace("max_size: 384", "max_size: 48"), encoding="utf-8"
    )
    dataset = output / "kb"
    assert run_cli("run", str(config)) == 0
    first = Snapshot.open(dataset)
    proc = procedure(first.document_text(DOC))
    chunk_spans = spans(first, DOC)
    cut = next(i for i, (_, end) in enumerate(chunk_spans[:-1]) if proc[0] < end < proc[1])
    assert (
        run_cli(
            "flag",
            str(dataset),
            "--doc",
            DOC,
            "--chunk",
            str(cut),
            "--reason",
            "split_procedure",
            "--boundary",
        )
        == 0
    )
    capsys.readouterr()
    assert run_cli("reprocess", str(config)) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.strip().startswith("flag "))
    assert ": unmet (the " in line and "characters it keeps together" in line and "raise max_size" in line, (
        out
    )


@pytest.mark.parametrize("case", ["no snapshot yet", "config changed"])
def test_a_refused_reprocess_is_one_line_before_any_flow_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """It printed Prefect's traceback of the flow run (the refusal is raised inside the flow) before the line."""
    from chunkyard.flows import reprocess as reprocess_module
    from chunkyard.flows.cli.session import PrefectServer

    from support.review_fixtures import CONFIG, build_dataset

    monkeypatch.setattr(reprocess_module, "reprocess", lambda *a, **k: pytest.fail("the flow started"))
    monkeypatch.setattr(PrefectServer, "ensure", lambda self: pytest.fail("a Prefect server was started"))
    root = tmp_path / "data"
    if case == "config changed":
        build_dataset(root)
    text = CONFIG.replace("SOURCE", str(root / "src")).replace("OUTPUT", str(root / "out"))
    if case == "config changed":
        text = text.replace("max_size: 420", "max_size: 300")
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert run_cli("reprocess", str(config)) == 2
    err = capsys.readouterr().err
    expected = {"no snapshot yet": "no snapshot to reprocess yet", "config changed": "bump `version`"}[case]
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err


def test_reprocess_again_writes_no_identical_snapshot_for_flags_that_stay_open(tmp_path: Path) -> None:
    """A flag the newest snapshot already answered (unmet, or met but reopened) is reported, not rechunked again.

    Every reprocess used to rechunk such a document and publish a snapshot identical to its parent.
    """
    from chunkyard.chunking.config import load_config_text
    from chunkyard.chunking.dataset import list_snapshots
    from chunkyard.chunking.reprocess import reprocess_snapshot
    from chunkyard.chunking.review import ReviewIndex

    from support.review_fixtures import CONFIG, build_dataset

    dataset = build_dataset(tmp_path)
    config = load_config_text(
        CONFIG.replace("SOURCE", str(tmp_path / "src")).replace("OUTPUT", str(tmp_path / "out")),
        tmp_path / "config.yaml",
    )
    doc = "handbook/returns-and-refunds.md"
    index = ReviewIndex.load(dataset)
    number = index.doc_number(doc)
    assert number is not None
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        # chunk 0 with its smaller neighbour is over max_size (unmet); chunk 5 gets a break (met)
        too_small = ledger.flag(index.target(index.row_of(number, 0)), "too_small", reviewer="tester")
        too_large = ledger.flag(index.target(index.row_of(number, 5)), "too_large", reviewer="tester")

    first = reprocess_snapshot(config)
    assert first.snapshot is not None and first.manifest["snapshot"] == 2
    statuses = {flag["event"]: flag["status"] for flag in first.manifest["applied_flags"]}
    assert statuses == {too_small: "unmet", too_large: "resolved"}

    with Ledger(ledger_path(index.snapshot.path)) as ledger:  # the reviewer reopens the met flag (undo)
        [resolution] = resolutions(ledger.events())
        ledger.retract(resolution.event, reviewer="tester")

    again = reprocess_snapshot(config)
    assert again.snapshot is None
    assert list_snapshots(dataset / "v1") == [1, 2]
    assert again.manifest["parent_snapshot"] == 2
    statuses = {flag["event"]: flag["status"] for flag in again.manifest["applied_flags"]}
    assert statuses == {too_small: "unmet", too_large: "resolved"}
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        events = ledger.events()
    assert [flag.id for flag in open_flags(events)] == [too_small]
    assert [(r.flag.id, r.snapshot) for r in resolutions(events)] == [(too_large, 2)]


def test_a_flag_unmet_because_of_a_break_inside_it_names_the_break(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keep span that fits max_size but holds a break constraint is unmet because the break wins.

    The hint used to say the span does not fit max_size and to raise it, which cannot help.
    """
    from chunkyard.chunking.config import load_config_text
    from chunkyard.chunking.constraints import BREAK, anchor, unit_around
    from chunkyard.chunking.decisions import record_constraint
    from chunkyard.chunking.reprocess import reprocess_snapshot
    from chunkyard.chunking.review import ReviewIndex
    from chunkyard.chunking.strategies import get_strategy
    from chunkyard.flows import reprocess as reprocess_module
    from chunkyard.flows.cli.session import PrefectServer
    from chunkyard.flows.run import RunResult

    from support.review_fixtures import CONFIG, build_dataset

    dataset = build_dataset(tmp_path)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        CONFIG.replace("SOURCE", str(tmp_path / "src")).replace("OUTPUT", str(tmp_path / "out")),
        encoding="utf-8",
    )
    config = load_config_text(config_file.read_text(encoding="utf-8"), config_file)
    doc = "handbook/returns-and-refunds.md"
    index = ReviewIndex.load(dataset)
    number = index.doc_number(doc)
    assert number is not None
    text = index.document_text(number)
    settings = config.settings_for(doc)
    layout = get_strategy(settings.strategy)(text, settings, doc)
    # The keep a mid_sentence flag becomes: the sentences around the chunk's end, well within max_size.
    # The first chunk whose end gives such a keep (chunk 2 when every heading opened a chunk; small
    # sections now share chunks, so the chunk ends moved).
    for k in itertools.count():
        row = index.row_of(number, k)
        assert row is not None, "no chunk of the document ends inside a short sentence run"
        keep = unit_around(text, layout, int(index.end[row]), "mid_sentence")
        if keep is not None and keep[1] - keep[0] < settings.max_size / 2:
            break
    inside = text.index(" ", (keep[0] + keep[1]) // 2) + 1
    with Ledger(ledger_path(index.snapshot.path)) as ledger:
        ledger.flag(index.target(row), "mid_sentence", reviewer="tester")
        brk = record_constraint(
            ledger,
            config.name,
            config.version,
            index.snapshot_number,
            anchor(text, doc, index.doc_sha256[number], BREAK, inside),
            reviewer="tester",
        )

    monkeypatch.setattr(PrefectServer, "ensure", lambda self: None)
    monkeypatch.setattr(
        reprocess_module,
        "reprocess",
        lambda config, output=None: RunResult(*vars(reprocess_snapshot(config, output)).values()),
    )
    capsys.readouterr()
    assert run_cli("reprocess", str(config_file)) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.strip().startswith("flag "))
    assert ": unmet (" in line and "raise max_size" not in line, out
    assert f"break_here constraint {brk.id} set in the reviewer, at {inside}, lies inside" in line, out


def test_reprocess_json_with_nothing_to_do_names_the_dataset_and_version(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--json` gave {"snapshot": null, "parent_snapshot": 1, ...} without name and version when nothing changed."""
    import json

    from chunkyard.chunking.reprocess import reprocess_snapshot
    from chunkyard.flows import reprocess as reprocess_module
    from chunkyard.flows.cli.session import PrefectServer
    from chunkyard.flows.run import RunResult

    from support.review_fixtures import CONFIG, build_dataset

    build_dataset(tmp_path)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        CONFIG.replace("SOURCE", str(tmp_path / "src")).replace("OUTPUT", str(tmp_path / "out")),
        encoding="utf-8",
    )
    monkeypatch.setattr(PrefectServer, "ensure", lambda self: None)
    monkeypatch.setattr(
        reprocess_module,
        "reprocess",
        lambda config, output=None: RunResult(*vars(reprocess_snapshot(config, output)).values()),
    )
    capsys.readouterr()
    assert run_cli("reprocess", str(config_file), "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert (
        summary["name"],
        summary["version"],
        summary["snapshot"],
        summary["parent_snapshot"],
        summary["path"],
    ) == ("fixture-kb", 1, None, 1, None)


def test_reprocess_notes_open_flags_left_on_an_earlier_version(
    prefect_server, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Flags belong to the version they were made on: after a version bump, reprocess applied none of
    v1's open flags without a word. It still applies only its own version's, and says so."""
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    output = tmp_path / "out"
    config = write_config(tmp_path, source, output)
    assert run_cli("run", str(config)) == 0
    assert run_cli("flag", str(output / "kb"), "--doc", DOC, "--chunk", "0", "--reason", "too_small") == 0
    config.write_text(
        config.read_text(encoding="utf-8")
        .replace("version: 1", "version: 2")
        .replace("max_size: 384", "max_size: 300"),
        encoding="utf-8",
    )
    assert run_cli("run", str(config)) == 0
    capsys.readouterr()
    assert run_cli("reprocess", str(config)) == 0
    out = capsys.readouterr().out
    assert "note: 1 open flag on v1 not applied here" in out, out
