"""What the `miniagent` command prints reads as English at 80 columns (issue 22), as a real
subprocess against the stub server."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_cli import cli
from typer.testing import CliRunner

from miniagent.testing.stub_server import StreamStyle, StubServer


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


APPROVAL_TOOLS = '''
from miniagent import tool


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something.

    Args:
        target: what to wipe
    """
    return "wiped " + target
'''


def copied_commands(text: str) -> list[list[str]]:
    """The commands of a hint: whole lines that are a `miniagent` command, split as a shell."""
    return [shlex.split(line) for line in text.splitlines()
            if line.strip().startswith("miniagent ")]


def test_the_approval_hints_are_whole_commands_that_run_as_copied(tmp_path: Path) -> None:
    tools = tmp_path / "approval_tools.py"
    tools.write_text(APPROVAL_TOOLS, encoding="utf-8")
    store = tmp_path / "my sessions" / "s.db"  # a space, as in many home folders
    store.parent.mkdir()
    script = ['Thought: x\nAction: wipe\nAction Input: {"target": "disk"}',
              "Thought: done\nFinal Answer: wiped"]
    with StubServer(script).run_in_thread() as stub:
        waiting = cli("run", "wipe it", "--base-url", stub.base_url, "--mode", "react",
                      "--tools", str(tools), "--store", str(store), env={"COLUMNS": "80"})
        assert waiting.returncode == 3, waiting.stderr
        approve, deny, resume = copied_commands(waiting.stdout)
        assert [c[:3] for c in (approve, deny, resume)] == [
            ["miniagent", "sessions", "approve"], ["miniagent", "sessions", "deny"],
            ["miniagent", "sessions", "resume"]]
        assert approve[-2:] == deny[-2:] == resume[-2:] == ["--store", str(store)]
        approved = cli(*approve[1:])
        assert approved.returncode == 0, approved.stderr
        (then,) = copied_commands(approved.stdout)
        assert then == resume
        resumed = cli(*resume[1:])  # the session recorded its base URL
    assert resumed.returncode == 0, resumed.stderr
    assert "wiped disk" in resumed.stdout and "Final Answer" in resumed.stdout


def test_a_streamed_action_is_shown_once(tmp_path: Path) -> None:
    script = ['Thought: compute it\nAction: calculator\nAction Input: {"expression": "6*7"}',
              "Thought: done\nFinal Answer: 42"]
    with StubServer(script, stream_style=StreamStyle(text_piece=3)).run_in_thread() as stub:
        out = cli("run", "6 times 7?", "--tools", "builtin", "--mode", "react", "--stream",
                  "--store", str(tmp_path / "s.db"), "--base-url", stub.base_url, "--model", "m")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line for line in lines if "calculator" in line] == ["Action: calculator"]
    assert sum('"6*7"' in line for line in lines) == 1


def test_a_streamed_native_call_is_shown(tmp_path: Path) -> None:
    script = [{"content": "Thought: need 6*7", "tool_calls": [
                  {"id": "c1", "name": "calculator", "arguments": {"expression": "6*7"}}]},
              "42"]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "6 times 7?", "--tools", "builtin", "--mode", "hybrid", "--stream",
                  "--store", str(tmp_path / "s.db"), "--base-url", stub.base_url, "--model", "m")
    assert out.returncode == 0, out.stderr
    assert 'Action: calculator {"expression": "6*7"}' in out.stdout.splitlines()


def test_an_unparseable_reply_is_not_shown_as_a_thought(tmp_path: Path) -> None:
    """Live, in `sessions show` and in `trace show`: the reply under its own label (with tools
    offered: where none is, plain prose is the answer)."""
    script = ["I am not following any format", "Thought: sorry\nFinal Answer: 42"]
    store, trace = str(tmp_path / "s.db"), str(tmp_path / "t.jsonl")
    with StubServer(script).run_in_thread() as stub:
        live = cli("run", "6 times 7?", "--mode", "react", "--store", store, "--trace", trace,
                   "--tools", "builtin", "--base-url", stub.base_url, "--model", "m")
    assert live.returncode == 0, live.stderr
    session_id = json.loads(cli("sessions", "list", "--store", store, "--json").stdout)[0][
        "session_id"]
    shown = cli("sessions", "show", session_id, "--store", store)
    traced = cli("trace", "show", trace)
    for text in (live.stdout, shown.stdout, traced.stdout):
        lines = [line.strip() for line in text.splitlines()]
        assert "Unparsed reply: I am not following any format" in lines, text
        assert any(line.startswith("Format error: no 'Action:'") for line in lines), text
        assert not any("Thought: I am not" in line for line in lines), text
        assert "Thought: sorry" in lines, text


def test_an_answer_at_the_step_limit_is_shown_as_such(tmp_path: Path) -> None:
    script = ['Thought: multiply\nAction: calculator\nAction Input: {"expression": "6*7"}',
              "Thought: I have it\nFinal Answer: 42"]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "6 times 7?", "--mode", "react", "--tools", "builtin", "--max-steps",
                  "1", "--store", str(tmp_path / "s.db"), "--base-url", stub.base_url,
                  "--model", "m")
    assert out.returncode == 1, out.stderr  # max_steps is no success, answer or not
    lines = [line.strip("│╭╮╰╯─ ") for line in out.stdout.splitlines()]
    assert "Answer at the step limit" in lines and "42" in lines, out.stdout
    assert any(line.startswith("max_steps · 2 steps") for line in lines), out.stdout
