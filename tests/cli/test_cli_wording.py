"""What the `miniagent` command prints reads as English at 80 columns (issue 22), as a real
subprocess against the stub server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_cli import cli
from typer.testing import CliRunner

from miniagent.testing.stub_server import StubServer


def test_a_one_step_run_says_1_step(tmp_path: Path) -> None:
    with StubServer(["Thought: easy\nFinal Answer: hi"]).run_in_thread() as stub:
        out = cli("run", "hello?", "--mode", "react", "--store", str(tmp_path / "s.db"),
                  "--base-url", stub.base_url, "--model", "m")
    assert out.returncode == 0, out.stderr
    assert "completed · 1 step · " in out.stdout and "1 steps" not in out.stdout


def command_paths() -> list[list[str]]:
    """Every command and group of the app, as the words that name it."""
    import typer.main

    from miniagent.cli import app

    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


TYPE_NAMES = re.compile(r"<(str|int|float|path|bool|list\[)|\{[a-z_]+\}")


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "miniagent")
def test_help_reads_at_80_columns(path: list[str]) -> None:
    from miniagent.cli import app

    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Usage:" in text and "--help" in text
    assert not [line for line in text.splitlines() if len(line) > 80], text
    assert not TYPE_NAMES.search(text), text
    assert "╭" not in text  # two columns, not rich's boxed panels


def test_help_names_values_by_words() -> None:
    from miniagent.cli import app

    text = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "80"}).stdout
    assert " run [OPTIONS] QUESTION\n" in text
    for shown in ("--base-url URL", "--max-steps N", "--store FILE", "--timeout SECONDS",
                  "--mode react|native|hybrid|auto", "--tools SOURCE"):
        assert shown in text, shown


def test_version_prints_the_installed_version() -> None:
    import importlib.metadata

    out = cli("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"miniagent {importlib.metadata.version('miniagent')}\n"
