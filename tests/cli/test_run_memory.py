"""`miniagent run --memory FILE`: a fact the model remembers in one run is recalled before the
question of a later one, in another process; `miniagent memory search` finds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import cli

from miniagent.testing.stub_server import StubServer


def reply(request: dict[str, Any], _n: int) -> str:
    last = request["messages"][-1]["content"]
    if last.startswith("Observation:") or request["messages"][-1]["role"] == "tool":
        return "Thought: saved\nFinal Answer: 记住了"
    if last == "我的生日是五月三日。请记住。":
        return ('Thought: save it\nAction: remember\n'
                'Action Input: {"text": "用户的生日是五月三日。"}')
    known = "用户的生日是五月三日。" in last and "not instructions" in last
    return f"Thought: look\nFinal Answer: {'五月三日' if known else '不知道'}"


def test_a_remembered_fact_is_recalled_in_a_later_run(tmp_path: Path) -> None:
    memory = tmp_path / "memory.db"
    with StubServer(reply).run_in_thread() as stub:
        common = ("--base-url", stub.base_url, "--model", "m", "--mode", "react", "--json",
                  "--store", str(tmp_path / "s.db"), "--memory", str(memory),
                  "--memory-namespace", "xiaoming")
        saved = cli("run", "我的生日是五月三日。请记住。", *common)
        assert saved.returncode == 0, saved.stderr
        asked = cli("run", "我的生日是哪天？", *common)
        assert asked.returncode == 0, asked.stderr
        assert json.loads(asked.stdout)["final_answer"] == "五月三日"
    found = cli("memory", "search", "生日", "--memory", str(memory), "--json")
    assert found.returncode == 0, found.stderr
    items = json.loads(found.stdout)
    assert [(i["text"], i["namespace"]) for i in items] == [("用户的生日是五月三日。", "xiaoming")]


API_KEY = "cli-key-0123456789abcdef"  # not shaped like a key: known as the key only
SECRET_NOTE = f"Deploy notes: the API key is {API_KEY}, the admin password: hunter2."


def secret_reply(request: dict[str, Any], _n: int) -> str:
    last = request["messages"][-1]["content"]
    if last.startswith("Observation:"):
        return "Thought: saved\nFinal Answer: saved"
    if last == "Remember my deploy notes.":
        return ("Thought: save it\nAction: remember\n"
                f"Action Input: {json.dumps({'text': SECRET_NOTE})}")
    return "Thought: look\nFinal Answer: done"


def test_remembered_credentials_reach_neither_the_file_nor_a_later_prompt(
        tmp_path: Path) -> None:
    """The CLI's API key (given as --api-key, in no environment variable) and a password
    written in a sentence are replaced before the memory stores them."""
    memory = tmp_path / "memory.db"
    with StubServer(secret_reply).run_in_thread() as stub:
        common = ("--base-url", stub.base_url, "--model", "m", "--mode", "react", "--json",
                  "--api-key", API_KEY, "--store", str(tmp_path / "s.db"),
                  "--memory", str(memory))
        saved = cli("run", "Remember my deploy notes.", *common)
        assert saved.returncode == 0, saved.stderr
        first_run = len(stub.requests)
        asked = cli("run", "What are my deploy notes?", *common)
        assert asked.returncode == 0, asked.stderr
        later_prompts = json.dumps(stub.requests[first_run:], ensure_ascii=False)
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("memory.db*"))
    assert b"Deploy notes" in stored  # the memory is there, its credentials are not
    assert API_KEY.encode() not in stored and b"hunter2" not in stored
    assert "Deploy notes: the API key is [REDACTED]" in later_prompts  # recalled, redacted
    assert API_KEY not in later_prompts and "hunter2" not in later_prompts
