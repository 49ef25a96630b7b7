"""The README's trace example runs and writes the trace it describes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"


def test_trace_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    code = next(b for b in blocks if 'trace="run.jsonl"' in b)
    monkeypatch.chdir(tmp_path)
    exec(code, {})
    assert capsys.readouterr().out == "completed 42\n"
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert lines[0]["question"] == "What is six times seven?"
    assert lines[-1]["result"]["final_answer"] == "42"
