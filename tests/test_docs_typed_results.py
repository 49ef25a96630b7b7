"""docs/typed-results.md's Python example runs as written (a real subprocess over the stub
server on 127.0.0.1) and prints what the page says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).parent.parent / "docs" / "typed-results.md"


def block(language: str) -> str:
    found = re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    assert len(found) == 1, f"the page should have one {language} block"
    return str(found[0])


def test_the_pages_example_prints_what_the_page_says(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block("python"), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONUTF8": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == block("text")
