"""The docs' trace example runs and writes the trace it describes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docs_pages import block_with


def test_trace_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    code = block_with('trace="run.jsonl"')
    monkeypatch.chdir(tmp_path)
    exec(code, {})
    assert capsys.readouterr().out == "completed 42\n"
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert lines[0]["question"] == "What is six times seven?"
    assert lines[-1]["result"]["final_answer"] == "42"
