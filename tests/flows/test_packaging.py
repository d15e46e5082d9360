"""The built wheel holds one top-level package, ``chunkyard`` (docs/design.md, "Layers"), with the C
accelerators when a compiler exists, and the documented API imports from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What a clean clone holds besides the sources (local venvs, outputs, caches, build artefacts).
NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv",
    "datasets",
    ".prefect",
    "build",
    "*.egg-info",
    "__pycache__",
    "*.so",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "evaluations",
    "out",
    "scratch",
)


def _compiler() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None


def test_wheel_holds_only_chunkyard_and_imports_from_a_fresh_install(tmp_path):
    # Built from a copy, so the build leaves nothing in the checkout.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("chunkyard-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    dist_info = [top for top in tops if top.endswith(".dist-info")]
    assert tops == {"chunkyard", *dist_info} and len(dist_info) == 1, sorted(tops)
    packages = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "packages"
    ]
    for package in packages:  # every package pyproject.toml declares, with its modules
        folder = package.replace(".", "/")
        assert f"{folder}/__init__.py" in names, package
    assert {"chunkyard/chunking/api.py", "chunkyard/gui/app.py"} <= set(names)
    if _compiler():
        for accelerator in ("_pack", "_mdscan"):
            assert any(
                n.startswith(f"chunkyard/chunking/{accelerator}") and n.endswith(".so") for n in names
            ), f"{accelerator} not built into the wheel"
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info[0]}/entry_points.txt").decode()
    assert "chunkyard = chunkyard.flows.cli:entry" in entry_points

    # Installed alone into a folder put first on the path: the import must come from there, not the checkout.
    target = tmp_path / "installed"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    script = (
        "from chunkyard import chunk_document, load_config; import chunkyard, chunkyard.chunking.native as n; "
        "print(chunkyard.__file__); "
        "print(len(chunk_document('# A\\n\\nOne. Two.', {'strategy': 'markdown', 'unit': 'chars', 'max_size': 5}))); "
        "print(sorted(set(n.status().values())))"
    )
    script += "; import chunkyard.chunking; print(chunkyard.chunking.__file__)"
    env = {**os.environ, "PYTHONPATH": str(target)}
    # Also started inside a checkout, whose chunkyard/ (only __init__.py) leads sys.path: the
    # subpackages still come from the installed copy.
    for folder, top in ((tmp_path, target), (source, source)):
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr[-3000:]
        where, count, status, chunking = result.stdout.strip().splitlines()
        assert Path(where).is_relative_to(top), where
        assert Path(chunking).is_relative_to(target), chunking
        assert count == "3"
        if _compiler():
            assert status == "['in use']", status
