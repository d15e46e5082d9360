"""Bytes written by a refresh that changes 1 % of the documents, for a few part sizes.

The corpus is ``--copies`` copies of a shared corpus under distinct folder names (15 copies of
k8s-enhancements: 10,245 files, 313 MB). For each part size (``CHUNKYARD_PART_BYTES``, see
docs/storage.md): a full ``chunkyard run``; then ``--share`` of the Markdown files edited at random
(a paragraph appended) and a second ``chunkyard run`` (the refresh measured); then the edits undone
and a run, and the same share edited as one run of consecutive files (clustered) and a run (the
second refresh measured). Measured for each refresh: its wall time, the bytes of the new snapshot
in files it does not share with the previous one (new inodes: what hit the disk, manifest
included), the manifest's ``storage.bytes_written``, the files of the snapshot, and a DuckDB full
scan of its chunks (``select count(*), sum(length(text)), count(distinct chunk_id) from
'SNAPSHOT/chunks.parquet'``, best of 3).

    .venv/bin/python benchmarks/refresh_bytes.py [--corpus DIR] [--copies 15] [--part-bytes 64000,256000]
        [--work /tmp/refresh-bench] [--write-readme]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpora import CORPORA

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = CORPORA / "k8s-enhancements"
ONE_PART = 10**13  # a target no corpus reaches: every snapshot is one part (the layout before parts)
EDIT = "\n\nEdited for the refresh benchmark: one more paragraph.\n"


def build_corpus(corpus: Path, copies: int, target: Path) -> list[Path]:
    if not target.exists():
        for index in range(1, copies + 1):
            shutil.copytree(corpus, target / f"copy-{index:02d}")
    return sorted(target.rglob("*.md"))


def chunkyard_run(config: Path, part_bytes: int) -> float:
    env = {**os.environ, "CHUNKYARD_PART_BYTES": str(part_bytes)}
    start = time.perf_counter()
    code = subprocess.run(
        [sys.executable, "-m", "chunkyard.flows.cli", "run", str(config)],
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=config.parent,
    ).returncode
    if code not in (0, 3):  # 3: published, some files skipped (empty ones: listed in the manifest)
        raise SystemExit(f"chunkyard run failed with exit code {code}")
    return time.perf_counter() - start


def snapshot_files(snapshot: Path) -> list[Path]:
    return [p for p in snapshot.rglob("*") if p.is_file()]


def measure(previous: Path, snapshot: Path, seconds: float) -> dict:
    import duckdb

    old = {p.stat().st_ino for p in snapshot_files(previous)}
    files = snapshot_files(snapshot)
    new_bytes = sum(p.stat().st_size for p in files if p.stat().st_ino not in old)
    total = sum(p.stat().st_size for p in files)
    manifest = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
    scans = []
    for _ in range(3):
        start = time.perf_counter()
        duckdb.sql(
            f"select count(*), sum(length(text)), count(distinct chunk_id) from '{snapshot}/chunks.parquet'"
        ).fetchall()
        scans.append(time.perf_counter() - start)
    return {
        "seconds": round(seconds, 1),
        "bytes_written": new_bytes,
        "manifest_bytes_written": manifest["storage"]["bytes_written"],
        "snapshot_bytes": total,
        "share_written": new_bytes / total,
        "files": len(files),
        "parts": manifest["storage"]["parts"],
        "parts_written": manifest["storage"]["parts_written"],
        "duckdb_scan_s": round(min(scans), 2),
        "changed": manifest["counts"]["changed"],
        "documents": manifest["counts"]["documents"],
    }


def edit(files: list[Path], chosen: list[Path]) -> dict[Path, bytes]:
    saved = {}
    for path in chosen:
        saved[path] = path.read_bytes()
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(EDIT)
    return saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--copies", type=int, default=15)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--part-bytes", default=f"64000,256000,1000000,{ONE_PART}")
    parser.add_argument("--work", type=Path, default=None, help="folder for the corpus and datasets (kept)")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="chunkyard-refresh-bench-"))
    base = work / "corpus"
    files = build_corpus(args.corpus, args.copies, base)
    size = sum(p.stat().st_size for p in files)
    count = max(1, round(len(files) * args.share))
    print(
        f"corpus: {len(files)} Markdown files, {size / 1e6:.1f} MB ({args.copies} copies of "
        f"{args.corpus.name}); {count} files edited per refresh; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    rng = random.Random(args.seed)
    results = []
    for part_bytes in [int(v) for v in args.part_bytes.split(",")]:
        output = work / f"out-{part_bytes}"
        shutil.rmtree(output, ignore_errors=True)
        config = work / f"config-{part_bytes}.yaml"
        config.write_text(
            f"name: bench\nversion: 1\nsource: {{path: {base}, include: ['**/*.md']}}\n"
            f"output: {{path: {output}}}\nchunker: {{strategy: auto, unit: tokens, max_size: 512, overlap: 32}}\n",
            encoding="utf-8",
        )
        version = output / "bench" / "v1"
        full = chunkyard_run(config, part_bytes)
        first = snapshot_files(version / "0001")
        row = {
            "part_bytes": part_bytes,
            "full_seconds": round(full, 1),
            "full_bytes": sum(p.stat().st_size for p in first),
            "full_files": len(first),
        }
        # Random: files drawn from the whole corpus.
        saved = edit(files, rng.sample(files, count))
        row["random"] = measure(version / "0001", version / "0002", chunkyard_run(config, part_bytes))
        for path, data in saved.items():
            path.write_bytes(data)
        chunkyard_run(config, part_bytes)  # back to the original files: snapshot 3
        # Clustered: one run of consecutive files (in discovery order).
        start = rng.randrange(len(files) - count)
        saved = edit(files, files[start : start + count])
        row["clustered"] = measure(version / "0003", version / "0004", chunkyard_run(config, part_bytes))
        for path, data in saved.items():
            path.write_bytes(data)
        results.append(row)
        print(json.dumps(row), flush=True)
    table = render(results, len(files), size, count, args)
    print(table)
    (work / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    if args.write_readme:
        from readme_section import write_section

        write_section(
            REPO / "benchmarks" / "README.md",
            "<!-- refresh:begin -->",
            "<!-- refresh:end -->",
            table,
            "Refresh bytes: 1 % of the documents changed (`refresh_bytes.py`)",
        )
    return 0


def render(results: list[dict], n_files: int, size: int, count: int, args) -> str:
    lines = [
        f"Corpus: {args.copies} copies of {args.corpus.name} ({n_files} Markdown files, {size / 1e6:.1f} MB); "
        f"each refresh edits {count} files ({args.share:.0%}: a paragraph appended), at random or as one "
        f"run of consecutive files; `chunkyard run` (thread runner); load average "
        f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores. Run {time.strftime('%Y-%m-%d')}.",
        "",
        "| part target | full run | snapshot | files | 1 % random: written | share | time | 1 % clustered: written | share | time | DuckDB scan |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results:
        target = "one part" if row["part_bytes"] >= ONE_PART else f"{row['part_bytes'] / 1e3:.0f} KB"
        r, c = row["random"], row["clustered"]
        lines.append(
            f"| {target} | {row['full_seconds']} s | {row['full_bytes'] / 1e6:.1f} MB | {row['full_files']} | "
            f"{r['bytes_written'] / 1e6:.1f} MB | {r['share_written']:.1%} | {r['seconds']} s | "
            f"{c['bytes_written'] / 1e6:.1f} MB | {c['share_written']:.1%} | {c['seconds']} s | {r['duckdb_scan_s']} s |"
        )
    lines += [
        "",
        "written: bytes of the refreshed snapshot in files it does not share with the previous one (new "
        "inodes, manifest included); share: of the refreshed snapshot's bytes; DuckDB scan: "
        "`count(*), sum(length(text)), count(distinct chunk_id)` over `SNAPSHOT/chunks.parquet`, best of 3.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
