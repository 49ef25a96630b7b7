"""ReactProtocol: rendering, stop words, format errors and parse()."""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from miniagent.core.protocol.react import (
    FORMAT_REMINDER,
    STOP_WORDS,
    ReactProtocol,
    format_error_observation,
    render_system_prompt,
)
from miniagent.core.types import Message, ModelResponse, ToolCall


@dataclass
class FakeTool:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


CALC = FakeTool(
    name="calc",
    description="Evaluate an arithmetic expression.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "算式"}},
        "required": ["expression"],
    },
)
WEATHER = FakeTool(
    name="weather",
    description="Current weather\n  in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
TOOLS = [CALC, WEATHER]


def flat(messages: list[dict[str, Any]]) -> str:
    return "".join(f"<|{m['role']}|>{m['content']}" for m in messages)


def history() -> list[Message]:
    call = ToolCall(id="call_1", name="calc", arguments={"expression": "2+3"})
    call2 = ToolCall(id="call_2", name="weather", arguments={"city": "北京"})
    return [
        Message(role="user", content="2+3 是多少？然后查北京天气"),
        Message(
            role="assistant",
            content='Thought: 先算\nAction: calc\nAction Input: {"expression": "2+3"}',
            tool_calls=[call],
        ),
        Message(role="tool", content="5", tool_call_id="call_1", name="calc"),
        Message(role="assistant", content=None, tool_calls=[call2]),
        Message(role="tool", content="晴，25°C", tool_call_id="call_2", name="weather"),
        Message(role="assistant", content="Thought: 我知道了\nFinal Answer: 5，北京晴。"),
        Message(role="user", content="谢谢"),
    ]


def test_request_shape() -> None:
    req = ReactProtocol().render(history()[:1], TOOLS)
    assert ReactProtocol.name == "react"
    assert req.tools is None
    assert req.stop == STOP_WORDS
    assert req.messages[0]["role"] == "system"
    assert req.messages[1] == {"role": "user", "content": "2+3 是多少？然后查北京天气"}


def test_stop_words() -> None:
    assert 1 <= len(STOP_WORDS) <= 4
    assert "\nObservation:" in STOP_WORDS
    assert all(w.startswith("\n") for w in STOP_WORDS)


def test_system_prompt_content() -> None:
    prompt = render_system_prompt(TOOLS, instructions="Be brief.")
    assert "Instructions:\nBe brief." in prompt
    schema = json.dumps(CALC.parameters, ensure_ascii=False, separators=(",", ":"))
    assert f"- calc: Evaluate an arithmetic expression.\n  Input: {schema}" in prompt
    assert "算式" in prompt  # not \\u-escaped
    assert "- weather: Current weather in a city." in prompt
    assert "Valid tool names: calc, weather" in prompt
    assert FORMAT_REMINDER in prompt
    for word in ("Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:"):
        assert word in prompt
    assert prompt.index("Be brief.") < prompt.index("- calc:")


def test_system_prompt_without_tools_or_instructions() -> None:
    prompt = render_system_prompt([])
    assert "Instructions" not in prompt
    assert "Valid tool names: (none)" in prompt


def test_history_rendering() -> None:
    msgs = ReactProtocol().render(history(), TOOLS).messages
    assert [m["role"] for m in msgs] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert msgs[2]["content"] == history()[1].content
    assert msgs[3] == {"role": "user", "content": "Observation: 5"}
    assert msgs[4]["content"] == 'Action: weather\nAction Input: {"city": "北京"}'
    assert msgs[5] == {"role": "user", "content": "Observation: 晴，25°C"}
    assert msgs[7] == {"role": "user", "content": "谢谢"}


def test_native_prose_with_calls_gets_the_action_appended() -> None:
    call = ToolCall(id="c", name="calc", arguments={}, raw_arguments="2+3")
    msg = Message(role="assistant", content="Let me compute.", tool_calls=[call])
    out = ReactProtocol().render([msg], TOOLS).messages[1]["content"]
    assert out == "Let me compute.\nAction: calc\nAction Input: 2+3"


def test_system_message_in_history_is_rendered_as_system() -> None:
    msgs = ReactProtocol().render([Message(role="system", content="extra")], []).messages
    assert msgs[1] == {"role": "system", "content": "extra"}


@pytest.mark.parametrize("cut", range(1, 7))
def test_rendering_is_prefix_stable(cut: int) -> None:
    proto = ReactProtocol()
    full = history()
    short = proto.render(full[:cut], TOOLS, "Be brief.").messages
    long = proto.render(full, TOOLS, "Be brief.").messages
    assert long[: len(short)] == short
    assert flat(long).startswith(flat(short))


def test_prefix_over_a_four_step_run() -> None:
    proto = ReactProtocol()
    msgs: list[Message] = [Message(role="user", content="question")]
    prompts = [flat(proto.render(msgs, TOOLS).messages)]
    for step in range(4):
        call = ToolCall(id=f"c{step}", name="calc", arguments={"expression": f"{step}+1"})
        text = f'Action: calc\nAction Input: {{"expression": "{step}+1"}}'
        msgs.append(Message(role="assistant", content=text, tool_calls=[call]))
        msgs.append(Message(role="tool", content=str(step + 1), tool_call_id=f"c{step}"))
        prompts.append(flat(proto.render(msgs, TOOLS).messages))
    for earlier, later in itertools.pairwise(prompts):
        assert later.startswith(earlier)
        assert len(later) > len(earlier)


def test_render_is_deterministic_and_pure() -> None:
    proto = ReactProtocol()
    msgs, tools = history(), copy.deepcopy(TOOLS)
    before = copy.deepcopy(msgs), copy.deepcopy(tools)
    first = proto.render(msgs, tools, "x")
    second = proto.render(msgs, tools, "x")
    assert first == second
    assert (msgs, tools) == before
    first.stop.append("mutated")  # type: ignore[union-attr]
    assert proto.render(msgs, tools).stop == STOP_WORDS


def test_render_reuses_the_system_prompt_only_while_tools_and_instructions_are_equal() -> None:
    proto = ReactProtocol()
    tools = copy.deepcopy(TOOLS)
    user = [Message(role="user", content="hi")]

    def system(tools: list[FakeTool], instructions: str | None = None) -> str:
        content = proto.render(user, tools, instructions).messages[0]["content"]
        assert content == render_system_prompt(tools, instructions)
        return str(content)

    first = system(tools)
    assert system(tools) is first  # reused
    assert "Be brief." in system(tools, "Be brief.")
    assert "weather" not in system(tools[:1])
    tools[0].parameters["properties"]["expression"]["description"] = "a formula"
    assert "a formula" in system(tools)  # a schema changed in place is seen
    tools[0].description = "Compute."
    assert "Compute." in system(tools)


def test_format_error_observation() -> None:
    text = format_error_observation("no 'Action:' or 'Final Answer:' found", ["calc", "weather"])
    assert "no 'Action:' or 'Final Answer:' found" in text
    assert FORMAT_REMINDER in text
    assert "Valid tool names: calc, weather" in text
    assert "(none)" in format_error_observation("x", [])


def test_parse_uses_content() -> None:
    proto = ReactProtocol()
    out = proto.parse(ModelResponse(content='Action: calc\nAction Input: {"expression": "1"}'))
    assert out.kind == "action"
    assert out.tool_calls[0].arguments == {"expression": "1"}
    assert proto.parse(ModelResponse(content=None)).kind == "invalid"
    assert proto.parse(ModelResponse(content="Final Answer: 2")).final_answer == "2"


def test_parse_accepts_native_calls_without_text() -> None:
    call = ToolCall(id="call_x", name="calc", arguments={"expression": "1"})
    out = ReactProtocol().parse(ModelResponse(content="", tool_calls=[call]))
    assert out.kind == "action"
    assert out.tool_calls == [call]
    assert out.text == 'Action: calc\nAction Input: {"expression": "1"}'


def test_parsed_text_rerenders_as_prefix() -> None:
    """What the parser keeps is what the next prompt shows, nothing more."""
    proto = ReactProtocol()
    raw = 'Action: calc\nAction Input: {"expression": "1"}\nObservation: 99 (made up)'
    parsed = proto.parse(ModelResponse(content=raw))
    msgs = [
        Message(role="user", content="q"),
        Message(role="assistant", content=parsed.text, tool_calls=parsed.tool_calls),
        Message(role="tool", content="1"),
    ]
    rendered = proto.render(msgs, TOOLS).messages
    assert "99" not in flat(rendered)
    assert rendered[-1]["content"] == "Observation: 1"
