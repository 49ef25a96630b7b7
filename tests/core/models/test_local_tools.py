"""The embedded model's native tool calls: what the prompt says, what the grammar admits,
and how a reply becomes ``tool_calls`` (no model needed; the real model runs in
tests/core/models/test_local.py)."""

from __future__ import annotations

import json
from typing import Any

from miniagent._internal.jsonscan import incomplete
from miniagent.core.models.local_tools import ask_for_a_call, read_tool_reply

TOOLS = [{"type": "function", "function": {
    "name": "weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}},
         {"type": "function", "function": {"name": "clock", "description": "The time.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _reply(content: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}]}


def test_the_prompt_says_the_tools_after_the_runs_instructions() -> None:
    body: dict[str, Any] = {"messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "東京の天気は？"}],
                            "tools": TOOLS, "tool_choice": "auto"}
    ask_for_a_call(body, TOOLS, "auto", 64)
    system = body["messages"][0]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert system["content"].startswith("Be brief.")
    assert "- weather: The weather" in system["content"]
    assert '{"answer"' in system["content"] and "tools" not in body and "tool_choice" not in body
    assert '"{\\"tool\\": \\"weather\\"' in body["grammar"] and "answer" in body["grammar"]
    assert "json-char{0,64}" in body["grammar"]  # free strings bounded by max_tokens


def test_required_admits_no_answer_and_a_named_choice_one_tool() -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    ask_for_a_call(body, TOOLS, "required", 256)
    assert '{\\"answer\\"' not in body["grammar"]
    named: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    ask_for_a_call(named, TOOLS, "clock", 256)
    assert "clock" in named["grammar"] and "weather" not in named["grammar"]
    none: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    ask_for_a_call(none, TOOLS, "none", 256)
    assert "weather" not in none["messages"][0]["content"]
    assert '{"answer"' in none["messages"][0]["content"]
    # only an answer: the history shows earlier calls as JSON text, which a model copies, and
    # such text would be read back as a call the step forbids
    assert "weather" not in none["grammar"] and '{\\"answer\\": ' in none["grammar"]


def test_history_shows_calls_as_json_and_results_as_user_turns() -> None:
    body: dict[str, Any] = {"messages": [
        {"role": "user", "content": "Weather in Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "東京"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "晴れ, 18°C"}]}
    ask_for_a_call(body, TOOLS, "auto", 64)
    assistant, result = body["messages"][2], body["messages"][3]
    assert json.loads(assistant["content"]) == {"tool": "weather", "arguments": {"city": "東京"}}
    assert result == {"role": "user", "content": "Result of weather: 晴れ, 18°C"}


def test_a_call_becomes_tool_calls_and_an_answer_content() -> None:
    call = _reply('{"tool": "weather", "arguments": {"city": "東京"}}')
    read_tool_reply(call)
    message = call["choices"][0]["message"]
    assert message["content"] is None
    function = message["tool_calls"][0]["function"]
    assert function["name"] == "weather" and json.loads(function["arguments"]) == {"city": "東京"}
    answer = _reply('{"answer": "18°C"}')
    read_tool_reply(answer)
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "18°C"}


def test_a_cut_off_call_stays_incomplete_for_the_guard() -> None:
    for text in ('{"tool": "weather", "arguments": {"city": "Tok',
                 '{"tool": "weather", "argum', '{"tool": "wea'):
        reply = _reply(text)
        read_tool_reply(reply)
        arguments = reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        assert incomplete(arguments), text  # never repaired into a call that would run


def test_plain_text_stays_text() -> None:
    reply = _reply("I don't know.")
    read_tool_reply(reply)
    assert reply["choices"][0]["message"]["content"] == "I don't know."
