"""Growth scan: CPU time of every hostile shape × configuration at n and 4n characters, to find superlinear cases.

The shapes and configurations are ``tests/support/hostile_shapes.py`` (76 × 19: every strategy, unit,
overlap and reader). Each case runs in a fresh process, warmed on a small text first (lazy imports,
compiled patterns), so one slow case cannot skew the next and a stall ends at ``--timeout``. A case is
flagged when 4× the text costs more than 6× the time and the larger run takes over 0.3 s (linear work
gives about 4×; the floor keeps timer noise on milliseconds out), or when it fails or times out.

    .venv/bin/python benchmarks/growth_scan.py [--size 20000] [--shapes dots,cr-] [--cases md,rectok] [--all]

Exit status 1 when a case is flagged. Every case it found so far is a test of its own (the hostile
tests of ``tests/core/test_segmenter.py``, ``test_units.py``, ``test_packer_native.py``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.hostile_shapes import CASES, SHAPES, chunk  # noqa: E402

GROWTH = 6.0  # 4× the text, more than this many times the time
FLOOR = 0.3  # seconds of the larger run below which growth is not judged


def _one(shape: str, case: str, n: int) -> float:
    chunk(SHAPES[shape](2000), case)  # warm: lazy imports, compiled patterns, the meter's encoder
    text = SHAPES[shape](n)
    started = time.process_time()
    chunk(text, case)
    return time.process_time() - started


def _measure(shape: str, case: str, n: int, timeout: float) -> float | str:
    argv = [sys.executable, __file__, "--one", shape, case, str(n)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timeout ({timeout:g} s)"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return "failed: " + (lines[-1][:120] if lines else f"exit {done.returncode}")
    return float(done.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000, help="n: each case runs at n and 4n characters")
    parser.add_argument("--shapes", default="", help="comma-separated parts of shape names (default: all)")
    parser.add_argument("--cases", default="", help=f"comma-separated, of {', '.join(CASES)} (default: all)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--all", action="store_true", help="print every case, not only the flagged ones")
    parser.add_argument("--one", nargs=3, metavar=("SHAPE", "CASE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        shape, case, n = args.one
        print(_one(shape, case, int(n)))
        return 0
    parts = [part for part in args.shapes.split(",") if part]
    shapes = [name for name in SHAPES if not parts or any(part in name for part in parts)]
    cases = [case for case in args.cases.split(",") if case] or list(CASES)
    unknown = sorted(set(cases) - set(CASES))
    if unknown or not shapes:
        parser.error(f"unknown cases {unknown}" if unknown else f"no shape matches {args.shapes!r}")
    n = args.size
    print(f"| shape | case | {n:,} chars (s) | {4 * n:,} chars (s) | growth | |")
    print("|---|---|---:|---:|---:|---|")
    flagged = 0
    for shape in shapes:
        for case in cases:
            small = _measure(shape, case, n, args.timeout)
            large = _measure(shape, case, 4 * n, args.timeout) if isinstance(small, float) else "not run"
            if isinstance(small, float) and isinstance(large, float):
                growth = large / max(small, 1e-3)
                bad = growth > GROWTH and large > FLOOR
                cells = (f"{small:.3f}", f"{large:.3f}", f"{growth:.1f}×")
            else:
                bad, cells = True, (str(small) if isinstance(small, str) else f"{small:.3f}", str(large), "—")
            flagged += bad
            if bad or args.all:
                print(
                    f"| {shape} | {case} | {' | '.join(cells)} | {'**flagged**' if bad else ''} |", flush=True
                )
    print(f"\n{len(shapes)} shapes × {len(cases)} cases at {n:,} and {4 * n:,} characters: {flagged} flagged")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
