"""Write a benchmark's result between its markers in benchmarks/README.md (a new section if absent)."""

from __future__ import annotations

from pathlib import Path


def write_section(readme: Path, begin: str, end: str, text: str, heading: str) -> None:
    """Replace what stands between ``begin`` and ``end`` with ``text``, or append ``## heading`` with it."""
    current = readme.read_text(encoding="utf-8")
    if begin in current:
        head, _, rest = current.partition(begin)
        _, _, tail = rest.partition(end)
        readme.write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")
    else:
        readme.write_text(
            current.rstrip("\n") + f"\n\n## {heading}\n\n{begin}\n{text}\n{end}\n", encoding="utf-8"
        )
