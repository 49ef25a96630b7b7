"""A Python environment holding miniagent and its core dependencies only, none of its extras.

A new virtual environment (no system site-packages, no pip) whose site-packages links the
installed distributions that ``pyproject.toml``'s ``dependencies`` need, found by walking
their metadata, and a ``.pth`` line for the miniagent source under test. Nothing is downloaded:
the linked files are the ones this test run already uses, so the versions match. A module of
an extra (uvicorn, temporalio, prometheus_client, ...) is really absent there, as on a machine
where ``pip install miniagent`` ran alone.

Reused by the CLI tests::

    from core_only import core_only_python
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import miniagent

SOURCE = Path(miniagent.__file__).resolve().parent.parent
PYPROJECT = SOURCE.parent / "pyproject.toml"


def core_requirements() -> list[Requirement]:
    """``[project] dependencies`` of the pyproject beside the source under test."""
    import tomllib  # Python 3.11+; these tests are skipped on 3.10

    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return [Requirement(line) for line in project["dependencies"]]


def core_distributions() -> list[metadata.Distribution]:
    """The installed distributions the core dependencies need, transitively (markers
    evaluated for this interpreter, no extra asked for)."""
    found: dict[str, metadata.Distribution] = {}
    todo = core_requirements()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found or (requirement.marker and not requirement.marker.evaluate(
                {"extra": ""})):
            continue
        found[name] = dist = metadata.distribution(requirement.name)
        todo += [Requirement(line) for line in dist.requires or ()]
    return list(found.values())


def _top_entries(dist: metadata.Distribution) -> set[str]:
    """The first path parts a distribution installed into site-packages (not its scripts)."""
    return {file.parts[0] for file in dist.files or () if file.parts[0] != ".."
            and file.parts[0] != "__pycache__"}


def core_only_python(folder: Path) -> Path:
    """The Python of a new environment in ``folder`` holding the core dependencies and the
    miniagent source under test, and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True).stdout.strip())
    installed = Path(sysconfig.get_path("purelib"))
    for dist in core_distributions():
        root = Path(str(dist.locate_file("")))
        for entry in _top_entries(dist):
            target = site / entry
            if not target.exists() and (root / entry).exists():
                os.symlink(root / entry, target)
    (site / "miniagent-under-test.pth").write_text(f"{SOURCE}\n", encoding="utf-8")
    assert installed != site
    return python
