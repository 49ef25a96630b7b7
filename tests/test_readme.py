"""The documentation's Python examples run, against a stub server or a scripted model (each
block is found by a line only it holds: see ``tests/docs_pages.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from docs_pages import block_with
from miniagent import OpenAICompatibleModel, ScriptedModel
from miniagent.testing.stub_server import Fault, StubServer


def test_the_server_variant_builds_a_model() -> None:
    """The Quickstart's one line for a server builds the model it says (nothing is sent)."""
    namespace: dict[str, Any] = {}
    exec(block_with('api_key="EMPTY")  # tool_mode "auto"'), namespace)
    model = namespace["model"]
    assert isinstance(model, OpenAICompatibleModel)
    assert (model.base_url, model.model, model.tool_mode) == (
        "http://127.0.0.1:8000/v1", "qwen2.5", "auto")


def test_writing_a_tool_example_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/tools.md's first example: the schema's required parameter, and the function still a
    function."""
    exec(block_with("def get_weather(city: str, unit: str = \"celsius\") -> str:"), {})
    assert capsys.readouterr().out.splitlines() == [
        "get_weather ['city']", "Paris: 18 degrees celsius, light rain"]


def test_approval_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code = block_with('@tool(requires_approval=lambda args: args["amount"] > 100)')
    call = {"content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "pay", "arguments": '{"to": "Alice", "amount": 150}'}}]}
    namespace: dict[str, Any] = {"model": ScriptedModel([call, {"content": "Paid."}],
                                                        tool_mode="native")}
    exec(code, namespace)
    assert "pay {'to': 'Alice', 'amount': 150}" in capsys.readouterr().out
    assert namespace["result"].status == "completed"
    assert namespace["result"].final_answer == "Paid."
    assert (tmp_path / "sessions.db").exists()


def test_edited_approval_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    call = {"content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "refund", "arguments": '{"order": "42", "amount": 90}'}}]}
    namespace: dict[str, Any] = {"model": ScriptedModel([call, {"content": "Refunded 30."}],
                                                        tool_mode="native")}
    exec(block_with("record.edited_arguments"), namespace)
    arguments, note, output = capsys.readouterr().out.splitlines()
    assert arguments == "{'order': '42', 'amount': 90} {'order': '42', 'amount': 30}"
    assert "a person approved this call with changed arguments" in note.lower()
    assert output == "refunded 30 on order 42"
    assert namespace["result"].final_answer == "Refunded 30."


def test_schema_tool_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(block_with('name="get_directions"'), {})
    assert capsys.readouterr().out == "A -> home with 2 stops\n"


def test_limits_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(block_with("@tool(max_concurrency=2)"), namespace)
    assert capsys.readouterr().out == "{'completed'} 2 2 calls at once (max_concurrency)\n"
    assert namespace["model"].limits.requests_per_minute == 60


def test_retry_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(block_with("@tool(retry=RetryPolicy("), namespace)
    assert capsys.readouterr().out == "booked A1 3\n"
    assert next(namespace["tries"]) == 4  # three tries, no more


def test_compression_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(block_with("Compression(at=2500"), namespace)
    printed = capsys.readouterr().out
    assert printed.startswith("completed 9 6 Summary of earlier steps (rounds 1-6; each result "
                              "cut to about 200 characters;")
    session = namespace["agent"].session(namespace["result"].session_id)
    assert len(session.messages) == 1 + 12 * 2 + 1 and session.compactions


def test_conversation_and_memory_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel([
        'Thought: save\nAction: remember\nAction Input: {"text": "The user drinks 龙井 tea."}',
        "Final Answer: Noted.", "Final Answer: 龙井", "Final Answer: a 龙井, lightly brewed"])
    namespace: dict[str, Any] = {"model": model}
    exec(block_with('namespace="alice"'), namespace)
    assert capsys.readouterr().out == "2 龙井\n"
    turn_two = model.requests[2].messages
    assert next(m["content"] for m in turn_two if m["role"] == "user") == (
        "I drink 龙井 tea. Remember that.")
    recalled = model.requests[3].messages[-1]["content"]
    assert "The user drinks 龙井 tea." in recalled
    assert recalled.endswith("Suggest a tea for tonight.")
    assert namespace["later"].session_id != namespace["first"].session_id


def test_fallback_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The preferred server answers step 1 and fails on step 2 (after its own retry): the
    backup, a ReAct model, answers step 2, rendered in ReAct for it."""
    code = block_with("FallbackModel(")
    call = {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}
    down = Fault(status=503)
    with StubServer([call, down, down]).run_in_thread() as vllm, \
            StubServer(["Thought: I have it\nFinal Answer: 5"]).run_in_thread() as ollama:
        exec(code.replace("http://127.0.0.1:8000/v1", vllm.base_url)
                 .replace("http://127.0.0.1:11434/v1", ollama.base_url), {})
        sent = list(ollama.requests)
    assert capsys.readouterr().out == "completed 5 ['vllm', 'ollama']\n"
    assert "tools" not in sent[0] and sent[0]["messages"][-1]["content"].startswith(
        "Observation: 5")


def test_stream_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(block_with("agent.astream("), {})
    assert capsys.readouterr().out == "add -> 5\n5\n5\ncompleted\n"


def test_fork_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(block_with("agent.fork("), {})
    assert capsys.readouterr().out == "5 is enough\n10\n6\n"
