"""``chunkyard eval`` end to end on the sample corpus, without Prefect: snapshots are built with
``chunkyard.chunking.pipeline`` directly, then evaluated through the core API and through the CLI (which
reuses them because the config hashes match)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunkyard.chunking.config import Config, load_config
from chunkyard.chunking.dataset import Snapshot, SnapshotWriter
from chunkyard.chunking.embeddings import EMBEDDINGS_DIR
from chunkyard.chunking.evaluation import (
    evaluate_snapshot,
    latest_evaluation,
    list_evaluations,
    load_questions,
    record_evaluation,
    reusable_snapshot,
    write_results,
)
from chunkyard.chunking.pipeline import (
    RunStats,
    build_manifest,
    carried_over,
    chunk_files,
    discover_files,
    make_batches,
    prepare_run,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "kb"
QUESTIONS = REPO / "eval" / "kb-questions.jsonl"


def build_snapshot(config: Config) -> Path:
    """What the flow does, minus Prefect: chunk every file and publish one snapshot."""
    context = prepare_run(config)
    writer = SnapshotWriter(context.version_path)
    stats = RunStats()
    for files, skipped in make_batches(discover_files(context)):
        result = chunk_files(config, files, context.previous_sha)
        writer.write(result.documents, result.chunks)
        stats.add(result.documents, result.chunks)
        if result.reused and context.previous is not None:
            documents, chunks = carried_over(context.previous, result.reused)
            writer.write(documents, chunks)
            stats.add(documents, chunks)
            stats.reused.extend(result.reused)
        stats.new.extend(result.chunked)
        stats.skipped.extend(skipped + result.skipped)
    return writer.publish(build_manifest(context, stats, "refresh" if context.previous else "full", []))


def write_config(folder: Path, name: str, max_size: int) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        version: 1
        source: {{path: {SAMPLE}, include: ["**/*"]}}
        output: {{path: {folder / "datasets"}}}
        chunker: {{strategy: recursive, unit: chars, max_size: {max_size}, overlap: 0}}
        """),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("eval")
    out = {}
    for name, size in (("small", 200), ("large", 2000)):
        config_path = write_config(folder, name, size)
        config = load_config(config_path)
        assert reusable_snapshot(config) is None
        snapshot = build_snapshot(config)
        assert reusable_snapshot(config) == snapshot
        out[name] = config_path
        out[f"{name}-snapshot"] = snapshot
    return out


@pytest.fixture(scope="module")
def evaluations(datasets):
    questions = load_questions(QUESTIONS)
    return questions, [
        evaluate_snapshot(datasets[f"{name}-snapshot"], questions, ks=(1, 5, 10), label=name)
        for name in ("small", "large")
    ]


def test_small_chunks_have_clearly_higher_iou_and_precision(evaluations):
    _, (small, large) = evaluations
    for retriever in ("bm25", "dense"):
        for k in (5, 10):
            s, g = small.row(retriever, k), large.row(retriever, k)
            assert s["iou_mean"] > 2 * g["iou_mean"], (retriever, k, s["iou_mean"], g["iou_mean"])
            assert s["precision_mean"] > 2 * g["precision_mean"], (retriever, k)
            # Large chunks carry the whole neighbourhood: their recall is at least as good.
            assert g["recall_mean"] >= s["recall_mean"] - 0.05, (retriever, k)
    assert small.cost["chunks"] > 5 * large.cost["chunks"]
    assert small.cost["mean_chunk_chars"] <= 200 < large.cost["mean_chunk_chars"]


def test_metrics_are_consistent_across_k(evaluations):
    questions, (small, _) = evaluations
    for retriever in ("bm25", "dense"):
        rows = [small.row(retriever, k) for k in (1, 5, 10)]
        assert rows[0]["questions"] == len(questions.questions)
        # A longer prefix of the same ranking never recalls less nor hits less.
        assert rows[0]["recall_mean"] <= rows[1]["recall_mean"] <= rows[2]["recall_mean"]
        assert rows[0]["hit_rate"] <= rows[1]["hit_rate"] <= rows[2]["hit_rate"]
        assert rows[0]["mrr"] <= rows[1]["mrr"] <= rows[2]["mrr"]
        assert rows[2]["hit_rate"] >= 0.7  # the retrievers find most answers in the sample corpus


