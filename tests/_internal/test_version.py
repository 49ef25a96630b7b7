"""The source's version is written once, below the public API, and agrees with the project's."""

from __future__ import annotations

import re
from pathlib import Path

import miniagent
from miniagent._internal import version


def test_the_public_version_is_the_source_version_and_the_projects() -> None:
    project = (Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    written = re.search(r'^version = "([^"]+)"', project, re.M)
    assert written is not None
    assert miniagent.__version__ == version.__version__ == written.group(1)
