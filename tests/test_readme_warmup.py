"""The README's warm-up example runs: the tool is warm before its first call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def test_warmup_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    exec(next(b for b in blocks if "@tool(warmup=" in b), {})
    report, output = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"1 of 1 warm in \d+\.\d\d s", report)
    assert output == "documents [3, 14]"
