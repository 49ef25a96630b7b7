"""The hybrid protocol: a thought in text or reasoning_content, then a native call; both replayed
as they were, checked on what a real HTTP server received."""

from __future__ import annotations

import json
from typing import Any

import pytest

from miniagent import Agent, OpenAICompatibleModel, ScriptedModel, tool
from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.protocol.hybrid import HYBRID_PROMPT, HybridProtocol, split_thought
from miniagent.core.store.base import InMemoryStore
from miniagent.core.types import Message
from miniagent.testing.stub_server import LLAMA_CPP, StubServer


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"Paris": "18°C, sunny", "北京": "12°C，多云"}.get(city, "unknown")


def _call(arguments: str, call_id: str = "c1", **extra: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": "weather", "arguments": arguments}}], **extra}


@pytest.mark.parametrize(("text", "thought", "rest"), [
    ("Thought: need the weather", "need the weather", ""),
    ("**Thought:** check\nFinal Answer: 18°C", "check", "18°C"),
    ("思考：先查天气\n\n北京 12°C", "先查天气", "北京 12°C"),
    ("Thought: one\nParis is sunny.", "one", "Paris is sunny."),
    ("Final Answer: 4", None, "4"),
    ("plain answer", None, "plain answer"),
])
def test_split_thought(text: str, thought: str | None, rest: str) -> None:
    assert split_thought(text) == (thought, rest)


async def test_thought_in_content_then_a_call_replayed_byte_for_byte() -> None:
    content = "Thought: I should look up 北京's weather first.  "
    raw_args = '{"city":"北京"}'  # compact, as the model wrote it
    async with StubServer([{"content": content, **_call(raw_args)},
                           "Thought: I have it\nFinal Answer: 12°C，多云"]) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, tool_mode="hybrid", max_retries=0)
        agent = Agent(model=model, tools=[weather], instructions="Be brief.")
        result = await agent.arun("北京天气？")
        await model.aclose()
    assert (result.status, result.final_answer) == ("completed", "12°C，多云")
    assert result.steps[0].thought == "I should look up 北京's weather first."
    assert result.steps[1].thought == "I have it"
    first, second = stub.requests
    assert first["messages"][0]["content"].startswith(HYBRID_PROMPT)
    assert "Be brief." in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]
    replayed = second["messages"][2]
    assert replayed["content"] == content  # not stripped, not rewritten
    assert replayed["tool_calls"][0]["function"]["arguments"] == raw_args
    assert "reasoning_content" not in replayed
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "c1",
                                     "content": "12°C，多云"}
    assert second["messages"][:2] == first["messages"]  # append-only: a prefix


async def test_reasoning_content_is_the_thought_and_is_sent_back_on_the_call_turn() -> None:
    reasoning = "The user wants Paris. Call weather."
    script: list[Any] = [
        {"content": "", "reasoning_content": reasoning, **_call('{"city": "Paris"}')},
        {"content": "18°C, sunny", "reasoning_content": "Done."}]
    async with StubServer(script, stream_style=LLAMA_CPP) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, tool_mode="hybrid", max_retries=0,
                                      stream=True)
        store = InMemoryStore()
        deltas: list[Any] = []
        agent = Agent(model=model, tools=[weather], store=store)
        agent.subscribe(lambda e: deltas.append(e) if e.kind == "model_delta" else None)
        result = await agent.arun("Weather in Paris?")
        await model.aclose()
    assert (result.status, result.final_answer) == ("completed", "18°C, sunny")
    assert result.steps[0].thought == reasoning
    assert result.steps[1].thought == "Done."
    turn = stub.requests[1]["messages"][2]
    assert turn["reasoning_content"] == reasoning and turn["content"] == ""
    assert "".join(d.text for d in deltas if d.channel == "reasoning" and d.step == 1) == reasoning
    saved = store.load(result.session_id)  # durable: a resumed run replays the same bytes
    assert saved.messages[1].reasoning == reasoning
    again = HybridProtocol().render(saved.messages, [weather])
    assert again.messages[:3] == stub.requests[1]["messages"][:3]


async def test_a_reply_without_a_thought_still_works() -> None:
    model = ScriptedModel([_call('{"city": "Paris"}', content=None), "18°C, sunny"],
                          tool_mode="hybrid")
    result = await Agent(model=model, tools=[weather]).arun("Paris?")
    assert (result.status, result.final_answer) == ("completed", "18°C, sunny")
    assert result.steps[0].thought is None
    assert result.steps[0].observations[0].output == "18°C, sunny"


async def test_a_thought_alone_is_sent_back_with_the_format() -> None:
    model = ScriptedModel(["Thought: I will check the weather",
                           _call('{"city": "Paris"}'), "Sunny."], tool_mode="hybrid")
    result = await Agent(model=model, tools=[weather]).arun("Paris?")
    assert result.final_answer == "Sunny."
    assert result.steps[0].error == "a thought but no tool call and no answer"
    told = model.requests[1].messages[-1]["content"]
    assert "Thought: ..." in told and "weather" in told


def test_invalid_arguments_are_re_encoded_not_replayed() -> None:
    proto = HybridProtocol()
    reply = normalize_completion({"choices": [{"message": _call('{"city": "Par')}]})
    parsed = proto.parse(reply)
    history = [Message(role="user", content="q"),
               Message(role="assistant", content=parsed.text, tool_calls=parsed.tool_calls)]
    wire = proto.render(history, [weather]).messages[2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(wire) == parsed.tool_calls[0].arguments  # valid JSON for the template
