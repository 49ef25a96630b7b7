"""`miniagent run --continue ID`: the next turn of a conversation, from another process, in the
same store; what the server received and what `sessions show` prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import cli

from miniagent.testing.stub_server import StubServer


def reply(request: dict[str, Any], _n: int) -> str:
    said = [m["content"] for m in request["messages"] if m["role"] == "user"]
    if said[-1] == "我叫小明。":
        return "Thought: 记住\nFinal Answer: 你好，小明！"
    if said[-1] == "What is my name?" and "我叫小明。" in said:
        return "Thought: it was said earlier\nFinal Answer: 小明"
    return "Thought: ?\nFinal Answer: I do not know"


def test_a_second_process_continues_the_conversation(tmp_path: Path) -> None:
    store = tmp_path / "sessions.db"
    with StubServer(reply).run_in_thread() as stub:
        common = ("--base-url", stub.base_url, "--model", "m", "--mode", "react",
                  "--store", str(store), "--json")
        first = cli("run", "我叫小明。", *common)
        assert first.returncode == 0, first.stderr
        session_id = json.loads(first.stdout)["session_id"]
        second = cli("run", "What is my name?", "--continue", session_id, *common)
        assert second.returncode == 0, second.stderr
        answer = json.loads(second.stdout)
        assert (answer["session_id"], answer["final_answer"]) == (session_id, "小明")
        roles = [(m["role"], m["content"]) for m in stub.requests[1]["messages"]][1:]
        assert roles == [("user", "我叫小明。"),
                         ("assistant", "Thought: 记住\nFinal Answer: 你好，小明！"),
                         ("user", "What is my name?")]
    shown = cli("sessions", "show", session_id, "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "2 turns" in shown.stdout and "turn 2" in shown.stdout
    assert "What is my name?" in shown.stdout and "小明" in shown.stdout


def test_continue_names_a_session_that_exists(tmp_path: Path) -> None:
    with StubServer(reply).run_in_thread() as stub:
        out = cli("run", "What is my name?", "--continue", "nosuchsession",
                  "--base-url", stub.base_url, "--model", "m",
                  "--store", str(tmp_path / "sessions.db"))
        assert not stub.requests
    assert out.returncode == 1
    assert "no session 'nosuchsession'" in out.stderr
