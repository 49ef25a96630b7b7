"""The docs' warm-up example runs: the tool is warm before its first call."""

from __future__ import annotations

import re

import pytest

from docs_pages import block_with


def test_warmup_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(block_with("@tool(warmup=build_index)"), {})
    report, output = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"1 of 1 warm in \d+\.\d\d s", report)
    assert output == "documents [3, 14]"
