"""`retention: {keep: N}` and `chunkyard prune`: old snapshots go, but never the newest, one a sink
holds, or one an open flag or a constraint refers to; `validate` checks the config against the
datasets already written."""

from __future__ import annotations

import shutil

import pytest

from chunkyard.chunking.config import load_config
from chunkyard.chunking.dataset import Snapshot, list_snapshots
from chunkyard.chunking.retention import plan_prune
from chunkyard.chunking.sync import SinkState, write_state

from support.cli import SAMPLE, run_cli
from support.sync_fixtures import publish, write_sync_config


def _dataset(tmp_path, snapshots: int, extra: str = "retention: {keep: 2}\n"):
    source = tmp_path / "src"
    shutil.copytree(SAMPLE, source)
    config_path = write_sync_config(tmp_path, source, "", extra=extra)
    page = source / "handbook" / "onboarding.md"
    for index in range(snapshots):
        page.write_text(page.read_text(encoding="utf-8") + f"\n\nEdit number {index}.\n", encoding="utf-8")
        publish(config_path)
    return config_path, tmp_path / "datasets" / "kb"


def test_prune_keeps_the_newest_n_and_what_sinks_and_flags_need(tmp_path, capsys):
    config_path, dataset = _dataset(tmp_path, 6)
    assert list_snapshots(dataset / "v1") == [1, 2, 3, 4, 5, 6]
    write_state(dataset, SinkState("lance", snapshot="v1/0002"))  # a sink holds 0002
    write_state(dataset, SinkState("pg", snapshot="v1/0001", target="v1/0003"))  # a sync to 0003 unfinished
    snapshot = Snapshot.open(dataset / "v1" / "0004")
    doc_id = snapshot.documents(["doc_id"]).column("doc_id")[0].as_py()
    assert (
        run_cli("flag", str(snapshot.path), "--doc", doc_id, "--chunk", "0", "--reason", "split_procedure")
        == 0
    )

    plan = plan_prune(load_config(config_path))
    assert plan.remove == []  # 1 pg, 2 lance, 3 pg's target, 4 a flag, 5-6 the newest two
    assert plan.kept["v1/0002"] == "held by sink lance" and "open flag" in plan.kept["v1/0004"]
    assert plan.kept["v1/0006"] == "the newest snapshot"

    write_state(dataset, SinkState("pg", snapshot="v1/0006"))  # pg finished, at the newest
    capsys.readouterr()
    assert run_cli("prune", str(config_path), "--dry-run") == 0
    assert "would remove 2 snapshots (v1/0001, v1/0003)" in capsys.readouterr().out
    assert list_snapshots(dataset / "v1") == [1, 2, 3, 4, 5, 6]
    assert run_cli("prune", str(config_path)) == 0
    assert "removed 2 snapshots (v1/0001, v1/0003)" in capsys.readouterr().out
    assert list_snapshots(dataset / "v1") == [2, 4, 5, 6]
    assert sorted(p.name for p in (dataset / "v1").iterdir() if p.name.startswith(".pruned")) == []
    Snapshot.open(dataset)  # what is left reads as before
    publish(config_path)  # and the next run builds on the newest
    assert list_snapshots(dataset / "v1")[-1] == 7


def test_prune_needs_retention_in_the_config(tmp_path, capsys):
    config_path, _ = _dataset(tmp_path, 1, extra="")
    assert run_cli("prune", str(config_path)) == 2
    assert "no retention in the config" in capsys.readouterr().err


def test_retention_keep_must_be_a_positive_whole_number(tmp_path, capsys):
    config_path = write_sync_config(tmp_path, SAMPLE, "", extra="retention: {keep: 0}\n")
    assert run_cli("validate", str(config_path)) == 2
    assert "retention.keep: Input should be greater than or equal to 1" in capsys.readouterr().err


def test_validate_refuses_what_run_would_refuse_against_the_datasets_written(tmp_path, capsys):
    config_path, _ = _dataset(tmp_path, 1, extra="")
    assert run_cli("validate", str(config_path)) == 0
    text = config_path.read_text(encoding="utf-8").replace("max_size: 120", "max_size: 200")
    config_path.write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert run_cli("validate", str(config_path)) == 2  # `run` refuses it: the version was not bumped
    err = capsys.readouterr().err
    assert f"{config_path}:2: version: config changed since" in err and "bump `version`" in err


@pytest.mark.parametrize("keep", [1, 3])
def test_plan_never_removes_the_newest_of_the_configs_version(tmp_path, keep):
    config_path, dataset = _dataset(tmp_path, 3, extra=f"retention: {{keep: {keep}}}\n")
    publish(write_sync_config(tmp_path, tmp_path / "src", "", version=2, max_size=200))
    config_path = write_sync_config(tmp_path, tmp_path / "src", "", extra=f"retention: {{keep: {keep}}}\n")
    plan = plan_prune(load_config(config_path))  # still at v1: its newest stays, v2's newest too
    assert "v1/0003" in plan.kept and "v2/0001" in plan.kept
    assert plan.remove == (["v1/0001", "v1/0002"] if keep == 1 else ["v1/0001"])


def test_validate_checks_a_sinks_model_folder(tmp_path, capsys):
    sinks = "sinks:\n  - {name: lance, type: lancedb, uri: ./vectors, table: kb, embedder: ./models/none}\n"
    config_path = write_sync_config(tmp_path, SAMPLE, sinks)
    assert run_cli("validate", str(config_path)) == 2
    err = capsys.readouterr().err
    assert f"{config_path}:6: sinks[0].embedder:" in err and "no such model folder" in err
    (tmp_path / "models" / "none").mkdir(parents=True)
    assert run_cli("validate", str(config_path)) == 0
