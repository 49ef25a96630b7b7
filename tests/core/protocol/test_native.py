"""The native protocol: rendering, the prefix invariant, parsing."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from miniagent.core.protocol.native import NativeProtocol, strip_think
from miniagent.core.types import Message, ModelResponse, ToolCall


@dataclass
class FakeTool:
    name: str
    description: str = "A tool."
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {"x": {"type": "integer"}}}
    )


def completion(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"choices": [{"index": 0, "message": message, **extra}]}
    return body


def one_call(arguments: Any, name: str = "calc", **call: Any) -> dict[str, Any]:
    item = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    item.update(call)
    return completion({"role": "assistant", "content": None, "tool_calls": [item]})


HISTORY = [
    Message(role="user", content="What is 6*7?"),
    Message(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id="call_a", name="calc", arguments={"expr": "6*7", "note": "é"})],
    ),
    Message(role="tool", content="42", tool_call_id="call_a", name="calc"),
    Message(role="assistant", content="The answer is 42."),
    Message(role="user", content="And 6*8?"),
    Message(
        role="assistant",
        content="Let me compute.",
        tool_calls=[
            ToolCall(id="call_b", name="calc", arguments={"expr": "6*8"}),
            ToolCall(id="call_c", name="clock", arguments={}),
        ],
    ),
    Message(role="tool", content="48", tool_call_id="call_b"),
    Message(role="tool", content="", tool_call_id="call_c"),
]


# -- render ---------------------------------------------------------------------------


def test_render_wire_format() -> None:
    request = NativeProtocol().render(HISTORY[:4], [FakeTool("calc")], instructions="Be brief.")
    assert request.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 6*7?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "calc", "arguments": '{"expr": "6*7", "note": "é"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "42"},
        {"role": "assistant", "content": "The answer is 42."},
    ]
    assert request.tools == [
        {
            "type": "function",
            "function": {
                "name": "calc",
                "description": "A tool.",
                "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
            },
        }
    ]
    assert request.stop is None


def test_render_without_tools_or_instructions() -> None:
    proto = NativeProtocol()
    assert proto.name == "native"
    request = proto.render([Message(role="user", content="hi")], [])
    assert request.messages == [{"role": "user", "content": "hi"}]
    assert request.tools is None


def test_render_is_append_only() -> None:
    proto = NativeProtocol()
    tools = [FakeTool("calc"), FakeTool("clock")]
    rendered = [proto.render(HISTORY[:k], tools, "sys") for k in range(len(HISTORY) + 1)]
    for shorter, longer in itertools.pairwise(rendered):
        assert longer.messages[: len(shorter.messages)] == shorter.messages
        assert longer.tools == shorter.tools
        short_text = json.dumps(shorter.messages, ensure_ascii=False)[:-1]
        long_text = json.dumps(longer.messages, ensure_ascii=False)
        assert long_text.startswith(short_text)  # byte prefix, bar the closing bracket


# -- parse ----------------------------------------------------------------------------


def test_parse_action() -> None:
    calls = [ToolCall(id="c", name="calc", arguments={})]
    response = ModelResponse(content="<think>plan</think>  I will compute. ", tool_calls=calls)
    parsed = NativeProtocol().parse(response)
    assert parsed.kind == "action"
    assert parsed.thought == "I will compute."
    assert parsed.tool_calls == calls
    assert parsed.text == "<think>plan</think>  I will compute. "


def test_parse_action_without_content() -> None:
    calls = [ToolCall(id="c", name="calc")]
    parsed = NativeProtocol().parse(ModelResponse(content=None, tool_calls=calls))
    assert (parsed.kind, parsed.thought, parsed.text) == ("action", None, "")


def test_parse_final() -> None:
    parsed = NativeProtocol().parse(ModelResponse(content="<think>hm</think>\n  42\n"))
    assert (parsed.kind, parsed.final_answer) == ("final", "42")


@pytest.mark.parametrize("content", [None, "", "   ", "<think>only thinking</think>", "<think>x"])
def test_parse_invalid(content: str | None) -> None:
    parsed = NativeProtocol().parse(ModelResponse(content=content))
    assert (parsed.kind, parsed.error) == ("invalid", "empty response")
    assert parsed.text == (content or "")


def test_strip_think_variants() -> None:
    assert strip_think("a<think>b</think>c<think>d</think>e") == "ace"
    assert strip_think("reasoning opened by the template</think>answer") == "answer"
    assert strip_think("answer <think>never closed") == "answer "
    assert strip_think("no tags") == "no tags"
