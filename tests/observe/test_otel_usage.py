"""Token usage as a real OTLP/HTTP receiver gets it: counts the server reported, and none (not
0) for calls whose server reported nothing."""

from __future__ import annotations

from otlp_receiver import otlp_receiver
from test_otel import weather
from test_otel_kinds import traced_run

from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.testing.stub_server import LLAMA_CPP, StubServer

USAGE = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
         "gen_ai.usage.cache_read.input_tokens")
ACT = 'Thought: look\nAction: weather\nAction Input: {"city": "北京"}'


def model(stub: StubServer, *, stream: bool) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="react",
                                 stream=stream, max_retries=0)


def test_a_streamed_run_without_usage_exports_no_token_counts() -> None:
    script = [ACT, "Thought: done\nFinal Answer: 晴"]
    stub = StubServer(script, report_usage=False, stream_style=LLAMA_CPP)
    with stub.run_in_thread(), otlp_receiver() as receiver:
        result = traced_run(receiver, model(stub, stream=True), tools=[weather])
    assert result.status == "completed" and result.usage.total_tokens is None
    chats = receiver.named("chat")
    assert len(chats) == 2
    for span in [*chats, *receiver.named("invoke_agent"), *receiver.named("step")]:
        assert not set(USAGE) & set(span.attributes), span.name
    estimates = [s.attributes["miniagent.usage.estimated_tokens"] for s in chats]
    assert estimates == [s.usage.estimated_tokens for s in result.steps] and all(estimates)
    agent, = receiver.named("invoke_agent")
    assert agent.attributes["miniagent.usage.estimated_tokens"] == sum(estimates)


def test_reported_counts_are_exported_and_the_run_s_sum_only_when_all_are_known() -> None:
    script = [{"content": ACT, "usage": {"prompt_tokens": 300, "completion_tokens": 12}},
              {"content": "Thought: done\nFinal Answer: 晴", "usage": None}]
    with StubServer(script).run_in_thread() as stub, otlp_receiver() as receiver:
        result = traced_run(receiver, model(stub, stream=False), tools=[weather])
    assert result.status == "completed"
    first, second = sorted(receiver.named("chat"), key=lambda s: s.start_ns)
    assert [first.attributes[key] for key in USAGE] == [300, 12, 0]
    assert "miniagent.usage.estimated_tokens" not in first.attributes
    assert not set(USAGE) & set(second.attributes)
    agent, = receiver.named("invoke_agent")
    assert not set(USAGE) & set(agent.attributes)  # a sum with a part unknown is unknown
    assert agent.attributes["miniagent.usage.estimated_tokens"] == (
        312 + second.attributes["miniagent.usage.estimated_tokens"])
