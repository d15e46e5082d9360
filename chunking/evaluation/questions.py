"""Question sets: JSONL parsing and validation, then locating each reference in the dataset's text.

Method. A question set is JSON Lines, one question per line::

    {"id": "q1", "question": "How do I ...?",
     "references": [{"doc_id": "guides/refunds.md", "start": 120, "end": 311},
                    {"doc_id": "guides/refunds.md", "text": "an exact passage"}]}

Parsing checks every line and collects *all* problems, each with its line number, before anything
else runs. Locating happens against the *extracted* text stored in a dataset snapshot (what chunk
offsets refer to): a ``start``/``end`` reference is bounds-checked; a ``text`` reference is searched
for verbatim, and, if absent, with any run of whitespace in the quote matching any run of whitespace
in the document (so passages can be quoted across hard-wrapped Markdown lines). A quote found
nowhere, or more than once, is an error naming its line and where it was found.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chunkyard.chunking.errors import ChunkyardError

ALLOWED_KEYS = frozenset({"id", "question", "references", "note", "tags"})
REFERENCE_KEYS = frozenset({"doc_id", "start", "end", "text"})


@dataclass(frozen=True)
class QuestionIssue:
    """One problem in a question file, located by line (1-based)."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


class QuestionSetError(ChunkyardError):
    """A question set that cannot be used; carries every problem found, one per line."""

    usage = True  # the CLI exits 2: nothing was evaluated

    def __init__(self, issues: list[QuestionIssue]):
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


@dataclass(frozen=True)
class Reference:
    """A reference as written: either a span (``start``/``end``) or a passage (``text``) in ``doc_id``."""

    doc_id: str
    start: int | None = None
    end: int | None = None
    text: str | None = None


@dataclass(frozen=True)
class Question:
    id: str
    line: int
    question: str
    references: tuple[Reference, ...]


@dataclass(frozen=True)
class Span:
    """A located, half-open span of a document's extracted text (code points)."""

    doc_id: str
    start: int
    end: int


@dataclass(frozen=True)
class LocatedQuestion:
    id: str
    line: int
    question: str
    spans: tuple[Span, ...]


@dataclass
class QuestionSet:
    label: str  # the file name, used in messages
    path: Path | None
    questions: list[Question]
    sha256: str

    @property
    def doc_ids(self) -> set[str]:
        return {ref.doc_id for q in self.questions for ref in q.references}


