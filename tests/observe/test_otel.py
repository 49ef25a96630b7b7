"""OpenTelemetry spans of real runs: the SDK's in-memory exporter, and a real OTLP/HTTP receiver."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otlp_receiver import otlp_receiver

from miniagent import Agent, OpenAICompatibleModel, ScriptedModel, tool
from miniagent.core.errors import ConfigError
from miniagent.core.models.describe import describe_model
from miniagent.core.types import ModelRequest
from miniagent.observe.otel import ATTRIBUTE_LIMIT, CONTENT_ENV, OtelTracer, otlp_provider
from miniagent.observe.otlp_spans import MAX_REQUEST_BYTES
from miniagent.testing.stub_server import StubServer


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"北京": "12°C，多云"}.get(city, "unknown")


@tool
def broken(city: str) -> str:
    """A tool that always fails.

    Args:
        city: the city name
    """
    raise RuntimeError("service unavailable")


SCRIPT = [
    'Thought: 查天气\nAction: weather\nAction Input: {"city": "北京"}',
    "Thought: done\nFinal Answer: 12°C，多云",
]


def memory_tracer(model: Any, **options: Any) -> tuple[OtelTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracer(model=describe_model(model), tracer_provider=provider, **options), exporter


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def test_spans_follow_the_genai_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    with StubServer(SCRIPT, usage={"prompt_tokens": 100, "completion_tokens": 8,
                                   "cached_tokens": 40}).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="stub-model",
                                      api_key="sk-" + secrets.token_hex(20), tool_mode="react")
        tracer, exporter = memory_tracer(model)
        result = Agent(model=model, tools=[weather]).run("北京天气？", on_event=tracer)
    assert result.status == "completed"
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat stub-model", "chat stub-model", "execute_tool weather", "invoke_agent miniagent",
        "step 1", "step 2"]
    agent, = by_name(spans, "invoke_agent")
    steps = by_name(spans, "step")
    chats = by_name(spans, "chat")
    tool_span, = by_name(spans, "execute_tool")
    assert agent.parent is None and agent.kind == SpanKind.INTERNAL
    assert {s.parent.span_id for s in steps if s.parent} == {agent.context.span_id}
    assert chats[0].parent and chats[0].parent.span_id == steps[0].context.span_id
    assert tool_span.parent and tool_span.parent.span_id == steps[0].context.span_id
    assert len({s.context.trace_id for s in spans}) == 1
    for span in spans:
        assert span.attributes and span.attributes["gen_ai.conversation.id"] == result.session_id

    chat = dict(chats[0].attributes or {})
    assert chats[0].kind == SpanKind.CLIENT
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "stub-model"
    assert chat["gen_ai.response.model"] == "stub-model"
    assert chat["gen_ai.provider.name"] == "openai"
    assert chat["server.address"] == "127.0.0.1" and chat["server.port"] == stub.port
    assert chat["gen_ai.usage.input_tokens"] == 100
    assert chat["gen_ai.usage.output_tokens"] == 8
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 40
    assert chat["gen_ai.response.finish_reasons"] == ("stop",)
    assert "\nObservation:" in chat["gen_ai.request.stop_sequences"]

    tool_attrs = dict(tool_span.attributes or {})
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "weather"
    assert tool_attrs["gen_ai.tool.call.id"] == result.steps[0].calls[0].call.id

    agent_attrs = dict(agent.attributes or {})
    assert agent_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert agent_attrs["gen_ai.usage.input_tokens"] == 200
    assert agent_attrs["gen_ai.usage.cache_read.input_tokens"] == 80
    assert agent.status.status_code == StatusCode.UNSET
    assert agent.start_time is not None and tool_span.start_time is not None
    assert agent.start_time <= tool_span.start_time <= (agent.end_time or 0)

    recorded = json.dumps([dict(s.attributes or {}) for s in spans], ensure_ascii=False)
    assert "北京" not in recorded and "gen_ai.input.messages" not in recorded  # no content


def test_a_chat_span_names_the_protocol_and_the_request_settings() -> None:
    model = ScriptedModel(SCRIPT)
    tracer, exporter = memory_tracer(model)
    Agent(model=model, tools=[weather]).run("北京天气？", on_event=tracer)
    chat = dict(by_name(exporter.get_finished_spans(), "chat")[0].attributes or {})
    assert chat["miniagent.protocol"] == "react"  # an attribute of ours, named since 0.1
    request = ModelRequest(messages=[])  # the defaults an agent sends
    assert (chat["gen_ai.request.temperature"], chat["gen_ai.request.max_tokens"]) == (
        request.temperature, request.max_tokens)
    assert "\nObservation:" in chat["gen_ai.request.stop_sequences"]
    assert not any(name.startswith("miniagent.core.") for name in chat)


def test_content_only_when_asked_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-" + secrets.token_hex(20)
    monkeypatch.setenv(CONTENT_ENV, "true")
    model = ScriptedModel([*SCRIPT[:1], f"Thought: key {key}\nFinal Answer: 12°C，多云"])
    tracer, exporter = memory_tracer(model, secrets=[key])
    Agent(model=model, tools=[weather]).run("北京天气？", on_event=tracer)
    spans = exporter.get_finished_spans()
    chats = by_name(spans, "chat")
    first = json.loads(str((chats[0].attributes or {})["gen_ai.input.messages"]))
    assert first[-1] == {"role": "user", "parts": [{"type": "text", "content": "北京天气？"}]}
    second = json.loads(str((chats[1].attributes or {})["gen_ai.input.messages"]))
    assert "12°C，多云" in json.dumps(second, ensure_ascii=False)  # the observation went back
    output = json.loads(str((chats[1].attributes or {})["gen_ai.output.messages"]))
    assert output[0]["parts"][0]["content"] == "Thought: key [REDACTED]\nFinal Answer: 12°C，多云"
    tool_attrs = by_name(spans, "execute_tool")[0].attributes or {}
    assert json.loads(str(tool_attrs["gen_ai.tool.call.arguments"])) == {"city": "北京"}
    assert json.loads(str(tool_attrs["gen_ai.tool.call.result"])) == "12°C，多云"
    assert key not in json.dumps([dict(s.attributes or {}) for s in spans])


def test_errors_set_error_type() -> None:
    call = 'Thought: try\nAction: broken\nAction Input: {"city": "x"}'
    model = ScriptedModel([call])  # then the script runs out: the model call fails
    tracer, exporter = memory_tracer(model, capture_content=False)
    result = Agent(model=model, tools=[broken]).run("q", on_event=tracer)
    assert result.status == "error"
    spans = exporter.get_finished_spans()
    tool_span, = by_name(spans, "execute_tool")
    assert (tool_span.attributes or {})["error.type"] == "tool_error"
    assert tool_span.status.status_code == StatusCode.ERROR
    failed = by_name(spans, "chat")[-1]
    assert (failed.attributes or {})["error.type"] == "ModelError"
    assert failed.status.status_code == StatusCode.ERROR
    agent, = by_name(spans, "invoke_agent")
    assert (agent.attributes or {})["error.type"] == "error"
    assert agent.status.status_code == StatusCode.ERROR
    assert len(spans) == 6  # every started span ended: agent, 2 steps, 2 chats, 1 tool


def test_guards_are_span_events() -> None:
    model = ScriptedModel(["Action Input: no format at all", "Final Answer: ok"])
    tracer, exporter = memory_tracer(model)
    Agent(model=model).run("q", on_event=tracer)
    step1, = [s for s in exporter.get_finished_spans() if s.name == "step 1"]
    assert [(e.name, (e.attributes or {})["miniagent.guard"]) for e in step1.events] == [
        ("miniagent.guard", "format_error")]


async def test_a_wait_for_a_slot_is_an_event_of_the_waiting_calls_span() -> None:
    import asyncio
    import uuid

    name = f"lookup_{uuid.uuid4().hex[:6]}"

    async def lookup(key: str) -> str:
        """Look a key up."""
        await asyncio.sleep(0.05)
        return key

    calls = {"content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": name, "arguments": json.dumps({"key": str(i)})}}
        for i in range(2)]}
    model = ScriptedModel([calls, {"content": "done"}], tool_mode="native")
    tracer, exporter = memory_tracer(model)
    await Agent(model=model,
                tools=[tool(name=name, max_concurrency=1)(lookup)]).arun("q", on_event=tracer)
    waited = [(s.attributes or {}).get("gen_ai.tool.call.id") for s in
              exporter.get_finished_spans() for e in s.events if e.name == "miniagent.slot_waiting"]
    assert waited == ["c1"]  # the second call waited for the first


def test_a_real_otlp_http_receiver_gets_the_spans() -> None:
    with otlp_receiver() as receiver:
        provider = otlp_provider(receiver.url)  # the base URL: /v1/traces is added
        model = ScriptedModel(SCRIPT)
        tracer = OtelTracer(model=describe_model(model), tracer_provider=provider,
                            agent_name="weather-bot")
        result = Agent(model=model, tools=[weather]).run("北京天气？", on_event=tracer)
        provider.shutdown()  # flushes the batch
    assert receiver.posts and all(p == "application/x-protobuf" for p in receiver.posts)
    names = sorted(s.name for s in receiver.spans)
    assert names == ["chat ScriptedModel", "chat ScriptedModel", "execute_tool weather",
                     "invoke_agent weather-bot", "step 1", "step 2"]
    agent, = receiver.named("invoke_agent")
    assert agent.resource["service.name"] == "miniagent"
    assert agent.attributes["gen_ai.agent.name"] == "weather-bot"
    assert agent.attributes["gen_ai.conversation.id"] == result.session_id
    tool_span, = receiver.named("execute_tool")
    assert tool_span.attributes["gen_ai.tool.call.id"] == result.steps[0].calls[0].call.id
    assert tool_span.kind == 1  # SPAN_KIND_INTERNAL
    step1, = receiver.named("step 1")
    assert tool_span.parent_id == step1.span_id and step1.parent_id == agent.span_id
    assert {s.trace_id for s in receiver.spans} == {agent.trace_id}
    assert agent.start_ns <= tool_span.start_ns <= tool_span.end_ns <= agent.end_ns


def test_otlp_url_must_be_http() -> None:
    with pytest.raises(ConfigError, match="http"):
        otlp_provider("localhost:4318")


def test_the_error_status_of_a_run_is_redacted() -> None:
    from miniagent.core.runtime import events as ev
    from miniagent.core.types import RunResult

    key = "sk-" + secrets.token_hex(20)
    tracer, exporter = memory_tracer(ScriptedModel([]), secrets=[key])
    tracer(ev.RunStarted(session_id="s", span_id="a", question="q"))
    tracer(ev.RunFinished(session_id="s", span_id="a", result=RunResult(
        status="error", reason=f"model call failed: 401 bad key {key}", session_id="s")))
    agent, = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert agent.status.status_code == StatusCode.ERROR
    assert agent.status.description == "model call failed: 401 bad key [REDACTED]"


HUGE = "Final Answer: 北京 " + "x" * 20_000_000
"""A 20 MB reply (20,000,017 characters)."""


def _no_length_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"):
        monkeypatch.delenv(name, raising=False)


def test_a_20_mb_reply_is_cut_marked_and_the_requests_stay_small(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_length_limits(monkeypatch)
    with otlp_receiver() as receiver:
        # a bound on shutdown that a loaded machine meets: what is asserted is the requests' size
        provider = otlp_provider(receiver.url, shutdown_timeout=60)
        model = ScriptedModel([HUGE])
        tracer = OtelTracer(model=describe_model(model), tracer_provider=provider,
                            capture_content=True)
        result = Agent(model=model).run("北京天气？", on_event=tracer)
        provider.shutdown()
    assert result.status == "completed" and len(result.final_answer or "") == 20_000_003
    assert receiver.sizes and max(receiver.sizes) <= MAX_REQUEST_BYTES
    assert sorted(s.name for s in receiver.spans) == [
        "chat ScriptedModel", "invoke_agent miniagent", "step 1"]
    chat, = receiver.named("chat")
    agent, = receiver.named("invoke_agent")
    for text in (chat.attributes["gen_ai.output.messages"],
                 agent.attributes["gen_ai.output.messages"]):
        assert len(text) <= ATTRIBUTE_LIMIT
        content = json.loads(text)[0]["parts"][0]["content"]  # still JSON: the text was cut
        assert content.startswith("北京 xxx") or content.startswith("Final Answer: 北京 xxx")
        assert re.search(r"xxx\.\.\. \[cut [\d,]+ of 20,000,0(03|17) chars\]$", content)


def test_the_otel_length_limit_is_honoured_and_a_refused_request_loses_only_its_spans(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_length_limits(monkeypatch)
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "300000")  # a span is then larger
    with otlp_receiver(max_body=200_000) as receiver:  # than what this collector accepts
        provider = otlp_provider(receiver.url, max_request_bytes=150_000)
        model = ScriptedModel([SCRIPT[0], HUGE])
        tracer = OtelTracer(model=describe_model(model), tracer_provider=provider,
                            capture_content=True)
        result = Agent(model=model, tools=[weather]).run("北京天气？", on_event=tracer)
        provider.shutdown()
    assert result.status == "completed"
    assert max(receiver.sizes) > 200_000  # some were refused (413) ...
    names = sorted(s.name for s in receiver.spans)  # ... but not the others sent with them
    assert names == ["chat ScriptedModel", "execute_tool weather", "step 1", "step 2"]
    chat, = receiver.named("chat")
    assert "查天气" in json.loads(chat.attributes["gen_ai.output.messages"])[0]["parts"][0][
        "content"]


def test_every_text_attribute_is_cut_to_the_span_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_length_limits(monkeypatch)
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5000")  # the span's limit wins
    from miniagent.core.runtime import events as ev
    from miniagent.core.types import RunResult

    tracer, exporter = memory_tracer(ScriptedModel([]), capture_content=True)
    tracer(ev.RunStarted(session_id="s", span_id="a", question="问" * 1000))
    tracer(ev.GuardIntervened(session_id="s", span_id="a", guard="g" * 500, detail="d" * 500))
    tracer(ev.RunFinished(session_id="s", span_id="a", result=RunResult(
        status="error", reason="r" * 10_000, session_id="s", final_answer="答" * 1000)))
    agent, = by_name(exporter.get_finished_spans(), "invoke_agent")
    attributes = dict(agent.attributes or {})
    assert all(len(v) <= 100 for v in attributes.values() if isinstance(v, str))
    assert attributes["gen_ai.input.messages"].endswith(" chars]")
    assert str(agent.status.description).endswith("... [cut 9,932 of 10,000 chars]")
    guard = str(dict(agent.events[0].attributes or {})["miniagent.guard"])
    assert guard.endswith("... [cut 426 of 500 chars]") and len(guard) == 100


def test_a_bad_length_limit_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = TracerProvider()  # built before: the SDK's own check would raise ValueError
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "lots")
    with pytest.raises(ConfigError, match=r"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT .* lots"):
        OtelTracer(model=describe_model(ScriptedModel([])), tracer_provider=provider)
    with pytest.raises(ConfigError, match=r"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT .* lots"):
        otlp_provider("http://127.0.0.1:4318")


def test_the_exporter_logs_of_someone_elses_exports_still_pass(
        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    provider = otlp_provider("http://127.0.0.1:9/v1/traces")  # installs our filter
    provider.shutdown()
    exporter_log = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    with caplog.at_level(logging.WARNING):
        exporter_log.warning("an application's own exporter failed")
    assert "an application's own exporter failed" in caplog.text


def test_a_fallback_models_span_names_the_model_that_answered() -> None:
    """The primary answers 503 (no retries); the backup answers: the chat span says the request
    went to the backup, and the server's own model name (the stub echoes the request's) stays
    the response's."""
    from miniagent import FallbackModel
    from miniagent.testing.stub_server import Fault

    with StubServer([Fault(status=503)]).run_in_thread() as main, \
            StubServer(["Final Answer: fine"]).run_in_thread() as backup:
        model = FallbackModel({
            "main": OpenAICompatibleModel(base_url=main.base_url, model="q", max_retries=0,
                                          tool_mode="react"),
            "backup": OpenAICompatibleModel(base_url=backup.base_url, model="qwen-7b",
                                            tool_mode="react")})
        tracer, exporter = memory_tracer(model)
        result = Agent(model=model).run("how are you?", on_event=tracer)
    assert result.status == "completed"
    chat, = by_name(exporter.get_finished_spans(), "chat")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.request.model"] == "backup"
    assert chat.attributes["gen_ai.response.model"] == "qwen-7b"
