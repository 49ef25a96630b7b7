"""The documentation's pages and their code blocks, for the tests that run them.

The pages are ``README.md`` and every ``docs/**/*.md`` (a page added later is picked up as it
is). Each fenced block is found with its page and line:

- every ``python`` block is run by one test, named in ``PYTHON_BLOCKS`` of
  ``tests/test_docs_commands.py`` under a line that only that block holds (its marker); a test
  fetches its block with :func:`block_with` and runs it. A block the registry does not name
  fails ``test_every_python_block_is_run_by_a_test``, so no example goes unchecked. A block
  shown twice (the Quickstart, in the README and in the site) is one entry: every copy must be
  the same text.
- every ``miniagent`` command of a ``bash`` block is parsed by the CLI (``test_docs_commands.py``).

To add a page with an example: write the page, write the test that runs its block (``exec`` it,
against ``ScriptedModel`` or ``miniagent.testing.stub_server``), and add the marker -> test line
to ``PYTHON_BLOCKS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class Block:
    """One fenced code block of a page."""

    page: str
    """The page's path from the repository root (``docs/tools.md``)."""
    line: int
    """The line of the page the code starts on."""
    lang: str
    """The fence's language (``python``, ``bash``, or empty)."""
    code: str


def pages() -> list[Path]:
    """``README.md`` and every page of ``docs/``, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_text(page: str) -> str:
    """The text of a page named from the repository root (``docs/temporal.md``)."""
    return (ROOT / page).read_text(encoding="utf-8")


def blocks(lang: str | None = None) -> list[Block]:
    """Every fenced block of every page (of one language, when ``lang`` is given)."""
    found = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if lang is None or match.group(1) == lang:
                found.append(Block(page=str(path.relative_to(ROOT)), lang=match.group(1),
                                   line=text[:match.start()].count("\n") + 2,
                                   code=match.group(2)))
    return found


def block_with(marker: str, lang: str = "python") -> str:
    """The one block that holds ``marker`` (a block shown on two pages must be the same text
    on both)."""
    codes = {b.code for b in blocks(lang) if marker in b.code}
    assert len(codes) == 1, f"{len(codes)} different {lang} blocks hold {marker!r}"
    return codes.pop()
