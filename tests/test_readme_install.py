"""The docs (README.md and docs/) install extras the way a clone can: from the checkout,
naming real extras."""

from __future__ import annotations

import re
from importlib.metadata import metadata

from docs_pages import ROOT, pages

README = "\n".join(page.read_text(encoding="utf-8") for page in pages())


def extras() -> set[str]:
    """The checkout's extras (the installed metadata may be of another checkout's install;
    it is the answer only on Python 3.10, which has no ``tomllib``)."""
    try:
        import tomllib
    except ImportError:
        return set(metadata("miniagent").get_all("Provides-Extra") or [])
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


EXTRAS = extras()


def test_no_install_by_package_name() -> None:
    # 'miniagent[mcp]' works only where the editable install exists already; a clone has '.'.
    assert re.findall(r"pip install [^`\n]*miniagent\[", README) == []


def test_installed_extras_exist() -> None:
    named = re.findall(r"pip install -e [\"']\.\[([a-z,]+)\][\"']", README)
    named += re.findall(r"bash scripts/setup\.sh ([a-z]+)", README)
    extras = {e for group in named for e in group.split(",")}
    assert {"mcp", "temporal", "otel", "docs"} <= extras
    assert extras - EXTRAS == set()
