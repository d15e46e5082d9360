"""Build the optional C accelerators (chunking/native.py); everything else is in pyproject.toml.

Each extension is optional: without a C compiler the install still succeeds and the Python
reference implementations run. Each is stamped with the SHA-256 of its source, so that a build older
than its ``.c`` file is never used.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

ACCELERATORS = ["_mdscan", "_pack", "_segment"]


def extension(name: str) -> Extension:
    source = Path("chunking") / f"{name}.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    return Extension(
        f"chunkyard.chunking.{name}",
        [str(source)],
        optional=True,
        define_macros=[("CHUNKYARD_SOURCE_SHA256", f'"{digest}"')],
        extra_compile_args=["-O3"],
    )


setup(ext_modules=[extension(name) for name in ACCELERATORS])
