"""MkDocs hook: a picture the tests write (``docs/images/generated/*.png``) that is not there yet
is shown as a note saying which test writes it, so ``mkdocs build --strict`` passes on a
checkout where the browser tests have not run (the pictures are not kept in git: they show
times and random ids, so every run would change them).

``.ci/run`` builds the site after ``pytest``, which writes them where Chromium is installed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

GENERATED = "images/generated/"
WRITERS = {
    "inbox": "tests/ui/test_screenshots.py",
    "trace": "tests/report/test_trace_screenshot.py",
    "eval": "tests/evals/test_eval_screenshot.py",
}
IMAGE = re.compile(r"!\[([^\]]*)\]\((" + re.escape(GENERATED) + r"[^)]+\.png)\)")


def writer(name: str) -> str:
    """The test that writes the picture ``name``."""
    stem = Path(name).stem
    return next((test for prefix, test in WRITERS.items() if stem.startswith(prefix)),
                "the browser tests")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each missing generated picture by a line naming the test that writes it."""
    docs = Path(config["docs_dir"])

    def keep_or_note(match: re.Match[str]) -> str:
        if (docs / match.group(2)).exists():
            return match.group(0)
        return f"*({match.group(1)}: a screenshot `pytest {writer(match.group(2))}` writes)*"

    return IMAGE.sub(keep_or_note, markdown)
