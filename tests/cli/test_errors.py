"""Mistakes in the command line or the environment: one line on stderr, exit 2 or 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from miniagent.cli import app


def invoke(*args: str, **env: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "120", **env})


def one_line(result: Result, code: int) -> str:
    """The stderr line of a failed command, checked to be one line with ``code``."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("base_url", "says"),
    [("127.0.0.1:8000/v1", "http:// or https://"), ("ftp://127.0.0.1/v1", "http:// or https://"),
     ("http://127.0.0.1:99999/v1", "port"), ("http://[::1/v1", "IPv6")],
)
def test_a_bad_base_url_is_one_line(base_url: str, says: str) -> None:
    line = one_line(invoke("run", "hi", "--base-url", base_url), 2)
    assert line.startswith("miniagent: base_url") and says.lower() in line.lower()


@pytest.mark.parametrize("api_key", ["sk-abc\r\nX-Injected: 1", "sk-ключ"])
def test_a_bad_api_key_is_one_line(api_key: str) -> None:
    result = invoke("run", "hi", "--base-url", "http://127.0.0.1:1/v1", "--api-key", api_key)
    assert "api_key" in one_line(result, 2)
    env_result = invoke("run", "hi", "--base-url", "http://127.0.0.1:1/v1",
                        MINIAGENT_API_KEY=api_key)
    assert "api_key" in one_line(env_result, 2)


@pytest.mark.parametrize(
    ("body", "says"),
    [("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
     ("import sys\nsys.exit(4)\n", "SystemExit: 4"),
     ("def broken(:\n", "SyntaxError")],
)
@pytest.mark.parametrize("as_module", [False, True])
def test_a_tools_source_that_fails_on_import_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, says: str,
        as_module: bool) -> None:
    package = tmp_path / "failing_tools_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "failing_tools_pkg", raising=False)
    source = "failing_tools_pkg" if as_module else str(package / "__init__.py")
    for args in (["tools", source],
                 ["run", "hi", "--base-url", "http://127.0.0.1:1/v1", "--tools", source]):
        line = one_line(invoke(*args), 2)
        assert says in line and str(package / "__init__.py") in line, line


