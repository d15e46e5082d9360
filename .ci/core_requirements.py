"""Print the requirements of the core test group, one a line, from pyproject.toml (the one list):
the base dependencies without Prefect, the eval, office and code extras, and the test runners of
the dev extra. No Prefect, no Qt: `.ci/run` installs these in a venv of their own and runs
tests/core there, proving the core needs neither (docs/design.md, "Layers")."""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
extras = project["optional-dependencies"]


def name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower().replace("_", "-")


wanted = [r for r in project["dependencies"] if not name(r).startswith("prefect")]
wanted += extras["eval"] + extras["office"] + extras["code"]
wanted += [r for r in extras["dev"] if name(r) in ("pytest", "hypothesis")]
if any(name(r).startswith(("prefect", "pyside6", "pytest-qt")) for r in wanted):
    sys.exit("core requirements must not hold Prefect or Qt")
print("\n".join(wanted))