def test_embeddings_cached_beside_the_snapshot_not_inside(datasets, evaluations):
    questions, (small, _) = evaluations
    snapshot = datasets["small-snapshot"]
    before = sorted(p.name for p in snapshot.iterdir())
    again = evaluate_snapshot(snapshot, questions, ks=(1, 5, 10), retrievers=("dense",), label="small")
    assert again.embeddings_cache == "hit"
    assert small.embeddings_cache in ("written", "hit")
    assert sorted(p.name for p in snapshot.iterdir()) == before
    # One cache per dataset and embedder, beside the snapshots (shared with `chunkyard sync`).
    assert [p.suffix for p in (snapshot.parent.parent / EMBEDDINGS_DIR).iterdir()] == [".sqlite"]
    assert again.row("dense", 5) == small.row("dense", 5)


def test_results_files_and_latest_evaluation(datasets, evaluations, tmp_path):
    questions, evaluated = evaluations
    paths = write_results(evaluated, questions, tmp_path / "out")
    summary = pq.read_table(paths["summary"])
    assert summary.num_rows == 2 * 2 * 3  # configs × retrievers × k
    per_question = pq.read_table(paths["questions"])
    assert per_question.num_rows == 2 * 2 * 3 * len(questions.questions)
    payload = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert [c["label"] for c in payload["configs"]] == ["small", "large"]
    assert paths["chart"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    snapshot = datasets["small-snapshot"]
    first = record_evaluation(evaluated[0], questions, out_dir=tmp_path / "out")
    second = record_evaluation(evaluated[0], questions)
    assert first is not None and second is not None
    found = latest_evaluation(snapshot.parent.parent)  # OUTPUT/NAME opens the newest snapshot
    assert found is not None and found.path == second
    assert found.snapshot == 1 and found.summary == evaluated[0].summary
    assert found.per_question().num_rows == 2 * 3 * len(questions.questions)
    assert [e.path for e in list_evaluations(snapshot)][-2:] == [first, second]
    # A later snapshot without its own evaluation falls back to the newest earlier one.
    later = build_snapshot(load_config(datasets["small"]))
    assert latest_evaluation(later).path == second
    assert latest_evaluation(later, earlier_snapshots=False) is None


def test_cli_eval_reuses_snapshots_and_writes_results(datasets, tmp_path, monkeypatch, capsys):
    import chunkyard.flows.cli as cli
    from chunkyard.flows.cli import evaluate

    def no_flow(config, session):
        raise AssertionError("a snapshot with the config's hash exists: the flow must not run")

    monkeypatch.setattr(evaluate, "_eval_chunk", no_flow)
    out = tmp_path / "results"
    code = cli.main(
        [
            "eval",
            str(datasets["small"]),
            str(datasets["large"]),
            "--questions",
            str(QUESTIONS),
            "--k",
            "1,5",
            "--retriever",
            "bm25",
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "reusing" in captured.err
    table = captured.out
    assert "small" in table and "large" in table and "IoU" in table and "hit rate" in table
    for name in ("summary.parquet", "questions.parquet", "results.json", "chart.png"):
        assert (out / name).is_file(), name
    assert pq.read_table(out / "summary.parquet").num_rows == 2 * 1 * 2


def test_cli_eval_reports_bad_question_lines(datasets, tmp_path, capsys):
    from chunkyard.flows.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"question": "ok", "references": [{"doc_id": "support/faq.md", "text": "Re-Gear"}]})
        + "\n"
        + "{oops\n"
        + json.dumps(
            {
                "question": "where",
                "references": [{"doc_id": "support/faq.md", "text": "not in the faq at all"}],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    code = main(["eval", str(datasets["small"]), "--questions", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}:2: not valid JSON" in err

    bad.write_text(
        "\n".join(
            json.dumps({"question": q, "references": [{"doc_id": "support/faq.md", "text": t}]})
            for q, t in (
                ("ok", "Is the Trailhead Club free?"),
                ("amb", "Re-Gear"),
                ("nf", "not in the faq at all"),
            )
        )
        + "\n",
        encoding="utf-8",
    )
    code = main(["eval", str(datasets["small"]), "--questions", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}:2: reference 1: passage is ambiguous" in err
    assert f"{bad}:3: reference 1: passage not found in support/faq.md" in err


def test_cli_rejects_bad_k(capsys):
    from chunkyard.flows.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "x.yaml", "--questions", "q.jsonl", "--k", "0,5"])
    assert exit_info.value.code == 2
    assert "at least 1" in capsys.readouterr().err


def test_eval_labels_of_configs_with_the_same_name_name_their_folders(tmp_path, monkeypatch):
    """``chunkyard eval cfg.yaml alt/cfg.yaml`` used to label the first config ``/cfg`` (the parent
    of a bare file name is ``.``, whose name is empty), which reads as an absolute path."""
    from chunkyard.flows.cli.evaluate import eval_labels

    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert eval_labels([Path("cfg.yaml"), Path("alt/cfg.yaml")]) == ["here/cfg", "alt/cfg"]
    assert eval_labels([Path("cfg.yaml"), Path("../cfg.yaml")]) == ["here/cfg", f"{tmp_path.name}/cfg"]
    assert eval_labels([Path("a.yaml"), Path("b.yaml")]) == ["a", "b"]


def test_evaluation_package_imports_no_heavy_or_forbidden_modules():
    script = (
        "import sys, chunkyard.chunking.evaluation, chunkyard.chunking.evaluation.report; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('prefect', 'PySide6', 'bm25s', 'wordllama', 'matplotlib'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_cli_eval_chunks_when_no_snapshot_matches(tmp_path, monkeypatch, capsys):
    import chunkyard.flows.cli as cli
    from chunkyard.flows.cli import evaluate

    calls: list[str] = []

    def fake_flow(config, session):  # stands in for the Prefect flow: same pipeline, no server
        calls.append(config.name)
        return build_snapshot(config)

    monkeypatch.setattr(evaluate, "_eval_chunk", fake_flow)
    config = write_config(tmp_path, "fresh", 600)
    out = tmp_path / "results"
    args = ["eval", str(config), "--questions", str(QUESTIONS), "--retriever", "bm25", "--out", str(out)]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert calls == ["fresh"]
    assert cli.main(args + ["--refresh"]) == 0
    assert calls == ["fresh", "fresh"]
    assert cli.main(args) == 0
    assert calls == ["fresh", "fresh"]  # reused


def test_cli_eval_checks_references_in_the_source_before_chunking(tmp_path, monkeypatch, capsys):
    import chunkyard.flows.cli as cli
    from chunkyard.flows.cli import evaluate

    def no_flow(config, session):
        raise AssertionError("bad references must stop the run before chunking")

    monkeypatch.setattr(evaluate, "_eval_chunk", no_flow)
    config = write_config(tmp_path, "unchunked", 600)
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"question": "q", "references": [{"doc_id": "support/missing.md", "text": "anything"}]})
        + "\n",
        encoding="utf-8",
    )
    assert cli.main(["eval", str(config), "--questions", str(questions)]) == 2
    assert (
        f"{questions}:1: reference 1: no document 'support/missing.md' in the source of"
        in capsys.readouterr().err
    )


def test_cli_eval_refuses_a_config_whose_chunking_would_be_refused_before_evaluating_any(
    tmp_path, capsys, monkeypatch
):
    """A changed config under an existing version: eval used to evaluate the other configs first, then
    start the flow, print Prefect's traceback of RunRefused, and only then the one-line error."""
    import chunkyard.flows.cli as cli
    from chunkyard.flows.cli import evaluate

    def no_flow(config, session):
        raise AssertionError("a refused config must stop eval before any chunking")

    monkeypatch.setattr(evaluate, "_eval_chunk", no_flow)
    first = write_config(tmp_path, "same", 600)
    build_snapshot(load_config(first))
    (tmp_path / "changed").mkdir()
    changed = write_config(tmp_path / "changed", "same", 300)
    changed.write_text(
        changed.read_text().replace(str(tmp_path / "changed" / "datasets"), str(tmp_path / "datasets")),
        encoding="utf-8",
    )
    other = write_config(tmp_path, "other", 600)  # reusable: it would have been evaluated first
    build_snapshot(load_config(other))
    code = cli.main(
        [
            "eval",
            str(other),
            str(changed),
            "--questions",
            str(QUESTIONS),
            "--retriever",
            "bm25",
            "--out",
            str(tmp_path / "results"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"chunkyard: error: config changed since {tmp_path / 'datasets' / 'same' / 'v1' / '0001'} "
        f"(config hash {load_config(first).hash} → {load_config(changed).hash}) but version is still 1: bump "
        f"`version` in {changed} so the new chunks go to a new dataset version"
    ]
    assert not (tmp_path / "results").exists()


def test_cli_eval_refuses_two_configs_that_would_write_one_dataset_version(tmp_path, capsys, monkeypatch):
    """Neither has a snapshot yet: the first would be chunked and evaluated, the second then refused."""
    import chunkyard.flows.cli as cli
    from chunkyard.flows.cli import evaluate

    monkeypatch.setattr(
        evaluate, "_eval_chunk", lambda config, session: pytest.fail("nothing may be chunked")
    )
    (tmp_path / "b").mkdir()
    first = write_config(tmp_path, "twin", 600)
    second = write_config(tmp_path / "b", "twin", 300)
    second.write_text(
        second.read_text().replace(str(tmp_path / "b" / "datasets"), str(tmp_path / "datasets")),
        encoding="utf-8",
    )
    code = cli.main(["eval", str(first), str(second), "--questions", str(QUESTIONS)])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line == (
        f"chunkyard: error: {first} and {second} both write twin v1 in {tmp_path / 'datasets'} with "
        "different chunking settings: give one another name or version"
    )


def test_cost_table_says_tokens_were_not_counted_rather_than_zero(tmp_path):
    """With ``count_tokens: false`` n_tokens is null: the cost table printed 'mean tokens 0'."""
    from chunkyard.chunking.evaluation.report import format_table

    path = write_config(tmp_path, "uncounted", 600)
    path.write_text(
        path.read_text().replace("overlap: 0}", "overlap: 0, count_tokens: false}"), encoding="utf-8"
    )
    snapshot = build_snapshot(load_config(path))
    evaluation = evaluate_snapshot(
        snapshot, load_questions(QUESTIONS), retrievers=("bm25",), label="uncounted"
    )
    header, rule, row = format_table([evaluation]).splitlines()[-3:]
    column = header.index("mean tokens")
    assert row[column : column + len("mean tokens")].strip() == "—", (header, row)
    assert evaluation.cost["embedded_tokens"] > 0  # what is sent to the embedder is still counted


@pytest.mark.parametrize("case", ["a file", "under a file"])
def test_cli_eval_refuses_an_unusable_out_folder_before_evaluating(datasets, tmp_path, capsys, case):
    """--out naming a file: eval evaluated every config, printed the tables, and only then failed with
    'file exists: ... (nothing was published; ...)'."""
    from chunkyard.flows.cli import main

    (tmp_path / "taken").write_text("not a folder", encoding="utf-8")
    out = tmp_path / "taken" if case == "a file" else tmp_path / "taken" / "results"
    code = main(
        [
            "eval",
            str(datasets["small"]),
            "--questions",
            str(QUESTIONS),
            "--retriever",
            "bm25",
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"chunkyard: error: --out {out}: {tmp_path / 'taken'} is a file; --out must name a folder (created if "
        "missing)"
    ]


def test_cli_eval_evaluates_a_config_listed_twice_once(datasets, tmp_path, capsys, monkeypatch):
    """``eval cfg.yaml ./cfg.yaml`` evaluated it twice under one label: the table, summary.parquet and
    questions.parquet held every row twice, with nothing to tell them apart."""
    from chunkyard.flows.cli import main

    monkeypatch.chdir(datasets["small"].parent)
    out = tmp_path / "results"
    code = main(
        [
            "eval",
            datasets["small"].name,
            f"./{datasets['small'].name}",
            "--questions",
            str(QUESTIONS),
            "--retriever",
            "bm25",
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"{datasets['small'].name}: listed twice; evaluated once" in captured.err
    summary = pq.read_table(out / "summary.parquet").to_pylist()
    assert [(row["config"], row["retriever"], row["k"]) for row in summary] == [("small", "bm25", 5)]


def test_a_k_larger_than_the_chunks_is_noted(tmp_path):
    """A k above the snapshot's chunk count retrieves every chunk: said, not silently scored."""
    snapshot = build_snapshot(load_config(write_config(tmp_path, "tiny", 600)))
    chunks = Snapshot.open(snapshot).chunks(["chunk_id"]).num_rows
    said: list[str] = []
    evaluate_snapshot(
        snapshot,
        load_questions(QUESTIONS),
        ks=(1, chunks + 5),
        retrievers=("bm25",),
        label="tiny",
        log=said.append,
    )
    assert f"note: tiny has {chunks} chunks: k = {chunks + 5} retrieves every chunk" in said
