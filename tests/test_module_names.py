"""Every module the project's configuration and scripts name exists (issue 36: pyproject.toml
still named ``miniagent.durable`` after it became ``miniagent.temporal``)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOTTED = re.compile(r"\bminiagent(?:\.[A-Za-z_]\w*)+")


def named_modules() -> list[tuple[str, str]]:
    """``(file, dotted name)`` for each ``miniagent.x.y`` in pyproject.toml and scripts/."""
    scripts = sorted(p for p in (ROOT / "scripts").rglob("*") if p.is_file())
    files = [ROOT / "pyproject.toml", *scripts]
    return sorted({(str(f.relative_to(ROOT)), m.group(0)) for f in files
                   for m in DOTTED.finditer(f.read_text(encoding="utf-8"))})


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a name defined in one (``miniagent.cli:main``'s
    left side, ``miniagent.core.models.catalog.DEFAULT_MODEL``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_some_names_are_checked() -> None:
    assert ("pyproject.toml", "miniagent.observe.otel") in named_modules()


@pytest.mark.parametrize(("where", "dotted"), named_modules())
def test_a_named_module_exists(where: str, dotted: str) -> None:
    assert resolves(dotted), f"{where} names {dotted}, which does not exist"
