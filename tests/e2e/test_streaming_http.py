"""Streaming end to end: Agent -> OpenAICompatibleModel(stream=True) -> real HTTP on 127.0.0.1
-> the stub server streaming in the manner of vLLM, llama.cpp, Ollama and odder servers.

Assertions are on final answers, the tools' real results, the ``model_delta`` events the
subscribers got, and what the server received.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from miniagent import Agent, OpenAICompatibleModel, tool
from miniagent.core.errors import ModelResponseError
from miniagent.core.runtime import events as ev
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import (
    LLAMA_CPP,
    OLLAMA,
    REPEATED_NAME,
    SHARED_INDEX,
    VLLM,
    StreamStyle,
    StubServer,
)


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"Paris": "18°C, sunny", "北京": "12°C，多云"}.get(city, "unknown")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Recorder:
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def __call__(self, event: ev.Event) -> None:
        self.events.append(event)

    def deltas(self, channel: str = "content") -> list[ev.ModelDelta]:
        return [e for e in self.events if isinstance(e, ev.ModelDelta) and e.channel == channel]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def _model(stub: StubServer, mode: str = "react", **options: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode=mode,  # type: ignore[arg-type]
                                 stream=True, max_retries=0, **options)


async def test_react_streams_deltas_to_subscribers_in_order() -> None:
    script = ['Thought: I need the weather\nAction: weather\nAction Input: {"city": "北京"}',
              "Thought: I know it\nFinal Answer: 12°C，多云"]
    async with StubServer(script, stream_style=LLAMA_CPP) as stub:
        recorder = Recorder()
        agent = Agent(model=_model(stub), tools=[weather])
        agent.subscribe(recorder)
        result = await agent.arun("北京天气？")
        await agent.aclose()
    assert (result.status, result.final_answer) == ("completed", "12°C，多云")
    assert result.steps[0].observations[0].output == "12°C，多云"
    for step in (1, 2):
        shown = "".join(d.text for d in recorder.deltas() if d.step == step)
        assert shown == result.steps[step - 1].raw_output
        assert len([d for d in recorder.deltas() if d.step == step]) > 10  # token by token
    # each delta sits between its call's start and its response, in the call's span
    kinds = recorder.kinds()
    first_delta = kinds.index("model_delta")
    assert kinds.index("model_started") < first_delta < kinds.index("model_responded")
    started = next(e for e in recorder.events if isinstance(e, ev.ModelStarted))
    assert {d.span_id for d in recorder.deltas() if d.step == 1} == {started.span_id}
    assert all(r["stream"] is True for r in stub.requests)
    assert stub.requests[0]["stream_options"] == {"include_usage": True}
    assert stub.requests[0]["stop"][0] == "\nObservation:"
    assert stub.connections == 1  # a stream read to its end leaves the connection reusable


@pytest.mark.parametrize("style", [VLLM, LLAMA_CPP, OLLAMA, REPEATED_NAME, SHARED_INDEX],
                         ids=["vllm", "llama.cpp", "ollama", "repeated-name", "shared-index"])
async def test_native_calls_streamed_in_each_style_run_with_the_right_arguments(
        style: StreamStyle) -> None:
    script: list[Any] = [
        {"content": None, "tool_calls": [
            {"id": "c1", "name": "weather", "arguments": {"city": "Paris"}},
            {"id": "c2", "name": "add", "arguments": {"a": 20, "b": 22}}]},
        "Paris is 18°C, sunny; 20 + 22 = 42.",
    ]
    async with StubServer(script, stream_style=style, usage={"prompt_tokens": 10}) as stub:
        recorder = Recorder()
        agent = Agent(model=_model(stub, "native"), tools=[weather, add])
        agent.subscribe(recorder)
        result = await agent.arun("Weather in Paris, and 20+22?")
        await agent.aclose()
    assert result.status == "completed", result.reason
    assert result.final_answer == "Paris is 18°C, sunny; 20 + 22 = 42."
    observed = {o.call_id: o.output for o in result.steps[0].observations}
    assert observed == {"c1": "18°C, sunny", "c2": "42"}
    # the history sent back holds each call once, with its arguments whole
    sent_calls = stub.requests[1]["messages"][-3]["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in sent_calls] == [("c1", "weather", {"city": "Paris"}),
                                     ("c2", "add", {"a": 20, "b": 22})]
    assert result.usage.prompt_tokens == 20  # usage came through the stream, twice 10
    assert "".join(d.text for d in recorder.deltas() if d.step == 2) == result.final_answer


async def test_a_server_refusing_stream_options_is_asked_again_without_it() -> None:
    style = StreamStyle(reject_stream_options=True)
    async with StubServer(["Final Answer: one", "Final Answer: two"], stream_style=style) as stub:
        model = _model(stub)
        first = await Agent(model=model).arun("q1")
        second = await Agent(model=model).arun("q2")
        await model.aclose()
    assert (first.final_answer, second.final_answer) == ("one", "two")
    assert ["stream_options" in r for r in stub.requests] == [True, False, False]
    assert all(r["stream"] is True for r in stub.requests)


async def test_a_stream_that_breaks_off_is_asked_again_once_without_streaming() -> None:
    style = StreamStyle(text_piece=2, break_after=4)
    async with StubServer(["Thought: long answer\nFinal Answer: 42"] * 2,
                          stream_style=style) as stub:
        recorder = Recorder()
        result = await Agent(model=_model(stub)).arun("q", on_event=recorder)
    assert (result.status, result.final_answer) == ("completed", "42")
    assert [r.get("stream", False) for r in stub.requests] == [True, False]
    assert len(recorder.deltas("restart")) == 1
    # what was shown before the break is voided by the restart, which comes before the answer
    kinds = recorder.kinds()
    assert kinds.index("model_delta") < kinds.index("model_responded")


async def test_promised_calls_that_never_arrive_are_asked_again_without_streaming() -> None:
    script: list[Any] = [{"content": None, "tool_calls": [{"name": "add",
                                                           "arguments": {"a": 1, "b": 2}}]}] * 2
    script.append("3")
    async with StubServer(script, stream_style=StreamStyle(drop_calls=True)) as stub:
        result = await Agent(model=_model(stub, "native"), tools=[add]).arun("1+2?")
    assert (result.status, result.final_answer) == ("completed", "3")
    assert result.steps[0].observations[0].output == "3"
    assert [r.get("stream", False) for r in stub.requests] == [True, False, True]


async def test_stop_words_cut_a_stream_whose_server_ignores_them() -> None:
    text = ('Thought: add\nAction: add\nAction Input: {"a": 1, "b": 2}\nObservation: 99\n'
            "Thought: done\nFinal Answer: 99")
    async with StubServer([text, "Final Answer: 3"], stream_style=StreamStyle(text_piece=1),
                          ) as stub:
        recorder = Recorder()
        result = await Agent(model=_model(stub), tools=[add]).arun("1+2?", on_event=recorder)
    assert (result.status, result.final_answer) == ("completed", "3")
    assert result.steps[0].raw_output == 'Thought: add\nAction: add\nAction Input: {"a": 1, "b": 2}'
    assert result.steps[0].observations[0].output == "3"
    assert "Observation" not in "".join(d.text for d in recorder.deltas() if d.step == 1)
    assert stub.connections == 2  # the cut stream's connection was closed, not reused


async def test_the_body_cap_holds_for_streams() -> None:
    async with StubServer(["x" * 5000], stream_style=StreamStyle(text_piece=50)) as stub:
        model = _model(stub, max_body_bytes=2000)
        with pytest.raises(ModelResponseError, match="max_body_bytes"):
            await model.generate(ModelRequest(messages=[{"role": "user", "content": "q"}]))
        await model.aclose()
