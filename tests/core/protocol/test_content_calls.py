"""Calls written in a reply's text (protocol/content.py): what Qwen2.5-Coder writes behind
llama.cpp's server in native mode, read as the call in native, auto and hybrid modes; other
JSON stays the answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from miniagent.core.protocol.auto import AutoProtocol
from miniagent.core.protocol.content import MAX_CONTENT_CHARS, MAX_OBJECTS, json_calls
from miniagent.core.protocol.hybrid import HybridProtocol
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.types import Message, ModelResponse


@dataclass
class FakeTool:
    name: str
    description: str = "A tool."
    parameters: dict[str, Any] = field(default_factory=lambda: {
        "type": "object", "properties": {"expression": {"type": "string"}}})


TOOLS = [FakeTool("calculator"), FakeTool("remember")]
CALC = {"name": "calculator", "arguments": {"expression": "17 * 23"}}


def parsed(content: str, protocol: Any = None, tools: list[FakeTool] = TOOLS) -> Any:
    protocol = protocol or NativeProtocol()
    request = protocol.render([Message(role="user", content="17*23?")], tools)
    return protocol.parse(ModelResponse(content=content, finish_reason="stop"), request)


WRITTEN = {
    "bare": json.dumps(CALC),
    "fenced": f"```json\n{json.dumps(CALC)}\n```",
    "fenced, no tag": f"```\n{json.dumps(CALC, indent=2)}\n```",
    "indented over lines": json.dumps(CALC, indent=2),
    "parameters as the key": json.dumps({"name": "calculator",
                                         "parameters": {"expression": "17 * 23"}}),
    "arguments as a JSON string": json.dumps({"name": "calculator",
                                              "arguments": '{"expression": "17 * 23"}'}),
    "OpenAI's wire shape": json.dumps({"type": "function", "function": {
        "name": "calculator", "arguments": '{"expression": "17 * 23"}'}}),
    "a Qwen tag": f"<tool_call>\n{json.dumps(CALC)}\n</tool_call>",
    "a tag never closed": f"<tool_call>\n{json.dumps(CALC)}",
    "after think": f"<think>I need the calculator.</think>\n{json.dumps(CALC)}",
}


@pytest.mark.parametrize("content", list(WRITTEN.values()), ids=list(WRITTEN))
def test_a_call_written_in_the_content_is_the_call(content: str) -> None:
    out = parsed(content)
    assert out.kind == "action"
    (call,) = out.tool_calls
    assert (call.name, call.arguments, call.arguments_error) == (
        "calculator", {"expression": "17 * 23"}, None)
    assert "17 * 23" not in out.text  # the history keeps the call once: as the call


def test_several_tags_are_several_calls_and_the_prose_is_the_thought() -> None:
    content = ("I will compute it and remember it.\n"
               f"<tool_call>\n{json.dumps(CALC)}\n</tool_call>\n"
               '<tool_call>\n{"name": "remember", "arguments": {"text": "391"}}\n</tool_call>')
    out = parsed(content)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [
        ("calculator", {"expression": "17 * 23"}), ("remember", {"text": "391"})]
    assert out.thought == out.text == "I will compute it and remember it."


def test_a_list_of_calls_is_read() -> None:
    content = json.dumps([CALC, {"name": "remember", "arguments": {"text": "x"}}])
    assert [c.name for c in parsed(content).tool_calls] == ["calculator", "remember"]


ANSWERS = {
    "prose": "17 * 23 = 391.",
    "JSON naming no offered tool": '{"name": "Ann", "arguments": {"age": 4}}',
    "data JSON": 'The record:\n{"city": "Oslo", "temperature": 18}',
    "an offered name without arguments": '{"name": "calculator"}',
    "arguments that are no object": '{"name": "calculator", "arguments": "17 * 23"}',
    "JSON in the middle of a line": f"You could send {json.dumps(CALC)} to a calculator.",
    "a call cut off": '{"name": "calculator", "arguments": {"expression": "17 *',
}


@pytest.mark.parametrize("content", list(ANSWERS.values()), ids=list(ANSWERS))
def test_other_text_stays_the_answer(content: str) -> None:
    out = parsed(content)
    assert (out.kind, out.final_answer) == ("final", content)


def test_without_tools_on_the_request_nothing_is_read() -> None:
    out = parsed(json.dumps(CALC), tools=[])
    assert out.kind == "final"


BAD_TAGS = {
    "a tool that was not offered": ('<tool_call>{"name": "search", "arguments": {}}</tool_call>',
                                    "not offered (search)"),
    "cut off": ('<tool_call>{"name": "calculator", "arguments": {"expr', "not complete"),
    "no object": ("<tool_call>calculator(17 * 23)</tool_call>", "is not {"),
}


@pytest.mark.parametrize(("content", "error"), list(BAD_TAGS.values()), ids=list(BAD_TAGS))
def test_a_tag_that_holds_no_readable_call_is_invalid_never_the_answer(content: str,
                                                                        error: str) -> None:
    out = parsed(content)
    assert out.kind == "invalid" and error in (out.error or "")


def test_auto_reads_written_calls_as_native_does_and_stays_native() -> None:
    auto = AutoProtocol()
    out = parsed(f"```json\n{json.dumps(CALC)}\n```", protocol=auto)
    assert [c.name for c in out.tool_calls] == ["calculator"]
    assert auto.native_tools is True  # the model saw the tools: it named one
    react = parsed('Thought: add\nAction: calculator\nAction Input: {"expression": "1+1"}',
                   protocol=AutoProtocol())
    assert react.tool_calls[0].arguments == {"expression": "1+1"}  # the ReAct reader too


def test_hybrid_reads_a_thought_then_a_written_call() -> None:
    out = parsed(f"Thought: multiply them\n<tool_call>\n{json.dumps(CALC)}\n</tool_call>",
                 protocol=HybridProtocol())
    assert (out.kind, out.thought, out.text) == ("action", "multiply them",
                                                 "Thought: multiply them")
    assert out.tool_calls[0].arguments == {"expression": "17 * 23"}


def test_the_cost_is_bounded() -> None:
    offered = {"calculator"}
    assert json_calls(json.dumps(CALC) + " " * MAX_CONTENT_CHARS, offered) is None
    many = "\n".join(['{"n": 1}'] * MAX_OBJECTS + [json.dumps(CALC)])
    assert json_calls(many, offered) is None  # past the objects decoded
    opened = "{\n" * 49_000  # every line opens an object never closed: the first scan ends it
    assert json_calls(opened + json.dumps(CALC), offered) is None
