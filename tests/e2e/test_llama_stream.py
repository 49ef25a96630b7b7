"""Streaming, tool_choice and hybrid against llama.cpp's real server and the packaged SmolLM2.

The server is started by the fixture of ``test_llama_server.py`` (free 127.0.0.1 port, stopped
after the module); tests skip where llama-cpp-python[server] or the model is missing. One model
call per test (max_steps 1), and the last request for an answer where a run reaches the limit.
Measured here: llama-cpp-python's server accepts ``stream_options`` but sends no usage in a
stream, so token counts are not asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_llama_server import llama_server

from miniagent import Agent, Aids, Limits, ModelSettings, OpenAICompatibleModel
from miniagent.core.runtime import events as ev
from miniagent.core.tools.calculator import calculator


@pytest.fixture(scope="module")
def react_server() -> Iterator[str]:
    with llama_server() as base_url:
        yield base_url


@pytest.fixture(scope="module")
def native_server() -> Iterator[str]:
    with llama_server("chatml-function-calling") as base_url:
        yield base_url


class Deltas:
    def __init__(self) -> None:
        self.events: list[ev.ModelDelta] = []

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.ModelDelta):
            self.events.append(event)

    def text(self, channel: str = "content", step: int = 1) -> str:
        """What step ``step`` streamed (a run that reaches max_steps asks once more)."""
        return "".join(e.text for e in self.events if e.channel == channel and e.step == step)


def _streaming(base_url: str, mode: str, **options: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=base_url, model="smollm2", tool_mode=mode,  # type: ignore[arg-type]
                                 timeout=180.0, max_retries=0, stream=True, **options)


async def test_react_stream_with_grammar_and_required_tool_choice(react_server: str) -> None:
    """The grammar without its Final Answer branch: the tiny model must write an action, and
    every token of it arrives as a delta."""
    model = _streaming(react_server, "react", grammar_field="grammar")
    deltas = Deltas()
    agent = Agent(model=model, tools=[calculator], limits=Limits(max_steps=1),
                  model_settings=ModelSettings(max_tokens=96), aids=Aids(tool_choice="required"))
    agent.subscribe(deltas)
    result = await agent.arun("What is 17 * 3?")
    await model.aclose()
    assert result.status == "max_steps", result.reason  # one step, and it was an action
    step = result.steps[0]
    assert step.error is None
    assert [call.name for call in step.tool_calls] == ["calculator"]
    assert len(step.observations) == 1  # the call ran (its result is not judged)
    raw = step.raw_output or ""
    assert raw.startswith("Thought: ") and "\nAction: calculator\nAction Input: {" in raw
    assert "Final Answer" not in raw and "Observation:" not in raw
    assert len(deltas.events) > 5 and deltas.text() == raw  # streamed token by token
    assert not [e for e in deltas.events if e.channel == "restart"]
    assert model.stream  # streaming was never given up


async def test_react_stream_without_grammar_keeps_observations_out(react_server: str) -> None:
    model = _streaming(react_server, "react")
    deltas = Deltas()
    agent = Agent(model=model, tools=[calculator], limits=Limits(max_steps=1),
                  model_settings=ModelSettings(max_tokens=64))
    agent.subscribe(deltas)
    result = await agent.arun("What is 17 * 3? Use the calculator.")
    await model.aclose()
    assert result.status in {"completed", "max_steps"}, result.reason
    raw = result.steps[0].raw_output or ""
    assert "Observation:" not in raw  # the stop words held (server side, or cut here)
    assert deltas.text() == raw and raw
    assert model.stream


async def test_native_stream_with_a_forced_tool(native_server: str) -> None:
    """chatml-function-calling streams a forced call; the name and arguments come through the
    stream (a named choice keeps llama-cpp-python within max_tokens; see test_llama_server)."""
    model = _streaming(native_server, "native")
    deltas = Deltas()
    agent = Agent(model=model, tools=[calculator], limits=Limits(max_steps=1),
                  model_settings=ModelSettings(max_tokens=64), aids=Aids(tool_choice="calculator"))
    agent.subscribe(deltas)
    result = await agent.arun("Use the calculator tool to compute 17 * 3.")
    await model.aclose()
    assert result.status == "max_steps", result.reason
    calls = result.steps[0].tool_calls
    assert [call.name for call in calls] == ["calculator"]
    assert isinstance(calls[0].arguments, dict)
    assert not [e for e in deltas.events if e.channel == "restart"]
    assert model.stream