def store_cases(tmp_path: Path) -> list[tuple[list[str], dict[str, str]]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", encoding="utf-8")
    return [
        (["--store", str(a_file / "sessions.db")], {}),
        (["--store", "/proc/miniagent-test/sessions.db"], {}),
        ([], {"MINIAGENT_STORE": "", "XDG_DATA_HOME": "", "HOME": str(a_file)}),
    ]


@pytest.mark.parametrize("case", [0, 1, 2])
def test_a_store_that_cannot_be_opened_is_one_line(tmp_path: Path, case: int) -> None:
    store_args, env = store_cases(tmp_path)[case]
    for command in (["sessions", "list"], ["sessions", "show", "abc"],
                    ["run", "hi", "--base-url", "http://127.0.0.1:1/v1"]):
        result = invoke(*command, *store_args, **env)
        if case == 1 and command[0] == "sessions":
            # read-only commands create nothing: a store that does not exist yet (here under
            # /proc, where none can be made) reads as empty, and "abc" is not found in it
            assert result.exit_code in (0, 1) and "Traceback" not in result.output
            continue
        line = one_line(result, 2)
        assert "session store" in line and "--store" in line, line


def deeply_nested_session(store: Path) -> str:
    """A saved session whose row holds JSON nested far deeper than the recursion limit."""
    import sqlite3

    from miniagent import Agent, ScriptedModel
    from miniagent.core.store.sqlite import SQLiteStore

    result = Agent(model=ScriptedModel(["Final Answer: ok"]), store=SQLiteStore(store)).run("q")
    with sqlite3.connect(store) as db:
        (data,) = db.execute("SELECT data FROM sessions").fetchone()
        deep = data[:-1] + ',"deep":' + "[" * 100_000 + "]" * 100_000 + "}"
        db.execute("UPDATE sessions SET data = ?", (deep,))
    return result.session_id


def test_a_session_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "deep.db"
    session_id = deeply_nested_session(store)
    for command in (["show", session_id], ["show", session_id, "--json"],
                    ["approve", session_id], ["cancel", session_id],
                    ["resume", session_id, "--base-url", "http://127.0.0.1:1/v1"]):
        line = one_line(invoke("sessions", *command, "--store", str(store)), 1)
        assert session_id in line and "nested too deeply" in line, line


APPROVAL_TOOLS = '''
from miniagent import tool

WIPED = []


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something.

    Args:
        target: what to wipe
    """
    WIPED.append(target)
    return "wiped " + target
'''


def test_an_inline_approver_that_raises_is_one_line_and_the_call_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.prompt import Confirm

    import miniagent.cli
    from miniagent.core.store.sqlite import SQLiteStore
    from miniagent.testing.stub_server import StubServer

    def terminal_gone(*_args: object, **_kwargs: object) -> bool:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(miniagent.cli, "asks_in_terminal", lambda **_: True)
    monkeypatch.setattr(Confirm, "ask", terminal_gone)
    tools = tmp_path / "approval_tools.py"
    tools.write_text(APPROVAL_TOOLS, encoding="utf-8")
    store = tmp_path / "s.db"
    script = ['Thought: x\nAction: wipe\nAction Input: {"target": "disk"}', "Final Answer: done"]
    with StubServer(script).run_in_thread() as stub:
        result = invoke("run", "wipe it", "--base-url", stub.base_url, "--mode", "react",
                        "--tools", str(tools), "--store", str(store))
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("miniagent: ") and "Input/output error" in line
    assert "keeps waiting" in line
    (summary,) = SQLiteStore(store).list()
    assert summary.status == "awaiting_approval"
    assert "wiped" not in result.stdout


@pytest.mark.parametrize("verbose", [False, True])
def test_a_library_error_log_is_one_line_unless_verbose(
        monkeypatch: pytest.MonkeyPatch, verbose: bool) -> None:
    from miniagent.cli.display import TraceDisplay
    from miniagent.testing.stub_server import StubServer

    def broken(*_args: object) -> None:
        raise RuntimeError("the display broke")

    monkeypatch.setattr(TraceDisplay, "_tool_finished", broken)
    script = ['Thought: x\nAction: calculator\nAction Input: {"expression": "6*7"}',
              "Final Answer: 42"]
    with StubServer(script).run_in_thread() as stub:
        result = invoke("run", "6*7?", "--base-url", stub.base_url, "--mode", "react",
                        "--tools", "builtin", *(["-v"] if verbose else []))
    assert result.exit_code == 0, result.output
    if verbose:
        assert "Traceback" in result.stderr and "the display broke" in result.stderr
        return
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("miniagent: ") and "RuntimeError: the display broke" in line
    assert "--verbose" in line


def awaiting_session(store: Path) -> str:
    from miniagent import Agent, ScriptedModel, tool
    from miniagent.core.store.sqlite import SQLiteStore

    @tool(requires_approval=True)
    def wipe(target: str) -> str:
        """Wipe something.

        Args:
            target: what to wipe
        """
        return "wiped " + target

    model = ScriptedModel(['Thought: x\nAction: wipe\nAction Input: {"target": "disk"}'])
    result = Agent(model=model, tools=[wipe], store=SQLiteStore(store)).run("wipe it")
    assert result.status == "awaiting_approval"
    return result.session_id


def test_deciding_twice_says_nothing_waits_any_more(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    session_id = awaiting_session(store)
    first = invoke("sessions", "approve", session_id, "--store", str(store))
    assert first.exit_code == 0, first.output
    for again in ("approve", "deny"):
        line = one_line(invoke("sessions", again, session_id, "--store", str(store)), 2)
        assert "None" not in line
        assert f"session {session_id} has no call awaiting approval" in line, line
        assert "approved" in line and f"miniagent sessions resume {session_id}" in line


@pytest.mark.parametrize(
    ("option", "value"),
    [("--timeout", "-1"), ("--timeout", "0"), ("--timeout", "nan"),
     ("--request-timeout", "0"), ("--request-timeout", "-5"), ("--request-timeout", "inf"),
     ("--max-steps", "0"), ("--max-tokens", "0"), ("--max-tokens", "-3")],
)
def test_a_limit_that_is_not_positive_is_a_usage_error(option: str, value: str) -> None:
    result = invoke("run", "hi", "--base-url", "http://127.0.0.1:1/v1", option, value)
    assert result.exit_code == 2, result.output
    assert option in result.stderr and "Traceback" not in result.output
    assert "step 1" not in result.stdout  # refused before anything ran


def test_a_list_limit_below_one_is_a_usage_error() -> None:
    result = invoke("sessions", "list", "--limit", "0")
    assert result.exit_code == 2 and "--limit" in result.stderr


def test_parse_of_input_nested_too_deeply_reports_instead_of_raising() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    native = CliRunner().invoke(app, ["parse", "--native"], input=deep)
    assert native.exit_code == 1, native.exception
    assert not isinstance(native.exception, RecursionError)
    out = json.loads(native.stdout)
    assert "nested deeper than" in out["error"]
    lines = CliRunner().invoke(app, ["parse", "--jsonl"], input=f'{{"text": {deep}}}\n"x"\n')
    assert lines.exit_code == 0, lines.exception
    first, second = (json.loads(line) for line in lines.stdout.splitlines())
    assert "nested deeper than" in first["error"] and second["kind"] == "invalid"
    react = CliRunner().invoke(app, ["parse"], input=f"Action: f\nAction Input: {deep}")
    assert react.exit_code in (0, 1) and "Traceback" not in react.output
    assert not isinstance(react.exception, RecursionError)