def load_questions(path: str | Path) -> QuestionSet:
    """Read and validate a JSONL question file; raise QuestionSetError listing every bad line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise QuestionSetError([QuestionIssue(str(path), None, "no such question file")]) from None
    except OSError as exc:
        raise QuestionSetError([QuestionIssue(str(path), None, f"cannot read: {exc}")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise QuestionSetError(
            [QuestionIssue(str(path), None, f"not valid UTF-8 at byte {exc.start}")]
        ) from None
    return parse_questions(text, str(path), path=path.resolve())


def parse_questions(text: str, label: str = "<questions>", *, path: Path | None = None) -> QuestionSet:
    """Validate JSONL text; blank lines are ignored; every problem is collected with its line."""
    issues: list[QuestionIssue] = []
    questions: list[Question] = []
    seen_ids: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue

        def bad(message: str, number: int = number) -> None:
            issues.append(QuestionIssue(label, number, message))

        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            bad(f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(item, dict):
            bad(f"expected a JSON object, got {type(item).__name__}")
            continue
        unknown = sorted(set(item) - ALLOWED_KEYS)
        if unknown:
            bad(
                f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                f"(allowed: {', '.join(sorted(ALLOWED_KEYS))})"
            )
        question = item.get("question")
        if not isinstance(question, str) or not question.strip():
            bad("'question' must be a non-empty string")
        qid = item.get("id", f"line-{number}")
        if not isinstance(qid, str | int) or isinstance(qid, bool) or not str(qid).strip():
            bad("'id' must be a non-empty string")
            qid = f"line-{number}"
        qid = str(qid)
        if qid in seen_ids:
            bad(f"duplicate id {qid!r} (first on line {seen_ids[qid]})")
        seen_ids.setdefault(qid, number)
        raw_refs = item.get("references")
        if not isinstance(raw_refs, list) or not raw_refs:
            bad(
                '\'references\' must be a non-empty list of {"doc_id", "start", "end"} or '
                '{"doc_id", "text"} objects'
            )
            continue
        references: list[Reference] = []
        for index, ref in enumerate(raw_refs, start=1):
            parsed = _parse_reference(ref, f"reference {index}", bad)
            if parsed is not None:
                references.append(parsed)
        if isinstance(question, str) and question.strip() and len(references) == len(raw_refs):
            questions.append(Question(qid, number, question.strip(), tuple(references)))
    if not issues and not questions:
        issues.append(QuestionIssue(label, None, "no questions in the file"))
    if issues:
        raise QuestionSetError(issues)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return QuestionSet(label, path, questions, digest)


def _parse_reference(ref: object, where: str, bad: Callable[[str], None]) -> Reference | None:
    if not isinstance(ref, dict):
        bad(f"{where}: expected an object with doc_id and text, or doc_id, start and end")
        return None
    ok = True
    unknown = sorted(set(ref) - REFERENCE_KEYS)
    if unknown:
        bad(
            f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"(allowed: {', '.join(sorted(REFERENCE_KEYS))})"
        )
        ok = False
    doc_id = ref.get("doc_id")
    if not isinstance(doc_id, str) or not doc_id.strip():
        bad(f"{where}: 'doc_id' must be a non-empty string (the path relative to the source folder)")
        ok = False
    has_span = "start" in ref or "end" in ref
    has_text = "text" in ref
    if has_span and has_text:
        bad(f"{where}: give either 'text' or 'start' and 'end', not both")
        return None
    if not has_span and not has_text:
        bad(f"{where}: needs 'text' (a passage to locate) or 'start' and 'end' (offsets)")
        return None
    if has_text:
        text = ref["text"]
        if not isinstance(text, str) or not text.strip():
            bad(f"{where}: 'text' must be a non-empty string")
            return None
        return Reference(doc_id, text=text) if ok else None
    start, end = ref.get("start"), ref.get("end")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        bad(f"{where}: 'start' and 'end' must both be integers (code-point offsets)")
        return None
    assert isinstance(start, int) and isinstance(end, int)
    if not 0 <= start < end:
        bad(f"{where}: need 0 <= start < end (got start {start}, end {end})")
        return None
    return Reference(doc_id, start=start, end=end) if ok else None


# ---------------------------------------------------------------------------------------------
# Locating


def find_passage(document: str, passage: str) -> list[tuple[int, int]]:
    """Every place ``passage`` occurs in ``document``: verbatim first, else whitespace-flexibly."""
    found: list[tuple[int, int]] = []
    position = document.find(passage)
    while position != -1:
        found.append((position, position + len(passage)))
        position = document.find(passage, position + 1)
    if found:
        return found
    words = passage.split()
    if not words:
        return []
    pattern = re.compile(r"\s+".join(re.escape(word) for word in words))
    return [(m.start(), m.end()) for m in pattern.finditer(document)]


def locate_questions(
    question_set: QuestionSet,
    text_of: Callable[[str], str | None],
    where: str,
) -> list[LocatedQuestion]:
    """Resolve every reference to a span of the document text ``text_of(doc_id)`` returns.

    ``text_of`` returns None for a document the dataset does not hold; ``where`` names the dataset
    in messages. Raises QuestionSetError listing every reference that is missing, out of bounds,
    not found or ambiguous.
    """
    issues: list[QuestionIssue] = []
    located: list[LocatedQuestion] = []
    cache: dict[str, str | None] = {}
    for question in question_set.questions:
        spans: list[Span] = []
        for index, ref in enumerate(question.references, start=1):
            label = f"reference {index}"
            if ref.doc_id not in cache:
                cache[ref.doc_id] = text_of(ref.doc_id)
            document = cache[ref.doc_id]

            def bad(message: str, question: Question = question) -> None:
                issues.append(QuestionIssue(question_set.label, question.line, message))

            if document is None:
                bad(f"{label}: no document {ref.doc_id!r} in {where}")
                continue
            if ref.text is None:
                assert ref.start is not None and ref.end is not None
                if ref.end > len(document):
                    bad(
                        f"{label}: end {ref.end} is past the end of {ref.doc_id} ({len(document)} characters)"
                    )
                    continue
                spans.append(Span(ref.doc_id, ref.start, ref.end))
                continue
            matches = find_passage(document, ref.text)
            if not matches:
                bad(f"{label}: passage not found in {ref.doc_id} ({where}): {_clip(ref.text)!r}")
            elif len(matches) > 1:
                offsets = ", ".join(str(start) for start, _ in matches[:5])
                more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
                bad(
                    f"{label}: passage is ambiguous: found {len(matches)} times in {ref.doc_id} "
                    f"(at offsets {offsets}{more}); quote a longer passage or give start/end"
                )
            else:
                spans.append(Span(ref.doc_id, *matches[0]))
        if len(spans) == len(question.references):
            located.append(LocatedQuestion(question.id, question.line, question.question, tuple(spans)))
    if issues:
        raise QuestionSetError(issues)
    return located


def source_text_reader(source_dir: Path, is_included: Callable[[str], bool]) -> Callable[[str], str | None]:
    """``text_of`` over a source folder (extracted the way a run extracts it), to check before chunking."""
    from chunkyard.chunking.documents import Skipped, read_document

    def text_of(doc_id: str) -> str | None:
        path = source_dir / doc_id
        if not is_included(doc_id) or not path.is_file():
            return None
        document = read_document(path, doc_id)
        return None if isinstance(document, Skipped) else document.text

    return text_of


def _clip(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
