"""The CLI warms up before the first step: ``run``, ``chat`` and ``sessions resume`` show a
status line on a terminal while the tools' warm-ups run and a warning line for one that failed;
the run goes on, and the first call finds its tool warm. The real command against the stub
server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_chat import chat
from test_cli import cli
from test_terminal_status import _read_all

from miniagent.cli.warming import STATUS
from miniagent.testing.stub_server import StubServer

TOOLS = '''
import pathlib
import time

from miniagent import tool

MARK = pathlib.Path(__file__).with_name("index.mark")


def load_index():
    time.sleep(0.5)  # long enough for a status line to show
    MARK.write_text("loaded")


@tool(warmup=load_index)
def lookup(key: str) -> str:
    """Look a key up in the index."""
    return f"{key}: index {'warm' if MARK.exists() else 'cold'}"


def no_index():
    raise RuntimeError("no index here")


@tool(warmup=no_index)
def search(query: str) -> str:
    """Search."""
    return f"found {query}"
'''

SCRIPT = ['Thought: look\nAction: lookup\nAction Input: {"key": "k"}', "Final Answer: done"]
WARNING = ("miniagent: warning: warm-up of tool search failed: RuntimeError: no index here; "
           "it warms on first use instead")


def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "warm_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return str(path)


def test_run_warms_up_first_and_warns_of_a_failed_warm_up(tmp_path: Path) -> None:
    with StubServer(SCRIPT).run_in_thread() as stub:
        out = cli("run", "Look k up", "--tools", tools_file(tmp_path), "--mode", "react",
                  "--json", "--base-url", stub.base_url, "--model", "m")
    assert out.returncode == 0, out.stderr
    assert WARNING in out.stderr.splitlines()
    assert out.stderr.count("warm-up of tool search failed") == 1, out.stderr  # one line
    result = json.loads(out.stdout)
    assert result["status"] == "completed"
    assert result["trace"][0]["observations"][0]["output"] == "k: index warm"


def test_run_shows_the_warm_up_on_a_terminal(tmp_path: Path) -> None:
    main, child = os.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    with StubServer(SCRIPT).run_in_thread() as stub:
        proc = subprocess.Popen(
            [sys.executable, "-m", "miniagent", "run", "Look k up", "--tools",
             tools_file(tmp_path), "--mode", "react", "--base-url", stub.base_url,
             "--model", "m"],
            stdin=child, stdout=child, stderr=child, env=env, close_fds=True)
        os.close(child)
        try:
            text = _read_all(main, proc, 120)
            assert proc.wait(timeout=30) == 0, text
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(main)
    assert STATUS in text
    assert "warm-up of tool search failed" in text
    assert "k: index warm" in text


def test_chat_warms_up_before_the_first_step(tmp_path: Path) -> None:
    pytest.importorskip("pexpect")
    with StubServer(SCRIPT).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", tools_file(tmp_path)) as session:
        shown = session.line("Look k up")
        assert session.leave() == 0
    assert STATUS in shown and "warm-up of tool search failed" in shown
    assert "k: index warm" in shown


def test_sessions_resume_warms_up_before_the_first_step(tmp_path: Path) -> None:
    """A session waiting for approval is resumed in a new process: that process warms the
    tools up before the approved call runs (the mark of the first process's warm-up is gone)."""
    tools = tmp_path / "warm_tools.py"
    tools.write_text(TOOLS.replace("@tool(warmup=load_index)",
                                   "@tool(warmup=load_index, requires_approval=True)"),
                     encoding="utf-8")
    store = str(tmp_path / "sessions.db")
    with StubServer(SCRIPT).run_in_thread() as stub:
        run = cli("run", "Look k up", "--tools", str(tools), "--mode", "react", "--detach",
                  "--json", "--base-url", stub.base_url, "--model", "m", "--store", store)
        assert run.returncode == 3, run.stderr  # waiting for approval
        session_id = json.loads(run.stdout)["session_id"]
        assert cli("sessions", "approve", session_id, "--store", store).returncode == 0
        (tmp_path / "index.mark").unlink()  # the next process starts cold
        resumed = cli("sessions", "resume", session_id, "--json", "--store", store)
    assert resumed.returncode == 0, resumed.stderr
    assert WARNING in resumed.stderr.splitlines()
    result = json.loads(resumed.stdout)
    assert result["status"] == "completed"
    assert result["trace"][0]["observations"][0]["output"] == "k: index warm"
