"""Comparing two snapshots (of one version or of two versions): which chunks came, went or stayed.

Method. A ``chunk_id`` hashes the document id, the span and the config hash, so it names a span,
not its text: when a document changes, a chunk can keep its id while its text differs. So each
document's chunks are matched by ``chunk_id`` and then compared by content (``text`` and
``embed_text``): *added* ids are only in B, *removed* only in A, *changed* in both with different
content, *unchanged* in both with the same. A document is added/removed when only one snapshot
has it, changed when any of its chunks differ. For the reviewer, ``moved_boundaries`` compares the
chunk ends of one document text in two snapshots.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from chunkyard.chunking.dataset import Snapshot


@dataclass
class DocumentDiff:
    doc_id: str
    status: str  # added | removed | changed | unchanged
    added: list[str] = field(default_factory=list)  # chunk ids, in B's order
    removed: list[str] = field(default_factory=list)  # chunk ids, in A's order
    changed: list[str] = field(default_factory=list)  # same id, other text or embed_text
    unchanged: int = 0


@dataclass
class SnapshotDiff:
    a: str
    b: str
    documents: list[DocumentDiff]

    def totals(self) -> dict[str, int]:
        docs = {
            status: sum(1 for d in self.documents if d.status == status)
            for status in ("added", "removed", "changed", "unchanged")
        }
        return {
            "chunks_added": sum(len(d.added) for d in self.documents),
            "chunks_removed": sum(len(d.removed) for d in self.documents),
            "chunks_changed": sum(len(d.changed) for d in self.documents),
            "chunks_unchanged": sum(d.unchanged for d in self.documents),
            **{f"documents_{status}": count for status, count in docs.items()},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "totals": self.totals(),
            "documents": [asdict(d) for d in self.documents],
        }


def _chunks_by_doc(snapshot: Snapshot) -> dict[str, list[tuple[str, int, str, str]]]:
    table = snapshot.chunks(["doc_id", "chunk_id", "chunk_index", "text", "embed_text"])
    out: dict[str, list[tuple[str, int, str, str]]] = {}
    for doc_id, cid, index, text, embed in zip(
        *(table.column(c).to_pylist() for c in table.column_names), strict=True
    ):
        out.setdefault(doc_id, []).append((cid, index, text, embed))
    for rows in out.values():
        rows.sort(key=lambda row: row[1])
    return out


def diff_snapshots(a: Snapshot, b: Snapshot) -> SnapshotDiff:
    """Per document of either snapshot (sorted by doc_id): chunks added, removed, changed, unchanged.

    Both snapshots are verified first (``Snapshot.verify``): a crafted one (repeated chunk ids, a
    ``doc_id`` leaving the source, text that is not the document's) is a ``DatasetError``, not a diff.
    """
    a.verify()
    b.verify()
    old, new = _chunks_by_doc(a), _chunks_by_doc(b)
    old_docs = set(a.documents(["doc_id"]).column("doc_id").to_pylist())
    new_docs = set(b.documents(["doc_id"]).column("doc_id").to_pylist())
    documents = []
    for doc_id in sorted(old_docs | new_docs):
        before = {cid: (text, embed) for cid, _, text, embed in old.get(doc_id, [])}
        after = {cid: (text, embed) for cid, _, text, embed in new.get(doc_id, [])}
        diff = DocumentDiff(doc_id, "unchanged")
        diff.added = [cid for cid, *_ in new.get(doc_id, []) if cid not in before]
        diff.removed = [cid for cid, *_ in old.get(doc_id, []) if cid not in after]
        diff.changed = [cid for cid, *_ in new.get(doc_id, []) if cid in before and before[cid] != after[cid]]
        diff.unchanged = sum(1 for cid in after if cid in before and before[cid] == after[cid])
        if doc_id not in old_docs:
            diff.status = "added"
        elif doc_id not in new_docs:
            diff.status = "removed"
        elif diff.added or diff.removed or diff.changed:
            diff.status = "changed"
        documents.append(diff)
    return SnapshotDiff(str(a.path), str(b.path), documents)


def format_diff(diff: SnapshotDiff, *, all_documents: bool = False) -> str:
    """The human-readable form: one line per document that differs, then the totals."""
    lines = [f"A: {diff.a}", f"B: {diff.b}"]
    for doc in diff.documents:
        if doc.status == "unchanged" and not all_documents:
            continue
        lines.append(
            f"  {doc.status:<9} {doc.doc_id}: +{len(doc.added)} -{len(doc.removed)} "
            f"~{len(doc.changed)} ={doc.unchanged}"
        )
    t = diff.totals()
    lines.append(
        f"documents: {t['documents_added']} added, {t['documents_removed']} removed, "
        f"{t['documents_changed']} changed, {t['documents_unchanged']} unchanged"
    )
    lines.append(
        f"chunks:    {t['chunks_added']} added, {t['chunks_removed']} removed, "
        f"{t['chunks_changed']} changed, {t['chunks_unchanged']} unchanged"
    )
    return "\n".join(lines)


def moved_boundaries(
    a_spans: list[tuple[int, int]], b_spans: list[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """Boundaries (chunk ends, the last excluded) only in A, and only in B, for one document text."""
    a_ends = {end for _, end in a_spans[:-1]}
    b_ends = {end for _, end in b_spans[:-1]}
    return sorted(a_ends - b_ends), sorted(b_ends - a_ends)


__all__ = ["DocumentDiff", "SnapshotDiff", "diff_snapshots", "format_diff", "moved_boundaries"]
