"""``miniagent run --stream``, ``--tool-choice`` and ``--mode hybrid``, as a real subprocess
against the stub server."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import cli

from miniagent.testing.stub_server import StreamStyle, StubServer


def test_run_stream_shows_the_reply_as_written_and_records_the_choice(tmp_path: Path) -> None:
    script = ['Thought: compute it\nAction: calculator\nAction Input: {"expression": "6*7"}',
              "Thought: done\nFinal Answer: 四十二 (42)"]
    store = tmp_path / "s.db"
    with StubServer(script, stream_style=StreamStyle(text_piece=1)).run_in_thread() as stub:
        out = cli("run", "6 times 7?", "--tools", "builtin", "--mode", "react", "--stream",
                  "--tool-choice", "required", "--store", str(store),
                  "--base-url", stub.base_url, "--model", "m")
        received = list(stub.requests)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # the streamed text is written whole, once: the thought is not printed a second time
    assert "Thought: compute it" in lines
    assert sum("compute it" in line for line in lines) == 1
    assert 'Action Input: {"expression": "6*7"}' in lines
    assert any("Observation" in line and "42" in line for line in lines)
    assert "Final Answer: 四十二 (42)" in lines
    assert all(r["stream"] is True for r in received)
    shown = cli("sessions", "show", _last_session(store), "--store", str(store), "--json")
    recorded = json.loads(shown.stdout)
    assert recorded["metadata"]["cli"]["stream"] is True
    assert recorded["metadata"]["cli"]["tool_choice"] == "required"


def _last_session(store: Path) -> str:
    out = cli("sessions", "list", "--store", str(store), "--json")
    sessions = json.loads(out.stdout)
    return str(sessions[0]["session_id"])


def test_run_hybrid_native_tool_choice_is_sent(tmp_path: Path) -> None:
    script = [{"content": "Thought: need 6*7", "tool_calls": [
                  {"id": "c1", "name": "calculator", "arguments": {"expression": "6*7"}}]},
              "42"]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "6 times 7?", "--tools", "builtin", "--mode", "hybrid", "--json",
                  "--tool-choice", "calculator", "--store", str(tmp_path / "s.db"),
                  "--base-url", stub.base_url, "--model", "m")
        received = list(stub.requests)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["status"], result["final_answer"]) == ("completed", "42")
    assert result["trace"][0]["thought"] == "need 6*7"
    assert received[0]["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert received[1]["tool_choice"] == "auto"


def test_an_unknown_tool_choice_is_one_line(tmp_path: Path) -> None:
    out = cli("run", "q", "--tools", "builtin", "--tool-choice", "nosuchtool",
              "--store", str(tmp_path / "s.db"), "--base-url", "http://127.0.0.1:9/v1")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "nosuchtool" in out.stderr and "not among the run's tools" in out.stderr
