"""The docs' examples of tool selection and agents as tools run, with the output shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_pages import block_with


def test_tool_selection_example_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    code = block_with("Aids(tool_selection=2)")
    exec(code, {})
    shown = [line.removeprefix("# ") for line in code.splitlines() if line.startswith("# ")]
    assert capsys.readouterr().out.splitlines() == shown


def test_agents_as_tools_example_relays_the_approval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(block_with("janitor.as_tool("), namespace)
    assert capsys.readouterr().out.splitlines() == [
        "awaiting_approval ['janitor']",
        "the janitor deleted old.log | completed 2 steps",
    ]
    assert (tmp_path / "sessions.db").exists()
