"""The README installs extras the way a clone can: from the checkout, naming real extras."""

from __future__ import annotations

import re
from importlib.metadata import metadata
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
EXTRAS = set(metadata("miniagent").get_all("Provides-Extra") or [])


def test_no_install_by_package_name() -> None:
    # 'miniagent[mcp]' works only where the editable install exists already; a clone has '.'.
    assert re.findall(r"pip install [^`\n]*miniagent\[", README) == []


def test_installed_extras_exist() -> None:
    named = re.findall(r"pip install -e [\"']\.\[([a-z,]+)\][\"']", README)
    named += re.findall(r"bash scripts/setup\.sh ([a-z]+)", README)
    extras = {e for group in named for e in group.split(",")}
    assert {"mcp", "temporal", "otel"} <= extras
    assert extras - EXTRAS == set()
