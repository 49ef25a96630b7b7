"""What a real OTLP/HTTP receiver gets as span kinds, and the step count of a run whose model
could not be reached."""

from __future__ import annotations

import socket
from typing import Any

from otlp_receiver import Receiver, otlp_receiver
from test_otel import SCRIPT, weather

from miniagent import Agent, ScriptedModel
from miniagent.core.models.base import Model
from miniagent.core.models.describe import describe_model
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.types import RunResult
from miniagent.observe.otel import OtelTracer, otlp_provider

INTERNAL, CLIENT = 1, 3  # SPAN_KIND_* as OTLP sends them


def traced_run(receiver: Receiver, model: Model, **agent: Any) -> RunResult:
    provider = otlp_provider(receiver.url)
    tracer = OtelTracer(model=describe_model(model), tracer_provider=provider)
    try:
        return Agent(model=model, **agent).run("北京天气？", on_event=tracer)
    finally:
        provider.shutdown()  # flushes the batch


def kinds(receiver: Receiver) -> dict[str, tuple[int, str]]:
    """Each span's OpenTelemetry kind and OpenInference kind, by name."""
    return {s.name: (s.kind, s.attributes["openinference.span.kind"]) for s in receiver.spans}


def test_span_kinds_follow_the_genai_conventions_and_phoenix_sees_each() -> None:
    with otlp_receiver() as receiver:
        result = traced_run(receiver, ScriptedModel(SCRIPT), tools=[weather])
    assert result.status == "completed"
    assert kinds(receiver) == {
        "invoke_agent miniagent": (INTERNAL, "AGENT"),  # an agent in this process
        "step 1": (INTERNAL, "CHAIN"), "step 2": (INTERNAL, "CHAIN"),  # no GenAI operation
        "chat ScriptedModel": (CLIENT, "LLM"),  # a model call
        "execute_tool weather": (INTERNAL, "TOOL"),
    }


def test_a_model_never_reached_counts_the_step_it_failed_in() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAICompatibleModel(base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                  max_retries=0)
    with otlp_receiver() as receiver:
        result = traced_run(receiver, model)
    assert result.status == "error" and "refused" in result.reason
    assert sorted(s.name for s in receiver.spans) == ["chat m", "invoke_agent miniagent",
                                                      "step 1"]
    agent, = receiver.named("invoke_agent")
    assert agent.attributes["miniagent.steps"] == len(receiver.named("step ")) == 1
    chat, = receiver.named("chat")
    assert (chat.kind, chat.attributes["error.type"]) == (CLIENT, "ModelConnectionError")
