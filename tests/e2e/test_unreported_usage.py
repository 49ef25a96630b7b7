"""A server that reports no usage (llama.cpp's server, streaming), over real HTTP on 127.0.0.1:
the run's usage stays unknown, and the token budget still holds on estimates."""

from __future__ import annotations

import pytest

from miniagent import Agent, Limits, OpenAICompatibleModel, tool
from miniagent.testing.stub_server import LLAMA_CPP, StubServer


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return f"{city}: 12°C，多云，东北风三级，空气质量良好" * 5


def lookups(n: int) -> list[str]:
    return [f'Thought: look again\nAction: weather\nAction Input: {{"city": "北京{i}"}}'
            for i in range(n)]


def model(stub: StubServer, *, stream: bool) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="react",
                                 stream=stream, max_retries=0)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_a_run_without_reported_usage_has_it_unknown(stream: bool) -> None:
    script = [*lookups(1), "Thought: done\nFinal Answer: 12°C"]
    async with StubServer(script, report_usage=False, stream_style=LLAMA_CPP) as stub:
        agent = Agent(model=model(stub, stream=stream), tools=[weather])
        result = await agent.arun("北京天气怎么样？")
        await agent.aclose()
        asked = [r.get("stream_options") for r in stub.requests]
    assert (result.status, result.final_answer) == ("completed", "12°C")
    if stream:  # usage was asked for, and none came
        assert asked == [{"include_usage": True}] * 2
    assert result.usage.total_tokens is None and result.usage.prompt_tokens is None
    assert [s.usage.total_tokens for s in result.steps] == [None, None]
    assert all(s.usage.estimated_tokens > 0 for s in result.steps)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_the_token_budget_ends_a_run_whose_server_reports_no_usage(stream: bool) -> None:
    async with StubServer(lookups(20), report_usage=False, stream_style=LLAMA_CPP) as stub:
        agent = Agent(model=model(stub, stream=stream), tools=[weather],
                      limits=Limits(token_budget=1500))
        result = await agent.arun("北京天气怎么样？")
        await agent.aclose()
        served = len(stub.requests)
    assert result.status == "budget_exceeded"
    assert "tokens (estimated) of a budget of 1,500" in result.reason
    assert served < 20 and result.usage.counted_tokens >= 1500
