"""Presenting an evaluation: the comparison table printed by ``chunkyard eval`` and the PNG chart.

Method. The table has one row per config × retriever × k with mean ± standard deviation of recall,
precision and IoU over questions, hit rate and MRR, then one cost row per config. The chart (matplotlib,
Agg backend, imported only here and only when drawing) plots recall against IoU for every config and
retriever, one point per k joined by a line, and the hit rate of each as grouped bars.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from chunkyard.chunking.errors import import_extra
from chunkyard.chunking.evaluation.runner import ConfigEvaluation
from chunkyard.chunking.words import plural


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [fmt(headers), "  ".join("-" * w for w in widths)] + [fmt(row) for row in rows]


def format_table(evaluations: Sequence[ConfigEvaluation]) -> str:
    """The comparison table as text (metrics, then cost)."""
    headers = ["config", "retriever", "k", "recall", "precision", "IoU", "hit rate", "MRR"]
    rows = []
    for evaluation in evaluations:
        for row in evaluation.summary:
            rows.append(
                [
                    evaluation.label,
                    row["retriever"],
                    str(row["k"]),
                    f"{row['recall_mean']:.3f} ±{row['recall_std']:.2f}",
                    f"{row['precision_mean']:.3f} ±{row['precision_std']:.2f}",
                    f"{row['iou_mean']:.3f} ±{row['iou_std']:.2f}",
                    f"{row['hit_rate']:.3f}",
                    f"{row['mrr']:.3f}",
                ]
            )
    lines = _table(headers, rows, right={2, 3, 4, 5, 6, 7})
    cost_headers = [
        "config",
        "snapshot",
        "strategy",
        "chunks",
        "mean chars",
        "mean tokens",
        "embedded chars",
        "embedded tokens",
        "overlap",
    ]
    cost_rows = []
    for evaluation in evaluations:
        cost = evaluation.cost
        cost_rows.append(
            [
                evaluation.label,
                f"{evaluation.dataset} v{evaluation.version}/{evaluation.snapshot:04d}",
                evaluation.strategy,
                f"{int(cost['chunks']):,}",
                f"{cost['mean_chunk_chars']:.0f}",
                # 0 for chunks that have text: n_tokens was not counted (count_tokens: false), not zero tokens.
                f"{cost['mean_chunk_tokens']:.0f}"
                if cost["mean_chunk_tokens"] or not cost["chunks"]
                else "—",
                f"{int(cost['embedded_chars']):,}",
                f"{int(cost['embedded_tokens']):,}",
                f"{cost['overlap_factor']:.2f}×",
            ]
        )
    lines += [""] + _table(cost_headers, cost_rows, right={3, 4, 5, 6, 7, 8})
    return "\n".join(lines)


def write_chart(evaluations: Sequence[ConfigEvaluation], path: Path) -> Path:
    """Recall vs IoU per config and retriever (a point per k) and hit-rate bars, as a PNG."""
    matplotlib = import_extra("matplotlib", "The evaluation chart", "eval")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    markers = {"bm25": "o", "dense": "s"}
    colors = plt.get_cmap("tab10").colors
    series = [(evaluation, retriever) for evaluation in evaluations for retriever in evaluation.retrievers]
    figure, (scatter, bars) = plt.subplots(
        1, 2, figsize=(max(13.0, 7.0 + 1.2 * len(series)), 5.6), width_ratios=[1.0, max(1.0, len(series) / 4)]
    )
    for index, evaluation in enumerate(evaluations):
        color = colors[index % len(colors)]
        for retriever in evaluation.retrievers:
            rows = [evaluation.row(retriever, k) for k in evaluation.ks]
            xs = [row["recall_mean"] for row in rows]
            ys = [row["iou_mean"] for row in rows]
            scatter.plot(
                xs,
                ys,
                marker=markers.get(retriever, "^"),
                color=color,
                linestyle="-" if retriever == "bm25" else "--",
                label=f"{evaluation.label} · {retriever}",
            )
            for x, y, k in zip(xs, ys, evaluation.ks, strict=True):
                scatter.annotate(
                    f"k={k}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color
                )
    scatter.set_xlabel("recall (share of reference characters retrieved)")
    scatter.set_ylabel("IoU (relevant ÷ retrieved ∪ reference characters)")
    scatter.set_title("Recall vs IoU (one point per k)")
    scatter.set_xlim(0, 1.02)
    scatter.set_ylim(bottom=0)
    scatter.grid(alpha=0.3)
    scatter.legend(fontsize=7, loc="best")

    ks = sorted({k for evaluation in evaluations for k in evaluation.ks})
    width = 0.8 / max(1, len(ks))
    for position, (evaluation, retriever) in enumerate(series):
        for offset, k in enumerate(ks):
            if k not in evaluation.ks:
                continue
            value = evaluation.row(retriever, k)["hit_rate"]
            x = position - 0.4 + width * (offset + 0.5)
            bar = bars.bar(
                x,
                value,
                width=width * 0.95,
                color=colors[offset % len(colors)],
                label=f"k={k}" if position == 0 else None,
            )
            bars.bar_label(bar, labels=[f"{value:.2f}"], fontsize=7)
    bars.set_xticks(range(len(series)))
    bars.set_xticklabels(
        [f"{e.label}\n{r}" for e, r in series], fontsize=8, rotation=20, ha="right", rotation_mode="anchor"
    )
    bars.set_ylim(0, 1.1)
    bars.set_ylabel("hit rate (a reference overlapped in the top k)")
    bars.set_title("Hit rate")
    bars.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def format_stored(stored) -> str:
    """A stored evaluation (``store.StoredEvaluation``) as text, for the reviewer's Evaluation tab."""
    record = stored.record
    questions = record.get("questions", {})
    if isinstance(questions, dict):
        count = questions.get("count")
        counted = plural(count, "question") if isinstance(count, int) else "? questions"
        about = f"Questions: {questions.get('path', '?')} ({counted})"
    else:
        about = f"Questions: {questions}"
    head = [f"Evaluation of snapshot {stored.snapshot:04d} · {stored.created_at}", about, ""]
    headers = ["retriever", "k", "recall", "precision", "IoU", "hit rate", "MRR"]
    rows = [
        [
            str(row["retriever"]),
            str(row["k"]),
            f"{row['recall_mean']:.3f} ±{row['recall_std']:.2f}",
            f"{row['precision_mean']:.3f} ±{row['precision_std']:.2f}",
            f"{row['iou_mean']:.3f} ±{row['iou_std']:.2f}",
            f"{row['hit_rate']:.3f}",
            f"{row['mrr']:.3f}",
        ]
        for row in stored.summary
    ]
    lines = head + (_table(headers, rows, right={1, 2, 3, 4, 5, 6}) if rows else ["(no results)"])
    cost = stored.cost
    if cost:
        lines += [
            "",
            "Cost: "
            + ", ".join(
                f"{key.replace('_', ' ')} {value:,.0f}"
                if isinstance(value, (int, float))
                else f"{key} {value}"
                for key, value in cost.items()
            ),
        ]
    return "\n".join(lines)
